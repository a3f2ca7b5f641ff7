//! `INFO lcbloom` follows every way values come and go (create, scale, mode switch, COPY,
//! RESTORE, reload, DEL, UNLINK on the lazy-free thread, expiry, FLUSHALL, moves between
//! databases, FLUSHDB, eviction) and returns to 0;
//! every write fires its documented keyspace event; only writes that change a key reach its
//! watchers and the clients caching it.
use crate::common::*;
use redis::{Connection, Value};
use std::time::{Duration, Instant};

/// `[bf_keys, bf_bytes, lc_keys, lc_bytes]` from `INFO lcbloom`.
fn tally(c: &mut Connection) -> [i64; 4] {
    let info: String = redis::cmd("INFO").arg("lcbloom").query(c).unwrap();
    assert!(info.contains("# lcbloom"), "{info}");
    let field = |name: &str| -> i64 {
        let prefix = format!("lcbloom_{name}:");
        info.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .trim()
            .parse()
            .unwrap()
    };
    [
        field("bf_keys"),
        field("bf_bytes"),
        field("lc_keys"),
        field("lc_bytes"),
    ]
}

/// Databases the tests put keys in.
const DATABASES: u32 = 3;

/// The same numbers computed from the keyspace: every key's type and `BF.INFO`/`LC.INFO` size,
/// in every database the tests use (the connection is left in database 0).
fn expected(c: &mut Connection) -> [i64; 4] {
    let mut out = [0; 4];
    for db in 0..DATABASES {
        ok(c, &["SELECT", &db.to_string()]);
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query(c).unwrap();
            let (slot, size) = match kind.as_str() {
                "lcbloomBF" | "lcbloomBW" => {
                    let size: Vec<i64> = redis::cmd("BF.INFO")
                        .arg(&key)
                        .arg("SIZE")
                        .query(c)
                        .unwrap();
                    (0, size[0])
                }
                "lcbloomLC" => {
                    let info: Vec<Value> = redis::cmd("LC.INFO").arg(&key).query(c).unwrap();
                    let Value::Int(size) = info[5] else {
                        panic!("{info:?}")
                    };
                    (2, size)
                }
                _ => continue,
            };
            out[slot] += 1;
            out[slot + 1] += size;
        }
    }
    ok(c, &["SELECT", "0"]);
    out
}

