//! Unions of sketches (levels.rs) and exact sets: every pair combines, whatever its capacity,
//! error rate or mode. Both sides are seen as indicators at the smaller of their precisions
//! (a larger one reduced: levels.rs, "Items as tokens"), the union is the set of both sides'
//! indicators, and its estimate is the maximum-likelihood one (its running estimate restarts
//! from there). Reducing tokens is exact. Registers of a larger precision are kept at their
//! own: the estimate takes what each knows at its resolution (precisions.rs). Exact sets of
//! several sizes, while they list few items in all, are counted exactly from the hash
//! intervals their fingerprints stand for (intervals.rs), and a merge of them
//! is their sketch counting that.
//!
//! A union never counts fewer than its largest key: one holding nothing beyond that key
//! counts as it does, and any other takes the larger of its estimate and that key's count.
//! The two are estimates of different sets, the union's the larger, so the union's error
//! alone could otherwise put a day's rollup below one of its keys.

use super::collect::{union_packed, LevelBits};
use super::counter::{Counter, LcError};
use super::exact::{merge_missing, missing_from};
use super::geometry::{token_limit, token_universe};
use super::header::{Mode, SKETCH_REGISTERS, SKETCH_STREAM};
use super::intervals::distinct_across_sizes;
use super::levels::{
    forgotten_levels, ml_estimate, reduced_level, registers_counts, union, weight, SetCounts,
    MAX_PRECISION,
};
use super::precisions::{add_known_set, resolve, Evidence, Finer};
use super::registers::{read_register, registers_block_with};
use super::running::Running;
use super::tokens::{registers_from_tokens, token_value, tokens_block};
use crate::core::alloc::zeroed;
use crate::core::block::Block;
#[cfg(target_arch = "x86_64")]
use crate::core::ef_chunks;
use std::cmp::Reverse;

/// How a union counts, from its largest key's count (`Counter::union_count_of`).
enum UnionCount {
    /// Exactly this: its largest key's count when the union holds nothing beyond it, or
    /// what `LC.COUNT` of an empty destination's sources counts (`absorb_sorting_at_most`).
    Exactly(u64),
    /// Its estimate, and at least its largest key's count.
    AtLeast(u64),
}

impl UnionCount {
    /// The count of a union of these `indicators` at precision `p`.
    fn of(&self, indicators: &Indicators, p: u32) -> u64 {
        match *self {
            UnionCount::Exactly(count) => count,
            UnionCount::AtLeast(count) => at_least(Counter::estimate_of(indicators, p).0, count),
        }
    }
}

/// A union's count: its estimate, or its largest key's count where that is larger.
fn at_least(estimate: f64, largest: u64) -> u64 {
    (estimate.round() as u64).max(largest)
}

/// Indicator `(index, level)` of precision `from` seen at precision `to ≤ from`.
#[inline]
pub(super) fn reduce_indicator(mut index: u64, mut level: u64, from: u32, to: u32) -> (u64, u64) {
    for _ in to..from {
        level = reduced_level(level, index & 1);
        index >>= 1;
    }
    (index, level)
}

/// How many token lists' worth of tokens a many-key count sorts at most (see
/// `sketch_union_count`); likewise the fingerprints of exact counters it counts exactly (see
/// `exact_union_count`).
const SORTED_UNION: u64 = 8;

/// `spread`'s two multipliers.
const SPREAD_MULTIPLIERS: [u64; 2] = [0xbf58_476d_1ce4_e5b9, 0x94d0_49bb_1331_11eb];

/// A fingerprint spread over 64 bits (splitmix64's finalizer, a bijection): fingerprints are
/// uniform below the universe, their spread uniform over all 64 bits, as a hash is.
#[inline(always)]
fn spread(f: u64) -> u64 {
    let f = (f ^ (f >> 30)).wrapping_mul(SPREAD_MULTIPLIERS[0]);
    let f = (f ^ (f >> 27)).wrapping_mul(SPREAD_MULTIPLIERS[1]);
    f ^ (f >> 31)
}

/// The most fingerprints a merge of exact counters of one size sorts to find the distinct
/// ones (128 MiB of them: 0.55 s for 1.6·10^7 on AMD EPYC, where twice as many took 1.27 s).
/// Counters of a large capacity, exact up to 8,192 items, could list far more; past this many,
/// only a union within the exact limit is gathered (`distinct_within`), and a larger one is a
/// sketch union, its count the estimate.
const SORTED_MERGE: u64 = 1 << 24;

/// Fingerprints `exact_union_count` decodes before it spreads them.
const SPREAD_BATCH: usize = 1024;

/// Sets in `levels` the tokens at precision `p` of `fingerprints` taken as the hashes
/// `spread(f)`, listed in `tokens` (emptied first) on their way.
fn set_spread(levels: &mut LevelBits, fingerprints: &[u64], tokens: &mut Vec<u32>, p: u32) {
    tokens.clear();
    #[cfg(target_arch = "x86_64")]
    if super::tokens::wide_tokens_usable() {
        // SAFETY: the CPU has the instructions (checked above; AVX-512 DQ implies F).
        unsafe { spread_tokens_avx512(fingerprints, tokens, p) };
    } else if super::token_lanes::usable(p) {
        // SAFETY: the CPU has AVX2 (`usable` says so).
        unsafe { spread_tokens_avx2(fingerprints, tokens, p) };
    } else if std::is_x86_feature_detected!("lzcnt") {
        // SAFETY: the CPU has the instruction (checked above).
        unsafe { spread_tokens_lzcnt(fingerprints, tokens, p) };
    } else {
        spread_tokens(fingerprints, tokens, p);
    }
    #[cfg(not(target_arch = "x86_64"))]
    spread_tokens(fingerprints, tokens, p);
    levels.set_tokens(tokens);
}

/// Appends the tokens at precision `p` of `fingerprints` taken as the hashes `spread(f)`.
#[inline(always)]
fn spread_tokens(fingerprints: &[u64], tokens: &mut Vec<u32>, p: u32) {
    // Within `MAX_PRECISION`, a token takes 28 bits.
    tokens.extend(
        fingerprints
            .iter()
            .map(|&f| token_value(spread(f), p) as u32),
    );
}

/// `spread_tokens` compiled for AVX-512 DQ and CD, which multiply 64-bit lanes and count
/// their leading zeros: 8 fingerprints a step, about a seventh of the time of one by one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512cd,avx512vl,lzcnt")]
fn spread_tokens_avx512(fingerprints: &[u64], tokens: &mut Vec<u32>, p: u32) {
    spread_tokens(fingerprints, tokens, p)
}

/// `spread_tokens` four lanes at a time with AVX2 (lc/token_lanes.rs), at precisions it takes:
/// about half the time of one by one with LZCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn spread_tokens_avx2(fingerprints: &[u64], tokens: &mut Vec<u32>, p: u32) {
    super::token_lanes::spread_tokens(fingerprints, tokens, p, SPREAD_MULTIPLIERS, |rest, out| {
        spread_tokens(rest, out, p)
    });
}

/// `spread_tokens` compiled for LZCNT: a leading-zero count in one instruction, where the
/// baseline build takes `bsr` and a fix-up for zero.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "lzcnt")]
fn spread_tokens_lzcnt(fingerprints: &[u64], tokens: &mut Vec<u32>, p: u32) {
    spread_tokens(fingerprints, tokens, p)
}

/// The distinct fingerprints of exact counters of one geometry, in order; `OutOfMemory` if
/// the list of all they hold cannot be made.
fn distinct_fingerprints(counters: &[&Counter]) -> Result<Vec<u64>, LcError> {
    let listed: u64 = counters.iter().map(|c| c.header().count).sum();
    // Zeroed by the allocator: fresh pages are not written twice (a list can be 128 MB).
    let mut all: Vec<u64> = zeroed(listed as usize).ok_or(LcError::OutOfMemory)?;
    let mut filled = 0;
    for c in counters {
        filled += c.decode_fingerprints(&mut all[filled..]);
    }
    all.truncate(filled);
    all.sort_unstable();
    all.dedup();
    Ok(all)
}

/// The distinct fingerprints of exact counters of one geometry, in order, if there are at
/// most `bound` of them (None past it): gathered in a sorted list of at most that many, one
/// counter after another, with no list of all they hold.
fn distinct_within(counters: &[&Counter], bound: u64) -> Option<Vec<u64>> {
    let (mut distinct, mut decoded) = (Vec::new(), Vec::new());
    for c in ahead(counters) {
        let listed = c.fingerprints_in(&mut decoded);
        let missing = missing_from(&distinct, listed);
        if missing > 0 {
            if (distinct.len() + missing) as u64 > bound {
                return None;
            }
            merge_missing(&mut distinct, listed, missing);
        }
    }
    Some(distinct)
}

/// `counters` in turn, each next one's block asked for as the one before is handed out, to
/// be read while it comes (`Block::prefetch`). The reading is the caller's loop body, not a
/// closure: a closure is compiled for the baseline CPU unless the compiler inlines it into
/// a caller built for AVX2, and it stopped doing so once the body grew (register unions
/// then took 2.3 times as long).
#[inline(always)]
fn ahead<'a>(counters: &'a [&'a Counter]) -> impl Iterator<Item = &'a Counter> + 'a {
    counters.iter().enumerate().map(move |(i, c)| {
        if let Some(next) = counters.get(i + 1) {
            next.block.prefetch();
        }
        *c
    })
}

/// What a sketch union keeps beside its level bits (`add_to_levels`), made once for the
/// union, not once a counter: where exact counters' fingerprints are taken to tokens.
#[derive(Default)]
struct UnionScratch {
    fingerprints: Vec<u64>,
    tokens: Vec<u32>,
}

/// The indicators of a union being built at one precision.
#[derive(Debug, PartialEq)]
enum Indicators {
    Tokens(Vec<u64>),
    /// The registers a merge stores, and, when registers of larger precisions were among its
    /// sources, what is known at their resolutions, which the estimate takes instead.
    Registers(Vec<u32>, Option<Evidence>),
}

