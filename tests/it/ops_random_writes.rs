//! Random writes of every kind hold identically everywhere the master's data goes. A few
//! thousand commands drawn from a fixed seed (valid and invalid creations of all three types
//! with their options, adds, `BF.INSERT ... AT` on windowed filters, merges, `BF.SCANDUMP` into
//! `BF.LOADCHUNK`, `DUMP`/`RESTORE`, `COPY`, `RENAME`, `DEL`, expiries, `MULTI`/`EXEC` blocks and
//! Lua scripts) run on a master with `appendonly yes`; then every key is the same (type and
//! `DEBUG DIGEST-VALUE`) on a replica attached before the writes (the command stream), one
//! attached after (a full sync), a server replaying the master's AOF, one loading its RDB, one
//! replaying the AOF after a rewrite (all with other module defaults and limits than the
//! master's), and on the master after `DEBUG RELOAD`; `redis-check-rdb` and `redis-check-aof`
//! find the master's files sound. The same holds on every other server
//! known here that loads this one's data (a newer Redis, Valkey 9), as a user upgrading by
//! replica or by restart meets it.
//!
//! `LCBLOOM_RANDOM_WRITES_SEED` and `LCBLOOM_RANDOM_WRITES` (commands per run, default 10,000;
//! 5,000 for the newer servers)
//! draw other runs (`cargo test --release --test it ops_random_writes`).
use crate::common::fuzz::{env_number, Rng};
use crate::common::ops::OTHER_DEFAULTS;
use crate::common::servers::{readers_of_this_server, Binary};
use crate::common::*;
use redis::Connection;
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// Keys of filters (those starting with `w` made windowed), of counters, and of any type
/// (where type errors, `COPY`, `RENAME` and `RESTORE` meet); two share a cluster hash tag.
const FILTERS: &[&str] = &["b0", "b1", "b2", "b3", "b4", "b5", "w0", "w1", "w2", "w3"];
const COUNTERS: &[&str] = &["c0", "c1", "c2", "c3", "c4", "c5"];
const ANY: &[&str] = &["k0", "k1", "k2", "k3", "{t}a", "{t}b"];

struct Draw {
    rng: Rng,
    /// The `AT` of the windowed writes: from some minutes ago, never past the server's clock.
    clock: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

impl Draw {
    fn chance(&mut self, percent: usize) -> bool {
        self.rng.below(100) < percent
    }

