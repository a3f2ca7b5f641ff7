//! Resource limits through a real server: `max-memory-per-key` (and when it does not apply),
//! `max-items-per-command`, `deny-oom` under `maxmemory`, and memory that returns to its
//! baseline after thousands of keys come and go. (ACL users: access_control.rs.)

use crate::common::*;
use redis::Value;

/// A filter and a counter of about 90 KB each.
fn make_big_values(c: &mut redis::Connection) {
    ok(c, &["BF.RESERVE", "bf", "0.001", "50000", "NONSCALING"]);
    ok(c, &["LC.RESERVE", "lc", "0.001", "100000"]);
    let _: Value = redis::cmd("BF.MADD")
        .arg("bf")
        .arg(items("x", 1000))
        .query(c)
        .unwrap();
    let _: Value = redis::cmd("LC.ADD")
        .arg("lc")
        .arg(items("x", 20_000))
        .query(c)
        .unwrap();
}

#[test]
fn memory_limit_binds_clients_and_restore_but_not_loading() {
    let mut server = Server::start();
    let mut c = server.conn();
    make_big_values(&mut c);
    let (bf_digest, lc_digest) = (digest(&mut c, "bf"), digest(&mut c, "lc"));
    let bf_dump: Vec<u8> = redis::cmd("DUMP").arg("bf").query(&mut c).unwrap();
    let lc_dump: Vec<u8> = redis::cmd("DUMP").arg("lc").query(&mut c).unwrap();
    ok(&mut c, &["SAVE"]);

    // Lowered below both values: the server's own files still load them (with a warning)...
    server.restart_with_module_args(&[("max-memory-per-key", "65536")]);
    let mut c = server.conn();
    assert_eq!(digest(&mut c, "bf"), bf_digest);
    assert_eq!(digest(&mut c, "lc"), lc_digest);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(digest(&mut c, "bf"), bf_digest);
    assert_eq!(digest(&mut c, "lc"), lc_digest);
    assert!(server
        .log()
        .contains("more than max-memory-per-key (65536); kept"));

    // ... but RESTORE, a client's request, is refused, and creates nothing.
    for (key, dump) in [("bf2", &bf_dump), ("lc2", &lc_dump)] {
        let refused = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(dump.as_slice())
            .query::<Value>(&mut c);
        assert!(err_text(refused).contains("Bad data format"));
        assert_eq!(ok(&mut c, &["EXISTS", key]), Value::Int(0));
    }
    // The log names the key and says why, not that the payload may be corrupt.
    let log = server.log();
    for refused in [
        "refusing a Bloom filter (key 'bf2') from RESTORE: filter would exceed max-memory-per-key\n",
        "refusing a linear counter (key 'lc2') from RESTORE: larger than max-memory-per-key\n",
    ] {
        assert!(log.contains(refused), "{refused}: {log}");
    }
    // As are new keys of that size, by every command that creates one.
    for args in [
        &["BF.RESERVE", "n", "0.001", "100000"][..],
        &[
            "BF.INSERT",
            "n",
            "CAPACITY",
            "100000",
            "ERROR",
            "0.001",
            "ITEMS",
            "a",
        ],
        &["LC.RESERVE", "n", "0.001", "1000000"],
    ] {
        let refused = err_text(cmd(&mut c, args));
        assert!(
            refused.contains("max-memory-per-key"),
            "{args:?}: {refused}"
        );
        assert_eq!(ok(&mut c, &["EXISTS", "n"]), Value::Int(0));
    }
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.bf-initial-size", "100000"],
    );
    // A counter's size follows its error rate, not its capacity: 0.001 grows to 884,776 bytes.
    ok(&mut c, &["CONFIG", "SET", "lcbloom.lc-error-rate", "0.001"]);
    for args in [
        &["BF.ADD", "n", "a"][..],
        &["BF.MADD", "n", "a"],
        &["LC.ADD", "n", "a"],
        &["LC.INSERT", "n", "ITEMS", "a"],
    ] {
        let refused = err_text(cmd(&mut c, args));
        assert!(
            refused.contains("max-memory-per-key"),
            "{args:?}: {refused}"
        );
        assert_eq!(ok(&mut c, &["EXISTS", "n"]), Value::Int(0));
    }
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg("bf")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let refused = redis::cmd("BF.LOADCHUNK")
        .arg("n")
        .arg(1)
        .arg(header)
        .query::<Value>(&mut c);
    assert!(err_text(refused).contains("max-memory-per-key"));
    assert_eq!(ok(&mut c, &["EXISTS", "n"]), Value::Int(0));
}

