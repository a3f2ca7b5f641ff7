//! A counter's geometry: what every counter of the same parameters shares (the bitmap size `m`
//! and the limits of its modes), the sizing rule that gives `m`, and the linear-counting
//! estimator over an `m`-bit bitmap.
//!
//! # The estimator (Whang, Vander-Zanden, Taylor, ACM TODS 15(2), 1990)
//!
//! A bitmap of `m` bits, all zero at first; an item sets bit `reduce(h1, m)` (see
//! `crate::core::hashing`: XXH3-128 once, multiply-shift reduction). With `Z` bits still zero the
//! number of distinct items is estimated as
//!
//! ```text
//!     n̂ = −m · ln(Z / m)                              (rounded to the nearest integer)
//! ```
//!
//! and, at load `t = n/m`, the standard error of `n̂/n` is `sqrt(m · (e^t − t − 1)) / n`
//! (`standard_error` evaluates it at `t = n̂/m`). The bias, about `(e^t − t − 1)/2`
//! items, is negligible.
//!
//! # Sizing
//!
//! For a capacity `n` and a standard error `ε` at that capacity, `m` is the smallest integer with
//!
//! ```text
//!     m ≥ β · (e^t − t − 1),   t = n/m,   β = max(α², 1/(ε·t)²),   α² = 5
//! ```
//!
//! which reproduces Table II of the paper (the `α²` term keeps `Z` away from zero at capacity:
//! the fill-up probability stays negligible). The right-hand side only shrinks as `m` grows,
//! so a binary search finds the smallest such `m`. `bits_for(50_000, 0.01)` = 17,134 bits.
//!
//! The limits of the exact and sparse modes (counter.rs, "Three modes") follow from `m` alone;
//! [`Geometry`] holds them, interned: one copy per parameter set.

use super::header::{COUNT_SHIFT, DENSE_BITMAP, SKETCH_REGISTERS, SKETCH_STREAM, STREAM};
use super::levels::{precision_for, MAX_PRECISION, MIN_PRECISION, REGISTER_BITS};
use crate::core::alloc::size_class;
use crate::core::ef::Shape;
use crate::core::intern::{Interner, LastMade};
use std::sync::Arc;

/// α² of the sizing rule (the paper's choice that reproduces its Table II).
pub const ALPHA_SQUARED: f64 = 5.0;
/// Largest exact set, whatever the bitmap size (see "Three modes").
///
/// Warning: part of the encoding. Saved exact sets may hold this many fingerprints and the
/// decoder refuses more, so lowering it makes saved counters (RDB, AOF, DUMP) fail to load;
/// raising it changes which counts are exact and the fingerprints' universe. Change it only
/// with a new encoding version.
pub const EXACT_MAX: u64 = 8192;
/// The exact guarantee covers at least this many items, whatever `L` (see "Three modes").
const EXACT_GUARANTEED: u64 = 250;
/// `U ≥ C(L*, 2)` times this: 10^6 and a margin for `⌈2^64/U⌉` (part of the encoding).
const INVERSE_MISCOUNT: u64 = 1_000_100;
/// A sparse block never takes more (part of the state: a pure function of the set of items).
pub const SPARSE_MAX_BYTES: u64 = 4096;
// The header's count field holds every exact and sparse count.
const _: () = assert!(EXACT_MAX < 1 << (STREAM - COUNT_SHIFT as u64));
const _: () = assert!(SPARSE_MAX_BYTES * 8 < 1 << (STREAM - COUNT_SHIFT as u64));
/// Bitmap modes with fewer zero bits than this are reported as saturated.
pub const SATURATION_ZEROS: u64 = 10;
/// Largest bitmap considered by the sizing search (2^53 bits, 1 PiB): far beyond any memory
/// limit, it only keeps the arithmetic exact in f64.
pub const MAX_BITS: u64 = 1 << 53;

