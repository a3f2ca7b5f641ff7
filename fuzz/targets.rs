//! The decoder checks shared by the `cargo fuzz` targets (`fuzz_targets/*.rs`) and the stable
//! fuzz driver (`tests/it/fuzz_stable.rs`, run by `make test`, and by `make fuzz` where no nightly
//! toolchain is available). Each takes arbitrary bytes and panics only on a real bug: a decoder
//! that panics, or a value that decodes but does not re-encode to the same bytes.
#![allow(dead_code)]

use lcbloom::bloom::codec as bf;
use lcbloom::lc::codec as lc;
use lcbloom::lc::counter::Counter;

/// The byte budget given to decoders: large enough for every interesting shape, small enough
/// that a hostile header cannot make a fuzzing run allocate much.
pub const LIMIT: u64 = 1 << 22;

/// An RDB / DUMP value of a Bloom filter (header then data).
pub fn bf_value(data: &[u8]) {
    if let Ok(mut chain) = bf::decode(data, LIMIT) {
        assert_eq!(
            bf::encode(&chain),
            data,
            "a decoded filter re-encodes identically"
        );
        // A decoded filter must be usable: lookups, adds and scaling within the limit.
        for i in 0..4u32 {
            let h = chain.hash(&i.to_le_bytes());
            let _ = chain.contains(&h);
            let _ = chain.add(&h, LIMIT);
        }
        let again = bf::encode(&chain);
        assert_eq!(bf::decode(&again, u64::MAX).as_ref(), Ok(&chain));
    }
}

/// A `BF.LOADCHUNK` session: a header (length in the first two bytes), then chunks, each a
/// 4-byte little-endian offset, a 2-byte length and that many bytes (truncated at the end).
pub fn bf_loadchunk(data: &[u8]) {
    let Some((header, records)) = session(data) else {
        return;
    };
    let Ok(header) = bf::decode_header(header, LIMIT) else {
        return;
    };
    let total = header.data_bytes();
    let Ok(mut chain) = header.into_chain() else {
        return;
    };
    for (field, chunk) in records {
        let offset = u32::from_le_bytes(field) as u64;
        // A copy, not an encoding: encoding the sparse sub-filters for every chunk took most
        // of a run.
        let before = chain.clone();
        match bf::write_data(&mut chain, offset, chunk) {
            Ok(()) => assert!(offset + chunk.len() as u64 <= total),
            Err(_) => assert_eq!(chain, before, "a refused chunk changes nothing"),
        }
    }
    let bytes = bf::encode(&chain);
    assert_eq!(bf::decode(&bytes, u64::MAX).as_ref(), Ok(&chain));
}

/// An RDB / DUMP / `LC.LOADCHUNK` value of a linear counter, of any encoding version.
pub fn lc_value(data: &[u8]) {
    if let Ok(mut counter) = lc::decode(data, LIMIT) {
        let bytes = lc::encode(&counter);
        // A list of no tokens loads as the empty counter, whose encoding is the exact one.
        if data[0] == lc::ENCODING_VERSION && !counter.holds_nothing() {
            assert_eq!(bytes, data, "a decoded counter re-encodes identically");
        } else {
            // An older version loads as the state its items give now.
            assert_eq!(lc::decode(&bytes, u64::MAX).as_ref(), Ok(&counter));
        }
        let _ = (counter.mode(), counter.memory_bytes());
        check_reports(&counter);
        let copy = counter.clone();
        let _ = Counter::union_count(&[&copy, &counter]);
        // Nine copies of a long token list take the many-key path (straight to registers).
        let _ = Counter::union_count(&[&counter; 9]);
        // Beside a counter of the smallest precision, registers keep their own
        // (lc/precisions.rs).
        let coarsest = Counter::reserve(0.3, 1, LIMIT).expect("a valid counter");
        let _ = Counter::union_count(&[&coarsest, &counter, &copy]);
        for (mut union, other) in [(copy.clone(), &counter), (coarsest, &counter)] {
            if union.absorb(other).is_ok() {
                let bytes = lc::encode(&union);
                assert_eq!(
                    lc::decode(&bytes, u64::MAX).as_ref(),
                    Ok(&union),
                    "a union loads"
                );
                check_reports(&union);
            }
        }
        for i in 0..4u32 {
            let _ = counter.add(&i.to_le_bytes());
        }
        check_reports(&counter);
        let again = lc::encode(&counter);
        assert_eq!(lc::decode(&again, u64::MAX).as_ref(), Ok(&counter));
    }
}

