//! Command helpers shared by the integration tests: commands from string slices, item names,
//! batched adds, copies of a value and what they cost, BF.SCANDUMP walks and replica setup.

use super::Server;
use redis::{Connection, Value};
use std::time::Duration;

/// Runs `args` (command name first) and returns the reply or the error.
pub fn cmd(conn: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(conn)
}

/// Runs `args` and returns the reply; panics (naming the command) on an error.
pub fn ok(conn: &mut Connection, args: &[&str]) -> Value {
    cmd(conn, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// `n` item names `{prefix}0`, `{prefix}1`, ….
pub fn items(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// `RESTORE`s `payload` as keys `k:0` … `k:{count − 1}`, through a connection of its own that
/// is closed before this returns (its buffers are freed before `used_memory` is read again);
/// the keys' names.
pub fn restore_copies(server: &Server, payload: &[u8], count: usize) -> Vec<String> {
    let keys: Vec<String> = (0..count).map(|i| format!("k:{i}")).collect();
    let mut writer = server.conn();
    for chunk in keys.chunks(50) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("RESTORE").arg(key).arg(0).arg(payload).ignore();
        }
        pipe.exec(&mut writer).unwrap();
    }
    keys
}

/// The sum of `MEMORY USAGE` over `keys`, in one pipeline.
pub fn memory_usage_of(c: &mut Connection, keys: &[String]) -> i64 {
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("MEMORY").arg("USAGE").arg(key);
    }
    pipe.query::<Vec<i64>>(c).unwrap().iter().sum()
}

/// `BF.MADD`/`LC.ADD` of `items(prefix, n)` in batches.
pub fn add_many(c: &mut Connection, command: &str, key: &str, prefix: &str, n: u32) {
    for chunk in items(prefix, n).chunks(5_000) {
        let reply: Value = redis::cmd(command).arg(key).arg(chunk).query(c).unwrap();
        // LC.ADD answers a count, BF.MADD one answer per item.
        let expected_shape = match &reply {
            Value::Int(_) => command.eq_ignore_ascii_case("LC.ADD"),
            Value::Array(answers) => answers.len() == chunk.len(),
            _ => false,
        };
        assert!(expected_shape, "{command} {key}: {reply:?}");
    }
}

/// Walks `BF.SCANDUMP key` from iterator `start` (0: the header first) to its end marker,
/// calling `visit(conn, iterator, data)` with what `BF.LOADCHUNK` takes for each part.
pub fn scandump_each(
    c: &mut Connection,
    key: &str,
    start: i64,
    mut visit: impl FnMut(&mut Connection, i64, Vec<u8>),
) {
    let mut iterator = start;
    loop {
        let (next, data): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
            .arg(key)
            .arg(iterator)
            .query(c)
            .unwrap();
        if next == 0 {
            assert!(data.is_empty());
            return;
        }
        assert!(data.len() <= 16 << 20);
        visit(c, next, data);
        iterator = next;
    }
}

/// Copies a filter with BF.SCANDUMP / BF.LOADCHUNK; returns the number of chunks, header
/// included.
pub fn scandump_into(c: &mut Connection, key: &str, target: &str) -> usize {
    let mut chunks = 0;
    scandump_each(c, key, 0, |c, next, data| {
        redis::cmd("BF.LOADCHUNK")
            .arg(target)
            .arg(next)
            .arg(data)
            .exec(c)
            .unwrap();
        chunks += 1;
    });
    chunks
}

/// Makes `replica` replicate `master` and waits for the link.
/// Appends `commands` to the incremental AOF file of a server started with `appendonly yes`
/// and stopped: what a master or another build would have logged.
pub fn append_to_aof(server: &Server, commands: &[&[&str]]) {
    let incr = std::fs::read_dir(server.dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental AOF file");
    let mut log = std::fs::read(&incr).unwrap();
    for args in commands {
        log.extend(format!("*{}\r\n", args.len()).bytes());
        for a in *args {
            log.extend(format!("${}\r\n{a}\r\n", a.len()).bytes());
        }
    }
    std::fs::write(&incr, log).unwrap();
}

pub fn attach_replica(master: &Server, replica: &Server) {
    attach_replica_to(master.port, replica);
}

/// `REPLICAOF` the master on `port`, waiting until the link is up.
pub fn attach_replica_to(port: u16, replica: &Server) {
    let mut r = replica.conn();
    ok(&mut r, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
    let mut synced = || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut r).unwrap();
        info.contains("master_link_status:up")
    };
    super::wait_until(Duration::from_secs(30), &mut synced, || {
        "replica never synced".into()
    });
}
