//! The serialized form of a linear counter: RDB values, DUMP payloads, `LC.LOADCHUNK` payloads
//! and the input of `DEBUG DIGEST-VALUE` are all this one byte string.
//!
//! # Format, encoding version 2
//!
//! ```text
//! offset  size     field
//! 0       1        encoding version (2)
//! 1       1        hash scheme (crate::core::hashing::HASH_SCHEME, 1)
//! 2       1        body kind: 0 exact set, 1 dense bitmap, 2 set-bit positions, 3 zero-bit positions
//! 3       varint   capacity (1 ..= i64::MAX)
//! ..      8        error rate, IEEE-754 binary64 little-endian, strictly inside (0, 1)
//! ..      varint   m, the bitmap size in bits (≥ 1, its bitmap within the memory limit)
//! ..      body:
//!   0 exact:  varint k (≤ exact_limit(m)), then the Elias–Fano stream (ef.rs) of the k
//!             fingerprints, below U(m) (counter.rs, "Three modes")
//!   1 dense:  ⌈m/8⌉ bytes, bit p in byte p/8 at bit p%8 (LSB first); padding bits zero
//!   2 set:    varint c (≤ m), then the Elias–Fano stream of the c set-bit positions, below m
//!   3 zeros:  as 2, of the zero-bit positions
//! ```
//!
//! A stream of `S` bits takes `⌈S/8⌉` bytes, stream bit `i` in byte `i/8` at bit `i%8`, padding
//! bits zero; its size follows from its count and universe. varint = unsigned LEB128, 7 bits
//! per byte, low group first, shortest form only.
//!
//! A counter in sparse or dense mode is written with the smallest of kinds 1, 2 and 3 (ties:
//! the lower kind), whatever its mode in memory: the sizes follow from the number of set bits,
//! so choosing costs nothing. Set positions win at low fill, zero positions at high fill (where
//! a counter at capacity sits: 0.01/50,000 holding 50,000 items is ~760 bytes as zero
//! positions against 2,142 dense). An empty counter is 18 bytes, one of 30 items 145.
//! Decoding a kind 1–3 body gives the mode the counter's set bits call for (sparse up to
//! `sparse_limit(m)`, else dense).
//!
//! # Format, encoding version 3 (sketches)
//!
//! A counter past its exact set (levels.rs) is written with version 3 and the same header
//! (capacity, error rate and m keep sizing its geometry); exact sets and bitmaps keep their
//! version-2 bytes.
//!
//! ```text
//! 2       1        body kind: 4 tokens, 5 registers
//! ..      body:
//!   both:       1 byte p, the precision (levels::precision_for of the error rate)
//!   4 tokens:   varint k (1 ..= token_limit(p)), then the Elias–Fano stream of the k token
//!               values index·256 + level, below 2^(p+8), each level in 1 ..= max_level(p)
//!   5 registers: the 2^p registers of 27 bits (levels.rs, "Registers"), packed: register i
//!               at stream bits 27·i .. 27·i + 26, low bit first (27·2^p/8 bytes)
//!   both, last: the running estimate and its variance, IEEE-754 binary64 little-endian,
//!               within what the indicators allow (running.rs, "Bounds": the estimate at
//!               least the indicators known set, at most U + D/μ; the variance from 0 to
//!               estimate/μ)
//! ```
//!
//! `μ` (the unset weight) follows from the indicators and is recomputed on load. A register's
//! highest level is at most max_level(p), and its window holds no level below 1.
//!
//! # Validation
//!
//! `decode` checks everything before allocating or indexing: versions, ranges, a saved
//! bitmap's size and a sketch's registers against the caller's memory limit, every count
//! against the bytes left, streams (value count, strictly increasing, below their universe,
//! padding bits), no trailing bytes, and canonical form (shortest varints, the kind the
//! encoder would pick). A byte string of the current version that decodes therefore
//! re-encodes to exactly the same bytes, but for a token list of no tokens, which loads as
//! the empty counter.
//!
//! # Chunked form (AOF rewrite of large counters)
//!
//! A command argument is limited (`proto-max-bulk-len`, 512 MB) and the rewrite should not
//! build a second copy of a large counter, so a dense counter whose encoding exceeds
//! `CHUNK_BYTES` is rewritten as pieces (`aof_parts`): first its *shell*, the encoding of the
//! same counter with every bit zero (kind 2, no positions), loaded by `LC.LOADCHUNK key
//! <shell>`; then its dense bitmap (the kind 1 body) in pieces of at most `CHUNK_BYTES`, each
//! `LC.LOADCHUNK key <iterator> <piece>` with iterator = 1 + the byte offset where the piece
//! ends, like `BF.SCANDUMP`. `write_dense` checks a piece (a bitmap's, within the ⌈m/8⌉
//! bytes, padding bits zero) and writes it, the counter sparse or dense by its set bits after
//! each piece, as a load of its encoding would make it. After the last piece the counter, and
//! so its encoding, is the original. Exact and sparse counters (a few
//! KB at most) always fit one command.
//!
//! # Version history
//!
//! 1 — the same header with version 1; exact body: varint k (≤ exact_limit(m)), then k 64-bit
//!     `h1` values as 8-byte little-endian, strictly increasing; kinds 1–3 as above but
//!     positions as varint gaps (the first position, then p − q − 1 for each next p after q),
//!     the smallest kind by those sizes. Still read: an exact set becomes the fingerprints of
//!     its hashes (the state the same items give in version 2), a bitmap the same bits.
//! 2 — fingerprints and Elias–Fano streams; the counter's sparse mode.
//! 3 — sketches (kinds 4 and 5) for counters past their exact set; versions 1 and 2 still
//!     written for exact sets (2) and read for bitmaps saved by earlier builds.

use super::counter::{charged_bytes, exact_limit, Counter, LcError, Mode, SetBits};
use super::geometry::{dense_words, MAX_BITS};
use crate::core::decode::DecodeError;
use crate::core::ef::{self, Shape};
use crate::core::hashing::{reduce, HASH_SCHEME};

