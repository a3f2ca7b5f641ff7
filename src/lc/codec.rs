//! The serialized form of a linear counter: RDB values, DUMP payloads, `LC.LOADCHUNK` payloads
//! and the input of `DEBUG DIGEST-VALUE` are all this one byte string.
//!
//! # Format, encoding version 1
//!
//! ```text
//! offset  size     field
//! 0       1        encoding version (1)
//! 1       1        hash scheme (crate::hashing::HASH_SCHEME, 1)
//! 2       1        body kind: 0 exact set, 1 dense bitmap, 2 set-bit positions, 3 zero-bit positions
//! 3       varint   capacity (1 ..= i64::MAX)
//! ..      8        error rate, IEEE-754 binary64 little-endian, strictly inside (0, 1)
//! ..      varint   m, the bitmap size in bits (≥ 1, its bitmap within the memory limit)
//! ..      body:
//!   0 exact:  varint k (≤ exact_limit(m)), then k hashes as 8-byte little-endian u64,
//!             strictly increasing
//!   1 dense:  ⌈m/8⌉ bytes, bit p in byte p/8 at bit p%8 (LSB first); padding bits zero
//!   2 set:    varint c (≤ m), then c varint gaps: the first position, then for each next
//!             position p after q, p − q − 1 (so positions strictly increase); all < m
//!   3 zeros:  as 2, listing the positions of the zero bits
//! ```
//!
//! varint = unsigned LEB128, 7 bits per byte, low group first, shortest form only.
//!
//! A counter in bitmap mode is written with the smallest of kinds 1, 2 and 3 (ties: the lower
//! kind). Sparse kinds win at low fill (few ones) and at high fill (few zeros, which is where a
//! counter at capacity sits: 0.01/50,000 holding 50,000 items is ~900 bytes as zero positions
//! against 2,142 dense). An empty counter is 18 bytes.
//!
//! # Validation
//!
//! `decode` checks everything before allocating or indexing: versions, ranges, the bitmap
//! size against the caller's memory limit, every count against the bytes left, positions
//! strictly increasing and below m, hashes strictly increasing, padding bits, no trailing
//! bytes, and canonical form (shortest varints, the kind the encoder would pick). A byte string
//! that decodes therefore re-encodes to exactly the same bytes.
//!
//! # Chunked form (AOF rewrite of large counters)
//!
//! A command argument is limited (`proto-max-bulk-len`, 512 MB) and the rewrite should not
//! build a second copy of a large counter, so a counter whose encoding exceeds `CHUNK_BYTES`
//! is rewritten as pieces (`aof_parts`): first its *shell*, the encoding of the same counter
//! with every bit zero (kind 2, no positions; such counters have far more than 8 bits, so kind
//! 2 is the canonical form), loaded by `LC.LOADCHUNK key <shell>`; then its dense bitmap (the
//! kind 1 body) in pieces of at most `CHUNK_BYTES`, each `LC.LOADCHUNK key <iterator> <piece>`
//! with iterator = 1 + the byte offset where the piece ends, like `BF.SCANDUMP`. `write_dense`
//! checks a piece (bitmap mode, within the ⌈m/8⌉ bytes, padding bits zero) before writing it.
//! After the last piece the counter, and so its encoding, is the original. Exact counters
//! (at most 64 KiB of hashes) always fit one command.
//!
//! # Version history
//!
//! 1 — the first format.

use super::counter::{bitmap_bytes, exact_limit, Counter};
use crate::decode::DecodeError;
use crate::hashing::HASH_SCHEME;
use bitvec::prelude::{BitSlice, BitVec, Lsb0};

pub const ENCODING_VERSION: u8 = 1;
use crate::alloc::zeroed_words;
pub use crate::chunks::CHUNK_BYTES;
use crate::chunks::{bytes_into_words, words_to_bytes};

const KIND_EXACT: u8 = 0;
const KIND_DENSE: u8 = 1;
const KIND_SET: u8 = 2;
const KIND_ZEROS: u8 = 3;

/// Version, scheme, kind, capacity, error rate and m: everything before the body.
fn put_header(out: &mut Vec<u8>, kind: u8, counter: &Counter) {
    out.extend_from_slice(&[ENCODING_VERSION, HASH_SCHEME, kind]);
    put_varint(out, counter.capacity());
    out.extend_from_slice(&counter.error_rate().to_le_bytes());
    put_varint(out, counter.bits());
}

