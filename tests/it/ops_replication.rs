//! Replication: a replica loaded with other module defaults and a lower max-memory-per-key
//! ends up with byte-identical values (full sync and the command stream), and refuses writes;
//! writes stopped part-way propagate what they did; a `swapdb` replica keeps its values until
//! a full sync completes, also when the sync breaks off right after a value.
use crate::common::ops::*;
use crate::common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// Keys created one after another with parameters that change, return and repeat (the
/// defaults reconfigured between creates, and explicit ones) reach a replica and the AOF each
/// with its own parameters: the replicated creates reuse the strings of parameters that
/// repeat, never those of the last value.
#[test]
fn creates_with_changing_parameters_replicate_each_its_own() {
    let mut master = Server::builder().arg("appendonly", "yes").start();
    let mut replica_builder = Server::builder();
    for (name, value) in OTHER_DEFAULTS {
        replica_builder = replica_builder.module_arg(name, value);
    }
    let replica = replica_builder.start();
    attach_replica(&master, &replica);
    let mut m = master.conn();
    let sets = [
        ("0.01", "100", "2", "0.01", "50000", "60"),
        ("0.001", "1000", "4", "0.05", "1000", "3600"),
    ];
    for (i, set) in [0, 0, 1, 0, 1, 1].into_iter().enumerate() {
        let (bf_rate, bf_size, expansion, lc_rate, lc_capacity, window) = sets[set];
        for (name, value) in [
            ("bf-error-rate", bf_rate),
            ("bf-initial-size", bf_size),
            ("bf-expansion-factor", expansion),
            ("lc-error-rate", lc_rate),
            ("lc-capacity", lc_capacity),
        ] {
            ok(
                &mut m,
                &["CONFIG", "SET", &format!("lcbloom.{name}"), value],
            );
        }
        ok(&mut m, &["BF.ADD", &format!("bf:add:{i}"), "a"]);
        ok(&mut m, &["BF.MADD", &format!("bf:madd:{i}"), "a", "b"]);
        ok(
            &mut m,
            &["BF.RESERVE", &format!("bf:reserve:{i}"), bf_rate, bf_size],
        );
        ok(
            &mut m,
            &[
                "BF.INSERT",
                &format!("bf:window:{i}"),
                "CAPACITY",
                bf_size,
                "ERROR",
                bf_rate,
                "EXPANSION",
                expansion,
                "WINDOW",
                window,
                "ITEMS",
                "a",
            ],
        );
        ok(&mut m, &["LC.ADD", &format!("lc:add:{i}"), "a", "b"]);
        ok(&mut m, &["LC.ADD", &format!("lc:empty:{i}")]);
        // Its rate given, its capacity the default.
        ok(
            &mut m,
            &[
                "LC.INSERT",
                &format!("lc:insert:{i}"),
                "ERROR",
                lc_rate,
                "ITEMS",
                "a",
            ],
        );
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let on_master = digests(&mut m);
    assert_eq!(on_master.len(), 42);
    // Each key has its set's parameters (the digests then show the replica's are the same).
    for (i, set) in [0, 0, 1, 0, 1, 1].into_iter().enumerate() {
        let capacity: Vec<i64> = redis::cmd("BF.INFO")
            .arg(&[&format!("bf:add:{i}"), "CAPACITY"])
            .query(&mut m)
            .unwrap();
        assert_eq!(capacity[0].to_string(), sets[set].1, "bf:add:{i}");
        let info: Vec<redis::Value> = redis::cmd("LC.INFO")
            .arg(format!("lc:add:{i}"))
            .query(&mut m)
            .unwrap();
        assert_eq!(
            info[1],
            redis::Value::Int(sets[set].4.parse().unwrap()),
            "lc:add:{i}: {info:?}"
        );
    }
    assert_eq!(digests(&mut replica.conn()), on_master, "replica");
    master.restart();
    assert_eq!(digests(&mut master.conn()), on_master, "AOF replay");
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

/// A write that max-memory-per-key would stop at the switch to the registers (the limit
/// lowered after the counters were reserved) is refused whole: though its first items or
/// sources fit, the counter is as it was, and replica and AOF replay, which apply no limit,
/// hold the same. A write that fits the room left is applied.
#[test]
fn lc_writes_the_limit_refuses_change_nothing_anywhere() {
    use lcbloom::lc::counter::{Counter, Mode};
    let mut master = Server::builder().arg("appendonly", "yes").start();
    let replica = Server::start();
    attach_replica(&master, &replica);
    let mut m = master.conn();
    for key in ["add", "dest", "exact:src", "sparse:src"] {
        ok(&mut m, &["LC.RESERVE", key, "0.01", "100000"]);
    }
    // The same counter in process (same hashing) says where the switch to registers falls:
    // "add" and "dest" get 400 tokens short of it, where 1,000 new items would pass it.
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
    let dump = |m: &mut redis::Connection, key: &str| -> Vec<u8> {
        redis::cmd("DUMP").arg(key).query(m).unwrap()
    };
    let before = ["add", "dest"].map(|key| dump(&mut m, key));
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
    assert_eq!(dump(&mut m, "add"), before[0]);

    // LC.MERGE: the exact source fits the destination's token list, the 1,500-item one
    // could take it past the switch: refused, neither absorbed.
    let e = err_text(
        redis::cmd("LC.MERGE")
            .arg(&["dest", "missing", "exact:src", "sparse:src"])
            .query::<()>(&mut m),
    );
    assert!(e.contains("max-memory-per-key"), "{e}");
    assert_eq!(dump(&mut m, "dest"), before[1]);

    // What fits the room left is applied, here and on the copies: 300 items, and the
    // exact source merged alone.
    let mut merged = model.clone();
    let mut source = Counter::reserve(0.01, 100_000, u64::MAX).unwrap();
    for item in items("s", 300) {
        source.add(item.as_bytes()).unwrap();
    }
    merged.absorb(&source).unwrap();
    ok(&mut m, &["LC.MERGE", "dest", "missing", "exact:src"]);
    assert_eq!(count(&mut m, "dest"), merged.count() as i64);
    let mut added = model.clone();
    for item in items("new", 300) {
        added.add(item.as_bytes()).unwrap();
    }
    let _: i64 = redis::cmd("LC.ADD")
        .arg("add")
        .arg(items("new", 300))
        .query(&mut m)
        .unwrap();
    assert_eq!(count(&mut m, "add"), added.count() as i64);

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

/// Polls `INFO replication` until `master_sync_in_progress` is `value`.
fn wait_sync_in_progress(c: &mut redis::Connection, value: i64) {
    wait_until(
        Duration::from_secs(30),
        || info_int(c, "replication", "master_sync_in_progress") == value,
        || format!("master_sync_in_progress never became {value}"),
    );
}

/// With `repl-diskless-load swapdb` a replica that must sync its master again in full keeps
/// answering from the values it has meanwhile. The module does not declare that it handles
/// asynchronous loading (module.rs says why), so the server receives the sync to disk and
/// loads it once whole: a sync that breaks off is dropped, the old values and `INFO lcbloom`
/// staying as they were, and a completed one replaces them.
#[test]
fn a_swapdb_replica_keeps_its_values_until_a_full_sync_completes() {
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
        wait_sync_in_progress(r, 1);
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
    // Once the master has reaped it, it has dropped the replica's link; the replica comes back
    // at once for another sync, whose values are sent 10 ms apart: seconds away.
    wait_until(
        Duration::from_secs(30),
        || child_of(master.pid()) != Some(sender),
        || "sync process never reaped".into(),
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!((digests(&mut r), info_lcbloom(&mut r)), old);

    // Completed: the master's values replace the old ones.
    resync(&mut m, &mut r, "new", "1000");
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(30000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let loaded = digests(&mut r);
    assert_eq!(loaded.len(), 1200);
    assert_eq!(loaded, digests(&mut m));
    assert_eq!(info_lcbloom(&mut r), info_lcbloom(&mut m));
}

/// A master that is only its replication handshake. Its first full sync sends `rdb` whole and
/// holds the link until `release` is set; every later one sends `rdb[..cut]` and a newline,
/// then closes the link: what a Redis master sends when the process streaming a diskless sync
/// dies (its replication cron writes its keep-alive newline to the replica before it drops it).
struct FakeMaster {
    port: u16,
    release: Arc<AtomicBool>,
    broken: Arc<AtomicUsize>,
}

impl FakeMaster {
    const REPLID: &'static str = "6c63626c6f6f6d2d666b2d6d61737465722d3031";
    const MARK: &'static [u8; 40] = b"lcbloom-test-diskless-sync-end-mark-0001";

    fn start(rdb: Vec<u8>, cut: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (release, broken) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let (hold, count) = (release.clone(), broken.clone());
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { continue };
                let Ok(mut reader) = stream.try_clone().map(BufReader::new) else {
                    continue;
                };
                if Self::handshake(&mut reader, &mut stream).is_err() {
                    continue;
                }
                let head = format!("+FULLRESYNC {} 0\r\n$EOF:", Self::REPLID);
                let mut sent = head.into_bytes();
                sent.extend_from_slice(Self::MARK);
                sent.extend_from_slice(b"\r\n");
                if n == 0 {
                    sent.extend_from_slice(&rdb);
                    sent.extend_from_slice(Self::MARK);
                } else {
                    sent.extend_from_slice(&rdb[..cut]);
                    sent.push(b'\n');
                }
                if stream.write_all(&sent).is_err() {
                    continue;
                }
                while n == 0 && !hold.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                std::thread::sleep(Duration::from_millis(50));
                let _ = stream.shutdown(std::net::Shutdown::Both);
                count.fetch_add((n > 0) as usize, Ordering::Relaxed);
            }
        });
        Self {
            port,
            release,
            broken,
        }
    }

    /// Answers the replica's commands up to its `PSYNC`.
    fn handshake(reader: &mut BufReader<TcpStream>, writer: &mut TcpStream) -> std::io::Result<()> {
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let count: usize = line.trim_start_matches('*').trim().parse().unwrap_or(0);
            let mut args = Vec::new();
            for _ in 0..count {
                line.clear();
                reader.read_line(&mut line)?;
                let len: usize = line.trim_start_matches('$').trim().parse().unwrap_or(0);
                let mut arg = vec![0; len + 2];
                reader.read_exact(&mut arg)?;
                arg.truncate(len);
                args.push(arg.to_ascii_uppercase());
            }
            match args.first().map(Vec::as_slice) {
                Some(b"PSYNC" | b"SYNC") => return Ok(()),
                Some(b"PING") => writer.write_all(b"+PONG\r\n")?,
                _ => writer.write_all(b"+OK\r\n")?,
            }
        }
    }
}

/// A master whose diskless sync breaks off right after a module value's last field sends a
/// newline before it drops the link (see `FakeMaster`). A replica reading the sync from the
/// socket takes that newline for the byte that ends the value, calls the stream corrupt and
/// exits. A `swapdb` replica with this module must not load from the socket, so that such a
/// sync is dropped and the replica keeps serving the values it has.
#[test]
fn a_swapdb_replica_outlives_a_sync_broken_off_after_a_value() {
    let source = Server::start();
    let mut s = source.conn();
    ok(&mut s, &["BF.ADD", "f", "x"]);
    ok(&mut s, &["SAVE"]);
    let rdb = std::fs::read(source.dir.join("dump.rdb")).unwrap();
    // The file ends in the value's end marker, the file's end opcode and an 8-byte checksum.
    let cut = rdb.len() - 10;
    assert_eq!(&rdb[cut..cut + 2], &[0x00, 0xff]);
    let master = FakeMaster::start(rdb, cut);
    let mut replica = Server::builder()
        .arg("repl-diskless-load", "swapdb")
        .start();
    attach_replica_to(master.port, &replica);
    let mut r = replica.conn();
    let old = digests(&mut r);
    assert_eq!(old.len(), 1);
    master.release.store(true, Ordering::Relaxed);
    // Two broken syncs served: the replica came back after the first.
    let log = replica.dir.join("server.log");
    wait_until(
        Duration::from_secs(30),
        || master.broken.load(Ordering::Relaxed) >= 2 || !replica.alive(),
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            format!("no second sync; replica log:\n{text}")
        },
    );
    assert!(replica.alive(), "replica exited:\n{}", replica.log_tail());
    assert_eq!(digests(&mut replica.conn()), old);
}
