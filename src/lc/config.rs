//! The linear counter family's configs: the parameters of a counter created without them
//! (`LC.ADD` on a missing key), and how much a union of many counters may read.

use super::counter::min_error_rate;
use crate::server::config::{Config, Integer, Rate, Setting};
use crate::server::limits::MAX_CAPACITY;

/// At least what `LC.RESERVE` accepts, so that `LC.ADD` can create a counter with it.
static ERROR_RATE: Rate =
    Rate::at_least(0.01, min_error_rate, "the largest counter's standard error");
static CAPACITY: Integer = Integer::new(50_000, 1, MAX_CAPACITY);
/// Bytes of counters one `LC.COUNT` or `LC.MERGE` may read (`Counter::union_bytes`): a union
/// reads all it names, and a key count alone does not bound that (a counter reserved with a
/// large capacity lists up to 8,192 items exactly). 1 GiB took at most 0.7 s on the slowest
/// union measured (docs/BENCHMARKS.md, "Many keys").
static MAX_UNION_BYTES: Integer = Integer::bytes(1 << 30, 1024, i64::MAX);

pub static CONFIGS: &[Config] = &[
    Config::new(c"lc-error-rate", Setting::Rate(&ERROR_RATE)),
    Config::new(c"lc-capacity", Setting::Integer(&CAPACITY)),
    Config::new(c"lc-max-union-bytes", Setting::Integer(&MAX_UNION_BYTES)),
];

/// The defaults a linear counter created without parameters gets: (rate, capacity).
pub fn defaults() -> (f64, u64) {
    (ERROR_RATE.get(), CAPACITY.get() as u64)
}

/// Bytes of counters one union may read (`lc-max-union-bytes`).
pub fn max_union_bytes() -> u64 {
    MAX_UNION_BYTES.get() as u64
}
