//! A linear counter: the number of distinct items in a set, exact while the set is small, within
//! a chosen standard error up to a chosen capacity, in a few bits per expected item — and, for
//! the millions of small keys it is made for, in fewer bytes than a HyperLogLog at every size.
//!
//! # The estimator (Whang, Vander-Zanden, Taylor, ACM TODS 15(2), 1990)
//!
//! A bitmap of `m` bits, all zero at first; an item sets bit `reduce(h1, m)` (see
//! `crate::core::hashing`: XXH3-128 once, multiply-shift reduction). With `Z` bits still zero the
//! number of distinct items is estimated as
//!
//! ```text
//!     n̂ = −m · ln(Z / m)                              (rounded to the nearest integer)
//! ```
//!
//! and, at load `t = n/m`, the standard error of `n̂/n` is `sqrt(m · (e^t − t − 1)) / n`
//! (`Counter::standard_error` evaluates it at `t = n̂/m`). The bias, about `(e^t − t − 1)/2`
//! items, is negligible.
//!
//! # Sizing
//!
//! For a capacity `n` and a standard error `ε` at that capacity, `m` is the smallest integer with
//!
//! ```text
//!     m ≥ β · (e^t − t − 1),   t = n/m,   β = max(α², 1/(ε·t)²),   α² = 5
//! ```
//!
//! which reproduces Table II of the paper (the `α²` term keeps `Z` away from zero at capacity:
//! the fill-up probability stays negligible). The right-hand side only shrinks as `m` grows,
//! so a binary search finds the smallest such `m`. `bits_for(50_000, 0.01)` = 17,134 bits.
//!
//! # Three modes (encoding version 2)
//!
//! A counter is in one of three modes, each a pure function of the set of items added:
//!
//! * **exact** while it has seen at most `L = exact_limit(m) = min(⌊m/64⌋, 8192)` distinct
//!   fingerprints (267 with the defaults, 50,000 at 1 %): the sorted set of the items'
//!   fingerprints `f = reduce(h1, U)`, Elias–Fano coded (`ef.rs`, about `log2(U/n) + 2` bits
//!   each, 4 bytes at n = 30 with the defaults, against 8 for a 64-bit hash). `LC.COUNT` is
//!   the number of fingerprints.
//! * **sparse** beyond that, while its set bits are few: the sorted positions of the set bits,
//!   Elias–Fano coded over `m` (about `log2(m/k) + 2` bits per set bit, like HyperLogLog's
//!   sparse encoding). Its count is the estimate above with `Z = m − k`: exactly what the dense
//!   bitmap would say.
//! * **dense**: the bitmap, with its number of zero bits kept, once the sparse form would take
//!   at least as many bytes as the bitmap (allocator size classes compared) or more than
//!   `SPARSE_MAX_BYTES` (4 KiB, which bounds the work of one sparse add, as
//!   `hll-sparse-max-bytes` does for HyperLogLog): `sparse_limit(m)` set bits at most are
//!   sparse (4,024 with the defaults, ~4,700 items).
//!
//! **Fingerprints.** `U = m·q`, with `q = max(1, ⌈C(L*, 2) · 1,000,100 / m⌉)` and `L* =
//! max(L, 250)`. Since `⌊⌊h·m·q/2^64⌋ / q⌋ = ⌊h·m/2^64⌋`, a fingerprint divided by `q` is the
//! item's bit position: leaving exact mode turns the fingerprints into exactly the positions
//! the items would have set, and a version-1 exact set (64-bit hashes) converts exactly to
//! the version-2 state of the same items. `U` depends on `m` alone (35,514,567,036 with the
//! defaults: 35.05 bits per fingerprint before coding).
//!
//! **The exact guarantee.** Two distinct items share a fingerprint with probability at most
//! `⌈2^64/U⌉/2^64 ≤ 1/U + 2^−64` (for uniform `h1`), so a counter of `n ≤ L*` distinct items
//! in exact mode miscounts (reports fewer) with probability at most `C(n, 2)/U + C(n,2)/2^64
//! < 10^−6`, for every geometry (`the_exact_guarantee_holds_for_every_size`): with the defaults
//! 8.8·10^−7 at 250 items, 9.999·10^−7 at 267. Past `L` items the count is the linear-counting
//! estimate.
//!
//! **Memory.** A counter is a 16-byte box (an `Arc<Geometry>` shared by every counter of the
//! same parameters, `crate::core::intern`, and one pointer) and one block in an allocator size class
//! (`block.rs`): a header word (mode, size class, count; the exact and sparse streams start at
//! its bit 26) and the stream or the bitmap. With the defaults: 16 + 8 bytes for one item, +48
//! for 10, +128 for 30, +384 for 100, +1,024 for 250 (the fingerprints alone need ≥ 885 bytes
//! for a 10^−6 guarantee, see docs/BENCHMARKS.md), ~320–2,048 sparse and 2,560 dense.
//!
//! **Work.** Adds and lookups in exact and sparse mode scan and shift the stream, bounded by
//! `L` and `SPARSE_MAX_BYTES`; a dense add sets one bit. The count is kept in the header, so
//! `count()` is O(1) in every mode.
//!
//! # Saturation
//!
//! When every bit is set the estimate is infinite. A counter with fewer than `SATURATION_ZEROS`
//! (10) zero bits is *saturated*: its estimate rests on a handful of bits (its relative error
//! is about `1/(t·√Z)` and one item can move it by several percent). It still reports a finite
//! number: with `Z = 0` the estimate is taken at `Z = 1`, i.e. `m · ln m`, the largest value the
//! counter can report.
//!
//! # Unions
//!
//! Counters of the same `m` union losslessly: exact sets merge (staying exact up to `L`), and
//! everything else ORs positions. A bitmap of `m = d·m'` bits folds exactly into one of `m'`
//! bits, bit `p` becoming bit `p / d`: `⌊⌊h·d·m'/2^64⌋ / d⌋ = ⌊h·m'/2^64⌋`; a sparse or dense
//! counter of any other size cannot be combined without inventing bits, and is refused
//! (`LcError::IncompatibleSizes`). An exact counter of another size merges into anything as
//! positions: fingerprint `f` stands for the hash values `[f·2^64/U, (f+1)·2^64/U)`, whose
//! start gives its position in the destination — the item's own position unless a bit
//! boundary of the destination falls inside that interval (probability `m'/U` per item, about
//! 5·10^−7 at the defaults), when it may be its neighbour. The destination then leaves exact
//! mode, as it does when it absorbs a bitmap.
//!
//! # Version history
//!
//! 1 — exact mode kept the 64-bit `h1` values themselves (same limit `L`); bitmap otherwise.
//! 2 — fingerprints, the sparse mode, the single block.

use super::block::Block;
use crate::core::alloc::size_class;
use crate::core::ef::{self, Shape};
use crate::core::hashing::{hash_item, reduce};
use crate::core::intern::Interner;
use std::sync::Arc;

