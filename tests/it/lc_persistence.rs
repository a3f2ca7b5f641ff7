//! Linear counters survive every way Redis moves values: DEBUG RELOAD, RDB restart, DUMP/RESTORE,
//! COPY, AOF rewrite without RDB preamble, AOF replay and replication to a replica loaded with
//! other lc-* defaults — with identical counts and DEBUG DIGEST-VALUE.
use crate::common::fixtures::unhex;
use crate::common::fuzz::{crc64, dump_payload, split_dump};
use crate::common::*;
use redis::{Connection, Value};

/// Counters in every state and body encoding: (key, count).
fn populate(c: &mut Connection) -> Vec<String> {
    let mut keys = Vec::new();
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["empty", "0.01", "50000"])
        .query(c)
        .unwrap();
    keys.push("empty".to_string());
    for (key, n) in [
        ("exact", 100u32),
        ("sparse", 1_000),
        ("dense", 12_000),
        ("full", 50_000),
        ("over", 200_000),
    ] {
        for chunk in items(key, n).chunks(10_000) {
            let _: i64 = redis::cmd("LC.ADD").arg(key).arg(chunk).query(c).unwrap();
        }
        keys.push(key.to_string());
    }
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["small", "0.3", "7"])
        .query(c)
        .unwrap();
    let _: i64 = redis::cmd("LC.ADD")
        .arg("small")
        .arg(items("s", 40))
        .query(c)
        .unwrap();
    keys.push("small".to_string());
    // A merge of empty counters of two sizes: empty, in exact mode (it once stored a token
    // list of none, which no load accepted).
    for (key, rate) in [("merged-empty", "0.01"), ("empty-other", "0.02")] {
        let _: () = redis::cmd("LC.RESERVE")
            .arg(&[key, rate, "100"])
            .query(c)
            .unwrap();
    }
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["merged-empty", "merged-empty", "empty-other"])
        .query(c)
        .unwrap();
    keys.extend(["merged-empty".to_string(), "empty-other".to_string()]);
    // A finer counter merged into a coarser one: it once claimed more set indicators than its
    // count, which no load accepted.
    for (key, rate) in [("merged-finer", "0.005"), ("finer", "0.0025")] {
        let _: () = redis::cmd("LC.RESERVE")
            .arg(&[key, rate, "1000"])
            .query(c)
            .unwrap();
    }
    let _: i64 = redis::cmd("LC.ADD")
        .arg("finer")
        .arg(items("f", 3_000))
        .query(c)
        .unwrap();
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["merged-finer", "finer"])
        .query(c)
        .unwrap();
    keys.extend(["merged-finer".to_string(), "finer".to_string()]);
    keys
}

fn snapshot(c: &mut Connection, keys: &[String]) -> Vec<(String, i64, String)> {
    keys.iter()
        .map(|k| {
            let n: i64 = redis::cmd("LC.COUNT").arg(k).query(c).unwrap();
            (k.clone(), n, digest(c, k))
        })
        .collect()
}

#[test]
fn rdb_reload_restart_dump_restore_and_copy() {
    let mut server = Server::start();
    let mut c = server.conn();
    let keys = populate(&mut c);
    let before = snapshot(&mut c, &keys);
    assert!(before.iter().all(|(_, _, d)| d.len() == 40));

    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(snapshot(&mut c, &keys), before, "DEBUG RELOAD");

    for key in &keys {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut c).unwrap();
        let restored = format!("{key}:restored");
        let _: () = redis::cmd("RESTORE")
            .arg(&restored)
            .arg(0)
            .arg(&dump)
            .query(&mut c)
            .unwrap();
        assert_eq!(
            digest(&mut c, &restored),
            digest(&mut c, key),
            "RESTORE {key}"
        );
        let copied = format!("{key}:copied");
        let ok: i64 = redis::cmd("COPY")
            .arg(key)
            .arg(&copied)
            .query(&mut c)
            .unwrap();
        assert_eq!(ok, 1);
        assert_eq!(digest(&mut c, &copied), digest(&mut c, key), "COPY {key}");
        // The copy is deep: adding to it leaves the original alone (counters never saturate:
        // new items change every one of them).
        let added: i64 = redis::cmd("LC.ADD")
            .arg(&copied)
            .arg(items("new", 500))
            .query(&mut c)
            .unwrap();
        assert!(added > 0, "{key}");
        assert_eq!(
            digest(&mut c, &copied) != digest(&mut c, key),
            added > 0,
            "COPY {key}"
        );
    }
    let restored_digest = digest(&mut c, "full:restored");

    // TTLs survive writes (they modify the value in place).
    let _: i64 = redis::cmd("EXPIRE")
        .arg(&["exact", "1000"])
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["exact", "sparse"])
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("LC.ADD")
        .arg(&["exact", "one more"])
        .query(&mut c)
        .unwrap();
    let ttl: i64 = redis::cmd("TTL").arg("exact").query(&mut c).unwrap();
    assert!(ttl > 900, "TTL {ttl}");
    let before = snapshot(&mut c, &keys);

    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    server.restart();
    let mut c = server.conn();
    assert_eq!(snapshot(&mut c, &keys), before, "restart from RDB");
    assert_eq!(digest(&mut c, "full:restored"), restored_digest);
    let ttl: i64 = redis::cmd("TTL").arg("exact").query(&mut c).unwrap();
    assert!(ttl > 900, "TTL after restart {ttl}");
}

