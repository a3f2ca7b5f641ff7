//! LC.* commands against a real server: replies (RESP2 and RESP3), errors, exactness, unions,
//! WRONGTYPE both ways, LC.LOADCHUNK and keyspace notifications.
use crate::common::*;
use redis::{Connection, Value};

fn items(prefix: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

fn lc_add(c: &mut Connection, key: &str, items: &[String]) -> i64 {
    redis::cmd("LC.ADD").arg(key).arg(items).query(c).unwrap()
}

fn lc_count(c: &mut Connection, keys: &[&str]) -> i64 {
    redis::cmd("LC.COUNT").arg(keys).query(c).unwrap()
}

fn exists(c: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).unwrap() == 1
}

#[test]
fn reserve_and_its_errors() {
    let server = Server::start();
    let mut c = server.conn();
    let ok: String = redis::cmd("LC.RESERVE")
        .arg(&["k", "0.01", "1000"])
        .query(&mut c)
        .unwrap();
    assert_eq!(ok, "OK");
    let again = redis::cmd("LC.RESERVE")
        .arg(&["k", "0.02", "10"])
        .query::<()>(&mut c);
    assert_eq!(err_text(again), "ERR item exists");
    for rate in ["0", "1", "1.5", "-0.1", "abc", "nan", "inf", "", " 0.1"] {
        let r = redis::cmd("LC.RESERVE")
            .arg(&["r", rate, "100"])
            .query::<()>(&mut c);
        assert_eq!(
            err_text(r),
            "ERR error rate must be a number strictly between 0 and 1",
            "rate {rate:?}"
        );
    }
    for capacity in [
        "0",
        "-5",
        "1.5",
        "x",
        "",
        "1125899906842625",
        "99999999999999999999",
        "0100",
        "-0",
        "+5",
    ] {
        let r = redis::cmd("LC.RESERVE")
            .arg(&["r", "0.01", capacity])
            .query::<()>(&mut c);
        assert_eq!(
            err_text(r),
            "ERR capacity must be an integer between 1 and 2^50",
            "capacity {capacity:?}"
        );
    }
    for args in [&["r", "0.01"][..], &["r"], &[], &["r", "0.01", "10", "x"]] {
        let r = redis::cmd("LC.RESERVE").arg(args).query::<()>(&mut c);
        assert!(err_text(r).contains("wrong number of arguments"));
    }
    // The limit binds the most a counter grows to, in the allocator's size classes (as
    // LC.INFO's Size counts them): at 1% its registers (7,168 bytes), or its exact set where
    // a large capacity makes that larger (10,240 bytes at 10^6), never the bitmap the
    // capacity once asked for (19,272 bytes at 10^6).
    let set_limit = |c: &mut Connection, limit: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", "lcbloom.max-memory-per-key", limit])
            .query(c)
            .unwrap();
    };
    set_limit(&mut c, "10239");
    let r = redis::cmd("LC.RESERVE")
        .arg(&["big", "0.01", "1000000"])
        .query::<()>(&mut c);
    assert!(err_text(r).starts_with("ERR counter would take 10240 bytes"));
    set_limit(&mut c, "10240");
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["big", "0.01", "1000000"])
        .query(&mut c)
        .unwrap();
    for chunk in 0..40 {
        let items: Vec<String> = (0..500).map(|i| format!("i{chunk}-{i}")).collect();
        let _: i64 = redis::cmd("LC.ADD")
            .arg("big")
            .arg(&items)
            .query(&mut c)
            .unwrap();
        let size = lc_info_field(&mut c, "big", "Size");
        assert!(matches!(size, Value::Int(s) if s <= 10_240), "{size:?}");
    }
    assert_eq!(lc_mode(&mut c, "big"), "registers");
    set_limit(&mut c, "7167");
    let r = redis::cmd("LC.RESERVE")
        .arg(&["r", "0.01", "1000"])
        .query::<()>(&mut c);
    let text = err_text(r);
    assert!(
        text.starts_with("ERR counter would take 7168 bytes"),
        "{text}"
    );
    assert!(text.contains("max-memory-per-key"));
    // The defaults are refused too, by LC.ADD on a missing key.
    let r = redis::cmd("LC.ADD").arg(&["r", "a"]).query::<i64>(&mut c);
    assert!(err_text(r).contains("max-memory-per-key"));
    let huge = redis::cmd("LC.RESERVE")
        .arg(&["r", "0.0004", "1125899906842624"])
        .query::<()>(&mut c);
    assert!(err_text(huge).contains("max-memory-per-key"));
    assert!(!exists(&mut c, "r"), "a failed command left a key");
    assert_eq!(lc_info_field(&mut c, "k", "Capacity"), Value::Int(1000));
}

