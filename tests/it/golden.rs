//! Golden payloads: the encodings of both types, pinned by values saved in the fixture files
//! of `FIXTURES` (`tests/fixtures/`, each written once by this file's recorder with one build
//! and never edited afterwards).
//!
//! Two separate checks:
//! * `recreated_values_encode_identically`: running each case's commands again yields the
//!   same DUMP value bytes (RDB version trailer and CRC left out, so Valkey passes too), the
//!   same BF.SCANDUMP chunks and the same LC AOF-rewrite commands as the NEWEST fixture that
//!   recorded the case.
//! * `saved_payloads_load_and_answer`: RESTORE of every saved payload of every fixture (and
//!   BF.LOADCHUNK of the saved chunks, LC.LOADCHUNK of the saved AOF commands) answers every
//!   recorded query as recorded, except `BF.INFO k SIZE`: Size is the memory the value takes
//!   in this build (issue 11 made it count allocator size classes), not part of the value.
//!
//! When an encoding changes on purpose: add a fixture to `FIXTURES` naming the cases whose
//! bytes change (and any new ones), record it, and keep every older file as it is:
//! `LCBLOOM_GOLDEN_RECORD=<file> cargo test --release --test it golden::record -- --ignored`.
//! The recorder refuses to overwrite a file.
//!
//! File format, one record a line: `case NAME`, `run ARG...` (the set-up commands, long item
//! lists abridged; `cases()` holds them whole), `dump KEY HEX` (the whole DUMP payload), `chunk KEY ITER HEX` (BF.SCANDUMP),
//! `aof KEY ARG... HEX` (LC.LOADCHUNK from an AOF rewrite, payload as the last field, hex),
//! `piece KEY ARG... HEX` (the same counter's chunked AOF form: `lc::codec::aof_parts` at
//! `PIECE_BYTES`, what a rewrite emits for counters over `CHUNK_BYTES`; `lc_v1_*` cases),
//! `ask REPLY | ARG...` (a query and its reply, integers and arrays of integers).

use crate::common::fuzz::{dump_payload, split_dump};
use crate::common::*;
use redis::{Connection, Value};
use std::fmt::Write as _;

const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// A fixture file and the cases it recorded.
struct Fixture {
    file: &'static str,
    cases: &'static [&'static str],
}

