//! `BF.SCANDUMP` / `BF.LOADCHUNK` for RedisBloom chains, byte-compatible with RedisBloom 2.8.2
//! (header layout in `mod.rs`).
//!
//! The data is one byte stream, the links' bit arrays oldest first. Iterator `it ≥ 1` names
//! stream position `it − 1`; a chunk never crosses a link and is at most 16 MiB; the iterator
//! returned with a chunk is the position after it, plus one. `BF.LOADCHUNK key it data` writes
//! `data` at iterator `it − len(data)`.
//!
//! On a missing key, `BF.LOADCHUNK key 1 <header>` takes lcbloom's header or this one
//! (`bloom/commands.rs` tells them apart, with [`looks_like_header`]). That is how a
//! RedisBloom AOF rewrite or `BF.SCANDUMP` stream loads into lcbloom.

use super::chain::{
    array_bytes, check_chain_fields, is_unmade_last, memory_bytes_for, zeroed, RedisBloomChain,
};
use super::link::{Link, LinkParams};
use super::{DecodeError, BAD_DATA, OUT_OF_MEMORY, TOO_LARGE};
use crate::core::chunks::{Reader, Writer, CHUNK_BYTES};

const FIXED: usize = 20;
const PER_LINK: usize = 53;
const NO_LINK: DecodeError = DecodeError("invalid offset - no link found");
const TOO_BIG: DecodeError = DecodeError("invalid chunk - Too big for current filter");

/// The header chunk (iterator 1): a packed little-endian struct, 20 + 53·nfilters bytes.
pub fn encode_header(chain: &RedisBloomChain) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED + PER_LINK * chain.links().len());
    out.put_u64(chain.size());
    out.put_u32(chain.links().len() as u32);
    out.put_u32(chain.options());
    out.put_u32(chain.growth());
    for link in chain.links() {
        let p = &link.params;
        out.put_u64(p.bytes);
        out.put_u64(p.bits);
        out.put_u64(link.size);
        out.put_f64(p.error);
        out.put_f64(p.bpe);
        out.put_u32(p.hashes);
        out.put_u64(p.entries);
        out.push(p.n2);
    }
    out
}

/// Whether `header` has the shape of a RedisBloom header (its length matches its count).
pub fn looks_like_header(header: &[u8]) -> bool {
    let count = header
        .get(8..12)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")));
    let links = header.len().checked_sub(FIXED);
    count
        .zip(links)
        .is_some_and(|(n, links)| links as u64 == n as u64 * PER_LINK as u64)
}

/// A zero-filled chain from a header, validated as an RDB value is (plus RedisBloom's own
/// LOADCHUNK checks) and refused over `limit` bytes before anything is allocated.
pub fn decode_header(header: &[u8], limit: u64) -> Result<RedisBloomChain, DecodeError> {
    if !looks_like_header(header) {
        return Err(BAD_DATA);
    }
    let mut r = Reader::new(header, BAD_DATA);
    let (size, nfilters, options, growth) = (r.u64()?, r.u32()?, r.u32()?, r.u32()?);
    let mut params: Vec<(LinkParams, u64)> = Vec::new();
    while r.remaining() > 0 {
        let (bytes, bits, size) = (r.u64()?, r.u64()?, r.u64()?);
        let p = LinkParams {
            bytes,
            bits,
            error: r.f64()?,
            bpe: r.f64()?,
            hashes: r.u32()?,
            entries: r.u64()?,
            n2: r.byte()?,
        };
        params.push((p, size));
    }
    check_chain_fields(size, options, nfilters as u64, || {
        params
            .iter()
            .try_fold(0u64, |s, (_, size)| s.checked_add(*size))
    })?;
    let count = params.len() as u64;
    if params
        .last()
        .is_some_and(|(p, size)| is_unmade_last(count - 1, count, p, *size))
    {
        params.pop();
    }
    let mut data_bytes = 0u64;
    for (p, _) in &params {
        p.validate()?;
        data_bytes = data_bytes.saturating_add(array_bytes(p.bytes));
    }
    match memory_bytes_for(params.len() as u64, data_bytes) {
        Some(m) if m <= limit => {}
        _ => return Err(TOO_LARGE),
    }
    let mut links = Vec::with_capacity(params.len());
    for (p, size) in params {
        let data = zeroed(p.bytes).map_err(|_| OUT_OF_MEMORY)?;
        links.push(Link {
            params: p,
            size,
            data,
        });
    }
    RedisBloomChain::from_parts(size, options, growth, links)
}

