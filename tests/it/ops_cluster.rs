//! Redis Cluster: three masters on loopback. Every command declares its keys, so a cluster
//! client routes them, a key on the wrong node answers MOVED, multi-key LC.COUNT/LC.MERGE across
//! slots answer CROSSSLOT, and hash-tagged unions work.
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
    ok(&mut s, &["BF.RESERVE", &key("bf"), "0.01", "100000"]);
    add_many(&mut s, "BF.MADD", &key("bf"), "i", 5_000);
    ok(
        &mut s,
        &["BF.RESERVE", &key("win"), "0.01", "1000", "WINDOW", "600"],
    );
    add_many(&mut s, "BF.MADD", &key("win"), "i", 800);
    add_many(&mut s, "LC.ADD", &key("lc"), "i", 6_000);
    add_many(&mut s, "LC.ADD", &key("small"), "i", 50);
    ok(&mut s, &["BF.RESERVE", &key("big"), "0.001", "200000"]);
    ok(
        &mut d,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "100000"],
    );
    let keys: Vec<String> = ["bf", "win", "lc", "small", "big"]
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
