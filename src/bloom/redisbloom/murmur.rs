//! RedisBloom's two hash functions (Austin Appleby's MurmurHash2 family, public domain
//! algorithms, written here from their description) and the hash pair a chain probes with.
//!
//! Blocks are read little-endian and all arithmetic wraps, so the values are the same on every
//! machine. See the header of `mod.rs` for which filters use which function.

/// Seed of the 64-bit hash pair's first hash (RedisBloom's, for every FORCE64 chain).
const SEED64: u64 = 0xc6a4a7935bd1e995;
/// Seed of the legacy 32-bit pair's first hash.
const SEED32: u32 = 0x9747b28c;

/// MurmurHash2, 32-bit.
pub fn murmur2_32(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1e995;
    let mut h = seed ^ data.len() as u32;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = blocks.remainder();
    if tail.len() == 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// MurmurHash64A.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("8-byte block"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (j, &byte) in tail.iter().enumerate() {
            h ^= (byte as u64) << (8 * j);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^ (h >> R)
}

/// The two hashes of one item; every link of a chain probes `a + i·b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashPair {
    pub a: u64,
    pub b: u64,
}

impl HashPair {
    /// The pair of `item`: 64-bit when the chain has FORCE64, else the legacy 32-bit one.
    pub fn of(item: &[u8], force64: bool) -> Self {
        if force64 {
            let a = murmur64a(item, SEED64);
            HashPair {
                a,
                b: murmur64a(item, a),
            }
        } else {
            let a = murmur2_32(item, SEED32);
            HashPair {
                a: a as u64,
                b: murmur2_32(item, a) as u64,
            }
        }
    }

    /// Probe `i` before reduction modulo the link's M.
    #[inline]
    pub fn probe(&self, i: u32) -> u64 {
        self.a.wrapping_add((i as u64).wrapping_mul(self.b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The spec's vectors (redisbloom-format.md §3.6), checked there against real bit arrays.
    const VECTORS: [(&[u8], u64, u64, u32, u32); 5] = [
        (
            b"foo",
            0x822b4f99b121f10d,
            0x9d63d52a557f61c2,
            0x23a256d0,
            0x9fbc0655,
        ),
        (
            b"bar",
            0x6a8386c4397296e3,
            0x7d8d22475d9ccdf0,
            0x3af24dc1,
            0x913bcbb9,
        ),
        (
            b"hello world",
            0xbae8fb35317acde1,
            0xa5c3078260d44436,
            0x48d0c363,
            0x76aefdba,
        ),
        (
            b"",
            0x1ab11ea5a7b2c56e,
            0xbbddcb5ab56dd547,
            0x106e08d9,
            0x456d9087,
        ),
        (
            &[0, 1, 2, 3, 4, 5, 6, 7, 8],
            0x50f485c2d0f67264,
            0xa15d1a5e048b9a2a,
            0x639c0aa6,
            0x9e036fe5,
        ),
    ];

    #[test]
    fn hash_pairs_match_the_spec_vectors() {
        for (item, a64, b64, a32, b32) in VECTORS {
            assert_eq!(
                HashPair::of(item, true),
                HashPair { a: a64, b: b64 },
                "{item:?}"
            );
            let legacy = HashPair::of(item, false);
            assert_eq!((legacy.a, legacy.b), (a32 as u64, b32 as u64), "{item:?}");
        }
    }

    #[test]
    fn every_tail_length_is_hashed() {
        // Tails of 0..7 bytes take different paths; each extra byte must change the hash.
        let data: Vec<u8> = (0u8..24).collect();
        let mut seen64 = std::collections::HashSet::new();
        let mut seen32 = std::collections::HashSet::new();
        for len in 0..data.len() {
            assert!(seen64.insert(murmur64a(&data[..len], 1)));
            assert!(seen32.insert(murmur2_32(&data[..len], 1)));
        }
    }
}
