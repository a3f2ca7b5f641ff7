//! The false-positive math every layout sizes by (pure): the expected rate of a bit array
//! after n items, by a second-order expansion for large arrays and exactly for small ones
//! (the occupancy distribution, `Occupancy`, also behind the blocked layout's per-block rates),
//! the best integer number of hashes, and the limits sizing keeps to. `filter.rs` explains
//! the method.

/// Largest number of hashes a filter may use (an error rate of 1e-15 needs 50).
pub const MAX_HASHES: u32 = 64;
/// Largest filter, in bits (32 TiB): far beyond any memory limit, it keeps arithmetic exact.
pub const MAX_BITS: u64 = 1 << 48;
/// Up to this many bits the expected false-positive rate is computed exactly.
const EXACT_MAX_BITS: u64 = 1 << 13;
/// Probability mass below which the occupancy distribution's tails are dropped.
const NEGLIGIBLE: f64 = 1e-25;

/// What sizing or allocation can refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// The error rate is below `MIN_ERROR_RATE` (or not in (0, 1)).
    ErrorRate,
    /// The filter would need more than `MAX_BITS` bits.
    TooLarge,
    /// The allocator refused the bits.
    OutOfMemory,
}

/// The integer k minimising the FP of `bits` bits holding `n` items, and that FP; `exact`
/// allows the exact computation for small filters.
pub fn best_hashes(n: f64, bits: u64, exact: bool) -> (u32, f64) {
    let k_real = bits as f64 / n * std::f64::consts::LN_2;
    let lo = (k_real.floor() as u32).clamp(1, MAX_HASHES);
    let hi = (k_real.ceil() as u32).clamp(1, MAX_HASHES);
    let candidates = if exact && computed_exactly(n, bits) {
        exact_fp(
            n as u64,
            bits,
            lo.saturating_sub(1).max(1),
            (hi + 1).min(MAX_HASHES),
        )
    } else {
        (lo..=hi).map(|k| (k, approx_fp(n, bits, k))).collect()
    };
    candidates.into_iter().fold(
        (lo, f64::INFINITY),
        |best, c| if c.1 < best.1 { c } else { best },
    )
}

/// Expected FP of `bits` bits holding `n` items with `hashes` hashes: exact where
/// `computed_exactly` says so, by the expansion elsewhere.
pub fn fp_with(n: f64, bits: u64, hashes: u32) -> f64 {
    if computed_exactly(n, bits) {
        exact_fp(n as u64, bits, hashes, hashes)[0].1
    } else {
        approx_fp(n, bits, hashes)
    }
}

/// Whether the FP of `bits` bits holding `n` items is computed exactly: small filters only,
/// and only for k ≥ 1 real hashes. With k = 1 (error rates above ½) the expansion is exact,
/// and the throws would outnumber the bits many times over.
fn computed_exactly(n: f64, bits: u64) -> bool {
    bits <= EXACT_MAX_BITS && bits as f64 / n * std::f64::consts::LN_2 >= 1.0
}

/// Expected FP after n items, by the second-order expansion (for large m).
pub fn approx_fp(n: f64, bits: u64, hashes: u32) -> f64 {
    let m = bits as f64;
    let k = hashes as f64;
    let throws = n * k;
    let empty = (throws * (-1.0 / m).ln_1p()).exp();
    let q = 1.0 - empty;
    let t = throws / m;
    let var = m * (-t).exp() * (1.0 - (1.0 + t) * (-t).exp());
    q.powf(k) * (1.0 + k * (k - 1.0) / 2.0 * var / (m * q).powi(2))
}

/// Exact expected FP after n items for each k in lo..=hi: E[(X/m)^k] over the distribution of
/// the number X of distinct bits set by n·k uniform probes.
pub fn exact_fp(n: u64, bits: u64, lo: u32, hi: u32) -> Vec<(u32, f64)> {
    let mut occupancy = Occupancy::new(bits);
    let mut out = Vec::new();
    for k in lo..=hi {
        let target = n.saturating_mul(k as u64);
        while occupancy.throws() < target {
            occupancy.throw();
        }
        out.push((k, occupancy.fp(k)));
    }
    out
}

/// The distribution of the number X of distinct bits set among m by t uniform throws, one
/// throw at a time (a throw hits a set bit with probability x/m); tails below `NEGLIGIBLE` are
/// dropped, so a throw costs O(√m). Shared by the exact sizing above and the blocked layout's
/// per-block false-positive rates (`blocked.rs`).
pub struct Occupancy {
    /// dist[x] = P(X = x) for x in first..=last; entries outside are below NEGLIGIBLE.
    dist: Vec<f64>,
    first: usize,
    last: usize,
    throws: u64,
}

impl Occupancy {
    pub fn new(bits: u64) -> Self {
        let mut dist = vec![0.0f64; bits as usize + 1];
        dist[0] = 1.0;
        Self {
            dist,
            first: 0,
            last: 0,
            throws: 0,
        }
    }

    pub fn throws(&self) -> u64 {
        self.throws
    }

    /// One more uniform throw.
    pub fn throw(&mut self) {
        let m = self.dist.len() - 1;
        let mf = m as f64;
        let (first, last) = (self.first, self.last);
        let dist = &mut self.dist;
        let new_last = (last + 1).min(m);
        for x in (first..=new_last).rev() {
            let stay = if x <= last {
                dist[x] * (x as f64 / mf)
            } else {
                0.0
            };
            let grow = if x > first {
                dist[x - 1] * ((mf - (x - 1) as f64) / mf)
            } else {
                0.0
            };
            dist[x] = stay + grow;
        }
        let (mut first, mut last) = (first, new_last);
        while first < last && dist[first] < NEGLIGIBLE {
            dist[first] = 0.0;
            first += 1;
        }
        while last > first && dist[last] < NEGLIGIBLE {
            dist[last] = 0.0;
            last -= 1;
        }
        (self.first, self.last) = (first, last);
        self.throws += 1;
    }

    /// E[(X/m)^k]: the chance that k more uniform probes all hit set bits.
    pub fn fp(&self, k: u32) -> f64 {
        let mf = (self.dist.len() - 1) as f64;
        (self.first..=self.last)
            .map(|x| self.dist[x] * (x as f64 / mf).powi(k as i32))
            .sum()
    }
}
