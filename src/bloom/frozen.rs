//! The lookup form of a full sparse sub-filter (pure, in memory only).
//!
//! A sparse sub-filter (`sparse.rs`) that holds its capacity takes no more items: the chain
//! adds its next sub-filter, and from then on every lookup in the chain looks in it too, most
//! of them for non-members. Elias–Fano answers those with a select over the bucket bits (find
//! the zero before the bucket, then its values), well over 100 instructions even with a
//! sampled index. So when a set fills up (and when a full one is loaded) it is laid out again
//! for lookups: the same values, by their bucket h = v >> l (l and the B buckets of its
//! stream, `ef::Shape`), as
//!
//! * `occupied`: B bits, whether bucket h holds a value;
//! * `firsts`: for the r-th occupied bucket (in order), the low l bits of its smallest value;
//! * `more`: one bit per occupied bucket, whether it holds more than one value;
//! * `rest`: the low bits of those buckets' other values, in order, and `ends`, one bit per
//!   such value, set on the last one of its bucket;
//! * rank samples (u16, four to a word): the ones of `occupied`, and of `more`, before each
//!   256-bit block after the first (counts stay below 2^16: B ≤ 2n ≤ 2·`sparse::MAX_CAPACITY`).
//!
//! A non-member lands in an empty bucket about half the time (B lies between n and 2n) and is
//! refused after one bit; otherwise a rank (a sample and at most four popcounts) finds its
//! bucket's first value, which decides unless the bucket holds more (about one in four). The
//! bits total B + n + n·l, plus one per bucket holding more than one value and a word of
//! counts: about what the stream and its index take.
//!
//! The encoding stays the Elias–Fano stream: `values` gives the values back in order, and the
//! chain writes the stream from them when it saves the filter.
//!
//! Region: a word holding the number of occupied buckets (bits 0–15) and the region's length
//! in words (bits 16–31, so that a chain walking its regions need not work it out); the
//! samples of `occupied`; then bit after bit from the next word `occupied`, `more`, `firsts`,
//! `rest`, `ends`; then, from the next word, the samples of `more`. What a lookup reads first
//! comes first, its place known from the stream's shape and the count alone.

use crate::core::ef;

/// Bits per rank-sample block.
const BLOCK: u64 = 256;

/// Words of the rank samples of a `bits`-bit vector: one per block after the first.
fn samples_words(bits: u64) -> u64 {
    (bits.saturating_sub(1) / BLOCK).div_ceil(ef::SAMPLES_PER_WORD)
}

/// Where each part of a frozen region starts: bit offsets, and word offsets for the samples.
#[derive(Clone, Copy, Debug)]
struct Layout {
    occupied: u64,
    more: u64,
    firsts: u64,
    rest: u64,
    ends: u64,
    more_samples: usize,
    words: usize,
}

/// The samples of `occupied` start after the word of counts.
const OCCUPIED_SAMPLES: usize = 1;

/// Where `occupied` starts: on the word after its samples, so that its ranks read whole words.
#[inline(always)]
fn occupied_start(stream: ef::Shape) -> u64 {
    (OCCUPIED_SAMPLES as u64 + samples_words(stream.buckets)) * 64
}

impl Layout {
    #[inline(always)]
    fn new(stream: ef::Shape, occupied_count: u64) -> Self {
        let l = stream.l as u64;
        let occupied = occupied_start(stream);
        let more = occupied + stream.buckets;
        let firsts = more + occupied_count;
        let rest = firsts + occupied_count * l;
        let ends = rest + (stream.k - occupied_count) * l;
        let more_samples = (ends + stream.k - occupied_count).div_ceil(64);
        let words = more_samples + samples_words(occupied_count);
        Self {
            occupied,
            more,
            firsts,
            rest,
            ends,
            more_samples: more_samples as usize,
            words: words as usize,
        }
    }

    /// The layout of a region, from its count.
    #[inline(always)]
    fn of(region: &[u64], stream: ef::Shape) -> Self {
        Self::new(stream, ef::sample(region, 0))
    }
}

/// Words of the frozen region starting `region`.
#[inline(always)]
pub fn region_words(region: &[u64]) -> usize {
    ef::sample(region, 1) as usize
}

/// The most words the frozen form of a set of stream shape `stream` can take, before its
/// values are known (for limits): at most min(n, B) buckets are occupied.
pub fn max_words(stream: ef::Shape) -> usize {
    let occupied = stream.k.min(stream.buckets);
    let bits = occupied_start(stream) + stream.buckets + stream.k * (stream.l as u64 + 1);
    (bits.div_ceil(64) + samples_words(occupied)) as usize
}

