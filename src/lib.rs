//! lcbloom: Bloom filters (`BF.*`, RedisBloom-compatible) and linear counters (`LC.*`) as native
//! Redis data types. This file only registers things; see `docs/architecture.md` for the layout.

pub mod alloc;
pub mod args;
pub mod bloom;
pub mod command_info;
pub mod config;
pub mod ffi;
pub mod hashing;
pub mod lc;
pub mod rebloom;
pub mod stats;
pub mod value;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, ModuleOptions, RedisString, Status};
use std::ffi::CStr;

use bloom::commands as bf;
use bloom::datatype::BLOOM_TYPE;
use lc::commands as lcc;
use lc::datatype::LC_TYPE;

/// Every command: its name, its handler and its key positions (first, last, step). What else a
/// command declares (flags, key specs, docs, ACL categories) is `command_info::COMMANDS`'s row
/// of the same name.
static COMMANDS: &[ffi::Command] = &[
    command!(c"bf.reserve", bf::reserve, (1, 1, 1)),
    command!(c"bf.add", bf::add, (1, 1, 1)),
    command!(c"bf.madd", bf::madd, (1, 1, 1)),
    command!(c"bf.insert", bf::insert, (1, 1, 1)),
    command!(c"bf.exists", bf::exists, (1, 1, 1)),
    command!(c"bf.mexists", bf::mexists, (1, 1, 1)),
    command!(c"bf.info", bf::info, (1, 1, 1)),
    command!(c"bf.card", bf::card, (1, 1, 1)),
    command!(c"bf.scandump", bf::scandump, (1, 1, 1)),
    command!(c"bf.loadchunk", bf::loadchunk, (1, 1, 1)),
    command!(c"lc.reserve", lcc::reserve, (1, 1, 1)),
    command!(c"lc.add", lcc::add, (1, 1, 1)),
    command!(c"lc.count", lcc::count, (1, -1, 1)),
    command!(c"lc.merge", lcc::merge, (1, -1, 1)),
    command!(c"lc.info", lcc::info, (1, 1, 1)),
    command!(c"lc.loadchunk", lcc::loadchunk, (1, 1, 1)),
];

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    // Without this a truncated or corrupt RDB value aborts the server inside rdb_load.
    ctx.set_module_options(ModuleOptions::HANDLE_IO_ERRORS);
    // Replaces the crate's default INFO callback (which `stats::info` still calls).
    redis_module::raw::register_info_function(ctx.ctx, Some(stats::info));
    let flags = |name: &CStr| command_info::find(name).map(|info| info.flags);
    if ffi::create_commands(ctx, COMMANDS, flags) == Status::Err {
        return Status::Err;
    }
    // Key specs, COMMAND DOCS and ACL categories of every command, now that all exist.
    command_info::apply(ctx)
}

redis_module! {
    name: "lcbloom",
    version: 1,
    allocator: (alloc::ModuleAlloc, alloc::ModuleAlloc),
    data_types: [BLOOM_TYPE, LC_TYPE],
    init: init,
    // Registered by init from COMMANDS, so that every handler borrows its arguments.
    commands: [],
    configurations: [
        i64: [
            ["bf-initial-size", &config::BF_INITIAL_SIZE, config::DEFAULT_BF_INITIAL_SIZE, 1, config::MAX_CAPACITY, ConfigurationFlags::DEFAULT, None],
            ["bf-expansion-factor", &config::BF_EXPANSION, config::DEFAULT_BF_EXPANSION, 0, config::MAX_EXPANSION, ConfigurationFlags::DEFAULT, None],
            ["lc-capacity", &config::LC_CAPACITY, config::DEFAULT_LC_CAPACITY, 1, config::MAX_CAPACITY, ConfigurationFlags::DEFAULT, None],
            ["max-memory-per-key", &config::MAX_MEMORY_PER_KEY, config::DEFAULT_MAX_MEMORY_PER_KEY, config::MIN_MAX_MEMORY_PER_KEY, i64::MAX, ConfigurationFlags::MEMORY, None],
            ["max-items-per-command", &config::MAX_ITEMS_PER_COMMAND, config::DEFAULT_MAX_ITEMS_PER_COMMAND, 1, i64::MAX, ConfigurationFlags::DEFAULT, None],
        ],
        string: [
            ["bf-error-rate", &config::BF_ERROR_RATE, "0.01", ConfigurationFlags::DEFAULT, None],
            ["lc-error-rate", &config::LC_ERROR_RATE, "0.01", ConfigurationFlags::DEFAULT, None],
        ],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_its_info_and_every_info_its_command() {
        for command in COMMANDS {
            assert!(
                command_info::find(command.name).is_some(),
                "{:?}",
                command.name
            );
        }
        for info in command_info::COMMANDS {
            assert!(
                COMMANDS.iter().any(|c| c.name == info.name),
                "{:?}",
                info.name
            );
        }
    }
}
