//! Exact mode: the sorted set of the items' fingerprints `f = reduce(h1, U)`, Elias–Fano coded
//! from bit `header::STREAM` of the block (counter.rs, "Three modes"). A fingerprint divided
//! by `q = U/m` is the item's bit position, so leaving exact mode needs nothing but the set.

use super::counter::{Counter, LcError};
use super::header::{Mode, STREAM};
use super::levels::weight;
use super::running::Running;
use super::tokens::token_value;
use crate::core::block::Block;
use crate::core::hashing::{reduce, FirstOfReduced};
use crate::core::{ef, ef_decode};

impl Counter {
    /// The exact mode's fingerprints, in order.
    pub fn fingerprints(&self) -> Option<ef::Iter<'_>> {
        self.is_exact()
            .then(|| ef::iter(self.block.words(), STREAM, self.shape()))
    }

    /// Writes the fingerprints, in order, to the start of `out` (those past its end dropped);
    /// how many it wrote (none unless exact).
    pub(super) fn decode_fingerprints(&self, out: &mut [u64]) -> usize {
        if !self.is_exact() {
            return 0;
        }
        ef_decode::decode(self.block.words(), STREAM, self.shape(), out)
    }

    /// The fingerprints, in order, decoded into `buffer` (grown to hold them; none unless
    /// exact).
    pub(super) fn fingerprints_in<'b>(&self, buffer: &'b mut Vec<u64>) -> &'b [u64] {
        if !self.is_exact() {
            return &[];
        }
        // Room past the count: `ef_decode::decode` writes a word's values 8 at a time, whole.
        let room = self.header().count as usize + 63;
        if buffer.len() < room {
            buffer.resize(room, 0);
        }
        let n = ef_decode::decode(self.block.words(), STREAM, self.shape(), buffer);
        &buffer[..n]
    }

    /// The bit positions the fingerprints stand for, each once, in order (exact mode).
    pub(super) fn fingerprint_positions(&self) -> impl Iterator<Item = u64> + '_ {
        let q = self.geometry.q;
        dedup(ef::iter(self.block.words(), STREAM, self.shape()).map(move |f| f / q))
    }

    /// Adds the item of hash `h` (exact mode); past the exact limit the counter turns into a
    /// sketch (tokens, or registers refused beyond `limit` bytes), then takes the item.
    pub(super) fn add_fingerprint(&mut self, h: u64, limit: u64) -> Result<bool, LcError> {
        let f = reduce(h, self.geometry.universe());
        let Some((shape, rank)) = self.absent(f) else {
            return Ok(false);
        };
        if shape.k < self.geometry.exact_limit {
            self.insert(Mode::Exact, shape, rank, f)?;
            return Ok(true);
        }
        let mut sketch = self.try_clone()?;
        sketch.leave_exact(limit)?;
        sketch.add_hash_within(h, limit)?;
        *self = sketch;
        Ok(true)
    }

    /// Adds the items of hashes `hashes` (`n` of them) at once when exact mode holds them,
    /// whatever they are (its count and `n` within the exact limit): their fingerprints are
    /// sorted, then merged into the set in one pass and one new block, where adding them one
    /// at a time searches, shifts and grows the block for each. How many were new, as one
    /// at a time counts them; `None` when the counter is not exact or the batch could leave
    /// exact mode (the caller adds them one at a time). Nothing changed on error. Out of
    /// line, so that the callers' loop for single items stays as short as it was.
    #[inline(never)]
    pub(super) fn add_hashes_at_once(
        &mut self,
        hashes: impl Iterator<Item = u64>,
        n: usize,
    ) -> Option<Result<u64, LcError>> {
        let fits = self.header().count + n as u64 <= self.geometry.exact_limit;
        (self.is_exact() && fits).then(|| self.merge_fingerprints(hashes, n))
    }

    fn merge_fingerprints(
        &mut self,
        hashes: impl Iterator<Item = u64>,
        n: usize,
    ) -> Result<u64, LcError> {
        let universe = self.geometry.universe();
        let mut batch = Vec::new();
        batch
            .try_reserve_exact(n)
            .map_err(|_| LcError::OutOfMemory)?;
        batch.extend(hashes.map(|h| reduce(h, universe)));
        batch.sort_unstable();
        batch.dedup();
        // Room for the decoding, which writes past the count (`fingerprints_in`), and for
        // the merge.
        let mut set = Vec::new();
        set.try_reserve_exact(self.header().count as usize + 63 + batch.len())
            .map_err(|_| LcError::OutOfMemory)?;
        let held = self.fingerprints_in(&mut set).len();
        set.truncate(held);
        let missing = missing_from(&set, &batch);
        if missing > 0 {
            merge_missing(&mut set, &batch, missing);
            let k = set.len() as u64;
            self.block = Counter::stream_block(Mode::Exact, universe, k, set.into_iter())?;
        }
        Ok(missing as u64)
    }

    /// The tokens at precision `p` of the items the fingerprints stand for (sorted, distinct):
    /// fingerprint `f` stands for the hashes `[f·2^64/U, (f+1)·2^64/U)`, whose start gives the
    /// item's token unless a token boundary falls inside (about `2^(p+24)/U` per item).
    pub(super) fn exact_tokens(&self, p: u32) -> Vec<u64> {
        self.tokens_of(self.fingerprints().into_iter().flatten(), p)
    }

    /// `exact_tokens` of `fingerprints` of this counter's universe, whatever its mode.
    fn tokens_of(&self, fingerprints: impl Iterator<Item = u64>, p: u32) -> Vec<u64> {
        let first = FirstOfReduced::new(self.geometry.universe());
        let mut tokens: Vec<u64> = fingerprints
            .map(|f| fingerprint_token(f, &first, p))
            .collect();
        tokens.sort_unstable();
        tokens.dedup();
        tokens
    }

    /// Appends the tokens at precision `p` of `fingerprints` (of this counter's universe), in
    /// their order, repeats kept.
    pub(super) fn append_tokens(&self, fingerprints: &[u64], p: u32, tokens: &mut Vec<u32>) {
        let first = FirstOfReduced::new(self.geometry.universe());
        #[cfg(target_arch = "x86_64")]
        if first.halves_apply() {
            if super::tokens::wide_tokens_usable() {
                // SAFETY: the CPU has the instructions (checked above; AVX-512 DQ implies F).
                return unsafe { tokens_in_halves_avx512(fingerprints, &first, p, tokens) };
            }
            if super::token_lanes::usable(p) {
                // SAFETY: the CPU has AVX2 (`usable` says so).
                return unsafe { tokens_in_halves_avx2(fingerprints, &first, p, tokens) };
            }
        }
        // Within `MAX_PRECISION`, a token takes 28 bits.
        tokens.extend(
            fingerprints
                .iter()
                .map(|&f| fingerprint_token(f, &first, p) as u32),
        );
    }

    /// Turns an exact counter into the sketch of its items, its running estimate their exact
    /// number; registers refused beyond `limit` bytes.
    pub(super) fn leave_exact(&mut self, limit: u64) -> Result<(), LcError> {
        let tokens = self.exact_tokens(self.geometry.precision);
        self.block = self.sketch_of(tokens, self.header().count, limit)?;
        Ok(())
    }

    /// Turns this counter into the sketch of the items of `fingerprints` (of its universe,
    /// distinct), their exact number its running estimate; registers refused beyond `limit`
    /// bytes. More than an exact block counts (16 bits) may come: a merge of exact counters.
    pub(super) fn become_sketch_of(
        &mut self,
        fingerprints: &[u64],
        limit: u64,
    ) -> Result<(), LcError> {
        let tokens = self.tokens_of(fingerprints.iter().copied(), self.geometry.precision);
        self.block = self.sketch_of(tokens, fingerprints.len() as u64, limit)?;
        Ok(())
    }

    /// A sketch block of `count` distinct items whose tokens are `tokens` (sorted, distinct):
    /// its running estimate `count`, with no variance.
    fn sketch_of(&self, tokens: Vec<u64>, count: u64, limit: u64) -> Result<Block, LcError> {
        let p = self.geometry.precision;
        let set: u128 = tokens
            .iter()
            .map(|&t| u128::from(weight(t & 0xff, p)))
            .sum();
        let running = Running {
            estimate: count as f64,
            variance: 0.0,
            mu: (1u128 << 64) - set,
        };
        self.sketch_block(p, tokens, running, limit)
    }

    /// A counter in exact mode holding these fingerprints (sorted, distinct, below `U`, at most
    /// `exact_limit(m)`).
    pub(crate) fn from_fingerprints(
        capacity: u64,
        error_rate: f64,
        m: u64,
        count: u64,
        fingerprints: impl Iterator<Item = u64>,
    ) -> Result<Counter, LcError> {
        let mut counter = Counter::empty(capacity, error_rate, m);
        debug_assert!(count <= counter.geometry.exact_limit);
        if count > 0 {
            let universe = counter.geometry.universe();
            counter.block = Counter::stream_block(Mode::Exact, universe, count, fingerprints)?;
        }
        Ok(counter)
    }
}