#[test]
fn aof_rewrite_without_preamble_then_restart() {
    let mut server = Server::builder()
        .arg("appendonly", "yes")
        .arg("aof-use-rdb-preamble", "no")
        .arg("appendfsync", "always")
        .start();
    let mut c = server.conn();
    let keys = populate(&mut c);
    let before = snapshot(&mut c, &keys);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_aof_rewrite(&mut c);
    let base = std::fs::read_dir(server.dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(".base.aof"))
        .expect("a base AOF file");
    let text = std::fs::read(&base).unwrap();
    let loadchunks = text.windows(12).filter(|w| w == b"LC.LOADCHUNK").count();
    assert_eq!(loadchunks, keys.len(), "one LC.LOADCHUNK per counter");
    // Writes after the rewrite go to the incremental file, on top of the base.
    let _: i64 = redis::cmd("LC.ADD")
        .arg(&["exact", "after rewrite"])
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("LC.ADD")
        .arg(&["fresh", "x", "y"])
        .query(&mut c)
        .unwrap();
    let mut keys = keys;
    keys.push("fresh".to_string());
    let before_restart = snapshot(&mut c, &keys);
    assert_ne!(before_restart[1], before[1]);
    server.restart();
    let mut c = server.conn();
    assert_eq!(snapshot(&mut c, &keys), before_restart);
}

#[test]
fn replica_and_aof_replay_with_other_defaults_hold_identical_values() {
    let mut master = Server::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let replica = Server::builder()
        .module_arg("lc-error-rate", "0.05")
        .module_arg("lc-capacity", "1000")
        .start();
    let mut m = master.conn();
    let mut r = replica.conn();
    // Some keys exist before the replica syncs (they travel in the RDB).
    let _: i64 = redis::cmd("LC.ADD")
        .arg("before")
        .arg(items("b", 3_000))
        .query(&mut m)
        .unwrap();
    attach_replica(&master, &replica);

    // LC.ADD on missing keys: created with the master's defaults, also on the replica.
    let _: i64 = redis::cmd("LC.ADD")
        .arg("small")
        .arg(items("s", 10))
        .query(&mut m)
        .unwrap();
    let _: i64 = redis::cmd("LC.ADD")
        .arg("big")
        .arg(items("g", 5_000))
        .query(&mut m)
        .unwrap();
    let _: i64 = redis::cmd("LC.ADD").arg("bare").query(&mut m).unwrap();
    let _: i64 = redis::cmd("LC.ADD")
        .arg("small")
        .arg(items("s", 20))
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["reserved", "0.02", "7000"])
        .query(&mut m)
        .unwrap();
    let _: i64 = redis::cmd("LC.ADD")
        .arg("reserved")
        .arg(items("r", 900))
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["merged", "small", "big", "before"])
        .query(&mut m)
        .unwrap();
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["reserved", "small"])
        .query(&mut m)
        .unwrap();
    let keys: Vec<String> = ["before", "small", "big", "bare", "reserved", "merged"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let synced: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(synced, 1);
    let on_master = snapshot(&mut m, &keys);
    assert_eq!(snapshot(&mut r, &keys), on_master);
    let info: Vec<redis::Value> = redis::cmd("LC.INFO").arg("bare").query(&mut r).unwrap();
    assert_eq!(info[1], redis::Value::Int(50_000), "the master's capacity");

    let write = redis::cmd("LC.ADD")
        .arg(&["small", "x"])
        .query::<i64>(&mut r);
    assert!(err_text(write).starts_with("READONLY"));

    // AOF replay on a master restarted with other defaults builds the same values.
    drop(replica);
    master.restart_with_module_args(&[("lc-error-rate", "0.2"), ("lc-capacity", "10")]);
    let mut m = master.conn();
    assert_eq!(snapshot(&mut m, &keys), on_master);
}

