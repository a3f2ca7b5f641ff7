//! Active defragmentation of lcbloom's values on a real server: a keyspace of each stored type
//! (native Bloom filters, linear counters, filters imported from RedisBloom, windowed filters)
//! is fragmented by deleting 70% of its keys at random; with `activedefrag yes` at least two
//! thirds of the fragmented bytes (`allocator_frag_bytes`) must come back, lcbloom must report
//! blocks it moved, and every surviving value must DUMP to the same bytes and answer the same
//! as before.
//!
//! Why bytes and not the ratio: jemalloc keeps about 3 MB fragmented whatever the values (its
//! thread cache and each size class's current slab; plain strings keep as much), so the ratio
//! a keyspace reaches depends on its size: ≤ 1.2 needs about 200k keys
//! (`bench/defrag_bench.py`, docs/BENCHMARKS.md), too slow for a test. Without a defrag
//! callback only Redis's own blocks move, which gives back about a tenth of the bytes (2.51 →
//! 2.37 for 200k filters).
//!
//! Values larger than `active-defrag-max-scan-fields` pages are defragmented in steps that
//! resume at a cursor (`value::defrag`); one test sends every filter that way.
//!
//! Needs a redis-server built with Redis's own jemalloc: `REDIS_SERVER` if it accepts
//! `activedefrag yes`, else the source builds in `shared/servers/redis-7.4.1` or
//! `redis-7.2.6` beside the project (or beside a parent of it). Debian's redis-server and a
//! Valkey built with libc's malloc refuse it. Without such a server the test says SKIPPED
//! and passes.

use crate::common::fuzz::dump_payload;
use crate::common::ops::info_lcbloom;
use crate::common::redisbloom::{legacy_chain, RDB_VERSION};
use crate::common::servers::shared_redis;
use crate::common::*;
use lcbloom::bloom::redisbloom::dump::encode_value;
use redis::{Connection, Value};
use std::time::{Duration, Instant};

const KEYS: usize = 120_000;
/// Generous: the machine running the tests may be busy with other builds.
const DEFRAG_TIMEOUT: Duration = Duration::from_secs(60);

/// The defrag settings: from 100 KB of fragmentation on (the keyspace is a few MB), with a
/// large share of the CPU.
const DEFRAG_ARGS: [(&str, &str); 4] = [
    ("active-defrag-ignore-bytes", "100kb"),
    ("active-defrag-threshold-lower", "1"),
    ("active-defrag-cycle-min", "25"),
    ("active-defrag-cycle-max", "75"),
];

/// The server binaries that may defragment, in order of preference.
fn candidates() -> Vec<String> {
    let mut out: Vec<String> = std::env::var("REDIS_SERVER").into_iter().collect();
    out.extend(shared_redis());
    out
}

/// A started server whose allocator can defragment, activedefrag still off, and its binary;
/// None if there is none. Values of `kind` whose free_effort exceeds its `active-defrag-max-scan-fields` are
/// defragmented in steps, with a cursor.
fn defrag_server(kind: Kind) -> Option<(Server, String)> {
    for binary in candidates() {
        let mut b = Server::builder().binary(&binary);
        for (name, value) in DEFRAG_ARGS {
            b = b.arg(name, value);
        }
        if let Kind::Stepped = kind {
            // Every filter of this test (a bit array of 10.8 KB: free_effort 3) goes through
            // the stepped path.
            b = b.arg("active-defrag-max-scan-fields", "1");
        }
        let server = b.start();
        let mut c = server.conn();
        if cmd(&mut c, &["CONFIG", "SET", "activedefrag", "yes"]).is_ok() {
            ok(&mut c, &["CONFIG", "SET", "activedefrag", "no"]);
            return Some((server, binary));
        }
    }
    None
}

fn memory_field(c: &mut Connection, name: &str) -> f64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from INFO memory"))
}

