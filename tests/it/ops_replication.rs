//! Replication: a replica loaded with other module defaults and a lower max-memory-per-key
//! ends up with byte-identical values (full sync and the command stream), and refuses writes;
//! writes stopped part-way propagate what they did; a `swapdb` full sync loads beside the old
//! values.
use crate::common::ops::*;
use crate::common::*;

#[test]
fn replica_with_other_defaults_holds_identical_values_and_refuses_writes() {
    let master = Server::start();
    let mut replica_builder = Server::builder();
    for (name, value) in OTHER_DEFAULTS {
        replica_builder = replica_builder.module_arg(name, value);
    }
    let replica = replica_builder.start();
    let mut m = master.conn();
    // Some values before the replica attaches: they arrive by full sync (RDB), large ones too.
    ok(&mut m, &["BF.RESERVE", "synced:large", "0.001", "2000000"]);
    ok(&mut m, &["LC.RESERVE", "synced:lc", "0.001", "20000000"]);
    add_many(&mut m, "LC.ADD", "synced:lc", "s", 10_000);
    attach_replica(&master, &replica);
    // The rest through the command stream; values above the replica's limit restored too
    // (a RESTORE loads as an RDB value does, where no client says it came from the master:
    // the replica refused them and silently lost them).
    mixed_workload(&mut m);
    for (from, to) in [
        ("synced:large", "restored:bf"),
        ("synced:lc", "restored:lc"),
        ("synced:large", "bf:insert"),
    ] {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(from).query(&mut m).unwrap();
        let _: () = redis::cmd("RESTORE")
            .arg(&[to, "0"])
            .arg(&payload)
            .arg("REPLACE")
            .query(&mut m)
            .unwrap();
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);

    let mut r = replica.conn();
    let on_master = digests(&mut m);
    assert_eq!(on_master.len(), 18, "{on_master:?}");
    assert_eq!(digests(&mut r), on_master);
    // The same number of filters and counters.
    let keys = |info: Vec<String>| -> Vec<String> {
        info.into_iter()
            .filter(|l| l.starts_with("lcbloom_bf_keys:") || l.starts_with("lcbloom_lc_keys:"))
            .collect()
    };
    let on_replica = keys(info_lcbloom(&mut r));
    assert_eq!(on_replica.len(), 2);
    assert_eq!(on_replica, keys(info_lcbloom(&mut m)));

    for write in [
        &["BF.RESERVE", "new", "0.01", "10"][..],
        &["BF.ADD", "bf:add", "z"],
        &["BF.MADD", "bf:add", "z"],
        &["BF.INSERT", "bf:add", "ITEMS", "z"],
        &["BF.LOADCHUNK", "new", "1", "x"],
        &["LC.RESERVE", "new", "0.01", "10"],
        &["LC.ADD", "lc:add", "z"],
        &["LC.MERGE", "lc:add", "lc:bitmap"],
        &["LC.LOADCHUNK", "new", "x"],
    ] {
        let mut cmd = redis::cmd(write[0]);
        for a in &write[1..] {
            cmd.arg(*a);
        }
        let e = err_text(cmd.query::<redis::Value>(&mut r));
        assert!(e.starts_with("READONLY"), "{write:?}: {e}");
    }
    // Reads work on the replica.
    let found: bool = redis::cmd("BF.EXISTS")
        .arg(&["bf:add", "a"])
        .query(&mut r)
        .unwrap();
    assert!(found);
    assert_eq!(digests(&mut r), on_master);
}