#[test]
fn restore_of_mutated_payloads_never_crashes() {
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let mut server = Server::start();
    let mut c = server.conn();
    let keys = populate(&mut c);
    let mut rng = 0x1c_b100_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..3_000 {
        let key = &keys[round % keys.len()];
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut c).unwrap();
        // <value><2-byte RDB version><8-byte CRC>: mutate the value, then fix the CRC.
        let (mut value, version) = split_dump(&dump);
        for _ in 0..1 + next() % 3 {
            let at = (next() as usize) % value.len();
            match next() % 3 {
                0 => value[at] ^= 1 << (next() % 8),
                1 => value[at] = next() as u8,
                _ => {
                    value.truncate(at.max(1));
                }
            }
        }
        let payload = dump_payload(&value, version);
        let target = format!("mut:{round}");
        match redis::cmd("RESTORE")
            .arg(&target)
            .arg(0)
            .arg(&payload)
            .query::<()>(&mut c)
        {
            Ok(()) => {
                accepted += 1;
                // Whatever loaded must be usable.
                let _: redis::Value = redis::cmd("LC.INFO").arg(&target).query(&mut c).unwrap();
                let _: i64 = redis::cmd("LC.ADD")
                    .arg(&[&target, "x"])
                    .query(&mut c)
                    .unwrap();
                let _: i64 = redis::cmd("LC.COUNT").arg(&target).query(&mut c).unwrap();
            }
            Err(_) => refused += 1,
        }
    }
    println!("mutated RESTOREs: {accepted} accepted, {refused} refused");
    assert!(server.alive());
    assert!(refused > 2_000);
    let n: i64 = redis::cmd("LC.COUNT").arg("exact").query(&mut c).unwrap();
    assert_eq!(n, 100);
}

/// A token list of no tokens, which a union of two empty counters of different sizes once
/// stored: `DUMP` of `LC.MERGE d e r` after `LC.ADD e` and `LC.RESERVE r 0.01 1000`. It loads
/// as the empty counter; refused, it made a saved RDB stop the server's start.
#[test]
fn an_empty_token_list_loads_as_the_empty_counter() {
    let payload = unhex(
        "078195c6e5a2898b080105c31a2312030104d086037b14ae47e17a843fee85010b00e005000100\
         00000a00f89ea9a761273160",
    );
    let mut server = Server::start();
    let mut c = server.conn();
    let _: () = redis::cmd("RESTORE")
        .arg(&["d", "0"])
        .arg(&payload)
        .query(&mut c)
        .unwrap();
    assert_eq!(lc_mode(&mut c, "d"), "exact");
    ok(&mut c, &["SAVE"]);
    server.restart();
    let mut c = server.conn();
    assert_eq!(lc_mode(&mut c, "d"), "exact");
    let count: i64 = redis::cmd("LC.COUNT").arg("d").query(&mut c).unwrap();
    assert_eq!(count, 0);
    let added: i64 = redis::cmd("LC.ADD").arg(&["d", "x"]).query(&mut c).unwrap();
    assert_eq!(added, 1);
}

/// A create an AOF file logged at a rate below what clients may ask (the largest sketch's
/// standard error) replays: the counter keeps its rate and capacity and gets the largest
/// sketch, as a saved one does. It was refused, and Redis skips a refused AOF command: the
/// key was lost, or made again with the defaults by the next `LC.ADD`.
#[test]
fn creates_logged_below_the_smallest_rate_replay() {
    let mut server = Server::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut c = server.conn();
    let refused = cmd(&mut c, &["LC.RESERVE", "fine", "0.0001", "1000"]);
    assert!(err_text(refused).starts_with("ERR error rate must be at least"));
    server.shutdown("SAVE");
    let items: Vec<String> = (0..5_000).map(|i| format!("i{i}")).collect();
    let mut add = vec!["LC.ADD", "fine"];
    add.extend(items.iter().map(String::as_str));
    append_to_aof(
        &server,
        &[
            &["LC.RESERVE", "fine", "0.0001", "1000"],
            &["LC.RESERVE", "alone", "1e-6", "10"],
            &add,
        ],
    );
    server.restart();
    let mut c = server.conn();
    for (key, rate, capacity) in [("fine", 0.0001, 1000), ("alone", 1e-6, 10)] {
        assert_eq!(lc_error_rate(&mut c, key), Some(rate), "{key}");
        assert_eq!(
            lc_info_field(&mut c, key, "Capacity"),
            Value::Int(capacity),
            "{key}"
        );
    }
    let count: i64 = redis::cmd("LC.COUNT").arg("fine").query(&mut c).unwrap();
    assert!((count - 5_000).abs() <= 50, "{count}");
}

/// A counter reserved for a large capacity is small until it grows (an exact set, then a
/// sketch), and its `DUMP` restores under any `max-memory-per-key` that holds it: `RESTORE`
/// weighed it by the bitmap its capacity would need, and refused its own server's `DUMP`
/// (the largest capacity always; 10⁷ under a 256 KB limit).
#[test]
fn counters_of_large_capacities_restore() {
    let server = Server::start();
    let mut c = server.conn();
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "256kb"],
    );
    for (key, capacity, items) in [
        ("largest", "1125899906842624", 3u32),
        ("large", "10000000", 3),
        ("sketch", "10000000", 2_000),
    ] {
        ok(&mut c, &["LC.RESERVE", key, "0.01", capacity]);
        add_many(&mut c, "LC.ADD", key, "i", items);
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut c).unwrap();
        let copy = format!("{key}:copy");
        let _: () = redis::cmd("RESTORE")
            .arg(&copy)
            .arg(0)
            .arg(&payload)
            .query(&mut c)
            .unwrap();
        assert_eq!(digest(&mut c, &copy), digest(&mut c, key), "{key}");
    }
}