/// `LC.INSERT` adds as `LC.ADD` does, creating a missing key with its parameters (the
/// defaults for those not given) or, with `NOCREATE`, not at all; a key that exists keeps its
/// own. A bad option or value is refused before anything changes.
#[test]
fn insert_creates_with_its_parameters_or_not_at_all() {
    let server = Server::start();
    let mut c = server.conn();
    let insert =
        |c: &mut Connection, args: &[&str]| redis::cmd("LC.INSERT").arg(args).query::<i64>(c);
    assert_eq!(
        insert(
            &mut c,
            &["m", "CAPACITY", "250", "ERROR", "0.02", "ITEMS", "a", "b", "a"]
        ),
        Ok(2)
    );
    assert_eq!(lc_info_field(&mut c, "m", "Capacity"), Value::Int(250));
    assert_eq!(lc_error_rate(&mut c, "m"), Some(0.02));
    // An existing key keeps its parameters; the items go in.
    assert_eq!(
        insert(
            &mut c,
            &["m", "error", "0.1", "capacity", "9", "items", "c", "a"]
        ),
        Ok(1)
    );
    assert_eq!(lc_info_field(&mut c, "m", "Capacity"), Value::Int(250));
    assert_eq!(lc_count(&mut c, &["m"]), 3);
    // Parameters not given come from lc-capacity and lc-error-rate.
    assert_eq!(insert(&mut c, &["d", "ERROR", "0.05", "ITEMS", "x"]), Ok(1));
    assert_eq!(lc_info_field(&mut c, "d", "Capacity"), Value::Int(50_000));
    assert_eq!(lc_error_rate(&mut c, "d"), Some(0.05));
    assert_eq!(
        insert(&mut c, &["e", "CAPACITY", "1000", "ITEMS", "x"]),
        Ok(1)
    );
    assert_eq!(lc_error_rate(&mut c, "e"), Some(0.01));
    // NOCREATE: a missing key stays missing; an existing one takes the items.
    assert_eq!(
        err_text(insert(&mut c, &["n", "NOCREATE", "ITEMS", "x"])),
        "ERR not found"
    );
    assert!(!exists(&mut c, "n"));
    assert_eq!(insert(&mut c, &["m", "NOCREATE", "ITEMS", "z"]), Ok(1));
    let refused: &[(&[&str], &str)] = &[
        (&["n", "ITEMS"], "wrong number of arguments"),
        (
            &["n", "CAPACITY", "10"],
            "ERR ITEMS and at least one item are required",
        ),
        (&["n", "NOCREATE", "x"], "ERR unknown argument 'x'"),
        (
            &["n", "ERROR", "1", "ITEMS", "x"],
            "ERR error rate must be a number strictly between 0 and 1",
        ),
        (&["n", "ITEMS", "x", "ERROR"], ""),
        (
            &["n", "ERROR", "0.0001", "ITEMS", "x"],
            "ERR error rate must be at least",
        ),
        (
            &["n", "CAPACITY", "0", "ITEMS", "x"],
            "ERR capacity must be an integer between 1 and 2^50",
        ),
        (
            &["n", "CAPACITY", "ITEMS", "x"],
            "ERR capacity must be an integer between 1 and 2^50",
        ),
        (
            &["n", "ERROR", "0.1", "ERROR", "0.1", "ITEMS", "x"],
            "ERR ERROR given more than once",
        ),
        (&["n"], "wrong number of arguments"),
    ];
    for (args, error) in refused {
        let r = insert(&mut c, args);
        if error.is_empty() {
            // Words after ITEMS are items.
            assert_eq!(r, Ok(2), "{args:?}");
            ok(&mut c, &["DEL", "n"]);
        } else {
            let text = err_text(r);
            assert!(
                text.starts_with(error) || text.contains(error),
                "{args:?}: {text}"
            );
            assert!(!exists(&mut c, "n"), "{args:?} left a key");
        }
    }
    // On an existing key the options are parsed, not held to a new counter's limits.
    assert_eq!(
        insert(&mut c, &["m", "ERROR", "0.0001", "ITEMS", "y"]),
        Ok(1)
    );
    let text = err_text(insert(&mut c, &["m", "ERROR", "1", "ITEMS", "w"]));
    assert!(text.starts_with("ERR error rate must be"), "{text}");
    assert_eq!(lc_error_rate(&mut c, "m"), Some(0.02));
    ok(&mut c, &["SET", "s", "v"]);
    assert!(err_text(insert(&mut c, &["s", "ITEMS", "x"])).starts_with("WRONGTYPE"));
    assert_eq!(lc_count(&mut c, &["m"]), 5);
}

#[test]
fn add_is_exact_up_to_250_items_with_the_defaults() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(lc_add(&mut c, "k", &[]), 0);
    assert!(
        exists(&mut c, "k"),
        "LC.ADD with no item creates the counter"
    );
    assert_eq!(lc_count(&mut c, &["k"]), 0);
    for i in 0..250u32 {
        // One new item, one repeated, one duplicated inside the call.
        let batch = vec![
            format!("user:{i}"),
            "user:0".to_string(),
            format!("user:{i}"),
        ];
        assert_eq!(lc_add(&mut c, "k", &batch), 1, "item {i}");
        assert_eq!(lc_count(&mut c, &["k"]), i as i64 + 1);
    }
    assert_eq!(
        lc_info_field(&mut c, "k", "Mode"),
        Value::SimpleString("exact".into())
    );
    assert_eq!(lc_info_field(&mut c, "k", "Bits"), Value::Int(17134));
    // Past the exact limit (267 with the defaults) the counter lists its sketch's tokens; an
    // item changes it when its token is new (all but rarely), and its count starts from the
    // exact one.
    let changed = lc_add(&mut c, "k", &items("user:", 0..400));
    assert!((147..=150).contains(&changed), "{changed}");
    assert_eq!(
        lc_info_field(&mut c, "k", "Mode"),
        Value::SimpleString("tokens".into())
    );
    let n = lc_count(&mut c, &["k"]);
    assert!((398..=402).contains(&n), "{n}");
    // A repeated item never changes a bitmap.
    assert_eq!(lc_add(&mut c, "k", &items("user:", 0..400)), 0);
    let r = redis::cmd("LC.ADD").query::<i64>(&mut c);
    assert!(err_text(r).contains("wrong number of arguments"));
}