/// α² of the sizing rule (the paper's choice that reproduces its Table II).
pub const ALPHA_SQUARED: f64 = 5.0;
/// Largest exact set, whatever the bitmap size (see "Three modes").
///
/// Warning: part of the encoding. Saved exact sets may hold this many fingerprints and the
/// decoder refuses more, so lowering it makes saved counters (RDB, AOF, DUMP) fail to load;
/// raising it changes which counts are exact and the fingerprints' universe. Change it only
/// with a new encoding version.
pub const EXACT_MAX: u64 = 8192;
/// The exact guarantee covers at least this many items, whatever `L` (see "Three modes").
const EXACT_GUARANTEED: u64 = 250;
/// `U ≥ C(L*, 2)` times this: 10^6 and a margin for `⌈2^64/U⌉` (part of the encoding).
const INVERSE_MISCOUNT: u64 = 1_000_100;
/// A sparse block never takes more (part of the state: a pure function of the set of items).
pub const SPARSE_MAX_BYTES: u64 = 4096;
/// Bitmap modes with fewer zero bits than this are reported as saturated.
pub const SATURATION_ZEROS: u64 = 10;
/// Largest bitmap considered by the sizing search (2^53 bits, 1 PiB): far beyond any memory
/// limit, it only keeps the arithmetic exact in f64.
const MAX_BITS: u64 = 1 << 53;

/// Header word of the block: mode in bits 0–1, count from bit `COUNT_SHIFT` (the number of
/// fingerprints or set bits; in dense mode the number of zero bits). Exact and sparse streams
/// start at bit `STREAM`, so their count has 16 bits: exact sets hold at most `EXACT_MAX`
/// fingerprints, and a sparse block of at most `SPARSE_MAX_BYTES` fewer positions than its bits.
const MODE_EXACT: u64 = 0;
const MODE_SPARSE: u64 = 1;
const MODE_DENSE: u64 = 2;
const COUNT_SHIFT: u32 = 10;
const STREAM: u64 = 26;
const _: () = assert!(EXACT_MAX < 1 << (STREAM - COUNT_SHIFT as u64));
const _: () = assert!(SPARSE_MAX_BYTES * 8 < 1 << (STREAM - COUNT_SHIFT as u64));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Exact,
    Sparse,
    Dense,
}

impl Mode {
    /// The name `LC.INFO` reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Exact => "exact",
            Mode::Sparse => "sparse",
            Mode::Dense => "dense",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum LcError {
    /// Error rate outside (0, 1) or capacity 0.
    InvalidParameters,
    /// The bitmap would take `bytes`, more than the allowed `limit`.
    TooLarge { bytes: u64, limit: u64 },
    /// A bitmap of `source` bits cannot be folded into one of `dest` bits.
    IncompatibleSizes { dest: u64, source: u64 },
    /// The allocator refused memory.
    OutOfMemory,
}

impl std::fmt::Display for LcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LcError::InvalidParameters => write!(f, "invalid counter parameters"),
            LcError::TooLarge { bytes, limit } => write!(
                f,
                "counter would take {bytes} bytes, more than max-memory-per-key ({limit})"
            ),
            LcError::IncompatibleSizes { dest, source } => write!(
                f,
                "cannot combine counters of {dest} and {source} bits (a bitmap only folds into \
                 one whose size divides its own; reserve them with the same parameters)"
            ),
            LcError::OutOfMemory => write!(f, "out of memory"),
        }
    }
}

/// Smallest `m` satisfying the sizing rule, or `None` if the parameters are invalid or `m`
/// would exceed 2^53 bits.
pub fn bits_for(capacity: u64, error_rate: f64) -> Option<u64> {
    if capacity == 0 || !(error_rate > 0.0 && error_rate < 1.0) {
        return None;
    }
    let n = capacity as f64;
    let fits = |m: u64| {
        let t = n / m as f64;
        let beta = ALPHA_SQUARED.max(1.0 / (error_rate * t).powi(2));
        m as f64 >= beta * (t.exp_m1() - t)
    };
    let mut hi = 1u64;
    while !fits(hi) {
        if hi >= MAX_BITS {
            return None;
        }
        hi = (hi * 2).min(MAX_BITS);
    }
    let mut lo = hi / 2; // fits(lo) is false (or lo == 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Bytes a bitmap of `m` bits takes (whole 64-bit words): what the memory limit is checked
/// against.
pub fn bitmap_bytes(m: u64) -> u64 {
    m.div_ceil(64) * 8
}

/// How many fingerprints a counter of `m` bits keeps before leaving exact mode.
pub fn exact_limit(m: u64) -> u64 {
    (m / 64).min(EXACT_MAX)
}

/// A dense block: the header (its count is the number of zero bits), the estimate for that
/// count (so `LC.COUNT` reads it instead of taking a logarithm), then the bitmap.
const DENSE_ESTIMATE: usize = 1;
const DENSE_BITMAP: usize = 2;

/// Words of a dense block.
fn dense_words(m: u64) -> u64 {
    DENSE_BITMAP as u64 + m.div_ceil(64)
}

/// The dense size the sparse mode is measured against: the bitmap and one header word, as
/// when encoding version 2 was defined. The estimate word is left out so that which mode a
/// set of items gives (part of the state, a pure function of the set) never depends on it.
fn dense_reference_bytes(m: u64) -> u64 {
    size_class((1 + m.div_ceil(64)) * 8)
}

/// Words of an exact or sparse block whose stream has this shape.
fn stream_words(shape: Shape) -> u64 {
    (STREAM + shape.bits()).div_ceil(64)
}

/// `n̂ = m · ln(m / Z)`, with `Z = 0` taken as 1 (see "Saturation").
fn estimate(m: u64, zeros: u64) -> u64 {
    let z = zeros.max(1) as f64;
    let m = m as f64;
    (m * (m / z).ln()).round() as u64
}

/// What every counter of the same parameters shares (interned: one copy per parameter set).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Geometry {
    capacity: u64,
    /// The error rate's bits (`f64` is not `Hash`).
    error_rate: u64,
    m: u64,
    /// `U / m` (see "Three modes").
    q: u64,
    exact_limit: u64,
    sparse_limit: u64,
}

static GEOMETRIES: Interner<Geometry> = Interner::new();

impl Geometry {
    fn new(capacity: u64, error_rate: f64, m: u64) -> Geometry {
        let exact_limit = exact_limit(m);
        let covered = exact_limit.max(EXACT_GUARANTEED);
        let pairs = covered * (covered - 1) / 2;
        Geometry {
            capacity,
            error_rate: error_rate.to_bits(),
            m,
            q: (pairs * INVERSE_MISCOUNT).div_ceil(m).max(1),
            exact_limit,
            sparse_limit: sparse_limit(m),
        }
    }

    /// The fingerprints' universe `U = m·q`.
    pub fn universe(&self) -> u64 {
        self.m * self.q
    }

    pub fn exact_limit(&self) -> u64 {
        self.exact_limit
    }

    pub fn sparse_limit(&self) -> u64 {
        self.sparse_limit
    }
}

/// The most set bits a sparse counter of `m` bits holds: the largest `k` such that every
/// sparse block of up to `k` positions is in a smaller size class than the dense block and
/// within `SPARSE_MAX_BYTES`. A stream's size grows with `k` within each run of equal `l` (see
/// `ef.rs`), so each run needs one division.
pub fn sparse_limit(m: u64) -> u64 {
    let dense = dense_reference_bytes(m);
    let largest = SPARSE_MAX_BYTES.min(dense - 1);
    // The largest size class not above `largest` (classes are multiples of 8).
    let mut below = largest;
    while size_class(below) > largest {
        below -= 8;
    }
    let Some(budget) = (size_class(below) * 8).checked_sub(STREAM) else {
        return 0;
    };
    let mut k = 1;
    while k <= m {
        let shape = Shape::new(k, m);
        if shape.bits() > budget {
            return k - 1;
        }
        let run_end = (m >> shape.l).min(m);
        let most = (budget - shape.buckets) / (shape.l as u64 + 1);
        if most < run_end {
            return most;
        }
        k = run_end + 1;
    }
    m
}

