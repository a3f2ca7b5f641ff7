//! Hash seeds of lcbloom's Bloom filters: `SEED s` and `bf-seed`, a random seed per new filter
//! by default, kept by every copy path, replicated and replayed with the filter; an AOF written
//! before seeds existed replays unseeded; and what a seed is for: items crafted offline with
//! the public hash (seed 0) pile onto an unseeded filter's bits, and do not on a seeded one.
use crate::common::*;
use lcbloom::core::hashing::{hash_item, reduce};
use redis::Connection;

/// A filter's `BF.SCANDUMP` header.
fn header(c: &mut Connection, key: &str) -> Vec<u8> {
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP").arg(key).arg(0).query(c).unwrap();
    header
}

/// The encoding version and the seed a filter's header says (0 before version 4).
fn version_and_seed(c: &mut Connection, key: &str) -> (u8, u64) {
    let h = header(c, key);
    let seed = match h[4] {
        4 => u64::from_le_bytes(h[32..40].try_into().unwrap()),
        _ => 0,
    };
    (h[4], seed)
}

fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

fn madd(c: &mut Connection, key: &str, items: &[String]) {
    let _: redis::Value = redis::cmd("BF.MADD").arg(key).arg(items).query(c).unwrap();
}

#[test]
fn seeds_are_random_chosen_or_configured_and_travel_with_the_filter() {
    let server = Server::start();
    let mut c = server.conn();
    let members = items("i", 3_000);
    // Without SEED: a random seed each (version 4), so filters made alike differ, and each
    // holds its items.
    for key in ["r1", "r2"] {
        ok(&mut c, &["BF.RESERVE", key, "0.01", "1000"]);
        madd(&mut c, key, &members);
    }
    ok(&mut c, &["BF.ADD", "r3", "x"]);
    ok(&mut c, &["BF.INSERT", "r4", "ITEMS", "x"]);
    let seeds: Vec<(u8, u64)> = ["r1", "r2", "r3", "r4"]
        .iter()
        .map(|k| version_and_seed(&mut c, k))
        .collect();
    assert!(seeds.iter().all(|&(v, s)| v == 4 && s != 0), "{seeds:?}");
    let mut distinct: Vec<u64> = seeds.iter().map(|s| s.1).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{seeds:?}");
    assert_ne!(dump(&mut c, "r1"), dump(&mut c, "r2"));
    let found: Vec<bool> = redis::cmd("BF.MEXISTS")
        .arg("r2")
        .arg(&members)
        .query(&mut c)
        .unwrap();
    assert!(found.iter().all(|f| *f));

    // SEED s: filters made alike with the same seed hold the same bytes; SEED 0 is the
    // unseeded encoding.
    for (key, seed) in [
        ("s1", "18446744073709551615"),
        ("s2", "18446744073709551615"),
    ] {
        ok(&mut c, &["BF.RESERVE", key, "0.01", "1000", "SEED", seed]);
        madd(&mut c, key, &members);
    }
    assert_eq!(dump(&mut c, "s1"), dump(&mut c, "s2"));
    assert_eq!(version_and_seed(&mut c, "s1"), (4, u64::MAX));
    ok(
        &mut c,
        &[
            "BF.INSERT",
            "z",
            "SEED",
            "0",
            "LAYOUT",
            "blocked",
            "ITEMS",
            "a",
        ],
    );
    assert_eq!(version_and_seed(&mut c, "z"), (3, 0));
    // On an existing filter SEED is ignored, like the other creation options.
    ok(&mut c, &["BF.INSERT", "z", "SEED", "5", "ITEMS", "b"]);
    assert_eq!(version_and_seed(&mut c, "z"), (3, 0));

    // bf-seed: a fixed seed for filters created without SEED.
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", "42"]);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "lcbloom.bf-seed"])
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], "42");
    ok(&mut c, &["BF.ADD", "f1", "x"]);
    ok(&mut c, &["BF.INSERT", "f2", "SEED", "42", "ITEMS", "x"]);
    assert_eq!(dump(&mut c, "f1"), dump(&mut c, "f2"));
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", "0"]);
    ok(&mut c, &["BF.ADD", "f0", "x"]);
    assert_eq!(version_and_seed(&mut c, "f0").1, 0);
    for bad in ["-1", "18446744073709551616", "1.5", "rand", ""] {
        let e = err_text(cmd(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", bad]));
        assert!(e.contains("random, or a number"), "{bad}: {e}");
    }
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", "RANDOM"]);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "lcbloom.bf-seed"])
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], "random");

    // Bad SEED values and combinations: an error, nothing created.
    for args in [
        &["BF.RESERVE", "bad", "0.01", "10", "SEED", "-1"][..],
        &[
            "BF.RESERVE",
            "bad",
            "0.01",
            "10",
            "SEED",
            "18446744073709551616",
        ],
        &["BF.RESERVE", "bad", "0.01", "10", "SEED", "0x10"],
        &["BF.RESERVE", "bad", "0.01", "10", "SEED"],
        &["BF.INSERT", "bad", "SEED", "abc", "ITEMS", "a"],
    ] {
        let e = err_text(cmd(&mut c, args));
        assert!(e.starts_with("ERR bad SEED"), "{args:?}: {e}");
    }
    let twice = err_text(cmd(
        &mut c,
        &["BF.RESERVE", "bad", "0.01", "10", "SEED", "1", "SEED", "1"],
    ));
    assert!(twice.contains("SEED"), "{twice}");
    let window = err_text(cmd(
        &mut c,
        &[
            "BF.RESERVE",
            "bad",
            "0.01",
            "10",
            "SEED",
            "1",
            "WINDOW",
            "60",
        ],
    ));
    assert_eq!(window, "ERR WINDOW and SEED cannot be combined");
    assert_eq!(ok(&mut c, &["EXISTS", "bad"]), redis::Value::Int(0));

    // Every copy path keeps the seed: SCANDUMP/LOADCHUNK, DUMP/RESTORE, COPY, DEBUG RELOAD.
    scandump_into(&mut c, "r1", "copy:scan");
    let payload = dump(&mut c, "r1");
    redis::cmd("RESTORE")
        .arg("copy:restore")
        .arg(0)
        .arg(&payload)
        .exec(&mut c)
        .unwrap();
    ok(&mut c, &["COPY", "r1", "copy:copy"]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    for copy in ["copy:scan", "copy:restore", "copy:copy", "r1"] {
        assert_eq!(dump(&mut c, copy), payload, "{copy}");
    }
}

