//! Elias–Fano streams (ef.rs) of universes up to 2^31 decoded a chunk at a time with AVX2:
//! a many-key count (lc/union.rs) decodes every token of every counter, and this is where its
//! time goes.
//!
//! - **High parts** come a byte of upper bits at a time: the positions of the byte's ones
//!   minus their ranks within it are looked up (`HIGH_PARTS`), offset by the byte's place
//!   minus the rank of its first one, and stored as 8 lanes whatever the byte holds; the
//!   next byte's lanes start after its ones. No branch depends on the bits. Where the CPU
//!   has AVX-512 VBMI2 (Intel since 2019, AMD since 2022), a word of upper bits at a time
//!   instead: `vpcompressb` packs the positions of its ones into bytes, which are widened
//!   16 at a time (about 50 instructions a word against 8 times 10). `wide_high_parts` gives
//!   the high parts alone, widened to 64 bits, for streams of any universe (`ef_decode::decode`).
//! - **Low parts** of 8 values with consecutive ranks from a multiple of 8 start on a bit
//!   that depends only on where the stream starts (`8·l` bits further each time), so for
//!   `l ≤ 15` they lie in 16 bytes from which one byte shuffle and one per-lane shift take
//!   all 8. Larger `l` (streams of a few values in a large universe) are read one by one.
//!   `wide_low_parts` reads them 8 at a time for streams of any universe where the CPU has
//!   AVX-512 (`ef_decode::decode`: exact counters' fingerprints), each lane's words picked from two
//!   8-word loads.
//!
//! The values are those `ef::iter` gives, in order, ending as it ends on a stream that is
//! not a set (more ones than `k`, or fewer), whichever way the high parts come. A third of
//! the time of `ef::iter`'s `fold` on token lists in the caches; a many-key count of 200
//! token lists of 2,000 takes 0.6 of its time before (`cargo bench --bench core --
//! lc_union`), and a word at a time takes 0.9 of that.

use super::ef::{read_bits, vbmi2_usable, Shape, SELECT_IN_BYTE};
use std::arch::x86_64::*;

/// Values handed to the caller at a time (a multiple of 8).
const CHUNK: usize = 512;
/// Room for the 64 lanes a word of upper bits writes from anywhere below a chunk.
const BUFFER: usize = CHUNK + 64;
/// The largest universe decoded here: values and upper-bit positions are kept in 32 bits,
/// and a high part shifted by `l < 32`.
pub const MAX_UNIVERSE: u64 = 1 << 31;
/// The largest `l` whose 8 low parts fit one 16-byte load from any bit within a byte.
const SHUFFLED_LOW_BITS: u32 = 15;

/// For each byte, lane `j`: the position of its `j`-th one minus `j` (lanes past its ones:
/// anything, overwritten by the next byte's).
const HIGH_PARTS: [[u32; 8]; 256] = high_parts();

const fn high_parts() -> [[u32; 8]; 256] {
    let mut table = [[0u32; 8]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut rank = 0;
        while rank < (byte as u32).count_ones() as usize {
            table[byte][rank] = SELECT_IN_BYTE[rank][byte] as u32 - rank as u32;
            rank += 1;
        }
        byte += 1;
    }
    table
}

/// Whether this CPU has what `for_each_chunk` is built for (AVX2, BMI1, BMI2, POPCNT): the
/// check its callers make before calling it. (It takes AVX-512 VBMI2 where it finds it:
/// `ef::vbmi2_usable`.)
pub fn usable() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
        && std::is_x86_feature_detected!("popcnt")
}

/// Calls `f` with the values of the stream of `shape` (universe at most `MAX_UNIVERSE`)
/// starting at bit `base` of `words`, in order, a chunk at a time.
///
/// # Safety
///
/// The CPU has AVX2, BMI1, BMI2 and POPCNT (callers without them enabled must check).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub fn for_each_chunk(words: &[u64], base: u64, shape: Shape, f: impl FnMut(&[u32])) {
    if vbmi2_usable() {
        // SAFETY: the CPU has the instructions (checked above).
        unsafe { for_each_chunk_vbmi2(words, base, shape, f) }
    } else {
        for_each_chunk_by_bytes(words, base, shape, f)
    }
}

/// `for_each_chunk` taking upper bits a byte at a time.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
fn for_each_chunk_by_bytes(words: &[u64], base: u64, shape: Shape, f: impl FnMut(&[u32])) {
    // SAFETY: compiled for the instructions.
    unsafe { chunks::<false>(words, base, shape, f) }
}

