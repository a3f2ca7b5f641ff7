//! Helpers shared by the operations tests (tests/ops_*.rs): a mixed workload over both types,
//! digests of every key, hand-built counter encodings.

use super::*;
use redis::Connection;
use std::collections::BTreeMap;

/// `DEBUG DIGEST-VALUE` of every key of the module's types.
pub fn digests(c: &mut Connection) -> BTreeMap<String, String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    let mut out = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(c).unwrap();
        if kind.starts_with("lcbloom") {
            let d = digest(c, &key);
            out.insert(key, d);
        }
    }
    out
}

/// The `lcbloom_*` lines of `INFO lcbloom`.
pub fn info_lcbloom(c: &mut Connection) -> Vec<String> {
    let info: String = redis::cmd("INFO").arg("lcbloom").query(c).unwrap();
    info.lines()
        .filter(|l| l.starts_with("lcbloom_"))
        .map(str::to_string)
        .collect()
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A counter's encoding (src/lc/codec.rs) before its body: version 1, hash scheme 1, `kind`.
fn encoding_header(kind: u8, capacity: u64, rate: f64, m: u64) -> Vec<u8> {
    let mut out = vec![1u8, 1, kind];
    put_varint(&mut out, capacity);
    out.extend(rate.to_le_bytes());
    put_varint(&mut out, m);
    out
}

/// A dense counter (kind 1) of `bytes`·8 bits filled with pseudo-random bits (fixed seed), so
/// that its encoding is about `bytes` long.
pub fn random_dense_encoding(bytes: usize, seed: u64) -> Vec<u8> {
    let mut out = encoding_header(1, 100_000_000, 0.01, bytes as u64 * 8);
    let mut x = seed | 1;
    out.reserve(bytes);
    for _ in 0..bytes.div_ceil(8) {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend(x.to_le_bytes());
    }
    out.truncate(out.len() - (bytes.div_ceil(8) * 8 - bytes));
    out
}

/// The shell of a bitmap counter: kind 2 (set positions) with no positions.
pub fn empty_bitmap_encoding(capacity: u64, rate: f64, m: u64) -> Vec<u8> {
    let mut out = encoding_header(2, capacity, rate, m);
    out.push(0);
    out
}

/// A bitmap counter with every bit set: kind 3 (zero positions) with no positions.
pub fn full_bitmap_encoding(capacity: u64, rate: f64, m: u64) -> Vec<u8> {
    let mut out = encoding_header(3, capacity, rate, m);
    out.push(0);
    out
}

/// Module defaults unlike the built-in ones, and much lower limits: 256 KiB per key, 1 KiB read
/// by a union (the workload's merges read more).
pub const OTHER_DEFAULTS: &[(&str, &str)] = &[
    ("bf-error-rate", "0.2"),
    ("bf-initial-size", "7"),
    ("bf-expansion-factor", "4"),
    ("bf-layout", "blocked"),
    ("bf-seed", "12345"),
    ("lc-error-rate", "0.1"),
    ("lc-capacity", "99"),
    ("max-memory-per-key", "262144"),
    ("lc-max-union-bytes", "1024"),
];

/// Writes of every kind, most relying on the module defaults, some making values of several
/// MB (above `OTHER_DEFAULTS`' limit): creates, adds on missing keys, MADD/INSERT, scale-outs,
/// merges, LOADCHUNK of both types (LC in whole and in pieces). Returns nothing: compare
/// `digests` afterwards.
pub fn mixed_workload(c: &mut Connection) {
    ok(c, &["BF.ADD", "bf:add", "a"]);
    add_many(c, "BF.MADD", "bf:madd", "m", 3_000); // scales out with the defaults
    ok(c, &["BF.INSERT", "bf:insert", "ITEMS", "x", "y", "z"]);
    ok(
        c,
        &[
            "BF.INSERT",
            "bf:opts",
            "ERROR",
            "0.001",
            "NONSCALING",
            "ITEMS",
            "x",
        ],
    );
    ok(c, &["BF.RESERVE", "bf:reserve", "0.01", "50"]); // expansion from the defaults
    add_many(c, "BF.MADD", "bf:reserve", "r", 500);
    // ~4 MB, then a scale-out to ~12 MB: above the replica's limit.
    ok(
        c,
        &[
            "BF.RESERVE",
            "bf:large",
            "0.001",
            "2000000",
            "EXPANSION",
            "2",
        ],
    );
    add_many(c, "BF.MADD", "bf:large", "l", 2_000);
    ok(c, &["BF.ADD", "bf:add", "a"]); // changes nothing
    scandump_into(c, "bf:large", "bf:loaded");
    add_many(c, "BF.MADD", "bf:loaded", "after", 100);

    ok(c, &["LC.ADD", "lc:add", "a", "b"]);
    add_many(c, "LC.ADD", "lc:bitmap", "b", 2_000);
    ok(c, &["LC.RESERVE", "lc:reserve", "0.05", "1000"]);
    add_many(c, "LC.ADD", "lc:reserve", "r", 300);
    // A 546 KB bitmap: above the replica's limit.
    ok(c, &["LC.RESERVE", "lc:large", "0.001", "20000000"]);
    add_many(c, "LC.ADD", "lc:large", "l", 10_000);
    ok(c, &["LC.MERGE", "lc:merged", "lc:add", "lc:bitmap"]);
    ok(c, &["LC.MERGE", "lc:bitmap", "lc:add"]);
    ok(c, &["LC.MERGE", "lc:nothing", "lc:missing"]); // creates nothing
    let dense = random_dense_encoding(3 << 20, 42);
    redis::cmd("LC.LOADCHUNK")
        .arg("lc:loaded")
        .arg(dense)
        .exec(c)
        .unwrap();
    // The chunked form, as an AOF rewrite writes it: a shell, then the bitmap in pieces.
    let m = 2_000_003u64; // padding bits in the last byte
    redis::cmd("LC.LOADCHUNK")
        .arg("lc:pieces")
        .arg(empty_bitmap_encoding(5, 0.5, m))
        .exec(c)
        .unwrap();
    let pieces = random_dense_encoding(m.div_ceil(8) as usize, 7);
    let mut pieces = pieces[pieces.len() - m.div_ceil(8) as usize..].to_vec();
    *pieces.last_mut().unwrap() &= 0b0000_0111;
    for (i, piece) in pieces.chunks(100_000).enumerate() {
        let end = i * 100_000 + piece.len();
        redis::cmd("LC.LOADCHUNK")
            .arg("lc:pieces")
            .arg(end + 1)
            .arg(piece)
            .exec(c)
            .unwrap();
    }
    add_many(c, "LC.ADD", "lc:pieces", "p", 10);
}
