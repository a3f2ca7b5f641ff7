//! Exact mode: the sorted set of the items' fingerprints `f = reduce(h1, U)`, Elias–Fano coded
//! from bit `header::STREAM` of the block (counter.rs, "Three modes"). A fingerprint divided
//! by `q = U/m` is the item's bit position, so leaving exact mode needs nothing but the set.

use super::counter::{Counter, LcError, SetBits};
use super::header::{Mode, STREAM};
use crate::core::ef;

impl Counter {
    /// The exact mode's fingerprints, in order.
    pub fn fingerprints(&self) -> Option<ef::Iter<'_>> {
        self.is_exact()
            .then(|| ef::iter(self.block.words(), STREAM, self.shape()))
    }

    /// The bit positions the fingerprints stand for, each once, in order (exact mode).
    pub(super) fn fingerprint_positions(&self) -> impl Iterator<Item = u64> + '_ {
        let q = self.geometry.q;
        dedup(ef::iter(self.block.words(), STREAM, self.shape()).map(move |f| f / q))
    }

    /// Adds fingerprint `f` (exact mode); past the exact limit the counter turns into the
    /// positions of its fingerprints and `f`'s, the dense bitmap refused beyond `limit` bytes.
    pub(super) fn add_fingerprint(&mut self, f: u64, limit: u64) -> Result<bool, LcError> {
        let Some((shape, rank)) = self.absent(f) else {
            return Ok(false);
        };
        if shape.k < self.geometry.exact_limit {
            self.insert(Mode::Exact, shape, rank, f)?;
        } else {
            let mut positions: Vec<u64> = self.positions().collect();
            let p = f / self.geometry.q;
            if let Err(at) = positions.binary_search(&p) {
                positions.insert(at, p);
            }
            let bits = SetBits::Positions {
                count: positions.len() as u64,
                sorted: Box::new(positions.into_iter()),
            };
            self.block = self.bits_block(bits, limit)?;
        }
        Ok(true)
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
            counter.block = Counter::stream_block(Mode::Exact, universe, count, fingerprints)?;
        }
        Ok(counter)
    }
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