/// Smallest `m` satisfying the sizing rule, or `None` if the parameters are invalid or `m`
/// would exceed 2^53 bits.
pub fn bits_for(capacity: u64, error_rate: f64) -> Option<u64> {
    if capacity == 0 || !(error_rate > 0.0 && error_rate < 1.0) {
        return None;
    }
    let n = capacity as f64;
    let fits = |m: u64| {
        let t = n / m as f64;
        let beta = ALPHA_SQUARED.max(1.0 / (error_rate * t).powi(2));
        m as f64 >= beta * (t.exp_m1() - t)
    };
    let mut hi = 1u64;
    while !fits(hi) {
        if hi >= MAX_BITS {
            return None;
        }
        hi = (hi * 2).min(MAX_BITS);
    }
    let mut lo = hi / 2; // fits(lo) is false (or lo == 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Bytes a block of `words` words takes from the allocator, its size class: what
/// `max-memory-per-key` is checked against, as `LC.INFO`'s Size and `MEMORY USAGE` count it.
pub fn charged_bytes(words: u64) -> u64 {
    size_class(words * 8)
}

/// How many fingerprints a counter of `m` bits keeps before leaving exact mode.
pub fn exact_limit(m: u64) -> u64 {
    (m / 64).min(EXACT_MAX)
}

/// Words of a dense block.
pub fn dense_words(m: u64) -> u64 {
    DENSE_BITMAP as u64 + m.div_ceil(64)
}

/// The dense size the sparse mode is measured against: the bitmap and one header word, as
/// when encoding version 2 was defined. The estimate word is left out so that which mode a
/// set of items gives (part of the state, a pure function of the set) never depends on it.
pub(super) fn dense_reference_bytes(m: u64) -> u64 {
    size_class((1 + m.div_ceil(64)) * 8)
}

/// Words of an exact or sparse block whose stream has this shape.
pub fn stream_words(shape: Shape) -> u64 {
    (STREAM + shape.bits()).div_ceil(64)
}

/// `n̂ = m · ln(m / Z)`, with `Z = 0` taken as 1 (see "Saturation"), and never below the
/// `m − Z` bits set: `m · ln m` is below `m` for a bitmap of one or two bits.
pub fn estimate(m: u64, zeros: u64) -> u64 {
    let z = zeros.max(1) as f64;
    let n = (m as f64 * (m as f64 / z).ln()).round() as u64;
    n.max(m.saturating_sub(zeros))
}

/// What every counter of the same parameters shares (interned: one copy per parameter set).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Geometry {
    pub capacity: u64,
    /// The error rate's bits (`f64` is not `Hash`).
    error_rate: u64,
    pub m: u64,
    /// `U / m` (counter.rs, "Three modes").
    pub q: u64,
    pub exact_limit: u64,
    pub sparse_limit: u64,
    /// The sketch's precision `p` (levels.rs: `2^p` registers), from the error rate.
    pub precision: u32,
    /// The most tokens a sketch lists before it turns into registers.
    pub token_limit: u64,
}

static GEOMETRIES: Interner<Geometry> = Interner::new();

/// The geometry [`Geometry::reserved`] made last, by its capacity and the rate's bits.
static RESERVED: LastMade<(u64, u64), Geometry> = LastMade::new();

impl Geometry {
    /// The shared geometry of these parameters (validated by the caller, `m ≥ 1`).
    pub fn interned(capacity: u64, error_rate: f64, m: u64) -> Arc<Geometry> {
        GEOMETRIES.intern(Geometry::new(capacity, error_rate, m))
    }