/// Waits (values freed on the lazy-free thread or by active expiry arrive a little later) until
/// `INFO lcbloom` matches the keyspace, and returns it.
fn settled(c: &mut Connection) -> [i64; 4] {
    let start = Instant::now();
    loop {
        let (now, want) = (tally(c), expected(c));
        if now == want {
            return now;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "INFO lcbloom {now:?}, keyspace {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn info_counts_values_and_bytes_up_and_back_to_zero() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(tally(&mut c), [0; 4]);
    // INFO without a section leaves ours out; INFO everything has it.
    let default: String = redis::cmd("INFO").query(&mut c).unwrap();
    assert!(!default.contains("lcbloom_bf_keys"));
    let everything: String = redis::cmd("INFO").arg("everything").query(&mut c).unwrap();
    assert!(everything.contains("lcbloom_bf_keys:0"));

    ok(
        &mut c,
        &["BF.RESERVE", "fixed", "0.01", "1000", "NONSCALING"],
    );
    ok(&mut c, &["BF.ADD", "scaling", "a"]);
    let one_filter = settled(&mut c);
    assert_eq!(one_filter[0], 2);
    // 100 → 200 → 400 ... : scaling out adds bytes.
    add_many(&mut c, "BF.MADD", "scaling", "s", 3_000);
    let scaled = settled(&mut c);
    assert!(scaled[1] > one_filter[1], "{scaled:?} {one_filter:?}");
    ok(
        &mut c,
        &["BF.INSERT", "ins", "CAPACITY", "50", "ITEMS", "x", "y"],
    );

    ok(&mut c, &["LC.RESERVE", "big", "0.01", "10000000"]);
    add_many(&mut c, "LC.ADD", "exact", "e", 100);
    let exact = settled(&mut c);
    // Growing the exact set, then switching to the bitmap, add bytes.
    add_many(&mut c, "LC.ADD", "exact", "f", 200);
    add_many(&mut c, "LC.ADD", "exact", "g", 5_000);
    let bitmap = settled(&mut c);
    assert!(bitmap[3] > exact[3], "{bitmap:?} {exact:?}");
    add_many(&mut c, "LC.ADD", "big", "b", 20_000); // a 137 KB bitmap
    ok(&mut c, &["LC.RESERVE", "big2", "0.01", "10000000"]);
    add_many(&mut c, "LC.ADD", "big2", "c", 100);
    let before_merge = settled(&mut c);
    // Merging a bitmap into an exact counter switches it to its bitmap.
    ok(&mut c, &["LC.MERGE", "big2", "big"]);
    assert!(settled(&mut c)[3] > before_merge[3]);
    ok(&mut c, &["LC.MERGE", "union", "big", "big2"]);
    let encoding: Vec<u8> = redis::cmd("DUMP").arg("exact").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("restored2")
        .arg(0)
        .arg(&encoding)
        .query(&mut c)
        .unwrap();
    ok(&mut c, &["COPY", "scaling", "scaling:copy"]);
    ok(&mut c, &["COPY", "big", "big:copy"]);
    ok(&mut c, &["COPY", "fixed", "scaling:copy", "REPLACE"]);
    let all = settled(&mut c);
    assert_eq!((all[0], all[2]), (4, 6), "{all:?}");

    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(settled(&mut c), all, "DEBUG RELOAD");

    ok(&mut c, &["DEL", "fixed", "exact"]);
    // Above the lazy-free threshold: freed on the background thread.
    ok(&mut c, &["UNLINK", "big"]);
    ok(&mut c, &["PEXPIRE", "union", "1"]);
    ok(&mut c, &["SET", "plain", "string"]);
    // KEYS hides an expired key without deleting it; active expiry frees it soon after.
    while !redis::cmd("KEYS")
        .arg("union")
        .query::<Vec<String>>(&mut c)
        .unwrap()
        .is_empty()
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let fewer = settled(&mut c);
    assert_eq!((fewer[0], fewer[2]), (3, 3), "{fewer:?}");
    ok(&mut c, &["FLUSHALL", "ASYNC"]);
    assert_eq!(settled(&mut c), [0; 4]);

    add_many(&mut c, "LC.ADD", "again", "a", 10);
    add_many(&mut c, "BF.MADD", "again2", "a", 10);
    assert_ne!(settled(&mut c), [0; 4]);
    // SYNC: Valkey 9 flushes in the background by default (lazyfree-lazy-user-flush yes).
    ok(&mut c, &["FLUSHALL", "SYNC"]);
    assert_eq!(tally(&mut c), [0; 4]);
}

/// Keys of every stored type, `n` of each, named after `prefix`, each made by one command (so
/// that an eviction cannot fall between two); how many keys that is.
fn keys_of_every_type(c: &mut Connection, prefix: &str, n: usize) -> i64 {
    for i in 0..n {
        let key = |kind: &str| format!("{prefix}:{kind}:{i}");
        add_many(c, "BF.MADD", &key("bf"), "i", 300); // scales out at the defaults
        ok(
            c,
            &[
                "BF.INSERT",
                &key("blocked"),
                "LAYOUT",
                "blocked",
                "ITEMS",
                "a",
            ],
        );
        let _: Value = redis::cmd("BF.INSERT")
            .arg(key("win"))
            .arg(&["CAPACITY", "100", "WINDOW", "600", "ITEMS"])
            .arg(items("i", 50))
            .query(c)
            .unwrap();
        add_many(c, "LC.ADD", &key("exact"), "i", 30);
        add_many(c, "LC.ADD", &key("sketch"), "i", 2_000);
    }
    5 * n as i64
}

/// `DEBUG DIGEST-VALUE` of every key in each database the tests use.
fn every_database(c: &mut Connection) -> Vec<std::collections::BTreeMap<String, String>> {
    let held = (0..DATABASES)
        .map(|db| {
            ok(c, &["SELECT", &db.to_string()]);
            crate::common::ops::digests(c)
        })
        .collect();
    ok(c, &["SELECT", "0"]);
    held
}

/// `INFO lcbloom` follows values moved between databases (`MOVE`, `SWAPDB`, `COPY ... DB`),
/// flushed with one (`FLUSHDB`), and evicted under `maxmemory`; the evictions reach a replica
/// as deletions, which then holds what the master holds.
#[test]
fn info_follows_values_across_databases_and_eviction() {
    // The replication backlog counts against `maxmemory`: 1 MB, Redis's default (Valkey's is
    // 10 MB, more than the room this test leaves above the keys).
    let server = Server::builder().arg("repl-backlog-size", "1mb").start();
    let replica = Server::start();
    attach_replica(&server, &replica);
    let mut c = server.conn();
    let made = keys_of_every_type(&mut c, "k", 10);
    let all = settled(&mut c);
    for kind in ["bf", "win", "exact"] {
        ok(&mut c, &["MOVE", &format!("k:{kind}:0"), "1"]);
    }
    ok(&mut c, &["SWAPDB", "0", "1"]);
    for kind in ["bf", "win", "sketch"] {
        let key = format!("k:{kind}:1");
        ok(&mut c, &["SELECT", "1"]);
        ok(&mut c, &["COPY", &key, &key, "DB", "2"]);
        ok(&mut c, &["SELECT", "0"]);
    }
    let copied = settled(&mut c);
    assert_eq!(
        (copied[0], copied[2]),
        (all[0] + 2, all[2] + 1),
        "{copied:?}"
    );
    ok(&mut c, &["SELECT", "2"]);
    ok(&mut c, &["FLUSHDB", "SYNC"]);
    ok(&mut c, &["SELECT", "0"]);
    assert_eq!(settled(&mut c), all);

    let used = info_int(&mut c, "memory", "used_memory");
    let limit = (used + (4 << 20)).to_string();
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit]);
    // Batches of new keys until some are evicted, and a batch more.
    assert_eq!(all[0] + all[2], made);
    let mut made = made;
    for batch in 0.. {
        assert!(batch < 100, "nothing evicted");
        made += keys_of_every_type(&mut c, &format!("more{batch}"), 50);
        if info_int(&mut c, "stats", "evicted_keys") > 0 {
            made += keys_of_every_type(&mut c, "last", 50);
            break;
        }
    }
    let left = settled(&mut c);
    assert!(left[0] > 0 && left[2] > 0, "{left:?}");
    let evicted = info_int(&mut c, "stats", "evicted_keys");
    assert_eq!(
        left[0] + left[2],
        made - evicted,
        "{left:?}: {evicted} of {made} evicted"
    );
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut c).unwrap();
    assert_eq!(acked, 1);
    let mut r = replica.conn();
    assert_eq!(every_database(&mut r), every_database(&mut c));
    assert_eq!(settled(&mut r), left);
}