impl Counter {
    /// Of `counters`, the one whose geometry their union takes: the smallest precision, and
    /// among counters of it the most bits (the most items counted exactly), then the largest
    /// capacity and the smallest error rate, which together name one geometry, so that the
    /// order of the keys does not change the union.
    pub(super) fn union_model<'a>(
        counters: impl Iterator<Item = &'a Counter>,
    ) -> Option<&'a Counter> {
        counters.min_by_key(|c| {
            let g = &c.geometry;
            let rate = g.error_rate().to_bits();
            (g.precision, Reverse(g.m), Reverse(g.capacity), rate)
        })
    }

    /// Bytes a union of `counters` works through: a sketch's block, or the 8-byte values an
    /// exact (or sparse) counter's list is decoded into, which is what the union's work
    /// follows there (a search, a division or a spread for each). A dense bitmap of the
    /// union's size is united word by word (its bytes); one folded into the smallest bitmap
    /// among them is taken a bit at a time, so counts 8 bytes for each bit set.
    pub fn union_bytes(counters: &[&Counter]) -> u64 {
        let smallest = counters
            .iter()
            .filter(|c| c.is_bitmap())
            .map(|c| c.bits())
            .min();
        let bytes = |c: &Counter| match c.mode() {
            Mode::Exact | Mode::Sparse => c.header().count * 8,
            Mode::Dense if Some(c.bits()) != smallest => c.bits_set() * 8,
            Mode::Dense | Mode::Tokens | Mode::Registers => c.memory_bytes(),
        };
        counters.iter().map(|c| bytes(c)).sum()
    }

    /// A tokens block of `tokens` (sorted, distinct) at precision `p`, or registers past the
    /// token limit (refused beyond `limit` bytes), with this running state.
    pub(super) fn sketch_block(
        &self,
        p: u32,
        tokens: Vec<u64>,
        running: Running,
        limit: u64,
    ) -> Result<Block, LcError> {
        let k = tokens.len() as u64;
        if k <= token_limit(p) {
            let mut block = tokens_block(p, k, tokens.into_iter())?;
            running.write(block.words_mut());
            Ok(block)
        } else {
            self.check_registers_within(limit)?;
            registers_from_tokens(p, tokens.into_iter(), running)
        }
    }

    /// This counter's tokens at precision `p ≤` its own (exact and tokens modes), sorted.
    fn tokens_at(&self, p: u32) -> Vec<u64> {
        let own = self.geometry.precision;
        if self.is_exact() {
            return self.exact_tokens(p);
        }
        let mut tokens: Vec<u64> = self
            .tokens()
            .map(|t| {
                let (i, k) = reduce_indicator(t >> 8, t & 0xff, own, p);
                i << 8 | k
            })
            .collect();
        if p < own {
            tokens.sort_unstable();
            tokens.dedup();
        }
        tokens
    }

    /// Adds this counter's indicators to `levels` (`2^p` registers, `p ≤` its precision), in
    /// one pass over its bytes: tokens decoded straight into their bits, no list, no sort; with
    /// `AVX2`, a chunk at a time (core/ef_chunks.rs). Registers add nothing here.
    #[inline(always)]
    fn add_to_levels<const AVX2: bool>(
        &self,
        p: u32,
        levels: &mut LevelBits,
        scratch: &mut UnionScratch,
    ) {
        let own = self.geometry.precision;
        match self.mode() {
            #[cfg(target_arch = "x86_64")]
            Mode::Tokens if own == p && AVX2 => {
                const { assert!(token_universe(MAX_PRECISION) <= ef_chunks::MAX_UNIVERSE) };
                let (words, shape) = (self.block.words(), self.tokens_shape());
                // SAFETY: `AVX2` is set only by `union_registers_avx2` and
                // `collect_levels_avx2`, called once `ef_chunks::usable()`.
                unsafe {
                    ef_chunks::for_each_chunk(words, SKETCH_STREAM, shape, |t| levels.set_chunk(t))
                };
            }
            Mode::Tokens if own == p => self.tokens().for_each(|t| levels.set(t)),
            Mode::Tokens => self.tokens().for_each(|t| {
                let (i, k) = reduce_indicator(t >> 8, t & 0xff, own, p);
                levels.set(i << 8 | k)
            }),
            // Registers are united register-wise at their own precision instead
            // (`collect_registers`).
            Mode::Registers => {}
            // Exact (bitmaps saved by earlier versions never reach a sketch union): decoded
            // whole, each fingerprint's token taken, the tokens set, without a sort.
            _ => {
                scratch.tokens.clear();
                let fingerprints = self.fingerprints_in(&mut scratch.fingerprints);
                self.append_tokens(fingerprints, p, &mut scratch.tokens);
                levels.set_tokens(&scratch.tokens);
            }
        }
    }

    /// The union of `counters` (exact, tokens or registers) as indicators at their smallest
    /// precision `p` (listing `listed` tokens in all): the token list while it fits one, else
    /// registers. Tokens are sorted together while they are few; more go into level bits
    /// (collect.rs), whose set bits are the distinct tokens, without a sort
    /// (`LevelBits::faster_than_sorting`).
    fn union_indicators(counters: &[&Counter], p: u32, listed: u64) -> Result<Indicators, LcError> {
        if counters.iter().any(|c| c.mode() == Mode::Registers) {
            return Counter::union_registers(counters, p);
        }
        if LevelBits::faster_than_sorting(listed, p) {
            Counter::collected_union(counters, p, listed)
        } else {
            Counter::sorted_union(counters, p)
        }
    }

    /// `union_indicators` of exact and tokens-mode counters by a sort of all their tokens.
    fn sorted_union(counters: &[&Counter], p: u32) -> Result<Indicators, LcError> {
        let mut tokens: Vec<u64> = counters.iter().flat_map(|c| c.tokens_at(p)).collect();
        tokens.sort_unstable();
        tokens.dedup();
        if tokens.len() as u64 <= token_limit(p) {
            return Ok(Indicators::Tokens(tokens));
        }
        let mut levels = LevelBits::new(p)?;
        tokens.into_iter().for_each(|t| levels.set(t));
        Ok(Indicators::Registers(levels.registers().collect(), None))
    }

    /// `union_indicators` of exact and tokens-mode counters (listing `listed` tokens in all)
    /// through level bits.
    fn collected_union(counters: &[&Counter], p: u32, listed: u64) -> Result<Indicators, LcError> {
        #[cfg(target_arch = "x86_64")]
        let levels = if ef_chunks::usable() {
            // SAFETY: the CPU has the instructions.
            unsafe { Counter::collect_levels_avx2(counters, p) }?
        } else {
            Counter::collect_levels::<false>(counters, p)?
        };
        #[cfg(not(target_arch = "x86_64"))]
        let levels = Counter::collect_levels::<false>(counters, p)?;
        Ok(match levels.tokens_within(token_limit(p), listed)? {
            Some(tokens) => Indicators::Tokens(tokens),
            None => Indicators::Registers(levels.registers().collect(), None),
        })
    }

    /// `collect_levels` compiled for AVX2, BMI1/2 and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    fn collect_levels_avx2(counters: &[&Counter], p: u32) -> Result<LevelBits, LcError> {
        Counter::collect_levels::<true>(counters, p)
    }

    /// The level bits of `counters` (none in registers mode of precision `p`).
    #[inline(always)]
    fn collect_levels<const AVX2: bool>(
        counters: &[&Counter],
        p: u32,
    ) -> Result<LevelBits, LcError> {
        let (mut levels, mut scratch) = (LevelBits::new(p)?, UnionScratch::default());
        for c in ahead(counters) {
            c.add_to_levels::<AVX2>(p, &mut levels, &mut scratch);
        }
        Ok(levels)
    }

    /// The union of `counters` as registers at precision `p`: one pass over each, no sort.
    /// Registers of that precision are united register-wise; everything else collects its
    /// levels (collect.rs), read out as registers and united with them at the end.
    fn union_registers(counters: &[&Counter], p: u32) -> Result<Indicators, LcError> {
        #[cfg(target_arch = "x86_64")]
        if ef_chunks::usable() {
            // SAFETY: the CPU has the instructions.
            return unsafe { Counter::union_registers_avx2(counters, p) };
        }
        Counter::collect_registers::<false>(counters, p)
    }

    /// `union_registers` compiled for AVX2, BMI1/2 and POPCNT (x86-64 CPUs since 2013, not the
    /// baseline Rust targets): eight registers united per instruction, with the per-lane
    /// shifts SSE2 lacks; token lists decoded a chunk at a time (core/ef_chunks.rs). About half
    /// the time of the baseline build over registers, 0.6 of it over token lists.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
    fn union_registers_avx2(counters: &[&Counter], p: u32) -> Result<Indicators, LcError> {
        Counter::collect_registers::<true>(counters, p)
    }

    #[inline(always)]
    fn collect_registers<const AVX2: bool>(
        counters: &[&Counter],
        p: u32,
    ) -> Result<Indicators, LcError> {
        let mut registers = Vec::new();
        registers
            .try_reserve_exact(1 << p)
            .map_err(|_| LcError::OutOfMemory)?;
        registers.resize(1 << p, 0u32);
        let (mut scratch, mut finer) = (UnionScratch::default(), Finer::default());
        let mut levels = None;
        for c in ahead(counters) {
            let q = c.geometry.precision;
            if c.mode() == Mode::Registers {
                let into = if q == p {
                    &mut registers
                } else {
                    finer.registers(q)?
                };
                union_packed(into, &c.block.words()[SKETCH_REGISTERS..]);
            } else {
                let levels = match &mut levels {
                    Some(levels) => levels,
                    None => levels.insert(LevelBits::new(p)?),
                };
                c.add_to_levels::<AVX2>(p, levels, &mut scratch);
            }
        }
        if let Some(levels) = levels {
            for (r, l) in registers.iter_mut().zip(levels.registers()) {
                *r = union(*r, l);
            }
        }
        let evidence = if finer.is_empty() {
            None
        } else {
            let mut evidence = resolve(&mut registers, p, &finer)?;
            // The keys seen whole at `p` holding items: how many, and the count and variance
            // of the largest (the smaller variance on a tie, whatever their order). Read only
            // here, off the loop every union takes.
            let at_p = || {
                counters
                    .iter()
                    .filter(|c| c.seen_whole_at(p) && !c.holds_nothing())
            };
            let largest = at_p()
                .map(|c| (c.count(), Reverse(c.variance().to_bits())))
                .max();
            let (count, Reverse(variance)) = largest.unwrap_or((0, Reverse(0)));
            evidence.counted_at_p(at_p().count(), count as f64, f64::from_bits(variance));
            Some(evidence)
        };
        Ok(Indicators::Registers(registers, evidence))
    }

    /// Whether a union at precision `p` (at most this counter's) sees this counter whole, as
    /// indicators at `p`: all but registers of a larger precision, which it estimates at
    /// their own resolution (precisions.rs).
    fn seen_whole_at(&self, p: u32) -> bool {
        self.mode() != Mode::Registers || self.geometry.precision == p
    }

    /// The variance of this counter's count: its running one, none for an exact count.
    fn variance(&self) -> f64 {
        match self.mode() {
            Mode::Tokens | Mode::Registers => self.running().variance,
            _ => 0.0,
        }
    }

    /// Adds to a union's `indicators` at precision `p`, as a merge stores them, what each of
    /// `counters` in registers mode finer than `p` knows set where several share a precision
    /// (`add_known_set`). Only a merge pays for it: the union's count and its test against
    /// its largest key (`union_count_of`) take the indicators without, for `LC.COUNT` and
    /// `LC.MERGE` alike.
    fn add_known_sets(indicators: &mut Indicators, p: u32, counters: &[&Counter]) {
        let Indicators::Registers(registers, Some(_)) = indicators else {
            return;
        };
        let mut finer: Vec<&Counter> = counters
            .iter()
            .copied()
            .filter(|c| !c.seen_whole_at(p))
            .collect();
        finer.sort_by_key(|c| c.geometry.precision);
        let same = |a: &&Counter, b: &&Counter| a.geometry.precision == b.geometry.precision;
        for group in finer.chunk_by(same).filter(|g| g.len() > 1) {
            for c in group {
                let words = &c.block.words()[SKETCH_REGISTERS..];
                let q = c.geometry.precision;
                add_known_set(registers, p, q, |i| read_register(words, i as u64));
            }
        }
    }

    /// The set indicators by level and the unset weight of a union's indicators, those a
    /// merge stores.
    fn counts_of(indicators: &Indicators, p: u32) -> (SetCounts, u128) {
        match indicators {
            Indicators::Tokens(tokens) => {
                let mut counts = SetCounts::new(p);
                let mut mu = 1u128 << 64;
                for &t in tokens {
                    counts.add(t & 0xff);
                    mu -= u128::from(weight(t & 0xff, p));
                }
                (counts, mu)
            }
            Indicators::Registers(registers, _) => registers_counts(registers, p),
        }
    }

    /// A union's estimate and its variance: the maximum-likelihood ones of its indicators, or
    /// of what its sources know at their resolutions (precisions.rs).
    fn estimate_of(indicators: &Indicators, p: u32) -> (f64, f64) {
        if let Indicators::Registers(_, Some(evidence)) = indicators {
            return evidence.estimate();
        }
        let (counts, mu) = Counter::counts_of(indicators, p);
        ml_estimate(&counts, mu, p)
    }

    /// The running state a merge stores with a union's indicators, in a geometry whose exact
    /// set holds at most `first` items: the union's estimate and variance, and the unset
    /// weight of those indicators. The estimate is the union's count as `sketch_union_count`
    /// answers it (`count`), within what the indicators allow.
    fn running_of(indicators: &Indicators, p: u32, first: u64, count: UnionCount) -> Running {
        let (counts, mu) = Counter::counts_of(indicators, p);
        let ((estimate, variance), forgotten) = match indicators {
            Indicators::Tokens(_) => (ml_estimate(&counts, mu, p), 0),
            Indicators::Registers(registers, evidence) => (
                // With evidence, its estimate came from other indicators than those it
                // stores (precisions.rs).
                evidence
                    .as_ref()
                    .map_or_else(|| ml_estimate(&counts, mu, p), |e| e.estimate()),
                registers.iter().map(|&r| forgotten_levels(r)).sum(),
            ),
        };
        let set: u64 = counts.0.iter().sum();
        let estimate = match count {
            UnionCount::Exactly(count) => count as f64,
            UnionCount::AtLeast(count) => estimate.max(count as f64),
        };
        let running = Running {
            estimate,
            variance,
            mu,
        };
        running.within_bounds(set, set + forgotten, first)
    }

    /// The number of distinct items in the union of exact counters of one geometry: their
    /// distinct fingerprints, counted exactly (sorted together) while they list at most
    /// `SORTED_UNION` token lists' worth in all, or (gathered up to the exact limit) while
    /// the union is within what one of them holds exactly. More are estimated from level
    /// bits at the counters' precision, as a sketch union is (its standard error), each
    /// fingerprint taken as the hash `spread(f)`: a union of many small counters then costs
    /// a pass over their bytes, not a sort of all they list, and a bounded table, not a list
    /// as long as theirs.
    pub(super) fn exact_union_count(counters: &[&Counter]) -> Result<u64, LcError> {
        let Some(first) = counters.first() else {
            return Ok(0);
        };
        let p = first.geometry.precision;
        let counts = counters.iter().map(|c| c.header().count);
        let (listed, largest) = counts.fold((0, 0), |(sum, most), n| (sum + n, most.max(n)));
        if listed <= SORTED_UNION * token_limit(p) {
            return Ok(distinct_fingerprints(counters)?.len() as u64);
        }
        // Many copies of a few small sets (a large union stops this after a few counters).
        if let Some(distinct) = distinct_within(counters, first.geometry.exact_limit) {
            return Ok(distinct.len() as u64);
        }
        let mut levels = LevelBits::new(p)?;
        // Decoded a counter at a time into a batch, then spread and set a batch at a time:
        // each step a loop of its own, which the CPU's vector instructions take where it has
        // them (`ef_decode::decode`, `spread_tokens_avx512`, `LevelBits::set_tokens`).
        let (mut batch, mut tokens): (Vec<u64>, Vec<u32>) = (Vec::new(), Vec::new());
        let mut filled = 0;
        for c in ahead(counters) {
            let count = c.header().count as usize;
            if filled + count > batch.len() {
                set_spread(&mut levels, &batch[..filled], &mut tokens, p);
                filled = 0;
                let room = count.max(SPREAD_BATCH);
                if room > batch.len() {
                    batch
                        .try_reserve_exact(room - batch.len())
                        .and_then(|()| tokens.try_reserve_exact(room))
                        .map_err(|_| LcError::OutOfMemory)?;
                    batch.resize(room, 0);
                }
            }
            filled += c.decode_fingerprints(&mut batch[filled..]);
        }
        set_spread(&mut levels, &batch[..filled], &mut tokens, p);
        let indicators = match levels.tokens_within(token_limit(p), listed)? {
            Some(tokens) => Indicators::Tokens(tokens),
            None => Indicators::Registers(levels.registers().collect(), None),
        };
        Ok(at_least(Counter::estimate_of(&indicators, p).0, largest))
    }

    /// The number of distinct items in the union of `counters`, which list `listed`
    /// fingerprints or tokens in all, when every one is exact and they list at most
    /// `SORTED_UNION` token lists' worth at precision `p`, as an exact union of one size is
    /// counted (`distinct_across_sizes`); None otherwise. Correct for one size too, but its
    /// callers count exact counters of one size first, by their fingerprints alone
    /// (`exact_union_count`, `distinct_fingerprints`).
    fn exact_across_sizes(
        counters: &[&Counter],
        p: u32,
        listed: u64,
    ) -> Result<Option<u64>, LcError> {
        if listed > SORTED_UNION * token_limit(p) || !counters.iter().all(|c| c.is_exact()) {
            return Ok(None);
        }
        distinct_across_sizes(counters, p).map(Some)
    }

    /// The number of distinct items in the union of exact and sketch counters.
    pub(super) fn sketch_union_count(counters: &[&Counter]) -> Result<u64, LcError> {
        let Some(p) = counters.iter().map(|c| c.geometry.precision).min() else {
            return Ok(0);
        };
        // One pass over the counters' first lines: what they list, and the largest count.
        let (mut listed, mut largest) = (0u64, 0u64);
        for &c in counters {
            listed += c.header().count;
            largest = largest.max(c.count());
        }
        if let Some(distinct) = Counter::exact_across_sizes(counters, p, listed)? {
            return Ok(distinct);
        }
        // Counters listing more than `SORTED_UNION` token lists' worth of tokens in all go to
        // registers straight away: their union is a token list only when they overlap that
        // much, and then its registers forget a few of its low levels, which moves the
        // estimate by far less than its error.
        let as_registers = listed > SORTED_UNION * token_limit(p);
        let indicators_of = |counters: &[&Counter]| match as_registers {
            true => Counter::union_registers(counters, p),
            false => Counter::union_indicators(counters, p, listed),
        };
        let indicators = indicators_of(counters)?;
        let count = Counter::union_count_of(counters, largest, &indicators, p, indicators_of)?;
        Ok(count.of(&indicators, p))
    }

    /// What a union of `counters` whose largest count is `largest` counts, given the union's
    /// `indicators` at precision `p` and how they are made (`indicators_of`). When they hold
    /// no indicator beyond those of a key counting it, seen whole at `p`, that count, as
    /// `PFCOUNT` of a HyperLogLog and its subsets answers that HyperLogLog's count: a
    /// maximum-likelihood estimate of the same indicators could differ from the key's running
    /// one by the error. Finer sources count too, so that a key merged from them counts as
    /// it did when they are merged again. Otherwise at least that count. Every key tied for the largest is tried, so that
    /// the order of the keys does not matter. `LC.COUNT` and `LC.MERGE` both count a union
    /// this way, so a merged key counts what `LC.COUNT` of its sources did.
    fn union_count_of(
        counters: &[&Counter],
        largest: u64,
        indicators: &Indicators,
        p: u32,
        indicators_of: impl Fn(&[&Counter]) -> Result<Indicators, LcError>,
    ) -> Result<UnionCount, LcError> {
        let union = Counter::counts_of(indicators, p);
        // A list shorter than the union's indicators cannot give them all: skipped unread
        // (many small keys of one count would otherwise each be read again).
        let set: u64 = union.0 .0.iter().sum();
        let may_hold = |c: &Counter| c.mode() == Mode::Registers || c.header().count >= set;
        // Finer registers united with a key seen whole add nothing where they set nothing it
        // lacks (precisions.rs: they speak only where it knows the union's indicators unset).
        for &c in counters
            .iter()
            .filter(|c| c.count() == largest && c.seen_whole_at(p) && may_hold(c))
        {
            if Counter::counts_of(&indicators_of(&[c])?, p) == union {
                return Ok(UnionCount::Exactly(largest));
            }
        }
        Ok(UnionCount::AtLeast(largest))
    }

    /// Makes this counter (exact or sketch) the union of itself and `other` (exact or sketch),
    /// at the smaller precision of the two, whose geometry it takes; true if it changed.
    /// Registers refused beyond `limit` bytes, nothing changed.
    pub(super) fn absorb_sketch(&mut self, other: &Counter, limit: u64) -> Result<bool, LcError> {
        self.absorb_sketches(&[other], limit)
    }

    /// Makes this counter (exact or sketch) the union of itself and `others` (exact or
    /// sketches) in one pass over each, at the smallest precision among them, whose geometry
    /// it takes; true if it changed. Registers refused beyond `limit` bytes, nothing changed.
    /// Many counters listing more than `SORTED_UNION` token lists' worth of tokens go to
    /// registers straight away, as in `sketch_union_count`.
    pub fn absorb_sketches(&mut self, others: &[&Counter], limit: u64) -> Result<bool, LcError> {
        self.absorb_sorting_at_most(others, limit, SORTED_MERGE)
    }

    /// `absorb_sketches`, exact counters of one size sorting at most `sorted` fingerprints.
    fn absorb_sorting_at_most(
        &mut self,
        others: &[&Counter],
        limit: u64,
        sorted: u64,
    ) -> Result<bool, LcError> {
        // An empty counter finer than the coarsest source holding items becomes what a new
        // key of them would be: the union is coarser than its size, which then binds nothing
        // (exact sources of one size stay exact, one sketch is copied). Made aside, so that
        // a refused union changes nothing.
        if self.holds_nothing() {
            let held = others.iter().copied().filter(|c| !c.holds_nothing());
            if let Some(model) = Counter::union_model(held)
                .filter(|m| m.geometry.precision < self.geometry.precision)
            {
                let mut union = model.empty_like();
                union.absorb_sorting_at_most(others, limit, sorted)?;
                *self = union;
                return Ok(true);
            }
        }
        // Empty sources leave the union as it is; this counter's own size binds it, empty or not.
        let mut all: Vec<&Counter> = Vec::with_capacity(others.len() + 1);
        all.push(self);
        all.extend(others.iter().filter(|c| !c.holds_nothing()));
        match all[..] {
            [_] => return Ok(false),
            // An empty counter united with one sketch of its geometry becomes a copy of it,
            // running estimate included: a merge into a new key counts as its source does
            // (a maximum-likelihood estimate of the same indicators could differ).
            [me, only]
                if me.holds_nothing() && only.is_sketch() && only.geometry == me.geometry =>
            {
                *self = Counter::copy_within(only, limit)?;
                return Ok(true);
            }
            _ => {}
        }
        let listed: u64 = all.iter().map(|c| c.header().count).sum();
        // Exact counters of one size list fingerprints of one universe, whatever their
        // capacity or rate: their union is exact as `union_count`'s is.
        if Counter::exact_of_one_size(&all) {
            let distinct = if listed <= sorted {
                Some(distinct_fingerprints(&all)?)
            } else {
                distinct_within(&all, self.geometry.exact_limit)
            };
            if let Some(distinct) = distinct {
                return self.absorb_exact(distinct, limit);
            }
            // More than an exact set holds, and too many to sort: a sketch union as any
            // other, its count their estimate.
        }
        // This counter's own geometry where none is coarser.
        let p = all.iter().map(|c| c.geometry.precision).min().unwrap_or(0);
        let geometry = match p == self.geometry.precision {
            true => self.geometry.clone(),
            false => Counter::union_model(all.iter().copied())
                .map_or_else(|| self.geometry.clone(), |c| c.geometry.clone()),
        };
        let as_registers = all.len() > 2 && listed > SORTED_UNION * token_limit(p);
        let indicators_of = |counters: &[&Counter]| match as_registers {
            true => Counter::union_registers(counters, p),
            false => Counter::union_indicators(counters, p, listed),
        };
        let mut indicators = indicators_of(&all)?;
        let mut union = Counter {
            geometry,
            block: Block::none(),
        };
        let most = all.iter().map(|c| c.count()).max().unwrap_or(0);
        // Exact counters of several sizes make a sketch, which counts what `LC.COUNT` of
        // them does: their distinct items while few (into an empty destination, below: what
        // its sources count).
        let exact = match self.holds_nothing() {
            true => None,
            false => Counter::exact_across_sizes(&all, p, listed)?,
        };
        let mut count = match exact {
            Some(distinct) => UnionCount::Exactly(distinct),
            None => Counter::union_count_of(&all, most, &indicators, p, indicators_of)?,
        };
        let mut counted = count.of(&indicators, p);
        Counter::add_known_sets(&mut indicators, p, &all);
        let holds_all = p == self.geometry.precision && Counter::holds_as(&indicators, self);
        // An empty destination counts what `LC.COUNT` of its sources does, which leaves it
        // out; that may differ where it counts them at their precision, finer than this
        // one's, or exactly, as exact counters.
        let sources = &all[1..];
        if self.holds_nothing()
            && (sources.iter().all(|c| c.geometry.precision > p)
                || sources.iter().all(|c| c.is_exact()))
        {
            let of_sources = Counter::union_count(sources)?;
            if counted != of_sources {
                (count, counted) = (UnionCount::Exactly(of_sources), of_sources);
            }
        }
        // An empty counter whose union is a source of its geometry (the others subsets of
        // it), counting what the union counts, becomes a copy of that source, running
        // estimate included (the rule for one source above, for its subsets too). A finer
        // source counting more keeps the union from it: the union counts that. (An empty
        // counter is at the union's precision here: a finer one was replaced above.)
        if self.holds_nothing() {
            let copied = sources.iter().find(|c| {
                c.is_sketch()
                    && c.geometry == self.geometry
                    && c.count() == counted
                    && Counter::holds_as(&indicators, c)
            });
            if let Some(&copied) = copied {
                *self = Counter::copy_within(copied, limit)?;
                return Ok(true);
            }
        }
        // Unchanged when this counter holds the union's indicators and counts as `LC.COUNT`
        // counts the union (a finer source's own estimate, or a larger count, changes it).
        if holds_all && counted == self.count() {
            return Ok(false);
        }
        let running = Counter::running_of(&indicators, p, union.geometry.universe(), count);
        union.block = match indicators {
            Indicators::Tokens(tokens) => union.sketch_block(p, tokens, running, limit)?,
            Indicators::Registers(registers, _) => {
                // The limit binds growth: registers this counter already has take no more.
                if !(self.mode() == Mode::Registers && self.geometry.precision == p) {
                    union.check_registers_within(limit)?;
                }
                registers_block_with(p, &registers, running)?
            }
        };
        *self = union;
        Ok(true)
    }

    /// A copy of `source`, which an empty counter of its geometry becomes; registers refused
    /// beyond `limit` bytes.
    fn copy_within(source: &Counter, limit: u64) -> Result<Counter, LcError> {
        let copy = source.try_clone()?;
        if copy.mode() == Mode::Registers {
            copy.check_registers_within(limit)?;
        }
        Ok(copy)
    }

    /// Whether a sketch union's `indicators` (at `counter`'s precision, a superset of its
    /// indicators) are `counter`'s own, as a merge would store them; for an exact counter,
    /// the tokens its fingerprints give (the union then counts as it, and it stays exact).
    fn holds_as(indicators: &Indicators, counter: &Counter) -> bool {
        match (indicators, counter.mode()) {
            (Indicators::Tokens(t), Mode::Tokens) => t.len() as u64 == counter.header().count,
            (Indicators::Tokens(t), Mode::Exact) => {
                t.len() <= counter.header().count as usize
                    && t.len() == counter.tokens_at(counter.geometry.precision).len()
            }
            (Indicators::Registers(r, _), Mode::Registers) => {
                r.iter().copied().eq(counter.registers())
            }
            _ => false,
        }
    }

    /// Makes this exact counter the union of exact counters of its geometry whose distinct
    /// fingerprints are `all` (sorted): exact while they fit, else their sketch with their
    /// number as running estimate.
    fn absorb_exact(&mut self, all: Vec<u64>, limit: u64) -> Result<bool, LcError> {
        // Its own fingerprints are distinct: as many in the union, no other brought one.
        if all.len() as u64 == self.header().count {
            return Ok(false);
        }
        let (k, g) = (all.len() as u64, &self.geometry);
        *self = if k <= g.exact_limit {
            Counter::from_fingerprints(g.capacity, g.error_rate(), g.m, k, all.into_iter())?
        } else {
            let mut union = Counter::empty(g.capacity, g.error_rate(), g.m);
            union.become_sketch_of(&all, limit)?;
            union
        };
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::levels::{ml_relative_error, MIN_PRECISION};

    /// Counters of 1,000 to 3,000 random items (tokens mode, some of precision 12), and the
    /// number of distinct items in all.
    fn counters(n: usize, seed: u64) -> (Vec<Counter>, usize) {
        let mut x = seed;
        let mut truth = std::collections::HashSet::new();
        let all = (0..n)
            .map(|i| {
                let rate = if i % 3 == 0 { 0.008 } else { 0.01 };
                let mut c = Counter::reserve(rate, 50_000, u64::MAX).unwrap();
                for _ in 0..1_000 + (i % 3) * 1_000 {
                    crate::core::test_rng::step(&mut x);
                    c.add(&(x % 100_000).to_le_bytes()).unwrap();
                    truth.insert(x % 100_000);
                }
                c
            })
            .collect();
        (all, truth.len())
    }

    /// A merged key counts what `LC.COUNT` of it and its sources did where precisions differ:
    /// an empty destination coarser than its sources (which `LC.COUNT` leaves out, counting
    /// at theirs), and a coarse destination already holding a finer source's indicators
    /// (the union then counts its own estimate, which the merge stores).
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_merge_across_precisions_counts_as_the_union_did() {
        let item = |i: u64| i.to_le_bytes();
        let filled = |rate: f64, items: std::ops::Range<u64>| {
            let mut c = Counter::reserve(rate, 1_000_000, u64::MAX).unwrap();
            for i in items {
                c.add(&item(i)).unwrap();
            }
            c
        };
        let (a, b) = (filled(0.01, 0..3_000), filled(0.01, 2_000..6_000));
        let mut empty = Counter::reserve(0.05, 100, u64::MAX).unwrap();
        let coarse = empty.geometry.precision;
        let union = Counter::union_count(&[&empty, &a, &b]).unwrap();
        assert!(empty.absorb_sketches(&[&a, &b], u64::MAX).unwrap());
        assert_eq!(empty.count(), union);
        assert_eq!(empty.geometry.precision, coarse);

        for n in [20_000, 100_000] {
            let coarse = filled(0.05, 0..n);
            let fine = filled(0.01, 0..4_000);
            let union = Counter::union_count(&[&coarse, &fine]).unwrap();
            let mut merged = coarse.try_clone().unwrap();
            let changed = merged.absorb_sketches(&[&fine], u64::MAX).unwrap();
            assert_eq!(merged.count(), union, "{n}");
            assert_eq!(changed, union != coarse.count(), "{n}");
        }
    }

    /// A union whose other keys hold only items of its largest counts as that counter does,
    /// whatever their modes and sizes at one precision (as `PFCOUNT` of a HyperLogLog and its
    /// subsets); one more item the largest lacks makes it a union estimate again.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_union_within_its_largest_key_counts_as_that_key() {
        let item = |i: u64| i.to_le_bytes();
        for (n, subset) in [
            (300u64, 2u64),
            (2_000, 150),
            (50_000, 2),
            (50_000, 400),
            (50_000, 3_000),
        ] {
            let mut big = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            for i in 0..n {
                big.add(&item(i)).unwrap();
            }
            let mut sub = Counter::reserve(0.01, 1_000, u64::MAX).unwrap();
            for i in 0..subset {
                sub.add(&item(i * 7 % n)).unwrap();
            }
            for union in [[&big, &sub], [&sub, &big]] {
                assert_eq!(
                    Counter::union_count(&union),
                    Ok(big.count()),
                    "{n}, {subset}"
                );
            }
            let mut third = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            for i in 0..40 {
                third.add(&item(n + i)).unwrap();
            }
            let wider = Counter::union_count(&[&big, &sub, &third]).unwrap();
            assert!(wider > big.count(), "{n}: {wider} ≤ {}", big.count());
            // A merge of them into a new key is a copy of the largest, and counts as it; a
            // subset of the same geometry listing more tokens than its header counts makes
            // no difference.
            let mut mid = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            for i in 0..400 {
                mid.add(&item(i % n)).unwrap();
            }
            let mut merged = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            merged
                .absorb_sketches(&[&sub, &big, &mid], u64::MAX)
                .unwrap();
            assert_eq!(merged.count(), big.count(), "{n}, {subset}");
            if big.is_sketch() {
                assert_eq!(merged, big);
            }
        }
    }

    /// A counter of `rate` and `capacity` holding the items named by these numbers in decimal,
    /// as a client's `LC.ADD key 1 2 3 ...` adds them.
    fn numbered(rate: f64, capacity: u64, items: impl IntoIterator<Item = u64>) -> Counter {
        let mut c = Counter::reserve(rate, capacity, u64::MAX).unwrap();
        items
            .into_iter()
            .for_each(|i| _ = c.add(i.to_string().as_bytes()).unwrap());
        c
    }

    /// Exact counters of several sizes (fingerprints of several universes) count their
    /// distinct items together, in any order, and a merge of them, into a new key or into
    /// one of them, counts the same (as a sketch's estimate of their tokens, the union of two
    /// such counters holding 84 items in all counted 83, and 31% of 200 pairs of up to 80 and
    /// 250 items counted 1–3 off).
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn exact_counters_of_several_sizes_count_their_distinct_items() {
        let sizes = [(0.01, 1_000), (0.01, 50_000), (0.002, 20_000), (0.05, 100)];
        let mut x = 29u64;
        // A number below `n`, from the generator's high bits.
        let mut below = |n: u64| (crate::core::test_rng::step(&mut x) >> 32) % n;
        for trial in 0..60u64 {
            let sets: Vec<Vec<u64>> = sizes
                .iter()
                .map(|&(rate, capacity)| {
                    let limit = Counter::reserve(rate, capacity, u64::MAX)
                        .unwrap()
                        .geometry
                        .exact_limit;
                    // Items from a range shared by all, so that the sets overlap.
                    let n = below(limit + 1);
                    (0..n).map(|_| trial << 20 | below(400)).collect()
                })
                .collect();
            let counters: Vec<Counter> = sizes
                .iter()
                .zip(&sets)
                .map(|(&(rate, capacity), set)| numbered(rate, capacity, set.iter().copied()))
                .collect();
            assert!(counters.iter().all(|c| c.is_exact()));
            for pick in [&[0, 1][..], &[1, 0], &[0, 1, 2], &[2, 3, 1, 0], &[3, 2]] {
                let chosen: Vec<&Counter> = pick.iter().map(|&i| &counters[i]).collect();
                let distinct: std::collections::HashSet<u64> =
                    pick.iter().flat_map(|&i| sets[i].iter().copied()).collect();
                let n = distinct.len() as u64;
                assert_eq!(Counter::union_count(&chosen), Ok(n), "{trial} {pick:?}");
                let mut new = Counter::empty_for_union(&chosen).unwrap();
                new.absorb_sketches(&chosen, u64::MAX).unwrap();
                assert_eq!(new.count(), n, "{trial} {pick:?}: into a new key");
                let mut into = chosen[0].clone();
                into.absorb_sketches(&chosen[1..], u64::MAX).unwrap();
                assert_eq!(into.count(), n, "{trial} {pick:?}: into the first");
            }
        }
    }

    /// Items whose hashes lie at the ends of the hash range (the first and the last
    /// fingerprint of every universe) count as any other, across sizes.
    #[test]
    fn hashes_at_the_ends_of_the_range_count_across_sizes() {
        // Apart by more than the widest interval (2^64 over the smallest universe, about
        // 2^29): hashes closer than that are one fingerprint in every universe.
        let ends = [
            0,
            1 << 32,
            1 << 33,
            u64::MAX - (1 << 33),
            u64::MAX - (1 << 32),
            u64::MAX,
        ];
        let sizes = [(0.05, 1_000), (0.01, 50_000), (0.01, 10_000_000)];
        let counters: Vec<Counter> = sizes
            .iter()
            .enumerate()
            .map(|(i, &(rate, capacity))| {
                let mut c = Counter::reserve(rate, capacity, u64::MAX).unwrap();
                // Each counter all the ends but one, so that every pair differs.
                for (j, &h) in ends.iter().enumerate() {
                    if j != i {
                        c.add_hash(h).unwrap();
                    }
                }
                assert!(c.is_exact());
                c
            })
            .collect();
        let all: Vec<&Counter> = counters.iter().collect();
        assert_eq!(Counter::union_count(&all), Ok(ends.len() as u64));
        for pair in [[0, 1], [1, 2], [2, 0]] {
            let chosen = [&counters[pair[0]], &counters[pair[1]]];
            assert_eq!(
                Counter::union_count(&chosen),
                Ok(ends.len() as u64),
                "{pair:?}"
            );
        }
    }

    /// An item shared by counters of two sizes whose intervals' starts fall on the two sides
    /// of a token boundary sets two tokens in their union's sketch, which a merge stores: it
    /// counts twice there, and in the count of the two alike, so that the merged key counts
    /// what they did (a count of 3 stored as 4 before the rule). Item 219,898 is such an item
    /// at 1%, one of three among the first 2·10^6 numbers.
    #[test]
    fn an_item_setting_two_tokens_counts_alike_in_a_count_and_a_merge() {
        for (shared, expected) in [(219_898, 4), (219_897, 3)] {
            let a = numbered(0.01, 1_000, [shared, 5]);
            let b = numbered(0.01, 50_000, [shared, 7]);
            assert_eq!(Counter::union_count(&[&a, &b]), Ok(expected), "{shared}");
            let mut merged = Counter::empty_for_union(&[&a, &b]).unwrap();
            merged.absorb_sketches(&[&a, &b], u64::MAX).unwrap();
            assert_eq!(merged.count(), expected, "{shared}: merged");
            let mut into = a.clone();
            into.absorb_sketch(&b, u64::MAX).unwrap();
            assert_eq!(into.count(), expected, "{shared}: into the first");
        }
    }

    /// Across universes, a run of overlapping fingerprints holds as many items as the most one
    /// counter lists in it: two fingerprints of a fine counter within one of a coarse counter
    /// are two items, not one.
    #[test]
    fn a_run_of_overlapping_fingerprints_counts_the_most_one_counter_lists() {
        let coarse_g = Counter::reserve(0.05, 100, u64::MAX).unwrap().geometry;
        let fine_g = Counter::reserve(0.01, 10_000_000, u64::MAX)
            .unwrap()
            .geometry;
        let (coarse_u, fine_u) = (coarse_g.universe(), fine_g.universe());
        assert!(fine_u > 4 * coarse_u, "{fine_u} {coarse_u}");
        // The fine fingerprints whose intervals lie within coarse fingerprint 7's.
        let first = crate::core::hashing::FirstOfReduced::new(coarse_u);
        let within = |f: u64| crate::core::hashing::reduce(first.of(f), fine_u) + 1;
        let coarse = Counter::from_fingerprints(100, 0.05, coarse_g.m, 2, [7, 9].into_iter());
        let fine = Counter::from_fingerprints(
            10_000_000,
            0.01,
            fine_g.m,
            3,
            [within(7), within(7) + 1, within(9)].into_iter(),
        );
        let (coarse, fine) = (coarse.unwrap(), fine.unwrap());
        assert_eq!(Counter::union_count(&[&coarse, &fine]), Ok(3));
        assert_eq!(Counter::union_count(&[&fine, &coarse]), Ok(3));
    }

    /// Keys tied for the largest count, one holding the other's items: the union counts as
    /// the one holding them all, in any order (taking the last of them, a union whose last
    /// was the subset counted its own estimate: 76 one way and 75 the other).
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn keys_tied_for_the_largest_count_count_as_the_one_holding_the_rest() {
        let (small, big) = (numbered(0.01, 100, 1..=75), numbered(0.05, 10, 1..=76));
        assert!(small.is_exact() && big.is_sketch());
        assert_eq!((small.count(), big.count()), (75, 75));
        for sources in [[&small, &big], [&big, &small]] {
            assert_eq!(Counter::union_count(&sources), Ok(75), "{sources:?}");
            let mut merged = Counter::empty_for_union(&sources).unwrap();
            merged.absorb_sketches(&sources, u64::MAX).unwrap();
            assert_eq!(merged.count(), 75);
        }
        assert_eq!(Counter::union_count(&[&small, &big, &small]), Ok(75));
    }

    /// An exact key merged with exact keys of another size whose items it holds (at their
    /// common precision) is left as it is, exact: the union counts as it does.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn an_exact_key_holding_its_sources_items_stays_as_it_is() {
        for (held, subset) in [(1, 1), (200, 80), (260, 80)] {
            let dest = numbered(0.01, 50_000, 1..=held);
            let source = numbered(0.01, 1_000, 1..=subset);
            assert!(dest.is_exact() && source.is_exact());
            assert_eq!(Counter::union_count(&[&dest, &source]), Ok(held));
            let mut merged = dest.clone();
            assert_eq!(merged.absorb_sketches(&[&source], u64::MAX), Ok(false));
            assert_eq!(merged, dest, "{held}, {subset}");
            // One item beyond makes a union of the two.
            let wider = numbered(0.01, 1_000, held..=held + 1);
            assert_eq!(merged.absorb_sketches(&[&wider], u64::MAX), Ok(true));
        }
    }

    /// A union holding a few items beyond its largest key, or a subset of it at a coarser
    /// precision, counts no fewer than that key, and a merge of them counts as the union
    /// does (without the floor, the first trial's one item beyond counted 20,067 against the
    /// key's 20,127).
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_union_never_counts_fewer_than_its_largest_key() {
        let item = |i: u64| i.to_le_bytes();
        for trial in 0..12u64 {
            let base = trial << 32;
            let mut big = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            for i in 0..20_000 {
                big.add(&item(base + i)).unwrap();
            }
            let mut beyond = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            beyond.add(&item(base + (1 << 31))).unwrap();
            let mut coarser = Counter::reserve(0.04, 1_000, u64::MAX).unwrap();
            for i in 0..5_000 {
                coarser.add(&item(base + i * 3)).unwrap();
            }
            for other in [&beyond, &coarser] {
                let union = Counter::union_count(&[&big, other]).unwrap();
                assert!(union >= big.count(), "{trial}: {union} < {}", big.count());
                let mut merged = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
                merged.absorb_sketches(&[&big, other], u64::MAX).unwrap();
                assert_eq!(merged.count(), union, "{trial}");
                let mut into = big.clone();
                into.absorb_sketch(other, u64::MAX).unwrap();
                assert!(into.count() >= big.count(), "{trial}");
            }
        }
    }

    /// A merged key counts what `LC.COUNT` of the destination and its sources did, also when
    /// the destination holds items already and the union holds nothing beyond one of them
    /// (without the shared rule, a counter of one item merged with a default counter of 300
    /// holding it counted 299 where `LC.COUNT` of the two answered 298), and across
    /// precisions and modes.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_merged_key_counts_what_the_count_of_its_sources_did() {
        let item = |i: u64| i.to_le_bytes();
        let fed = |rate: f64, capacity: u64, items: &mut dyn Iterator<Item = u64>| {
            let mut c = Counter::reserve(rate, capacity, u64::MAX).unwrap();
            items.for_each(|i| _ = c.add(&item(i)).unwrap());
            c
        };
        let check = |dest: &Counter, sources: &[&Counter], what: &str| {
            let mut all = vec![dest];
            all.extend_from_slice(sources);
            let count = Counter::union_count(&all).unwrap();
            let mut merged = dest.clone();
            merged.absorb_sketches(sources, u64::MAX).unwrap();
            assert_eq!(merged.count(), count, "{what}");
            // What a merge stores loads again.
            let back = crate::lc::codec::decode(&crate::lc::codec::encode(&merged), u64::MAX);
            assert_eq!(back.map(|b| b.count()), Ok(count), "{what}");
        };
        // A destination of one item within a default counter of 300.
        let big = fed(0.01, 50_000, &mut (0..300));
        check(
            &fed(0.01, 50_000, &mut (0..1)),
            &[&big],
            "subset destination",
        );
        let big = fed(0.01, 50_000, &mut (0..20_000));
        check(&fed(0.01, 50_000, &mut (0..1)), &[&big], "subset of 20,000");
        // Exact counters of two precisions, and a coarse one with a large one.
        let coarse = fed(0.02, 50_000, &mut (1 << 40..(1 << 40) + 1));
        check(
            &coarse,
            &[&fed(0.01, 50_000, &mut (0..76))],
            "two precisions",
        );
        let small = fed(0.05, 100, &mut (1 << 40..(1 << 40) + 1));
        check(
            &small,
            &[&fed(0.01, 1_000_000, &mut (0..2_000))],
            "coarse and large",
        );
        // Random destinations and sources of several geometries and overlaps.
        let mut x = 11;
        let mut draw = |n: u64| {
            crate::core::test_rng::step(&mut x);
            x % n
        };
        let shapes = [
            (0.01, 50_000),
            (0.02, 50_000),
            (0.05, 100),
            (0.01, 1_000_000),
        ];
        let counter = |draw: &mut dyn FnMut(u64) -> u64| {
            let (rate, capacity) = shapes[draw(4) as usize];
            let (start, len) = (
                draw(3) * 1_000,
                [1, 50, 300, 2_000, 6_000][draw(5) as usize],
            );
            fed(rate, capacity, &mut (start..start + len))
        };
        for trial in 0..150 {
            let dest = counter(&mut draw);
            let sources: Vec<Counter> = (0..1 + draw(3)).map(|_| counter(&mut draw)).collect();
            let sources: Vec<&Counter> = sources.iter().collect();
            check(&dest, &sources, &format!("trial {trial}"));
            // Into an empty destination: a new key's (the sources' union geometry), or an
            // existing one of any shape.
            let new = Counter::empty_for_union(&sources).unwrap();
            check(&new, &sources, &format!("trial {trial}, new key"));
            let (rate, capacity) = shapes[draw(4) as usize];
            let empty = Counter::reserve(rate, capacity, u64::MAX).unwrap();
            check(&empty, &sources, &format!("trial {trial}, empty key"));
        }
        // A coarse counter, and a finer one counting more of the same items: the merge
        // counts the finer one's count, whichever comes first.
        let (coarse, fine) = (0..)
            .map(|i| i * 5_000..(i + 1) * 5_000)
            .map(|items| {
                (
                    fed(0.02, 1_000, &mut items.clone()),
                    fed(0.01, 50_000, &mut items.clone()),
                )
            })
            .find(|(coarse, fine)| fine.count() > coarse.count())
            .unwrap();
        for sources in [[&coarse, &fine], [&fine, &coarse]] {
            let new = Counter::empty_for_union(&sources).unwrap();
            check(&new, &sources, "coarse and finer, new key");
            check(
                &Counter::reserve(0.02, 1_000, u64::MAX).unwrap(),
                &sources,
                "coarse and finer, empty coarse key",
            );
        }
    }

    /// A new key whose first source is finer than another source takes the coarser one's
    /// precision, and with it every item: a token list of the finer source as long as the
    /// union's (at the coarser precision) is no sign that the union is that source.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_finer_first_source_as_long_as_the_union_keeps_the_others() {
        let fed = |rate: f64, items: std::ops::Range<u64>| {
            let mut c = Counter::reserve(rate, 50_000, u64::MAX).unwrap();
            items.for_each(|i| _ = c.add(&i.to_le_bytes()).unwrap());
            c
        };
        let fine = fed(0.01, 0..400);
        assert_eq!(fine.mode(), Mode::Tokens);
        // Items beyond the fine source's go into the coarse one until their union lists as
        // many tokens at its precision as the fine source does at its own.
        let mut coarse = fed(0.02, 200..400);
        let long_as_fine = |coarse: &Counter| {
            let p = coarse.geometry.precision;
            match Counter::union_indicators(&[&fine, coarse], p, 8_000) {
                Ok(Indicators::Tokens(t)) => t.len() as u64 == fine.header().count,
                _ => false,
            }
        };
        for i in 400u64..2_000 {
            coarse.add(&i.to_le_bytes()).unwrap();
            if long_as_fine(&coarse) {
                break;
            }
        }
        assert!(long_as_fine(&coarse), "a union as long as the fine source");
        assert!(coarse.geometry.precision < fine.geometry.precision);
        let sources = [&fine, &coarse];
        let mut new = Counter::empty_for_union(&sources).unwrap();
        new.absorb_sketches(&sources, u64::MAX).unwrap();
        assert_eq!(new.geometry.precision, coarse.geometry.precision);
        assert_eq!(new.count(), Counter::union_count(&sources).unwrap());
    }

    /// A key holding every indicator of finer keys at its own precision (a merge of them
    /// made it) counts as it does with them, and merging them into it again changes nothing,
    /// as `PFMERGE` of a HyperLogLog's subsets into it. Estimated afresh from its registers,
    /// a 1% key merged from a 0.1% key of 20,000 items counted 1.1% more at the first
    /// re-merge.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn merging_finer_keys_again_changes_nothing() {
        for (coarse_rate, fine_rate, n) in [
            (0.01, 0.001, 20_000),
            (0.01, 0.002, 20_000),
            (0.01, 0.0004, 50_000),
            (0.02, 0.005, 3_000),
            (0.3, 0.01, 5_000),
        ] {
            let one = numbered(coarse_rate, 50_000, 0..1);
            let fine = numbered(fine_rate, 50_000, 0..n);
            let mut merged = Counter::empty_for_union(&[&one, &fine]).unwrap();
            merged.absorb_sketches(&[&one, &fine], u64::MAX).unwrap();
            let stored = crate::lc::codec::encode(&merged);
            let what = format!("{coarse_rate}, {fine_rate}, {n}");
            assert_eq!(
                Counter::union_count(&[&merged, &fine]),
                Ok(merged.count()),
                "{what}"
            );
            assert_eq!(merged.absorb_sketch(&fine, u64::MAX), Ok(false), "{what}");
            assert!(crate::lc::codec::encode(&merged) == stored, "{what}");
        }
    }

    /// A new key merged from the same sources is the same value in any order of them. A
    /// finer first source gave the new key its geometry, and the union, at a coarser
    /// source's precision, was then estimated afresh where the other order copied that
    /// source: the same count, another variance (`LC.INFO`'s standard error).
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_new_keys_merge_is_the_same_in_any_order() {
        let merged = |sources: &[&Counter]| {
            let mut new = Counter::empty_for_union(sources).unwrap();
            new.absorb_sketches(sources, u64::MAX).unwrap();
            crate::lc::codec::encode(&new)
        };
        let coarse = numbered(0.02, 50_000, 0..3_000);
        let fine = numbered(0.005, 50_000, 1_000..1_267);
        assert!(merged(&[&coarse, &fine]) == merged(&[&fine, &coarse]));

        let shapes = [
            (0.01, 50_000),
            (0.02, 50_000),
            (0.005, 50_000),
            (0.05, 100),
            (0.01, 1_000_000),
        ];
        let mut x = 5;
        let mut draw = |n: u64| {
            crate::core::test_rng::step(&mut x);
            x % n
        };
        for trial in 0..120 {
            let sources: Vec<Counter> = (0..2 + draw(2))
                .map(|_| {
                    let (rate, capacity) = shapes[draw(shapes.len() as u64) as usize];
                    let start = draw(4) * 500;
                    let len = [1, 100, 267, 1_000, 3_000, 20_000][draw(6) as usize];
                    numbered(rate, capacity, start..start + len)
                })
                .collect();
            let first: Vec<&Counter> = sources.iter().collect();
            let mut reversed = first.clone();
            reversed.reverse();
            let mut rotated = first.clone();
            rotated.rotate_left(1);
            let want = merged(&first);
            assert!(merged(&reversed) == want, "trial {trial}, reversed");
            assert!(merged(&rotated) == want, "trial {trial}, rotated");
        }
    }

    /// An empty key finer than the sources holding items becomes what a new key merged from
    /// them does: their union is coarser than its size, which then binds nothing. Exact
    /// sources of one size stay exact (they became a token list), one sketch is copied; a
    /// refused union leaves the key as it was.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn an_empty_key_finer_than_its_sources_merges_as_a_new_key() {
        let sources = [
            numbered(0.01, 50_000, 0..3),
            numbered(0.01, 50_000, 0..200),
            numbered(0.02, 50_000, 0..3_000),
            numbered(0.01, 50_000, 0..20_000),
        ];
        for chosen in [&[0][..], &[0, 1], &[1, 2], &[2], &[3], &[0, 3]] {
            let sources: Vec<&Counter> = chosen.iter().map(|&i| &sources[i]).collect();
            let mut new = Counter::empty_for_union(&sources).unwrap();
            new.absorb_sketches(&sources, u64::MAX).unwrap();
            let mut empty = Counter::reserve(0.001, 50_000, u64::MAX).unwrap();
            assert!(empty.absorb_sketches(&sources, u64::MAX).unwrap());
            assert!(empty == new, "{chosen:?}");
        }
        let mut empty = Counter::reserve(0.001, 50_000, u64::MAX).unwrap();
        empty.absorb_sketch(&sources[0], u64::MAX).unwrap();
        assert_eq!((empty.mode(), empty.count()), (Mode::Exact, 3));
        // Registers refused by the limit leave the key as it was, its size included.
        let fresh = Counter::reserve(0.001, 50_000, u64::MAX).unwrap();
        let mut empty = fresh.clone();
        assert!(empty.absorb_within(&sources[3], 1_024).is_err());
        assert!(empty == fresh);
    }

    /// A key a merge brought down from a finer key counts as that key did in its unions with
    /// finer keys: the union takes its count for the items of its precision (at least the
    /// largest key's there, where several hold items). Its registers keep as unset the parts
    /// the finer key forgot, and estimated afresh from them, a 2% key merged from a 1% key of
    /// 30,000 items, united with another of 5,000, counted 6.5% low on average, and 7% low
    /// with a 2% key of 50 of its items too. A finer key sharing items with it is counted
    /// again where it stores them as unset: the union then counts somewhat high.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_key_merged_down_from_a_finer_one_counts_in_unions_as_it_did() {
        let trials = 8;
        // (its other key's items from, to; with a subset key at its precision; the limit)
        let cases = [
            (30_000, 35_000, false, 0.015),
            (30_000, 35_000, true, 0.015),
            (15_000, 45_000, false, 0.03),
        ];
        for (from, to, subset, limit) in cases {
            let mut errors = 0.0;
            for t in 0..trials {
                let base = t * 100_000;
                let fine = numbered(0.01, 50_000, base..base + 30_000);
                let mut coarse = Counter::reserve(0.02, 50_000, u64::MAX).unwrap();
                coarse.absorb_sketch(&fine, u64::MAX).unwrap();
                assert_eq!(coarse.count(), fine.count());
                let other = numbered(0.01, 50_000, base + from..base + to);
                let small = numbered(0.02, 50_000, base..base + 50);
                let keys: &[&Counter] = match subset {
                    true => &[&coarse, &small, &other],
                    false => &[&coarse, &other],
                };
                let union = Counter::union_count(keys).unwrap();
                errors += union as f64 / to.max(30_000) as f64 - 1.0;
            }
            let bias = errors / trials as f64;
            assert!(
                bias.abs() < limit,
                "{from}..{to}, {subset}: mean error {bias}"
            );
        }
    }

    /// A key merged from several finer keys of one precision holds what each of them knew
    /// set. United first, their registers forgot levels below their windows that one of them
    /// knew, and merged again, that one added them: a 5% key merged from two 0.5% keys of
    /// 100,000 and 50,000 items and one of its own of 3,600 counted 2.2% more.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn merging_one_of_several_finer_keys_again_changes_nothing() {
        let named = |rate: f64, capacity: u64, items: std::ops::Range<u64>| {
            let mut c = Counter::reserve(rate, capacity, u64::MAX).unwrap();
            items.for_each(|i| _ = c.add(format!("L20_33:{i}").as_bytes()).unwrap());
            c
        };
        let k0 = named(0.005, 50_000, 0..100_000);
        let k1 = named(0.005, 50_000, 100_000..150_000);
        let k2 = named(0.05, 100, 150_000..153_600);
        let sources = [&k0, &k1, &k2];
        let mut merged = Counter::empty_for_union(&sources).unwrap();
        merged.absorb_sketches(&sources, u64::MAX).unwrap();
        let stored = crate::lc::codec::encode(&merged);
        for (i, k) in [&k0, &k1].into_iter().enumerate() {
            assert_eq!(
                Counter::union_count(&[&merged, k]),
                Ok(merged.count()),
                "k{i}"
            );
            let mut again = merged.clone();
            assert_eq!(again.absorb_sketch(k, u64::MAX), Ok(false), "k{i}");
            assert!(crate::lc::codec::encode(&again) == stored, "k{i}");
        }
    }

    /// A many-source merge in one pass gives the counter merging them one by one gives, and
    /// one that would need registers beyond the limit absorbs them one by one up to the
    /// source refused, as a merge of fewer sources would have.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn many_source_merge_is_the_merge_one_by_one() {
        let (all, _) = counters(40, 11);
        let refs: Vec<&Counter> = all.iter().collect();
        let mut one_by_one = all[0].try_clone().unwrap();
        for c in &refs[1..] {
            one_by_one.absorb(c).unwrap();
        }
        let mut at_once = all[0].try_clone().unwrap();
        let (changed, done, error) = at_once.absorb_all_within(&refs[1..], u64::MAX);
        assert!(changed && error.is_none());
        assert_eq!(done, refs.len() - 1);
        assert_eq!(at_once, one_by_one);
        // Tokens of a few hundred items each: their union fits a token list for a while.
        let small: Vec<Counter> = (0..8u64)
            .map(|k| {
                let mut c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
                for i in 0..600 {
                    c.add(&(k * 1_000 + i).to_le_bytes()).unwrap();
                }
                c
            })
            .collect();
        let refs: Vec<&Counter> = small.iter().collect();
        let mut dest = small[0].try_clone().unwrap();
        let (_, done, error) = dest.absorb_all_within(&refs[1..], 1_024);
        assert!(matches!(error, Some(LcError::TooLarge { .. })));
        assert!(done > 0 && done < refs.len() - 1, "{done}");
        let mut expected = small[0].try_clone().unwrap();
        for c in &refs[1..=done] {
            expected.absorb(c).unwrap();
        }
        assert_eq!(dest, expected);
        assert_eq!(dest.mode(), Mode::Tokens);
    }

    /// Tokens put together through level bits give the indicators a sort gives: the token
    /// list while it fits one, else the same registers; over exact sets, token lists of two
    /// precisions, and unions on both sides of the token limit.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn collected_union_is_the_sorted_one() {
        let exact = |k: u64, items: u64| {
            let mut c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            for i in 0..items {
                c.add(&(k << 40 | i).to_le_bytes()).unwrap();
            }
            c
        };
        let mut cases: Vec<Vec<Counter>> = vec![
            vec![exact(1, 100), exact(2, 150)],
            vec![exact(1, 100), exact(3, 1_000)],
        ];
        for (n, seed) in [(1, 4), (2, 1), (3, 2), (8, 3)] {
            let (mut all, _) = counters(n, seed);
            all.push(exact(9, 120));
            cases.push(all);
        }
        let (mut tokens, mut registers) = (0, 0);
        for all in &cases {
            let refs: Vec<&Counter> = all.iter().collect();
            let p = refs.iter().map(|c| c.geometry.precision).min().unwrap();
            let sorted = Counter::sorted_union(&refs, p).unwrap();
            match &sorted {
                Indicators::Tokens(_) => tokens += 1,
                Indicators::Registers(..) => registers += 1,
            }
            let listed = refs.iter().map(|c| c.header().count).sum();
            assert_eq!(Counter::collected_union(&refs, p, listed).unwrap(), sorted);
        }
        assert!(tokens >= 2 && registers >= 2, "{tokens} {registers}");
    }

    /// The AVX2 build's collection (token lists decoded a chunk at a time) gives the registers
    /// of the baseline build's, over token lists of two precisions, registers, an exact set
    /// and lists shorter and longer than a chunk.
    #[test]
    #[cfg_attr(
        all(miri, target_feature = "avx2"),
        ignore = "too slow under Miri with AVX2"
    )]
    fn avx2_collection_is_the_baseline_one() {
        #[cfg(target_arch = "x86_64")]
        if ef_chunks::usable() {
            let (mut all, _) = counters(30, 5);
            for (k, items) in [(1u64, 100u64), (2, 8_000), (3, 40)] {
                let mut c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
                for i in 0..items {
                    c.add(&(k << 40 | i).to_le_bytes()).unwrap();
                }
                all.push(c);
            }
            let modes: Vec<Mode> = all.iter().map(|c| c.mode()).collect();
            assert!(modes.contains(&Mode::Registers) && modes.contains(&Mode::Tokens));
            assert!(all.iter().any(|c| c.is_exact()));
            let refs: Vec<&Counter> = all.iter().collect();
            let registers = |i: Indicators| match i {
                Indicators::Registers(r, _) => r,
                Indicators::Tokens(_) => panic!("a many-key collection gives registers"),
            };
            let baseline = registers(Counter::collect_registers::<false>(&refs, 11).unwrap());
            // SAFETY: the CPU has the instructions (checked above).
            let avx2 = registers(unsafe { Counter::union_registers_avx2(&refs, 11) }.unwrap());
            assert_eq!(avx2, baseline);
            assert!(baseline.iter().filter(|&&r| r != 0).count() > 2_000);
            return;
        }
        eprintln!("no AVX2 here: nothing compared");
    }

    /// A merge of exact counters listing more fingerprints than it sorts: a union within the
    /// exact limit stays exact (copies of a few sets); a larger one is their sketch union,
    /// within its error, and asks for no list of all they hold.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn exact_merges_past_the_sorting_bound_gather_only_the_exact_limit() {
        let counter_of = |items: std::ops::Range<u64>| {
            let mut c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
            items.for_each(|i| {
                c.add(&i.to_le_bytes()).unwrap();
            });
            c
        };
        // 60 copies each of 3 counters of 80 items: 14,400 listed, 240 distinct.
        let copies: Vec<Counter> = (0..180)
            .map(|k| counter_of(k % 3 * 80..k % 3 * 80 + 80))
            .collect();
        let refs: Vec<&Counter> = copies.iter().collect();
        let mut merged = counter_of(0..0);
        assert!(merged
            .absorb_sorting_at_most(&refs, u64::MAX, 1_000)
            .unwrap());
        assert!(merged.is_exact());
        assert_eq!(merged.count(), 240);
        // 200 counters of 250 items: 50,000 distinct.
        let many: Vec<Counter> = (0..200)
            .map(|k| counter_of(k * 250..k * 250 + 250))
            .collect();
        let refs: Vec<&Counter> = many.iter().collect();
        let mut merged = counter_of(0..0);
        assert!(merged
            .absorb_sorting_at_most(&refs, u64::MAX, 1_000)
            .unwrap());
        assert!(!merged.is_exact());
        let error = merged.count() as f64 / 50_000.0 - 1.0;
        assert!(
            error.abs() < 4.0 * ml_relative_error(11),
            "{}",
            merged.count()
        );
        // Within the bound, the same counters are sorted and counted exactly.
        let mut sorted = counter_of(0..0);
        assert!(sorted.absorb_sketches(&refs, u64::MAX).unwrap());
        assert_eq!(
            sorted.count(),
            distinct_fingerprints(&refs).unwrap().len() as u64
        );
    }

    /// Exact counters of other sizes than their union's (other capacities, other error rates)
    /// set in its level bits the tokens `tokens_at` lists, whichever build collects them.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn exact_counters_of_other_sizes_set_the_tokens_they_list() {
        let mut x = 5u64;
        let all: Vec<Counter> = (0..120)
            .map(|i| {
                let (rate, capacity) = [(0.01, 50_000), (0.01, 10_000), (0.02, 1_000_000)][i % 3];
                let mut c = Counter::reserve(rate, capacity, u64::MAX).unwrap();
                for _ in 0..80 {
                    crate::core::test_rng::step(&mut x);
                    c.add(&(x >> 20).to_le_bytes()).unwrap();
                }
                assert!(c.is_exact());
                c
            })
            .collect();
        let refs: Vec<&Counter> = all.iter().collect();
        let p = refs.iter().map(|c| c.geometry.precision).min().unwrap();
        let mut want = LevelBits::new(p).unwrap();
        for c in &refs {
            c.tokens_at(p).into_iter().for_each(|t| want.set(t));
        }
        let want = Indicators::Registers(want.registers().collect(), None);
        assert_eq!(Counter::collect_registers::<false>(&refs, p).unwrap(), want);
        #[cfg(target_arch = "x86_64")]
        if ef_chunks::usable() {
            // SAFETY: the CPU has the instructions.
            let avx2 = unsafe { Counter::union_registers_avx2(&refs, p) };
            assert_eq!(avx2.unwrap(), want);
        }
    }

    /// A union of empty counters of other sizes is an empty counter in exact mode, which
    /// loads: it was once a token list of none, which no load accepts (found by the
    /// `lc_value` fuzz target; through the server, `LC.MERGE` of two empty counters made an
    /// RDB that would not load).
    #[test]
    fn unions_of_empty_counters_stay_empty_and_load() {
        let new = |rate: f64, capacity: u64| Counter::reserve(rate, capacity, u64::MAX).unwrap();
        for (a, b) in [
            (new(0.01, 100), new(0.02, 100)),
            (new(0.3, 1), new(0.001, 1)),
        ] {
            for (mut union, other) in [(a.clone(), &b), (b.clone(), &a)] {
                union.absorb(other).unwrap();
                assert_eq!((union.mode(), union.count()), (Mode::Exact, 0));
                let bytes = crate::lc::codec::encode(&union);
                assert_eq!(
                    crate::lc::codec::decode(&bytes, u64::MAX),
                    Ok(union.clone())
                );
                // Absorbing another empty counter changes nothing more.
                assert_eq!(union.absorb(other), Ok(false));
            }
        }
    }

    /// Empty counters leave every union as it is, whatever their size: an exact counter of
    /// 100 items counted or merged with empty counters of other sizes stays exact at 100 (it
    /// counted 99 once, a sketch at the smaller precision), and sketches keep their own
    /// precision. An empty destination's own size still binds a merge into it.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn empty_counters_leave_unions_as_they_are() {
        let mut x = 41;
        let fed = |rate: f64, capacity: u64, n: u64, x: &mut u64| {
            let mut c = Counter::reserve(rate, capacity, u64::MAX).unwrap();
            (0..n).for_each(|_| {
                c.add_hash(crate::core::test_rng::step(x)).unwrap();
            });
            c
        };
        let empties = [(0.01, 1_000), (0.05, 100), (0.001, 100_000), (0.3, 1)]
            .map(|(rate, capacity)| fed(rate, capacity, 0, &mut x));
        let held = [
            fed(0.01, 50_000, 100, &mut x),
            fed(0.01, 1_000, 3_000, &mut x),
            fed(0.01, 1_000, 30_000, &mut x),
        ];
        assert_eq!(
            held.each_ref().map(|c| c.mode()),
            [Mode::Exact, Mode::Tokens, Mode::Registers]
        );
        for c in &held {
            let mut all = vec![c];
            for empty in &empties {
                assert_eq!(Counter::union_count(&[c, empty]), Ok(c.count()));
                assert_eq!(Counter::union_count(&[empty, c]), Ok(c.count()));
                let mut merged = c.clone();
                assert_eq!(merged.absorb(empty), Ok(false));
                assert_eq!(&merged, c);
                all.push(empty);
            }
            assert_eq!(Counter::union_count(&all), Ok(c.count()));
            let mut merged = c.clone();
            let (changed, done, error) = merged.absorb_all_within(&all[1..], u64::MAX);
            assert_eq!((changed, done, error, &merged), (false, 4, None, c));
            // A new destination takes the geometry of the sources holding items.
            let sources: Vec<&Counter> = all[1..].iter().copied().chain([c]).collect();
            let mut new = Counter::empty_for_union(&sources).unwrap();
            assert_eq!(new.geometry, c.geometry);
            // It becomes a copy of the one source holding items, its count included (a
            // sketch's was re-estimated: 300 items counted 300, their merge 302).
            assert_eq!(new.absorb_all_within(&sources, u64::MAX), (true, 5, None));
            assert_eq!((&new, new.count()), (c, c.count()));
            assert_eq!(crate::lc::codec::encode(&new), crate::lc::codec::encode(c));
        }
        assert_eq!(Counter::union_count(&empties.each_ref()), Ok(0));
        // An empty destination of a coarser precision keeps it.
        let mut coarse = empties[1].clone();
        assert!(coarse.absorb(&held[2]).unwrap());
        assert_eq!(coarse.geometry, empties[1].geometry);
    }

    /// A merge of exact counters whose union holds more fingerprints than an exact block can
    /// count (16 bits) takes their exact number as its estimate and every item's token. It
    /// once kept the number modulo 2^16 and the tokens of that many.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn merged_exact_counters_past_an_exact_blocks_count_stay_exact() {
        let each = 250;
        let all: Vec<Counter> = (0..300u64)
            .map(|k| {
                let mut c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
                for i in 0..each {
                    c.add(&(k * each + i).to_le_bytes()).unwrap();
                }
                assert!(c.is_exact());
                c
            })
            .collect();
        let refs: Vec<&Counter> = all.iter().collect();
        let distinct = distinct_fingerprints(&refs).unwrap().len() as u64;
        assert!(distinct > 1 << 16);
        let mut merged = all[0].try_clone().unwrap();
        assert!(merged.absorb_sketches(&refs[1..], u64::MAX).unwrap());
        assert_eq!(merged.count(), distinct);
        // Its tokens are every item's: one more item changes it as it would any sketch of them.
        let mut one_by_one = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
        for i in 0..300 * each {
            one_by_one.add(&i.to_le_bytes()).unwrap();
        }
        let union_of = |c: &Counter| Counter::union_count(&[c, &one_by_one]).unwrap();
        let error = union_of(&merged) as f64 / union_of(&one_by_one) as f64 - 1.0;
        assert!(error.abs() < 0.001, "{error}");
    }

    /// Every build of the spreading gives the tokens of one by one, at every precision, so
    /// a count does not depend on the CPU.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn spread_tokens_agree_on_every_build() {
        let mut x = 7u64;
        let fingerprints: Vec<u64> = (0..10_000)
            .map(|i| {
                crate::core::test_rng::step(&mut x);
                // Small and large values, and the top of a 40-bit universe.
                [x >> 24, x >> 60, (1 << 40) - 1 - (x >> 50)][i % 3]
            })
            .collect();
        for p in MIN_PRECISION..=MAX_PRECISION {
            let want: Vec<u32> = fingerprints
                .iter()
                .map(|&f| token_value(spread(f), p) as u32)
                .collect();
            let mut got = Vec::new();
            spread_tokens(&fingerprints, &mut got, p);
            assert_eq!(got, want, "p {p}");
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("lzcnt") {
                    got.clear();
                    // SAFETY: the CPU has the instruction.
                    unsafe { spread_tokens_lzcnt(&fingerprints, &mut got, p) };
                    assert_eq!(got, want, "lzcnt, p {p}");
                }
                if crate::lc::tokens::wide_tokens_usable() {
                    got.clear();
                    // SAFETY: the CPU has the instructions.
                    unsafe { spread_tokens_avx512(&fingerprints, &mut got, p) };
                    assert_eq!(got, want, "avx512, p {p}");
                }
                if crate::lc::token_lanes::usable(p) {
                    got.clear();
                    // SAFETY: the CPU has AVX2 (`usable` says so).
                    unsafe { spread_tokens_avx2(&fingerprints, &mut got, p) };
                    assert_eq!(got, want, "avx2, p {p}");
                }
            }
        }
    }

    /// Exact counters of one geometry: counted exactly while they list few fingerprints in
    /// all or their union is within one's exact limit (many copies of few items); past that,
    /// estimated within the sketch's error (`ml_relative_error(11)`, 0.8%; 4σ allowed),
    /// whether their union is middling or large.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn many_exact_counters_count_exactly_while_few_then_estimate() {
        let limit = SORTED_UNION * token_limit(11);
        // (counters, items each, drawn from, seed): few in all; many whose union is within
        // the exact limit (267), a token list's worth (listed as tokens), middling and large
        // (registers).
        for (n, each, universe, seed) in [
            (100, 100, 1_000_000u64, 1u64),
            (3_000, 100, 150, 2),
            (3_000, 100, 265, 6),
            (3_000, 100, 2_000, 7),
            (3_000, 100, 40_000, 3),
            (3_000, 100, 10_000_000, 4),
            (1_500, 200, 10_000_000, 5),
        ] {
            let mut x = seed;
            let mut truth = std::collections::HashSet::new();
            let all: Vec<Counter> = (0..n)
                .map(|_| {
                    let mut c = Counter::reserve(0.01, 50_000, u64::MAX).unwrap();
                    for _ in 0..each {
                        crate::core::test_rng::step(&mut x);
                        let item = (x >> 16) % universe;
                        c.add(&item.to_le_bytes()).unwrap();
                        truth.insert(item);
                    }
                    assert!(c.is_exact());
                    c
                })
                .collect();
            let refs: Vec<&Counter> = all.iter().collect();
            let listed: u64 = refs.iter().map(|c| c.header().count).sum();
            let count = Counter::union_count(&refs).unwrap();
            let within_one = truth.len() as u64 <= refs[0].geometry.exact_limit;
            let truth = truth.len() as f64;
            if listed <= limit || within_one {
                assert_eq!(count as f64, truth);
            } else {
                let error = count as f64 / truth - 1.0;
                assert!(
                    error.abs() < 4.0 * ml_relative_error(11),
                    "{n}×{each}: {count} {truth}"
                );
            }
        }
    }

    /// A many-key count (straight to registers) is the count of the counters merged one by
    /// one (token lists, then registers, register-wise), and right.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn many_key_count_is_the_merged_count() {
        let (all, truth) = counters(40, 7);
        let refs: Vec<&Counter> = all.iter().collect();
        let listed: u64 = refs.iter().map(|c| c.header().count).sum();
        assert!(listed > SORTED_UNION * token_limit(11));
        let mut merged = all[1].try_clone().unwrap();
        for c in &all {
            merged.absorb(c).unwrap();
        }
        let count = Counter::sketch_union_count(&refs).unwrap();
        assert_eq!(count, merged.count());
        assert!(
            (count as f64 / truth as f64 - 1.0).abs() < 0.03,
            "{count} {truth}"
        );
    }
}

