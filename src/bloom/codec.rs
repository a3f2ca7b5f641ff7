//! The encoding of a Bloom filter chain, shared by RDB, `BF.SCANDUMP`/`BF.LOADCHUNK` and the
//! AOF rewrite (which emits `BF.LOADCHUNK` commands).
//!
//! An encoded value is a header followed by the data. All integers are little-endian; rates are
//! IEEE-754 doubles (their exact bits, so a value re-encodes to the same bytes).
//!
//! Header (32 + 40·count bytes, 40 + 40·count in version 4, then in versions 3 and 4 the
//! sparse sets):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `LCBF` |
//! | 4 | 1 | encoding version (1 to 4, see below) |
//! | 5 | 1 | hash scheme (`hashing::HASH_SCHEME`, 1) |
//! | 6 | 1 | layout of the bit arrays: 0 standard, 1 blocked |
//! | 7 | 1 | reserved, zero |
//! | 8 | 8 | requested error rate p, in (0, 1) |
//! | 16 | 4 | expansion (0: non-scaling) |
//! | 20 | 4 | count: number of sub-filters, 1..=1024 (exactly 1 when non-scaling) |
//! | 24 | 8 | items: total items, the sum of the sub-filters' items |
//! | 32 | 8 | version 4 only: the hash seed (`hashing.rs`), not 0; the entries below then start at 40, not 32 |
//! | 32 + 40i | 8 | sub-filter i: capacity (≥ 1; ≤ `sparse::MAX_CAPACITY` if sparse) |
//! | +8 | 8 | its error rate, in (0, 1) |
//! | +16 | 8 | bit array: its bits m, 1..=2^48 (a multiple of 512 in the blocked layout); sparse: its universe U ≥ capacity |
//! | +24 | 4 | bit array: its hashes k, 1..=64; sparse: 0 |
//! | +28 | 4 | its kind: 0 bit array, 1 sparse (versions 3 and 4; reserved, zero, before) |
//! | +32 | 8 | its items (≤ capacity) |
//! | after the entries | | versions 3 and 4: each sparse sub-filter's stream in order (`sparse.rs`: the Elias–Fano stream of `ef.rs` of its fingerprints, ⌈bits/64⌉ little-endian u64 words, bits past its end zero, its length a function of its items and U) |
//!
//! Data: the bit arrays in order, each as ⌈m/64⌉ little-endian u64 words (bit j of the filter
//! is bit j%64 of word j/64); bits past m are zero. Sparse sub-filters have no data: they are
//! whole in the header, so a value is complete and valid after its header, chunks only fill
//! bit arrays (zero until then), and no chunk can leave a set half-written. Byte offsets into
//! the data are what `BF.SCANDUMP` iterators count (iterator = 1 + end offset of the chunk just
//! sent, as in RedisBloom), in chunks of at most `CHUNK_BYTES`.
//!
//! Decoding validates everything before allocating: magic, versions, reserved bytes, finite
//! rates in (0, 1), the sub-filters' rates summing to at most p, expansion ≤ 32,768, k and m in
//! range, each sub-filter's size bearing its capacity (its textbook rate at capacity at most
//! twice its own, `SubParams::holds_its_rate`), items ≤ capacity and summing to the total, every sparse
//! stream (exactly its items, distinct and below U, canonical: `sparse::is_valid`), the exact
//! header length, and the key's total bytes against the caller's limit (`max-memory-per-key`).
//! Data chunks are checked to lie within the data and to leave the padding bits zero before
//! any byte is written. Each sub-filter keeps its own parameters, so a later sizing or scaling
//! schedule cannot break stored values.
//!
//! Versions. A value is written with the lowest version that can express it, so a release that
//! only knows version 1 still loads every standard-layout filter of bit arrays, and refuses
//! (with "bad data") any other rather than misreading it.
//! * 1 (lcbloom 0.1): standard layout, bit arrays only; byte 6 was reserved and is 0.
//! * 2: byte 6 is the layout and is 1, blocked (`blocked.rs`: each item's probes in one 64-byte
//!   block), bit arrays only. A version 2 value with layout 0 is refused as non-canonical.
//! * 3: sparse sub-filters (fingerprint sets), with either layout; at least one sub-filter is
//!   sparse (else it is written as version 1 or 2, and refused as non-canonical).
//! * 4: a seeded chain (its items hashed under a seed of its own, not 0): the seed after the
//!   fixed fields, either layout, bit arrays and sparse sets in any mix. Versions 1 to 3 are
//!   the unseeded chains (seed 0), so a value written before seeds existed re-encodes to the
//!   same bytes; a version 4 value with seed 0 is refused as non-canonical.

use super::budget::MAX_EXPANSION;
use super::chain::{memory_bytes_for, Chain, MAX_SUB_FILTERS};
use super::filter::{FilterParams, Layout};
use super::params::{SparseParams, SubParams};
use super::sparse;
use crate::core::chunks::{Reader, Writer};
use crate::core::decode::DecodeError;
use crate::core::hashing::HASH_SCHEME;
use std::borrow::Cow;
use std::ptr::NonNull;

pub const MAGIC: &[u8; 4] = b"LCBF";
/// The newest encoding version (see "Versions" above).
pub const ENCODING_VERSION: u8 = 4;
pub use crate::core::chunks::CHUNK_BYTES;
const FIXED: usize = 32;
/// The seed after the fixed fields (version 4).
const SEED_BYTES: usize = 8;
const PER_FILTER: usize = 40;

/// The validated header: what a chain is made of, without its bit arrays' bits.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The hash seed (0: none).
    pub seed: u64,
    pub error_rate: f64,
    pub expansion: u32,
    pub layout: Layout,
    pub filters: Vec<(SubParams, u64)>,
    /// The sparse sub-filters' streams, one after the other.
    pub streams: Vec<u64>,
}

