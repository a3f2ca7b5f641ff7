//! The encoding of a windowed filter (pure), shared by RDB, `DUMP`, `BF.SCANDUMP`/`BF.LOADCHUNK`
//! and the AOF rewrite: a header, then the data in chunks of at most `CHUNK_BYTES`.
//!
//! All integers are little-endian; rates are IEEE-754 doubles (their exact bits). The value
//! is written as it stands at its time T (slot s = ⌊T / slot_ms⌋): generations that slid out
//! and layers with nothing live (but the newest) are left out, so two filters that answer
//! alike at T encode alike, however far each had swept.
//!
//! Header (56 + 176·L bytes; 64 + 176·L in version 2):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `LCBW` |
//! | 4 | 1 | encoding version, 1 or 2 (see below) |
//! | 5 | 1 | hash scheme (`hashing::HASH_SCHEME`, 1) |
//! | 6 | 1 | slots per window (`partition::SLOTS`, 4) |
//! | 7 | 1 | reserved, zero |
//! | 8 | 8 | window, ms: whole seconds, at most `MAX_WINDOW_SECS` of them |
//! | 16 | 8 | requested error rate p, in (0, 1) |
//! | 24 | 8 | capacity: items per window, 1..=2^50 |
//! | 32 | 4 | expansion (0: non-scaling, then L = 1) |
//! | 36 | 4 | L: layers, 1..=`MAX_LAYERS` |
//! | 40 | 8 | time T, ms, ≤ `MAX_TIME` |
//! | 48 | 8 | bytes of data that follow |
//! | 56 | 8 | version 2 only: the hash seed (`hashing.rs`), not 0; the layers below then start at 64, not 56 |
//! | 56 + 176i | 8 | layer i (oldest first): its capacity |
//! | +8 | 8 | its error rate, ≥ `MIN_ERROR_RATE`; the layers' rates sum to ≤ p |
//! | +16 | 160 | per slot s − 4 … s, its refreshed counts (4 × u64, `layer.rs`) |
//!
//! A layer's partitions P and universe u follow from its capacity and rate (`LayerParams`).
//! Data: for each layer, for each of its P partitions, a record: the item counts of its
//! generations of slots s − 4 … s (5 × u32), then their Elias–Fano streams (`ef.rs`), each
//! ⌈bits/64⌉ u64 words, bits past its end zero. A layer's per-slot item counts are its
//! partitions' sums. Chunks cut the data anywhere (at record ends when they can).
//!
//! Versions:
//! * 1: an unseeded filter (its items hashed under seed 0).
//! * 2: a seeded filter (a seed of its own, not 0), the seed after the fixed fields. A filter
//!   of seed 0 is written as version 1, so a value written before seeds existed re-encodes to
//!   the same bytes; a version 2 value with seed 0 is refused as non-canonical.
//!
//! Decoding validates before allocating: magic, versions, seed, slots, reserved byte, window,
//! finite rates, capacities (each layer's the filter's times a power of its expansion, rising
//! from layer to layer), the rates' sum, each slot's refreshed counts (their sum at most the
//! layer's budget), the exact header length, the data length against
//! the records' minimum and the caller's memory limit. Each record is checked whole (counts,
//! stream lengths, every set strictly increasing and below u, canonical padding) before it
//! replaces its partition, and the data must end with the last partition's record; a chunk
//! is applied whole or not at all.

use super::filter::{WindowFilter, WindowParams, MAX_LAYERS, MAX_TIME};
use super::layer::{Layer, LayerParams};
use super::partition::{self, Partition, GENS, SLOTS};
use crate::bloom::budget::MAX_EXPANSION;
use crate::bloom::filter::MIN_ERROR_RATE;
use crate::core::alloc::size_class;
use crate::core::chunks::{Reader, Writer};
use crate::core::decode::DecodeError;
use crate::core::defrag::Defrag;
use crate::core::hashing::HASH_SCHEME;

pub const MAGIC: &[u8; 4] = b"LCBW";
const TOO_LARGE: &str = "value larger than max-memory-per-key";
/// The newest encoding version (see "Versions" above).
pub const ENCODING_VERSION: u8 = 2;
pub use crate::core::chunks::CHUNK_BYTES;
/// Largest capacity (`config::MAX_CAPACITY`).
const MAX_CAPACITY: u64 = 1 << 50;
const FIXED: usize = 56;
/// The seed after the fixed fields (version 2).
const SEED_BYTES: usize = 8;
const PER_LAYER: usize = 16 + GENS * SLOTS * 8;
const RECORD_COUNTS: usize = GENS * 4;

