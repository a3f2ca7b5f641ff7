//! Moving from RedisBloom 2.8.2 to lcbloom and back, through real servers: RedisBloom makes the
//! filters at test time (`common::redisbloom`), they cross by each way in (its RDB, its AOF
//! rewritten without preamble, `DUMP`/`RESTORE`, `BF.SCANDUMP`/`BF.LOADCHUNK`), and every
//! observable answer is compared (members, 20,000 non-members, `BF.INFO`, `BF.CARD`,
//! `BF.SCANDUMP`, `TYPE`), then again after the same further adds on both sides, then after the
//! same way back into RedisBloom. Also: legacy encvers in an RDB file, corrupt and foreign data
//! (loud: a stopped load, an error reply, or a logged and counted lost key), replication,
//! `COPY`, `DEBUG RELOAD` and lcbloom's own AOF of imported filters.

use crate::common::fuzz::dump_payload;
use crate::common::redisbloom::{self as rb, Compared, Sample};
use crate::common::*;
use lcbloom::bloom::redisbloom::dump::{encode_value, module_id};
use lcbloom::bloom::redisbloom::scandump;
use redis::{Connection, Value};
use std::path::Path;

#[derive(Clone, Copy, Debug)]
enum Way {
    Rdb,
    Aof,
    Restore,
    Loadchunk,
}

/// A new server with `from`'s samples, moved the given way; lcbloom, or the module `module`.
fn transfer(way: Way, from: &Server, module: Option<&Path>, samples: &[Sample]) -> Server {
    let builder = |dir: Option<std::path::PathBuf>| {
        let mut b = Server::builder();
        if let Some(m) = module {
            b = b.module(m);
        }
        if let Some(dir) = dir {
            b = b.dir(&dir);
        }
        b
    };
    let keys: Vec<&str> = samples.iter().map(|s| s.key.as_str()).collect();
    match way {
        Way::Rdb => builder(Some(rb::rdb_copy(from))).start(),
        Way::Aof => builder(Some(rb::aof_copy(from)))
            .arg("appendonly", "yes")
            .arg("aof-use-rdb-preamble", "no")
            .start(),
        Way::Restore => {
            let to = builder(None).start();
            rb::restore_all(&mut from.conn(), &mut to.conn(), &keys);
            to
        }
        Way::Loadchunk => {
            let to = builder(None).start();
            rb::scandump_all(&mut from.conn(), &mut to.conn(), &keys);
            to
        }
    }
}

/// No differing answer over `filters` filters, each with 20,000 non-members.
fn assert_same(c: Compared, what: &str, filters: usize) {
    assert_eq!(c.differing, 0, "{what}: {c:?}");
    assert!(
        c.filters == filters && c.non_members == 20_000 * filters,
        "{what}: {c:?}"
    );
}

/// In by `way`, compare, add on both, compare; back by `way` into RedisBloom, compare; add on
/// both, compare.
fn round_trip(way: Way) {
    let Some(module) = rb::module() else { return };
    let (a, mut samples) = rb::populated_server(&module);
    let non_members = rb::non_members(20_000);
    let b = transfer(way, &a, None, &samples);
    let (mut ca, mut cb) = (a.conn(), b.conn());
    let info = server_info(&mut cb, "lcbloom");
    assert_eq!(
        info["lcbloom_bf_redisbloom_keys"],
        samples.len().to_string()
    );
    assert_eq!(info["lcbloom_aof_lost_keys"], "0");
    let compared = rb::compare_servers(
        &mut ca,
        &mut cb,
        &samples,
        &non_members,
        &format!("{way:?} in"),
    );
    assert_same(compared, "in", 14);
    rb::add_same(&mut ca, &mut cb, &mut samples, ":1");
    let compared = rb::compare_servers(
        &mut ca,
        &mut cb,
        &samples,
        &non_members,
        &format!("{way:?} in, after adds"),
    );
    assert_same(compared, "after adds", 14);
    // lcbloom saves them as RedisBloom does: the same DUMP payload, byte for byte.
    for s in &samples {
        let dump =
            |c: &mut Connection| -> Vec<u8> { redis::cmd("DUMP").arg(&s.key).query(c).unwrap() };
        assert!(dump(&mut ca) == dump(&mut cb), "DUMP of {}", s.key);
    }

    // RedisBloom 2.8.2 refuses its own SCANDUMP header, and so its own AOF rewrite, for
    // filters from encver-0 data (see `reloads_own_scandump`): those go back by RDB or DUMP.
    let (mut samples, refused): (Vec<Sample>, Vec<Sample>) = match way {
        Way::Aof | Way::Loadchunk => samples
            .into_iter()
            .partition(|s| rb::reloads_own_scandump(&mut ca, &s.key)),
        Way::Rdb | Way::Restore => (samples, Vec::new()),
    };
    for s in &refused {
        assert!(s.key.ends_with("encver0"), "RedisBloom refuses {}", s.key);
    }
    let back = transfer(way, &b, Some(&module), &samples);
    let mut cr = back.conn();
    let compared = rb::compare_servers(
        &mut ca,
        &mut cr,
        &samples,
        &non_members,
        &format!("{way:?} back into RedisBloom"),
    );
    assert_same(compared, "back", 14 - refused.len());
    rb::add_same(&mut cb, &mut cr, &mut samples, ":2");
    let compared = rb::compare_servers(
        &mut cb,
        &mut cr,
        &samples,
        &non_members,
        &format!("{way:?} back, after adds"),
    );
    assert_same(compared, "back, after adds", 14 - refused.len());
}

