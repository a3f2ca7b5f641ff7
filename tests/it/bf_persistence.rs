//! Bloom filters survive every way Redis moves values: DEBUG RELOAD, restart from the RDB file,
//! DUMP/RESTORE, COPY, SCANDUMP/LOADCHUNK, AOF (replayed commands and rewrite), replication.
//! Identity is checked with DEBUG DIGEST-VALUE, which digests the full encoding.
use crate::common::fixtures::unhex;
use crate::common::fuzz::{
    crc64, dump_payload, module_strings, module_value, split_dump, MODULE_FRAME,
};
use crate::common::*;
use redis::Value;

/// Adds `n` items named `{prefix}{i}` in batches.
fn fill(conn: &mut redis::Connection, key: &str, prefix: &str, n: usize) {
    for start in (0..n).step_by(1000) {
        let mut c = redis::cmd("BF.MADD");
        c.arg(key);
        for i in start..n.min(start + 1000) {
            c.arg(format!("{prefix}{i}"));
        }
        // Non-scaling filters may fill up; the reply is not the point here.
        let _: redis::RedisResult<Value> = redis::ConnectionLike::req_command(conn, &c);
    }
}

/// Adds 2,000 new items to `key` and finds each: a loaded bit array takes writes where its
/// words are.
fn takes_writes(conn: &mut redis::Connection, key: &str) {
    fill(conn, key, "later", 2_000);
    let found: Vec<bool> = redis::cmd("BF.MEXISTS")
        .arg(key)
        .arg((0..2_000).map(|i| format!("later{i}")).collect::<Vec<_>>())
        .query(conn)
        .unwrap();
    assert!(found.iter().all(|&f| f), "{key}");
}

/// A set of filters of every shape, and their digests.
fn make_filters(conn: &mut redis::Connection) -> Vec<(String, String)> {
    // One fixed seed, not 0 (so that the seeded encoding travels every path) and not random:
    // the tests ask whether items outside "scaled" are absent, which under a random seed is
    // a false positive in about one run in a hundred.
    ok(conn, &["CONFIG", "SET", "lcbloom.bf-seed", "7"]);
    ok(
        conn,
        &["BF.RESERVE", "scaled", "0.01", "10", "EXPANSION", "2"],
    );
    fill(conn, "scaled", "s", 2_000);
    ok(
        conn,
        &["BF.RESERVE", "fixed", "0.001", "1000", "NONSCALING"],
    );
    fill(conn, "fixed", "f", 1_200);
    ok(conn, &["BF.ADD", "tiny", "x"]);
    ok(conn, &["BF.RESERVE", "empty", "0.5", "1"]);
    // Sparse sub-filters then a bit array; a bit array alone.
    ok(conn, &["BF.RESERVE", "mixed", "0.01", "5000"]);
    fill(conn, "mixed", "m", 5_300);
    ok(conn, &["BF.RESERVE", "bits", "0.01", "20000", "NONSCALING"]);
    fill(conn, "bits", "b", 500);
    // 34.3 MiB of bits: a head of two 16 MiB segments (one 32 MiB allocation, saved as one
    // string) and a shorter segment (src/bloom/words.rs).
    ok(
        conn,
        &["BF.RESERVE", "segmented", "0.01", "30000000", "NONSCALING"],
    );
    fill(conn, "segmented", "g", 3_000);
    [
        "scaled",
        "fixed",
        "tiny",
        "empty",
        "mixed",
        "bits",
        "segmented",
    ]
    .iter()
    .map(|k| (k.to_string(), digest(conn, k)))
    .collect()
}

fn check_filters(conn: &mut redis::Connection, expected: &[(String, String)]) {
    for (key, d) in expected {
        assert_eq!(&digest(conn, key), d, "digest of {key}");
    }
    assert_eq!(ok(conn, &["BF.EXISTS", "scaled", "s1999"]), Value::Int(1));
    assert_eq!(ok(conn, &["BF.CARD", "fixed"]), Value::Int(1000));
    assert_eq!(
        ok(conn, &["BF.INFO", "fixed", "EXPANSION"]),
        Value::Array(vec![Value::Nil])
    );
}