fn err(why: &'static str) -> DecodeError {
    DecodeError(why)
}

/// The slot the encoding is written at.
fn slot(filter: &WindowFilter) -> u64 {
    filter.time() / filter.params().slot_ms()
}

/// The layers the encoding holds: those with live items at the filter's time, and the newest.
fn encoded_layers(filter: &WindowFilter) -> impl Iterator<Item = &Layer> {
    let (s, last) = (slot(filter), filter.layers().len() - 1);
    filter
        .layers()
        .iter()
        .enumerate()
        .filter(move |(i, l)| *i == last || l.live_items(s) > 0)
        .map(|(_, l)| l)
}

/// Bytes of a partition's record.
fn record_bytes(part: &Partition, s: u64, universe: u64) -> u64 {
    (RECORD_COUNTS + 8 * part.view_at(s, universe).1.len()) as u64
}

/// Bytes of data after the header.
pub fn data_bytes(filter: &WindowFilter) -> u64 {
    let s = slot(filter);
    encoded_layers(filter)
        .flat_map(|l| {
            let u = l.params().universe;
            l.parts().iter().map(move |p| record_bytes(p, s, u))
        })
        .sum()
}

pub fn encode_header(filter: &WindowFilter) -> Vec<u8> {
    let p = filter.params();
    let layers: Vec<&Layer> = encoded_layers(filter).collect();
    let mut out = Vec::with_capacity(FIXED + SEED_BYTES + PER_LAYER * layers.len());
    out.extend_from_slice(MAGIC);
    let version = if p.seed != 0 { 2 } else { 1 };
    out.extend_from_slice(&[version, HASH_SCHEME, SLOTS as u8, 0]);
    out.put_u64(p.window_ms());
    out.put_f64(p.error_rate);
    out.put_u64(p.capacity);
    out.put_u32(p.expansion);
    out.put_u32(layers.len() as u32);
    out.put_u64(filter.time());
    out.put_u64(data_bytes(filter));
    if p.seed != 0 {
        out.put_u64(p.seed);
    }
    let s = slot(filter);
    for l in layers {
        out.put_u64(l.params().capacity);
        out.put_f64(l.params().error_rate);
        for c in l.counts_at(s) {
            c.refreshed.iter().for_each(|&r| out.put_u64(r));
        }
    }
    out
}

/// Appends a partition's record.
fn write_record(part: &Partition, s: u64, universe: u64, out: &mut Vec<u8>) {
    let (counts, words) = part.view_at(s, universe);
    counts.iter().for_each(|&c| out.put_u32(c));
    words.iter().for_each(|&w| out.put_u64(w));
}

/// The data chunk starting at byte `offset`, None at or past the end. It ends at the last
/// record end within `CHUNK_BYTES`, or is cut at `CHUNK_BYTES` if a record alone is longer.
pub fn data_chunk(filter: &WindowFilter, offset: u64) -> Option<Vec<u8>> {
    let s = slot(filter);
    let limit = offset.checked_add(CHUNK_BYTES)?;
    let (mut start, mut out) = (0u64, Vec::new());
    let mut cut = None;
    'layers: for l in encoded_layers(filter) {
        let u = l.params().universe;
        for part in l.parts() {
            let len = record_bytes(part, s, u);
            let end = start + len;
            if end > offset {
                if end > limit && !out.is_empty() {
                    break 'layers;
                }
                let mut record = Vec::with_capacity(len as usize);
                write_record(part, s, u, &mut record);
                let from = offset.saturating_sub(start) as usize;
                out.extend_from_slice(&record[from..]);
                if end >= limit {
                    cut = Some((limit - offset) as usize);
                    break 'layers;
                }
            }
            start = end;
        }
    }
    if let Some(cut) = cut {
        out.truncate(cut);
    }
    (!out.is_empty()).then_some(out)
}

/// The whole data, in chunks (`emit(end_offset, chunk)`).
pub fn for_each_chunk(filter: &WindowFilter, mut emit: impl FnMut(u64, &[u8])) {
    let mut offset = 0u64;
    while let Some(chunk) = data_chunk(filter, offset) {
        offset += chunk.len() as u64;
        emit(offset, &chunk);
    }
}

