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
//! Fields (Redis prefixes each with the module name): `lcbloom_version` (the module's version
//! as `MODULE LIST` gives it), then each family's fields in the order lib.rs lists the families
//! (a family lists its [`InfoField`]s: its tallies' `<name>_keys` and `<name>_bytes`, and texts
//! such as `bf_layout`), then `lcbloom_aof_lost_keys` (see [`note_refused_write`]) and active
//! defragmentation's work on the module's values, every type together:
//! `lcbloom_defrag_moved_blocks` (blocks moved), `lcbloom_defrag_values` (values visited to
//! their end) and `lcbloom_defrag_paused_steps` (steps a large value stopped for the time
//! budget).
//!
//! Lost keys. Redis carries on after an AOF command that fails while it loads the file, and no
//! module API can stop that load (checked on Redis 7.0.15 and Valkey 9.1: the reply is dropped).
//! A `BF.RESERVE`, `BF.INSERT` or `BF.LOADCHUNK` refused then (a foreign or corrupt line) means
//! a key missing or incomplete after the start, so each is logged at warning level with its key
//! and the reason, and each such key is counted once in `aof_lost_keys`.

use crate::server::ffi::{guard_callback, log_warning, shown_key_name};
use redis_module::{raw, Context, ContextFlags, InfoContext, RedisError, RedisString};
use std::collections::BTreeSet;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Values of one type and their bytes.
#[derive(Default)]
pub struct Tally {
    keys: AtomicI64,
    bytes: AtomicI64,
}

/// One field of `INFO lcbloom`, as a family lists it.
pub enum InfoField {
    /// `<name>_keys` and `<name>_bytes`: the values a tally counts and their bytes.
    Tally(&'static str, &'static Tally),
    /// A text known when INFO runs (a config's value).
    Text(&'static str, fn() -> &'static str),
}

/// Every family's fields, in order; set once at load.
static FIELDS: OnceLock<Vec<&'static [InfoField]>> = OnceLock::new();

/// The module's version, shown first.
static VERSION: AtomicI64 = AtomicI64::new(0);

/// Registers the INFO callback, which shows `version` and then `fields`, each family's list in
/// turn.
pub fn register(ctx: &Context, version: i64, fields: Vec<&'static [InfoField]>) {
    VERSION.store(version, Ordering::Relaxed);
    let _ = FIELDS.set(fields);
    // Replaces the crate's default INFO callback (which `info` still calls).
    raw::register_info_function(ctx.ctx, Some(info));
}

/// What active defragmentation did to the module's values (`value::defrag`).
pub struct DefragCounts {
    /// Blocks moved.
    moved: AtomicI64,
    /// Values visited to their end.
    values: AtomicI64,
    /// Steps a large value stopped for the time budget, to resume at its cursor.
    paused: AtomicI64,
}

pub static DEFRAG: DefragCounts = DefragCounts {
    moved: AtomicI64::new(0),
    values: AtomicI64::new(0),
    paused: AtomicI64::new(0),
};

impl DefragCounts {
    /// One defrag call moved `moved` blocks and finished its value, or `paused` for later.
    pub fn note(&self, moved: u64, paused: bool) {
        self.moved.fetch_add(moved as i64, Ordering::Relaxed);
        let counter = if paused { &self.paused } else { &self.values };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The names of the keys an AOF load lost, each counted once.
static LOST_KEYS: Mutex<BTreeSet<Vec<u8>>> = Mutex::new(BTreeSet::new());

/// A write `command` on `key` was refused with `why`: while the server loads its AOF, that is
/// data lost (see "Lost keys" above), so it is logged and the key counted. Nothing otherwise.
pub fn note_refused_write(ctx: &Context, command: &str, key: &RedisString, why: &RedisError) {
    if !ctx.get_flags().contains(ContextFlags::LOADING) {
        return;
    }
    let name = shown_key_name(key.as_slice());
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
    pub const fn new() -> Self {
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

/// The module's INFO callback (registered by [`register`], replacing the crate's default,
/// whose crash-report fields it keeps).
extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    guard_callback("info", (), || {
        redis_module::basic_info_command_handler(&InfoContext::new(ctx), for_crash_report != 0);
        // No name: the section is called after the module, `INFO lcbloom`.
        raw::add_info_section(ctx, None);
        raw::add_info_field_long_long(ctx, "version", VERSION.load(Ordering::Relaxed));
        for field in FIELDS.get().into_iter().flatten().copied().flatten() {
            match field {
                InfoField::Tally(name, tally) => {
                    raw::add_info_field_long_long(ctx, &format!("{name}_keys"), tally.keys());
                    raw::add_info_field_long_long(ctx, &format!("{name}_bytes"), tally.bytes());
                }
                InfoField::Text(name, text) => {
                    raw::add_info_field_str(ctx, name, text());
                }
            }
        }
        for (name, value) in [
            ("aof_lost_keys", lost_keys()),
            ("defrag_moved_blocks", DEFRAG.moved.load(Ordering::Relaxed)),
            ("defrag_values", DEFRAG.values.load(Ordering::Relaxed)),
            ("defrag_paused_steps", DEFRAG.paused.load(Ordering::Relaxed)),
        ] {
            raw::add_info_field_long_long(ctx, name, value);
        }
    })
}
