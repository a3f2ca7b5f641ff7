//! One fixed-size Bloom filter: its bits, its probes and the math that sizes it.
//!
//! A filter has a capacity n, a target error rate p, m bits (u64 words, `words.rs`: word w
//! holds bits 64w..64w+63, bit 0 in the least significant position), k hashes and a layout.
//! In the standard layout an item's probes are `reduce(hash.probe(i), m)` for i in 0..k (see
//! `hashing.rs`); the blocked layout puts them all in one 64-byte block and has its own
//! derivation and sizing (`blocked.rs`). The item is hashed once by the caller and the same
//! `ItemHash` serves every filter of a chain. Everything below about sizing is the standard
//! layout's.
//!
//! Sizing. The textbook optimum is m_opt = ⌈-n·ln p / ln²2⌉ bits with k = (m/n)·ln 2 hashes,
//! where the false-positive rate after n items is FP ≈ (1 - e^{-kn/m})^k = p. Two things make
//! that formula miss p in practice, and both are handled here:
//! * k must be an integer. We try the integers around (m/n)·ln 2 and keep the best.
//! * The formula is the FP of the *expected* fill. The real FP is E[(X/m)^k], where X is the
//!   number of distinct bits set by the T = n·k probes; by Jensen it is larger, and much larger
//!   for small m (a filter reserved at capacity 1 or 10, or the first links of a chain).
//!   - For m ≤ `EXACT_MAX_BITS` we compute E[(X/m)^k] exactly: a dynamic program over T
//!     throws gives the distribution of X (a throw hits a set bit with probability x/m), with
//!     negligible tails (< 1e-25, against rates ≥ 1e-15) pruned so the cost is O(T·√m).
//!   - Above it, a second-order expansion is exact to far below p:
//!     E[(X/m)^k] ≈ q^k·(1 + C(k,2)·Var(X)/(m·q)²), with q = 1 - (1-1/m)^T and
//!     Var(X) ≈ m·e^{-t}·(1 - (1+t)·e^{-t}), t = T/m.
//!
//!   We start at m_opt and grow m in small steps (0.05% of m, at least one bit) until the
//!   expansion's FP at n items is ≤ p, then, for small filters, until the exact FP is. For large filters this stays within 1% of m_opt (a unit test checks
//!   many (n, p)); small filters take what exactness needs.
//! * Fewer probes. Near the optimum the rate hardly depends on k: one hash fewer than the best
//!   integer costs a fraction of a percent of bits (0.3% at p = 0.0095, k 7 → 6), and saves a
//!   cache miss of every add and every lookup of a member in a large filter (a seventh of them
//!   there). So the size is the smallest m for the fewest hashes whose m stays within
//!   `FEWER_PROBES_TOLERANCE` of the smallest m of any k. The chosen k is in the encoding, so
//!   filters sized by another rule load as they were.
//!
//! Memory is allocated zeroed and fallibly: a filter that cannot be allocated is an error, never
//! an abort. Bits past m in the last word are always zero (the codec checks it on load), so the
//! words are a canonical representation of the filter.

use super::blocked;
pub use super::fp::SizeError;
use super::fp::{best_hashes, fp_with, MAX_BITS, MAX_HASHES};
use super::words::{View, ViewMut, WordRead, WordWrite, Words};
use crate::core::batch::{self, prefetch_line};
use crate::core::defrag::Defrag;
use crate::core::hashing::{reduce, ItemHash};
use std::ops::Range;
use std::sync::Mutex;

/// Smallest error rate a filter may be sized for: below it the bits per item become absurd and
/// f64 arithmetic loses meaning (valkey-bloom aborts when its rates underflow to zero).
pub const MIN_ERROR_RATE: f64 = 1e-15;
/// How many more bits (a fraction of the smallest size) a standard filter may take to use a
/// hash fewer (see the header).
const FEWER_PROBES_TOLERANCE: f64 = 0.005;
/// Where an item's probes fall: anywhere in the array (the textbook filter, RedisBloom's), or
/// all in one 64-byte block chosen by the hash (`blocked.rs`: one cache miss per item instead
/// of k, for some more bits). Every sub-filter of a chain has the chain's layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    #[default]
    Standard,
    Blocked,
}

