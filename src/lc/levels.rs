//! The level sketch a counter turns into past its exact set: what an item contributes, the
//! probabilities the estimators need, and the two estimators.
//!
//! # Items as tokens (index, level)
//!
//! A sketch of precision `p` has `r = 2^p` registers. An item's `h1` (crate::core::hashing)
//! is read from its top bit down:
//!
//! ```text
//!     [ s : 2 bits ][ index : p bits ][ rest : 62 − p bits ]
//!     j = min(leading zeros of rest, c),   c = 62 − p
//!     level k = 4·j + s + 1                (1 ..= 4c + 4)
//! ```
//!
//! so `P(k) = 2^−(j+3)` for `j < c` and `2^−(c+2)` for `j = c`: four sub-levels per halving of
//! the probability, the `t = 2` of ExaLogLog (Ertl, EDBT 2025). The token `(index, k)` says
//! "indicator `k` of register `index` is set". The sketch's whole state is the set of its
//! indicators: a pure function of the set of items. `s` comes first so that a fingerprint of
//! `h1`'s top bits (exact mode) gives the item's token, and so that dropping the last index
//! bit (precision `p − 1`) keeps `s` and turns the level into `s + 1` (bit 1) or `k + 4`
//! (bit 0): sketches of every precision combine at the smaller one.
//!
//! # Registers
//!
//! A register keeps its highest level `K` (bits 19–26, 0 when empty) and whether each of the
//! 19 levels below it is set (bit `i − 1` for level `K − i`); levels further down are
//! forgotten. Exactly the ExaLogLog register with `t = 2`, `d = 19`, in 27 bits. Windows of
//! 16 to 24 levels give about the same memory-variance product (≈ 3.7 for maximum
//! likelihood, the smallest near `d = 20`); 19 is the widest whose `2^11` registers (the 1%
//! default) and the block's header fit a 7 KiB allocation (`d = 20` takes 8 KiB, `d = 24`
//! 10 KiB).
//!
//! # Estimators
//!
//! An indicator `(i, k)` is set by a given item with probability `w_k = P(k)/r`, a dyadic
//! rational: kept as an integer in units of `2^−64` (`weight`), sums of them are exact in
//! `u128`. With `n` distinct items, Poissonized, each indicator is set with probability
//! `1 − e^{−n·w_k}`, independently. Over the indicators the state knows (set: `β_k` of them
//! at level `k`; unset: their weights sum to `μ`, which is also the probability that the
//! next new item changes the state), the log-likelihood is
//!
//! ```text
//!     ln L(n) = −n·μ + Σ_k β_k · ln(1 − e^{−n·w_k})
//! ```
//!
//! concave in `n`; the maximum-likelihood estimate solves `Σ_k β_k·w_k / (e^{n·w_k} − 1) = μ`
//! (`ml_estimate`, bisection on `ln n`, whose steps far from the root take their side from
//! a root found by Newton's method: `sure_signs`) and its variance is taken as `1/I(n̂) − n̂`,
//! `I` the observed information `Σ_k β_k·w_k²·e^{n w_k}/(e^{n w_k} − 1)²`, less the Poisson
//! variance of the number of items itself, which a count of given items does not have. It
//! serves unions (merges and multi-key counts), whose history is unknown.
//!
//! A counter fed by adds keeps a running estimate instead (the martingale or HIP estimator:
//! Ting, KDD 2014; Cohen, PODS 2014): every add that changes the state adds `1/μ` (`μ` taken
//! before the change) to the estimate and `(1 − μ)/μ²` to its variance. It is unbiased, needs
//! `O(1)` per add, and has about 30% less variance than the ML estimate. After a union the
//! running estimate restarts from the ML estimate and its variance.

/// Sub-levels per halving of the level probability (`2^t`, `t = 2`).
pub const SUB_LEVELS: u64 = 4;
/// Levels a register remembers below its highest.
pub const WINDOW: u64 = 19;
/// Bits of a register: the highest level (8 bits), then the window.
pub const REGISTER_BITS: u64 = 8 + WINDOW;
pub const WINDOW_MASK: u32 = (1 << WINDOW) - 1;
/// Smallest and largest precision.
pub const MIN_PRECISION: u32 = 4;
pub const MAX_PRECISION: u32 = 20;

/// `c = 62 − p`: the largest run of leading zeros a level counts.
fn zeros_cap(p: u32) -> u64 {
    62 - u64::from(p)
}

/// The highest level at precision `p`.
pub fn max_level(p: u32) -> u64 {
    SUB_LEVELS * zeros_cap(p) + SUB_LEVELS
}