#[test]
fn a_filter_that_would_outgrow_the_limit_stays_intact() {
    // Fixed seed: "another" must be refused, not answered as a false positive (under a
    // random seed, about 1 run in 140).
    let server = Server::builder()
        .module_arg("max-memory-per-key", "4096")
        .fixed_seed()
        .start();
    let mut c = server.conn();
    ok(
        &mut c,
        &["BF.RESERVE", "f", "0.01", "100", "EXPANSION", "4"],
    );
    let mut added = Vec::new();
    let refused = loop {
        let item = format!("i{}", added.len());
        match cmd(&mut c, &["BF.ADD", "f", &item]) {
            Ok(_) => added.push(item),
            Err(e) => break err_text::<()>(Err(e)),
        }
        assert!(added.len() < 100_000, "never refused");
    };
    assert!(refused.contains("max-memory-per-key"), "{refused}");
    let before = digest(&mut c, "f");
    assert!(cmd(&mut c, &["BF.ADD", "f", "another"]).is_err());
    assert_eq!(
        digest(&mut c, "f"),
        before,
        "a refused add changed the filter"
    );
    let found: Vec<bool> = redis::cmd("BF.MEXISTS")
        .arg("f")
        .arg(&added)
        .query(&mut c)
        .unwrap();
    assert!(found.iter().all(|f| *f));
    let size: Vec<i64> = redis::cmd("BF.INFO")
        .arg("f")
        .arg("SIZE")
        .query(&mut c)
        .unwrap();
    assert!(size[0] <= 4096, "{size:?}");
}

/// A filter made at the smallest limit it is accepted at stays within it as it fills, and
/// moves at any fill to a server of the same limit (`RESTORE`, `BF.LOADCHUNK`). Sparse
/// sub-filters were weighed by their full form, which can be smaller than the set just
/// before it: filled, they took a size class more, and their own `DUMP` was refused.
/// Windowed filters were weighed without their value's box.
#[test]
fn a_filter_made_within_the_limit_fills_and_moves_within_it() {
    let server = Server::start();
    let mut c = server.conn();
    let limit = |c: &mut redis::Connection, bytes: &str| {
        ok(c, &["CONFIG", "SET", "lcbloom.max-memory-per-key", bytes]);
    };
    // (rate, capacity, options, items): sparse first sub-filters of which a fill took more,
    // and a windowed filter filled to its budget (capacity + a quarter).
    let shapes: &[(&str, &str, &[&str], u32)] = &[
        ("0.001", "6649", &["NONSCALING"], 6649),
        ("0.01", "1120", &["NONSCALING"], 1120),
        ("0.005", "1217", &["NONSCALING"], 1217),
        ("0.005", "3812", &["LAYOUT", "BLOCKED"], 3812),
        ("0.001", "1093", &["NONSCALING", "WINDOW", "3600"], 1366),
    ];
    for &(rate, capacity, options, n) in shapes {
        let reserve = [&["BF.RESERVE", "f", rate, capacity][..], options].concat();
        limit(&mut c, "1024");
        let refused = err_text::<()>(redis::cmd(reserve[0]).arg(&reserve[1..]).query(&mut c));
        let needed = refused
            .split_whitespace()
            .nth(4)
            .expect("the bytes needed")
            .to_string();
        assert!(refused.starts_with("ERR filter would use"), "{refused}");
        limit(&mut c, &needed);
        ok(&mut c, &reserve);
        for (i, batch) in items("x", n).chunks(1_000).enumerate() {
            let _: Vec<bool> = redis::cmd("BF.MADD")
                .arg("f")
                .arg(batch)
                .query(&mut c)
                .unwrap();
            let size: Vec<i64> = redis::cmd("BF.INFO")
                .arg("f")
                .arg("SIZE")
                .query(&mut c)
                .unwrap();
            let what = format!("{rate} {capacity} {options:?}, batch {i}");
            assert!(
                size[0] <= needed.parse().unwrap(),
                "{what}: {size:?} over {needed}"
            );
            let dump: Vec<u8> = redis::cmd("DUMP").arg("f").query(&mut c).unwrap();
            ok(&mut c, &["DEL", "copy"]);
            let restored = redis::cmd("RESTORE")
                .arg("copy")
                .arg(0)
                .arg(dump)
                .query::<()>(&mut c);
            assert!(restored.is_ok(), "{what}: {restored:?}");
        }
        ok(&mut c, &["DEL", "f", "copy"]);
    }
}