/// `for_each_chunk` taking upper bits a word at a time, compiled for AVX-512 VBMI2.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,avx512f,avx512bw,avx512vbmi2")]
fn for_each_chunk_vbmi2(words: &[u64], base: u64, shape: Shape, f: impl FnMut(&[u32])) {
    // SAFETY: compiled for the instructions.
    unsafe { chunks::<true>(words, base, shape, f) }
}

/// Writes the high parts of a stream's values (each one's upper bit's position minus its
/// rank) to `out`, in order, at most `want` (≤ `out.len()`); how many. The stream's upper bits
/// are the `len` bits at bit `upper` of `words`, fewer than 2^32 (so the high parts fit the
/// lanes), whatever its universe: they are taken a word at a time as `for_each_chunk` takes
/// them, and only widened to 64 bits; with VBMI2, a word's straight into `out` where 64
/// values from the next fit in it (values past the count, up to 63, may be overwritten).
///
/// # Safety
///
/// The CPU has AVX2, BMI1, BMI2 and POPCNT (callers without them enabled must check).
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt")]
pub fn wide_high_parts(words: &[u64], upper: u64, len: u64, out: &mut [u64], want: usize) -> usize {
    debug_assert!(len < 1 << 32 && want <= out.len());
    if vbmi2_usable() {
        // SAFETY: the CPU has the instructions (checked above).
        unsafe { wide_high_parts_vbmi2(words, upper, len, out, want) }
    } else {
        // SAFETY: compiled for the instructions.
        unsafe { wide_high_parts_in::<false>(words, upper, len, out, want) }
    }
}

/// `wide_high_parts` taking upper bits a word at a time, compiled for AVX-512 VBMI2.
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,avx512f,avx512bw,avx512vbmi2")]
fn wide_high_parts_vbmi2(
    words: &[u64],
    upper: u64,
    len: u64,
    out: &mut [u64],
    want: usize,
) -> usize {
    // SAFETY: compiled for the instructions.
    unsafe { wide_high_parts_in::<true>(words, upper, len, out, want) }
}

/// Sets `out[i] = out[i] << l | low_i` for the first values of `out`, `low_i` the `l` bits
/// (`0 < l < 64`) at bit `at + i·l` of `words`, 8 at a time: 8 parts from any bit lie in 9
/// words (`63 + 8·63 < 9·64`), each value's one or two picked from two 8-word loads
/// (`vpermt2q`) and shifted into place lane by lane. Returns how many it did, a multiple of
/// 8: it stops where 16 words from the next value's word would pass the end of `words`, and
/// the caller reads the rest one by one. The one-by-one reader carries its place from value
/// to value, so each waits for the one before; here the 8 lanes do not.
///
/// # Safety
///
/// The CPU has AVX-512 F (`ef::vbmi2_usable`, whose 512-bit instructions run at full clock).
#[target_feature(enable = "avx512f")]
pub fn wide_low_parts(words: &[u64], at: u64, l: u32, out: &mut [u64]) -> usize {
    debug_assert!(l > 0 && l < 64);
    let step = i64::from(l);
    let ranks = _mm512_setr_epi64(
        0,
        step,
        2 * step,
        3 * step,
        4 * step,
        5 * step,
        6 * step,
        7 * step,
    );
    let mask = _mm512_set1_epi64(super::ef::low_mask(l) as i64);
    let (width, sixty_four, one, bit) = (
        _mm512_set1_epi64(step),
        _mm512_set1_epi64(64),
        _mm512_set1_epi64(1),
        _mm512_set1_epi64(63),
    );
    let mut done = 0;
    while done + 8 <= out.len() {
        let from = at + done as u64 * u64::from(l);
        let first = (from / 64) as usize;
        if first + 16 > words.len() {
            break;
        }
        let place = _mm512_add_epi64(_mm512_set1_epi64((from % 64) as i64), ranks);
        let (word, shift) = (_mm512_srli_epi64::<6>(place), _mm512_and_si512(place, bit));
        // SAFETY: words `first..first + 16` are in the slice (checked above) and values
        // `done..done + 8` in `out`; the CPU has AVX-512 F (the caller's promise).
        unsafe {
            let a = _mm512_loadu_si512(words.as_ptr().add(first).cast());
            let b = _mm512_loadu_si512(words.as_ptr().add(first + 8).cast());
            let low = _mm512_permutex2var_epi64(a, word, b);
            let high = _mm512_permutex2var_epi64(a, _mm512_add_epi64(word, one), b);
            // A shift by 64 gives 0: the part's high word counts only when it straddles.
            let part = _mm512_or_si512(
                _mm512_srlv_epi64(low, shift),
                _mm512_sllv_epi64(high, _mm512_sub_epi64(sixty_four, shift)),
            );
            let values: *mut __m512i = out.as_mut_ptr().add(done).cast();
            let highs = _mm512_sllv_epi64(_mm512_loadu_si512(values), width);
            _mm512_storeu_si512(values, _mm512_or_si512(highs, _mm512_and_si512(part, mask)));
        }
        done += 8;
    }
    done
}