/// The token of hash `h` at precision `p`: (register index, level).
#[inline]
pub fn token(h: u64, p: u32) -> (u64, u64) {
    let s = h >> 62;
    let index = (h << 2) >> (64 - p);
    let rest = h << (2 + p);
    let j = u64::from(rest.leading_zeros()).min(zeros_cap(p));
    (index, SUB_LEVELS * j + s + 1)
}

/// `w_k` in units of `2^−64`: the probability that one item sets indicator `(i, k)`.
#[inline]
pub fn weight(k: u64, p: u32) -> u64 {
    let j = (k - 1) / SUB_LEVELS;
    let cap = zeros_cap(p);
    // 2^−(j+3)/2^p for j < c; 2^−(c+2)/2^p = 2^−64 for j = c.
    if j < cap {
        1 << (61 - u64::from(p) - j)
    } else {
        1
    }
}

/// Σ_{l > k} w_l in units of `2^−64` (`k = 0`: one register's whole share, `2^{64−p}`).
pub fn weight_above(k: u64, p: u32) -> u128 {
    let total = 1u128 << (64 - p);
    // Levels 1..=k: `full` whole groups of four sub-levels (each group half the one before,
    // down to the last group, of weight 1 each), then `r` sub-levels of the next group.
    let (full, r) = (k / SUB_LEVELS, k % SUB_LEVELS);
    let g = full.min(zeros_cap(p));
    let mut upto = total - (1u128 << (64 - u64::from(p) - g));
    if full > zeros_cap(p) {
        upto += u128::from(SUB_LEVELS);
    }
    if r > 0 {
        upto += u128::from(r * weight(SUB_LEVELS * full + 1, p));
    }
    total - upto
}

/// Which precision an error rate asks for (part of the encoding: a saved sketch's precision
/// byte must match it), the smallest `p` whose ML standard error,
/// `sqrt(MVP/(27·2^p))` with the registers' MVP, is at most the rate.
pub fn precision_for(error_rate: f64) -> u32 {
    let mut p = MIN_PRECISION;
    while p < MAX_PRECISION && ml_relative_error(p) > error_rate {
        p += 1;
    }
    p
}

/// The ML estimator's relative standard error at precision `p` for large `n`
/// (memory-variance product 3.7 over 27-bit registers, ExaLogLog `t = 2, d = 19`).
pub fn ml_relative_error(p: u32) -> f64 {
    (3.7 / (REGISTER_BITS as f64 * (1u64 << p) as f64)).sqrt()
}

/// Sets level `k` in register `reg`; the new register.
#[inline]
pub fn update(reg: u32, k: u64) -> u32 {
    let top = u64::from(reg >> WINDOW);
    let window = reg & WINDOW_MASK;
    if k > top {
        let shift = k - top;
        let moved = if shift > WINDOW {
            0
        } else {
            let old = if top > 0 { 1u64 << (shift - 1) } else { 0 };
            (((u64::from(window) << shift) | old) & u64::from(WINDOW_MASK)) as u32
        };
        ((k as u32) << WINDOW) | moved
    } else {
        // Level k sits at window bit top − k − 1 when 1 ≤ top − k ≤ WINDOW; nothing to set
        // otherwise. Without a branch: unions feed low levels, mostly below the window, in an
        // order no predictor learns.
        let below = (top - k).min(63);
        reg | ((1u64 << below) >> 1) as u32 & WINDOW_MASK
    }
}

/// The union of two registers: the higher top, and every level either knows within the window
/// below it. Without a branch: many-key unions run it over every register of every counter
/// (collect.rs), whose tops differ in no order a predictor learns.
#[inline(always)]
pub fn union(a: u32, b: u32) -> u32 {
    // The top sits in the high bits: the larger register has the higher top.
    let (hi, lo) = (a.max(b), a.min(b));
    let d = (hi >> WINDOW) - (lo >> WINDOW);
    // A register's known levels from its top down: bit 0 the top (none when empty), bit i
    // level top − i. `lo`'s, shifted by `d`, line up with `hi`'s; past 31 they fall off whole.
    let run = |r: u32| (r & WINDOW_MASK) << 1 | u32::from(r >> WINDOW != 0);
    let levels = run(hi) | run(lo) << d.min(31);
    hi & !WINDOW_MASK | levels >> 1 & WINDOW_MASK
}

