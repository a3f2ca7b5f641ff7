//! The blocked Bloom layout through real servers: the `LAYOUT` option and the `bf-layout`
//! config, `BF.INFO` and `INFO lcbloom`, every way a value is copied or persisted (SCANDUMP /
//! LOADCHUNK, DUMP / RESTORE, COPY, DEBUG RELOAD, AOF rewrite and replay), replicas with
//! another default layout, and hostile headers and payloads.
use crate::common::fuzz::{dump_payload, mutate, split_dump, Rng};
use crate::common::ops::digests;
use crate::common::*;
use redis::{Connection, Value};

fn layout(c: &mut Connection, key: &str) -> String {
    let reply: Vec<String> = redis::cmd("BF.INFO")
        .arg(key)
        .arg("LAYOUT")
        .query(c)
        .unwrap();
    reply[0].clone()
}

fn size(c: &mut Connection, key: &str) -> i64 {
    let reply: Vec<i64> = redis::cmd("BF.INFO").arg(key).arg("SIZE").query(c).unwrap();
    reply[0]
}

/// Bytes of the bit arrays (what `BF.SCANDUMP` sends after the header).
fn data_bytes(c: &mut Connection, key: &str) -> usize {
    let mut total = 0;
    scandump_each(c, key, 1, |_, _, data| total += data.len());
    total
}

fn exists(c: &mut Connection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS").arg(key).query(c).unwrap();
    n == 1
}

/// Non-members of `key` among `n` items `other:<i>` that BF.MEXISTS reports present.
fn false_positives(c: &mut Connection, key: &str, n: u32) -> usize {
    let mut hits = 0;
    for chunk in items("other:", n).chunks(5_000) {
        let found: Vec<i64> = redis::cmd("BF.MEXISTS")
            .arg(key)
            .arg(chunk)
            .query(c)
            .unwrap();
        hits += found.iter().filter(|f| **f == 1).count();
    }
    hits
}

