//! Redis Cluster: three masters on loopback. Every command declares its keys, so a cluster
//! client routes them, a key on the wrong node answers MOVED, multi-key LC.COUNT/LC.MERGE across
//! slots answer CROSSSLOT, and hash-tagged unions work. Resharding moves every type whole:
//! by `MIGRATE` (`redis-cli --cluster reshard`) on every server, by atomic slot migration on
//! Valkey 9.
use crate::common::*;
use redis::Value;

fn slot(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(c)
        .unwrap()
}

#[test]
fn three_masters_route_refuse_cross_slot_and_union_hash_tags() {
    // Fixed seed: 60 filters are asked about "w", never added.
    let nodes = Server::cluster_with(ServerBuilder::fixed_seed);
    let client =
        redis::cluster::ClusterClient::new(nodes.iter().map(|n| n.url()).collect::<Vec<_>>())
            .unwrap();
    let mut cc = client.get_connection().unwrap();

    // Commands of both types on keys all over the slot space, through the cluster client.
    for i in 0..60 {
        let bf = format!("bf:{i}");
        let lc = format!("lc:{i}");
        let added: bool = redis::cmd("BF.ADD")
            .arg(&bf)
            .arg("x")
            .query(&mut cc)
            .unwrap();
        assert!(added);
        let _: () = redis::cmd("BF.INSERT")
            .arg(&bf)
            .arg(&["ITEMS", "y", "z"])
            .query(&mut cc)
            .map(|_: Value| ())
            .unwrap();
        let exists: Vec<bool> = redis::cmd("BF.MEXISTS")
            .arg(&bf)
            .arg(&["x", "y", "w"])
            .query(&mut cc)
            .unwrap();
        assert_eq!(exists, [true, true, false]);
        let _: i64 = redis::cmd("LC.ADD")
            .arg(&lc)
            .arg(&["a", "b"])
            .query(&mut cc)
            .unwrap();
        let n: i64 = redis::cmd("LC.COUNT").arg(&lc).query(&mut cc).unwrap();
        assert_eq!(n, 2);
    }
    for node in &nodes {
        let keys: i64 = redis::cmd("DBSIZE").query(&mut node.conn()).unwrap();
        assert!(keys > 10, "node {} holds {keys} keys", node.port);
    }

    // MOVED from the nodes that do not own a key.
    let mut c0 = nodes[0].conn();
    let key_slot = slot(&mut c0, "bf:0");
    let mut moved = 0;
    for node in &nodes {
        let mut c = node.conn();
        for cmd in [
            &["BF.EXISTS", "bf:0", "x"][..],
            &["BF.ADD", "bf:0", "q"],
            &["LC.COUNT", "lc:0"],
        ] {
            let mut command = redis::cmd(cmd[0]);
            for a in &cmd[1..] {
                command.arg(*a);
            }
            match command.query::<Value>(&mut c) {
                Ok(_) => {}
                Err(e) => {
                    let text = err_text::<()>(Err(e));
                    assert!(text.starts_with("MOVED"), "{text}");
                    if cmd[1] == "bf:0" {
                        assert!(text.contains(&key_slot.to_string()), "{text}");
                    }
                    moved += 1;
                }
            }
        }
    }
    assert_eq!(moved, 6, "two of three nodes answer MOVED for each key");

    // Multi-key commands across slots: CROSSSLOT, from any node and through the client.
    let (a, b) = ("lc:1", "lc:2");
    assert_ne!(slot(&mut c0, a), slot(&mut c0, b));
    for node in &nodes {
        let mut c = node.conn();
        for cmd in [&["LC.COUNT", a, b][..], &["LC.MERGE", "lc:dest", a, b]] {
            let mut command = redis::cmd(cmd[0]);
            for k in &cmd[1..] {
                command.arg(*k);
            }
            let text = err_text(command.query::<Value>(&mut c));
            assert!(text.starts_with("CROSSSLOT"), "{text}");
        }
    }
    let through_client = redis::cmd("LC.COUNT").arg(&[a, b]).query::<i64>(&mut cc);
    assert!(through_client.is_err(), "{through_client:?}");

    // Hash tags put the keys of a union in one slot.
    for (key, prefix) in [("{user42}:mon", "m"), ("{user42}:tue", "t")] {
        add_many_cluster(&mut cc, key, prefix);
    }
    let union: i64 = redis::cmd("LC.COUNT")
        .arg(&["{user42}:mon", "{user42}:tue"])
        .query(&mut cc)
        .unwrap();
    assert_eq!(union, 150);
    let _: () = redis::cmd("LC.MERGE")
        .arg(&["{user42}:week", "{user42}:mon", "{user42}:tue"])
        .query(&mut cc)
        .unwrap();
    let week: i64 = redis::cmd("LC.COUNT")
        .arg("{user42}:week")
        .query(&mut cc)
        .unwrap();
    assert_eq!(week, 150);
}

