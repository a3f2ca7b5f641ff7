//! The module as the server sees it: what a family brings ([`Family`]), the module's version,
//! and the order `OnLoad` registers everything in ([`load`]).
//!
//! A family (Bloom filters, linear counters, …) is a folder that describes itself in one
//! `static FAMILY: Family`: its types, its command table and ACL category, its configs and its
//! `INFO lcbloom` fields. lib.rs lists the families, one line each, and nothing in `server/`
//! names any of them: a new family is its folder plus that line.

use crate::server::command_table::{self, CommandInfo, Table};
use crate::server::config::{self, Config};
use crate::server::ffi::{log_notice, log_warning};
use crate::server::limits;
use crate::server::load_args::{self, Ignored};
use crate::server::stats::{self, InfoField};
use redis_module::native_types::RedisType;
use redis_module::{raw, Context, ModuleOptions, RedisString, Status};
use std::ffi::CStr;

/// Everything a family registers.
pub struct Family {
    /// Its Redis types.
    pub types: &'static [&'static RedisType],
    /// Its commands.
    pub commands: &'static [CommandInfo],
    /// The ACL category its commands join (`bloom`), where the server can add one.
    pub category: &'static CStr,
    /// Its configs (`lcbloom.<name>`).
    pub configs: &'static [Config],
    /// Load arguments it accepts and ignores (RedisBloom's, for types lcbloom does not have).
    pub ignored_arguments: &'static [Ignored],
    /// Its `INFO lcbloom` fields, in order.
    pub info: &'static [InfoField],
}

/// The module's version as `MODULE LIST` and `INFO lcbloom` give it: the crate's version
/// `major.minor.patch` as major·10000 + minor·100 + patch (1.2.3 → 10203), as RedisBloom
/// numbers its versions (2.8.2 → 20802).
pub const VERSION: i32 = version(env!("CARGO_PKG_VERSION"));