#[test]
fn info_reply_shapes_in_resp2_and_resp3() {
    let server = Server::start();
    let mut c = server.conn();
    lc_add(&mut c, "k", &items("a", 0..10));
    let fields: Vec<(String, Value)> = lc_info(&mut c, "k");
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    let expected = [
        "Capacity",
        "Error rate",
        "Size",
        "Bits",
        "Bits set",
        "Mode",
        "Count",
        "Standard error",
        "Saturated",
        "Exact up to",
    ];
    assert_eq!(names, expected);
    assert_eq!(fields[0].1, Value::Int(50_000));
    assert_eq!(fields[1].1, Value::BulkString(b"0.01".to_vec()));
    assert!(matches!(fields[2].1, Value::Int(s) if s > 0 && s < 300));
    assert_eq!(fields[4].1, Value::Int(10));
    assert_eq!(fields[6].1, Value::Int(10));
    assert_eq!(fields[7].1, Value::BulkString(b"0".to_vec()));
    assert_eq!(fields[8].1, Value::Int(0));
    assert_eq!(fields[9].1, Value::Int(267));
    // Doubles in RESP2 in their fewest digits on every server: Redis 7.0's own formatting
    // would send 0.05 as `0.050000000000000003`.
    ok(&mut c, &["LC.RESERVE", "coarse", "0.05", "1000"]);
    let coarse: Vec<(String, Value)> = lc_info(&mut c, "coarse");
    assert_eq!(coarse[1].1, Value::BulkString(b"0.05".to_vec()));

    let mut c3 = server.conn3();
    let reply: Value = redis::cmd("LC.INFO").arg("k").query(&mut c3).unwrap();
    let Value::Map(map) = reply else {
        panic!("RESP3 LC.INFO is not a map: {reply:?}")
    };
    let names3: Vec<String> = map
        .iter()
        .map(|(k, _)| match k {
            Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(names3, expected);
    assert_eq!(map[1].1, Value::Double(0.01));
    assert_eq!(map[5].1, Value::SimpleString("exact".into()));
    assert_eq!(map[7].1, Value::Double(0.0));
    // Saturated: a yes/no field is an integer in RESP3 too (docs/commands.md).
    assert_eq!(map[8].1, Value::Int(0));
    assert_eq!(map[9].1, Value::Int(267));
    let count: Value = redis::cmd("LC.COUNT").arg("k").query(&mut c3).unwrap();
    assert_eq!(count, Value::Int(10));
    let added: Value = redis::cmd("LC.ADD")
        .arg(&["k", "new"])
        .query(&mut c3)
        .unwrap();
    assert_eq!(added, Value::Int(1));

    let missing = redis::cmd("LC.INFO").arg("nope").query::<Value>(&mut c);
    assert_eq!(err_text(missing), "ERR not found");
    let missing3 = redis::cmd("LC.INFO").arg("nope").query::<Value>(&mut c3);
    assert_eq!(err_text(missing3), "ERR not found");
    let arity = redis::cmd("LC.INFO")
        .arg(&["k", "extra"])
        .query::<Value>(&mut c);
    assert!(err_text(arity).contains("wrong number of arguments"));
}

#[test]
fn counters_never_saturate() {
    let server = Server::start();
    let mut c = server.conn();
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["k", "0.05", "10"])
        .query(&mut c)
        .unwrap();
    for start in (0..200_000).step_by(10_000) {
        lc_add(&mut c, "k", &items("x", start..start + 10_000));
    }
    assert_eq!(lc_info_field(&mut c, "k", "Saturated"), Value::Int(0));
    assert_eq!(
        lc_info_field(&mut c, "k", "Mode"),
        Value::SimpleString("registers".into())
    );
    let n = lc_count(&mut c, &["k"]) as f64;
    let se = match lc_info_field(&mut c, "k", "Standard error") {
        Value::Double(se) => se,
        Value::BulkString(text) => String::from_utf8(text).unwrap().parse().unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(se > 0.005 && se <= 0.06, "{se}");
    assert!((n / 200_000.0 - 1.0).abs() <= 4.0 * se, "{n} ± {se}");
}

/// A count over exact counters of one size is exact while they list at most eight token lists'
/// worth of items (28,352 for default counters: docs/commands.md, `LC.COUNT`), and an estimate
/// within the counters' error past that.
#[test]
fn a_union_of_exact_counters_is_exact_up_to_eight_token_lists() {
    let server = Server::start();
    let mut c = server.conn();
    // 106 summaries of 267 recipients (the most a default counter holds exactly) and one of 50.
    let mut keys: Vec<String> = (0..106).map(|i| format!("m{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(lc_add(&mut c, key, &items(&format!("r{i}-"), 0..267)), 267);
    }
    keys.push("last".to_string());
    assert_eq!(lc_add(&mut c, "last", &items("last-", 0..50)), 50);
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    assert!(names.iter().all(|k| lc_mode(&mut c, k) == "exact"));
    assert_eq!(lc_count(&mut c, &names), 28_352);
    lc_add(&mut c, "last", &items("last-", 50..51));
    let estimate = lc_count(&mut c, &names) as f64;
    assert!((estimate / 28_353.0 - 1.0).abs() <= 0.03, "{estimate}");
}

/// A count over a key and keys holding only some of its items is that key's count, and a
/// merge of them into a new key is that key's copy, as `PFCOUNT` and `PFMERGE` of a
/// HyperLogLog and its subsets give; a union used to be estimated afresh, up to about 1% away.
#[test]
fn a_union_within_one_key_counts_as_that_key() {
    let server = Server::start();
    let mut c = server.conn();
    for chunk in 0..10 {
        lc_add(&mut c, "all", &items(&format!("r{chunk}-"), 0..5_000));
    }
    lc_add(&mut c, "late", &items("r3-", 10..12));
    lc_add(&mut c, "mid", &items("r7-", 0..400));
    let all = lc_count(&mut c, &["all"]);
    assert_eq!(lc_count(&mut c, &["all", "late"]), all);
    assert_eq!(lc_count(&mut c, &["mid", "all", "late"]), all);
    ok(&mut c, &["LC.MERGE", "day", "late", "all", "mid"]);
    assert_eq!(lc_count(&mut c, &["day"]), all);
    assert_eq!(digest(&mut c, "day"), digest(&mut c, "all"));
}

/// A union that adds one item to a key, or a subset of it reserved coarser, counts no fewer
/// than that key, and `LC.MERGE` of them counts the same; the fresh estimate alone came out
/// below the key (20,067 against 20,127 for one item beyond 20,000).
#[test]
fn a_union_never_counts_fewer_than_its_largest_key() {
    let server = Server::start();
    let mut c = server.conn();
    for trial in 0..6 {
        let big = format!("big{trial}");
        let one = format!("one{trial}");
        let coarse = format!("coarse{trial}");
        for chunk in 0..4 {
            lc_add(
                &mut c,
                &big,
                &items(&format!("t{trial}-{chunk}-"), 0..5_000),
            );
        }
        lc_add(&mut c, &one, &items(&format!("t{trial}-new-"), 0..1));
        ok(&mut c, &["LC.RESERVE", &coarse, "0.04", "1000"]);
        lc_add(&mut c, &coarse, &items(&format!("t{trial}-1-"), 0..5_000));
        let most = lc_count(&mut c, &[&big]);
        for other in [&one, &coarse] {
            let union = lc_count(&mut c, &[&big, other]);
            assert!(union >= most, "{trial} {other}: {union} < {most}");
            let merged = format!("merged{trial}{other}");
            ok(&mut c, &["LC.MERGE", &merged, &big, other]);
            assert_eq!(lc_count(&mut c, &[&merged]), union, "{trial} {other}");
        }
    }
}

#[test]
fn union_and_merge_of_overlapping_counters() {
    let server = Server::start();
    let mut c = server.conn();
    // Exact counters: the union is exact.
    lc_add(&mut c, "e1", &items("i", 0..100));
    lc_add(&mut c, "e2", &items("i", 50..150));
    assert_eq!(lc_count(&mut c, &["e1", "e2"]), 150);
    assert_eq!(lc_count(&mut c, &["e1", "e2", "missing", "e1"]), 150);
    assert_eq!(lc_count(&mut c, &["missing"]), 0);
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["e1", "e2"])
        .query(&mut c)
        .unwrap();
    assert_eq!(lc_count(&mut c, &["e1"]), 150);
    assert_eq!(
        lc_info_field(&mut c, "e1", "Mode"),
        Value::SimpleString("exact".into())
    );

    // Sketches and an exact counter.
    lc_add(&mut c, "a", &items("i", 0..20_000));
    lc_add(&mut c, "b", &items("i", 10_000..30_000));
    lc_add(&mut c, "x", &items("i", 29_990..30_010));
    let union = lc_count(&mut c, &["a", "b", "x"]);
    assert!(
        (30_010.0 * 0.97..=30_010.0 * 1.03).contains(&(union as f64)),
        "{union}"
    );
    // A new destination gets the union and its count.
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["d", "a", "b", "x"])
        .query(&mut c)
        .unwrap();
    assert_eq!(lc_count(&mut c, &["d"]), union);
    // The destination's own content is part of the union; itself as a source is harmless.
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["a", "a", "b", "x"])
        .query(&mut c)
        .unwrap();
    assert_eq!(digest(&mut c, "a"), digest(&mut c, "d"));
    // A merge that changes nothing is fine and changes nothing.
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["a", "b"])
        .query(&mut c)
        .unwrap();
    assert_eq!(digest(&mut c, "a"), digest(&mut c, "d"));

    // Any capacity and error rate combine, at the coarser precision.
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["small", "0.02", "100"])
        .query(&mut c)
        .unwrap();
    lc_add(&mut c, "small", &items("s", 0..1_000));
    let both = lc_count(&mut c, &["small", "a"]);
    assert!((both as f64 / 31_000.0 - 1.0).abs() < 0.05, "{both}");
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["small", "a"])
        .query(&mut c)
        .unwrap();
    assert_eq!(lc_count(&mut c, &["small"]), both);
    assert_eq!(lc_info_field(&mut c, "small", "Saturated"), Value::Int(0));
    // No source exists: OK, nothing created.
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["none", "nothing"])
        .query(&mut c)
        .unwrap();
    assert!(!exists(&mut c, "none"));
    for args in [&["d"][..], &[]] {
        let r = redis::cmd("LC.MERGE").arg(args).query::<()>(&mut c);
        assert!(err_text(r).contains("wrong number of arguments"));
    }
    let r = redis::cmd("LC.COUNT").query::<i64>(&mut c);
    assert!(err_text(r).contains("wrong number of arguments"));
}