/// The weight that setting level `k` takes out of the unset indicators of register `old`,
/// when it changes it: `unset_weight(old) − unset_weight(update(old, k))`, without a pass
/// over either window. A level below the top only sets its window bit: its own weight. A
/// level above the top `T` becomes the top, and the new window keeps levels `k − WINDOW ..
/// k`: what leaves the unset weight is level `k`, the levels between `T` and the new window
/// (unset, now forgotten), and the old window's unset levels that fall below the new one.
#[inline]
pub fn unset_weight_taken(old: u32, k: u64, p: u32) -> u128 {
    let top = u64::from(old >> WINDOW);
    let mut taken = u128::from(weight(k, p));
    if k < top {
        return taken;
    }
    // Levels up to `forgotten` fall below the new window.
    let Some(forgotten) = k.checked_sub(WINDOW + 1).filter(|&f| f >= 1) else {
        return taken;
    };
    if forgotten > top {
        taken += weight_above(top, p) - weight_above(forgotten, p);
    }
    // Old window bit `b` is level `top − b − 1`: the unset ones of levels 1..=forgotten.
    if top >= 2 {
        let lowest_bit = (top - 1).saturating_sub(forgotten);
        let highest_bit = (top - 2).min(WINDOW - 1);
        if lowest_bit <= highest_bit {
            let span = highest_bit - lowest_bit + 1;
            let mut unset = (!old & WINDOW_MASK) >> lowest_bit & ((1u64 << span) - 1) as u32;
            while unset != 0 {
                let b = lowest_bit + u64::from(unset.trailing_zeros());
                taken += u128::from(weight(top - b - 1, p));
                unset &= unset - 1;
            }
        }
    }
    taken
}

/// What register `reg` knows of level `k`: set, unset (above its top, or in its window and
/// not set: what `registers_counts` adds to `μ`), or nothing (below its window: forgotten).
pub fn level_state(reg: u32, k: u64) -> Option<bool> {
    let top = u64::from(reg >> WINDOW);
    if k > top {
        return Some(false);
    }
    if k == top {
        return Some(true);
    }
    (top - k <= WINDOW).then(|| reg >> (top - k - 1) & 1 == 1)
}

/// How many levels register `reg` has forgotten: those below its window.
pub fn forgotten_levels(reg: u32) -> u64 {
    u64::from(reg >> WINDOW).saturating_sub(WINDOW + 1)
}

/// The levels register `reg` knows to be set, each once.
pub fn set_levels(reg: u32) -> impl Iterator<Item = u64> {
    let top = u64::from(reg >> WINDOW);
    let mut window = reg & WINDOW_MASK;
    let mut first = (top > 0).then_some(top);
    std::iter::from_fn(move || {
        if let Some(k) = first.take() {
            return Some(k);
        }
        (window != 0).then(|| {
            let i = u64::from(window.trailing_zeros()) + 1;
            window &= window - 1;
            top - i
        })
    })
}

/// The weight of the indicators of register `reg` known to be unset: the probability that
/// an item changes it (units of `2^−64`).
pub fn unset_weight(reg: u32, p: u32) -> u128 {
    let top = u64::from(reg >> WINDOW);
    let mut sum = weight_above(top, p);
    let window = reg & WINDOW_MASK;
    for i in 1..=WINDOW.min(top.saturating_sub(1)) {
        if window & (1 << (i - 1)) == 0 {
            sum += u128::from(weight(top - i, p));
        }
    }
    sum
}

/// The set indicators by level and the unset weight of `registers` at precision `p`: what
/// `set_levels` and `unset_weight` give summed over them. Registers are tallied by highest
/// level first (how many, and how many of those have each window bit set), then each highest
/// level's tallies are turned into counts and weights once; the one-by-one sums cost ten
/// times as much over a union's 2,048 registers.
///
/// The window bits are tallied in bytes, eight to a word: a register adds `BYTE_PER_BIT` of
/// each byte of its window, three adds where a count per bit took nineteen. A highest level's
/// bytes are emptied into its counts every 255 registers, before any byte can overflow.
pub fn registers_counts(registers: &[u32], p: u32) -> (SetCounts, u128) {
    const WINDOW_WORDS: usize = WINDOW.div_ceil(8) as usize;
    let tops = 1usize << (REGISTER_BITS - WINDOW);
    let mut with_top = vec![0u64; tops];
    // `window_bits[t][b]`: registers of highest level `t` with window bit `b` set; `bytes[t]`
    // holds the tallies not yet added to it, bit `b` in byte `b % 8` of word `b / 8`.
    let mut window_bits = vec![[0u64; WINDOW as usize]; tops];
    let mut bytes = vec![[0u64; WINDOW_WORDS]; tops];
    let empty = |window_bits: &mut [u64; WINDOW as usize], bytes: &mut [u64; WINDOW_WORDS]| {
        for (b, tally) in window_bits.iter_mut().enumerate() {
            *tally += bytes[b / 8] >> (8 * (b % 8)) & 0xff;
        }
        *bytes = [0; WINDOW_WORDS];
    };
    for &r in registers {
        let (top, window) = ((r >> WINDOW) as usize & (tops - 1), r & WINDOW_MASK);
        for (w, word) in bytes[top].iter_mut().enumerate() {
            *word += BYTE_PER_BIT[(window >> (8 * w)) as usize & 0xff];
        }
        with_top[top] += 1;
        if with_top[top].is_multiple_of(255) {
            empty(&mut window_bits[top], &mut bytes[top]);
        }
    }
    let mut counts = SetCounts::new(p);
    let mut mu = 0u128;
    for (top, (&n, bits)) in with_top.iter().zip(&mut window_bits).enumerate() {
        if n == 0 {
            continue;
        }
        empty(bits, &mut bytes[top]);
        let top = top as u64;
        if top > 0 {
            counts.0[top as usize] += n;
        }
        mu += u128::from(n) * weight_above(top, p);
        for i in 1..=WINDOW.min(top.saturating_sub(1)) {
            let set = bits[i as usize - 1];
            counts.0[(top - i) as usize] += set;
            mu += u128::from(n - set) * u128::from(weight(top - i, p));
        }
    }
    (counts, mu)
}

