//! Hostile input through a real server (a fixed seed; `HOSTILE_SEED` explores others): tens of
//! thousands of random BF/LC commands with hostile arguments, thousands of RESTOREs of mutated DUMP
//! payloads with a valid CRC, thousands of BF.LOADCHUNK / LC.LOADCHUNK calls with mutated headers,
//! chunks and offsets. Every call must get an answer; afterwards the server must be alive, serve
//! correct results on fresh keys, and survive DEBUG RELOAD with whatever mutated values it
//! accepted.

use crate::common::fixtures::{saved_counters, unhex};
use crate::common::fuzz::{
    dump_payload, module_strings, module_value, mutate, mutated_payload, split_dump, Rng,
    MODULE_FRAME,
};
use crate::common::*;
use redis::Value;

const SEED: u64 = 0x6c63_626c_6f6f_6d06;

/// Sends one command; Ok(true) for a value, Ok(false) for an error reply, Err if no answer.
fn send(c: &mut redis::Connection, args: &[Vec<u8>]) -> Result<bool, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(&args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(a.as_slice());
    }
    match cmd.query::<Value>(c) {
        Ok(_) => Ok(true),
        Err(e) if e.code().is_some() => Ok(false),
        Err(e) => Err(format!("no answer: {e}")),
    }
}

/// Tallies answers by kind.
#[derive(Default, Debug)]
struct Tally {
    sent: u64,
    values: u64,
    errors: u64,
}

impl Tally {
    fn record(&mut self, what: &str, args: &[Vec<u8>], answer: Result<bool, String>) -> bool {
        self.sent += 1;
        match answer {
            Ok(true) => {
                self.values += 1;
                true
            }
            Ok(false) => {
                self.errors += 1;
                false
            }
            Err(e) => {
                let shown: Vec<String> = args
                    .iter()
                    .map(|a| String::from_utf8_lossy(&a[..a.len().min(80)]).into_owned())
                    .collect();
                panic!("{what}: {e}; command {shown:?}");
            }
        }
    }
}

const COMMANDS: [&str; 17] = [
    "BF.RESERVE",
    "BF.ADD",
    "BF.MADD",
    "BF.INSERT",
    "BF.EXISTS",
    "BF.MEXISTS",
    "BF.INFO",
    "BF.CARD",
    "BF.SCANDUMP",
    "BF.LOADCHUNK",
    "LC.RESERVE",
    "LC.ADD",
    "LC.INSERT",
    "LC.COUNT",
    "LC.MERGE",
    "LC.INFO",
    "LC.LOADCHUNK",
];

const KEYS: [&str; 13] = [
    "bf:a",
    "bf:b",
    "bf:w",
    "bf:c",
    "lc:a",
    "lc:b",
    "lc:c",
    "string",
    "list",
    "missing",
    "",
    "k\0\x01",
    "\u{1F600}",
];

const WORDS: [&str; 51] = [
    "0",
    "1",
    "-1",
    "2",
    "0.5",
    "0.01",
    "1e-15",
    "1e-16",
    "1e-300",
    "0.999999999",
    "1",
    "1.0",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "+inf",
    "1e308",
    "-0",
    " 1",
    "1 ",
    "0x10",
    "100",
    "1000",
    "32768",
    "32769",
    "1125899906842624",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "CAPACITY",
    "ERROR",
    "EXPANSION",
    "NONSCALING",
    "NOCREATE",
    "WINDOW",
    "AT",
    "LAYOUT",
    "SEED",
    "seed",
    "window",
    "ITEMS",
    "items",
    "SIZE",
    "FILTERS",
    "EXPANSIONS",
    "FOO",
    "",
    "item",
];

fn hostile_arg(rng: &mut Rng) -> Vec<u8> {
    match rng.below(100) {
        0 => {
            // Megabyte-long: as an item, a number, a keyword or a payload, all must be refused
            // or handled.
            let fill = *rng.pick(&[b'x', b'9', 0u8, 0xff]);
            vec![fill; 1 << 20]
        }
        1..=10 => {
            let len = rng.below(64);
            rng.bytes(len)
        }
        11..=20 => format!("item:{}", rng.below(5000)).into_bytes(),
        21..=25 => rng.pick(&KEYS).as_bytes().to_vec(),
        _ => rng.pick(&WORDS).as_bytes().to_vec(),
    }
}

