//! What a chain and its sub-filters are made of (pure): each sub-filter's parameters, a bit
//! array's (`filter::FilterParams`) or a sparse set's ([`SparseParams`]), the choice between
//! the two for a new sub-filter, and [`ChainParams`], the parameters every key created alike
//! shares, interned (`intern.rs`): one copy for all the keys, re-interned when a chain scales.

use super::filter::{FilterParams, Layout, SizeError, MIN_ERROR_RATE};
use super::sparse::{self, Shape};
use crate::core::alloc::size_class;
use crate::core::intern::{self, Interner};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A sparse sub-filter's parameters (`sparse.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SparseParams {
    pub capacity: u64,
    pub error_rate: f64,
    /// U: fingerprints are in 0..U.
    pub universe: u64,
    /// Its shape when full, which most sparse sub-filters of a grown chain are: computed
    /// once, not at every lookup.
    full: Shape,
    /// The most words its region takes at any fill: what a limit weighs it by when it is
    /// made, computed once, not at every create.
    most_words: u32,
}

impl SparseParams {
    /// None unless 1 ≤ capacity ≤ `sparse::MAX_CAPACITY`, rate in (0, 1) and U ≥ capacity.
    pub fn new(capacity: u64, error_rate: f64, universe: u64) -> Option<Self> {
        let valid = (1..=sparse::MAX_CAPACITY).contains(&capacity)
            && error_rate > 0.0
            && error_rate < 1.0
            && universe >= capacity;
        valid.then(|| Self {
            capacity,
            error_rate,
            universe,
            full: Shape::new(capacity, universe),
            // A region is a few thousand words at most (capacity ≤ MAX_CAPACITY).
            most_words: sparse::most_region_len(capacity, capacity, universe) as u32,
        })
    }

    /// The shape of the set holding `items` (≤ capacity).
    #[inline]
    pub fn shape(&self, items: u64) -> Shape {
        if items == self.capacity {
            self.full
        } else {
            Shape::new(items, self.universe)
        }
    }
}

/// One sub-filter's parameters: a bit array's or a sparse set's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SubParams {
    Bits(FilterParams),
    Sparse(SparseParams),
}

impl SubParams {
    /// The smaller representation for a new sub-filter of `capacity` at rate `error_rate`:
    /// sparse if its set at capacity takes no more words than the textbook bit array and
    /// what a bit array costs apart from its bits (its place in the body's list of bit arrays
    /// and its own allocation's rounding, `ARRAY_OVERHEAD_WORDS`).
    pub fn choose(layout: Layout, capacity: u64, error_rate: f64) -> Result<Self, SizeError> {
        /// About 64 bytes: a list entry (48) and half a size class of a small allocation.
        const ARRAY_OVERHEAD_WORDS: f64 = 8.0;
        let capacity = capacity.max(1);
        if capacity <= sparse::MAX_CAPACITY && (MIN_ERROR_RATE..1.0).contains(&error_rate) {
            let universe = sparse::universe(capacity, error_rate);
            let set_words = Shape::new(capacity, universe).region_words() as f64;
            let ln2 = std::f64::consts::LN_2;
            let array_bits = -(capacity as f64) * error_rate.ln() / (ln2 * ln2);
            if set_words <= (array_bits / 64.0).ceil() + ARRAY_OVERHEAD_WORDS {
                if let Some(p) = SparseParams::new(capacity, error_rate, universe) {
                    return Ok(SubParams::Sparse(p));
                }
            }
        }
        Ok(SubParams::Bits(FilterParams::for_layout(
            layout, capacity, error_rate,
        )?))
    }

    pub fn capacity(&self) -> u64 {
        match self {
            SubParams::Bits(p) => p.capacity,
            SubParams::Sparse(p) => p.capacity,
        }
    }

    pub fn error_rate(&self) -> f64 {
        match self {
            SubParams::Bits(p) => p.error_rate,
            SubParams::Sparse(p) => p.error_rate,
        }
    }

    /// Whether these parameters are sane enough to allocate and look up with.
    pub fn is_valid(&self) -> bool {
        match self {
            SubParams::Bits(p) => p.is_valid(),
            // Checked by `SparseParams::new`, the only way to make one.
            SubParams::Sparse(_) => true,
        }
    }

    /// Whether its size holds its capacity near its rate: the textbook rate at capacity at
    /// most twice the stated one. Every sizing lcbloom has used passes with room (bit arrays
    /// are sized for the rate, blocked ones and sparse sets larger); a header claiming more
    /// capacity, or other hashes, than its bits bear does not.
    pub fn holds_its_rate(&self) -> bool {
        self.expected_fp(self.capacity()) <= 2.0 * self.error_rate()
    }

