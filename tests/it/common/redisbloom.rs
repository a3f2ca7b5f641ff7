//! RedisBloom 2.8.2 for the import tests: its module (fetched into .tools/ by `make test`),
//! servers running it, the filters the tests create in it, and answer comparisons.

use super::fuzz::{split_dump, Rng};
use super::Server;
use redis::{Connection, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// RedisBloom's .so: `REDISBLOOM_MODULE`, else `.tools/redisbloom.so`, fetched by
/// `scripts/fetch-tool.sh` when missing. None (with a message saying why the caller skips)
/// only if it cannot be fetched; `make test` fetches it first, so CI always has it.
pub fn module() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDISBLOOM_MODULE") {
        return Some(PathBuf::from(p));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join(".tools/redisbloom.so");
    if !path.exists() {
        let _ = Command::new(root.join("scripts/fetch-tool.sh"))
            .arg("redisbloom")
            .current_dir(root)
            .status();
    }
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: RedisBloom 2.8.2 could not be fetched (scripts/fetch-tool.sh redisbloom)"
        );
        None
    }
}

/// A server running RedisBloom (and not lcbloom).
pub fn server(module: &Path) -> Server {
    Server::builder().module(module).start()
}

/// A filter made in RedisBloom and the items added to it.
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