fn lcbloom_field(c: &mut Connection, name: &str) -> i64 {
    info_lcbloom(c)
        .iter()
        .find_map(|l| l.strip_prefix(&format!("lcbloom_{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("lcbloom_{name} missing from INFO lcbloom"))
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Bloom,
    Counter,
    RedisBloom,
    /// Bloom filters with an 11 KB bit array, defragmented in steps.
    Stepped,
    /// Windowed Bloom filters, their items in two generations: a window of 100 years (slots of
    /// 25), items added at times in 1970 and 1995, all inside the window until 2070.
    Window,
}

/// Keys of each kind: enough to fragment the heap by tens of MB.
fn keys(kind: Kind) -> usize {
    match kind {
        Kind::Stepped => 6_000,
        _ => KEYS,
    }
}

/// Items of key i: 1 to 30 of them, so that values of many size classes share the heap.
fn items_of(i: usize) -> Vec<String> {
    (0..1 + (i * 7919) % 30)
        .map(|j| format!("{i}:{j}"))
        .collect()
}

fn fill(c: &mut Connection, kind: Kind) {
    // RedisBloom filters: values as RedisBloom 2.8 DUMPs them, restored (a few shapes).
    let imported: Vec<Vec<u8>> = (0..8u32)
        .map(|n| {
            let chain = legacy_chain(0, 10 + 20 * u64::from(n), n * 9 + 1);
            dump_payload(&encode_value(&chain), RDB_VERSION)
        })
        .collect();
    let mut pipe = redis::pipe();
    let n = keys(kind);
    for i in 0..n {
        let key = format!("k:{i}");
        match kind {
            Kind::Stepped => pipe
                .cmd("BF.RESERVE")
                .arg(&key)
                .arg("0.01")
                .arg(9000)
                .ignore()
                .cmd("BF.MADD")
                .arg(&key)
                .arg(items_of(i)),
            Kind::Bloom => pipe.cmd("BF.MADD").arg(&key).arg(items_of(i)),
            Kind::Window => {
                // The items in 1970, in layers of 8 (a filter of more scales); in 1995 again
                // (their windows restarted, refreshes of copies in earlier layers), with as
                // many new.
                let create: Vec<_> = "CAPACITY 8 WINDOW 3153600000 AT 1000 ITEMS"
                    .split(' ')
                    .collect();
                let old = items_of(i);
                let new: Vec<String> = old
                    .iter()
                    .flat_map(|x| [x.clone(), format!("{x}'")])
                    .collect();
                pipe.cmd("BF.INSERT")
                    .arg(&key)
                    .arg(&create)
                    .arg(&old)
                    .ignore()
                    .cmd("BF.INSERT")
                    .arg(&key)
                    .arg(&["AT", "788400001000", "ITEMS"][..])
                    .arg(&new)
            }
            Kind::Counter => pipe.cmd("LC.ADD").arg(&key).arg(items_of(i)),
            Kind::RedisBloom => pipe
                .cmd("RESTORE")
                .arg(&key)
                .arg(0)
                .arg(&imported[i % imported.len()]),
        };
        pipe.ignore();
        if i % 1000 == 999 || i == n - 1 {
            let () = pipe.query(c).unwrap();
            pipe.clear();
        }
    }
}

/// Per key: its DUMP payload and its answers (members and non-members, or its count).
fn answers(c: &mut Connection, kind: Kind, keys: &[usize]) -> Vec<Value> {
    let mut pipe = redis::pipe();
    for &i in keys {
        let key = format!("k:{i}");
        pipe.cmd("DUMP").arg(&key);
        match kind {
            Kind::Bloom | Kind::RedisBloom | Kind::Stepped | Kind::Window => {
                let probe: Vec<String> = (0..40).map(|j| format!("{i}:{j}")).collect();
                pipe.cmd("BF.MEXISTS").arg(&key).arg(probe)
            }
            Kind::Counter => pipe.cmd("LC.COUNT").arg(&key),
        };
    }
    pipe.query(c).unwrap()
}

/// 70% of `n` keys, chosen at random with a fixed seed.
fn doomed(n: usize) -> Vec<bool> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % 10 < 7
        })
        .collect()
}

