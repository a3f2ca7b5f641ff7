//! A sketch's running (martingale) estimate: the estimate, its variance and `μ`, the weight of
//! the indicators still unset, kept in the block's header words of tokens and registers modes
//! and stepped on every add that sets an indicator, so that counting one key reads one word.
//!
//! # Bounds
//!
//! A saved sketch carries its estimate and variance, which its indicators alone do not give;
//! loading one checks them against what any history of adds and unions could have made of
//! those indicators (`Running::possible`). With `B` the indicators known to be set, `D` those
//! set or forgotten below a register's window (`D = B` for tokens), `μ` the unset weight as a
//! share of the whole (`μ* = max(μ, 2^−64)`, the least weight of one unset indicator) and `U`
//! the counter's fingerprint universe:
//!
//! ```text
//!     B ≤ estimate ≤ U + D/μ*        0 ≤ variance ≤ estimate/μ*
//! ```
//!
//! A sketch starts either from an exact set (estimate its count, at most `U` distinct
//! fingerprints and at least its tokens; variance 0) or from a union (the ML estimate `n̂`,
//! levels.rs: `B ≤ n̂ ≤ B/μ` since `x/(e^x − 1)` lies between `1 − x/2` and 1, and variance
//! `1/I(n̂) ≤ n̂/μ` since `x·e^x/(e^x − 1) ≥ 1`; with `μ = 0` it takes `n̂ = 2^64`). Each add
//! after that sets one indicator that was unset and counted in `μ` (and may forget others): `B`
//! grows by at most 1 while the estimate grows by `1/μ ≥ 1`; `D` grows by at least 1 while the
//! estimate grows by `1/μ ≤ 1/μ*` of the smaller `μ` after it; the variance grows by
//! `(1 − μ)/μ² ≤ (1/μ)/μ*`. So the bounds hold for every state a counter reaches, and a state
//! within them stays within them after any add. Checks allow `SLACK` for rounding.
//!
//! The estimate may pass `2^63` (an `LC.COUNT` reply saturates): `μ` near 0 takes about
//! `2^64` distinct items, or a payload whose registers are full.

use super::header::{SKETCH_ESTIMATE, SKETCH_MU, SKETCH_VARIANCE};
use super::levels::{martingale_step, share_of_all};

/// The relative rounding the bounds allow: an add rounds the estimate by a unit in the last
/// place (and a sketch takes at most `2^20 · 172` adds after it loads), and the ML search
/// ends within rounding of its root, which may lie within rounding of `B`.
const SLACK: f64 = 1e-6;

/// A sketch's running state: estimate, its variance, and `μ` (units of `2^−64`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Running {
    pub estimate: f64,
    pub variance: f64,
    pub mu: u128,
}

impl Running {
    pub fn read(words: &[u64]) -> Running {
        Running {
            estimate: f64::from_bits(words[SKETCH_ESTIMATE]),
            variance: f64::from_bits(words[SKETCH_VARIANCE]),
            mu: u128::from(words[SKETCH_MU]) | u128::from(words[SKETCH_MU + 1]) << 64,
        }
    }

    pub fn write(self, words: &mut [u64]) {
        words[SKETCH_ESTIMATE] = self.estimate.to_bits();
        words[SKETCH_VARIANCE] = self.variance.to_bits();
        words[SKETCH_MU] = self.mu as u64;
        words[SKETCH_MU + 1] = (self.mu >> 64) as u64;
    }

    /// After an add that changed an indicator of weight `gone` out of the unset ones.
    #[inline]
    pub fn step(&mut self, gone: u128) {
        let (de, dv) = martingale_step(self.mu);
        self.estimate += de;
        self.variance += dv;
        self.mu -= gone;
    }

    /// This state brought within the bounds of a sketch whose indicators hold `set` known set
    /// and `decided` set or forgotten, its exact set having held at most `first` items (see
    /// "Bounds"). A union of several precisions takes its estimate from indicators other than
    /// those it stores (precisions.rs), which may claim more set than the estimate; the true
    /// count is at least that many.
    pub fn within_bounds(self, set: u64, decided: u64, first: u64) -> Running {
        let (lowest, highest, unset) = self.bounds(set, decided, first);
        let estimate = self.estimate.max(lowest).min(highest);
        Running {
            estimate,
            variance: self.variance.clamp(0.0, estimate / unset),
            mu: self.mu,
        }
    }

    /// The least and the greatest estimate some history gives a sketch whose indicators hold
    /// `set` known set and `decided` set or forgotten, its exact set having held at most
    /// `first` items, and `μ*` (see "Bounds"): the variance is at most the estimate over it.
    fn bounds(&self, set: u64, decided: u64, first: u64) -> (f64, f64, f64) {
        let unset = share_of_all(self.mu).max(2f64.powi(-64));
        (set as f64, first as f64 + decided as f64 / unset, unset)
    }

    /// Whether some history could give this running state to a sketch whose indicators hold
    /// `set` known set and `decided` set or forgotten, its exact set having held at most
    /// `first` items (see "Bounds"): `Err` names what could not be.
    pub fn possible(&self, set: u64, decided: u64, first: u64) -> Result<(), &'static str> {
        let (lowest, highest, unset) = self.bounds(set, decided, first);
        let estimate = self.estimate;
        if !(estimate >= lowest * (1.0 - SLACK) && estimate <= highest * (1.0 + SLACK)) {
            return Err("sketch estimate out of range");
        }
        if !(self.variance >= 0.0 && self.variance <= estimate / unset * (1.0 + SLACK)) {
            return Err("sketch variance out of range");
        }
        Ok(())
    }
}