/// A linear counter: its geometry and one block (none while empty).
#[derive(Clone)]
pub struct Counter {
    geometry: Arc<Geometry>,
    block: Block,
}

impl PartialEq for Counter {
    /// Same parameters, same mode and count, same stream or bitmap.
    fn eq(&self, other: &Counter) -> bool {
        let used = |c: &Counter| match c.mode() {
            Mode::Dense => dense_words(c.geometry.m),
            _ => stream_words(c.shape()),
        } as usize;
        let (a, b) = (self.block.words(), other.block.words());
        *self.geometry == *other.geometry
            && self.block.head() == other.block.head()
            && used(self) == used(other)
            && a.get(1..used(self)) == b.get(1..used(other))
    }
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("geometry", &self.geometry)
            .field("mode", &self.mode())
            .field("count", &self.stored_count())
            .field("block", &self.block)
            .finish()
    }
}

impl Counter {
    /// An empty counter sized for `capacity` items at `error_rate`, refused when its bitmap
    /// would take more than `max_bytes`.
    pub fn reserve(error_rate: f64, capacity: u64, max_bytes: u64) -> Result<Counter, LcError> {
        if capacity == 0 || !(error_rate > 0.0 && error_rate < 1.0) {
            return Err(LcError::InvalidParameters);
        }
        // Beyond the search range: at least that many bytes.
        let m = bits_for(capacity, error_rate).unwrap_or(MAX_BITS);
        let bytes = bitmap_bytes(m);
        if bytes > max_bytes || m == MAX_BITS {
            return Err(LcError::TooLarge {
                bytes,
                limit: max_bytes,
            });
        }
        Ok(Counter::empty(capacity, error_rate, m))
    }

    /// An empty counter with a given geometry (no validation: callers have validated it, and
    /// `m ≥ 1`).
    pub(crate) fn empty(capacity: u64, error_rate: f64, m: u64) -> Counter {
        Counter {
            geometry: GEOMETRIES.intern(Geometry::new(capacity, error_rate, m)),
            block: Block::none(),
        }
    }

    /// An empty counter of the same geometry.
    fn empty_like(&self) -> Counter {
        Counter {
            geometry: self.geometry.clone(),
            block: Block::none(),
        }
    }

    /// A copy, or `OutOfMemory`.
    pub fn try_clone(&self) -> Result<Counter, LcError> {
        Ok(Counter {
            geometry: self.geometry.clone(),
            block: self.block.try_clone().ok_or(LcError::OutOfMemory)?,
        })
    }

    pub fn capacity(&self) -> u64 {
        self.geometry.capacity
    }

    pub fn error_rate(&self) -> f64 {
        f64::from_bits(self.geometry.error_rate)
    }

    /// `m`, the size of the bitmap (in every mode).
    pub fn bits(&self) -> u64 {
        self.geometry.m
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn mode(&self) -> Mode {
        match self.block.head() & 3 {
            MODE_EXACT => Mode::Exact,
            MODE_SPARSE => Mode::Sparse,
            _ => Mode::Dense,
        }
    }

    pub fn is_exact(&self) -> bool {
        self.mode() == Mode::Exact
    }

    /// The header's count: fingerprints, set bits (sparse) or zero bits (dense).
    fn stored_count(&self) -> u64 {
        let head = self.block.head();
        match head & 3 {
            MODE_DENSE => head >> COUNT_SHIFT,
            _ => (head & ((1 << STREAM) - 1)) >> COUNT_SHIFT,
        }
    }

    /// The universe of the stream: `U` in exact mode, `m` in sparse mode.
    fn universe(&self) -> u64 {
        match self.mode() {
            Mode::Exact => self.geometry.universe(),
            _ => self.geometry.m,
        }
    }

    /// The shape of the exact or sparse stream.
    fn shape(&self) -> Shape {
        Shape::new(self.stored_count(), self.universe())
    }

    /// The exact mode's fingerprints, in order.
    pub fn fingerprints(&self) -> Option<ef::Iter<'_>> {
        self.is_exact()
            .then(|| ef::iter(self.block.words(), STREAM, self.shape()))
    }

    /// The exact or sparse stream: the words, where it starts and its shape.
    pub fn stream(&self) -> Option<(&[u64], u64, Shape)> {
        (self.mode() != Mode::Dense).then(|| (self.block.words(), STREAM, self.shape()))
    }

    /// The dense bitmap's words (bit `p` is bit `p % 64` of word `p / 64`; padding zero).
    pub fn bitmap_words(&self) -> Option<&[u64]> {
        let end = dense_words(self.geometry.m) as usize;
        (self.mode() == Mode::Dense).then(|| &self.block.words()[DENSE_BITMAP..end])
    }

    /// The positions of the set bits, in order (in exact mode, those the fingerprints stand
    /// for: each once).
    pub fn positions(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        let q = self.geometry.q;
        match self.mode() {
            Mode::Exact => Box::new(dedup(
                ef::iter(self.block.words(), STREAM, self.shape()).map(move |f| f / q),
            )),
            Mode::Sparse => Box::new(ef::iter(self.block.words(), STREAM, self.shape())),
            Mode::Dense => Box::new(bit_positions(
                self.bitmap_words().unwrap_or_default(),
                false,
                self.geometry.m,
            )),
        }
    }

    /// The positions of the zero bits (sparse and dense modes), in order.
    pub fn zero_positions(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        let m = self.geometry.m;
        match self.bitmap_words() {
            Some(words) => Box::new(bit_positions(words, true, m)),
            None => {
                let mut set = self.positions().peekable();
                Box::new((0..m).filter(move |&p| {
                    if set.peek() == Some(&p) {
                        set.next();
                        false
                    } else {
                        true
                    }
                }))
            }
        }
    }

    /// Bits set in the bitmap; in exact mode, the bits the fingerprints would set.
    pub fn bits_set(&self) -> u64 {
        match self.mode() {
            Mode::Exact => self.positions().count() as u64,
            Mode::Sparse => self.stored_count(),
            Mode::Dense => self.geometry.m - self.stored_count(),
        }
    }

    /// Zero bits of the bitmap (sparse and dense modes).
    fn zeros(&self) -> u64 {
        match self.mode() {
            Mode::Dense => self.stored_count(),
            _ => self.geometry.m - self.stored_count(),
        }
    }

    /// The number of distinct items: exact in exact mode, the linear-counting estimate
    /// otherwise. O(1): this is LC.COUNT's whole work.
    #[inline]
    pub fn count(&self) -> u64 {
        let head = self.block.head();
        let stream_count = (head & ((1 << STREAM) - 1)) >> COUNT_SHIFT;
        match head & 3 {
            MODE_EXACT => stream_count,
            MODE_SPARSE => estimate(self.geometry.m, self.geometry.m - stream_count),
            _ => self.block.words()[DENSE_ESTIMATE],
        }
    }

