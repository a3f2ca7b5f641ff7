//! A sparse sub-filter: the set of its items' fingerprints, Elias–Fano coded. It replaces the
//! bit array of a sub-filter of small capacity (`MAX_CAPACITY`) whenever it is smaller at
//! capacity (error rates below about 5%), and grows with the items it holds where a bit array
//! is allocated whole: a default filter holding a handful of items takes a few bytes.
//!
//! Fingerprints and the error rate. A sub-filter of capacity c and error rate p has a universe
//! U = ⌊c/p⌋ + 1 (stored in its encoding). An item's fingerprint is `reduce(h1, U)` (hash
//! scheme 1, `hashing.rs`: the top bits of XXH3-128's low half, uniform over 0..U). A lookup
//! hits iff the item's fingerprint is in the set, so for a non-member FP = (distinct
//! fingerprints) / U ≤ c/U < p: a bound, not an expectation, at every fill (it grows in
//! proportion to the fill, where a bit array's stays far below p until nearly full). An add
//! whose fingerprint is there already answers "probably present" and adds nothing, as a Bloom
//! filter whose bits are all set already; so the set holds exactly `items` fingerprints. A
//! sparse sub-filter never turns into a bit array (a fingerprint does not give an item's
//! probes): it stays a set when full, and the chain adds its next sub-filter as usual.
//!
//! The stream. The set is the Elias–Fano stream of `ef.rs` (the format linear counters use
//! too: low bits, then the buckets in unary), which is also its encoding (`codec.rs`, version 3): about
//! log2(U/n) + 2 bits per item, so at capacity log2(1/p) + 2 against the bit array's
//! 1.44·log2(1/p), and fewer still while it fills. A pure function of the set.
//!
//! Lookups. Finding a bucket selects the zero that closes the bucket before it; a linear scan
//! would read a quarter of the stream on average, and every lookup in a grown chain looks in
//! each of its (up to seven) sparse sub-filters. So memory (not the encoding: it is rebuilt on
//! load) keeps an index in front of the stream: the position in the upper bits of every
//! `SAMPLE`-th zero, as a u16 (positions stay below 3·n ≤ 3·`MAX_CAPACITY` < 2^16), four to a
//! word, about 0.35 bit per item; a lookup starts at the sample before its zero and reads one
//! or two words (`find`, otherwise `ef::find`'s reading of the stream). An add shifts the stream (`ef::insert`, O(n) word
//! operations, a few microseconds at `MAX_CAPACITY`) and moves the samples past it by one; an
//! add that changes l (O(log U) times in a set's life) re-codes the set.
//!
//! In memory a sparse sub-filter is a region of u64 words: the index, then the stream, while
//! it fills (its size a function of (n, U) alone, `Shape`, so the chain stores only n); once
//! it holds its capacity, the lookup form of `frozen.rs` (its size in its first word), from
//! which the stream is written again when the filter is saved.

use super::frozen;
use crate::core::ef;
use crate::core::ef_decode;
use crate::core::hashing::{reduce, ItemHash};

/// The largest capacity a sub-filter may have and be sparse: bounds the work of an add, and
/// keeps upper-bit positions within the index's u16.
pub const MAX_CAPACITY: u64 = 8192;
/// One index sample every `SAMPLE` zeros of the upper bits.
const SAMPLE: u64 = 64;

/// The universe of a sparse sub-filter of `capacity` at error rate `p`: capacity/U < p.
pub fn universe(capacity: u64, p: f64) -> u64 {
    (capacity as f64 / p).floor() as u64 + 1
}

/// The item's fingerprint in a sub-filter of universe `universe`.
#[inline(always)]
pub fn fingerprint(hash: &ItemHash, universe: u64) -> u64 {
    reduce(hash.h1, universe)
}

/// The sizes of the region of a set of n values in 0..U (n ≤ U).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    stream: ef::Shape,
    /// Words of the index, then of the whole region (index and stream).
    index_words: u32,
    region_words: u32,
}