impl Layout {
    /// The name in `BF.INFO`, `INFO lcbloom`, the `BLOCKED` keyword's docs and the config.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Standard => "standard",
            Layout::Blocked => "blocked",
        }
    }
}

/// The parameters of one filter, as stored in its encoding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterParams {
    pub capacity: u64,
    pub error_rate: f64,
    pub bits: u64,
    pub hashes: u32,
    pub layout: Layout,
}

impl FilterParams {
    /// The smallest standard-layout filter that holds `capacity` items at an expected FP rate
    /// ≤ `error_rate`.
    pub fn for_capacity(capacity: u64, error_rate: f64) -> Result<Self, SizeError> {
        Self::for_layout(Layout::Standard, capacity, error_rate)
    }

    /// The smallest filter of `layout` that holds `capacity` items at an expected FP rate
    /// ≤ `error_rate`.
    ///
    /// Sizing a small filter exactly takes up to a few milliseconds, and most filters share
    /// their parameters (every key created with the defaults, and its scale-outs), so recent
    /// results are remembered: a small direct-mapped cache, which changes nothing but speed.
    pub fn for_layout(layout: Layout, capacity: u64, error_rate: f64) -> Result<Self, SizeError> {
        static CACHE: Mutex<[Option<FilterParams>; 64]> = Mutex::new([None; 64]);
        let capacity = capacity.max(1);
        let slot = ((capacity ^ error_rate.to_bits().rotate_left(29) ^ layout as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> 58) as usize;
        let same = |p: &FilterParams| {
            p.capacity == capacity
                && p.error_rate.to_bits() == error_rate.to_bits()
                && p.layout == layout
        };
        if let Some(hit) = CACHE.lock().ok().and_then(|c| c[slot].filter(same)) {
            return Ok(hit);
        }
        let params = match layout {
            Layout::Standard => Self::size(capacity, error_rate)?,
            Layout::Blocked => {
                if !(MIN_ERROR_RATE..1.0).contains(&error_rate) {
                    return Err(SizeError::ErrorRate);
                }
                let (bits, hashes) = blocked::size(capacity, error_rate)?;
                Self {
                    capacity,
                    error_rate,
                    bits,
                    hashes,
                    layout,
                }
            }
        };
        if let Ok(mut cache) = CACHE.lock() {
            cache[slot] = Some(params);
        }
        Ok(params)
    }

    fn size(capacity: u64, error_rate: f64) -> Result<Self, SizeError> {
        if !(MIN_ERROR_RATE..1.0).contains(&error_rate) {
            return Err(SizeError::ErrorRate);
        }
        let n = capacity as f64;
        let ln2 = std::f64::consts::LN_2;
        let m_opt = (-n * error_rate.ln() / (ln2 * ln2)).ceil();
        if m_opt.is_nan() || m_opt >= MAX_BITS as f64 {
            return Err(SizeError::TooLarge);
        }
        let mut bits = (m_opt as u64).max(1);
        let step = (bits / 2048).max(1);
        // The expansion is cheap and close to exact: it finds the size, and the exact check
        // (for small filters) then rarely needs more than a step or two.
        let mut hashes = 1;
        for exact in [false, true] {
            loop {
                let fp;
                (hashes, fp) = best_hashes(n, bits, exact);
                if fp <= error_rate {
                    break;
                }
                bits = bits
                    .checked_add(step)
                    .filter(|b| *b <= MAX_BITS)
                    .ok_or(SizeError::TooLarge)?;
            }
        }
        // The rate falls as m grows: each k has a smallest m, found by bisection.
        let most_bits = ((bits as f64 * (1.0 + FEWER_PROBES_TOLERANCE)) as u64).min(MAX_BITS);
        while hashes > 1 && fp_with(n, most_bits, hashes - 1) <= error_rate {
            let (mut low, mut high) = (bits, most_bits);
            while low < high {
                let mid = low + (high - low) / 2;
                match fp_with(n, mid, hashes - 1) <= error_rate {
                    true => high = mid,
                    false => low = mid + 1,
                }
            }
            (bits, hashes) = (high, hashes - 1);
        }
        Ok(Self {
            capacity,
            error_rate,
            bits,
            hashes,
            layout: Layout::Standard,
        })
    }

    /// 64-bit words holding the bits.
    pub fn words(&self) -> u64 {
        self.bits.div_ceil(64)
    }

    /// Bytes of the bit array.
    pub fn bytes(&self) -> u64 {
        self.words() * 8
    }

    /// Whether these parameters are sane enough to allocate and probe with.
    pub fn is_valid(&self) -> bool {
        self.capacity >= 1
            && self.error_rate > 0.0
            && self.error_rate < 1.0
            && (1..=MAX_BITS).contains(&self.bits)
            && (1..=MAX_HASHES).contains(&self.hashes)
            && (self.layout == Layout::Standard || self.bits.is_multiple_of(blocked::BLOCK_BITS))
    }
}

/// The bits of one bit-array sub-filter; its parameters are the chain's (shared by every key
/// created alike, `chain.rs`), so every method takes them. Large arrays are held in segments
/// (`words.rs`): each lookup picks the slice or the segments' code once, then probes.
#[derive(Clone, Debug, PartialEq)]
pub struct BitArray {
    words: Words,
}

impl BitArray {
    /// An empty bit array; allocated zeroed and fallibly.
    pub fn new(params: &FilterParams) -> Result<Self, SizeError> {
        if !params.is_valid() {
            return Err(SizeError::TooLarge);
        }
        let len = usize::try_from(params.words()).map_err(|_| SizeError::TooLarge)?;
        let align = match params.layout {
            Layout::Standard => 8,
            Layout::Blocked => blocked::BLOCK_BYTES,
        };
        let words = Words::zeroed(len, align).ok_or(SizeError::OutOfMemory)?;
        Ok(Self { words })
    }