#[test]
fn item_limit_per_command_except_when_replaying() {
    let mut server = Server::builder().arg("appendonly", "yes").start();
    let mut c = server.conn();
    let ten = items("i", 10);
    let _: Value = redis::cmd("BF.MADD")
        .arg("bf")
        .arg(&ten)
        .query(&mut c)
        .unwrap();
    let _: Value = redis::cmd("LC.ADD")
        .arg("lc")
        .arg(&ten)
        .query(&mut c)
        .unwrap();
    let digests = (digest(&mut c, "bf"), digest(&mut c, "lc"));

    // The AOF holds commands of 10 items; replaying them under a limit of 5 must not lose them.
    server.restart_with_module_args(&[("max-items-per-command", "5")]);
    let mut c = server.conn();
    assert_eq!((digest(&mut c, "bf"), digest(&mut c, "lc")), digests);

    let six = items("j", 6);
    let five = items("j", 5);
    for cmd in ["BF.MADD", "BF.MEXISTS", "LC.ADD"] {
        let refused = redis::cmd(cmd).arg("bf2").arg(&six).query::<Value>(&mut c);
        assert!(
            err_text(refused).contains("max-items-per-command (5)"),
            "{cmd}"
        );
        let _: Value = redis::cmd(cmd)
            .arg(format!("{cmd}:ok"))
            .arg(&five)
            .query(&mut c)
            .unwrap();
    }
    let refused = redis::cmd("BF.INSERT")
        .arg("bf2")
        .arg("ITEMS")
        .arg(&six)
        .query::<Value>(&mut c);
    assert!(err_text(refused).contains("max-items-per-command"));
    let refused = redis::cmd("LC.INSERT")
        .arg("lc2")
        .arg("ITEMS")
        .arg(&six)
        .query::<Value>(&mut c);
    assert!(err_text(refused).contains("max-items-per-command"));
    let keys = ["lc", "lc", "lc", "lc", "lc", "lc"];
    assert!(
        err_text(redis::cmd("LC.COUNT").arg(&keys).query::<Value>(&mut c))
            .contains("max-items-per-command")
    );
    assert!(err_text(
        redis::cmd("LC.MERGE")
            .arg("d")
            .arg(&keys)
            .query::<Value>(&mut c)
    )
    .contains("max-items-per-command"));
    assert_eq!(ok(&mut c, &["EXISTS", "bf2", "d"]), Value::Int(0));
    // LC.MERGE counts its sources, not its destination: five sources are within a limit of 5.
    ok(&mut c, &["LC.MERGE", "d", "lc", "lc", "lc", "lc", "lc"]);
    assert_eq!(ok(&mut c, &["LC.COUNT", "d"]), Value::Int(10));
    // A repeated key is read once: the count is that of the key.
    assert_eq!(
        redis::cmd("LC.COUNT")
            .arg(&keys[..5])
            .query::<i64>(&mut c)
            .unwrap(),
        10
    );
}

