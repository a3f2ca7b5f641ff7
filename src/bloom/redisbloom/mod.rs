//! RedisBloom's Bloom filters, so that lcbloom can take over (and give back) what RedisBloom
//! 2.8 stored: its RDB values (type `MBbloom--`, encvers 0–4), `DUMP` payloads, AOF rewrites
//! and `BF.SCANDUMP` streams. A filter imported this way keeps RedisBloom's layout and hashing
//! and grows by RedisBloom's rules, so every answer stays what RedisBloom would give. This is
//! a wing of its own: a pure core (every file but `datatype.rs`, no Redis types) and the Redis
//! type `MBbloom--` around it (`datatype.rs`); the `BF.*` commands serve these chains beside
//! lcbloom's own filters (`bloom/commands.rs`), which are unrelated to them.
//!
//! Structure. A chain holds `size` (items added), `options`, `growth` and links, oldest first.
//! A link holds `entries` (capacity), `error`, `hashes` k, `bpe` (bits per entry), `bits`,
//! `n2`, its bit array of `bytes` bytes (bit x is byte x>>3, mask 1<<(x&7)) and its `size`.
//! Options: 1 NOROUND (exact sizes; else power-of-two sizes with n2 > 0), 2 ENTS_IS_BITS
//! (never set by a command), 4 FORCE64 (64-bit hashing), 8 NO_SCALING. Every filter
//! RedisBloom 2.8 makes has options 5, or 13 when NONSCALING.
//!
//! Hashing (`murmur.rs`). An item (its raw bytes) is hashed once into a pair (a, b): with
//! FORCE64, a = MurmurHash64A(item, 0xc6a4a7935bd1e995), b = MurmurHash64A(item, a); without
//! (legacy filters), the 32-bit MurmurHash2 with seed 0x9747b28c, then seeded with a. Link
//! probe i is `(a + i·b mod 2^64) mod M` for i < k, where M = 2^n2 if n2 > 0, else `bits`.
//! M is usually a multiple of 64, not a power of two, so probes can cycle (RedisBloom's small
//! filters miss their error rate because of this); imported filters keep it, answers depend
//! on it.
//!
//! Add. Present in any link: answer 0, change nothing. Else if the newest link holds
//! `entries` items, NO_SCALING refuses ("non scaling filter is full"); otherwise a link
//! sized `init(prev.entries · growth, prev.error / 2)` is appended. The item's k bits are set
//! in the newest link and both sizes grow by one.
//!
//! Sizing (`link.rs`, RedisBloom's `bloom_init` with its truncated constants LN2 and LN2SQ):
//! bpe = |ln p| / LN2SQ, k = ceil(LN2 · bpe); NOROUND: bits0 = trunc(n · bpe) (≥ 1); else
//! n2 = logb(n · bpe) + 1, bits0 = 2^n2 and the capacity gained by rounding is added to
//! entries. The array is whole 64-bit words: bytes = ceil(bits0 / 64) · 8, bits = 8 · bytes.
//! A new chain's first link has p/2 (p when NONSCALING).
//!
//! RDB fields (`rdb.rs`), in order: size, nfilters, options (encver ≥ 2, else 0), growth
//! (encver ≥ 4, else 2); per link: entries, error (double), hashes, bpe (double), bits and n2
//! (encver ≥ 1; encver 0 recomputes bits = trunc(entries · bpe), n2 = 0), the bit array
//! (string), size. Written back always as encver 4, which RedisBloom 2.8 reads. `dump.rs`
//! frames these fields as a `DUMP` value.
//!
//! SCANDUMP header (`scandump.rs`), packed little-endian, 20 + 53·nfilters bytes: u64 size,
//! u32 nfilters, u32 options, u32 growth; per link u64 bytes, u64 bits, u64 size, f64 error,
//! f64 bpe, u32 hashes, u64 entries, u8 n2. Data chunks follow the links' arrays.
//!
//! Validation (every decoder): 1..=999 links (RedisBloom 2.8.2 aborts on 1000 or more), known
//! options, any growth (0 stands for a multiple of 2^32: such a chain cannot grow), a last
//! link RedisBloom failed to make (no bit array, no items) dropped (`chain::is_unmade_last`), Σ link
//! sizes = size, per link error in (0, 1), k as
//! derived from bpe (so k ≤ 1100), n2 ≤ 63, bits ≥ 1, bits and M within the array; memory is
//! bounded by the caller's limit before the arrays are allocated. RedisBloom 2.8.2 checks
//! none of this when loading an RDB value, and crashes on some such payloads.

pub mod chain;
pub mod datatype;
pub mod dump;
pub mod filter;
pub mod link;
pub mod murmur;
pub mod rdb;
pub mod scandump;

/// Bytes from hex digits, spaces between them allowed (RedisBloom's bytes in the tests).
#[cfg(test)]
fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub use crate::bloom::codec::{BAD_DATA, OUT_OF_MEMORY, TOO_LARGE};
pub use crate::core::decode::DecodeError;