#[test]
fn redisbloom_rdb_in_and_back() {
    round_trip(Way::Rdb);
}

#[test]
fn redisbloom_aof_without_preamble_in_and_back() {
    round_trip(Way::Aof);
}

#[test]
fn redisbloom_restore_in_and_back() {
    round_trip(Way::Restore);
}

#[test]
fn redisbloom_scandump_loadchunk_in_and_back() {
    round_trip(Way::Loadchunk);
}

/// Filters RedisBloom cannot grow come across by every way in: expansion 4294967296 (stored
/// as 0 in RedisBloom's 32 bits) and a chain whose growth failed, which carries a last link
/// RedisBloom appended without a bit array. The first answers as in RedisBloom; the second for
/// the items it holds, where RedisBloom answers every lookup "present". An add that needs a
/// new link fails, as in RedisBloom. Both used to stop an RDB load (the server did not start).
#[test]
fn filters_redisbloom_cannot_grow_come_across() {
    let Some(module) = rb::module() else { return };
    let a = rb::server(&module);
    let mut ca = a.conn();
    let rb_text = |r: redis::RedisResult<Value>| err_text(r);
    ok(
        &mut ca,
        &[
            "BF.RESERVE",
            "zero",
            "0.01",
            "1000",
            "EXPANSION",
            "4294967296",
        ],
    );
    ok(&mut ca, &["BF.MADD", "zero", "a", "b", "c"]);
    ok(
        &mut ca,
        &[
            "BF.RESERVE",
            "failed",
            "0.01",
            "10",
            "EXPANSION",
            "4294967296",
        ],
    );
    let mut failed_members = Vec::new();
    for i in 0.. {
        let item = format!("f{i}");
        match redis::cmd("BF.ADD")
            .arg(&["failed", &item])
            .query::<Value>(&mut ca)
        {
            Ok(Value::Int(1)) => failed_members.push(item.into_bytes()),
            Ok(_) => {}
            Err(e) => {
                assert!(e.to_string().contains("problem inserting"), "{e}");
                break;
            }
        }
    }
    // RedisBloom's own answer after the failed growth: every item "present".
    assert_eq!(
        ok(&mut ca, &["BF.EXISTS", "failed", "never-added"]),
        Value::Int(1)
    );
    ok(&mut ca, &["BF.RESERVE", "plain", "0.01", "100"]);
    ok(&mut ca, &["BF.ADD", "plain", "p"]);
    let samples = [
        Sample {
            key: "zero".into(),
            members: vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
        },
        Sample {
            key: "failed".into(),
            members: failed_members,
        },
        Sample {
            key: "plain".into(),
            members: vec![b"p".to_vec()],
        },
    ];
    let non_members = rb::non_members(2_000);
    for way in [Way::Rdb, Way::Aof, Way::Restore, Way::Loadchunk] {
        let b = transfer(way, &a, None, &samples);
        let mut cb = b.conn();
        let info = server_info(&mut cb, "lcbloom");
        assert_eq!(info["lcbloom_bf_redisbloom_keys"], "3", "{way:?}");
        assert_eq!(info["lcbloom_aof_lost_keys"], "0", "{way:?}");
        for s in &samples {
            assert!(rb::mexists(&mut cb, &s.key, &s.members)
                .iter()
                .all(|&e| e == 1));
        }
        let expansion = ["BF.INFO", "zero", "EXPANSION"];
        assert_eq!(ok(&mut cb, &expansion), ok(&mut ca, &expansion), "{way:?}");
        let zero_fp = rb::differing(&mut ca, &mut cb, "zero", &non_members);
        assert_eq!(zero_fp, 0, "{way:?}: answers of the expansion-0 filter");
        let failed_fp: i64 = rb::mexists(&mut cb, "failed", &non_members).iter().sum();
        assert!(
            failed_fp < 100,
            "{way:?}: {failed_fp} of 2,000 non-members present"
        );
        let refused = redis::cmd("BF.ADD")
            .arg(&["failed", "new"])
            .query::<Value>(&mut cb);
        assert_eq!(
            rb_text(refused),
            "ERR problem inserting into filter",
            "{way:?}"
        );
    }
}

