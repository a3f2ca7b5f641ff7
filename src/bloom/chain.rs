//! The scaling chain: a list of Bloom filters that grows as items arrive (a Scalable Bloom
//! Filter, Almeida, Baquero, Preguiça, Hutchison, 2007).
//!
//! * Expansion e ≥ 1, or non-scaling (e = 0; `EXPANSION 0` ≡ `NONSCALING`). A non-scaling chain
//!   is one filter sized for `NONSCALING_SHARE` of the requested rate p; when it holds its
//!   capacity a new item is refused (`ERR non scaling filter is full`). A scaling chain's rate
//!   at any fill is well below p (its later sub-filters' budget is unspent); a non-scaling one
//!   is at capacity, where it would sit at p on average and measure above it half the time,
//!   so it keeps a margin that a measurement can resolve.
//! * In a scaling chain, sub-filter i has capacity c·e^i. The error budget p is spent as
//!   sub-filters are added (`budget.rs`): the first gets p_0 = h·p, and each later one gets
//!   the fraction (1−r) of what the existing ones left, p_i = (p − Σ_{j<i} p_j)·(1−r), with
//!   (h, r) = `budget::CHAIN`; for a chain built by this version p_i = (1−h)·p·(1−r)·r^(i−1). Since
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
//!   at most), a chain never grows past `MAX_SUB_FILTERS` (a loaded one may start near it),
//!   capacity arithmetic is checked. Each failure is an error, never an abort.
//! * `items` counts the adds that returned "new"; each sub-filter counts its own.
//! * A sub-filter is a bit array or a sparse set of fingerprints (`sparse.rs`), chosen when it
//!   is added: sparse if its capacity is at most `sparse::MAX_CAPACITY` and the set at capacity
//!   takes no more words than the textbook bit array (error rates below about 5%). So a
//!   default filter (0.01, 100, ×2) holding a few items takes a few bytes, and a grown one's
//!   first sub-filters (capacity 100 to 6,400) stay compact; larger ones are bit arrays.
//!   Either kind keeps its p_i, so the compound bound holds whatever the mix.
//! * Bit arrays have the chain's layout (standard or blocked, `filter::Layout`), chosen at
//!   creation; the blocked layout sizes each for its p_i by its own rule (`blocked.rs`).
//!   Sparse sets have no layout: a blocked chain's small sub-filters are sparse too.
//! * Memory. Millions of keys are created alike, so what does not change per key is shared:
//!   the chain's parameters and every sub-filter's (`ChainParams`) are one interned `Arc`
//!   (`intern.rs`), re-interned when the chain scales. What a key owns is `Body` (`body.rs`):
//!   one exactly sized block holding each sub-filter's item count and the sparse sets, and
//!   apart from it the bit arrays. `memory_bytes` counts every allocation by its allocator
//!   size class; shared parameters are not counted (they are one copy for all the keys).

use super::body::{self, Body};
use super::budget::{CHAIN, MIN_SCALE_OUTS, WINDOW};
use super::filter::{BitArray, FilterParams, Layout, SizeError, MIN_ERROR_RATE};
use super::params::{self as shared, ChainParams, SubParams};
use super::sparse;
use crate::core::alloc::size_class;
use crate::core::defrag::Defrag;
use crate::core::hashing::{hash_item_seeded, ItemHash};
use crate::core::intern::LastMade;
use std::sync::Arc;

mod batch;

/// Most sub-filters a chain holds, and so the most a saved one may have (`codec.rs`). Scaling
/// stops near 200 at the rate floor; a chain loaded with more than that (`BF.LOADCHUNK`,
/// `RESTORE`) stops growing here, so that what it grows to still loads.
pub const MAX_SUB_FILTERS: usize = 1024;

/// The share of the error budget a non-scaling chain's one sub-filter is sized for: at
/// capacity its rate then measures ≤ p over 3,600/p non-members, which resolve 5% of p at
/// three standard deviations. About 0.11 more bits per item than sizing for p.
pub const NONSCALING_SHARE: f64 = 0.95;
/// The rate a non-scaling chain of rate `error_rate` sizes its sub-filter for: its share, but
/// never below `MIN_ERROR_RATE` for a rate at or above it (the smallest rates accepted stay
/// accepted, with less margin).
fn nonscaling_rate(error_rate: f64) -> f64 {
    if error_rate < MIN_ERROR_RATE {
        error_rate
    } else {
        (error_rate * NONSCALING_SHARE).max(MIN_ERROR_RATE)
    }
}