/// Oldest first.
const FIXTURES: &[Fixture] = &[
    // The build of 2026-11-22, before the shared value-type layer.
    Fixture {
        file: "golden.txt",
        cases: &[
            "bf_empty",
            "bf_default_few",
            "bf_grown",
            "bf_nonscaling",
            "bf_rate_0001_exp4",
            "lc_empty",
            "lc_exact",
            "lc_cap100_dense",
            "lc_cap1000_near_full",
            "lc_cap5000",
            "lc_cap50000",
            "lc_merged",
        ],
    },
    // The build of 2026-11-23 (main at 99356e3), the last whose Bloom filters are all bit
    // arrays (encoding versions 1 and 2), before issue 11's small-key representation.
    Fixture {
        file: "golden-2026-11-23-bf.txt",
        cases: &[
            "bf_default_one",
            "bf_default_30",
            "bf_default_scaled",
            "bf_nonscaling_small",
            "bf_expansion1",
            "bf_tight_rate",
            "bf_mid_capacity",
            "bf_blocked_small",
            "bf_blocked_scaled",
        ],
    },
    // The build of 2026-11-23 (main at b1926db), the last to write linear counters in
    // encoding version 1 (64-bit hashes or one bitmap): a counter in every mode version 2
    // distinguishes, and each one's chunked AOF form.
    Fixture {
        file: "golden-2026-11-23-lc.txt",
        cases: &[
            "lc_v1_exact_267",
            "lc_v1_default_268",
            "lc_v1_default_1000",
            "lc_v1_default_5000",
            "lc_v1_default_50000",
            "lc_v1_cap1m_exact",
            "lc_v1_cap1m_bitmap",
            "lc_v1_tiny",
            "lc_v1_merged_exact",
        ],
    },
    // Encoding version 2 of linear counters (issue 11: fingerprints, sparse mode, Elias–Fano
    // streams): every counter case again.
    Fixture {
        file: "golden-2026-11-23-lc2.txt",
        cases: &[
            "lc_empty",
            "lc_exact",
            "lc_cap100_dense",
            "lc_cap1000_near_full",
            "lc_cap5000",
            "lc_cap50000",
            "lc_merged",
            "lc_v1_exact_267",
            "lc_v1_default_268",
            "lc_v1_default_1000",
            "lc_v1_default_5000",
            "lc_v1_default_50000",
            "lc_v1_cap1m_exact",
            "lc_v1_cap1m_bitmap",
            "lc_v1_tiny",
            "lc_v1_merged_exact",
        ],
    },
    // Linear counters past their exact set as sketches (counter encoding version 3: a token
    // list, then registers; exact sets keep their version-2 bytes): every counter case again.
    Fixture {
        file: "golden-2026-11-23-lc3.txt",
        cases: &[
            "lc_empty",
            "lc_exact",
            "lc_cap100_dense",
            "lc_cap1000_near_full",
            "lc_cap5000",
            "lc_cap50000",
            "lc_merged",
            "lc_v1_exact_267",
            "lc_v1_default_268",
            "lc_v1_default_1000",
            "lc_v1_default_5000",
            "lc_v1_default_50000",
            "lc_v1_cap1m_exact",
            "lc_v1_cap1m_bitmap",
            "lc_v1_tiny",
            "lc_v1_merged_exact",
        ],
    },
    // Encoding version 3 (issue 11): sub-filters of small capacity are sparse sets of
    // fingerprints, whole in the header. Every Bloom case re-recorded, and a chain of sparse
    // sets followed by a bit array.
    Fixture {
        file: "golden-2026-11-23-bf-v3.txt",
        cases: &[
            "bf_empty",
            "bf_default_few",
            "bf_grown",
            "bf_nonscaling",
            "bf_rate_0001_exp4",
            "bf_default_one",
            "bf_default_30",
            "bf_default_scaled",
            "bf_nonscaling_small",
            "bf_expansion1",
            "bf_tight_rate",
            "bf_mid_capacity",
            "bf_blocked_small",
            "bf_blocked_scaled",
            "bf_sparse_then_bits",
        ],
    },
    // A small sub-filter is also sparse when its set outgrows the bit array by less than what
    // a separate bit array costs apart from its bits (issue 11, after the version 3 fixture):
    // a 5% filter of 300 becomes sparse, and a small 0.5 one.
    Fixture {
        file: "golden-2026-11-23-bf-v3b.txt",
        cases: &["bf_nonscaling", "bf_high_rate_small"],
    },
];

/// Piece size of the recorded chunked form of the `lc_v1_*` cases (those introduced to pin
/// version 1, recorded again in later versions): small, so that counters of a few KB take the
/// shell-then-pieces path of those over 16 MiB.
const PIECE_BYTES: u64 = 256;

