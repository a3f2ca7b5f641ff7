//! The RDB field sequence of a RedisBloom chain (encvers 0–4 in, 4 out), over an abstract
//! field reader/writer: the type adapter maps it to `RedisModule_Load*`/`Save*`, the DUMP
//! codec (`dump.rs`) to bytes. Field order and presence are in the header of `mod.rs`.

use super::chain::{
    array_bytes, is_unmade_last, memory_bytes_for, RedisBloomChain, BAD_LINK_COUNT, MAX_LINKS,
};
use super::link::{Link, LinkParams, MAX_HASHES};
use super::{DecodeError, TOO_LARGE};

/// The encoding version written; 0–4 are read.
pub const ENCVER: u32 = 4;

const BAD_NUMBER: DecodeError = DecodeError("bad RedisBloom data: field out of range");

/// Where the fields come from.
pub trait FieldReader {
    fn unsigned(&mut self) -> Result<u64, DecodeError>;
    fn double(&mut self) -> Result<f64, DecodeError>;
    /// The next string; `max` is the most bytes the caller will accept (a reader that can
    /// refuse a longer one before allocating it should).
    fn buffer(&mut self, max: u64) -> Result<Vec<u8>, DecodeError>;
}

/// Where the fields go.
pub trait FieldWriter {
    fn unsigned(&mut self, value: u64);
    fn double(&mut self, value: f64);
    fn buffer(&mut self, bytes: &[u8]);
}

fn narrow<T: TryFrom<u64>>(value: u64) -> Result<T, DecodeError> {
    T::try_from(value).map_err(|_| BAD_NUMBER)
}

/// Reads a chain written with `encver`, validating every field, and never letting the chain's
/// memory exceed `limit` (checked before each bit array is read, and again once its length is
/// known).
pub fn decode(
    r: &mut impl FieldReader,
    encver: u32,
    limit: u64,
) -> Result<RedisBloomChain, DecodeError> {
    if encver > ENCVER {
        return Err(DecodeError("bad RedisBloom data: unknown encoding version"));
    }
    let size = r.unsigned()?;
    let nfilters = r.unsigned()?;
    let options = if encver >= 2 {
        narrow(r.unsigned()?)?
    } else {
        0
    };
    let growth = if encver >= 4 {
        narrow(r.unsigned()?)?
    } else {
        2
    };
    if nfilters == 0 || nfilters > MAX_LINKS as u64 {
        return Err(BAD_LINK_COUNT);
    }
    let mut links: Vec<Link> = Vec::with_capacity(nfilters as usize);
    let mut data_bytes = 0u64;
    for index in 0..nfilters {
        let entries = r.unsigned()?;
        let error = r.double()?;
        let hashes = r.unsigned()?;
        let bpe = r.double()?;
        let (bits, n2) = if encver == 0 {
            // Not stored: RedisBloom recomputes it (and it need not be 8·bytes).
            ((entries as f64 * bpe) as u64, 0)
        } else {
            (r.unsigned()?, r.unsigned()?)
        };
        if hashes > MAX_HASHES as u64 || n2 > 63 {
            return Err(BAD_NUMBER);
        }
        let mut params = LinkParams {
            entries,
            error,
            hashes: hashes as u32,
            bpe,
            bits,
            n2: n2 as u8,
            bytes: bits.div_ceil(8),
        };
        let within = |bytes: u64| {
            memory_bytes_for(nfilters, data_bytes.saturating_add(array_bytes(bytes)))
                .is_some_and(|m| m <= limit)
        };
        if !within(params.bytes) {
            return Err(TOO_LARGE);
        }
        let room = limit.saturating_sub(memory_bytes_for(nfilters, data_bytes).unwrap_or(u64::MAX));
        let data = r.buffer(room)?;
        params.bytes = data.len() as u64;
        if !within(params.bytes) {
            return Err(TOO_LARGE);
        }
        let link_size = r.unsigned()?;
        if is_unmade_last(index, nfilters, &params, link_size) {
            break;
        }
        params.validate()?;
        data_bytes = data_bytes.saturating_add(array_bytes(params.bytes));
        links.push(Link {
            params,
            size: link_size,
            data,
        });
    }
    RedisBloomChain::from_parts(size, options, growth, links)
}