fn random_command(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut args = vec![rng.pick(&COMMANDS).as_bytes().to_vec()];
    if rng.below(20) != 0 {
        args.push(rng.pick(&KEYS).as_bytes().to_vec());
    }
    let n = match rng.below(10) {
        0 => 0,
        1..=7 => rng.below(6),
        _ => rng.below(40),
    };
    args.extend((0..n).map(|_| hostile_arg(rng)));
    args
}

/// Keys of other types, and module keys of both kinds, for WRONGTYPE paths.
fn seed_keys(c: &mut redis::Connection) {
    ok(c, &["SET", "string", "v"]);
    ok(c, &["RPUSH", "list", "a", "b"]);
    ok(c, &["BF.RESERVE", "bf:a", "0.01", "100"]);
    ok(c, &["BF.RESERVE", "bf:b", "0.1", "10", "NONSCALING"]);
    ok(c, &["BF.RESERVE", "bf:w", "0.01", "100", "WINDOW", "60"]);
    ok(c, &["LC.RESERVE", "lc:a", "0.01", "1000"]);
    ok(c, &["LC.ADD", "lc:b", "x", "y"]);
}

/// Values of every shape whose DUMPs and dumps seed the mutations.
fn seed_values(c: &mut redis::Connection) -> Vec<&'static str> {
    ok(c, &["BF.RESERVE", "s:bf-small", "0.5", "1", "NONSCALING"]);
    ok(
        c,
        &["BF.RESERVE", "s:bf-fixed", "0.01", "200", "NONSCALING"],
    );
    ok(
        c,
        &["BF.RESERVE", "s:bf-scaled", "0.1", "10", "EXPANSION", "2"],
    );
    // Sparse sets then a bit array, a bit array alone, a blocked chain of sparse sets (each
    // with a random seed: encoding version 4), and unseeded (versions 1 to 3).
    ok(c, &["BF.RESERVE", "s:bf-mixed", "0.01", "5000"]);
    ok(
        c,
        &["BF.RESERVE", "s:bf-unseeded", "0.01", "5000", "SEED", "0"],
    );
    ok(
        c,
        &[
            "BF.RESERVE",
            "s:bf-unseeded-bits",
            "0.01",
            "10000",
            "NONSCALING",
            "SEED",
            "0",
        ],
    );
    ok(
        c,
        &["BF.RESERVE", "s:bf-bits", "0.01", "10000", "NONSCALING"],
    );
    ok(
        c,
        &[
            "BF.RESERVE",
            "s:bf-blocked",
            "0.01",
            "40",
            "LAYOUT",
            "blocked",
        ],
    );
    // Windowed: scaled (layers), and non-scaling with items in several generations (each
    // with a random seed: windowed encoding version 2), and unseeded (version 1).
    ok(
        c,
        &["BF.RESERVE", "s:bf-window", "0.05", "20", "WINDOW", "3600"],
    );
    ok(
        c,
        &[
            "BF.RESERVE",
            "s:bf-window-unseeded",
            "0.05",
            "20",
            "WINDOW",
            "3600",
            "SEED",
            "0",
        ],
    );
    ok(
        c,
        &[
            "BF.RESERVE",
            "s:bf-window-fixed",
            "0.01",
            "200",
            "NONSCALING",
            "WINDOW",
            "4",
        ],
    );
    for at in ["1000", "2000", "3000"] {
        let mut q = redis::cmd("BF.INSERT");
        q.arg("s:bf-window-fixed").arg("AT").arg(at).arg("ITEMS");
        q.arg((0..40).map(|i| format!("{at}:{i}")).collect::<Vec<_>>());
        let _: Value = q.query(c).unwrap();
    }
    ok(c, &["LC.RESERVE", "s:lc-exact", "0.01", "1000"]);
    ok(c, &["LC.RESERVE", "s:lc-tokens", "0.01", "50000"]);
    ok(c, &["LC.RESERVE", "s:lc-registers", "0.05", "2000"]);
    ok(c, &["LC.RESERVE", "s:lc-coarse", "0.1", "100"]);
    let mut items = vec!["MADD".to_string()];
    items.extend((0..150).map(|i| format!("i{i}")));
    for (key, n) in [
        ("s:bf-fixed", 150),
        ("s:bf-scaled", 100),
        ("s:bf-mixed", 5_100),
        ("s:bf-unseeded", 5_100),
        ("s:bf-unseeded-bits", 100),
        ("s:bf-bits", 100),
        ("s:bf-blocked", 100),
        ("s:bf-window", 100),
        ("s:bf-window-unseeded", 100),
        ("s:lc-exact", 10),
        ("s:lc-tokens", 400),
        ("s:lc-registers", 1000),
        ("s:lc-coarse", 3000),
    ] {
        let items: Vec<String> = (0..n).map(|i| format!("i{i}")).collect();
        let cmd = if key.starts_with("s:bf") {
            "BF.MADD"
        } else {
            "LC.ADD"
        };
        let mut q = redis::cmd(cmd);
        q.arg(key).arg(&items);
        let _: Value = q.query(c).unwrap();
    }
    vec![
        "s:bf-small",
        "s:bf-fixed",
        "s:bf-scaled",
        "s:bf-mixed",
        "s:bf-unseeded",
        "s:bf-unseeded-bits",
        "s:bf-bits",
        "s:bf-blocked",
        "s:bf-window",
        "s:bf-window-unseeded",
        "s:bf-window-fixed",
        "s:lc-exact",
        "s:lc-tokens",
        "s:lc-registers",
        "s:lc-coarse",
    ]
}