impl Header {
    /// Bytes of data that follow the header.
    pub fn data_bytes(&self) -> u64 {
        self.filters
            .iter()
            .map(|(s, _)| match s {
                SubParams::Bits(p) => p.bytes(),
                SubParams::Sparse(_) => 0,
            })
            .sum()
    }

    /// The chain, its sparse sets loaded and its bit arrays zero, ready for its data.
    pub fn into_chain(self) -> Result<Chain, DecodeError> {
        Chain::from_parts(
            self.seed,
            self.error_rate,
            self.expansion,
            self.layout,
            &self.filters,
            &self.streams,
        )
        .map_err(|_| OUT_OF_MEMORY)
    }
}

/// What every Bloom decoder refuses with, lcbloom's and RedisBloom's (`redisbloom/`): bytes
/// that are not a filter (RedisBloom's text), a filter over the key's budget, memory refused.
pub const BAD_DATA: DecodeError = DecodeError("received bad data");
pub const TOO_LARGE: DecodeError = DecodeError("filter would exceed max-memory-per-key");
pub const OUT_OF_MEMORY: DecodeError = DecodeError("insufficient memory to load filter");
const BAD_CHUNK: DecodeError =
    DecodeError("invalid chunk: offset and length must lie within the filter's data");
const BAD_PADDING: DecodeError = DecodeError("invalid chunk: sets bits past a filter's end");

pub fn encode_header(chain: &Chain) -> Vec<u8> {
    let filters = chain.filters();
    let sparse = filters.iter().any(|f| matches!(f, SubParams::Sparse(_)));
    let seed = chain.seed();
    let mut out = Vec::with_capacity(FIXED + SEED_BYTES + PER_FILTER * filters.len());
    out.extend_from_slice(MAGIC);
    let layout = chain.layout() as u8;
    let version = match (seed != 0, sparse, chain.layout()) {
        (true, _, _) => 4,
        (false, true, _) => 3,
        (false, false, Layout::Standard) => 1,
        (false, false, Layout::Blocked) => 2,
    };
    out.extend_from_slice(&[version, HASH_SCHEME, layout, 0]);
    out.put_f64(chain.error_rate());
    out.put_u32(chain.expansion().unwrap_or(0));
    out.put_u32(filters.len() as u32);
    out.put_u64(chain.items());
    if seed != 0 {
        out.put_u64(seed);
    }
    for (f, items) in filters.iter().zip(chain.filter_items()) {
        let (third, hashes, kind) = match f {
            SubParams::Bits(p) => (p.bits, p.hashes, 0u32),
            SubParams::Sparse(p) => (p.universe, 0, 1),
        };
        out.put_u64(f.capacity());
        out.put_f64(f.error_rate());
        out.put_u64(third);
        out.put_u32(hashes);
        out.put_u32(kind);
        out.put_u64(*items);
    }
    // Written out of the frozen forms of full sets: a failure to get that memory aborts, like
    // any small allocation (the streams are no larger than the sets).
    let streams = chain
        .sparse_streams()
        .expect("memory for a filter's sparse streams");
    for stream in streams {
        stream.iter().for_each(|w| out.put_u64(*w));
    }
    out
}

/// Where a header's parts end in its bytes.
struct Extent {
    /// The entries' end: the sparse streams start here.
    entries: usize,
    /// The whole header's, sparse streams included.
    header: usize,
}

/// The fixed part and the sub-filters' entries, validated, and the header's extent, from a
/// prefix of `bytes`.
fn decode_entries(bytes: &[u8]) -> Result<(Header, Extent), DecodeError> {
    if bytes.len() < FIXED {
        return Err(BAD_DATA);
    }
    let mut r = Reader::new(bytes, BAD_DATA);
    let (magic, version, scheme, layout, reserved) =
        (r.take(4)?, r.byte()?, r.byte()?, r.byte()?, r.byte()?);
    let (error_rate, expansion, count, total_items) = (r.f64()?, r.u32()?, r.u32()?, r.u64()?);
    let count = count as usize;
    if !(1..=MAX_SUB_FILTERS).contains(&count) {
        return Err(BAD_DATA);
    }
    let (version, layout) = match (version, layout) {
        (1, 0) => (1, Layout::Standard),
        (2, 1) => (2, Layout::Blocked),
        (3 | 4, 0) => (version, Layout::Standard),
        (3 | 4, 1) => (version, Layout::Blocked),
        _ => return Err(BAD_DATA),
    };
    let seeded = version == 4;
    let fixed = FIXED + if seeded { SEED_BYTES } else { 0 };
    let entries_end = fixed + PER_FILTER * count;
    if bytes.len() < entries_end || magic != MAGIC || scheme != HASH_SCHEME || reserved != 0 {
        return Err(BAD_DATA);
    }
    let seed = if seeded { r.u64()? } else { 0 };
    // Seed 0 is written as versions 1 to 3: one encoding per value.
    if seeded && seed == 0 {
        return Err(BAD_DATA);
    }
    if !(error_rate > 0.0 && error_rate < 1.0)
        || (expansion == 0 && count != 1)
        || expansion > MAX_EXPANSION
    {
        return Err(BAD_DATA);
    }
    let mut filters = Vec::new();
    filters
        .try_reserve_exact(count)
        .map_err(|_| OUT_OF_MEMORY)?;
    let (mut items_sum, mut stream_words, mut rates) = (0u64, 0usize, 0.0);
    for _ in 0..count {
        let (capacity, rate, third, hashes) = (r.u64()?, r.f64()?, r.u64()?, r.u32()?);
        let (kind, items) = (r.u32()?, r.u64()?);
        let sub = match kind {
            0 => SubParams::Bits(FilterParams {
                capacity,
                error_rate: rate,
                bits: third,
                hashes,
                layout,
            }),
            1 if version >= 3 && hashes == 0 => {
                SubParams::Sparse(SparseParams::new(capacity, rate, third).ok_or(BAD_DATA)?)
            }
            _ => return Err(BAD_DATA),
        };
        if !sub.is_valid() || items > sub.capacity() || !sub.holds_its_rate() {
            return Err(BAD_DATA);
        }
        rates += sub.error_rate();
        if let SubParams::Sparse(p) = sub {
            stream_words += sparse::Shape::new(items, p.universe).stream_words();
        }
        items_sum = items_sum.checked_add(items).ok_or(BAD_DATA)?;
        filters.push((sub, items));
    }
    let sparse_count = filters
        .iter()
        .filter(|(s, _)| matches!(s, SubParams::Sparse(_)))
        .count();
    // Unseeded, version 3 exactly when some sub-filter is sparse: one encoding per value.
    // The sub-filters spend at most the chain's rate, as every schedule has them do.
    if items_sum != total_items
        || (!seeded && (version == 3) != (sparse_count > 0))
        || rates > error_rate * (1.0 + 1e-9)
    {
        return Err(BAD_DATA);
    }
    let header = Header {
        seed,
        error_rate,
        expansion,
        layout,
        filters,
        streams: Vec::new(),
    };
    let extent = Extent {
        entries: entries_end,
        header: entries_end + 8 * stream_words,
    };
    Ok((header, extent))
}

