//! Dense mode: the bitmap itself, from word `header::DENSE_BITMAP` of the block (bit `p` is
//! bit `p % 64` of its word `p / 64`, padding bits zero), with its number of zero bits in the
//! header and the estimate for that number in word `header::DENSE_ESTIMATE`, so that a count
//! is one read and an add one bit and, when the bit was zero, one logarithm.

use super::counter::{bit_positions, Counter, LcError, SetBits};
use super::geometry::{dense_words, estimate};
use super::header::{take_dense_zeros, Header, Mode, DENSE_BITMAP, DENSE_ESTIMATE};
use crate::core::block::Block;

impl Counter {
    /// The dense bitmap's words (bit `p` is bit `p % 64` of word `p / 64`; padding zero).
    pub fn bitmap_words(&self) -> Option<&[u64]> {
        let end = dense_words(self.geometry.m) as usize;
        (self.mode() == Mode::Dense).then(|| &self.block.words()[DENSE_BITMAP..end])
    }

    /// The positions of the set bits (of the zero bits when `zeros`) of the dense bitmap.
    pub(super) fn dense_positions(&self, zeros: bool) -> impl Iterator<Item = u64> + '_ {
        bit_positions(
            self.bitmap_words().unwrap_or_default(),
            zeros,
            self.geometry.m,
        )
    }

    /// Sets bit `pos` (< m) in dense mode; true if it was zero.
    #[inline]
    pub(super) fn set_dense(&mut self, pos: u64) -> bool {
        let m = self.geometry.m;
        let words = self.block.words_mut();
        let word = &mut words[DENSE_BITMAP + (pos / 64) as usize];
        let mask = 1u64 << (pos % 64);
        let was_zero = *word & mask == 0;
        *word |= mask;
        if was_zero {
            let zeros = take_dense_zeros(&mut words[0], 1);
            words[DENSE_ESTIMATE] = estimate(m, zeros);
        }
        was_zero
    }

    /// Sets bits of the dense bitmap (any order, repeats allowed), taking the estimate once.
    pub(super) fn set_bits(&mut self, positions: impl Iterator<Item = u64>) {
        set_bits(&mut self.block, self.geometry.m, positions);
    }

    /// Sets the bits set in `words` (a bitmap of this counter's size), taking the estimate once.
    pub(super) fn or_words(&mut self, words: &[u64]) {
        let m = self.geometry.m;
        let mine = &mut self.block.words_mut()[DENSE_BITMAP..DENSE_BITMAP + words.len()];
        let mut ones = 0;
        for (w, &other) in mine.iter_mut().zip(words) {
            *w |= other;
            ones += u64::from(w.count_ones());
        }
        set_dense_count(&mut self.block, m, m - ones);
    }

    /// This exact or sparse counter's set bits in a dense block of its size.
    pub(super) fn listed_as_dense(&self) -> Result<Block, LcError> {
        let bits = SetBits::Positions {
            count: self.header().count,
            sorted: self.positions(),
        };
        Counter::dense_block(self.geometry.m, bits)
    }

    /// A dense block of `m` bits holding `bits`.
    pub(super) fn dense_block(m: u64, bits: SetBits) -> Result<Block, LcError> {
        let mut block = Block::zeroed(dense_words(m)).ok_or(LcError::OutOfMemory)?;
        match bits {
            SetBits::Words(words) => {
                block.words_mut()[DENSE_BITMAP..DENSE_BITMAP + words.len()].copy_from_slice(words);
                let ones: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
                set_dense_count(&mut block, m, m - ones);
            }
            SetBits::Positions { sorted, .. } => {
                set_dense_count(&mut block, m, m);
                set_bits(&mut block, m, sorted);
            }
        }
        Ok(block)
    }

    /// Overwrites the dense bitmap from byte `offset` on (bit 8·i + j is bit j of byte i) and
    /// keeps the count of zeros; `codec::write_dense` has checked the range and the padding
    /// bits. Does nothing unless dense.
    pub(crate) fn write_bitmap_bytes(&mut self, offset: usize, bytes: &[u8]) {
        let header = self.header();
        if header.mode != Mode::Dense {
            return;
        }
        let mut zeros = header.count;
        let words = self.block.words_mut();
        for (i, &new) in bytes.iter().enumerate() {
            let at = offset + i;
            let (word, shift) = (&mut words[DENSE_BITMAP + at / 8], (at % 8) * 8);
            let old = (*word >> shift) as u8;
            // The byte's zeros are part of `zeros`, so this cannot underflow.
            zeros = zeros + u64::from(old.count_ones()) - u64::from(new.count_ones());
            *word = (*word & !(0xff << shift)) | (u64::from(new) << shift);
        }
        set_dense_count(&mut self.block, self.geometry.m, zeros);
    }

    /// Lists a dense counter with no more bits set than a list holds as that list, as a load
    /// of its bitmap does (`bits_block`): after each piece of a chunked load, so that it has
    /// the form, and the size, a reload gives it. Out of memory, it stays dense: the same
    /// bits, in the larger form.
    pub(crate) fn relist_if_sparse(&mut self) {
        let Some(words) = self.bitmap_words() else {
            return;
        };
        if self.bits_set() <= self.geometry.sparse_limit {
            if let Ok(block) = self.bits_block(SetBits::Words(words), u64::MAX) {
                self.block = block;
            }
        }
    }
}

/// A dense block's header and estimate for `zeros` zero bits out of `m`.
fn set_dense_count(block: &mut Block, m: u64, zeros: u64) {
    Header {
        mode: Mode::Dense,
        count: zeros,
    }
    .write(block);
    block.words_mut()[DENSE_ESTIMATE] = estimate(m, zeros);
}

/// Sets bits of a dense block of `m` bits, keeping its zero count and estimate.
fn set_bits(block: &mut Block, m: u64, positions: impl Iterator<Item = u64>) {
    let words = block.words_mut();
    let mut newly = 0;
    for p in positions {
        let word = &mut words[DENSE_BITMAP + (p / 64) as usize];
        let mask = 1u64 << (p % 64);
        newly += (*word & mask == 0) as u64;
        *word |= mask;
    }
    let zeros = take_dense_zeros(&mut words[0], newly);
    words[DENSE_ESTIMATE] = estimate(m, zeros);
}