/// The whole BF.SCANDUMP of a key: header, then (iterator, chunk) pairs.
fn scandump(c: &mut redis::Connection, key: &str) -> (Vec<u8>, Vec<(i64, Vec<u8>)>) {
    let mut chunks = Vec::new();
    scandump_each(c, key, 0, |_, next, data| chunks.push((next, data)));
    let (_, header) = chunks.remove(0);
    (header, chunks)
}

/// The counter's encoding inside the RDB value of a linear counter (what LC.LOADCHUNK takes):
/// the frame (type byte, module id), string opcode 5, RDB length, the bytes (uncompressed: the
/// server runs with `rdbcompression no`), EOF opcode.
fn lc_encoding(value: &[u8]) -> Vec<u8> {
    let strings = module_strings(value);
    assert_eq!(strings.len(), 1, "one string, then EOF");
    strings[0].to_vec()
}

/// Uses a key that may hold a just-accepted hostile value: every call must answer.
fn exercise(c: &mut redis::Connection, tally: &mut Tally, key: &[u8]) {
    for cmd in [
        &["BF.EXISTS", "x"][..],
        &["BF.ADD", "new-item"],
        &["BF.MADD", "a", "b", "c", "d", "e", "f", "g", "h"],
        &["BF.INFO"],
        &["BF.CARD"],
        &["BF.SCANDUMP", "0"],
        &["BF.SCANDUMP", "1"],
        &["LC.COUNT"],
        &["LC.ADD", "a", "b", "c"],
        &["LC.INFO"],
        &["MEMORY", "USAGE"],
    ] {
        let mut args = vec![cmd[0].as_bytes().to_vec(), key.to_vec()];
        args.extend(cmd[1..].iter().map(|a| a.as_bytes().to_vec()));
        let answer = send(c, &args);
        tally.record("exercising an accepted value", &args, answer);
    }
    check_counter_reports(c, key);
    let args = vec![b"COPY".to_vec(), key.to_vec(), [key, b":copy"].concat()];
    let answer = send(c, &args);
    tally.record("COPY", &args, answer);
    let args = vec![b"LC.MERGE".to_vec(), b"merged".to_vec(), key.to_vec()];
    let answer = send(c, &args);
    tally.record("LC.MERGE", &args, answer);
}

