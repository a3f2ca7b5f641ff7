//! Where a union of many sketches collects its indicators. Registers (levels.rs, "Registers")
//! go into registers, united one by one (`union_packed`: their packed words read once, no
//! branch). Tokens, and registers of a larger precision (reduced level by level), go into
//! [`LevelBits`]: one bit per (register, level), 256 bits a register (levels go up to
//! `max_level(MIN_PRECISION)` = 236), so that a token sets its bit with one OR, whatever the
//! register's state, and tokens of every counter go in without a branch on their level.
//! Within a register's 256 bits level `k` is bit `255 − k`, so that a register's highest level
//! and the window below it are read out at the end as one run of bits: what `update` would
//! have kept had the same levels come one by one. Its size: 32 bytes per register (64 KiB at
//! the default `p = 11`, a cache-resident working set; 32 MiB at the largest `p`).

use super::counter::LcError;
use super::levels::{union, WINDOW, WINDOW_MASK};
use super::registers::{read_register, GroupUnpacker, GROUP_WORDS};

/// Words per register: levels 0..256.
const WORDS: usize = 4;

/// The set levels of `2^p` registers.
pub struct LevelBits(Vec<u64>);

impl LevelBits {
    /// `2^p` empty registers; `OutOfMemory` if the allocation fails.
    pub fn new(p: u32) -> Result<LevelBits, LcError> {
        let len = WORDS << p;
        let mut bits = Vec::new();
        bits.try_reserve_exact(len)
            .map_err(|_| LcError::OutOfMemory)?;
        bits.resize(len, 0);
        Ok(LevelBits(bits))
    }

    /// Sets the indicator of token `index·256 + level` (index below `2^p`): bit
    /// `index·256 + 255 − level`.
    #[inline(always)]
    pub fn set(&mut self, token: u64) {
        let bit = token ^ 0xff;
        self.0[(bit >> 6) as usize] |= 1 << (bit & 63);
    }

    /// Sets the indicators of `tokens`, as `set` does one.
    #[inline(always)]
    pub fn set_all(&mut self, tokens: &[u32]) {
        let table = &mut self.0[..];
        // `2^(p+2)` words: a power of two, so that the masked index is within them whatever
        // the token, and the loop needs no bounds check.
        let last = table.len() - 1;
        for &token in tokens {
            let bit = token ^ 0xff;
            let w = (bit >> 6) as usize & last;
            // SAFETY: `w ≤ last` (masked above).
            unsafe { *table.get_unchecked_mut(w) |= 1 << (bit & 63) };
        }
    }

    /// The registers of these levels, in order.
    pub fn registers(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.chunks_exact(WORDS).map(|words| {
            let Some(w) = (0..WORDS).find(|&w| words[w] != 0) else {
                return 0;
            };
            let bit = w as u32 * 64 + words[w].trailing_zeros();
            let top = 255 - bit;
            let window = bits_at(words, bit + 1) as u32 & WINDOW_MASK;
            top << WINDOW | window
        })
    }
}

/// Makes `registers` the union of themselves and the packed registers `words` (registers.rs:
/// 27 bits each, low bits first; at least `registers.len()` of them). Whole groups of 64
/// registers (27 words) are unpacked (`GroupUnpacker`), then united register-wise (a loop the
/// compiler vectorises); a small sketch's few registers one by one.
#[inline(always)]
pub fn union_packed(registers: &mut [u32], words: &[u64]) {
    let whole = registers.len() / 64 * 64;
    let groups = registers[..whole].chunks_exact_mut(64);
    let unpacker = GroupUnpacker::for_this_cpu();
    for (dest, group) in groups.zip(words.chunks_exact(GROUP_WORDS)) {
        let group: &[u64; GROUP_WORDS] = group.try_into().expect("27 words");
        for (d, r) in dest.iter_mut().zip(unpacker.unpack(group)) {
            *d = union(*d, r);
        }
    }
    for (i, d) in registers.iter_mut().enumerate().skip(whole) {
        *d = union(*d, read_register(words, i as u64));
    }
}

/// 64 bits of a register's words from bit `from` (≤ 255) on, zeros past the last word.
fn bits_at(words: &[u64], from: u32) -> u64 {
    let (w, s) = ((from / 64) as usize, from % 64);
    let high = words.get(w + 1).copied().unwrap_or(0);
    words[w] >> s | high << 1 << (63 - s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::header::SKETCH_REGISTERS;
    use crate::lc::levels::{max_level, update, MIN_PRECISION};
    use crate::lc::registers::registers_block;
    use proptest::prelude::*;

    #[test]
    fn every_level_fits() {
        assert!(max_level(MIN_PRECISION) < (WORDS * 64) as u64);
    }

    proptest! {
        /// Levels set one by one and read out give the registers `update` builds from the
        /// same levels.
        #[test]
        fn registers_read_out_as_update_builds_them(
            a in proptest::collection::vec(1u64..=236, 0..40),
        ) {
            let build = |ks: &[u64]| ks.iter().fold(0u32, |r, &k| update(r, k));
            let mut bits = LevelBits::new(1).unwrap();
            for &k in &a {
                bits.set(k);
            }
            let got: Vec<u32> = bits.registers().collect();
            prop_assert_eq!(got, vec![build(&a), 0]);
        }

        /// Packed registers united into registers give the registers of both sides' levels,
        /// at a precision of whole groups of 64 and at one of fewer registers.
        #[test]
        fn packed_registers_unite_as_their_levels(
            a in proptest::collection::vec((0u64..1 << 7, 1u64..=236), 0..600),
            b in proptest::collection::vec((0u64..1 << 7, 1u64..=236), 0..600),
        ) {
            for p in [MIN_PRECISION, 7] {
                let build = |tokens: &[(u64, u64)]| {
                    let mut registers = vec![0u32; 1 << p];
                    for &(i, k) in tokens {
                        let r = &mut registers[(i % (1 << p)) as usize];
                        // Levels above the precision's highest exist at no `p` (loads refuse them).
                        *r = update(*r, k.min(max_level(p)));
                    }
                    registers
                };
                let all: Vec<(u64, u64)> = a.iter().chain(&b).copied().collect();
                let block = registers_block(p, &build(&b), 0.0, 0.0).unwrap();
                let mut got = build(&a);
                union_packed(&mut got, &block.words()[SKETCH_REGISTERS..]);
                prop_assert_eq!(got, build(&all));
            }
        }
    }
}