impl Shape {
    #[inline]
    pub fn new(n: u64, universe: u64) -> Self {
        let stream = ef::Shape::new(n, universe);
        let samples = stream.buckets.saturating_sub(1) / SAMPLE;
        let index_words = samples.div_ceil(ef::SAMPLES_PER_WORD);
        Self {
            stream,
            // n ≤ MAX_CAPACITY for a sparse sub-filter: a region is a few thousand words.
            index_words: index_words as u32,
            region_words: (index_words + stream.bits().div_ceil(64)) as u32,
        }
    }

    pub fn len(&self) -> u64 {
        self.stream.k
    }

    pub fn is_empty(&self) -> bool {
        self.stream.k == 0
    }

    /// Words of the stream (what the encoding holds).
    pub fn stream_words(&self) -> usize {
        (self.region_words - self.index_words) as usize
    }

    /// Index samples: zeros number SAMPLE·j for j in 1..=samples.
    fn samples(&self) -> u64 {
        self.stream.buckets.saturating_sub(1) / SAMPLE
    }

    fn index_words(&self) -> usize {
        self.index_words as usize
    }

    /// Words of the in-memory region: index, then stream.
    #[inline]
    pub fn region_words(&self) -> usize {
        self.region_words as usize
    }

    /// Where the upper bits start in the stream.
    fn upper(&self) -> u64 {
        self.stream.k * self.stream.l as u64
    }
}

/// Whether `v` is in the set, by `ef::find_from`, starting the search for its bucket at the
/// index sample before it: the select scans a word or two, not up to half the upper bits
/// (`ef::find` bounds the work by the stream's length, which the linear counters keep small;
/// a grown Bloom chain looks in every one of its sparse sub-filters).
#[inline(always)]
fn find(region: &[u64], shape: &Shape, v: u64) -> ef::Probe {
    let (index, stream) = region.split_at(shape.index_words());
    let high = v >> shape.stream.l;
    let upper = shape.upper();
    // Bucket `high` starts after the zero closing bucket `high − 1`: from the sample before
    // that zero (sample j − 1 is the position of zero number SAMPLE·j), count zeros word by
    // word.
    let start = match high {
        0 => 0,
        h => {
            let j = (h - 1) / SAMPLE;
            let (from, left) = match j {
                0 => (0, h - 1),
                _ => (ef::sample(index, j - 1), h - 1 - j * SAMPLE),
            };
            // A valid set's stream holds that zero; past a stream's end nothing is found.
            ef::after_zero(stream, upper, from, left).unwrap_or(u64::MAX)
        }
    };
    ef::find_from(stream, 0, shape.stream, v, start)
}

/// Whether `v` is in the set held by `region` (of `shape.region_words()` words). Callers that
/// look in many sets compile their loop for the POPCNT instruction (`chain.rs`).
#[inline(always)]
pub fn contains(region: &[u64], shape: &Shape, v: u64) -> bool {
    shape.stream.k > 0 && find(region, shape, v).found
}

/// The values of the set, in increasing order.
pub fn values<'a>(stream: &'a [u64], shape: &Shape) -> ef::Iter<'a> {
    ef::iter(stream, 0, shape.stream)
}

/// Writes the region of the sorted distinct `values` (exactly `shape.len()` of them, each
/// below the universe) into `region` (of `shape.region_words()` words).
fn write(region: &mut [u64], shape: &Shape, values: impl IntoIterator<Item = u64>) {
    region.fill(0);
    let (index, stream) = region.split_at_mut(shape.index_words());
    ef::write(stream, 0, shape.stream, values);
    build_index(index, stream, shape);
}

/// Fills the index from the upper bits.
fn build_index(index: &mut [u64], stream: &[u64], shape: &Shape) {
    index.fill(0);
    let (upper, len) = (shape.upper(), shape.stream.k + shape.stream.buckets);
    let (mut zeros, mut j, mut at) = (0u64, 1u64, 0u64);
    while j <= shape.samples() && at < len {
        let width = (len - at).min(64) as u32;
        let free = !ef::read_bits(stream, upper + at, width) & ef::low_mask(width);
        let count = free.count_ones() as u64;
        while j <= shape.samples() && zeros + count > j * SAMPLE {
            // The zero of rank j·SAMPLE − zeros in this word.
            let position = at + ef::select_in_word(free, j * SAMPLE - zeros);
            ef::set_sample(index, j - 1, position);
            j += 1;
        }
        zeros += count;
        at += 64;
    }
}

