//! Hostile RedisBloom data through a real lcbloom server (a fixed seed; `HOSTILE_SEED` explores
//! others): thousands of `RESTORE`s of mutated RedisBloom `DUMP` payloads carrying a valid CRC (the
//! values RedisBloom 2.8.2 made at test time, and legacy encver 0–3 layouts), and thousands of
//! `BF.LOADCHUNK` calls with mutated RedisBloom headers and chunks. Every call must be answered,
//! the server must answer `PING` throughout, every accepted value must serve every command, and
//! `DEBUG RELOAD` must give back exactly the dataset it saved. (RedisBloom 2.8.2 itself aborts on
//! some of these payloads: redisbloom-format.md §6.4.)

use crate::common::fixtures::unhex;
use crate::common::fuzz::{mutate, mutated_payload, split_dump, Rng};
use crate::common::redisbloom as rb;
use crate::common::*;
use redis::{Connection, Value};

const SEED: u64 = 0x7262_686f_7374_696c;

/// Answers seen: values and error replies (no answer at all panics).
#[derive(Default, Debug)]
struct Answers {
    values: u64,
    errors: u64,
}

impl Answers {
    fn send(&mut self, c: &mut Connection, args: &[&[u8]]) -> bool {
        let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
        for a in &args[1..] {
            cmd.arg(*a);
        }
        match cmd.query::<Value>(c) {
            Ok(_) => {
                self.values += 1;
                true
            }
            Err(e) if e.code().is_some() => {
                self.errors += 1;
                false
            }
            Err(e) => panic!("no answer to {:?}: {e}", String::from_utf8_lossy(args[0])),
        }
    }
}

/// Every command on a key that may hold an accepted hostile value.
fn exercise(c: &mut Connection, answers: &mut Answers, key: &[u8]) {
    let copy = [key, b":copy"].concat();
    let commands: [&[&[u8]]; 12] = [
        &[b"BF.EXISTS", key, b"x"],
        &[b"BF.MEXISTS", key, b"a", b"b", b"c"],
        &[b"BF.ADD", key, b"new-item"],
        &[
            b"BF.MADD", key, b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h",
        ],
        &[b"BF.INSERT", key, b"NOCREATE", b"ITEMS", b"i", b"j"],
        &[b"BF.INFO", key],
        &[b"BF.CARD", key],
        &[b"BF.SCANDUMP", key, b"0"],
        &[b"BF.SCANDUMP", key, b"1"],
        &[b"MEMORY", b"USAGE", key],
        &[b"DEBUG", b"DIGEST-VALUE", key],
        &[b"COPY", key, &copy],
    ];
    for args in commands {
        answers.send(c, args);
    }
}

fn ping(c: &mut Connection) {
    let pong: String = redis::cmd("PING").query(c).expect("PING");
    assert_eq!(pong, "PONG");
}