#[inline(always)]
fn set(words: &mut [u64], at: u64) {
    words[(at / 64) as usize] |= 1 << (at % 64);
}

/// The ones among the first `at` bits of the bit vector starting at bit `start` of `region`,
/// from its rank samples.
#[inline(always)]
fn rank(region: &[u64], start: u64, samples: &[u64], at: u64) -> u64 {
    let block = at / BLOCK;
    let mut ones = match block {
        0 => 0,
        b => ef::sample(samples, b - 1),
    };
    let mut from = block * BLOCK;
    if start.is_multiple_of(64) {
        // Whole words (`occupied`).
        let (first, last) = (((start + from) / 64) as usize, ((start + at) / 64) as usize);
        for w in &region[first..last] {
            ones += w.count_ones() as u64;
        }
        return ones + (region[last] & ef::low_mask((at % 64) as u32)).count_ones() as u64;
    }
    while from + 64 <= at {
        ones += ef::read_bits(region, start + from, 64).count_ones() as u64;
        from += 64;
    }
    if from < at {
        ones += ef::read_bits(region, start + from, (at - from) as u32).count_ones() as u64;
    }
    ones
}

/// Fills the rank samples of the `bits`-bit vector starting at bit `start` of `region`.
fn fill_samples(region: &[u64], start: u64, bits: u64, samples: &mut [u64]) {
    for block in 1..=bits.saturating_sub(1) / BLOCK {
        let ones = rank(region, start, samples, block * BLOCK - 1)
            + ef::read_bits(region, start + block * BLOCK - 1, 1);
        ef::set_sample(samples, block - 1, ones);
    }
}

/// The frozen region of the sorted distinct `values` (stream shape `stream`: exactly
/// `stream.k` values below its universe), or None if the memory could not be had.
pub fn build(stream: ef::Shape, values: impl Iterator<Item = u64> + Clone) -> Option<Vec<u64>> {
    let l = stream.l;
    let mut occupied_count = 0u64;
    let mut previous = None;
    for high in values.clone().map(|v| v >> l) {
        occupied_count += u64::from(previous != Some(high));
        previous = Some(high);
    }
    let layout = Layout::new(stream, occupied_count);
    let mut region = crate::core::alloc::zeroed(layout.words)?;
    // Regions of sparse sub-filters are at most a few thousand words (`sparse::MAX_CAPACITY`).
    ef::set_sample(&mut region, 0, occupied_count);
    ef::set_sample(&mut region, 1, layout.words as u64);
    // r: occupied buckets so far; extra: values in `rest` so far; in_bucket: values of the
    // current bucket so far.
    let (mut r, mut extra, mut in_bucket, mut previous) = (0u64, 0u64, 0u64, None);
    for v in values {
        let (high, low) = (v >> l, v & ef::low_mask(l));
        if previous == Some(high) {
            set(&mut region, layout.more + r - 1);
            ef::write_bits(&mut region, layout.rest + extra * l as u64, l, low);
            extra += 1;
            in_bucket += 1;
            continue;
        }
        if in_bucket > 1 {
            set(&mut region, layout.ends + extra - 1);
        }
        set(&mut region, layout.occupied + high);
        ef::write_bits(&mut region, layout.firsts + r * l as u64, l, low);
        (r, in_bucket, previous) = (r + 1, 1, Some(high));
    }
    if in_bucket > 1 {
        set(&mut region, layout.ends + extra - 1);
    }
    let (head, bits) = region.split_at_mut(layout.occupied as usize / 64);
    fill_samples(bits, 0, stream.buckets, &mut head[OCCUPIED_SAMPLES..]);
    let (bits, samples) = region.split_at_mut(layout.more_samples);
    fill_samples(bits, layout.more, occupied_count, samples);
    Some(region)
}

