//! Module configurations: settable as load arguments (`--loadmodule lcbloom.so bf-error-rate 0.001`)
//! and with `CONFIG SET lcbloom.<name>`; each is validated, and a bad value is refused with an
//! error that names the valid range.
//!
//! Defaults only matter when a command creates a key without explicit parameters (`BF.ADD` or
//! `LC.ADD` on a missing key); such commands replicate the parameters they actually used, so a
//! replica or an AOF replay with other defaults still builds the same value.

use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::{raw, Context, ContextFlags, RedisError, RedisString};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

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

/// The defaults a Bloom filter created without parameters gets.
pub fn bf_defaults() -> (f64, u64, u32) {
    (
        BF_ERROR_RATE.value(),
        BF_INITIAL_SIZE.load(Ordering::Relaxed) as u64,
        BF_EXPANSION.load(Ordering::Relaxed) as u32,
    )
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

/// The byte limit for a value a command creates or grows: `max-memory-per-key` for clients,
/// none for the replication stream and while loading (AOF replay, RDB, a replica's full sync).
/// Those only rebuild what the master or an earlier run accepted, and a replica or restart with
/// a lower limit must still end up with the same data instead of diverging or refusing to start.
pub fn memory_limit(ctx: &Context) -> u64 {
    let exempt = ContextFlags::REPLICATED | ContextFlags::LOADING | ContextFlags::ASYNC_LOADING;
    if ctx.get_flags().intersects(exempt) {
        u64::MAX
    } else {
        max_memory_per_key()
    }
}

/// `memory_limit` for a type's `rdb_load`: exempt while loading or syncing, applied to a
/// client's `RESTORE`.
///
/// # Safety
/// `io` must be the handle Redis passed to the running `rdb_load` (Redis frees the context
/// this creates after the callback).
pub unsafe fn load_memory_limit(io: *mut raw::RedisModuleIO) -> u64 {
    match raw::RedisModule_GetContextFromIO {
        Some(get) => memory_limit(&Context::new(get(io))),
        None => max_memory_per_key(),
    }
}