/// Decodes and validates a header that is exactly `bytes`; `limit` is the key's byte budget.
pub fn decode_header(bytes: &[u8], limit: u64) -> Result<Header, DecodeError> {
    let (mut header, extent) = decode_entries(bytes)?;
    if bytes.len() != extent.header {
        return Err(BAD_DATA);
    }
    let items: Vec<u64> = header.filters.iter().map(|(_, n)| *n).collect();
    let subs: Vec<SubParams> = header.filters.iter().map(|(s, _)| *s).collect();
    match memory_bytes_for(&subs, &items) {
        Some(needed) if needed <= limit => {}
        _ => return Err(TOO_LARGE),
    }
    let streams = &bytes[extent.entries..];
    header
        .streams
        .try_reserve_exact(streams.len() / 8)
        .map_err(|_| OUT_OF_MEMORY)?;
    header.streams.extend(
        streams
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))),
    );
    let mut at = 0;
    for (sub, n) in &header.filters {
        if let SubParams::Sparse(p) = sub {
            let words = sparse::Shape::new(*n, p.universe).stream_words();
            if !sparse::is_valid(&header.streams[at..at + words], *n, p.universe) {
                return Err(BAD_DATA);
            }
            at += words;
        }
    }
    Ok(header)
}

/// The whole value: header then data (for tests and tools; Redis paths stream chunks).
pub fn encode(chain: &Chain) -> Vec<u8> {
    let mut out = encode_header(chain);
    let mut offset = 0;
    while let Some(chunk) = data_chunk(chain, offset) {
        offset += chunk.len() as u64;
        out.extend_from_slice(&chunk);
    }
    out
}

/// Decodes a whole value, refusing trailing bytes.
pub fn decode(bytes: &[u8], limit: u64) -> Result<Chain, DecodeError> {
    let split = decode_entries(bytes)?.1.header;
    if bytes.len() < split {
        return Err(BAD_DATA);
    }
    let header = decode_header(&bytes[..split], limit)?;
    let data = &bytes[split..];
    if data.len() as u64 != header.data_bytes() {
        return Err(BAD_DATA);
    }
    let mut chain = header.into_chain()?;
    if !data.is_empty() {
        write_data(&mut chain, 0, data)?;
    }
    Ok(chain)
}

/// Up to `CHUNK_BYTES` of data from `offset`, or None at (or past) the end: borrowed from a
/// bit array's memory when the chunk lies within one piece of it (a big filter's chunks do),
/// else copied.
pub fn data_chunk(chain: &Chain, offset: u64) -> Option<Cow<'_, [u8]>> {
    let total = chain.data_bytes();
    if offset >= total {
        return None;
    }
    let len = (total - offset).min(CHUNK_BYTES) as usize;
    let end = offset + len as u64;
    let mut out = Vec::new();
    let mut start = 0u64;
    for (p, bits) in chain.bit_arrays() {
        let fend = start + p.bytes();
        if fend > offset && start < end {
            let a = (offset.max(start) - start) as usize;
            let b = (end.min(fend) - start) as usize;
            if out.is_empty() && b - a == len {
                if let Some(whole) = bits.borrow_bytes(a, len) {
                    return Some(Cow::Borrowed(whole));
                }
            }
            out.reserve_exact(len - out.len());
            bits.read_bytes(a, b - a, &mut out);
        }
        start = fend;
    }
    Some(Cow::Owned(out))
}

/// The data chunk an RDB save writes at `offset`. In a bit array held in more than one
/// allocation (over `words::SEGMENT_BYTES`), the rest of the allocation at `offset`: each
/// allocation whole, borrowed, so that a load adopts it as it is and `DUMP`'s buffer grows
/// once for the whole array. Elsewhere `data_chunk`'s, cut where such an array starts.
pub fn saved_chunk(chain: &Chain, offset: u64) -> Option<Cow<'_, [u8]>> {
    let mut start = 0u64;
    let mut limit = u64::MAX;
    for (p, bits) in chain.bit_arrays() {
        let end = start + p.bytes();
        if bits.is_segmented() {
            if (start..end).contains(&offset) {
                if let Some(rest) = bits.rest_of_piece((offset - start) as usize) {
                    return Some(Cow::Borrowed(rest));
                }
            } else if start > offset {
                limit = start;
                break;
            }
        }
        start = end;
    }
    let mut chunk = data_chunk(chain, offset)?;
    let keep = (limit - offset).min(chunk.len() as u64) as usize;
    match &mut chunk {
        Cow::Borrowed(bytes) => *bytes = &bytes[..keep],
        Cow::Owned(bytes) => bytes.truncate(keep),
    }
    Some(chunk)
}