/// `wide_high_parts`' body; with `VBMI2`, a word's high parts at once (`word_high_parts`).
///
/// # Safety
///
/// As `chunks`'.
#[inline(always)]
unsafe fn wide_high_parts_in<const VBMI2: bool>(
    words: &[u64],
    upper: u64,
    len: u64,
    out: &mut [u64],
    want: usize,
) -> usize {
    let mut lanes = [0u32; 64];
    let (mut n, mut pos) = (0usize, 0u64);
    while pos < len && n < want {
        let bits = read_bits(words, upper + pos, (len - pos).min(64) as u32);
        let got = if VBMI2 && n + 64 <= out.len() {
            // SAFETY: only `wide_high_parts_vbmi2` sets `VBMI2`; 64 values from `n` are in
            // `out` (checked above).
            unsafe { word_high_parts_wide(bits, pos - n as u64, &mut out[n..n + 64]) }
        } else {
            let at = (pos as u32).wrapping_sub(n as u32);
            let got = if VBMI2 {
                // SAFETY: only `wide_high_parts_vbmi2` sets `VBMI2`.
                unsafe { word_high_parts(bits, at, &mut lanes) }
            } else {
                byte_high_parts(bits, at, &mut lanes)
            };
            let take = got.min(want - n);
            for (o, &h) in out[n..n + take].iter_mut().zip(&lanes[..take]) {
                *o = u64::from(h);
            }
            take
        };
        n += got.min(want - n);
        pos += 64;
    }
    n
}

/// `for_each_chunk`'s body; with `VBMI2`, high parts a word at a time (`word_high_parts`).
///
/// # Safety
///
/// Inlined only into functions compiled for `for_each_chunk`'s instructions, and with
/// `VBMI2` for those of `for_each_chunk_vbmi2`.
#[inline(always)]
unsafe fn chunks<const VBMI2: bool>(
    words: &[u64],
    base: u64,
    shape: Shape,
    mut f: impl FnMut(&[u32]),
) {
    let k = shape.k as usize;
    // SAFETY: the CPU has AVX2 (the caller's promise), as for `complete` below.
    let lows = unsafe { Lows::new(words, base, shape.l) };
    let (upper, len) = (base + shape.upper(), shape.k + shape.buckets);
    let mut buffer = [0u32; BUFFER];
    // Values in `buffer` (high parts), and values handed over before them (a multiple of 8
    // until the last chunk, so that the buffer's groups of 8 are groups of ranks).
    let (mut have, mut done) = (0usize, 0usize);
    let mut pos = 0u64;
    while pos < len && done + have < k {
        let bits = read_bits(words, upper + pos, (len - pos).min(64) as u32);
        // The word's first bit minus the rank of its first one, mod 2^32 like the lanes.
        let at = (pos as u32).wrapping_sub((done + have) as u32);
        let lanes: &mut [u32; 64] = (&mut buffer[have..have + 64]).try_into().expect("64");
        have += if VBMI2 {
            // SAFETY: only `for_each_chunk_vbmi2` sets `VBMI2`.
            unsafe { word_high_parts(bits, at, lanes) }
        } else {
            byte_high_parts(bits, at, lanes)
        };
        pos += 64;
        if have >= CHUNK {
            // Never past `k` values, whatever the bits hold (the rest is cut below).
            let whole = have.min(k - done) / 8 * 8;
            // SAFETY: the CPU has AVX2, BMI1 and BMI2.
            unsafe { lows.complete(&mut buffer[..whole], done) };
            f(&buffer[..whole]);
            buffer.copy_within(whole..have, 0);
            (have, done) = (have - whole, done + whole);
        }
    }
    // A stream with more ones than `k` ends at `k`.
    have = have.min(k.saturating_sub(done));
    // SAFETY: the CPU has AVX2, BMI1 and BMI2.
    unsafe { lows.complete(&mut buffer[..have], done) };
    if have > 0 {
        f(&buffer[..have]);
    }
}

