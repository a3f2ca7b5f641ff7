//! RedisBloom 2.8.2 for the import tests: its module (fetched into .tools/ by `make test`),
//! servers running it, the filters the tests create in it, legacy payloads built from the
//! format spec, the ways a dataset moves between servers, and answer comparisons.

use super::fuzz::{crc64, dump_payload, split_dump, Rng};
use super::{copy_of_aof, wait_aof_rewrite, Server};
use lcbloom::bloom::redisbloom::chain::{zeroed, RedisBloomChain};
use lcbloom::bloom::redisbloom::dump::encode_value_legacy;
use lcbloom::bloom::redisbloom::link::{Link, LinkParams, NOROUND};
use redis::{Connection, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The RDB version of the DUMP payloads the tests build (Redis 7.0's; newer servers take it).
pub const RDB_VERSION: [u8; 2] = [10, 0];

/// RedisBloom's .so: `REDISBLOOM_MODULE`, else `.tools/redisbloom.so`, fetched by
/// `scripts/fetch-tool.sh` when missing (`make test` fetches it first). None, said loudly, when
/// it cannot be had: the caller skips (a failure under `CI=true`, see `common::missing`).
pub fn module() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = match std::env::var_os("REDISBLOOM_MODULE") {
        Some(p) => PathBuf::from(p),
        None => {
            let path = root.join(".tools/redisbloom.so");
            if !path.exists() {
                let _ = Command::new(root.join("scripts/fetch-tool.sh"))
                    .arg("redisbloom")
                    .current_dir(root)
                    .status();
            }
            path
        }
    };
    if path.exists() {
        return Some(path);
    }
    super::missing(&format!(
        "RedisBloom 2.8.2 ({} does not exist; `scripts/fetch-tool.sh redisbloom` fetches it)",
        path.display()
    ));
    None
}

/// A server running RedisBloom (and not lcbloom).
pub fn server(module: &Path) -> Server {
    Server::builder().module(module).start()
}

/// A filter made in RedisBloom and the items added to it.
#[derive(Clone)]
pub struct Sample {
    pub key: String,
    pub members: Vec<Vec<u8>>,
}

fn text_items(prefix: &str, n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// Items of every byte value and length, the empty item included.
pub fn binary_items(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::seeded(seed);
    let mut out = vec![Vec::new(), vec![0], vec![0xff; 3]];
    while out.len() < n {
        let len = rng.below(40);
        out.push(rng.bytes(len));
    }
    out
}

pub fn madd(c: &mut Connection, key: &str, items: &[Vec<u8>]) -> Vec<Value> {
    let mut out = Vec::new();
    for chunk in items.chunks(5_000) {
        let reply: Vec<Value> = redis::cmd("BF.MADD").arg(key).arg(chunk).query(c).unwrap();
        out.extend(reply);
    }
    out
}

/// The filters of the import tests, made by RedisBloom: scaling chains of several links
/// (expansion 1, 2 and 4), non-scaling, error rates 0.01 and 0.001, a 100,000-capacity filter,
/// a filter created implicitly by `BF.ADD` with the defaults, binary items, and `BF.INSERT`.
pub fn create_samples(c: &mut Connection) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut make = |c: &mut Connection, key: &str, create: &[&str], members: Vec<Vec<u8>>| {
        if !create.is_empty() {
            let mut cmd = redis::cmd(create[0]);
            cmd.arg(key).arg(&create[1..]);
            let _: Value = cmd.query(c).unwrap();
        }
        if key == "rb:default" {
            for m in &members {
                let _: Value = redis::cmd("BF.ADD").arg(key).arg(m).query(c).unwrap();
            }
        } else {
            madd(c, key, &members);
        }
        out.push(Sample {
            key: key.to_string(),
            members,
        });
    };
    make(
        c,
        "rb:scaling",
        &["BF.RESERVE", "0.01", "100"],
        text_items("s", 1_400),
    );
    make(
        c,
        "rb:exp1",
        &["BF.RESERVE", "0.001", "50", "EXPANSION", "1"],
        text_items("e1-", 300),
    );
    make(
        c,
        "rb:exp4",
        &["BF.RESERVE", "0.01", "20", "EXPANSION", "4"],
        text_items("e4-", 1_500),
    );
    make(
        c,
        "rb:nonscaling",
        &["BF.RESERVE", "0.001", "500", "NONSCALING"],
        text_items("n", 450),
    );
    make(
        c,
        "rb:big",
        &["BF.RESERVE", "0.01", "100000"],
        text_items("big", 30_000),
    );
    make(c, "rb:default", &[], text_items("d", 250));
    make(
        c,
        "rb:binary",
        &["BF.RESERVE", "0.001", "1000", "EXPANSION", "2"],
        binary_items(7, 1_500),
    );
    make(
        c,
        "rb:insert",
        &[
            "BF.INSERT",
            "CAPACITY",
            "30",
            "ERROR",
            "0.05",
            "NONSCALING",
            "EXPANSION",
            "4",
            "ITEMS",
            "first",
        ],
        text_items("ins", 25),
    );
    out
}

/// Items never added to any sample: `n` text and binary non-members.
pub fn non_members(n: usize) -> Vec<Vec<u8>> {
    let mut out = text_items("not-a-member:", (n / 2) as u32);
    out.extend(binary_items(99, n - n / 2).into_iter().map(|mut b| {
        b.extend_from_slice(b"\x00nm");
        b
    }));
    out
}

/// Items the tests add on both sides after an import (enough to grow every scaling chain).
pub fn further_items(key: &str) -> Vec<Vec<u8>> {
    text_items(&format!("{key}:more"), 600)
}

/// `BF.MEXISTS` answers (0/1) for all `items`, in batches.
pub fn mexists(c: &mut Connection, key: &str, items: &[Vec<u8>]) -> Vec<i64> {
    let mut out = Vec::new();
    for chunk in items.chunks(5_000) {
        let reply: Vec<i64> = redis::cmd("BF.MEXISTS")
            .arg(key)
            .arg(chunk)
            .query(c)
            .unwrap();
        out.extend(reply);
    }
    out
}

/// `BF.INFO key` as returned.
pub fn info(c: &mut Connection, key: &str) -> Value {
    redis::cmd("BF.INFO").arg(key).query(c).unwrap()
}

/// The value part of `DUMP key` (without RDB version and CRC).
pub fn dump_value(c: &mut Connection, key: &str) -> Vec<u8> {
    let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
    split_dump(&payload).0
}

/// Every `BF.SCANDUMP` part of `key`: (iterator returned, data), header first, end marker
/// left out (what `BF.LOADCHUNK` takes).
pub fn scandump(c: &mut Connection, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it = 0i64;
    loop {
        let (next, data): (i64, Vec<u8>) =
            redis::cmd("BF.SCANDUMP").arg(key).arg(it).query(c).unwrap();
        if next == 0 {
            return out;
        }
        out.push((next, data));
        it = next;
    }
}

/// Compares the answers of two servers for `key` over `items`, returning how many differ.
pub fn differing(a: &mut Connection, b: &mut Connection, key: &str, items: &[Vec<u8>]) -> usize {
    let x = mexists(a, key, items);
    let y = mexists(b, key, items);
    assert_eq!(x.len(), y.len());
    x.iter().zip(&y).filter(|(p, q)| p != q).count()
}

/// A chain as a legacy RedisBloom made it: first link `init(capacity, 0.005, options)`, then
/// `adds` items `old0`, `old1` ...
pub fn legacy_chain(options: u32, capacity: u64, adds: u32) -> RedisBloomChain {
    let params = LinkParams::init(capacity, 0.005, options).unwrap();
    let link = Link {
        params,
        size: 0,
        data: zeroed(params.bytes).unwrap(),
    };
    let mut chain = RedisBloomChain::from_parts(0, options, 2, vec![link]).unwrap();
    for i in 0..adds {
        chain
            .add(&chain.hash(format!("old{i}").as_bytes()), u64::MAX)
            .unwrap();
    }
    chain
}

/// DUMP values in the layouts of encvers 0–3 (redisbloom-format.md §1–2), each holding 150
/// items: encver 0 (no options, growth, bits or n2), 1 (no options or growth: 32-bit hashing,
/// power-of-two links), 2 and 3 (options, no growth).
pub fn legacy_samples() -> Vec<(Sample, Vec<u8>)> {
    let cases = [
        (0, 0, 40),
        (0, NOROUND, 40),
        (1, 0, 20),
        (2, 4, 20),
        (3, NOROUND, 20),
        (3, 0, 500),
    ];
    let members: Vec<Vec<u8>> = (0..150).map(|i| format!("old{i}").into_bytes()).collect();
    cases
        .into_iter()
        .enumerate()
        .map(|(n, (encver, options, capacity))| {
            let value = encode_value_legacy(&legacy_chain(options, capacity, 150), encver);
            let sample = Sample {
                key: format!("legacy:{n}:encver{encver}"),
                members: members.clone(),
            };
            (sample, value)
        })
        .collect()
}

/// `RESTORE key 0 <payload of value>`.
pub fn restore_value(c: &mut Connection, key: &str, value: &[u8]) {
    let _: Value = redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(dump_payload(value, RDB_VERSION))
        .query(c)
        .unwrap();
}

/// A RedisBloom server holding every sample: `create_samples` and the legacy payloads.
pub fn populated_server(module: &Path) -> (Server, Vec<Sample>) {
    let server = Server::builder().module(module).start();
    let mut c = server.conn();
    let mut samples = create_samples(&mut c);
    for (sample, value) in legacy_samples() {
        restore_value(&mut c, &sample.key, &value);
        samples.push(sample);
    }
    (server, samples)
}

/// What [`compare_servers`] looked at, all answers equal.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Compared {
    pub filters: usize,
    pub members: usize,
    pub non_members: usize,
    pub differing: usize,
}

