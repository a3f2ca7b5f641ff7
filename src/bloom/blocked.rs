//! The blocked ("cache-local") layout of a Bloom filter: all k probes of an item fall in one
//! 64-byte block, so a lookup or an add in a filter far larger than the caches costs one cache
//! miss instead of k (RocksDB's FastLocalBloom and Parquet's split-block filters do the same).
//! It is opt-in per filter: it needs some more bits than the standard layout for the same rate.
//!
//! Layout and probes (layout 1 of encoding version 2, `codec.rs`; hash scheme 1, `hashing.rs`,
//! whose outputs it reuses without changing them):
//! * The filter is B blocks of 512 bits (8 words, 64-byte aligned: `words.rs`), m = 512·B.
//! * An item's block is `reduce(h1, B)`.
//! * Its k bit positions inside the block are 9-bit fields, 7 per 64-bit word, read from the
//!   lowest bits up: first of `h2 >> 1` (h2's lowest bit is always 1), then of `probe(1)`,
//!   `probe(2)`, … (the standard layout's probe values, see `hashing.rs`). Positions may repeat,
//!   like the standard layout's probes; the sizing below counts that.
//!
//! Sizing. A query for a non-member lands in a uniformly chosen block. That block holds L
//! items, L ~ Binomial(n, 1/B) (Poisson(λ = n/B) for large B), and after L·k uniform throws
//! into its 512 bits the chance that the query's k probes all hit set bits is
//! f_k(L) = E[(X_L/512)^k], X_L being the number of distinct bits set. So the false-positive
//! rate of a filter holding n items is the mixture over block loads
//!
//!   FP(n, B, k) = Σ_L P(L) · f_k(L).
//!
//! f_k(L) is computed exactly (the occupancy dynamic program of `filter.rs`, 512 states) and
//! P(L) as the binomial, so FP is exact for every n and B, not an approximation that holds for
//! large filters only. FP grows with the load, so for each k the smallest B with FP ≤ p is found
//! by bisection, and the k needing the fewest blocks wins (k near log2(1/p), a little below the
//! standard layout's: a crowded block loses more to an extra probe). The overloaded blocks of
//! the Poisson tail are what costs extra bits: the standard layout sees only the average fill.
//!
//! FP(n, B, k) is the mean over all filters of that shape; one filter's rate is the mean of its
//! B blocks' rates as their loads and bits fell, which spreads around it by
//! √(Var[(X_L/512)^k] / B) (the second moment is the same mixture with 2k probes). A filter of
//! few blocks can miss p by much more than a measurement resolves. So sizing keeps the mean
//! plus three of these standard deviations within 95% of p (`SPREAD`, `MARGIN`): every filter,
//! measured at capacity over enough non-members to resolve 5% of p, stays ≤ p. For n = 10^4
//! at 0.001 the mean is then 77% of p; for n = 2^30 95%, where the spread vanishes.
//! The rule applies to new sub-filters: each one's m and k are in its encoding, so filters
//! sized by an earlier rule load and answer as they were.
//!
//! Bits per item at capacity (large n), from `size` (a unit test checks the rows):
//!
//! | rate p  | standard (k) | blocked (k) | blocked ÷ standard |
//! |---------|--------------|-------------|--------------------|
//! | 0.1     | 4.81 (3)     | 4.95 (3)    | 1.03               |
//! | 0.05    | 6.25 (4)     | 6.44 (4)    | 1.03               |
//! | 0.01    | 9.62 (6)     | 10.04 (6)   | 1.04               |
//! | 0.005   | 11.05 (7)    | 11.66 (7)   | 1.06               |
//! | 0.001   | 14.42 (9)    | 15.68 (9)   | 1.09               |
//! | 0.00055 | 15.65 (10)   | 17.27 (10)  | 1.10               |
//! | 1e-4    | 19.23 (12)   | 22.19 (12)  | 1.15               |
//! | 1e-5    | 24.04 (15)   | 29.86 (14)  | 1.24               |
//! | 1e-6    | 28.85 (18)   | 39.06 (16)  | 1.35               |
//! | 1e-9    | 43.27 (27)   | 80.70 (22)  | 1.87               |
//!
//! (n = 2^30; 0.00055 is the first sub-filter of a scaling 0.001 filter.) Up to 1e-4 the extra
//! memory is at most 16%; below, the Poisson tail dominates and the standard layout is the
//! better choice.
//!
//! Measured false-positive rates match the model (a test at 200,000 items; the benchmark in
//! docs/BENCHMARKS.md at 0.001 / 200,000,000 over 1,000,000 non-members).