/// Writes the high parts of the ones of `bits` (a word of upper bits whose first bit minus
/// the rank of its first one is `at`) to the first lanes, a byte at a time; how many.
#[inline(always)]
fn byte_high_parts(mut bits: u64, mut at: u32, lanes: &mut [u32; 64]) -> usize {
    let mut have = 0;
    for _ in 0..8 {
        let byte = (bits & 0xff) as usize;
        let eight: &mut [u32; 8] = (&mut lanes[have..have + 8]).try_into().expect("8");
        // SAFETY: 32 bytes read from a `[u32; 8]` and written to one (AVX2 is enabled in
        // `for_each_chunk`, into which this is inlined).
        unsafe {
            let parts = _mm256_loadu_si256(HIGH_PARTS[byte].as_ptr().cast());
            let high = _mm256_add_epi32(parts, _mm256_set1_epi32(at as i32));
            _mm256_storeu_si256(eight.as_mut_ptr().cast(), high);
        }
        let ones = byte.count_ones();
        have += ones as usize;
        at = at.wrapping_add(8 - ones);
        bits >>= 8;
    }
    have
}

/// Byte `i` holds `i`: the ranks of a word's ones, and the positions `vpcompressb` packs.
const RANKS: [u8; 64] = {
    let mut ranks = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        ranks[i] = i as u8;
        i += 1;
    }
    ranks
};

/// The positions of the ones of `bits`, each minus its rank, in bytes from the lowest
/// (`vpcompressb`; bytes past the ones: zero minus their index).
///
/// # Safety
///
/// The CPU has AVX-512 F, BW and VBMI2.
#[inline(always)]
unsafe fn word_parts(bits: u64) -> __m512i {
    // SAFETY: 64 bytes read from `RANKS`; the CPU has the instructions (the caller's promise).
    unsafe {
        let ranks = _mm512_loadu_si512(RANKS.as_ptr().cast());
        _mm512_sub_epi8(_mm512_maskz_compress_epi8(bits, ranks), ranks)
    }
}

/// `byte_high_parts` of a whole word at once: the positions of its ones compressed into
/// bytes (`vpcompressb`), minus their ranks, widened to 32 bits 16 at a time.
#[inline(always)]
unsafe fn word_high_parts(bits: u64, at: u32, lanes: &mut [u32; 64]) -> usize {
    // SAFETY: 4 × 64 bytes written to `lanes`; the CPU has AVX-512 F, BW and VBMI2 (the
    // caller's promise).
    unsafe {
        let parts = word_parts(bits);
        let at = _mm512_set1_epi32(at as i32);
        let out: *mut __m512i = lanes.as_mut_ptr().cast();
        let sixteen = |q: __m128i| _mm512_add_epi32(_mm512_cvtepu8_epi32(q), at);
        _mm512_storeu_si512(out, sixteen(_mm512_castsi512_si128(parts)));
        _mm512_storeu_si512(out.add(1), sixteen(_mm512_extracti32x4_epi32::<1>(parts)));
        _mm512_storeu_si512(out.add(2), sixteen(_mm512_extracti32x4_epi32::<2>(parts)));
        _mm512_storeu_si512(out.add(3), sixteen(_mm512_extracti32x4_epi32::<3>(parts)));
    }
    bits.count_ones() as usize
}

/// `word_high_parts` straight into 64-bit values: the positions of the word's ones minus
/// their ranks, plus `at` (the word's place less the ones before it), 8 a store, as many
/// stores as its ones need (values past them: anything). How many ones.
#[inline(always)]
unsafe fn word_high_parts_wide(bits: u64, at: u64, out: &mut [u64]) -> usize {
    debug_assert!(out.len() >= 64);
    let count = bits.count_ones() as usize;
    let mut parts = [0u8; 64];
    // SAFETY: 64 bytes written to `parts`, 8 read from `parts` and 8 values written to `out`
    // per group, the last group ending by byte and value 64; the CPU has AVX-512 F, BW and
    // VBMI2 (the caller's promise).
    unsafe {
        _mm512_storeu_si512(parts.as_mut_ptr().cast(), word_parts(bits));
        let at = _mm512_set1_epi64(at as i64);
        let mut group = 0;
        while group < count {
            let eight = _mm_loadl_epi64(parts.as_ptr().add(group).cast());
            let values = _mm512_add_epi64(_mm512_cvtepu8_epi64(eight), at);
            _mm512_storeu_si512(out.as_mut_ptr().add(group).cast(), values);
            group += 8;
        }
    }
    count
}

