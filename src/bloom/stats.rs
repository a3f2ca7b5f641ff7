//! The Bloom family's `INFO lcbloom` fields and the tallies behind them (`server/stats.rs`
//! keeps them up to date through the value layer).

use super::config;
use crate::server::stats::{InfoField, Tally};

/// Every Bloom filter, lcbloom's and RedisBloom's.
pub static FILTERS: Tally = Tally::new();
/// Filters in the blocked layout (also counted in `FILTERS`).
pub static BLOCKED: Tally = Tally::new();
/// Filters imported from RedisBloom (also counted in `FILTERS`).
pub static REDISBLOOM: Tally = Tally::new();

/// `bf_keys`, `bf_bytes`, `bf_blocked_*`, `bf_redisbloom_*`, and `bf_layout` (the layout new
/// filters get without `LAYOUT`: the `bf-layout` config).
pub static INFO: &[InfoField] = &[
    InfoField::Tally("bf", &FILTERS),
    InfoField::Tally("bf_blocked", &BLOCKED),
    InfoField::Tally("bf_redisbloom", &REDISBLOOM),
    InfoField::Text("bf_layout", || config::layout().name()),
];