#[test]
fn wrongtype_both_ways() {
    let server = Server::start();
    let mut c = server.conn();
    let _: () = redis::cmd("SET").arg(&["s", "v"]).query(&mut c).unwrap();
    let _: () = redis::cmd("RPUSH").arg(&["l", "v"]).query(&mut c).unwrap();
    lc_add(&mut c, "lc", &items("i", 0..10));
    let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for other in ["s", "l"] {
        let cases: Vec<Vec<&str>> = vec![
            vec!["LC.ADD", other, "x"],
            vec!["LC.ADD", other],
            vec!["LC.RESERVE", other, "0.01", "100"],
            vec!["LC.COUNT", other],
            vec!["LC.COUNT", "lc", other],
            vec!["LC.INFO", other],
            vec!["LC.MERGE", other, "lc"],
            vec!["LC.MERGE", "lc", other],
            vec!["LC.LOADCHUNK", other, "x"],
        ];
        for case in cases {
            let r = redis::cmd(case[0]).arg(&case[1..]).query::<Value>(&mut c);
            assert_eq!(err_text(r), wrong, "{case:?}");
        }
    }
    for case in [
        &["GET", "lc"][..],
        &["LPUSH", "lc", "x"],
        &["PFCOUNT", "lc"],
        &["INCR", "lc"],
    ] {
        let r = redis::cmd(case[0]).arg(&case[1..]).query::<Value>(&mut c);
        assert_eq!(err_text(r), wrong, "{case:?}");
    }
    assert_eq!(lc_count(&mut c, &["lc"]), 10);

    ok(&mut c, &["BF.RESERVE", "bf", "0.01", "100"]);
    for case in [
        &["LC.ADD", "bf", "x"][..],
        &["LC.COUNT", "bf"],
        &["LC.INFO", "bf"],
    ] {
        let r = redis::cmd(case[0]).arg(&case[1..]).query::<Value>(&mut c);
        assert_eq!(err_text(r), wrong, "{case:?}");
    }
    for case in [
        &["BF.ADD", "lc", "x"][..],
        &["BF.INFO", "lc"],
        &["BF.EXISTS", "lc", "x"],
    ] {
        let r = redis::cmd(case[0]).arg(&case[1..]).query::<Value>(&mut c);
        assert_eq!(err_text(r), wrong, "{case:?}");
    }
}

/// The encoding of an empty counter (see src/lc/codec.rs).
fn empty_encoding(capacity: u8, rate: f64, m: u16) -> Vec<u8> {
    let mut v = vec![1, 1, 0, capacity];
    v.extend_from_slice(&rate.to_le_bytes());
    v.extend_from_slice(&[(m as u8) | 0x80, (m >> 7) as u8, 0]);
    v
}

#[test]
fn loadchunk_recreates_a_counter_and_validates_its_payload() {
    let server = Server::start();
    let mut c = server.conn();
    // capacity 100 at 1% is 5,034 bits.
    let payload = empty_encoding(100, 0.01, 5034);
    let _: () = redis::cmd("LC.LOADCHUNK")
        .arg("k")
        .arg(&payload)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["r", "0.01", "100"])
        .query(&mut c)
        .unwrap();
    assert_eq!(digest(&mut c, "k"), digest(&mut c, "r"));
    assert_eq!(lc_info_field(&mut c, "k", "Bits"), Value::Int(5034));
    let again = redis::cmd("LC.LOADCHUNK")
        .arg("k")
        .arg(&payload)
        .query::<()>(&mut c);
    assert_eq!(err_text(again), "ERR item exists");
    let mut bad = payload.clone();
    bad.push(0);
    let mut bad_version = payload.clone();
    bad_version[0] = 9;
    for (payload, reason) in [
        (bad, "exact set length mismatch"),
        (bad_version, "unknown encoding version"),
        (b"garbage".to_vec(), "unknown encoding version"),
        (Vec::new(), "truncated"),
    ] {
        let r = redis::cmd("LC.LOADCHUNK")
            .arg("n")
            .arg(&payload)
            .query::<()>(&mut c);
        assert_eq!(
            err_text(r),
            format!("ERR invalid counter encoding: {reason}")
        );
    }
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "lcbloom.max-memory-per-key", "7168"])
        .query(&mut c)
        .unwrap();
    // A saved bitmap of 64,000 bits, half of them set, takes 8,192 bytes (its words and
    // header in their size class).
    let mut big = vec![1, 1, 1, 100];
    big.extend_from_slice(&0.01f64.to_le_bytes());
    let m = 64_000u32;
    big.extend_from_slice(&[(m as u8) | 0x80, ((m >> 7) as u8) | 0x80, (m >> 14) as u8]);
    big.extend(std::iter::repeat_n(0x55u8, 8_000));
    let r = redis::cmd("LC.LOADCHUNK")
        .arg("n")
        .arg(&big)
        .query::<()>(&mut c);
    assert!(err_text(r).contains("larger than max-memory-per-key"));
    assert!(!exists(&mut c, "n"));
    // An exact set takes its fingerprints' bytes, and grows to its registers at most.
    let exact = empty_encoding(100, 0.01, 16_000);
    let _: () = redis::cmd("LC.LOADCHUNK")
        .arg("n")
        .arg(&exact)
        .query(&mut c)
        .unwrap();
    assert_eq!(lc_mode(&mut c, "n"), "exact");
    let _: i64 = redis::cmd("DEL").arg("n").query(&mut c).unwrap();
    // A piece of a bitmap for a counter that has none is refused, changes nothing and is
    // neither replicated nor notified (the offset does not move).
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "lcbloom.max-memory-per-key", "1gb"])
        .query(&mut c)
        .unwrap();
    for (key, n, mode) in [
        ("e", 10, "exact"),
        ("t", 1_000, "tokens"),
        ("g", 6_000, "registers"),
    ] {
        lc_add(&mut c, key, &items(key, 0..n));
        assert_eq!(
            lc_info_field(&mut c, key, "Mode"),
            Value::SimpleString(mode.into())
        );
        let (before, offset) = (
            digest(&mut c, key),
            info_int(&mut c, "replication", "master_repl_offset"),
        );
        let r = redis::cmd("LC.LOADCHUNK")
            .arg(key)
            .arg(2)
            .arg("x")
            .query::<()>(&mut c);
        assert!(
            err_text(r).starts_with("ERR invalid chunk: the counter is"),
            "{mode}"
        );
        assert_eq!(digest(&mut c, key), before, "{mode}");
        assert_eq!(
            info_int(&mut c, "replication", "master_repl_offset"),
            offset,
            "{mode}"
        );
    }
}