/// Writes `bytes` at data offset `offset`, after checking that they lie within the data and
/// leave every padding bit zero; on error nothing is written.
pub fn write_data(chain: &mut Chain, offset: u64, bytes: &[u8]) -> Result<(), DecodeError> {
    visit_data(chain, offset, bytes, false)?;
    visit_data(chain, offset, bytes, true)
}

/// `write_data` without the copy where it can: when `block` holds exactly one allocation of
/// one bit array's words (a segment of a large one, or a whole small one) and passes
/// `write_data`'s checks, the bit array takes the block over (`Words::adopt`). Otherwise the
/// block is handed back, nothing written, for `write_data` to copy it or refuse it.
///
/// # Safety
/// As `Words::adopt`: `block` holds `len` initialised bytes and is a block of the global
/// allocator with u64 alignment, owned by the caller.
pub unsafe fn adopt_data(
    chain: &mut Chain,
    offset: u64,
    block: NonNull<u8>,
    len: usize,
) -> Result<(), NonNull<u8>> {
    // SAFETY: the block holds `len` initialised bytes (the caller's contract).
    let bytes = unsafe { std::slice::from_raw_parts(block.as_ptr(), len) };
    if visit_data(chain, offset, bytes, false).is_err() {
        return Err(block);
    }
    let end = offset + len as u64;
    let mut start = 0u64;
    for (p, bits) in chain.bit_arrays_mut() {
        let fend = start + p.bytes();
        if start <= offset && end <= fend {
            // SAFETY: the caller's contract is adopt's.
            return unsafe { bits.adopt((offset - start) as usize, block, len) };
        }
        start = fend;
    }
    Err(block)
}