#[test]
fn an_rdb_file_with_every_encver_loads() {
    let Some(module) = rb::module() else { return };
    let a = rb::server(&module);
    let mut ca = a.conn();
    let legacy = rb::legacy_samples();
    let mut entries: Vec<(&str, &[u8])> = Vec::new();
    for (sample, value) in &legacy {
        rb::restore_value(&mut ca, &sample.key, value);
        entries.push((&sample.key, value));
    }
    // And encver 4, as RedisBloom 2.8 writes it.
    let current = rb::legacy_chain(5, 20, 150);
    let current_value = encode_value(&current);
    entries.push(("encver4", &current_value));
    rb::restore_value(&mut ca, "encver4", &current_value);
    let dir = Server::fresh_dir();
    std::fs::write(dir.join("dump.rdb"), rb::rdb_file(&entries)).unwrap();
    let b = Server::builder().dir(&dir).start();
    let mut samples: Vec<Sample> = legacy.into_iter().map(|(s, _)| s).collect();
    samples.push(Sample {
        key: "encver4".into(),
        members: samples[0].members.clone(),
    });
    let non_members = rb::non_members(20_000);
    let mut cb = b.conn();
    let c = rb::compare_servers(
        &mut ca,
        &mut cb,
        &samples,
        &non_members,
        "RDB of encvers 0-4",
    );
    assert_eq!(c.differing, 0);
    rb::add_same(&mut ca, &mut cb, &mut samples, ":more");
    let c = rb::compare_servers(&mut ca, &mut cb, &samples, &non_members, "after adds");
    assert_eq!(c.differing, 0);
}

/// A RedisBloom value whose `hashes` field (the 3rd unsigned of the first link) is wrong.
fn corrupt_value() -> Vec<u8> {
    let chain = rb::legacy_chain(5, 20, 10);
    let mut value = encode_value(&chain);
    // 07 81 <id> | 02 size | 02 nfilters | 02 options | 02 growth | 02 entries | 04 error | 02 hashes
    let hashes_at = 10 + 2 * 5 + 9 + 1;
    assert_eq!(value[hashes_at - 1], 2, "the hashes opcode");
    value[hashes_at] += 1;
    value
}

#[test]
fn corrupt_and_foreign_rdb_values_stop_the_load_loudly() {
    let good = encode_value(&rb::legacy_chain(5, 20, 10));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "corrupt",
            corrupt_value(),
            "lcbloom: refusing a RedisBloom filter (key 'bad') from RDB: bad RedisBloom data: hash count",
        ),
        (
            "encver 5",
            {
                let mut v = good.clone();
                v[2..10].copy_from_slice(&module_id("MBbloom--", 5).to_be_bytes());
                v
            },
            "lcbloom: cannot load a RedisBloom filter of encoding version 5",
        ),
        (
            "cuckoo filter",
            {
                let mut v = good.clone();
                v[2..10].copy_from_slice(&module_id("MBbloomCF", 4).to_be_bytes());
                v
            },
            "MBbloomCF",
        ),
    ];
    for (what, value, logged) in cases {
        let dir = Server::fresh_dir();
        let entries: Vec<(&str, &[u8])> = vec![("good", &good), ("bad", &value)];
        std::fs::write(dir.join("dump.rdb"), rb::rdb_file(&entries)).unwrap();
        let log = Server::builder().dir(&dir).start_expecting_failure();
        assert!(log.contains(logged), "{what}: log lacks {logged:?}:\n{log}");
        println!("{what}: the load stopped; logged {logged:?}");
    }
}

