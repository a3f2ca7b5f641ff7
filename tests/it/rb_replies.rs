//! Random valid `BF.*` commands answer on lcbloom exactly as on RedisBloom 2.8.2, in RESP2 and
//! RESP3: creations with every option, adds and lookups of batches with repeats, scaling,
//! non-scaling filters that fill up, `NOCREATE` on missing keys, `BF.INFO` whole and by field,
//! `BF.CARD`, deletes. The one reply that differs by design is `BF.INFO`'s `Size` (lcbloom's
//! own bytes), left out. Both modules run at tiny error rates (their defaults too), so that
//! false positives, which the two hash schemes place differently, are rare. Where the replies
//! differ, only a false positive may explain it (an item never given to the key that one
//! module says it holds; the key is then made again on both), and no reply may miss an item
//! the key was given. lcbloom answers at most 3 false positives a run. RedisBloom's small
//! filters answer more than their rate (seed 33 at 40,000 commands: one at 10⁻⁷ in a filter
//! of capacity 50 holding 40 items, and capacity-1 filters at 10⁻⁶ within 200 commands), so
//! capacities start at 50. Each run is fixed (lcbloom's seed and the draw are).
//! `LCBLOOM_RB_REPLIES_SEED` and `LCBLOOM_RB_REPLIES` (commands per run, default 20,000) draw
//! other runs. The error texts that differ: compat.rs.
use crate::common::fuzz::{env_number, Rng};
use crate::common::redisbloom as rb;
use crate::common::*;
use redis::{Connection, Value};
use std::collections::{HashMap, HashSet};

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4"];
const RATES: &[&str] = &["0.00001", "0.000001", "0.0000001"];
const CAPACITIES: &[&str] = &["50", "100", "200"];
const EXPANSIONS: &[&str] = &["1", "2", "3", "4"];
const FIELDS: &[&str] = &["CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION", "items"];
/// Both modules' defaults for keys a write creates.
const DEFAULT_RATE: &str = "0.000001";

fn pick<'a>(rng: &mut Rng, of: &[&'a str]) -> &'a str {
    of[rng.below(of.len())]
}

fn items(rng: &mut Rng) -> Vec<String> {
    let mut out: Vec<String> = (0..1 + rng.below(12))
        .map(|_| format!("i{}", rng.below(600)))
        .collect();
    if rng.below(5) == 0 {
        out.push(out[0].clone());
    }
    out
}

fn command(rng: &mut Rng) -> Vec<String> {
    let key = pick(rng, KEYS).to_string();
    let mut c: Vec<String> = Vec::new();
    let mut put = |parts: &[&str]| c.extend(parts.iter().map(|p| p.to_string()));
    match rng.below(100) {
        0..20 => put(&["BF.ADD", &key, &items(rng)[0]]),
        20..35 => {
            put(&["BF.MADD", &key]);
            c.extend(items(rng));
        }
        35..45 => put(&["BF.EXISTS", &key, &items(rng)[0]]),
        45..55 => {
            put(&["BF.MEXISTS", &key]);
            c.extend(items(rng));
        }
        55..62 => {
            put(&["BF.RESERVE", &key, pick(rng, RATES), pick(rng, CAPACITIES)]);
            match rng.below(3) {
                0 => put(&["EXPANSION", pick(rng, EXPANSIONS)]),
                1 => put(&["NONSCALING"]),
                _ => {}
            }
        }
        62..76 => {
            put(&["BF.INSERT", &key]);
            if rng.below(2) == 0 {
                put(&["CAPACITY", pick(rng, CAPACITIES)]);
            }
            if rng.below(2) == 0 {
                put(&["ERROR", pick(rng, RATES)]);
            }
            match rng.below(6) {
                0 => put(&["EXPANSION", pick(rng, EXPANSIONS)]),
                1 => put(&["NONSCALING"]),
                _ => {}
            }
            if rng.below(5) == 0 {
                put(&["NOCREATE"]);
            }
            put(&["ITEMS"]);
            c.extend(items(rng));
        }
        76..86 => {
            put(&["BF.INFO", &key]);
            if rng.below(2) == 0 {
                put(&[pick(rng, FIELDS)]);
            }
        }
        86..94 => put(&["BF.CARD", &key]),
        _ => put(&["DEL", &key]),
    }
    c
}

/// The reply with `BF.INFO`'s `Size` taken out (the entry in RESP2's flat list or RESP3's
/// map, or the reply to `BF.INFO key SIZE`).
fn comparable(command: &[String], reply: redis::RedisResult<Value>) -> String {
    let reply = match reply {
        Ok(v) => v,
        Err(e) => return format!("error {}", err_text::<()>(Err(e))),
    };
    if command[0] != "BF.INFO" {
        return format!("{reply:?}");
    }
    if command.len() == 3 && command[2].eq_ignore_ascii_case("SIZE") {
        return "size".into();
    }
    let is_size = |v: &Value| {
        matches!(v, Value::SimpleString(s) if s == "Size")
            || matches!(v, Value::BulkString(b) if b == b"Size")
    };
    match reply {
        Value::Array(mut flat) => {
            if let Some(i) = flat.iter().position(is_size) {
                flat.drain(i..i + 2);
            }
            format!("{flat:?}")
        }
        Value::Map(mut pairs) => {
            pairs.retain(|(k, _)| !is_size(k));
            format!("{pairs:?}")
        }
        other => format!("{other:?}"),
    }
}