/// For each byte, a word whose byte `i` is the byte's bit `i`: adding it tallies eight bits at
/// once.
const BYTE_PER_BIT: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut i = 0;
        while i < 8 {
            table[byte] |= ((byte as u64 >> i) & 1) << (8 * i);
            i += 1;
        }
        byte += 1;
    }
    table
};

/// `k` at precision `p` seen at precision `p − 1`, given the index bit dropped.
pub fn reduced_level(k: u64, dropped_bit: u64) -> u64 {
    if dropped_bit == 1 {
        (k - 1) % SUB_LEVELS + 1
    } else {
        k + SUB_LEVELS
    }
}

/// Counts of known-set indicators by level, for `ml_estimate`.
#[derive(PartialEq)]
pub struct SetCounts(pub Vec<u64>);

impl SetCounts {
    pub fn new(p: u32) -> SetCounts {
        SetCounts(vec![0; max_level(p) as usize + 1])
    }

    pub fn add(&mut self, k: u64) {
        self.0[k as usize] += 1;
    }
}

/// The maximum-likelihood estimate and its variance (see "Estimators"), given the set
/// indicators by level and the unset weight `mu` (units of `2^−64`).
///
/// The four sub-levels of a halving share one weight, so each step takes one `expm1` for
/// each run of levels of one weight, not one a level: the same terms, summed in the same
/// order, so the same bits (`ml_estimates_are_pinned_to_the_bit`).
pub fn ml_estimate(counts: &SetCounts, mu: u128, p: u32) -> (f64, f64) {
    let levels = held_levels(counts, p);
    let runs: Vec<&[(f64, f64)]> = levels.chunk_by(|a, b| a.1 == b.1).collect();
    ml_solve(&runs, share_of_all(mu), true)
}

/// `ml_estimate` of set indicators counted by weight, whatever their precision: `set[e]` of
/// weight `2^e` (units of `2^−64`). Unions of several precisions (precisions.rs).
pub fn ml_estimate_by_weight(set: &[u64; 64], mu: u128) -> (f64, f64) {
    let levels: Vec<(f64, f64)> = (0..64)
        .rev()
        .filter(|&e| set[e] > 0)
        .map(|e| (set[e] as f64, 2f64.powi(e as i32 - 64)))
        .collect();
    let runs: Vec<&[(f64, f64)]> = levels.chunks(1).collect();
    ml_solve(&runs, share_of_all(mu), true)
}

/// The levels with set indicators, in order, as `(β, w)`: how many are set, and the weight
/// of one as a share of the whole.
fn held_levels(counts: &SetCounts, p: u32) -> Vec<(f64, f64)> {
    counts
        .0
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b > 0)
        .map(|(k, &b)| (b as f64, weight(k as u64, p) as f64 / 2f64.powi(64)))
        .collect()
}