#[test]
fn restore_and_loadchunk_refuse_bad_redisbloom_data() {
    let server = Server::builder()
        .module_arg("max-memory-per-key", "100000")
        .start();
    let mut c = server.conn();
    let restore = |c: &mut Connection, key: &str, value: &[u8]| {
        redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(dump_payload(value, rb::RDB_VERSION))
            .query::<Value>(c)
    };
    assert!(err_text(restore(&mut c, "bad", &corrupt_value())).contains("Bad data format"));
    // Over max-memory-per-key: a 100,000-item filter's 120 KB array.
    let big = lcbloom::bloom::redisbloom::chain::RedisBloomChain::reserve(
        0.01,
        100_000,
        Some(2),
        u64::MAX,
    )
    .unwrap();
    assert!(err_text(restore(&mut c, "big", &encode_value(&big))).contains("Bad data format"));
    assert!(server
        .log()
        .contains("filter would exceed max-memory-per-key"));
    // LOADCHUNK: a RedisBloom header refused, nothing created; the same within the limit loads.
    let mut header = scandump::encode_header(&rb::legacy_chain(5, 20, 10));
    let limit = redis::cmd("BF.LOADCHUNK")
        .arg("big")
        .arg(1)
        .arg(scandump::encode_header(&big))
        .query::<Value>(&mut c);
    assert_eq!(
        err_text(limit),
        "ERR filter would exceed max-memory-per-key"
    );
    header[0] ^= 1; // size no longer the links' sum
    let bad = redis::cmd("BF.LOADCHUNK")
        .arg("h")
        .arg(1)
        .arg(&header)
        .query::<Value>(&mut c);
    assert!(err_text(bad).starts_with("ERR bad RedisBloom data"));
    header[0] ^= 1;
    let n: i64 = redis::cmd("EXISTS")
        .arg(&["big", "bad", "h"][..])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0);
    let _: Value = redis::cmd("BF.LOADCHUNK")
        .arg("h")
        .arg(1)
        .arg(&header)
        .query(&mut c)
        .unwrap();
    // RedisBloom's texts for chunks (redisbloom-format.md §4.3).
    let chunk = |c: &mut Connection, it: i64, len: usize| {
        err_text(
            redis::cmd("BF.LOADCHUNK")
                .arg("h")
                .arg(it)
                .arg(vec![0xffu8; len])
                .query::<Value>(c),
        )
    };
    assert_eq!(chunk(&mut c, 1, 73), "ERR received bad data");
    assert_eq!(chunk(&mut c, 0, 0), "ERR received bad data");
    assert_eq!(
        chunk(&mut c, 100_000, 1),
        "ERR invalid offset - no link found"
    );
    assert_eq!(
        chunk(&mut c, 200, 199),
        "ERR invalid chunk - Too big for current filter"
    );
    let (card, info): (i64, Value) = (
        redis::cmd("BF.CARD").arg("h").query(&mut c).unwrap(),
        redis::cmd("BF.INFO")
            .arg("h")
            .arg("ITEMS")
            .query(&mut c)
            .unwrap(),
    );
    assert_eq!((card, info), (10, Value::Array(vec![Value::Int(10)])));
}