/// The version written for exact sets and bitmaps (whose bytes version 3 leaves as they were).
pub const ENCODING_VERSION: u8 = 2;
/// The version written for sketches.
pub const SKETCH_VERSION: u8 = 3;
pub use crate::core::chunks::CHUNK_BYTES;
use crate::core::chunks::{bytes_into_words, words_to_bytes, Reader, Writer};

const KIND_EXACT: u8 = 0;
const KIND_DENSE: u8 = 1;
const KIND_SET: u8 = 2;
const KIND_ZEROS: u8 = 3;
const KIND_TOKENS: u8 = 4;
const KIND_REGISTERS: u8 = 5;

/// Version, scheme, kind, capacity, error rate and m: everything before the body.
fn put_header(out: &mut Vec<u8>, kind: u8, counter: &Counter) {
    let version = if kind >= KIND_TOKENS {
        SKETCH_VERSION
    } else {
        ENCODING_VERSION
    };
    out.extend_from_slice(&[version, HASH_SCHEME, kind]);
    out.put_varint(counter.capacity());
    out.extend_from_slice(&counter.error_rate().to_le_bytes());
    out.put_varint(counter.bits());
}

/// The length and kind of the smallest body of `ones` set bits among `m` (ties: lower kind).
fn smallest(m: u64, ones: u64) -> (u64, u8) {
    let positions = |c: u64| varint_len(c) as u64 + Shape::new(c, m).bits().div_ceil(8);
    [
        (m.div_ceil(8), KIND_DENSE),
        (positions(ones), KIND_SET),
        (positions(m - ones), KIND_ZEROS),
    ]
    .into_iter()
    .min_by_key(|&(len, kind)| (len, kind))
    .expect("three kinds")
}

/// The body kind and length of `counter`'s encoding.
fn body(counter: &Counter) -> (u64, u8) {
    match counter.mode() {
        Mode::Tokens => return (sketch::body_len(counter), KIND_TOKENS),
        Mode::Registers => return (sketch::body_len(counter), KIND_REGISTERS),
        _ => {}
    }
    match counter.stream() {
        Some((_, _, shape)) if counter.is_exact() => (
            varint_len(shape.k) as u64 + shape.bits().div_ceil(8),
            KIND_EXACT,
        ),
        _ => smallest(counter.bits(), counter.bits_set()),
    }
}

pub fn encode(counter: &Counter) -> Vec<u8> {
    let (len, kind) = body(counter);
    let mut out = Vec::with_capacity(32 + len as usize);
    put_header(&mut out, kind, counter);
    let m = counter.bits();
    match kind {
        KIND_TOKENS => sketch::put_tokens(&mut out, counter),
        KIND_REGISTERS => sketch::put_registers(&mut out, counter),
        KIND_DENSE => match counter.bitmap_words() {
            Some(words) => words_to_bytes(words, 0, m.div_ceil(8) as usize, &mut out),
            None => {
                let mut words = vec![0u64; m.div_ceil(64) as usize];
                for p in counter.positions() {
                    words[(p / 64) as usize] |= 1 << (p % 64);
                }
                words_to_bytes(&words, 0, m.div_ceil(8) as usize, &mut out);
            }
        },
        KIND_EXACT | KIND_SET if counter.stream().is_some() => {
            let (words, base, shape) = counter.stream().expect("exact or sparse");
            out.put_varint(shape.k);
            put_stream(&mut out, words, base, shape.bits());
        }
        KIND_SET => put_positions(&mut out, m, counter.bits_set(), counter.positions()),
        _ => put_positions(
            &mut out,
            m,
            m - counter.bits_set(),
            counter.zero_positions(),
        ),
    }
    out
}

/// The Elias–Fano stream of `count` sorted positions below `m`, with its count.
fn put_positions(out: &mut Vec<u8>, m: u64, count: u64, positions: impl Iterator<Item = u64>) {
    let shape = Shape::new(count, m);
    let mut words = vec![0u64; shape.bits().div_ceil(64) as usize + 1];
    ef::write(&mut words, 0, shape, positions);
    out.put_varint(count);
    put_stream(out, &words, 0, shape.bits());
}

/// `bits` bits of `words` from bit `base` on, as bytes.
pub(super) fn put_stream(out: &mut Vec<u8>, words: &[u64], base: u64, bits: u64) {
    let mut at = 0;
    while at < bits {
        let width = (bits - at).min(8) as u32;
        out.push(ef::read_bits(words, base + at, width) as u8);
        at += 8;
    }
}

/// Calls `emit(None, encoding)` when the encoding fits in `chunk_bytes` or the counter is not
/// dense; otherwise `emit(None, shell)` then `emit(Some(iterator), piece)` for each piece of the
/// dense bitmap (see "Chunked form"). Without the full encoding in memory for large counters.
pub fn aof_parts(counter: &Counter, chunk_bytes: u64, mut emit: impl FnMut(Option<u64>, &[u8])) {
    let mut header = Vec::new();
    put_header(&mut header, KIND_SET, counter);
    let words = match counter.bitmap_words() {
        Some(words) if header.len() as u64 + body(counter).0 > chunk_bytes => words,
        _ => return emit(None, &encode(counter)),
    };
    header.put_varint(0);
    emit(None, &header);
    let dense = counter.bits().div_ceil(8);
    let mut offset = 0;
    while offset < dense {
        let end = (offset + chunk_bytes.max(1)).min(dense);
        let mut piece = Vec::with_capacity((end - offset) as usize);
        words_to_bytes(words, offset as usize, (end - offset) as usize, &mut piece);
        emit(Some(crate::core::chunks::iterator_after(end)), &piece);
        offset = end;
    }
}

