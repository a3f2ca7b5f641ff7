//! Reading encoding version 1 of a counter (codec.rs, "Version history"): exact sets of 64-bit
//! hashes, and bitmaps as varint gaps, each kind canonical as version 1 wrote it.

use super::{Reader, KIND_DENSE, KIND_SET};
use crate::core::decode::DecodeError;
use crate::lc::counter::exact_limit;

/// The exact body: the hashes, strictly increasing.
pub fn read_hashes(r: &mut Reader, m: u64) -> Result<Vec<u64>, DecodeError> {
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
        let h = r.u64()?;
        if hashes.last().is_some_and(|&last| last >= h) {
            return Err(DecodeError("exact set not strictly increasing"));
        }
        hashes.push(h);
    }
    Ok(hashes)
}

/// A bitmap body of kind 1, 2 or 3 as ⌈m/64⌉ words, padding bits zero.
pub fn read_bitmap(r: &mut Reader, kind: u8, m: u64) -> Result<Vec<u64>, DecodeError> {
    if kind == KIND_DENSE {
        return super::read_dense(r, m);
    }
    // Listed positions get `listed`, the others the opposite.
    let listed = kind == KIND_SET;
    let mut words = match listed {
        true => super::zeroed(m.div_ceil(64))?,
        false => super::all_set(m)?,
    };
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
        words[(pos / 64) as usize] ^= 1 << (pos % 64);
        next = pos + 1;
    }
    Ok(words)
}

/// The kind version 1 wrote: the shortest body, ties to the lower kind. A position list
/// takes at least one byte per position, so only a list shorter than the dense form is
/// walked.
pub fn smallest_kind(words: &[u64], m: u64) -> u8 {
    let ones: u64 = words.iter().map(|w| w.count_ones() as u64).sum();
    let mut best = (m.div_ceil(8), KIND_DENSE);
    for (kind, count, zeros) in [(KIND_SET, ones, false), (3, m - ones, true)] {
        if count < best.0 {
            let len = gaps_len(count, crate::lc::counter::bit_positions(words, zeros, m));
            if len < best.0 {
                best = (len, kind);
            }
        }
    }
    best.1
}

/// Bytes of a varint count and varint gaps.
fn gaps_len(count: u64, positions: impl Iterator<Item = u64>) -> u64 {
    let mut next = 0u64;
    let mut len = super::varint_len(count) as u64;
    for p in positions {
        len += super::varint_len(p - next) as u64;
        next = p + 1;
    }
    len
}