/// Every observable answer of two servers for every sample: `TYPE`, `BF.MEXISTS` over the
/// members and `non_members`, `BF.INFO`, `BF.CARD` and the whole `BF.SCANDUMP`. Differing
/// membership answers are counted (the caller asserts 0); any other difference panics.
pub fn compare_servers(
    a: &mut Connection,
    b: &mut Connection,
    samples: &[Sample],
    non_members: &[Vec<u8>],
    what: &str,
) -> Compared {
    let mut out = Compared::default();
    for s in samples {
        let key = &s.key;
        let x: String = redis::cmd("TYPE").arg(key).query(a).unwrap();
        let y: String = redis::cmd("TYPE").arg(key).query(b).unwrap();
        assert_eq!((x.as_str(), &x), ("MBbloom--", &y), "{what}: TYPE {key}");
        assert_eq!(info(a, key), info(b, key), "{what}: BF.INFO {key}");
        let card = |c: &mut Connection| -> i64 { redis::cmd("BF.CARD").arg(key).query(c).unwrap() };
        assert_eq!(card(a), card(b), "{what}: BF.CARD {key}");
        assert!(
            scandump(a, key) == scandump(b, key),
            "{what}: BF.SCANDUMP {key}"
        );
        out.differing += differing(a, b, key, &s.members);
        out.differing += differing(a, b, key, non_members);
        out.filters += 1;
        out.members += s.members.len();
        out.non_members += non_members.len();
    }
    println!("{what}: {out:?}");
    out
}