/// Writes a piece of the dense bitmap at byte `offset` (see "Chunked form"), within `limit`
/// bytes; on error nothing changes. The counter keeps the mode its set bits call for, as a
/// load of its encoding gives it (`Counter::bits_block`), after every piece whatever their
/// order: a sparse counter's list takes the piece's bits in place of those it held in that
/// range, and a dense one is listed again when few bits are left. A piece costs its bytes and
/// the list; only a change of mode touches the whole bitmap.
pub fn write_dense(
    counter: &mut Counter,
    offset: u64,
    piece: &[u8],
    limit: u64,
) -> Result<(), DecodeError> {
    let m = counter.bits();
    match counter.mode() {
        Mode::Sparse | Mode::Dense => {}
        Mode::Exact => return Err(DecodeError("the counter is in exact mode")),
        Mode::Tokens | Mode::Registers => {
            return Err(DecodeError("the counter is a sketch, not a bitmap"))
        }
    }
    let end = offset
        .checked_add(piece.len() as u64)
        .filter(|&end| !piece.is_empty() && end <= m.div_ceil(8))
        .ok_or(DecodeError("piece outside the bitmap"))?;
    if end == m.div_ceil(8) && !m.is_multiple_of(8) && piece[piece.len() - 1] >> (m % 8) != 0 {
        return Err(DecodeError("padding bits set"));
    }
    if counter.mode() == Mode::Sparse {
        let (from, to) = (offset * 8, (end * 8).min(m));
        let held: Vec<u64> = counter.positions().collect();
        let piece_bits = piece.iter().enumerate().flat_map(|(i, &byte)| {
            (0..8)
                .filter(move |b| byte >> b & 1 == 1)
                .map(move |b| from + 8 * i as u64 + b)
        });
        let ones: u64 = piece.iter().map(|b| u64::from(b.count_ones())).sum();
        let before = held.partition_point(|&p| p < from);
        let after = held.partition_point(|&p| p < to);
        let count = (before + held.len() - after) as u64 + ones;
        let sorted = held[..before]
            .iter()
            .copied()
            .chain(piece_bits)
            .chain(held[after..].iter().copied());
        let bits = SetBits::Positions {
            count,
            sorted: Box::new(sorted),
        };
        counter.block = counter.bits_block(bits, limit).map_err(decode_error)?;
        return Ok(());
    }
    counter.write_bitmap_bytes(offset as usize, piece);
    counter.relist_if_sparse();
    Ok(())
}

/// Why a counter larger than the caller's memory limit (`max-memory-per-key`) is refused.
pub(super) const OVER_THE_LIMIT: &str = "larger than max-memory-per-key";

/// A counter that a payload would make but memory does not allow, as a decoding error.
fn decode_error(e: LcError) -> DecodeError {
    match e {
        LcError::TooLarge { .. } => DecodeError(OVER_THE_LIMIT),
        _ => DecodeError("out of memory"),
    }
}

/// Decodes a counter whose bitmap may take at most `max_bytes` of memory (versions 1 and 2).
pub fn decode(bytes: &[u8], max_bytes: u64) -> Result<Counter, DecodeError> {
    let mut r = Reader::new(bytes, DecodeError("truncated"));
    let version = r.byte()?;
    if !(1..=SKETCH_VERSION).contains(&version) {
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
    let error_rate = r.f64()?;
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(DecodeError("error rate out of range"));
    }
    let m = r.varint()?;
    if m == 0 || m >= MAX_BITS {
        return Err(DecodeError("bitmap size out of range"));
    }
    // Only a saved bitmap takes the bytes of `m` bits (checked before it is read); an exact
    // set or a sketch of a counter reserved for a large capacity is small, and is checked
    // for what it may grow to once decoded.
    let bitmap = matches!(kind, KIND_DENSE | KIND_SET | KIND_ZEROS);
    if bitmap && charged_bytes(dense_words(m)) > max_bytes {
        return Err(DecodeError(OVER_THE_LIMIT));
    }
    let counter = match (version, kind) {
        (SKETCH_VERSION, KIND_TOKENS) => {
            sketch::read_tokens(&mut r, Counter::empty(capacity, error_rate, m))?
        }
        (SKETCH_VERSION, KIND_REGISTERS) => {
            sketch::read_registers(&mut r, Counter::empty(capacity, error_rate, m), max_bytes)?
        }
        (SKETCH_VERSION, _) | (_, KIND_TOKENS | KIND_REGISTERS) => {
            return Err(DecodeError("unknown body kind"))
        }
        (1, KIND_EXACT) => {
            let hashes = v1::read_hashes(&mut r, m)?;
            // Fingerprints are monotonic in the hash: sorted, maybe repeated.
            let probe = Counter::empty(capacity, error_rate, m);
            let universe = probe.geometry().universe();
            let mut fps: Vec<u64> = hashes.iter().map(|&h| reduce(h, universe)).collect();
            fps.dedup();
            let count = fps.len() as u64;
            Counter::from_fingerprints(capacity, error_rate, m, count, fps.into_iter())
                .map_err(decode_error)?
        }
        (1, KIND_DENSE | KIND_SET | KIND_ZEROS) => {
            let words = v1::read_bitmap(&mut r, kind, m)?;
            if v1::smallest_kind(&words, m) != kind {
                return Err(DecodeError("bitmap not in its smallest encoding"));
            }
            Counter::from_bits(capacity, error_rate, m, SetBits::Words(&words), max_bytes)
                .map_err(decode_error)?
        }
        (_, KIND_EXACT) => {
            let k = r.varint()?;
            if k > exact_limit(m) {
                return Err(DecodeError("exact set too large for the bitmap size"));
            }
            let probe = Counter::empty(capacity, error_rate, m);
            let universe = probe.geometry().universe();
            let (words, shape) = read_stream(&mut r, k, universe)?;
            Counter::from_fingerprints(capacity, error_rate, m, k, ef::iter(&words, 0, shape))
                .map_err(decode_error)?
        }
        (_, KIND_DENSE) => {
            let words = read_dense(&mut r, m)?;
            let ones: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
            if smallest(m, ones).1 != kind {
                return Err(DecodeError("bitmap not in its smallest encoding"));
            }
            Counter::from_bits(capacity, error_rate, m, SetBits::Words(&words), max_bytes)
                .map_err(decode_error)?
        }
        (_, KIND_SET | KIND_ZEROS) => {
            let count = r.varint()?;
            if count > m {
                return Err(DecodeError("position count out of range"));
            }
            let (words, shape) = read_stream(&mut r, count, m)?;
            let ones = if kind == KIND_SET { count } else { m - count };
            if smallest(m, ones).1 != kind {
                return Err(DecodeError("bitmap not in its smallest encoding"));
            }
            let positions = ef::iter(&words, 0, shape);
            if kind == KIND_SET {
                let sorted = Box::new(positions);
                let bits = SetBits::Positions { count, sorted };
                Counter::from_bits(capacity, error_rate, m, bits, max_bytes)
            } else {
                let mut bitmap = all_set(m)?;
                for p in positions {
                    bitmap[(p / 64) as usize] &= !(1 << (p % 64));
                }
                Counter::from_bits(capacity, error_rate, m, SetBits::Words(&bitmap), max_bytes)
            }
            .map_err(decode_error)?
        }
        _ => return Err(DecodeError("unknown body kind")),
    };
    if r.remaining() != 0 {
        return Err(DecodeError("trailing bytes"));
    }
    counter
        .check_growth_within(max_bytes)
        .map_err(decode_error)?;
    Ok(counter)
}

