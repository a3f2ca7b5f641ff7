//! Unions of exact counters of several sizes, counted from their fingerprints' hash intervals
//! (pure). An exact counter's fingerprint `f` in its universe `U` stands for the hashes
//! `[f·2^64/U, (f+1)·2^64/U)` (exact.rs), and counters of other sizes have other universes,
//! so the same item is a different fingerprint in each; its hash lies in its interval in
//! every counter holding it. Sorted by their first hash, the intervals of all the counters
//! fall into runs that overlap, each one item per counter listing it there.

use super::counter::{Counter, LcError};
use super::tokens::token_value;
use crate::core::hashing::FirstOfReduced;

/// The number of distinct items in the union of exact counters of several sizes. Across
/// counters, intervals that overlap are one item (two items are taken for one only where
/// their hashes are about as close as in a collision of the coarser universe, which every
/// universe makes unlikely among the items it holds exactly). One counter's intervals are
/// disjoint, so a run of overlapping intervals holds as many items as the most that one
/// counter lists in it.
///
/// At least as many as the union's sketch at precision `p` sets tokens, though: a merge of
/// them stores that sketch, whose count cannot be below it (running.rs, "Bounds"). An
/// item's token is that of its interval's start, and where a token boundary falls between
/// the starts of one item's intervals in two universes (about one shared item in 10^6 at
/// 1%), the item sets two; it then counts twice, in `LC.COUNT` and in the merge alike.
/// `OutOfMemory` if the list of all the intervals cannot be made.
pub(super) fn distinct_across_sizes(counters: &[&Counter], p: u32) -> Result<u64, LcError> {
    let listed: u64 = counters.iter().map(|c| c.header().count).sum();
    // Each interval as its first hash, its span (its length less one, below 2^32: every
    // universe exceeds 2^32, geometry.rs) and its counter (fewer than 2^32 in one command).
    let mut intervals: Vec<(u64, u32, u32)> = Vec::new();
    intervals
        .try_reserve_exact(listed as usize)
        .map_err(|_| LcError::OutOfMemory)?;
    let mut decoded = Vec::new();
    for (i, c) in (0u32..).zip(counters) {
        let universe = c.geometry.universe();
        let first = FirstOfReduced::new(universe);
        intervals.extend(c.fingerprints_in(&mut decoded).iter().map(|&f| {
            let start = first.of(f);
            // The last fingerprint's interval ends at 2^64 (0 in 64 bits).
            let end = if f + 1 < universe { first.of(f + 1) } else { 0 };
            let span = end.wrapping_sub(start) - 1;
            debug_assert!(span <= u64::from(u32::MAX));
            (start, span as u32, i)
        }));
    }
    let intervals = by_start(&intervals)?;
    let (mut distinct, mut run, mut run_last) = (0, Vec::new(), 0);
    // A token stands for an interval of hashes: the starts setting one are neighbours here.
    let (mut tokens, mut last_token) = (0, None);
    for &(start, span, i) in &intervals {
        if !run.is_empty() && start > run_last {
            distinct += most_of_one(&mut run);
            run.clear();
        }
        let last = start + u64::from(span);
        run_last = if run.is_empty() {
            last
        } else {
            run_last.max(last)
        };
        run.push(i);
        let token = token_value(start, p);
        tokens += u64::from(last_token != Some(token));
        last_token = Some(token);
    }
    Ok((distinct + most_of_one(&mut run)).max(tokens))
}

/// `intervals` (first hash, span, counter) in order of their first hashes (those starting
/// alike in any order: the runs are the same). The first hashes are uniform, so they are
/// dealt by their top bits into about one bucket per two, and each bucket is sorted alone:
/// two passes and a few steps an interval, where a sort of the whole list (27,600 of them)
/// took 60% of the count's time.
fn by_start(intervals: &[(u64, u32, u32)]) -> Result<Vec<(u64, u32, u32)>, LcError> {
    let bits = (intervals.len() / 2).max(1).ilog2() + 1;
    let bucket = |start: u64| (start >> (64 - bits)) as usize;
    let (mut ends, mut dealt): (Vec<u32>, Vec<(u64, u32, u32)>) = (Vec::new(), Vec::new());
    ends.try_reserve_exact(1 << bits)
        .and_then(|()| dealt.try_reserve_exact(intervals.len()))
        .map_err(|_| LcError::OutOfMemory)?;
    // Each bucket's end, then its start as the intervals are dealt back to front.
    ends.resize(1 << bits, 0);
    intervals
        .iter()
        .for_each(|&(start, _, _)| ends[bucket(start)] += 1);
    ends.iter_mut().fold(0, |sum, end| {
        *end += sum;
        *end
    });
    dealt.resize(intervals.len(), (0, 0, 0));
    for &interval in intervals.iter().rev() {
        let end = &mut ends[bucket(interval.0)];
        *end -= 1;
        dealt[*end as usize] = interval;
    }
    let mut from = 0;
    for &start in &ends[1..] {
        dealt[from..start as usize].sort_unstable_by_key(|&(start, _, _)| start);
        from = start as usize;
    }
    dealt[from..].sort_unstable_by_key(|&(start, _, _)| start);
    Ok(dealt)
}

/// The most times one value occurs in `values` (reordered).
fn most_of_one(values: &mut [u32]) -> u64 {
    if values.len() < 2 {
        return values.len() as u64;
    }
    values.sort_unstable();
    values
        .chunk_by(|a, b| a == b)
        .map(|same| same.len() as u64)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Intervals dealt into buckets come out in the order a sort of them all gives, for any
    /// number of them, starts repeated or crowded into one bucket included.
    #[test]
    fn intervals_come_in_order_of_their_first_hash() {
        let mut x = 5u64;
        for n in [0usize, 1, 2, 3, 7, 100, 1_000, 4_099] {
            for crowded in [false, true] {
                let intervals: Vec<(u64, u32, u32)> = (0..n as u32)
                    .map(|i| {
                        let h = crate::core::test_rng::step(&mut x);
                        let start = if crowded { h >> 40 } else { h };
                        (start - start % 3, i, i)
                    })
                    .collect();
                let starts = |v: &[(u64, u32, u32)]| v.iter().map(|t| t.0).collect::<Vec<_>>();
                let mut sorted = intervals.clone();
                sorted.sort_unstable();
                let dealt = by_start(&intervals).unwrap();
                assert_eq!(starts(&dealt), starts(&sorted), "{n} {crowded}");
                let mut dealt = dealt;
                dealt.sort_unstable();
                assert_eq!(dealt, sorted, "{n} {crowded}: the same intervals");
            }
        }
    }
}