/// The token at precision `p` of the item fingerprint `f` stands for (`Counter::exact_tokens`):
/// that of the first hash `reduce` maps to `f` in the fingerprints' universe.
#[inline]
fn fingerprint_token(f: u64, first: &FirstOfReduced, p: u32) -> u64 {
    token_value(first.of(f), p)
}

/// `Counter::append_tokens` by `FirstOfReduced::of_in_halves`, compiled for AVX-512 DQ and
/// CD, which multiply 64-bit lanes and count their leading zeros: eight fingerprints a step.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512cd,avx512vl,lzcnt")]
fn tokens_in_halves_avx512(
    fingerprints: &[u64],
    first: &FirstOfReduced,
    p: u32,
    tokens: &mut Vec<u32>,
) {
    tokens.extend(
        fingerprints
            .iter()
            .map(|&f| token_value(first.of_in_halves(f), p) as u32),
    );
}

/// `Counter::append_tokens` by `FirstOfReduced::of_in_halves`, four lanes at a time with AVX2
/// (lc/token_lanes.rs), at precisions it takes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn tokens_in_halves_avx2(
    fingerprints: &[u64],
    first: &FirstOfReduced,
    p: u32,
    tokens: &mut Vec<u32>,
) {
    super::token_lanes::first_tokens(fingerprints, first, p, tokens, |rest, out| {
        out.extend(rest.iter().map(|&f| fingerprint_token(f, first, p) as u32))
    });
}

