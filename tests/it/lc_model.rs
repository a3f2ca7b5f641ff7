//! Linear counters against the sets they count, under random commands: `LC.RESERVE` of several
//! geometries, `LC.ADD` batches of new and shared items (sets from empty to tens of
//! thousands, through every mode), `LC.MERGE` of any keys into any key, `LC.COUNT` of any
//! keys, `DEL`. After each command what the docs promise holds (docs/commands.md):
//! - an add to a counter that is still exact replies how many of its items were new, and no
//!   add replies more than that;
//! - a count of one exact counter is the set's size; any count is within 5 standard errors
//!   of the union's true size, at the coarsest error rate among its keys;
//! - a union never counts fewer than any of its keys;
//! - a merged key counts what `LC.COUNT` of it and its sources did (except where that count
//!   estimated exact counters of one size, which the merge counts exactly: then within the
//!   error of the true size).
//!
//! `LCBLOOM_LC_MODEL_SEED` and `LCBLOOM_LC_MODEL` (commands per run, default 3,000) draw other
//! runs.
use crate::common::fuzz::{env_number, Rng};
use crate::common::*;
use redis::Connection;
use std::collections::{BTreeMap, HashSet};

const KEYS: &[&str] = &["{m}0", "{m}1", "{m}2", "{m}3", "{m}4", "{m}5"];
/// (error rate, capacity): the defaults', coarser and finer ones, small and large capacities.
const GEOMETRIES: &[(&str, &str)] = &[
    ("0.01", "1000"),
    ("0.01", "50000"),
    ("0.02", "1000000"),
    ("0.05", "100"),
    ("0.005", "10000"),
];

fn count(c: &mut Connection, keys: &[&str]) -> i64 {
    redis::cmd("LC.COUNT").arg(keys).query(c).unwrap()
}

struct Model {
    sets: BTreeMap<&'static str, HashSet<u64>>,
    /// Items drawn so far: new ones are `next..`, shared ones any below.
    next: u64,
}

impl Model {
    fn union(&self, keys: &[&str]) -> usize {
        let mut all: HashSet<u64> = HashSet::new();
        for k in keys {
            if let Some(s) = self.sets.get(k) {
                all.extend(s);
            }
        }
        all.len()
    }
}

/// Checks a count of `keys` (existing ones) against the model; returns the count.
fn check_count(c: &mut Connection, model: &Model, keys: &[&str], context: &str) -> i64 {
    let got = count(c, keys);
    let truth = model.union(keys) as f64;
    let present: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| model.sets.contains_key(k))
        .collect();
    let rate = present
        .iter()
        .map(|k| lc_error_rate(c, k).unwrap())
        .fold(0.0, f64::max);
    if present.len() == 1 && lc_mode(c, present[0]) == "exact" {
        assert_eq!(got as f64, truth, "{context}: an exact counter's count");
    }
    assert!(
        (got as f64 - truth).abs() <= 5.0 * rate * truth + 1.0,
        "{context}: counted {got} of {truth} at rate {rate}"
    );
    for k in &present {
        let alone = count(c, &[k]);
        assert!(
            got >= alone,
            "{context}: the union counts {got}, {k} alone {alone}"
        );
    }
    got
}

fn run(seed: u64, commands: usize) {
    let server = Server::start();
    let mut c = server.conn();
    let mut rng = Rng::seeded(seed);
    let mut model = Model {
        sets: BTreeMap::new(),
        next: 0,
    };
    let mut modes: HashSet<String> = HashSet::new();
    for n in 0..commands {
        let key = KEYS[rng.below(KEYS.len())];
        let context = format!("seed {seed}, command {n}");
        match rng.below(100) {
            0..8 if !model.sets.contains_key(key) => {
                let (rate, capacity) = GEOMETRIES[rng.below(GEOMETRIES.len())];
                ok(&mut c, &["LC.RESERVE", key, rate, capacity]);
                model.sets.insert(key, HashSet::new());
            }
            0..60 => {
                // Mostly small batches, now and then thousands: sets of every size.
                let size = match rng.below(10) {
                    0 => 1 + rng.below(4_000),
                    1..4 => 1 + rng.below(300),
                    _ => 1 + rng.below(20),
                };
                let items: Vec<u64> = (0..size)
                    .map(|_| {
                        if model.next > 0 && rng.below(3) == 0 {
                            rng.below(model.next as usize) as u64
                        } else {
                            model.next += 1;
                            model.next - 1
                        }
                    })
                    .collect();
                let set = model.sets.entry(key).or_default();
                let before = set.len();
                set.extend(&items);
                let new = set.len() - before;
                let changed: i64 = redis::cmd("LC.ADD")
                    .arg(key)
                    .arg(&items)
                    .query(&mut c)
                    .unwrap();
                assert!(
                    changed as usize <= new,
                    "{context}: {changed} changed of {new} new"
                );
                let mode = lc_mode(&mut c, key);
                if mode == "exact" {
                    assert_eq!(changed as usize, new, "{context}: an exact counter's add");
                }
                modes.insert(mode);
            }
            60..75 => {
                let sources: Vec<&str> = (0..1 + rng.below(3))
                    .map(|_| KEYS[rng.below(KEYS.len())])
                    .collect();
                let mut all = vec![key];
                all.extend(&sources);
                if !all.iter().any(|k| model.sets.contains_key(k)) {
                    continue;
                }
                let before = check_count(&mut c, &model, &all, &context);
                let exact_sources = all
                    .iter()
                    .filter(|k| model.sets.contains_key(*k))
                    .all(|k| lc_mode(&mut c, k) == "exact");
                ok(&mut c, &[&["LC.MERGE", key], &sources[..]].concat());
                let union: HashSet<u64> = all
                    .iter()
                    .filter_map(|k| model.sets.get(k))
                    .flatten()
                    .copied()
                    .collect();
                model.sets.insert(key, union);
                let after = check_count(&mut c, &model, &[key], &context);
                if !exact_sources {
                    assert_eq!(after, before, "{context}: the merged key's count");
                }
            }
            75..95 => {
                let keys: Vec<&str> = (0..1 + rng.below(4))
                    .map(|_| KEYS[rng.below(KEYS.len())])
                    .collect();
                if keys.iter().any(|k| model.sets.contains_key(k)) {
                    check_count(&mut c, &model, &keys, &context);
                }
            }
            _ => {
                let _: i64 = redis::cmd("DEL").arg(key).query(&mut c).unwrap();
                model.sets.remove(key);
            }
        }
    }
    for mode in ["exact", "tokens", "registers"] {
        assert!(
            modes.contains(mode),
            "seed {seed}: no counter in {mode} mode: {modes:?}"
        );
    }
}

#[test]
fn counters_keep_their_promises_under_random_commands() {
    let seed = env_number("LCBLOOM_LC_MODEL_SEED").unwrap_or(20261128);
    run(seed, env_number("LCBLOOM_LC_MODEL").unwrap_or(3_000));
}