#[test]
fn keyspace_notifications_for_writes_that_change_something() {
    let server = Server::start();
    let mut c = server.conn();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Ed"])
        .query(&mut c)
        .unwrap();
    let mut sub = server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:lc.*").unwrap();
    let mut next = || {
        let msg = pubsub.get_message().unwrap();
        let key: String = msg.get_payload().unwrap();
        (msg.get_channel_name().to_string(), key)
    };
    let ev = |e: &str, k: &str| (format!("__keyevent@0__:{e}"), k.to_string());
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["r", "0.01", "100"])
        .query(&mut c)
        .unwrap();
    assert_eq!(next(), ev("lc.reserve", "r"));
    lc_add(&mut c, "a", &items("i", 0..5));
    assert_eq!(next(), ev("lc.add", "a"));
    lc_add(&mut c, "a", &items("i", 0..5)); // no change: no event
    lc_add(&mut c, "r", &items("i", 0..5));
    assert_eq!(next(), ev("lc.add", "r"));
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["m", "a"])
        .query(&mut c)
        .unwrap();
    assert_eq!(next(), ev("lc.merge", "m"));
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["m", "a"])
        .query(&mut c)
        .unwrap(); // no change
    lc_add(&mut c, "m", &["z".to_string()]);
    assert_eq!(next(), ev("lc.add", "m"));
}

/// Changing `lc-capacity` or `lc-error-rate` part-way never breaks a later union: counters
/// made under each setting (exact, tokens and registers) all combine with each other, the
/// count within the coarsest one's error, and a merge of them all answers the same.
#[test]
fn changing_the_defaults_never_breaks_a_union() {
    let server = Server::start();
    let mut c = server.conn();
    let days = [
        ("monday", None),
        ("tuesday", Some(("lcbloom.lc-capacity", "100000"))),
        ("wednesday", Some(("lcbloom.lc-error-rate", "0.02"))),
        ("thursday", Some(("lcbloom.lc-capacity", "1000"))),
        ("friday", Some(("lcbloom.lc-error-rate", "0.005"))),
    ];
    let mut keys = Vec::new();
    for (d, (day, config)) in days.iter().enumerate() {
        if let Some((name, value)) = config {
            ok(&mut c, &["CONFIG", "SET", name, value]);
        }
        // Each day: a small counter (exact), a mid one (tokens), a large one (registers);
        // days overlap by half their items.
        for (size, n) in [("s", 100u32), ("m", 2_000), ("l", 40_000)] {
            let key = format!("{day}:{size}");
            let start = d as u32 * n / 2;
            for from in (start..start + n).step_by(5_000) {
                lc_add(
                    &mut c,
                    &key,
                    &items(size, from..(from + 5_000).min(start + n)),
                );
            }
            keys.push(key);
        }
    }
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    // The union: each size's items from 0 to 3·n (five days of n, each starting n/2 later).
    let truth = 3.0 * (100.0 + 2_000.0 + 40_000.0);
    let n = lc_count(&mut c, &names) as f64;
    assert!((n / truth - 1.0).abs() <= 0.04, "{n} vs {truth}");
    // Every pair combines, in both orders.
    for a in &names {
        for b in &names {
            assert!(lc_count(&mut c, &[a, b]) > 0, "{a} {b}");
        }
    }
    let mut merge = vec!["union"];
    merge.extend(&names);
    ok(&mut c, &[&["LC.MERGE"][..], &merge].concat());
    assert_eq!(lc_count(&mut c, &["union"]) as f64, n);
    assert_eq!(lc_info_field(&mut c, "union", "Saturated"), Value::Int(0));
    // Merging the other way, into the finest counter, answers within its error too.
    ok(&mut c, &[&["LC.MERGE", "friday:l"][..], &names].concat());
    let m = lc_count(&mut c, &["friday:l"]) as f64;
    assert!((m / truth - 1.0).abs() <= 0.04, "{m} vs {truth}");
}

/// Restores at `key` a dense bitmap that encoding version 2 saved (a golden fixture).
fn restore_saved_bitmap(c: &mut redis::Connection, key: &str) {
    restore_fixture(c, key, "golden-2026-11-23-lc2.txt", "lc_cap50000");
}

/// Restores at `key` the value of case `case` of fixture `file`.
fn restore_fixture(c: &mut redis::Connection, key: &str, file: &str, case: &str) {
    use crate::common::fixtures::load_all;
    use crate::common::fuzz::{dump_payload, split_dump};
    ok(c, &["SET", "probe", "1"]);
    let probe: Vec<u8> = redis::cmd("DUMP").arg("probe").query(c).unwrap();
    let version = split_dump(&probe).1;
    let saved = load_all([file])
        .into_iter()
        .find(|(_, s)| s.name == case)
        .unwrap_or_else(|| panic!("{file} has no case {case}"))
        .1;
    let payload = dump_payload(&split_dump(&saved.recorded.dump).0, version);
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .exec(c)
        .unwrap();
}

/// A union with a saved bitmap never counts fewer than its largest key. Here an exact counter
/// of 2,005 items and a bitmap of 1,000 of them, both saved by the first version: the union,
/// estimated from the bitmap's bits, counted 1,998.
#[test]
fn a_union_with_a_saved_bitmap_never_counts_fewer_than_its_largest_key() {
    let server = Server::start();
    let mut c = server.conn();
    let file = "golden-2026-11-23-lc.txt";
    restore_fixture(&mut c, "exact", file, "lc_v1_cap1m_exact");
    restore_fixture(&mut c, "bitmap", file, "lc_v1_default_1000");
    lc_add(&mut c, "exact", &items("t0_", 0..5));
    assert_eq!(lc_count(&mut c, &["exact"]), 2_005);
    for keys in [["exact", "bitmap"], ["bitmap", "exact"]] {
        assert!(lc_count(&mut c, &keys) >= 2_005, "{keys:?}");
    }
}