type Case = (&'static str, Vec<Vec<String>>, Vec<Vec<String>>);
/// Queries and their rendered replies.
type Answers = Vec<(String, Vec<String>)>;

/// Each case: a name, its set-up commands (on key `k`, or `k`/`src` for merges), the queries
/// whose answers are recorded.
fn cases() -> Vec<Case> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let add_items = |cmd: &str, prefix: &str, n: u32, batch: u32| {
        let mut out = Vec::new();
        let all = items(prefix, n);
        for chunk in all.chunks(batch as usize) {
            let mut c = vec![cmd.to_string(), "k".to_string()];
            c.extend(chunk.iter().cloned());
            out.push(c);
        }
        out
    };
    let bf_asks = |prefix: &str, n: u32| {
        let mut q = s(&["BF.MEXISTS", "k"]);
        q.extend(items(prefix, n.min(20)));
        q.extend(items("absent", 20));
        vec![
            q,
            s(&["BF.CARD", "k"]),
            s(&["BF.INFO", "k", "CAPACITY"]),
            s(&["BF.INFO", "k", "FILTERS"]),
            s(&["BF.INFO", "k", "SIZE"]),
        ]
    };
    let lc_asks = || vec![s(&["LC.COUNT", "k"]), s(&["LC.ADD", "k", "x0", "absent0"])];
    let mut cases = Vec::new();

    cases.push((
        "bf_empty",
        vec![s(&["BF.RESERVE", "k", "0.01", "100"])],
        bf_asks("i", 0),
    ));
    let mut few = add_items("BF.MADD", "i", 5, 5);
    few.insert(0, s(&["BF.ADD", "k", "first"]));
    cases.push(("bf_default_few", few, bf_asks("i", 5)));
    let mut grown = vec![s(&["BF.RESERVE", "k", "0.01", "100"])];
    grown.extend(add_items("BF.MADD", "i", 2_000, 500));
    cases.push(("bf_grown", grown, bf_asks("i", 2_000)));
    let mut nonscaling = vec![s(&["BF.RESERVE", "k", "0.05", "300", "NONSCALING"])];
    nonscaling.extend(add_items("BF.MADD", "i", 250, 250));
    cases.push(("bf_nonscaling", nonscaling, bf_asks("i", 250)));
    let mut tight = vec![s(&[
        "BF.INSERT",
        "k",
        "ERROR",
        "0.001",
        "CAPACITY",
        "1000",
        "EXPANSION",
        "4",
        "ITEMS",
        "a",
    ])];
    tight.extend(add_items("BF.MADD", "i", 1_500, 500));
    cases.push(("bf_rate_0001_exp4", tight, bf_asks("i", 1_500)));

    // Small and mid-sized filters of every shape (the 2026-11-23 fixture). The asks end by
    // adding new items, so that a loaded value is shown to keep working, scaling included.
    let bf_asks_grow = |prefix: &str, n: u32| {
        let mut q = s(&["BF.MEXISTS", "k"]);
        q.extend(items(prefix, n.min(60)));
        q.extend(items("absent", 60));
        let mut more = s(&["BF.MADD", "k"]);
        more.extend(items("new", 20));
        let mut again = s(&["BF.MEXISTS", "k"]);
        again.extend(items("new", 20));
        vec![
            q,
            s(&["BF.CARD", "k"]),
            s(&["BF.INFO", "k", "CAPACITY"]),
            s(&["BF.INFO", "k", "FILTERS"]),
            s(&["BF.INFO", "k", "ITEMS"]),
            s(&["BF.INFO", "k", "EXPANSION"]),
            more,
            again,
            s(&["BF.CARD", "k"]),
            s(&["BF.INFO", "k", "FILTERS"]),
        ]
    };
    cases.push((
        "bf_default_one",
        vec![s(&["BF.ADD", "k", "i0"])],
        bf_asks_grow("i", 1),
    ));
    cases.push((
        "bf_default_30",
        add_items("BF.MADD", "i", 30, 30),
        bf_asks_grow("i", 30),
    ));
    cases.push((
        "bf_default_scaled",
        add_items("BF.MADD", "i", 1_000, 250),
        bf_asks_grow("i", 1_000),
    ));
    let mut nonscaling_small = vec![s(&["BF.RESERVE", "k", "0.01", "50", "NONSCALING"])];
    nonscaling_small.extend(add_items("BF.MADD", "i", 20, 20));
    cases.push((
        "bf_nonscaling_small",
        nonscaling_small,
        bf_asks_grow("i", 20),
    ));
    let mut expansion1 = vec![s(&["BF.RESERVE", "k", "0.05", "10", "EXPANSION", "1"])];
    expansion1.extend(add_items("BF.MADD", "i", 100, 100));
    cases.push(("bf_expansion1", expansion1, bf_asks_grow("i", 100)));
    let mut tight_rate = vec![s(&["BF.RESERVE", "k", "0.0001", "200"])];
    tight_rate.extend(add_items("BF.MADD", "i", 150, 150));
    cases.push(("bf_tight_rate", tight_rate, bf_asks_grow("i", 150)));
    let mut mid = vec![s(&["BF.RESERVE", "k", "0.01", "3000"])];
    mid.extend(add_items("BF.MADD", "i", 2_500, 500));
    cases.push(("bf_mid_capacity", mid, bf_asks_grow("i", 2_500)));
    let mut blocked_small = vec![s(&["BF.RESERVE", "k", "0.01", "100", "LAYOUT", "blocked"])];
    blocked_small.extend(add_items("BF.MADD", "i", 30, 30));
    cases.push(("bf_blocked_small", blocked_small, bf_asks_grow("i", 30)));
    let mut blocked_scaled = vec![s(&[
        "BF.INSERT",
        "k",
        "CAPACITY",
        "50",
        "ERROR",
        "0.001",
        "LAYOUT",
        "blocked",
        "ITEMS",
        "a",
    ])];
    blocked_scaled.extend(add_items("BF.MADD", "i", 400, 200));
    cases.push(("bf_blocked_scaled", blocked_scaled, bf_asks_grow("i", 400)));
    let mut high_rate = vec![s(&["BF.RESERVE", "k", "0.5", "50", "NONSCALING"])];
    high_rate.extend(add_items("BF.MADD", "i", 20, 20));
    cases.push(("bf_high_rate_small", high_rate, bf_asks_grow("i", 20)));
    let mut mixed = vec![s(&["BF.RESERVE", "k", "0.01", "5000"])];
    mixed.extend(add_items("BF.MADD", "i", 5_300, 1_000));
    cases.push(("bf_sparse_then_bits", mixed, bf_asks_grow("i", 5_300)));

    cases.push((
        "lc_empty",
        vec![s(&["LC.RESERVE", "k", "0.01", "1000"])],
        lc_asks(),
    ));
    cases.push(("lc_exact", add_items("LC.ADD", "x", 40, 40), lc_asks()));
    for (name, cap, n) in [
        ("lc_cap100_dense", "100", 100),
        ("lc_cap1000_near_full", "1000", 20_000),
        ("lc_cap5000", "5000", 6_000),
        ("lc_cap50000", "50000", 30_000),
    ] {
        let mut c = vec![s(&["LC.RESERVE", "k", "0.02", cap])];
        c.extend(add_items("LC.ADD", "x", n, 2_000));
        cases.push((name, c, lc_asks()));
    }
    let mut merged = vec![s(&["LC.RESERVE", "src", "0.01", "3000"])];
    merged.push(s(&["LC.ADD", "src", "m0", "m1", "m2"]));
    merged.extend(add_items("LC.ADD", "x", 9_000, 3_000));
    merged.push(s(&["LC.MERGE", "k", "src"]));
    cases.push(("lc_merged", merged, lc_asks()));

    // Counters in every mode of encoding version 2 (exact at and past its limit, sparse, dense,
    // near full, other sizes, a merge of exact sets of two sizes), saved in version 1. The asks
    // add items after loading.
    let lc_asks_more = || {
        let mut more = s(&["LC.ADD", "k"]);
        more.extend(items("absent", 20));
        vec![
            s(&["LC.COUNT", "k"]),
            s(&["LC.ADD", "k", "x0", "absent0"]),
            s(&["LC.COUNT", "k"]),
            more,
            s(&["LC.COUNT", "k"]),
        ]
    };
    for (name, n) in [
        ("lc_v1_exact_267", 267),
        ("lc_v1_default_268", 268),
        ("lc_v1_default_1000", 1_000),
        ("lc_v1_default_5000", 5_000),
        ("lc_v1_default_50000", 50_000),
    ] {
        cases.push((name, add_items("LC.ADD", "x", n, 2_000), lc_asks_more()));
    }
    for (name, rate, cap, n) in [
        ("lc_v1_cap1m_exact", "0.01", "1000000", 2_000),
        ("lc_v1_cap1m_bitmap", "0.01", "1000000", 3_000),
        ("lc_v1_tiny", "0.5", "1", 5),
    ] {
        let mut c = vec![s(&["LC.RESERVE", "k", rate, cap])];
        c.extend(add_items("LC.ADD", "x", n, 2_000));
        cases.push((name, c, lc_asks_more()));
    }
    let mut exact_sizes = vec![s(&["LC.RESERVE", "src", "0.01", "3000"])];
    exact_sizes.push(s(&["LC.ADD", "src", "m0", "m1", "m2", "x5"]));
    exact_sizes.extend(add_items("LC.ADD", "x", 100, 100));
    exact_sizes.push(s(&["LC.MERGE", "k", "src"]));
    cases.push(("lc_v1_merged_exact", exact_sizes, lc_asks_more()));
    cases
}