    /// A deep copy, allocated fallibly.
    pub fn try_clone(&self) -> Result<Self, SizeError> {
        Ok(Self {
            words: self.words.try_clone().ok_or(SizeError::OutOfMemory)?,
        })
    }

    #[inline]
    pub fn contains(&self, params: &FilterParams, hash: &ItemHash) -> bool {
        match self.words.view() {
            View::One(words) => contains_in(words, params, hash),
            View::Segments(words) => contains_in(&words, params, hash),
        }
    }

    /// Sets the item's bits in one pass; whether any was zero (if none was, the item was
    /// probably present and nothing changed). Same answer as `contains` then setting, with
    /// half the probes.
    #[inline]
    pub fn set(&mut self, params: &FilterParams, hash: &ItemHash) -> bool {
        match self.words.view_mut() {
            ViewMut::One(words) => set_one_in(words, params, hash),
            ViewMut::Segments(mut words) => set_one_in(&mut words, params, hash),
        }
    }

    /// `set` for each item in order, passing each result to `done`; a large array's lines
    /// are prefetched a window at a time (`core::batch`). How many items were new.
    pub fn set_batch(
        &mut self,
        params: &FilterParams,
        hashes: &[ItemHash],
        mut done: impl FnMut(bool),
    ) -> u64 {
        match self.words.view_mut() {
            ViewMut::One(words) => set_batch_in(words, params, hashes, &mut done),
            ViewMut::Segments(mut words) => set_batch_in(&mut words, params, hashes, &mut done),
        }
    }

    /// `contains` for each item in order; a large array's lookups go in the two rounds of
    /// `core::batch::lookups` (the first probe's line of every item of a window, then the
    /// other probes of the items that passed it).
    pub fn contains_batch(
        &self,
        params: &FilterParams,
        hashes: &[ItemHash],
        mut done: impl FnMut(bool),
    ) {
        match self.words.view() {
            View::One(words) => contains_batch_in(words, params, hashes, &mut done),
            View::Segments(words) => contains_batch_in(&words, params, hashes, &mut done),
        }
    }