/// `major.minor.patch` (anything after the patch number, such as `-rc1`, ignored) as
/// major·10000 + minor·100 + patch; a version outside 0–99 for minor or patch fails the build.
const fn version(text: &str) -> i32 {
    let bytes = text.as_bytes();
    let mut parts = [0i32; 3];
    let (mut part, mut i) = (0, 0);
    while i < bytes.len() && part < 3 {
        match bytes[i] {
            b'.' => part += 1,
            b @ b'0'..=b'9' => parts[part] = parts[part] * 10 + (b - b'0') as i32,
            _ => break,
        }
        i += 1;
    }
    assert!(
        parts[1] < 100 && parts[2] < 100,
        "minor and patch must be below 100"
    );
    parts[0] * 10_000 + parts[1] * 100 + parts[2]
}

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION` (valkeymodule.h), a bit Redis 7
/// gives no meaning: set only on Valkey.
const VALKEY_HANDLES_ATOMIC_SLOT_MIGRATION: i32 = 1 << 5;

/// Whether the server is Valkey: `INFO server` has `valkey_version`. The field is read as the
/// C string Redis lends (the crate's `field` retains a string it never frees: 17 bytes a load).
fn is_valkey(ctx: &Context) -> bool {
    // SAFETY: reads of function pointers Redis sets once at load.
    let (Some(info_of), Some(field), Some(free)) = (unsafe {
        (
            raw::RedisModule_GetServerInfo,
            raw::RedisModule_ServerInfoGetFieldC,
            raw::RedisModule_FreeServerInfo,
        )
    }) else {
        return false;
    };
    // SAFETY: OnLoad's context; the info data lives until freed here, and the field's text
    // is only tested for null while it does.
    unsafe {
        let info = info_of(ctx.ctx, c"server".as_ptr());
        if info.is_null() {
            return false;
        }
        let found = !field(info, c"valkey_version".as_ptr()).is_null();
        free(ctx.ctx, info);
        found
    }
}

/// `OnLoad`, after `RedisModule_Init`: the load arguments (`load_args.rs`), the families' types,
/// their configs and the shared limits (the load arguments' values as defaults, then
/// redis.conf's), `INFO lcbloom`, then their commands. Any failure is logged and fails the
/// load, so a server with a bad `loadmodule` line does not start.
pub fn load(ctx: &Context, args: &[RedisString], families: &[&'static Family]) -> Status {
    // Without HANDLE_IO_ERRORS a truncated or corrupt RDB value aborts the server inside
    // rdb_load. Keys are signalled as modified only when a write changed them
    // (`write::finish_write`). Not HANDLE_REPL_ASYNC_LOAD, so that a `repl-diskless-load
    // swapdb` replica receives a full sync to disk and loads it only once whole: when a
    // master's diskless sync breaks off it can send its keep-alive newline before it drops
    // the link, and a replica loading from the socket reads that byte where a module value's
    // end marker belongs, calls the stream corrupt and exits, its old data gone with it
    // (tests/it/ops_replication.rs, `FakeMaster`).
    let mut options = ModuleOptions::HANDLE_IO_ERRORS | ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED;
    if is_valkey(ctx) {
        // Valkey 9 refuses atomic slot migration (`CLUSTER MIGRATESLOTS`) in the whole cluster
        // while a loaded module has not declared that it handles it. This one does: a slot's
        // values move as their AOF rewrite (the `LOADCHUNK` commands) and its later writes as
        // a replication stream, which the target runs as a master's (no client limits, each
        // windowed write at its own time). tests/it/ops_cluster.rs moves every type so.
        options |= ModuleOptions::from_bits_retain(VALKEY_HANDLES_ATOMIC_SLOT_MIGRATION);
    }
    ctx.set_module_options(options);
    crate::core::alloc::learn_machine_memory();
    let configs: Vec<&'static Config> = limits::CONFIGS
        .iter()
        .chain(families.iter().flat_map(|f| f.configs))
        .collect();
    let ignored: Vec<&Ignored> = families.iter().flat_map(|f| f.ignored_arguments).collect();
    let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    // The load arguments first: a bad one fails the load before anything is registered.
    let settings = match load_args::parse(&args, &configs, &ignored) {
        Ok((settings, log)) => {
            for line in log {
                if line.warning {
                    log_warning(&line.text);
                } else {
                    log_notice(&line.text);
                }
            }
            settings
        }
        Err(why) => {
            log_warning(&format!("lcbloom: not loaded: {why}"));
            return Status::Err;
        }
    };
    for ty in families.iter().flat_map(|f| f.types) {
        if ty.create_data_type(ctx.ctx).is_err() {
            return Status::Err;
        }
    }
    let registered = configs
        .iter()
        .enumerate()
        .try_for_each(|(i, config)| config.register(ctx, settings.value(i)))
        .and_then(|()| config::load_configs(ctx));
    if let Err(why) = registered {
        log_warning(&format!("lcbloom: not loaded: {why}"));
        return Status::Err;
    }
    stats::register(
        ctx,
        i64::from(VERSION),
        families.iter().map(|f| f.info).collect(),
    );
    let tables: Vec<Table> = families
        .iter()
        .map(|f| Table {
            category: f.category,
            commands: f.commands,
        })
        .collect();
    command_table::register(ctx, &tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_numbered_as_redisbloom_numbers_them() {
        assert_eq!(version("1.2.3"), 10203);
        assert_eq!(version("2.8.2"), 20802);
        assert_eq!(version("0.1.0"), 100);
        assert_eq!(version("3.10.0-rc1"), 31000);
        let [major, minor, patch] = [0, 1, 2].map(|i| {
            env!("CARGO_PKG_VERSION")
                .split('.')
                .nth(i)
                .and_then(|p| p.parse::<i32>().ok())
                .unwrap()
        });
        assert_eq!(VERSION, major * 10_000 + minor * 100 + patch);
    }
}
