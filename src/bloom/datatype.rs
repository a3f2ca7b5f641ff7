//! The Redis type `lcbloomBF`: a Bloom filter chain (`chain.rs`) stored under a key.
//!
//! Every callback runs inside `ffi::guard_callback`, so a bug is logged, never an abort.
//!
//! * RDB (encoding version 1): the codec's header as one string, then the data as strings of at
//!   most `codec::CHUNK_BYTES` each (so neither save nor load needs a second copy of a large
//!   filter). Loading validates the header before allocating, then requires the strings to
//!   fill the data exactly; any error (or an I/O error, see `HANDLE_IO_ERRORS` in lib.rs)
//!   returns null and Redis reports "Bad data format". `max-memory-per-key` applies to
//!   `RESTORE` only, not while the server loads its own files or a replica syncs
//!   (`config::memory_limit`): a value saved under a higher limit still loads, with a warning.
//! * AOF rewrite (used when `aof-use-rdb-preamble no`): `BF.LOADCHUNK key 1 <header>` then one
//!   `BF.LOADCHUNK key <iterator> <chunk>` per data chunk, exactly what `BF.SCANDUMP` returns.
//! * Digest: the encoding itself, so `DEBUG DIGEST-VALUE` is equal iff the values are identical.
//! * `COPY` makes a deep copy (RedisBloom refuses it); `MEMORY USAGE` reports real bytes.
//! * `free_effort` lets Redis free large filters on its lazy-free thread; values created and
//!   freed here are counted in `INFO lcbloom` (`stats.rs`).

use super::chain::Chain;
use super::codec;
use crate::config::{load_memory_limit, note_loaded_size};
use crate::ffi::{free_effort, guard_callback, log_warning, TypeCallbacks};
use crate::stats;
use redis_module::{native_types::RedisType, raw};
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::null_mut;

/// RDB encoding version of the type (the codec carries its own version too).
pub const ENCODING_VERSION: c_int = 1;

pub static BLOOM_TYPE: RedisType = RedisType::new(
    "lcbloomBF",
    ENCODING_VERSION,
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

/// Calls `emit` with the header, then with each data chunk and its `BF.SCANDUMP` iterator.
fn for_each_part(chain: &Chain, mut emit: impl FnMut(i64, &[u8])) {
    emit(1, &codec::encode_header(chain));
    let mut offset = 0u64;
    while let Some(chunk) = codec::data_chunk(chain, offset) {
        offset += chunk.len() as u64;
        emit(offset as i64 + 1, &chunk);
    }
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard_callback("rdb_load", null_mut(), || {
        if encver != ENCODING_VERSION {
            log_warning(&format!(
                "lcbloom: unknown Bloom filter encoding version {encver}"
            ));
            return null_mut();
        }
        match load(rdb, load_memory_limit(rdb)) {
            Ok(chain) => {
                note_loaded_size("Bloom filter", chain.memory_bytes());
                stats::BLOOM.created(chain.memory_bytes());
                Box::into_raw(Box::new(chain)).cast()
            }
            Err(why) => {
                log_warning(&format!("lcbloom: refusing a Bloom filter from RDB: {why}"));
                null_mut()
            }
        }
    })
}

fn load(rdb: *mut raw::RedisModuleIO, limit: u64) -> Result<Chain, &'static str> {
    let header = raw::load_string_buffer(rdb).map_err(|_| "short read")?;
    let header = codec::decode_header(header.as_ref(), limit).map_err(|e| e.0)?;
    let total = header.data_bytes();
    let mut chain = header.into_chain().map_err(|e| e.0)?;
    let mut offset = 0u64;
    while offset < total {
        let chunk = raw::load_string_buffer(rdb).map_err(|_| "short read")?;
        let chunk = chunk.as_ref();
        if chunk.is_empty() || chunk.len() as u64 > codec::CHUNK_BYTES {
            return Err("bad data chunk");
        }
        codec::write_data(&mut chain, offset, chunk).map_err(|e| e.0)?;
        offset += chunk.len() as u64;
    }
    Ok(chain)
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard_callback("rdb_save", (), || {
        let chain = &*value.cast::<Chain>();
        for_each_part(chain, |_, bytes| raw::save_slice(rdb, bytes));
    })
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard_callback("aof_rewrite", (), || {
        let chain = &*value.cast::<Chain>();
        let Some(emit_aof) = raw::RedisModule_EmitAOF else {
            return;
        };
        for_each_part(chain, |iterator, bytes| {
            emit_aof(
                aof,
                c"BF.LOADCHUNK".as_ptr(),
                c"slb".as_ptr(),
                key,
                iterator as std::os::raw::c_longlong,
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            );
        });
    })
}

unsafe extern "C" fn free(value: *mut c_void) {
    guard_callback("free", (), || {
        let chain = Box::from_raw(value.cast::<Chain>());
        stats::BLOOM.freed(chain.memory_bytes());
    })
}

unsafe extern "C" fn effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guard_callback("free_effort", 0, || {
        free_effort((*value.cast::<Chain>()).memory_bytes())
    })
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard_callback("mem_usage", 0, || {
        (*value.cast::<Chain>()).memory_bytes() as usize
    })
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard_callback("digest", (), || {
        let chain = &*value.cast::<Chain>();
        let (Some(add), Some(end)) = (
            raw::RedisModule_DigestAddStringBuffer,
            raw::RedisModule_DigestEndSequence,
        ) else {
            return;
        };
        for_each_part(chain, |_, bytes| {
            add(md, bytes.as_ptr().cast::<c_char>().cast_mut(), bytes.len())
        });
        end(md);
    })
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard_callback("copy", null_mut(), || {
        match (*value.cast::<Chain>()).try_clone() {
            Ok(chain) => {
                stats::BLOOM.created(chain.memory_bytes());
                Box::into_raw(Box::new(chain)).cast()
            }
            Err(e) => {
                log_warning(&format!(
                    "lcbloom: COPY of a Bloom filter failed: {}",
                    e.message()
                ));
                null_mut()
            }
        }
    })
}