/// What a counter reports must be possible: a standard error finite and not negative, and a
/// count at least the bits or indicators it knows set (less the rounding a sketch's running
/// estimate is allowed, lc/running.rs "Bounds").
fn check_reports(counter: &Counter) {
    let (count, set, error) = (
        counter.count(),
        counter.bits_set(),
        counter.standard_error(),
    );
    assert!(error.is_finite() && error >= 0.0, "standard error {error}");
    assert!(
        count as f64 >= set as f64 * (1.0 - 1e-6) - 0.5,
        "count {count} with {set} set"
    );
}

/// An AOF rewrite's chunked form of a counter, in the format of `bf_loadchunk`: a header
/// (`LC.LOADCHUNK key <encoding>`), then pieces of the bitmap, each a 4-byte little-endian byte
/// offset, a 2-byte length and that many bytes. Refused pieces change nothing.
pub fn lc_loadchunk(data: &[u8]) {
    let Some((header, records)) = session(data) else {
        return;
    };
    let Ok(mut counter) = lc::decode(header, LIMIT) else {
        return;
    };
    for (field, piece) in records {
        let offset = u32::from_le_bytes(field) as u64;
        let before = counter.clone();
        match lc::write_dense(&mut counter, offset, piece, LIMIT) {
            Ok(()) => assert!(offset + piece.len() as u64 <= counter.bits().div_ceil(8)),
            Err(_) => assert_eq!(counter, before, "a refused piece changes nothing"),
        }
    }
    let bytes = lc::encode(&counter);
    let back = lc::decode(&bytes, u64::MAX).expect("a rebuilt counter decodes");
    assert_eq!(lc::encode(&back), bytes);
    assert_eq!(back.count(), counter.count());
}

/// A `DUMP` value of a RedisBloom filter (`MBbloom--`, any encver): it decodes only if valid;
/// a decoded chain re-encodes to a value that decodes to the same chain, and stays usable:
/// what its adds make loads again.
pub fn rb_value(data: &[u8]) {
    use lcbloom::bloom::redisbloom::dump;
    if let Ok(mut chain) = dump::decode_value(data, LIMIT) {
        let again = dump::encode_value(&chain);
        assert_eq!(dump::decode_value(&again, u64::MAX).as_ref(), Ok(&chain));
        for i in 0..4u32 {
            let h = chain.hash(&i.to_le_bytes());
            let _ = chain.contains(&h);
            if chain.add(&h, LIMIT).is_ok() {
                assert!(chain.contains(&h), "an added item is present");
            }
        }
        let sizes: u64 = chain.links().iter().map(|l| l.size).sum();
        assert_eq!(sizes, chain.size());
        // What the adds made saves and loads again.
        let again = dump::encode_value(&chain);
        assert_eq!(dump::decode_value(&again, u64::MAX).as_ref(), Ok(&chain));
    }
}

/// A RedisBloom `BF.LOADCHUNK` session in the format of `bf_loadchunk` (header, then chunks
/// whose 4-byte field is the iterator sent): refused chunks change nothing.
pub fn rb_loadchunk(data: &[u8]) {
    use lcbloom::bloom::redisbloom::{dump, scandump};
    let Some((header, records)) = session(data) else {
        return;
    };
    let Ok(mut chain) = scandump::decode_header(header, LIMIT) else {
        return;
    };
    for (field, chunk) in records {
        let it = i32::from_le_bytes(field) as i64;
        let before = chain.clone();
        if scandump::load_chunk(&mut chain, it, chunk).is_err() {
            assert_eq!(chain, before, "a refused chunk changes nothing");
        }
    }
    let value = dump::encode_value(&chain);
    assert_eq!(dump::decode_value(&value, u64::MAX).as_ref(), Ok(&chain));
}