    /// The shared geometry of a counter reserved for `capacity` items at `error_rate`: `m`
    /// from the sizing rule, `None` when no `m` below `MAX_BITS` meets it. The sizing search
    /// evaluates `exp_m1` some forty times, which would be most of a create's work, and
    /// counters are mostly made alike (the configured defaults, key after key), so the last
    /// one made is remembered.
    pub fn reserved(capacity: u64, error_rate: f64) -> Option<Arc<Geometry>> {
        RESERVED
            .get_or_make((capacity, error_rate.to_bits()), || {
                let m = bits_for(capacity, error_rate).filter(|&m| m < MAX_BITS);
                m.map(|m| Self::interned(capacity, error_rate, m)).ok_or(())
            })
            .ok()
    }

    fn new(capacity: u64, error_rate: f64, m: u64) -> Geometry {
        let exact_limit = exact_limit(m);
        let covered = exact_limit.max(EXACT_GUARANTEED);
        let pairs = covered * (covered - 1) / 2;
        Geometry {
            capacity,
            error_rate: error_rate.to_bits(),
            m,
            q: (pairs * INVERSE_MISCOUNT).div_ceil(m).max(1),
            exact_limit,
            sparse_limit: sparse_limit(m),
            precision: precision_for(error_rate),
            token_limit: token_limit(precision_for(error_rate)),
        }
    }

    pub fn error_rate(&self) -> f64 {
        f64::from_bits(self.error_rate)
    }

    /// The fingerprints' universe `U = m·q`.
    pub fn universe(&self) -> u64 {
        self.m * self.q
    }

    pub fn exact_limit(&self) -> u64 {
        self.exact_limit
    }

    /// The most bytes a counter of this geometry grows to: its registers, or its exact set at
    /// its limit where that is larger (counters reserved for large capacities: up to 8,192
    /// fingerprints). Token lists stay in smaller size classes than the registers
    /// (`token_limit`); only saved bitmaps are larger, and are weighed by their own bitmap.
    pub fn most_bytes(&self) -> u64 {
        let exact = stream_words(Shape::new(self.exact_limit, self.universe()));
        charged_bytes(registers_words(self.precision)).max(charged_bytes(exact))
    }

    pub fn sparse_limit(&self) -> u64 {
        self.sparse_limit
    }
}

/// The most set bits a sparse counter of `m` bits holds: the largest `k` such that every
/// sparse block of up to `k` positions is in a smaller size class than the dense block and
/// within `SPARSE_MAX_BYTES`. A stream's size grows with `k` within each run of equal `l` (see
/// `ef.rs`), so each run needs one division.
pub fn sparse_limit(m: u64) -> u64 {
    let dense = dense_reference_bytes(m);
    let largest = SPARSE_MAX_BYTES.min(dense - 1);
    // The largest size class not above `largest` (classes are multiples of 8).
    let mut below = largest;
    while size_class(below) > largest {
        below -= 8;
    }
    let Some(budget) = (size_class(below) * 8).checked_sub(STREAM) else {
        return 0;
    };
    let mut k = 1;
    while k <= m {
        let shape = Shape::new(k, m);
        if shape.bits() > budget {
            return k - 1;
        }
        let run_end = (m >> shape.l).min(m);
        let most = (budget - shape.buckets) / (shape.l as u64 + 1);
        if most < run_end {
            return most;
        }
        k = run_end + 1;
    }
    m
}

/// The universe of a sketch's tokens at precision `p`: `index·256 + level`.
pub const fn token_universe(p: u32) -> u64 {
    1 << (p + 8)
}

/// Words of a sketch block of `2^p` registers.
pub fn registers_words(p: u32) -> u64 {
    SKETCH_REGISTERS as u64 + (REGISTER_BITS << p).div_ceil(64)
}

/// Words of a sketch block listing tokens in this shape.
pub fn tokens_words(shape: Shape) -> u64 {
    (SKETCH_STREAM + shape.bits()).div_ceil(64)
}

/// The most tokens listed at precision `p`: every list up to that many is in a smaller size
/// class than the registers and within `SPARSE_MAX_BYTES` (which bounds an add's work, as
/// for the sparse mode). Warning: part of the encoding (a saved token list is at most this
/// long, longer ones are registers); `limits_of_the_sketch_encoding` pins it.
pub fn token_limit(p: u32) -> u64 {
    static LIMITS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    LIMITS.get_or_init(|| (0..=MAX_PRECISION).map(search_token_limit).collect())[p as usize]
}

