//! The scaling chain: a list of Bloom filters that grows as items arrive (a Scalable Bloom
//! Filter, Almeida, Baquero, Preguiça, Hutchison, 2007).
//!
//! * Expansion e ≥ 1, or non-scaling (e = 0; `EXPANSION 0` ≡ `NONSCALING`). A non-scaling chain
//!   is one filter sized for the requested rate p; when it holds its capacity a new item is
//!   refused (`ERR non scaling filter is full`).
//! * In a scaling chain, sub-filter i has capacity c·e^i and error rate p_i = p·(1−r)·r^i with
//!   r = `TIGHTENING`. Since Σ p_i = p·(1−r)·Σ r^i ≤ p, the compound false-positive rate (a
//!   lookup hits if any sub-filter hits, so it is at most Σ p_i) stays ≤ p at any fill.
//!   A new sub-filter is added when the last one holds its capacity.
//! * r = 0.85 is the gentle end of the range Almeida et al. recommend (0.8–0.9) for growth
//!   factors 2–4: each new, larger sub-filter pays only −ln r / ln²2 ≈ 0.34 extra bits per
//!   item over its predecessor. RedisBloom halves the rate (r = 0.5, and p/2 for the first),
//!   which at 100× growth costs 23–33 bits per item against ~14 here.
//! * Every sub-filter's own parameters are stored in the encoding, so this schedule can change
//!   in a later version without breaking stored values; only new sub-filters follow it.
//! * Limits, checked before anything is allocated: the key's total bytes stay within the
//!   caller's limit (`max-memory-per-key`), p_i stays ≥ `MIN_ERROR_RATE` (about 200 scale-outs
//!   at most), capacity arithmetic is checked. Each failure is an error, never an abort.
//! * `items` counts the adds that returned "new"; each sub-filter counts its own.

use super::filter::{Filter, FilterParams, SizeError, MIN_ERROR_RATE};
use crate::hashing::ItemHash;

/// The error-rate tightening ratio r between consecutive sub-filters.
pub const TIGHTENING: f64 = 0.85;

/// Why a chain could not be created or could not take an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// A non-scaling filter holds its capacity.
    Full,
    /// The key would need `needed` bytes, over the `limit`.
    TooLarge { needed: u64, limit: u64 },
    /// The requested error rate is too small to size a filter for.
    ErrorRate,
    /// Scaling again would push a sub-filter's error rate below `MIN_ERROR_RATE`.
    CannotScale,
    /// Capacity or size arithmetic overflows.
    Overflow,
    /// The allocator refused.
    OutOfMemory,
}

impl ChainError {
    /// The error reply clients see.
    pub fn message(&self) -> String {
        match self {
            ChainError::Full => "ERR non scaling filter is full".to_string(),
            ChainError::TooLarge { needed, limit } => format!(
                "ERR filter would use {needed} bytes, more than max-memory-per-key ({limit} bytes)"
            ),
            ChainError::ErrorRate => {
                format!("ERR error rate too small (a filter's error rate must be at least {MIN_ERROR_RATE:e})")
            }
            ChainError::CannotScale => format!(
                "ERR filter cannot scale further: a new sub-filter's error rate would be below {MIN_ERROR_RATE:e}"
            ),
            ChainError::Overflow => "ERR filter too large (capacity overflows)".to_string(),
            ChainError::OutOfMemory => "ERR insufficient memory to create filter".to_string(),
        }
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

/// Bytes a chain of `filters` sub-filters with `data_bytes` of bits occupies in memory.
pub fn memory_bytes_for(filters: u64, data_bytes: u64) -> Option<u64> {
    let fixed = std::mem::size_of::<Chain>() as u64;
    let per_filter = std::mem::size_of::<Filter>() as u64;
    filters
        .checked_mul(per_filter)?
        .checked_add(fixed)?
        .checked_add(data_bytes)
}

#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    error_rate: f64,
    /// 0: non-scaling.
    expansion: u32,
    items: u64,
    filters: Vec<Filter>,
}

impl Chain {
    /// A chain with one empty filter, refused if it would take more than `limit` bytes.
    pub fn new(
        error_rate: f64,
        capacity: u64,
        expansion: u32,
        limit: u64,
    ) -> Result<Self, ChainError> {
        let first_rate = if expansion == 0 {
            error_rate
        } else {
            error_rate * (1.0 - TIGHTENING)
        };
        let params = FilterParams::for_capacity(capacity, first_rate)?;
        let mut chain = Self {
            error_rate,
            expansion,
            items: 0,
            filters: Vec::new(),
        };
        chain.push_filter(params, limit)?;
        Ok(chain)
    }

    /// A chain from decoded parts; the codec has validated them (at least one filter, a
    /// non-scaling chain has exactly one).
    pub fn from_parts(error_rate: f64, expansion: u32, filters: Vec<Filter>) -> Self {
        let items = filters.iter().map(Filter::items).sum();
        Self {
            error_rate,
            expansion,
            items,
            filters,
        }
    }