#[test]
fn debug_reload_and_restart_from_rdb() {
    let mut server = Server::start();
    let mut c = server.conn();
    let digests = make_filters(&mut c);
    assert_ne!(digests[0].1, digests[1].1);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    check_filters(&mut c, &digests);
    ok(&mut c, &["SAVE"]);
    server.restart();
    let mut c = server.conn();
    check_filters(&mut c, &digests);
    // The loaded filter keeps scaling.
    fill(&mut c, "scaled", "more", 3_000);
    assert_eq!(
        ok(&mut c, &["BF.EXISTS", "scaled", "more2999"]),
        Value::Int(1)
    );
    // Bit arrays that kept the blocks Redis loaded their data into (a whole small array, both
    // segments of a large one) take writes there.
    for key in ["bits", "segmented"] {
        takes_writes(&mut c, key);
    }
}

/// A filter loaded with 1,024 sub-filters (the most a saved filter may have) refuses to grow
/// past them, so that `DUMP`, `DEBUG RELOAD` and a restart still load it. It used to grow to
/// 1,025, which no load took: the RDB of the whole server then failed to load.
#[test]
fn filters_never_grow_past_what_loads() {
    let mut server = Server::start();
    let mut c = server.conn();
    let count = 1_024u32;
    // Version 1 header: rate 0.01, expansion 2, no items; each sub-filter of capacity 1 a
    // 64-bit array with 64 hashes.
    let mut header = b"LCBF\x01\x01\x00\x00".to_vec();
    header.extend(0.01f64.to_le_bytes());
    header.extend(2u32.to_le_bytes());
    header.extend(count.to_le_bytes());
    header.extend(0u64.to_le_bytes());
    for _ in 0..count {
        header.extend(1u64.to_le_bytes());
        header.extend((0.001 / f64::from(count)).to_le_bytes());
        header.extend(64u64.to_le_bytes());
        header.extend(64u32.to_le_bytes());
        header.extend(0u32.to_le_bytes());
        header.extend(0u64.to_le_bytes());
    }
    let loaded = redis::cmd("BF.LOADCHUNK")
        .arg("f")
        .arg(1)
        .arg(header)
        .query::<String>(&mut c);
    assert_eq!(loaded.unwrap(), "OK");
    // The last sub-filter takes one item; the next would need a 1,025th.
    assert_eq!(ok(&mut c, &["BF.ADD", "f", "a"]), Value::Int(1));
    let refused = redis::cmd("BF.ADD").arg(&["f", "b"]).query::<Value>(&mut c);
    assert!(
        err_text(refused).contains("most sub-filters"),
        "a 1,025th sub-filter was made"
    );
    let filters = ok(&mut c, &["BF.INFO", "f", "FILTERS"]);
    assert_eq!(filters, Value::Array(vec![Value::Int(1_024)]));
    let before = digest(&mut c, "f");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("f").query(&mut c).unwrap();
    redis::cmd("RESTORE")
        .arg("g")
        .arg(0)
        .arg(dump)
        .exec(&mut c)
        .unwrap();
    assert_eq!(digest(&mut c, "g"), before);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(digest(&mut c, "f"), before);
    ok(&mut c, &["SAVE"]);
    server.restart();
    let mut c = server.conn();
    assert_eq!(digest(&mut c, "f"), before);
    assert_eq!(ok(&mut c, &["BF.EXISTS", "f", "a"]), Value::Int(1));
}

