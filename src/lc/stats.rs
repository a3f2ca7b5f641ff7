//! The linear counter family's `INFO lcbloom` fields and the tally behind them
//! (`server/stats.rs` keeps it up to date through the value layer).

use crate::server::stats::{InfoField, Tally};

pub static COUNTERS: Tally = Tally::new();

/// `lc_keys`, `lc_bytes`.
pub static INFO: &[InfoField] = &[InfoField::Tally("lc", &COUNTERS)];
