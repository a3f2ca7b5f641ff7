//! Registers mode: the sketch's `2^p` registers (levels.rs, "Registers"), 32 bits each, two a
//! word from `header::SKETCH_REGISTERS` (register `i` in word `i/2`, low half first), after
//! the running estimate, its variance and `μ`. An add changes at most one register; `μ` and
//! the running estimate follow it in O(window).

use super::block::Block;
use super::counter::{Counter, LcError};
use super::geometry::registers_words;
use super::header::{Header, Mode, SKETCH_REGISTERS};
use super::levels::{token, unset_weight, update};
use super::tokens::Running;

impl Counter {
    /// Register `i` (registers mode).
    #[inline]
    pub(super) fn register(&self, i: u64) -> u32 {
        let word = self.block.words()[SKETCH_REGISTERS + (i / 2) as usize];
        (word >> (32 * (i % 2))) as u32
    }

    /// Every register, in order (registers mode).
    pub fn registers(&self) -> impl Iterator<Item = u32> + '_ {
        let n = 1u64 << self.geometry.precision;
        (0..n).map(|i| self.register(i))
    }

    /// Adds `h` in registers mode; true if its register changed.
    #[inline]
    pub(super) fn add_register(&mut self, h: u64) -> bool {
        let p = self.geometry.precision;
        let (i, k) = token(h, p);
        let old = self.register(i);
        let new = update(old, k);
        if new == old {
            return false;
        }
        let mut running = self.running();
        running.step(unset_weight(old, p) - unset_weight(new, p));
        let words = self.block.words_mut();
        let word = &mut words[SKETCH_REGISTERS + (i / 2) as usize];
        let shift = 32 * (i % 2);
        *word = (*word & !(0xffff_ffff << shift)) | u64::from(new) << shift;
        running.write(words);
        true
    }
}

/// A registers block holding `registers` (`2^p` of them) with this running estimate and
/// variance; `μ` is computed from the registers.
pub fn registers_block(
    p: u32,
    registers: &[u32],
    estimate: f64,
    variance: f64,
) -> Result<Block, LcError> {
    let mut block = Block::zeroed(registers_words(p)).ok_or(LcError::OutOfMemory)?;
    let words = block.words_mut();
    let mut mu = 0u128;
    for (i, &r) in registers.iter().enumerate() {
        mu += unset_weight(r, p);
        words[SKETCH_REGISTERS + i / 2] |= u64::from(r) << (32 * (i % 2));
    }
    Running {
        estimate,
        variance,
        mu,
    }
    .write(words);
    Header {
        mode: Mode::Registers,
        count: 0,
    }
    .write(&mut block);
    Ok(block)
}
