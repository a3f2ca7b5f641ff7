//! The chunked forms both types share (pure): `BF.SCANDUMP`/`BF.LOADCHUNK`, the RDB and AOF
//! data chunks, and `LC.LOADCHUNK`'s bitmap pieces; and the one conversion between bit arrays
//! (u64 words) and their little-endian bytes.
//!
//! A chunk is named by its iterator, 1 + the byte offset where it ends (exclusive), as
//! RedisBloom does: 0 is left for "start"/"end", and a loader finds where a chunk starts from
//! the iterator and the chunk's length alone.

/// Largest chunk any of the forms carries (RedisBloom's limit too): far below
/// `proto-max-bulk-len`, and neither save nor load needs a second copy of a large value.
pub const CHUNK_BYTES: u64 = 16 << 20;

/// The iterator of a chunk that ends at byte offset `end`.
pub fn iterator_after(end: u64) -> u64 {
    end + 1
}

/// Where a chunk of `len` bytes named by `iterator` starts; None when they do not match.
pub fn chunk_start(iterator: u64, len: usize) -> Option<u64> {
    iterator.checked_sub(1)?.checked_sub(len as u64)
}

/// Appends bytes `start..start + len` of `words` read as little-endian bytes (len > 0).
pub fn words_to_bytes(words: &[u64], start: usize, len: usize, out: &mut Vec<u8>) {
    let (first, last) = (start / 8, (start + len - 1) / 8);
    for (w, word) in words.iter().enumerate().take(last + 1).skip(first) {
        let lo = if w == first { start % 8 } else { 0 };
        let hi = if w == last {
            (start + len - 1) % 8 + 1
        } else {
            8
        };
        out.extend_from_slice(&word.to_le_bytes()[lo..hi]);
    }
}

/// Writes `src` at byte offset `start` of `words` (little-endian), whole words at a time
/// where aligned.
pub fn bytes_into_words(words: &mut [u64], start: usize, src: &[u8]) {
    let (mut pos, mut i) = (start, 0);
    while i < src.len() {
        if pos % 8 == 0 && src.len() - i >= 8 {
            let mut word = [0u8; 8];
            word.copy_from_slice(&src[i..i + 8]);
            words[pos / 8] = u64::from_le_bytes(word);
            pos += 8;
            i += 8;
        } else {
            let shift = (pos % 8) * 8;
            let w = &mut words[pos / 8];
            *w = (*w & !(0xffu64 << shift)) | ((src[i] as u64) << shift);
            pos += 1;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterators_name_chunk_ends() {
        assert_eq!(iterator_after(0), 1);
        assert_eq!(chunk_start(iterator_after(100), 40), Some(60));
        assert_eq!(chunk_start(iterator_after(100), 100), Some(0));
        assert_eq!(chunk_start(iterator_after(100), 101), None);
        assert_eq!(chunk_start(0, 0), None);
    }

    #[test]
    fn words_and_bytes_round_trip_at_any_offset() {
        let words = [0x0807_0605_0403_0201u64, 0x100f_0e0d_0c0b_0a09];
        for start in 0..16 {
            for len in 1..=16 - start {
                let mut out = Vec::new();
                words_to_bytes(&words, start, len, &mut out);
                let expected: Vec<u8> = (start as u8 + 1..=(start + len) as u8).collect();
                assert_eq!(out, expected);
                let mut back = [0u64; 2];
                bytes_into_words(&mut back, start, &out);
                let mut again = Vec::new();
                words_to_bytes(&back, start, len, &mut again);
                assert_eq!(again, expected);
            }
        }
    }
}