/// Why a chain could not be created or could not take an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// A non-scaling filter holds its capacity.
    Full,
    /// The key would need `needed` bytes, over the `limit`.
    TooLarge { needed: u64, limit: u64 },
    /// The requested error rate is too small to size a filter for.
    ErrorRate,
    /// The same for a windowed filter, whose scaling schedule differs (`budget.rs`).
    WindowErrorRate,
    /// Scaling again would push a sub-filter's error rate below `MIN_ERROR_RATE`.
    CannotScale,
    /// The chain holds `MAX_SUB_FILTERS` sub-filters (or a windowed filter its most layers).
    MostSubFilters,
    /// Capacity or size arithmetic overflows.
    Overflow,
    /// RedisBloom's sizing cannot make an imported chain's next link, or the chain has its
    /// most links (RedisBloom's text).
    CannotGrow,
    /// The allocator refused.
    OutOfMemory,
    /// A windowed filter whose chunks are still arriving (`BF.LOADCHUNK`) takes no adds.
    Loading,
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
                "error rate too small (at least {MIN_ERROR_RATE:e} for a non-scaling filter, \
                 {:.2e} for a scaling one, which then has room for {MIN_SCALE_OUTS} sub-filters)",
                CHAIN.min_scaling_error_rate()
            ),
            ChainError::WindowErrorRate => write!(
                f,
                "error rate too small (at least {MIN_ERROR_RATE:e} for a non-scaling windowed \
                 filter, {:.2e} for a scaling one, which then has room for {MIN_SCALE_OUTS} layers)",
                WINDOW.min_scaling_error_rate()
            ),
            ChainError::CannotScale => write!(
                f,
                "filter cannot scale further: a new sub-filter's error rate would be below {MIN_ERROR_RATE:e}"
            ),
            ChainError::MostSubFilters => write!(
                f,
                "filter cannot scale further: it holds the most sub-filters a filter may have"
            ),
            ChainError::Overflow => write!(f, "filter too large (capacity overflows)"),
            ChainError::CannotGrow => write!(f, "problem inserting into filter"),
            ChainError::OutOfMemory => write!(f, "insufficient memory to create filter"),
            ChainError::Loading => write!(
                f,
                "filter is still being loaded: send its remaining chunks (BF.LOADCHUNK) first"
            ),
        }
    }
}