/// The AOF a RedisBloom server rewrote (no preamble), plus lines that lose data under lcbloom:
/// a foreign header, a corrupt chunk for an imported key, and a `BF.RESERVE` with trailing
/// arguments (RedisBloom accepts and logs it; lcbloom refuses it). The server starts (no
/// module API can stop an AOF load), logs every lost key and counts them in INFO lcbloom.
#[test]
fn lost_keys_in_an_aof_are_logged_and_counted() {
    let Some(module) = rb::module() else { return };
    let (a, samples) = rb::populated_server(&module);
    let dir = rb::aof_copy(&a);
    let incr = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(".incr."))
        .expect("an incremental AOF file");
    let resp = |args: &[&[u8]]| {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    };
    let mut lines = Vec::new();
    lines.extend(resp(&[b"BF.LOADCHUNK", b"lost:foreign", b"1", &[7u8; 73]]));
    lines.extend(resp(&[b"BF.LOADCHUNK", b"rb:scaling", b"2", &[0xff; 9]]));
    lines.extend(resp(&[
        b"BF.RESERVE",
        b"lost:reserve",
        b"0.01",
        b"100",
        b"FOO",
    ]));
    lines.extend(resp(&[b"BF.ADD", b"fine", b"x"]));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&incr)
        .unwrap();
    std::io::Write::write_all(&mut file, &lines).unwrap();
    drop(file);

    let b = Server::builder()
        .dir(&dir)
        .arg("appendonly", "yes")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut cb = b.conn();
    let info = server_info(&mut cb, "lcbloom");
    assert_eq!(info["lcbloom_aof_lost_keys"], "3", "{info:?}");
    let log = b.log();
    for key in ["lost:foreign", "rb:scaling", "lost:reserve"] {
        let line = log
            .lines()
            .find(|l| l.contains("LOST KEY") && l.contains(&format!("'{key}'")))
            .unwrap_or_else(|| panic!("no warning for {key}:\n{log}"));
        assert!(line.contains(" # "), "not at warning level: {line}");
        println!("logged: {line}");
    }
    // Everything RedisBloom wrote still answers as RedisBloom does (the refused chunk changed
    // nothing), and the lines after the lost ones were applied.
    let c = rb::compare_servers(
        &mut a.conn(),
        &mut cb,
        &samples,
        &rb::non_members(20_000),
        "AOF with lost lines",
    );
    assert_eq!(c.differing, 0);
    let fine: bool = redis::cmd("BF.EXISTS")
        .arg(&["fine", "x"][..])
        .query(&mut cb)
        .unwrap();
    assert!(fine);
    // Nothing is counted outside loading.
    let _ = redis::cmd("BF.LOADCHUNK")
        .arg(&["other", "1", "junk"][..])
        .query::<Value>(&mut cb);
    assert_eq!(
        server_info(&mut cb, "lcbloom")["lcbloom_aof_lost_keys"],
        "3"
    );
}

fn digests_of(c: &mut Connection, keys: &[String]) -> Vec<String> {
    keys.iter().map(|k| digest(c, k)).collect()
}