/// 100 items per key, 50 shared between the two keys of the union.
fn add_many_cluster(cc: &mut redis::cluster::ClusterConnection, key: &str, prefix: &str) {
    let shared = items("shared", 50);
    let own = items(prefix, 50);
    let _: i64 = redis::cmd("LC.ADD")
        .arg(key)
        .arg(shared)
        .arg(own)
        .query(cc)
        .unwrap();
}

#[test]
fn command_getkeys_names_the_keys_of_every_command() {
    let server = Server::start();
    let mut c = server.conn();
    let cases: &[(&[&str], &[&str])] = &[
        (&["BF.RESERVE", "k", "0.01", "100"], &["k"]),
        (&["BF.ADD", "k", "i"], &["k"]),
        (&["BF.MADD", "k", "i", "j"], &["k"]),
        (&["BF.INSERT", "k", "ITEMS", "i"], &["k"]),
        (&["BF.EXISTS", "k", "i"], &["k"]),
        (&["BF.MEXISTS", "k", "i", "j"], &["k"]),
        (&["BF.INFO", "k"], &["k"]),
        (&["BF.CARD", "k"], &["k"]),
        (&["BF.SCANDUMP", "k", "0"], &["k"]),
        (&["BF.LOADCHUNK", "k", "1", "x"], &["k"]),
        (&["LC.RESERVE", "k", "0.01", "100"], &["k"]),
        (&["LC.ADD", "k", "i", "j"], &["k"]),
        (&["LC.INSERT", "k", "ITEMS", "i", "j"], &["k"]),
        (&["LC.COUNT", "a", "b", "c"], &["a", "b", "c"]),
        (&["LC.MERGE", "d", "a", "b"], &["d", "a", "b"]),
        (&["LC.INFO", "k"], &["k"]),
        (&["LC.LOADCHUNK", "k", "x"], &["k"]),
        (&["LC.LOADCHUNK", "k", "2", "x"], &["k"]),
    ];
    for (command, keys) in cases {
        let got: Vec<String> = redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg(*command)
            .query(&mut c)
            .unwrap();
        assert_eq!(got, *keys, "{command:?}");
    }
}

/// The node of `nodes` that owns `key` (the one that does not answer MOVED).
fn owner(nodes: &[Server], key: &str) -> usize {
    (0..nodes.len())
        .find(|&i| {
            let r = redis::cmd("BF.EXISTS")
                .arg(key)
                .arg("x")
                .query::<Value>(&mut nodes[i].conn());
            r.is_ok()
        })
        .expect("a node owns the slot")
}

