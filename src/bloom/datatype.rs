//! Placeholder type, replaced by the wing's implementation.
use redis_module::{native_types::RedisType, raw};
use std::os::raw::{c_int, c_void};

pub static BLOOM_TYPE: RedisType = RedisType::new(
    "lcbloomBF",
    1,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: None,
        free: None,
        mem_usage: None,
        digest: None,
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
    },
);

unsafe extern "C" fn rdb_load(_rdb: *mut raw::RedisModuleIO, _encver: c_int) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn rdb_save(_rdb: *mut raw::RedisModuleIO, _value: *mut c_void) {}