/// `lc-max-union-bytes` bounds what one LC.COUNT or LC.MERGE reads: an exact counter counts 8
/// bytes per item it lists. A refused union changes nothing; a merge replayed from the AOF is
/// applied under any limit; one key's count is O(1) and never refused.
#[test]
fn union_byte_limit_except_when_replaying() {
    let mut server = Server::builder().arg("appendonly", "yes").start();
    let mut c = server.conn();
    for (key, prefix) in [("a", "x"), ("b", "y")] {
        let _: Value = redis::cmd("LC.ADD")
            .arg(key)
            .arg(items(prefix, 100))
            .query(&mut c)
            .unwrap();
    }
    ok(&mut c, &["LC.MERGE", "ab", "a", "b"]);
    let merged = digest(&mut c, "ab");

    server.restart_with_module_args(&[("lc-max-union-bytes", "1024")]);
    let mut c = server.conn();
    assert_eq!(
        digest(&mut c, "ab"),
        merged,
        "the replayed merge was refused"
    );
    let before = (digest(&mut c, "a"), digest(&mut c, "b"));
    let count = redis::cmd("LC.COUNT")
        .arg(&["a", "b"])
        .query::<Value>(&mut c);
    let refused = err_text(count);
    assert!(
        refused.contains("LC.COUNT would read 1600 bytes")
            && refused.contains("lc-max-union-bytes (1024)"),
        "{refused}"
    );
    for merge in [&["LC.MERGE", "d", "a", "b"][..], &["LC.MERGE", "a", "b"]] {
        assert!(err_text(cmd(&mut c, merge)).contains("LC.MERGE would read 1600 bytes"));
    }
    assert_eq!(ok(&mut c, &["EXISTS", "d"]), Value::Int(0));
    assert_eq!((digest(&mut c, "a"), digest(&mut c, "b")), before);
    // One key alone, and a repeated key read once, stay within the limit.
    assert_eq!(ok(&mut c, &["LC.COUNT", "ab"]), Value::Int(200));
    assert_eq!(ok(&mut c, &["LC.COUNT", "a", "a"]), Value::Int(100));
    // Likewise a key larger than the limit named with itself, with missing keys or with
    // counters holding nothing: the count reads one key (a token list over 1,024 bytes).
    let _: Value = redis::cmd("LC.ADD")
        .arg("big")
        .arg(items("z", 1000))
        .query(&mut c)
        .unwrap();
    let big = ok(&mut c, &["LC.COUNT", "big"]);
    ok(&mut c, &["LC.RESERVE", "empty", "0.001", "100"]);
    for keys in [
        &["big", "big"][..],
        &["big", "missing"],
        &["missing", "big", "big"],
        &["empty", "big"],
    ] {
        assert_eq!(
            ok(&mut c, &[&["LC.COUNT"][..], keys].concat()),
            big,
            "{keys:?}"
        );
    }
    assert!(err_text(cmd(&mut c, &["LC.COUNT", "big", "a"])).contains("LC.COUNT would read"));
    // A merge of it alone, or beside counters holding nothing, into a new key is a copy.
    for (copy, sources) in [
        ("copy", &["big"][..]),
        ("copy2", &["big", "empty", "missing"]),
    ] {
        ok(&mut c, &[&["LC.MERGE", copy][..], sources].concat());
        assert_eq!(ok(&mut c, &["LC.COUNT", copy]), big, "{sources:?}");
    }
    assert!(err_text(cmd(&mut c, &["LC.MERGE", "copy", "a"])).contains("LC.MERGE would read"));

    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.lc-max-union-bytes", "1600"],
    );
    assert_eq!(ok(&mut c, &["LC.COUNT", "a", "b"]), Value::Int(200));
    ok(&mut c, &["LC.MERGE", "d", "a", "b"]);
    assert_eq!(digest(&mut c, "d"), merged);
}

/// Saved bitmaps in a union count what it works through: one of the union's size its bytes
/// (united word by word), one folded into a smaller bitmap 8 bytes for each bit set (folded a
/// bit at a time, about 7 ns a bit: counted at its bytes, the limit let a fold block the
/// server for about a minute).
#[test]
fn saved_bitmaps_count_what_their_union_works_through() {
    let server = Server::builder()
        .module_arg("lc-max-union-bytes", "1048576")
        .start();
    let mut c = server.conn();
    for (key, m) in [("small", 100_000u64), ("small2", 100_000), ("big", 200_000)] {
        let _: Value = redis::cmd("LC.LOADCHUNK")
            .arg(key)
            .arg(crate::common::ops::full_bitmap_encoding(1000, 0.01, m))
            .query(&mut c)
            .unwrap();
    }
    let one = ok(&mut c, &["LC.COUNT", "small"]);
    assert_eq!(ok(&mut c, &["LC.COUNT", "small", "small2"]), one);
    ok(&mut c, &["LC.MERGE", "same", "small", "small2"]);
    assert_eq!(ok(&mut c, &["LC.COUNT", "same"]), one);
    let before = digest(&mut c, "small");
    let refused = err_text(cmd(&mut c, &["LC.COUNT", "small", "big"]));
    assert!(
        refused.contains("LC.COUNT would read 16") && refused.contains("(1048576)"),
        "{refused}"
    );
    let refused = err_text(cmd(&mut c, &["LC.MERGE", "small", "big"]));
    assert!(refused.contains("LC.MERGE would read 16"), "{refused}");
    assert_eq!(digest(&mut c, "small"), before);
    // Within the limit the fold is what it was, and the union counts at least its largest key.
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.lc-max-union-bytes", "2mb"],
    );
    let count = |c: &mut redis::Connection, keys: &[&str]| -> i64 {
        redis::cmd("LC.COUNT").arg(keys).query(c).unwrap()
    };
    let (small, big) = (count(&mut c, &["small"]), count(&mut c, &["big"]));
    assert_eq!(count(&mut c, &["small", "big"]), small.max(big));
    ok(&mut c, &["LC.MERGE", "small", "big"]);
    assert_eq!(digest(&mut c, "small"), before);
}