/// Where an add goes, found before the region is resized for it.
pub enum Add {
    /// The value is there already: nothing to do.
    Present,
    /// Resize the region to `Shape::new(n + 1, U).region_words()` words (the first ones kept,
    /// new ones zero), then `insert` it.
    Absent(Pending),
}

pub struct Pending {
    v: u64,
    rank: u64,
    /// When l changes (the set not empty): every value, the new one included, to be written
    /// afresh.
    recoded: Option<Vec<u64>>,
}

/// Looks up `v` for an add to the set of `shape` (universe `universe`); None if the memory
/// to re-code the set could not be had.
pub fn prepare_add(region: &[u64], shape: &Shape, universe: u64, v: u64) -> Option<Add> {
    let rank = match shape.stream.k {
        0 => 0,
        _ => match find(region, shape, v) {
            ef::Probe { found: true, .. } => return Some(Add::Present),
            ef::Probe { rank, .. } => rank,
        },
    };
    let grown = Shape::new(shape.stream.k + 1, universe);
    // An empty set's one value is written afresh by `insert` without a list.
    let recoded = if grown.stream.l != shape.stream.l && !shape.is_empty() {
        let old = stream(region, shape);
        Some(ef_decode::values_inserting(old, 0, shape.stream, rank, v)?)
    } else {
        None
    };
    Some(Add::Absent(Pending { v, rank, recoded }))
}

/// Inserts a value `prepare_add` found absent from the set of `shape` (n values, universe
/// `universe`) into `region`, already resized to the region of n + 1 values.
pub fn insert(region: &mut [u64], shape: &Shape, universe: u64, pending: Pending) {
    let grown = Shape::new(shape.stream.k + 1, universe);
    if let Some(all) = pending.recoded {
        write(region, &grown, all);
        return;
    }
    if shape.is_empty() {
        write(region, &grown, [pending.v]);
        return;
    }
    // l and so B and the index size are unchanged: shift the new bits in.
    let (index, stream) = region.split_at_mut(shape.index_words());
    ef::insert(stream, 0, shape.stream, pending.rank, pending.v);
    // Zeros at or after the new value's one (upper bit (v >> l) + rank) moved up by one.
    let position = (pending.v >> shape.stream.l) + pending.rank;
    for i in 0..shape.samples() {
        let sample = ef::sample(index, i);
        if sample >= position {
            ef::set_sample(index, i, sample + 1);
        }
    }
}

/// Many adds at once: whether each of `vs` (in order; a value repeated in `vs` is new only
/// the first time) is new to the set of `shape` (universe `universe`), and the region of the
/// set with all of them, re-coded once: the region `prepare_add` and `insert` would reach one
/// value at a time (a pure function of the set). None if the memory could not be had.
pub fn add_all(
    region: &[u64],
    shape: &Shape,
    universe: u64,
    vs: &[u64],
) -> Option<(Vec<bool>, Vec<u64>, Shape)> {
    // The values in increasing order, first occurrences first among equals: (value, position)
    // pairs are distinct, so an unstable sort of them gives that order. Where the universe
    // leaves room, each pair is sorted as one word, the value above the position, in half the
    // instructions of sorting pairs.
    let bits = usize::BITS - vs.len().leading_zeros();
    if universe.saturating_sub(1).checked_shr(u64::BITS - bits) == Some(0) {
        let order = sorted(vs.len(), vs.iter().zip(0..).map(|(&v, i)| v << bits | i))?;
        let position_bits = u64::MAX >> (u64::BITS - bits);
        let pairs = order
            .iter()
            .map(|&w| (w >> bits, (w & position_bits) as usize));
        merge_all(region, shape, universe, vs.len(), pairs)
    } else {
        let order = sorted(vs.len(), vs.iter().copied().zip(0..))?;
        merge_all(region, shape, universe, vs.len(), order.iter().copied())
    }
}

