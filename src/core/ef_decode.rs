//! Whole Elias–Fano streams (ef.rs) decoded into a slice of values: where a many-key count
//! of exact counters reads their fingerprints, and where an insert that changes a stream's
//! `l` reads the stream it rebuilds from. The high parts come from the upper bits a word at a
//! time with AVX2 or AVX-512 where the CPU has them (ef_chunks.rs), else one at a time; the
//! low parts then by 8-byte loads of their own, 8 at a time with AVX-512.

#[cfg(target_arch = "x86_64")]
use super::ef::vbmi2_usable;
use super::ef::{low_mask, read_bits, Lows, Shape};

/// The values of a stream with `x` inserted at `rank` (from `ef::find`, not found), in order:
/// what an insert that changes `l` rewrites the stream from (`ef::write`). Decoded whole
/// ([`decode`]) rather than read through `ef::iter`, a value at a time behind its adapters:
/// about a third of the instructions, paid once for each doubling of a list. None if the
/// memory could not be had.
pub fn values_inserting(
    words: &[u64],
    base: u64,
    shape: Shape,
    rank: u64,
    x: u64,
) -> Option<Vec<u64>> {
    // Room past the count: `decode` writes a word's values 8 at a time, whole.
    let room = usize::try_from(shape.k).ok()?.checked_add(64)?;
    let mut values = Vec::new();
    values.try_reserve_exact(room).ok()?;
    values.resize(room, 0);
    let n = decode(words, base, shape, &mut values);
    values.truncate(n);
    values.insert((rank as usize).min(n), x);
    Some(values)
}

/// Writes the values of the stream of `shape` at bit `base` of `words` to the start of `out`,
/// in order, and returns how many: those `ef::iter` gives, up to `out.len()` (the rest of `out`
/// may be overwritten). The high parts come first, a word of upper bits at a time where the
/// CPU has AVX2 (ef_chunks.rs), and the low parts are then read over them, 8 at a time where
/// it has AVX-512 (`wide_low_parts`): a many-key count of exact counters (of any universe,
/// where `ef_chunks::for_each_chunk` takes 2^31 at most) decodes each of them whole.
pub fn decode(words: &[u64], base: u64, shape: Shape, out: &mut [u64]) -> usize {
    let want = out.len().min(shape.k as usize);
    let (upper, len) = (base + shape.upper(), shape.k + shape.buckets);
    #[cfg(target_arch = "x86_64")]
    let n = if len < 1 << 32 && super::ef_chunks::usable() {
        // SAFETY: the CPU has the instructions (checked above).
        unsafe { super::ef_chunks::wide_high_parts(words, upper, len, out, want) }
    } else {
        high_parts(words, upper, len, &mut out[..want])
    };
    #[cfg(not(target_arch = "x86_64"))]
    let n = high_parts(words, upper, len, &mut out[..want]);
    let l = shape.l;
    if n == 0 || l == 0 {
        return n;
    }
    #[cfg(target_arch = "x86_64")]
    let done = if vbmi2_usable() {
        // SAFETY: the CPU has AVX-512 F (checked above).
        unsafe { super::ef_chunks::wide_low_parts(words, base, l, &mut out[..n]) }
    } else {
        low_parts_by_loads(words, base, l, &mut out[..n])
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = low_parts_by_loads(words, base, l, &mut out[..n]);
    let mut lows = Lows::new(words, base + done as u64 * l as u64, l);
    for v in &mut out[done..n] {
        *v = *v << l | lows.take();
    }
    n
}

/// Adds to the high parts in `out` (`v` becomes `v·2^l` plus its low part) the low parts of
/// `l` bits, value `i`'s at bit `at + i·l` of `words`, each read by an 8-byte load of its own
/// from its first byte: no read waits for the one before, as `Lows`'s do, so they overlap.
/// Only for `l ≤ 57` (its bits then lie within the 8 bytes) on a little-endian CPU, and only
/// while the 8 bytes lie within `words`; how many values it took (from the first).
#[inline(always)]
fn low_parts_by_loads(words: &[u64], at: u64, l: u32, out: &mut [u64]) -> usize {
    if cfg!(target_endian = "big") || l > 57 || words.is_empty() {
        return 0;
    }
    // SAFETY: any bytes are valid `u8`s, and they span exactly the words' memory.
    let bytes = unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) };
    // Values whose 8 bytes from their first lie within the words: `(at + i·l)/8 + 8 ≤ len`.
    let last_start = (bytes.len() as u64 - 8) * 8 + 7;
    let readable = if at > last_start {
        0
    } else {
        ((last_start - at) / u64::from(l) + 1).min(out.len() as u64) as usize
    };
    let mask = low_mask(l);
    let mut bit = at;
    for v in &mut out[..readable] {
        let start = (bit / 8) as usize;
        let eight: [u8; 8] = bytes[start..start + 8].try_into().expect("8 bytes");
        *v = *v << l | (u64::from_le_bytes(eight) >> (bit % 8)) & mask;
        bit += u64::from(l);
    }
    readable
}

