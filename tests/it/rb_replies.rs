//! Random valid `BF.*` commands answer on lcbloom exactly as on RedisBloom 2.8.2, in RESP2 and
//! RESP3: creations with every option, adds and lookups of batches with repeats, scaling,
//! non-scaling filters that fill up, `NOCREATE` on missing keys, `BF.INFO` whole and by field,
//! `BF.CARD`, deletes. The one reply that differs by design is `BF.INFO`'s `Size` (lcbloom's
//! own bytes), left out. Both modules run at tiny error rates (their defaults too), so that
//! no false positive, which the two hash schemes place differently, shows in a run; each run
//! is fixed (lcbloom's seed and the draw are), so it answers the same every time. Capacities
//! start at 50: RedisBloom's filters of capacity 1 and a few items go far past their rate
//! (one answered a false positive at 10⁻⁶ within the first 200 commands).
//! `LCBLOOM_RB_REPLIES_SEED` and `LCBLOOM_RB_REPLIES` (commands per run, default 20,000) draw
//! other runs. The error texts that differ: compat.rs.
use crate::common::fuzz::{env_number, Rng};
use crate::common::redisbloom as rb;
use crate::common::*;
use redis::{Connection, Value};

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
    for n in 0..commands {
        let c = command(&mut rng);
        let run = |conn: &mut Connection| {
            comparable(&c, redis::cmd(&c[0]).arg(&c[1..]).query::<Value>(conn))
        };
        let (mine, redisbloom) = (run(&mut a), run(&mut b));
        assert_eq!(
            mine, redisbloom,
            "seed {seed}, command {n}: {c:?}\nlcbloom:    {mine}\nRedisBloom: {redisbloom}"
        );
        full += usize::from(mine.contains("non scaling filter is full"));
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
    // The run went where it should: filters that scaled and filters that filled up.
    assert!(scaled > 0 && full > 0, "scaled {scaled}, full {full}");
}

#[test]
fn random_commands_answer_as_redisbloom_in_resp2() {
    same_replies(false);
}

#[test]
fn random_commands_answer_as_redisbloom_in_resp3() {
    same_replies(true);
}
