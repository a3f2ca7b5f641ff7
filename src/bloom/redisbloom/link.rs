//! One link (sub-filter) of a RedisBloom chain: its parameters, RedisBloom's sizing rule, and
//! the probe rule (`mod.rs` explains both).

use super::murmur::HashPair;
use super::DecodeError;
use crate::core::batch::{self, prefetch_line};
use std::ops::Range;

/// RedisBloom's truncated literals; they decide `hashes` when `ln2·bpe` is near an integer.
pub const LN2SQ: f64 = 0.480453013918201;
#[allow(clippy::approx_constant)] // RedisBloom's truncated literal, not ln 2: answers depend on it.
pub const LN2: f64 = 0.693147180559945;

/// Chain option bits (the `options` field).
pub const NOROUND: u32 = 1;
pub const ENTS_IS_BITS: u32 = 2;
pub const FORCE64: u32 = 4;
pub const NO_SCALING: u32 = 8;
pub const ALL_OPTIONS: u32 = NOROUND | ENTS_IS_BITS | FORCE64 | NO_SCALING;

/// Most probes a valid link can have: `ceil(LN2 · bpe)` for the smallest positive double error.
pub const MAX_HASHES: u32 = 1100;

/// Everything about a link except its bits and item count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkParams {
    /// Items the link takes before the chain grows.
    pub entries: u64,
    pub error: f64,
    /// Probes per item (k).
    pub hashes: u32,
    /// Bits per entry, `|ln(error)| / LN2SQ`.
    pub bpe: f64,
    /// The stored bit count: the modulus when `n2` is 0.
    pub bits: u64,
    /// If > 0 the modulus is 2^n2 (legacy power-of-two links).
    pub n2: u8,
    /// Length of the bit array.
    pub bytes: u64,
}

fn bits_per_entry(error: f64) -> f64 {
    (-(error.ln()) / LN2SQ).abs()
}

fn hashes_for(bpe: f64) -> f64 {
    (LN2 * bpe).ceil()
}

impl LinkParams {
    /// RedisBloom's `bloom_init`: a link for `n` entries at `error` under the chain `options`.
    /// `None` where RedisBloom fails too (it then answers "problem inserting into filter").
    pub fn init(n: u64, error: f64, options: u32) -> Option<LinkParams> {
        if n < 1 || !(error > 0.0 && error < 1.0) {
            return None;
        }
        let bpe = bits_per_entry(error);
        let (entries, b0, n2) = if options & ENTS_IS_BITS != 0 {
            // `n` is log2 of the bit count (2^64 is undefined in RedisBloom: refused here).
            if n > 63 {
                return None;
            }
            let b0 = 1u64 << n;
            ((b0 as f64 / bpe) as u64, b0, n as u8)
        } else if options & NOROUND != 0 {
            (n, ((n as f64 * bpe) as u64).max(1), 0)
        } else {
            let want = n as f64 * bpe;
            // C's logb (the binary exponent, exact even just below a power of two); n2 = e + 1.
            // Refused where RedisBloom would shift by 64 or by a negative amount.
            if !(want.is_normal() && want >= 1.0) {
                return None;
            }
            let n2 = ((want.to_bits() >> 52) & 0x7ff) as i64 - 1023 + 1;
            if n2 > 63 {
                return None;
            }
            let b0 = 1u64 << n2;
            let spare = (b0 as f64 - want) as u64;
            (n.wrapping_add((spare as f64 / bpe) as u64), b0, n2 as u8)
        };
        let bytes = b0.div_ceil(64) * 8;
        Some(LinkParams {
            entries,
            error,
            hashes: hashes_for(bpe) as u32,
            bpe,
            bits: bytes * 8,
            n2,
            bytes,
        })
    }

    /// The probe modulus M.
    #[inline]
    pub fn modulus(&self) -> u64 {
        if self.n2 > 0 {
            1u64 << self.n2
        } else {
            self.bits
        }
    }

    /// Checks every field read from outside, so probes stay inside `bytes` and every later add
    /// behaves: error in (0, 1), `hashes` as RedisBloom derives it from `bpe` (which bounds it),
    /// n2 ≤ 63, 1 ≤ bits, and M and bits within the array. `bits` may be below `8·bytes`:
    /// encver-0 data (and RedisBloom's re-saves of it) has that, and RedisBloom 2.8.2 loads it.
    pub fn validate(&self) -> Result<(), DecodeError> {
        if !(self.error > 0.0 && self.error < 1.0) {
            return Err(DecodeError("bad RedisBloom data: error rate out of range"));
        }
        if !(self.bpe.is_finite() && self.bpe > 0.0)
            || self.hashes == 0
            || self.hashes > MAX_HASHES
            || self.hashes as f64 != hashes_for(self.bpe)
        {
            return Err(DecodeError(
                "bad RedisBloom data: hash count does not match bits per entry",
            ));
        }
        if self.n2 > 63 {
            return Err(DecodeError(
                "bad RedisBloom data: power-of-two size out of range",
            ));
        }
        let capacity_bits = self.bytes.checked_mul(8);
        let fits = |x: u64| capacity_bits.is_none_or(|c| x <= c);
        if self.bits == 0 || !fits(self.bits) || !fits(self.modulus()) {
            return Err(DecodeError(
                "bad RedisBloom data: bit count does not fit the bit array",
            ));
        }
        Ok(())
    }
}

