//! AOF: a rewrite without RDB preamble rebuilds every value byte for byte, large ones in
//! chunks (a 200 MB filter, a 40 MB counter); an AOF written under one set of module defaults
//! replays identically under another, with a lower max-memory-per-key, which still binds
//! clients (including RESTORE) but not loading.
use crate::common::ops::*;
use crate::common::*;
use redis::Value;
use std::path::Path;

/// The base file of the rewritten AOF (Redis 7: appendonlydir/<name>.<seq>.base.aof).
fn base_aof(dir: &Path) -> Vec<u8> {
    let aof_dir = dir.join("appendonlydir");
    let base = std::fs::read_dir(&aof_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".base.aof"))
        .expect("a base AOF file");
    std::fs::read(base).unwrap()
}

fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

#[test]
fn aof_rewrite_rebuilds_every_value_including_large_ones_in_chunks() {
    let mut server = Server::builder()
        .arg("appendonly", "yes")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut c = server.conn();
    mixed_workload(&mut c);
    // Counters in each state: empty, exact, every bitmap body kind, saturated.
    ok(&mut c, &["LC.RESERVE", "lc:empty", "0.01", "50000"]);
    for (key, n) in [
        ("lc:sparse", 1_000),
        ("lc:dense", 12_000),
        ("lc:full", 60_000),
    ] {
        add_many(&mut c, "LC.ADD", key, key, n);
    }
    add_many(&mut c, "LC.ADD", "lc:saturated", "s", 400_000);
    // 200 MB filter (non-scaling 175M at 1%: 9.59 bits per item) with some items.
    ok(
        &mut c,
        &["BF.RESERVE", "big", "0.01", "175000000", "NONSCALING"],
    );
    add_many(&mut c, "BF.MADD", "big", "b", 20_000);
    // Its data: the bit array of its one sub-filter.
    let bits = bf_bits(&mut c, "big");
    let big_bytes = [bits.div_ceil(64) as i64 * 8];
    assert!(big_bytes[0] > 200_000_000, "{big_bytes:?}");
    // A 40 MB counter whose encoding is its dense bitmap: three pieces of 16 MB at most.
    redis::cmd("LC.LOADCHUNK")
        .arg("biglc")
        .arg(random_dense_encoding(40 << 20, 1))
        .exec(&mut c)
        .unwrap();
    add_many(&mut c, "LC.ADD", "biglc", "x", 1_000);
    let before = digests(&mut c);
    let info_before = info_lcbloom(&mut c);
    assert_eq!(before.len(), 21, "{before:?}");

    ok(&mut c, &["BGREWRITEAOF"]);
    wait_aof_rewrite(&mut c);
    let aof = base_aof(&server.dir);
    assert!(aof.len() > 240_000_000, "{}", aof.len());
    // The filter went out as a header plus ⌈200 MB / 16 MB⌉ = 13 chunks, the counter as a
    // shell plus 3 pieces; small counters as one command each.
    assert_eq!(
        occurrences(&aof, b"BF.LOADCHUNK\r\n$3\r\nbig\r\n"),
        1 + (big_bytes[0] as usize).div_ceil(16 << 20)
    );
    assert_eq!(occurrences(&aof, b"LC.LOADCHUNK\r\n$5\r\nbiglc\r\n"), 4);
    assert_eq!(occurrences(&aof, b"LC.LOADCHUNK\r\n$8\r\nlc:dense\r\n"), 1);
    drop(aof);

    server.restart();
    let mut c = server.conn();
    assert_eq!(digests(&mut c), before);
    // Same keys and filter bytes; a counter's exact set may have other spare capacity now.
    let info_after = info_lcbloom(&mut c);
    let field = |info: &[String], name: &str| -> f64 {
        let prefix = format!("lcbloom_{name}:");
        info.iter()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{name} in {info:?}"))
            .parse()
            .unwrap()
    };
    for name in ["bf_keys", "bf_bytes", "lc_keys"] {
        assert_eq!(
            field(&info_after, name),
            field(&info_before, name),
            "{name}"
        );
    }
    let lc_bytes = |info: &[String]| field(info, "lc_bytes");
    assert!((lc_bytes(&info_after) / lc_bytes(&info_before) - 1.0).abs() < 0.01);
}