/// What a key holding an accepted linear counter reports must be possible: `LC.COUNT` as
/// `LC.INFO`'s `Count`, never negative and at least the bits or indicators it knows set (less
/// the rounding a sketch's running estimate is allowed, src/lc/running.rs "Bounds"), and a
/// standard error finite and not negative. Other keys are skipped.
fn check_counter_reports(c: &mut redis::Connection, key: &[u8]) {
    let Ok(Value::Array(info)) = redis::cmd("LC.INFO").arg(key).query::<Value>(c) else {
        return;
    };
    let field = |name: &str| {
        let at = info
            .iter()
            .position(|v| *v == Value::BulkString(name.into()));
        at.map(|i| info[i + 1].clone())
    };
    let shown = String::from_utf8_lossy(key).into_owned();
    let (Some(Value::Int(count)), Some(Value::Int(set))) = (field("Count"), field("Bits set"))
    else {
        panic!("LC.INFO {shown}: {info:?}");
    };
    let error: f64 = match field("Standard error") {
        Some(Value::BulkString(text)) => String::from_utf8_lossy(&text).parse().unwrap(),
        other => panic!("LC.INFO {shown}: standard error {other:?}"),
    };
    let counted: i64 = redis::cmd("LC.COUNT").arg(key).query(c).unwrap();
    assert_eq!(counted, count, "LC.COUNT {shown}");
    assert!(count >= 0, "LC.COUNT {shown}: {count}");
    assert!(
        count as f64 >= set as f64 * (1.0 - 1e-6) - 0.5,
        "{shown}: count {count} with {set} set"
    );
    assert!(
        error.is_finite() && error >= 0.0,
        "{shown}: standard error {error}"
    );
}

/// A registers counter (capacity 1, error rate 0.3, precision 4, 185 indicators known set)
/// with its running estimate, 1,080.75, at bytes 68–75.
const REGISTERS_1080: &str = "03010501333333333333d33f060480ffaf709cbf0548fe3b009faf01ccf00f8cef\
    6fe0d89f83b7ff1700c4fbc0a1fd0650f83f00310fe2cc7e8b50d877a8fe01e2ff0f102953683d03e390405565ad\
    73aa1eb840";

/// The same counter with every register full (highest level 236, every window level set, so
/// no item changes it) and an estimate of 10^22: possible (about 2^64 items per indicator),
/// and beyond what an integer reply holds.
const FULL_REGISTERS: &str = "03010501333333333333d33f0604ffff67ffff3ffbffffd9ffffcffeff7ff6ff\
    ffb3ffff9ffdffffecffff67ffff3ffbffffd9ffffcffeff7ff6ffffb3ffff9ffdffffec92d54d06cff08044a55c\
    c3f129633d48";

/// Running estimates that no history of adds and unions gives the counter's indicators are
/// refused, by `LC.LOADCHUNK` and `RESTORE`; one that some history gives loads, and counts
/// past 2^63 − 1 reply with that number, never a negative one.
#[test]
fn impossible_running_estimates_are_refused() {
    let server = Server::builder().arg("rdbcompression", "no").start();
    let mut c = server.conn();
    let good = unhex(REGISTERS_1080);
    let with_estimate_bits = |flip: u64| {
        let mut v = good.clone();
        let bits = u64::from_le_bytes(v[68..76].try_into().unwrap()) ^ flip;
        v[68..76].copy_from_slice(&bits.to_le_bytes());
        v
    };
    let load = |c: &mut redis::Connection, key: &str, payload: &[u8]| {
        redis::cmd("LC.LOADCHUNK")
            .arg(key)
            .arg(payload)
            .query::<Value>(c)
    };
    load(&mut c, "good", &good).unwrap();
    assert_eq!(ok(&mut c, &["LC.COUNT", "good"]), Value::Int(1_081));
    check_counter_reports(&mut c, b"good");
    // One bit of the estimate flipped: 1.45·10^157 (LC.COUNT answered −1), 6.0·10^−306
    // (LC.COUNT answered 0 for 185 indicators set).
    let (dump, version) = split_dump(
        &redis::cmd("DUMP")
            .arg("good")
            .query::<Vec<u8>>(&mut c)
            .unwrap(),
    );
    for bit in [61, 62] {
        let bad = with_estimate_bits(1 << bit);
        assert_eq!(
            err_text(load(&mut c, "bad", &bad)),
            "ERR invalid counter encoding: sketch estimate out of range"
        );
        let value = module_value(&dump[..MODULE_FRAME], &[&bad]);
        let restored = redis::cmd("RESTORE")
            .arg("bad")
            .arg(0)
            .arg(dump_payload(&value, version))
            .query::<Value>(&mut c);
        assert!(err_text(restored).contains("Bad data format"));
        assert_eq!(ok(&mut c, &["EXISTS", "bad"]), Value::Int(0));
    }
    load(&mut c, "full", &unhex(FULL_REGISTERS)).unwrap();
    assert_eq!(ok(&mut c, &["LC.COUNT", "full"]), Value::Int(i64::MAX));
    assert_eq!(
        ok(&mut c, &["LC.COUNT", "full", "good"]),
        Value::Int(i64::MAX)
    );
    check_counter_reports(&mut c, b"full");
    ok(&mut c, &["LC.MERGE", "good", "full"]);
    check_counter_reports(&mut c, b"good");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(ok(&mut c, &["LC.COUNT", "good"]), Value::Int(i64::MAX));
}