/// Imported filters on lcbloom: replicas, COPY, DEBUG RELOAD, MEMORY USAGE, INFO, and
/// lcbloom's own AOF (with and without RDB preamble).
#[test]
fn imported_filters_replicate_copy_reload_and_persist() {
    let Some(module) = rb::module() else { return };
    let (a, samples) = rb::populated_server(&module);
    let mut m = Server::builder()
        .arg("appendonly", "yes")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut cm = m.conn();
    let keys: Vec<&str> = samples.iter().map(|s| s.key.as_str()).collect();
    rb::restore_all(&mut a.conn(), &mut cm, &keys);
    ok(&mut cm, &["BF.ADD", "own", "x"]);
    let r = Server::start();
    attach_replica(&m, &r);
    let mut cr = r.conn();
    // Writes after the sync: adds (growing chains; MADDs stopped part-way on the full
    // non-scaling filters propagate as the MADD of their applied part), BF.INSERT, a chunk.
    let items: Vec<String> = (0..700).map(|i| format!("after-sync{i}")).collect();
    for key in &keys {
        let _ = redis::cmd("BF.MADD")
            .arg(*key)
            .arg(&items)
            .query::<Value>(&mut cm);
    }
    let full = redis::cmd("BF.INSERT")
        .arg(&["rb:nonscaling", "ITEMS", "one-more", "two-more"][..])
        .query::<Value>(&mut cm);
    assert!(err_text(full).contains("non scaling filter is full"));
    let header: Vec<Value> = redis::cmd("BF.SCANDUMP")
        .arg(&["rb:exp4", "1"][..])
        .query(&mut cm)
        .unwrap();
    if let [Value::Int(it), Value::BulkString(chunk)] = &header[..] {
        let _: Value = redis::cmd("BF.LOADCHUNK")
            .arg("rb:exp4")
            .arg(*it)
            .arg(chunk)
            .query(&mut cm)
            .unwrap();
    } else {
        panic!("{header:?}");
    }
    let n: i64 = redis::cmd("WAIT")
        .arg(&[1, 5000][..])
        .query(&mut cm)
        .unwrap();
    assert_eq!(n, 1);
    let mut all: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    all.push("own".into());
    assert_eq!(
        digests_of(&mut cr, &all),
        digests_of(&mut cm, &all),
        "replica"
    );
    let t: String = redis::cmd("TYPE").arg("rb:big").query(&mut cr).unwrap();
    assert_eq!(t, "MBbloom--");
    let err = redis::cmd("BF.ADD")
        .arg(&["rb:big", "x"][..])
        .query::<Value>(&mut cr);
    assert!(err_text(err).starts_with("READONLY"));

    // COPY, MEMORY USAGE, INFO.
    ok(&mut cm, &["COPY", "rb:big", "copy"]);
    assert_eq!(digest(&mut cm, "copy"), digest(&mut cm, "rb:big"));
    let usage: i64 = redis::cmd("MEMORY")
        .arg(&["USAGE", "rb:big"][..])
        .query(&mut cm)
        .unwrap();
    // The 137,848-byte array in jemalloc's 163,840-byte size class, and the rest.
    assert!(usage > 163_840 && usage < 166_000, "MEMORY USAGE {usage}");
    let info = server_info(&mut cm, "lcbloom");
    assert_eq!(
        info["lcbloom_bf_redisbloom_keys"],
        (keys.len() + 1).to_string()
    );
    assert_eq!(info["lcbloom_bf_keys"], (keys.len() + 2).to_string());
    all.push("copy".into());

    // DEBUG RELOAD, lcbloom's AOF rewrite (BF.LOADCHUNK lines) and a restart, then with RDB
    // preamble.
    let before = digests_of(&mut cm, &all);
    ok(&mut cm, &["DEBUG", "RELOAD"]);
    assert_eq!(digests_of(&mut cm, &all), before, "DEBUG RELOAD");
    ok(&mut cm, &["BGREWRITEAOF"]);
    wait_aof_rewrite(&mut cm);
    let _: Value = redis::cmd("BF.MADD")
        .arg(&["rb:exp1", "after-rewrite"][..])
        .query(&mut cm)
        .unwrap();
    let before = digests_of(&mut cm, &all);
    drop(cm);
    m.restart();
    let mut cm = m.conn();
    assert_eq!(digests_of(&mut cm, &all), before, "AOF without preamble");
    ok(&mut cm, &["CONFIG", "SET", "aof-use-rdb-preamble", "yes"]);
    ok(&mut cm, &["BGREWRITEAOF"]);
    wait_aof_rewrite(&mut cm);
    drop(cm);
    m.restart();
    let mut cm = m.conn();
    assert_eq!(digests_of(&mut cm, &all), before, "AOF with preamble");
    assert_eq!(
        server_info(&mut cm, "lcbloom")["lcbloom_aof_lost_keys"],
        "0"
    );
}

