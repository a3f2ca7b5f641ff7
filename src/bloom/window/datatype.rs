//! The Redis type `lcbloomBW`: a windowed Bloom filter (`value.rs`) stored under a key.
//!
//! The callbacks are `value.rs`'s of the server layer, shared by every type; this file says
//! what is particular to windowed filters.
//!
//! * RDB (encoding version 1): the header (`codec.rs`) as one string, then the data chunks as
//!   strings of at most `CHUNK_BYTES`, each applied as it is read (no second copy of a large
//!   filter). A value saved in the middle of a `BF.LOADCHUNK` load is its header, the data
//!   received and an empty string; it loads still waiting for the rest. Any error returns
//!   null and Redis reports "Bad data format". The filter's time
//!   travels in the header, so a value loaded after downtime forgets, at the first command,
//!   what slid out of its window meanwhile.
//! * AOF rewrite (used when `aof-use-rdb-preamble no`): `BF.LOADCHUNK key 1 <header>` then one
//!   `BF.LOADCHUNK key <iterator> <chunk>` per data chunk, exactly what `BF.SCANDUMP` returns.
//! * Digest: the encoding itself, equal iff the values answer alike (it is canonical).
//! * Defrag: every block the value owns, in a fixed order (`Windowed::defrag`).
//! * `COPY` makes a deep copy; `MEMORY USAGE` reports real bytes; windowed filters count in
//!   `INFO lcbloom`'s `bf_*` fields and again in `bf_window_*`.

use super::value::Windowed;
use crate::bloom::stats::FILTERS;
use crate::core::defrag::Defrag;
use crate::server::stats::Tally;
use crate::server::value::{methods, StoredValue};
use redis_module::{native_types::RedisType, raw};
use std::ffi::CStr;
use std::os::raw::c_int;

pub static WINDOW_TYPE: RedisType =
    RedisType::new("lcbloomBW", Windowed::ENCVER, methods::<Windowed>());

/// Windowed filters (also counted in `bloom::stats::FILTERS`).
pub static WINDOWED: Tally = Tally::new();

impl StoredValue for Windowed {
    const NAME: &'static str = "windowed Bloom filter";
    const ENCVER: c_int = 1;
    const AOF_COMMAND: &'static CStr = c"BF.LOADCHUNK";

    const TYPE: &'static RedisType = &WINDOW_TYPE;
    const TALLY: &'static Tally = &FILTERS;

    fn sub_tally(&self) -> Option<&'static Tally> {
        Some(&WINDOWED)
    }

    fn memory_bytes(&self) -> u64 {
        Windowed::memory_bytes(self)
    }

    fn try_copy(&self) -> Result<Self, String> {
        Windowed::try_copy(self).map_err(|e| e.to_string())
    }

    fn rdb_load(rdb: *mut raw::RedisModuleIO, _encver: c_int, limit: u64) -> Result<Self, String> {
        let header = raw::load_string_buffer(rdb).map_err(|_| "short read")?;
        let mut value = Windowed::from_header(header.as_ref(), limit).map_err(|e| e.to_string())?;
        let mut start = 0u64;
        while !value.is_complete() {
            let chunk = raw::load_string_buffer(rdb).map_err(|_| "short read")?;
            let chunk = chunk.as_ref();
            if chunk.is_empty() {
                break; // a value saved in the middle of its load
            }
            value.load_chunk(start, chunk).map_err(|e| e.to_string())?;
            start += chunk.len() as u64;
        }
        Ok(value)
    }

    fn rdb_save(&self, rdb: *mut raw::RedisModuleIO) {
        self.for_each_part(|_, bytes| raw::save_slice(rdb, bytes));
        if !self.is_complete() {
            raw::save_slice(rdb, &[]);
        }
    }

    fn aof_parts(&self, mut emit: impl FnMut(Option<u64>, &[u8])) {
        self.for_each_part(|iterator, bytes| emit(Some(iterator), bytes));
    }

    fn digest_parts(&self, mut add: impl FnMut(&[u8])) {
        self.for_each_part(|_, bytes| add(bytes));
    }

    fn defrag(&mut self, d: &mut Defrag) {
        Windowed::defrag(self, d)
    }
}