/// A filter being loaded: made from its header, its partitions empty until their records
/// arrive in order.
#[derive(Debug, PartialEq)]
pub struct Loading {
    /// The header as it arrived: what a save in the middle of the load writes again, since
    /// the filter's own header would leave out the layers whose records have not arrived.
    header: Vec<u8>,
    total: u64,
    /// Bytes of data received, those in `pending` included.
    received: u64,
    /// The next record's layer and partition.
    layer: usize,
    part: usize,
    /// Bytes of a record not yet complete.
    pending: Vec<u8>,
    /// The most bytes the filter may take.
    limit: u64,
}

impl Loading {
    pub fn is_complete(&self) -> bool {
        self.received == self.total
    }

    /// Where the next chunk must start.
    pub fn received(&self) -> u64 {
        self.received
    }

    pub fn header(&self) -> &[u8] {
        &self.header
    }

    pub fn memory_bytes(&self) -> u64 {
        size_class(self.header.capacity() as u64) + size_class(self.pending.capacity() as u64)
    }

    /// Visits its blocks: the header, then the pending bytes.
    pub fn defrag(&mut self, d: &mut Defrag) {
        d.vec(&mut self.header);
        d.vec(&mut self.pending);
    }

    /// A copy, or None if the memory could not be had.
    pub fn try_clone(&self) -> Option<Self> {
        let copy = |bytes: &[u8]| {
            let mut out = Vec::new();
            out.try_reserve_exact(bytes.len()).ok()?;
            out.extend_from_slice(bytes);
            Some(out)
        };
        Some(Self {
            header: copy(&self.header)?,
            pending: copy(&self.pending)?,
            ..*self
        })
    }
}

/// The data a filter being loaded has received, in chunks (`emit(end_offset, chunk)`): the
/// records of the partitions loaded (as they arrived: the filter's time does not move while
/// it loads), then the bytes of the record still incomplete. With `Loading::header` first,
/// it loads into the same state.
pub fn for_each_received_chunk(
    filter: &WindowFilter,
    loading: &Loading,
    mut emit: impl FnMut(u64, &[u8]),
) {
    let s = slot(filter);
    let (mut offset, mut out) = (0u64, Vec::new());
    let mut flush = |out: &mut Vec<u8>| {
        if !out.is_empty() {
            offset += out.len() as u64;
            emit(offset, out);
            out.clear();
        }
    };
    let loaded = filter.layers().iter().enumerate().flat_map(|(i, l)| {
        let parts = match i.cmp(&loading.layer) {
            std::cmp::Ordering::Less => l.parts().len(),
            std::cmp::Ordering::Equal => loading.part,
            std::cmp::Ordering::Greater => 0,
        };
        l.parts()[..parts].iter().map(|p| (p, l.params().universe))
    });
    for (part, u) in loaded {
        if out.len() as u64 + record_bytes(part, s, u) > CHUNK_BYTES {
            flush(&mut out);
        }
        write_record(part, s, u, &mut out);
    }
    if out.len() + loading.pending.len() > CHUNK_BYTES as usize {
        flush(&mut out);
    }
    out.extend_from_slice(&loading.pending);
    flush(&mut out);
}

/// The received data from byte `offset` on, to the end of the chunk of
/// [`for_each_received_chunk`] holding it; None past the end. Each call encodes what was
/// received up to there, which only a `BF.SCANDUMP` of a value still loading pays.
pub fn received_chunk(filter: &WindowFilter, loading: &Loading, offset: u64) -> Option<Vec<u8>> {
    let mut found = None;
    for_each_received_chunk(filter, loading, |end, chunk| {
        let start = end - chunk.len() as u64;
        if found.is_none() && (start..end).contains(&offset) {
            found = Some(chunk[(offset - start) as usize..].to_vec());
        }
    });
    found
}

/// How many times a layer of `capacity` grew from the filter's first (capacity × expansion^j),
/// if after a layer that grew `before` times: later layers grew more (expansion 1: as many),
/// as `WindowFilter::scale` makes them. None if no filter of `params` has such a layer.
fn growth(params: &WindowParams, capacity: u64, before: Option<u32>) -> Option<u32> {
    let (mut c, mut j) = (params.capacity, 0);
    while c < capacity && params.expansion > 1 {
        c = c.checked_mul(u64::from(params.expansion))?;
        j += 1;
    }
    let after = match before {
        None => true,
        Some(b) => j > b || (params.expansion <= 1 && j == b),
    };
    (c == capacity && after).then_some(j)
}