/// A bitmap saved by an earlier version (encoding version 2) loads and counts as it did, and a
/// union of it with a new counter, which cannot be formed, names the key to rebuild and how.
#[test]
fn a_saved_bitmap_and_a_new_counter_name_the_key_to_rebuild() {
    let server = Server::start();
    let mut c = server.conn();
    restore_saved_bitmap(&mut c, "old:bitmap");
    assert_eq!(
        lc_info_field(&mut c, "old:bitmap", "Mode"),
        Value::SimpleString("dense".into())
    );
    // Never exact: a bitmap estimates from its first item on.
    assert_eq!(
        lc_info_field(&mut c, "old:bitmap", "Exact up to"),
        Value::Int(0)
    );
    lc_add(&mut c, "new", &items("n", 0..5_000));
    let before = digest(&mut c, "old:bitmap");
    for args in [
        &["LC.COUNT", "old:bitmap", "new"][..],
        &["LC.COUNT", "new", "old:bitmap"],
        &["LC.MERGE", "old:bitmap", "new"],
        &["LC.MERGE", "new", "old:bitmap"],
        &["LC.MERGE", "dest", "new", "old:bitmap"],
    ] {
        let text = err_text(cmd(&mut c, args));
        assert!(
            text.starts_with("ERR cannot combine a counter saved as a bitmap")
                && text.contains("rebuild 'old:bitmap' by adding its items to a new key"),
            "{args:?}: {text}"
        );
    }
    assert_eq!(digest(&mut c, "old:bitmap"), before);
    assert!(!exists(&mut c, "dest"));
    // With itself and other exact or missing keys it still counts.
    let n = lc_count(&mut c, &["old:bitmap", "missing"]);
    assert_eq!(n, lc_count(&mut c, &["old:bitmap"]));
}

/// A saved bitmap with exact counters of two sizes: the union takes the bitmap's form first,
/// whatever order the keys are named in (united first, the exact counters made a sketch, which
/// no saved bitmap joins: the same keys counted in one order and were refused in another).
#[test]
fn a_saved_bitmap_and_exact_counters_unite_in_any_order() {
    let server = Server::start();
    let mut c = server.conn();
    restore_saved_bitmap(&mut c, "old");
    ok(&mut c, &["LC.RESERVE", "a", "0.01", "50000"]);
    ok(&mut c, &["LC.RESERVE", "b", "0.01", "20000"]);
    lc_add(&mut c, "a", &items("a", 0..100));
    lc_add(&mut c, "b", &items("b", 0..100));
    let n = lc_count(&mut c, &["old", "a", "b"]);
    assert!(n > lc_count(&mut c, &["old"]));
    for keys in [["a", "b", "old"], ["a", "old", "b"], ["b", "a", "old"]] {
        assert_eq!(lc_count(&mut c, &keys), n, "{keys:?}");
    }
    ok(&mut c, &["LC.MERGE", "first", "old", "a", "b"]);
    ok(&mut c, &["LC.MERGE", "last", "a", "b", "old"]);
    assert_eq!(digest(&mut c, "last"), digest(&mut c, "first"));
    assert_eq!(lc_count(&mut c, &["last"]), n);
}

/// A counter of a finer error rate united with coarser ones (one empty, one of the same items,
/// one of other items) counts within the coarser rate, and so do three precisions at once.
/// The finer one's registers seen at the coarser precision forgot part of what they held:
/// taking it as set counted 3.8% high here; one likelihood over both sides' indicators
/// counted disjoint halves 4.7% low.
#[test]
fn a_finer_counter_unites_with_coarser_ones_within_their_error() {
    let server = Server::start();
    let mut c = server.conn();
    for (key, rate) in [
        ("fine", "0.005"),
        ("coarse", "0.01"),
        ("empty", "0.01"),
        ("fine-half", "0.005"),
        ("coarse-half", "0.01"),
        ("finest-more", "0.0025"),
    ] {
        ok(&mut c, &["LC.RESERVE", key, rate, "100"]);
    }
    for batch in 0..4 {
        let some = items("i", batch * 5_000 + 1..(batch + 1) * 5_000 + 1);
        lc_add(&mut c, "fine", &some);
        lc_add(&mut c, "coarse", &some);
        let half = if batch % 2 == 0 {
            "fine-half"
        } else {
            "coarse-half"
        };
        lc_add(&mut c, half, &some);
    }
    lc_add(&mut c, "finest-more", &items("i", 15_001..30_001));
    let within = |count: i64, n: f64| (count as f64 / n - 1.0).abs() < 0.02;
    for keys in [
        &["fine", "empty"][..],
        &["coarse", "fine"],
        &["fine", "coarse", "empty"],
        &["fine-half", "coarse-half"],
    ] {
        let count = lc_count(&mut c, keys);
        assert!(within(count, 20_000.0), "{keys:?}: {count}");
    }
    let count = lc_count(&mut c, &["coarse-half", "fine-half", "finest-more"]);
    assert!(within(count, 30_000.0), "three precisions: {count}");
    ok(&mut c, &["LC.MERGE", "merged", "empty", "fine"]);
    let count = lc_count(&mut c, &["merged"]);
    assert!(within(count, 20_000.0), "merged: {count}");
}

/// Error rates below the largest sketch's standard error (which every smaller rate got, while
/// `LC.INFO` showed the rate asked for) are refused when a counter is created, naming the
/// smallest accepted, by `LC.RESERVE` and by the `lc-error-rate` config that `LC.ADD` creates
/// counters with (`CONFIG SET` and the load argument): the config never holds a rate with
/// which `LC.ADD` could not create a counter.
#[test]
fn error_rates_below_the_largest_sketch_are_refused() {
    const LEAST: &str = "0.00036150892467356083";
    let server = Server::start();
    let mut c = server.conn();
    for rate in ["1e-7", "1e-8", "0.0002", "0.0003615089246735608"] {
        let r = redis::cmd("LC.RESERVE")
            .arg(&["z", rate, "100"])
            .query::<()>(&mut c);
        assert_eq!(
            err_text(r),
            format!(
                "ERR error rate must be at least {LEAST} (the largest counter's standard error)"
            ),
            "{rate}"
        );
        let r = cmd(&mut c, &["CONFIG", "SET", "lcbloom.lc-error-rate", rate]);
        let text = err_text(r);
        assert!(
            text.contains(&format!(
                "lc-error-rate must be a number from {LEAST} (the largest counter's \
                 standard error) to 1, 1 excluded"
            )),
            "{text}"
        );
    }
    assert!(!exists(&mut c, "z"));
    let shown = ok(&mut c, &["CONFIG", "GET", "lcbloom.lc-error-rate"]);
    assert_eq!(
        shown,
        Value::Array(vec![
            Value::BulkString(b"lcbloom.lc-error-rate".to_vec()),
            Value::BulkString(b"0.01".to_vec())
        ])
    );
    // The smallest accepted: by LC.RESERVE, and by the config for LC.ADD's new counters.
    ok(&mut c, &["LC.RESERVE", "z", LEAST, "100"]);
    ok(&mut c, &["CONFIG", "SET", "lcbloom.lc-error-rate", LEAST]);
    assert_eq!(lc_add(&mut c, "added", &items("a", 0..10)), 10);
    for key in ["z", "added"] {
        assert_eq!(lc_error_rate(&mut c, key), LEAST.parse().ok(), "{key}");
    }
    ServerBuilder::refusing_load_argument(
        "lc-error-rate",
        "1e-9",
        &format!("a number from {LEAST}"),
    );
}