pub fn encode(counter: &Counter) -> Vec<u8> {
    let mut out = Vec::new();
    let kind = match counter.bitmap() {
        None => KIND_EXACT,
        Some(bits) => smallest(bits).1,
    };
    put_header(&mut out, kind, counter);
    match (counter.exact_hashes(), counter.bitmap()) {
        (Some(hashes), _) => {
            put_varint(&mut out, hashes.len() as u64);
            for h in hashes {
                out.extend_from_slice(&h.to_le_bytes());
            }
        }
        (None, Some(bits)) => match kind {
            KIND_DENSE => {
                let len = bits.len().div_ceil(8);
                let bytes = bits.as_raw_slice().iter().flat_map(|w| w.to_le_bytes());
                out.extend(bytes.take(len));
            }
            KIND_SET => put_positions(&mut out, bits.count_ones(), bits.iter_ones()),
            _ => put_positions(&mut out, bits.count_zeros(), bits.iter_zeros()),
        },
        (None, None) => unreachable!("a counter is exact or a bitmap"),
    }
    out
}

/// Calls `emit(None, encoding)` when the encoding fits in `chunk_bytes`; otherwise (bitmap mode
/// only) `emit(None, shell)` then `emit(Some(iterator), piece)` for each piece of the dense
/// bitmap (see "Chunked form"). Without the full encoding in memory for large counters.
pub fn aof_parts(counter: &Counter, chunk_bytes: u64, mut emit: impl FnMut(Option<u64>, &[u8])) {
    let mut header = Vec::new();
    put_header(&mut header, KIND_SET, counter);
    let body = match counter.bitmap() {
        Some(bits) => smallest(bits).0 as u64,
        None => 0,
    };
    let bits = match counter.bitmap() {
        Some(bits) if header.len() as u64 + body > chunk_bytes => bits,
        _ => return emit(None, &encode(counter)),
    };
    put_varint(&mut header, 0);
    emit(None, &header);
    let raw = bits.as_raw_slice();
    let dense = bits.len().div_ceil(8) as u64;
    let mut offset = 0;
    while offset < dense {
        let end = (offset + chunk_bytes.max(1)).min(dense);
        let mut piece = Vec::with_capacity((end - offset) as usize);
        words_to_bytes(raw, offset as usize, (end - offset) as usize, &mut piece);
        emit(Some(crate::chunks::iterator_after(end)), &piece);
        offset = end;
    }
}

/// Writes a piece of the dense bitmap at byte `offset` (see "Chunked form"); on error nothing
/// is written.
pub fn write_dense(counter: &mut Counter, offset: u64, piece: &[u8]) -> Result<(), DecodeError> {
    let m = counter.bits();
    if counter.is_exact() {
        return Err(DecodeError("the counter is in exact mode"));
    }
    let end = offset
        .checked_add(piece.len() as u64)
        .filter(|&end| !piece.is_empty() && end <= m.div_ceil(8))
        .ok_or(DecodeError("piece outside the bitmap"))?;
    if end == m.div_ceil(8) && !m.is_multiple_of(8) && piece[piece.len() - 1] >> (m % 8) != 0 {
        return Err(DecodeError("padding bits set"));
    }
    counter.write_bitmap_bytes(offset as usize, piece);
    Ok(())
}