    /// Asks the CPU to start loading the cache lines of the item's probes `probes` (a blocked
    /// filter has one line, fetched for any range that holds probe 0): the batches of a chain
    /// of several sub-filters prefetch a window of items this way, and a lookup in a filter
    /// that does not hold the item usually stops after one or two probes.
    #[inline]
    pub fn prefetch_probes(&self, params: &FilterParams, hash: &ItemHash, probes: Range<u32>) {
        match self.words.view() {
            View::One(words) => prefetch_in(words, params, hash, probes),
            View::Segments(words) => prefetch_in(&words, params, hash, probes),
        }
    }

    /// Whether probe 0 of the item is set: a test every item the array holds passes, on one
    /// line (a blocked filter's whole lookup).
    #[inline]
    pub fn first_probe(&self, params: &FilterParams, hash: &ItemHash) -> bool {
        match self.words.view() {
            View::One(words) => first_in(words, params, hash),
            View::Segments(words) => first_in(&words, params, hash),
        }
    }

    /// Bytes the allocator hands out for the bits.
    pub fn memory_bytes(&self) -> u64 {
        self.words.memory_bytes()
    }

    /// Visits the bits' blocks for defragmentation (`core::defrag`).
    pub fn defrag(&mut self, d: &mut Defrag) {
        self.words.defrag(d)
    }

    /// Appends bytes `start..start + len` of the bit array (its encoding: little-endian words,
    /// bits past m zero); the range lies within its `FilterParams::bytes`.
    pub fn read_bytes(&self, start: usize, len: usize, out: &mut Vec<u8>) {
        self.words.read_bytes(start, len, out)
    }

    /// The same bytes borrowed from the bits' memory, when it holds them in one piece.
    pub fn borrow_bytes(&self, start: usize, len: usize) -> Option<&[u8]> {
        self.words.borrow_bytes(start, len)
    }

    /// Whether the bits are more than one allocation (`Words::is_segmented`).
    pub fn is_segmented(&self) -> bool {
        self.words.is_segmented()
    }

    /// The rest of the allocation holding byte `start`, borrowed (`Words::rest_of_piece`).
    pub fn rest_of_piece(&self, start: usize) -> Option<&[u8]> {
        self.words.rest_of_piece(start)
    }

    /// Writes `src` at byte offset `start`, for loading; the caller keeps the bits past m zero
    /// (see `padding_mask`).
    pub fn write_bytes(&mut self, start: usize, src: &[u8]) {
        self.words.write_bytes(start, src)
    }

    /// `Words::adopt`: takes over a block holding bytes `start..start + bytes`, for loading;
    /// the caller keeps the bits past m zero.
    ///
    /// # Safety
    /// As `Words::adopt`.
    pub unsafe fn adopt(
        &mut self,
        start: usize,
        block: std::ptr::NonNull<u8>,
        bytes: usize,
    ) -> Result<(), std::ptr::NonNull<u8>> {
        // SAFETY: the caller's contract is the callee's.
        unsafe { self.words.adopt(start, block, bytes) }
    }
}

/// The standard layout's bit positions of the item's probes `probes` (those below k).
#[inline(always)]
fn positions<'a>(
    params: &FilterParams,
    hash: &'a ItemHash,
    probes: Range<u32>,
) -> impl Iterator<Item = u64> + 'a {
    let m = params.bits;
    (probes.start..probes.end.min(params.hashes)).map(move |i| reduce(hash.probe(i), m))
}

/// Panics unless the words hold m bits: then every position below m is in range.
#[inline(always)]
fn check_len<W: WordRead + ?Sized>(words: &W, m: u64) {
    assert!(
        m.div_ceil(64) <= words.words() as u64,
        "bit array shorter than its parameters"
    );
}

/// Sets the bits at `positions`; whether any was zero.
///
/// # Safety
/// Every position is below 64 · `words.words()`.
#[inline(always)]
unsafe fn set_bits<W: WordWrite + ?Sized>(
    words: &mut W,
    positions: impl Iterator<Item = u64>,
) -> bool {
    let mut changed = 0;
    for bit in positions {
        // SAFETY: the caller's contract.
        let word = unsafe { words.word_mut_unchecked((bit / 64) as usize) };
        let mask = 1 << (bit % 64);
        changed |= !*word & mask;
        *word |= mask;
    }
    changed != 0
}

