//! Accuracy and memory of linear counters through a real server, with fixed seeds.
//! (The full 200 × 50,000 accuracy run is a release-mode unit test of the core,
//! `lc::counter::tests::accuracy_at_capacity`, with the same hashing.)
use crate::common::*;
use redis::Connection;

/// SplitMix64: distinct-enough random strings from a fixed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Adds `n` distinct random strings to `key` with pipelined LC.ADD batches of 1000.
fn fill(c: &mut Connection, key: &str, n: u64, rng: &mut Rng) {
    // A random prefix per key and a counter: distinct within the key, random-looking overall.
    let prefix = rng.next();
    let mut pipe = redis::pipe();
    let mut pending = 0;
    for start in (0..n).step_by(1000) {
        let batch: Vec<String> = (start..(start + 1000).min(n))
            .map(|i| format!("{prefix:016x}-{i}"))
            .collect();
        pipe.cmd("LC.ADD").arg(key).arg(batch).ignore();
        pending += 1;
        if pending == 50 {
            let _: () = pipe.query(c).unwrap();
            pipe = redis::pipe();
            pending = 0;
        }
    }
    if pending > 0 {
        let _: () = pipe.query(c).unwrap();
    }
}

fn count(c: &mut Connection, key: &str) -> f64 {
    redis::cmd("LC.COUNT").arg(key).query::<i64>(c).unwrap() as f64
}

#[test]
fn twenty_counters_at_capacity() {
    let server = Server::start();
    let mut c = server.conn();
    let mut rng = Rng(2026);
    let n = 50_000u64;
    let mut sum_sq = 0.0;
    for i in 0..20 {
        let key = format!("lc:{i}");
        fill(&mut c, &key, n, &mut rng);
        let rel = count(&mut c, &key) / n as f64 - 1.0;
        // 4 standard errors of a counter sized for 1%.
        assert!(rel.abs() < 0.04, "{key}: relative error {rel}");
        sum_sq += rel * rel;
    }
    let rmse = (sum_sq / 20.0).sqrt();
    println!(
        "20 counters 0.01/50000 at 50,000 items: RMSE {:.3}%",
        rmse * 100.0
    );
    assert!(rmse < 0.017, "RMSE {rmse}");
}

#[test]
fn ten_million_capacity_with_two_million_items() {
    let server = Server::start();
    let mut c = server.conn();
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["big", "0.01", "10000000"])
        .query(&mut c)
        .unwrap();
    fill(&mut c, "big", 2_000_000, &mut Rng(7));
    let rel = count(&mut c, "big") / 2_000_000.0 - 1.0;
    println!(
        "0.01/10,000,000 at 2,000,000 items: error {:+.3}%",
        rel * 100.0
    );
    assert!(rel.abs() < 0.03, "relative error {rel}");
}

fn memory_usage(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("MEMORY").arg(&["USAGE", key]).query(c).unwrap()
}

fn dump_len(c: &mut Connection, key: &str) -> usize {
    redis::cmd("DUMP")
        .arg(key)
        .query::<Vec<u8>>(c)
        .unwrap()
        .len()
}

#[test]
fn memory_against_hyperloglog_and_dump_sizes() {
    let server = Server::start();
    let mut c = server.conn();
    let _: () = redis::cmd("LC.RESERVE")
        .arg(&["empty", "0.01", "50000"])
        .query(&mut c)
        .unwrap();
    fill(&mut c, "full", 50_000, &mut Rng(1));
    // The same items into a HyperLogLog.
    let prefix = Rng(1).next();
    for start in (0..50_000u64).step_by(1000) {
        let batch: Vec<String> = (start..start + 1000)
            .map(|i| format!("{prefix:016x}-{i}"))
            .collect();
        let _: i64 = redis::cmd("PFADD")
            .arg("hll")
            .arg(batch)
            .query(&mut c)
            .unwrap();
    }
    let lc = memory_usage(&mut c, "full");
    let hll = memory_usage(&mut c, "hll");
    let (dump_empty, dump_full) = (dump_len(&mut c, "empty"), dump_len(&mut c, "full"));
    println!(
        "0.01/50000 holding 50,000 items: MEMORY USAGE {lc} B (HyperLogLog {hll} B, {:.1}x); \
         DUMP empty {dump_empty} B, full {dump_full} B; LC.COUNT {} vs PFCOUNT {}",
        hll as f64 / lc as f64,
        count(&mut c, "full"),
        redis::cmd("PFCOUNT")
            .arg("hll")
            .query::<i64>(&mut c)
            .unwrap()
    );
    // Past its token list a default counter is 2^11 32-bit registers (10,240-byte block).
    assert!(lc <= 10_500, "MEMORY USAGE {lc}");
    assert!(hll as f64 >= 1.3 * lc as f64, "HLL {hll} vs LC {lc}");
    assert!(
        dump_empty <= 64,
        "DUMP of an empty counter: {dump_empty} bytes"
    );
    // The registers, the running estimate and its variance, the header and DUMP's trailer.
    assert!(
        dump_full <= 8_260,
        "DUMP of a full counter: {dump_full} bytes"
    );
}