    fn one<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.rng.below(of.len())]
    }

    fn key(&mut self, family: &[&'static str]) -> String {
        if self.chance(15) {
            self.one(ANY).to_string()
        } else {
            self.one(family).to_string()
        }
    }

    fn items(&mut self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.rng.below(3_000).to_string()).collect()
    }

    fn filter_command(&mut self) -> Vec<String> {
        let key = self.key(FILTERS);
        let windowed = key.starts_with('w');
        let mut cmd: Vec<String> = Vec::new();
        let opt =
            |cmd: &mut Vec<String>, parts: &[&str]| cmd.extend(parts.iter().map(|p| p.to_string()));
        let mut branch = self.rng.below(100);
        if windowed && (12..55).contains(&branch) && self.chance(70) {
            // Mostly `BF.INSERT ... WINDOW`, which makes a missing key windowed.
            branch = 55;
        }
        match branch {
            0..12 => {
                let rate = self.one(&["0.01", "0.001", "0.1", "1.5"]);
                let capacity = self.one(&["10", "100", "1000", "20", "-5"]);
                opt(&mut cmd, &["BF.RESERVE", &key, rate, capacity]);
                if self.chance(30) {
                    let e = self.one(&["1", "2", "3", "0", "-1"]);
                    opt(&mut cmd, &["EXPANSION", e]);
                }
                if self.chance(20) {
                    opt(&mut cmd, &["NONSCALING"]);
                }
                if windowed || self.chance(10) {
                    let w = self.one(&["1", "2", "10", "3600", "0"]);
                    opt(&mut cmd, &["WINDOW", w]);
                } else if self.chance(25) {
                    let layout = self.one(&["BLOCKED", "STANDARD", "BAD"]);
                    opt(&mut cmd, &["LAYOUT", layout]);
                }
                if self.chance(20) {
                    let seed = self.rng.below(1_000_000).to_string();
                    opt(&mut cmd, &["SEED", &seed]);
                }
            }
            12..35 => {
                opt(&mut cmd, &["BF.ADD", &key]);
                cmd.extend(self.items(1));
            }
            35..55 => {
                opt(&mut cmd, &["BF.MADD", &key]);
                let n = 1 + self.rng.below(60);
                cmd.extend(self.items(n));
            }
            55..80 => {
                opt(&mut cmd, &["BF.INSERT", &key]);
                if self.chance(30) {
                    let c = self.one(&["5", "50", "500", "0"]);
                    opt(&mut cmd, &["CAPACITY", c]);
                }
                if self.chance(30) {
                    let e = self.one(&["0.01", "0.05", "2"]);
                    opt(&mut cmd, &["ERROR", e]);
                }
                if self.chance(10) {
                    opt(&mut cmd, &["NOCREATE"]);
                }
                if self.chance(10) {
                    opt(&mut cmd, &["NONSCALING"]);
                }
                if windowed || self.chance(5) {
                    let w = self.one(&["1", "5", "60"]);
                    opt(&mut cmd, &["WINDOW", w]);
                }
                if self.chance(30) {
                    let step = *self.rng.pick(&[0i64, 100, 1_000, 3_000, 20_000, -5_000]);
                    self.clock = self.clock.saturating_add_signed(step).min(now_ms());
                    let at = self.clock.to_string();
                    opt(&mut cmd, &["AT", &at]);
                }
                opt(&mut cmd, &["ITEMS"]);
                let n = 1 + self.rng.below(40);
                cmd.extend(self.items(n));
            }
            80..88 => {
                opt(&mut cmd, &["BF.MEXISTS", &key]);
                cmd.extend(self.items(5));
            }
            _ => opt(&mut cmd, &["BF.INFO", &key]),
        }
        cmd
    }

    fn counter_command(&mut self) -> Vec<String> {
        let key = self.key(COUNTERS);
        let mut cmd = vec![];
        match self.rng.below(100) {
            0..15 => {
                let rate = self.one(&["0.01", "0.02", "0.001", "2"]);
                let capacity = self.one(&["100", "1000", "50000", "0"]);
                cmd = vec!["LC.RESERVE".into(), key, rate.into(), capacity.into()];
            }
            15..65 => {
                cmd = vec!["LC.ADD".into(), key];
                let n = self.rng.below(80);
                cmd.extend(self.items(n));
            }
            65..85 => {
                cmd = vec!["LC.MERGE".into(), key];
                for _ in 0..1 + self.rng.below(3) {
                    cmd.push(self.key(COUNTERS));
                }
            }
            _ => cmd.extend(["LC.COUNT".into(), key]),
        }
        cmd
    }

    /// A command on keys of any type (`run` restores what a `DUMP` gives).
    fn keyspace_command(&mut self) -> Vec<String> {
        let all: Vec<&str> = FILTERS.iter().chain(COUNTERS).chain(ANY).copied().collect();
        let (key, other) = (self.one(&all).to_string(), self.one(&all).to_string());
        let s = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect();
        match self.rng.below(100) {
            0..15 => s(&["DEL", &key]),
            15..30 => {
                let mut c = s(&["COPY", &key, &other]);
                if self.chance(50) {
                    c.push("REPLACE".into());
                }
                c
            }
            30..40 => s(&["RENAME", &key, &other]),
            40..50 => {
                let ms = self.one(&["100000", "200000"]);
                s(&["PEXPIRE", &key, ms])
            }
            50..55 => s(&["PERSIST", &key]),
            55..75 => s(&["DUMP", &key]),
            75..82 => s(&["SADD", &key, "member"]),
            82..92 => s(&[
                "EVAL",
                "return redis.call('BF.ADD', KEYS[1], ARGV[1])",
                "1",
                &key,
                &self.rng.below(3_000).to_string(),
            ]),
            _ => s(&[
                "EVAL",
                "redis.call('LC.ADD', KEYS[1], ARGV[1]) return redis.call('LC.COUNT', KEYS[1])",
                "1",
                &key,
                &self.rng.below(3_000).to_string(),
            ]),
        }
    }
}

/// Runs `args`, whatever its reply; a `DUMP` is followed by a `RESTORE` of its payload.
fn run(c: &mut Connection, draw: &mut Draw, args: &[String]) {
    let reply = redis::cmd(&args[0])
        .arg(&args[1..])
        .query::<redis::Value>(c);
    if args[0] == "DUMP" {
        if let Ok(redis::Value::BulkString(payload)) = reply {
            let target = draw.key(ANY);
            let mut restore = redis::cmd("RESTORE");
            restore.arg(&target).arg(0).arg(payload);
            if draw.chance(70) {
                restore.arg("REPLACE");
            }
            let _ = restore.query::<redis::Value>(c);
        }
    }
}