/// The same further adds on both servers (`further_items(key + round)`: BF.ADD one by one for
/// the implicitly created filter, BF.INSERT for the one made by BF.INSERT, BF.MADD for the
/// rest), requiring identical replies, errors included; the items join the members.
pub fn add_same(a: &mut Connection, b: &mut Connection, samples: &mut [Sample], round: &str) {
    for s in samples.iter_mut() {
        let items = further_items(&format!("{}{round}", s.key));
        let send = |c: &mut Connection| -> Vec<String> {
            let replies: Vec<redis::RedisResult<Value>> = if s.key == "rb:default" {
                items
                    .iter()
                    .map(|i| redis::cmd("BF.ADD").arg(&s.key).arg(i).query(c))
                    .collect()
            } else {
                let mut cmd = redis::cmd(if s.key == "rb:insert" {
                    "BF.INSERT"
                } else {
                    "BF.MADD"
                });
                cmd.arg(&s.key);
                if s.key == "rb:insert" {
                    cmd.arg(&["CAPACITY", "5", "ITEMS"][..]);
                }
                vec![cmd.arg(&items).query(c)]
            };
            replies.iter().map(|r| format!("{r:?}")).collect()
        };
        let (x, y) = (send(a), send(b));
        assert!(x == y, "{round}: replies to the adds on {}", s.key);
        s.members.extend(items);
    }
}

