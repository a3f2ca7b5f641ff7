//! A chain's batches (`BF.MADD`, `BF.INSERT`, `BF.MEXISTS` of several items): the same
//! results as one item at a time, with the lines of large bit arrays prefetched a window at a
//! time (`core::batch`), and a batch that fits a sparse newest sub-filter re-coding its set
//! once.

use super::{Chain, ChainError};
use crate::bloom::filter::{FilterParams, Layout};
use crate::bloom::params::SubParams;
use crate::bloom::sparse;
use crate::core::batch;
use crate::core::hashing::ItemHash;
use std::ops::Range;

impl Chain {
    /// Adds items in order, passing each result to `done`, and stops after the first error.
    /// Same results as `add` one by one; the lines of a large filter are prefetched a window of
    /// items at a time (`core::batch`), so that their cache misses overlap instead of following
    /// each other.
    pub fn add_batch(
        &mut self,
        hashes: &[ItemHash],
        limit: u64,
        mut done: impl FnMut(Result<bool, ChainError>),
    ) {
        // One bit array with room for the whole batch (a large reserved filter): nothing can
        // scale or fail, so the probes run in one loop over its words.
        if let ([SubParams::Bits(p)], true) =
            (&*self.params.subs, self.can_hold(hashes.len() as u64))
        {
            let array = &mut self.body.bits_mut()[0];
            let added = array.set_batch(p, hashes, |new| done(Ok(new)));
            self.body.items_mut(&self.params)[0] += added;
            return;
        }
        if self.add_batch_to_sparse(hashes, &mut done) {
            return;
        }
        // Each item reads the older large arrays' first probes and writes the newest's.
        let lines = self.prefetched_lines(0..1) + self.newest_prefetched_lines();
        let prefetch = |chain: &Self, hash: &ItemHash| {
            chain.prefetch(hash, 0..1);
            chain.prefetch_newest(hash, 1..u32::MAX);
        };
        batch::in_windows(hashes, lines, self, prefetch, |chain, hash| {
            let result = chain.add(hash, limit);
            let go_on = result.is_ok();
            done(result);
            go_on
        });
    }

    /// `add_batch` when the newest sub-filter is a sparse set that takes the whole batch
    /// without filling up: its set is re-coded once with every new fingerprint instead of once
    /// per item (`sparse::add_all`). False, with nothing changed and `done` not called, when
    /// that does not apply or the memory cannot be had (then the items go one at a time).
    fn add_batch_to_sparse(
        &mut self,
        hashes: &[ItemHash],
        done: &mut impl FnMut(Result<bool, ChainError>),
    ) -> bool {
        let last = self.params.subs.len() - 1;
        let SubParams::Sparse(p) = &self.params.subs[last] else {
            return false;
        };
        let n = self.filter_items()[last];
        // Re-coding costs about n values' work, one insert about n/64 words' shift.
        let worth_it = hashes.len() > 1 && hashes.len() as u64 * 64 >= n;
        if !worth_it || n + hashes.len() as u64 >= p.capacity {
            return false;
        }
        // Items an older sub-filter holds are answered there and do not reach the set.
        let held: Vec<bool> = hashes
            .iter()
            .map(|h| last > 0 && self.held_by_any(last, h))
            .collect();
        // Sized once: a filtered iterator's collect would grow the list item by item.
        let mut vs = Vec::with_capacity(hashes.len());
        vs.extend(
            hashes
                .iter()
                .zip(&held)
                .filter(|(_, &h)| !h)
                .map(|(hash, _)| sparse::fingerprint(hash, p.universe)),
        );
        let Some(new) = self.body.add_all_to_last_set(last, p, &vs) else {
            return false;
        };
        let mut new = new.into_iter();
        for h in held {
            done(Ok(!h && new.next().unwrap_or(false)));
        }
        true
    }

    /// `contains` for each item, in order; the lookups of large arrays go in the two rounds
    /// of `core::batch::lookups`.
    pub fn contains_batch(&self, hashes: &[ItemHash], mut done: impl FnMut(bool)) {
        if let [SubParams::Bits(p)] = &*self.params.subs {
            self.body.bits()[0].contains_batch(p, hashes, done);
            return;
        }
        match self.params.bits().iter().any(FilterParams::prefetched) {
            true => batch::lookups(self, hashes, &mut done),
            false => hashes.iter().for_each(|h| done(self.contains(h))),
        }
    }

    /// Lines a lookup reads for `probes` in the large arrays (those batches prefetch).
    fn prefetched_lines(&self, probes: Range<u32>) -> usize {
        self.body
            .arrays(&self.params)
            .filter(|(p, _)| p.prefetched())
            .map(|(p, _)| match p.layout {
                Layout::Blocked => usize::from(probes.start == 0),
                Layout::Standard => probes.end.min(p.hashes).saturating_sub(probes.start) as usize,
            })
            .sum()
    }

    /// Lines an add writes in the newest sub-filter beyond its first probe, if it is a large
    /// bit array.
    fn newest_prefetched_lines(&self) -> usize {
        match self.params.subs.last() {
            Some(SubParams::Bits(p)) if p.prefetched() => p.lines() - 1,
            _ => 0,
        }
    }