    /// Estimated standard error of `count()/n` at the current load (0 in exact mode).
    pub fn standard_error(&self) -> f64 {
        let n = self.count();
        if self.is_exact() || n == 0 {
            return 0.0;
        }
        let m = self.geometry.m as f64;
        let t = n as f64 / m;
        (m * (t.exp_m1() - t)).sqrt() / n as f64
    }

    /// Whether the bitmap is nearly full (see "Saturation").
    pub fn saturated(&self) -> bool {
        !self.is_exact() && self.zeros() < SATURATION_ZEROS
    }

    /// Bytes this counter's own allocations take, each rounded to its allocator size class:
    /// the box Redis holds and the block (the shared geometry is not its own).
    pub fn memory_usage(&self) -> u64 {
        size_class(std::mem::size_of::<Counter>() as u64) + self.block.bytes()
    }

    /// Adds one item; true if it changed the counter.
    pub fn add(&mut self, item: &[u8]) -> Result<bool, LcError> {
        self.add_hash_within(hash_item(item).h1, u64::MAX)
    }

    /// Adds one item; the switch to the dense bitmap, if this item needs it, is refused
    /// (`TooLarge`, nothing changed) when the bitmap would take more than `limit` bytes: a
    /// counter reserved under a higher `max-memory-per-key` stops growing, as a filter does.
    pub fn add_within(&mut self, item: &[u8], limit: u64) -> Result<bool, LcError> {
        self.add_hash_within(hash_item(item).h1, limit)
    }

    /// How many more items can be added before the switch to the dense bitmap becomes possible
    /// (`u64::MAX` in dense mode, where no add allocates): adds of at most this many items
    /// never need a memory limit.
    pub fn room_before_dense(&self) -> u64 {
        let g = &self.geometry;
        match self.mode() {
            Mode::Exact => g.exact_limit.max(g.sparse_limit) - self.stored_count(),
            Mode::Sparse => g.sparse_limit.saturating_sub(self.stored_count()),
            Mode::Dense => u64::MAX,
        }
    }

    /// Adds one `h1`; true if it changed the counter (a new fingerprint in exact mode, including
    /// the one that leaves it; a bit flipped 0→1 otherwise).
    pub fn add_hash(&mut self, h: u64) -> Result<bool, LcError> {
        self.add_hash_within(h, u64::MAX)
    }

    #[inline]
    fn add_hash_within(&mut self, h: u64, limit: u64) -> Result<bool, LcError> {
        let m = self.geometry.m;
        match self.mode() {
            Mode::Dense => Ok(self.set_dense(reduce(h, m))),
            Mode::Sparse => self.add_position(reduce(h, m), limit),
            Mode::Exact => self.add_fingerprint(reduce(h, self.geometry.universe()), limit),
        }
    }

    /// Sets bit `pos` (< m) in dense mode; true if it was zero.
    #[inline]
    fn set_dense(&mut self, pos: u64) -> bool {
        let m = self.geometry.m;
        let words = self.block.words_mut();
        // Straight on the words: the header's zero count is decremented in place.
        let word = &mut words[DENSE_BITMAP + (pos / 64) as usize];
        let mask = 1u64 << (pos % 64);
        let was_zero = *word & mask == 0;
        *word |= mask;
        if was_zero {
            words[0] -= 1 << COUNT_SHIFT;
            words[DENSE_ESTIMATE] = estimate(m, words[0] >> COUNT_SHIFT);
        }
        was_zero
    }

    /// Where `x` goes in the exact or sparse stream: its shape and `x`'s rank, or None when
    /// `x` is there already.
    fn absent(&self, x: u64) -> Option<(Shape, u64)> {
        let shape = self.shape();
        let probe = ef::find(self.block.words(), STREAM, shape, x);
        (!probe.found).then_some((shape, probe.rank))
    }

    fn add_fingerprint(&mut self, f: u64, limit: u64) -> Result<bool, LcError> {
        let Some((shape, rank)) = self.absent(f) else {
            return Ok(false);
        };
        if shape.k < self.geometry.exact_limit {
            self.insert(MODE_EXACT, shape, rank, f)?;
        } else {
            // Leaving exact mode: the positions the fingerprints (and this one) stand for.
            let q = self.geometry.q;
            let mut positions: Vec<u64> = self.positions().collect();
            let p = f / q;
            if let Err(at) = positions.binary_search(&p) {
                positions.insert(at, p);
            }
            self.set_positions(&positions, limit)?;
        }
        Ok(true)
    }

    fn add_position(&mut self, p: u64, limit: u64) -> Result<bool, LcError> {
        let Some((shape, rank)) = self.absent(p) else {
            return Ok(false);
        };
        if shape.k < self.geometry.sparse_limit {
            self.insert(MODE_SPARSE, shape, rank, p)?;
        } else {
            self.check_dense_within(limit)?;
            let mut dense = self.dense_block()?;
            set_bits(&mut dense, self.geometry.m, std::iter::once(p));
            self.block = dense;
        }
        Ok(true)
    }

    /// Inserts `x` at `rank` into the exact or sparse stream of shape `shape` (growing the
    /// block, or rebuilding the stream when its low-bit width changes); nothing changed on
    /// error.
    fn insert(&mut self, mode: u64, shape: Shape, rank: u64, x: u64) -> Result<(), LcError> {
        let next = Shape::new(shape.k + 1, self.universe());
        if next.l == shape.l {
            self.block
                .resize(stream_words(next))
                .map_err(|_| LcError::OutOfMemory)?;
            ef::insert(self.block.words_mut(), STREAM, shape, rank, x);
            set_count(&mut self.block, mode, next.k);
        } else {
            let old = ef::iter(self.block.words(), STREAM, shape);
            let values = old.clone().take(rank as usize).chain(std::iter::once(x));
            let values = values.chain(old.skip(rank as usize));
            self.block = stream_block(mode, self.universe(), next.k, values)?;
        }
        Ok(())
    }

    /// Replaces the state by these bit positions (sorted, distinct, below m): sparse or dense
    /// by their number, the dense bitmap refused (nothing changed) when it would take more than
    /// `limit` bytes.
    fn set_positions(&mut self, positions: &[u64], limit: u64) -> Result<(), LcError> {
        let k = positions.len() as u64;
        self.block = if k <= self.geometry.sparse_limit {
            stream_block(MODE_SPARSE, self.geometry.m, k, positions.iter().copied())?
        } else {
            self.check_dense_within(limit)?;
            let mut block = self.empty_like().dense_block()?;
            set_bits(&mut block, self.geometry.m, positions.iter().copied());
            block
        };
        Ok(())
    }

    /// A dense block holding this counter's positions.
    fn dense_block(&self) -> Result<Block, LcError> {
        let m = self.geometry.m;
        let mut block = Block::zeroed(dense_words(m)).ok_or(LcError::OutOfMemory)?;
        set_dense_count(&mut block, m, m);
        if let Some(words) = self.bitmap_words() {
            block.words_mut()[DENSE_BITMAP..DENSE_BITMAP + words.len()].copy_from_slice(words);
            set_dense_count(&mut block, m, self.stored_count());
        } else {
            set_bits(&mut block, m, self.positions());
        }
        Ok(block)
    }

