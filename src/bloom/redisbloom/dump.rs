//! The value part of a `DUMP` payload of a RedisBloom filter, the form `MIGRATE`/`RESTORE`
//! carry (the trailing RDB version and CRC-64 are Redis's framing, not handled here):
//!
//! `07` (module type) ‖ module id as an RDB length (`81` + u64 big-endian; the name
//! `MBbloom--` in 54 bits, encver in the low 10) ‖ the fields of `rdb.rs`, each an opcode
//! (2 unsigned → RDB length, 4 double → 8 bytes LE, 5 string → RDB string) ‖ `00` (EOF).
//!
//! RDB lengths: `00vvvvvv`, `01vvvvvv vvvvvvvv`, `80` + u32 BE, `81` + u64 BE. RDB strings: a
//! length and the bytes, or `C0`/`C1`/`C2` (an int8/16/32 LE, meaning its decimal text) or
//! `C3` + clen + ulen + LZF data (Redis compresses strings over 20 bytes). Redis itself reads
//! these in a module's `rdb_load`; this codec exists so the same decoder can be fed bytes
//! (tests, fuzzing, and checking what a RedisBloom server sent).

use super::chain::RedisBloomChain;
use super::rdb::{self, FieldReader, FieldWriter};
use super::{DecodeError, TOO_LARGE};
use crate::core::chunks::Reader;

/// RedisBloom's Bloom filter type name.
pub const TYPE_NAME: &str = "MBbloom--";
const MODULE_TYPE: u8 = 7;
const OP_EOF: u64 = 0;
const OP_UINT: u64 = 2;
const OP_DOUBLE: u64 = 4;
const OP_STRING: u64 = 5;
const BAD: DecodeError = DecodeError("bad RedisBloom data: malformed DUMP value");

/// The 64-bit module id Redis writes for a type `name` (9 characters) at `encver`.
pub fn module_id(name: &str, encver: u32) -> u64 {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = name.bytes().fold(0u64, |id, c| {
        let index = CHARSET
            .iter()
            .position(|&x| x == c)
            .expect("a type name character");
        (id << 6) | index as u64
    });
    (id << 10) | (encver as u64 & 0x3ff)
}

/// Reads fields from a DUMP value's bytes.
pub struct DumpReader<'a> {
    input: Reader<'a>,
}

impl<'a> DumpReader<'a> {
    pub fn new(value: &'a [u8]) -> Self {
        Self {
            input: Reader::new(value, BAD),
        }
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        self.input.byte()
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        self.input.take(usize::try_from(n).map_err(|_| BAD)?)
    }

    /// An RDB length, or the special-encoding tag of a string (`Err(Some(tag))`).
    fn length_or_tag(&mut self) -> Result<Result<u64, u8>, DecodeError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Ok((first & 0x3f) as u64),
            1 => Ok((((first & 0x3f) as u64) << 8) | self.byte()? as u64),
            3 => Err(first & 0x3f),
            _ => match first {
                0x80 => Ok(self.input.u32_be()? as u64),
                0x81 => Ok(self.input.u64_be()?),
                _ => return Err(BAD),
            },
        })
    }

    fn length(&mut self) -> Result<u64, DecodeError> {
        self.length_or_tag()?.map_err(|_| BAD)
    }

    fn opcode(&mut self, want: u64) -> Result<(), DecodeError> {
        if self.length()? == want {
            Ok(())
        } else {
            Err(BAD)
        }
    }
}

impl FieldReader for DumpReader<'_> {
    fn unsigned(&mut self) -> Result<u64, DecodeError> {
        self.opcode(OP_UINT)?;
        self.length()
    }

    fn double(&mut self) -> Result<f64, DecodeError> {
        self.opcode(OP_DOUBLE)?;
        self.input.f64()
    }

    fn buffer(&mut self, max: u64) -> Result<Vec<u8>, DecodeError> {
        self.opcode(OP_STRING)?;
        match self.length_or_tag()? {
            Ok(len) => Ok(self.take(len)?.to_vec()),
            Err(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => Ok((self.input.u16()? as i16).to_string().into_bytes()),
            Err(2) => Ok((self.input.u32()? as i32).to_string().into_bytes()),
            Err(3) => {
                let clen = self.length()?;
                let ulen = self.length()?;
                if ulen > max {
                    return Err(TOO_LARGE);
                }
                lzf_decompress(self.take(clen)?, ulen)
            }
            Err(_) => Err(BAD),
        }
    }
}