#[test]
fn mutated_redisbloom_payloads_and_chunks() {
    let Some(module) = rb::module() else { return };
    // The seeds: RedisBloom's own values (uncompressed, so mutations land in the fields), the
    // 100,000-capacity one left out for speed, plus the legacy layouts.
    let a = Server::builder()
        .module(&module)
        .arg("rdbcompression", "no")
        .start();
    let mut ca = a.conn();
    let samples = rb::create_samples(&mut ca);
    let mut corpus = Vec::new();
    let mut version = rb::RDB_VERSION;
    for s in samples.iter().filter(|s| s.key != "rb:big") {
        let (value, v) = split_dump(
            &redis::cmd("DUMP")
                .arg(&s.key)
                .query::<Vec<u8>>(&mut ca)
                .unwrap(),
        );
        version = v;
        corpus.push(value);
    }
    corpus.extend(rb::legacy_samples().into_iter().map(|(_, value)| value));
    let dumps: Vec<Vec<(i64, Vec<u8>)>> = samples
        .iter()
        .filter(|s| s.key != "rb:big")
        .map(|s| rb::scandump(&mut ca, &s.key))
        .collect();

    let server = Server::builder()
        .arg("rdbcompression", "no")
        .module_arg("max-memory-per-key", "8388608")
        .start();
    let mut c = server.conn();
    let mut rng = Rng::seeded_from_env("HOSTILE_SEED", SEED);

    // 1. RESTORE of mutated payloads with a valid CRC.
    let (mut restores, mut accepted) = (Answers::default(), Answers::default());
    for i in 0..4_000 {
        let key = format!("r:{i}").into_bytes();
        let payload = mutated_payload(&mut rng, &corpus, version);
        if restores.send(&mut c, &[b"RESTORE", &key, b"0", &payload]) {
            exercise(&mut c, &mut accepted, &key);
        }
        if i % 100 == 0 {
            ping(&mut c);
        }
    }

    // 2. BF.LOADCHUNK sessions: a (sometimes mutated) RedisBloom header, then valid, mutated
    //    and misplaced chunks.
    let headers: Vec<Vec<u8>> = dumps.iter().map(|d| d[0].1.clone()).collect();
    let (mut chunks, mut sessions) = (Answers::default(), 0);
    while chunks.values + chunks.errors < 4_000 {
        sessions += 1;
        let key = format!("l:{sessions}").into_bytes();
        let parts = rng.pick(&dumps).clone();
        let header = match rng.below(3) {
            0 => mutate(&mut rng, &parts[0].1, &headers),
            _ => parts[0].1.clone(),
        };
        if !chunks.send(&mut c, &[b"BF.LOADCHUNK", &key, b"1", &header]) {
            continue;
        }
        for _ in 0..1 + rng.below(6) {
            let (it, data) = rng.pick(&parts[1..]).clone();
            let (it, data) = match rng.below(5) {
                0 => (it, data),
                1 => (it, mutate(&mut rng, &data, &[])),
                2 => (it + rng.below(17) as i64 - 8, data),
                3 => (*rng.pick(&[0, -1, 1, i64::MAX, i64::MIN]), data),
                _ => {
                    let cut = rng.below(data.len() + 1);
                    (it - cut as i64, data[..data.len() - cut].to_vec())
                }
            };
            chunks.send(
                &mut c,
                &[b"BF.LOADCHUNK", &key, it.to_string().as_bytes(), &data],
            );
        }
        exercise(&mut c, &mut accepted, &key);
        if sessions % 100 == 0 {
            ping(&mut c);
        }
    }
    println!("RESTOREs of mutated RedisBloom payloads: {restores:?}");
    println!("BF.LOADCHUNK calls ({sessions} sessions): {chunks:?}");
    println!("calls on accepted values: {accepted:?}");
    assert!(restores.values + restores.errors >= 3_000);
    assert!(
        restores.values > 100 && restores.errors > 1_000,
        "{restores:?}"
    );
    assert!(chunks.values > 100 && chunks.errors > 100, "{chunks:?}");

    // 3. Alive, and DEBUG RELOAD gives back exactly what it saved.
    let mut server = server;
    assert!(server.alive());
    ping(&mut c);
    let before: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    ok(&mut c, &["DEBUG", "RELOAD"]);
    let after: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(before, after, "DEBUG RELOAD changed the dataset");
    let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!(keys > 0, "no key survived DEBUG RELOAD");
    ping(&mut c);
}

/// A RedisBloom header may claim up to 2^64 − 1 items (RedisBloom checks only that its links'
/// counts sum to that): the counts reply as the largest integer, never a negative one, and an
/// add that would wrap the count is refused, so the key still saves and loads (it wrapped to
/// 0, and the RDB holding it no longer loaded).
#[test]
fn a_count_that_would_wrap_is_refused_and_the_key_still_loads() {
    let server = Server::start();
    let mut c = server.conn();
    let header = unhex(
        "ffffffffffffffff01000000050000000200000090000000000000008004000000000000\
         ffffffffffffffff7b14ae47e17a743fe9862fb2350e264008000000640000000000000000",
    );
    let load = |c: &mut Connection, it: i64, data: &[u8]| {
        redis::cmd("BF.LOADCHUNK")
            .arg("k")
            .arg(it)
            .arg(data)
            .query::<()>(c)
    };
    load(&mut c, 1, &header).unwrap();
    load(&mut c, 145, &[0; 144]).unwrap();
    let card = |c: &mut Connection| redis::cmd("BF.CARD").arg("k").query::<i64>(c).unwrap();
    assert_eq!(card(&mut c), i64::MAX);
    let items: Vec<i64> = redis::cmd("BF.INFO")
        .arg("k")
        .arg("ITEMS")
        .query(&mut c)
        .unwrap();
    assert_eq!(items, [i64::MAX]);
    let added = redis::cmd("BF.ADD")
        .arg("k")
        .arg("hello")
        .query::<bool>(&mut c);
    assert_eq!(err_text(added), "ERR filter too large (capacity overflows)");
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(card(&mut c), i64::MAX);
    let exists: bool = redis::cmd("BF.EXISTS")
        .arg("k")
        .arg("hello")
        .query(&mut c)
        .unwrap();
    assert!(!exists);
}
