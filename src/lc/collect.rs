//! Where a union of many sketches collects its indicators. Registers (levels.rs, "Registers")
//! go into registers, united one by one (`union_packed`: their packed words read once, no
//! branch). Tokens, and registers of a larger precision (reduced level by level), go into
//! [`LevelBits`]: one bit per (register, level), 256 bits a register (levels go up to
//! `max_level(MIN_PRECISION)` = 236), so that a token sets its bit with one OR, whatever the
//! register's state, and tokens of every counter go in without a branch on their level.
//! Within a register's 256 bits level `k` is bit `255 − k`, so that a register's highest level
//! and the window below it are read out at the end as one run of bits: what `update` would
//! have kept had the same levels come one by one. Its size: 32 bytes per register (64 KiB at
//! the default `p = 11`, a cache-resident working set; 32 MiB at the largest `p`). Where the
//! CPU has AVX2, token lists come a chunk at a time (core/ef_chunks.rs), and the tokens of
//! levels that every register already holds are dropped before their stores (`set_chunk`),
//! 16 at a time where it has AVX-512.

use super::counter::LcError;
use super::levels::{union, WINDOW, WINDOW_MASK};
use super::registers::{read_register, GroupUnpacker, GROUP_WORDS};
#[cfg(target_arch = "x86_64")]
use crate::core::ef::SELECT_IN_BYTE;

/// Words per register: levels 0..256.
const WORDS: usize = 4;

/// The set levels of `2^p` registers.
pub struct LevelBits {
    bits: Vec<u64>,
    /// The levels every register has (their 256 bits ANDed) as of the last look, and the
    /// tokens given so far and at which count to look again (`set_chunk`).
    full: [u64; WORDS],
    given: u64,
    next_look: u64,
    /// Where `set_chunk` packs the tokens it keeps (made once, not zeroed at each chunk).
    kept: Vec<u32>,
    /// Whether the CPU has AVX2, BMI2 and POPCNT, which `set_chunk` needs; AVX-512 F, with
    /// which it filters 16 tokens at a time; and POPCNT, with which `tokens_within` counts
    /// the set bits before listing them.
    #[cfg(target_arch = "x86_64")]
    avx2: bool,
    #[cfg(target_arch = "x86_64")]
    avx512: bool,
    #[cfg(target_arch = "x86_64")]
    popcnt: bool,
}

/// Tokens `set_chunk` filters before storing them.
const PIECE: usize = 512;

impl LevelBits {
    /// `2^p` empty registers; `OutOfMemory` if the allocation fails.
    pub fn new(p: u32) -> Result<LevelBits, LcError> {
        let len = WORDS << p;
        let mut bits = Vec::new();
        bits.try_reserve_exact(len)
            .map_err(|_| LcError::OutOfMemory)?;
        bits.resize(len, 0);
        let mut kept = Vec::new();
        kept.try_reserve_exact(PIECE + 16)
            .map_err(|_| LcError::OutOfMemory)?;
        kept.resize(PIECE + 16, 0);
        Ok(LevelBits {
            bits,
            full: [0; WORDS],
            given: 0,
            next_look: len as u64,
            kept,
            #[cfg(target_arch = "x86_64")]
            avx2: std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("bmi2")
                && std::is_x86_feature_detected!("popcnt"),
            #[cfg(target_arch = "x86_64")]
            avx512: std::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            popcnt: std::is_x86_feature_detected!("popcnt"),
        })
    }

    /// Whether `listed` tokens at precision `p` are put together faster here than by a
    /// sort: a sort costs about a comparison per token and halving, these bits a few passes
    /// over their words (zeroed, counted, read out), so from a token per 16 words on.
    pub fn faster_than_sorting(listed: u64, p: u32) -> bool {
        listed >= ((WORDS as u64) << p) / 16
    }