/// LZF decompression (the format of Marc Lehmann's liblzf, which Redis uses) into exactly
/// `ulen` bytes.
fn lzf_decompress(mut input: &[u8], ulen: u64) -> Result<Vec<u8>, DecodeError> {
    let ulen = usize::try_from(ulen).map_err(|_| BAD)?;
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve_exact(ulen).map_err(|_| BAD)?;
    while let Some((&ctrl, rest)) = input.split_first() {
        input = rest;
        if ctrl < 32 {
            // A literal run of ctrl + 1 bytes.
            let n = ctrl as usize + 1;
            if n > input.len() || out.len() + n > ulen {
                return Err(BAD);
            }
            out.extend_from_slice(&input[..n]);
            input = &input[n..];
        } else {
            // A back reference: length (ctrl >> 5) + 2 (7 means one more length byte).
            let mut n = (ctrl >> 5) as usize;
            if n == 7 {
                let (&more, rest) = input.split_first().ok_or(BAD)?;
                input = rest;
                n += more as usize;
            }
            n += 2;
            let (&low, rest) = input.split_first().ok_or(BAD)?;
            input = rest;
            let back = (((ctrl & 0x1f) as usize) << 8) + low as usize + 1;
            if back > out.len() || out.len() + n > ulen {
                return Err(BAD);
            }
            let start = out.len() - back;
            for i in 0..n {
                out.push(out[start + i]);
            }
        }
    }
    if out.len() != ulen {
        return Err(BAD);
    }
    Ok(out)
}

/// Writes fields as a DUMP value does (plain strings; `RESTORE` accepts them).
#[derive(Default)]
pub struct DumpWriter {
    pub out: Vec<u8>,
}