#[cfg(test)]
mod reduction_tests {
    use super::*;
    use crate::core::test_rng::step;

    /// A counter of `rate` and one of 0.01 fed the same `n` random hashes.
    fn fine_and_direct(rate: f64, n: u64, x: &mut u64) -> (Counter, Counter) {
        let mut fine = Counter::reserve(rate, 100, u64::MAX).unwrap();
        let mut direct = Counter::reserve(0.01, 100, u64::MAX).unwrap();
        for _ in 0..n {
            let h = step(x);
            fine.add_hash(h).unwrap();
            direct.add_hash(h).unwrap();
        }
        assert!(fine.mode() == Mode::Registers);
        assert!(fine.geometry.precision > direct.geometry.precision);
        (fine, direct)
    }

    /// A finer counter united with a coarser one counts within the coarser one's error, on
    /// average too, whether the coarser one is empty, holds the same items or the other half
    /// of them. Reduced to the coarser precision, the finer one counted 1.4% low with an
    /// empty one and 1.2% high with the same items; one likelihood over both, 12% low with
    /// the other half.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_finer_counter_unites_with_a_coarser_one_without_bias() {
        let mut x = 11;
        for (rate, n) in [(0.005, 50_000u64), (0.0025, 200_000)] {
            let trials = 12;
            let mut errors = [(0.0, 0.0); 3];
            for _ in 0..trials {
                let (fine, direct) = fine_and_direct(rate, n, &mut x);
                let empty = Counter::reserve(0.01, 100, u64::MAX).unwrap();
                // Halves of other items: a finer counter of one, a 1% counter of the other.
                let mut halves = [rate, 0.01].map(|r| Counter::reserve(r, 100, u64::MAX).unwrap());
                for i in 0..n {
                    halves[(i % 2) as usize].add_hash(step(&mut x)).unwrap();
                }
                let [half, other_half] = &halves;
                let unions: [[&Counter; 2]; 3] =
                    [[&fine, &empty], [&fine, &direct], [half, other_half]];
                for (e, [a, b]) in errors.iter_mut().zip(unions) {
                    let union = Counter::union_count(&[a, b]).unwrap();
                    // Merged into `b`, whose size binds the merge even when it is empty.
                    let mut merged = b.clone();
                    let changed = merged.absorb(a).unwrap();
                    let error = merged.count() as f64 / n as f64 - 1.0;
                    (e.0, e.1) = (e.0 + error, e.1 + error * error);
                    // The count leaves an empty counter out; a merge that changes a destination
                    // holding items counts as the count does (one that does not keeps its
                    // running estimate), and its running state loads.
                    if b.holds_nothing() {
                        assert_eq!(union, a.count());
                    } else if changed {
                        assert_eq!(merged.count(), union);
                    }
                    let bytes = crate::lc::codec::encode(&merged);
                    assert_eq!(crate::lc::codec::decode(&bytes, u64::MAX), Ok(merged));
                }
            }
            for (shape, (sum, squares)) in errors.iter().enumerate() {
                let (bias, rmse) = (sum / trials as f64, (squares / trials as f64).sqrt());
                assert!(bias.abs() < 0.008, "{rate} {n}, union {shape}: bias {bias}");
                assert!(rmse < 0.013, "{rate} {n}, union {shape}: RMSE {rmse}");
            }
        }
    }

    /// A counter of `n` random hashes at `rate`.
    fn fed(rate: f64, n: u64, x: &mut u64) -> Counter {
        let mut c = Counter::reserve(rate, 1_000, u64::MAX).unwrap();
        (0..n).for_each(|_| {
            c.add_hash(step(x)).unwrap();
        });
        c
    }

    /// Merges across precisions store what they know, not what their registers forgot:
    /// taking those parts as set made merged counters claim more set indicators than their
    /// count, which no load accepted (a 0.0025 counter of 3,000 items merged into an empty
    /// 0.005 one: 3,097 set, count 3,008), and recounts of them 2–4% high.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn merges_across_precisions_load_and_recount_within_their_error() {
        let mut x = 29;
        let loads = |c: &Counter| {
            let bytes = crate::lc::codec::encode(c);
            assert_eq!(crate::lc::codec::decode(&bytes, u64::MAX).as_ref(), Ok(c));
        };
        for (fine, coarse, n) in [(0.0025, 0.005, 3_000u64), (0.0004, 0.001, 25_000)] {
            let mut merged = fed(coarse, 0, &mut x);
            merged.absorb(&fed(fine, n, &mut x)).unwrap();
            loads(&merged);
        }
        let mut into_finer = fed(0.0004, 30_000, &mut x);
        into_finer.absorb(&fed(0.001, 1_000, &mut x)).unwrap();
        loads(&into_finer);
        // A 0.0004 counter and a 1% one of other items, merged, then merged again into an
        // empty counter (which counts what the first merge stored, not what it knew): within
        // the 1% counter's error. Counted with the empty counter, the merge counts as alone.
        let (trials, mut sum) = (4, 0.0);
        for _ in 0..trials {
            let mut merged = fed(0.0004, 20_000, &mut x);
            merged.absorb(&fed(0.01, 20_000, &mut x)).unwrap();
            loads(&merged);
            let empty = fed(0.01, 0, &mut x);
            let count = Counter::union_count(&[&merged, &empty]).unwrap();
            assert_eq!(count, merged.count());
            let mut copy = empty.clone();
            assert!(copy.absorb(&merged).unwrap());
            let recount = copy.count();
            let error = recount as f64 / 40_000.0 - 1.0;
            assert!(error.abs() < 0.025, "{recount}");
            sum += error;
        }
        assert!(
            (sum / trials as f64).abs() < 0.01,
            "mean {}",
            sum / trials as f64
        );
    }
}