#[test]
fn hostile_commands_payloads_and_chunks() {
    // Small per-key limit: hostile sizes are refused quickly. No compression in DUMP payloads:
    // mutations land in the module's bytes, not in LZF framing.
    let server = Server::builder()
        .arg("rdbcompression", "no")
        .module_arg("max-memory-per-key", "8388608")
        .start();
    let mut c = server.conn();
    let mut rng = Rng::seeded_from_env("HOSTILE_SEED", SEED);
    seed_keys(&mut c);

    // 1. Random commands with hostile arguments.
    let mut commands = Tally::default();
    for i in 0..50_000 {
        let args = random_command(&mut rng);
        let answer = send(&mut c, &args);
        commands.record("command", &args, answer);
        if i % 10_000 == 9_999 {
            // Keys fill up and stop exercising creation paths: start over now and then.
            ok(&mut c, &["FLUSHALL"]);
            seed_keys(&mut c);
        }
    }

    // 2. RESTORE of mutated DUMP payloads carrying a valid CRC.
    let sources = seed_values(&mut c);
    let mut corpus = Vec::new();
    let mut version = [0u8; 2];
    for key in &sources {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(*key).query(&mut c).unwrap();
        let (value, v) = split_dump(&dump);
        version = v;
        corpus.push(value);
    }
    // Counters in encoding versions 1 and 2, which still load.
    let (saved_encodings, saved_dumps) = saved_counters();
    corpus.extend(saved_dumps);
    let mut restores = Tally::default();
    let mut exercised = Tally::default();
    for i in 0..5_000 {
        let key = format!("r:{i}").into_bytes();
        let args = vec![
            b"RESTORE".to_vec(),
            key.clone(),
            b"0".to_vec(),
            mutated_payload(&mut rng, &corpus, version),
        ];
        let answer = send(&mut c, &args);
        if restores.record("RESTORE", &args, answer) {
            exercise(&mut c, &mut exercised, &key);
        }
    }

    // 3. BF.LOADCHUNK sessions: a (sometimes mutated) header, then valid, mutated and
    //    misplaced chunks; and LC.LOADCHUNK of mutated encodings.
    let mut dumps = Vec::new();
    for key in sources.iter().filter(|k| k.starts_with("s:bf")) {
        dumps.push(scandump(&mut c, key));
    }
    let headers: Vec<Vec<u8>> = dumps.iter().map(|(h, _)| h.clone()).collect();
    let mut chunks = Tally::default();
    let mut sessions = 0;
    while chunks.sent < 6_000 {
        sessions += 1;
        let key = format!("l:{sessions}").into_bytes();
        let (header, parts) = rng.pick(&dumps).clone();
        let header = if rng.below(5) == 0 {
            mutate(&mut rng, &header, &headers)
        } else {
            header
        };
        let args = vec![b"BF.LOADCHUNK".to_vec(), key.clone(), b"1".to_vec(), header];
        let answer = send(&mut c, &args);
        if !chunks.record("BF.LOADCHUNK header", &args, answer) {
            continue;
        }
        for _ in 0..1 + rng.below(6) {
            let (iterator, data) = if parts.is_empty() {
                (rng.next() as i64, rng.bytes(8))
            } else {
                rng.pick(&parts).clone()
            };
            let (iterator, data) = match rng.below(6) {
                0 => (iterator, data),
                1 => (iterator, mutate(&mut rng, &data, &[])),
                2 => (iterator + rng.below(17) as i64 - 8, data),
                3 => (*rng.pick(&[0, -1, 2, i64::MAX, i64::MIN]), data),
                4 => {
                    let cut = rng.below(data.len() + 1);
                    (iterator - cut as i64, data[..data.len() - cut].to_vec())
                }
                _ => {
                    let len = rng.below(64);
                    (rng.below(4096) as i64, rng.bytes(len))
                }
            };
            let args = vec![
                b"BF.LOADCHUNK".to_vec(),
                key.clone(),
                iterator.to_string().into_bytes(),
                data,
            ];
            let answer = send(&mut c, &args);
            chunks.record("BF.LOADCHUNK chunk", &args, answer);
        }
        exercise(&mut c, &mut exercised, &key);
    }
    let mut lc_corpus = saved_encodings;
    for key in sources.iter().filter(|k| k.starts_with("s:lc")) {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(*key).query(&mut c).unwrap();
        lc_corpus.push(lc_encoding(&split_dump(&dump).0));
    }
    let mut lc_chunks = Tally::default();
    let mut lc_pieces = Tally::default();
    for i in 0..2_000 {
        let key = format!("m:{i}").into_bytes();
        let base = rng.pick(&lc_corpus).clone();
        let payload = mutate(&mut rng, &base, &lc_corpus);
        let args = vec![b"LC.LOADCHUNK".to_vec(), key.clone(), payload];
        let answer = send(&mut c, &args);
        if lc_chunks.record("LC.LOADCHUNK", &args, answer) {
            // Pieces of a bitmap, in and out of range, into whatever mode it loaded in.
            for _ in 0..3 {
                let len = 1 + rng.below(64);
                let iterator = 1 + len + rng.below(3_000);
                let args = vec![
                    b"LC.LOADCHUNK".to_vec(),
                    key.clone(),
                    iterator.to_string().into_bytes(),
                    rng.bytes(len),
                ];
                let answer = send(&mut c, &args);
                lc_pieces.record("LC.LOADCHUNK piece", &args, answer);
            }
            exercise(&mut c, &mut exercised, &key);
        }
    }

    println!("random commands: {commands:?}");
    println!("RESTOREs of mutated payloads: {restores:?}");
    println!("BF.LOADCHUNK calls ({sessions} sessions): {chunks:?}");
    println!("LC.LOADCHUNK calls: {lc_chunks:?}");
    println!("LC.LOADCHUNK pieces: {lc_pieces:?}");
    println!("calls on accepted hostile values: {exercised:?}");
    assert!(commands.values > 1_000 && commands.errors > 1_000);
    assert!(restores.errors > 0 && chunks.errors > 0 && lc_chunks.errors > 0);
    assert!(lc_pieces.values > 0 && lc_pieces.errors > 0);

    // 4. The server is alive, survives a reload with every accepted value, and still serves
    //    correct results.
    let mut server = server;
    assert!(server.alive());
    let before: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    ok(&mut c, &["DEBUG", "RELOAD"]);
    let after: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(before, after, "DEBUG RELOAD changed the dataset");
    check_fresh_keys(&mut c);
    assert!(server.alive());
}

