//! Golden payloads: the encodings of both types, pinned by values saved in the fixture files
//! (`common::fixtures`: `tests/fixtures/`, each written once by this file's recorder with one
//! build and never edited afterwards).
//!
//! Two checks:
//! * `current_build_encodes_as_recorded`: running each case's commands again on the current
//!   build yields the same DUMP value bytes (RDB version trailer and CRC left out, so Valkey
//!   passes too), the same BF.SCANDUMP chunks and the same LC AOF-rewrite commands as the
//!   NEWEST fixture that recorded the case, and the same answers; and no encoding is larger
//!   than in any fixture that recorded the case.
//! * `saved_payloads_load_and_answer`: RESTORE of every saved payload of every fixture (and
//!   BF.LOADCHUNK of the saved chunks, LC.LOADCHUNK of the saved AOF commands) answers every
//!   recorded query as recorded.
//!
//! `BF.INFO k SIZE` is never compared: Size is the memory the value takes by the running
//! build's accounting (allocator size classes), not part of the value.
//!
//! When an encoding changes on purpose: add a new file to `fixtures::FIXTURES` (as
//! `resizing(..)` when a sizing rule makes cases larger on purpose) and record it;
//! it holds every case whose bytes differ from their newest recording, and every case not
//! recorded yet. Every older file stays as it is:
//! `LCBLOOM_GOLDEN_RECORD=<file> cargo test --release --test it golden::record -- --ignored`.
//! The recorder refuses to overwrite a file.

use crate::common::fixtures::{
    fixture_files, hex, load_all, Answers, Recorded, Saved, FIXTURES, FIXTURE_DIR,
};
use crate::common::fuzz::{dump_payload, split_dump};
use crate::common::*;
use redis::{Connection, Value};
use std::fmt::Write as _;

/// Piece size of the recorded chunked form of the `lc_v1_*` cases (those introduced to pin
/// version 1, recorded again in later versions): small, so that counters of a few KB take the
/// shell-then-pieces path of those over 16 MiB.
const PIECE_BYTES: u64 = 256;

