//! The one hash scheme of lcbloom, shared by Bloom filters and linear counters.
//!
//! Scheme 1 (the only one so far; its number is stored in every encoded value, so a value
//! written with scheme 1 is always read back with scheme 1):
//!
//! * Each item is hashed once with XXH3-128 over its raw bytes, under a 64-bit seed. The low
//!   64 bits are `h1`, the high 64 bits with the lowest bit forced to 1 are `h2`. XXH3's
//!   output does not depend on the SIMD path, so persisted positions are valid on every
//!   machine.
//! * The seed is 0 unless the value says otherwise: a Bloom filter, windowed or not, may
//!   carry a seed of its own (drawn at random when it is created, stored in its encoding,
//!   `bloom/codec.rs`, `bloom/window/codec.rs`), so that items crafted offline against one
//!   fixed function do not pile onto the same bits of every filter (docs/security.md).
//!   XXH3's seed 0 is its default, so seed 0 gives exactly the positions of values written
//!   before filters had seeds. Linear counters always use seed 0: any two counters must
//!   combine.
//! * A linear counter uses `h1` alone: position `reduce(h1, m)`, and in exact mode the
//!   fingerprints `reduce(h1, U)` for a multiple `U` of `m` (lc/counter.rs; its encoding
//!   version 1 kept the `h1` values themselves).
//! * Bloom probe `i` is `reduce(mix(h1 + i·h2), m)`. Double hashing gives k values from one hash;
//!   `mix` (the SplitMix64 finaliser) decorrelates them, because the range reduction keeps the
//!   high bits and two consecutive `h1 + i·h2` can share them (h2 close to a multiple of 2^64/q
//!   makes probes repeat with period q). Every sub-filter of a chain reuses the same probe values,
//!   so an item is hashed once however long the chain is.
//! * `reduce(x, m) = (x · m) >> 64` maps a uniform 64-bit value to `0..m` without a division and
//!   without the cycles that `x mod m` has when m is a multiple of a power of two (the flaw that
//!   makes RedisBloom's small filters miss their error rate).

use xxhash_rust::xxh3::xxh3_128_with_seed;

/// Stored in every encoded value; bump it (and keep the old code path) if anything above changes.
pub const HASH_SCHEME: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemHash {
    pub h1: u64,
    pub h2: u64,
}

impl ItemHash {
    /// The i-th probe value, before range reduction.
    #[inline(always)]
    pub fn probe(&self, i: u32) -> u64 {
        mix(self.h1.wrapping_add((i as u64).wrapping_mul(self.h2)))
    }
}

/// The item's hash under seed 0 (counters, and Bloom filters without a seed of their own).
#[inline(always)]
pub fn hash_item(item: &[u8]) -> ItemHash {
    hash_item_seeded(item, 0)
}

/// The item's hash under `seed` (a Bloom filter's own).
#[inline(always)]
pub fn hash_item_seeded(item: &[u8], seed: u64) -> ItemHash {
    let h = xxh3_128_with_seed(item, seed);
    ItemHash {
        h1: h as u64,
        h2: ((h >> 64) as u64) | 1,
    }
}

/// Maps a uniform 64-bit value onto `0..m`.
#[inline(always)]
pub fn reduce(x: u64, m: u64) -> u64 {
    ((x as u128 * m as u128) >> 64) as u64
}

/// The first value that `reduce(·, m)` maps to each `r < m`: `⌈r·2^64/m⌉`, without a division
/// per value (a 128-by-64-bit division takes several times as long as the three
/// multiplications). With `M = ⌊(2^128 − 1)/m⌋`, `⌊r·M/2^64⌋` falls short of `⌊r·2^64/m⌋` by
/// at most one (`r·2^64/m − r·M/2^64 < r/2^64 < 1`); the remainder tells which, and whether
/// the ceiling is one more.
#[derive(Clone, Copy)]
pub struct FirstOfReduced {
    m: u64,
    /// `M`'s upper and lower 64 bits.
    upper: u64,
    lower: u64,
}