/// Whether the bits at `positions` are all set.
///
/// # Safety
/// As `set_bits`.
#[inline(always)]
unsafe fn all_set<W: WordRead + ?Sized>(
    words: &W,
    mut positions: impl Iterator<Item = u64>,
) -> bool {
    positions.all(|bit| {
        // SAFETY: the caller's contract.
        let word = unsafe { words.word_unchecked((bit / 64) as usize) };
        word & (1 << (bit % 64)) != 0
    })
}

/// Asks for the line of bit position `bit`.
///
/// # Safety
/// As `set_bits`.
#[inline(always)]
unsafe fn prefetch_bit<W: WordRead + ?Sized>(words: &W, bit: u64) {
    // SAFETY: the caller's contract.
    prefetch_line(unsafe { words.word_ptr_unchecked((bit / 64) as usize) });
}

#[inline(always)]
fn contains_in<W: WordRead + ?Sized>(words: &W, params: &FilterParams, hash: &ItemHash) -> bool {
    if params.layout == Layout::Blocked {
        return blocked::contains(words, hash, params.hashes);
    }
    probes_set(words, params, hash, 0..params.hashes)
}

#[inline(always)]
fn set_in<W: WordWrite + ?Sized>(words: &mut W, params: &FilterParams, hash: &ItemHash) -> bool {
    if params.layout == Layout::Blocked {
        return blocked::set(words, hash, params.hashes);
    }
    check_len(words, params.bits);
    // SAFETY: positions are below m (`reduce`), which the words hold (`check_len`).
    unsafe { set_bits(words, positions(params, hash, 0..params.hashes)) }
}

/// `set_in` for one item. In a large standard array every line is asked for before the first
/// is written, so that the item's misses overlap: without it a single `BF.ADD` on a 0.001 /
/// 200M filter (11 lines) took 0.63 µs against 0.50 (AMD EPYC). A blocked item's one line has
/// nothing to overlap with.
#[inline(always)]
fn set_one_in<W: WordWrite + ?Sized>(
    words: &mut W,
    params: &FilterParams,
    hash: &ItemHash,
) -> bool {
    if params.layout == Layout::Standard && params.prefetched() {
        // Positions kept on the stack for up to 24 probes (rates down to 10^-7); zeroing room
        // for all 64 cost more than computing the positions again.
        let mut at = [0u64; 24];
        if let Some(at) = at.get_mut(..params.hashes as usize) {
            locate_in(words, params, hash, 0..params.hashes, at);
            // SAFETY: positions from `locate_in`, below m, which the words hold (it checks).
            return unsafe { set_bits(words, at.iter().copied()) };
        }
        prefetch_in(words, params, hash, 0..params.hashes);
    }
    set_in(words, params, hash)
}

#[inline(always)]
fn set_batch_in<W: WordWrite + ?Sized>(
    words: &mut W,
    params: &FilterParams,
    hashes: &[ItemHash],
    done: &mut impl FnMut(bool),
) -> u64 {
    let mut added = 0;
    let mut count = |new: bool| {
        added += u64::from(new);
        done(new);
        true
    };
    match (params.prefetched(), params.layout) {
        (true, Layout::Standard) => {
            let k = params.hashes;
            let locate = |words: &W, hash: &ItemHash, at: &mut [u64]| {
                locate_in(words, params, hash, 0..k, at)
            };
            check_len(words, params.bits);
            // SAFETY: `in_windows_located` hands `set` only what `locate_in` wrote (positions
            // below m) or zeros, and the words hold m bits (`check_len`).
            let set =
                |words: &mut W, at: &[u64]| count(unsafe { set_bits(words, at.iter().copied()) });
            batch::in_windows_located(hashes, k as usize, words, locate, set);
        }
        (true, Layout::Blocked) => {
            let prefetch = |words: &W, hash: &ItemHash| blocked::prefetch(words, hash);
            let set = |words: &mut W, hash: &ItemHash| count(set_in(words, params, hash));
            batch::in_windows(hashes, 1, words, prefetch, set);
        }
        (false, _) => hashes.iter().for_each(|hash| {
            count(set_in(words, params, hash));
        }),
    }
    added
}