/// Keys of `tag`'s slot, through its owner `s`: filters `bf` (5,000 items), `blocked` (one,
/// "a"), `scaling` (500, past its first sub-filter) and `win` (windowed, 800), counters `lc`
/// (6,000) and `small` (50, exact).
fn fill_slot(s: &mut redis::Connection, tag: &str) {
    let key = |k: &str| format!("{tag}{k}");
    ok(s, &["BF.RESERVE", &key("bf"), "0.01", "100000"]);
    add_many(s, "BF.MADD", &key("bf"), "i", 5_000);
    let blocked = key("blocked");
    ok(
        s,
        &["BF.INSERT", &blocked, "LAYOUT", "blocked", "ITEMS", "a"],
    );
    add_many(s, "BF.MADD", &key("scaling"), "i", 500);
    ok(
        s,
        &["BF.RESERVE", &key("win"), "0.01", "1000", "WINDOW", "600"],
    );
    add_many(s, "BF.MADD", &key("win"), "i", 800);
    add_many(s, "LC.ADD", &key("lc"), "i", 6_000);
    add_many(s, "LC.ADD", &key("small"), "i", 50);
}

/// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`) moves a slot's filters,
/// windowed filters and counters whole, with the writes made while it runs, even a value
/// over the target's `max-memory-per-key` (a move rebuilds what was accepted). A server
/// without it (Redis 7) refuses the command, and the test says so and ends.
#[test]
fn atomic_slot_migration_moves_every_type() {
    let nodes = Server::cluster_with(ServerBuilder::fixed_seed);
    let tag = "{m}";
    let src = owner(&nodes, tag);
    let dst = (src + 1) % nodes.len();
    let (mut s, mut d) = (nodes[src].conn(), nodes[dst].conn());
    if redis::cmd("CLUSTER")
        .arg("GETSLOTMIGRATIONS")
        .query::<Value>(&mut s)
        .is_err()
    {
        eprintln!("this server has no atomic slot migration: nothing to test");
        return;
    }
    let key = |k: &str| format!("{tag}{k}");
    fill_slot(&mut s, tag);
    ok(&mut s, &["BF.RESERVE", &key("big"), "0.001", "200000"]);
    ok(
        &mut d,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "100000"],
    );
    let keys: Vec<String> = ["bf", "blocked", "scaling", "win", "lc", "small", "big"]
        .iter()
        .map(|k| key(k))
        .collect();
    let slot = slot(&mut s, tag);
    let target: String = redis::cmd("CLUSTER").arg("MYID").query(&mut d).unwrap();
    let slot_text = slot.to_string();
    ok(
        &mut s,
        &[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &slot_text,
            &slot_text,
            "NODE",
            &target,
        ],
    );
    // Writes while it runs, until the slot has moved.
    let mut written = Vec::new();
    for i in 0..10_000 {
        let item = format!("late{i}");
        let win = redis::cmd("BF.ADD")
            .arg(key("win"))
            .arg(&item)
            .query::<Value>(&mut s);
        let lc = redis::cmd("LC.ADD")
            .arg(key("lc"))
            .arg(&item)
            .query::<Value>(&mut s);
        if win.is_err() || lc.is_err() {
            break;
        }
        written.push(item);
    }
    let start = std::time::Instant::now();
    loop {
        let state = format!("{:?}", ok(&mut s, &["CLUSTER", "GETSLOTMIGRATIONS"]));
        if state.contains("success") {
            break;
        }
        assert!(!state.contains("fail"), "{state}");
        assert!(start.elapsed().as_secs() < 60, "{state}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let mut d = nodes[dst].conn();
    for k in &keys {
        assert_eq!(ok(&mut d, &["EXISTS", k]), Value::Int(1), "{k} moved");
    }
    let present = |c: &mut redis::Connection, k: &str, items: &[String]| -> bool {
        let found: Vec<bool> = redis::cmd("BF.MEXISTS").arg(k).arg(items).query(c).unwrap();
        found.iter().all(|&f| f)
    };
    assert!(present(&mut d, &key("bf"), &items("i", 5_000)));
    assert!(present(&mut d, &key("win"), &items("i", 800)));
    assert!(
        present(&mut d, &key("win"), &written),
        "writes made while it ran"
    );
    let readded: i64 = redis::cmd("LC.ADD")
        .arg(key("lc"))
        .arg(&written)
        .query(&mut d)
        .unwrap();
    assert_eq!(
        readded, 0,
        "every write made while it ran is in the counter"
    );
    assert_eq!(ok(&mut d, &["LC.COUNT", &key("small")]), Value::Int(50));
}

/// The one node of `nodes` that holds `key`, and `DEBUG DIGEST-VALUE` of it there.
fn digest_in(nodes: &[Server], key: &str) -> (usize, String) {
    let missing = "0".repeat(40);
    let held: Vec<(usize, String)> = nodes
        .iter()
        .map(|n| digest(&mut n.conn(), key))
        .enumerate()
        .filter(|(_, d)| *d != missing)
        .collect();
    assert_eq!(held.len(), 1, "{key} is on one node: {held:?}");
    held[0].clone()
}

/// `CLUSTER MYID` of `node`.
fn node_id(node: &Server) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.conn())
        .unwrap()
}

