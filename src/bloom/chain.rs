//! The scaling chain: a list of Bloom filters that grows as items arrive (a Scalable Bloom
//! Filter, Almeida, Baquero, Preguiça, Hutchison, 2007).
//!
//! * Expansion e ≥ 1, or non-scaling (e = 0; `EXPANSION 0` ≡ `NONSCALING`). A non-scaling chain
//!   is one filter sized for the requested rate p; when it holds its capacity a new item is
//!   refused (`ERR non scaling filter is full`).
//! * In a scaling chain, sub-filter i has capacity c·e^i. The error budget p is spent as
//!   sub-filters are added: the first gets p_0 = h·p with h = `HEAD_SHARE`, and each later one
//!   gets the fraction (1−r) of what the existing ones left, p_i = (p − Σ_{j<i} p_j)·(1−r) with
//!   r = `TIGHTENING`; for a chain built by this version p_i = (1−h)·p·(1−r)·r^(i−1). Since
//!   Σ p_i ≤ p over the infinite chain, the compound false-positive rate (a lookup hits if any
//!   sub-filter hits, so it is at most Σ p_i) stays ≤ p at any fill. A new sub-filter is added
//!   when the last one holds its capacity.
//! * Why this schedule (bits per item at 1% with e = 2, growth = items ÷ first capacity; the
//!   model is −ln p_i/ln²2 bits per slot of every allocated sub-filter, see docs/BENCHMARKS.md):
//!
//!   | growth                   | 1×   | 2×   | 4×   | 10×  | 100× | 1000× | 10000× |
//!   |--------------------------|------|------|------|------|------|-------|--------|
//!   | RedisBloom (p/2, r=½)    | 11.0 | 18.0 | 22.9 | 21.4 | 23.3 | 23.1  | 46.4   |
//!   | geometric p(1−r)r^i, .85 | 13.5 | 20.6 | 24.5 | 21.5 | 19.4 | 16.6  | 28.8   |
//!   | this: h=0.55, r=0.8      | 10.8 | 20.0 | 25.1 | 22.4 | 20.9 | 18.3  | 32.3   |
//!
//!   A filter reserved at the size it will really hold (1×) is the most common case, and then
//!   only the first sub-filter exists: giving it just over half the budget makes it smaller
//!   than RedisBloom's (whose first sub-filter gets p/2), where a pure geometric schedule pays
//!   23% more. Default-created filters (capacity 100) routinely grow 100×–10000×; there the
//!   gentle r = 0.8 (Almeida et al. recommend 0.8–0.9) saves 10–30% against RedisBloom's
//!   halving. The price is 4–10% more than RedisBloom at 2×–10×. No schedule can do well at
//!   every growth: the one that is optimal for a known final number of sub-filters gives each
//!   a budget ∝ its capacity, and leaves little for the first; with h ≥ ½ no schedule with
//!   Σ p_i ≤ p gets below ~17.9 bits per item at 100× (a search over head-then-rising-then-
//!   geometric schedules), and those near it cost 25–40% more at 2×–10×.
//! * Because each new rate is taken from the budget the stored sub-filters left, a chain
//!   written by an older version (p_i = p·0.15·0.85^i) keeps Σ p_i ≤ p when it grows here.
//! * Every sub-filter's own parameters are stored in the encoding, so this schedule can change
//!   in a later version without breaking stored values; only new sub-filters follow it.
//! * Limits, checked before anything is allocated: the key's total bytes stay within the
//!   caller's limit (`max-memory-per-key`), p_i stays ≥ `MIN_ERROR_RATE` (about 200 scale-outs
//!   at most), capacity arithmetic is checked. Each failure is an error, never an abort.
//! * `items` counts the adds that returned "new"; each sub-filter counts its own.
//! * Every sub-filter has the chain's layout (standard or blocked, `filter::Layout`), chosen at
//!   creation; the blocked layout sizes each sub-filter for its p_i by its own rule
//!   (`blocked.rs`), so the compound bound holds for it too.

use super::filter::{Filter, FilterParams, Layout, SizeError, MIN_ERROR_RATE};
use crate::alloc::size_class;
use crate::hashing::ItemHash;

/// The share of the error budget the first sub-filter of a scaling chain gets.
pub const HEAD_SHARE: f64 = 0.55;
/// The error-rate tightening ratio r between consecutive later sub-filters.
pub const TIGHTENING: f64 = 0.8;