/// `MEMORY USAGE` of imported filters is within ±10% of the `used_memory` growth they cause
/// (shapes RedisBloom made: a default filter with 10 items, a grown 0.01/1000 chain, a
/// 100,000-capacity filter), over many keys restored from one payload.
#[test]
fn memory_usage_of_imported_filters_is_within_ten_percent() {
    let Some(module) = rb::module() else { return };
    let a = rb::server(&module);
    let mut ca = a.conn();
    let shapes: [(&str, &[&str], u32, usize); 3] = [
        ("default, 10 items", &[], 10, 3_000),
        ("0.01 / 1,000, 3,000 items", &["0.01", "1000"], 3_000, 300),
        (
            "0.01 / 100,000, 30,000 items",
            &["0.01", "100000"],
            30_000,
            30,
        ),
    ];
    let server = Server::start();
    let mut c = server.conn();
    let allocator = server_info(&mut c, "memory")["mem_allocator"].clone();
    let mut report = String::new();
    for (name, reserve, items, keys) in shapes {
        if !reserve.is_empty() {
            let _: Value = redis::cmd("BF.RESERVE")
                .arg(name)
                .arg(reserve)
                .query(&mut ca)
                .unwrap();
        }
        let members: Vec<Vec<u8>> = (0..items).map(|i| format!("m{i}").into_bytes()).collect();
        rb::madd(&mut ca, name, &members);
        let payload: Vec<u8> = redis::cmd("DUMP").arg(name).query(&mut ca).unwrap();
        // SYNC: Valkey 9 flushes in the background by default, and the bytes of the last
        // shape's keys must be gone before the next shape is measured.
        ok(&mut c, &["FLUSHALL", "SYNC"]);
        let before = used_memory(&mut c, 1);
        let names = restore_copies(&server, &payload, keys);
        let after = used_memory(&mut c, 1);
        let real = (after - before) as f64 / keys as f64;
        let reported = memory_usage_of(&mut c, &names) as f64 / keys as f64;
        report += &format!("{name:<32} {real:>9.0} B/key real, MEMORY USAGE {reported:>9.0}\n");
        let band = usage_band(&mut c);
        assert!(
            band.contains(&(reported / real)),
            "{name}: off by more than the allocator's band ({allocator})\n{report}"
        );
    }
}

/// The replies clients see for imported filters, in RESP2 and RESP3, against RedisBloom's own
/// (booleans, maps, nil expansion, errors, arrays stopped by an error); then growth past
/// `max-memory-per-key` is refused.
#[test]
fn imported_filters_reply_as_redisbloom_in_resp2_and_resp3() {
    let Some(module) = rb::module() else { return };
    let a = rb::server(&module);
    let b = Server::start();
    let mut ca = a.conn();
    ok(
        &mut ca,
        &["BF.RESERVE", "s", "0.01", "10", "EXPANSION", "2"],
    );
    ok(&mut ca, &["BF.RESERVE", "n", "0.01", "5", "NONSCALING"]);
    let items: Vec<String> = (0..30).map(|i| format!("i{i}")).collect();
    let _: Value = redis::cmd("BF.MADD")
        .arg("s")
        .arg(&items)
        .query(&mut ca)
        .unwrap();
    let _: Value = redis::cmd("BF.MADD")
        .arg("n")
        .arg(&items[..5])
        .query(&mut ca)
        .unwrap();
    rb::restore_all(&mut ca, &mut b.conn(), &["s", "n"]);
    let script: &[&[&str]] = &[
        &["BF.INFO", "s"],
        &["BF.INFO", "n"],
        &["BF.INFO", "s", "CAPACITY"],
        &["BF.INFO", "n", "EXPANSION"],
        &["BF.INFO", "s", "NOSUCHFIELD"],
        &["BF.EXISTS", "s", "i0"],
        &["BF.EXISTS", "s", "zz"],
        &["BF.MEXISTS", "s", "i0", "zz", "i29"],
        &["BF.CARD", "s"],
        &["BF.SCANDUMP", "s", "0"],
        &["BF.SCANDUMP", "s", "1"],
        &["BF.SCANDUMP", "s", "-3"],
        &["BF.SCANDUMP", "s", "99999"],
        &["BF.ADD", "s", "new"],
        &["BF.ADD", "s", "new"],
        &["BF.MADD", "s", "a", "b", "i3"],
        &["BF.INSERT", "s", "CAPACITY", "1000", "ITEMS", "c", "d"],
        &["BF.INSERT", "s", "NOCREATE", "ITEMS", "e"],
        &["BF.RESERVE", "s", "0.01", "100"],
        &["BF.ADD", "n", "more"],
        &["BF.MADD", "n", "i0", "x", "y"],
        &["BF.LOADCHUNK", "s", "1", "x"],
        &["BF.INFO", "s"],
        &["BF.SCANDUMP", "s", "0"],
    ];
    for (resp, mut x, mut y) in [
        ("RESP2", a.conn(), b.conn()),
        ("RESP3", a.conn3(), b.conn3()),
    ] {
        for args in script {
            // Errors compare by text: RedisBloom sends a few without the ERR code
            // (`Invalid information value`), lcbloom always with it.
            let run = |c: &mut Connection| match cmd(c, args) {
                Ok(v) => format!("{v:?}"),
                Err(e) => {
                    let text = err_text(Err::<(), _>(e));
                    format!("error: {}", text.strip_prefix("ERR ").unwrap_or(&text))
                }
            };
            assert_eq!(run(&mut x), run(&mut y), "{resp}: {args:?}");
        }
    }
    // Growth past max-memory-per-key is refused with lcbloom's text, and nothing changes.
    let mut cb = b.conn();
    ok(
        &mut cb,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "2048"],
    );
    let before = digest(&mut cb, "s");
    let more: Vec<String> = (0..2_000).map(|i| format!("more{i}")).collect();
    let refused = redis::cmd("BF.MADD")
        .arg("s")
        .arg(&more)
        .query::<Value>(&mut cb);
    assert!(err_text(refused).contains("max-memory-per-key"));
    assert_ne!(
        digest(&mut cb, "s"),
        before,
        "the items before the refusal were added"
    );
    let usage: i64 = redis::cmd("MEMORY")
        .arg(&["USAGE", "s"][..])
        .query(&mut cb)
        .unwrap();
    assert!(usage < 2048 + 200, "MEMORY USAGE {usage}");
}