#[test]
fn dump_restore_copy_and_memory_usage() {
    let server = Server::start();
    let mut c = server.conn();
    let digests = make_filters(&mut c);
    for (key, d) in &digests {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut c).unwrap();
        let restored = format!("{key}-restored");
        redis::cmd("RESTORE")
            .arg(&restored)
            .arg(0)
            .arg(dump)
            .exec(&mut c)
            .unwrap();
        assert_eq!(&digest(&mut c, &restored), d);
        let copy = format!("{key}-copy");
        assert_eq!(ok(&mut c, &["COPY", key, &copy]), Value::Int(1));
        assert_eq!(&digest(&mut c, &copy), d);
    }
    // A segmented bit array is copied and restored as segments: the same cost (BF.INFO's
    // Size: MEMORY USAGE would add the key names' lengths), whatever the allocator.
    let size = |c: &mut redis::Connection, k: &str| match ok(c, &["BF.INFO", k, "SIZE"]) {
        Value::Array(v) => match v[..] {
            [Value::Int(n)] => n,
            _ => panic!("{v:?}"),
        },
        v => panic!("{v:?}"),
    };
    let original = size(&mut c, "segmented");
    assert!(original > 34 << 20, "{original}");
    for key in ["segmented-copy", "segmented-restored"] {
        let copied = size(&mut c, key);
        assert_eq!(copied, original, "{key}");
    }
    // A copy is deep: changing it leaves the original alone.
    ok(&mut c, &["BF.ADD", "scaled-copy", "only-in-copy"]);
    assert_eq!(
        ok(&mut c, &["BF.EXISTS", "scaled", "only-in-copy"]),
        Value::Int(0)
    );
    assert_eq!(digest(&mut c, "scaled"), digests[0].1);
    // MEMORY USAGE counts the bits: a 1M-item 1% filter is ~1.2 MB, which jemalloc serves
    // from its 1.25 MiB size class (counted so under every allocator, words.rs).
    ok(
        &mut c,
        &["BF.RESERVE", "m", "0.01", "1000000", "NONSCALING"],
    );
    let usage = match ok(&mut c, &["MEMORY", "USAGE", "m"]) {
        Value::Int(i) => i,
        v => panic!("{v:?}"),
    };
    assert!((1_310_720..1_312_000).contains(&usage), "{usage}");
}