    /// Turns a sparse counter dense, refused (nothing changed) when the bitmap would take more
    /// than `limit` bytes; exact and dense counters stay as they are.
    pub(crate) fn make_dense(&mut self, limit: u64) -> Result<(), LcError> {
        if self.mode() == Mode::Sparse {
            self.check_dense_within(limit)?;
            self.block = self.dense_block()?;
        }
        Ok(())
    }

    /// A counter whose set bits are given as whole bitmap words (`⌈m/64⌉` of them, padding
    /// zero), sparse or dense by their number. Refused when the bitmap would take more than
    /// `limit` bytes and the counter must be dense.
    pub(crate) fn from_bitmap_words(
        capacity: u64,
        error_rate: f64,
        m: u64,
        words: &[u64],
        limit: u64,
    ) -> Result<Counter, LcError> {
        let mut counter = Counter::empty(capacity, error_rate, m);
        let ones: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
        if ones <= counter.geometry.sparse_limit {
            counter.block = stream_block(MODE_SPARSE, m, ones, bit_positions(words, false, m))?;
        } else {
            counter.check_dense_within(limit)?;
            let mut block = Block::zeroed(dense_words(m)).ok_or(LcError::OutOfMemory)?;
            block.words_mut()[DENSE_BITMAP..DENSE_BITMAP + words.len()].copy_from_slice(words);
            set_dense_count(&mut block, m, m - ones);
            counter.block = block;
        }
        Ok(counter)
    }

    /// A counter holding these bit positions (sorted, distinct, below m), sparse or dense by
    /// their number (`count` of them).
    pub(crate) fn from_positions(
        capacity: u64,
        error_rate: f64,
        m: u64,
        count: u64,
        positions: impl Iterator<Item = u64>,
        limit: u64,
    ) -> Result<Counter, LcError> {
        let mut counter = Counter::empty(capacity, error_rate, m);
        if count <= counter.geometry.sparse_limit {
            counter.block = stream_block(MODE_SPARSE, m, count, positions)?;
        } else {
            counter.check_dense_within(limit)?;
            let mut block = counter.dense_block()?;
            set_bits(&mut block, m, positions);
            counter.block = block;
        }
        Ok(counter)
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
            counter.block = stream_block(MODE_EXACT, universe, count, fingerprints)?;
        }
        Ok(counter)
    }

    /// Overwrites the dense bitmap from byte `offset` on (bit 8·i + j is bit j of byte i) and
    /// keeps the count of zeros; `codec::write_dense` has checked the range and the padding
    /// bits. Does nothing unless dense.
    pub(crate) fn write_bitmap_bytes(&mut self, offset: usize, bytes: &[u8]) {
        if self.mode() != Mode::Dense {
            return;
        }
        let words = self.block.words_mut();
        let mut zeros = words[0] >> COUNT_SHIFT;
        for (i, &new) in bytes.iter().enumerate() {
            let at = offset + i;
            let (word, shift) = (&mut words[DENSE_BITMAP + at / 8], (at % 8) * 8);
            let old = (*word >> shift) as u8;
            // The byte's zeros are part of `zeros`, so this cannot underflow.
            zeros = zeros + u64::from(old.count_ones()) - u64::from(new.count_ones());
            *word = (*word & !(0xff << shift)) | (u64::from(new) << shift);
        }
        set_dense_count(&mut self.block, self.geometry.m, zeros);
    }

    /// Whether `other` can be absorbed into a counter of this size.
    pub fn check_absorbable(&self, other: &Counter) -> Result<(), LcError> {
        if !other.is_exact() && !other.bits().is_multiple_of(self.bits()) {
            return Err(LcError::IncompatibleSizes {
                dest: self.bits(),
                source: other.bits(),
            });
        }
        Ok(())
    }

    fn check_dense_within(&self, limit: u64) -> Result<(), LcError> {
        let bytes = bitmap_bytes(self.geometry.m);
        if bytes > limit {
            return Err(LcError::TooLarge { bytes, limit });
        }
        Ok(())
    }

    /// Makes this counter the union of itself and `other`, keeping its own size; true if it
    /// changed. Refused, with nothing changed, when `other` is sparse or dense and its size is
    /// not a multiple of this one's.
    pub fn absorb(&mut self, other: &Counter) -> Result<bool, LcError> {
        self.absorb_within(other, u64::MAX)
    }

    /// [`Counter::absorb`], refused with nothing changed (`TooLarge`) when it could need the
    /// switch to a dense bitmap of more than `limit` bytes: each source is absorbed whole or not
    /// at all, so a merge that stops part-way has absorbed exactly the sources before.
    pub fn absorb_within(&mut self, other: &Counter, limit: u64) -> Result<bool, LcError> {
        self.check_absorbable(other)?;
        let entries = |c: &Counter| match c.mode() {
            Mode::Dense => c.bits_set(),
            _ => c.stored_count(),
        };
        if self.mode() != Mode::Dense && entries(self) + entries(other) > self.geometry.sparse_limit
        {
            self.check_dense_within(limit)?;
        }
        let same = other.bits() == self.bits();
        if same && self.is_exact() && other.is_exact() {
            // As adding the items: exact while the union fits, then their positions.
            let q = self.geometry.q;
            let mut changed = false;
            for f in other.fingerprints().into_iter().flatten() {
                changed |= match self.mode() {
                    Mode::Exact => self.add_fingerprint(f, u64::MAX)?,
                    Mode::Sparse => self.add_position(f / q, u64::MAX)?,
                    Mode::Dense => self.set_dense(f / q),
                };
            }
            return Ok(changed);
        }
        // Into positions: another size's fingerprints through their hash intervals (see
        // "Unions"), bitmaps folded.
        let m = self.bits();
        let source: Box<dyn Iterator<Item = u64>> = match other.fingerprints() {
            Some(fps) if !same => {
                let u = u128::from(other.geometry.universe());
                Box::new(fps.map(move |f| {
                    let start = ((u128::from(f) << 64).div_ceil(u)) as u64;
                    reduce(start, m)
                }))
            }
            _ => {
                let d = other.bits() / m;
                Box::new(other.positions().map(move |p| p / d))
            }
        };
        let was_exact = self.is_exact();
        let changed = self.absorb_positions(source, limit)?;
        Ok(changed || was_exact)
    }

    /// Adds bit positions (sorted, maybe repeated, below m) to this counter, leaving exact
    /// mode; true if a bit was set.
    fn absorb_positions(
        &mut self,
        positions: impl Iterator<Item = u64>,
        limit: u64,
    ) -> Result<bool, LcError> {
        if self.mode() == Mode::Dense {
            // The estimate once, after every bit (`set_dense` would take it for each one).
            let zeros = self.stored_count();
            set_bits(&mut self.block, self.geometry.m, positions);
            return Ok(self.stored_count() != zeros);
        }
        let own: Vec<u64> = self.positions().collect();
        let mut merged = Vec::with_capacity(own.len());
        let mut mine = own.iter().copied().peekable();
        for p in positions {
            while let Some(&q) = mine.peek().filter(|&&q| q <= p) {
                merged.push(q);
                mine.next();
            }
            if merged.last() != Some(&p) {
                merged.push(p);
            }
        }
        merged.extend(mine);
        let changed = merged.len() != own.len();
        if changed || self.is_exact() {
            self.set_positions(&merged, limit)?;
        }
        Ok(changed)
    }

    /// An empty counter with the geometry a union of `sources` gets: that of the smallest
    /// non-exact counter among them (the only size every other bitmap may fold into), or of the
    /// first source when all are exact. `None` when there is no source.
    pub fn empty_for_union(sources: &[&Counter]) -> Option<Counter> {
        let model = sources
            .iter()
            .filter(|c| !c.is_exact())
            .min_by_key(|c| c.bits())
            .or_else(|| sources.first())?;
        Some(model.empty_like())
    }

    /// The number of distinct items in the union of `counters` (0 for none). Exact when every
    /// counter is exact with the same size; otherwise estimated in the smallest bitmap, into
    /// which every other must fold.
    pub fn union_count(counters: &[&Counter]) -> Result<u64, LcError> {
        match counters {
            [] => Ok(0),
            [one] => Ok(one.count()),
            [first, ..]
                if counters
                    .iter()
                    .all(|c| c.is_exact() && c.bits() == first.bits()) =>
            {
                let mut all: Vec<u64> = Vec::new();
                for c in counters {
                    all.extend(c.fingerprints().into_iter().flatten());
                }
                all.sort_unstable();
                all.dedup();
                Ok(all.len() as u64)
            }
            _ => {
                let mut union = Counter::empty_for_union(counters).ok_or(LcError::OutOfMemory)?;
                for c in counters {
                    union.check_absorbable(c)?;
                }
                for c in counters {
                    union.absorb(c)?;
                }
                Ok(union.count())
            }
        }
    }
}