    /// Starts loading the lines of the item's `probes` in every large array.
    #[inline]
    fn prefetch(&self, hash: &ItemHash, probes: Range<u32>) {
        self.body
            .arrays(&self.params)
            .filter(|(p, _)| p.prefetched())
            .for_each(|(p, b)| b.prefetch_probes(p, hash, probes.clone()));
    }

    /// Starts loading the lines of the item's `probes` in the newest sub-filter, if it is a
    /// large bit array.
    #[inline]
    fn prefetch_newest(&self, hash: &ItemHash, probes: Range<u32>) {
        if let (Some(SubParams::Bits(p)), Some(last)) =
            (self.params.subs.last(), self.body.bits().last())
        {
            if p.prefetched() {
                last.prefetch_probes(p, hash, probes);
            }
        }
    }
}

/// A chain's lookup in `batch::lookups`' two rounds: probe 0 of every bit array and the sparse
/// sets (small enough to stay cached), then the whole lookup for the items that passed.
impl batch::Lookup<ItemHash> for Chain {
    fn rest_lines(&self) -> usize {
        self.prefetched_lines(1..u32::MAX)
    }

    // The arrays' probes are found again by their tests (positions of several arrays).
    fn rest_positions(&self) -> usize {
        0
    }

    #[inline]
    fn locate_first(&self, hash: &ItemHash) -> u64 {
        self.prefetch(hash, 0..1);
        0
    }

    #[inline]
    fn first(&self, hash: &ItemHash, _: u64) -> bool {
        let params = &*self.params;
        for (p, b) in self.body.arrays(params) {
            if b.first_probe(p, hash) {
                return true;
            }
        }
        // The sets through the whole lookup, compiled for POPCNT (the arrays refuse at once).
        params.sparse_count() > 0 && self.contains(hash)
    }

    #[inline]
    fn locate_rest(&self, hash: &ItemHash, _: &mut [u64]) {
        self.prefetch(hash, 1..u32::MAX)
    }

    #[inline]
    fn rest(&self, hash: &ItemHash, _: &[u64]) -> bool {
        self.contains(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hashing::hash_item;

    const GIB: u64 = 1 << 30;

    fn h(i: u64) -> ItemHash {
        hash_item(&i.to_le_bytes())
    }

    /// Adds `hashes` one by one and in batches of `size` to copies of `chain`, checks both
    /// give the same results and the same chain, then that batch lookups of members and
    /// non-members answer as single ones.
    fn check_batches(chain: &Chain, hashes: &[ItemHash], size: usize) {
        let mut one = chain.clone();
        let expected: Vec<_> = hashes.iter().map(|h| one.add(h, GIB)).collect();
        let mut batch = chain.clone();
        let mut got = Vec::new();
        for chunk in hashes.chunks(size) {
            batch.add_batch(chunk, GIB, |r| got.push(r));
        }
        assert_eq!(got, expected);
        assert_eq!(batch, one);
        // Half members, half not, interleaved.
        let probes: Vec<ItemHash> = (0..2 * hashes.len() as u64)
            .map(|i| {
                if i % 2 == 0 {
                    hashes[i as usize / 2]
                } else {
                    h(i << 40)
                }
            })
            .collect();
        let mut found = Vec::new();
        for chunk in probes.chunks(size) {
            batch.contains_batch(chunk, |b| found.push(b));
        }
        let singles: Vec<bool> = probes.iter().map(|p| one.contains(p)).collect();
        assert_eq!(found, singles);
        assert!(found.iter().step_by(2).all(|&f| f));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn batches_on_large_arrays_match_one_by_one() {
        // Arrays past batch::PREFETCH_MIN_BYTES, whose batches go in prefetched windows: one
        // array with room for every batch, and a chain scaled past a large first array (its
        // batches prefetch the older array's first probes and the newest's every probe).
        for layout in [Layout::Standard, Layout::Blocked] {
            let reserved = Chain::with_layout(layout, 0, 0.01, 1_000_000, 0, GIB, 0).unwrap();
            assert!(reserved.params.bits().iter().all(|p| p.prefetched()));
            let hashes: Vec<ItemHash> = (0..3000).map(|i| h(i * 7 % 2900)).collect();
            for size in [1000, 257, 100, 7] {
                check_batches(&reserved, &hashes, size);
            }
            let mut scaled = Chain::with_layout(layout, 0, 1e-6, 300_000, 2, GIB, 0).unwrap();
            let mut i = 1u64 << 50;
            while scaled.filters().len() < 2 {
                scaled.add(&h(i), GIB).unwrap();
                i += 1;
            }
            assert!(scaled.params.bits()[0].prefetched());
            let hashes: Vec<ItemHash> = (0..3000).map(|i| h(i * 7 % 2900)).collect();
            check_batches(&scaled, &hashes, 300);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn batches_on_chains_of_small_arrays_match_one_by_one() {
        // Several bit arrays and sparse sets, none prefetched (the plain loops).
        for layout in [Layout::Standard, Layout::Blocked] {
            let mut chain = Chain::with_layout(layout, 0, 0.01, 5_000, 2, GIB, 0).unwrap();
            for i in 0..40_000 {
                chain.add(&h(i << 32), GIB).unwrap();
            }
            assert!(chain.params.bits().len() >= 3);
            let hashes: Vec<ItemHash> = (0..3000).map(|i| h(i * 7 % 2900)).collect();
            check_batches(&chain, &hashes, 100);
        }
    }
}
