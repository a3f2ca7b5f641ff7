//! The `INFO lcbloom` section: how many Bloom filters and linear counters the server holds and
//! the bytes they take (the sum of what `MEMORY USAGE` reports for their values).
//!
//! Counting keys would mean a scan, so the numbers are kept up to date as values come and go:
//! the type callbacks count values created by RDB load, `RESTORE` and `COPY` and uncount every
//! freed value (`DEL`, `FLUSHALL`, expiry, `RESTORE REPLACE`, a reload), and the commands count
//! the values they create and the bytes their writes add (a filter scaling out, a counter's
//! exact set growing or switching to its bitmap). Every change of a value's size is counted
//! where it happens, so what `free` subtracts (the value's size then) is exactly what was
//! added for it. Atomics, because `free` runs on the lazy-free thread for large values (see
//! `free_effort` in the datatypes).
//!
//! Fields (Redis prefixes each with the module name): `lcbloom_bf_keys`, `lcbloom_bf_bytes`,
//! `lcbloom_lc_keys`, `lcbloom_lc_bytes`, then `lcbloom_bf_blocked_keys` and
//! `lcbloom_bf_blocked_bytes` (the filters in the blocked layout, counted in `bf_*` as well) and
//! `lcbloom_bf_layout` (the layout new filters get without `LAYOUT`: the `bf-layout` config),
//! `lcbloom_bf_redisbloom_keys` and `lcbloom_bf_redisbloom_bytes` (filters imported from
//! RedisBloom, counted in `bf_*` as well), and `lcbloom_aof_lost_keys` (see [`note_refused_write`]).
//!
//! Lost keys. Redis carries on after an AOF command that fails while it loads the file, and no
//! module API can stop that load (checked on Redis 7.0.15 and Valkey 9.1: the reply is dropped).
//! A `BF.RESERVE`, `BF.INSERT` or `BF.LOADCHUNK` refused then (a foreign or corrupt line) means
//! a key missing or incomplete after the start, so each is logged at warning level with its key
//! and the reason, and each such key is counted once in `aof_lost_keys`.

use crate::server::ffi::{guard_callback, log_warning};
use redis_module::{raw, Context, ContextFlags, InfoContext, RedisError, RedisString};
use std::collections::BTreeSet;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;

/// Values of one type and their bytes.
pub struct Tally {
    keys: AtomicI64,
    bytes: AtomicI64,
}

pub static BLOOM: Tally = Tally::new();
/// Bloom filters in the blocked layout (also counted in `BLOOM`).
pub static BLOOM_BLOCKED: Tally = Tally::new();
pub static LC: Tally = Tally::new();
/// Filters imported from RedisBloom (also counted in `BLOOM`).
pub static BLOOM_REDISBLOOM: Tally = Tally::new();

/// The names of the keys an AOF load lost, each counted once.
static LOST_KEYS: Mutex<BTreeSet<Vec<u8>>> = Mutex::new(BTreeSet::new());

/// A write `command` on `key` was refused with `why`: while the server loads its AOF, that is
/// data lost (see "Lost keys" above), so it is logged and the key counted. Nothing otherwise.
pub fn note_refused_write(ctx: &Context, command: &str, key: &RedisString, why: &RedisError) {
    if !ctx.get_flags().contains(ContextFlags::LOADING) {
        return;
    }
    let name: String = key
        .as_slice()
        .iter()
        .take(200)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect();
    log_warning(&format!(
        "lcbloom: LOST KEY while loading the AOF: {command} of key '{name}' was refused ({why}); \
         the key is missing or incomplete (counted in INFO lcbloom, aof_lost_keys)"
    ));
    if let Ok(mut lost) = LOST_KEYS.lock() {
        lost.insert(key.as_slice().to_vec());
    }
}

fn lost_keys() -> i64 {
    LOST_KEYS.lock().map_or(-1, |lost| lost.len() as i64)
}

impl Tally {
    const fn new() -> Self {
        Self {
            keys: AtomicI64::new(0),
            bytes: AtomicI64::new(0),
        }
    }

    /// A value of `bytes` now belongs to the keyspace.
    pub fn created(&self, bytes: u64) {
        self.keys.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as i64, Ordering::Relaxed);
    }

    /// A value of `bytes` was freed.
    pub fn freed(&self, bytes: u64) {
        self.keys.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(bytes as i64, Ordering::Relaxed);
    }

    /// A value grew (or shrank) from `before` to `after` bytes.
    pub fn resized(&self, before: u64, after: u64) {
        if before != after {
            self.bytes
                .fetch_add(after as i64 - before as i64, Ordering::Relaxed);
        }
    }

    fn keys(&self) -> i64 {
        self.keys.load(Ordering::Relaxed)
    }

    fn bytes(&self) -> i64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// The module's INFO callback (registered in `lib.rs`'s init, replacing the crate's default,
/// whose crash-report fields it keeps).
pub extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    guard_callback("info", (), || {
        redis_module::basic_info_command_handler(&InfoContext::new(ctx), for_crash_report != 0);
        // No name: the section is called after the module, `INFO lcbloom`.
        raw::add_info_section(ctx, None);
        for (name, value) in [
            ("bf_keys", BLOOM.keys()),
            ("bf_bytes", BLOOM.bytes()),
            ("lc_keys", LC.keys()),
            ("lc_bytes", LC.bytes()),
            ("bf_blocked_keys", BLOOM_BLOCKED.keys()),
            ("bf_blocked_bytes", BLOOM_BLOCKED.bytes()),
            ("bf_redisbloom_keys", BLOOM_REDISBLOOM.keys()),
            ("bf_redisbloom_bytes", BLOOM_REDISBLOOM.bytes()),
            ("aof_lost_keys", lost_keys()),
        ] {
            raw::add_info_field_long_long(ctx, name, value);
        }
        raw::add_info_field_str(ctx, "bf_layout", crate::server::config::bf_layout().name());
    })
}