#[test]
fn large_values_are_freed_in_the_background() {
    let server = Server::builder()
        .arg("lazyfree-lazy-user-del", "yes")
        .start();
    let mut c = server.conn();
    // 64 MB filter: freeing it synchronously would stall the server for a while.
    ok(&mut c, &["BF.RESERVE", "huge", "0.0001", "30000000"]);
    ok(&mut c, &["LC.RESERVE", "small", "0.01", "1000"]);
    let before: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    let freed_before = lazyfreed(&before);
    ok(&mut c, &["DEL", "huge", "small"]);
    assert_eq!(settled(&mut c), [0; 4]);
    // The lazy-free thread counts a value just after freeing it.
    let start = Instant::now();
    let after = loop {
        let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
        if info.contains("lazyfree_pending_objects:0") && lazyfreed(&info) > freed_before {
            break info;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{info}");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Only the large value went to the lazy-free thread.
    assert_eq!(lazyfreed(&after) - freed_before, 1, "{after}");
}

fn lazyfreed(info: &str) -> i64 {
    info.lines()
        .find_map(|l| l.strip_prefix("lazyfreed_objects:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no lazyfreed_objects in {info}"))
}

#[test]
fn every_write_fires_its_keyspace_event() {
    // Fixed seed: a "d" taken for a false positive would change nothing and fire no event.
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    // K: keyspace channel, E: keyevent channel, A: every class, including d (module types).
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    pubsub.psubscribe("__keyspace@0__:*").unwrap();
    pubsub.set_read_timeout(Some(EVENT_WAIT)).unwrap();

    ok(&mut c, &["BF.RESERVE", "bf", "0.01", "100"]);
    ok(&mut c, &["BF.ADD", "bf", "a"]);
    ok(&mut c, &["BF.MADD", "bf", "b", "c"]);
    ok(&mut c, &["BF.INSERT", "bf", "ITEMS", "d"]);
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg("bf")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("BF.LOADCHUNK")
        .arg("bf2")
        .arg(1)
        .arg(header)
        .query(&mut c)
        .unwrap();
    ok(&mut c, &["LC.RESERVE", "lc", "0.01", "100"]);
    ok(&mut c, &["LC.ADD", "lc", "a"]);
    ok(&mut c, &["LC.ADD", "lc2", "b"]);
    ok(&mut c, &["LC.INSERT", "lc2", "ITEMS", "c"]);
    ok(&mut c, &["LC.MERGE", "lc", "lc2"]);
    // An empty counter's encoding (see src/lc/codec.rs): version, scheme, kind 0 (exact),
    // capacity 100, error rate 0.5, m = 64, no hashes.
    let mut encoding = vec![1u8, 1, 0, 100];
    encoding.extend(0.5f64.to_le_bytes());
    encoding.extend([64, 0]);
    let _: () = redis::cmd("LC.LOADCHUNK")
        .arg("lc3")
        .arg(encoding)
        .query(&mut c)
        .unwrap();
    ok(&mut c, &["BF.ADD", "bf", "a"]); // changes nothing: no event
    ok(&mut c, &["LC.ADD", "lc", "a"]); // likewise
    ok(&mut c, &["LC.INSERT", "lc", "ITEMS", "a"]); // likewise
    ok(&mut c, &["SET", "end", "x"]);

    let mut events = Vec::new();
    let mut keyspace = Vec::new();
    loop {
        let msg = pubsub.get_message().unwrap();
        let channel = msg.get_channel_name().to_string();
        let payload: String = msg.get_payload().unwrap();
        if let Some(event) = channel.strip_prefix("__keyevent@0__:") {
            if event == "set" {
                break;
            }
            events.push((event.to_string(), payload));
        } else if let Some(key) = channel.strip_prefix("__keyspace@0__:") {
            keyspace.push((payload, key.to_string()));
        }
    }
    let expected: Vec<(String, String)> = [
        ("bf.reserve", "bf"),
        ("bf.add", "bf"),
        ("bf.madd", "bf"),
        ("bf.insert", "bf"),
        ("bf.loadchunk", "bf2"),
        ("lc.reserve", "lc"),
        ("lc.add", "lc"),
        ("lc.add", "lc2"),
        ("lc.insert", "lc2"),
        ("lc.merge", "lc"),
        ("lc.loadchunk", "lc3"),
    ]
    .iter()
    .map(|(e, k)| (e.to_string(), k.to_string()))
    .collect();
    assert_eq!(events, expected);
    // Every event also reached the key's own channel (K), in the same order.
    assert_eq!(keyspace[..expected.len()], expected[..]);
}

/// Whether `write` (sent by another client) makes a transaction that `WATCH`es `key` abort.
fn aborts_a_watcher(server: &Server, key: &str, write: &redis::Cmd) -> bool {
    let mut watcher = server.conn();
    ok(&mut watcher, &["WATCH", key]);
    // Errors are part of the cases: a refused write changes nothing.
    let _ = write.query::<Value>(&mut server.conn());
    ok(&mut watcher, &["MULTI"]);
    ok(&mut watcher, &["PING"]);
    ok(&mut watcher, &["EXEC"]) == Value::Nil
}

/// Writes that change a key abort transactions watching it and invalidate clients caching it
/// (`CLIENT TRACKING`); writes that change nothing or are refused disturb neither, as `PFADD`
/// of a known item. Redis signalled every key a write command opened: an `LC.ADD` of an item
/// already counted aborted every watcher of the key.
#[test]
fn watchers_and_caches_see_only_writes_that_change_something() {
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    ok(&mut c, &["BF.RESERVE", "source", "0.01", "100"]);
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
        .arg(&["source", "0"])
        .query(&mut c)
        .unwrap();
    ok(&mut c, &["LC.ADD", "lc2", "y"]);
    let cases: &[(&str, &[&str], bool)] = &[
        ("bf", &["BF.RESERVE", "bf", "0.01", "100"], true),
        ("bf", &["BF.RESERVE", "bf", "0.01", "100"], false),
        ("bf", &["BF.ADD", "bf", "a"], true),
        ("bf", &["BF.ADD", "bf", "a"], false),
        ("bf", &["BF.MADD", "bf", "a", "b"], true),
        ("bf", &["BF.MADD", "bf", "a", "b"], false),
        ("bf", &["BF.INSERT", "bf", "ITEMS", "c"], true),
        ("bf", &["BF.INSERT", "bf", "NOCREATE", "ITEMS", "c"], false),
        ("bf", &["LC.ADD", "bf", "c"], false),
        ("w", &["BF.INSERT", "w", "WINDOW", "60", "ITEMS", "a"], true),
        ("lc", &["LC.ADD", "lc", "x"], true),
        ("lc", &["LC.ADD", "lc", "x"], false),
        ("lc", &["LC.RESERVE", "lc", "0.01", "100"], false),
        ("lc", &["LC.MERGE", "lc", "lc"], false),
        ("lc", &["LC.MERGE", "lc", "lc2"], true),
        ("lc", &["LC.MERGE", "lc", "lc2"], false),
        ("lc", &["LC.MERGE", "lc", "missing"], false),
    ];
    for (key, args, changes) in cases {
        let mut write = redis::cmd(args[0]);
        write.arg(&args[1..]);
        assert_eq!(aborts_a_watcher(&server, key, &write), *changes, "{args:?}");
    }
    // Loads of a header and of an empty counter's encoding (see src/lc/codec.rs), each made
    // once, then refused (the key exists).
    let mut encoding = vec![1u8, 1, 0, 100];
    encoding.extend(0.5f64.to_le_bytes());
    encoding.extend([64, 0]);
    let mut loads = [redis::cmd("BF.LOADCHUNK"), redis::cmd("LC.LOADCHUNK")];
    loads[0].arg("bf2").arg(1).arg(header);
    loads[1].arg("lc3").arg(encoding);
    for (key, load) in ["bf2", "lc3"].iter().zip(&loads) {
        assert!(aborts_a_watcher(&server, key, load), "{key}");
        assert!(!aborts_a_watcher(&server, key, load), "{key}");
    }

    // Tracking in broadcast mode: each write that changed a key invalidates it, in order.
    let mut sub = server.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut sub).unwrap();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("__redis__:invalidate").unwrap();
    pubsub.set_read_timeout(Some(EVENT_WAIT)).unwrap();
    let id = id.to_string();
    ok(
        &mut c,
        &["CLIENT", "TRACKING", "on", "REDIRECT", &id, "BCAST"],
    );
    ok(&mut c, &["BF.ADD", "bf", "a"]);
    ok(&mut c, &["BF.ADD", "bf", "new"]);
    ok(&mut c, &["LC.ADD", "lc", "x"]);
    ok(&mut c, &["LC.ADD", "lc", "new"]);
    ok(&mut c, &["SET", "end", "x"]);
    let mut invalidated = Vec::new();
    while invalidated.last().map(String::as_str) != Some("end") {
        let keys: Vec<String> = pubsub.get_message().unwrap().get_payload().unwrap();
        invalidated.extend(keys);
    }
    assert_eq!(invalidated, ["bf", "lc", "end"]);
}