#[test]
fn layout_option_config_and_info() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, &["BF.RESERVE", "std", "0.001", "100000"]);
    ok(
        &mut c,
        &["BF.RESERVE", "blk", "0.001", "100000", "layout", "BLOCKED"],
    );
    assert_eq!(layout(&mut c, "std"), "standard");
    assert_eq!(layout(&mut c, "blk"), "blocked");
    // A few percent more bits for the same rate (the table in src/bloom/blocked.rs). Size
    // rounds each to the allocator's size class, which may tell them apart by up to 25%.
    let ratio = data_bytes(&mut c, "blk") as f64 / data_bytes(&mut c, "std") as f64;
    assert!((1.0..1.15).contains(&ratio), "{ratio}");
    let ratio = size(&mut c, "blk") as f64 / size(&mut c, "std") as f64;
    assert!((1.0..1.15 * 1.25).contains(&ratio), "{ratio}");
    // The full reply: RedisBloom's five fields in order, then `Blocked: 1` for blocked
    // filters only.
    let names = |c: &mut Connection, key: &str| -> Vec<String> {
        let full: Vec<Value> = redis::cmd("BF.INFO").arg(key).query(c).unwrap();
        full.iter()
            .step_by(2)
            .map(|v| redis::from_redis_value(v.clone()).unwrap())
            .collect()
    };
    let redisbloom = [
        "Capacity",
        "Size",
        "Number of filters",
        "Number of items inserted",
        "Expansion rate",
    ];
    assert_eq!(names(&mut c, "std"), redisbloom);
    assert_eq!(names(&mut c, "blk")[..5], redisbloom);
    assert_eq!(names(&mut c, "blk")[5..], ["Blocked"]);
    let full: Vec<Value> = redis::cmd("BF.INFO").arg("blk").query(&mut c).unwrap();
    assert_eq!(full[11], Value::Int(1));
    ok(
        &mut c,
        &["BF.INSERT", "ins", "LAYOUT", "blocked", "ITEMS", "x", "y"],
    );
    assert_eq!(layout(&mut c, "ins"), "blocked");
    let found: Vec<i64> = redis::cmd("BF.MEXISTS")
        .arg(&["ins", "x", "y"])
        .query(&mut c)
        .unwrap();
    assert_eq!(found, [1, 1]);

    // Bad options: an error, and no key.
    for (args, error) in [
        (
            &["BF.RESERVE", "bad", "0.01", "10", "LAYOUT", "fast"][..],
            "ERR LAYOUT must be standard or blocked",
        ),
        (
            &["BF.RESERVE", "bad", "0.01", "10", "LAYOUT"],
            "ERR no layout",
        ),
        (
            &[
                "BF.RESERVE",
                "bad",
                "0.01",
                "10",
                "LAYOUT",
                "blocked",
                "LAYOUT",
                "blocked",
            ],
            "ERR LAYOUT given more than once",
        ),
        (
            &["BF.INSERT", "bad", "LAYOUT", "x", "ITEMS", "a"],
            "ERR LAYOUT must be standard or blocked",
        ),
    ] {
        assert_eq!(err_text(cmd(&mut c, args)), error, "{args:?}");
        assert!(!exists(&mut c, "bad"));
    }

    // The config: standard by default, blocked for filters created without LAYOUT after.
    let config: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "lcbloom.bf-layout"])
        .query(&mut c)
        .unwrap();
    assert_eq!(config, ["lcbloom.bf-layout", "standard"]);
    assert_eq!(
        server_info(&mut c, "lcbloom")["lcbloom_bf_layout"],
        "standard"
    );
    ok(&mut c, &["BF.ADD", "add:std", "a"]);
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-layout", "blocked"]);
    assert_eq!(
        server_info(&mut c, "lcbloom")["lcbloom_bf_layout"],
        "blocked"
    );
    ok(&mut c, &["BF.ADD", "add:blk", "a"]);
    ok(&mut c, &["BF.MADD", "madd:blk", "a", "b"]);
    ok(&mut c, &["BF.RESERVE", "res:blk", "0.01", "10"]);
    ok(
        &mut c,
        &["BF.RESERVE", "res:std", "0.01", "10", "LAYOUT", "standard"],
    );
    assert!(cmd(&mut c, &["CONFIG", "SET", "lcbloom.bf-layout", "quick"]).is_err());
    for (key, expected) in [
        ("add:std", "standard"),
        ("add:blk", "blocked"),
        ("madd:blk", "blocked"),
        ("res:blk", "blocked"),
        ("res:std", "standard"),
    ] {
        assert_eq!(layout(&mut c, key), expected, "{key}");
    }
    // INFO lcbloom counts the blocked filters apart (and among all filters).
    assert_eq!(server_info(&mut c, "lcbloom")["lcbloom_bf_keys"], "8");
    assert_eq!(
        server_info(&mut c, "lcbloom")["lcbloom_bf_blocked_keys"],
        "5"
    );
    let blocked_bytes: i64 = ["blk", "ins", "add:blk", "madd:blk", "res:blk"]
        .iter()
        .map(|k| size(&mut c, k))
        .sum();
    assert_eq!(
        server_info(&mut c, "lcbloom")["lcbloom_bf_blocked_bytes"],
        blocked_bytes.to_string()
    );
    ok(&mut c, &["DEL", "blk", "res:std"]);
    assert_eq!(server_info(&mut c, "lcbloom")["lcbloom_bf_keys"], "6");
    assert_eq!(
        server_info(&mut c, "lcbloom")["lcbloom_bf_blocked_keys"],
        "4"
    );

    // A scaling blocked filter keeps the compound rate.
    ok(
        &mut c,
        &["BF.RESERVE", "grow", "0.01", "100", "LAYOUT", "blocked"],
    );
    add_many(&mut c, "BF.MADD", "grow", "g", 20_000);
    let filters: Vec<i64> = redis::cmd("BF.INFO")
        .arg(&["grow", "FILTERS"])
        .query(&mut c)
        .unwrap();
    assert!(filters[0] >= 7, "{filters:?}");
    for chunk in items("g", 20_000).chunks(5_000) {
        let found: Vec<i64> = redis::cmd("BF.MEXISTS")
            .arg("grow")
            .arg(chunk)
            .query(&mut c)
            .unwrap();
        assert!(found.iter().all(|f| *f == 1));
    }
    let fp = false_positives(&mut c, "grow", 100_000) as f64 / 100_000.0;
    assert!(fp <= 0.01 + 3.0 * (0.01f64 / 100_000.0).sqrt(), "{fp}");
}