impl DumpWriter {
    fn length(&mut self, v: u64) {
        if v < 1 << 6 {
            self.out.push(v as u8);
        } else if v < 1 << 14 {
            self.out
                .extend_from_slice(&[0x40 | (v >> 8) as u8, v as u8]);
        } else if v <= u32::MAX as u64 {
            self.out.push(0x80);
            self.out.extend_from_slice(&(v as u32).to_be_bytes());
        } else {
            self.out.push(0x81);
            self.out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

impl FieldWriter for DumpWriter {
    fn unsigned(&mut self, v: u64) {
        self.length(OP_UINT);
        self.length(v);
    }
    fn double(&mut self, v: f64) {
        self.length(OP_DOUBLE);
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn buffer(&mut self, bytes: &[u8]) {
        self.length(OP_STRING);
        self.length(bytes.len() as u64);
        self.out.extend_from_slice(bytes);
    }
}

/// Decodes a DUMP value of type `MBbloom--` (encvers 0–4), with the rdb.rs validation and
/// `limit`, requiring the EOF opcode right after the fields and nothing after it.
pub fn decode_value(value: &[u8], limit: u64) -> Result<RedisBloomChain, DecodeError> {
    let mut r = DumpReader::new(value);
    if r.byte()? != MODULE_TYPE || r.byte()? != 0x81 {
        return Err(BAD);
    }
    let id = u64::from_be_bytes(r.take(8)?.try_into().expect("8 bytes"));
    if id & !0x3ff != module_id(TYPE_NAME, 0) {
        return Err(DecodeError(
            "bad RedisBloom data: not a RedisBloom Bloom filter",
        ));
    }
    let chain = rdb::decode(&mut r, (id & 0x3ff) as u32, limit)?;
    if r.length()? != OP_EOF || r.input.remaining() != 0 {
        return Err(BAD);
    }
    Ok(chain)
}

/// Encodes a chain as the DUMP value RedisBloom 2.8 writes (encver 4).
pub fn encode_value(chain: &RedisBloomChain) -> Vec<u8> {
    let mut w = DumpWriter::default();
    w.out.push(MODULE_TYPE);
    w.out.push(0x81);
    w.out
        .extend_from_slice(&module_id(TYPE_NAME, rdb::ENCVER).to_be_bytes());
    rdb::encode(chain, &mut w);
    w.length(OP_EOF);
    w.out
}

/// A DUMP value for an older encver (0–3), as the writers of that time laid it out: fields
/// the version lacks are left out. Used to build legacy test payloads.
pub fn encode_value_legacy(chain: &RedisBloomChain, encver: u32) -> Vec<u8> {
    struct Skip<'a> {
        w: &'a mut DumpWriter,
        encver: u32,
        index: usize,
    }
    impl FieldWriter for Skip<'_> {
        fn unsigned(&mut self, v: u64) {
            // Field positions: 0 size, 1 nfilters, 2 options, 3 growth, then 8 per link with
            // bits and n2 at 4 and 5 of each.
            let i = self.index;
            self.index += 1;
            let keep = match i {
                0 | 1 => true,
                2 => self.encver >= 2,
                3 => self.encver >= 4,
                _ => !matches!((i - 4) % 8, 4 | 5) || self.encver >= 1,
            };
            if keep {
                self.w.unsigned(v);
            }
        }
        fn double(&mut self, v: f64) {
            self.index += 1;
            self.w.double(v);
        }
        fn buffer(&mut self, bytes: &[u8]) {
            self.index += 1;
            self.w.buffer(bytes);
        }
    }
    let mut w = DumpWriter::default();
    w.out.push(MODULE_TYPE);
    w.out.push(0x81);
    w.out
        .extend_from_slice(&module_id(TYPE_NAME, encver).to_be_bytes());
    rdb::encode(
        chain,
        &mut Skip {
            w: &mut w,
            encver,
            index: 0,
        },
    );
    w.length(OP_EOF);
    w.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::redisbloom::hex;

    #[test]
    fn module_id_of_mbbloom() {
        assert_eq!(module_id(TYPE_NAME, 4), 0x3016e5a289bef804);
    }

    #[test]
    fn golden_payload_decodes_and_reencodes_byte_for_byte() {
        // `BF.RESERVE k 0.05 7` on RedisBloom 2.8.2 (redisbloom-format.md §5), without the
        // trailing rdbver and CRC.
        let value = hex("07813016e5a289bef80402000201020502020207049a9999999999993f0206040bd81f7830b61e400240400200050800000000000000000200");
        let value = [value, vec![0]].concat();
        let chain = decode_value(&value, u64::MAX).unwrap();
        assert_eq!(
            chain,
            RedisBloomChain::reserve(0.05, 7, Some(2), u64::MAX).unwrap()
        );
        assert_eq!(encode_value(&chain), value);
        assert!(decode_value(&value[..value.len() - 1], u64::MAX).is_err());
        assert!(decode_value(&[value.clone(), vec![0]].concat(), u64::MAX).is_err());
    }

    #[test]
    fn legacy_values_decode() {
        let mut c = RedisBloomChain::reserve(0.01, 20, Some(2), u64::MAX).unwrap();
        for i in 0..30 {
            c.add(&c.hash(format!("{i}").as_bytes()), u64::MAX).unwrap();
        }
        for encver in 1..=3 {
            let got = decode_value(&encode_value_legacy(&c, encver), u64::MAX).unwrap();
            assert_eq!(got.links(), c.links(), "encver {encver}");
        }
        let got = decode_value(&encode_value_legacy(&c, 0), u64::MAX).unwrap();
        assert_eq!(got.size(), c.size());
        assert_eq!(encode_value_legacy(&c, 4), encode_value(&c));
    }

    #[test]
    fn lzf_and_integer_strings() {
        // "abcabcabcabc" compressed: literal "abc", then a back reference of 9 bytes, 3 back.
        let compressed = [2, b'a', b'b', b'c', (7 << 5), 0, 2];
        assert_eq!(lzf_decompress(&compressed, 12).unwrap(), b"abcabcabcabc");
        assert!(lzf_decompress(&compressed, 11).is_err());
        assert!(lzf_decompress(&[0x20, 5], 10).is_err());
        let mut r = DumpReader::new(&[5, 0xc0, 0xfb, 5, 0xc1, 0x39, 0x30]);
        assert_eq!(r.buffer(100).unwrap(), b"-5");
        assert_eq!(r.buffer(100).unwrap(), b"12345");
    }

    mod properties {
        use super::super::super::chain::zeroed;
        use super::super::super::link::{Link, LinkParams};
        use super::super::super::scandump;
        use super::*;
        use proptest::prelude::*;

        /// A chain as RedisBloom makes one (any of the option sets it ever used), after adds.
        fn arb_chain() -> impl Strategy<Value = RedisBloomChain> {
            (
                prop::sample::select(vec![0.5, 0.1, 0.01, 0.001]),
                1u64..200,
                prop::sample::select(vec![0u32, 1, 4, 5, 13]),
                1u32..5,
                0u32..600,
            )
                .prop_map(|(error, capacity, options, growth, adds)| {
                    let first = if options & 8 == 0 { error * 0.5 } else { error };
                    let params = LinkParams::init(capacity, first, options).unwrap();
                    let link = Link {
                        params,
                        size: 0,
                        data: zeroed(params.bytes).unwrap(),
                    };
                    let mut c =
                        RedisBloomChain::from_parts(0, options, growth, vec![link]).unwrap();
                    for i in 0..adds {
                        if c.add(&c.hash(&i.to_le_bytes()), 1 << 24).is_err() {
                            break;
                        }
                    }
                    c
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]

            #[test]
            fn dump_value_round_trips(c in arb_chain()) {
                let value = encode_value(&c);
                let back = decode_value(&value, u64::MAX).unwrap();
                prop_assert_eq!(&back, &c);
                prop_assert_eq!(encode_value(&back), value);
                for encver in 1..=3 {
                    let old = decode_value(&encode_value_legacy(&c, encver), u64::MAX).unwrap();
                    prop_assert_eq!(old.links(), c.links());
                }
            }

            #[test]
            fn scandump_round_trips(c in arb_chain()) {
                let mut copy = scandump::decode_header(&scandump::encode_header(&c), u64::MAX).unwrap();
                let mut it = 1;
                while let Some((next, data)) = scandump::chunk(&c, it) {
                    scandump::load_chunk(&mut copy, next as i64, data).unwrap();
                    it = next;
                }
                prop_assert_eq!(copy, c);
            }

            #[test]
            fn members_stay_members_and_size_counts_new_items(c in arb_chain(), extra in 0u32..300) {
                let mut c = c;
                let mut added = 0;
                for i in 0..extra {
                    let h = c.hash(format!("extra{i}").as_bytes());
                    let before = c.size();
                    match c.add(&h, 1 << 24) {
                        Ok(new) => {
                            added += new as u64;
                            prop_assert!(c.contains(&h));
                            prop_assert_eq!(c.size(), before + new as u64);
                        }
                        Err(_) => break,
                    }
                }
                prop_assert_eq!(c.links().iter().map(|l| l.size).sum::<u64>(), c.size());
                prop_assert!(added <= extra as u64);
            }

            #[test]
            fn arbitrary_values_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
                let mut value = encode_value(&RedisBloomChain::reserve(0.1, 3, Some(2), u64::MAX).unwrap());
                let cut = bytes.len().min(value.len());
                value[..cut].copy_from_slice(&bytes[..cut]);
                let _ = decode_value(&value, 1 << 20);
                let _ = decode_value(&bytes, 1 << 20);
                let _ = scandump::decode_header(&bytes, 1 << 20);
            }
        }
    }
}