/// A block in `mode` (exact or sparse) holding `k` values below `universe`, sorted and
/// distinct.
fn stream_block(
    mode: u64,
    universe: u64,
    k: u64,
    values: impl Iterator<Item = u64>,
) -> Result<Block, LcError> {
    let shape = Shape::new(k, universe);
    let mut block = Block::zeroed(stream_words(shape)).ok_or(LcError::OutOfMemory)?;
    ef::write(block.words_mut(), STREAM, shape, values);
    set_count(&mut block, mode, k);
    Ok(block)
}

/// Writes the header's mode and count, keeping the stream bits that share its word.
fn set_count(block: &mut Block, mode: u64, count: u64) {
    let stream = match mode {
        MODE_DENSE => 0,
        _ => block.head() & !((1 << STREAM) - 1),
    };
    block.set_head(stream | mode | (count << COUNT_SHIFT));
}

/// A dense block's header and estimate for `zeros` zero bits out of `m`.
fn set_dense_count(block: &mut Block, m: u64, zeros: u64) {
    set_count(block, MODE_DENSE, zeros);
    block.words_mut()[DENSE_ESTIMATE] = estimate(m, zeros);
}

/// Sets bits of a dense block of `m` bits, keeping its zero count and estimate.
fn set_bits(block: &mut Block, m: u64, positions: impl Iterator<Item = u64>) {
    let words = block.words_mut();
    for p in positions {
        let word = &mut words[DENSE_BITMAP + (p / 64) as usize];
        let mask = 1u64 << (p % 64);
        let was_zero = *word & mask == 0;
        *word |= mask;
        words[0] -= (was_zero as u64) << COUNT_SHIFT;
    }
    let zeros = words[0] >> COUNT_SHIFT;
    words[DENSE_ESTIMATE] = estimate(m, zeros);
}