/// Decodes a header: the filter it describes (time and parameters, empty partitions) and
/// the state that loads its data. `limit` bounds the bytes the filter may take.
pub fn decode_header(bytes: &[u8], limit: u64) -> Result<(WindowFilter, Loading), DecodeError> {
    if bytes.len() < FIXED || &bytes[..4] != MAGIC {
        return Err(err("not a windowed filter"));
    }
    if !(1..=ENCODING_VERSION).contains(&bytes[4]) || bytes[5] != HASH_SCHEME {
        return Err(err("unknown encoding or hash version"));
    }
    let seeded = bytes[4] == 2;
    if bytes[6] as usize != SLOTS || bytes[7] != 0 {
        return Err(err("bad slots or reserved byte"));
    }
    let mut r = Reader::new(&bytes[8..], err("short header"));
    let (window_ms, error_rate, capacity, expansion) = (r.u64()?, r.f64()?, r.u64()?, r.u32()?);
    let count = r.u32()? as usize;
    let (time, total) = (r.u64()?, r.u64()?);
    let seed = if seeded { r.u64()? } else { 0 };
    // Seed 0 is written as version 1: one encoding per value.
    if seeded && seed == 0 {
        return Err(err("bad seed"));
    }
    if !WindowParams::valid_window(window_ms) {
        return Err(err("bad window"));
    }
    let params = WindowParams {
        window_secs: (window_ms / 1000) as u32,
        error_rate,
        capacity,
        expansion,
        seed,
    };
    if !(params.error_rate > 0.0 && params.error_rate < 1.0) {
        return Err(err("bad error rate"));
    }
    if !(1..=MAX_CAPACITY).contains(&params.capacity) || params.expansion > MAX_EXPANSION {
        return Err(err("bad capacity or expansion"));
    }
    if !(1..=MAX_LAYERS).contains(&count) || (params.expansion == 0 && count != 1) {
        return Err(err("bad layer count"));
    }
    let fixed = FIXED + if seeded { SEED_BYTES } else { 0 };
    if bytes.len() != fixed + PER_LAYER * count || time > MAX_TIME {
        return Err(err("bad header length or time"));
    }
    let s = time / params.slot_ms();
    let mut specs = Vec::with_capacity(count);
    let (mut rates, mut min_data, mut planned) = (0.0, 0u64, 0u64);
    let mut grown = None;
    for _ in 0..count {
        let (capacity, rate) = (r.u64()?, r.f64()?);
        if !(1..=MAX_CAPACITY).contains(&capacity) || !(MIN_ERROR_RATE..1.0).contains(&rate) {
            return Err(err("bad layer"));
        }
        grown = Some(growth(&params, capacity, grown).ok_or(err("bad layer capacity"))?);
        let lp = LayerParams::new(capacity, rate).ok_or(err("bad layer"))?;
        let mut refreshed = [[0u64; SLOTS]; GENS];
        for v in refreshed.iter_mut().flatten() {
            *v = r.u64()?;
        }
        // A slot's refreshes are adds stored in it, and a layer holds at most its budget.
        let sums = refreshed.map(|g| g.iter().try_fold(0u64, |s, &v| s.checked_add(v)));
        if sums.iter().any(|s| s.is_none_or(|s| s > lp.budget())) {
            return Err(err("bad refreshed counts"));
        }
        rates += rate;
        min_data = min_data.saturating_add(lp.partitions() * RECORD_COUNTS as u64);
        planned = planned.saturating_add(lp.parts_bytes() + Layer::refreshed_bytes(&refreshed));
        specs.push((lp, refreshed));
    }
    if rates > params.error_rate * (1.0 + 1e-9) {
        return Err(err("layer rates exceed the error rate"));
    }
    if total < min_data || !total.is_multiple_of(4) {
        return Err(err("bad data length"));
    }
    // The words are what the data holds beyond the counts; the layers' list is an
    // allocation too. Each chunk is checked again by what it allocates.
    let planned = planned.saturating_add(WindowFilter::layers_bytes(count));
    if planned.saturating_add(total - min_data) > limit {
        return Err(err(TOO_LARGE));
    }
    let mut layers = Vec::with_capacity(count);
    for (lp, refreshed) in specs {
        let mut parts = Vec::new();
        parts
            .try_reserve_exact(lp.partitions() as usize)
            .map_err(|_| err("out of memory"))?;
        parts.resize_with(lp.partitions() as usize, || {
            Partition::from_parts(s, [0; GENS], Vec::new())
        });
        layers.push(Layer::from_parts(lp, s, refreshed, parts).ok_or(err("out of memory"))?);
    }
    let mut header = Vec::new();
    header
        .try_reserve_exact(bytes.len())
        .map_err(|_| err("out of memory"))?;
    header.extend_from_slice(bytes);
    let loading = Loading {
        header,
        total,
        received: 0,
        layer: 0,
        part: 0,
        pending: Vec::new(),
        limit,
    };
    Ok((WindowFilter::from_parts(params, time, layers), loading))
}

