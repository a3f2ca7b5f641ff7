//! Randomness and payload helpers for the fuzzing tests: a seedable RNG, byte mutations
//! and DUMP payload framing with its CRC-64.

/// The number in the environment variable `var`, if it is set to one.
pub fn env_number<T: std::str::FromStr>(var: &str) -> Option<T> {
    std::env::var(var).ok().and_then(|s| s.parse().ok())
}

/// xorshift64*: tiny, seedable, good enough to pick mutations.
pub struct Rng(pub u64);

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Seeded from the environment variable `var` when it holds a number, else from `fixed`:
    /// the tests run with their fixed seeds, and other seeds can be explored by hand.
    pub fn seeded_from_env(var: &str, fixed: u64) -> Self {
        let seed = env_number(var).unwrap_or(fixed);
        if seed != fixed {
            println!("{var}={seed}");
        }
        Rng::seeded(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Values that sit on boundaries decoders check.
const INTERESTING: [u64; 12] = [
    0,
    1,
    2,
    7,
    8,
    63,
    64,
    0x7f,
    0x80,
    u32::MAX as u64,
    1 << 48,
    u64::MAX,
];

/// One to four random edits of `input`: bit flips, byte writes, inserts, deletes, truncation,
/// boundary values, splices from another corpus entry, random tails.
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(8) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            1 if at < bytes.len() => bytes[at] = rng.next() as u8,
            2 => bytes.insert(at, rng.next() as u8),
            3 if at < bytes.len() => {
                bytes.remove(at);
            }
            4 => bytes.truncate(at),
            5 => {
                let width = 1 << rng.below(4);
                let value = INTERESTING[rng.below(INTERESTING.len())].to_le_bytes();
                for (i, b) in value[..width].iter().enumerate() {
                    if let Some(slot) = bytes.get_mut(at + i) {
                        *slot = *b;
                    }
                }
            }
            6 if !corpus.is_empty() => {
                let other = rng.pick(corpus);
                let from = rng.below(other.len());
                let len = rng.below(other.len() - from + 1);
                bytes.splice(at..at, other[from..from + len].iter().copied());
            }
            _ => {
                let len = rng.below(16);
                bytes.extend(rng.bytes(len));
            }
        }
    }
    bytes
}

/// CRC-64/Jones (reflected, polynomial 0xad93d23594c935a9), as Redis checks DUMP payloads.
pub fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Splits a DUMP payload into its value bytes and its 2-byte RDB version.
pub fn split_dump(payload: &[u8]) -> (Vec<u8>, [u8; 2]) {
    let n = payload.len();
    assert!(n > 10, "a DUMP payload ends with version and CRC");
    (
        payload[..n - 10].to_vec(),
        [payload[n - 10], payload[n - 9]],
    )
}

/// A DUMP payload for `value`: value, RDB version, CRC-64 of both, little-endian.
pub fn dump_payload(value: &[u8], version: [u8; 2]) -> Vec<u8> {
    let mut out = value.to_vec();
    out.extend_from_slice(&version);
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Bytes before a module value's own data in a DUMP: type byte, 0x81, 8-byte module id.
pub const MODULE_FRAME: usize = 10;

/// The strings of a module value in an uncompressed DUMP (`rdbcompression no`): after the
/// frame, each is opcode 5 (a string), its RDB length and its bytes; opcode 0 ends the value.
pub fn module_strings(value: &[u8]) -> Vec<&[u8]> {
    let mut at = MODULE_FRAME;
    let mut strings = Vec::new();
    loop {
        match value[at] {
            0 => {
                assert_eq!(at + 1, value.len(), "the EOF opcode ends the value");
                return strings;
            }
            5 => at += 1,
            op => panic!("module opcode {op} at {at}"),
        }
        let (len, width) = match value[at] >> 6 {
            0 => (u64::from(value[at] & 0x3f), 1),
            1 => (
                u64::from(value[at] & 0x3f) << 8 | u64::from(value[at + 1]),
                2,
            ),
            _ if value[at] == 0x80 => {
                let b: [u8; 4] = value[at + 1..at + 5].try_into().unwrap();
                (u64::from(u32::from_be_bytes(b)), 5)
            }
            _ if value[at] == 0x81 => {
                let b: [u8; 8] = value[at + 1..at + 9].try_into().unwrap();
                (u64::from_be_bytes(b), 9)
            }
            _ => panic!("encoded string at {at}: not written uncompressed"),
        };
        at += width;
        strings.push(&value[at..at + len as usize]);
        at += len as usize;
    }
}

/// A module value of these strings after `frame` (what `module_strings` reads).
pub fn module_value(frame: &[u8], strings: &[&[u8]]) -> Vec<u8> {
    let mut value = frame.to_vec();
    for s in strings {
        value.push(5);
        value.push(0x81);
        value.extend_from_slice(&(s.len() as u64).to_be_bytes());
        value.extend_from_slice(s);
    }
    value.push(0);
    value
}

/// A mutation of a corpus entry (DUMP values of module types) as a DUMP payload with a valid
/// CRC. Three times in four the type byte and module id stay intact, so that mutations reach
/// the module's decoder rather than Redis's own framing checks.
pub fn mutated_payload(rng: &mut Rng, corpus: &[Vec<u8>], version: [u8; 2]) -> Vec<u8> {
    let base = rng.pick(corpus).clone();
    let mut value = mutate(rng, &base, corpus);
    if rng.below(4) != 0 && value.len() >= MODULE_FRAME {
        value[..MODULE_FRAME].copy_from_slice(&base[..MODULE_FRAME]);
    }
    dump_payload(&value, version)
}