/// Exact counters of one size but different capacities (50,000 and 50,001 give the same
/// bitmap size, so the same fingerprints) merge exactly, as `LC.COUNT` counts them: the merge
/// made a sketch and counted 403 for 400.
#[test]
fn exact_counters_of_one_size_merge_as_they_count() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, &["LC.RESERVE", "a", "0.01", "50000"]);
    ok(&mut c, &["LC.RESERVE", "b", "0.01", "50001"]);
    lc_add(&mut c, "a", &items("a", 0..200));
    lc_add(&mut c, "b", &items("b", 0..200));
    assert_eq!(lc_count(&mut c, &["a", "b"]), 400);
    ok(&mut c, &["LC.MERGE", "a", "b"]);
    // Past the exact limit (267 here) the merge is a sketch whose count is their number.
    assert_eq!(lc_count(&mut c, &["a"]), 400);
}

/// Exact counters made under several `lc-capacity` values (fingerprints of several
/// universes) count their union exactly, and a merge of them, into a new key or into one of
/// them, counts the same: as the estimate of their tokens, such unions of a few hundred items
/// counted 1–3 off in 31% of cases.
#[test]
fn exact_counters_of_several_sizes_count_and_merge_exactly() {
    let server = Server::start();
    let mut c = server.conn();
    let mut keys = Vec::new();
    for (day, capacity) in ["20000", "50000", "1000", "200000"].iter().enumerate() {
        ok(&mut c, &["CONFIG", "SET", "lcbloom.lc-capacity", capacity]);
        // 60 items a day, each day sharing 20 with the day before.
        let (key, start) = (format!("day{day}"), day as u32 * 40);
        lc_add(&mut c, &key, &items("r", start..start + 60));
        assert_eq!(
            lc_info_field(&mut c, &key, "Mode"),
            Value::SimpleString("exact".into())
        );
        keys.push(key);
    }
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    for n in 2..=names.len() {
        let truth = 60 + 40 * (n as i64 - 1);
        assert_eq!(lc_count(&mut c, &names[..n]), truth, "{n} days");
        let mut reversed = names[..n].to_vec();
        reversed.reverse();
        assert_eq!(lc_count(&mut c, &reversed), truth, "{n} days, reversed");
        let merged = format!("merged{n}");
        ok(&mut c, &[&["LC.MERGE", &merged][..], &names[..n]].concat());
        assert_eq!(lc_count(&mut c, &[&merged]), truth, "{n} days merged");
    }
    ok(&mut c, &[&["LC.MERGE"][..], &names].concat());
    assert_eq!(lc_count(&mut c, &["day0"]), 180);
}

/// A key merged with sources counts what `LC.COUNT` of it and them answered, also when it
/// already holds items that its union with them holds nothing beyond one source's, and across
/// precisions: such merges counted 299 for `LC.COUNT`'s 298, 77 for 76 and 2,075 for 2,000.
#[test]
fn a_merged_key_counts_what_the_count_of_its_sources_did() {
    let server = Server::start();
    let mut c = server.conn();
    // (destination, its parameters, its item; source, its parameters, its items I0 …)
    let defaults = ("0.01", "50000");
    let cases = [
        ("d", defaults, "I0", "s", defaults, 300),
        ("p", ("0.02", "50000"), "x", "q", defaults, 76),
        ("m", ("0.05", "100"), "x", "n", ("0.01", "1000000"), 2_000),
    ];
    for (dest, (rate, capacity), item, source, (source_rate, source_capacity), n) in cases {
        ok(&mut c, &["LC.RESERVE", dest, rate, capacity]);
        ok(
            &mut c,
            &["LC.RESERVE", source, source_rate, source_capacity],
        );
        lc_add(&mut c, source, &items("I", 0..n));
        lc_add(&mut c, dest, &[item.to_string()]);
        let count = lc_count(&mut c, &[dest, source]);
        ok(&mut c, &["LC.MERGE", dest, source]);
        assert_eq!(lc_count(&mut c, &[dest]), count, "{dest} {source}");
        assert_eq!(lc_count(&mut c, &[dest, source]), count, "{dest} {source}");
    }
}

/// A merge into a new or empty key counts what `LC.COUNT` of its sources does, whatever
/// their order: with a coarse counter first and a finer one counting more of the same
/// items, such merges stored the coarse one's 4,939 for `LC.COUNT`'s 5,015.
#[test]
fn a_merge_into_an_empty_key_counts_as_its_sources_in_any_order() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, &["LC.RESERVE", "coarse", "0.02", "1000"]);
    ok(&mut c, &["LC.RESERVE", "fine", "0.01", "50000"]);
    lc_add(&mut c, "coarse", &items("", 1..5_001));
    lc_add(&mut c, "fine", &items("", 1..5_001));
    let count = lc_count(&mut c, &["coarse", "fine"]);
    assert!(count >= lc_count(&mut c, &["fine"]).max(lc_count(&mut c, &["coarse"])));
    ok(&mut c, &["LC.RESERVE", "empty", "0.02", "1000"]);
    for (dest, sources) in [
        ("new1", ["coarse", "fine"]),
        ("new2", ["fine", "coarse"]),
        ("empty", ["coarse", "fine"]),
    ] {
        ok(&mut c, &[&["LC.MERGE", dest][..], &sources].concat());
        assert_eq!(lc_count(&mut c, &[dest]), count, "{dest} {sources:?}");
    }
}