/// `ml_estimate` of the levels' `(β, w)`, in runs that share a weight, and the unset
/// weight's share `mu`; with `screened`, the steps of the search far from the root take
/// their side from `sure_signs` instead of computing `g`.
fn ml_solve(runs: &[&[(f64, f64)]], mu: f64, screened: bool) -> (f64, f64) {
    let set: f64 = runs.iter().flat_map(|run| run.iter()).map(|l| l.0).sum();
    if set == 0.0 {
        return (0.0, 0.0);
    }
    // g(n) = Σ β w/(e^{nw} − 1) − μ, decreasing; with μ = 0 every indicator is set.
    let exact_g = |n: f64| -> f64 { sum_over_levels(runs, n, |b, w, e| b * w / e) - mu };
    let n = if mu == 0.0 {
        2f64.powi(64)
    } else {
        let (below, above) = if screened {
            sure_signs(runs, set, mu, exact_g)
        } else {
            (0.0, f64::INFINITY)
        };
        // Only the sign of g steers the search.
        let g = |n: f64| -> f64 {
            if n < below {
                1.0
            } else if n > above {
                -1.0
            } else {
                exact_g(n)
            }
        };
        let (mut lo, mut hi) = (set.max(1.0) * 0.5, set.max(1.0));
        while g(hi) > 0.0 && hi < 2f64.powi(80) {
            lo = hi;
            hi *= 2.0;
        }
        while g(lo) < 0.0 && lo > 1e-6 {
            hi = lo;
            lo *= 0.5;
        }
        for _ in 0..64 {
            let mid = (lo * hi).sqrt();
            let next = if g(mid) > 0.0 { (mid, hi) } else { (lo, mid) };
            // A step depends on (lo, hi) alone: one that changes neither ends the search
            // where the remaining steps would have left it.
            if next == (lo, hi) {
                break;
            }
            (lo, hi) = next;
        }
        (lo * hi).sqrt()
    };
    let information = sum_over_levels(runs, n, |b, w, e| b * w * w * (e + 1.0) / (e * e));
    // 1/I is the variance where the number of items is itself Poisson of mean n; that of a
    // count of given items, what a union estimates, leaves that variance, n, out (1/I is
    // about n + its own variance below a register's worth of items a register).
    let variance = if information > 0.0 {
        (1.0 / information - n).max(0.0)
    } else {
        0.0
    };
    (n, variance)
}

/// Bounds outside which `g`, as computed, is surely positive (below) or negative (above):
/// `(0, ∞)` where that cannot be shown.
///
/// Newton's method on sums taken a run at a time finds the root `r` (g is convex and
/// decreasing), and `g` itself is checked positive at `r·(1 − 10⁻¹²)` and negative at
/// `r·(1 + 10⁻¹²)`, so the true root lies between (give or take g's rounding, below). The
/// bounds are those points moved out by 10⁻¹² again. Why a computed `g(n)` has its true
/// sign there: each term `t(n) = βw/(e^{nw} − 1)` times `n` falls as `n` grows, so with
/// `S(n)` the terms' sum, below the root `g(n) = S(n) − μ ≥ (1 − n/r)·S(n)`, at least
/// `10⁻¹²·S(n)`, and above it `S(n) < μ` and `g(n) ≤ −(1 − r/n)·μ`, at least `10⁻¹²·μ`
/// below zero. Computing `g` errs by a few units in the last place of each term and of the
/// sum: under `3·10⁻¹⁴` of `S(n) + μ` for the 236 levels a sketch can have at most, thirty
/// times less. Only the steps near the root, 16 to 18 of the search's 50-odd, compute `g`
/// (counts of 2 keys of 10³ to 5·10⁴ items), besides the two checks.
fn sure_signs(runs: &[&[(f64, f64)]], set: f64, mu: f64, g: impl Fn(f64) -> f64) -> (f64, f64) {
    const CLOSE: f64 = 1e-12;
    let root = newton_root(runs, set, mu);
    let (a, b) = (root * (1.0 - CLOSE), root * (1.0 + CLOSE));
    if root.is_finite() && root > 0.0 && g(a) > 0.0 && g(b) < 0.0 {
        (a * (1.0 - CLOSE), b * (1.0 + CLOSE))
    } else {
        (0.0, f64::INFINITY)
    }
}

/// The root of `g` by Newton's method, a run's levels summed into one term (NaN if it does
/// not settle). It starts at `set/μ`, above the root since `g(n) ≤ set/n − μ`; a step from
/// there lands below it (g is convex), and the steps from below rise to it.
fn newton_root(runs: &[&[(f64, f64)]], set: f64, mu: f64) -> f64 {
    let weights: Vec<(f64, f64)> = runs
        .iter()
        .map(|run| (run[0].1, run.iter().map(|l| l.0).sum()))
        .collect();
    let mut n = set / mu;
    for _ in 0..100 {
        let (mut value, mut slope) = (-mu, 0.0);
        for &(w, b) in &weights {
            let e = (n * w).exp_m1();
            let t = b * w / e;
            value += t;
            // d/dn of t: −t·w·e^{nw}/(e^{nw} − 1), 0 where e^{nw} overflows.
            slope -= t * w * (1.0 + 1.0 / e);
        }
        let step = value / slope;
        let next = if n - step > 0.0 { n - step } else { n / 8.0 };
        if (next - n).abs() <= 1e-15 * n {
            return next;
        }
        n = next;
    }
    f64::NAN
}