/// How many of `values` (sorted, distinct) `sorted` (sorted, distinct) lacks: a search for each
/// of a few values, a walk through both lists otherwise (many copies of one large set cost a
/// pass over each, not a search per value).
pub(super) fn missing_from(sorted: &[u64], values: &[u64]) -> usize {
    let searches = values.len() * ((sorted.len() | 1).ilog2() as usize + 1);
    if searches < sorted.len() + values.len() {
        return values
            .iter()
            .filter(|v| sorted.binary_search(v).is_err())
            .count();
    }
    let (mut i, mut j, mut shared) = (0, 0, 0);
    while i < sorted.len() && j < values.len() {
        let (a, b) = (sorted[i], values[j]);
        i += usize::from(a <= b);
        j += usize::from(b <= a);
        shared += usize::from(a == b);
    }
    values.len() - shared
}

/// Merges into `sorted` (sorted, distinct) the `missing` of `values` (sorted, distinct) it
/// lacks (`missing_from`), from the back, each value moved once.
pub(super) fn merge_missing(sorted: &mut Vec<u64>, values: &[u64], missing: usize) {
    let mut i = sorted.len();
    sorted.resize(i + missing, 0);
    let mut at = sorted.len();
    for &v in values.iter().rev() {
        while i > 0 && sorted[i - 1] > v {
            i -= 1;
            at -= 1;
            sorted[at] = sorted[i];
        }
        if i > 0 && sorted[i - 1] == v {
            continue;
        }
        at -= 1;
        sorted[at] = v;
    }
}

