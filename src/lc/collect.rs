//! Where a union of many sketches collects its indicators: one bit per (register, level), 256
//! bits a register (levels go up to `max_level(MIN_PRECISION)` = 236), so that a token sets
//! its bit with one OR, whatever the register's state, and tokens of every counter go in
//! without a branch on their level. Within a register's 256 bits level `k` is bit `255 − k`:
//! a register's highest level and the window below it (levels.rs, "Registers") are then one
//! run of bits in the same order as the register's own, laid down and read out with shifts.
//! The union's registers are read out at the end: each register's highest level and the
//! window below it, what `update` would have kept had the same levels come one by one. Its
//! size: 32 bytes per register (64 KiB at the default `p = 11`, a cache-resident working set;
//! 32 MiB at the largest `p`).

use super::counter::LcError;
use super::levels::{WINDOW, WINDOW_MASK};

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

    /// Sets the levels register `reg` holds in register `i`: its highest and the window's,
    /// twenty bits laid down at once.
    #[inline]
    pub fn add_register(&mut self, i: usize, reg: u32) {
        let top = u64::from(reg >> WINDOW);
        if top == 0 {
            return;
        }
        // The top at bit 255 − top, window bit i − 1 (level top − i) just above it.
        let run = u128::from(1 | (reg & WINDOW_MASK) << 1);
        let bit = 255 - top;
        let at = i * WORDS + (bit / 64) as usize;
        let wide = run << (bit % 64);
        self.0[at] |= wide as u64;
        // Bits past the register's last word are levels below 1, never set.
        if (wide >> 64) != 0 {
            self.0[at + 1] |= (wide >> 64) as u64;
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

/// 64 bits of a register's words from bit `from` (≤ 255) on, zeros past the last word.
fn bits_at(words: &[u64], from: u32) -> u64 {
    let (w, s) = ((from / 64) as usize, from % 64);
    let high = words.get(w + 1).copied().unwrap_or(0);
    words[w] >> s | high << 1 << (63 - s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::levels::{max_level, union, update, MIN_PRECISION};
    use proptest::prelude::*;

    #[test]
    fn every_level_fits() {
        assert!(max_level(MIN_PRECISION) < (WORDS * 64) as u64);
    }

    proptest! {
        /// Levels set one by one and read out give the registers `update` builds from the
        /// same levels; registers added whole give their union.
        #[test]
        fn registers_read_out_as_update_and_union_build_them(
            a in proptest::collection::vec(1u64..=236, 0..40),
            b in proptest::collection::vec(1u64..=236, 0..40),
        ) {
            let build = |ks: &[u64]| ks.iter().fold(0u32, |r, &k| update(r, k));
            let mut bits = LevelBits::new(1).unwrap();
            for &k in &a {
                bits.set(k);
            }
            bits.add_register(1, build(&b));
            bits.add_register(1, build(&a));
            let got: Vec<u32> = bits.registers().collect();
            prop_assert_eq!(got, vec![build(&a), union(build(&a), build(&b))]);
        }
    }
}