    /// The set indicators as tokens, in order, if there are at most `limit` of them (None
    /// past it), given that at most `given` tokens were set; `OutOfMemory` if the list
    /// cannot be made.
    pub fn tokens_within(&self, limit: u64, given: u64) -> Result<Option<Vec<u64>>, LcError> {
        let mut room = limit.min(given);
        // Counted, the bits say at once whether they fit: listed one by one, a union past
        // the limit is found so only after `limit` tokens, a branch on each word's last.
        // Tokens that all fit need no count.
        #[cfg(target_arch = "x86_64")]
        if self.popcnt && given > limit {
            // SAFETY: the CPU has POPCNT (`popcnt` says so).
            let set = unsafe { count_set(&self.bits) };
            if set > limit {
                return Ok(None);
            }
            room = set;
        }
        let mut tokens = Vec::new();
        tokens
            .try_reserve_exact(room as usize)
            .map_err(|_| LcError::OutOfMemory)?;
        for (index, words) in self.bits.chunks_exact(WORDS).enumerate() {
            // Levels rise from the last word's top bit to the first word's lowest.
            for (w, &word) in words.iter().enumerate().rev() {
                let mut word = word;
                while word != 0 {
                    if tokens.len() as u64 == limit {
                        return Ok(None);
                    }
                    let bit = 63 - u64::from(word.leading_zeros());
                    tokens.push((index as u64) << 8 | (255 - 64 * w as u64 - bit));
                    word &= !(1 << bit);
                }
            }
        }
        Ok(Some(tokens))
    }

    /// Sets the indicator of token `index·256 + level` (index below `2^p`): bit
    /// `index·256 + 255 − level`.
    #[inline(always)]
    pub fn set(&mut self, token: u64) {
        let (word, mask) = word_and_mask(token);
        self.bits[word] |= mask;
    }