/// Blocked filters of several shapes on `c`.
fn blocked_filters(c: &mut Connection) {
    ok(
        c,
        &[
            "BF.RESERVE",
            "b:scaling",
            "0.01",
            "200",
            "LAYOUT",
            "blocked",
        ],
    );
    add_many(c, "BF.MADD", "b:scaling", "s", 3_000);
    ok(
        c,
        &[
            "BF.RESERVE",
            "b:fixed",
            "0.001",
            "300000",
            "NONSCALING",
            "LAYOUT",
            "blocked",
        ],
    );
    add_many(c, "BF.MADD", "b:fixed", "f", 1_000);
    ok(
        c,
        &[
            "BF.INSERT",
            "b:insert",
            "CAPACITY",
            "10",
            "LAYOUT",
            "blocked",
            "ITEMS",
            "a",
            "b",
        ],
    );
}

#[test]
fn blocked_filters_survive_every_copy_and_persistence_path() {
    // Fixed seed: the item only the copy gets must not be a false positive of the original
    // (under a random seed, about 1 run in 130).
    let mut server = Server::builder()
        .fixed_seed()
        .arg("appendonly", "yes")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut c = server.conn();
    blocked_filters(&mut c);
    let before = digests(&mut c);
    assert_eq!(before.len(), 3);

    for (source, copy) in [("b:scaling", "c:scan"), ("b:fixed", "c:scan2")] {
        scandump_into(&mut c, source, copy);
        assert_eq!(digest(&mut c, copy), before[source]);
        assert_eq!(layout(&mut c, copy), "blocked");
    }
    let payload: Vec<u8> = redis::cmd("DUMP").arg("b:scaling").query(&mut c).unwrap();
    redis::cmd("RESTORE")
        .arg("c:restore")
        .arg(0)
        .arg(payload)
        .exec(&mut c)
        .unwrap();
    assert_eq!(digest(&mut c, "c:restore"), before["b:scaling"]);
    ok(&mut c, &["COPY", "b:scaling", "c:copy"]);
    assert_eq!(digest(&mut c, "c:copy"), before["b:scaling"]);
    // The copy is independent.
    ok(&mut c, &["BF.ADD", "c:copy", "only-in-the-copy"]);
    assert_ne!(digest(&mut c, "c:copy"), before["b:scaling"]);
    assert_eq!(digest(&mut c, "b:scaling"), before["b:scaling"]);

    let all = digests(&mut c);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(digests(&mut c), all);
    // The AOF rewrite writes BF.LOADCHUNK commands; a restart replays them.
    ok(&mut c, &["BGREWRITEAOF"]);
    wait_aof_rewrite(&mut c);
    server.restart();
    let mut c = server.conn();
    assert_eq!(digests(&mut c), all);
    assert_eq!(layout(&mut c, "c:restore"), "blocked");
    assert_eq!(
        server_info(&mut c, "lcbloom")["lcbloom_bf_blocked_keys"],
        "7"
    );

    // Commands replayed from the AOF under another default build the same values.
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-layout", "blocked"]);
    ok(&mut c, &["BF.ADD", "r:add", "x"]);
    add_many(&mut c, "BF.MADD", "r:add", "m", 2_000);
    ok(
        &mut c,
        &["BF.INSERT", "r:std", "LAYOUT", "standard", "ITEMS", "x"],
    );
    let all = digests(&mut c);
    server.restart_with_module_args(&[("bf-layout", "standard")]);
    let mut c = server.conn();
    assert_eq!(digests(&mut c), all);
    assert_eq!(layout(&mut c, "r:add"), "blocked");
    assert_eq!(layout(&mut c, "r:std"), "standard");
}