/// How many items ahead batch operations prefetch: enough to overlap a few items' misses,
/// few enough that the prefetched lines are still cached when their turn comes (and that the
/// CPU's ~20 outstanding misses are not exceeded): a standard item needs k lines, a blocked
/// one a single line, so blocked batches look further ahead.
const PREFETCH_DISTANCE: usize = 4;
const PREFETCH_DISTANCE_BLOCKED: usize = 16;
/// Probes a batch lookup prefetches per item: a non-member is usually refused by its first
/// one or two, so fetching all k would spend memory bandwidth on lines never read (5× slower
/// on a sparse 0.001 / 200M filter, `benches/core.rs`).
const LOOKUP_PREFETCH_PROBES: u32 = 2;
/// Batches on a smaller newest filter (likely in the CPU's caches) do not prefetch.
const PREFETCH_MIN_BYTES: u64 = 1 << 20;

/// Why a chain could not be created or could not take an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// A non-scaling filter holds its capacity.
    Full,
    /// The key would need `needed` bytes, over the `limit`.
    TooLarge { needed: u64, limit: u64 },
    /// The requested error rate is too small to size a filter for.
    ErrorRate,
    /// Scaling again would push a sub-filter's error rate below `MIN_ERROR_RATE`.
    CannotScale,
    /// Capacity or size arithmetic overflows.
    Overflow,
    /// The allocator refused.
    OutOfMemory,
}

/// The reply text without `ERR ` (`errors.rs` adds it).
impl std::fmt::Display for ChainError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            ChainError::Full => write!(f, "non scaling filter is full"),
            ChainError::TooLarge { needed, limit } => write!(
                f,
                "filter would use {needed} bytes, more than max-memory-per-key ({limit} bytes)"
            ),
            ChainError::ErrorRate => write!(
                f,
                "error rate too small (a filter's error rate must be at least {MIN_ERROR_RATE:e})"
            ),
            ChainError::CannotScale => write!(
                f,
                "filter cannot scale further: a new sub-filter's error rate would be below {MIN_ERROR_RATE:e}"
            ),
            ChainError::Overflow => write!(f, "filter too large (capacity overflows)"),
            ChainError::OutOfMemory => write!(f, "insufficient memory to create filter"),
        }
    }
}

impl From<SizeError> for ChainError {
    fn from(e: SizeError) -> Self {
        match e {
            SizeError::ErrorRate => ChainError::ErrorRate,
            SizeError::TooLarge => ChainError::Overflow,
            SizeError::OutOfMemory => ChainError::OutOfMemory,
        }
    }
}

/// Bytes a chain of `filters` sub-filters with `data_bytes` of bits occupies in memory.
pub fn memory_bytes_for(filters: u64, data_bytes: u64) -> Option<u64> {
    let fixed = std::mem::size_of::<Chain>() as u64;
    let per_filter = std::mem::size_of::<Filter>() as u64;
    filters
        .checked_mul(per_filter)?
        .checked_add(fixed)?
        .checked_add(data_bytes)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    layout: Layout,
    error_rate: f64,
    /// 0: non-scaling.
    expansion: u32,
    items: u64,
    filters: Vec<Filter>,
}

impl Chain {
    /// A standard-layout chain with one empty filter, refused if it would take more than
    /// `limit` bytes.
    pub fn new(
        error_rate: f64,
        capacity: u64,
        expansion: u32,
        limit: u64,
    ) -> Result<Self, ChainError> {
        Self::with_layout(Layout::Standard, error_rate, capacity, expansion, limit)
    }

    /// `new` with the given layout.
    pub fn with_layout(
        layout: Layout,
        error_rate: f64,
        capacity: u64,
        expansion: u32,
        limit: u64,
    ) -> Result<Self, ChainError> {
        let first_rate = if expansion == 0 {
            error_rate
        } else {
            error_rate * HEAD_SHARE
        };
        let params = FilterParams::for_layout(layout, capacity, first_rate)?;
        let mut chain = Self {
            layout,
            error_rate,
            expansion,
            items: 0,
            filters: Vec::new(),
        };
        chain.push_filter(params, limit)?;
        Ok(chain)
    }