/// A filter of `capacity` at `error_rate` too large to size: `TooLarge` with the textbook
/// bit array's bytes when they exceed `limit` (the usual case), else `Overflow`.
fn too_large(capacity: u64, error_rate: f64, limit: u64) -> ChainError {
    let ln2 = std::f64::consts::LN_2;
    let bits = -(capacity as f64) * error_rate.ln() / (ln2 * ln2);
    // Saturating: a float beyond u64 becomes u64::MAX.
    let needed = (bits / 8.0).ceil() as u64;
    if needed > limit {
        ChainError::TooLarge { needed, limit }
    } else {
        ChainError::Overflow
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

/// Bytes a chain of these sub-filters holding these items (one count per sub-filter) takes:
/// the box Redis holds and the body (`body::planned_bytes`), known before allocating.
pub fn memory_bytes_for(subs: &[SubParams], items: &[u64]) -> Option<u64> {
    size_class(std::mem::size_of::<Chain>() as u64).checked_add(body::planned_bytes(subs, items)?)
}

/// The parameters `Chain::with_layout` made last, by its layout, rate (bits), capacity and
/// expansion.
static CREATED: LastMade<(Layout, u64, u64, u32), ChainParams> = LastMade::new();

/// A Bloom filter chain. The body's data: the sub-filters' item counts, then the sparse
/// sub-filters' regions in order; the bit arrays are the body's, in order.
pub struct Chain {
    params: Arc<ChainParams>,
    body: Body,
}

impl Chain {
    /// A standard-layout chain with one empty filter and no seed (0), refused if it would take
    /// more than `limit` bytes.
    pub fn new(
        error_rate: f64,
        capacity: u64,
        expansion: u32,
        limit: u64,
    ) -> Result<Self, ChainError> {
        Self::with_layout(
            Layout::Standard,
            0,
            error_rate,
            capacity,
            expansion,
            limit,
            0,
        )
    }

    /// `new` with the given layout and hash seed, made for a create by an add of `coming`
    /// items (0: none): a first sub-filter that is a sparse set is made with room for them, so
    /// that the add grows it in place (for a single item, exactly its size) instead of
    /// reallocating it. The parameters of a run of chains created alike are sized and interned
    /// once (`CREATED`).
    pub fn with_layout(
        layout: Layout,
        seed: u64,
        error_rate: f64,
        capacity: u64,
        expansion: u32,
        limit: u64,
        coming: u64,
    ) -> Result<Self, ChainError> {
        let made_from = (layout, error_rate.to_bits(), capacity, expansion);
        let params = CREATED.get_or_make(made_from, || {
            let first_rate = match expansion {
                0 => nonscaling_rate(error_rate),
                _ => CHAIN.head_rate(error_rate),
            };
            if first_rate < MIN_ERROR_RATE {
                return Err(ChainError::ErrorRate);
            }
            let first = SubParams::choose(layout, capacity, first_rate).map_err(|e| match e {
                // Beyond what sizing handles: the textbook size says by how much.
                SizeError::TooLarge => too_large(capacity, first_rate, limit),
                e => e.into(),
            })?;
            let params = ChainParams::new(error_rate, expansion, layout, vec![first]);
            Ok(shared::intern(params))
        })?;
        let first = params.subs[0];
        // With its first sub-filter full, as `push` checks for later ones.
        let needed = memory_bytes_for(&[first], &[first.capacity()]).ok_or(ChainError::Overflow)?;
        if needed > limit {
            return Err(ChainError::TooLarge { needed, limit });
        }
        let room = match &first {
            SubParams::Sparse(p) => p.shape(coming.min(p.capacity - 1)).region_words(),
            SubParams::Bits(_) => 0,
        };
        let body = Body::from_parts(seed, &[(first, 0)], &[], room)?;
        Ok(Self { params, body })
    }

    /// A chain hashing with `seed` from decoded parts, each sub-filter with its items, the
    /// sparse ones' streams one after the other in `streams`, the bit arrays zero. The codec
    /// has validated them (at least one sub-filter, a non-scaling chain has exactly one, every
    /// stream is the set of its sub-filter's items, `sparse::is_valid`).
    pub fn from_parts(
        seed: u64,
        error_rate: f64,
        expansion: u32,
        layout: Layout,
        subs: &[(SubParams, u64)],
        streams: &[u64],
    ) -> Result<Self, ChainError> {
        let body = Body::from_parts(seed, subs, streams, 0)?;
        let subs = subs.iter().map(|(s, _)| *s).collect();
        let params = ChainParams::new(error_rate, expansion, layout, subs);
        Ok(Self {
            params: shared::intern(params),
            body,
        })
    }

    /// A deep copy, allocated fallibly (`COPY` of a large filter must not abort the server).
    pub fn try_clone(&self) -> Result<Self, ChainError> {
        Ok(Self {
            params: self.params.clone(),
            body: self.body.try_clone().ok_or(ChainError::OutOfMemory)?,
        })
    }

    pub fn error_rate(&self) -> f64 {
        self.params.error_rate
    }

    /// The seed every sub-filter hashes items with (0: none, the hash of values written
    /// before filters had seeds).
    #[inline]
    pub fn seed(&self) -> u64 {
        self.body.seed()
    }

    /// An item's hash under the chain's seed: what its lookups and adds take.
    #[inline(always)]
    pub fn hash(&self, item: &[u8]) -> ItemHash {
        hash_item_seeded(item, self.seed())
    }

    pub fn layout(&self) -> Layout {
        self.params.layout
    }

    /// The expansion factor, or None for a non-scaling chain.
    pub fn expansion(&self) -> Option<u32> {
        (self.params.expansion != 0).then_some(self.params.expansion)
    }

    /// Its share of the parameters it holds with chains created alike (`MEMORY USAGE`).
    pub fn shared_bytes(&self) -> u64 {
        shared::share(&self.params)
    }

    /// The sub-filters' parameters, oldest first.
    pub fn filters(&self) -> &[SubParams] {
        &self.params.subs
    }

    /// Items in each sub-filter, oldest first.
    pub fn filter_items(&self) -> &[u64] {
        self.body.items(&self.params)
    }

    pub fn items(&self) -> u64 {
        self.filter_items().iter().sum()
    }

    /// The sum of the sub-filters' capacities.
    pub fn capacity(&self) -> u64 {
        self.filters()
            .iter()
            .fold(0u64, |c, f| c.saturating_add(f.capacity()))
    }

    /// The sparse sub-filters' streams (their encoding), oldest first; None if the memory to
    /// write them out could not be had.
    pub fn sparse_streams(&self) -> Option<Vec<Vec<u64>>> {
        self.body.sets(&self.params).map(|s| s.stream()).collect()
    }

    /// The bit arrays' parameters, oldest first.
    pub fn bit_params(&self) -> impl Iterator<Item = &FilterParams> {
        self.params.bits().iter()
    }

    /// The bit arrays, oldest first, with their parameters.
    pub fn bit_arrays(&self) -> impl Iterator<Item = (&FilterParams, &BitArray)> {
        self.body.arrays(&self.params)
    }

    /// `bit_arrays`, mutable (for loading).
    pub fn bit_arrays_mut(&mut self) -> impl Iterator<Item = (&FilterParams, &mut BitArray)> {
        self.body.arrays_mut(&self.params)
    }

    /// Bytes of all bit arrays (the data `BF.SCANDUMP` sends after the header).
    pub fn data_bytes(&self) -> u64 {
        self.bit_params().map(FilterParams::bytes).sum()
    }

    /// Visits the chain's blocks for defragmentation (`core::defrag`); the shared parameters
    /// are not its own.
    pub fn defrag(&mut self, d: &mut Defrag) {
        self.body.defrag(d)
    }

    /// Bytes the chain occupies in memory: the box Redis holds, the body, the bit arrays,
    /// each allocation by its size class.
    pub fn memory_bytes(&self) -> u64 {
        size_class(std::mem::size_of::<Chain>() as u64) + self.body.memory_bytes()
    }

    /// Whether any of the first `upto` sub-filters (probably) holds the item. When there are
    /// several sub-filters, the large bit arrays' first probes are fetched first, so that their
    /// misses overlap with each other and with the lookups in the other sub-filters.
    #[inline]
    fn held_by_any(&self, upto: usize, hash: &ItemHash) -> bool {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has the instruction.
            return unsafe { self.held_by_any_with_popcnt(upto, hash) };
        }
        self.held_by_any_portable(upto, hash)
    }

    /// `held_by_any` compiled for the POPCNT instruction (every x86-64 server CPU since 2008,
    /// but not the x86-64 baseline Rust targets): a sparse set's lookup counts the bits of a
    /// few words, most of its work without it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn held_by_any_with_popcnt(&self, upto: usize, hash: &ItemHash) -> bool {
        self.held_by_any_portable(upto, hash)
    }

    #[inline(always)]
    fn held_by_any_portable(&self, upto: usize, hash: &ItemHash) -> bool {
        let params = &*self.params;
        let count = params.subs.len();
        // `upto` is every sub-filter or all but the last: leave the last out of its kind.
        let last_out = |kind_is_last: bool| usize::from(upto < count && kind_is_last);
        let last_is_bits = matches!(params.subs[count - 1], SubParams::Bits(_));
        if count > 1 {
            // Only large arrays: smaller ones are likely cached.
            self.body
                .arrays(params)
                .filter(|(p, _)| p.prefetched())
                .for_each(|(p, b)| b.prefetch_probes(p, hash, 0..2));
        }
        // Plain loops, not `any`: its fold is a function of its own, compiled without POPCNT.
        let arrays = params.bits().len() - last_out(last_is_bits);
        for (p, b) in self.body.arrays(params).take(arrays) {
            if b.contains(p, hash) {
                return true;
            }
        }
        let sets = params.sparse_count() - last_out(!last_is_bits);
        for set in self.body.sets(params).take(sets) {
            if set.holds(hash) {
                return true;
            }
        }
        false
    }

    /// Whether the item is (probably) present.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        match &*self.params.subs {
            // One bit array: most large filters.
            [SubParams::Bits(p)] => self.body.bits()[0].contains(p, hash),
            subs => self.held_by_any(subs.len(), hash),
        }
    }

    /// Whether `n` more new items fit in the last sub-filter, so that adding them cannot scale
    /// the chain (and the memory limit cannot come into play).
    pub fn can_hold(&self, n: u64) -> bool {
        let last = self.params.subs.len() - 1;
        self.filter_items()[last].saturating_add(n) <= self.params.subs[last].capacity()
    }

    /// Adds an item: Ok(true) if it was new, Ok(false) if it was (probably) present already.
    /// Scaling never makes the key exceed `limit` bytes.
    pub fn add(&mut self, hash: &ItemHash, limit: u64) -> Result<bool, ChainError> {
        // A chain always has at least one sub-filter (new and from_parts guarantee it).
        let last = self.params.subs.len() - 1;
        if last > 0 {
            if let (SubParams::Bits(p), Some(b)) =
                (&self.params.subs[last], self.body.bits().last())
            {
                // Its misses overlap with the older sub-filters' lookups.
                b.prefetch_probes(p, hash, 0..p.hashes);
            }
            // Presence in any older sub-filter first: only then may the last one change.
            if self.held_by_any(last, hash) {
                return Ok(false);
            }
        }
        if self.can_hold(1) {
            return self.add_to_last(hash);
        }
        if self.in_last(hash) {
            return Ok(false);
        }
        if self.params.expansion == 0 {
            return Err(ChainError::Full);
        }
        let next = self.next_params()?;
        self.push(next, limit)?;
        self.add_to_last(hash)
    }

    /// Whether the last sub-filter (probably) holds the item.
    fn in_last(&self, hash: &ItemHash) -> bool {
        match self.params.subs.last() {
            Some(SubParams::Bits(p)) => {
                self.body.bits().last().is_some_and(|b| b.contains(p, hash))
            }
            _ => self
                .body
                .sets(&self.params)
                .last()
                .is_some_and(|s| s.holds(hash)),
        }
    }

    /// Adds the item to the last sub-filter (which has room): whether it was new there. A
    /// sparse set that cannot grow refuses the item (out of memory), changing nothing.
    #[inline]
    fn add_to_last(&mut self, hash: &ItemHash) -> Result<bool, ChainError> {
        let Chain { params, body } = self;
        let last = params.subs.len() - 1;
        match &params.subs[last] {
            SubParams::Bits(p) => {
                let added = body.bits_mut().last_mut().is_some_and(|b| b.set(p, hash));
                body.items_mut(params)[last] += added as u64;
                Ok(added)
            }
            SubParams::Sparse(p) => {
                let v = sparse::fingerprint(hash, p.universe);
                Ok(body.add_to_last_set(last, p, v)?)
            }
        }
    }

    /// The next sub-filter: capacity c·e^i, error rate (p − Σ p_j)·(1−r).
    fn next_params(&self) -> Result<SubParams, ChainError> {
        let subs = &self.params.subs;
        if subs.len() >= MAX_SUB_FILTERS {
            return Err(ChainError::MostSubFilters);
        }
        let capacity = subs[subs.len() - 1]
            .capacity()
            .checked_mul(self.params.expansion as u64)
            .ok_or(ChainError::Overflow)?;
        let spent: f64 = subs.iter().map(SubParams::error_rate).sum();
        let rate = CHAIN
            .next_rate(self.params.error_rate, spent)
            .ok_or(ChainError::CannotScale)?;
        Ok(SubParams::choose(self.params.layout, capacity, rate)?)
    }

    /// Appends an empty sub-filter, if the chain with it full stays within `limit`; nothing
    /// changes on an error.
    fn push(&mut self, sub: SubParams, limit: u64) -> Result<(), ChainError> {
        let p = &self.params;
        let mut subs = Vec::with_capacity(p.subs.len() + 1);
        subs.extend_from_slice(&p.subs);
        subs.push(sub);
        let params = ChainParams::new(p.error_rate, p.expansion, p.layout, subs);
        let mut items = self.filter_items().to_vec();
        items.push(sub.capacity());
        let needed = memory_bytes_for(&params.subs, &items).ok_or(ChainError::Overflow)?;
        if needed > limit {
            return Err(ChainError::TooLarge { needed, limit });
        }
        self.body.push(self.params.subs.len(), &sub)?;
        // A chain of parameters of its own leaves no entry behind per sub-filter it grew.
        let old = std::mem::replace(&mut self.params, shared::intern(params));
        shared::release(old);
        Ok(())
    }
}