/// `DUMP` of each key on `from`, `RESTORE`d into `to`.
pub fn restore_all(from: &mut Connection, to: &mut Connection, keys: &[&str]) {
    for key in keys {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(*key).query(from).unwrap();
        let _: Value = redis::cmd("RESTORE")
            .arg(*key)
            .arg(0)
            .arg(payload)
            .query(to)
            .unwrap();
    }
}

/// `BF.SCANDUMP` of each key on `from`, fed to `BF.LOADCHUNK` on `to`.
pub fn scandump_all(from: &mut Connection, to: &mut Connection, keys: &[&str]) {
    for key in keys {
        for (it, data) in scandump(from, key) {
            let _: Value = redis::cmd("BF.LOADCHUNK")
                .arg(*key)
                .arg(it)
                .arg(data)
                .query(to)
                .unwrap();
        }
    }
}

/// Whether RedisBloom takes its own `BF.SCANDUMP` of `key` back by `BF.LOADCHUNK` (tried on
/// a scratch key of the same server). It does not for filters from encver-0 data, whose
/// `bits` is not 8·bytes: RedisBloom 2.8.2's LOADCHUNK requires that, so it cannot reload
/// them from its own AOF rewrite either.
pub fn reloads_own_scandump(c: &mut Connection, key: &str) -> bool {
    let scratch = format!("scratch:{key}");
    let loaded = scandump(c, key).into_iter().all(|(it, data)| {
        redis::cmd("BF.LOADCHUNK")
            .arg(&scratch)
            .arg(it)
            .arg(data)
            .query::<Value>(c)
            .is_ok()
    });
    let _: Value = redis::cmd("DEL").arg(&scratch).query(c).unwrap();
    loaded
}

/// A new data dir holding `server`'s RDB (`SAVE`).
pub fn rdb_copy(server: &Server) -> PathBuf {
    let mut c = server.conn();
    let _: Value = redis::cmd("SAVE").query(&mut c).unwrap();
    let dir = Server::fresh_dir();
    std::fs::copy(server.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    dir
}

/// A new data dir holding `server`'s AOF, rewritten without an RDB preamble (so an AOF
/// rewrite writes each value as `BF.LOADCHUNK` commands).
pub fn aof_copy(server: &Server) -> PathBuf {
    let mut c = server.conn();
    let _: Value = redis::cmd("CONFIG")
        .arg(&["SET", "aof-use-rdb-preamble", "no"][..])
        .query(&mut c)
        .unwrap();
    let on: String = redis::cmd("CONFIG")
        .arg(&["GET", "appendonly"][..])
        .query::<Vec<String>>(&mut c)
        .unwrap()
        .pop()
        .unwrap();
    let start = if on == "yes" {
        redis::cmd("BGREWRITEAOF")
    } else {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg(&["SET", "appendonly", "yes"][..]);
        cmd
    };
    let _: Value = start.query(&mut c).unwrap();
    wait_aof_rewrite(&mut c);
    copy_of_aof(server)
}

/// An RDB file (version 10) holding `entries`: (key, DUMP value of a module type). The value
/// of a DUMP payload is the type byte then what an RDB file holds after the key.
pub fn rdb_file(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"REDIS0010".to_vec();
    out.extend_from_slice(&[0xfe, 0x00]); // SELECTDB 0
    for (key, value) in entries {
        out.push(value[0]);
        assert!(key.len() < 64);
        out.push(key.len() as u8);
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&value[1..]);
    }
    out.push(0xff); // EOF
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}