    /// The expected false-positive rate of this sub-filter holding `items` (for plots and
    /// loads' checks).
    pub fn expected_fp(&self, items: u64) -> f64 {
        match self {
            SubParams::Bits(p) => super::fp::approx_fp(items as f64, p.bits, p.hashes),
            SubParams::Sparse(p) => items as f64 / p.universe as f64,
        }
    }

    /// The most words a sparse sub-filter's region in the body takes at any fill up to
    /// `items` (0 for a bit array, which is not in the body): what limits weigh it by.
    pub fn region_words(&self, items: u64) -> usize {
        match self {
            SubParams::Bits(_) => 0,
            SubParams::Sparse(p) if items == p.capacity => p.most_words as usize,
            SubParams::Sparse(p) => sparse::most_region_len(items, p.capacity, p.universe),
        }
    }

    /// `f64` fields by their bits, for hashing and equality in the interner.
    fn key(&self) -> [u64; 5] {
        match *self {
            SubParams::Bits(p) => [
                p.capacity,
                p.error_rate.to_bits(),
                p.bits,
                p.hashes as u64,
                1 + p.layout as u64,
            ],
            SubParams::Sparse(p) => [p.capacity, p.error_rate.to_bits(), p.universe, 0, 0],
        }
    }
}

/// The items in one block of their exact length. A filtered iterator collected into a boxed
/// slice starts with room for four and is then shrunk to its length: a reallocation for every
/// chain made, a filter created by its first add included.
fn exactly<T>(items: impl Iterator<Item = T> + Clone) -> Box<[T]> {
    let mut list = Vec::with_capacity(items.clone().count());
    list.extend(items);
    list.into_boxed_slice()
}

/// What every key created alike shares: the chain's parameters and its sub-filters'.
#[derive(Clone, Debug)]
pub struct ChainParams {
    pub error_rate: f64,
    /// 0: non-scaling.
    pub expansion: u32,
    pub layout: Layout,
    /// Boxed slices, each one allocation of its exact length: a key whose parameters no
    /// other key shares pays for them alone (a collected `Vec` of one item keeps room for four).
    pub subs: Box<[SubParams]>,
    /// From `subs`, for lookups that go through every sub-filter: the bit arrays' parameters,
    /// and the sparse sets' places in `subs`, in order. The sets' parameters are read there:
    /// a copy of them would take more than the list itself, which a key of parameters of its
    /// own pays alone.
    bits: Box<[FilterParams]>,
    sparse: Box<[u16]>,
}

impl ChainParams {
    pub fn new(error_rate: f64, expansion: u32, layout: Layout, subs: Vec<SubParams>) -> Self {
        let bits = exactly(subs.iter().filter_map(|s| match s {
            SubParams::Bits(p) => Some(*p),
            SubParams::Sparse(_) => None,
        }));
        // A chain has at most `chain::MAX_SUB_FILTERS` (1,024) sub-filters.
        debug_assert!(subs.len() <= usize::from(u16::MAX));
        let sparse = exactly(subs.iter().enumerate().filter_map(|(i, s)| match s {
            SubParams::Sparse(_) => Some(i as u16),
            SubParams::Bits(_) => None,
        }));
        Self {
            error_rate,
            expansion,
            layout,
            subs: subs.into_boxed_slice(),
            bits,
            sparse,
        }
    }

    /// The bit arrays' parameters, oldest first.
    #[inline]
    pub fn bits(&self) -> &[FilterParams] {
        &self.bits
    }

    /// The sparse sub-filters' parameters, each with its place in `subs`, oldest first.
    #[inline]
    pub fn sparse(&self) -> Sparse<'_> {
        Sparse {
            subs: &self.subs,
            places: self.sparse.iter(),
        }
    }

    /// How many sub-filters are sparse sets.
    #[inline]
    pub fn sparse_count(&self) -> usize {
        self.sparse.len()
    }
}

/// The sparse sub-filters' parameters of a chain, each with its place (`ChainParams::sparse`).
pub struct Sparse<'a> {
    subs: &'a [SubParams],
    places: std::slice::Iter<'a, u16>,
}

impl<'a> Iterator for Sparse<'a> {
    type Item = (usize, &'a SparseParams);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let i = *self.places.next()? as usize;
        match &self.subs[i] {
            SubParams::Sparse(p) => Some((i, p)),
            // Not a place `new` lists.
            SubParams::Bits(_) => None,
        }
    }
}

