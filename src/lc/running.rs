//! A sketch's running (martingale) estimate: the estimate, its variance and `μ`, the weight of
//! the indicators still unset, kept in the block's header words of tokens and registers modes
//! and stepped on every add that sets an indicator, so that counting one key reads one word.

use super::header::{SKETCH_ESTIMATE, SKETCH_MU, SKETCH_VARIANCE};
use super::levels::martingale_step;

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
}