fn render(v: &Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        Value::Okay => "OK".to_string(),
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Boolean(b) => (*b as i64).to_string(),
        Value::Array(a) => a.iter().map(render).collect::<Vec<_>>().join(","),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn run(c: &mut Connection, args: &[String]) -> Value {
    let mut command = redis::cmd(&args[0]);
    for a in &args[1..] {
        command.arg(a);
    }
    command.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// What a case's value looks like on the wire, computed on a live server.
#[derive(Default, PartialEq, Debug)]
struct Recorded {
    dump: Vec<u8>,
    chunks: Vec<(i64, Vec<u8>)>,
    aof: Vec<Vec<Vec<u8>>>,
    pieces: Vec<Vec<Vec<u8>>>,
}

fn record_value(server: &Server, c: &mut Connection, name: &str) -> Recorded {
    let dump: Vec<u8> = redis::cmd("DUMP").arg("k").query(c).unwrap();
    let mut chunks = Vec::new();
    if is_bloom(c) {
        scandump_each(c, "k", 0, |_, it, data| chunks.push((it, data)));
    }
    let aof = if is_bloom(c) {
        Vec::new()
    } else {
        aof_commands(server, c)
    };
    let pieces = if name.starts_with("lc_v1_") {
        chunked_form(&aof)
    } else {
        Vec::new()
    };
    Recorded {
        dump,
        chunks,
        aof,
        pieces,
    }
}

/// The chunked AOF form of the counter that a one-command AOF rewrite rebuilds, in pieces of
/// `PIECE_BYTES` (one command when the counter cannot be chunked).
fn chunked_form(aof: &[Vec<Vec<u8>>]) -> Vec<Vec<Vec<u8>>> {
    use lcbloom::lc::codec;
    let [whole] = aof else {
        panic!("one LC.LOADCHUNK per counter, got {}", aof.len());
    };
    let counter = codec::decode(&whole[2], u64::MAX).expect("the AOF payload decodes");
    let mut out = Vec::new();
    codec::aof_parts(&counter, PIECE_BYTES, |iterator, bytes| {
        let mut args = vec![b"LC.LOADCHUNK".to_vec(), b"k".to_vec()];
        args.extend(iterator.map(|it| it.to_string().into_bytes()));
        args.push(bytes.to_vec());
        out.push(args);
    });
    out
}

fn is_bloom(c: &mut Connection) -> bool {
    redis::cmd("BF.CARD").arg("k").query::<i64>(c).is_ok()
}

/// The LC.LOADCHUNK commands an AOF rewrite writes for key `k` (RESP parsed from the base
/// file, RDB preamble off).
fn aof_commands(server: &Server, c: &mut Connection) -> Vec<Vec<Vec<u8>>> {
    ok(c, &["CONFIG", "SET", "aof-use-rdb-preamble", "no"]);
    ok(c, &["CONFIG", "SET", "appendonly", "yes"]);
    // Enabling AOF starts a rewrite; wait for it, then rewrite once more to be sure of the base.
    wait_rewrite(c);
    ok(c, &["BGREWRITEAOF"]);
    wait_rewrite(c);
    ok(c, &["CONFIG", "SET", "appendonly", "no"]);
    let dir = server.dir.join("appendonlydir");
    let base = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".base."))
        .max_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap())
        .expect("an AOF base file");
    let bytes = std::fs::read(base).unwrap();
    for f in std::fs::read_dir(&dir).unwrap() {
        let _ = std::fs::remove_file(f.unwrap().path());
    }
    parse_resp_commands(&bytes)
        .into_iter()
        .filter(|cmd| cmd[0].eq_ignore_ascii_case(b"LC.LOADCHUNK") && cmd[1] == b"k")
        .collect()
}