/// Filters imported from RedisBloom are weighed against `max-memory-per-key` as `MEMORY
/// USAGE` counts them, each bit array in its size class: `RESTORE` of one refused under a
/// limit below that and taken at it, and growth by adds stopping within the limit (an
/// empty 0.001 / 100,000 filter of 229,504 bytes used to load under a limit of 197,880).
#[test]
fn imported_filters_are_weighed_by_their_real_bytes() {
    let Some(module) = rb::module() else { return };
    let a = rb::server(&module);
    let mut ca = a.conn();
    let _: Value = redis::cmd("BF.RESERVE")
        .arg(&["big", "0.001", "100000"])
        .query(&mut ca)
        .unwrap();
    let members: Vec<Vec<u8>> = (0..30).map(|i| format!("m{i}").into_bytes()).collect();
    rb::madd(&mut ca, "small", &members);
    let big: Vec<u8> = redis::cmd("DUMP").arg("big").query(&mut ca).unwrap();
    let small: Vec<u8> = redis::cmd("DUMP").arg("small").query(&mut ca).unwrap();

    let server = Server::start();
    let mut c = server.conn();
    let restore = |c: &mut Connection, key: &str, payload: &[u8]| {
        redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(payload)
            .query::<Value>(c)
    };
    restore(&mut c, "measured", &big).unwrap();
    let bytes = memory_usage_of(&mut c, &["measured".to_string()]);
    let limit = |c: &mut Connection, bytes: i64| {
        let bytes = bytes.to_string();
        ok(c, &["CONFIG", "SET", "lcbloom.max-memory-per-key", &bytes]);
    };
    // `MEMORY USAGE` adds the key's own bytes (under 100) to the value's.
    limit(&mut c, bytes - 100);
    assert!(err_text(restore(&mut c, "r", &big)).contains("Bad data format"));
    assert_eq!(ok(&mut c, &["EXISTS", "r"]), Value::Int(0));
    limit(&mut c, bytes);
    assert_eq!(restore(&mut c, "r", &big), Ok(Value::Okay));

    limit(&mut c, 15_000);
    restore(&mut c, "grown", &small).unwrap();
    let mut i = 0;
    let refused = loop {
        let batch: Vec<String> = (i..i + 100).map(|j| format!("g{j}")).collect();
        i += 100;
        let mut args = vec!["BF.MADD", "grown"];
        args.extend(batch.iter().map(|s| s.as_str()));
        match cmd(&mut c, &args) {
            Err(e) => break e.to_string(),
            Ok(Value::Array(replies)) => {
                if let Some(e) = replies.iter().find(|r| matches!(r, Value::ServerError(_))) {
                    break format!("{e:?}");
                }
            }
            Ok(other) => panic!("{other:?}"),
        }
        assert!(i < 100_000, "never refused");
    };
    assert!(refused.contains("max-memory-per-key"), "{refused}");
    let held = memory_usage_of(&mut c, &["grown".to_string()]);
    assert!(held <= 15_000, "{held}");
}