/// Resharding as `redis-cli --cluster reshard` does it, on every server: the target marks a
/// slot `IMPORTING`, the source `MIGRATING`, `MIGRATE` moves its keys a batch at a time, and
/// `SETSLOT NODE` ends it. While the slot is split, a cluster client reads and writes every
/// key where it is (the source answers ASK for a key it no longer holds, or a new one), and a
/// union of keys on both sides answers TRYAGAIN; afterwards every value on the target is the
/// one the source held, byte for byte, with the writes made meanwhile. Then `redis-cli
/// --cluster reshard` itself moves a thousand slots of filters and counters.
#[test]
fn resharding_by_migrate_moves_every_type() {
    let nodes = Server::cluster_with(ServerBuilder::fixed_seed);
    let tag = "{r}";
    let (src, dst) = {
        let src = owner(&nodes, tag);
        (src, (src + 1) % nodes.len())
    };
    let (mut s, mut d) = (nodes[src].conn(), nodes[dst].conn());
    let key = |k: &str| format!("{tag}{k}");
    fill_slot(&mut s, tag);
    let keys: Vec<String> = ["bf", "blocked", "scaling", "win", "lc", "small"]
        .iter()
        .map(|k| key(k))
        .collect();
    let before: Vec<String> = keys.iter().map(|k| digest(&mut s, k)).collect();

    let slot = slot(&mut s, tag).to_string();
    let (src_id, dst_id) = (node_id(&nodes[src]), node_id(&nodes[dst]));
    ok(&mut d, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id]);
    ok(&mut s, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst_id]);
    let dst_port = nodes[dst].port.to_string();
    let migrate = |s: &mut redis::Connection, moving: &[String]| {
        let mut cmd = redis::cmd("MIGRATE");
        cmd.arg("127.0.0.1")
            .arg(&dst_port)
            .arg("")
            .arg(0)
            .arg(5_000);
        let _: String = cmd.arg("KEYS").arg(moving).query(s).unwrap();
    };
    let (first, rest) = keys.split_at(3);
    migrate(&mut s, first);

    // The slot split: a cluster client follows ASK to the keys moved and to new keys.
    let client =
        redis::cluster::ClusterClient::new(nodes.iter().map(|n| n.url()).collect::<Vec<_>>())
            .unwrap();
    let mut cc = client.get_connection().unwrap();
    for k in &keys {
        if k.ends_with("lc") || k.ends_with("small") {
            let count: i64 = redis::cmd("LC.COUNT")
                .arg(k)
                .query(&mut cc)
                .unwrap_or_else(|e| panic!("{k}: {e}"));
            assert!(count >= 50, "{k}: {count}");
        } else {
            let added = if k.ends_with("blocked") { "a" } else { "i0" };
            let found: bool = redis::cmd("BF.EXISTS")
                .arg(k)
                .arg(added)
                .query(&mut cc)
                .unwrap_or_else(|e| panic!("{k}: {e}"));
            assert!(found, "{k}");
        }
    }
    for k in [key("bf"), key("lc"), key("new")] {
        let command = if k.ends_with("lc") {
            "LC.ADD"
        } else {
            "BF.ADD"
        };
        let _: Value = redis::cmd(command)
            .arg(&k)
            .arg("during")
            .query(&mut cc)
            .unwrap_or_else(|e| panic!("{command} {k}: {e}"));
    }
    let asked = redis::cmd("BF.ADD")
        .arg(key("bf"))
        .arg("x")
        .query::<Value>(&mut s)
        .unwrap_err();
    assert_eq!(asked.code(), Some("ASK"), "{asked}");
    let split = redis::cmd("LC.COUNT")
        .arg(key("lc"))
        .arg(key("bf"))
        .query::<Value>(&mut s)
        .unwrap_err();
    assert_eq!(split.code(), Some("TRYAGAIN"), "{split}");

    migrate(&mut s, rest);
    for node in &nodes {
        ok(
            &mut node.conn(),
            &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id],
        );
    }
    let count_in = |c: &mut redis::Connection| -> i64 {
        redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(&slot)
            .query(c)
            .unwrap()
    };
    assert_eq!(count_in(&mut s), 0);
    assert_eq!(count_in(&mut d), keys.len() as i64 + 1);
    for (k, digest_before) in keys.iter().zip(&before) {
        let changed = k.ends_with("}bf") || k.ends_with("}lc");
        assert_eq!(
            digest(&mut d, k) == *digest_before,
            !changed,
            "{k}: the target's value is the source's, with the writes made meanwhile"
        );
    }
    let during = |c: &mut redis::Connection, command: &str, k: &str| -> Value {
        ok(c, &[command, k, "during"])
    };
    assert_eq!(during(&mut d, "BF.EXISTS", &key("bf")), Value::Int(1));
    assert_eq!(during(&mut d, "BF.EXISTS", &key("new")), Value::Int(1));
    assert_eq!(during(&mut d, "LC.ADD", &key("lc")), Value::Int(0));
    assert_eq!(ok(&mut d, &["LC.COUNT", &key("small")]), Value::Int(50));
    let union: i64 = redis::cmd("LC.COUNT")
        .arg(key("small"))
        .arg(key("lc"))
        .query(&mut cc)
        .unwrap();
    assert!((5_900..=6_100).contains(&union), "{union}");

    // `redis-cli --cluster reshard`: a thousand slots full of filters and counters.
    let spread: Vec<String> = (0..300).map(|i| format!("spread:{i}")).collect();
    for k in &spread {
        let command = if k.len() % 2 == 0 {
            "BF.MADD"
        } else {
            "LC.ADD"
        };
        let _: Value = redis::cmd(command)
            .arg(k)
            .arg(items(k, 20))
            .query(&mut cc)
            .unwrap();
    }
    let digests_of =
        || -> Vec<(usize, String)> { spread.iter().map(|k| digest_in(&nodes, k)).collect() };
    let spread_before = digests_of();
    let from = format!("127.0.0.1:{}", nodes[src].port);
    redis_cli_cluster(
        &[
            "reshard",
            &from,
            "--cluster-from",
            &src_id,
            "--cluster-to",
            &dst_id,
            "--cluster-slots",
            "1000",
            "--cluster-yes",
        ]
        .map(String::from),
    );
    let spread_after = digests_of();
    let mut moved = 0;
    for (k, (before, after)) in spread.iter().zip(spread_before.iter().zip(&spread_after)) {
        assert_eq!(before.1, after.1, "{k} holds the same value");
        if before.0 != after.0 {
            assert_eq!((before.0, after.0), (src, dst), "{k} moved");
            moved += 1;
        }
    }
    assert!(moved > 0, "no key moved");
}