/// Writes the chain as encver 4 (what RedisBloom 2.8 writes and reads).
pub fn encode(chain: &RedisBloomChain, w: &mut impl FieldWriter) {
    w.unsigned(chain.size());
    w.unsigned(chain.links().len() as u64);
    w.unsigned(chain.options() as u64);
    w.unsigned(chain.growth() as u64);
    for link in chain.links() {
        let p = &link.params;
        w.unsigned(p.entries);
        w.double(p.error);
        w.unsigned(p.hashes as u64);
        w.double(p.bpe);
        w.unsigned(p.bits);
        w.unsigned(p.n2 as u64);
        w.buffer(&link.data);
        w.unsigned(link.size);
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::bloom::chain::ChainError;

    /// One field, as the tests record them.
    #[derive(Clone, Debug, PartialEq)]
    pub enum Field {
        U(u64),
        D(f64),
        B(Vec<u8>),
    }

    /// A field list read back in order (what Redis does with an RDB value).
    pub struct Fields(pub std::collections::VecDeque<Field>);

    impl FieldReader for Fields {
        fn unsigned(&mut self) -> Result<u64, DecodeError> {
            match self.0.pop_front() {
                Some(Field::U(v)) => Ok(v),
                _ => Err(DecodeError("short read")),
            }
        }
        fn double(&mut self) -> Result<f64, DecodeError> {
            match self.0.pop_front() {
                Some(Field::D(v)) => Ok(v),
                _ => Err(DecodeError("short read")),
            }
        }
        fn buffer(&mut self, max: u64) -> Result<Vec<u8>, DecodeError> {
            match self.0.pop_front() {
                Some(Field::B(v)) if v.len() as u64 <= max => Ok(v),
                Some(Field::B(_)) => Err(TOO_LARGE),
                _ => Err(DecodeError("short read")),
            }
        }
    }

    impl FieldWriter for Vec<Field> {
        fn unsigned(&mut self, v: u64) {
            self.push(Field::U(v))
        }
        fn double(&mut self, v: f64) {
            self.push(Field::D(v))
        }
        fn buffer(&mut self, b: &[u8]) {
            self.push(Field::B(b.to_vec()))
        }
    }

    fn sample() -> RedisBloomChain {
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(2), u64::MAX).unwrap();
        for i in 0..45 {
            c.add(&c.hash(format!("i{i}").as_bytes()), u64::MAX)
                .unwrap();
        }
        c
    }

    fn fields(c: &RedisBloomChain) -> Vec<Field> {
        let mut out = Vec::new();
        encode(c, &mut out);
        out
    }

    fn read(f: Vec<Field>, encver: u32, limit: u64) -> Result<RedisBloomChain, DecodeError> {
        decode(&mut Fields(f.into()), encver, limit)
    }

    #[test]
    fn encver_4_round_trips() {
        let c = sample();
        assert_eq!(read(fields(&c), 4, u64::MAX), Ok(c));
    }

    /// Drops the fields an older encver does not have: options (< 2), growth (< 4), and
    /// bits/n2 per link (< 1).
    pub fn legacy_fields(c: &RedisBloomChain, encver: u32) -> Vec<Field> {
        let f = fields(c);
        let mut out = vec![f[0].clone(), f[1].clone()];
        if encver >= 2 {
            out.push(f[2].clone());
        }
        if encver >= 4 {
            out.push(f[3].clone());
        }
        for link in f[4..].chunks(8) {
            out.extend_from_slice(&link[..4]);
            if encver >= 1 {
                out.extend_from_slice(&link[4..6]);
            }
            out.extend_from_slice(&link[6..]);
        }
        out
    }

    #[test]
    fn older_encvers_load_with_their_defaults() {
        let c = sample();
        for encver in [2, 3] {
            assert_eq!(
                read(legacy_fields(&c, encver), encver, u64::MAX),
                Ok(c.clone())
            );
        }
        // encver 1: no options (so 32-bit hashing, power-of-two growth), growth 2.
        let got = read(legacy_fields(&c, 1), 1, u64::MAX).unwrap();
        assert_eq!((got.options(), got.growth()), (0, 2));
        assert_eq!(got.links(), c.links());
        // encver 0: bits recomputed from entries·bpe.
        let got = read(legacy_fields(&c, 0), 0, u64::MAX).unwrap();
        let l = &got.links()[0].params;
        assert_eq!(l.bits, (l.entries as f64 * l.bpe) as u64);
        assert_eq!(l.bytes, c.links()[0].params.bytes);
        assert!(read(fields(&c), 5, u64::MAX).is_err());
    }

    #[test]
    fn the_limit_is_checked_before_the_arrays() {
        let c = sample();
        let budget = c.memory_bytes();
        assert_eq!(read(fields(&c), 4, budget), Ok(c.clone()));
        assert_eq!(read(fields(&c), 4, budget - 1), Err(TOO_LARGE));
    }

    #[test]
    fn every_bad_field_is_refused() {
        let good = fields(&sample());
        let cases: Vec<(usize, Field)> = vec![
            (0, Field::U(1_000_000)),    // size ≠ Σ link sizes
            (1, Field::U(0)),            // no links
            (1, Field::U(1000)),         // too many links (RedisBloom 2.8.2 asserts)
            (2, Field::U(16)),           // unknown option
            (2, Field::U(1 << 33)),      // options wider than RedisBloom's unsigned
            (5, Field::D(0.0)),          // error
            (5, Field::D(f64::NAN)),     // error
            (6, Field::U(0)),            // hashes
            (6, Field::U(1 << 40)),      // hashes
            (7, Field::D(-1.0)),         // bpe inconsistent with hashes
            (8, Field::U(0)),            // bits
            (8, Field::U(129)),          // bits beyond the array
            (9, Field::U(8)),            // 2^n2 beyond the array
            (9, Field::U(64)),           // n2
            (10, Field::B(vec![0; 15])), // array shorter than bits
            (10, Field::U(0)),           // wrong kind of field
        ];
        for (at, field) in cases {
            let mut f = good.clone();
            f[at] = field.clone();
            assert!(read(f, 4, u64::MAX).is_err(), "field {at} = {field:?}");
        }
        for cut in 0..good.len() {
            assert!(
                read(good[..cut].to_vec(), 4, u64::MAX).is_err(),
                "cut at {cut}"
            );
        }
    }

    /// `EXPANSION 4294967296` (kept as 0 in RedisBloom's 32 bits): the chain loads, answers
    /// for its items, and refuses the add that would need a second link, as RedisBloom does.
    #[test]
    fn growth_zero_loads_and_cannot_grow() {
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(0), u64::MAX).unwrap();
        let loaded = read(fields(&c), 4, u64::MAX).unwrap();
        assert_eq!((loaded.growth(), loaded.expansion()), (0, Some(0)));
        let mut added = 0;
        let refused =
            (0..100).find_map(
                |i| match c.add(&c.hash(format!("i{i}").as_bytes()), u64::MAX) {
                    Ok(new) => {
                        added += u64::from(new);
                        None
                    }
                    Err(e) => Some(e),
                },
            );
        assert_eq!((refused, added), (Some(ChainError::CannotGrow), 10));
        assert_eq!(read(fields(&c), 4, u64::MAX), Ok(c));
    }

    /// The link RedisBloom appends when it cannot make one (every field 0, no bit array, no
    /// items) is dropped when it is last, where RedisBloom leaves it; anywhere else, or alone,
    /// it is refused.
    #[test]
    fn a_last_link_redisbloom_failed_to_make_is_dropped() {
        let c = sample();
        let unmade = [
            Field::U(0),
            Field::D(0.0),
            Field::U(0),
            Field::D(0.0),
            Field::U(0),
            Field::U(0),
            Field::B(Vec::new()),
            Field::U(0),
        ];
        let links = c.links().len() as u64;
        let with_unmade = |at: usize| {
            let mut f = fields(&c);
            f[1] = Field::U(links + 1);
            let place = 4 + 8 * at;
            f.splice(place..place, unmade.iter().cloned());
            f
        };
        assert_eq!(
            read(with_unmade(links as usize), 4, u64::MAX),
            Ok(c.clone())
        );
        assert!(read(with_unmade(0), 4, u64::MAX).is_err());
        let mut alone = vec![Field::U(0), Field::U(1), Field::U(5), Field::U(2)];
        alone.extend(unmade.iter().cloned());
        assert!(read(alone, 4, u64::MAX).is_err());
    }
}
