//! The Redis type `MBbloom--`: RedisBloom's own type name and encoding, holding an imported
//! RedisBloom chain (`chain.rs`). Registering RedisBloom's name is what lets a server that
//! swapped RedisBloom for lcbloom load RedisBloom's RDB files and `RESTORE` its `DUMP`
//! payloads, and what lets RedisBloom load lcbloom's saves of these values again.
//!
//! The callbacks are `value.rs`'s, shared by every type; this file says what is particular to
//! imported filters.
//!
//! * RDB: RedisBloom's field sequence (`rdb.rs`), read at encoding versions 0–4 (every version
//!   RedisBloom ever wrote) and written at 4, which RedisBloom 2.8 reads. Every field is
//!   validated; a refused value stops an RDB load (Redis's own rule) after the warning
//!   `value.rs` logs, and makes `RESTORE` answer "Bad data format". `max-memory-per-key`
//!   bounds `RESTORE` (checked before each bit array is copied), not the server's own files.
//! * AOF rewrite: exactly what RedisBloom writes, `BF.LOADCHUNK key 1 <header>` then one
//!   `BF.LOADCHUNK key <iterator> <chunk>` per `BF.SCANDUMP` chunk (`scandump.rs`), so the file
//!   loads into lcbloom and into RedisBloom alike.
//! * Digest: the same header and chunks, equal iff the values are.
//! * `COPY` makes a deep copy (RedisBloom refuses it); `MEMORY USAGE` reports real bytes;
//!   `free_effort` lets Redis free large filters on its lazy-free thread. Imported filters
//!   count in `INFO lcbloom`'s `bf_*` fields and again in `bf_redisbloom_*`.
//!
//! No command creates a value of this type from nothing: `BF.*` on a missing key makes
//! lcbloom's own filter. Values arrive by RDB, `RESTORE` or a `BF.LOADCHUNK` of RedisBloom's
//! header (`bloom/commands.rs`).

use super::chain::RedisBloomChain;
use super::dump::TYPE_NAME;
use super::rdb::{self, FieldReader, FieldWriter};
use super::scandump;
use super::{DecodeError, OUT_OF_MEMORY, TOO_LARGE};
use crate::bloom::stats;
use crate::core::defrag::Defrag;
use crate::server::stats::Tally;
use crate::server::value::{methods, StoredValue};
use redis_module::{native_types::RedisType, raw};
use std::ffi::CStr;
use std::os::raw::c_int;

pub static RB_TYPE: RedisType = RedisType::new(
    TYPE_NAME,
    rdb::ENCVER as c_int,
    methods::<RedisBloomChain>(),
);

const SHORT_READ: DecodeError = DecodeError("short read");

/// RedisBloom's fields through Redis's `Load*`/`Save*` calls.
struct Io(*mut raw::RedisModuleIO);

impl FieldReader for Io {
    fn unsigned(&mut self) -> Result<u64, DecodeError> {
        raw::load_unsigned(self.0).map_err(|_| SHORT_READ)
    }

    fn double(&mut self) -> Result<f64, DecodeError> {
        raw::load_double(self.0).map_err(|_| SHORT_READ)
    }

    fn buffer(&mut self, max: u64) -> Result<Vec<u8>, DecodeError> {
        // Redis has read the string into its own buffer already (for RESTORE, out of the
        // payload the client sent); the key's own copy is made only within the budget.
        let buffer = raw::load_string_buffer(self.0).map_err(|_| SHORT_READ)?;
        let bytes = buffer.as_ref();
        if bytes.len() as u64 > max {
            return Err(TOO_LARGE);
        }
        let mut out = Vec::new();
        out.try_reserve_exact(bytes.len())
            .map_err(|_| OUT_OF_MEMORY)?;
        out.extend_from_slice(bytes);
        Ok(out)
    }
}

impl FieldWriter for Io {
    fn unsigned(&mut self, value: u64) {
        raw::save_unsigned(self.0, value);
    }

    fn double(&mut self, value: f64) {
        raw::save_double(self.0, value);
    }

    fn buffer(&mut self, bytes: &[u8]) {
        raw::save_slice(self.0, bytes);
    }
}

/// Calls `emit` with the header (iterator 1), then with each data chunk and the iterator
/// `BF.SCANDUMP` returns with it.
fn for_each_part(chain: &RedisBloomChain, mut emit: impl FnMut(u64, &[u8])) {
    emit(1, &scandump::encode_header(chain));
    let mut iterator = 1;
    while let Some((next, chunk)) = scandump::chunk(chain, iterator) {
        emit(next, chunk);
        iterator = next;
    }
}

impl StoredValue for RedisBloomChain {
    const NAME: &'static str = "RedisBloom filter";
    const ENCVER: c_int = rdb::ENCVER as c_int;
    const OLDEST_ENCVER: c_int = 0;
    const AOF_COMMAND: &'static CStr = c"BF.LOADCHUNK";
    const TYPE: &'static RedisType = &RB_TYPE;
    const TALLY: &'static Tally = &stats::FILTERS;

    fn sub_tally(&self) -> Option<&'static Tally> {
        Some(&stats::REDISBLOOM)
    }

    fn memory_bytes(&self) -> u64 {
        RedisBloomChain::memory_bytes(self)
    }

    fn try_copy(&self) -> Result<Self, String> {
        self.try_clone().map_err(|e| e.to_string())
    }

    fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int, limit: u64) -> Result<Self, String> {
        let encver = u32::try_from(encver).map_err(|_| "bad encoding version")?;
        rdb::decode(&mut Io(rdb), encver, limit).map_err(|e| e.to_string())
    }

    fn rdb_save(&self, rdb: *mut raw::RedisModuleIO) {
        rdb::encode(self, &mut Io(rdb));
    }

    fn aof_parts(&self, mut emit: impl FnMut(Option<u64>, &[u8])) {
        for_each_part(self, |iterator, bytes| emit(Some(iterator), bytes));
    }

    fn digest_parts(&self, mut add: impl FnMut(&[u8])) {
        for_each_part(self, |_, bytes| add(bytes));
    }

    fn defrag(&mut self, d: &mut Defrag) {
        RedisBloomChain::defrag(self, d)
    }
}