/// Sources a key already holds change nothing merged again, also when they are finer than
/// it; a new key merged from the same sources is the same value in any order of them, and an
/// empty key finer than them becomes that value too.
/// A 1% key merged from a 0.1% key counted 1.1% more at its first re-merge of it; a new key
/// whose first source was finer than the others stored another standard error than the other
/// order, and one of sources of one precision and two capacities took the first's capacity;
/// an empty 0.1% key merged with a 1% key of 1 item became a token list.
#[test]
fn merges_of_the_same_sources_are_the_same_value() {
    let server = Server::start();
    let mut c = server.conn();
    for (key, rate, capacity, range) in [
        ("one", "0.01", "50000", 0..1),
        ("fine", "0.001", "50000", 0..20_000),
        ("coarse", "0.02", "50000", 0..3_000),
        ("finer", "0.005", "50000", 1_000..1_267),
        ("wide", "0.01", "1000000", 0..500),
        ("narrow", "0.01", "50000", 200..700),
    ] {
        ok(&mut c, &["LC.RESERVE", key, rate, capacity]);
        lc_add(&mut c, key, &items("x:", range));
    }
    ok(&mut c, &["LC.MERGE", "d", "one", "fine"]);
    let (count, held) = (lc_count(&mut c, &["d"]), digest(&mut c, "d"));
    assert_eq!(lc_count(&mut c, &["d", "fine"]), count);
    ok(&mut c, &["LC.MERGE", "d", "fine"]);
    assert_eq!(digest(&mut c, "d"), held);

    for pair in [["coarse", "finer"], ["wide", "narrow"]] {
        let [a, b] = pair;
        ok(&mut c, &["LC.MERGE", "ab", a, b]);
        ok(&mut c, &["LC.MERGE", "ba", b, a]);
        assert_eq!(digest(&mut c, "ab"), digest(&mut c, "ba"), "{pair:?}");
        ok(&mut c, &["DEL", "ab", "ba"]);
    }

    // An empty key finer than its source becomes what a new key does: exact, as the source.
    ok(&mut c, &["LC.RESERVE", "empty", "0.001", "50000"]);
    ok(&mut c, &["LC.MERGE", "empty", "one"]);
    ok(&mut c, &["LC.MERGE", "new", "one"]);
    assert_eq!(digest(&mut c, "empty"), digest(&mut c, "new"));
    assert_eq!(
        lc_info_field(&mut c, "empty", "Mode"),
        Value::SimpleString("exact".into())
    );
}

/// `max-memory-per-key` binds what a merge makes or grows, not registers a counter already
/// has (one over the limit after `CONFIG SET` lowered it). A merge makes a new key within
/// the limit as `LC.RESERVE` makes one.
#[test]
fn merges_are_bound_by_the_limit_where_they_grow() {
    let server = Server::start();
    let mut c = server.conn();
    lc_add(&mut c, "big", &items("i", 0..6_000));
    lc_add(&mut c, "small", &items("s", 0..1));
    assert_eq!(
        lc_info_field(&mut c, "big", "Mode"),
        Value::SimpleString("registers".into())
    );
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "lcbloom.max-memory-per-key", "5000"])
        .query(&mut c)
        .unwrap();
    let too_large = |r: redis::RedisResult<()>| {
        let e = err_text(r);
        assert!(e.starts_with("ERR counter would take"), "{e}");
    };
    too_large(redis::cmd("LC.MERGE").arg(&["new", "big"]).query(&mut c));
    assert!(!exists(&mut c, "new"), "a refused merge makes no key");
    // A new key of a counter whose registers would pass the limit, refused as LC.RESERVE
    // refuses it, though its source is exact (it was made).
    too_large(redis::cmd("LC.MERGE").arg(&["new", "small"]).query(&mut c));
    assert!(!exists(&mut c, "new"));
    too_large(
        redis::cmd("LC.RESERVE")
            .arg(&["new", "0.01", "50000"])
            .query(&mut c),
    );
    too_large(redis::cmd("LC.MERGE").arg(&["small", "big"]).query(&mut c));
    assert_eq!(lc_count(&mut c, &["small"]), 1);
    let before = lc_count(&mut c, &["big"]);
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["big", "small"])
        .query(&mut c)
        .unwrap();
    assert!(lc_count(&mut c, &["big"]) >= before);
}

/// A write the limit stops part-way (lowered below the registers of counters made before)
/// is refused whole: the exact counter keeps its 100 items, the merge absorbs not even the
/// source that fits.
#[test]
fn writes_the_limit_refuses_change_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    lc_add(&mut c, "c", &items("i", 0..100));
    lc_add(&mut c, "d", &items("i", 0..200));
    lc_add(&mut c, "e", &items("e", 0..8_000));
    lc_add(&mut c, "f", &items("f", 0..100));
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "lcbloom.max-memory-per-key", "4096"])
        .query(&mut c)
        .unwrap();
    let dump = |c: &mut Connection, key: &str| -> Vec<u8> {
        redis::cmd("DUMP").arg(key).query(c).unwrap()
    };
    let before = ["c", "d"].map(|key| dump(&mut c, key));
    let r = redis::cmd("LC.ADD")
        .arg("c")
        .arg(items("i", 100..9_000))
        .query::<i64>(&mut c);
    assert!(err_text(r).contains("max-memory-per-key"));
    assert_eq!(dump(&mut c, "c"), before[0]);
    let r = redis::cmd("LC.MERGE")
        .arg(&["d", "f", "e"])
        .query::<()>(&mut c);
    assert!(err_text(r).contains("max-memory-per-key"));
    assert_eq!(dump(&mut c, "d"), before[1]);
    // What fits is still taken.
    ok(&mut c, &["LC.MERGE", "d", "f"]);
    assert_eq!(lc_count(&mut c, &["d"]), 300);
}

/// Empty counters leave unions as they are, whatever their size: an exact counter of 100 items
/// counted with empty counters of other sizes counts 100 (it counted 99), and merging them
/// into it leaves its bytes as they were (it became a token list). A new destination takes
/// the size of the sources holding items, and the state of the one source holding items.
#[test]
fn empty_counters_leave_unions_as_they_are() {
    let server = Server::start();
    let mut c = server.conn();
    lc_add(&mut c, "k", &items("i", 0..100));
    ok(&mut c, &["LC.RESERVE", "e1", "0.05", "100"]);
    ok(&mut c, &["LC.RESERVE", "e2", "0.001", "100000"]);
    assert_eq!(lc_count(&mut c, &["k", "e1", "e2"]), 100);
    assert_eq!(lc_count(&mut c, &["e1", "k"]), 100);
    let dump = |c: &mut Connection, key: &str| -> Vec<u8> {
        redis::cmd("DUMP").arg(key).query(c).unwrap()
    };
    let before = dump(&mut c, "k");
    ok(&mut c, &["LC.MERGE", "k", "e1", "e2"]);
    assert_eq!(dump(&mut c, "k"), before);
    assert_eq!(lc_mode(&mut c, "k"), "exact");
    ok(&mut c, &["LC.MERGE", "new", "e1", "k"]);
    assert_eq!(
        lc_info_field(&mut c, "new", "Mode"),
        lc_info_field(&mut c, "k", "Mode")
    );
    assert_eq!(
        lc_info_field(&mut c, "new", "Capacity"),
        lc_info_field(&mut c, "k", "Capacity")
    );
    assert_eq!(lc_count(&mut c, &["new"]), 100);
    // A sketch merged alone into a new key is copied, its count too (it was re-estimated:
    // 300 items counted 300, their merge 302).
    lc_add(&mut c, "sketch", &items("s", 0..300));
    assert_eq!(lc_mode(&mut c, "sketch"), "tokens");
    ok(&mut c, &["LC.MERGE", "copy", "sketch", "e1", "missing"]);
    assert_eq!(dump(&mut c, "copy"), dump(&mut c, "sketch"));
}
