//! The Rust `redis` crate's Bloom API (`bf_*`, feature `bloom`) against the module, over RESP2
//! and RESP3: every call the crate offers for RedisBloom, with its typed replies, plus the LC
//! commands through `redis::cmd`.

use crate::common::*;

use std::collections::HashMap;

use redis::bloom::{
    BloomFilterDumpIterator, BloomFilterInfoType, BloomFilterInsertOptions,
    BloomFilterScalingOptions,
};
use redis::{TypedCommands, Value};

/// A connection in each protocol to `server`, whose new filters are unseeded: these tests are
/// about the replies the crate parses, and under a random seed the answers that depend on
/// false positives (an item past a full filter's capacity, how many of 100 items a small
/// scaling filter takes as new) change from run to run.
fn both_protocols(server: &Server) -> [(&'static str, redis::Connection); 2] {
    let mut c = server.conn();
    redis::cmd("CONFIG")
        .arg(&["SET", "lcbloom.bf-seed", "0"])
        .exec(&mut c)
        .unwrap();
    [("resp2", c), ("resp3", server.conn3())]
}

#[test]
fn reserve_add_exists_card() {
    let server = Server::start();
    for (proto, mut c) in both_protocols(&server) {
        redis::cmd("FLUSHALL").exec(&mut c).unwrap();
        c.bf_reserve("r", 0.01, 1000).unwrap();
        assert!(c.bf_add("r", "a").unwrap(), "{proto}");
        assert!(!c.bf_add("r", "a").unwrap());
        assert_eq!(
            c.bf_madd("r", &["a", "b", "c"]).unwrap(),
            vec![false, true, true]
        );
        assert!(c.bf_exists("r", "b").unwrap());
        assert!(!c.bf_exists("r", "zzz").unwrap());
        assert!(!c.bf_exists("missing", "a").unwrap());
        assert_eq!(
            c.bf_mexists("r", &["a", "x", "c"]).unwrap(),
            vec![true, false, true]
        );
        assert_eq!(c.bf_card("r").unwrap(), 3);
        assert_eq!(c.bf_card("missing").unwrap(), 0);
        assert_eq!(
            err_text(c.bf_reserve("r", 0.01, 1000)),
            "ERR item exists",
            "{proto}"
        );
        assert_eq!(
            err_text(c.bf_reserve("bad", 0.0, 1000)),
            "ERR (0 < error rate range < 1)"
        );
        // Options: expansion and non-scaling.
        c.bf_reserve_options("e", 0.01, 10, BloomFilterScalingOptions::ExpansionRate(4))
            .unwrap();
        c.bf_reserve_options("n", 0.01, 2, BloomFilterScalingOptions::NonScaling)
            .unwrap();
        assert_eq!(c.bf_madd("n", &["x", "y"]).unwrap(), vec![true, true]);
        assert_eq!(
            err_text(c.bf_add("n", "z")),
            "ERR non scaling filter is full"
        );
    }
}

#[test]
fn insert_with_every_option() {
    let server = Server::start();
    for (proto, mut c) in both_protocols(&server) {
        redis::cmd("FLUSHALL").exec(&mut c).unwrap();
        // Plain BF.INSERT creates with the module defaults (100 items, expansion 2).
        assert_eq!(c.bf_insert("d", &["a", "b"]).unwrap(), vec![true, true]);
        assert_eq!(
            *c.bf_info_type("d", BloomFilterInfoType::Capacity).unwrap(),
            100.0
        );
        let opts = BloomFilterInsertOptions::default()
            .capacity(500)
            .error_rate(0.001)
            .expansion(BloomFilterScalingOptions::ExpansionRate(3));
        assert_eq!(
            c.bf_insert_options("i", &["a", "b", "a"], opts).unwrap(),
            vec![true, true, false],
            "{proto}"
        );
        let info = c.bf_info("i").unwrap();
        assert_eq!(*info["Capacity"], 500.0);
        assert_eq!(*info["Expansion rate"], 3.0);
        // Stricter error rate: more bytes than the default filter of the same capacity, with
        // the same items.
        let opts = BloomFilterInsertOptions::default().capacity(500);
        c.bf_insert_options("j", &["a"], opts).unwrap();
        let more: Vec<String> = (0..400).map(|i| format!("item{i}")).collect();
        c.bf_madd("i", &more).unwrap();
        c.bf_madd("j", &more).unwrap();
        assert!(*c.bf_info("j").unwrap()["Size"] < *c.bf_info("i").unwrap()["Size"]);
        let opts = BloomFilterInsertOptions::default()
            .capacity(1)
            .expansion(BloomFilterScalingOptions::NonScaling);
        assert_eq!(c.bf_insert_options("ns", &["a"], opts).unwrap(), vec![true]);
        // A non-scaling filter's expansion is nil, as in RedisBloom: the full BF.INFO reads
        // it as 0; the crate cannot convert the one-field form ([nil] / {field: nil}) for
        // RedisBloom either, so that reply is checked raw.
        assert_eq!(*c.bf_info("ns").unwrap()["Expansion rate"], 0.0);
        let raw: Value = redis::cmd("BF.INFO")
            .arg("ns")
            .arg("EXPANSION")
            .query(&mut c)
            .unwrap();
        let nil_field = match raw {
            Value::Array(v) => v == [Value::Nil],
            Value::Map(v) => matches!(&v[..], [(_, Value::Nil)]),
            _ => false,
        };
        assert!(nil_field, "{proto}");
        // NOCREATE: adds to an existing key, refuses a missing one and creates nothing.
        let opts = BloomFilterInsertOptions::default().nocreate();
        assert_eq!(c.bf_insert_options("i", &["c"], opts).unwrap(), vec![true]);
        let opts = BloomFilterInsertOptions::default().nocreate();
        assert_eq!(
            err_text(c.bf_insert_options("none", &["c"], opts)),
            "ERR not found"
        );
        assert!(!c.exists("none").unwrap());
    }
}

#[test]
fn info_typed_replies() {
    let server = Server::start();
    for (proto, mut c) in both_protocols(&server) {
        redis::cmd("FLUSHALL").exec(&mut c).unwrap();
        c.bf_reserve_options("f", 0.01, 10, BloomFilterScalingOptions::ExpansionRate(2))
            .unwrap();
        let items: Vec<String> = (0..100).map(|i| format!("item{i}")).collect();
        let added: Vec<bool> = c.bf_madd("f", &items).unwrap();
        // A false positive (reported as present, not counted) is legitimate Bloom behaviour.
        let inserted = added.iter().filter(|a| **a).count() as f64;
        assert!(inserted >= 97.0, "{added:?}");
        let info = c.bf_info("f").unwrap();
        let mut fields: Vec<&str> = info.keys().map(String::as_str).collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "Capacity",
                "Expansion rate",
                "Number of filters",
                "Number of items inserted",
                "Size"
            ],
            "{proto}"
        );
        // 10 + 20 + 40 + 80 >= 100 items: four sub-filters.
        assert_eq!(*info["Capacity"], 150.0);
        assert_eq!(*info["Number of filters"], 4.0);
        assert_eq!(*info["Number of items inserted"], inserted);
        assert_eq!(*info["Expansion rate"], 2.0);
        assert!(*info["Size"] > 150.0);
        for (kind, name) in [
            (BloomFilterInfoType::Capacity, "Capacity"),
            (BloomFilterInfoType::Size, "Size"),
            (BloomFilterInfoType::Filters, "Number of filters"),
            (BloomFilterInfoType::Items, "Number of items inserted"),
            (BloomFilterInfoType::Expansion, "Expansion rate"),
        ] {
            assert_eq!(c.bf_info_type("f", kind).unwrap(), *info[name], "{name}");
        }
        // RedisBloom's fields only: valkey-bloom's ERROR is refused like RedisBloom does.
        assert_eq!(
            err_text(c.bf_info_type("f", BloomFilterInfoType::Error)),
            "ERR Invalid information value"
        );
        assert_eq!(err_text(c.bf_info("missing")), "ERR not found");
    }
}