/// Σ over the levels, in order, of `term(β, w, e^{nw} − 1)`, given the levels' `(β, w)` in
/// runs of one weight.
#[inline(always)]
fn sum_over_levels(runs: &[&[(f64, f64)]], n: f64, term: impl Fn(f64, f64, f64) -> f64) -> f64 {
    let mut sum = 0.0;
    for run in runs {
        let w = run[0].1;
        let e = (n * w).exp_m1();
        for &(b, _) in *run {
            sum += term(b, w, e);
        }
    }
    sum
}

/// One step of the running estimate: an add changed the state while the unset weight was
/// `mu` (units of `2^−64`); returns (estimate increment, variance increment).
#[inline]
pub fn martingale_step(mu: u128) -> (f64, f64) {
    let q = share_of_all(mu);
    (1.0 / q, (1.0 - q) / (q * q))
}

/// `mu · 2^−64`, rounded as `mu as f64 · 2^−64` is, without the library's software
/// conversion of a `u128` (about twenty instructions on every add that sets an indicator):
/// the unset weight never exceeds the whole, `2^64`, so either its high half is zero or it
/// is exactly `2^64`.
#[inline]
pub fn share_of_all(mu: u128) -> f64 {
    let (high, low) = ((mu >> 64) as u64, mu as u64);
    high as f64 + low as f64 / 2f64.powi(64)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The registers at precision `p` of the items with these hashes, added one by one.
    fn registers_of(p: u32, hashes: impl IntoIterator<Item = u64>) -> Vec<u32> {
        let mut registers = vec![0u32; 1 << p];
        for h in hashes {
            let (i, k) = token(h, p);
            registers[i as usize] = update(registers[i as usize], k);
        }
        registers
    }

    /// What `registers_counts` gives, summed register by register: `set_levels` and
    /// `unset_weight`.
    fn summed_one_by_one(registers: &[u32], p: u32) -> (SetCounts, u128) {
        let mut counts = SetCounts::new(p);
        let mut mu = 0u128;
        for &r in registers {
            set_levels(r).for_each(|k| counts.add(k));
            mu += unset_weight(r, p);
        }
        (counts, mu)
    }

    /// The registers at precision `p` of `n` hashes drawn from the generator state `x`.
    pub(in crate::lc) fn random_registers(p: u32, n: u64, x: &mut u64) -> Vec<u32> {
        registers_of(
            p,
            (0..n).map(|_| {
                crate::core::test_rng::step(x);
                *x ^ *x >> 31
            }),
        )
    }

    #[test]
    fn weights_sum_to_one_per_register() {
        for p in [MIN_PRECISION, 11, MAX_PRECISION] {
            let all: u128 = (1..=max_level(p)).map(|k| u128::from(weight(k, p))).sum();
            assert_eq!(all, 1u128 << (64 - p), "p {p}");
            assert_eq!(weight_above(max_level(p), p), 0);
            assert_eq!(weight_above(0, p), 1u128 << (64 - p));
            for k in 0..=max_level(p) {
                let above: u128 = (k + 1..=max_level(p))
                    .map(|l| u128::from(weight(l, p)))
                    .sum();
                assert_eq!(weight_above(k, p), above, "p {p} k {k}");
            }
        }
    }

    #[test]
    fn precision_for_common_rates() {
        assert_eq!(precision_for(0.01), 11);
        assert_eq!(precision_for(0.02), 9);
        assert_eq!(precision_for(0.5), MIN_PRECISION);
        assert_eq!(precision_for(1e-9), MAX_PRECISION);
        assert_eq!(precision_for(0.001), 18);
    }

    /// The weight an update takes, found from the levels that change, is the
    /// difference of the two registers' unset weights: every level set into registers of
    /// random histories, at the smallest, default and largest precision, both kinds of change
    /// counted.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn unset_weight_taken_is_the_difference() {
        let mut x = 7u64;
        let (mut below, mut above) = (0, 0);
        for round in 0..3_000 {
            let p = [MIN_PRECISION, 11, MAX_PRECISION][round % 3];
            crate::core::test_rng::step(&mut x);
            // Mostly the low levels items give, sometimes any level up to the highest.
            let range = if round % 5 == 0 { max_level(p) } else { 60 };
            let history = (0..x >> 59).map(|i| 1 + (x >> (i % 7 * 8)) % range);
            let old = history.fold(0u32, update);
            for k in 1..=max_level(p) {
                let new = update(old, k);
                if new == old {
                    continue;
                }
                if k < u64::from(old >> WINDOW) {
                    below += 1;
                } else {
                    above += 1;
                }
                assert_eq!(
                    unset_weight_taken(old, k, p),
                    unset_weight(old, p) - unset_weight(new, p),
                    "register {old:#x}, level {k}"
                );
            }
        }
        assert!(
            below > 1_000 && above > 1_000,
            "{below} below the top, {above} above"
        );
    }

    /// The maximum-likelihood estimate and variance to the bit, over registers of known
    /// items at three precisions: merges store them, so the solver's steps may change only
    /// on purpose (the search ends once a step changes nothing, where 64 steps ended).
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn ml_estimates_are_pinned_to_the_bit() {
        const PINNED: [(u32, u64, u64, u64); 12] = [
            (4, 3, 0x40083ccf189d3ccb, 0x3f9ed0ab55a7e300),
            (4, 100, 0x4057a8899e7e742b, 0x4045f8cb5c9de936),
            (4, 5000, 0x40b362068e936cba, 0x410b2f51490c2479),
            (4, 300000, 0x411325de31467086, 0x41c848a46673029c),
            (11, 3, 0x4008007803301861, 0x3f2e019812488000),
            (11, 100, 0x40591103948d4120, 0x3fd111ce569bdc00),
            (11, 5000, 0x40b3632c944d5c22, 0x4086ccca4c74c6f0),
            (11, 300000, 0x41129a027e348dc5, 0x41566bfb306312ec),
            (14, 3, 0x4008000a80069004, 0x3ef5001a40180000),
            (14, 100, 0x40590227d9b849c5, 0x3fa140b7c1af6000),
            (14, 5000, 0x40b382a4dc8a4bdc, 0x405663e5d15d7540),
            (14, 300000, 0x41124a9be2c73a0a, 0x411de587015a36e2),
        ];
        let mut x = 0x9e37_79b9_u64;
        for (p, n, estimate, variance) in PINNED {
            let regs = random_registers(p, n, &mut x);
            let (counts, mu) = registers_counts(&regs, p);
            let (e, v) = ml_estimate(&counts, mu, p);
            assert_eq!(
                (e.to_bits(), v.to_bits()),
                (estimate, variance),
                "p {p}, n {n}"
            );
        }
    }

    /// Thousands of registers of one highest level: their window bits' tallies pass 255 (the
    /// most a byte holds) many times over.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn tallies_of_many_registers_at_one_level() {
        let p = 11;
        let mut x = 0x5eed_u64;
        for top in [2u32, 20, 40] {
            let registers: Vec<u32> = (0..1u32 << p)
                .map(|i| {
                    crate::core::test_rng::step(&mut x);
                    // Every level the window can hold set in the first 600 registers (bit
                    // `i − 1` is level `top − i`, and levels start at 1), random after.
                    let known = WINDOW_MASK >> WINDOW.saturating_sub(u64::from(top) - 1);
                    let window = if i < 600 {
                        known
                    } else {
                        (x >> 40) as u32 & known
                    };
                    top << WINDOW | window
                })
                .collect();
            let (counts, mu) = summed_one_by_one(&registers, p);
            let (tallied, tallied_mu) = registers_counts(&registers, p);
            assert_eq!(tallied.0, counts.0, "top {top}");
            assert_eq!(tallied_mu, mu, "top {top}");
        }
    }

    proptest! {
        /// The solve with one `expm1` per run of levels of one weight, steered by
        /// `sure_signs` far from the root, gives, to the bit, the solve with one per level
        /// that computes every step.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn runs_of_one_weight_solve_as_single_levels(
            p in MIN_PRECISION..=MAX_PRECISION,
            set in proptest::collection::vec((1u64..250, 1u64..1 << 20), 1..80),
            mu in 0u128..=1 << 64,
        ) {
            let mut counts = SetCounts::new(p);
            for (k, b) in set {
                counts.0[(k % max_level(p) + 1) as usize] += b;
            }
            let levels = held_levels(&counts, p);
            let singles: Vec<&[(f64, f64)]> = levels.chunks(1).collect();
            let (e, v) = ml_estimate(&counts, mu, p);
            let (single_e, single_v) = ml_solve(&singles, share_of_all(mu), false);
            prop_assert_eq!((e.to_bits(), v.to_bits()), (single_e.to_bits(), single_v.to_bits()));
        }

        /// The unset weight's share is `mu as f64 · 2^−64` to the bit, for every weight a
        /// sketch can hold (none above the whole).
        #[test]
        fn share_of_all_rounds_as_the_u128_conversion(mu in 0u128..=1 << 64, shift in 0u32..64) {
            for mu in [mu, mu >> shift, (1u128 << 64) - (mu >> shift)] {
                prop_assert_eq!(share_of_all(mu).to_bits(), (mu as f64 / 2f64.powi(64)).to_bits());
            }
        }

        /// A token's level has the probability `weight` says: the fraction of hashes giving
        /// each level, checked on the boundaries of the level's hash range.
        #[test]
        fn tokens_reduce_across_precisions(h in any::<u64>(), p in 5u32..MAX_PRECISION) {
            let (i, k) = token(h, p);
            let (i2, k2) = token(h, p - 1);
            prop_assert_eq!(i2, i >> 1);
            prop_assert_eq!(k2, reduced_level(k, i & 1).min(max_level(p - 1)));
            prop_assert!((1..=max_level(p)).contains(&k));
        }

        /// Registers tallied by highest level give the counts and unset weight that summing
        /// `set_levels` and `unset_weight` one register at a time gives.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn register_tallies_are_the_sums(
            p in MIN_PRECISION..=8,
            hashes in proptest::collection::vec(any::<u64>(), 0..3_000),
        ) {
            let registers = registers_of(p, hashes);
            let (counts, mu) = summed_one_by_one(&registers, p);
            let (tallied, tallied_mu) = registers_counts(&registers, p);
            prop_assert_eq!(tallied.0, counts.0);
            prop_assert_eq!(tallied_mu, mu);
        }

        /// Registers hold exactly the set levels within the window below their highest, in any
        /// order of updates, and unions are the registers of all the levels.
        #[test]
        fn registers_are_the_set_of_levels(
            a in proptest::collection::vec(1u64..200, 0..40),
            b in proptest::collection::vec(1u64..200, 0..40),
        ) {
            let build = |ks: &[u64]| ks.iter().fold(0u32, |r, &k| update(r, k));
            let ra = build(&a);
            let top = a.iter().copied().max().unwrap_or(0);
            let mut expected: Vec<u64> = a.iter().copied()
                .filter(|&k| k + WINDOW >= top).collect();
            expected.sort_unstable();
            expected.dedup();
            let mut got: Vec<u64> = set_levels(ra).collect();
            got.sort_unstable();
            prop_assert_eq!(got, expected);
            let mut rev = a.clone();
            rev.reverse();
            prop_assert_eq!(build(&rev), ra);
            let all: Vec<u64> = a.iter().chain(&b).copied().collect();
            prop_assert_eq!(union(ra, build(&b)), build(&all));
            prop_assert_eq!(union(build(&b), ra), build(&all));
        }

        /// The unset weight is the probability that a random level changes the register.
        #[test]
        fn unset_weight_is_the_change_probability(ks in proptest::collection::vec(1u64..100, 0..30)) {
            let p = 11;
            let reg = ks.iter().fold(0u32, |r, &k| update(r, k));
            let changing: u128 = (1..=max_level(p))
                .filter(|&k| update(reg, k) != reg)
                .map(|k| u128::from(weight(k, p)))
                .sum();
            prop_assert_eq!(unset_weight(reg, p), changing);
        }
    }

    /// On sketches of known items, from 3 to 10⁶, Newton's root passes its check, so the
    /// search computes `g` only near the root, within about 4·10⁻¹² of it.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn signs_are_sure_outside_a_narrow_band() {
        let mut x = 0x7e57_u64;
        for p in [4, 11, 14] {
            for n in [3u64, 100, 5_000, 300_000, 1_000_000] {
                let regs = random_registers(p, n, &mut x);
                let (counts, mu) = registers_counts(&regs, p);
                let levels = held_levels(&counts, p);
                let runs: Vec<&[(f64, f64)]> = levels.chunk_by(|a, b| a.1 == b.1).collect();
                let (set, share) = (levels.iter().map(|l| l.0).sum(), share_of_all(mu));
                let g = |n: f64| sum_over_levels(&runs, n, |b, w, e| b * w / e) - share;
                let (below, above) = sure_signs(&runs, set, share, g);
                let (estimate, _) = ml_estimate(&counts, mu, p);
                assert!(below < estimate && estimate < above, "p {p}, n {n}");
                assert!(
                    above / below - 1.0 < 5e-12,
                    "p {p}, n {n}: {below} .. {above}"
                );
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn ml_estimate_of_simulated_sketches() {
        // Poisson-free check: feed n random hashes, compare the ML estimate with n.
        let p = 8;
        let mut x = 0x1234_5678_u64;
        for n in [10u64, 1_000, 100_000] {
            let regs = registers_of(
                p,
                (0..n).map(|_| {
                    crate::core::test_rng::step(&mut x);
                    crate::core::hashing::hash_item(&x.to_le_bytes()).h1
                }),
            );
            let (counts, mu) = registers_counts(&regs, p);
            let (est, var) = ml_estimate(&counts, mu, p);
            let sd = var.sqrt();
            assert!(
                (est - n as f64).abs() <= 4.0 * sd + 1.0,
                "n {n}: {est} ± {sd}"
            );
        }
    }
}