fn wait_rewrite(c: &mut Connection) {
    for _ in 0..1_500 {
        let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
        if info.contains("aof_rewrite_in_progress:0") && !info.contains("aof_rewrite_scheduled:1") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("AOF rewrite never finished");
}

fn parse_resp_commands(mut b: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line<'a>(b: &mut &'a [u8]) -> &'a [u8] {
        let end = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let l = &b[..end];
        *b = &b[end + 2..];
        l
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let head = line(&mut b);
        assert_eq!(head[0], b'*', "AOF: {:?}", String::from_utf8_lossy(head));
        let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..n {
            let len: usize = std::str::from_utf8(&line(&mut b)[1..])
                .unwrap()
                .parse()
                .unwrap();
            args.push(b[..len].to_vec());
            b = &b[len + 2..];
        }
        out.push(args);
    }
    out
}

/// One case as saved in the fixture.
#[derive(Default)]
struct Saved {
    name: String,
    recorded: Recorded,
    asks: Answers,
}

fn load_fixture(file: &str) -> Vec<Saved> {
    let path = format!("{FIXTURE_DIR}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out: Vec<Saved> = Vec::new();
    for l in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut f = l.split(' ');
        let kind = f.next().unwrap();
        if kind == "case" {
            out.push(Saved {
                name: f.next().unwrap().to_string(),
                ..Default::default()
            });
            continue;
        }
        let cur = out.last_mut().expect("a case line first");
        let rest: Vec<&str> = f.collect();
        match kind {
            "run" => {}
            "dump" => cur.recorded.dump = unhex(rest[1]),
            "chunk" => cur
                .recorded
                .chunks
                .push((rest[1].parse().unwrap(), unhex(rest[2]))),
            "aof" | "piece" => {
                let mut args: Vec<Vec<u8>> = rest[..rest.len() - 1]
                    .iter()
                    .map(|a| a.as_bytes().to_vec())
                    .collect();
                args.push(unhex(rest[rest.len() - 1]));
                match kind {
                    "aof" => cur.recorded.aof.push(args),
                    _ => cur.recorded.pieces.push(args),
                }
            }
            "ask" => {
                let bar = rest.iter().position(|x| *x == "|").unwrap();
                cur.asks.push((
                    rest[..bar].join(" "),
                    rest[bar + 1..].iter().map(|x| x.to_string()).collect(),
                ));
            }
            other => panic!("{file}: unknown record {other}"),
        }
    }
    out
}

