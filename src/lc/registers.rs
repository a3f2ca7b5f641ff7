//! Registers mode: the sketch's `2^p` registers (levels.rs, "Registers"), 27 bits each, packed
//! from word `header::SKETCH_REGISTERS` on (register `i` at bits `27·i ..`, low bits first,
//! one may straddle two words), after the running estimate, its variance and `μ`. An add
//! changes at most one register; `μ` and the running estimate follow it from the levels that
//! change (`levels::unset_weight_taken`), not from a pass over the register.

use super::counter::{Counter, LcError};
use super::geometry::registers_words;
use super::header::{Header, Mode, SKETCH_REGISTERS};
use super::levels::{token, unset_weight, unset_weight_taken, update, REGISTER_BITS};
use super::running::Running;
use crate::core::block::Block;

impl Counter {
    /// Register `i` (registers mode).
    #[inline]
    pub(super) fn register(&self, i: u64) -> u32 {
        read_register(&self.block.words()[SKETCH_REGISTERS..], i)
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
        running.step(unset_weight_taken(old, k, p));
        let words = self.block.words_mut();
        write_register(&mut words[SKETCH_REGISTERS..], i, new);
        running.write(words);
        true
    }
}

const REGISTER_MASK: u64 = (1 << REGISTER_BITS) - 1;

/// Register `i` of the packed registers `words`.
#[inline]
pub fn read_register(words: &[u64], i: u64) -> u32 {
    let bit = REGISTER_BITS * i;
    let (w, shift) = ((bit / 64) as usize, bit % 64);
    let mut value = words[w] >> shift;
    if shift + REGISTER_BITS > 64 {
        value |= words[w + 1] << (64 - shift);
    }
    (value & REGISTER_MASK) as u32
}

/// Sets register `i` of the packed registers `words` to `value` (< 2^REGISTER_BITS).
#[inline]
fn write_register(words: &mut [u64], i: u64, value: u32) {
    let bit = REGISTER_BITS * i;
    let (w, shift) = ((bit / 64) as usize, bit % 64);
    let value = u64::from(value);
    words[w] = (words[w] & !(REGISTER_MASK << shift)) | value << shift;
    if shift + REGISTER_BITS > 64 {
        let high = REGISTER_MASK >> (64 - shift);
        words[w + 1] = (words[w + 1] & !high) | value >> (64 - shift);
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
        write_register(&mut words[SKETCH_REGISTERS..], i as u64, r);
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