use super::fp::{Occupancy, SizeError, MAX_BITS, MAX_HASHES};
use super::words::{Line, WordRead, WordWrite};
use crate::core::batch::prefetch_line;
use crate::core::hashing::{reduce, ItemHash};

/// Bits in a block: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;
/// Bytes in a block, and the alignment of a blocked filter's words.
pub const BLOCK_BYTES: usize = 64;
const BLOCK_WORDS: usize = 8;
/// 9-bit positions per 64-bit source word.
const FIELDS_PER_WORD: u32 = 7;

/// The block an item's probes fall in.
#[inline(always)]
fn block_of<W: WordRead + ?Sized>(words: &W, hash: &ItemHash) -> usize {
    let blocks = (words.words() / BLOCK_WORDS) as u64;
    reduce(hash.h1, blocks) as usize
}

/// The item's k bit positions inside its block (0..512), in order.
#[inline(always)]
fn positions(hash: &ItemHash, k: u32) -> impl Iterator<Item = u64> + '_ {
    let mut source = hash.h2 >> 1;
    let (mut left, mut next) = (FIELDS_PER_WORD, 1);
    (0..k).map(move |_| {
        if left == 0 {
            source = hash.probe(next);
            next += 1;
            left = FIELDS_PER_WORD;
        }
        let bit = source & 511;
        source >>= 9;
        left -= 1;
        bit
    })
}

/// The item's k bits inside its block, as a block-sized mask.
#[inline(always)]
fn mask(hash: &ItemHash, k: u32) -> [u64; BLOCK_WORDS] {
    let mut mask = [0u64; BLOCK_WORDS];
    for bit in positions(hash, k) {
        mask[bit as usize / 64] |= 1 << (bit % 64);
    }
    mask
}

/// Whether all the item's bits are set.
#[inline]
pub fn contains<W: WordRead + ?Sized>(words: &W, hash: &ItemHash, k: u32) -> bool {
    let block = words.line(block_of(words, hash));
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        return unsafe { lanes::contains(block, hash, k) };
    }
    contains_in(block, hash, k)
}

/// Sets the item's bits; whether any was zero.
#[inline]
pub fn set<W: WordWrite + ?Sized>(words: &mut W, hash: &ItemHash, k: u32) -> bool {
    let block = words.line_mut(block_of(words, hash));
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        return unsafe { lanes::set(block, hash, k) };
    }
    set_in(block, hash, k)
}

/// `contains` on the item's block, its mask built a word at a time.
#[inline(always)]
fn contains_in(block: &Line, hash: &ItemHash, k: u32) -> bool {
    let mask = mask(hash, k);
    block
        .iter()
        .zip(mask)
        .fold(0, |missing, (word, bits)| missing | (bits & !word))
        == 0
}

/// `set` on the item's block, its mask built a word at a time.
#[inline(always)]
fn set_in(block: &mut Line, hash: &ItemHash, k: u32) -> bool {
    let mask = mask(hash, k);
    let mut changed = 0;
    for (word, bits) in block.iter_mut().zip(mask) {
        changed |= bits & !*word;
        *word |= bits;
    }
    changed != 0
}

/// The mask built in two 256-bit halves: each position shifts a one into every lane by its
/// distance from the lane's first bit (`vpsllvq` gives zero for distances outside 0..64,
/// negative ones included), so no lane is picked by an index and nothing goes through memory.
/// The word-at-a-time mask ORs each bit into a word chosen by the position, a load and a
/// store each, one waiting on the other where two bits share a word: 2–3× the time of this in
/// process, on AMD EPYC.
#[cfg(target_arch = "x86_64")]
mod lanes {
    use super::{positions, ItemHash, Line};
    use std::arch::x86_64::*;