#[test]
fn corrupt_restore_payloads_are_refused_not_fatal() {
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let mut server = Server::start();
    let mut c = server.conn();
    // RESTORE hands the module the whole payload, its version and CRC included, so a body cut
    // short reads on into them: under a random seed those bytes change from run to run and
    // now and then complete a valid value. Seed 0 fixes every byte, and every cut is refused.
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", "0"]);
    ok(&mut c, &["BF.RESERVE", "f", "0.01", "20", "EXPANSION", "2"]);
    fill(&mut c, "f", "i", 50);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("f").query(&mut c).unwrap();
    let (body, version) = split_dump(&dump);
    assert_eq!(dump_payload(&body, version), dump);
    let restore = |c: &mut redis::Connection, payload: Vec<u8>| {
        redis::cmd("RESTORE")
            .arg("r")
            .arg(0)
            .arg(payload)
            .arg("REPLACE")
            .exec(c)
    };
    // Every truncation is refused.
    for cut in 1..body.len() {
        let result = restore(&mut c, dump_payload(&body[..body.len() - cut], version));
        assert!(result.is_err(), "truncated by {cut} bytes was accepted");
    }
    // Every single-byte corruption is refused or loads a usable filter.
    for at in 0..body.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = body.to_vec();
            bad[at] ^= flip;
            if restore(&mut c, dump_payload(&bad, version)).is_ok() {
                ok(&mut c, &["BF.ADD", "r", "probe"]);
                ok(&mut c, &["BF.INFO", "r"]);
                digest(&mut c, "r");
            }
        }
    }
    assert!(server.alive());
    assert_eq!(ok(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn scandump_loadchunk_round_trips() {
    let server = Server::start();
    let mut c = server.conn();
    let digests = make_filters(&mut c);
    for (key, d) in &digests {
        let target = format!("{key}-loaded");
        scandump_into(&mut c, key, &target);
        assert_eq!(&digest(&mut c, &target), d, "{key}");
    }
    // The end marker is an empty string, not nil.
    let reply: Vec<Value> = redis::cmd("BF.SCANDUMP")
        .arg("tiny")
        .arg(1_000_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(reply, vec![Value::Int(0), Value::BulkString(vec![])]);

    // Tens of MB: a 0.001 / 20M filter is ~36 MB, three chunks.
    ok(
        &mut c,
        &["BF.RESERVE", "big", "0.001", "20000000", "NONSCALING"],
    );
    fill(&mut c, "big", "b", 20_000);
    let chunks = scandump_into(&mut c, "big", "big-loaded");
    assert_eq!(chunks, 4, "header + 3 data chunks");
    assert_eq!(digest(&mut c, "big-loaded"), digest(&mut c, "big"));
    assert_eq!(
        ok(&mut c, &["BF.EXISTS", "big-loaded", "b19999"]),
        Value::Int(1)
    );

    // Chunks are validated before anything is written.
    // "empty" (0.5, 1 item) has fewer than 64 bits: its one word has padding.
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg("empty")
        .arg(0)
        .query(&mut c)
        .unwrap();
    redis::cmd("BF.LOADCHUNK")
        .arg("partial")
        .arg(1)
        .arg(header.clone())
        .exec(&mut c)
        .unwrap();
    let before = digest(&mut c, "partial");
    for (iterator, data) in [
        (3i64, vec![1u8; 8]),      // iterator smaller than 1 + length
        (1_000_000, vec![1u8; 8]), // past the end
        (9, vec![0xffu8; 8]),      // sets padding bits past m
        (i64::MAX, vec![0u8; 1]),  // absurd offset
    ] {
        let result = redis::cmd("BF.LOADCHUNK")
            .arg("partial")
            .arg(iterator)
            .arg(data)
            .exec(&mut c);
        assert!(result.is_err(), "chunk at {iterator} accepted");
        assert_eq!(digest(&mut c, "partial"), before);
    }
    // A header that claims more than max-memory-per-key is refused.
    let (_, big_header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg("big")
        .arg(0)
        .query(&mut c)
        .unwrap();
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "1mb"],
    );
    let refused = redis::cmd("BF.LOADCHUNK")
        .arg("too-big")
        .arg(1)
        .arg(big_header)
        .exec(&mut c);
    assert!(err_text(refused).contains("max-memory-per-key"));
    assert_eq!(ok(&mut c, &["EXISTS", "too-big"]), Value::Int(0));
}

#[test]
fn aof_replay_and_rewrite_with_other_defaults() {
    let mut server = Server::builder()
        .arg("appendonly", "yes")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut c = server.conn();
    // Created with defaults: the AOF must carry the parameters, not rely on the defaults.
    fill(&mut c, "added", "a", 500);
    ok(
        &mut c,
        &["BF.INSERT", "inserted", "CAPACITY", "30", "ITEMS", "x", "y"],
    );
    ok(&mut c, &["BF.RESERVE", "reserved", "0.02", "10"]);
    fill(&mut c, "reserved", "r", 100);
    ok(
        &mut c,
        &["BF.RESERVE", "big", "0.001", "12000000", "NONSCALING"],
    );
    fill(&mut c, "big", "b", 5_000);
    let keys = ["added", "inserted", "reserved", "big"];
    let digests: Vec<String> = keys.iter().map(|k| digest(&mut c, k)).collect();
    let check = |c: &mut redis::Connection| {
        for (k, d) in keys.iter().zip(&digests) {
            assert_eq!(&digest(c, k), d, "{k}");
        }
    };
    server.restart_with_module_args(&[
        ("bf-error-rate", "0.2"),
        ("bf-initial-size", "3"),
        ("bf-expansion-factor", "7"),
    ]);
    let mut c = server.conn();
    check(&mut c);
    // Rewrite (BF.LOADCHUNK commands, the 21 MB filter in two chunks) and replay it.
    ok(&mut c, &["BGREWRITEAOF"]);
    wait_aof_rewrite(&mut c);
    server.restart();
    let mut c = server.conn();
    check(&mut c);
}

#[test]
fn replicas_build_identical_values_despite_other_defaults() {
    let master = Server::start();
    let replica = Server::builder()
        .module_arg("bf-error-rate", "0.2")
        .module_arg("bf-initial-size", "3")
        .module_arg("bf-expansion-factor", "0")
        .start();
    let mut m = master.conn();
    let mut r = replica.conn();
    attach_replica(&master, &replica);
    ok(&mut m, &["BF.ADD", "add", "a"]);
    fill(&mut m, "madd", "m", 300);
    ok(
        &mut m,
        &["BF.INSERT", "ins", "ERROR", "0.001", "ITEMS", "a", "b"],
    );
    ok(&mut m, &["BF.RESERVE", "res", "0.01", "5"]);
    fill(&mut m, "res", "r", 100);
    ok(&mut m, &["BF.ADD", "add", "a"]); // no change
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg("madd")
        .arg(0)
        .query(&mut m)
        .unwrap();
    redis::cmd("BF.LOADCHUNK")
        .arg("loaded")
        .arg(1)
        .arg(header)
        .exec(&mut m)
        .unwrap();
    scandump_into(&mut m, "madd", "loaded2");
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    for key in ["add", "madd", "ins", "res", "loaded", "loaded2"] {
        assert_eq!(digest(&mut r, key), digest(&mut m, key), "{key}");
    }
    assert_eq!(
        ok(&mut r, &["BF.INFO", "add", "CAPACITY"]),
        Value::Array(vec![Value::Int(100)])
    );
    let readonly = err_text(cmd(&mut r, &["BF.ADD", "add", "z"]));
    assert!(readonly.starts_with("READONLY"), "{readonly}");
}

#[test]
fn sparse_sets_travel_whole_in_the_header() {
    // A default filter of a few items is all sparse: BF.SCANDUMP sends its header and ends,
    // and a LOADCHUNK of that header alone rebuilds it.
    let server = Server::start();
    let mut c = server.conn();
    // Unseeded: encoding version 3 (seeded, version 4, has the same shape 8 bytes later).
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", "0"]);
    fill(&mut c, "small", "i", 30);
    let mut parts = Vec::new();
    scandump_each(&mut c, "small", 0, |_, it, data| parts.push((it, data)));
    assert_eq!(parts.len(), 1, "{parts:?}");
    let header = parts[0].1.clone();
    assert_eq!(header[4], 3, "encoding version 3");
    scandump_into(&mut c, "small", "copy");
    assert_eq!(digest(&mut c, "copy"), digest(&mut c, "small"));
    // Any change to the sparse set is refused whole (nothing created), or is another valid
    // set of as many fingerprints (a low bit that keeps the order), never a half-written one.
    let stream_start = 32 + 40;
    let (mut refused, mut other) = (0, 0);
    for at in stream_start..header.len() {
        for bit in [0u8, 5] {
            let mut bad = header.clone();
            bad[at] ^= 1 << bit;
            let loaded = redis::cmd("BF.LOADCHUNK")
                .arg("bad")
                .arg(1)
                .arg(&bad)
                .exec(&mut c);
            match loaded {
                Err(e) => {
                    assert!(e.to_string().contains("bad data"), "{e}");
                    assert_eq!(ok(&mut c, &["EXISTS", "bad"]), Value::Int(0));
                    refused += 1;
                }
                Ok(()) => {
                    let card = ok(&mut c, &["BF.CARD", "bad"]);
                    assert_eq!(card, Value::Int(30));
                    let (_, again): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
                        .arg("bad")
                        .arg(0)
                        .query(&mut c)
                        .unwrap();
                    assert_eq!(again, bad);
                    ok(&mut c, &["DEL", "bad"]);
                    other += 1;
                }
            }
        }
    }
    assert!(refused > 0 && refused + other > 0);
    for cut in [1, 8, header.len() - stream_start] {
        let loaded = redis::cmd("BF.LOADCHUNK")
            .arg("bad")
            .arg(1)
            .arg(&header[..header.len() - cut])
            .exec(&mut c);
        assert!(loaded.is_err());
        assert_eq!(ok(&mut c, &["EXISTS", "bad"]), Value::Int(0));
    }
    // A later chunk for a filter with no bit array is refused and changes nothing.
    let before = digest(&mut c, "copy");
    let chunk = redis::cmd("BF.LOADCHUNK")
        .arg("copy")
        .arg(9)
        .arg(vec![0xffu8; 8])
        .exec(&mut c);
    assert!(chunk.is_err());
    assert_eq!(digest(&mut c, "copy"), before);
}

/// A sparse set in a universe above 2^63 whose one value has a high part past its buckets
/// (2 << 63 wraps to 0, which looked in range): taken once, it broke the RDB written after
/// the next add, which no server could load. Refused whole now.
#[test]
fn a_sparse_set_whose_value_wraps_past_2_64_is_refused() {
    let server = Server::start();
    let mut c = server.conn();
    let header = unhex(
        "4c434246030100007b14ae47e17a843f000000000100000001000000000000000200000000000000\
         dbf97e6abc74833f500000000000008000000000010000000100000000000000\
         5c000000000000070200000000000000",
    );
    let loaded = redis::cmd("BF.LOADCHUNK")
        .arg("k")
        .arg(1)
        .arg(&header)
        .exec(&mut c);
    assert!(err_text(loaded).contains("bad data"));
    assert_eq!(ok(&mut c, &["EXISTS", "k"]), Value::Int(0));
}

#[test]
fn large_arrays_save_each_allocation_whole_and_load_any_cut() {
    let server = Server::start();
    let mut c = server.conn();
    // 269.6 MB of bits: a head of sixteen 16 MiB segments (one 256 MiB allocation) and a
    // short segment (src/bloom/words.rs).
    ok(
        &mut c,
        &["BF.RESERVE", "large", "0.01", "225000000", "NONSCALING"],
    );
    fill(&mut c, "large", "l", 3_000);
    let d = digest(&mut c, "large");
    let size = |c: &mut redis::Connection, k: &str| ok(c, &["BF.INFO", k, "SIZE"]);
    let original = size(&mut c, "large");
    ok(&mut c, &["CONFIG", "SET", "rdbcompression", "no"]);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("large").query(&mut c).unwrap();
    let (value, version) = split_dump(&payload);
    drop(payload);
    let strings = module_strings(&value);
    // The header, then each allocation as one string.
    let lens: Vec<usize> = strings[1..].iter().map(|s| s.len()).collect();
    let data: usize = lens.iter().sum();
    assert_eq!(lens, [256 << 20, data - (256 << 20)]);
    let data_bytes: Vec<u8> = strings[1..].concat();
    let cut = |piece: usize| {
        let mut strings = vec![strings[0]];
        strings.extend(data_bytes.chunks(piece));
        dump_payload(&module_value(&value[..MODULE_FRAME], &strings), version)
    };
    // Restored, the same filter at the same cost.
    let restores = |c: &mut redis::Connection, key: &str, payload: &[u8]| {
        redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(payload)
            .exec(c)
            .unwrap();
        assert_eq!(digest(c, key), d, "{key}");
        assert_eq!(size(c, key), original, "{key}");
    };
    // Cut in 16 MiB strings, in 64 MiB ones, or in one: loads the same (copying where a
    // string is not one allocation).
    let older = cut(16 << 20);
    for (key, payload) in [("in-64-mib", cut(64 << 20)), ("in-one", cut(data))] {
        restores(&mut c, key, &payload);
        ok(&mut c, &["DEL", key]);
    }
    // A string past the end of the data is refused: nothing is created.
    let mut past = vec![strings[0], &data_bytes[..data - 8]];
    let tail = [&data_bytes[data - 8..], &[0u8; 8][..]].concat();
    past.push(&tail);
    let past = dump_payload(&module_value(&value[..MODULE_FRAME], &past), version);
    drop(strings);
    let ours = dump_payload(&value, version);
    drop((value, data_bytes));
    for (key, payload) in [("restored", &ours), ("older", &older)] {
        restores(&mut c, key, payload);
    }
    let refused = redis::cmd("RESTORE")
        .arg("past")
        .arg(0)
        .arg(&past)
        .exec(&mut c)
        .unwrap_err();
    assert!(refused.to_string().contains("Bad data format"), "{refused}");
    assert_eq!(ok(&mut c, &["EXISTS", "past"]), Value::Int(0));
    drop((ours, older, past));
    // Saved and loaded again, the allocations Redis read the data into take writes.
    ok(&mut c, &["DEBUG", "RELOAD"]);
    for key in ["large", "restored", "older"] {
        assert_eq!(digest(&mut c, key), d, "{key}");
        takes_writes(&mut c, key);
    }
}
