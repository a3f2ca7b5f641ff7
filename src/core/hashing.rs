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

#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

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