/// Decodes a counter whose bitmap may take at most `max_bytes` of memory.
pub fn decode(bytes: &[u8], max_bytes: u64) -> Result<Counter, DecodeError> {
    let mut r = Reader { bytes, at: 0 };
    if r.byte()? != ENCODING_VERSION {
        return Err(DecodeError("unknown encoding version"));
    }
    if r.byte()? != HASH_SCHEME {
        return Err(DecodeError("unknown hash scheme"));
    }
    let kind = r.byte()?;
    let capacity = r.varint()?;
    if capacity == 0 || capacity > i64::MAX as u64 {
        return Err(DecodeError("capacity out of range"));
    }
    let error_rate = f64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes"));
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(DecodeError("error rate out of range"));
    }
    let m = r.varint()?;
    if m == 0 || bitmap_bytes(m) > max_bytes {
        return Err(DecodeError("bitmap size out of range"));
    }
    let counter = match kind {
        KIND_EXACT => {
            let k = r.varint()?;
            if k > exact_limit(m) {
                return Err(DecodeError("exact set too large for the bitmap size"));
            }
            if Some(r.remaining() as u64) != k.checked_mul(8) {
                return Err(DecodeError("exact set length mismatch"));
            }
            let mut hashes = Vec::new();
            hashes
                .try_reserve_exact(k as usize)
                .map_err(|_| DecodeError("out of memory"))?;
            for _ in 0..k {
                let h = u64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes"));
                if hashes.last().is_some_and(|&last| last >= h) {
                    return Err(DecodeError("exact set not strictly increasing"));
                }
                hashes.push(h);
            }
            Counter::from_exact(capacity, error_rate, m, hashes)
        }
        KIND_DENSE | KIND_SET | KIND_ZEROS => {
            let bits = read_bitmap(&mut r, kind, m)?;
            if smallest_kind(&bits) != kind {
                return Err(DecodeError("bitmap not in its smallest encoding"));
            }
            Counter::from_bitmap(capacity, error_rate, bits)
        }
        _ => return Err(DecodeError("unknown body kind")),
    };
    if r.remaining() != 0 {
        return Err(DecodeError("trailing bytes"));
    }
    Ok(counter)
}

fn read_bitmap(r: &mut Reader, kind: u8, m: u64) -> Result<BitVec<u64, Lsb0>, DecodeError> {
    let mut raw = zeroed_words(m.div_ceil(64) as usize).ok_or(DecodeError("out of memory"))?;
    if kind == KIND_DENSE {
        let len = m.div_ceil(8) as usize;
        let dense = r.take(len)?;
        if !m.is_multiple_of(8) && dense[len - 1] >> (m % 8) != 0 {
            return Err(DecodeError("padding bits set"));
        }
        bytes_into_words(&mut raw, 0, dense);
        let mut bits = BitVec::from_vec(raw);
        bits.truncate(m as usize);
        return Ok(bits);
    }
    let mut bits = BitVec::from_vec(raw);
    bits.truncate(m as usize);
    // Listed positions get `listed`, the others the opposite; fill() leaves padding bits zero.
    let listed = kind == KIND_SET;
    bits.fill(!listed);
    let count = r.varint()?;
    if count > m || count > r.remaining() as u64 {
        return Err(DecodeError("position count out of range"));
    }
    let mut next = 0u64; // smallest position the next gap may reach
    for _ in 0..count {
        let pos = next
            .checked_add(r.varint()?)
            .filter(|&p| p < m)
            .ok_or(DecodeError("position out of range"))?;
        bits.set(pos as usize, listed);
        next = pos + 1;
    }
    Ok(bits)
}

/// The bitmap kind the encoder picks: the shortest body, ties to the lower kind. A position list
/// takes at least one byte per position, so only a list shorter than the dense form is walked
/// (at most one of the two can be): a huge, nearly empty bitmap costs a popcount, not a walk
/// over every zero.
fn smallest_kind(bits: &BitSlice<u64, Lsb0>) -> u8 {
    smallest(bits).1
}

/// The smallest body's length and kind.
fn smallest(bits: &BitSlice<u64, Lsb0>) -> (usize, u8) {
    let ones = bits.count_ones();
    let zeros = bits.len() - ones;
    let mut best = (bits.len().div_ceil(8), KIND_DENSE);
    if ones < best.0 {
        let len = positions_len(ones, bits.iter_ones());
        if len < best.0 {
            best = (len, KIND_SET);
        }
    }
    if zeros < best.0 {
        let len = positions_len(zeros, bits.iter_zeros());
        if len < best.0 {
            best = (len, KIND_ZEROS);
        }
    }
    best
}

fn gaps(positions: impl Iterator<Item = usize>) -> impl Iterator<Item = u64> {
    let mut next = 0u64;
    positions.map(move |p| {
        let gap = p as u64 - next;
        next = p as u64 + 1;
        gap
    })
}

