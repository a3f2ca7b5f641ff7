//! Module configurations: settable as load arguments (`--loadmodule lcbloom.so bf-error-rate 0.001`)
//! and with `CONFIG SET lcbloom.<name>`; each is validated, and a bad value is refused with an
//! error that names the valid range.
//!
//! Defaults only matter when a command creates a key without explicit parameters (`BF.ADD` or
//! `LC.ADD` on a missing key); such commands replicate the parameters they actually used, so a
//! replica or an AOF replay with other defaults still builds the same value.

use crate::bloom::filter::Layout;
use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::{enum_configuration, raw, Context, ContextFlags, RedisError, RedisString};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

pub const DEFAULT_BF_ERROR_RATE: f64 = 0.01;
pub const DEFAULT_BF_INITIAL_SIZE: i64 = 100;
pub const DEFAULT_BF_EXPANSION: i64 = 2;
pub const DEFAULT_LC_ERROR_RATE: f64 = 0.01;
pub const DEFAULT_LC_CAPACITY: i64 = 50_000;
pub const DEFAULT_MAX_MEMORY_PER_KEY: i64 = 1 << 30;

/// Largest capacity accepted anywhere; far beyond what `max-memory-per-key` admits, it only
/// keeps size arithmetic away from overflow.
pub const MAX_CAPACITY: i64 = 1 << 50;
/// RedisBloom's upper bound for EXPANSION.
pub const MAX_EXPANSION: i64 = 32_768;
pub const MIN_MAX_MEMORY_PER_KEY: i64 = 1024;
/// Items (or keys) one command may name: 100,000 adds to a scaled filter take ~0.1-0.4 s
/// (measured on a busy 2-core machine; 1,000,000 took 4 s).
pub const DEFAULT_MAX_ITEMS_PER_COMMAND: i64 = 100_000;

/// A probability in (0, 1), stored as the bits of an f64 so it can live in a static.
pub struct RateConfig {
    bits: AtomicU64,
    name: &'static str,
}

impl RateConfig {
    pub const fn new(name: &'static str, default: f64) -> Self {
        // f64::to_bits is const since Rust 1.83.
        Self {
            bits: AtomicU64::new(default.to_bits()),
            name,
        }
    }

    pub fn value(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Relaxed))
    }
}

impl ConfigurationValue<RedisString> for RateConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        RedisString::create(None, self.value().to_string().as_str())
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let rate = val
            .try_as_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|r| *r > 0.0 && *r < 1.0)
            .ok_or_else(|| {
                RedisError::String(format!(
                    "{} must be a number strictly between 0 and 1",
                    self.name
                ))
            })?;
        self.bits.store(rate.to_bits(), Ordering::Relaxed);
        Ok(())
    }
}

pub static BF_ERROR_RATE: RateConfig = RateConfig::new("bf-error-rate", DEFAULT_BF_ERROR_RATE);
pub static BF_INITIAL_SIZE: AtomicI64 = AtomicI64::new(DEFAULT_BF_INITIAL_SIZE);
pub static BF_EXPANSION: AtomicI64 = AtomicI64::new(DEFAULT_BF_EXPANSION);
pub static LC_ERROR_RATE: RateConfig = RateConfig::new("lc-error-rate", DEFAULT_LC_ERROR_RATE);
pub static LC_CAPACITY: AtomicI64 = AtomicI64::new(DEFAULT_LC_CAPACITY);
pub static MAX_MEMORY_PER_KEY: AtomicI64 = AtomicI64::new(DEFAULT_MAX_MEMORY_PER_KEY);
pub static MAX_ITEMS_PER_COMMAND: AtomicI64 = AtomicI64::new(DEFAULT_MAX_ITEMS_PER_COMMAND);

/// The defaults a Bloom filter created without parameters gets.
pub fn bf_defaults() -> (f64, u64, u32) {
    (
        BF_ERROR_RATE.value(),
        BF_INITIAL_SIZE.load(Ordering::Relaxed) as u64,
        BF_EXPANSION.load(Ordering::Relaxed) as u32,
    )
}

