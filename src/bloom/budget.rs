//! How a scaling filter spends its error rate p over its sub-filters (pure). The first gets
//! the share h·p; each later one gets the fraction (1 − r) of what the live ones leave, r
//! being the tightening. The live rates then sum to at most p, which bounds the filter's
//! false-positive rate (a lookup hits if any sub-filter hits). Every rate must stay at or
//! above `MIN_ERROR_RATE`, and a new scaling filter must have room for [`MIN_SCALE_OUTS`]
//! sub-filters after its first, so that a rate too small is refused when the filter is
//! made rather than at a later item.
//!
//! Scaling chains ([`CHAIN`], `chain.rs` says why its shares) and windowed filters
//! ([`WINDOW`], `window/filter.rs`: their layers slide out and give their budget back)
//! differ only in h and r.

use super::filter::MIN_ERROR_RATE;

/// The largest expansion (RedisBloom's bound): a sub-filter's capacity over the one before.
pub const MAX_EXPANSION: u32 = 32_768;

/// Sub-filters a new scaling filter must have room for after its first. With expansion 2,
/// 20 of them hold about 2^21 times the first's capacity.
pub const MIN_SCALE_OUTS: usize = 20;

/// A schedule: the first sub-filter's share h and the tightening r.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub head_share: f64,
    pub tightening: f64,
}

/// Scaling chains' schedule.
pub const CHAIN: Budget = Budget {
    head_share: 0.55,
    tightening: 0.8,
};

/// Windowed filters' schedule.
pub const WINDOW: Budget = Budget {
    head_share: 0.8,
    tightening: 0.5,
};

impl Budget {
    /// The first sub-filter's rate in a filter of rate `error_rate`.
    pub fn head_rate(&self, error_rate: f64) -> f64 {
        error_rate * self.head_share
    }

    /// The next sub-filter's rate when the live ones spend `spent` of `error_rate`; None
    /// below `MIN_ERROR_RATE` (or NaN): the filter cannot scale again.
    pub fn next_rate(&self, error_rate: f64, spent: f64) -> Option<f64> {
        let rate = (error_rate - spent) * (1.0 - self.tightening);
        (rate >= MIN_ERROR_RATE).then_some(rate)
    }

    /// Whether a filter of this rate and expansion (0: non-scaling) has room to scale
    /// [`MIN_SCALE_OUTS`] times: what a client's create must have, so that a rate too small is
    /// refused there rather than at a later add. A create from a master or an AOF file is
    /// taken without it, down to a first sub-filter of `MIN_ERROR_RATE`: it was accepted when
    /// it was logged, and a command refused on replay loses its key.
    pub fn has_room(&self, error_rate: f64, expansion: u32) -> bool {
        expansion == 0 || self.can_scale(error_rate)
    }

    /// Whether a scaling filter of rate `error_rate` has room for [`MIN_SCALE_OUTS`]
    /// sub-filters after its first: the rates `next_rate` gives, before anything exists.
    pub fn can_scale(&self, error_rate: f64) -> bool {
        let head = self.head_rate(error_rate);
        head >= MIN_ERROR_RATE
            && (0..MIN_SCALE_OUTS)
                .try_fold(head, |spent, _| {
                    Some(spent + self.next_rate(error_rate, spent)?)
                })
                .is_some()
    }

    /// The smallest rate of a scaling filter, to three significant digits (rounded up, so
    /// that the rate a refusal names is accepted).
    pub fn min_scaling_error_rate(&self) -> f64 {
        // The rates are p·h, then p·(1−h)·(1−r)·r^(i−1): the last one needed bounds p.
        let (h, r) = (self.head_share, self.tightening);
        let mut rate = MIN_ERROR_RATE / ((1.0 - h) * (1.0 - r) * r.powi(MIN_SCALE_OUTS as i32 - 1));
        loop {
            // The text the refusal shows, parsed back: what a client would send.
            let shown: f64 = format!("{rate:.2e}").parse().unwrap_or(rate);
            if self.can_scale(shown) {
                return shown;
            }
            rate *= 1.001;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_rate_named_has_room_and_a_smaller_one_does_not() {
        for (budget, expected) in [(CHAIN, 7.71e-13), (WINDOW, 5.25e-9)] {
            let min = budget.min_scaling_error_rate();
            assert_eq!(min, expected, "{budget:?}");
            assert!(budget.can_scale(min));
            assert!(!budget.can_scale(min * 0.995));
            // The schedule spelled out: the last sub-filter needed is at the limit.
            let (h, r) = (budget.head_share, budget.tightening);
            let last = min * (1.0 - h) * (1.0 - r) * r.powi(MIN_SCALE_OUTS as i32 - 1);
            assert!((MIN_ERROR_RATE..MIN_ERROR_RATE * 1.01).contains(&last));
        }
        assert!(!CHAIN.can_scale(f64::NAN));
    }

    #[test]
    fn the_rates_sum_to_at_most_the_budget() {
        for budget in [CHAIN, WINDOW] {
            let mut spent = budget.head_rate(0.01);
            while let Some(rate) = budget.next_rate(0.01, spent) {
                spent += rate;
            }
            assert!(
                spent <= 0.01 && spent > 0.01 * (1.0 - 1e-9),
                "{budget:?} {spent}"
            );
        }
    }
}