/// An Elias–Fano stream of `k` values below `universe`, validated, as words from bit 0.
pub(super) fn read_stream(
    r: &mut Reader,
    k: u64,
    universe: u64,
) -> Result<(Vec<u64>, Shape), DecodeError> {
    let shape = Shape::new(k, universe);
    let len = shape.bits().div_ceil(8);
    if len > r.remaining() as u64 {
        return Err(DecodeError("truncated"));
    }
    let bytes = r.take(len as usize)?;
    if !shape.bits().is_multiple_of(8) && bytes[bytes.len() - 1] >> (shape.bits() % 8) != 0 {
        return Err(DecodeError("padding bits set"));
    }
    let mut words = Vec::new();
    words
        .try_reserve_exact(len.div_ceil(8) as usize + 1)
        .map_err(|_| DecodeError("out of memory"))?;
    words.resize(len.div_ceil(8) as usize + 1, 0);
    bytes_into_words(&mut words, 0, bytes);
    ef::validate(&words, 0, shape, universe).map_err(DecodeError)?;
    Ok((words, shape))
}

/// A dense body: ⌈m/8⌉ bytes, padding bits zero, as ⌈m/64⌉ words.
fn read_dense(r: &mut Reader, m: u64) -> Result<Vec<u64>, DecodeError> {
    let len = m.div_ceil(8) as usize;
    let dense = r.take(len)?;
    if !m.is_multiple_of(8) && dense[len - 1] >> (m % 8) != 0 {
        return Err(DecodeError("padding bits set"));
    }
    let mut words = zeroed(m.div_ceil(64))?;
    bytes_into_words(&mut words, 0, dense);
    Ok(words)
}

fn zeroed(words: u64) -> Result<Vec<u64>, DecodeError> {
    crate::core::alloc::zeroed(words as usize).ok_or(DecodeError("out of memory"))
}

/// A bitmap of `m ≥ 1` bits all set, allocated fallibly: a payload listing a bitmap's zeros
/// may list none, so its few bytes can name a bitmap larger than the machine.
fn all_set(m: u64) -> Result<Vec<u64>, DecodeError> {
    let mut words = zeroed(m.div_ceil(64))?;
    words.fill(u64::MAX);
    if !m.is_multiple_of(64) {
        *words.last_mut().expect("m ≥ 1") = (1 << (m % 64)) - 1;
    }
    Ok(words)
}

mod sketch;
/// Reading encoding version 1 (see "Version history").
mod v1;