#[test]
fn random_seeds_reach_replicas_and_the_aof() {
    let mut master = Server::builder()
        .arg("appendonly", "yes")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    // The replica's own bf-seed would give other seeds if the master's were not sent.
    let replica = Server::builder().module_arg("bf-seed", "7").start();
    attach_replica(&master, &replica);
    let mut m = master.conn();
    ok(&mut m, &["BF.RESERVE", "reserve", "0.01", "500"]);
    ok(
        &mut m,
        &[
            "BF.RESERVE",
            "blocked",
            "0.001",
            "20000",
            "LAYOUT",
            "blocked",
        ],
    );
    ok(&mut m, &["BF.ADD", "add", "a"]);
    ok(
        &mut m,
        &["BF.INSERT", "insert", "CAPACITY", "50", "ITEMS", "a", "b"],
    );
    ok(&mut m, &["BF.INSERT", "chosen", "SEED", "99", "ITEMS", "a"]);
    let members = items("m", 2_000);
    for key in ["reserve", "blocked", "add", "insert", "madd"] {
        madd(&mut m, key, &members);
    }
    // A MADD stopped by a full non-scaling filter creates it and propagates what it applied.
    ok(&mut m, &["BF.RESERVE", "full", "0.01", "3", "NONSCALING"]);
    let _ = cmd(&mut m, &["BF.MADD", "full", "a", "b", "c", "d", "e"]);
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let keys = [
        "reserve", "blocked", "add", "insert", "chosen", "madd", "full",
    ];
    let on_master: Vec<Vec<u8>> = keys.iter().map(|k| dump(&mut m, k)).collect();
    let mut r = replica.conn();
    for (key, value) in keys.iter().zip(&on_master) {
        assert_eq!(&dump(&mut r, key), value, "{key} on the replica");
        let (version, seed) = version_and_seed(&mut m, key);
        assert!(version == 4 && seed != 0, "{key}: {version} {seed}");
    }
    // The AOF replays the creates with their seeds.
    master.restart();
    let mut m = master.conn();
    for (key, value) in keys.iter().zip(&on_master) {
        assert_eq!(&dump(&mut m, key), value, "{key} after the AOF replay");
    }
}

#[test]
fn an_aof_written_before_seeds_replays_unseeded() {
    // The commands a build without seeds appended (no SEED anywhere), as a single-file AOF,
    // which the server takes up at start.
    let dir = Server::fresh_dir();
    let resp = |args: &[&str]| {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out += &format!("${}\r\n{a}\r\n", a.len());
        }
        out
    };
    let old = [
        &["SELECT", "0"][..],
        &[
            "BF.RESERVE",
            "k",
            "0.01",
            "1000",
            "EXPANSION",
            "2",
            "LAYOUT",
            "standard",
        ],
        &["BF.MADD", "k", "a", "b", "c"],
        &[
            "BF.INSERT",
            "i",
            "CAPACITY",
            "100",
            "ERROR",
            "0.01",
            "EXPANSION",
            "2",
            "ITEMS",
            "x",
        ],
        &["BF.ADD", "plain", "y"],
    ];
    let aof: String = old.iter().map(|a| resp(a)).collect();
    std::fs::write(dir.join("appendonly.aof"), aof).unwrap();
    let server = Server::builder().dir(&dir).arg("appendonly", "yes").start();
    let mut c = server.conn();
    for key in ["k", "i", "plain"] {
        assert_eq!(version_and_seed(&mut c, key).1, 0, "{key}");
    }
    // The same filter built today with SEED 0 holds the same bytes.
    ok(
        &mut c,
        &[
            "BF.RESERVE",
            "today",
            "0.01",
            "1000",
            "EXPANSION",
            "2",
            "SEED",
            "0",
        ],
    );
    ok(&mut c, &["BF.MADD", "today", "a", "b", "c"]);
    let (a, b) = (dump(&mut c, "k"), dump(&mut c, "today"));
    assert_eq!(a, b);
}