/// `decode`'s high parts (each upper bit's position minus its rank; the upper bits are the
/// `len` bits at bit `upper`), one at a time; how many, at most `out.len()`.
fn high_parts(words: &[u64], upper: u64, len: u64, out: &mut [u64]) -> usize {
    let mut n = 0;
    let mut pos = 0;
    while n < out.len() && pos < len {
        let mut bits = read_bits(words, upper + pos, (len - pos).min(64) as u32);
        while bits != 0 && n < out.len() {
            out[n] = (pos + u64::from(bits.trailing_zeros())).wrapping_sub(n as u64);
            bits &= bits - 1;
            n += 1;
        }
        pos += 64;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ef::tests::stream_ending_its_words;
    use crate::core::ef::{find, iter, write};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// `decode` gives the values `iter` gives, into a slice of any length, in words that end
        /// with the stream's last.
        #[test]
        fn decode_gives_the_values_in_order(
            set in proptest::collection::btree_set(any::<u64>(), 1..400),
            universe_above in 1u64..1 << 40,
            base in 0u64..200,
            room in 0usize..450,
        ) {
            let (words, shape) = stream_ending_its_words(&set, universe_above, base);
            let mut out = vec![0u64; room];
            let n = decode(&words, base, shape, &mut out);
            let all: Vec<u64> = set.iter().copied().take(room).collect();
            prop_assert_eq!(&out[..n], &all[..]);
            // The baseline build's high parts, whichever way `decode` took them on this CPU.
            let (upper, len) = (base + shape.upper(), shape.k + shape.buckets);
            let mut high = vec![0u64; room];
            let got = high_parts(&words, upper, len, &mut high);
            let want: Vec<u64> = all.iter().map(|v| v >> shape.l).collect();
            prop_assert_eq!(&high[..got], &want[..]);
        }

        /// `decode` gives `iter`'s values at every width of low parts (universes from 2 to
        /// 2^64), in words that end with the stream's last, into room for them and up to 80
        /// more, whichever way this CPU reads the high and the low parts.
        #[test]
        fn decode_reads_low_parts_of_every_width(
            bits in 1u32..=64,
            values in proptest::collection::vec(any::<u64>(), 1..300),
            base in 0u64..200,
            spare in 0usize..80,
        ) {
            let universe = if bits == 64 { u64::MAX } else { 1 << bits };
            let set: BTreeSet<u64> = values.iter().map(|v| v % universe).collect();
            let shape = Shape::new(set.len() as u64, universe);
            let mut words = vec![0u64; (base + shape.bits()).div_ceil(64) as usize];
            write(&mut words, base, shape, set.iter().copied());
            let mut out = vec![0u64; set.len() + spare];
            prop_assert_eq!(decode(&words, base, shape, &mut out), set.len());
            let all: Vec<u64> = iter(&words, base, shape).collect();
            prop_assert_eq!(&out[..set.len()], &all[..]);
            prop_assert!(set.iter().eq(all.iter()));
        }

        /// `low_parts_by_loads` adds to each high part the low part `Lows` reads in order, for
        /// every width up to 57 bits from any bit, as far as 8 bytes from each value's first
        /// lie within the words (and no further), and takes none of wider ones.
        #[test]
        fn low_parts_by_loads_are_those_read_in_order(
            l in 1u32..=64,
            words in proptest::collection::vec(any::<u64>(), 1..40),
            at in 0u64..2_600,
            highs in proptest::collection::vec(0u64..64, 0..120),
        ) {
            let at = at.min(words.len() as u64 * 64);
            let mut out = highs.clone();
            let n = low_parts_by_loads(&words, at, l, &mut out);
            let fits = |i: u64| (at + i * u64::from(l)) / 8 + 8 <= words.len() as u64 * 8;
            let readable = (0..highs.len() as u64).take_while(|&i| fits(i)).count();
            prop_assert_eq!(n, if l > 57 { 0 } else { readable });
            let mut lows = Lows::new(&words, at, l);
            for (i, &high) in highs.iter().enumerate() {
                let want = if i < n { high << l | lows.take() } else { high };
                prop_assert_eq!(out[i], want, "value {}", i);
            }
        }

        /// `values_inserting` gives the stream's values with the new one at its rank, from
        /// the rank `find` gives.
        #[test]
        fn values_inserting_puts_the_value_at_its_rank(
            set in proptest::collection::btree_set(any::<u64>(), 1..300),
            universe_above in 1u64..1 << 40,
            base in 0u64..200,
            x in any::<u64>(),
        ) {
            let (words, shape) = stream_ending_its_words(&set, universe_above, base);
            let x = x % set.last().unwrap().saturating_add(universe_above);
            let probe = find(&words, base, shape, x);
            prop_assume!(!probe.found);
            let values = values_inserting(&words, base, shape, probe.rank, x).unwrap();
            let mut want = set.clone();
            want.insert(x);
            prop_assert!(values.iter().eq(want.iter()));
            prop_assert_eq!(iter(&words, base, shape).count(), set.len());
        }
    }
}