    /// A chain from decoded parts; the codec has validated them (at least one filter, a
    /// non-scaling chain has exactly one, every filter has the chain's layout).
    pub fn from_parts(error_rate: f64, expansion: u32, filters: Vec<Filter>) -> Self {
        let items = filters.iter().map(Filter::items).sum();
        let layout = filters
            .first()
            .map_or(Layout::Standard, |f| f.params().layout);
        Self {
            layout,
            error_rate,
            expansion,
            items,
            filters,
        }
    }

    /// A deep copy, allocated fallibly (`COPY` of a large filter must not abort the server).
    pub fn try_clone(&self) -> Result<Self, ChainError> {
        let mut filters = Vec::new();
        filters
            .try_reserve_exact(self.filters.len())
            .map_err(|_| ChainError::OutOfMemory)?;
        for f in &self.filters {
            filters.push(f.try_clone()?);
        }
        Ok(Self::from_parts(self.error_rate, self.expansion, filters))
    }

    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The expansion factor, or None for a non-scaling chain.
    pub fn expansion(&self) -> Option<u32> {
        (self.expansion != 0).then_some(self.expansion)
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn filters(&self) -> &[Filter] {
        &self.filters
    }

    pub fn filters_mut(&mut self) -> &mut [Filter] {
        &mut self.filters
    }

    /// The sum of the sub-filters' capacities.
    pub fn capacity(&self) -> u64 {
        self.filters
            .iter()
            .fold(0u64, |c, f| c.saturating_add(f.params().capacity))
    }

    /// Bytes of all bit arrays.
    pub fn data_bytes(&self) -> u64 {
        self.filters.iter().map(|f| f.params().bytes()).sum()
    }

    /// Bytes the chain occupies in memory: each allocation (the box Redis holds, the list of
    /// sub-filters, each bit array) rounded up to the allocator's size class.
    pub fn memory_bytes(&self) -> u64 {
        let list = self.filters.capacity() * std::mem::size_of::<Filter>();
        self.filters
            .iter()
            .map(Filter::allocated_bytes)
            .sum::<u64>()
            + size_class(std::mem::size_of::<Chain>() as u64)
            + size_class(list as u64)
    }

    /// Whether the item is (probably) present.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        if self.filters.len() > 1 {
            // As in `add`: overlap the cache misses of the sub-filters' first probes.
            self.filters.iter().for_each(|f| f.prefetch_probes(hash, 2));
        }
        // The newest filter is the largest and holds most items: look there first.
        self.filters.iter().rev().any(|f| f.contains(hash))
    }

    /// Whether `n` more new items fit in the last sub-filter, so that adding them cannot scale
    /// the chain (and the memory limit cannot come into play).
    pub fn can_hold(&self, n: u64) -> bool {
        self.filters
            .last()
            .is_some_and(|f| f.items().saturating_add(n) <= f.params().capacity)
    }

    /// Adds an item: Ok(true) if it was new, Ok(false) if it was (probably) present already.
    /// Scaling never makes the key exceed `limit` bytes.
    pub fn add(&mut self, hash: &ItemHash, limit: u64) -> Result<bool, ChainError> {
        // A chain always has at least one filter (new and from_parts guarantee it).
        let (last, older) = self.filters.split_last_mut().expect("a chain has a filter");
        if !older.is_empty() {
            // Every sub-filter is looked at, each a cache miss or two in a different array:
            // start them all at once instead of one after the other.
            last.prefetch(hash);
            older.iter().for_each(|f| f.prefetch_probes(hash, 2));
        }
        // Presence in any older filter first: only then may the last one's bits change.
        if older.iter().rev().any(|f| f.contains(hash)) {
            return Ok(false);
        }
        if !last.is_full() {
            // Test and set in one pass over the last filter's probes.
            let added = last.insert_if_absent(hash);
            self.items += added as u64;
            return Ok(added);
        }
        if last.contains(hash) {
            return Ok(false);
        }
        if self.expansion == 0 {
            return Err(ChainError::Full);
        }
        let params = self.next_params()?;
        self.push_filter(params, limit)?;
        let last = self.filters.len() - 1;
        self.filters[last].insert(hash);
        self.items += 1;
        Ok(true)
    }

    /// Adds items in order, passing each result to `done`, and stops after the first error.
    /// Same results as `add` one by one; the probes of later items are prefetched so that the
    /// cache misses of a large filter overlap instead of following each other.
    pub fn add_batch(
        &mut self,
        hashes: &[ItemHash],
        limit: u64,
        mut done: impl FnMut(Result<bool, ChainError>),
    ) {
        for (i, hash) in hashes.iter().enumerate() {
            self.prefetch_ahead(hashes, i, u32::MAX);
            let result = self.add(hash, limit);
            let stop = result.is_err();
            done(result);
            if stop {
                return;
            }
        }
    }

    /// `contains` for each item, in order, with the same prefetching as `add_batch`.
    pub fn contains_batch(&self, hashes: &[ItemHash], mut done: impl FnMut(bool)) {
        for (i, hash) in hashes.iter().enumerate() {
            self.prefetch_ahead(hashes, i, LOOKUP_PREFETCH_PROBES);
            done(self.contains(hash));
        }
    }

    /// Before item i of a batch: prefetch the first `probes` probes of item i + distance in the
    /// newest (largest) filter, and at the start the items up to the distance.
    #[inline]
    fn prefetch_ahead(&self, hashes: &[ItemHash], i: usize, probes: u32) {
        let last = self.last();
        if last.params().bytes() < PREFETCH_MIN_BYTES {
            // Cached anyway: the prefetches would only cost instructions.
            return;
        }
        let d = match last.params().layout {
            Layout::Standard => PREFETCH_DISTANCE,
            Layout::Blocked => PREFETCH_DISTANCE_BLOCKED,
        };
        if i == 0 {
            hashes
                .iter()
                .take(d)
                .for_each(|h| last.prefetch_probes(h, probes));
        }
        if let Some(ahead) = hashes.get(i + d) {
            last.prefetch_probes(ahead, probes);
        }
    }

    fn last(&self) -> &Filter {
        // A chain always has at least one filter (new and from_parts guarantee it).
        &self.filters[self.filters.len() - 1]
    }

    /// The next sub-filter: capacity c·e^i, error rate (p − Σ p_j)·(1−r).
    fn next_params(&self) -> Result<FilterParams, ChainError> {
        let capacity = self
            .last()
            .params()
            .capacity
            .checked_mul(self.expansion as u64)
            .ok_or(ChainError::Overflow)?;
        let spent: f64 = self.filters.iter().map(|f| f.params().error_rate).sum();
        let rate = (self.error_rate - spent) * (1.0 - TIGHTENING);
        if rate.is_nan() || rate < MIN_ERROR_RATE {
            return Err(ChainError::CannotScale);
        }
        Ok(FilterParams::for_layout(self.layout, capacity, rate)?)
    }

    fn push_filter(&mut self, params: FilterParams, limit: u64) -> Result<(), ChainError> {
        let needed = self
            .data_bytes()
            .checked_add(params.bytes())
            .and_then(|data| memory_bytes_for(self.filters.len() as u64 + 1, data))
            .ok_or(ChainError::Overflow)?;
        if needed > limit {
            return Err(ChainError::TooLarge { needed, limit });
        }
        self.filters
            .try_reserve_exact(1)
            .map_err(|_| ChainError::OutOfMemory)?;
        self.filters.push(Filter::new(params, 0)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::hash_item;

    const GIB: u64 = 1 << 30;

    fn h(i: u64) -> ItemHash {
        hash_item(&i.to_le_bytes())
    }

    #[test]
    fn can_hold_says_when_an_add_could_scale() {
        let mut c = Chain::new(0.01, 10, 2, GIB).unwrap();
        assert!(c.can_hold(10) && !c.can_hold(11));
        let mut added = 0;
        for i in 0.. {
            added += c.add(&h(i), GIB).unwrap() as u64;
            if added == 10 {
                break;
            }
        }
        assert!(c.can_hold(0) && !c.can_hold(1));
        // No limit is needed while the chain can hold the item: it does not scale.
        assert_eq!(c.filters().len(), 1);
        c.add(&h(1_000_000), GIB).unwrap();
        assert_eq!(c.filters().len(), 2);
        assert!(c.can_hold(19) && !c.can_hold(20));
    }

    #[test]
    fn scales_with_tighter_rates_and_counts_items() {
        let mut c = Chain::new(0.01, 10, 2, GIB).unwrap();
        for i in 0..1000 {
            c.add(&h(i), GIB).unwrap();
        }
        // 10 + 20 + 40 + ... ≥ items: 7 filters hold 1270.
        assert_eq!(c.filters().len(), 7);
        assert!(c.items() <= 1000 && c.items() > 990);
        for (i, f) in c.filters().iter().enumerate() {
            let p = f.params();
            assert_eq!(p.capacity, 10 << i);
            let expected = match i {
                0 => 0.01 * HEAD_SHARE,
                _ => 0.01 * (1.0 - HEAD_SHARE) * (1.0 - TIGHTENING) * TIGHTENING.powi(i as i32 - 1),
            };
            assert!((p.error_rate - expected).abs() < 1e-15);
        }
        let sum: f64 = c.filters().iter().map(|f| f.params().error_rate).sum();
        assert!(sum <= 0.01);
        assert_eq!(c.capacity(), 1270);
        for i in 0..1000 {
            assert!(c.contains(&h(i)));
        }
        assert_eq!(c.add(&h(5), GIB), Ok(false));
        assert_eq!(c.try_clone().unwrap(), c);
    }

    #[test]
    fn batches_match_one_by_one() {
        // Scaling and non-scaling, with repeats inside a batch and a non-scaling filter that
        // fills up mid-batch (the batch stops at the error, like one-by-one adds would).
        let shapes = [(50u64, 2u32), (1000, 0), (7, 1)];
        for (layout, (capacity, expansion)) in [Layout::Standard, Layout::Blocked]
            .into_iter()
            .flat_map(|l| shapes.map(|s| (l, s)))
        {
            let mut one = Chain::with_layout(layout, 0.01, capacity, expansion, GIB).unwrap();
            let mut batch = one.clone();
            let hashes: Vec<ItemHash> = (0..3000).map(|i| h(i * 7 % 1900)).collect();
            let mut expected = Vec::new();
            for hash in &hashes {
                let r = one.add(hash, GIB);
                expected.push(r);
                if r.is_err() {
                    break;
                }
            }
            let mut got = Vec::new();
            for chunk in hashes.chunks(97) {
                batch.add_batch(chunk, GIB, |r| got.push(r));
                if got.last().is_some_and(|r| r.is_err()) {
                    break;
                }
            }
            assert_eq!(got, expected);
            assert_eq!(batch, one);
            let probes: Vec<ItemHash> = (0..4000).map(h).collect();
            let mut found = Vec::new();
            batch.contains_batch(&probes, |b| found.push(b));
            let singles: Vec<bool> = probes.iter().map(|p| one.contains(p)).collect();
            assert_eq!(found, singles);
        }
    }

    #[test]
    fn blocked_chains_keep_the_rate_when_scaling() {
        // 1% reserved at 1,000 and grown 100× (8 sub-filters), then 0.1% grown 10×: the
        // compound rate over 1,000,000 non-members stays within p (plus 3σ of noise).
        for (p, capacity, items) in [(0.01, 1000u64, 100_000u64), (0.001, 10_000, 100_000)] {
            let mut c = Chain::with_layout(Layout::Blocked, p, capacity, 2, GIB).unwrap();
            for i in 0..items {
                c.add(&hash_item(format!("member:{i}").as_bytes()), GIB)
                    .unwrap();
            }
            assert!(c.filters().len() > 3);
            assert!(c
                .filters()
                .iter()
                .all(|f| f.params().layout == Layout::Blocked));
            assert!((0..items).all(|i| c.contains(&hash_item(format!("member:{i}").as_bytes()))));
            let probes = 1_000_000u32;
            let hits = (0..probes)
                .filter(|i| c.contains(&hash_item(format!("other:{i}").as_bytes())))
                .count();
            let fp = hits as f64 / probes as f64;
            assert!(fp <= p + 3.0 * (p / probes as f64).sqrt(), "p={p}: {fp}");
            assert_eq!(c.try_clone().unwrap(), c);
        }
    }

    #[test]
    fn blocked_costs_at_most_15_percent_more_at_0_001() {
        // The filter: 0.001 / 200M, scaling (its first sub-filter gets 55% of p).
        let rate = 0.001 * HEAD_SHARE;
        let standard = FilterParams::for_capacity(200_000_000, rate).unwrap();
        let blocked = FilterParams::for_layout(Layout::Blocked, 200_000_000, rate).unwrap();
        let ratio = blocked.bytes() as f64 / standard.bytes() as f64;
        assert!(ratio <= 1.15, "{ratio}");
    }

    #[test]
    fn reserved_at_its_size_is_no_larger_than_redisbloom() {
        // RedisBloom 2.8.2's MEMORY USAGE for BF.RESERVE k 0.001 200000000 (scaling).
        let params = FilterParams::for_capacity(200_000_000, 0.001 * HEAD_SHARE).unwrap();
        let bytes = memory_bytes_for(1, params.bytes()).unwrap();
        assert!(bytes <= 395_507_200, "{bytes}");
    }

    #[test]
    fn older_schedules_keep_the_bound_when_growing() {
        // A chain written with the first schedule (p_i = p·0.15·0.85^i), 12 full sub-filters.
        let p = 0.01;
        let filters = (0..12)
            .map(|i| {
                let params =
                    FilterParams::for_capacity(10 << i, p * 0.15 * 0.85f64.powi(i)).unwrap();
                Filter::new(params, params.capacity).unwrap()
            })
            .collect();
        let mut c = Chain::from_parts(p, 2, filters);
        for i in 0..200_000 {
            c.add(&h(i), GIB).unwrap();
        }
        assert!(c.filters().len() > 13);
        let sum: f64 = c.filters().iter().map(|f| f.params().error_rate).sum();
        assert!(sum <= p);
    }

    #[test]
    fn non_scaling_fills_up() {
        let mut c = Chain::new(0.01, 3, 0, GIB).unwrap();
        let mut added = 0;
        let mut i = 0;
        while added < 3 {
            if c.add(&h(i), GIB).unwrap() {
                added += 1;
            }
            i += 1;
        }
        assert_eq!(c.add(&h(1_000_000), GIB), Err(ChainError::Full));
        assert_eq!(c.items(), 3);
        assert_eq!(c.expansion(), None);
        // Present items still answer 0, not an error.
        assert_eq!(c.add(&h(0), GIB), Ok(false));
    }

    #[test]
    fn memory_limit_refuses_creation_and_growth() {
        let err = Chain::new(0.001, 1_000_000_000, 0, GIB).unwrap_err();
        assert!(matches!(err, ChainError::TooLarge { needed, .. } if needed > GIB));
        assert!(err.to_string().starts_with("filter would use "));
        let mut c = Chain::new(0.01, 100, 4, 2_000).unwrap();
        let mut refused = None;
        for i in 0..10_000 {
            if let Err(e) = c.add(&h(i), 2_000) {
                refused = Some(e);
                break;
            }
        }
        assert!(matches!(refused, Some(ChainError::TooLarge { .. })));
        assert!(c.memory_bytes() <= 2_000);
    }

    #[test]
    fn scaling_stops_before_the_rate_underflows() {
        // Expansion 1 keeps every sub-filter small, so the rate limit is what stops it.
        let mut c = Chain::new(0.5, 1, 1, u64::MAX).unwrap();
        let mut i = 0;
        let err = loop {
            if let Err(e) = c.add(&h(i), u64::MAX) {
                break e;
            }
            i += 1;
        };
        assert_eq!(err, ChainError::CannotScale);
        let rates: Vec<f64> = c.filters().iter().map(|f| f.params().error_rate).collect();
        let left = 0.5 - rates.iter().sum::<f64>();
        assert!(rates.iter().all(|r| *r >= MIN_ERROR_RATE));
        assert!(left * (1.0 - TIGHTENING) < MIN_ERROR_RATE);
        assert!(c.filters().len() < 300);
    }

    #[test]
    fn capacity_overflow_is_an_error() {
        // A (decoded) full sub-filter whose capacity times the expansion overflows u64.
        let huge = u64::MAX / 2;
        let params = FilterParams {
            capacity: huge,
            error_rate: 0.5,
            bits: 64,
            hashes: 1,
            layout: Layout::Standard,
        };
        let mut c = Chain::from_parts(0.5, 4, vec![Filter::new(params, huge).unwrap()]);
        assert_eq!(c.add(&h(1), u64::MAX), Err(ChainError::Overflow));
    }

    #[test]
    fn tiny_rates_are_refused() {
        assert_eq!(Chain::new(1e-15, 10, 2, GIB), Err(ChainError::ErrorRate));
        assert!(Chain::new(1e-15, 10, 0, GIB).is_ok());
    }
}