/// Every key with its type and `DEBUG DIGEST-VALUE`.
fn snapshot(c: &mut Connection) -> BTreeMap<String, (String, String)> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.into_iter()
        .map(|k| {
            let kind: String = redis::cmd("TYPE").arg(&k).query(c).unwrap();
            let d = digest(c, &k);
            (k, (kind, d))
        })
        .collect()
}

/// A server of `builder` replaying a copy of the master's AOF as it stands.
fn replaying_aof(master: &Server, builder: ServerBuilder) -> Server {
    builder
        .dir(&copy_of_aof(master))
        .arg("appendonly", "yes")
        .start()
}

/// A server of `builder` loading a copy of the master's RDB.
fn loading_rdb(master: &Server, builder: ServerBuilder) -> Server {
    let dir = Server::fresh_dir();
    std::fs::copy(master.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    builder.dir(&dir).start()
}

/// `builder` with module defaults and limits unlike the master's (`OTHER_DEFAULTS`): the copies
/// must not depend on them.
fn other_defaults(builder: ServerBuilder) -> ServerBuilder {
    OTHER_DEFAULTS
        .iter()
        .fold(builder, |b, (name, value)| b.module_arg(name, value))
}

/// A master with `appendonly yes`, `appendfsync always` and `aof-use-rdb-preamble preamble`.
fn master(preamble: &str) -> Server {
    Server::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .arg("aof-use-rdb-preamble", preamble)
        .start()
}

/// A replica of `master` from `builder`, attached now.
fn replica_of(master: &Server, builder: ServerBuilder) -> Server {
    let replica = other_defaults(builder).start();
    attach_replica(master, &replica);
    replica
}

/// The run's seed and number of commands: `LCBLOOM_RANDOM_WRITES_SEED` and
/// `LCBLOOM_RANDOM_WRITES` where set.
fn run_of(seed: u64, commands: usize) -> (u64, usize) {
    (
        env_number("LCBLOOM_RANDOM_WRITES_SEED").unwrap_or(seed),
        env_number("LCBLOOM_RANDOM_WRITES").unwrap_or(commands),
    )
}

/// `commands` random writes drawn from `seed` on the master `m`, a `BGREWRITEAOF` asked now and
/// then; then every key with its type and `DEBUG DIGEST-VALUE`, all three types among them.
fn write_randomly(
    m: &mut Connection,
    seed: u64,
    commands: usize,
) -> BTreeMap<String, (String, String)> {
    let mut draw = Draw {
        rng: Rng::seeded(seed),
        clock: now_ms() - 200_000,
    };
    for i in 0..commands {
        match draw.rng.below(100) {
            0..45 => {
                let cmd = draw.filter_command();
                run(m, &mut draw, &cmd);
            }
            45..80 => {
                let cmd = draw.counter_command();
                run(m, &mut draw, &cmd);
            }
            80..97 => {
                let cmd = draw.keyspace_command();
                run(m, &mut draw, &cmd);
            }
            97..99 => {
                let (from, to) = (draw.key(FILTERS), draw.key(FILTERS));
                let kind: String = redis::cmd("TYPE").arg(&from).query(m).unwrap();
                if from != to && (kind == "lcbloomBF" || kind == "lcbloomBW") {
                    let _: i64 = redis::cmd("DEL").arg(&to).query(m).unwrap();
                    scandump_into(m, &from, &to);
                }
            }
            _ => {
                let mut block = redis::pipe();
                block.atomic();
                for _ in 0..1 + draw.rng.below(4) {
                    let cmd = if draw.chance(50) {
                        draw.filter_command()
                    } else {
                        draw.counter_command()
                    };
                    block.cmd(&cmd[0]).arg(&cmd[1..]);
                }
                let _ = block.query::<redis::Value>(m);
            }
        }
        if i % 700 == 350 {
            // Refused while one runs, as a client's would be.
            let _ = redis::cmd("BGREWRITEAOF").query::<redis::Value>(m);
        }
    }
    let held = snapshot(m);
    let types: std::collections::BTreeSet<&str> = held.values().map(|(t, _)| t.as_str()).collect();
    for t in ["lcbloomBF", "lcbloomBW", "lcbloomLC"] {
        assert!(
            types.contains(t),
            "seed {seed}: no {t} at the end: {types:?}"
        );
    }
    held
}

/// Waits until `replicas` replicas hold all that was written on `m`, and any AOF rewrite is done.
fn settle(m: &mut Connection, replicas: usize) {
    let acked: usize = redis::cmd("WAIT")
        .arg(replicas)
        .arg(10_000)
        .query(m)
        .unwrap();
    assert_eq!(acked, replicas);
    wait_aof_rewrite(m);
}

/// Rewrites the master's AOF, with an RDB preamble or without (`preamble`).
fn rewrite_aof(m: &mut Connection, preamble: &str) {
    ok(m, &["CONFIG", "SET", "aof-use-rdb-preamble", preamble]);
    ok(m, &["BGREWRITEAOF"]);
    wait_aof_rewrite(m);
}

fn random_writes_hold_everywhere(seed: u64, preamble: &str) {
    let (seed, commands) = run_of(seed, 10_000);
    let master = master(preamble);
    let streamed = replica_of(&master, Server::builder());
    let mut m = master.conn();
    let held = write_randomly(&mut m, seed, commands);
    let synced = replica_of(&master, Server::builder());
    settle(&mut m, 2);

    let same = |name: &str, c: &mut Connection| {
        assert_eq!(snapshot(c), held, "seed {seed}: {name} holds other values");
    };
    let copy = || other_defaults(Server::builder());
    same("the replica of the command stream", &mut streamed.conn());
    same("the replica of a full sync", &mut synced.conn());
    ok(&mut m, &["SAVE"]);
    check_files(&master, "redis-check-rdb");
    check_files(&master, "redis-check-aof");
    same("the AOF replay", &mut replaying_aof(&master, copy()).conn());
    same("the RDB load", &mut loading_rdb(&master, copy()).conn());
    rewrite_aof(&mut m, preamble);
    check_files(&master, "redis-check-aof");
    same(
        "the rewritten AOF's replay",
        &mut replaying_aof(&master, copy()).conn(),
    );
    ok(&mut m, &["DEBUG", "RELOAD"]);
    same("the master after DEBUG RELOAD", &mut m);
}

#[test]
fn random_writes_hold_everywhere_with_an_rdb_preamble() {
    random_writes_hold_everywhere(20261128, "yes");
}

#[test]
fn random_writes_hold_everywhere_in_a_command_aof() {
    random_writes_hold_everywhere(20261129, "no");
}

/// A user upgrading the server, or moving to Valkey, keeps every value: random writes on the
/// server under test hold identically on every other known server that loads its data (a newer
/// Redis, Valkey 9: `common::servers`), as a replica attached before the writes and one after,
/// and loading the RDB, the AOF, and the AOF rewritten without and with an RDB preamble.
#[test]
fn random_writes_hold_on_every_newer_server() {
    let readers = readers_of_this_server();
    if readers.is_empty() {
        eprintln!(
            "SKIPPED: no other known server loads the data of {}",
            Binary::under_test()
        );
        return;
    }
    let names: Vec<String> = readers.iter().map(|r| r.binary.to_string()).collect();
    eprintln!(
        "the data of {} on {}",
        Binary::under_test(),
        names.join(", ")
    );
    let (seed, commands) = run_of(20261130, 5_000);
    let master = master("yes");
    let replicas = || -> Vec<Server> {
        readers
            .iter()
            .map(|r| replica_of(&master, r.builder()))
            .collect()
    };
    let streamed = replicas();
    let mut m = master.conn();
    let held = write_randomly(&mut m, seed, commands);
    let synced = replicas();
    settle(&mut m, 2 * readers.len());

    let same = |on: &Binary, what: &str, c: &mut Connection| {
        assert_eq!(
            snapshot(c),
            held,
            "seed {seed}: {on} {what} holds other values"
        );
    };
    ok(&mut m, &["SAVE"]);
    for (r, (streamed, synced)) in readers.iter().zip(streamed.iter().zip(&synced)) {
        let copy = || other_defaults(r.builder());
        same(
            &r.binary,
            "as a replica of the command stream",
            &mut streamed.conn(),
        );
        same(&r.binary, "as a replica of a full sync", &mut synced.conn());
        same(
            &r.binary,
            "loading the RDB",
            &mut loading_rdb(&master, copy()).conn(),
        );
        same(
            &r.binary,
            "replaying the AOF",
            &mut replaying_aof(&master, copy()).conn(),
        );
    }
    for preamble in ["no", "yes"] {
        rewrite_aof(&mut m, preamble);
        for r in &readers {
            let replay = replaying_aof(&master, other_defaults(r.builder()));
            let what = format!("replaying the AOF rewritten with aof-use-rdb-preamble {preamble}");
            same(&r.binary, &what, &mut replay.conn());
        }
    }
}
