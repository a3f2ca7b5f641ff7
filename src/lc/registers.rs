//! Registers mode: the sketch's `2^p` registers (levels.rs, "Registers"), 27 bits each, packed
//! from word `header::SKETCH_REGISTERS` on (register `i` at bits `27·i ..`, low bits first,
//! one may straddle two words), after the running estimate, its variance and `μ`. An add
//! changes at most one register; `μ` and the running estimate follow it from the levels that
//! change (`levels::unset_weight_taken`), not from a pass over the register.

use super::counter::{Counter, LcError};
use super::geometry::registers_words;
use super::header::{Header, Mode, SKETCH_REGISTERS};
use super::levels::{registers_counts, token, unset_weight_taken, update, REGISTER_BITS};
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

/// Words of a group of 64 packed registers, the packing's period (64 · 27 bits).
pub const GROUP_WORDS: usize = REGISTER_BITS as usize;

/// Unpacks whole groups of 64 registers, as fast as this CPU allows: many-key unions read
/// every register of every counter this way. With AVX2, eight registers (27 bytes) take two
/// byte shuffles, two per-lane shifts and a few moves, where one by one each register takes
/// a handful of instructions (a shift pair across two words, a mask, a store).
#[derive(Clone, Copy)]
pub struct GroupUnpacker {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    avx2: bool,
}

impl GroupUnpacker {
    pub fn for_this_cpu() -> GroupUnpacker {
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = false;
        GroupUnpacker { avx2 }
    }

    /// The 64 registers packed in `group`, in order.
    #[inline(always)]
    pub fn unpack(self, group: &[u64; GROUP_WORDS]) -> [u32; 64] {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only where the CPU has AVX2.
            return unsafe { unpack_group_with_avx2(group) };
        }
        std::array::from_fn(|j| read_register(group, j as u64))
    }
}

/// Eight registers take 27 bytes. Register `j` of eight starts at bit `27·j`: byte `27·j / 8`,
/// bit `27·j % 8` of it, and lies within the 5 bytes from there. Registers 0–3 are read from
/// the 16 bytes at the group of eight's first byte, 4–7 from the 16 at its byte 13.
#[cfg(target_arch = "x86_64")]
const HALF_START: [usize; 2] = [0, 13];

/// `vpshufb` control (per 128-bit lane, the same 16 bytes in both) putting the 5 bytes of
/// register `4·half + i` at the low end of 64-bit lane `i`, zeros above them.
#[cfg(target_arch = "x86_64")]
const fn byte_control(half: usize) -> [i8; 32] {
    let mut control = [-1i8; 32];
    let mut i = 0;
    while i < 4 {
        let first = REGISTER_BITS as usize * (4 * half + i) / 8 - HALF_START[half];
        let mut b = 0;
        while b < 5 {
            control[8 * i + b] = (first + b) as i8;
            b += 1;
        }
        i += 1;
    }
    control
}

/// The bit within its first byte where register `4·half + i` starts, for 64-bit lane `i`.
#[cfg(target_arch = "x86_64")]
const fn bit_shifts(half: usize) -> [i64; 4] {
    let mut shifts = [0i64; 4];
    let mut i = 0;
    while i < 4 {
        shifts[i] = (REGISTER_BITS as usize * (4 * half + i) % 8) as i64;
        i += 1;
    }
    shifts
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn unpack_group_with_avx2(group: &[u64; GROUP_WORDS]) -> [u32; 64] {
    use std::arch::x86_64::*;
    const CONTROLS: [[i8; 32]; 2] = [byte_control(0), byte_control(1)];
    const SHIFTS: [[i64; 4]; 2] = [bit_shifts(0), bit_shifts(1)];
    // The group and a word of zeros: the last 16-byte load, at byte 27·7 + 13 = 202, ends
    // at 218, within these 224 bytes.
    let mut words = [0u64; GROUP_WORDS + 1];
    words[..GROUP_WORDS].copy_from_slice(group);
    let bytes: *const u8 = words.as_ptr().cast();
    // SAFETY: reads the 32 bytes of the array.
    let control = CONTROLS.map(|c| unsafe { _mm256_loadu_si256(c.as_ptr().cast()) });
    let shift = SHIFTS.map(|[a, b, c, d]| _mm256_setr_epi64x(a, b, c, d));
    let mask = _mm256_set1_epi64x(REGISTER_MASK as i64);
    // The low 32 bits of each 64-bit lane, in order, in both 128-bit halves.
    let low_halves = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    let mut out = [0u32; 64];
    for eight in 0..8 {
        let half = |h: usize| {
            let at = 27 * eight + HALF_START[h];
            // SAFETY: at + 16 ≤ 218 ≤ 224 bytes of `words` (above).
            let sixteen = unsafe { _mm_loadu_si128(bytes.add(at).cast()) };
            let lanes = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(sixteen), control[h]);
            let registers = _mm256_and_si256(_mm256_srlv_epi64(lanes, shift[h]), mask);
            _mm256_permutevar8x32_epi32(registers, low_halves)
        };
        let both = _mm256_blend_epi32::<0xf0>(half(0), half(1));
        // SAFETY: 8·eight + 8 ≤ 64 registers of `out`.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(8 * eight).cast(), both) };
    }
    out
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
    let mu = registers_counts(registers, p).1;
    registers_block_with(
        p,
        registers,
        Running {
            estimate,
            variance,
            mu,
        },
    )
}

/// [`registers_block`] with the running state whole, for a caller that already has the
/// registers' `μ` (`registers_counts`).
pub fn registers_block_with(p: u32, registers: &[u32], running: Running) -> Result<Block, LcError> {
    let mut block = Block::zeroed(registers_words(p)).ok_or(LcError::OutOfMemory)?;
    let words = block.words_mut();
    for (i, &r) in registers.iter().enumerate() {
        write_register(&mut words[SKETCH_REGISTERS..], i as u64, r);
    }
    running.write(words);
    Header {
        mode: Mode::Registers,
        count: 0,
    }
    .write(&mut block);
    Ok(block)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A group unpacked on this CPU's path and on the one-by-one path gives each register
        /// as `read_register` reads it.
        #[test]
        fn groups_unpack_as_registers_read(words in proptest::collection::vec(any::<u64>(), GROUP_WORDS)) {
            let group: &[u64; GROUP_WORDS] = words.as_slice().try_into().unwrap();
            let want: Vec<u32> = (0..64).map(|j| read_register(group, j)).collect();
            prop_assert_eq!(GroupUnpacker::for_this_cpu().unpack(group).to_vec(), want.clone());
            prop_assert_eq!(GroupUnpacker { avx2: false }.unpack(group).to_vec(), want);
        }
    }
}