#[inline(always)]
fn contains_batch_in<W: WordRead + ?Sized>(
    words: &W,
    params: &FilterParams,
    hashes: &[ItemHash],
    done: &mut impl FnMut(bool),
) {
    if params.prefetched() && params.layout == Layout::Blocked {
        // One line an item, its first test the whole lookup: one round.
        let prefetch = |words: &&W, hash: &ItemHash| blocked::prefetch(*words, hash);
        let touch = |words: &mut &W, hash: &ItemHash| {
            done(blocked::contains(*words, hash, params.hashes));
            true
        };
        batch::in_windows(hashes, 1, &mut &*words, prefetch, touch);
    } else if params.prefetched() {
        // Standard: a non-member is usually refused by its first probe's line.
        check_len(words, params.bits);
        batch::lookups(&Probes { words, params }, hashes, done);
    } else {
        hashes
            .iter()
            .for_each(|hash| done(contains_in(words, params, hash)));
    }
}

/// A standard bit array's lookup in `batch::lookups`' two rounds: probe 0, then the others.
struct Probes<'a, W: ?Sized> {
    words: &'a W,
    params: &'a FilterParams,
}

impl<W: WordRead + ?Sized> batch::Lookup<ItemHash> for Probes<'_, W> {
    #[inline(always)]
    fn rest_lines(&self) -> usize {
        self.params.lines() - 1
    }

    #[inline(always)]
    fn rest_positions(&self) -> usize {
        self.params.hashes as usize - 1
    }

    #[inline(always)]
    fn locate_first(&self, hash: &ItemHash) -> u64 {
        let mut at = [0];
        locate_in(self.words, self.params, hash, 0..1, &mut at);
        at[0]
    }

    #[inline(always)]
    fn first(&self, _: &ItemHash, at: u64) -> bool {
        // SAFETY: `lookups` hands over only what `locate_first` wrote (a position below m) or
        // zero, and the words hold m bits (checked by `contains_batch_in`).
        unsafe { all_set(self.words, [at].into_iter()) }
    }

    #[inline(always)]
    fn locate_rest(&self, hash: &ItemHash, at: &mut [u64]) {
        locate_in(self.words, self.params, hash, 1..self.params.hashes, at)
    }

    #[inline(always)]
    fn rest(&self, _: &ItemHash, at: &[u64]) -> bool {
        // SAFETY: as in `first`.
        unsafe { all_set(self.words, at.iter().copied()) }
    }
}

/// Writes the positions of the standard layout's probes `probes` of the item into `at` (one
/// each) and asks for their lines: a batch computes a probe once for its prefetch and its test.
#[inline(always)]
fn locate_in<W: WordRead + ?Sized>(
    words: &W,
    params: &FilterParams,
    hash: &ItemHash,
    probes: Range<u32>,
    at: &mut [u64],
) {
    check_len(words, params.bits);
    let m = params.bits;
    let first = probes.start;
    let at = &mut at[..probes.end.min(params.hashes).saturating_sub(first) as usize];
    for (i, at) in at.iter_mut().enumerate() {
        let bit = reduce(hash.probe(first + i as u32), m);
        *at = bit;
        // SAFETY: bit < m (`reduce`), which the words hold (`check_len`).
        unsafe { prefetch_bit(words, bit) };
    }
}

/// Whether the standard layout's probes `probes` of the item are all set.
#[inline(always)]
fn probes_set<W: WordRead + ?Sized>(
    words: &W,
    params: &FilterParams,
    hash: &ItemHash,
    probes: Range<u32>,
) -> bool {
    check_len(words, params.bits);
    // SAFETY: as in `set_in`.
    unsafe { all_set(words, positions(params, hash, probes)) }
}

#[inline(always)]
fn first_in<W: WordRead + ?Sized>(words: &W, params: &FilterParams, hash: &ItemHash) -> bool {
    match params.layout {
        Layout::Blocked => blocked::contains(words, hash, params.hashes),
        Layout::Standard => probes_set(words, params, hash, 0..1),
    }
}