fn positions_len(count: usize, positions: impl Iterator<Item = usize>) -> usize {
    varint_len(count as u64) + gaps(positions).map(varint_len).sum::<usize>()
}

fn put_positions(out: &mut Vec<u8>, count: usize, positions: impl Iterator<Item = usize>) {
    put_varint(out, count as u64);
    for gap in gaps(positions) {
        put_varint(out, gap);
    }
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError("truncated"));
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// A shortest-form LEB128 u64.
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            let group = (b & 0x7f) as u64;
            if i == 9 && group > 1 {
                return Err(DecodeError("varint overflow"));
            }
            value |= group << (7 * i);
            if b & 0x80 == 0 {
                if i > 0 && group == 0 {
                    return Err(DecodeError("varint not in shortest form"));
                }
                return Ok(value);
            }
        }
        Err(DecodeError("varint overflow"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NO_LIMIT: u64 = u64::MAX;

    fn filled(error_rate: f64, capacity: u64, items: u64) -> Counter {
        let mut c = Counter::reserve(error_rate, capacity, NO_LIMIT).unwrap();
        for i in 0..items {
            c.add(format!("item:{i}").as_bytes()).unwrap();
        }
        c
    }

    #[test]
    fn sizes_of_the_default_counter() {
        let empty = encode(&filled(0.01, 50_000, 0));
        let full = encode(&filled(0.01, 50_000, 50_000));
        let tenth = encode(&filled(0.01, 50_000, 1_000));
        println!(
            "encoded 0.01/50000: empty {} B, 1,000 items {} B, 50,000 items {} B",
            empty.len(),
            tenth.len(),
            full.len()
        );
        assert_eq!(empty.len(), 18);
        assert!(full.len() <= 1_200, "{}", full.len());
        assert_eq!(full[2], KIND_ZEROS);
        assert_eq!(tenth[2], KIND_SET);
        assert_eq!(encode(&filled(0.01, 50_000, 12_000))[2], KIND_DENSE);
    }

    /// Replays `aof_parts` the way the AOF does (`LC.LOADCHUNK`), counting the commands.
    fn replay(c: &Counter, chunk: u64) -> (Counter, usize) {
        let mut rebuilt: Option<Counter> = None;
        let mut commands = 0;
        aof_parts(c, chunk, |iterator, bytes| {
            commands += 1;
            match iterator {
                None => {
                    assert!(rebuilt.is_none());
                    rebuilt = Some(decode(bytes, NO_LIMIT).unwrap());
                }
                Some(it) => {
                    assert!(bytes.len() as u64 <= chunk);
                    let offset = it - 1 - bytes.len() as u64;
                    write_dense(rebuilt.as_mut().unwrap(), offset, bytes).unwrap();
                }
            }
        });
        (rebuilt.unwrap(), commands)
    }

    #[test]
    fn aof_parts_rebuild_large_counters_piece_by_piece() {
        // bits_for(50_000, 0.01) = 17,134: the last byte has padding bits.
        for items in [0, 200, 268, 1_000, 12_000, 50_000, 400_000] {
            let c = filled(0.01, 50_000, items);
            let whole = encode(&c).len() as u64;
            for chunk in [1 << 20, whole, whole - 1, 1_000, 333, 7, 1] {
                let (rebuilt, commands) = replay(&c, chunk);
                assert_eq!(encode(&rebuilt), encode(&c), "{items} items, chunk {chunk}");
                assert_eq!(rebuilt, c);
                let chunked = whole > chunk && !c.is_exact();
                let pieces = 17_134u64.div_ceil(8).div_ceil(chunk) as usize;
                assert_eq!(commands, if chunked { 1 + pieces } else { 1 });
            }
        }
    }

    #[test]
    fn write_dense_refuses_bad_pieces_and_changes_nothing() {
        let mut exact = filled(0.01, 50_000, 10);
        assert!(write_dense(&mut exact, 0, &[1]).is_err());
        assert_eq!(exact, filled(0.01, 50_000, 10));
        let original = filled(0.01, 50_000, 12_000);
        let mut c = original.clone();
        let dense = 17_134u64.div_ceil(8);
        for (offset, piece) in [
            (0, vec![]),
            (dense, vec![0]),
            (dense - 1, vec![0, 0]),
            (u64::MAX, vec![0]),
            (dense - 1, vec![0b0100_0000]), // bit 17,134: padding
        ] {
            assert!(write_dense(&mut c, offset, &piece).is_err(), "{offset}");
            assert_eq!(c, original);
        }
        write_dense(&mut c, dense - 1, &[0b0011_1111]).unwrap();
        write_dense(&mut c, 0, &[0xff, 0]).unwrap();
        assert_eq!(c.bitmap().unwrap().as_raw_slice()[0] & 0xffff, 0xff);
        assert_eq!(
            c.bits_set(),
            c.bitmap().unwrap().count_ones() as u64,
            "zeros kept in step"
        );
    }

    #[test]
    fn round_trips_every_kind() {
        for items in [0, 1, 267, 268, 1_000, 12_000, 50_000, 400_000] {
            let c = filled(0.01, 50_000, items);
            let bytes = encode(&c);
            let back = decode(&bytes, NO_LIMIT).unwrap();
            assert_eq!(back, c, "{items} items");
            assert_eq!(encode(&back), bytes);
        }
        // m not a multiple of 8 or 64: padding handled.
        let c = filled(0.3, 10, 30);
        assert_eq!(decode(&encode(&c), NO_LIMIT).unwrap(), c);
    }

    #[test]
    fn rejects_what_does_not_add_up() {
        let good = encode(&filled(0.01, 50_000, 300));
        assert_eq!(
            decode(&good, 1000),
            Err(DecodeError("bitmap size out of range"))
        );
        let mut v = good.clone();
        v[0] = 2;
        assert!(decode(&v, NO_LIMIT).is_err());
        let mut v = good.clone();
        v.push(0);
        assert_eq!(decode(&v, NO_LIMIT), Err(DecodeError("trailing bytes")));
        assert!(decode(&good[..good.len() - 1], NO_LIMIT).is_err());
        assert!(decode(&[], NO_LIMIT).is_err());
        // An overlong varint for the capacity.
        let mut v = vec![1, 1, 0, 0x81, 0x00];
        v.extend_from_slice(&0.5f64.to_le_bytes());
        v.extend_from_slice(&[100, 0]);
        assert_eq!(
            decode(&v, NO_LIMIT),
            Err(DecodeError("varint not in shortest form"))
        );
        v[3] = 1;
        v.remove(4);
        assert!(decode(&v, NO_LIMIT).is_ok());
        // The same empty bitmap written dense instead of as an empty position list.
        let mut dense = v[..v.len() - 1].to_vec();
        dense[2] = KIND_DENSE;
        dense.extend_from_slice(&[0; 13]);
        assert_eq!(
            decode(&dense, NO_LIMIT),
            Err(DecodeError("bitmap not in its smallest encoding"))
        );
    }

    fn arbitrary_counter() -> impl Strategy<Value = Counter> {
        (
            1u64..2_000,
            1u64..10_000,
            proptest::collection::vec(any::<u64>(), 0..3_000),
        )
            .prop_map(|(m, capacity, hashes)| {
                let mut c = Counter::empty(capacity, 0.05, m);
                for h in hashes {
                    c.add_hash(h).unwrap();
                }
                c
            })
    }

    proptest! {
        #[test]
        fn round_trip(c in arbitrary_counter()) {
            let bytes = encode(&c);
            let back = decode(&bytes, NO_LIMIT).unwrap();
            prop_assert_eq!(encode(&back), bytes);
            prop_assert_eq!(back, c);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(c) = decode(&bytes, 1 << 20) {
                prop_assert_eq!(encode(&c), bytes);
            }
        }

        #[test]
        fn mutated_encodings_never_panic(
            c in arbitrary_counter(),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..4),
        ) {
            let mut bytes = encode(&c);
            for (at, value, op) in edits {
                let at = at % (bytes.len() + 1);
                match op {
                    0 if at < bytes.len() => bytes[at] ^= value | 1,
                    1 => bytes.insert(at, value),
                    _ if at < bytes.len() => { bytes.remove(at); }
                    _ => bytes.push(value),
                }
            }
            if let Ok(back) = decode(&bytes, 1 << 20) {
                prop_assert_eq!(encode(&back), bytes);
            }
        }
    }
}