    /// Sets the indicators of `tokens` (`set_chunk` where the CPU has AVX2).
    pub fn set_tokens(&mut self, tokens: &[u32]) {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: the CPU has AVX2, BMI2 and POPCNT (`avx2` says so).
            return unsafe { self.set_chunk(tokens) };
        }
        self.set_all(tokens)
    }

    /// Sets the indicators of `tokens`, as `set` does one.
    #[inline(always)]
    fn set_all(&mut self, tokens: &[u32]) {
        let table = &mut self.bits[..];
        // `2^(p+2)` words: a power of two, so that the masked index is within them whatever
        // the token, and the loop needs no bounds check.
        let last = table.len() - 1;
        let mut set = |token: u32| {
            let (word, mask) = word_and_mask(u64::from(token));
            // SAFETY: `word & last ≤ last`.
            unsafe { *table.get_unchecked_mut(word & last) |= mask };
        };
        // Sorted tokens of one register follow one another, and most are of its lowest
        // levels, in one word: set in order, each OR would wait for the one before it. Four
        // quarters of the list, far apart, set in turn do not.
        let quarter = tokens.len() / 4;
        let (a, rest) = tokens.split_at(quarter);
        let (b, rest) = rest.split_at(quarter);
        let (c, d) = rest.split_at(quarter);
        for i in 0..quarter {
            set(a[i]);
            set(b[i]);
            set(c[i]);
            set(d[i]);
        }
        d[quarter..].iter().for_each(|&t| set(t));
    }

    /// Sets the indicators of `tokens` but those of levels that every register has already:
    /// a union of many lists soon holds every level of the lowest groups in every register,
    /// and most tokens are of those levels (each group half as likely as the one below).
    /// Skipping them changes nothing. Which levels are full is looked at again each time
    /// the tokens given double (an AND over the registers, about a store a word), and
    /// the tokens are filtered 8 or 16 at a time (`kept_avx2`, `kept_avx512`), the ones
    /// kept packed left before their stores.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2,popcnt")]
    pub fn set_chunk(&mut self, tokens: &[u32]) {
        self.given += tokens.len() as u64;
        if self.given >= self.next_look {
            self.look();
        }
        if self.full == [0; WORDS] {
            return self.set_all(tokens);
        }
        let mut kept = std::mem::take(&mut self.kept);
        for piece in tokens.chunks(PIECE) {
            let n = if self.avx512 {
                // SAFETY: the CPU has AVX-512 F (`avx512` says so).
                unsafe { kept_avx512(&self.full, piece, &mut kept) }
            } else {
                kept_avx2(&self.full, piece, &mut kept)
            };
            self.set_all(&kept[..n]);
        }
        self.kept = kept;
    }

    /// Finds the levels every register has, and when to look again (twice the tokens).
    fn look(&mut self) {
        let mut full = [u64::MAX; WORDS];
        for register in self.bits.chunks_exact(WORDS) {
            for (f, w) in full.iter_mut().zip(register) {
                *f &= w;
            }
        }
        self.full = full;
        self.next_look = 2 * self.given;
    }

    /// The registers of these levels, in order.
    pub fn registers(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.chunks_exact(WORDS).map(|words| {
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

/// The word of `LevelBits::bits` holding token `index·256 + level`'s bit, `index·256 + 255 −
/// level`, and the bit's mask in it.
#[inline(always)]
fn word_and_mask(token: u64) -> (usize, u64) {
    let bit = token ^ 0xff;
    ((bit >> 6) as usize, 1 << (bit & 63))
}

/// For each 8-bit mask of lanes kept: their indexes in order (`vpermd` control packing them
/// left; lanes past them: anything).
#[cfg(target_arch = "x86_64")]
const PACK: [[u32; 8]; 256] = {
    let mut table = [[0u32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let mut j = 0;
        while j < (m as u32).count_ones() as usize {
            table[m][j] = SELECT_IN_BYTE[j][m] as u32;
            j += 1;
        }
        m += 1;
    }
    table
};

/// Writes the tokens of `piece` whose levels are not all set in `full` to the first slots
/// of `kept` (room for `PIECE + 16`), in order, 8 at a time: how many.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
fn kept_avx2(full: &[u64; WORDS], piece: &[u32], kept: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    // SAFETY: 32 bytes read from a `[u64; 4]`: lane `q`, bits 32q.. of a register's 256.
    let full_lanes = unsafe { _mm256_loadu_si256(full.as_ptr().cast()) };
    let (byte, five_bits) = (_mm256_set1_epi32(0xff), _mm256_set1_epi32(31));
    let mut n = 0;
    let groups = piece.chunks_exact(8);
    let rest = groups.remainder();
    for group in groups {
        let lanes: &mut [u32; 8] = (&mut kept[n..n + 8]).try_into().expect("8");
        // SAFETY: 32 bytes read from the group (8 tokens), from `PACK[m]` and written to
        // `lanes` (8 slots).
        let m = unsafe {
            let tokens = _mm256_loadu_si256(group.as_ptr().cast());
            // A token's bit within its register's 256: 255 − level.
            let r = _mm256_and_si256(_mm256_xor_si256(tokens, byte), byte);
            let word = _mm256_permutevar8x32_epi32(full_lanes, _mm256_srli_epi32::<5>(r));
            let has = _mm256_srlv_epi32(word, _mm256_and_si256(r, five_bits));
            let has = _mm256_slli_epi32::<31>(has);
            let m = !_mm256_movemask_ps(_mm256_castsi256_ps(has)) as usize & 0xff;
            let order = _mm256_loadu_si256(PACK[m].as_ptr().cast());
            _mm256_storeu_si256(
                lanes.as_mut_ptr().cast(),
                _mm256_permutevar8x32_epi32(tokens, order),
            );
            m
        };
        n += m.count_ones() as usize;
    }
    n + kept_one_by_one(full, rest, &mut kept[n..])
}

/// `kept_avx2` 16 at a time, packed by `vpcompressd`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,popcnt")]
fn kept_avx512(full: &[u64; WORDS], piece: &[u32], kept: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    // SAFETY: 32 bytes read from a `[u64; 4]`, in both halves.
    let full_lanes = unsafe { _mm512_broadcast_i64x4(_mm256_loadu_si256(full.as_ptr().cast())) };
    let (byte, five_bits, one) = (
        _mm512_set1_epi32(0xff),
        _mm512_set1_epi32(31),
        _mm512_set1_epi32(1),
    );
    let mut n = 0;
    let groups = piece.chunks_exact(16);
    let rest = groups.remainder();
    for group in groups {
        let lanes: &mut [u32; 16] = (&mut kept[n..n + 16]).try_into().expect("16");
        // SAFETY: 64 bytes read from the group (16 tokens) and written to `lanes` (16 slots).
        let m = unsafe {
            let tokens = _mm512_loadu_si512(group.as_ptr().cast());
            let r = _mm512_and_si512(_mm512_xor_si512(tokens, byte), byte);
            let word = _mm512_permutexvar_epi32(_mm512_srli_epi32::<5>(r), full_lanes);
            let bit = _mm512_sllv_epi32(one, _mm512_and_si512(r, five_bits));
            let m = !_mm512_test_epi32_mask(word, bit);
            _mm512_storeu_si512(
                lanes.as_mut_ptr().cast(),
                _mm512_maskz_compress_epi32(m, tokens),
            );
            m
        };
        n += m.count_ones() as usize;
    }
    n + kept_one_by_one(full, rest, &mut kept[n..])
}

/// The number of bits set in `bits`, a POPCNT a word.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn count_set(bits: &[u64]) -> u64 {
    bits.iter().map(|w| u64::from(w.count_ones())).sum()
}

/// The tail of `kept_avx2` and `kept_avx512`.
fn kept_one_by_one(full: &[u64; WORDS], tokens: &[u32], kept: &mut [u32]) -> usize {
    let mut n = 0;
    for &token in tokens {
        // The token's word within its register's `WORDS`.
        let (word, mask) = word_and_mask(u64::from(token));
        if full[word % WORDS] & mask == 0 {
            kept[n] = token;
            n += 1;
        }
    }
    n
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
    use crate::lc::levels::{max_level, token, update, MIN_PRECISION};
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

        /// Tokens set a chunk at a time, skipping levels every register has, leave the bits
        /// that setting each leaves, once the low levels have filled up and before.
        #[test]
        fn chunks_set_what_tokens_set(
            seed in any::<u64>(),
            p in MIN_PRECISION..7,
            count in 0usize..12_000,
            chunk in 1usize..700,
        ) {
            if !crate::core::ef_chunks::usable() {
                return Ok(());
            }
            let mut x = seed;
            let tokens: Vec<u32> = (0..count)
                .map(|_| {
                    crate::core::test_rng::step(&mut x);
                    let h = x ^ x >> 29;
                    let (index, level) = token(h, p);
                    (index << 8 | level) as u32
                })
                .collect();
            let mut one_by_one = LevelBits::new(p).unwrap();
            for &t in &tokens {
                one_by_one.set(u64::from(t));
            }
            // Filtered 16 at a time where the CPU can, and 8 at a time.
            for avx512 in [one_by_one.avx512, false] {
                let mut chunked = LevelBits::new(p).unwrap();
                chunked.avx512 = avx512;
                for c in tokens.chunks(chunk) {
                    // SAFETY: the CPU has the instructions (checked above).
                    unsafe { chunked.set_chunk(c) };
                }
                prop_assert_eq!(&chunked.bits, &one_by_one.bits);
                // 100 tokens a register fill the lowest levels of all: what a look finds, to
                // skip from then on (the loop's last look may have come when fewer than half
                // the tokens were set).
                if count >> p >= 100 {
                    chunked.look();
                    prop_assert!(chunked.full != [0; WORDS], "the low levels filled up");
                }
            }
        }

        /// The set bits listed are the distinct tokens in order, up to the limit and not
        /// past it, whether they are counted first (POPCNT) or not, and whether or not as
        /// many tokens were given as the limit allows.
        #[test]
        fn tokens_within_lists_the_distinct_tokens(
            tokens in proptest::collection::vec((0u64..1 << MIN_PRECISION, 1u64..=200), 0..300),
        ) {
            let p = MIN_PRECISION;
            let tokens: Vec<u64> = tokens.iter().map(|&(index, level)| index << 8 | level).collect();
            let mut distinct = tokens.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let mut levels = LevelBits::new(p).unwrap();
            tokens.iter().for_each(|&t| levels.set(t));
            let given = tokens.len() as u64;
            for popcnt in [levels.popcnt, false] {
                levels.popcnt = popcnt;
                let n = distinct.len() as u64;
                prop_assert_eq!(levels.tokens_within(n, given).unwrap(), Some(distinct.clone()));
                prop_assert_eq!(levels.tokens_within(n + 1, given).unwrap(), Some(distinct.clone()));
                prop_assert_eq!(levels.tokens_within(given, given).unwrap(), Some(distinct.clone()));
                if n > 0 {
                    prop_assert_eq!(levels.tokens_within(n - 1, given).unwrap(), None);
                }
            }
        }

        /// Packed registers united into registers give the registers of both sides' levels,
        /// at a precision of whole groups of 64 and at one of fewer registers.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
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
