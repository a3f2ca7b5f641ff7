//! Bytes (pure): the one little-endian reader and writer every encoding uses (lcbloom's Bloom
//! and counter codecs, RedisBloom's `DUMP` and `BF.SCANDUMP` forms); the chunked forms both
//! types share (`BF.SCANDUMP`/`BF.LOADCHUNK`, the RDB and AOF data chunks, and
//! `LC.LOADCHUNK`'s bitmap pieces); and the one conversion between bit arrays (u64 words) and
//! their little-endian bytes.
//!
//! A chunk is named by its iterator, 1 + the byte offset where it ends (exclusive), as
//! RedisBloom does: 0 is left for "start"/"end", and a loader finds where a chunk starts from
//! the iterator and the chunk's length alone.

/// Largest chunk any of the forms carries (RedisBloom's limit too): far below
/// `proto-max-bulk-len`, and neither save nor load needs a second copy of a large value.
pub const CHUNK_BYTES: u64 = 16 << 20;

use super::decode::DecodeError;

/// `Reader` methods that read one fixed-width number (`u32()`: a little-endian u32).
macro_rules! numbers {
    ($($name:ident: $t:ty = $from:ident,)*) => {
        $(pub fn $name(&mut self) -> Result<$t, DecodeError> {
            self.array().map(<$t>::$from)
        })*
    };
}

/// Reads a byte string front to back; running out is the reader's `short` error.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    short: DecodeError,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes` that answers `short` when asked for more than is left.
    pub fn new(bytes: &'a [u8], short: DecodeError) -> Self {
        Self {
            bytes,
            at: 0,
            short,
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.short);
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    numbers! {
        u16: u16 = from_le_bytes,
        u32: u32 = from_le_bytes,
        u64: u64 = from_le_bytes,
        f64: f64 = from_le_bytes,
        // RDB lengths are the one big-endian field anywhere.
        u32_be: u32 = from_be_bytes,
        u64_be: u64 = from_be_bytes,
    }

    /// A shortest-form LEB128 u64.
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
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

/// Appends little-endian fields to a byte string: the writing side of [`Reader`].
pub trait Writer {
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_f64(&mut self, v: f64);
    /// A shortest-form LEB128 u64.
    fn put_varint(&mut self, v: u64);
}

impl Writer for Vec<u8> {
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }

    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }

    fn put_f64(&mut self, v: f64) {
        self.extend_from_slice(&v.to_le_bytes());
    }

    fn put_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.push(v as u8);
    }
}

/// The iterator of a chunk that ends at byte offset `end`.
pub fn iterator_after(end: u64) -> u64 {
    end + 1
}

/// Where a chunk of `len` bytes named by `iterator` starts; None when they do not match.
pub fn chunk_start(iterator: u64, len: usize) -> Option<u64> {
    iterator.checked_sub(1)?.checked_sub(len as u64)
}

/// Appends bytes `start..start + len` of `words` read as little-endian bytes (len > 0): one
/// copy of their memory on a little-endian CPU (saves and dumps of large filters run at
/// `memcpy`'s speed), word by word elsewhere.
pub fn words_to_bytes(words: &[u64], start: usize, len: usize, out: &mut Vec<u8>) {
    if let Some(bytes) = words_as_le_bytes(words, start, len) {
        out.extend_from_slice(bytes);
        return;
    }
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

/// Bytes `start..start + len` of `words` read as little-endian bytes, borrowed: on a
/// little-endian CPU their memory is the encoding itself, so a save needs no copy of it. None
/// elsewhere.
pub fn words_as_le_bytes(words: &[u64], start: usize, len: usize) -> Option<&[u8]> {
    cfg!(target_endian = "little").then(|| &as_bytes(words)[start..start + len])
}

/// The memory of `words`: their little-endian bytes on a little-endian CPU.
fn as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and any alignment suits u8; the slice covers exactly the
    // words' 8·len bytes and borrows them for as long.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) }
}

/// Writes `src` at byte offset `start` of `words` (little-endian): one copy into their memory
/// on a little-endian CPU, byte by byte elsewhere (whole words where aligned).
pub fn bytes_into_words(words: &mut [u64], start: usize, src: &[u8]) {
    if cfg!(target_endian = "little") {
        // SAFETY: as in `as_bytes`, borrowed mutably: every byte pattern is a valid u64.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8)
        };
        bytes[start..start + src.len()].copy_from_slice(src);
        return;
    }
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
    fn reader_reads_what_the_writer_wrote() {
        let mut out = Vec::new();
        out.put_u32(7);
        out.put_u64(u64::MAX - 1);
        out.put_f64(0.25);
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            out.put_varint(v);
        }
        out.push(9);
        let short = DecodeError("short");
        let mut r = Reader::new(&out, short);
        assert_eq!(r.u32(), Ok(7));
        assert_eq!(r.u64(), Ok(u64::MAX - 1));
        assert_eq!(r.f64(), Ok(0.25));
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(r.varint(), Ok(v));
        }
        assert_eq!(r.remaining(), 1);
        assert_eq!(r.u16(), Err(short));
        assert_eq!(r.byte(), Ok(9));
        assert_eq!(r.take(1), Err(short));
        assert_eq!(Reader::new(&[1, 0, 0, 0], short).u32_be(), Ok(1 << 24));
        assert_eq!(
            Reader::new(&[0x80, 0], short).varint().unwrap_err().0,
            "varint not in shortest form"
        );
        assert!(Reader::new(&[0xff; 10], short).varint().is_err());
    }

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