/// The bit arrays' parts of data range `offset..offset + bytes.len()`: checked (in range,
/// padding zero), or written.
fn visit_data(
    chain: &mut Chain,
    offset: u64,
    bytes: &[u8],
    write: bool,
) -> Result<(), DecodeError> {
    let end = offset.checked_add(bytes.len() as u64).ok_or(BAD_CHUNK)?;
    if bytes.is_empty() || end > chain.data_bytes() {
        return Err(BAD_CHUNK);
    }
    let mut start = 0u64;
    for (p, bits) in chain.bit_arrays_mut() {
        let fbytes = p.bytes();
        let fend = start + fbytes;
        if fend > offset && start < end {
            let a = offset.max(start);
            let b = end.min(fend);
            let src = &bytes[(a - offset) as usize..(b - offset) as usize];
            let local = (a - start) as usize;
            if write {
                bits.write_bytes(local, src);
            } else {
                // Only the last word has padding: look at the bytes of it this chunk holds.
                let pad = p.padding_mask().to_le_bytes();
                let last_word = fbytes as usize - 8;
                let from = local.max(last_word);
                let to = local + src.len();
                if (from..to).any(|pos| src[pos - local] & pad[pos - last_word] != 0) {
                    return Err(BAD_PADDING);
                }
            }
        }
        start = fend;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hashing::hash_item;
    use proptest::prelude::*;

    const LIMIT: u64 = 1 << 24;

    fn u64_at(bytes: &[u8], at: usize) -> u64 {
        Reader::new(&bytes[at..], BAD_DATA).u64().unwrap()
    }

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        Reader::new(&bytes[at..], BAD_DATA).u32().unwrap()
    }

    fn chain(p: f64, capacity: u64, expansion: u32, items: u64) -> Chain {
        chain_of(Layout::Standard, 0, p, capacity, expansion, items)
    }

    fn chain_of(
        layout: Layout,
        seed: u64,
        p: f64,
        capacity: u64,
        expansion: u32,
        items: u64,
    ) -> Chain {
        let mut c = Chain::with_layout(layout, seed, p, capacity, expansion, LIMIT, 0).unwrap();
        for i in 0..items {
            let _ = c.add(&c.hash(&i.to_le_bytes()), LIMIT);
        }
        c
    }

    /// A chain loaded with nearly the most sub-filters a saved one may have grows to that
    /// many and no further, so that whatever it grows to still loads.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn chains_stop_growing_at_the_most_sub_filters_a_value_may_have() {
        use crate::bloom::chain::{ChainError, MAX_SUB_FILTERS};
        let sub = SubParams::Bits(FilterParams::for_capacity(1, 1e-6).unwrap());
        let subs = vec![(sub, 1); MAX_SUB_FILTERS - 1];
        let mut c = Chain::from_parts(7, 0.01, 1, Layout::Standard, &subs, &[]).unwrap();
        let (mut grew, mut refused) = (false, false);
        for i in 0..1_000u64 {
            match c.add(&c.hash(&i.to_le_bytes()), LIMIT) {
                Ok(_) => grew |= c.filters().len() == MAX_SUB_FILTERS,
                Err(e) => {
                    assert_eq!(e, ChainError::MostSubFilters);
                    refused = true;
                    break;
                }
            }
        }
        assert!(grew && refused);
        assert_eq!(c.filters().len(), MAX_SUB_FILTERS);
        assert_eq!(decode(&encode(&c), LIMIT).unwrap(), c);
    }

    #[test]
    fn layout_is_as_documented() {
        // Capacity above sparse::MAX_CAPACITY: bit arrays, version 1.
        let c = chain(0.01, 10_000, 2, 25);
        let bytes = encode(&c);
        assert_eq!(&bytes[0..8], b"LCBF\x01\x01\x00\x00");
        assert_eq!(f64::from_bits(u64_at(&bytes, 8)), 0.01);
        assert_eq!(u32_at(&bytes, 16), 2);
        assert_eq!(u32_at(&bytes, 20), c.filters().len() as u32);
        assert_eq!(u64_at(&bytes, 24), c.items());
        assert_eq!(u64_at(&bytes, 32), 10_000);
        let header = FIXED + PER_FILTER * c.filters().len();
        assert_eq!(bytes.len() as u64, header as u64 + c.data_bytes());
        let mut first = Vec::new();
        c.bit_arrays()
            .next()
            .unwrap()
            .1
            .read_bytes(0, 8, &mut first);
        assert_eq!(bytes[header..header + 8], first);
    }

    #[test]
    fn sparse_sub_filters_are_version_3() {
        // A default filter: one sparse sub-filter, whole in the header.
        let c = chain(0.01, 100, 2, 30);
        assert!(matches!(c.filters()[0], SubParams::Sparse(_)));
        let bytes = encode(&c);
        assert_eq!(&bytes[0..8], b"LCBF\x03\x01\x00\x00");
        let SubParams::Sparse(p) = c.filters()[0] else {
            unreachable!()
        };
        assert_eq!(u64_at(&bytes, 32), 100);
        assert_eq!(u64_at(&bytes, 32 + 16), p.universe);
        assert_eq!(u32_at(&bytes, 32 + 24), 0);
        assert_eq!(u32_at(&bytes, 32 + 28), 1);
        assert_eq!(u64_at(&bytes, 32 + 32), 30);
        let streams = c.sparse_streams().unwrap();
        let stream = &streams[0];
        assert_eq!(bytes.len(), FIXED + PER_FILTER + 8 * stream.len());
        assert_eq!(u64_at(&bytes, FIXED + PER_FILTER), stream[0]);
        assert_eq!(c.data_bytes(), 0);
        assert_eq!(encode_header(&c), bytes);
        assert_eq!(decode(&bytes, LIMIT).unwrap(), c);
        // Smaller than the version 1 encoding of the same filter (72 + 128 bytes).
        assert!(bytes.len() < 72 + 128, "{}", bytes.len());
        let mutate = |at: usize, value: &[u8]| {
            let mut b = bytes.clone();
            b[at..at + value.len()].copy_from_slice(value);
            decode(&b, LIMIT)
        };
        assert!(mutate(4, &[1]).is_err()); // version 1 has no sparse sub-filters
        assert!(mutate(4, &[2]).is_err());
        assert!(mutate(6, &[2]).is_err()); // unknown layout
        assert!(mutate(32 + 28, &[2]).is_err()); // unknown kind
        assert!(mutate(32 + 24, &[1]).is_err()); // hashes of a sparse sub-filter
        assert!(mutate(32, &8193u64.to_le_bytes()).is_err()); // too large to be sparse
        assert!(mutate(32 + 16, &99u64.to_le_bytes()).is_err()); // U below the capacity
        assert!(mutate(32 + 32, &29u64.to_le_bytes()).is_err()); // items vs stream
        let mut short = bytes.clone();
        short.pop();
        assert!(decode(&short, LIMIT).is_err());
        // A blocked chain's small sub-filters are sparse too: version 3, layout 1.
        let b = chain_of(Layout::Blocked, 0, 0.01, 100, 2, 30);
        assert_eq!(&encode(&b)[0..8], b"LCBF\x03\x01\x01\x00");
        assert_eq!(
            decode(&encode(&b), LIMIT).unwrap().layout(),
            Layout::Blocked
        );
        // Version 3 without a sparse sub-filter is not canonical.
        let bits = chain(0.01, 10_000, 0, 5);
        let mut v3 = encode(&bits);
        v3[4] = 3;
        assert!(decode(&v3, LIMIT).is_err());
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_sparse_stream_must_be_its_set() {
        let c = chain(0.001, 2_000, 0, 1_500);
        let good = encode(&c);
        let start = FIXED + PER_FILTER;
        let mut refused = 0;
        for byte in start..good.len() {
            for bit in [0u8, 3, 7] {
                let mut bad = good.clone();
                bad[byte] ^= 1 << bit;
                match decode(&bad, LIMIT) {
                    // Another set of as many values (a low bit that keeps the order).
                    Ok(other) => assert_eq!(encode(&other), bad),
                    Err(e) => {
                        assert_eq!(e, BAD_DATA);
                        refused += 1;
                    }
                }
            }
        }
        assert!(refused > 0);
    }

    /// `c`'s encoding, checked to decode to `c`, and a decoder of it with `value` written at
    /// byte `at`.
    fn mutator(c: &Chain) -> impl Fn(usize, &[u8]) -> Result<Chain, DecodeError> {
        let good = encode(c);
        assert_eq!(&decode(&good, LIMIT).unwrap(), c);
        move |at, value| {
            let mut b = good.clone();
            b[at..at + value.len()].copy_from_slice(value);
            decode(&b, LIMIT)
        }
    }

    #[test]
    fn validation_refuses_bad_headers() {
        let c = chain(0.01, 10_000, 0, 50);
        let good = encode(&c);
        let mutate = mutator(&c);
        assert!(mutate(0, b"X").is_err()); // magic
        assert!(mutate(4, &[2]).is_err()); // version 2 must say blocked
        assert!(mutate(4, &[3]).is_err()); // version 3 must have a sparse sub-filter
        assert!(mutate(4, &[4]).is_err()); // version 4 has a seed before the entries
        assert!(mutate(4, &[5]).is_err()); // unknown encoding version
        assert!(mutate(5, &[9]).is_err()); // hash scheme
        assert!(mutate(6, &[1]).is_err()); // version 1 has no layout byte
        assert!(mutate(7, &[1]).is_err()); // reserved
        assert!(mutate(8, &f64::NAN.to_bits().to_le_bytes()).is_err());
        assert!(mutate(8, &1.0f64.to_bits().to_le_bytes()).is_err());
        assert!(mutate(20, &2u32.to_le_bytes()).is_err()); // count vs length
        assert!(mutate(24, &51u64.to_le_bytes()).is_err()); // items total
        assert!(mutate(32 + 24, &0u32.to_le_bytes()).is_err()); // k = 0
        assert!(mutate(32 + 24, &65u32.to_le_bytes()).is_err()); // k too large
        assert!(mutate(32 + 16, &0u64.to_le_bytes()).is_err()); // m = 0
        assert!(mutate(32 + 28, &1u32.to_le_bytes()).is_err()); // sparse in version 1
        assert!(mutate(32 + 32, &10_001u64.to_le_bytes()).is_err()); // items > capacity
        assert!(decode(&good[..good.len() - 1], LIMIT).is_err());
        let mut longer = good.clone();
        longer.push(0);
        assert!(decode(&longer, LIMIT).is_err());
        assert_eq!(decode(&good, 100).unwrap_err(), TOO_LARGE);
    }

    /// Headers whose parameters no sizing could have written: a sub-filter claiming more
    /// capacity or other hashes than its bits bear, a universe too small for its rate,
    /// sub-filters spending more than the chain's rate, an expansion past 32,768.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn headers_must_describe_filters_that_hold_their_rates() {
        for (capacity, items) in [(10_000, 25_000), (100, 0)] {
            let c = chain(0.01, capacity, 2, items);
            let mutate = mutator(&c);
            assert_eq!(mutate(16, &32_768u32.to_le_bytes()).map(|_| ()), Ok(()));
            assert_eq!(mutate(16, &32_769u32.to_le_bytes()), Err(BAD_DATA));
            assert_eq!(mutate(8, &1e-300f64.to_bits().to_le_bytes()), Err(BAD_DATA));
            let spent = c.filters().iter().map(|f| f.error_rate()).sum::<f64>();
            assert_eq!(
                mutate(8, &spent.to_bits().to_le_bytes()).map(|_| ()),
                Ok(())
            );
            assert_eq!(
                mutate(8, &(spent * 0.99).to_bits().to_le_bytes()),
                Err(BAD_DATA)
            );
            match c.filters()[0] {
                SubParams::Bits(p) => {
                    assert_eq!(mutate(32, &(1u64 << 40).to_le_bytes()), Err(BAD_DATA));
                    assert_eq!(mutate(32 + 24, &1u32.to_le_bytes()), Err(BAD_DATA));
                    assert_eq!(mutate(32 + 24, &64u32.to_le_bytes()), Err(BAD_DATA));
                    // Twice the capacity at this rate: its textbook rate passes twice its own.
                    let doubled = (2 * p.capacity).to_le_bytes();
                    assert_eq!(mutate(32, &doubled), Err(BAD_DATA));
                }
                SubParams::Sparse(p) => {
                    assert_eq!(items, 0, "an empty set, valid under any universe");
                    let at_capacity = p.capacity.to_le_bytes();
                    assert_eq!(mutate(32 + 16, &at_capacity), Err(BAD_DATA));
                    // 0.6 of its universe: 1.67 times its rate, within the margin.
                    let smaller = (p.universe * 3 / 5).to_le_bytes();
                    assert_eq!(mutate(32 + 16, &smaller).map(|_| ()), Ok(()));
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn blocked_chains_are_version_2() {
        let c = chain_of(Layout::Blocked, 0, 0.01, 10_000, 2, 25_000);
        assert!(c.filters().len() > 1);
        let good = encode(&c);
        assert_eq!(&good[0..8], b"LCBF\x02\x01\x01\x00");
        let back = decode(&good, LIMIT).unwrap();
        assert_eq!(back.layout(), Layout::Blocked);
        assert_eq!(back, c);
        for i in 0..25_000u64 {
            assert!(back.contains(&hash_item(&i.to_le_bytes())));
        }
        let mutate = |at: usize, value: &[u8]| {
            let mut b = good.clone();
            b[at..at + value.len()].copy_from_slice(value);
            decode(&b, LIMIT)
        };
        assert!(mutate(4, &[1]).is_err()); // version 1 cannot say blocked
        assert!(mutate(6, &[0]).is_err()); // version 2 with the standard layout
        assert!(mutate(6, &[2]).is_err()); // unknown layout
        let bits = c.bit_params().next().unwrap().bits;
        assert!(mutate(32 + 16, &(bits - 64).to_le_bytes()).is_err()); // not whole blocks
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn seeded_chains_are_version_4() {
        const SEED: u64 = 0x0123_4567_89ab_cdef;
        for (layout, capacity, expansion, items) in [
            (Layout::Standard, 10_000, 2, 25_000), // bit arrays
            (Layout::Blocked, 10_000, 0, 500),
            (Layout::Standard, 100, 2, 30),   // one sparse set
            (Layout::Blocked, 100, 2, 3_000), // sparse sets, then bit arrays
        ] {
            let c = chain_of(layout, SEED, 0.01, capacity, expansion, items);
            let good = encode(&c);
            assert_eq!(
                &good[0..8],
                &[b'L', b'C', b'B', b'F', 4, 1, layout as u8, 0]
            );
            assert_eq!(u64_at(&good, FIXED), SEED);
            assert_eq!(u64_at(&good, FIXED + SEED_BYTES), c.filters()[0].capacity());
            let back = decode(&good, LIMIT).unwrap();
            assert_eq!((back.seed(), &back), (SEED, &c));
            assert_eq!(encode(&back), good);
            assert!((0..items).all(|i| back.contains(&back.hash(&i.to_le_bytes()))));
            // The same filter unseeded: the same rate and expansion, another version.
            let plain = encode_header(&chain_of(layout, 0, 0.01, capacity, expansion, items));
            assert_ne!(plain[4], 4);
            assert_eq!(plain[8..20], good[8..20]);
            let mutate = |at: usize, value: &[u8]| {
                let mut b = good.clone();
                b[at..at + value.len()].copy_from_slice(value);
                decode(&b, LIMIT)
            };
            assert_eq!(mutate(FIXED, &0u64.to_le_bytes()), Err(BAD_DATA)); // seed 0
            assert_eq!(mutate(4, &[plain[4]]), Err(BAD_DATA)); // the seed read as an entry
            assert!(decode(&good[..FIXED + 4], LIMIT).is_err());
            assert!(decode_header(&good[..FIXED + SEED_BYTES], LIMIT).is_err());
        }
        // Seeds change the bits: the same items, another seed, other data.
        let a = encode(&chain_of(Layout::Standard, 1, 0.01, 10_000, 0, 1_000));
        let b = encode(&chain_of(Layout::Standard, 2, 0.01, 10_000, 0, 1_000));
        assert_eq!(a.len(), b.len());
        assert_ne!(a[FIXED + SEED_BYTES..], b[FIXED + SEED_BYTES..]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn padding_bits_must_stay_zero() {
        // 0.5 / 1,000 items: a bit array (a set would be larger) whose last word is partly
        // past m; setting its top bit is refused.
        let mut c = chain(0.5, 1_000, 0, 0);
        let params = *c.bit_params().next().unwrap();
        assert!(params.padding_mask() >> 63 == 1);
        let last = params.bytes() - 1;
        assert_eq!(write_data(&mut c, last, &[0x80]), Err(BAD_PADDING));
        assert_eq!(write_data(&mut c, last + 1, &[0]), Err(BAD_CHUNK));
        assert_eq!(write_data(&mut c, 0, &[]), Err(BAD_CHUNK));
        assert_eq!(write_data(&mut c, u64::MAX, &[1]), Err(BAD_CHUNK));
        assert!(write_data(&mut c, 0, &[1]).is_ok());
        let mut first = Vec::new();
        c.bit_arrays()
            .next()
            .unwrap()
            .1
            .read_bytes(0, 1, &mut first);
        assert_eq!(first, [1]);
        // A filter of sparse sub-filters has no data to write.
        let mut s = chain(0.01, 100, 2, 10);
        assert_eq!(write_data(&mut s, 0, &[1]), Err(BAD_CHUNK));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn padding_is_checked_in_every_chunk_that_reaches_it() {
        // Chunks of every length starting in the last two words, all bytes 0xff: refused
        // exactly when one of their bytes lies on a padding bit, the rule byte by byte.
        let mut c = chain(0.5, 1_000, 0, 0);
        let params = *c.bit_params().next().unwrap();
        let (bytes, pad) = (params.bytes(), params.padding_mask().to_le_bytes());
        for start in bytes - 16..bytes {
            for len in 1..=bytes - start {
                let on_padding = (start..start + len)
                    .any(|pos| pos >= bytes - 8 && pad[(pos - (bytes - 8)) as usize] != 0);
                let result = write_data(&mut c, start, &vec![0xff; len as usize]);
                assert_eq!(result.is_err(), on_padding, "{start}+{len}");
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn chunks_cover_the_data_in_order() {
        let c = chain(0.001, 100_000, 2, 150_000);
        assert_eq!(c.filters().len(), 2);
        let mut copy = decode_header(&encode_header(&c), LIMIT)
            .unwrap()
            .into_chain()
            .unwrap();
        // Odd-sized pieces that straddle words and the boundary between the filters.
        let sizes = [1usize, 3, 8, 13, 4096, 100_003];
        let mut offset = 0u64;
        let mut n = 0;
        while let Some(chunk) = data_chunk(&c, offset) {
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                let take = sizes[n % sizes.len()].min(rest.len());
                n += 1;
                write_data(&mut copy, offset, &rest[..take]).unwrap();
                offset += take as u64;
                rest = &rest[take..];
            }
        }
        assert_eq!(offset, c.data_bytes());
        assert_eq!(copy, c);
        assert_eq!(encode(&copy), encode(&c));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn saves_write_each_allocation_whole_and_loads_keep_them() {
        // Unit tests hold bit arrays of more than 64 words (512 bytes) in segments, with a
        // head (`words.rs`). Chains of a small array then segmented ones, and of segmented
        // ones only.
        for (p, capacity, items, small_first) in [
            (0.5, 500u64, 100_000u64, true),
            (0.01, 20_000, 70_000, false),
        ] {
            let c = chain(p, capacity, 2, items);
            let arrays: Vec<(u64, bool)> = c
                .bit_arrays()
                .map(|(p, bits)| (p.bytes(), bits.is_segmented()))
                .collect();
            assert!(arrays.iter().filter(|a| a.1).count() >= 2, "{arrays:?}");
            assert_eq!(!arrays[0].1, small_first, "{arrays:?}");
            let mut copy = decode_header(&encode_header(&c), LIMIT)
                .unwrap()
                .into_chain()
                .unwrap();
            let (mut offset, mut data) = (0u64, Vec::new());
            let (mut adopted, mut in_segmented) = (0, 0);
            while let Some(chunk) = saved_chunk(&c, offset) {
                let len = chunk.len();
                // The array this chunk starts in; a chunk never runs past a segmented one.
                let (mut start, mut array) = (0u64, arrays[0]);
                for &a in &arrays {
                    array = a;
                    if offset < start + a.0 {
                        break;
                    }
                    start += a.0;
                }
                if array.1 {
                    in_segmented += 1;
                    assert!(offset + len as u64 <= start + array.0);
                }
                let layout = std::alloc::Layout::from_size_align(len, 8).unwrap();
                // SAFETY: a non-zero layout; the block is filled before it is read.
                let block = NonNull::new(unsafe { std::alloc::alloc(layout) }).unwrap();
                // SAFETY: len bytes into a block of len bytes.
                unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), block.as_ptr(), len) };
                // SAFETY: a block of the global allocator with u64 alignment, handed over.
                match unsafe { adopt_data(&mut copy, offset, block, len) } {
                    Ok(()) => adopted += u32::from(array.1),
                    Err(block) => {
                        write_data(&mut copy, offset, &chunk).unwrap();
                        // SAFETY: handed back unused; allocated above with this layout.
                        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
                    }
                }
                data.extend_from_slice(&chunk);
                offset += len as u64;
            }
            // Every allocation of every segmented array was one chunk, and was kept as it is:
            // the head and the segments after it, fewer than a segment an allocation. (A
            // small array saved whole is kept too.)
            assert_eq!(adopted, in_segmented, "{arrays:?}");
            let segments: u64 = arrays
                .iter()
                .filter(|a| a.1)
                .map(|a| a.0.div_ceil(512))
                .sum();
            assert!(
                u64::from(in_segmented) < segments,
                "{in_segmented} {segments}"
            );
            assert_eq!(offset, c.data_bytes());
            assert_eq!(&encode(&c)[encode_header(&c).len()..], &data[..]);
            assert_eq!(copy, c);
        }
        // A chain without segmented arrays saves `data_chunk`'s chunks.
        let c = chain(0.5, 1000, 1, 5000);
        assert!(c.bit_arrays().count() >= 1);
        assert!(c.bit_arrays().all(|(_, bits)| !bits.is_segmented()));
        assert_eq!(saved_chunk(&c, 0), data_chunk(&c, 0));
        assert_eq!(saved_chunk(&c, 0).unwrap().len() as u64, c.data_bytes());
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn segmented_bit_arrays_encode_as_one_slice() {
        // Unit tests hold bit arrays above 512 bytes in segments (`words.rs`): the data are the
        // bits of the same probes on one slice.
        use crate::bloom::{blocked, words::SEGMENT_BYTES};
        use crate::core::hashing::reduce;
        for layout in [Layout::Standard, Layout::Blocked] {
            let mut c = Chain::with_layout(layout, 0, 0.01, 20_000, 0, LIMIT, 0).unwrap();
            let p = *c.bit_params().next().unwrap();
            assert!(p.bytes() > 40 * SEGMENT_BYTES as u64, "{}", p.bytes());
            let mut slice = vec![0u64; p.words() as usize];
            for i in 0..5_000u64 {
                let h = hash_item(&i.to_le_bytes());
                let new = match layout {
                    Layout::Standard => (0..p.hashes).fold(false, |new, k| {
                        let bit = reduce(h.probe(k), p.bits);
                        let word = &mut slice[(bit / 64) as usize];
                        let was = *word;
                        *word |= 1 << (bit % 64);
                        new | (was != *word)
                    }),
                    Layout::Blocked => blocked::set(&mut slice[..], &h, p.hashes),
                };
                assert_eq!(c.add(&h, LIMIT), Ok(new));
            }
            let bytes = encode(&c);
            let data = &bytes[bytes.len() - p.bytes() as usize..];
            let expected: Vec<u8> = slice.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert!(data == &expected[..], "{layout:?}");
            // Loaded back in pieces ending around segment ends, and read back across them.
            let mut copy = decode_header(&encode_header(&c), LIMIT)
                .unwrap()
                .into_chain()
                .unwrap();
            let mut at = 0;
            for (n, end) in (1..).map(|s| s * SEGMENT_BYTES).enumerate() {
                let end = (end + n % 11).saturating_sub(5).min(data.len());
                write_data(&mut copy, at as u64, &data[at..end]).unwrap();
                at = end;
                if at == data.len() {
                    break;
                }
            }
            assert_eq!(copy, c);
            let seam = 7 * SEGMENT_BYTES;
            assert!(data_chunk(&copy, seam as u64 - 3).unwrap()[..6] == data[seam - 3..seam + 3]);
        }
    }

    fn arb_chain() -> impl Strategy<Value = Chain> {
        (
            prop::sample::select(vec![Layout::Standard, Layout::Blocked]),
            prop_oneof![Just(0u64), any::<u64>()],
            prop::sample::select(vec![0.5, 0.1, 0.01, 0.001]),
            1u64..60,
            0u32..4,
            0u64..400,
        )
            .prop_map(|(layout, seed, p, cap, exp, items)| {
                chain_of(layout, seed, p, cap, exp, items)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn round_trip(c in arb_chain()) {
            let bytes = encode(&c);
            let back = decode(&bytes, LIMIT).unwrap();
            prop_assert_eq!(&back, &c);
            prop_assert_eq!(encode(&back), bytes);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(c) = decode(&bytes, LIMIT) {
                prop_assert_eq!(encode(&c), bytes);
            }
        }

        #[test]
        fn mutations_never_panic(
            c in arb_chain(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let mut bytes = encode(&c);
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            if truncate {
                bytes.truncate(cut.index(bytes.len()));
            }
            if let Ok(back) = decode(&bytes, LIMIT) {
                prop_assert_eq!(encode(&back), bytes);
            }
        }

        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn mutated_headers_never_panic(
            c in arb_chain(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut bytes = encode_header(&c);
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            if let Ok(header) = decode_header(&bytes, LIMIT) {
                prop_assert_eq!(encode_header(&header.into_chain().unwrap()), bytes);
            }
        }

        /// `BF.LOADCHUNK` after a valid header: chunks at any offset, of any content.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn chunks_anywhere_never_panic(
            c in arb_chain(),
            chunks in prop::collection::vec(
                (any::<u64>(), any::<bool>(), prop::collection::vec(any::<u8>(), 0..80)),
                1..8,
            ),
        ) {
            let mut copy = decode_header(&encode_header(&c), LIMIT).unwrap().into_chain().unwrap();
            let total = c.data_bytes();
            for (offset, near, bytes) in chunks {
                let offset = if near { offset % (total + 8) } else { offset };
                let before = copy.clone();
                if write_data(&mut copy, offset, &bytes).is_err() {
                    prop_assert_eq!(&copy, &before);
                }
            }
            prop_assert_eq!(decode(&encode(&copy), LIMIT).unwrap(), copy);
        }
    }
}