fn defragments(kind: Kind) {
    let Some((server, binary)) = defrag_server(kind) else {
        eprintln!(
            "SKIPPED: active defragmentation of {kind:?} values: no redis-server with Redis's \
             own jemalloc (REDIS_SERVER, or shared/servers/redis-7.4.1 or redis-7.2.6)"
        );
        return;
    };
    let mut c = server.conn();
    fill(&mut c, kind);
    let n = keys(kind);
    let doomed = doomed(n);
    // The survivors' answers first: their replies (a DUMP per key) would otherwise sit in the
    // client's buffers while the fragmentation is read.
    let survivors: Vec<usize> = (0..n).filter(|&i| !doomed[i]).collect();
    let before = answers(&mut c, kind, &survivors);
    let mut pipe = redis::pipe();
    for i in (0..n).filter(|&i| doomed[i]) {
        pipe.cmd("DEL").arg(format!("k:{i}")).ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    // INFO's allocator figures are refreshed by serverCron (every 100 ms), so the first reads
    // after the deletes may still show the state before them: read until they show the
    // fragmentation the deletes leave, for up to five seconds.
    let stepped = matches!(kind, Kind::Stepped);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !stepped
        && memory_field(&mut c, "allocator_frag_ratio") < 1.8
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ratio_before = memory_field(&mut c, "allocator_frag_ratio");
    let fragmented = memory_field(&mut c, "allocator_frag_bytes");
    // Otherwise the test could not tell defragmentation from nothing. Filters whose bit
    // arrays are 11 KB fragment little (a slab of that class holds one or two): that test is
    // about the stepped path moving values without changing them.
    assert!(
        stepped || ratio_before >= 1.8,
        "{kind:?}: only {ratio_before} after the deletes"
    );

    ok(&mut c, &["CONFIG", "SET", "activedefrag", "yes"]);
    let start = Instant::now();
    let mut left = fragmented;
    // The stepped filters' bytes barely move (see above): there it is enough that defrag has
    // been through as many values as survive, every one of them in steps.
    let done = |c: &mut Connection, left: f64| {
        if stepped {
            lcbloom_field(c, "defrag_values") >= survivors.len() as i64
        } else {
            left <= fragmented / 3.0
        }
    };
    while !done(&mut c, left) && start.elapsed() < DEFRAG_TIMEOUT {
        std::thread::sleep(Duration::from_millis(500));
        left = memory_field(&mut c, "allocator_frag_bytes");
    }
    ok(&mut c, &["CONFIG", "SET", "activedefrag", "no"]);
    let ratio = memory_field(&mut c, "allocator_frag_ratio");
    let moved = lcbloom_field(&mut c, "defrag_moved_blocks");
    eprintln!(
        "{kind:?} on {binary}: allocator_frag_bytes {fragmented} -> {left}, ratio \
         {ratio_before} -> {ratio} in {:.1} s, {moved} blocks moved by lcbloom",
        start.elapsed().as_secs_f64()
    );
    assert!(done(&mut c, left), "{kind:?}: {fragmented} -> {left}");
    assert!(moved > 0, "{kind:?}: lcbloom moved nothing");
    assert!(lcbloom_field(&mut c, "defrag_values") > 0);
    assert!(
        answers(&mut c, kind, &survivors) == before,
        "{kind:?}: a value changed"
    );
    // Still writable where they now are.
    let mut pipe = redis::pipe();
    for &i in &survivors {
        match kind {
            Kind::Counter => pipe.cmd("LC.ADD").arg(format!("k:{i}")).arg("new"),
            _ => pipe.cmd("BF.ADD").arg(format!("k:{i}")).arg("new"),
        };
        pipe.ignore();
    }
    let () = pipe.query(&mut c).unwrap();
}

#[test]
fn defragments_bloom_filters() {
    defragments(Kind::Bloom);
}

#[test]
fn defragments_counters() {
    defragments(Kind::Counter);
}

#[test]
fn defragments_large_filters_in_steps() {
    defragments(Kind::Stepped);
}

#[test]
fn defragments_imported_redisbloom_filters() {
    defragments(Kind::RedisBloom);
}

#[test]
fn defragments_windowed_filters() {
    defragments(Kind::Window);
}
