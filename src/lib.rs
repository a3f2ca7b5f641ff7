//! lcbloom: Bloom filters (`BF.*`, RedisBloom-compatible) and linear counters (`LC.*`) as native
//! Redis data types. This file only registers things; see `docs/architecture.md` for the layout.

pub mod bloom;
pub mod core;
pub mod lc;
pub mod server;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, ModuleOptions, RedisString, Status};

use bloom::datatype::BLOOM_TYPE;
use bloom::redisbloom::datatype::RB_TYPE;
use bloom::window::datatype::WINDOW_TYPE;
use lc::datatype::LC_TYPE;
use server::{command_table, config, stats};

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    // Without this a truncated or corrupt RDB value aborts the server inside rdb_load.
    ctx.set_module_options(ModuleOptions::HANDLE_IO_ERRORS);
    // Replaces the crate's default INFO callback (which `stats::info` still calls).
    redis_module::raw::register_info_function(ctx.ctx, Some(stats::info));
    // Every command, with its key specs, COMMAND DOCS and ACL categories.
    command_table::register(ctx)
}

redis_module! {
    name: "lcbloom",
    version: 1,
    allocator: (core::alloc::ModuleAlloc, core::alloc::ModuleAlloc),
    data_types: [BLOOM_TYPE, LC_TYPE, RB_TYPE, WINDOW_TYPE],
    init: init,
    // Registered by init from command_table::COMMANDS, so that every handler borrows its
    // arguments.
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
        enum: [
            ["bf-layout", &config::BF_LAYOUT, config::BfLayout::standard, ConfigurationFlags::DEFAULT, None],
        ],
        module_args_as_configuration: true,
    ]
}