#[cfg(test)]
mod standard_error_tests {
    use super::*;
    use crate::core::test_rng::step;

    /// A merge's `Standard error` is that of its count: the RMSE of merges of two halves of
    /// n items, where it was once the Poisson variance's 1/√n (2.3% at 2,000 items, for a
    /// measured 0.4%).
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_merges_standard_error_is_its_counts() {
        let mut x = 21;
        for n in [2_000u64, 20_000] {
            let (trials, mut squares, mut reported) = (30, 0.0, 0.0);
            for _ in 0..trials {
                let mut halves = [0, 1].map(|_| Counter::reserve(0.01, 100, u64::MAX).unwrap());
                for i in 0..n {
                    halves[(i % 2) as usize].add_hash(step(&mut x)).unwrap();
                }
                let [mut merged, other] = halves;
                merged.absorb(&other).unwrap();
                squares += (merged.count() as f64 / n as f64 - 1.0).powi(2);
                reported += merged.standard_error();
            }
            let (rmse, reported) = ((squares / trials as f64).sqrt(), reported / trials as f64);
            assert!(
                reported > 0.6 * rmse && reported < 1.6 * rmse,
                "{n}: reported {reported}, measured {rmse}"
            );
        }
    }
}

#[cfg(test)]
mod reduced_merge_tests {
    use super::*;
    use crate::core::test_rng::step;

    /// Merges of finer counters just past their token lists (where their registers hold a
    /// few items each, and the forgotten levels a merge stores as set weigh most against its
    /// estimate) into coarser ones load again: their running state is one a load accepts.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn merges_of_finer_registers_load_again() {
        let (mut x, mut merges) = (5, 0);
        for rate in [0.007, 0.005, 0.0025, 0.001, 0.0005] {
            let mut fine = Counter::reserve(rate, 100, u64::MAX).unwrap();
            let start = fine.geometry.token_limit;
            for n in 0..start * 6 {
                fine.add_hash(step(&mut x)).unwrap();
                if n > start && n % (start / 2) == 0 {
                    for coarse in [0.01, 0.05] {
                        let mut merged = Counter::reserve(coarse, 100, u64::MAX).unwrap();
                        merged.absorb(&fine).unwrap();
                        let bytes = crate::lc::codec::encode(&merged);
                        let back = crate::lc::codec::decode(&bytes, u64::MAX);
                        assert_eq!(back, Ok(merged), "{rate} into {coarse} at {n}");
                        merges += 1;
                    }
                }
            }
            assert_eq!(fine.mode(), Mode::Registers, "{rate}");
        }
        assert!(merges >= 50, "{merges}");
    }
}