const WRITES: [&[&str]; 10] = [
    &["BF.RESERVE", "new", "0.01", "100"],
    &["BF.ADD", "bf", "a"],
    &["BF.MADD", "bf", "a", "b"],
    &["BF.INSERT", "bf", "ITEMS", "a"],
    &["BF.LOADCHUNK", "bf", "9", "abcdefgh"],
    &["LC.RESERVE", "new", "0.01", "100"],
    &["LC.ADD", "lc", "a"],
    &["LC.MERGE", "lc", "lc"],
    &["LC.LOADCHUNK", "new", "x"],
    &["LC.ADD", "new"],
];

const READS: [&[&str]; 7] = [
    &["BF.EXISTS", "bf", "x0"],
    &["BF.MEXISTS", "bf", "x0", "y"],
    &["BF.INFO", "bf"],
    &["BF.CARD", "bf"],
    &["BF.SCANDUMP", "bf", "0"],
    &["LC.COUNT", "lc"],
    &["LC.INFO", "lc"],
];

#[test]
fn maxmemory_refuses_writes_with_oom_and_serves_reads() {
    let server = Server::start();
    let mut c = server.conn();
    make_big_values(&mut c);
    // Well above a 1 MB maxmemory whatever the server's own baseline.
    ok(&mut c, &["SET", "ballast", &"x".repeat(2 << 20)]);
    ok(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "1mb"]);
    for args in WRITES {
        let refused = err_text(cmd(&mut c, args));
        assert!(refused.starts_with("OOM"), "{args:?}: {refused}");
    }
    assert_eq!(ok(&mut c, &["EXISTS", "new"]), Value::Int(0));
    for args in READS {
        cmd(&mut c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
    assert_eq!(ok(&mut c, &["BF.EXISTS", "bf", "x0"]), Value::Int(1));
}

/// Creates, grows, copies, restores and deletes `n` keys of each type.
fn churn(c: &mut redis::Connection, n: usize) {
    for i in 0..n {
        let (bf, lc) = (format!("bf:{i}"), format!("lc:{i}"));
        ok(c, &["BF.RESERVE", &bf, "0.01", "10", "EXPANSION", "2"]);
        let _: Value = redis::cmd("BF.MADD")
            .arg(&bf)
            .arg(items("x", 50))
            .query(c)
            .unwrap();
        ok(c, &["LC.RESERVE", &lc, "0.01", "5000"]);
        let _: Value = redis::cmd("LC.ADD")
            .arg(&lc)
            .arg(items("x", 200))
            .query(c)
            .unwrap();
        for key in [&bf, &lc] {
            ok(c, &["COPY", key, &format!("{key}:copy")]);
            let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
            let _: Value = redis::cmd("RESTORE")
                .arg(format!("{key}:restored"))
                .arg(0)
                .arg(dump)
                .query(c)
                .unwrap();
        }
        ok(
            c,
            &[
                "LC.MERGE",
                &format!("{lc}:merged"),
                &lc,
                &format!("{lc}:copy"),
            ],
        );
        // Refused writes must not leak what they allocated either.
        assert!(cmd(c, &["BF.RESERVE", &bf, "0.01", "10"]).is_err());
        assert!(cmd(c, &["LC.LOADCHUNK", &lc, "x"]).is_err());
    }
    ok(c, &["FLUSHALL", "SYNC"]);
}

#[test]
fn memory_returns_to_its_baseline() {
    let server = Server::start();
    let mut c = server.conn();
    // A warm-up round sizes the keyspace tables and the server's buffers.
    churn(&mut c, 300);
    let baseline = used_memory(&mut c, 1);
    for _ in 0..3 {
        churn(&mut c, 1000);
    }
    let after = used_memory(&mut c, 1);
    println!("used_memory: baseline {baseline}, after 3,000 keys x 7 of each type {after}");
    assert!(
        after - baseline < 64 * 1024,
        "used_memory grew from {baseline} to {after}"
    );
}

/// A windowed filter of many small layers is refused by `RESTORE` and `BF.LOADCHUNK` under a
/// limit below its `MEMORY USAGE`, and taken at it: the check counts its layers' list and each
/// partition's words in their size classes (one of 40 layers used to load under a quarter of
/// its bytes).
#[test]
fn windowed_loads_are_weighed_by_their_real_bytes() {
    let server = Server::start();
    let mut c = server.conn();
    ok(
        &mut c,
        &[
            "BF.RESERVE",
            "w",
            "0.01",
            "5",
            "WINDOW",
            "600",
            "EXPANSION",
            "1",
        ],
    );
    for batch in 0..4 {
        let mut args = vec!["BF.MADD".to_string(), "w".to_string()];
        args.extend(items(&format!("b{batch}-"), 50));
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        ok(&mut c, &args);
    }
    let bytes = memory_usage_of(&mut c, &["w".to_string()]);
    assert!(bytes > 4_000, "{bytes}");
    let dump: Vec<u8> = redis::cmd("DUMP").arg("w").query(&mut c).unwrap();
    let mut chunks: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut cursor = 0;
    loop {
        let (next, data): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
            .arg("w")
            .arg(cursor)
            .query(&mut c)
            .unwrap();
        if next == 0 {
            break;
        }
        chunks.push((next, data));
        cursor = next;
    }
    let limit = |c: &mut redis::Connection, bytes: i64| {
        let bytes = bytes.to_string();
        ok(c, &["CONFIG", "SET", "lcbloom.max-memory-per-key", &bytes]);
    };
    limit(&mut c, bytes / 2);
    let refused = redis::cmd("RESTORE")
        .arg("r")
        .arg(0)
        .arg(dump.as_slice())
        .query::<Value>(&mut c);
    assert!(err_text(refused).contains("Bad data format"));
    assert_eq!(ok(&mut c, &["EXISTS", "r"]), Value::Int(0));
    let loaded = chunks.iter().try_for_each(|(at, data)| {
        redis::cmd("BF.LOADCHUNK")
            .arg("l")
            .arg(*at)
            .arg(data.as_slice())
            .query::<Value>(&mut c)
            .map(|_| ())
    });
    assert!(err_text(loaded).contains("max-memory-per-key"));
    // Refused at its header or at a chunk: whatever of it was taken stays within the limit.
    if ok(&mut c, &["EXISTS", "l"]) == Value::Int(1) {
        let held = memory_usage_of(&mut c, &["l".to_string()]);
        assert!(held <= bytes / 2, "{held} > {}", bytes / 2);
    }

    limit(&mut c, bytes);
    let restored = redis::cmd("RESTORE")
        .arg("r")
        .arg(0)
        .arg(dump.as_slice())
        .query::<Value>(&mut c);
    assert_eq!(restored, Ok(Value::Okay));
    assert_eq!(digest(&mut c, "r"), digest(&mut c, "w"));
}

/// A host that refuses memory (the server's address space capped at 4 GB) and
/// `max-memory-per-key` raised past it: a key that would need more is an error and the
/// server goes on, holding nothing of it. The module allocated through the server's aborting
/// functions, and the server exited. Bit arrays are zeroed blocks: servers with
/// `RedisModule_TryCalloc` (Redis 7.4, Valkey) refuse them themselves, older ones after the
/// module has asked the host.
#[test]
fn an_allocation_the_host_refuses_is_an_error() {
    let server = Server::builder().address_space(4 << 30).start();
    let mut c = server.conn();
    ok(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "lcbloom.max-memory-per-key",
            &i64::MAX.to_string(),
        ],
    );
    let refused = |c: &mut redis::Connection, args: &[&str], why: &str| {
        assert_eq!(err_text(cmd(c, args)), why, "{args:?}");
    };
    let create = "ERR insufficient memory to create filter";
    // 34 GB of partitions, not zeroed.
    let windowed = ["BF.RESERVE", "w", "0.01", "1000000000000", "WINDOW", "10"];
    refused(&mut c, &windowed, create);
    refused(
        &mut c,
        &["BF.RESERVE", "b", "0.01", "1000000000000"],
        create,
    );
    let blocked = [
        "BF.RESERVE",
        "b",
        "0.01",
        "1000000000000",
        "LAYOUT",
        "BLOCKED",
    ];
    refused(&mut c, &blocked, create);
    let insert = ["BF.INSERT", "b", "CAPACITY", "1000000000000", "ITEMS", "x"];
    refused(&mut c, &insert, create);
    // A RedisBloom header of one 2^47-byte link.
    let header = crate::common::fixtures::unhex(
        "000000000000000001000000050000000200000000000000008000000000000000000400\
         00000000000000007b14ae47e17a743fe9862fb2350e26400800000099cdfd4bdb5c000000",
    );
    let load = redis::cmd("BF.LOADCHUNK")
        .arg("b")
        .arg(1)
        .arg(header)
        .query::<()>(&mut c);
    assert_eq!(err_text(load), "ERR insufficient memory to load filter");
    ok(&mut c, &["BF.RESERVE", "small", "0.01", "1000000"]);
    let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(keys, 1);
}