/// A fresh filter and counter behave as they should.
fn check_fresh_keys(c: &mut redis::Connection) {
    ok(c, &["BF.RESERVE", "fresh:bf", "0.01", "1000"]);
    let items: Vec<String> = (0..1000).map(|i| format!("member:{i}")).collect();
    let _: Value = redis::cmd("BF.MADD")
        .arg("fresh:bf")
        .arg(&items)
        .query(c)
        .unwrap();
    let found: Vec<bool> = redis::cmd("BF.MEXISTS")
        .arg("fresh:bf")
        .arg(&items)
        .query(c)
        .unwrap();
    assert!(found.iter().all(|f| *f), "a member is missing");
    let others: Vec<String> = (0..10_000).map(|i| format!("other:{i}")).collect();
    let hits: Vec<bool> = redis::cmd("BF.MEXISTS")
        .arg("fresh:bf")
        .arg(&others)
        .query(c)
        .unwrap();
    let fp = hits.iter().filter(|h| **h).count();
    assert!(fp < 300, "{fp} false positives in 10,000 at 1%");
    let _: Value = redis::cmd("LC.ADD")
        .arg("fresh:lc")
        .arg(&others)
        .query(c)
        .unwrap();
    let n: i64 = redis::cmd("LC.COUNT").arg("fresh:lc").query(c).unwrap();
    assert!((9_500..=10_500).contains(&n), "LC.COUNT {n} for 10,000");
}