/// Where the low parts are and how 8 of them are taken at once.
struct Lows<'a> {
    words: &'a [u64],
    base: u64,
    l: u32,
    /// `vpshufb` control (the same 16 bytes in both halves) putting the 4 bytes from which
    /// low part `j` of a group starts in 32-bit lane `j`, and the lanes' shifts.
    control: __m256i,
    shifts: __m256i,
}

/// `Lows`'s `vpshufb` control and lane shifts for each bit within a byte a stream starts on
/// and each `l ≤ SHUFFLED_LOW_BITS` (made once: a count reads thousands of streams).
const LOW_GATHERS: [[([i8; 32], [i32; 8]); SHUFFLED_LOW_BITS as usize + 1]; 8] = low_gathers();

const fn low_gathers() -> [[([i8; 32], [i32; 8]); SHUFFLED_LOW_BITS as usize + 1]; 8] {
    let mut table = [[([-1i8; 32], [0i32; 8]); SHUFFLED_LOW_BITS as usize + 1]; 8];
    let mut phase = 0;
    while phase < 8 {
        let mut l = 0;
        while l <= SHUFFLED_LOW_BITS as usize {
            let (control, shifts) = &mut table[phase][l];
            let mut j = 0;
            while j < 8 {
                let bit = phase + j * l;
                shifts[j] = (bit % 8) as i32;
                let mut b = 0;
                while b < 4 {
                    let source = bit / 8 + b;
                    if source < 16 {
                        control[j * 4 + b] = source as i8;
                    }
                    b += 1;
                }
                j += 1;
            }
            l += 1;
        }
        phase += 1;
    }
    table
}

