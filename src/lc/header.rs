//! The header word of a counter's block, and where the rest of the block starts.
//!
//! ```text
//! bit 0–1    mode: 0 exact, 1 sparse, 2 dense, 3 sketch
//! bit 2–9    the block's size-class index (block.rs's; never touched here)
//! bit 10…    count: fingerprints (exact), set bits (sparse), zero bits (dense)
//!            sketch: bit 10 is 0 for tokens, 1 for registers; tokens' count from bit 11
//! ```
//!
//! A sketch block (levels.rs) keeps its running estimate in word [`SKETCH_ESTIMATE`] (an
//! `f64`), that estimate's variance in [`SKETCH_VARIANCE`], and the unset weight `μ` (a
//! `u128` in units of `2^−64`) in words [`SKETCH_MU`] and the next; its token stream starts
//! at bit [`SKETCH_STREAM`], its registers (packed, registers.rs) at word
//! [`SKETCH_REGISTERS`].
//!
//! Exact and sparse blocks hold an Elias–Fano stream from bit [`STREAM`] of the block (so
//! from bit 26 of the header word on), which leaves their count 16 bits: an exact set holds at
//! most `EXACT_MAX` fingerprints and a sparse block of at most `SPARSE_MAX_BYTES` fewer
//! positions than its bits. A dense block has no stream in its header: its count takes bits
//! 10–63, word [`DENSE_ESTIMATE`] holds the estimate for that count (so that `LC.COUNT` reads
//! it instead of taking a logarithm) and the bitmap starts at word [`DENSE_BITMAP`].
//!
//! The header is not part of the encoding (codec.rs writes the counter from its state), so
//! this layout may change without a new encoding version.

use crate::core::block::Block;

const MODE_BITS: u64 = 3;
pub(super) const COUNT_SHIFT: u32 = 10;
/// Where an exact or sparse stream starts, in bits from the start of the block.
pub const STREAM: u64 = 26;
/// The dense block's estimate word.
pub const DENSE_ESTIMATE: usize = 1;
/// The dense block's first bitmap word.
pub const DENSE_BITMAP: usize = 2;
/// Sketch blocks: the running estimate, its variance, `μ` (two words), then the tokens or
/// registers.
pub const SKETCH_ESTIMATE: usize = 1;
pub const SKETCH_VARIANCE: usize = 2;
pub const SKETCH_MU: usize = 3;
pub const SKETCH_REGISTERS: usize = 5;
pub const SKETCH_STREAM: u64 = SKETCH_REGISTERS as u64 * 64;
const STREAM_COUNT_MASK: u64 = (1 << STREAM) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Exact,
    Sparse,
    Dense,
    /// The sketch's set indicators, listed (levels.rs).
    Tokens,
    /// The sketch's registers (levels.rs).
    Registers,
}

impl Mode {
    /// The name `LC.INFO` reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Exact => "exact",
            Mode::Sparse => "sparse",
            Mode::Dense => "dense",
            Mode::Tokens => "tokens",
            Mode::Registers => "registers",
        }
    }

    fn bits(self) -> u64 {
        match self {
            Mode::Exact => 0,
            Mode::Sparse => 1,
            Mode::Dense => 2,
            Mode::Tokens => 3,
            Mode::Registers => 3 | 1 << COUNT_SHIFT,
        }
    }
}

/// A block's header, decoded. An empty counter (no block) reads as exact with count 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub mode: Mode,
    pub count: u64,
}

impl Header {
    /// Decodes a header word (`Block::head`: the class bits already cleared).
    #[inline]
    pub fn from_word(head: u64) -> Header {
        match head & MODE_BITS {
            0 => Header::stream(Mode::Exact, head),
            1 => Header::stream(Mode::Sparse, head),
            2 => Header {
                mode: Mode::Dense,
                count: head >> COUNT_SHIFT,
            },
            _ if head >> COUNT_SHIFT & 1 == 1 => Header {
                mode: Mode::Registers,
                count: 0,
            },
            _ => Header {
                mode: Mode::Tokens,
                count: head >> (COUNT_SHIFT + 1),
            },
        }
    }

    #[inline]
    fn stream(mode: Mode, head: u64) -> Header {
        Header {
            mode,
            count: (head & STREAM_COUNT_MASK) >> COUNT_SHIFT,
        }
    }

    #[inline]
    pub fn of(block: &Block) -> Header {
        Header::from_word(block.head())
    }

    /// Writes this header into `block`, keeping the stream bits that share its word.
    pub fn write(self, block: &mut Block) {
        let head = match self.mode {
            Mode::Dense => self.count << COUNT_SHIFT,
            Mode::Tokens => self.count << (COUNT_SHIFT + 1),
            Mode::Registers => 0,
            Mode::Exact | Mode::Sparse => {
                debug_assert!(self.count << COUNT_SHIFT <= STREAM_COUNT_MASK, "{self:?}");
                (block.head() & !STREAM_COUNT_MASK) | (self.count << COUNT_SHIFT)
            }
        };
        block.set_head(head | self.mode.bits());
    }
}

/// Takes `n` from the zero count of a dense block's raw first word (`words[0]`, class bits
/// included: they sit below the count and are left as they are); the new zero count.
#[inline]
pub fn take_dense_zeros(first_word: &mut u64, n: u64) -> u64 {
    *first_word -= n << COUNT_SHIFT;
    *first_word >> COUNT_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::geometry::{EXACT_MAX, SPARSE_MAX_BYTES};

    #[test]
    fn headers_round_trip_and_keep_the_stream_bits() {
        let mut block = Block::zeroed(4).unwrap();
        for header in [
            Header {
                mode: Mode::Exact,
                count: EXACT_MAX,
            },
            Header {
                mode: Mode::Sparse,
                count: SPARSE_MAX_BYTES * 8 - 1,
            },
        ] {
            block.set_head(0b1011 << STREAM);
            header.write(&mut block);
            assert_eq!(Header::of(&block), header);
            assert_eq!(block.head() >> STREAM, 0b1011, "stream bits kept");
        }
        for header in [
            Header {
                mode: Mode::Tokens,
                count: 70_000,
            },
            Header {
                mode: Mode::Registers,
                count: 0,
            },
        ] {
            header.write(&mut block);
            assert_eq!(Header::of(&block), header);
        }
        let dense = Header {
            mode: Mode::Dense,
            count: (1 << 53) + 5,
        };
        dense.write(&mut block);
        assert_eq!(Header::of(&block), dense);
        let class = block.words()[0] & 0x3fc;
        assert_eq!(
            take_dense_zeros(&mut block.words_mut()[0], 2),
            (1 << 53) + 3
        );
        assert_eq!(block.words()[0] & 0x3fc, class, "class bits untouched");
        assert_eq!(
            Header::from_word(0),
            Header {
                mode: Mode::Exact,
                count: 0
            }
        );
    }
}