type Case = (&'static str, Vec<Vec<String>>, Vec<Vec<String>>);

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

    // Small and mid-sized filters of every shape. The asks end by
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

    // Seeded filters (encoding version 4): a default one of a few items (a sparse set), bit
    // arrays alone, and a blocked chain of sparse sets and bit arrays.
    let mut seeded_few = vec![s(&[
        "BF.INSERT",
        "k",
        "SEED",
        "1311768467463790320",
        "ITEMS",
        "first",
    ])];
    seeded_few.extend(add_items("BF.MADD", "i", 30, 30));
    cases.push(("bf_seeded_few", seeded_few, bf_asks_grow("i", 30)));
    let mut seeded_bits = vec![s(&[
        "BF.RESERVE",
        "k",
        "0.01",
        "10000",
        "NONSCALING",
        "SEED",
        "77",
    ])];
    seeded_bits.extend(add_items("BF.MADD", "i", 500, 500));
    cases.push(("bf_seeded_bits", seeded_bits, bf_asks_grow("i", 500)));
    let mut seeded_blocked = vec![s(&[
        "BF.INSERT",
        "k",
        "CAPACITY",
        "50",
        "ERROR",
        "0.001",
        "LAYOUT",
        "blocked",
        "SEED",
        "18446744073709551615",
        "ITEMS",
        "a",
    ])];
    seeded_blocked.extend(add_items("BF.MADD", "i", 3_000, 500));
    cases.push((
        "bf_seeded_blocked_scaled",
        seeded_blocked,
        bf_asks_grow("i", 3_000),
    ));

    // Windowed filters, every write at a time of its own (AT) so that the bytes do not depend
    // on the clock: a window of 100 years (slots of 25), items added in 1970, 1995 and 2019,
    // all inside the window until 2070 (the asks run at the clock's time).
    const CENTURY: &str = "3153600000";
    let at = |t: &str, from: u32, n: u32| {
        let mut c = s(&["BF.INSERT", "k", "AT", t, "ITEMS"]);
        c.extend((from..from + n).map(|i| format!("i{i}")));
        c
    };
    cases.push((
        "bf_window_empty",
        vec![s(&["BF.RESERVE", "k", "0.01", "100", "WINDOW", CENTURY])],
        bf_asks_grow("i", 0),
    ));
    // Items in three generations, and a scaled filter of several layers; unseeded, and
    // seeded (windowed encoding version 2: the seed after the fixed fields) by `seed`, the
    // creating command's `SEED s` if any.
    let words = |line: &str| s(&line.split(' ').collect::<Vec<_>>());
    let generations = |seed: &[&str]| {
        let mut reserve = words(&format!(
            "BF.RESERVE k 0.01 1000 NONSCALING WINDOW {CENTURY}"
        ));
        reserve.extend(s(seed));
        vec![
            reserve,
            at("1000", 0, 300),
            // 50 items of 1970 again (their windows restart), 200 new ones.
            at("788400001000", 250, 250),
            at("1576800001000", 500, 100),
        ]
    };
    let scaled = |seed: &[&str]| {
        let mut insert = words(&format!(
            "BF.INSERT k CAPACITY 50 ERROR 0.001 EXPANSION 2 WINDOW {CENTURY}"
        ));
        insert.extend(s(seed));
        insert.extend(s(&["AT", "1000", "ITEMS", "i0"]));
        vec![insert, at("2000", 1, 299)]
    };
    cases.push((
        "bf_window_generations",
        generations(&[]),
        bf_asks_grow("i", 600),
    ));
    cases.push(("bf_window_scaled", scaled(&[]), bf_asks_grow("i", 300)));
    cases.push((
        "bf_window_seeded_generations",
        generations(&["SEED", "1311768467463790320"]),
        bf_asks_grow("i", 600),
    ));
    cases.push((
        "bf_window_seeded_scaled",
        scaled(&["SEED", "18446744073709551615"]),
        bf_asks_grow("i", 300),
    ));

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

fn run(c: &mut Connection, args: &[String]) -> Value {
    let mut command = redis::cmd(&args[0]);
    for a in &args[1..] {
        command.arg(a);
    }
    command.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// What a case's value looks like on the wire, computed on a live server.
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
    wait_aof_rewrite(c);
    ok(c, &["BGREWRITEAOF"]);
    wait_aof_rewrite(c);
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

/// The newest recording of each case in `files` (oldest first), with every file's recording
/// of it, oldest first.
fn by_case<'a>(files: impl IntoIterator<Item = &'a str>) -> Vec<Vec<(&'a str, Saved)>> {
    let mut out: Vec<Vec<(&str, Saved)>> = Vec::new();
    for (file, s) in load_all(files) {
        match out.iter_mut().find(|r| r[0].1.name == s.name) {
            Some(recordings) => recordings.push((file, s)),
            None => out.push(vec![(file, s)]),
        }
    }
    out
}

/// Whether a counter's encoding is a sketch (its AOF payload's version byte 3): it replaces a
/// bitmap that saturated at its capacity, so it may be larger than that bitmap was.
fn is_sketch(now: &Recorded) -> bool {
    matches!(now.aof.first().map(|a| a.as_slice()), Some([.., payload]) if payload.first() == Some(&3))
}

/// Why the current build's `now` for a case differs from its recordings: the first encoding
/// larger than a recording's (from its newest fixture that `resizes` on), or the first difference
/// from the newest; None when it matches.
fn difference(recordings: &[(&str, Saved)], now: &Recorded, answers: &Answers) -> Option<String> {
    let (dump, aof) = now.sizes();
    let sized_alike = recordings
        .iter()
        .rposition(|(file, _)| FIXTURES.iter().any(|f| f.file == *file && f.resizes))
        .unwrap_or(0);
    for (file, s) in &recordings[sized_alike..] {
        let (old_dump, old_aof) = s.recorded.sizes();
        if dump > old_dump && !is_sketch(now) {
            return Some(format!(
                "DUMP value grew: {dump} bytes, {old_dump} in {file}"
            ));
        }
        if let (Some(aof), Some(old_aof)) = (aof, old_aof) {
            if aof > old_aof && !is_sketch(now) {
                return Some(format!(
                    "AOF payload grew: {aof} bytes, {old_aof} in {file}"
                ));
            }
        }
    }
    let (file, newest) = recordings.last().expect("recorded");
    let recorded = &newest.recorded;
    let differs = [
        (
            split_dump(&recorded.dump).0 != split_dump(&now.dump).0,
            "DUMP value",
        ),
        (recorded.chunks != now.chunks, "BF.SCANDUMP chunks"),
        (recorded.aof != now.aof, "LC AOF rewrite"),
        (recorded.pieces != now.pieces, "LC chunked form"),
    ];
    if let Some((_, what)) = differs.iter().find(|(d, _)| *d) {
        return Some(format!("{what} differs from {file}"));
    }
    let asked = newest.asks.iter().zip(answers);
    for ((reply, q), (now_reply, _)) in asked.filter(|((_, q), _)| !is_accounting(&q.join(" "))) {
        if reply != now_reply {
            return Some(format!("{q:?} answers {now_reply}, {reply} in {file}"));
        }
    }
    None
}

/// The server the cases run on: unseeded by default (`bf-seed 0`), so that a filter's bytes do
/// not depend on a random seed; the seeded cases give their `SEED`.
fn recording_server() -> Server {
    Server::builder().module_arg("bf-seed", "0").start()
}

#[test]
#[ignore = "writes a new fixture file; run only when an encoding changes on purpose"]
fn record() {
    let file = std::env::var("LCBLOOM_GOLDEN_RECORD")
        .expect("set LCBLOOM_GOLDEN_RECORD to the new fixture's file name (see FIXTURES)");
    assert!(
        fixture_files().any(|f| f == file),
        "{file} is not in fixtures::FIXTURES"
    );
    let path = format!("{FIXTURE_DIR}/{file}");
    assert!(
        !std::path::Path::new(&path).exists(),
        "{path} exists: fixtures are never re-recorded, add a new one"
    );
    let older = by_case(fixture_files().filter(|f| *f != file));
    let server = recording_server();
    let all = cases();
    let names: Vec<&str> = all.iter().map(|(n, _, _)| *n).collect();
    let mut text = String::from(
        "# Golden payloads (tests/it/golden.rs): DUMP, BF.SCANDUMP chunks, LC AOF commands, answers.\n",
    );
    for ((name, setup, _), (rec, answers)) in all.iter().zip(recreate(&server, &names)) {
        let recordings = older.iter().find(|r| r[0].1.name == *name);
        if recordings.is_some_and(|r| difference(r, &rec, &answers).is_none()) {
            continue;
        }
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

/// The current build, running every case's commands, writes the bytes of the newest recording
/// of the case and answers as it did, and no encoding is larger than in any recording.
#[test]
fn current_build_encodes_as_recorded() {
    let recorded = by_case(fixture_files());
    let all = cases();
    let names: Vec<&str> = all.iter().map(|(n, _, _)| *n).collect();
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !recorded.iter().any(|r| r[0].1.name == **n))
        .collect();
    assert!(missing.is_empty(), "cases no fixture holds: {missing:?}");
    assert_eq!(recorded.len(), names.len(), "fixture cases not in cases()");
    let server = recording_server();
    let mut wrong = Vec::new();
    for (name, (now, answers)) in names.iter().zip(recreate(&server, &names)) {
        let recordings = recorded.iter().find(|r| r[0].1.name == *name).unwrap();
        if let Some(why) = difference(recordings, &now, &answers) {
            wrong.push(format!("{name}: {why}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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

/// The saved bytes of every fixture load and answer as they did when saved (before any write
/// to a counter; see `is_counter_write`).
#[test]
fn saved_payloads_load_and_answer() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, &["SET", "probe", "1"]);
    let probe: Vec<u8> = redis::cmd("DUMP").arg("probe").query(&mut c).unwrap();
    let version = split_dump(&probe).1;
    for (_, s) in load_all(fixture_files()) {
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
        // The pieces after the shell in any order give the same counter, in the form a
        // reload gives it (a counter left dense by its first piece reloaded as a list).
        let pieces = &s.recorded.pieces;
        let last_first = pieces.iter().take(1).chain(pieces.iter().skip(1).rev());
        let reversed: Vec<Vec<Vec<u8>>> = last_first.cloned().collect();
        for (how, commands) in [
            ("LC.LOADCHUNK", &s.recorded.aof),
            ("LC.LOADCHUNK pieces", pieces),
            ("LC.LOADCHUNK pieces, last first", &reversed),
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
            let info = |c: &mut redis::Connection| -> redis::Value {
                redis::cmd("LC.INFO").arg("k").query(c).unwrap()
            };
            let loaded = info(&mut c);
            ok(&mut c, &["DEBUG", "RELOAD"]);
            assert_eq!(info(&mut c), loaded, "{how}: as a reload gives it");
        }
    }
}