/// Runs each named case on a fresh server and returns what it recorded, queries answered.
fn recreate(server: &Server, names: &[&str]) -> Vec<(Recorded, Answers)> {
    let all = cases();
    let mut c = server.conn();
    let mut out = Vec::new();
    for name in names {
        let (_, setup, asks) = all
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("no case {name} in cases()"));
        ok(&mut c, &["FLUSHALL"]);
        for command in setup {
            run(&mut c, command);
        }
        let recorded = record_value(server, &mut c, name);
        let answers = asks
            .iter()
            .map(|q| (render(&run(&mut c, q)), q.clone()))
            .collect();
        out.push((recorded, answers));
    }
    out
}

#[test]
#[ignore = "writes a new fixture file; run only when an encoding changes on purpose"]
fn record() {
    let file = std::env::var("LCBLOOM_GOLDEN_RECORD")
        .expect("set LCBLOOM_GOLDEN_RECORD to the fixture's file name (see FIXTURES)");
    let fixture = FIXTURES
        .iter()
        .find(|f| f.file == file)
        .unwrap_or_else(|| panic!("{file} is not in FIXTURES"));
    let path = format!("{FIXTURE_DIR}/{file}");
    assert!(
        !std::path::Path::new(&path).exists(),
        "{path} exists: fixtures are never re-recorded, add a new one"
    );
    let server = Server::start();
    let all = cases();
    let mut text = String::from(
        "# Golden payloads (tests/it/golden.rs): DUMP, BF.SCANDUMP chunks, LC AOF commands, answers.\n",
    );
    for (name, (rec, answers)) in fixture.cases.iter().zip(recreate(&server, fixture.cases)) {
        let setup = &all.iter().find(|(n, _, _)| n == name).unwrap().1;
        let _ = writeln!(text, "case {name}");
        for command in setup {
            // Long item lists as `first .. last (n items)`: cases() is the source of truth.
            let line = match command.len() {
                0..=8 => command.join(" "),
                n => format!(
                    "{} .. {} ({} items)",
                    command[..3].join(" "),
                    command[n - 1],
                    n - 2
                ),
            };
            let _ = writeln!(text, "run {line}");
        }
        let _ = writeln!(text, "dump k {}", hex(&rec.dump));
        for (it, data) in &rec.chunks {
            let _ = writeln!(text, "chunk k {it} {}", hex(data));
        }
        for (kind, commands) in [("aof", &rec.aof), ("piece", &rec.pieces)] {
            for args in commands {
                let (last, head) = args.split_last().unwrap();
                let head: Vec<String> = head
                    .iter()
                    .map(|a| String::from_utf8(a.clone()).unwrap())
                    .collect();
                let _ = writeln!(text, "{kind} {} {}", head.join(" "), hex(last));
            }
        }
        for (reply, q) in answers {
            let _ = writeln!(text, "ask {reply} | {}", q.join(" "));
        }
    }
    std::fs::write(path, text).unwrap();
}