fn same_replies(resp3: bool) {
    let Some(module) = rb::module() else { return };
    let commands: usize = env_number("LCBLOOM_RB_REPLIES").unwrap_or(20_000);
    let seed = env_number("LCBLOOM_RB_REPLIES_SEED").unwrap_or(20261128);
    let theirs = Server::builder()
        .module(&module)
        .module_arg("ERROR_RATE", DEFAULT_RATE)
        .start();
    let ours = Server::builder()
        .fixed_seed()
        .module_arg("ERROR_RATE", DEFAULT_RATE)
        .start();
    let conn = |s: &Server| if resp3 { s.conn3() } else { s.conn() };
    let (mut a, mut b): (Connection, Connection) = (conn(&ours), conn(&theirs));
    let mut rng = Rng::seeded(seed);
    let (mut scaled, mut full) = (0, 0);
    // The items each key was given since it was made, and the false positives each module
    // answered where the two differ.
    let mut added: HashMap<String, HashSet<String>> = HashMap::new();
    let (mut ours_fp, mut theirs_fp) = (0, 0);
    for n in 0..commands {
        let c = command(&mut rng);
        let run = |conn: &mut Connection| redis::cmd(&c[0]).arg(&c[1..]).query::<Value>(conn);
        let (mine, redisbloom) = (run(&mut a), run(&mut b));
        let given = added.entry(c[1].clone()).or_default();
        let answers = |reply: &redis::RedisResult<Value>| claimed_present(&c, reply);
        let (ours, theirs) = (
            comparable(&c, mine.clone()),
            comparable(&c, redisbloom.clone()),
        );
        if ours != theirs {
            // Only a false positive may tell them apart: an item never given to the key that
            // one module says it holds. The key is then made again on both.
            let fp = match (items_of(&c), answers(&mine), answers(&redisbloom)) {
                (Some((items, _)), Some(m), Some(t)) if m.len() == t.len() => {
                    let at = m.iter().zip(&t).position(|(x, y)| x != y);
                    at.and_then(|at| {
                        let never =
                            !given.contains(&items[at]) && !items[..at].contains(&items[at]);
                        match (m[at], t[at]) {
                            (Some(true), _) if never => Some(&mut ours_fp),
                            (_, Some(true)) if never => Some(&mut theirs_fp),
                            _ => None,
                        }
                    })
                }
                _ => None,
            };
            let Some(fp) = fp else {
                panic!("seed {seed}, command {n}: {c:?}\nlcbloom:    {ours}\nRedisBloom: {theirs}")
            };
            *fp += 1;
            for conn in [&mut a, &mut b] {
                let _: i64 = redis::cmd("DEL").arg(&c[1]).query(conn).unwrap();
            }
            added.remove(&c[1]);
            continue;
        }
        match (c[0].as_str(), items_of(&c), answers(&mine)) {
            ("DEL", ..) => {
                added.remove(&c[1]);
            }
            (_, Some((items, adds)), Some(held)) => {
                // No false negative: what the key was given it holds.
                for (item, present) in items.iter().zip(&held) {
                    if given.contains(item) {
                        assert_eq!(*present, Some(true), "seed {seed}, command {n}: {c:?}");
                    }
                    if adds && present.is_some() {
                        given.insert(item.clone());
                    }
                }
            }
            _ => {}
        }
        full += usize::from(ours.contains("non scaling filter is full"));
        if c[0] == "BF.INFO" && c.len() == 2 {
            let filters: Value = redis::cmd("BF.INFO")
                .arg(&c[1])
                .arg("FILTERS")
                .query(&mut a)
                .unwrap_or(Value::Nil);
            // One number: in an array of one (RESP2) or a map of one (RESP3).
            let number = match filters {
                Value::Array(v) => v.first().cloned(),
                Value::Map(v) => v.first().map(|(_, n)| n.clone()),
                v => Some(v),
            };
            scaled += usize::from(matches!(number, Some(Value::Int(n)) if n > 1));
        }
    }
    // The run went where it should: filters that scaled and filters that filled up. lcbloom
    // answers at most a few false positives at these rates (about one in 10⁵ lookups at most).
    assert!(scaled > 0 && full > 0, "scaled {scaled}, full {full}");
    assert!(
        ours_fp <= 3,
        "seed {seed}: {ours_fp} false positives (RedisBloom: {theirs_fp})"
    );
}

/// The items a command adds (true) or looks up (false), if any.
fn items_of(c: &[String]) -> Option<(&[String], bool)> {
    match c[0].as_str() {
        "BF.ADD" | "BF.MADD" => Some((&c[2..], true)),
        "BF.EXISTS" | "BF.MEXISTS" => Some((&c[2..], false)),
        "BF.INSERT" => {
            let at = c.iter().position(|a| a == "ITEMS")?;
            Some((&c[at + 1..], true))
        }
        _ => None,
    }
}

/// For each item of the command, whether the reply says the key held it before (an add's 0,
/// a lookup's 1), or None where it refused the item (a full filter); None for a reply that
/// is no such answer.
fn claimed_present(c: &[String], reply: &redis::RedisResult<Value>) -> Option<Vec<Option<bool>>> {
    let (_, adds) = items_of(c)?;
    let one = |v: &Value| match v {
        Value::Int(n) => Some((*n == 1) != adds),
        Value::Boolean(b) => Some(*b != adds),
        _ => None,
    };
    match reply.as_ref().ok()? {
        Value::Array(each) => Some(each.iter().map(one).collect()),
        single => Some(vec![Some(one(single)?)]),
    }
}

#[test]
fn random_commands_answer_as_redisbloom_in_resp2() {
    same_replies(false);
}

#[test]
fn random_commands_answer_as_redisbloom_in_resp3() {
    same_replies(true);
}