/// The `n` items in increasing order, in a block allocated fallibly.
fn sorted<T: Ord>(n: usize, items: impl Iterator<Item = T>) -> Option<Vec<T>> {
    let mut list = Vec::new();
    list.try_reserve_exact(n).ok()?;
    list.extend(items);
    list.sort_unstable();
    Some(list)
}

/// `add_all`'s merge of the set with `n` values given in increasing order with their
/// positions (first occurrences first among equals).
fn merge_all(
    region: &[u64],
    shape: &Shape,
    universe: u64,
    n: usize,
    order: impl Iterator<Item = (u64, usize)>,
) -> Option<(Vec<bool>, Vec<u64>, Shape)> {
    let mut new = vec![false; n];
    let mut all = Vec::new();
    all.try_reserve_exact(shape.stream.k as usize + n).ok()?;
    let mut order = order.peekable();
    // A batch value is new unless the set or an earlier equal one holds it.
    let mut take = |all: &mut Vec<u64>, (v, i): (u64, usize)| {
        if all.last() != Some(&v) {
            new[i] = true;
            all.push(v);
        }
    };
    // Driven by the held values' `for_each`, the stream's fast decoding loop.
    values(stream(region, shape), shape).for_each(|x| {
        while let Some(vi) = order.next_if(|&(v, _)| v < x) {
            take(&mut all, vi);
        }
        while order.next_if(|&(v, _)| v == x).is_some() {}
        all.push(x);
    });
    for vi in order {
        take(&mut all, vi);
    }
    let grown = Shape::new(all.len() as u64, universe);
    let mut out = crate::core::alloc::zeroed(grown.region_words())?;
    write(&mut out, &grown, all);
    Some((new, out, grown))
}

/// Checks that `stream` is the stream of a set of `n` distinct values below `universe`
/// (canonical: the exact length, bits past the end zero), so that it can be loaded.
pub fn is_valid(stream: &[u64], n: u64, universe: u64) -> bool {
    let shape = Shape::new(n, universe);
    if stream.len() != shape.stream_words() {
        return false;
    }
    let bits = shape.stream.bits();
    if !bits.is_multiple_of(64) && stream.last().is_some_and(|w| w >> (bits % 64) != 0) {
        return false;
    }
    ef::validate(stream, 0, shape.stream, universe).is_ok()
}

/// Builds the in-memory region of a set that is not full from its valid stream (`is_valid`).
pub fn load(region: &mut [u64], stream: &[u64], shape: &Shape) {
    let (index, body) = region.split_at_mut(shape.index_words());
    body.copy_from_slice(stream);
    build_index(index, body, shape);
}

/// The stream inside a region of a set that is not full.
fn stream<'a>(region: &'a [u64], shape: &Shape) -> &'a [u64] {
    &region[shape.index_words()..]
}

/// Words of the region starting `data` of a set of `shape`, `full` if it holds its capacity
/// (then in the frozen form).
#[inline(always)]
pub fn region_len(data: &[u64], shape: &Shape, full: bool) -> usize {
    match full {
        true => frozen::region_words(data),
        false => shape.region_words(),
    }
}

/// The most words a region of `shape` can take (`full`: in the frozen form), before its
/// values are known.
pub fn max_region_len(shape: &Shape, full: bool) -> usize {
    match full {
        true => frozen::max_words(shape.stream),
        false => shape.region_words(),
    }
}

/// The most words the region of a set of `capacity` below `universe` takes at any fill up
/// to `n` values: what limits weigh it by, so that a set made within a key's limit stays
/// within it as it fills. Within the fills of one width l of low bits the region grows
/// with the fill; where l drops, the stream may take a bit less, and the frozen form of a
/// full set may take less than the stream before it. The fills of a larger width j end at
/// ⌊U / 2^j⌋ values, in about (j + 2)·U / 2^j bits, which shrink as j grows. So the largest
/// is at n, at n − 1 for a full set, or at the end of the next widths (the second for a
/// width no fill has).
pub fn most_region_len(n: u64, capacity: u64, universe: u64) -> usize {
    let region = |k: u64| max_region_len(&Shape::new(k, universe), k == capacity);
    let l = Shape::new(n, universe).stream.l;
    let ends = (l + 1..(l + 3).min(u64::BITS)).map(|j| universe >> j);
    let before_full = (n == capacity).then(|| n - 1);
    ends.chain(before_full)
        .filter(|&k| k < n)
        .map(region)
        .fold(region(n), usize::max)
}