/// A server whose `max-memory-per-key` is the largest it takes, and a connection to it.
fn without_a_limit_per_key() -> (Server, redis::Connection) {
    let server = Server::start();
    let mut c = server.conn();
    let unlimited = i64::MAX.to_string();
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", &unlimited],
    );
    (server, c)
}

/// `max-memory-per-key` raised past the machine on a host that grants any mapping (Linux's
/// default overcommit, where jemalloc maps large blocks with `MAP_NORESERVE`): a filter larger
/// than the machine's memory and swap is an error, as it is on a host that refuses memory.
/// Granted, it made a key whose `used_memory` counted terabytes the machine does not have.
#[test]
fn a_key_larger_than_the_machine_is_an_error() {
    let (_server, mut c) = without_a_limit_per_key();
    let before = used_memory(&mut c, 1);
    // About 1.2 bytes an item at 0.01: 1.2 times the machine.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let capacity = lcbloom::core::alloc::machine_bytes(&meminfo)
        .unwrap()
        .to_string();
    let create = "ERR insufficient memory to create filter";
    for args in [
        vec!["BF.RESERVE", "b", "0.01", &capacity, "NONSCALING"],
        vec!["BF.RESERVE", "b", "0.01", &capacity, "LAYOUT", "BLOCKED"],
        vec!["BF.INSERT", "b", "CAPACITY", &capacity, "ITEMS", "x"],
    ] {
        assert_eq!(err_text(cmd(&mut c, &args)), create, "{args:?}");
    }
    let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(keys, 0);
    let grown = used_memory(&mut c, 1) - before;
    assert!(grown < 1 << 20, "used_memory grew {grown} bytes");
    ok(&mut c, &["BF.RESERVE", "small", "0.01", "1000000"]);
}