/// The positions of the set bits of a bitmap of `m` bits (of its zero bits when `zeros`), in
/// order.
pub fn bit_positions(words: &[u64], zeros: bool, m: u64) -> impl Iterator<Item = u64> + '_ {
    words
        .iter()
        .enumerate()
        .flat_map(move |(i, &w)| {
            let mut w = if zeros { !w } else { w };
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as u64;
                    w &= w - 1;
                    i as u64 * 64 + bit
                })
            })
        })
        .take_while(move |&p| p < m)
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
    use proptest::prelude::*;

    const PAPER_TABLE: [(u64, u64); 8] = [
        (100, 5_034),
        (1_000, 5_329),
        (10_000, 7_960),
        (50_000, 17_134),
        (100_000, 26_729),
        (1_000_000, 154_171),
        (10_000_000, 1_096_582),
        (100_000_000, 8_571_013),
    ];

    #[test]
    fn sizing_reproduces_the_papers_table() {
        for (n, m) in PAPER_TABLE {
            assert_eq!(bits_for(n, 0.01), Some(m), "capacity {n}");
        }
    }

    #[test]
    fn sizing_rejects_bad_parameters() {
        assert_eq!(bits_for(0, 0.01), None);
        assert_eq!(bits_for(10, 0.0), None);
        assert_eq!(bits_for(10, 1.0), None);
        assert_eq!(bits_for(10, f64::NAN), None);
        assert_eq!(bits_for(u64::MAX, 1e-9), None);
        assert!(bits_for(1, 0.999).unwrap() >= 1);
    }

    #[test]
    fn reserve_respects_the_memory_limit() {
        let err = Counter::reserve(0.01, 50_000, 1000).unwrap_err();
        assert_eq!(
            err,
            LcError::TooLarge {
                bytes: 2144,
                limit: 1000
            }
        );
        assert!(Counter::reserve(0.01, 50_000, 2144).is_ok());
    }

    /// The default geometry, pinned: these numbers are part of encoding version 2.
    #[test]
    fn default_geometry() {
        let c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
        let g = c.geometry();
        assert_eq!(g.m, 17_134);
        assert_eq!(g.exact_limit(), 267);
        assert_eq!(g.universe(), 35_514_567_036);
        assert_eq!(g.sparse_limit(), 4_024);
        assert_eq!(std::mem::size_of::<Counter>(), 16);
    }

    /// For every geometry: fingerprints divided by q are positions, and the miscount bound
    /// C(n, 2)/U + C(n, 2)/2^64 stays below 10^−6 for every n the guarantee covers.
    #[test]
    fn the_exact_guarantee_holds_for_every_size() {
        let mut m = 1u64;
        while m < 1 << 40 {
            let g = Geometry::new(1, 0.5, m);
            let covered = g.exact_limit.max(EXACT_GUARANTEED) as f64;
            let pairs = covered * (covered - 1.0) / 2.0;
            let bound = pairs / g.universe() as f64 + pairs / 2f64.powi(64);
            assert!(bound < 1e-6, "m {m}: {bound}");
            assert_eq!(g.universe() % m, 0);
            for h in [0u64, 1, u64::MAX, u64::MAX / 3, 0x1234_5678_9abc_def0] {
                assert_eq!(reduce(h, g.universe()) / g.q, reduce(h, m), "m {m}");
            }
            m = m * 5 / 4 + 1;
        }
    }

    proptest! {
        #[test]
        fn fingerprints_name_positions(h in any::<u64>(), m in 1u64..10_000_000) {
            let g = Geometry::new(1, 0.5, m);
            prop_assert_eq!(reduce(h, g.universe()) / g.q, reduce(h, m));
        }
    }

    /// sparse_limit against a brute-force search, and exact sets at their limit never larger
    /// than the bitmap.
    #[test]
    fn mode_limits_match_their_definitions() {
        let class_of = |shape: Shape| size_class(stream_words(shape) * 8);
        for m in (1..3_000).chain([17_134, 26_729, 154_171, 1_096_582]) {
            let dense = dense_reference_bytes(m);
            let fits = |k: u64| {
                let c = class_of(Shape::new(k, m));
                c < dense && c <= SPARSE_MAX_BYTES
            };
            let brute = (1..=m).find(|&k| !fits(k)).map_or(m, |k| k - 1);
            let g = Geometry::new(1, 0.5, m);
            assert_eq!(g.sparse_limit, brute, "m {m}");
            let exact = class_of(Shape::new(g.exact_limit, g.universe()));
            assert!(
                g.exact_limit == 0 || exact <= dense,
                "m {m}: exact {exact} > dense {dense}"
            );
        }
    }

    /// Prints the README's sizing table: `cargo test --release --lib sizing_table -- --nocapture`.
    #[test]
    fn sizing_table() {
        println!("| capacity | error | bits | bytes | exact up to | sparse up to (set bits) |");
        println!("|---:|---:|---:|---:|---:|---:|");
        for n in [1_000u64, 10_000, 50_000, 100_000, 1_000_000, 10_000_000] {
            for e in [0.02, 0.01, 0.005] {
                let m = bits_for(n, e).unwrap();
                let g = Geometry::new(n, e, m);
                println!(
                    "| {n} | {}% | {m} | {} | {} | {} |",
                    e * 100.0,
                    bitmap_bytes(m),
                    g.exact_limit,
                    g.sparse_limit
                );
            }
        }
    }

    fn item(i: u64) -> Vec<u8> {
        format!("item:{i}").into_bytes()
    }

    fn filled(capacity: u64, items: u64) -> Counter {
        let mut c = Counter::reserve(0.01, capacity, u64::MAX).unwrap();
        for i in 0..items {
            c.add(&item(i)).unwrap();
        }
        c
    }

    /// Bytes per counter with the defaults (box and block), by number of items: what keeps a
    /// small key below a HyperLogLog's (`cargo test --release --lib memory_by_size --
    /// --nocapture` prints them).
    #[test]
    fn memory_by_size() {
        let expected = [
            (0, 16, Mode::Exact),
            (1, 24, Mode::Exact),
            (10, 64, Mode::Exact),
            (30, 144, Mode::Exact),
            (100, 400, Mode::Exact),
            (250, 1_040, Mode::Exact),
            (268, 336, Mode::Sparse),
            (1_000, 784, Mode::Sparse),
            (4_000, 2_064, Mode::Sparse),
            (5_000, 2_576, Mode::Dense),
            (50_000, 2_576, Mode::Dense),
        ];
        for (n, bytes, mode) in expected {
            let c = filled(50_000, n);
            println!("{n} items: {} bytes, {:?}", c.memory_usage(), c.mode());
            assert_eq!((c.memory_usage(), c.mode()), (bytes, mode), "{n} items");
        }
    }

    #[test]
    fn the_switch_to_dense_respects_a_lowered_limit() {
        let mut c = Counter::reserve(0.01, 100_000, u64::MAX).unwrap();
        let room = c.room_before_dense();
        let mut i = 0;
        while i < room {
            assert!(c.add_within(&i.to_le_bytes(), 1024).is_ok());
            i += 1;
        }
        // Fill the sparse form to its limit with the limit still lowered: no add needs it.
        while c.bits_set() < c.geometry().sparse_limit() {
            assert!(c.add_within(&i.to_le_bytes(), 1024).is_ok());
            i += 1;
        }
        assert_eq!(c.mode(), Mode::Sparse);
        let full = c.clone();
        let bytes = bitmap_bytes(c.bits());
        // The next new bit needs the bitmap.
        loop {
            let before = c.clone();
            match c.add_within(&i.to_le_bytes(), 1024) {
                Ok(changed) => assert!(!changed, "an add that sets no bit"),
                Err(e) => {
                    assert_eq!(e, LcError::TooLarge { bytes, limit: 1024 });
                    assert_eq!(c, before, "a refused add changes nothing");
                    break;
                }
            }
            i += 1;
        }
        assert_eq!(c, full);
        // A merge that could need the switch is refused whole, before anything moves.
        let mut other = Counter::reserve(0.01, 100_000, u64::MAX).unwrap();
        other.add(b"x").unwrap();
        other.add(b"y").unwrap();
        let mut dest = full.clone();
        assert!(dest.absorb_within(&other, 1024).is_err());
        assert_eq!(dest, full);
        assert!(dest.absorb_within(&other, bytes).unwrap());
    }

    #[test]
    fn exact_up_to_the_limit_then_sparse_then_dense() {
        let mut c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
        assert_eq!(exact_limit(c.bits()), 267);
        for i in 0..267 {
            assert!(c.add(&item(i)).unwrap());
            assert!(!c.add(&item(i)).unwrap());
            assert_eq!(c.count(), i + 1);
        }
        assert!(c.is_exact());
        assert!(c.add(&item(267)).unwrap());
        assert_eq!(c.mode(), Mode::Sparse);
        assert!((265..=271).contains(&c.count()), "{}", c.count());
        assert!(c.standard_error() > 0.0);
        assert!(!c.saturated());
        let mut i = 268;
        while c.mode() == Mode::Sparse {
            c.add(&item(i)).unwrap();
            i += 1;
        }
        assert_eq!(c.bits_set(), c.geometry().sparse_limit() + 1);
        assert_eq!(c.mode(), Mode::Dense);
    }

    #[test]
    fn empty_counter_counts_zero() {
        let c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
        assert_eq!(c.count(), 0);
        assert_eq!(c.bits_set(), 0);
        assert_eq!(c.standard_error(), 0.0);
        assert!(!c.saturated());
        assert_eq!(c.memory_usage(), 16);
    }

    #[test]
    fn saturation_gives_a_finite_count() {
        let mut c = Counter::reserve(0.01, 100, u64::MAX).unwrap();
        let m = c.bits();
        let mut i = 0;
        while !c.saturated() {
            c.add(&item(i)).unwrap();
            i += 1;
        }
        assert!(c.count() > 5 * m);
        while c.bits_set() < m {
            c.add(&item(i)).unwrap();
            i += 1;
        }
        let top = (m as f64 * (m as f64).ln()).round() as u64;
        assert_eq!(c.count(), top);
        assert!(c.standard_error().is_finite());
    }

    #[test]
    fn union_of_overlapping_counters() {
        let mut a = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
        let mut b = a.clone();
        for i in 0..200 {
            a.add(&item(i)).unwrap();
        }
        for i in 100..300 {
            b.add(&item(i)).unwrap();
        }
        // Both exact: the union count is exact even beyond the exact limit.
        assert_eq!(Counter::union_count(&[&a, &b]).unwrap(), 300);
        let mut u = a.clone();
        assert!(u.absorb(&b).unwrap());
        assert_eq!(u.mode(), Mode::Sparse);
        assert_eq!(u, filled(50_000, 300));
        assert!(!u.absorb(&b).unwrap());
    }

    /// Every pair of modes (and the same items added directly) gives the same union.
    #[test]
    fn unions_across_modes_equal_adding_everything() {
        for (na, nb) in [
            (10, 20),
            (10, 250),
            (200, 3_000),
            (50, 20_000),
            (5_000, 300),
        ] {
            let a = filled(50_000, na);
            let mut b = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            for i in 0..nb {
                b.add(&item(1_000_000 + i)).unwrap();
            }
            let mut all = a.clone();
            for i in 0..nb {
                all.add(&item(1_000_000 + i)).unwrap();
            }
            for (x, y) in [(&a, &b), (&b, &a)] {
                let mut u = x.clone();
                u.absorb(y).unwrap();
                if na + nb <= 267 {
                    assert_eq!(u, all, "{na}+{nb}");
                } else {
                    // Absorbing leaves exact mode; the positions are those of adding all.
                    assert_eq!(
                        u.positions().collect::<Vec<_>>(),
                        all.positions().collect::<Vec<_>>(),
                        "{na}+{nb}"
                    );
                    assert_eq!(u.count(), all.count());
                }
                assert_eq!(Counter::union_count(&[x, y]).unwrap(), all.count());
            }
        }
    }

    #[test]
    fn folding_equals_a_counter_of_the_small_size() {
        let small = Counter::empty(1000, 0.01, 5_000);
        let big = Counter::empty(1000, 0.01, 15_000);
        let (mut s, mut b) = (small.clone(), big.clone());
        for i in 0..5_000 {
            s.add(&item(i)).unwrap();
            b.add(&item(i)).unwrap();
        }
        let mut folded = small.clone();
        folded.absorb(&b).unwrap();
        assert_eq!(folded, s);
        assert_eq!(Counter::union_count(&[&b, &s]).unwrap(), s.count());
        // Sparse and exact sources fold too.
        for n in [10, 300] {
            let (mut s, mut b) = (small.clone(), big.clone());
            for i in 0..n {
                s.add(&item(i)).unwrap();
                b.add(&item(i)).unwrap();
            }
            let mut folded = small.clone();
            folded.absorb(&b).unwrap();
            assert_eq!(
                folded.positions().collect::<Vec<_>>(),
                s.positions().collect::<Vec<_>>()
            );
        }
        // The other way round needs bits that do not exist.
        let mut bb = b.clone();
        assert_eq!(
            bb.absorb(&s),
            Err(LcError::IncompatibleSizes {
                dest: 15_000,
                source: 5_000
            })
        );
        assert_eq!(bb, b);
        let odd = Counter::reserve(0.01, 10_000, u64::MAX).unwrap();
        let mut odd_full = odd.clone();
        for i in 0..1_000 {
            odd_full.add(&item(i)).unwrap();
        }
        assert!(matches!(
            Counter::union_count(&[&odd_full, &s]),
            Err(LcError::IncompatibleSizes { .. })
        ));
    }

    #[test]
    fn exact_counters_of_another_size_merge_as_positions() {
        let mut src = Counter::reserve(0.01, 3_000, u64::MAX).unwrap();
        for i in 0..40 {
            src.add(&item(i)).unwrap();
        }
        assert!(src.is_exact());
        let mut dest = filled(50_000, 20);
        assert!(dest.absorb(&src).unwrap());
        assert_eq!(dest.mode(), Mode::Sparse);
        let direct = filled(50_000, 40);
        assert_eq!(
            dest.positions().collect::<Vec<_>>(),
            direct.positions().collect::<Vec<_>>()
        );
        assert_eq!(
            Counter::union_count(&[&filled(50_000, 20), &src]).unwrap(),
            direct.positions().count() as u64 // sparse estimate of 40 distinct bits ≈ 40
        );
    }

    proptest! {
        #[test]
        fn every_state_is_what_adding_the_set_gives(
            hashes in proptest::collection::vec(any::<u64>(), 0..600),
            m in 64u64..20_000,
        ) {
            let mut lc = Counter::empty(1, 0.5, m);
            let mut direct_bits = std::collections::BTreeSet::new();
            let mut fps = std::collections::BTreeSet::new();
            for &h in &hashes {
                lc.add_hash(h).unwrap();
                direct_bits.insert(reduce(h, m));
                fps.insert(reduce(h, Geometry::new(1, 0.5, m).universe()));
            }
            let g = lc.geometry().clone();
            if fps.len() as u64 <= g.exact_limit {
                prop_assert!(lc.is_exact());
                prop_assert_eq!(lc.count(), fps.len() as u64);
                prop_assert_eq!(lc.fingerprints().unwrap().collect::<Vec<_>>(),
                    fps.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(lc.bits_set(), direct_bits.len() as u64);
            } else {
                let k = direct_bits.len() as u64;
                let expected = Counter::from_positions(1, 0.5, m, k,
                    direct_bits.iter().copied(), u64::MAX).unwrap();
                prop_assert_eq!(lc.mode(), if k <= g.sparse_limit { Mode::Sparse } else { Mode::Dense });
                prop_assert_eq!(&lc, &expected);
                // The dense mode's stored estimate is the estimate of its zero bits.
                prop_assert_eq!(lc.count(), estimate(m, m - k));
            }
            // The order of adds does not matter.
            let mut reversed = Counter::empty(1, 0.5, m);
            for &h in hashes.iter().rev() {
                reversed.add_hash(h).unwrap();
            }
            prop_assert_eq!(&reversed, &lc);
        }

        #[test]
        fn union_is_order_independent(
            a in proptest::collection::vec(any::<u64>(), 0..200),
            b in proptest::collection::vec(any::<u64>(), 0..200),
        ) {
            let mut x = Counter::empty(1, 0.5, 6_400);
            let mut y = x.clone();
            let mut all = x.clone();
            for &h in &a { x.add_hash(h).unwrap(); all.add_hash(h).unwrap(); }
            for &h in &b { y.add_hash(h).unwrap(); all.add_hash(h).unwrap(); }
            let mut xy = x.clone();
            xy.absorb(&y).unwrap();
            let mut yx = y.clone();
            yx.absorb(&x).unwrap();
            prop_assert_eq!(&xy, &yx);
            prop_assert_eq!(xy.positions().collect::<Vec<_>>(), all.positions().collect::<Vec<_>>());
            if !xy.is_exact() {
                prop_assert_eq!(xy.count(), estimate(6_400, 6_400 - xy.bits_set()));
            }
            if all.is_exact() {
                prop_assert_eq!(&xy, &all);
            }
        }
    }

    /// ≥ 200 counters at 0.01/50,000, each given 50,000 distinct random strings (10M items):
    /// RMSE of count/n − 1 ≤ 1.10 %, mean bias within ±0.2 %. Fixed seed.
    #[test]
    #[cfg_attr(debug_assertions, ignore = "10M hashes: run with --release")]
    fn accuracy_at_capacity() {
        let counters = 200;
        let n = 50_000u64;
        let mut rng = 0x05ee_d1c0_u64;
        let (mut sum, mut sum_sq) = (0.0, 0.0);
        for _ in 0..counters {
            let mut c = Counter::reserve(0.01, n, u64::MAX).unwrap();
            // Distinct strings: a random 64-bit prefix per counter, then the index.
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            for i in 0..n {
                c.add(format!("{rng:016x}:{i}").as_bytes()).unwrap();
            }
            let rel = c.count() as f64 / n as f64 - 1.0;
            sum += rel;
            sum_sq += rel * rel;
        }
        let bias = sum / counters as f64;
        let rmse = (sum_sq / counters as f64).sqrt();
        println!(
            "accuracy at capacity: RMSE {:.3}%, bias {:+.3}%",
            rmse * 100.0,
            bias * 100.0
        );
        assert!(rmse <= 0.011, "RMSE {rmse}");
        assert!(bias.abs() <= 0.002, "bias {bias}");
    }
}