/// A MADD stopped by the master's max-memory-per-key must stop at the same item on a replica
/// and in an AOF replay, neither of which applies the limit.
#[test]
fn writes_refused_by_the_limit_propagate_only_what_was_done() {
    let mut master = Server::builder().arg("appendonly", "yes").start();
    let replica = Server::start();
    attach_replica(&master, &replica);
    let mut m = master.conn();
    ok(&mut m, &["BF.RESERVE", "k", "0.01", "100"]);
    ok(
        &mut m,
        &["BF.INSERT", "fresh", "CAPACITY", "100", "ITEMS", "a"],
    );
    ok(
        &mut m,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "2048"],
    );
    for key in ["k", "fresh", "new"] {
        let mut madd = redis::cmd("BF.MADD");
        madd.arg(key).arg(items("i", 1_000));
        // req_command keeps the error inside the array (query would turn it into an Err).
        let reply = redis::ConnectionLike::req_command(&mut m, &madd).unwrap();
        let redis::Value::Array(replies) = reply else {
            panic!("{reply:?}")
        };
        let Some(redis::Value::ServerError(e)) = replies.last() else {
            panic!("{key}: the limit never stopped the MADD: {replies:?}")
        };
        assert!(format!("{e:?}").contains("max-memory-per-key"), "{e:?}");
        assert!(replies.len() > 100, "{key}: {}", replies.len());
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let on_master = digests(&mut m);
    assert_eq!(on_master.len(), 3);
    assert_eq!(digests(&mut replica.conn()), on_master, "replica");
    master.restart();
    assert_eq!(digests(&mut master.conn()), on_master, "AOF replay");
}

/// A write that max-memory-per-key stops at the switch to the dense bitmap (the limit lowered
/// after the counters were reserved) has applied its first items or sources; replica and AOF
/// replay hold exactly that, though neither applies the limit.
#[test]
fn lc_writes_stopped_part_way_propagate_only_what_was_done() {
    use lcbloom::lc::counter::{Counter, Mode};
    let mut master = Server::builder().arg("appendonly", "yes").start();
    let replica = Server::start();
    attach_replica(&master, &replica);
    let mut m = master.conn();
    for key in ["add", "dest", "exact:src", "sparse:src"] {
        ok(&mut m, &["LC.RESERVE", key, "0.01", "100000"]);
    }
    // The same counter in process (same hashing) says where the switch to registers falls:
    // "add" and "dest" get 400 tokens short of it, and what 1,000 new items would apply.
    let mut model = Counter::reserve(0.01, 100_000, u64::MAX).unwrap();
    assert!(model.bits() / 8 > 2048);
    let limit = model.geometry().token_limit;
    let mut old = 0;
    while model.bits_set() < limit - 400 {
        model.add(format!("old{old}").as_bytes()).unwrap();
        old += 1;
    }
    assert_eq!(model.mode(), Mode::Tokens);
    add_many(&mut m, "LC.ADD", "add", "old", old);
    add_many(&mut m, "LC.ADD", "dest", "old", old);
    add_many(&mut m, "LC.ADD", "exact:src", "s", 300);
    add_many(&mut m, "LC.ADD", "sparse:src", "b", 1_500);
    let count = |m: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("LC.COUNT").arg(key).query(m).unwrap()
    };
    assert_eq!(count(&mut m, "add"), model.count() as i64);
    let mut applied = model.clone();
    for item in items("new", 1_000) {
        if applied.add_within(item.as_bytes(), 2048).is_err() {
            break;
        }
    }
    assert!(applied.bits_set() == limit && applied.count() > model.count());
    ok(
        &mut m,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "2048"],
    );

    // LC.ADD: 1,000 new items, the token list has room for 400 more.
    let e = err_text(
        redis::cmd("LC.ADD")
            .arg("add")
            .arg(items("new", 1_000))
            .query::<i64>(&mut m),
    );
    assert!(e.contains("max-memory-per-key"), "{e}");
    assert_eq!(count(&mut m, "add"), applied.count() as i64);

    // LC.MERGE: the exact source fits the destination's token list, the 1,500-item one
    // could take it past the switch; the first is absorbed, the second refused.
    let mut merged = model.clone();
    let mut source = Counter::reserve(0.01, 100_000, u64::MAX).unwrap();
    for item in items("s", 300) {
        source.add(item.as_bytes()).unwrap();
    }
    merged.absorb(&source).unwrap();
    let e = err_text(
        redis::cmd("LC.MERGE")
            .arg(&["dest", "missing", "exact:src", "sparse:src"])
            .query::<()>(&mut m),
    );
    assert!(e.contains("max-memory-per-key"), "{e}");
    assert_eq!(count(&mut m, "dest"), merged.count() as i64);

    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let on_master = digests(&mut m);
    assert_eq!(on_master.len(), 4);
    assert_eq!(digests(&mut replica.conn()), on_master, "replica");
    master.restart();
    assert_eq!(digests(&mut master.conn()), on_master, "AOF replay");
}