/// Whether `v` is in the set of the region `region` (see `region_len`).
#[inline(always)]
pub fn holds(region: &[u64], shape: &Shape, full: bool, v: u64) -> bool {
    match full {
        true => frozen::contains(region, shape.stream, v),
        false => contains(region, shape, v),
    }
}

/// The stream (the encoding) of a region, or None if the memory could not be had.
pub fn stream_of(region: &[u64], shape: &Shape, full: bool) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    out.try_reserve_exact(shape.stream_words()).ok()?;
    if !full {
        out.extend_from_slice(stream(region, shape));
        return Some(out);
    }
    out.resize(shape.stream_words(), 0);
    ef::write(
        &mut out,
        0,
        shape.stream,
        frozen::values(region, shape.stream),
    );
    Some(out)
}

/// The region of a full set from its valid stream (`is_valid`): its frozen form (a set not
/// full is `load`ed in place); None if the memory could not be had.
pub fn frozen_region_of(stream: &[u64], shape: &Shape) -> Option<Vec<u64>> {
    frozen::build(shape.stream, ef::iter(stream, 0, shape.stream))
}

/// The frozen form of the region of a set that has just become full.
pub fn freeze(region: &[u64], shape: &Shape) -> Option<Vec<u64>> {
    frozen::build(shape.stream, values(stream(region, shape), shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hashing::hash_item;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// A set built by adds, as the chain does (region resized before each insert).
    struct Set {
        universe: u64,
        n: u64,
        region: Vec<u64>,
    }

    impl Set {
        fn new(universe: u64) -> Self {
            Self {
                universe,
                n: 0,
                region: Vec::new(),
            }
        }

        fn shape(&self) -> Shape {
            Shape::new(self.n, self.universe)
        }

        fn add(&mut self, v: u64) -> bool {
            let shape = self.shape();
            assert_eq!(self.region.len(), shape.region_words());
            match prepare_add(&self.region, &shape, self.universe, v).unwrap() {
                Add::Present => false,
                Add::Absent(pending) => {
                    let grown = Shape::new(self.n + 1, self.universe);
                    self.region.resize(grown.region_words(), 0);
                    insert(&mut self.region, &shape, self.universe, pending);
                    self.n += 1;
                    true
                }
            }
        }

        fn contains(&self, v: u64) -> bool {
            contains(&self.region, &self.shape(), v)
        }

        fn values(&self) -> Vec<u64> {
            let shape = self.shape();
            values(stream(&self.region, &shape), &shape).collect()
        }
    }

    #[test]
    fn shapes_keep_positions_within_the_index() {
        for (n, u) in [
            (1u64, 1u64),
            (3, 7),
            (100, 18_182),
            (5_000, 1 << 40),
            (MAX_CAPACITY, u64::MAX),
            (MAX_CAPACITY, MAX_CAPACITY),
        ] {
            let s = Shape::new(n, u);
            // Upper bits: n ones and at most 2n zeros, positions below 2^16.
            assert!(s.stream.buckets <= 2 * n);
            assert!(n + s.stream.buckets <= 3 * MAX_CAPACITY);
        }
        assert_eq!(Shape::new(0, 100).region_words(), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_filled_set_answers_exactly() {
        // The default first sub-filter: capacity 100 at 0.55%.
        let universe = universe(100, 0.0055);
        assert!(100.0 / universe as f64 <= 0.0055);
        let mut set = Set::new(universe);
        let mut model = BTreeSet::new();
        for i in 0..100u32 {
            let v = fingerprint(&hash_item(&i.to_le_bytes()), universe);
            assert_eq!(set.add(v), model.insert(v));
            assert!(set.contains(v));
        }
        for v in 0..universe {
            assert_eq!(set.contains(v), model.contains(&v), "{v}");
        }
        assert_eq!(set.values(), model.iter().copied().collect::<Vec<_>>());
        assert!(is_valid(stream(&set.region, &set.shape()), set.n, universe));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn large_sets_with_an_index() {
        // MAX_CAPACITY values in universes that make l small (many samples) and large.
        for universe in [MAX_CAPACITY * 2, MAX_CAPACITY * 150, 1 << 50] {
            let mut set = Set::new(universe);
            let mut model = BTreeSet::new();
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            while model.len() < MAX_CAPACITY as usize {
                crate::core::test_rng::step(&mut x);
                let v = reduce(x, universe);
                assert_eq!(set.add(v), model.insert(v));
            }
            let shape = set.shape();
            assert!(shape.samples() > 0);
            for &v in model.iter().step_by(7) {
                assert!(set.contains(v));
                if v + 1 < universe && !model.contains(&(v + 1)) {
                    assert!(!set.contains(v + 1));
                }
            }
            // The index kept up by the adds equals one built afresh.
            let mut rebuilt = vec![0; shape.region_words()];
            load(&mut rebuilt, stream(&set.region, &shape), &shape);
            assert_eq!(rebuilt, set.region);
        }
    }

    #[test]
    fn validation_refuses_what_is_not_a_set() {
        let universe = 1000;
        let mut set = Set::new(universe);
        for v in [3u64, 500, 501, 999] {
            set.add(v);
        }
        let shape = set.shape();
        let good = stream(&set.region, &shape).to_vec();
        assert!(is_valid(&good, 4, universe));
        assert!(!is_valid(&good, 3, universe));
        assert!(!is_valid(&good, 4, 999)); // 999 is not below the universe
        assert!(!is_valid(&good[..good.len() - 1], 4, universe));
        let mut padded = good.clone();
        *padded.last_mut().unwrap() |= 1 << 63;
        assert!(!is_valid(&padded, 4, universe));
        assert!(is_valid(&[], 0, universe));
        assert!(!is_valid(&[0], 0, universe));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// A batch is its values added one at a time, repeats included, in universes that
        /// leave room for the positions beside each value and in ones that do not.
        #[test]
        fn batches_are_adds_one_by_one(
            universe in prop_oneof![1u64..100_000, (1u64 << 50)..=u64::MAX],
            before in prop::collection::vec(any::<u64>(), 0..200),
            batch in prop::collection::vec(any::<u64>(), 0..300),
            repeats in prop::collection::vec(any::<prop::sample::Index>(), 0..50),
        ) {
            let mut set = Set::new(universe);
            for v in before {
                set.add(v % universe);
            }
            let mut vs: Vec<u64> = batch.iter().map(|v| v % universe).collect();
            if !vs.is_empty() {
                for r in &repeats {
                    vs.push(vs[r.index(vs.len())]);
                }
            }
            let (new, region, shape) = add_all(&set.region, &set.shape(), universe, &vs).unwrap();
            let one_by_one: Vec<bool> = vs.iter().map(|&v| set.add(v)).collect();
            prop_assert_eq!(new, one_by_one);
            prop_assert_eq!(shape, set.shape());
            prop_assert_eq!(region, set.region.clone());
        }

        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn matches_a_set(
            universe in 1u64..1_000_000,
            values in prop::collection::vec(any::<u64>(), 0..600),
        ) {
            let mut set = Set::new(universe);
            let mut model = BTreeSet::new();
            for v in values {
                let v = v % universe;
                prop_assert_eq!(set.add(v), model.insert(v));
            }
            let shape = set.shape();
            prop_assert_eq!(set.values(), model.iter().copied().collect::<Vec<_>>());
            prop_assert!(is_valid(stream(&set.region, &shape), set.n, universe));
            for probe in 0..universe.min(3000) {
                prop_assert_eq!(set.contains(probe), model.contains(&probe));
            }
            // Writing the set afresh gives the same region: a pure function of the set.
            let mut fresh = vec![0; shape.region_words()];
            write(&mut fresh, &shape, model.iter().copied());
            prop_assert_eq!(fresh, set.region.clone());
        }
    }
}