#[test]
fn replicas_build_the_master_layout_whatever_their_config() {
    let master = Server::start();
    let replica = Server::builder().module_arg("bf-layout", "blocked").start();
    let mut m = master.conn();
    blocked_filters(&mut m);
    ok(&mut m, &["BF.ADD", "m:std", "a"]);
    attach_replica(&master, &replica);
    // Through the command stream: created with the master's default, then with the option.
    ok(&mut m, &["BF.ADD", "s:add", "a"]);
    add_many(&mut m, "BF.MADD", "s:madd", "x", 1_000);
    ok(&mut m, &["CONFIG", "SET", "lcbloom.bf-layout", "blocked"]);
    ok(&mut m, &["BF.ADD", "s:blk", "a"]);
    add_many(&mut m, "BF.MADD", "s:blk", "y", 1_000);
    ok(
        &mut m,
        &["BF.RESERVE", "s:res", "0.01", "10", "LAYOUT", "standard"],
    );
    add_many(&mut m, "BF.MADD", "b:scaling", "more", 2_000);
    scandump_into(&mut m, "b:scaling", "s:loaded");
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let mut r = replica.conn();
    let on_master = digests(&mut m);
    assert_eq!(on_master.len(), 9, "{on_master:?}");
    assert_eq!(digests(&mut r), on_master);
    for key in on_master.keys() {
        assert_eq!(layout(&mut r, key), layout(&mut m, key), "{key}");
    }
    assert_eq!(layout(&mut r, "s:add"), "standard");
    assert_eq!(layout(&mut r, "s:blk"), "blocked");
}