impl PartialEq for Chain {
    fn eq(&self, other: &Self) -> bool {
        *self.params == *other.params && self.body == other.body
    }
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("params", &self.params)
            .field("items", &self.filter_items())
            .finish_non_exhaustive()
    }
}

impl Clone for Chain {
    /// Infallible clone for tests and tools; Redis paths use `try_clone`.
    fn clone(&self) -> Self {
        self.try_clone().expect("out of memory cloning a filter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::words::{planned_bytes, planned_bytes_in, SERVER_SEGMENT_WORDS};
    use crate::core::hashing::hash_item;

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
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn scales_with_tighter_rates_and_counts_items() {
        let mut c = Chain::new(0.01, 10, 2, GIB).unwrap();
        for i in 0..1000 {
            c.add(&h(i), GIB).unwrap();
        }
        // 10 + 20 + 40 + ... ≥ items: 7 filters hold 1270.
        assert_eq!(c.filters().len(), 7);
        // An add that hits (at most 1% of them) counts nothing.
        assert!(
            c.items() <= 1000 && c.items() > 980,
            "{:?}",
            c.filter_items()
        );
        for (i, f) in c.filters().iter().enumerate() {
            assert_eq!(f.capacity(), 10 << i);
            let expected = match i {
                0 => 0.01 * CHAIN.head_share,
                _ => {
                    let (h, r) = (CHAIN.head_share, CHAIN.tightening);
                    0.01 * (1.0 - h) * (1.0 - r) * r.powi(i as i32 - 1)
                }
            };
            assert!((f.error_rate() - expected).abs() < 1e-15);
        }
        let sum: f64 = c.filters().iter().map(SubParams::error_rate).sum();
        assert!(sum <= 0.01);
        assert_eq!(c.capacity(), 1270);
        for i in 0..1000 {
            assert!(c.contains(&h(i)));
        }
        assert_eq!(c.add(&h(5), GIB), Ok(false));
        assert_eq!(c.try_clone().unwrap(), c);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn batches_match_one_by_one() {
        // Scaling and non-scaling, with repeats inside a batch and a non-scaling filter that
        // fills up mid-batch (the batch stops at the error, like one-by-one adds would).
        // (20,000, 0) is one bit array with room for every batch (segmented in unit tests):
        // the batches' single-array loops. Batches of 13 also land whole in sparse sets, the
        // newest sub-filter or not (`add_batch_to_sparse`).
        let shapes = [(50u64, 2u32), (1000, 0), (7, 1), (20_000, 0), (100, 2)];
        for (layout, (capacity, expansion), size) in [Layout::Standard, Layout::Blocked]
            .into_iter()
            .flat_map(|l| shapes.map(|s| (l, s)))
            .flat_map(|(l, s)| [97, 13].map(|size| (l, s, size)))
        {
            let mut one = Chain::with_layout(layout, 0, 0.01, capacity, expansion, GIB, 0).unwrap();
            let mut batch = one.clone();
            // Every fifth item repeats the one three before it, within the batch but for
            // batches' first items; past 1,900 items every item repeats an earlier batch's.
            let value = |i: u64| i * 7 % 1900;
            let hashes: Vec<ItemHash> = (0..3000u64)
                .map(|i| h(if i % 5 == 4 { value(i - 3) } else { value(i) }))
                .collect();
            let mut expected = Vec::new();
            for hash in &hashes {
                let r = one.add(hash, GIB);
                expected.push(r);
                if r.is_err() {
                    break;
                }
            }
            let mut got = Vec::new();
            for chunk in hashes.chunks(size) {
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
    fn chains_made_for_their_first_items_end_as_chains_grown_from_empty() {
        // Default-like sparse heads (100 at 1%), a head of capacity 1, a bit-array head; one
        // item, a batch of distinct items, a batch of one item repeated (its room unused), and
        // more items than the head holds.
        for (layout, capacity) in [
            (Layout::Standard, 100),
            (Layout::Blocked, 1),
            (Layout::Standard, 20_000),
        ] {
            for items in [vec![7], (0..30).collect(), vec![5; 30], (0..250).collect()] {
                let hashes: Vec<ItemHash> = items.iter().map(|&i| h(i)).collect();
                let mut grown = Chain::with_layout(layout, 9, 0.01, capacity, 2, GIB, 0).unwrap();
                let coming = hashes.len() as u64;
                let mut made =
                    Chain::with_layout(layout, 9, 0.01, capacity, 2, GIB, coming).unwrap();
                let (mut one, mut batch) = (Vec::new(), Vec::new());
                grown.add_batch(&hashes, GIB, |r| one.push(r));
                made.add_batch(&hashes, GIB, |r| batch.push(r));
                assert_eq!(batch, one);
                assert!(made == grown, "{layout:?} {capacity} {}", items.len());
                assert_eq!(made.memory_bytes(), grown.memory_bytes());
                let mut single = Chain::with_layout(layout, 9, 0.01, capacity, 2, GIB, 1).unwrap();
                let mut alone = Chain::with_layout(layout, 9, 0.01, capacity, 2, GIB, 0).unwrap();
                assert_eq!(single.add(&hashes[0], GIB), alone.add(&hashes[0], GIB));
                assert!(single == alone);
                assert_eq!(single.memory_bytes(), alone.memory_bytes());
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn blocked_chains_keep_the_rate_when_scaling() {
        // 1% reserved at 1,000 and grown 100× (8 sub-filters), then 0.1% grown 10×: the
        // compound rate over 1,000,000 non-members stays within p (plus 3σ of noise).
        for (p, capacity, items) in [(0.01, 1000u64, 100_000u64), (0.001, 10_000, 100_000)] {
            let mut c = Chain::with_layout(Layout::Blocked, 0, p, capacity, 2, GIB, 0).unwrap();
            for i in 0..items {
                c.add(&hash_item(format!("member:{i}").as_bytes()), GIB)
                    .unwrap();
            }
            assert!(c.filters().len() > 3);
            assert!(c.bit_params().count() > 1);
            assert!(c.bit_params().all(|p| p.layout == Layout::Blocked));
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
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn blocked_costs_at_most_15_percent_more_at_0_001() {
        // The push platform's filter: 0.001 / 200M, scaling (its first sub-filter gets 55% of p).
        let rate = CHAIN.head_rate(0.001);
        let standard = FilterParams::for_capacity(200_000_000, rate).unwrap();
        let blocked = FilterParams::for_layout(Layout::Blocked, 200_000_000, rate).unwrap();
        let ratio = blocked.bytes() as f64 / standard.bytes() as f64;
        assert!(ratio <= 1.15, "{ratio}");
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn reserved_at_its_size_is_no_larger_than_redisbloom() {
        // RedisBloom 2.8.2's MEMORY USAGE for BF.RESERVE k 0.001 200000000 (scaling): its bit
        // array's bytes, which its allocator serves from the size class above.
        let params = FilterParams::for_capacity(200_000_000, CHAIN.head_rate(0.001)).unwrap();
        assert!(params.bytes() <= 395_507_200);
        // In the server the bits are held in a head and 16 MiB segments (unit tests use
        // smaller ones): less than 2 MiB over their bytes, where one allocation took the
        // 384 MiB class.
        let words = params.words() as usize;
        let bytes = memory_bytes_for(&[SubParams::Bits(params)], &[0]).unwrap()
            - planned_bytes(words)
            + planned_bytes_in(words, SERVER_SEGMENT_WORDS);
        assert!(bytes <= size_class(395_507_200) + 256, "{bytes}");
        assert!(bytes < params.bytes() + (2 << 20), "{bytes}");
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn older_schedules_keep_the_bound_when_growing() {
        // A chain written with the first schedule (p_i = p·0.15·0.85^i), 12 full sub-filters.
        let p = 0.01;
        let filters: Vec<(SubParams, u64)> = (0..12)
            .map(|i| {
                let params =
                    FilterParams::for_capacity(10 << i, p * 0.15 * 0.85f64.powi(i)).unwrap();
                (SubParams::Bits(params), params.capacity)
            })
            .collect();
        let mut c = Chain::from_parts(0, p, 2, Layout::Standard, &filters, &[]).unwrap();
        for i in 0..200_000 {
            c.add(&h(i), GIB).unwrap();
        }
        assert!(c.filters().len() > 13);
        let sum: f64 = c.filters().iter().map(SubParams::error_rate).sum();
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
    #[cfg_attr(miri, ignore = "too slow under Miri")]
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
    #[cfg_attr(miri, ignore = "too slow under Miri")]
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
        let rates: Vec<f64> = c.filters().iter().map(SubParams::error_rate).collect();
        let left = 0.5 - rates.iter().sum::<f64>();
        assert!(rates.iter().all(|r| *r >= MIN_ERROR_RATE));
        assert!(left * (1.0 - CHAIN.tightening) < MIN_ERROR_RATE);
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
        let filters = [(SubParams::Bits(params), huge)];
        let mut c = Chain::from_parts(0, 0.5, 4, Layout::Standard, &filters, &[]).unwrap();
        assert_eq!(c.add(&h(1), u64::MAX), Err(ChainError::Overflow));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn measured_fp_stays_within_the_rate_at_every_fill() {
        // Non-scaling filters at 10%, 50% and 100% of capacity and scaling ones grown 10× (and
        // 100× from capacity 100), both layouts, rates for which small sub-filters are sparse
        // and one (0.2) for which they are bit arrays: FP over 200,000 non-members within
        // p + 4σ, and for each sparse sub-filter the bound items/U ≤ p_i exactly.
        let probes = 200_000u64;
        let mut sparse_seen = 0;
        for layout in [Layout::Standard, Layout::Blocked] {
            for p in [0.2, 0.01, 0.001] {
                for (capacity, expansion, fills) in [
                    (10u64, 0u32, &[1u64, 5, 10][..]),
                    (300, 0, &[30, 150, 300]),
                    (8_192, 0, &[800, 4_096, 8_192]),
                    (20_000, 0, &[20_000]),
                    (100, 2, &[1_000, 10_000]),
                    (1_000, 4, &[10_000]),
                ] {
                    let mut c =
                        Chain::with_layout(layout, 0, p, capacity, expansion, GIB, 0).unwrap();
                    let mut added = 0u64;
                    for &fill in fills {
                        while added < fill {
                            c.add(&hash_item(format!("m{added}").as_bytes()), GIB)
                                .unwrap();
                            added += 1;
                        }
                        let what = format!("{layout:?} p={p} cap={capacity} x{expansion} n={fill}");
                        assert!(
                            (0..fill).all(|i| c.contains(&hash_item(format!("m{i}").as_bytes())))
                        );
                        let hits = (0..probes)
                            .filter(|i| c.contains(&hash_item(format!("q{i}").as_bytes())))
                            .count() as f64;
                        let bound = p * probes as f64 + 4.0 * (p * probes as f64).sqrt();
                        assert!(hits <= bound, "{what}: {hits} false positives");
                        for (f, n) in c.filters().iter().zip(c.filter_items()) {
                            if let SubParams::Sparse(s) = f {
                                sparse_seen += 1;
                                assert!(*n as f64 / s.universe as f64 <= s.error_rate, "{what}");
                            }
                        }
                        let spent: f64 = c.filters().iter().map(SubParams::error_rate).sum();
                        assert!(spent <= p * (1.0 + 1e-12), "{what}");
                    }
                }
            }
        }
        assert!(sparse_seen > 50);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn nonscaling_filters_keep_a_margin_at_capacity() {
        // The model's rate of a full non-scaling filter is within its share of p, for sparse
        // sets and standard bit arrays, small and large (the blocked layout's own rule is
        // `blocked.rs`'s), and the smallest accepted rate stays accepted.
        let mut sparse_seen = 0;
        for p in [0.2, 0.05, 0.01, 0.001, 1e-4] {
            for capacity in [
                1u64,
                10,
                100,
                1_000,
                10_000,
                100_000,
                1_000_000,
                1_000_000_000,
            ] {
                let c =
                    Chain::with_layout(Layout::Standard, 0, p, capacity, 0, u64::MAX, 0).unwrap();
                let sub = c.filters()[0];
                sparse_seen += matches!(sub, SubParams::Sparse(_)) as u32;
                let fp = sub.expected_fp(capacity);
                assert!(
                    fp <= NONSCALING_SHARE * p * (1.0 + 1e-9),
                    "{p}/{capacity}: {fp}"
                );
            }
        }
        assert!(sparse_seen > 5);
        assert!(Chain::new(MIN_ERROR_RATE, 10, 0, GIB).is_ok());
    }

    #[test]
    fn small_default_filters_are_small() {
        // A default filter (0.01, 100, ×2) holding n items: its value (box and body) stays
        // within a few bytes per item, far below the 120 bytes of its bit array. The seed's
        // word moves one item's block to the next size class.
        for (n, most) in [(0u64, 48u64), (1, 64), (10, 64), (30, 96), (100, 176)] {
            let mut c = Chain::new(0.01, 100, 2, GIB).unwrap();
            assert!(matches!(c.filters()[0], SubParams::Sparse(_)));
            for i in 0..n {
                c.add(&h(i), GIB).unwrap();
            }
            assert!(c.memory_bytes() <= most, "{n} items: {}", c.memory_bytes());
        }
        // Its sub-filter is sized exactly: capacity 100 at 0.55%, no spare room.
        let SubParams::Sparse(p) = Chain::new(0.01, 100, 2, GIB).unwrap().filters()[0] else {
            unreachable!()
        };
        assert_eq!((p.capacity, p.universe), (100, 18_182));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn older_bit_arrays_grow_with_sparse_sub_filters() {
        // A chain loaded from an older version (bit arrays only, capacity 100) keeps its bit
        // array and scales with sparse sub-filters, and answers for all its items.
        let first = FilterParams::for_capacity(100, CHAIN.head_rate(0.01)).unwrap();
        let mut old = Chain::from_parts(
            0,
            0.01,
            2,
            Layout::Standard,
            &[(SubParams::Bits(first), 0)],
            &[],
        )
        .unwrap();
        for i in 0..1_000 {
            old.add(&h(i), GIB).unwrap();
        }
        assert!(matches!(old.filters()[0], SubParams::Bits(_)));
        assert!(matches!(old.filters()[1], SubParams::Sparse(_)));
        assert!((0..1_000).all(|i| old.contains(&h(i))));
        assert_eq!(old.try_clone().unwrap(), old);
    }

    #[test]
    fn tiny_rates_are_refused() {
        assert_eq!(Chain::new(1e-15, 10, 2, GIB), Err(ChainError::ErrorRate));
        assert_eq!(Chain::new(9e-16, 10, 0, GIB), Err(ChainError::ErrorRate));
        assert!(Chain::new(1e-15, 10, 0, GIB).is_ok());
        // Without room to scale, as a master's create is taken: down to the floor.
        assert!(!CHAIN.has_room(2e-15, 2) && CHAIN.has_room(2e-15, 0));
        let mut c = Chain::new(2e-15, 10, 2, GIB).unwrap();
        assert!((0..10u64).all(|i| c.add(&h(i), GIB) == Ok(true)));
    }

    #[test]
    fn the_smallest_rates_named_are_accepted_and_scale_as_promised() {
        let min = CHAIN.min_scaling_error_rate();
        assert!(ChainError::ErrorRate
            .to_string()
            .contains(&format!("{min:.2e} for a scaling one")));
        assert_eq!(format!("{min:.2e}").parse::<f64>().unwrap(), min);
        assert!(!CHAIN.has_room(min * 0.99, 1) && CHAIN.has_room(min, 1));
        // Expansion 1 and capacity 1: each new item adds a sub-filter.
        let mut c = Chain::new(min, 1, 1, u64::MAX).unwrap();
        for i in 0..=MIN_SCALE_OUTS as u64 {
            assert_eq!(c.add(&h(i), u64::MAX), Ok(true), "item {i}");
        }
        assert_eq!(c.filters().len(), MIN_SCALE_OUTS + 1);
    }

    #[test]
    fn a_capacity_beyond_sizing_says_how_many_bytes_it_needs() {
        let err = Chain::new(0.01, 100_000_000_000_000, 2, GIB).unwrap_err();
        assert!(
            matches!(err, ChainError::TooLarge { needed, limit: GIB } if needed > 50_000_000_000_000),
            "{err:?}"
        );
        assert_eq!(
            Chain::new(0.01, 100_000_000_000_000, 2, u64::MAX),
            Err(ChainError::Overflow)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn answers_the_same_after_defrag_moved_every_block() {
        use crate::core::defrag::tests::in_steps;
        for layout in [Layout::Standard, Layout::Blocked] {
            // Sparse sub-filters, bit arrays, and (unit tests' 512-byte segments) segmented
            // arrays; steps of one and of five blocks.
            for budget in [1, 5] {
                let mut c = Chain::with_layout(layout, 0, 0.01, 50, 2, GIB, 0).unwrap();
                for i in 0..30_000 {
                    c.add(&h(i), GIB).unwrap();
                }
                assert!(c.bit_arrays().count() >= 2);
                let before = c.try_clone().unwrap();
                let steps = in_steps(&mut c, budget, |c, d| c.defrag(d));
                assert!(steps > 10 / budget, "{steps}");
                assert_eq!(c, before);
                assert!((0..30_000).all(|i| c.contains(&h(i))));
                let fp = (100_000..110_000).filter(|&i| c.contains(&h(i))).count();
                let fp_before = (100_000..110_000)
                    .filter(|&i| before.contains(&h(i)))
                    .count();
                assert_eq!(fp, fp_before);
                // Still writable: its blocks are owned where they now are.
                for i in 30_000..33_000 {
                    c.add(&h(i), GIB).unwrap();
                }
                assert!((0..33_000).all(|i| c.contains(&h(i))));
            }
        }
    }
}
