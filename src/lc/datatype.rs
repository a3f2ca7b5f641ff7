//! The Redis type `lcbloomLC` holding a counter (a `StoredCounter`: stored.rs), and its
//! callbacks.
//!
//! RDB: encoding version 1 of the type is one string buffer holding `codec::encode` (itself
//! versioned, see `codec.rs`: version 2 written, 1 and 2 read, so the type's `encver` stays 1). `DEBUG DIGEST-VALUE` digests the same bytes, so two counters have
//! equal digests exactly when they are equal. AOF rewrite emits `LC.LOADCHUNK key <encoding>`, or
//! for an encoding over `codec::CHUNK_BYTES` the shell and the bitmap in pieces (codec.rs,
//! "Chunked form"), so no argument nears `proto-max-bulk-len`. `free_effort` lets Redis free
//! large counters on its lazy-free thread; values created and freed here are counted in
//! `INFO lcbloom` (`stats.rs`).
//! The callbacks are `value.rs`'s, shared by every type; this file says what is particular to
//! counters.

use super::codec;
use super::stats;
use super::stored::StoredCounter;
use crate::core::defrag::Defrag;
use crate::server::stats::Tally;
use crate::server::value::{methods, Held, StoredValue};
use redis_module::{native_types::RedisType, raw};
use std::ffi::CStr;
use std::os::raw::c_int;

pub static LC_TYPE: RedisType = RedisType::new(
    "lcbloomLC",
    StoredCounter::ENCVER,
    methods::<StoredCounter>(),
);

impl StoredValue for StoredCounter {
    const NAME: &'static str = "linear counter";
    const ENCVER: c_int = 1;
    const AOF_COMMAND: &'static CStr = c"LC.LOADCHUNK";
    const HELD: Held = Held::Word;
    const TYPE: &'static RedisType = &LC_TYPE;
    const TALLY: &'static Tally = &stats::COUNTERS;

    fn memory_bytes(&self) -> u64 {
        StoredCounter::memory_bytes(self)
    }

    fn shared_bytes(&self) -> u64 {
        StoredCounter::shared_bytes(self)
    }

    fn try_copy(&self) -> Result<Self, String> {
        let copy = self.view().try_clone().map_err(|e| e.to_string())?;
        Ok(StoredCounter::new(copy))
    }

    fn rdb_load(
        rdb: *mut raw::RedisModuleIO,
        _encver: c_int,
        limit: u64,
    ) -> Result<StoredCounter, String> {
        let buffer = raw::load_string_buffer(rdb).map_err(|_| "short read")?;
        let counter = codec::decode(buffer.as_ref(), limit).map_err(|e| e.to_string())?;
        Ok(StoredCounter::new(counter))
    }

    fn rdb_save(&self, rdb: *mut raw::RedisModuleIO) {
        raw::save_slice(rdb, &codec::encode(&self.view()));
    }

    fn aof_parts(&self, emit: impl FnMut(Option<u64>, &[u8])) {
        codec::aof_parts(&self.view(), codec::CHUNK_BYTES, emit);
    }

    fn digest_parts(&self, mut add: impl FnMut(&[u8])) {
        add(&codec::encode(&self.view()));
    }

    fn defrag(&mut self, d: &mut Defrag) {
        StoredCounter::defrag(self, d)
    }
}