/// (a) The same commands still produce the same bytes as the newest recording of each case.
#[test]
fn recreated_values_encode_identically() {
    let mut newest: Vec<(&str, Saved)> = Vec::new();
    for fixture in FIXTURES {
        let saved = load_fixture(fixture.file);
        let names: Vec<&str> = saved.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, fixture.cases, "{}: cases", fixture.file);
        for s in saved {
            newest.retain(|(_, old)| old.name != s.name);
            newest.push((fixture.file, s));
        }
    }
    let server = Server::start();
    let names: Vec<&str> = newest.iter().map(|(_, s)| s.name.as_str()).collect();
    let now = recreate(&server, &names);
    for ((file, s), (rec, _)) in newest.iter().zip(&now) {
        let what = format!("{} ({file})", s.name);
        assert_eq!(
            split_dump(&s.recorded.dump).0,
            split_dump(&rec.dump).0,
            "{what}: DUMP value"
        );
        assert_eq!(s.recorded.chunks, rec.chunks, "{what}: BF.SCANDUMP chunks");
        assert_eq!(s.recorded.aof, rec.aof, "{what}: LC AOF rewrite");
        assert_eq!(s.recorded.pieces, rec.pieces, "{what}: LC chunked form");
    }
}

/// Issue 11: no encoding grew from one recording of a case to the next: a counter's (its AOF
/// payload, the bytes of its RDB value and DUMP) nor a Bloom filter's (its DUMP value).
#[test]
fn encodings_never_grow() {
    let mut last: Vec<(String, usize, &str)> = Vec::new();
    let mut compared = 0;
    for fixture in FIXTURES {
        for s in load_fixture(fixture.file) {
            let len = match s.recorded.aof.first().map(|a| a.as_slice()) {
                // A counter that is now a sketch (its payload's version byte 3) replaces a
                // bitmap that saturated at its capacity: larger, and right at every size.
                Some([.., payload]) if payload.first() == Some(&3) => {
                    last.retain(|(n, _, _)| *n != s.name);
                    continue;
                }
                Some([.., payload]) => payload.len(),
                _ if s.name.starts_with("bf_") => split_dump(&s.recorded.dump).0.len(),
                _ => continue,
            };
            if let Some((_, before, file)) = last.iter().find(|(n, _, _)| *n == s.name) {
                assert!(
                    len <= *before,
                    "{}: {len} bytes in {}, {before} in {file}",
                    s.name,
                    fixture.file
                );
                compared += 1;
            }
            last.retain(|(n, _, _)| *n != s.name);
            last.push((s.name, len, fixture.file));
        }
    }
    assert!(compared >= 30, "{compared} cases recorded twice");
}