fn search_token_limit(p: u32) -> u64 {
    if p < MIN_PRECISION {
        return 0;
    }
    let registers = size_class(registers_words(p) * 8);
    let fits = |k: u64| {
        let bytes = size_class(tokens_words(Shape::new(k, token_universe(p))) * 8);
        bytes < registers && bytes <= SPARSE_MAX_BYTES
    };
    let mut k = 0;
    while fits(k + 1) {
        k += 1;
    }
    k
}

/// Estimated standard error of `n̂/n` for an estimate of `n` over `m` bits (see "The estimator").
pub fn standard_error(m: u64, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let m = m as f64;
    let t = n as f64 / m;
    (m * (t.exp_m1() - t)).sqrt() / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hashing::reduce;
    use proptest::prelude::*;

    /// A full bitmap of one or two bits counts its bits, not `m · ln m` (0 and 1): a saved
    /// bitmap of one bit, set, counted 0 (found by the `lc_value` fuzz target).
    #[test]
    fn a_full_bitmap_counts_at_least_its_bits() {
        assert_eq!(estimate(1, 0), 1);
        assert_eq!(estimate(2, 0), 2);
        assert_eq!(estimate(2, 1), 1);
        for m in [3u64, 10, 5329] {
            for zeros in 0..m.min(20) {
                assert!(estimate(m, zeros) >= m - zeros, "{m} {zeros}");
            }
        }
    }

    /// Reserving remembers the last geometry made: the same parameters again give that one,
    /// other parameters their own, whatever came in between, and the sizing rule's `m`.
    #[test]
    fn reserved_geometries_follow_their_parameters() {
        let params = [
            (50_000, 0.01),
            (1_000, 0.05),
            (50_000, 0.01),
            (50_000, 0.02),
        ];
        let made: Vec<Arc<Geometry>> = params
            .iter()
            .chain(&params)
            .map(|&(n, rate)| Geometry::reserved(n, rate).unwrap())
            .collect();
        let of = |i: usize| params[i % params.len()];
        for (i, g) in made.iter().enumerate() {
            let (n, rate) = of(i);
            assert_eq!(
                (g.capacity, g.error_rate(), g.m),
                (n, rate, bits_for(n, rate).unwrap())
            );
            for (j, h) in made.iter().enumerate() {
                assert_eq!(Arc::ptr_eq(g, h), of(i) == of(j), "{i} {j}");
            }
        }
        assert!(Geometry::reserved(u64::MAX, 1e-9).is_none());
        assert!(Geometry::reserved(10, 0.0).is_none());
    }

    /// The sketch's limits that saved payloads depend on (codec.rs, version 3): changing any
    /// of them needs a new encoding version.
    #[test]
    fn limits_of_the_sketch_encoding() {
        let limits: Vec<u64> = (MIN_PRECISION..=MAX_PRECISION).map(token_limit).collect();
        assert_eq!(
            limits,
            [
                36, 82, 173, 393, 832, 1_417, 2_880, 3_544, 3_150, 2_835, 2_577, 2_362, 2_180,
                2_026, 1_900, 1_788, 1_688
            ]
        );
        assert_eq!(registers_words(11), 5 + 864);
    }

    const PAPER_TABLE: [(u64, u64); 8] = [
        (100, 5_034),
        (1_000, 5_329),
        (10_000, 7_960),
        (50_000, 17_134),
        (100_000, 26_729),
        (1_000_000, 154_171),
        (10_000_000, 1_096_582),
        (100_000_000, 8_571_013),
    ];

    #[test]
    fn sizing_reproduces_the_papers_table() {
        for (n, m) in PAPER_TABLE {
            assert_eq!(bits_for(n, 0.01), Some(m), "capacity {n}");
        }
    }

    #[test]
    fn sizing_rejects_bad_parameters() {
        assert_eq!(bits_for(0, 0.01), None);
        assert_eq!(bits_for(10, 0.0), None);
        assert_eq!(bits_for(10, 1.0), None);
        assert_eq!(bits_for(10, f64::NAN), None);
        assert_eq!(bits_for(u64::MAX, 1e-9), None);
        assert!(bits_for(1, 0.999).unwrap() >= 1);
    }

    #[test]
    fn the_exact_guarantee_holds_for_every_size() {
        let mut m = 1u64;
        while m < 1 << 40 {
            let g = Geometry::new(1, 0.5, m);
            let covered = g.exact_limit.max(EXACT_GUARANTEED) as f64;
            let pairs = covered * (covered - 1.0) / 2.0;
            let bound = pairs / g.universe() as f64 + pairs / 2f64.powi(64);
            assert!(bound < 1e-6, "m {m}: {bound}");
            assert_eq!(g.universe() % m, 0);
            for h in [0u64, 1, u64::MAX, u64::MAX / 3, 0x1234_5678_9abc_def0] {
                assert_eq!(reduce(h, g.universe()) / g.q, reduce(h, m), "m {m}");
            }
            m = m * 5 / 4 + 1;
        }
    }

    proptest! {
        #[test]
        fn fingerprints_name_positions(h in any::<u64>(), m in 1u64..10_000_000) {
            let g = Geometry::new(1, 0.5, m);
            prop_assert_eq!(reduce(h, g.universe()) / g.q, reduce(h, m));
        }
    }

    /// sparse_limit against a brute-force search, and exact sets at their limit never larger
    /// than the bitmap.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn mode_limits_match_their_definitions() {
        let class_of = |shape: Shape| size_class(stream_words(shape) * 8);
        for m in (1..3_000).chain([17_134, 26_729, 154_171, 1_096_582]) {
            let dense = dense_reference_bytes(m);
            let fits = |k: u64| {
                let c = class_of(Shape::new(k, m));
                c < dense && c <= SPARSE_MAX_BYTES
            };
            let brute = (1..=m).find(|&k| !fits(k)).map_or(m, |k| k - 1);
            let g = Geometry::new(1, 0.5, m);
            assert_eq!(g.sparse_limit, brute, "m {m}");
            let exact = class_of(Shape::new(g.exact_limit, g.universe()));
            assert!(
                g.exact_limit == 0 || exact <= dense,
                "m {m}: exact {exact} > dense {dense}"
            );
        }
    }

    /// The README's sizing table, row by row: capacity, error rate, bits, bitmap bytes, exact
    /// up to (items), sparse up to (set bits).
    #[test]
    fn sizing_table() {
        let table = [
            (1_000, 0.02, 1_565, 200, 24, 372),
            (1_000, 0.01, 5_329, 672, 83, 1_253),
            (10_000, 0.01, 7_960, 1_000, 124, 1_717),
            (50_000, 0.02, 10_928, 1_368, 170, 2_494),
            (50_000, 0.01, 17_134, 2_144, 267, 4_024),
            (50_000, 0.005, 34_491, 4_312, 538, 8_039),
            (100_000, 0.01, 26_729, 3_344, 417, 5_955),
            (1_000_000, 0.01, 154_171, 19_272, 2_408, 4_654),
            (10_000_000, 0.01, 1_096_582, 137_080, 8_192, 3_162),
        ];
        for (n, e, bits, bytes, exact, sparse) in table {
            let m = bits_for(n, e).unwrap();
            let g = Geometry::new(n, e, m);
            assert_eq!(
                (m, m.div_ceil(64) * 8, g.exact_limit, g.sparse_limit),
                (bits, bytes, exact, sparse),
                "capacity {n}, error {e}"
            );
        }
    }
}
