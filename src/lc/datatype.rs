//! The Redis type `lcbloomLC` holding a `Counter`, and its callbacks.
//!
//! RDB: encoding version 1 of the type is one string buffer holding `codec::encode` (itself
//! versioned, see `codec.rs`). `DEBUG DIGEST-VALUE` digests the same bytes, so two counters have
//! equal digests exactly when they are equal. AOF rewrite emits `LC.LOADCHUNK key <encoding>`, or
//! for an encoding over `codec::CHUNK_BYTES` the shell and the bitmap in pieces (codec.rs,
//! "Chunked form"), so no argument nears `proto-max-bulk-len`. `free_effort` lets Redis free
//! large counters on its lazy-free thread; values created and freed here are counted in
//! `INFO lcbloom` (`stats.rs`).
//! Every callback body runs inside `ffi::guard_callback`: a bug rejects the value (or skips the
//! work) and logs, instead of aborting the server.

use super::codec;
use super::counter::Counter;
use crate::config::{load_memory_limit, note_loaded_size};
use crate::ffi::{free_effort, guard_callback, log_warning, TypeCallbacks};
use crate::stats;
use redis_module::{native_types::RedisType, raw};
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::null_mut;

/// The type's RDB encoding version (`encver`).
const RDB_ENCVER: c_int = 1;

pub static LC_TYPE: RedisType = RedisType::new(
    "lcbloomLC",
    RDB_ENCVER,
    TypeCallbacks {
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        free: Some(free),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free_effort: Some(effort),
        copy: Some(copy),
    }
    .methods(),
);

/// # Safety
/// `value` must be a pointer this type handed to Redis (a boxed `Counter`).
unsafe fn counter<'a>(value: *const c_void) -> &'a Counter {
    &*value.cast::<Counter>()
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard_callback("LC rdb_load", null_mut(), || {
        if encver != RDB_ENCVER {
            log_warning(&format!(
                "lcbloom: cannot load a linear counter of encoding version {encver}"
            ));
            return null_mut();
        }
        let Ok(buffer) = raw::load_string_buffer(rdb) else {
            return null_mut();
        };
        if raw::is_io_error(rdb) {
            return null_mut();
        }
        // `max-memory-per-key` binds RESTORE, not the server's own files (config::memory_limit).
        match codec::decode(buffer.as_ref(), load_memory_limit(rdb)) {
            Ok(counter) => {
                note_loaded_size("linear counter", counter.memory_usage() as u64);
                stats::LC.created(counter.memory_usage() as u64);
                Box::into_raw(Box::new(counter)).cast()
            }
            Err(e) => {
                log_warning(&format!("lcbloom: rejected a linear counter: {e}"));
                null_mut()
            }
        }
    })
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard_callback("LC rdb_save", (), || {
        raw::save_slice(rdb, &codec::encode(counter(value)));
    })
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard_callback("LC aof_rewrite", (), || {
        let Some(emit) = raw::RedisModule_EmitAOF else {
            return;
        };
        codec::aof_parts(counter(value), codec::CHUNK_BYTES, |iterator, bytes| {
            let (data, len) = (bytes.as_ptr().cast::<c_char>(), bytes.len());
            match iterator {
                None => emit(
                    aof,
                    c"LC.LOADCHUNK".as_ptr(),
                    c"sb".as_ptr(),
                    key,
                    data,
                    len,
                ),
                Some(it) => emit(
                    aof,
                    c"LC.LOADCHUNK".as_ptr(),
                    c"slb".as_ptr(),
                    key,
                    it as std::os::raw::c_longlong,
                    data,
                    len,
                ),
            }
        });
    })
}

unsafe extern "C" fn free(value: *mut c_void) {
    guard_callback("LC free", (), || {
        let counter = Box::from_raw(value.cast::<Counter>());
        stats::LC.freed(counter.memory_usage() as u64);
    })
}

unsafe extern "C" fn effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guard_callback("LC free_effort", 0, || {
        free_effort(counter(value).memory_usage() as u64)
    })
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard_callback("LC mem_usage", 0, || counter(value).memory_usage())
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard_callback("LC digest", (), || {
        let bytes = codec::encode(counter(value));
        if let (Some(add), Some(end)) = (
            raw::RedisModule_DigestAddStringBuffer,
            raw::RedisModule_DigestEndSequence,
        ) {
            add(md, bytes.as_ptr().cast::<c_char>(), bytes.len());
            end(md);
        }
    })
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard_callback("LC copy", null_mut(), || {
        let copy = counter(value).clone();
        stats::LC.created(copy.memory_usage() as u64);
        Box::into_raw(Box::new(copy)).cast()
    })
}