/// `values` (sorted) without repeats.
fn dedup(values: impl Iterator<Item = u64>) -> impl Iterator<Item = u64> {
    let mut last = None;
    values.filter(move |&v| {
        let new = last != Some(v);
        last = Some(v);
        new
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::levels::{MAX_PRECISION, MIN_PRECISION};

    /// `append_tokens` lists each fingerprint's token as `fingerprint_token` gives it, in
    /// order, whichever copy the CPU runs (and the AVX2 copy where the CPU has AVX2), for
    /// counters of several universes, their smallest and largest fingerprints included.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn appended_tokens_are_each_fingerprints_token() {
        for (rate, capacity) in [(0.01, 50_000), (0.01, 10_000), (0.001, 1_000_000)] {
            let counter = Counter::reserve(rate, capacity, u64::MAX).unwrap();
            let universe = counter.geometry.universe();
            let first = FirstOfReduced::new(universe);
            let mut x = 3u64;
            let mut fingerprints: Vec<u64> = (0..5_000)
                .map(|_| {
                    crate::core::test_rng::step(&mut x);
                    reduce(x, universe)
                })
                .collect();
            fingerprints.extend([0, 1, universe / 2, universe - 2, universe - 1]);
            for p in MIN_PRECISION..=MAX_PRECISION {
                let want: Vec<u32> = fingerprints
                    .iter()
                    .map(|&f| fingerprint_token(f, &first, p) as u32)
                    .collect();
                let mut got = vec![7];
                counter.append_tokens(&fingerprints, p, &mut got);
                assert_eq!(got[0], 7, "appended after what was there");
                assert_eq!(got[1..], want, "universe {universe}, p {p}");
                #[cfg(target_arch = "x86_64")]
                if crate::lc::token_lanes::usable(p) {
                    got.truncate(1);
                    // SAFETY: the CPU has AVX2 (`usable` says so).
                    unsafe { tokens_in_halves_avx2(&fingerprints, &first, p, &mut got) };
                    assert_eq!(got[1..], want, "avx2, universe {universe}, p {p}");
                }
            }
        }
    }

    proptest::proptest! {
        /// A batch of items, repeats and items already held among them, leaves the counter as
        /// adding them one at a time does, and counts the same new items: in exact mode at
        /// once, and across the switch to a sketch one at a time.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn batches_are_adds_one_by_one(
            (rate, capacity) in proptest::sample::select(vec![(0.01, 50_000), (0.05, 1_000), (0.01, 10_000_000)]),
            held in 0u64..300,
            batch in proptest::collection::vec(0u64..400, 0..120),
        ) {
            let mut counter = Counter::reserve(rate, capacity, u64::MAX).unwrap();
            for i in 0..held {
                counter.add(&i.to_le_bytes()).unwrap();
            }
            let items: Vec<[u8; 8]> = batch.iter().map(|i| i.to_le_bytes()).collect();
            let mut one_by_one = counter.try_clone().unwrap();
            let new = items.iter().filter(|i| one_by_one.add(&i[..]).unwrap()).count() as u64;
            let added = counter.add_all_within(items.iter().map(|i| &i[..]), u64::MAX);
            proptest::prop_assert_eq!(added, (new, items.len(), None));
            proptest::prop_assert_eq!(counter, one_by_one);
        }

        /// Gathering sorted sets one after another, by search or by walk, gives their union.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn merging_missing_values_gives_the_union(
            sets in proptest::collection::vec(
                proptest::collection::btree_set(0u64..2_000, 0..600), 1..8),
        ) {
            let (mut gathered, mut truth) = (Vec::new(), std::collections::BTreeSet::new());
            for set in &sets {
                let values: Vec<u64> = set.iter().copied().collect();
                let missing = missing_from(&gathered, &values);
                truth.extend(set);
                proptest::prop_assert_eq!(gathered.len() + missing, truth.len());
                merge_missing(&mut gathered, &values, missing);
                proptest::prop_assert!(gathered.iter().eq(truth.iter()));
            }
        }
    }
}