/// Whether a recorded query's answer depends on this build's memory accounting (see the
/// header), not on the value.
fn is_accounting(query: &str) -> bool {
    query.eq_ignore_ascii_case("BF.INFO k SIZE")
}

/// Whether a query writes a linear counter. A counter that took new items is no longer the
/// saved one: past its exact set it grows as this build's counters do (a sketch, where
/// earlier builds kept a bitmap), so its later answers are checked against the recorded ones
/// within a counter's error (`close`), not byte for byte.
fn is_counter_write(query: &[String]) -> bool {
    let name = query[0].to_ascii_uppercase();
    name == "LC.ADD" || name == "LC.MERGE"
}

/// The same reply, or integers within 3% (and 2) of each other.
fn close(got: &str, recorded: &str) -> bool {
    match (got.parse::<f64>(), recorded.parse::<f64>()) {
        (Ok(a), Ok(b)) => (a - b).abs() <= 2.0 + 0.03 * b.abs(),
        _ => got == recorded,
    }
}

/// (b) The saved bytes of every fixture load and answer as they did when saved (before any
/// write to a counter; see `is_counter_write`).
#[test]
fn saved_payloads_load_and_answer() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, &["SET", "probe", "1"]);
    let probe: Vec<u8> = redis::cmd("DUMP").arg("probe").query(&mut c).unwrap();
    let version = split_dump(&probe).1;
    for s in FIXTURES.iter().flat_map(|f| load_fixture(f.file)) {
        let check = |c: &mut Connection, how: &str| {
            let mut written = false;
            for (reply, q) in &s.asks {
                if is_accounting(&q.join(" ")) {
                    continue;
                }
                let got = render(&run(c, q));
                if written {
                    assert!(
                        close(&got, reply),
                        "{} via {how}: {q:?}: {got} for {reply}",
                        s.name
                    );
                } else {
                    assert_eq!(&got, reply, "{} via {how}: {q:?}", s.name);
                }
                written |= is_counter_write(q);
            }
        };
        // RESTORE with this server's RDB version in the trailer (Valkey's differs).
        let payload = dump_payload(&split_dump(&s.recorded.dump).0, version);
        ok(&mut c, &["FLUSHALL"]);
        redis::cmd("RESTORE")
            .arg("k")
            .arg(0)
            .arg(payload)
            .exec(&mut c)
            .unwrap();
        check(&mut c, "RESTORE");
        if !s.recorded.chunks.is_empty() {
            ok(&mut c, &["FLUSHALL"]);
            for (it, data) in &s.recorded.chunks {
                redis::cmd("BF.LOADCHUNK")
                    .arg("k")
                    .arg(it)
                    .arg(data)
                    .exec(&mut c)
                    .unwrap();
            }
            check(&mut c, "BF.LOADCHUNK");
        }
        for (how, commands) in [
            ("LC.LOADCHUNK", &s.recorded.aof),
            ("LC.LOADCHUNK pieces", &s.recorded.pieces),
        ] {
            if commands.is_empty() {
                continue;
            }
            ok(&mut c, &["FLUSHALL"]);
            for args in commands {
                let mut command = redis::cmd("LC.LOADCHUNK");
                for a in &args[1..] {
                    command.arg(a.as_slice());
                }
                command.exec(&mut c).unwrap();
            }
            check(&mut c, how);
        }
    }
}