/// Items that each set `k` bits still clear in a filter of `m` bits, probes
/// `reduce(probe(i), m)` under seed 0 (the standard layout, `filter.rs`), found greedily among
/// candidates: what an attacker computes offline with the public hash.
fn crafted(m: u64, k: u32, n: usize) -> Vec<String> {
    let mut bits = vec![0u64; m.div_ceil(64) as usize];
    let mut out = Vec::with_capacity(n);
    let mut candidate = 0u64;
    let mut probes = Vec::with_capacity(k as usize);
    while out.len() < n {
        candidate += 1;
        let item = format!("evil:{candidate}");
        let h = hash_item(item.as_bytes());
        probes.clear();
        probes.extend((0..k).map(|i| reduce(h.probe(i), m)));
        let fresh = probes
            .iter()
            .all(|&b| bits[(b / 64) as usize] >> (b % 64) & 1 == 0);
        let mut distinct = probes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if fresh && distinct.len() == k as usize {
            probes
                .iter()
                .for_each(|&b| bits[(b / 64) as usize] |= 1 << (b % 64));
            out.push(item);
        }
    }
    out
}

/// The share of `n` items never added that a filter answers present for.
fn false_positive_rate(c: &mut Connection, key: &str, n: u32) -> f64 {
    let probes = items("never-added", n);
    let mut hits = 0;
    for chunk in probes.chunks(10_000) {
        let found: Vec<bool> = redis::cmd("BF.MEXISTS")
            .arg(key)
            .arg(chunk)
            .query(c)
            .unwrap();
        hits += found.iter().filter(|f| **f).count();
    }
    hits as f64 / n as f64
}

#[test]
fn crafted_items_pollute_an_unseeded_filter_and_not_a_seeded_one() {
    const CAPACITY: usize = 10_000;
    const RATE: f64 = 0.01;
    const PROBES: u32 = 40_000;
    let server = Server::start();
    let mut c = server.conn();
    let cap = CAPACITY.to_string();
    ok(
        &mut c,
        &[
            "BF.RESERVE",
            "unseeded",
            "0.01",
            &cap,
            "NONSCALING",
            "SEED",
            "0",
        ],
    );
    ok(
        &mut c,
        &["BF.RESERVE", "seeded", "0.01", &cap, "NONSCALING"],
    );
    // The geometry from the unseeded filter's header: one bit array, m bits, k probes.
    let h = header(&mut c, "unseeded");
    assert_eq!(&h[4..8], &[1, 1, 0, 0]);
    let m = u64::from_le_bytes(h[48..56].try_into().unwrap());
    let k = u32::from_le_bytes(h[56..60].try_into().unwrap());
    assert_eq!(k, 7, "m {m}");
    // As many crafted items as the filter's capacity, each setting k bits of its own.
    let evil = crafted(m, k, CAPACITY);
    for key in ["unseeded", "seeded"] {
        for chunk in evil.chunks(5_000) {
            madd(&mut c, key, chunk);
        }
    }
    // Every crafted item was new to the unseeded filter: its n·k bits are all set.
    assert_eq!(bf_info(&mut c, "unseeded", "ITEMS"), CAPACITY as i64);
    let fill = (CAPACITY as f64 * k as f64) / m as f64;
    let unseeded = false_positive_rate(&mut c, "unseeded", PROBES);
    let seeded = false_positive_rate(&mut c, "seeded", PROBES);
    eprintln!(
        "m {m}, k {k}: crafted fill {fill:.3}, expected FP {:.4}; unseeded {unseeded:.4}, seeded {seeded:.4}",
        fill.powi(k as i32)
    );
    // Unseeded: about fill^k (0.73^7 ≈ 0.11), eleven times the rate. Seeded: the rate (the
    // bound is 5 standard deviations above it at 40,000 probes).
    assert!(unseeded > 5.0 * RATE, "unseeded FP {unseeded}");
    let sd = (RATE * (1.0 - RATE) / PROBES as f64).sqrt();
    assert!(seeded < RATE + 5.0 * sd, "seeded FP {seeded}");
}