enum_configuration! {
    /// `bf-layout`: the layout of Bloom filters created without the `LAYOUT` option (the
    /// variant names are the config's values, hence lower case).
    #[allow(non_camel_case_types)]
    pub enum BfLayout {
        standard = 0,
        blocked = 1,
    }
}

/// Standard by default: a blocked filter takes a few percent more memory (`bloom/blocked.rs`),
/// and memory stays ≤ RedisBloom's unless an operator chooses speed.
pub static BF_LAYOUT: Mutex<BfLayout> = Mutex::new(BfLayout::standard);

/// The layout a Bloom filter created without `LAYOUT` gets.
pub fn bf_layout() -> Layout {
    match BF_LAYOUT.lock().map(|l| l.clone()) {
        Ok(BfLayout::blocked) => Layout::Blocked,
        _ => Layout::Standard,
    }
}

/// The defaults a linear counter created without parameters gets.
pub fn lc_defaults() -> (f64, u64) {
    (
        LC_ERROR_RATE.value(),
        LC_CAPACITY.load(Ordering::Relaxed) as u64,
    )
}

/// Bytes a single filter or counter may take.
pub fn max_memory_per_key() -> u64 {
    MAX_MEMORY_PER_KEY.load(Ordering::Relaxed) as u64
}

/// Whether the server is rebuilding data it already accepted once: loading an RDB or AOF file
/// (startup, `DEBUG RELOAD`, a replica's full sync) or applying its master's stream.
///
/// Limits protect the server from what clients send; they must not make it drop what it has
/// already acknowledged. A value saved under a higher limit (or before `CONFIG SET` lowered it)
/// still loads, and a replica with a lower limit still follows its master. Such a value is
/// kept, with a warning in the log (see `note_loaded_size`).
fn rebuilding(ctx: &Context) -> bool {
    let trusted = ContextFlags::LOADING | ContextFlags::ASYNC_LOADING | ContextFlags::REPLICATED;
    ctx.get_flags().intersects(trusted)
}

/// The byte budget of a key for what `ctx` is doing: `max-memory-per-key` for client commands
/// and `RESTORE`, no limit while rebuilding (see `rebuilding`). Type callbacks pass the context
/// of their IO handle (`RedisModule_GetContextFromIO`).
pub fn memory_limit(ctx: &Context) -> u64 {
    if rebuilding(ctx) {
        u64::MAX
    } else {
        max_memory_per_key()
    }
}

/// Logs a loaded value that exceeds `max-memory-per-key` (only possible while rebuilding).
pub fn note_loaded_size(what: &str, bytes: u64) {
    let limit = max_memory_per_key();
    if bytes > limit {
        crate::server::ffi::log_warning(&format!(
            "lcbloom: loaded a {what} of {bytes} bytes, more than max-memory-per-key ({limit}); \
             kept, since refusing it would lose data"
        ));
    }
}

/// Refuses a command naming more than `max-items-per-command` items or keys (one call must not
/// block the server for long); no limit while rebuilding.
pub fn check_item_count(ctx: &Context, items: usize) -> Result<(), RedisError> {
    let limit = MAX_ITEMS_PER_COMMAND.load(Ordering::Relaxed) as u64;
    if items as u64 > limit && !rebuilding(ctx) {
        return Err(crate::server::errors::too_many_items(items, limit));
    }
    Ok(())
}

/// `memory_limit` for a type's `rdb_load`, from the context of its IO handle.
///
/// # Safety
/// `io` must be the handle Redis passed to the running `rdb_load` (Redis frees the context
/// this creates after the callback).
pub unsafe fn load_memory_limit(io: *mut raw::RedisModuleIO) -> u64 {
    // SAFETY: a read of a function pointer Redis sets once at load.
    match unsafe { raw::RedisModule_GetContextFromIO } {
        // SAFETY: `io` is the live handle of the running callback (the caller's contract).
        Some(get) => memory_limit(&Context::new(unsafe { get(io) })),
        None => max_memory_per_key(),
    }
}