#[test]
fn aof_replays_identically_with_other_defaults_and_a_lower_limit() {
    let mut server = Server::builder().arg("appendonly", "yes").start();
    let mut c = server.conn();
    mixed_workload(&mut c);
    let before = digests(&mut c);
    let dump: Vec<u8> = redis::cmd("DUMP").arg("lc:large").query(&mut c).unwrap();
    let small_dump: Vec<u8> = redis::cmd("DUMP").arg("lc:add").query(&mut c).unwrap();

    // Replay of the commands as they were propagated (no rewrite yet).
    server.restart_with_module_args(OTHER_DEFAULTS);
    let mut c = server.conn();
    assert_eq!(digests(&mut c), before, "AOF replay");

    // The limit still binds clients: creating, scaling, LOADCHUNK and RESTORE.
    let refused = err_text(
        redis::cmd("BF.RESERVE")
            .arg(&["new", "0.001", "2000000"])
            .query::<()>(&mut c),
    );
    assert!(refused.contains("max-memory-per-key"), "{refused}");
    let refused = err_text(
        redis::cmd("RESTORE")
            .arg("restored")
            .arg(0)
            .arg(&dump)
            .query::<()>(&mut c),
    );
    assert!(refused.starts_with("ERR"), "{refused}");
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(&small_dump)
        .query(&mut c)
        .unwrap();
    ok(&mut c, &["DEL", "restored"]);
    let refused = err_text(
        redis::cmd("LC.LOADCHUNK")
            .arg("new")
            .arg(random_dense_encoding(300_000, 3))
            .query::<()>(&mut c),
    );
    assert!(refused.starts_with("ERR"), "{refused}");
    assert_eq!(digests(&mut c), before);

    // RDB reload and an AOF rewrite + replay under the low limit keep the large values.
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(digests(&mut c), before, "DEBUG RELOAD");
    ok(&mut c, &["CONFIG", "SET", "aof-use-rdb-preamble", "no"]);
    ok(&mut c, &["BGREWRITEAOF"]);
    wait_aof_rewrite(&mut c);
    server.restart();
    let mut c = server.conn();
    assert_eq!(digests(&mut c), before, "rewritten AOF");
    // The restart kept the low limit and the other defaults: a new key gets them.
    ok(&mut c, &["BF.ADD", "fresh", "a"]);
    let capacity: Vec<i64> = redis::cmd("BF.INFO")
        .arg(&["fresh", "CAPACITY"])
        .query(&mut c)
        .unwrap();
    assert_eq!(capacity, [7]);
}

#[test]
fn lc_loadchunk_pieces_are_validated() {
    let server = Server::start();
    let mut c = server.conn();
    let piece = |c: &mut redis::Connection, key: &str, iterator: i64, data: &[u8]| {
        err_text(
            redis::cmd("LC.LOADCHUNK")
                .arg(key)
                .arg(iterator)
                .arg(data)
                .query::<()>(c),
        )
    };
    assert_eq!(piece(&mut c, "missing", 2, &[1]), "ERR not found");
    ok(&mut c, &["LC.ADD", "exact", "a"]);
    assert!(piece(&mut c, "exact", 2, &[1]).contains("exact mode"));
    ok(&mut c, &["SET", "string", "x"]);
    assert!(piece(&mut c, "string", 2, &[1]).starts_with("WRONGTYPE"));
    redis::cmd("LC.LOADCHUNK")
        .arg("shell")
        .arg(empty_bitmap_encoding(5, 0.5, 20))
        .exec(&mut c)
        .unwrap();
    let empty = digest(&mut c, "shell");
    for (iterator, data, why) in [
        (0i64, vec![1u8], "iterator"),
        (-5, vec![1], "iterator"),
        (1, vec![1], "iterator and length"),
        (5, vec![1], "outside"),
        (4, vec![1, 2, 3, 4], "iterator and length"),
        (4, vec![0, 0, 0x10], "padding"),
        (1, vec![], "outside"),
    ] {
        let e = piece(&mut c, "shell", iterator, &data);
        assert!(e.starts_with("ERR") && e.contains(why), "{iterator}: {e}");
        assert_eq!(
            digest(&mut c, "shell"),
            empty,
            "a refused piece changes nothing"
        );
    }
    redis::cmd("LC.LOADCHUNK")
        .arg("shell")
        .arg(4)
        .arg(vec![0xffu8, 0xff, 0x0f])
        .exec(&mut c)
        .unwrap();
    let info: Vec<redis::Value> = redis::cmd("LC.INFO").arg("shell").query(&mut c).unwrap();
    assert_eq!(info[9], redis::Value::Int(20), "bits set: {info:?}");
}

/// Clients are refused integers Redis would not write (`0100`, `-0`), but an AOF may hold
/// them as they were sent to a version that took them: it replays as that version did.
#[test]
fn an_aof_holding_numbers_with_leading_zeros_replays() {
    let dir = Server::fresh_dir();
    write_single_file_aof(
        &dir,
        &[
            "SELECT 0",
            "LC.RESERVE c 0.01 0100",
            "LC.ADD c a b",
            "BF.RESERVE b 0.01 0100 EXPANSION 02",
            "BF.ADD b a",
            "BF.RESERVE n 0.01 100 EXPANSION -0",
            "BF.ADD i x",
            "BF.INSERT i CAPACITY 010 EXPANSION 02 ITEMS y",
        ],
    );
    let server = Server::builder().dir(&dir).arg("appendonly", "yes").start();
    let mut c = server.conn();
    let info = |c: &mut redis::Connection, key: &str, field: &str| -> Vec<i64> {
        redis::cmd("BF.INFO").arg(&[key, field]).query(c).unwrap()
    };
    assert_eq!(info(&mut c, "b", "CAPACITY"), [100]);
    assert_eq!(info(&mut c, "b", "EXPANSION"), [2]);
    let nonscaling: Vec<Value> = redis::cmd("BF.INFO")
        .arg(&["n", "EXPANSION"])
        .query(&mut c)
        .unwrap();
    assert_eq!(nonscaling, [Value::Nil]);
    assert_eq!(ok(&mut c, &["BF.EXISTS", "i", "y"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["LC.COUNT", "c"]), Value::Int(2));
    // The same numbers from a client are refused.
    let refused = err_text(cmd(&mut c, &["LC.RESERVE", "d", "0.01", "0100"]));
    assert_eq!(
        refused,
        "ERR capacity must be an integer between 1 and 2^50"
    );
    let refused = err_text(cmd(
        &mut c,
        &["BF.RESERVE", "d", "0.01", "100", "EXPANSION", "-0"],
    ));
    assert_eq!(refused, "ERR bad expansion");
}