impl<'a> Lows<'a> {
    #[target_feature(enable = "avx2")]
    fn new(words: &'a [u64], base: u64, l: u32) -> Lows<'a> {
        // Streams of larger `l` read their low parts one by one: no control.
        let (control, shifts) =
            &LOW_GATHERS[(base % 8) as usize][l.min(SHUFFLED_LOW_BITS) as usize];
        // SAFETY: 32 bytes read from arrays of 32 bytes.
        let (control, shifts) = unsafe {
            (
                _mm256_loadu_si256(control.as_ptr().cast()),
                _mm256_loadu_si256(shifts.as_ptr().cast()),
            )
        };
        Lows {
            words,
            base,
            l,
            control,
            shifts,
        }
    }

    /// Appends their low parts to the high parts `values`, of ranks `first..` (`first` a
    /// multiple of 8).
    #[target_feature(enable = "avx2,bmi1,bmi2")]
    fn complete(&self, values: &mut [u32], first: usize) {
        let l = self.l;
        if l == 0 {
            return;
        }
        let bytes_len = self.words.len() * 8;
        let bytes: *const u8 = self.words.as_ptr().cast();
        let mut i = 0;
        if l <= SHUFFLED_LOW_BITS {
            let mask = _mm256_set1_epi32(((1u64 << l) - 1) as i32);
            let shift = _mm_cvtsi32_si128(l as i32);
            for group in values.chunks_exact_mut(8) {
                let at = ((self.base + (first + i) as u64 * u64::from(l)) / 8) as usize;
                if at + 16 > bytes_len {
                    break;
                }
                let group: &mut [u32; 8] = group.try_into().expect("8");
                // SAFETY: 16 bytes within `words` (checked above); 32 bytes read from and
                // written to a `[u32; 8]`.
                unsafe {
                    let sixteen = _mm_loadu_si128(bytes.add(at).cast());
                    let gathered =
                        _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(sixteen), self.control);
                    let low = _mm256_and_si256(_mm256_srlv_epi32(gathered, self.shifts), mask);
                    let high = _mm256_loadu_si256(group.as_ptr().cast());
                    let value = _mm256_or_si256(_mm256_sll_epi32(high, shift), low);
                    _mm256_storeu_si256(group.as_mut_ptr().cast(), value);
                }
                i += 8;
            }
        }
        for (rank, value) in values.iter_mut().enumerate().skip(i) {
            let at = self.base + (first + rank) as u64 * u64::from(l);
            *value = *value << l | read_bits(self.words, at, l) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ef::{iter, write};
    use proptest::prelude::*;

    /// A build of `for_each_chunk`, handed the callback by reference.
    type Build = fn(&[u64], u64, Shape, &mut dyn FnMut(&[u32]));

    fn by_bytes(words: &[u64], base: u64, shape: Shape, f: &mut dyn FnMut(&[u32])) {
        // SAFETY: only called when the CPU has AVX2 and the rest (`has_avx2`).
        unsafe { for_each_chunk_by_bytes(words, base, shape, f) }
    }

    fn by_words(words: &[u64], base: u64, shape: Shape, f: &mut dyn FnMut(&[u32])) {
        // SAFETY: only called when the CPU has VBMI2 (`vbmi2_usable`).
        unsafe { for_each_chunk_vbmi2(words, base, shape, f) }
    }

    /// The values each build available here decodes (the same, or the test fails).
    fn decoded(words: &[u64], base: u64, shape: Shape) -> Vec<u64> {
        let run = |build: Build| {
            let mut got = Vec::new();
            let mut keep = |c: &[u32]| got.extend(c.iter().map(|&v| u64::from(v)));
            build(words, base, shape, &mut keep);
            got
        };
        let bytes = run(by_bytes);
        if vbmi2_usable() {
            assert_eq!(
                run(by_words),
                bytes,
                "a word at a time and a byte at a time"
            );
        } else {
            eprintln!("no AVX-512 VBMI2 here: words at a time not checked");
        }
        bytes
    }

    fn has_avx2() -> bool {
        usable() || {
            eprintln!("no AVX2 here: nothing checked");
            false
        }
    }

    /// Every `l` whose low parts are gathered 8 at a time, from every bit within a byte: the
    /// values of `ef::iter` (random sets rarely have the largest `l`).
    #[test]
    fn gathers_every_width_from_every_bit() {
        if !has_avx2() {
            return;
        }
        let mut x = 7u64;
        for l in 0..=SHUFFLED_LOW_BITS {
            for base in 0..8 {
                let k = 300u64;
                let universe = k << l;
                let mut set = std::collections::BTreeSet::new();
                while set.len() < k as usize {
                    crate::core::test_rng::step(&mut x);
                    set.insert((x >> 20) % universe);
                }
                let shape = Shape::new(k, universe);
                assert_eq!(shape.l, l);
                let mut words = vec![0u64; (base + shape.bits()).div_ceil(64) as usize];
                write(&mut words, base, shape, set.iter().copied());
                let all: Vec<u64> = set.into_iter().collect();
                assert_eq!(decoded(&words, base, shape), all, "l {l}, base {base}");
            }
        }
    }

    proptest! {
        /// Sets of every size around the chunks' and the groups' edges, at every bit within
        /// a byte, in universes giving `l` on both sides of the shuffled width: the values of
        /// `ef::iter`.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn gives_the_values_of_iter(
            set in proptest::collection::btree_set(0u32..1 << 31, 0..1_500),
            universe_above in 1u64..1 << 24,
            base in 0u64..200,
        ) {
            if !has_avx2() {
                return Ok(());
            }
            let universe = set.last().map_or(1, |&v| u64::from(v) + 1)
                .saturating_add(universe_above).min(MAX_UNIVERSE);
            let shape = Shape::new(set.len() as u64, universe);
            let mut words = vec![0u64; (base + shape.bits()).div_ceil(64) as usize];
            write(&mut words, base, shape, set.iter().map(|&v| u64::from(v)));
            let all: Vec<u64> = set.iter().map(|&v| u64::from(v)).collect();
            prop_assert_eq!(decoded(&words, base, shape), all);
        }

        /// Bits that are not a set of that shape (more ones than `k` or fewer, in any
        /// order): the values `ef::iter` gives from them, and no read outside them.
        #[test]
        fn ends_as_iter_on_any_bits(
            seed in any::<u64>(),
            sparse in any::<bool>(),
            k in 1u64..3_000,
            universe in 1u64..1 << 20,
            base in 0u64..64,
        ) {
            if !has_avx2() {
                return Ok(());
            }
            let shape = Shape::new(k.min(universe), universe);
            let mut x = seed;
            let mut next = || {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let z = (x ^ x >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z ^ z >> 27
            };
            let words: Vec<u64> = (0..(base + shape.bits()).div_ceil(64))
                .map(|_| if sparse { next() & next() & next() } else { next() })
                .collect();
            prop_assert_eq!(decoded(&words, base, shape), iter(&words, base, shape).collect::<Vec<_>>());
        }
    }
}