impl PartialEq for ChainParams {
    fn eq(&self, other: &Self) -> bool {
        self.error_rate.to_bits() == other.error_rate.to_bits()
            && self.expansion == other.expansion
            && self.layout == other.layout
            && self.subs.len() == other.subs.len()
            && self
                .subs
                .iter()
                .zip(&other.subs)
                .all(|(a, b)| a.key() == b.key())
    }
}

impl Eq for ChainParams {}

impl Hash for ChainParams {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.error_rate.to_bits(), self.expansion, self.layout as u8).hash(state);
        self.subs.iter().for_each(|s| s.key().hash(state));
    }
}

static PARAMS: Interner<ChainParams> = Interner::new();

/// The one shared copy of `params`.
pub fn intern(params: ChainParams) -> Arc<ChainParams> {
    PARAMS.intern(params)
}

/// A chain's share of its parameters (`intern::share_of`): their lists' blocks, in the
/// allocator's size classes, besides what every interned value takes.
pub fn share(params: &Arc<ChainParams>) -> u64 {
    fn list<T>(items: &[T]) -> u64 {
        size_class(std::mem::size_of_val(items) as u64)
    }
    let lists = list(&params.subs) + list(&params.bits) + list(&params.sparse);
    intern::share_of(params, lists)
}

/// Gives back parameters a chain no longer uses (`Interner::release`).
pub fn release(params: Arc<ChainParams>) {
    PARAMS.release(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sub-filter today's sizing makes passes the check loads apply, with room: both
    /// layouts, bit arrays and sparse sets, capacities 1 to 10⁹, rates 1e-15 to 0.9.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn every_sizing_holds_its_rate() {
        let mut worst: f64 = 0.0;
        for layout in [Layout::Standard, Layout::Blocked] {
            for capacity in [
                1,
                2,
                7,
                100,
                1_000,
                6_400,
                100_000,
                10_000_000,
                1_000_000_000,
            ] {
                for rate in [1e-15, 1e-9, 1e-4, 0.001, 0.0055, 0.01, 0.05, 0.2, 0.5, 0.9] {
                    let sub = SubParams::choose(layout, capacity, rate).unwrap();
                    assert!(
                        sub.holds_its_rate(),
                        "{layout:?} {capacity} {rate}: {sub:?}"
                    );
                    worst = worst.max(sub.expected_fp(capacity) / rate);
                }
            }
        }
        assert!(
            worst < 1.5,
            "textbook rate at capacity up to {worst} times the stated one"
        );
    }

    /// What limits weigh a sparse sub-filter by when it holds `items` bounds its region at
    /// every fill up to `items`: a sub-filter made within a key's limit stays within it as
    /// it fills, and a copy of it at any fill loads under the same limit. Capacities up to
    /// 8,192 at a few rates, a range of rates at two capacities.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_sparse_sub_filter_weighs_at_least_its_region_at_every_fill() {
        let rates = [0.0001, 0.001, 0.005, 0.01, 0.03];
        let shapes = (1..=sparse::MAX_CAPACITY)
            .step_by(13)
            .flat_map(|capacity| rates.map(|rate| (capacity, rate)))
            .chain((0..200).map(|i| (8_192, 1e-6 * 1.05f64.powi(i))))
            .chain((0..200).map(|i| (1_000, 1e-6 * 1.05f64.powi(i))));
        let mut checked = 0;
        for (capacity, rate) in shapes {
            let Ok(sub @ SubParams::Sparse(p)) =
                SubParams::choose(Layout::Standard, capacity, rate)
            else {
                continue;
            };
            let mut most = 0;
            for n in 0..=capacity {
                most = most.max(sparse::max_region_len(&p.shape(n), n == capacity));
                assert!(
                    sub.region_words(n) >= most,
                    "capacity {capacity}, rate {rate}, {n} items: {} words, {most} at a fill before",
                    sub.region_words(n)
                );
            }
            checked += 1;
        }
        assert!(checked > 1_500, "{checked} sparse sub-filters");
    }

    /// The probes of the benchmark's standard 0.001 / 200M filter, whose floors read as many
    /// lines per item (bench/server_bench.py, `STANDARD_PROBES_200M`).
    #[test]
    fn the_benchmark_filter_probes_as_its_floors_read() {
        let head = crate::bloom::budget::CHAIN.head_rate(0.001);
        match SubParams::choose(Layout::Standard, 200_000_000, head) {
            Ok(SubParams::Bits(p)) => assert_eq!(p.hashes, 10),
            other => panic!("{other:?}"),
        }
    }
}