#[test]
fn scandump_and_loadchunk_round_trip() {
    let server = Server::start();
    for (proto, mut c) in both_protocols(&server) {
        redis::cmd("FLUSHALL").exec(&mut c).unwrap();
        c.bf_reserve("src", 0.001, 50_000).unwrap();
        let items: Vec<String> = (0..5_000).map(|i| format!("k{i}")).collect();
        c.bf_madd("src", &items).unwrap();
        // By hand, chunk by chunk ...
        let mut iterator = 0;
        let mut chunks = Vec::new();
        loop {
            let chunk = c.bf_scandump("src", iterator).unwrap();
            if chunk.iterator == 0 {
                assert!(chunk.data.is_empty());
                break;
            }
            iterator = chunk.iterator;
            chunks.push(chunk);
        }
        assert!(chunks.len() >= 2, "{proto}: header and data");
        for chunk in chunks.clone() {
            c.bf_loadchunk("copy", chunk).unwrap();
        }
        assert_eq!(digest(&mut c, "copy"), digest(&mut c, "src"));
        assert_eq!(c.bf_card("copy").unwrap(), 5_000);
        assert_eq!(c.bf_mexists("copy", &items[..3]).unwrap(), vec![true; 3]);
        // ... and with the crate's iterator, which yields the same chunks.
        let dumped: Vec<_> = BloomFilterDumpIterator::new(&mut c, "src")
            .map(|chunk| chunk.unwrap())
            .collect();
        assert_eq!(dumped, chunks);
        assert_eq!(
            err_text(c.bf_loadchunk("copy", chunks[0].clone())),
            "ERR item exists"
        );
    }
}

#[test]
fn lc_commands_through_the_crate() {
    let server = Server::start();
    for (proto, mut c) in both_protocols(&server) {
        redis::cmd("FLUSHALL").exec(&mut c).unwrap();
        redis::cmd("LC.RESERVE")
            .arg("c")
            .arg(0.01)
            .arg(50_000)
            .exec(&mut c)
            .unwrap();
        let added: i64 = redis::cmd("LC.ADD")
            .arg("c")
            .arg(&["a", "b", "c", "a"])
            .query(&mut c)
            .unwrap();
        assert_eq!(added, 3, "{proto}");
        let count: u64 = redis::cmd("LC.COUNT")
            .arg("c")
            .arg("missing")
            .query(&mut c)
            .unwrap();
        assert_eq!(count, 3);
        // A flat array (RESP2) and a map (RESP3) both convert to a HashMap.
        let info: HashMap<String, Value> = redis::cmd("LC.INFO").arg("c").query(&mut c).unwrap();
        assert_eq!(info.len(), 10);
        assert_eq!(info["Capacity"], Value::Int(50_000));
        assert_eq!(info["Exact up to"], Value::Int(267));
        assert_eq!(info["Count"], Value::Int(3));
        let rate: f64 = redis::from_redis_value(info["Error rate"].clone()).unwrap();
        assert_eq!(rate, 0.01);
        let saturated: bool = redis::from_redis_value(info["Saturated"].clone()).unwrap();
        assert!(!saturated);
    }
}