    /// The item's mask, words 0–3 and 4–7.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mask(hash: &ItemHash, k: u32) -> (__m256i, __m256i) {
        let one = _mm256_set1_epi64x(1);
        let (low_starts, high_starts) = (
            _mm256_setr_epi64x(0, 64, 128, 192),
            _mm256_setr_epi64x(256, 320, 384, 448),
        );
        let (mut low, mut high) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for bit in positions(hash, k) {
            let bit = _mm256_set1_epi64x(bit as i64);
            let low_bit = _mm256_sllv_epi64(one, _mm256_sub_epi64(bit, low_starts));
            let high_bit = _mm256_sllv_epi64(one, _mm256_sub_epi64(bit, high_starts));
            low = _mm256_or_si256(low, low_bit);
            high = _mm256_or_si256(high, high_bit);
        }
        (low, high)
    }

    /// `super::contains_in` with AVX2 (callers without it enabled must check the CPU).
    #[target_feature(enable = "avx2")]
    pub fn contains(block: &Line, hash: &ItemHash, k: u32) -> bool {
        let (low, high) = mask(hash, k);
        // SAFETY: the two loads read the block's 8 words.
        unsafe {
            let words = block.as_ptr();
            let missing = _mm256_or_si256(
                _mm256_andnot_si256(_mm256_loadu_si256(words.cast()), low),
                _mm256_andnot_si256(_mm256_loadu_si256(words.add(4).cast()), high),
            );
            _mm256_testz_si256(missing, missing) == 1
        }
    }

    /// `super::set_in` with AVX2 (callers without it enabled must check the CPU).
    #[target_feature(enable = "avx2")]
    pub fn set(block: &mut Line, hash: &ItemHash, k: u32) -> bool {
        let (low, high) = mask(hash, k);
        // SAFETY: the loads and stores touch the block's 8 words, which `block` borrows
        // mutably.
        unsafe {
            let words = block.as_mut_ptr();
            let (a, b) = (
                _mm256_loadu_si256(words.cast()),
                _mm256_loadu_si256(words.add(4).cast()),
            );
            let missing =
                _mm256_or_si256(_mm256_andnot_si256(a, low), _mm256_andnot_si256(b, high));
            _mm256_storeu_si256(words.cast(), _mm256_or_si256(a, low));
            _mm256_storeu_si256(words.add(4).cast(), _mm256_or_si256(b, high));
            _mm256_testz_si256(missing, missing) == 0
        }
    }
}

/// Starts loading the item's block.
#[inline]
pub fn prefetch<W: WordRead + ?Sized>(words: &W, hash: &ItemHash) {
    let start = block_of(words, hash) * BLOCK_WORDS;
    if start < words.words() {
        // SAFETY: in range, just checked.
        prefetch_line(unsafe { words.word_ptr_unchecked(start) });
    }
}

/// Bits (a multiple of 512) and hashes of the smallest blocked filter holding `capacity` items
/// at FP ≤ `error_rate` (already checked to be in [MIN_ERROR_RATE, 1)).
pub fn size(capacity: u64, error_rate: f64) -> Result<(u64, u32), SizeError> {
    let n = capacity.max(1);
    let ln2 = std::f64::consts::LN_2;
    // The standard layout's optimum: blocked filters need at least about as many bits.
    let standard_bits = -(n as f64) * error_rate.ln() / (ln2 * ln2);
    let start_k = ((-error_rate.log2()).round() as u32).clamp(1, MAX_HASHES);
    let mut best: Option<(u64, u32)> = None;
    // Scan k down then up from log2(1/p) while the block count keeps improving.
    for step in [-1i64, 1] {
        let mut k = start_k as i64 + if step > 0 { 1 } else { 0 };
        let mut worse = 0;
        while (1..=MAX_HASHES as i64).contains(&k) && worse < 2 {
            let blocks = min_blocks(n, error_rate, k as u32, standard_bits)?;
            match best {
                Some((b, _)) if b <= blocks => worse += 1,
                _ => {
                    best = Some((blocks, k as u32));
                    worse = 0;
                }
            }
            k += step;
        }
    }
    let (blocks, k) = best.ok_or(SizeError::TooLarge)?;
    Ok((blocks * BLOCK_BITS, k))
}