/// A child process of `pid` (a server's fork), from /proc.
fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            (ppid == pid.to_string()).then(|| entry.file_name().to_str()?.parse().ok())?
        })
}

/// Polls `INFO persistence` until `async_loading` is `value`.
fn wait_async_loading(c: &mut redis::Connection, value: i64) {
    let start = std::time::Instant::now();
    while info_int(c, "persistence", "async_loading") != value {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "async_loading never became {value}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// With `repl-diskless-load swapdb` a replica that must sync its master again in full loads
/// the new copy beside the one it has and answers from that meanwhile (the module declares
/// that it handles this; without that the server drops the old copy first and answers
/// `LOADING`). The loaded values then replace the old, or, when the sync breaks off, are
/// dropped, the old staying whole, and `INFO lcbloom` counts right either way.
#[test]
fn a_swapdb_full_sync_serves_the_old_values_until_it_completes() {
    let master = Server::builder()
        .arg("repl-diskless-sync", "yes")
        .arg("repl-diskless-sync-delay", "0")
        .arg("repl-backlog-size", "16384")
        .start();
    let replica = Server::builder()
        .arg("repl-diskless-load", "swapdb")
        .start();
    let (mut m, mut r) = (master.conn(), replica.conn());
    // 200 filters and 200 counters named after `generation`.
    let add = |pipe: &mut redis::Pipeline, generation: &str| {
        for i in 0..200 {
            let key = format!("{generation}:bf:{i}");
            pipe.cmd("BF.ADD").arg(&[&key, "y"]).ignore();
            let key = format!("{generation}:lc:{i}");
            pipe.cmd("LC.ADD").arg(&[&key, "y", "z"]).ignore();
        }
    };
    let mut pipe = redis::pipe();
    add(&mut pipe, "old");
    let _: () = pipe.query(&mut m).unwrap();
    attach_replica(&master, &replica);
    let old = (digests(&mut r), info_lcbloom(&mut r));
    assert_eq!(old.0.len(), 400);
    // While it loads, the replica serves its clients every KB it reads.
    ok(
        &mut r,
        &[
            "CONFIG",
            "SET",
            "loading-process-events-interval-bytes",
            "1024",
        ],
    );
    // The link breaks and the writes meanwhile overflow the backlog: a full sync again, its
    // values sent `delay` µs apart.
    let resync = |m: &mut redis::Connection, r: &mut redis::Connection, generation: &str, delay| {
        ok(m, &["CONFIG", "SET", "rdb-key-save-delay", delay]);
        // In one transaction, so that the replica cannot come back before the backlog is
        // overrun.
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("CLIENT")
            .arg(&["KILL", "TYPE", "replica"]);
        add(&mut pipe, generation);
        let _: redis::Value = pipe.query(m).unwrap();
        wait_async_loading(r, 1);
        assert_eq!(ok(r, &["BF.EXISTS", "old:bf:0", "y"]), redis::Value::Int(1));
        assert_eq!(ok(r, &["LC.COUNT", "old:lc:0"]), redis::Value::Int(2));
        let new_key = format!("{generation}:bf:0");
        assert_eq!(ok(r, &["EXISTS", &new_key]), redis::Value::Int(0));
    };

    // Broken off: the master's process that sends the sync dies half-way.
    resync(&mut m, &mut r, "lost", "10000");
    let sender = child_of(master.pid()).expect("the master's sync process");
    let _ = std::process::Command::new("kill")
        .args(["-9", &sender.to_string()])
        .status();
    wait_async_loading(&mut r, 0);
    assert_eq!((digests(&mut r), info_lcbloom(&mut r)), old);

    // Completed: the master's values replace the old ones.
    resync(&mut m, &mut r, "new", "1000");
    wait_async_loading(&mut r, 0);
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let loaded = digests(&mut r);
    assert_eq!(loaded.len(), 1200);
    assert_eq!(loaded, digests(&mut m));
    assert_eq!(info_lcbloom(&mut r), info_lcbloom(&mut m));
    let log = replica.log();
    assert!(!log.contains("Skipping diskless-load"), "{log}");
}
