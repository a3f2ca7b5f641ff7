//! Sparse mode: the sorted positions of the set bits, Elias–Fano coded over `m` from bit
//! `header::STREAM` of the block (counter.rs, "Three modes"); its count is the estimate of a
//! bitmap with `m − k` zero bits. The stream operations here serve exact mode too, whose
//! stream is the same code over the fingerprints' universe.

use super::counter::{Counter, LcError, SetBits};
use super::geometry::stream_words;
use super::header::{Header, Mode, STREAM};
use crate::core::block::Block;
use crate::core::ef::{self, Shape};
use crate::core::ef_decode;

impl Counter {
    /// The exact or sparse stream: the words, where it starts and its shape.
    pub fn stream(&self) -> Option<(&[u64], u64, Shape)> {
        (self.mode() != Mode::Dense).then(|| (self.block.words(), STREAM, self.shape()))
    }

    /// The sparse mode's positions, in order.
    pub(super) fn sparse_positions(&self) -> ef::Iter<'_> {
        ef::iter(self.block.words(), STREAM, self.shape())
    }

    /// Where `x` goes in the exact or sparse stream: its shape and `x`'s rank, or None when
    /// `x` is there already.
    pub(super) fn absent(&self, x: u64) -> Option<(Shape, u64)> {
        let shape = self.shape();
        let probe = ef::find(self.block.words(), STREAM, shape, x);
        (!probe.found).then_some((shape, probe.rank))
    }

    /// Sets bit `p` (sparse mode); past the sparse limit the counter turns dense, refused
    /// (nothing changed) when the bitmap would take more than `limit` bytes.
    pub(super) fn add_position(&mut self, p: u64, limit: u64) -> Result<bool, LcError> {
        let Some((shape, rank)) = self.absent(p) else {
            return Ok(false);
        };
        if shape.k < self.geometry.sparse_limit {
            self.insert(Mode::Sparse, shape, rank, p)?;
        } else {
            self.check_dense_within(limit)?;
            let bits = SetBits::Positions {
                count: shape.k + 1,
                sorted: Box::new(self.sparse_positions().chain(std::iter::once(p))),
            };
            self.block = Counter::dense_block(self.geometry.m, bits)?;
        }
        Ok(true)
    }

    /// Inserts `x` at `rank` into the exact or sparse stream of shape `shape` (growing the
    /// block, or rebuilding the stream when its low-bit width changes); nothing changed on
    /// error.
    pub(super) fn insert(
        &mut self,
        mode: Mode,
        shape: Shape,
        rank: u64,
        x: u64,
    ) -> Result<(), LcError> {
        let next = Shape::new(shape.k + 1, self.universe());
        if next.l == shape.l {
            self.block
                .resize(stream_words(next))
                .map_err(|_| LcError::OutOfMemory)?;
            ef::insert(self.block.words_mut(), STREAM, shape, rank, x);
            let count = next.k;
            Header { mode, count }.write(&mut self.block);
        } else if shape.k == 0 {
            // The first value: nothing to decode.
            self.block = Counter::stream_block(mode, self.universe(), 1, std::iter::once(x))?;
        } else {
            let values = ef_decode::values_inserting(self.block.words(), STREAM, shape, rank, x)
                .ok_or(LcError::OutOfMemory)?
                .into_iter();
            self.block = Counter::stream_block(mode, self.universe(), next.k, values)?;
        }
        Ok(())
    }

    /// A block in `mode` (exact or sparse) holding `k` values below `universe`, sorted and
    /// distinct.
    pub(super) fn stream_block(
        mode: Mode,
        universe: u64,
        k: u64,
        values: impl Iterator<Item = u64>,
    ) -> Result<Block, LcError> {
        let shape = Shape::new(k, universe);
        let mut block = Block::zeroed(stream_words(shape)).ok_or(LcError::OutOfMemory)?;
        ef::write(block.words_mut(), STREAM, shape, values);
        Header { mode, count: k }.write(&mut block);
        Ok(block)
    }
}