/// The link holding stream position `pos`, and the offset in it.
fn locate(chain: &RedisBloomChain, pos: u64) -> Option<(usize, u64)> {
    let mut start = 0u64;
    for (j, link) in chain.links().iter().enumerate() {
        if pos < start + link.params.bytes {
            return Some((j, pos - start));
        }
        start += link.params.bytes;
    }
    None
}

/// The data chunk at iterator `it` (≥ 1) and the iterator to return with it; None past the
/// end (the reply is then `[0, ""]`).
pub fn chunk(chain: &RedisBloomChain, it: u64) -> Option<(u64, &[u8])> {
    let (j, offset) = locate(chain, it.checked_sub(1)?)?;
    let data = &chain.links()[j].data;
    let len = (data.len() as u64 - offset).min(CHUNK_BYTES);
    Some((it + len, &data[offset as usize..(offset + len) as usize]))
}

/// `BF.LOADCHUNK` of a data chunk into an existing chain, with RedisBloom's rules and texts:
/// it must satisfy `it ≥ len`, start inside a link and fit in it. Nothing changes on error.
pub fn load_chunk(chain: &mut RedisBloomChain, it: i64, data: &[u8]) -> Result<(), DecodeError> {
    let start = u64::try_from(it)
        .ok()
        .and_then(|it| it.checked_sub(data.len() as u64))
        .filter(|_| it > 0)
        .ok_or(BAD_DATA)?;
    let (j, offset) = start
        .checked_sub(1)
        .and_then(|pos| locate(chain, pos))
        .ok_or(NO_LINK)?;
    let link = &mut chain.links_mut()[j];
    if data.len() as u64 > link.params.bytes - offset {
        return Err(TOO_BIG);
    }
    link.data[offset as usize..offset as usize + data.len()].copy_from_slice(data);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::chain::ChainError;
    use crate::bloom::redisbloom::{dump, hex};

    #[test]
    fn header_matches_redisbloom_bytes() {
        // `BF.RESERVE k 0.05 7` on RedisBloom 2.8.2 (redisbloom-format.md §4.1).
        let want = hex("0000000000000000 01000000 05000000 02000000 0800000000000000 4000000000000000 0000000000000000 9a9999999999993f 0bd81f7830b61e40 06000000 0700000000000000 00");
        let c = RedisBloomChain::reserve(0.05, 7, Some(2), u64::MAX).unwrap();
        assert_eq!(encode_header(&c), want);
        assert_eq!(decode_header(&want, u64::MAX), Ok(c));
    }

    #[test]
    fn chunks_shorter_than_a_header_are_not_headers() {
        // A count field but not the rest of the fixed part: refused, never a length underflow.
        let short = hex("00ffffffff000036 00000d0d 3333");
        assert!(!looks_like_header(&short));
        assert_eq!(decode_header(&short, u64::MAX), Err(BAD_DATA));
        for len in 0..FIXED {
            assert!(!looks_like_header(&vec![0; len]), "{len} bytes");
        }
    }

    /// RedisBloom's loaders check only that the links' counts sum to the chain's: a header
    /// claiming 2^64 − 1 items loads, and an add that would wrap the count is refused (it
    /// wrapped to 0, and the key's own `DUMP`, its RDB and a replica's full sync were refused).
    #[test]
    fn an_add_that_would_wrap_the_count_is_refused() {
        let header = hex("ffffffffffffffff 01000000 05000000 02000000 9000000000000000 8004000000000000 ffffffffffffffff 7b14ae47e17a743f e9862fb2350e2640 08000000 6400000000000000 00");
        let mut c = decode_header(&header, u64::MAX).unwrap();
        load_chunk(&mut c, 145, &[0; 144]).unwrap();
        let before = c.clone();
        let h = c.hash(b"hello");
        assert_eq!(c.add(&h, u64::MAX), Err(ChainError::Overflow));
        assert_eq!(c, before);
        assert!(dump::decode_value(&dump::encode_value(&c), u64::MAX).is_ok());
    }

    fn grown() -> RedisBloomChain {
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(2), u64::MAX).unwrap();
        for i in 0..200 {
            c.add(&c.hash(format!("i{i}").as_bytes()), u64::MAX)
                .unwrap();
        }
        c
    }

    #[test]
    fn scandump_walk_and_loadchunk_rebuild_the_chain() {
        let c = grown();
        let mut copy = decode_header(&encode_header(&c), u64::MAX).unwrap();
        let mut it = 1;
        let mut steps = Vec::new();
        while let Some((next, data)) = chunk(&c, it) {
            load_chunk(&mut copy, next as i64, data).unwrap();
            steps.push(next);
            it = next;
        }
        // Link sizes 16, 32, 72, 160, 336 (RedisBloom's sequence, §4.2).
        assert_eq!(steps, [17, 49, 121, 281, 617]);
        assert_eq!(copy, c);
        assert_eq!(chunk(&c, 0), None);
        assert_eq!(chunk(&c, 5).unwrap().0, 17);
        assert_eq!(chunk(&c, 5).unwrap().1.len(), 12);
    }

    /// A header whose last link RedisBloom failed to make (every field 0) gives the chain
    /// without it; the data chunks that follow are the other links' (`rdb.rs` tests the same).
    #[test]
    fn a_last_link_redisbloom_failed_to_make_is_dropped() {
        let c = grown();
        let mut header = encode_header(&c);
        header[8..12].copy_from_slice(&(c.links().len() as u32 + 1).to_le_bytes());
        header.extend([0u8; PER_LINK]);
        assert_eq!(
            decode_header(&header, u64::MAX),
            decode_header(&encode_header(&c), u64::MAX)
        );
        assert_eq!(
            decode_header(&header, u64::MAX).unwrap().links().len(),
            c.links().len()
        );
    }

    #[test]
    fn loadchunk_refusals_change_nothing() {
        let c = grown();
        let mut copy = c.clone();
        let cases: [(i64, usize, DecodeError); 6] = [
            (0, 0, BAD_DATA),
            (-5, 0, BAD_DATA),
            (3, 4, BAD_DATA),
            (4, 4, NO_LINK),
            (618, 0, NO_LINK),
            (20, 17, TOO_BIG),
        ];
        for (it, len, err) in cases {
            assert_eq!(
                load_chunk(&mut copy, it, &vec![0xff; len]),
                Err(err),
                "it {it} len {len}"
            );
            assert_eq!(copy, c);
        }
        assert_eq!(load_chunk(&mut copy, 12, &[0xff; 3]), Ok(()));
        assert_ne!(copy, c);
    }

    #[test]
    #[cfg_attr(miri, ignore = "allocates more than Miri can hold")]
    fn bad_headers_are_refused() {
        let good = encode_header(&grown());
        assert!(decode_header(&good[..19], u64::MAX).is_err());
        assert!(decode_header(&good[..good.len() - 1], u64::MAX).is_err());
        let mut zero = good[..20].to_vec();
        zero[8] = 0;
        assert!(decode_header(&zero, u64::MAX).is_err(), "nfilters 0");
        let mut bad_size = good.clone();
        bad_size[0] ^= 1;
        assert!(decode_header(&bad_size, u64::MAX).is_err());
        let mut huge = good.clone();
        huge[20..28].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(decode_header(&huge, u64::MAX).is_err());
        // A length whose size class would wrap (found by fuzzing): refused, not rounded.
        huge[20..28].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_header(&huge, u64::MAX).is_err());
        assert!(decode_header(&good, 100).is_err(), "over the limit");
    }
}