impl FirstOfReduced {
    /// For `m ≥ 1`.
    pub fn new(m: u64) -> Self {
        let inverse = u128::MAX / u128::from(m.max(1));
        FirstOfReduced {
            m,
            upper: (inverse >> 64) as u64,
            lower: inverse as u64,
        }
    }

    /// `⌈r·2^64/m⌉`, for `r < m`.
    #[inline(always)]
    pub fn of(&self, r: u64) -> u64 {
        // `upper ≤ 2^64/m`, so `r·upper < 2^64` for r < m: no overflow.
        let floor = r * self.upper + ((u128::from(r) * u128::from(self.lower)) >> 64) as u64;
        if self.halves_apply() {
            return self.ceiling(floor);
        }
        let (r, m) = (u128::from(r), u128::from(self.m));
        let rest = (r << 64) - u128::from(floor) * m;
        let (floor, rest) = if rest >= m {
            (floor + 1, rest - m)
        } else {
            (floor, rest)
        };
        floor + u64::from(rest != 0)
    }

    /// `m` and `M`'s upper and lower 64 bits, for loops that spell `of_in_halves` out.
    pub fn parts(&self) -> (u64, u64, u64) {
        (self.m, self.upper, self.lower)
    }

    /// Whether [`FirstOfReduced::of_in_halves`] applies, and `of`'s remainder fits 64 bits:
    /// `m ≤ 2^63` (every counter's universe is at most 2^53).
    #[inline(always)]
    pub fn halves_apply(&self) -> bool {
        self.m <= 1 << 63
    }

    /// [`FirstOfReduced::of`] with the upper half of `r·lower` from 32-bit halves, where
    /// [`FirstOfReduced::halves_apply`]: only 64-bit operations, which a loop compiled for
    /// AVX-512 DQ does eight lanes at a time (a `u128` product keeps it one by one).
    #[inline(always)]
    pub fn of_in_halves(&self, r: u64) -> u64 {
        self.ceiling(r * self.upper + mul_high(r, self.lower))
    }

    /// `⌈r·2^64/m⌉` from `floor`, which falls short of `⌊r·2^64/m⌋` by at most one, for
    /// `m ≤ 2^63`: the remainder `r·2^64 − floor·m` is then below 2m, within 64 bits, which
    /// hold it whole.
    #[inline(always)]
    fn ceiling(&self, floor: u64) -> u64 {
        let rest = floor.wrapping_mul(self.m).wrapping_neg();
        let over = rest >= self.m;
        let rest = if over { rest - self.m } else { rest };
        floor + u64::from(over) + u64::from(rest != 0)
    }
}

/// The upper 64 bits of `a·b`, from the four products of their 32-bit halves.
#[inline(always)]
fn mul_high(a: u64, b: u64) -> u64 {
    const LOW: u64 = 0xffff_ffff;
    let (a0, a1, b0, b1) = (a & LOW, a >> 32, b & LOW, b >> 32);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    // The middle column's carry: at most three 32-bit values.
    let middle = (p00 >> 32) + (p01 & LOW) + (p10 & LOW);
    p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32)
}