#[test]
fn hostile_blocked_headers_and_payloads_are_refused_or_safe() {
    let server = Server::start();
    let mut c = server.conn();
    // Unseeded (seed 0): the encodings of unseeded filters; a seeded one is patched below.
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", "0"]);
    blocked_filters(&mut c);
    // The headers from SCANDUMP, mutated where the layout lives: refused, nothing created.
    // A large blocked filter is all bit arrays (version 2); a small one's first sub-filters
    // are sparse (version 3, layout 1); a seeded one is version 4.
    let header_of = |c: &mut Connection, key: &str| {
        let (_, header): (i64, Vec<u8>) =
            redis::cmd("BF.SCANDUMP").arg(&[key, "0"]).query(c).unwrap();
        header
    };
    let header = header_of(&mut c, "b:fixed");
    assert_eq!(&header[4..8], &[2, 1, 1, 0]);
    let mut patches: Vec<(Vec<u8>, usize, Vec<u8>)> = vec![
        (header.clone(), 4, vec![1]), // version 1 cannot hold a blocked filter
        (header.clone(), 6, vec![0]), // version 2 with the standard layout is not canonical
        (header.clone(), 6, vec![7]), // unknown layout
        (header.clone(), 7, vec![1]), // reserved
        (header.clone(), 4, vec![3]), // version 3 without a sparse sub-filter
        (header.clone(), 4, vec![4]), // version 4 has a seed before the entries
        (header.clone(), 4, vec![5]), // unknown version
    ];
    let bits = u64::from_le_bytes(header[48..56].try_into().unwrap());
    patches.push((header.clone(), 48, (bits + 64).to_le_bytes().to_vec())); // not whole blocks
    let small = header_of(&mut c, "b:scaling");
    assert_eq!(&small[4..8], &[3, 1, 1, 0]);
    for (at, bytes) in [(4, vec![1]), (4, vec![2]), (6, vec![7]), (7, vec![1])] {
        patches.push((small.clone(), at, bytes));
    }
    ok(
        &mut c,
        &[
            "BF.RESERVE",
            "b:seeded",
            "0.01",
            "10000",
            "LAYOUT",
            "blocked",
            "SEED",
            "99",
        ],
    );
    let seeded = header_of(&mut c, "b:seeded");
    assert_eq!(&seeded[4..8], &[4, 1, 1, 0]);
    assert_eq!(&seeded[32..40], &99u64.to_le_bytes());
    for (at, bytes) in [
        (4, vec![2]),                      // the seed read as the first entry
        (4, vec![3]),                      // likewise
        (6, vec![7]),                      // unknown layout
        (32, 0u64.to_le_bytes().to_vec()), // seed 0 is written as versions 1 to 3
    ] {
        patches.push((seeded.clone(), at, bytes));
    }
    for (header, at, bytes) in patches {
        let mut bad = header;
        bad[at..at + bytes.len()].copy_from_slice(&bytes);
        let reply = redis::cmd("BF.LOADCHUNK")
            .arg("h:bad")
            .arg(1)
            .arg(bad)
            .exec(&mut c);
        assert!(reply.is_err(), "patch at {at} accepted");
        assert!(!exists(&mut c, "h:bad"));
    }

    // Mutated DUMP payloads of blocked filters (with a valid CRC): an error, or a value that
    // answers every command; the server stays up.
    let seeds: Vec<Vec<u8>> = ["b:scaling", "b:fixed", "b:insert"]
        .iter()
        .map(|k| {
            let payload: Vec<u8> = redis::cmd("DUMP").arg(*k).query(&mut c).unwrap();
            payload
        })
        .collect();
    let corpus: Vec<Vec<u8>> = seeds.iter().map(|p| split_dump(p).0).collect();
    let version = split_dump(&seeds[0]).1;
    let mut rng = Rng::seeded(14);
    let mut loaded = 0;
    for i in 0..400 {
        let seed = rng.pick(&corpus).clone();
        let value = mutate(&mut rng, &seed, &corpus);
        let key = format!("m:{i}");
        let restored = redis::cmd("RESTORE")
            .arg(&key)
            .arg(0)
            .arg(dump_payload(&value, version))
            .exec(&mut c);
        if restored.is_ok() {
            loaded += 1;
            ok(&mut c, &["BF.EXISTS", &key, "a"]);
            ok(&mut c, &["BF.INFO", &key]);
            let _ = cmd(&mut c, &["BF.MADD", &key, "p", "q", "r"]);
            let _ = cmd(&mut c, &["BF.SCANDUMP", &key, "0"]);
            ok(&mut c, &["DEL", &key]);
        }
    }
    assert!(loaded > 0, "no mutation kept a loadable value");
    ok(&mut c, &["PING"]);
}

#[test]
fn typed_clients_read_a_blocked_filter_info() {
    // The redis crate's bf_info reads every value of the full reply as a number.
    use redis::TypedCommands;
    // Fixed seed: the item count asks whether "b" is a false positive.
    let server = Server::builder().fixed_seed().start();
    for mut c in [server.conn(), server.conn3()] {
        redis::cmd("FLUSHALL").exec(&mut c).unwrap();
        ok(
            &mut c,
            &["BF.RESERVE", "blk", "0.01", "1000", "LAYOUT", "blocked"],
        );
        c.bf_madd("blk", &["a", "b"]).unwrap();
        let info = c.bf_info("blk").unwrap();
        assert_eq!(*info["Capacity"], 1000.0);
        assert_eq!(*info["Number of items inserted"], 2.0);
        assert_eq!(*info["Blocked"], 1.0);
    }
}
