//! The Bloom family's configs: the defaults of a filter created without parameters (`BF.ADD`
//! and `BF.MADD` on a missing key, `BF.INSERT` without options), as RedisBloom has them, and
//! the layout (`bf-layout`) and the hash seed (`bf-seed`). RedisBloom's load arguments `ERROR_RATE` and `INITIAL_SIZE` set
//! the same values; its arguments for the types lcbloom does not have are ignored with a
//! warning (`load_args.rs`).

use super::budget::{CHAIN, MAX_EXPANSION};
use super::filter::Layout;
use crate::server::config::{Choice, Config, Integer, Rate, Seed, Setting};
use crate::server::limits::MAX_CAPACITY;
use crate::server::load_args::Ignored;

/// At least what a scaling filter takes, so that `BF.ADD` can create a filter with it.
static ERROR_RATE: Rate = Rate::at_least(
    0.01,
    min_scaling_error_rate,
    "the smallest rate a scaling filter takes",
);
static INITIAL_SIZE: Integer = Integer::new(100, 1, MAX_CAPACITY);
static EXPANSION: Integer = Integer::new(2, 0, MAX_EXPANSION as i64);
/// Standard by default: a blocked filter takes a few percent more memory (`blocked.rs`), and
/// memory stays ≤ RedisBloom's unless an operator chooses speed. The names are
/// `Layout::name`'s, in `LAYOUTS` order.
static LAYOUT: Choice = Choice::new(&[c"standard", c"blocked"], 0);
const LAYOUTS: [Layout; 2] = [Layout::Standard, Layout::Blocked];
/// The seed a filter created without `SEED` hashes its items with: a fresh random one by
/// default, so that items crafted offline cannot aim at a filter's bits (docs/security.md);
/// a fixed number makes filters made alike hold the same bits, and 0 the bits of filters
/// made before seeds existed.
static SEED: Seed = Seed::random();
/// Whether large bit arrays are advised as huge-page memory (`huge_pages.rs`): off by default, as
/// Redis itself keeps transparent huge pages away from its memory; docs/operations.md weighs it.
static HUGE_PAGES: Choice = Choice::new(&[c"no", c"yes"], 0).applied_by(huge_pages);

fn huge_pages(index: usize) {
    super::huge_pages::set(index == 1);
}

pub static CONFIGS: &[Config] = &[
    Config::new(c"bf-error-rate", Setting::Rate(&ERROR_RATE)).or_redisbloom("ERROR_RATE"),
    Config::new(c"bf-initial-size", Setting::Integer(&INITIAL_SIZE)).or_redisbloom("INITIAL_SIZE"),
    Config::new(c"bf-expansion-factor", Setting::Integer(&EXPANSION)),
    Config::new(c"bf-layout", Setting::Choice(&LAYOUT)),
    Config::new(c"bf-seed", Setting::Seed(&SEED)),
    Config::new(c"bf-huge-pages", Setting::Choice(&HUGE_PAGES)),
];

/// RedisBloom 2.8's load arguments, and the configs of later RedisBloom versions, for the
/// types it has beside Bloom filters.
pub static IGNORED_ARGUMENTS: &[Ignored] = &[
    Ignored {
        name: "CF_MAX_EXPANSIONS",
        why: "lcbloom has no cuckoo filters",
    },
    Ignored {
        name: "cf-max-expansions",
        why: "lcbloom has no cuckoo filters",
    },
    Ignored {
        name: "cf-initial-size",
        why: "lcbloom has no cuckoo filters",
    },
    Ignored {
        name: "cf-bucket-size",
        why: "lcbloom has no cuckoo filters",
    },
    Ignored {
        name: "cf-max-iterations",
        why: "lcbloom has no cuckoo filters",
    },
    Ignored {
        name: "cf-expansion-factor",
        why: "lcbloom has no cuckoo filters",
    },
];

fn min_scaling_error_rate() -> f64 {
    CHAIN.min_scaling_error_rate()
}

/// The defaults a Bloom filter created without parameters gets: (rate, capacity, expansion).
pub fn defaults() -> (f64, u64, u32) {
    (
        ERROR_RATE.get(),
        INITIAL_SIZE.get() as u64,
        EXPANSION.get() as u32,
    )
}

/// The seed a Bloom filter created without `SEED` gets (`bf-seed`: drawn at random, or the
/// fixed one).
pub fn seed() -> u64 {
    SEED.draw()
}

/// The layout a Bloom filter created without `LAYOUT` gets.
pub fn layout() -> Layout {
    LAYOUTS
        .get(LAYOUT.get())
        .copied()
        .unwrap_or(Layout::Standard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_names_are_the_layouts() {
        let names: Vec<&str> = LAYOUT.names().iter().map(|n| n.to_str().unwrap()).collect();
        let layouts: Vec<&str> = LAYOUTS.iter().map(|l| l.name()).collect();
        assert_eq!(names, layouts);
        assert_eq!(layout(), Layout::Standard);
    }
}
