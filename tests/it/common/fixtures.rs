//! The golden fixture files (`tests/fixtures/`): which there are, oldest first, and their
//! format. Each was written once by `golden::record` and is never edited; golden.rs checks the
//! current build against them, and the fuzzing tests take their counters as seeds.
//!
//! One record a line: `case NAME`, `run ARG...` (the set-up commands, long item lists
//! abridged; `golden::cases()` holds them whole), `dump KEY HEX` (the whole DUMP payload),
//! `chunk KEY ITER HEX` (BF.SCANDUMP), `aof KEY ARG... HEX` (LC.LOADCHUNK from an AOF rewrite,
//! payload as the last field, hex), `piece KEY ARG... HEX` (the same counter's chunked AOF
//! form, `lc_v1_*` cases), `ask REPLY | ARG...` (a query and its reply, integers and arrays of
//! integers).

use super::fuzz::split_dump;
use std::fmt::Write as _;

pub const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// A golden fixture file.
pub struct Fixture {
    pub file: &'static str,
    /// Its cases may be larger than in older files: a sizing rule that spends bytes on a
    /// guarantee. A case's sizes are compared only with its recordings from the newest such
    /// file that holds it on.
    pub resizes: bool,
}

const fn fixture(file: &'static str) -> Fixture {
    Fixture {
        file,
        resizes: false,
    }
}

const fn resizing(file: &'static str) -> Fixture {
    Fixture {
        file,
        resizes: true,
    }
}

/// Oldest first: where a case is recorded more than once, the newest recording is the one the
/// current build must reproduce byte for byte.
pub const FIXTURES: &[Fixture] = &[
    // The first recording: Bloom encoding version 2 (bit arrays), counter encoding version 1.
    fixture("golden.txt"),
    // Bloom filters of every shape whose sub-filters are all bit arrays (encoding versions 1
    // and 2), from the last build to write them.
    fixture("golden-2026-11-23-bf.txt"),
    // Linear counters in encoding version 1 (64-bit hashes or one bitmap), from the last build
    // to write it: a counter in every mode version 2 distinguishes, and each one's chunked AOF
    // form.
    fixture("golden-2026-11-23-lc.txt"),
    // Encoding version 2 of linear counters (fingerprints, sparse mode, Elias–Fano streams):
    // every counter case again.
    fixture("golden-2026-11-23-lc2.txt"),
    // Linear counters past their exact set as sketches (counter encoding version 3: a token
    // list, then registers): every counter case that is now a sketch (exact sets keep their
    // version-2 bytes).
    fixture("golden-2026-11-23-lc3.txt"),
    // Bloom encoding version 3: sub-filters of small capacity are sparse sets of fingerprints,
    // whole in the header. Every Bloom case again, and a chain of sparse sets followed by a
    // bit array.
    fixture("golden-2026-11-23-bf-v3.txt"),
    // A small sub-filter is also sparse when its set outgrows the bit array by less than what
    // a separate bit array costs apart from its bits (still version 3): a 5% filter of 300,
    // and a small 0.5 one.
    fixture("golden-2026-11-23-bf-v3b.txt"),
    // Windowed filters (type lcbloomBW, encoding version 1): empty, items in three
    // generations, and a scaled one of several layers.
    fixture("golden-2026-11-23-bf-window.txt"),
    // Bloom encoding version 4: filters with a hash seed of their own (the seed after the
    // fixed fields): a sparse set, bit arrays alone, a blocked chain of both.
    fixture("golden-2026-11-23-bf-seed.txt"),
    // Windowed encoding version 2: windowed filters with a hash seed of their own (the seed
    // after the fixed fields): items in three generations, and a scaled one of several layers.
    fixture("golden-2026-11-24-bf-window-seed.txt"),
    // Non-scaling filters sized for 95% of their rate (`chain::NONSCALING_SHARE`), so that at
    // capacity they measure within it: every non-scaling Bloom case, a few bytes larger.
    resizing("golden-2026-11-25-bf-margin.txt"),
    // Standard bit arrays sized for a hash fewer where that costs under 0.5% of bits
    // (`filter::FEWER_PROBES_TOLERANCE`): every case with a standard bit array.
    resizing("golden-2026-11-25-bf-probes.txt"),
    // Windowed filters whose re-adds move an item's fingerprint to the newest generation (so
    // it is held once), and merged counters whose running variance leaves out the Poisson
    // variance of the number of items (exact counters of one size merging exactly): the
    // cases whose bytes changed, each no larger.
    fixture("golden-2026-11-27.txt"),
    // Merged counters whose running estimate is at least their largest source's count (a
    // union never counts fewer than its largest key): the merge case whose estimate was below.
    fixture("golden-2026-11-27-union-floor.txt"),
    // Merges of exact counters of several sizes whose running estimate is the exact number of
    // their distinct items (`union::distinct_across_sizes`), where it was the estimate of
    // their tokens: the merge case of two sizes.
    fixture("golden-2026-11-30-exact-sizes.txt"),
];

/// The fixture files, oldest first.
pub fn fixture_files() -> impl Iterator<Item = &'static str> + Clone {
    FIXTURES.iter().map(|f| f.file)
}

/// What a value looks like on the wire.
#[derive(Default, PartialEq, Debug, Clone)]
pub struct Recorded {
    pub dump: Vec<u8>,
    pub chunks: Vec<(i64, Vec<u8>)>,
    pub aof: Vec<Vec<Vec<u8>>>,
    pub pieces: Vec<Vec<Vec<u8>>>,
}

impl Recorded {
    /// The encoding's length in bytes: the DUMP value (without RDB version and CRC), and for a
    /// counter the payload of its one-command AOF form.
    pub fn sizes(&self) -> (usize, Option<usize>) {
        let aof = match self.aof.first().map(|a| a.as_slice()) {
            Some([.., payload]) => Some(payload.len()),
            _ => None,
        };
        (split_dump(&self.dump).0.len(), aof)
    }
}

/// Queries and their rendered replies.
pub type Answers = Vec<(String, Vec<String>)>;

/// One case as a fixture saved it.
#[derive(Default)]
pub struct Saved {
    pub name: String,
    pub recorded: Recorded,
    pub asks: Answers,
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

pub fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The cases of one fixture file, in its order.
pub fn load(file: &str) -> Vec<Saved> {
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

/// Every case of every fixture in `files`, oldest first, with the file that holds it.
pub fn load_all<'a>(files: impl IntoIterator<Item = &'a str>) -> Vec<(&'a str, Saved)> {
    files
        .into_iter()
        .flat_map(|file| load(file).into_iter().map(move |s| (file, s)))
        .collect()
}

/// The linear counters of every fixture (encoding versions 1 and 2): their encodings (the
/// `LC.LOADCHUNK` payloads of their AOF rewrite) and their DUMP values (without version and
/// CRC).
pub fn saved_counters() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut encodings, mut dumps) = (Vec::new(), Vec::new());
    for (_, s) in load_all(fixture_files()) {
        if s.name.starts_with("lc_") {
            dumps.push(split_dump(&s.recorded.dump).0);
            let whole = s.recorded.aof.into_iter().filter(|a| a.len() == 3);
            encodings.extend(whole.filter_map(|mut a| a.pop()));
        }
    }
    assert!(
        encodings.iter().filter(|e| e[0] == 1).count() >= 15,
        "version 1 encodings"
    );
    (encodings, dumps)
}