#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `⌈r·2^64/m⌉` by a division.
    fn first_by_division(r: u64, m: u64) -> u64 {
        (u128::from(r) << 64).div_ceil(u128::from(m)) as u64
    }

    proptest::proptest! {
        /// The first value reduced to `r` is that of the division, for any `m`.
        #[test]
        fn first_of_reduced_is_the_division(m in 1u64.., r in proptest::num::u64::ANY) {
            let r = r % m;
            let first = FirstOfReduced::new(m).of(r);
            proptest::prop_assert_eq!(first, first_by_division(r, m));
            proptest::prop_assert_eq!(reduce(first, m), r);
            if first > 0 {
                proptest::prop_assert!(reduce(first - 1, m) < r);
            }
        }
    }

    proptest::proptest! {
        /// The halves' product is the `u128` one.
        #[test]
        fn mul_high_is_the_wide_product(a in proptest::num::u64::ANY, b in proptest::num::u64::ANY) {
            proptest::prop_assert_eq!(mul_high(a, b), ((u128::from(a) * u128::from(b)) >> 64) as u64);
        }

        /// `of_in_halves` is `of` wherever it applies.
        #[test]
        fn first_of_reduced_in_halves(m in 1u64..=1 << 63, r in proptest::num::u64::ANY) {
            let (first, r) = (FirstOfReduced::new(m), r % m);
            proptest::prop_assert!(first.halves_apply());
            proptest::prop_assert_eq!(first.of_in_halves(r), first.of(r));
        }
    }

    #[test]
    fn mul_high_at_the_edges() {
        let edges = [
            0,
            1,
            0xffff_ffff,
            1 << 32,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for a in edges {
            for b in edges {
                assert_eq!(
                    mul_high(a, b),
                    ((u128::from(a) * u128::from(b)) >> 64) as u64
                );
            }
        }
        assert!(!FirstOfReduced::new((1 << 63) + 1).halves_apply());
    }

    /// Where the remainder is 0, 1 or m − 1, at small and large `m` and powers of two.
    #[test]
    fn first_of_reduced_at_the_edges() {
        let ms = [
            1,
            2,
            3,
            7,
            1 << 20,
            (1 << 35) + 1,
            35_514_567_036,
            (1 << 63) - 1,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for m in ms {
            let first = FirstOfReduced::new(m);
            let near = |r: u64| [r.saturating_sub(1), r, r.saturating_add(1)];
            // r·2^64 ≡ 0 (mod m) where m divides r·2^64: r = m / gcd(m, 2^64) multiples.
            let step = m >> m.trailing_zeros();
            let twice = (u128::from(step) * 2 % u128::from(m)) as u64;
            let rs = [0, 1, m / 2, m - 1, step, twice, m - step];
            for r in rs.into_iter().flat_map(near).filter(|&r| r < m) {
                assert_eq!(first.of(r), first_by_division(r, m), "m {m} r {r}");
                if first.halves_apply() {
                    assert_eq!(first.of_in_halves(r), first.of(r), "m {m} r {r}");
                }
            }
        }
    }

    #[test]
    fn scheme_one_is_stable() {
        // Persisted filters depend on these exact values: this test must never change.
        let h = hash_item(b"lcbloom");
        assert_eq!(h, hash_item(b"lcbloom"));
        assert_eq!(h.h2 & 1, 1);
        let golden = (h.h1, h.h2, h.probe(0), h.probe(3));
        assert_eq!(golden, GOLDEN);
    }

    #[test]
    fn seed_zero_is_the_unseeded_hash_and_seeds_are_stable() {
        // Inputs of every XXH3 length class, the long one (> 240 bytes) included.
        for len in [0usize, 3, 16, 100, 200, 1000] {
            let item: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let plain = xxhash_rust::xxh3::xxh3_128(&item);
            let h = hash_item_seeded(&item, 0);
            assert_eq!((h.h1, h.h2), (plain as u64, ((plain >> 64) as u64) | 1));
            assert_ne!(hash_item_seeded(&item, 1), h);
        }
        // Persisted seeded filters depend on these exact values too.
        let h = hash_item_seeded(b"lcbloom", 0x5eed);
        assert_eq!((h.h1, h.h2, h.probe(3)), SEEDED_GOLDEN);
    }

    const SEEDED_GOLDEN: (u64, u64, u64) = (
        10963221617311494617,
        2619208278682962927,
        2969517647417411491,
    );

    const GOLDEN: (u64, u64, u64, u64) = (
        4959137413946441324,
        17075311261104412125,
        17991155700044602209,
        11135021546819530497,
    );

    #[test]
    fn reduce_stays_in_range() {
        for m in [1u64, 2, 7, 64, 1000, u64::MAX] {
            for x in [0u64, 1, u64::MAX / 2, u64::MAX] {
                assert!(reduce(x, m) < m);
            }
        }
    }

    #[test]
    fn probes_spread_over_small_filters() {
        // 10 000 items, 7 probes each, into 64 bits: every item must touch several distinct bits.
        for n in 0..10_000u32 {
            let h = hash_item(&n.to_le_bytes());
            let mut seen = 0u64;
            for i in 0..7 {
                seen |= 1 << reduce(h.probe(i), 64);
            }
            assert!(seen.count_ones() >= 3, "item {n} probes {seen:b}");
        }
    }
}