/// A counter saved as a bitmap by listing its zeros may list none, so a payload of 21 bytes
/// names a bitmap of 2^46 bits (8 TiB): with `max-memory-per-key` raised past the machine, it
/// is refused as out of memory by `LC.LOADCHUNK` and `RESTORE`. The bitmap was allocated
/// infallibly, and the refusal aborted the server.
#[test]
fn a_saved_bitmap_larger_than_the_machine_is_an_error() {
    use crate::common::fuzz::{dump_payload, split_dump, MODULE_FRAME};
    let (_server, mut c) = without_a_limit_per_key();
    // Version 2, hash scheme 1, zero positions listed; capacity 1,000, rate 0.01, 2^46 bits,
    // no zero listed.
    let mut counter = vec![2, 1, 3, 0xe8, 0x07];
    counter.extend_from_slice(&0.01f64.to_le_bytes());
    counter.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00]);
    let load = redis::cmd("LC.LOADCHUNK")
        .arg("z")
        .arg(counter.as_slice())
        .query::<()>(&mut c);
    assert_eq!(
        err_text(load),
        "ERR invalid counter encoding: out of memory"
    );

    ok(&mut c, &["LC.ADD", "small", "a"]);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("small").query(&mut c).unwrap();
    let (value, version) = split_dump(&dump);
    let mut value = value[..MODULE_FRAME].to_vec();
    value.extend_from_slice(&[5, counter.len() as u8]);
    value.extend_from_slice(&counter);
    value.push(0);
    let restore = redis::cmd("RESTORE")
        .arg("z")
        .arg(0)
        .arg(dump_payload(&value, version))
        .query::<()>(&mut c);
    assert!(err_text(restore).starts_with("ERR"), "restored");
    let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(keys, 1);
}
