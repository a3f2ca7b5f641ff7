//! What a server says about itself and its values: `INFO` sections, `BF.INFO` and `LC.INFO`
//! fields, a filter's bit count, and `used_memory` once the server has settled.

use redis::{Connection, Value};
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

/// `INFO <section>` as name → value.
pub fn server_info(c: &mut Connection, section: &str) -> HashMap<String, String> {
    let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// One field of `INFO <section>`, as an integer.
pub fn info_int(c: &mut Connection, section: &str, field: &str) -> i64 {
    let info = server_info(c, section);
    let value = info
        .get(field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info:?}"));
    value.parse().unwrap_or_else(|_| panic!("{field}: {value}"))
}

/// `BF.INFO key FIELD` (a one-element array in RESP2) as an integer.
pub fn bf_info(c: &mut Connection, key: &str, field: &str) -> i64 {
    let reply: Vec<Value> = redis::cmd("BF.INFO").arg(key).arg(field).query(c).unwrap();
    match reply.as_slice() {
        [v] => redis::from_redis_value(v.clone()).unwrap(),
        other => panic!("BF.INFO {key} {field}: {other:?}"),
    }
}

/// The bits of a filter of one sub-filter held as a bit array, read from its `BF.SCANDUMP`
/// header (the sub-filter's bit count at bytes 48..56, 8 bytes later after a seed: version 4).
pub fn bf_bits(c: &mut Connection, key: &str) -> u64 {
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP").arg(key).arg(0).query(c).unwrap();
    let at = if header[4] == 4 { 56 } else { 48 };
    u64::from_le_bytes(header[at..at + 8].try_into().unwrap())
}

/// `LC.INFO key` (RESP2) as (field, value) pairs.
pub fn lc_info(c: &mut Connection, key: &str) -> Vec<(String, Value)> {
    let flat: Vec<Value> = redis::cmd("LC.INFO").arg(key).query(c).unwrap();
    flat.chunks(2)
        .map(|pair| match &pair[0] {
            Value::BulkString(name) => (String::from_utf8(name.clone()).unwrap(), pair[1].clone()),
            other => panic!("field name {other:?}"),
        })
        .collect()
}

/// One field of `LC.INFO key`.
pub fn lc_info_field(c: &mut Connection, key: &str, field: &str) -> Value {
    lc_info(c, key)
        .into_iter()
        .find(|(name, _)| name == field)
        .unwrap_or_else(|| panic!("no field {field}"))
        .1
}

/// A counter's `Error rate` as a number: Redis 7.0 writes a double in decimal, 7.2 on in
/// exponent form, RESP3 as a double.
pub fn lc_error_rate(c: &mut Connection, key: &str) -> Option<f64> {
    match lc_info_field(c, key, "Error rate") {
        Value::BulkString(b) => String::from_utf8_lossy(&b).parse::<f64>().ok(),
        Value::Double(d) => Some(d),
        _ => None,
    }
}

/// A counter's `Mode` (exact, sparse or dense).
pub fn lc_mode(c: &mut Connection, key: &str) -> String {
    match lc_info_field(c, key, "Mode") {
        Value::SimpleString(s) => s,
        other => panic!("Mode: {other:?}"),
    }
}

/// `used_memory` once the server has settled: `clients` connections are left (closed ones
/// freed), nothing waits for the lazy-free thread, no hash table of db 0 is being rehashed
/// (serverCron finishes that).
pub fn used_memory(c: &mut Connection, clients: i64) -> i64 {
    let start = Instant::now();
    loop {
        let memory = server_info(c, "memory");
        let connected = info_int(c, "clients", "connected_clients");
        let htstats: String = redis::cmd("DEBUG").arg("HTSTATS").arg(0).query(c).unwrap();
        let settled = connected == clients
            && memory
                .get("lazyfree_pending_objects")
                .is_none_or(|v| v == "0")
            && !rehashing(&htstats);
        if settled {
            return memory["used_memory"].parse().unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the server never settled: {connected} clients, {htstats}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `DEBUG HTSTATS` shows a rehash under way: Redis names the second table, Valkey
/// gives the rehashing index (-1 when none).
fn rehashing(htstats: &str) -> bool {
    htstats.contains("rehashing target")
        || htstats.lines().any(|l| {
            l.trim()
                .strip_prefix("rehashing index:")
                .is_some_and(|v| v.trim() != "-1")
        })
}

/// The band `MEMORY USAGE / used_memory growth` must fall in on this server. `MEMORY USAGE`
/// counts jemalloc's size classes (`alloc::size_class`; Debian's redis-server and Redis built
/// from source): ±10% there. A server built with glibc's malloc (the valkey-server of
/// `make test-valkey`) rounds otherwise and reuses freed chunks whole, so the same shape
/// measures differently from run to run (0.5 / 2,000 filters: 889–934 B per key against 984
/// counted on Valkey 9.1.2): 0.85–1.25 there.
pub fn usage_band(c: &mut Connection) -> RangeInclusive<f64> {
    let allocator = &server_info(c, "memory")["mem_allocator"];
    if allocator.starts_with("jemalloc") {
        0.9..=1.1
    } else {
        0.85..=1.25
    }
}

/// How long a test waits for a keyspace event before failing: an event is published within
/// the command that fires it, so only a test runner starved of CPU (CI on 2 cores, tests in
/// parallel) needs more than a moment; a missing event still fails, just later.
pub const EVENT_WAIT: Duration = Duration::from_secs(30);