/// Whether `v` (below the universe) is in the set of the frozen region `region`.
#[inline(always)]
pub fn contains(region: &[u64], stream: ef::Shape, v: u64) -> bool {
    let l = stream.l;
    let (high, low) = (v >> l, v & ef::low_mask(l));
    let occupied = occupied_start(stream);
    if !ef::bit(region, occupied + high) {
        return false;
    }
    let layout = Layout::of(region, stream);
    let samples = &region[OCCUPIED_SAMPLES..occupied as usize / 64];
    let r = rank(region, occupied, samples, high);
    let first = ef::read_bits(region, layout.firsts + r * l as u64, l);
    if low <= first {
        return low == first;
    }
    if !ef::bit(region, layout.more + r) {
        return false;
    }
    // Its other values follow those of the buckets before it that hold more.
    let samples = &region[layout.more_samples..layout.words];
    let before = rank(region, layout.more, samples, r);
    let mut i = group_start(region, layout.ends, before);
    loop {
        let x = ef::read_bits(region, layout.rest + i * l as u64, l);
        if x >= low {
            return x == low;
        }
        if ef::bit(region, layout.ends + i) {
            return false;
        }
        i += 1;
    }
}

/// Where the `t`-th group of values in `rest` starts: after the `t`-th set bit (from 1) of
/// `ends` (at bit `ends` of the region). A scan from there: the path is taken by one lookup
/// in eight or so, and `ends` has a bit per value in `rest` only.
fn group_start(region: &[u64], ends: u64, t: u64) -> u64 {
    let (mut left, mut at) = (t, ends);
    while left > 0 {
        let width = 64 - (at % 64) as u32;
        let word = ef::read_bits(region, at, width);
        let count = word.count_ones() as u64;
        if left <= count {
            // `left` is a few at most here: clearing bits beats `ef::select_in_word`'s
            // halving (callgrind, a 1M-item default chain: ~60 instructions per lookup).
            let mut rest = word;
            for _ in 1..left {
                rest &= rest - 1;
            }
            return at + rest.trailing_zeros() as u64 + 1 - ends;
        }
        left -= count;
        at += width as u64;
    }
    0
}

/// The values of the frozen region, in increasing order.
pub fn values(region: &[u64], stream: ef::Shape) -> impl Iterator<Item = u64> + '_ {
    let layout = Layout::of(region, stream);
    let l = stream.l;
    let mut extra = 0u64;
    (0..stream.buckets)
        .filter(move |h| ef::bit(region, layout.occupied + *h))
        .enumerate()
        .flat_map(move |(r, high)| {
            let r = r as u64;
            let first = ef::read_bits(region, layout.firsts + r * l as u64, l);
            let mut others = Vec::new();
            if ef::bit(region, layout.more + r) {
                loop {
                    let x = ef::read_bits(region, layout.rest + extra * l as u64, l);
                    others.push(high << l | x);
                    extra += 1;
                    if ef::bit(region, layout.ends + extra - 1) {
                        break;
                    }
                }
            }
            std::iter::once(high << l | first).chain(others)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn frozen(universe: u64, set: &BTreeSet<u64>) -> (ef::Shape, Vec<u64>) {
        let shape = ef::Shape::new(set.len() as u64, universe);
        let region = build(shape, set.iter().copied()).unwrap();
        (shape, region)
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn answers_like_the_set() {
        // Buckets of one value, of several, empty ones, l = 0 and large l, many samples.
        for (universe, count) in [(1u64, 1usize), (10, 10), (1000, 400), (200_000, 8192)] {
            let mut set = BTreeSet::new();
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            while set.len() < count {
                crate::core::test_rng::step(&mut x);
                set.insert(crate::core::hashing::reduce(x, universe));
            }
            let (shape, region) = frozen(universe, &set);
            assert_eq!(region.len(), region_words(&region));
            assert!(region.len() <= max_words(shape));
            for v in 0..universe.min(300_000) {
                assert_eq!(contains(&region, shape, v), set.contains(&v), "{v}");
            }
            let back: Vec<u64> = values(&region, shape).collect();
            assert_eq!(back, set.iter().copied().collect::<Vec<_>>());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn matches_a_set(
            universe in 1u64..200_000,
            raw in prop::collection::btree_set(any::<u64>(), 1..700),
        ) {
            let set: BTreeSet<u64> = raw.iter().map(|v| v % universe).collect();
            let (shape, region) = frozen(universe, &set);
            prop_assert_eq!(region.len(), region_words(&region));
            prop_assert!(region.len() <= max_words(shape));
            let back: Vec<u64> = values(&region, shape).collect();
            prop_assert_eq!(back, set.iter().copied().collect::<Vec<_>>());
            for v in 0..universe.min(5_000) {
                prop_assert_eq!(contains(&region, shape, v), set.contains(&v));
            }
            for &v in &set {
                prop_assert!(contains(&region, shape, v));
            }
        }
    }
}