    /// A deep copy, allocated fallibly (`COPY` of a large filter must not abort the server).
    pub fn try_clone(&self) -> Result<Self, ChainError> {
        let mut filters = Vec::new();
        filters
            .try_reserve_exact(self.filters.len())
            .map_err(|_| ChainError::OutOfMemory)?;
        for f in &self.filters {
            let mut copy = Filter::new(*f.params(), f.items())?;
            copy.words_mut().copy_from_slice(f.words());
            filters.push(copy);
        }
        Ok(Self::from_parts(self.error_rate, self.expansion, filters))
    }

    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    /// The expansion factor, or None for a non-scaling chain.
    pub fn expansion(&self) -> Option<u32> {
        (self.expansion != 0).then_some(self.expansion)
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn filters(&self) -> &[Filter] {
        &self.filters
    }

    pub fn filters_mut(&mut self) -> &mut [Filter] {
        &mut self.filters
    }

    /// The sum of the sub-filters' capacities.
    pub fn capacity(&self) -> u64 {
        self.filters
            .iter()
            .fold(0u64, |c, f| c.saturating_add(f.params().capacity))
    }

    /// Bytes of all bit arrays.
    pub fn data_bytes(&self) -> u64 {
        self.filters.iter().map(|f| f.params().bytes()).sum()
    }

    /// Bytes the chain occupies in memory.
    pub fn memory_bytes(&self) -> u64 {
        memory_bytes_for(self.filters.len() as u64, self.data_bytes()).unwrap_or(u64::MAX)
    }

    /// Whether the item is (probably) present.
    #[inline]
    pub fn contains(&self, hash: &ItemHash) -> bool {
        // The newest filter is the largest and holds most items: look there first.
        self.filters.iter().rev().any(|f| f.contains(hash))
    }

    /// Adds an item: Ok(true) if it was new, Ok(false) if it was (probably) present already.
    /// Scaling never makes the key exceed `limit` bytes.
    pub fn add(&mut self, hash: &ItemHash, limit: u64) -> Result<bool, ChainError> {
        if self.contains(hash) {
            return Ok(false);
        }
        if self.last().is_full() {
            if self.expansion == 0 {
                return Err(ChainError::Full);
            }
            let params = self.next_params()?;
            self.push_filter(params, limit)?;
        }
        let last = self.filters.len() - 1;
        self.filters[last].insert(hash);
        self.items += 1;
        Ok(true)
    }

    fn last(&self) -> &Filter {
        // A chain always has at least one filter (new and from_parts guarantee it).
        &self.filters[self.filters.len() - 1]
    }

    /// The next sub-filter: capacity c·e^i, error rate p·(1−r)·r^i.
    fn next_params(&self) -> Result<FilterParams, ChainError> {
        let i = self.filters.len();
        let capacity = self
            .last()
            .params()
            .capacity
            .checked_mul(self.expansion as u64)
            .ok_or(ChainError::Overflow)?;
        let rate = self.error_rate * (1.0 - TIGHTENING) * TIGHTENING.powi(i as i32);
        if rate.is_nan() || rate < MIN_ERROR_RATE {
            return Err(ChainError::CannotScale);
        }
        Ok(FilterParams::for_capacity(capacity, rate)?)
    }

    fn push_filter(&mut self, params: FilterParams, limit: u64) -> Result<(), ChainError> {
        let needed = self
            .data_bytes()
            .checked_add(params.bytes())
            .and_then(|data| memory_bytes_for(self.filters.len() as u64 + 1, data))
            .ok_or(ChainError::Overflow)?;
        if needed > limit {
            return Err(ChainError::TooLarge { needed, limit });
        }
        self.filters
            .try_reserve(1)
            .map_err(|_| ChainError::OutOfMemory)?;
        self.filters.push(Filter::new(params, 0)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashing::hash_item;

    const GIB: u64 = 1 << 30;

    fn h(i: u64) -> ItemHash {
        hash_item(&i.to_le_bytes())
    }

    #[test]
    fn scales_with_tighter_rates_and_counts_items() {
        let mut c = Chain::new(0.01, 10, 2, GIB).unwrap();
        for i in 0..1000 {
            c.add(&h(i), GIB).unwrap();
        }
        // 10 + 20 + 40 + ... ≥ items: 7 filters hold 1270.
        assert_eq!(c.filters().len(), 7);
        assert!(c.items() <= 1000 && c.items() > 990);
        for (i, f) in c.filters().iter().enumerate() {
            let p = f.params();
            assert_eq!(p.capacity, 10 << i);
            let expected = 0.01 * 0.15 * TIGHTENING.powi(i as i32);
            assert!((p.error_rate - expected).abs() < 1e-15);
        }
        let sum: f64 = c.filters().iter().map(|f| f.params().error_rate).sum();
        assert!(sum <= 0.01);
        assert_eq!(c.capacity(), 1270);
        for i in 0..1000 {
            assert!(c.contains(&h(i)));
        }
        assert_eq!(c.add(&h(5), GIB), Ok(false));
        assert_eq!(c.try_clone().unwrap(), c);
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
    fn memory_limit_refuses_creation_and_growth() {
        let err = Chain::new(0.001, 1_000_000_000, 0, GIB).unwrap_err();
        assert!(matches!(err, ChainError::TooLarge { needed, .. } if needed > GIB));
        assert!(err.message().starts_with("ERR "));
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
        let last = c.filters().last().unwrap().params().error_rate;
        assert!(last >= MIN_ERROR_RATE && last * TIGHTENING < MIN_ERROR_RATE);
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
        };
        let mut c = Chain::from_parts(0.5, 4, vec![Filter::new(params, huge).unwrap()]);
        assert_eq!(c.add(&h(1), u64::MAX), Err(ChainError::Overflow));
    }

    #[test]
    fn tiny_rates_are_refused() {
        assert_eq!(Chain::new(1e-15, 10, 2, GIB), Err(ChainError::ErrorRate));
        assert!(Chain::new(1e-15, 10, 0, GIB).is_ok());
    }
}