/// Applies the data chunk that starts at byte `start`: whole or not at all.
pub fn load_chunk(
    filter: &mut WindowFilter,
    loading: &mut Loading,
    start: u64,
    chunk: &[u8],
) -> Result<(), DecodeError> {
    if start != loading.received || chunk.is_empty() {
        return Err(err("chunk out of order"));
    }
    let end = start
        .checked_add(chunk.len() as u64)
        .filter(|&e| e <= loading.total)
        .ok_or(err("chunk past the data's end"))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(loading.pending.len() + chunk.len())
        .map_err(|_| err("out of memory"))?;
    bytes.extend_from_slice(&loading.pending);
    bytes.extend_from_slice(chunk);
    let s = slot(filter);
    let (mut layer, mut part, mut at) = (loading.layer, loading.part, 0usize);
    let mut records = Vec::new();
    while bytes.len() - at >= RECORD_COUNTS {
        let l = filter
            .layers()
            .get(layer)
            .ok_or(err("data past the last layer"))?;
        let u = l.params().universe;
        let mut r = Reader::new(&bytes[at..], err("short record"));
        let mut counts = [0u32; GENS];
        for c in &mut counts {
            *c = r.u32()?;
        }
        let words: u64 = counts
            .iter()
            .map(|&c| partition::stream_words(c.min(u.min(u32::MAX as u64) as u32), u) as u64)
            .sum();
        let len = (RECORD_COUNTS as u64).saturating_add(words.saturating_mul(8));
        if (at as u64).saturating_add(len) > bytes.len() as u64 {
            // Incomplete: it must still fit in the data.
            if end - (bytes.len() - at) as u64 + len > loading.total {
                return Err(err("record past the data's end"));
            }
            break;
        }
        let mut w = Vec::new();
        w.try_reserve_exact(words as usize)
            .map_err(|_| err("out of memory"))?;
        for _ in 0..words {
            w.push(r.u64()?);
        }
        partition::validate(&counts, &w, u).map_err(err)?;
        records.push((layer, part, Partition::from_parts(s, counts, w)));
        at = bytes.len() - r.remaining();
        part += 1;
        if part == l.parts().len() {
            (layer, part) = (layer + 1, 0);
        }
    }
    if end == loading.total && at != bytes.len() {
        return Err(err("data ends inside a record"));
    }
    if end == loading.total && layer != filter.layers().len() {
        return Err(err("data ends before its last record"));
    }
    // Each record's words are an allocation of their own, in its size class: what the
    // header's check could not know. (The loading state itself goes when the load ends.)
    let adding: u64 = records.iter().map(|(_, _, r)| r.memory_bytes()).sum();
    if filter.memory_bytes().saturating_add(adding) > loading.limit {
        return Err(err(TOO_LARGE));
    }
    for (layer, part, record) in records {
        filter.layers_mut()[layer].replace_part(part, record);
    }
    bytes.drain(..at);
    bytes.shrink_to_fit();
    loading.pending = bytes;
    (loading.layer, loading.part, loading.received) = (layer, part, end);
    Ok(())
}

/// Decodes a whole value given as its header and its data chunks in order.
pub fn decode<'a>(
    header: &[u8],
    chunks: impl IntoIterator<Item = &'a [u8]>,
    limit: u64,
) -> Result<WindowFilter, DecodeError> {
    let (mut filter, mut loading) = decode_header(header, limit)?;
    for chunk in chunks {
        let start = loading.received;
        load_chunk(&mut filter, &mut loading, start, chunk)?;
    }
    if !loading.is_complete() {
        return Err(err("data incomplete"));
    }
    Ok(filter)
}