pub(super) fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::counter::Mode;
    use crate::lc::levels::WINDOW;
    use proptest::prelude::*;

    const NO_LIMIT: u64 = u64::MAX;

    /// What a counter saved by an earlier version with these items loads as (exact or bitmap).
    fn filled(error_rate: f64, capacity: u64, items: u64) -> Counter {
        let hash = |i: u64| crate::core::hashing::hash_item(format!("item:{i}").as_bytes()).h1;
        let hashes: Vec<u64> = (0..items).map(hash).collect();
        Counter::saved_bitmap(capacity, error_rate, &hashes)
    }

    /// A counter fed these items by adds (exact, then a sketch).
    fn grown(error_rate: f64, capacity: u64, items: u64) -> Counter {
        let mut c = Counter::reserve(error_rate, capacity, NO_LIMIT).unwrap();
        for i in 0..items {
            c.add(format!("item:{i}").as_bytes()).unwrap();
        }
        c
    }

    /// Version 1's encoder, kept to test that its values load.
    fn encode_v1(c: &Counter, hashes: Option<&[u64]>) -> Vec<u8> {
        let mut out = vec![1, HASH_SCHEME];
        let m = c.bits();
        let mut body = Vec::new();
        let kind = match hashes {
            Some(hashes) => {
                body.put_varint(hashes.len() as u64);
                for h in hashes {
                    body.extend_from_slice(&h.to_le_bytes());
                }
                KIND_EXACT
            }
            None => {
                let mut words = vec![0u64; m.div_ceil(64) as usize];
                for p in c.positions() {
                    words[(p / 64) as usize] |= 1 << (p % 64);
                }
                let kind = v1::smallest_kind(&words, m);
                match kind {
                    KIND_DENSE => words_to_bytes(&words, 0, m.div_ceil(8) as usize, &mut body),
                    _ => {
                        let zeros = kind == KIND_ZEROS;
                        let positions: Vec<u64> =
                            crate::lc::counter::bit_positions(&words, zeros, m).collect();
                        body.put_varint(positions.len() as u64);
                        let mut next = 0;
                        for p in positions {
                            body.put_varint(p - next);
                            next = p + 1;
                        }
                    }
                }
                kind
            }
        };
        out.push(kind);
        out.put_varint(c.capacity());
        out.extend_from_slice(&c.error_rate().to_le_bytes());
        out.put_varint(m);
        out.extend(body);
        out
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn sizes_of_the_default_counter() {
        let sizes: Vec<(u64, usize, u8)> =
            [0, 1, 10, 30, 100, 250, 267, 268, 1_000, 12_000, 50_000]
                .into_iter()
                .map(|n| {
                    let e = encode(&filled(0.01, 50_000, n));
                    (n, e.len(), e[2])
                })
                .collect();
        println!("encoded 0.01/50000 (items, bytes, kind): {sizes:?}");
        let len = |n| sizes.iter().find(|s| s.0 == n).unwrap();
        assert_eq!(len(0).1, 18);
        assert_eq!(len(30).1, 17 + 1 + 121);
        assert!(len(50_000).1 <= 800, "{:?}", len(50_000));
        assert_eq!(len(50_000).2, KIND_ZEROS);
        assert_eq!(len(1_000).2, KIND_SET);
        assert_eq!(len(12_000).2, KIND_DENSE);
        // Never larger than version 1 wrote the same counter.
        for n in [1u64, 10, 30, 100, 250, 267] {
            assert!(len(n).1 <= 18 + 8 * n as usize, "{n}");
        }
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
                    write_dense(rebuilt.as_mut().unwrap(), offset, bytes, NO_LIMIT).unwrap();
                }
            }
        });
        (rebuilt.unwrap(), commands)
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn aof_parts_rebuild_large_counters_piece_by_piece() {
        // bits_for(50_000, 0.01) = 17,134: the last byte has padding bits.
        for items in [0, 200, 268, 1_000, 12_000, 50_000, 400_000] {
            let c = filled(0.01, 50_000, items);
            let whole = encode(&c).len() as u64;
            for chunk in [1 << 20, whole, whole - 1, 1_000, 333, 7, 1] {
                let (rebuilt, commands) = replay(&c, chunk);
                assert_eq!(encode(&rebuilt), encode(&c), "{items} items, chunk {chunk}");
                assert_eq!(rebuilt, c);
                let chunked = whole > chunk && c.mode() == Mode::Dense;
                let pieces = 17_134u64.div_ceil(8).div_ceil(chunk) as usize;
                assert_eq!(commands, if chunked { 1 + pieces } else { 1 });
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn write_dense_refuses_bad_pieces_and_changes_nothing() {
        let mut exact = filled(0.01, 50_000, 10);
        assert!(write_dense(&mut exact, 0, &[1], NO_LIMIT).is_err());
        assert_eq!(exact, filled(0.01, 50_000, 10));
        // Sketches hold no bitmap: a piece for one is refused, not dropped.
        for items in [1_000, 6_000] {
            let sketch = grown(0.01, 50_000, items);
            let mut c = sketch.clone();
            assert_eq!(
                write_dense(&mut c, 0, &[1], NO_LIMIT),
                Err(DecodeError("the counter is a sketch, not a bitmap")),
                "{:?}",
                sketch.mode()
            );
            assert_eq!(c, sketch);
        }
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
            assert!(
                write_dense(&mut c, offset, &piece, NO_LIMIT).is_err(),
                "{offset}"
            );
            assert_eq!(c, original);
        }
        write_dense(&mut c, dense - 1, &[0b0011_1111], NO_LIMIT).unwrap();
        write_dense(&mut c, 0, &[0xff, 0], NO_LIMIT).unwrap();
        assert_eq!(c.bitmap_words().unwrap()[0] & 0xffff, 0xff);
        let ones: u64 = c
            .bitmap_words()
            .unwrap()
            .iter()
            .map(|w| w.count_ones() as u64)
            .sum();
        assert_eq!(c.bits_set(), ones, "zeros kept in step");
        // A sparse counter turns dense when a piece sets enough bits, within the limit.
        let sparse = filled(0.01, 50_000, 1_000);
        let mut s = sparse.clone();
        write_dense(&mut s, 0, &[1], 100).unwrap();
        assert_eq!(s.mode(), Mode::Sparse);
        let full = [0xff; 2_000];
        assert!(write_dense(&mut s, 0, &full, 100).is_err());
        assert_eq!(s.positions().next(), Some(0));
        write_dense(&mut s, 0, &full, NO_LIMIT).unwrap();
        assert_eq!(s.mode(), Mode::Dense);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn sketches_round_trip_in_version_3() {
        for (rate, capacity, items, mode) in [
            (0.01, 50_000, 268, Mode::Tokens),
            (0.01, 50_000, 2_000, Mode::Tokens),
            (0.01, 50_000, 20_000, Mode::Registers),
            (0.02, 1_000, 300_000, Mode::Registers),
            (0.3, 10, 100, Mode::Registers),
        ] {
            let c = grown(rate, capacity, items);
            assert_eq!(c.mode(), mode, "{rate} {items}");
            let bytes = encode(&c);
            assert_eq!(bytes[0], SKETCH_VERSION);
            let back = decode(&bytes, NO_LIMIT).unwrap();
            assert_eq!(back, c);
            assert_eq!(back.count(), c.count());
            assert_eq!(encode(&back), bytes);
            let (rebuilt, commands) = replay(&c, 1_000);
            assert_eq!((rebuilt, commands), (c.clone(), 1));
        }
        // A registers counter over the memory limit is refused.
        let c = grown(0.01, 50_000, 20_000);
        assert_eq!(decode(&encode(&c), 6_000), Err(DecodeError(OVER_THE_LIMIT)));
    }

    /// Counters created with a rate below what new counters accept (`min_error_rate`) load
    /// and count as before, with the largest sketch.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn counters_saved_with_rates_now_refused_still_load() {
        let rate = 1e-7;
        assert!(Counter::reserve(rate, 100, NO_LIMIT).is_err());
        let m = crate::lc::geometry::bits_for(100, rate).unwrap();
        for items in [10, 5_000] {
            let mut c = Counter::empty(100, rate, m);
            for i in 0..items {
                c.add(format!("item:{i}").as_bytes()).unwrap();
            }
            let back = decode(&encode(&c), NO_LIMIT).unwrap();
            assert_eq!((back.count(), back.error_rate()), (c.count(), rate));
            assert_eq!(back, c);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn round_trips_every_kind() {
        for items in [0, 1, 267, 268, 1_000, 4_600, 12_000, 50_000, 400_000] {
            let c = filled(0.01, 50_000, items);
            let bytes = encode(&c);
            let back = decode(&bytes, NO_LIMIT).unwrap();
            assert_eq!(back, c, "{items} items");
            assert_eq!(encode(&back), bytes);
        }
        // m not a multiple of 8 or 64: padding handled.
        let c = filled(0.3, 10, 30);
        assert_eq!(decode(&encode(&c), NO_LIMIT).unwrap(), c);
        // A large counter whose set bits are few for a bitmap but many for its sparse mode.
        let c = filled(0.01, 10_000_000, 20_000);
        assert_eq!(c.mode(), Mode::Dense);
        assert_eq!(encode(&c)[2], KIND_SET);
        assert_eq!(decode(&encode(&c), NO_LIMIT).unwrap(), c);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn version_1_values_load_as_the_same_items_give_now() {
        let h = |i: u64| crate::core::hashing::hash_item(format!("item:{i}").as_bytes()).h1;
        for (rate, capacity, items) in [
            (0.01, 50_000, 0),
            (0.01, 50_000, 40),
            (0.01, 50_000, 267),
            (0.01, 50_000, 268),
            (0.01, 50_000, 3_000),
            (0.01, 50_000, 50_000),
            (0.02, 100, 100),
            (0.5, 1, 5),
            (0.01, 1_000_000, 2_000),
        ] {
            let now = filled(rate, capacity, items);
            let hashes = now.is_exact().then(|| {
                let mut hashes: Vec<u64> = (0..items).map(h).collect();
                hashes.sort_unstable();
                hashes
            });
            let old = encode_v1(&now, hashes.as_deref());
            let loaded = decode(&old, NO_LIMIT).unwrap();
            assert_eq!(loaded, now, "{rate} {capacity} {items}");
        }
        // Version 1's canonical checks still hold.
        let c = filled(0.01, 50_000, 1_000);
        let mut old = encode_v1(&c, None);
        assert_eq!(old[2], KIND_SET);
        old.push(0);
        assert_eq!(decode(&old, NO_LIMIT), Err(DecodeError("trailing bytes")));
        // Its chunked form's shell: every bit zero, pieces to follow.
        let mut shell = encode_v1(&Counter::reserve(0.01, 50_000, NO_LIMIT).unwrap(), None);
        shell[2] = KIND_SET;
        shell.truncate(shell.len() - 1);
        shell.push(0);
        let mut rebuilt = decode(&shell, NO_LIMIT).unwrap();
        assert_eq!(rebuilt.mode(), Mode::Sparse);
        let full = filled(0.01, 50_000, 12_000);
        let mut bytes = Vec::new();
        words_to_bytes(full.bitmap_words().unwrap(), 0, 2_142, &mut bytes);
        write_dense(&mut rebuilt, 0, &bytes[..1_000], NO_LIMIT).unwrap();
        write_dense(&mut rebuilt, 1_000, &bytes[1_000..], NO_LIMIT).unwrap();
        assert_eq!(rebuilt, full);
        // A bitmap of few bits stays the list a load of it makes, piece after piece (it
        // turned dense, eight times the bytes, where a reload or a replica's full sync
        // listed it).
        let few = filled(0.01, 50_000, 1_000);
        assert_eq!(few.mode(), Mode::Sparse);
        let mut bytes = vec![0u8; 2_142];
        for p in few.positions() {
            bytes[p as usize / 8] |= 1 << (p % 8);
        }
        let mut rebuilt = decode(&shell, NO_LIMIT).unwrap();
        write_dense(&mut rebuilt, 1_000, &bytes[1_000..], NO_LIMIT).unwrap();
        assert_eq!(rebuilt.mode(), Mode::Sparse);
        write_dense(&mut rebuilt, 0, &bytes[..1_000], NO_LIMIT).unwrap();
        assert_eq!((rebuilt.mode(), &rebuilt), (Mode::Sparse, &few));
    }

    /// Counters loaded from version 1 merge with version-2 counters of every mode as the
    /// same items would.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn version_1_values_merge_across_modes() {
        let h = |i: u64| crate::core::hashing::hash_item(format!("item:{i}").as_bytes()).h1;
        for (old_items, new_items) in [(40, 30), (200, 100), (1_000, 10), (20, 6_000)] {
            let now = filled(0.01, 50_000, old_items);
            let hashes = now.is_exact().then(|| {
                let mut hashes: Vec<u64> = (0..old_items).map(h).collect();
                hashes.sort_unstable();
                hashes
            });
            let loaded = decode(&encode_v1(&now, hashes.as_deref()), NO_LIMIT).unwrap();
            let hash = |i: u64| h(i);
            let new: Vec<u64> = (1_000_000..1_000_000 + new_items).map(hash).collect();
            let other = Counter::saved_bitmap(50_000, 0.01, &new);
            let mut every: Vec<u64> = (0..old_items).map(hash).collect();
            every.extend(&new);
            let all = Counter::saved_bitmap(50_000, 0.01, &every);
            for (mut dest, source) in [(loaded.clone(), &other), (other.clone(), &loaded)] {
                dest.absorb(source).unwrap();
                if dest.is_sketch() {
                    // Two exact sets past the exact limit: now the sketch of their items.
                    let rel = dest.count() as f64 / (old_items + new_items) as f64 - 1.0;
                    assert!(rel.abs() < 0.01, "{rel}");
                    continue;
                }
                let positions: Vec<u64> = dest.positions().collect();
                assert_eq!(positions, all.positions().collect::<Vec<_>>());
                if all.is_exact() {
                    assert_eq!(dest, all);
                }
            }
            assert_eq!(
                Counter::union_count(&[&loaded, &other]).unwrap(),
                if loaded.is_exact() && other.is_exact() {
                    old_items + new_items
                } else {
                    all.count()
                }
            );
        }
    }

    /// A saved bitmap is weighed by the block it loads into, in its size class: every bit of
    /// 2^23 set (a 19-byte body) takes 1 MiB and two words, a 1.25 MiB class, over a 1 MiB
    /// limit; 2^33 bits (1 GiB and two words) are over the default 1 GiB.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn saved_bitmaps_are_weighed_by_their_size_class() {
        let all_set = |m_varint: &[u8]| {
            let mut v = vec![2, 1, KIND_ZEROS, 0xd0, 0x86, 0x03];
            v.extend_from_slice(&0.01f64.to_le_bytes());
            v.extend_from_slice(m_varint);
            v.push(0);
            v
        };
        let mib = all_set(&[0x80, 0x80, 0x80, 0x04]);
        assert_eq!(decode(&mib, 1 << 20), Err(DecodeError(OVER_THE_LIMIT)));
        assert_eq!(decode(&mib, 1_310_720).unwrap().memory_bytes(), 1_310_720);
        let gib = all_set(&[0x80, 0x80, 0x80, 0x80, 0x20]);
        assert_eq!(decode(&gib, 1 << 30), Err(DecodeError(OVER_THE_LIMIT)));
        // An exact counter is weighed by what it grows to: a default one by its registers.
        let exact = encode(&filled(0.01, 50_000, 10));
        assert_eq!(decode(&exact, 7_167), Err(DecodeError(OVER_THE_LIMIT)));
        assert!(decode(&exact, 7_168).is_ok());
    }

    #[test]
    fn rejects_what_does_not_add_up() {
        let good = encode(&filled(0.01, 50_000, 300));
        assert_eq!(decode(&good, 1000), Err(DecodeError(OVER_THE_LIMIT)));
        let mut v = good.clone();
        v[0] = 3;
        assert!(decode(&v, NO_LIMIT).is_err());
        let mut v = good.clone();
        v.push(0);
        assert_eq!(decode(&v, NO_LIMIT), Err(DecodeError("trailing bytes")));
        assert!(decode(&good[..good.len() - 1], NO_LIMIT).is_err());
        assert!(decode(&[], NO_LIMIT).is_err());
        // An overlong varint for the capacity.
        let mut v = vec![2, 1, 0, 0x81, 0x00];
        v.extend_from_slice(&0.5f64.to_le_bytes());
        v.extend_from_slice(&[100, 0]);
        assert_eq!(
            decode(&v, NO_LIMIT),
            Err(DecodeError("varint not in shortest form"))
        );
        v[3] = 1;
        v.remove(4);
        assert!(decode(&v, NO_LIMIT).is_ok());
        // An empty bitmap written dense instead of as an empty position list.
        let mut dense = v[..v.len() - 1].to_vec();
        dense[2] = KIND_DENSE;
        dense.extend_from_slice(&[0; 13]);
        assert_eq!(
            decode(&dense, NO_LIMIT),
            Err(DecodeError("bitmap not in its smallest encoding"))
        );
        // A stream whose padding bits are set.
        let mut v = encode(&filled(0.01, 50_000, 3));
        *v.last_mut().unwrap() |= 0x80;
        assert!(decode(&v, NO_LIMIT).is_err());
    }

    /// A registers counter (capacity 1, 0.3, p = 4) whose running estimate, 1,080.75, is
    /// the one stored at bytes 68–75; 185 of its indicators are known set.
    const REGISTERS_1080: &str = "03010501333333333333d33f060480ffaf709cbf0548fe3b009faf01ccf00f\
        8cef6fe0d89f83b7ff1700c4fbc0a1fd0650f83f00310fe2cc7e8b50d877a8fe01e2ff0f102953683d03e390\
        405565ad73aa1eb840";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `bytes` with the running estimate replaced.
    fn with_estimate(bytes: &[u8], estimate: f64) -> Vec<u8> {
        let mut v = bytes.to_vec();
        v[68..76].copy_from_slice(&estimate.to_le_bytes());
        v
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn running_estimates_no_history_gives_are_refused() {
        let good = unhex(REGISTERS_1080);
        let c = decode(&good, NO_LIMIT).unwrap();
        assert_eq!(
            (c.mode(), c.bits_set(), c.count()),
            (Mode::Registers, 185, 1_081)
        );
        // One bit flipped in the estimate's exponent: 1.45·10^157 (which counted −1), and
        // 6·10^−306 (which counted 0 for 185 indicators set).
        let estimate = 1_080.753_163_938_594_5f64;
        assert_eq!(with_estimate(&good, estimate), good);
        for bit in [61, 62] {
            let flipped = f64::from_bits(estimate.to_bits() ^ 1 << bit);
            assert_eq!(
                decode(&with_estimate(&good, flipped), NO_LIMIT),
                Err(DecodeError("sketch estimate out of range")),
                "{flipped}"
            );
        }
        // Below the indicators known set; as many (with a variance that allows it, at most
        // estimate/μ); negative, infinite, not a number.
        assert!(decode(&with_estimate(&good, 184.0), NO_LIMIT).is_err());
        let mut v = with_estimate(&good, 185.0);
        v[76..84].copy_from_slice(&0f64.to_le_bytes());
        assert!(decode(&v, NO_LIMIT).is_ok());
        for bad in [-1.0, f64::INFINITY, f64::NAN] {
            assert!(decode(&with_estimate(&good, bad), NO_LIMIT).is_err());
        }
        // A variance beyond estimate/μ, or negative.
        for variance in [1e12, -1.0, f64::NAN] {
            let mut v = good.clone();
            v[76..84].copy_from_slice(&f64::to_le_bytes(variance));
            assert_eq!(
                decode(&v, NO_LIMIT),
                Err(DecodeError("sketch variance out of range"))
            );
        }
        // A token list: its estimate at least its tokens.
        let tokens = grown(0.01, 50_000, 400);
        let bytes = encode(&tokens);
        let end = bytes.len() - 16;
        let mut v = bytes.clone();
        v[end..end + 8].copy_from_slice(&(tokens.bits_set() as f64 - 1.0).to_le_bytes());
        assert_eq!(
            decode(&v, NO_LIMIT),
            Err(DecodeError("sketch estimate out of range"))
        );
    }

    /// Registers every level of which is set or forgotten (`μ` = 0): the estimate may then
    /// be anything up to `2^64` per indicator, past what a reply holds. Adds and unions of
    /// such a counter give counters that load again.
    #[test]
    fn full_registers_load_and_stay_loadable() {
        let good = unhex(REGISTERS_1080);
        let mut full = good[..14].to_vec();
        // Register: highest level 236 (max_level(4)), every window bit set.
        let register = (236u64 << WINDOW) | ((1 << WINDOW) - 1);
        let mut words = vec![0u64; 8];
        for i in 0..16u64 {
            let bit = 27 * i;
            words[(bit / 64) as usize] |= register << (bit % 64);
            if bit % 64 + 27 > 64 {
                words[(bit / 64) as usize + 1] |= register >> (64 - bit % 64);
            }
        }
        words_to_bytes(&words, 0, 54, &mut full);
        full.extend_from_slice(&1e22f64.to_le_bytes());
        full.extend_from_slice(&1e40f64.to_le_bytes());
        let mut c = decode(&full, NO_LIMIT).unwrap();
        assert_eq!(c.count(), u64::MAX);
        // Beyond U + D·2^64 (D = 16 · 236 levels).
        assert!(decode(&with_estimate(&full, 1e23), NO_LIMIT).is_err());
        let mut union = decode(&good, NO_LIMIT).unwrap();
        assert!(union.absorb(&c).unwrap());
        assert_eq!(decode(&encode(&union), NO_LIMIT).as_ref(), Ok(&union));
        assert_eq!(union.count(), u64::MAX);
        assert!(!c.add(b"x").unwrap());
        assert_eq!(decode(&encode(&c), NO_LIMIT).as_ref(), Ok(&c));
    }

    fn arbitrary_counter() -> impl Strategy<Value = Counter> {
        (
            1u64..2_000,
            1u64..10_000,
            proptest::collection::vec(any::<u64>(), 0..3_000),
            any::<bool>(),
            prop_oneof![Just(0.05), Just(0.3), Just(0.02)],
        )
            .prop_map(|(m, capacity, hashes, bitmap, rate)| {
                let mut c = Counter::empty(capacity, rate, m);
                if bitmap {
                    // A bitmap saved by an earlier version.
                    let mut positions: Vec<u64> = hashes.iter().map(|&h| reduce(h, m)).collect();
                    positions.sort_unstable();
                    positions.dedup();
                    let count = positions.len() as u64;
                    let sorted = Box::new(positions.into_iter());
                    let bits = SetBits::Positions { count, sorted };
                    return Counter::from_bits(capacity, rate, m, bits, NO_LIMIT).unwrap();
                }
                for h in hashes {
                    c.add_hash(h).unwrap();
                }
                c
            })
    }

    proptest! {
        /// Pieces in any order and of any length, into a saved bitmap: after each the counter
        /// holds the bits written, in the form a load of its encoding gives (the mode its set
        /// bits call for), so a master that took them equals its reload.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn pieces_leave_the_form_a_load_gives(
            pieces in proptest::collection::vec(
                (0usize..2_142, proptest::collection::vec(
                    prop_oneof![Just(0u8), Just(0u8), any::<u8>()], 1..300)),
                1..12,
            ),
        ) {
            let mut c = filled(0.01, 50_000, 300);
            let (m, len) = (c.bits(), c.bits().div_ceil(8) as usize);
            prop_assert_eq!((c.mode(), len), (Mode::Sparse, 2_142));
            let mut model = vec![0u8; len];
            for p in c.positions() {
                model[p as usize / 8] |= 1 << (p % 8);
            }
            for (offset, mut piece) in pieces {
                piece.truncate(len - offset);
                if offset + piece.len() == len {
                    *piece.last_mut().unwrap() &= (1u8 << (m % 8)) - 1;
                }
                write_dense(&mut c, offset as u64, &piece, NO_LIMIT).unwrap();
                model[offset..offset + piece.len()].copy_from_slice(&piece);
                let want: Vec<u64> = (0..m).filter(|&p| model[p as usize / 8] >> (p % 8) & 1 == 1).collect();
                prop_assert_eq!(c.positions().collect::<Vec<_>>(), want);
                prop_assert_eq!(&decode(&encode(&c), NO_LIMIT).unwrap(), &c);
            }
        }

        /// Sketches made by adds, unions across precisions and more adds load with their
        /// running state: the bounds a load checks hold for every history.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn every_history_loads(
            rates in proptest::collection::vec(prop_oneof![Just(0.3), Just(0.05), Just(0.02)], 2..4),
            sizes in proptest::collection::vec(0u64..6_000, 4),
            seed in any::<u64>(),
        ) {
            let mut x = seed;
            let mut hash = || {
                crate::core::test_rng::step(&mut x);
                x
            };
            let mut counters: Vec<Counter> = rates.iter().zip(&sizes).map(|(&rate, &n)| {
                let mut c = Counter::reserve(rate, 1_000, NO_LIMIT).unwrap();
                (0..n).for_each(|_| { c.add_hash(hash()).unwrap(); });
                c
            }).collect();
            let first = counters.remove(0);
            let mut union = first;
            for c in &counters {
                union.absorb(c).unwrap();
                for c in [&union, c] {
                    prop_assert_eq!(decode(&encode(c), NO_LIMIT), Ok(c.clone()));
                }
            }
            for _ in 0..sizes[3] {
                union.add_hash(hash()).unwrap();
            }
            prop_assert_eq!(decode(&encode(&union), NO_LIMIT), Ok(union));
        }

        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn round_trip(c in arbitrary_counter()) {
            let bytes = encode(&c);
            let back = decode(&bytes, NO_LIMIT).unwrap();
            prop_assert_eq!(encode(&back), bytes);
            prop_assert_eq!(back, c);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(c) = decode(&bytes, 1 << 20) {
                if bytes[0] == ENCODING_VERSION {
                    prop_assert_eq!(encode(&c), bytes);
                }
            }
        }

        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
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
                if bytes[0] == ENCODING_VERSION {
                    prop_assert_eq!(encode(&back), bytes);
                }
            }
        }
    }
}
