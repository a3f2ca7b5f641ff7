//! The Redis type `lcbloomBF`: a Bloom filter chain (`chain.rs`) stored under a key.
//!
//! The callbacks are `value.rs`'s, shared by every type; this file says what is particular to
//! filters.
//!
//! * RDB (encoding version 1): the codec's header as one string (sparse sub-filters included,
//!   `codec.rs`), then the bit arrays' data as strings of at most `codec::CHUNK_BYTES` each, but
//!   for arrays over 16 MiB, which save each of their allocations (a head of up to the whole array,
//!   then 16 MiB segments, `words.rs`) as one string (`codec::saved_chunk`). Loads take strings of
//!   any length within the data, however the saving array was cut. Neither save nor load needs a
//!   second copy of a large filter. Loading validates the header before allocating, then requires
//!   the strings to fill the data exactly; any error (or an I/O error, see `HANDLE_IO_ERRORS` in
//!   lib.rs) returns null and Redis reports "Bad data format". `max-memory-per-key` applies to
//!   `RESTORE` only, not while the server loads its own files or a replica syncs
//!   (`limits::memory_limit`): a value saved under a higher limit still loads, with a warning.
//! * AOF rewrite (used when `aof-use-rdb-preamble no`): `BF.LOADCHUNK key 1 <header>` then one
//!   `BF.LOADCHUNK key <iterator> <chunk>` per data chunk, exactly what `BF.SCANDUMP` returns.
//! * Digest: the encoding itself, so `DEBUG DIGEST-VALUE` is equal iff the values are identical.
//! * `COPY` makes a deep copy (RedisBloom refuses it); `MEMORY USAGE` reports real bytes.
//! * `free_effort` lets Redis free large filters on its lazy-free thread; values created and
//!   freed here are counted in `INFO lcbloom` (`stats.rs`), blocked filters apart as well.

use super::chain::Chain;
use super::codec;
use super::filter::Layout;
use super::stats;
use crate::core::chunks;
use crate::core::defrag::Defrag;
use crate::server::stats::Tally;
use crate::server::value::{methods, StoredValue};
use redis_module::{native_types::RedisType, raw, RedisBuffer};
use std::borrow::Cow;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr::NonNull;

pub static BLOOM_TYPE: RedisType = RedisType::new("lcbloomBF", Chain::ENCVER, methods::<Chain>());

/// Calls `emit` with the header, then with each data chunk (from `chunk`: `codec::data_chunk`
/// or `codec::saved_chunk`) and its `BF.SCANDUMP` iterator.
fn for_each_part<'a>(
    chain: &'a Chain,
    chunk: fn(&'a Chain, u64) -> Option<Cow<'a, [u8]>>,
    mut emit: impl FnMut(u64, &[u8]),
) {
    emit(1, &codec::encode_header(chain));
    let mut offset = 0u64;
    while let Some(chunk) = chunk(chain, offset) {
        offset += chunk.len() as u64;
        emit(chunks::iterator_after(offset), &chunk);
    }
}

impl StoredValue for Chain {
    const NAME: &'static str = "Bloom filter";
    /// RDB encoding version of the type (the codec carries its own version too).
    const ENCVER: c_int = 1;
    const AOF_COMMAND: &'static CStr = c"BF.LOADCHUNK";
    const TYPE: &'static RedisType = &BLOOM_TYPE;
    const TALLY: &'static Tally = &stats::FILTERS;

    fn sub_tally(&self) -> Option<&'static Tally> {
        (self.layout() == Layout::Blocked).then_some(&stats::BLOCKED)
    }

    fn memory_bytes(&self) -> u64 {
        Chain::memory_bytes(self)
    }

    fn shared_bytes(&self) -> u64 {
        Chain::shared_bytes(self)
    }

    fn try_copy(&self) -> Result<Self, String> {
        self.try_clone().map_err(|e| e.to_string())
    }

    fn rdb_load(rdb: *mut raw::RedisModuleIO, _encver: c_int, limit: u64) -> Result<Chain, String> {
        let header = raw::load_string_buffer(rdb).map_err(|_| "short read")?;
        let header = codec::decode_header(header.as_ref(), limit).map_err(|e| e.to_string())?;
        let total = header.data_bytes();
        let mut chain = header.into_chain().map_err(|e| e.to_string())?;
        let mut offset = 0u64;
        while offset < total {
            let chunk = raw::load_string_buffer(rdb).map_err(|_| "short read")?;
            let len = chunk.as_ref().len();
            if len == 0 || len as u64 > total - offset {
                return Err("bad data chunk".into());
            }
            // A chunk that is one whole allocation of a bit array becomes it: Redis read it
            // into a block of its allocator, so the array keeps that block instead of a copy.
            let block = NonNull::from(chunk.as_ref()).cast::<u8>();
            std::mem::forget(chunk);
            // SAFETY: RedisModule_LoadStringBuffer's buffer: `len` bytes from Redis's
            // allocator (RedisModule_Alloc's, which serves the module's u64-aligned layouts),
            // now owned here.
            if let Err(block) = unsafe { codec::adopt_data(&mut chain, offset, block, len) } {
                let chunk = RedisBuffer::new(block.as_ptr().cast(), len);
                codec::write_data(&mut chain, offset, chunk.as_ref()).map_err(|e| e.to_string())?;
            }
            offset += len as u64;
        }
        Ok(chain)
    }

    fn rdb_save(&self, rdb: *mut raw::RedisModuleIO) {
        for_each_part(self, codec::saved_chunk, |_, bytes| {
            raw::save_slice(rdb, bytes)
        });
    }

    fn aof_parts(&self, mut emit: impl FnMut(Option<u64>, &[u8])) {
        for_each_part(self, codec::data_chunk, |iterator, bytes| {
            emit(Some(iterator), bytes)
        });
    }

    fn digest_parts(&self, mut add: impl FnMut(&[u8])) {
        for_each_part(self, codec::data_chunk, |_, bytes| add(bytes));
    }

    fn defrag(&mut self, d: &mut Defrag) {
        Chain::defrag(self, d)
    }
}