/// A `BF.LOADCHUNK` session on a missing key, as `BF.LOADCHUNK` runs it: the header in either
/// format (`load::from_header`: lcbloom's, else RedisBloom's), then chunks in the format of
/// `rb_loadchunk` (4-byte iterator), each loaded by the filter's own rules. An accepted header
/// re-encodes to itself; refused chunks change nothing.
pub fn bf_any_loadchunk(data: &[u8]) {
    use lcbloom::bloom::any::BloomFilter;
    use lcbloom::bloom::load;
    let Some((header, records)) = session(data) else {
        return;
    };
    let Ok(mut filter) = load::from_header(header, LIMIT) else {
        return;
    };
    let filter = filter.as_filter_mut();
    assert_eq!(filter.scandump(0), (1, header.to_vec()));
    // Every part `BF.SCANDUMP` gives after the header.
    let parts = |f: &dyn BloomFilter| {
        let mut parts = Vec::new();
        let mut it = 1;
        loop {
            let (next, bytes) = f.scandump(it);
            if next == 0 {
                return parts;
            }
            parts.push(bytes);
            it = next as i64;
        }
    };
    for (field, chunk) in records {
        let it = i32::from_le_bytes(field) as i64;
        let before = parts(filter);
        if filter.load_chunk(it, chunk).is_err() {
            assert_eq!(parts(filter), before, "a refused chunk changes nothing");
        }
    }
}

/// A windowed filter's encoding, as RDB, `DUMP`, `BF.SCANDUMP` and the AOF rewrite carry it:
/// a header (length in the first two bytes), then data chunks in the record format of
/// `bf_loadchunk` (4-byte start offset), applied in order. A refused chunk changes nothing; a
/// complete value re-encodes to its header and data and stays usable (lookups, adds, a moving
/// clock): what its adds make loads again.
pub fn bf_window_value(data: &[u8]) {
    use lcbloom::bloom::window::codec;
    use lcbloom::bloom::window::value::Windowed;
    let Some((header, records)) = session(data) else {
        return;
    };
    let Ok(mut value) = Windowed::from_header(header, LIMIT) else {
        return;
    };
    let mut data = Vec::new();
    for (field, chunk) in records {
        let start = u32::from_le_bytes(field) as u64;
        let before = codec::encode_header(&value.filter);
        match value.load_chunk(start, chunk) {
            Ok(()) => data.extend_from_slice(chunk),
            Err(_) => assert_eq!(codec::encode_header(&value.filter), before),
        }
    }
    if !value.is_complete() {
        return;
    }
    let mut again = Vec::new();
    codec::for_each_chunk(&value.filter, |_, c| again.extend_from_slice(c));
    assert_eq!(again, data, "a loaded value re-encodes to its data");
    assert_eq!(codec::encode_header(&value.filter), header);
    let time = value.filter.time();
    for i in 0..4u64 {
        let h = value.filter.hash(&i.to_le_bytes());
        let _ = value.filter.contains(&h, time);
        let _ = value.filter.add(&h, time.saturating_add(i * 977), LIMIT);
        let _ = value.filter.cardinality(u64::MAX);
    }
    // What the adds made saves and loads again.
    let mut chunks = Vec::new();
    codec::for_each_chunk(&value.filter, |_, c| chunks.push(c.to_vec()));
    let header = codec::encode_header(&value.filter);
    let back = codec::decode(&header, chunks.iter().map(|c| c.as_slice()), u64::MAX)
        .expect("a written value loads again");
    assert_eq!(codec::encode_header(&back), header);
}

/// A record of a session: its 4-byte field (an offset or an iterator) and its bytes.
type Record<'a> = ([u8; 4], &'a [u8]);

/// A session's parts: the header (its length in the first two bytes, little-endian), then
/// records of a 4-byte field, a 2-byte length and that many bytes (cut to what is left).
fn session(data: &[u8]) -> Option<(&[u8], Vec<Record<'_>>)> {
    let (len, rest) = data.split_first_chunk::<2>()?;
    let len = (u16::from_le_bytes(*len) as usize).min(rest.len());
    let (header, mut rest) = rest.split_at(len);
    let mut records = Vec::new();
    while let Some((head, tail)) = rest.split_first_chunk::<6>() {
        let len = (u16::from_le_bytes([head[4], head[5]]) as usize).min(tail.len());
        let (bytes, tail) = tail.split_at(len);
        records.push(([head[0], head[1], head[2], head[3]], bytes));
        rest = tail;
    }
    Some((header, records))
}
