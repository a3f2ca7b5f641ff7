//! The linear counter family's configs: the parameters of a counter created without them
//! (`LC.ADD` on a missing key).

use crate::server::config::{Config, Integer, Rate, Setting};
use crate::server::limits::MAX_CAPACITY;

static ERROR_RATE: Rate = Rate::new(0.01);
static CAPACITY: Integer = Integer::new(50_000, 1, MAX_CAPACITY);

pub static CONFIGS: &[Config] = &[
    Config::new(c"lc-error-rate", Setting::Rate(&ERROR_RATE)),
    Config::new(c"lc-capacity", Setting::Integer(&CAPACITY)),
];

/// The defaults a linear counter created without parameters gets: (rate, capacity).
pub fn defaults() -> (f64, u64) {
    (ERROR_RATE.get(), CAPACITY.get() as u64)
}
