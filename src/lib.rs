//! lcbloom: Bloom filters (`BF.*`, RedisBloom-compatible) and linear counters (`LC.*`) as native
//! Redis data types. This file only registers things; see `docs/architecture.md` for the layout.

pub mod bloom;
pub mod core;
pub mod lc;
pub mod server;

use redis_module::{redis_module, Context, RedisString, Status};
use server::module::{self, Family};

/// The families, one line each: a family's folder describes its types, commands, ACL category,
/// configs and INFO fields in its `table.rs`.
static FAMILIES: &[&Family] = &[
    &bloom::table::FAMILY,
    &bloom::window::table::FAMILY,
    &lc::table::FAMILY,
];

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    module::load(ctx, args, FAMILIES)
}

redis_module! {
    name: "lcbloom",
    version: module::VERSION,
    allocator: (core::alloc::ModuleAlloc, core::alloc::ModuleAlloc),
    // Registered by init from FAMILIES: types, configs (with the load arguments checked),
    // INFO fields and commands (each handler borrows its arguments).
    data_types: [],
    init: init,
    commands: [],
}
