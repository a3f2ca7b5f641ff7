//! The limits every family shares, as module configs: `max-memory-per-key` (bytes one value
//! may take) and `max-items-per-command` (items or keys one command may name), and what they
//! bind: client commands and `RESTORE`, never the rebuilding of data already acknowledged.

use crate::server::config::{Config, Integer, Setting};
use crate::server::errors::too_many_items;
use crate::server::ffi::log_warning;
use redis_module::{raw, Context, ContextFlags, RedisError};

/// Largest capacity accepted anywhere; far beyond what `max-memory-per-key` admits, it only
/// keeps size arithmetic away from overflow.
pub const MAX_CAPACITY: i64 = 1 << 50;

static MAX_MEMORY_PER_KEY: Integer = Integer::bytes(1 << 30, 1024, i64::MAX);
/// Items (or keys) one command may name: 100,000 adds to a scaled filter take ~0.1-0.4 s
/// (measured on a busy 2-core machine; 1,000,000 took 4 s).
static MAX_ITEMS_PER_COMMAND: Integer = Integer::new(100_000, 1, i64::MAX);

/// The configs of this file.
pub static CONFIGS: &[Config] = &[
    Config::new(c"max-memory-per-key", Setting::Integer(&MAX_MEMORY_PER_KEY)),
    Config::new(
        c"max-items-per-command",
        Setting::Integer(&MAX_ITEMS_PER_COMMAND),
    ),
];

/// Bytes a single value may take.
pub fn max_memory_per_key() -> u64 {
    MAX_MEMORY_PER_KEY.get() as u64
}

/// Whether the server is rebuilding data it already accepted once: loading an RDB or AOF file
/// (startup, `DEBUG RELOAD`, a replica's full sync) or applying its master's stream.
///
/// Limits protect the server from what clients send; they must not make it drop what it has
/// already acknowledged. A value saved under a higher limit (or before `CONFIG SET` lowered it)
/// still loads, and a replica with a lower limit still follows its master. Such a value is
/// kept, with a warning in the log (see `note_loaded_size`).
pub fn rebuilding(ctx: &Context) -> bool {
    let trusted = ContextFlags::LOADING | ContextFlags::ASYNC_LOADING | ContextFlags::REPLICATED;
    ctx.get_flags().intersects(trusted)
}

/// The byte budget of a key for what `ctx` is doing: `max-memory-per-key` for client commands
/// and `RESTORE`, no limit while rebuilding (see `rebuilding`). Type callbacks pass the context
/// of their IO handle (`RedisModule_GetContextFromIO`).
pub fn memory_limit(ctx: &Context) -> u64 {
    memory_limit_while(rebuilding(ctx))
}

/// `memory_limit` of a command that is (or is not) `rebuilding`.
pub fn memory_limit_while(rebuilding: bool) -> u64 {
    if rebuilding {
        u64::MAX
    } else {
        max_memory_per_key()
    }
}

/// Logs a loaded value that exceeds `max-memory-per-key` (only possible while rebuilding).
pub fn note_loaded_size(what: &str, bytes: u64) {
    let limit = max_memory_per_key();
    if bytes > limit {
        log_warning(&format!(
            "lcbloom: loaded a {what} of {bytes} bytes, more than max-memory-per-key ({limit}); \
             kept, since refusing it would lose data"
        ));
    }
}

/// Refuses a command naming more than `max-items-per-command` items or keys (one call must not
/// block the server for long); no limit while rebuilding.
pub fn check_item_count(ctx: &Context, items: usize) -> Result<(), RedisError> {
    let limit = MAX_ITEMS_PER_COMMAND.get() as u64;
    if items as u64 > limit && !rebuilding(ctx) {
        return Err(too_many_items(items, limit));
    }
    Ok(())
}

/// `memory_limit` for a type's `rdb_load`, from the context of its IO handle.
///
/// That context has no client, so a `RESTORE` its master sends does not show as `REPLICATED`.
/// A read-only replica writes only what its master sends: there a `RESTORE` is rebuilding too
/// (a replica with a lower limit refused it and lost the value). A writable replica limits
/// every `RESTORE`, its master's included.
///
/// # Safety
/// `io` must be the handle Redis passed to the running `rdb_load` (Redis frees the context
/// this creates after the callback).
pub unsafe fn load_memory_limit(io: *mut raw::RedisModuleIO) -> u64 {
    // SAFETY: a read of a function pointer Redis sets once at load.
    let Some(get) = (unsafe { raw::RedisModule_GetContextFromIO }) else {
        return max_memory_per_key();
    };
    // SAFETY: `io` is the live handle of the running callback (the caller's contract).
    let ctx = Context::new(unsafe { get(io) });
    let read_only_replica = ctx
        .get_flags()
        .contains(ContextFlags::SLAVE | ContextFlags::READONLY);
    memory_limit_while(rebuilding(&ctx) || read_only_replica)
}