#[inline(always)]
fn prefetch_in<W: WordRead + ?Sized>(
    words: &W,
    params: &FilterParams,
    hash: &ItemHash,
    probes: Range<u32>,
) {
    if params.layout == Layout::Blocked {
        if probes.start == 0 && !probes.is_empty() {
            blocked::prefetch(words, hash);
        }
        return;
    }
    check_len(words, params.bits);
    // SAFETY: as in `set_in`.
    positions(params, hash, probes).for_each(|bit| unsafe { prefetch_bit(words, bit) });
}

impl FilterParams {
    /// Whether batches prefetch this array's lines (it is too large to stay cached).
    #[inline]
    pub fn prefetched(&self) -> bool {
        self.bytes() >= batch::PREFETCH_MIN_BYTES
    }

    /// Cache lines an add touches: one per probe, one block in the blocked layout.
    #[inline]
    pub fn lines(&self) -> usize {
        match self.layout {
            Layout::Standard => self.hashes as usize,
            Layout::Blocked => 1,
        }
    }

    /// The bits of the last word that lie past m and must stay zero.
    pub fn padding_mask(&self) -> u64 {
        match self.bits % 64 {
            0 => 0,
            used => !0u64 << used,
        }
    }
}

/// Test support: a bit array of `params` holding `n` items (each checked present), and its
/// false-positive rate measured over `probes` other items.
#[cfg(test)]
pub(crate) fn measured_fp(params: &FilterParams, n: u64, probes: u32) -> (BitArray, f64) {
    use crate::core::hashing::hash_item;
    let member = |i: u64| hash_item(format!("member:{i}").as_bytes());
    let mut f = BitArray::new(params).unwrap();
    (0..n).for_each(|i| {
        f.set(params, &member(i));
    });
    assert!((0..n).all(|i| f.contains(params, &member(i))));
    let hits = (0..probes)
        .filter(|i| f.contains(params, &hash_item(format!("other:{i}").as_bytes())))
        .count();
    (f, hits as f64 / probes as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::fp::{approx_fp, exact_fp};
    use crate::core::hashing::hash_item;

    fn m_opt(n: u64, p: f64) -> f64 {
        (-(n as f64) * p.ln() / (std::f64::consts::LN_2.powi(2))).ceil()
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn large_filters_stay_within_one_percent_of_optimal() {
        for &p in &[0.5, 0.1, 0.05, 0.01, 0.003, 0.001, 1e-4, 1e-6, 1e-9, 1e-12] {
            for &n in &[
                1_000u64,
                5_000,
                20_000,
                100_000,
                1_000_000,
                1 << 30,
                1 << 40,
            ] {
                let f = FilterParams::for_capacity(n, p).unwrap();
                let opt = m_opt(n, p);
                assert!(
                    f.bits as f64 <= opt * 1.01 + 64.0,
                    "n={n} p={p}: {} bits vs optimal {opt}",
                    f.bits
                );
                assert!(f.bits as f64 >= opt);
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn small_filters_honour_the_rate_exactly() {
        for &p in &[0.1, 0.01, 0.001] {
            for n in [1u64, 2, 3, 10, 50, 100, 400] {
                let f = FilterParams::for_capacity(n, p).unwrap();
                let fp = exact_fp(n, f.bits, f.hashes, f.hashes)[0].1;
                assert!(fp <= p, "n={n} p={p} fp={fp}");
                // The textbook formula alone is too optimistic for tiny filters.
                assert!(f.bits as f64 >= m_opt(n, p));
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn exact_and_approximate_agree_for_large_filters() {
        for (n, bits, k) in [(1000u64, 9586u64, 7u32), (800, 8000, 6), (400, 8100, 14)] {
            let exact = exact_fp(n, bits, k, k)[0].1;
            let approx = approx_fp(n as f64, bits, k);
            assert!((exact / approx - 1.0).abs() < 1e-3, "{exact} vs {approx}");
        }
    }

    #[test]
    fn exact_fp_of_one_item_one_hash() {
        // One probe into m bits sets one bit; a query hits it with probability 1/m.
        let fp = exact_fp(1, 10, 1, 1)[0].1;
        assert!((fp - 0.1).abs() < 1e-12);
    }

    #[test]
    fn refuses_absurd_sizes() {
        assert_eq!(
            FilterParams::for_capacity(10, 1e-16),
            Err(SizeError::ErrorRate)
        );
        assert_eq!(
            FilterParams::for_capacity(10, 1.0),
            Err(SizeError::ErrorRate)
        );
        assert_eq!(
            FilterParams::for_capacity(u64::MAX, 0.01),
            Err(SizeError::TooLarge)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn set_answers_as_contains() {
        // A small, overfilled filter so that "probably present" answers happen often, and
        // large arrays (a single add prefetches its lines first, its positions kept on the
        // stack for up to 24 probes, computed twice beyond) with every item added twice.
        let small = FilterParams::for_capacity(50, 0.1).unwrap();
        let large = FilterParams::for_capacity(1_000_000, 0.01).unwrap();
        let many_probes = FilterParams::for_capacity(300_000, 1e-9).unwrap();
        assert!(large.prefetched() && large.hashes <= 24);
        assert!(many_probes.prefetched() && many_probes.hashes > 24);
        for (params, items) in [(small, 400u32), (large, 3000), (many_probes, 3000)] {
            let (mut a, mut b) = (
                BitArray::new(&params).unwrap(),
                BitArray::new(&params).unwrap(),
            );
            let mut present = 0;
            for i in (0..items).chain(0..items) {
                let h = hash_item(&i.to_le_bytes());
                let absent = !a.contains(&params, &h);
                if absent {
                    a.set(&params, &h);
                } else {
                    present += 1;
                }
                assert_eq!(b.set(&params, &h), absent);
                b.prefetch_probes(&params, &h, 0..params.hashes);
            }
            assert_eq!(a, b);
            assert!(present >= items);
        }
    }

    proptest::proptest! {
        /// Unit tests hold arrays above 64 words in 512-byte segments (`words.rs`): answers
        /// and bytes are those of the same probes on one slice.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn segments_answer_and_encode_as_one_slice(
            blocked: bool,
            capacity in 1u64..3_000,
            rate in proptest::sample::select(vec![0.1, 0.01, 0.001]),
            items in 0u32..2_000,
            seed: u32,
        ) {
            let layout = if blocked { Layout::Blocked } else { Layout::Standard };
            let params = FilterParams::for_layout(layout, capacity, rate).unwrap();
            let mut array = BitArray::new(&params).unwrap();
            let mut slice = vec![0u64; params.words() as usize];
            let item = |i: u32| hash_item(format!("{seed}:{i}").as_bytes());
            for i in 0..items {
                let h = item(i);
                array.prefetch_probes(&params, &h, 0..params.hashes);
                proptest::prop_assert_eq!(array.set(&params, &h), set_in(&mut slice[..], &params, &h));
            }
            for i in 0..items * 2 {
                let h = item(i);
                proptest::prop_assert_eq!(array.contains(&params, &h), contains_in(&slice[..], &params, &h));
            }
            let bytes = params.bytes() as usize;
            let (mut a, mut b) = (Vec::new(), Vec::new());
            array.read_bytes(0, bytes, &mut a);
            crate::core::chunks::words_to_bytes(&slice, 0, bytes, &mut b);
            proptest::prop_assert_eq!(&a, &b);
            proptest::prop_assert_eq!(&array.try_clone().unwrap(), &array);
            // Loading the bytes gives the same filter back.
            let mut loaded = BitArray::new(&params).unwrap();
            loaded.write_bytes(0, &a);
            proptest::prop_assert_eq!(&loaded, &array);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn measured_fp_matches_the_target() {
        let params = FilterParams::for_capacity(10_000, 0.01).unwrap();
        let (f, fp) = measured_fp(&params, 10_000, 200_000);
        assert!(fp < 0.0115, "fp {fp}");
        let mut last = Vec::new();
        f.read_bytes(params.bytes() as usize - 8, 8, &mut last);
        let last = u64::from_le_bytes(last.try_into().unwrap());
        assert_eq!(last & params.padding_mask(), 0);
    }
}