/// A link: its parameters, its bit array (bit x is byte x>>3, mask 1<<(x&7)) and its items.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub params: LinkParams,
    /// Items added to this link (false positives are never counted).
    pub size: u64,
    pub data: Vec<u8>,
}

impl Link {
    /// Whether all of the item's probes are set.
    #[inline]
    pub fn contains(&self, hash: &HashPair) -> bool {
        self.probes_set(hash, 0..self.params.hashes)
    }

    /// Whether batches prefetch this link's lines (it is too large to stay cached).
    #[inline]
    pub fn prefetched(&self) -> bool {
        self.data.len() as u64 >= batch::PREFETCH_MIN_BYTES
    }

    /// Whether the item's probes `probes` are all set.
    #[inline]
    pub fn probes_set(&self, hash: &HashPair, probes: Range<u32>) -> bool {
        let m = self.params.modulus();
        probes.into_iter().all(|i| {
            let x = hash.probe(i) % m;
            self.data[(x >> 3) as usize] & (1 << (x & 7)) != 0
        })
    }

    /// Starts loading the lines of the item's probes `probes`.
    #[inline]
    pub fn prefetch(&self, hash: &HashPair, probes: Range<u32>) {
        let m = self.params.modulus();
        for i in probes.start..probes.end.min(self.params.hashes) {
            let x = hash.probe(i) % m;
            if let Some(byte) = self.data.get((x >> 3) as usize) {
                prefetch_line(byte);
            }
        }
    }

    /// Sets the item's probes (the caller has checked it is absent).
    pub fn insert(&mut self, hash: &HashPair) {
        let m = self.params.modulus();
        for i in 0..self.params.hashes {
            let x = hash.probe(i) % m;
            self.data[(x >> 3) as usize] |= 1 << (x & 7);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(p: &LinkParams) -> (u64, f64, u32, u64) {
        (p.entries, p.error, p.hashes, p.bits)
    }

    #[test]
    fn sizing_matches_redisbloom_examples() {
        // redisbloom-format.md §3.5, each from a live RedisBloom 2.8.2 DUMP.
        let r = NOROUND | FORCE64;
        let p = LinkParams::init(1000, 0.005, r).unwrap();
        assert_eq!(shape(&p), (1000, 0.005, 8, 11072));
        assert_eq!(p.bytes, 1384);
        assert_eq!(p.bpe, 11.027753418256411);
        let p = LinkParams::init(1000, 0.0005, r).unwrap();
        assert_eq!(
            (shape(&p), p.bpe),
            ((1000, 0.0005, 11, 15872), 15.820282606940136)
        );
        for (entries, error, want) in [
            (100, 0.01, (100, 0.01, 7, 960)),
            (50, 0.001, (50, 0.001, 10, 768)),
            (7, 0.025, (7, 0.025, 6, 64)),
            (100, 0.005, (100, 0.005, 8, 1152)),
        ] {
            assert_eq!(shape(&LinkParams::init(entries, error, r).unwrap()), want);
        }
        let big = LinkParams::init(20_000_000, 0.005, r).unwrap();
        assert_eq!((big.bits, big.bytes), (220555072, 27569384));
    }

    #[test]
    fn legacy_power_of_two_sizing() {
        for options in [0, FORCE64] {
            let p = LinkParams::init(20, 0.01, options).unwrap();
            assert_eq!((p.entries, p.n2, p.modulus(), p.hashes), (26, 8, 256, 7));
            let p = LinkParams::init(26 * 2, 0.005, options).unwrap();
            assert_eq!((p.entries, p.n2, p.hashes), (92, 10, 8));
            let p = LinkParams::init(92 * 2, 0.0025, options).unwrap();
            assert_eq!((p.entries, p.n2, p.hashes), (328, 12, 9));
        }
        let p = LinkParams::init(20, 0.01, NOROUND).unwrap();
        assert_eq!((p.entries, p.bits, p.hashes), (20, 192, 7));
    }

    #[test]
    fn init_refuses_what_redisbloom_refuses() {
        assert!(LinkParams::init(0, 0.01, NOROUND).is_none());
        assert!(LinkParams::init(10, 0.0, NOROUND).is_none());
        assert!(LinkParams::init(10, 1.0, NOROUND).is_none());
        assert!(LinkParams::init(64, 0.01, ENTS_IS_BITS).is_none());
        assert!(LinkParams::init(u64::MAX, 0.01, 0).is_none());
    }

    #[test]
    fn validation_keeps_probes_inside_the_array() {
        let good = LinkParams::init(100, 0.01, NOROUND | FORCE64).unwrap();
        assert!(good.validate().is_ok());
        let bad = [
            LinkParams { error: 0.0, ..good },
            LinkParams {
                error: f64::NAN,
                ..good
            },
            LinkParams { hashes: 0, ..good },
            LinkParams { hashes: 8, ..good },
            LinkParams {
                bpe: f64::INFINITY,
                ..good
            },
            LinkParams { bits: 0, ..good },
            LinkParams {
                bits: good.bytes * 8 + 1,
                ..good
            },
            LinkParams { n2: 11, ..good },
            LinkParams { n2: 64, ..good },
        ];
        for p in bad {
            assert!(p.validate().is_err(), "{p:?}");
        }
        // Encver-0 shape: fewer bits than the array holds.
        assert!(LinkParams { bits: 900, ..good }.validate().is_ok());
    }
}