/// The smallest block count whose rate, `SPREAD` standard deviations above FP(n, B, k), is
/// ≤ p, by bisection between a count known (or taken) to be too small and one that is large
/// enough.
fn min_blocks(n: u64, p: f64, k: u32, standard_bits: f64) -> Result<u64, SizeError> {
    let max_blocks = MAX_BITS / BLOCK_BITS;
    let mut loads = LoadFp::new(k);
    // Below 80% of the standard optimum no blocked filter reaches p: treat it as too small.
    let mut low = ((standard_bits * 0.8 / BLOCK_BITS as f64) as u64).min(max_blocks);
    let mut high = (low + 1).max((standard_bits / BLOCK_BITS as f64).ceil() as u64);
    let aim = p * (1.0 - MARGIN);
    let within = |loads: &mut LoadFp, blocks| loads.moments(n, blocks, aim).1 <= aim;
    while !within(&mut loads, high) {
        if high >= max_blocks {
            return Err(SizeError::TooLarge);
        }
        low = high;
        high = (high + high / 4 + 1).min(max_blocks);
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if within(&mut loads, mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Ok(high)
}

/// Standard deviations of a filter's own false-positive rate that sizing keeps below the rate
/// it aims for (see the top of this file).
const SPREAD: f64 = 3.0;
/// The part of the requested rate sizing leaves free: a filter aims for 95% of p, so that its
/// rate measured at capacity over 3,600/p non-members (which resolves 5% of p at three standard
/// deviations) is ≤ p.
const MARGIN: f64 = 0.05;

/// f_k(L) for L = 0, 1, 2, … computed on demand, with the second moment of a block's rate.
struct LoadFp {
    k: u32,
    occupancy: Occupancy,
    /// f[L] = (f_k(L), E[(X_L/512)^2k]).
    f: Vec<(f64, f64)>,
}

impl LoadFp {
    fn new(k: u32) -> Self {
        Self {
            k,
            occupancy: Occupancy::new(BLOCK_BITS),
            f: vec![(0.0, 0.0)],
        }
    }

    /// (f_k(load), its second moment); (1, 1) once the block is all but certainly full.
    fn at(&mut self, load: u64) -> (f64, f64) {
        while (self.f.len() as u64) <= load {
            let last = self.f.last().expect("f holds f(0)").0;
            if last >= 1.0 - 1e-15 {
                return (1.0, 1.0);
            }
            for _ in 0..self.k {
                self.occupancy.throw();
            }
            let k = self.k;
            self.f
                .push((self.occupancy.fp(k), self.occupancy.fp(2 * k)));
        }
        self.f[load as usize]
    }

    /// What sizing holds to p: FP(n, B, k), exact to far below p, and `SPREAD` standard deviations of the rate of
    /// one filter (its blocks' loads and bits as they fell), `(mean, bound)`; stops early once
    /// the mean exceeds `p`.
    fn moments(&mut self, n: u64, blocks: u64, p: f64) -> (f64, f64) {
        if blocks == 0 {
            return (1.0, 1.0);
        }
        if blocks == 1 {
            let (mean, second) = self.at(n);
            return (mean, mean + SPREAD * (second - mean * mean).max(0.0).sqrt());
        }
        let q = 1.0 / blocks as f64;
        let lambda = n as f64 * q;
        let odds = (q / (1.0 - q)).ln();
        // ln P(L), L ~ Binomial(n, q), by the ratio P(L+1)/P(L) = (n-L)/(L+1) · q/(1-q).
        let mut ln_p = n as f64 * (-q).ln_1p();
        let negligible = (p * 1e-9).ln();
        let (mut mean, mut second) = (0.0, 0.0);
        for load in 0..=n {
            if ln_p > -745.0 {
                let (f, f2) = self.at(load);
                mean += ln_p.exp() * f;
                second += ln_p.exp() * f2;
                if mean > p {
                    return (mean, mean);
                }
            }
            if load as f64 > lambda && ln_p < negligible {
                break;
            }
            ln_p += ((n - load) as f64 / (load + 1) as f64).ln() + odds;
        }
        // The blocks' rates are (all but) independent: the filter's is their mean.
        let spread = ((second - mean * mean).max(0.0) / blocks as f64).sqrt();
        (mean, mean + SPREAD * spread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::filter::{measured_fp, FilterParams, Layout};
    use crate::core::hashing::hash_item;

    #[cfg(target_arch = "x86_64")]
    proptest::proptest! {
        /// The AVX2 mask answers and writes as the word-at-a-time one, for every k a filter
        /// can have and blocks of any fill.
        #[test]
        fn both_masks_agree(
            h1 in proptest::prelude::any::<u64>(),
            h2 in proptest::prelude::any::<u64>(),
            k in 1u32..=MAX_HASHES,
            block in proptest::prelude::any::<[u64; 8]>(),
            dense in proptest::prelude::any::<[u64; 8]>(),
        ) {
            if !std::is_x86_feature_detected!("avx2") {
                return Ok(());
            }
            let hash = ItemHash { h1, h2: h2 | 1 };
            // Blocks from empty to nearly full, and one holding the item's own bits.
            let mut own = [0u64; 8];
            set_in(&mut own, &hash, k);
            for start in [block, std::array::from_fn(|i| block[i] | dense[i]), own, [0; 8]] {
                let (mut a, mut b) = (start, start);
                // SAFETY: the CPU has AVX2 (checked above).
                let (found, changed) = unsafe { (lanes::contains(&a, &hash, k), lanes::set(&mut a, &hash, k)) };
                proptest::prop_assert_eq!(found, contains_in(&b, &hash, k));
                proptest::prop_assert_eq!(changed, set_in(&mut b, &hash, k));
                proptest::prop_assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn probes_stay_in_one_block() {
        let words = vec![0u64; 8 * 1000];
        for i in 0..10_000u32 {
            let h = hash_item(&i.to_le_bytes());
            assert!(block_of(&words[..], &h) < 1000);
            // Probes past the first seven come from probe(1), probe(2), ...
            let bits: u32 = mask(&h, 20).iter().map(|w| w.count_ones()).sum();
            assert!((15..=20).contains(&bits), "item {i}: {bits} distinct bits");
        }
    }

    #[test]
    fn the_probe_derivation_is_stable() {
        // Persisted blocked filters depend on these exact positions: never change this test.
        let h = hash_item(b"lcbloom");
        let words = vec![0u64; 8 * 1000];
        assert_eq!(block_of(&words[..], &h), 268);
        assert_eq!(
            mask(&h, 9),
            [
                256,
                8796093022208,
                0,
                70368744177952,
                0,
                0,
                256,
                72057595145224192
            ]
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn sizing_meets_the_rate_exactly_at_every_capacity() {
        for &p in &[0.5, 0.1, 0.01, 0.001, 0.00055, 1e-4, 1e-6] {
            for &n in &[1u64, 2, 10, 100, 1000, 50_000, 200_000_000] {
                let (bits, k) = size(n, p).unwrap();
                let blocks = bits / BLOCK_BITS;
                let (fp, bound) = LoadFp::new(k).moments(n, blocks, 1.0);
                let aim = p * (1.0 - MARGIN);
                assert!(
                    fp <= bound && bound <= aim,
                    "n={n} p={p}: fp {fp}, bound {bound}"
                );
                // Fewer blocks miss the rate (the size is the smallest for this k, to within
                // the precision that matters for a huge filter).
                if blocks > 1 {
                    let fewer = LoadFp::new(k).moments(n, blocks - 1 - blocks / 100_000, 1.0);
                    assert!(fewer.1 > aim, "n={n} p={p}: {blocks} blocks not minimal");
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn the_header_table_holds() {
        // (p, standard bits per item and k, blocked bits per item and k) at n = 2^30; the
        // standard k is a hash fewer than the best integer wherever that costs under 0.5%.
        let rows = [
            (0.1, 4.81, 3, 4.95, 3),
            (0.01, 9.62, 6, 10.04, 6),
            (0.001, 14.42, 9, 15.68, 9),
            (0.00055, 15.65, 10, 17.27, 10),
            (1e-4, 19.23, 12, 22.19, 12),
            (1e-6, 28.85, 18, 39.06, 16),
        ];
        let n = 1u64 << 30;
        for (p, standard, standard_k, blocked, k) in rows {
            let s = FilterParams::for_capacity(n, p).unwrap();
            let b = FilterParams::for_layout(Layout::Blocked, n, p).unwrap();
            let per_item = |bits: u64| (bits as f64 / n as f64 * 100.0).round() / 100.0;
            assert_eq!(
                (per_item(s.bits), s.hashes, per_item(b.bits), b.hashes),
                (standard, standard_k, blocked, k)
            );
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn poisson_limit_matches_the_mixture() {
        // For many blocks the binomial mixture is the Poisson one: check against a direct sum.
        let (k, lambda) = (8u32, 30.0f64);
        let mut loads = LoadFp::new(k);
        let mut poisson = 0.0;
        let mut term = (-lambda).exp();
        for l in 0..200u64 {
            poisson += term * loads.at(l).0;
            term *= lambda / (l + 1) as f64;
        }
        let blocks = 1u64 << 30;
        let mixture = loads
            .moments((lambda * blocks as f64) as u64, blocks, 1.0)
            .0;
        assert!(
            (mixture / poisson - 1.0).abs() < 1e-6,
            "{mixture} vs {poisson}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn measured_fp_is_within_the_rate() {
        // 200,000 items at 1% and at 0.1%, 1,000,000 non-members each.
        for &p in &[0.01, 0.001] {
            let n = 200_000u64;
            let params = FilterParams::for_layout(Layout::Blocked, n, p).unwrap();
            let probes = 1_000_000u32;
            let (_, fp) = measured_fp(&params, n, probes);
            // The model's rate is ≤ p; allow three standard deviations of sampling noise.
            let sigma = (p / probes as f64).sqrt();
            assert!(fp <= p + 3.0 * sigma, "p={p}: measured {fp}");
        }
    }
}
