//! Windowed Bloom filters (`WINDOW seconds`) against a real server, with windows of a few
//! seconds: items found for their whole window and gone by 1.25 windows, the rate held under
//! a steady stream, replicas and AOF replays holding identical values across generation
//! changes, reloads that keep time, and bad input refused without creating a key.
use crate::common::*;
use redis::{Connection, Value};
use std::time::{Duration, Instant};

fn exists(c: &mut Connection, key: &str, item: &str) -> bool {
    redis::cmd("BF.EXISTS").arg(key).arg(item).query(c).unwrap()
}

fn mexists(c: &mut Connection, key: &str, items: &[String]) -> Vec<bool> {
    redis::cmd("BF.MEXISTS")
        .arg(key)
        .arg(items)
        .query(c)
        .unwrap()
}

fn info_field(c: &mut Connection, key: &str, field: &str) -> Value {
    let fields: Vec<Value> = redis::cmd("BF.INFO").arg(key).query(c).unwrap();
    for pair in fields.chunks(2) {
        let name = match &pair[0] {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            _ => continue,
        };
        if name == field {
            return pair[1].clone();
        }
    }
    panic!("BF.INFO {key} has no {field}: {fields:?}");
}

fn sleep_until(start: Instant, at: Duration) {
    if let Some(left) = at.checked_sub(start.elapsed()) {
        std::thread::sleep(left);
    }
}

#[test]
fn items_are_found_for_their_window_and_gone_by_a_quarter_more() {
    // Fixed seed: "a", gone, must not be a false positive of the filter holding "b".
    let s = Server::builder().fixed_seed().start();
    let mut c = s.conn();
    ok(&mut c, &["BF.RESERVE", "w", "0.001", "1000", "WINDOW", "2"]);
    let start = Instant::now();
    ok(&mut c, &["BF.MADD", "w", "a", "b"]);
    assert_eq!(ok(&mut c, &["BF.ADD", "w", "a"]), Value::Int(0));
    sleep_until(start, Duration::from_millis(1200));
    // Re-adding restarts b's window; it answers "probably present".
    assert_eq!(ok(&mut c, &["BF.ADD", "w", "b"]), Value::Int(0));
    sleep_until(start, Duration::from_millis(1800));
    assert!(exists(&mut c, "w", "a") && exists(&mut c, "w", "b"));
    sleep_until(start, Duration::from_millis(2600));
    assert!(!exists(&mut c, "w", "a"), "a lives past 1.25 windows");
    assert!(exists(&mut c, "w", "b"), "b's window restarted at 1.2 s");
    sleep_until(start, Duration::from_millis(3900));
    assert!(!exists(&mut c, "w", "b"));
    assert_eq!(ok(&mut c, &["BF.CARD", "w"]), Value::Int(0));
    assert_eq!(info_field(&mut c, "w", "Window"), Value::Int(2));
}

/// `BF.INFO key <field>` names a field of the filter's own alone, as RedisBloom's fields:
/// `WINDOW`, `STORED` and `TIME` of a windowed filter, `BLOCKED` of a blocked one (a
/// one-element array, a one-entry map in RESP3); a filter without the field refuses it.
#[test]
fn info_names_a_field_of_the_filters_own() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["BF.RESERVE", "w", "0.01", "1000", "WINDOW", "60"]);
    ok(&mut c, &["BF.MADD", "w", "a", "b"]);
    ok(
        &mut c,
        &["BF.RESERVE", "b", "0.01", "1000", "LAYOUT", "BLOCKED"],
    );
    ok(&mut c, &["BF.RESERVE", "f", "0.01", "1000"]);
    let alone = |c: &mut Connection, key: &str, field: &str| ok(c, &["BF.INFO", key, field]);
    for (field, name) in [("WINDOW", "Window"), ("stored", "Stored"), ("Time", "Time")] {
        let value = info_field(&mut c, "w", name);
        assert_eq!(
            alone(&mut c, "w", field),
            Value::Array(vec![value]),
            "{field}"
        );
    }
    assert_eq!(
        alone(&mut c, "w", "STORED"),
        Value::Array(vec![Value::Int(2)])
    );
    assert_eq!(
        alone(&mut c, "b", "BLOCKED"),
        Value::Array(vec![Value::Int(1)])
    );
    let mut c3 = s.conn3();
    let window: Value = redis::cmd("BF.INFO")
        .arg("w")
        .arg("WINDOW")
        .query(&mut c3)
        .unwrap();
    assert_eq!(
        window,
        Value::Map(vec![(Value::SimpleString("Window".into()), Value::Int(60))])
    );
    for (key, field) in [
        ("f", "WINDOW"),
        ("f", "BLOCKED"),
        ("b", "TIME"),
        ("w", "BLOCKED"),
    ] {
        let refused = cmd(&mut c, &["BF.INFO", key, field]);
        assert_eq!(
            err_text(refused),
            "ERR Invalid information value",
            "{key} {field}"
        );
    }
}

/// Three windows of a steady stream at capacity (a writer thread adding on schedule): every
/// item added within the last window is found, the measured false-positive rate stays within
/// the rate, and items older than 1.25 windows are gone (but for false positives). The
/// filter scales: a stream that falls behind on a loaded machine and catches up may pass
/// the budget, and the rate must hold then too.
#[test]
fn a_steady_stream_at_capacity_keeps_the_rate_for_three_windows() {
    use std::sync::{Arc, Mutex};
    let s = Server::start();
    let mut c = s.conn();
    let (capacity, window_ms, rate) = (4000u64, 3000u64, 0.01);
    ok(
        &mut c,
        &[
            "BF.RESERVE",
            "s",
            "0.01",
            &capacity.to_string(),
            "WINDOW",
            "3",
        ],
    );
    let added: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let start = Instant::now();
    let end = Duration::from_millis(3 * window_ms + 500);
    let writer = {
        let (added, mut w) = (added.clone(), s.conn());
        std::thread::spawn(move || {
            let batch = 20u64;
            let mut next = 0u64;
            while start.elapsed() < end {
                let names: Vec<String> =
                    (next..next + batch).map(|i| format!("item:{i}")).collect();
                next += batch;
                let _: Vec<Value> = redis::cmd("BF.MADD")
                    .arg("s")
                    .arg(&names)
                    .query(&mut w)
                    .unwrap();
                let now = Instant::now();
                added
                    .lock()
                    .unwrap()
                    .extend(names.into_iter().map(|n| (now, n)));
                sleep_until(
                    start,
                    Duration::from_micros(next * window_ms * 1000 / capacity),
                );
            }
        })
    };
    let mut worst = 0.0f64;
    for check in 1..=4u32 {
        sleep_until(
            start,
            Duration::from_millis(window_ms) * check / 2 + Duration::from_millis(window_ms),
        );
        let snapshot = added.lock().unwrap().clone();
        let recent: Vec<String> = snapshot
            .iter()
            .filter(|(t, _)| t.elapsed() < Duration::from_millis(window_ms - 500))
            .map(|(_, n)| n.clone())
            .collect();
        assert!(
            mexists(&mut c, "s", &recent).iter().all(|&f| f),
            "a recent item is missing"
        );
        let old: Vec<String> = snapshot
            .iter()
            .filter(|(t, _)| t.elapsed() > Duration::from_millis(window_ms * 5 / 4 + 500))
            .map(|(_, n)| n.clone())
            .collect();
        let lingering = mexists(&mut c, "s", &old).iter().filter(|&&f| f).count();
        assert!(
            lingering as f64 <= 2.0 * rate * old.len() as f64 + 5.0,
            "{lingering} of {} old items found",
            old.len()
        );
        let probes: Vec<String> = (0..40_000).map(|i| format!("absent:{check}:{i}")).collect();
        let fp = mexists(&mut c, "s", &probes).iter().filter(|&&f| f).count();
        worst = worst.max(fp as f64 / probes.len() as f64);
    }
    writer.join().unwrap();
    assert!(worst <= rate, "measured false-positive rate {worst}");
    let card = match ok(&mut c, &["BF.CARD", "s"]) {
        Value::Int(n) => n as u64,
        v => panic!("{v:?}"),
    };
    assert!(card.abs_diff(capacity) < capacity / 4, "BF.CARD {card}");
}

fn ints(reply: Value) -> Vec<i64> {
    match reply {
        Value::Array(answers) => answers
            .into_iter()
            .map(|a| redis::from_redis_value(a).unwrap())
            .collect(),
        v => panic!("{v:?}"),
    }
}

fn int(reply: Value) -> i64 {
    redis::from_redis_value(reply).unwrap()
}

/// A command's arguments: `head`, then the items.
fn with_items<'a>(head: &[&'a str], names: &'a [String]) -> Vec<&'a str> {
    head.iter()
        .copied()
        .chain(names.iter().map(String::as_str))
        .collect()
}

/// Re-adding the same items keeps their count: a non-scaling filter of capacity 100 takes its
/// 100 items again every quarter window for three windows, never full, every re-add
/// restarting the item's window, its fingerprints and its memory as after the first add.
#[test]
fn re_adds_use_no_more_capacity() {
    // Fixed seed: the items that collide with an earlier one (answering 0 at their first
    // add) are the same in every run.
    let s = Server::builder().fixed_seed().start();
    let mut c = s.conn();
    ok(
        &mut c,
        &[
            "BF.RESERVE",
            "r",
            "0.01",
            "100",
            "NONSCALING",
            "WINDOW",
            "2",
        ],
    );
    let names = items("i", 100);
    let args = with_items(&["BF.MADD", "r"], &names);
    let madd = |c: &mut Connection| ints(ok(c, &args));
    let stored = |c: &mut Connection| int(info_field(c, "r", "Stored"));
    let usage = |c: &mut Connection| int(ok(c, &["MEMORY", "USAGE", "r"]));
    let start = Instant::now();
    let first = madd(&mut c);
    let new = first.iter().filter(|&&a| a == 1).count() as i64;
    assert!(new >= 95, "{first:?}");
    assert_eq!(stored(&mut c), new);
    let memory = usage(&mut c);
    // Slots of half a second: each round falls in a later slot than the one before.
    for round in 1..=12u32 {
        sleep_until(start, Duration::from_millis(500) * round);
        let again = madd(&mut c);
        assert!(again.iter().all(|&a| a == 0), "round {round}: {again:?}");
        assert_eq!(stored(&mut c), new, "round {round}");
        assert!(usage(&mut c) <= memory + 64, "round {round}");
    }
    assert!(mexists(&mut c, "r", &names).iter().all(|&f| f));
    let card = int(ok(&mut c, &["BF.CARD", "r"]));
    assert!(card.abs_diff(new) <= 1, "BF.CARD {card}");
}

/// `BF.CARD` counts an item once when its older copy is in an earlier layer: 200 items into a
/// scaling filter of capacity 100 (two layers), then re-added every quarter window.
#[test]
fn card_counts_items_refreshed_from_an_earlier_layer_once() {
    let s = Server::builder().fixed_seed().start();
    let mut c = s.conn();
    ok(&mut c, &["BF.RESERVE", "s", "0.01", "100", "WINDOW", "2"]);
    let names = items("a", 200);
    let args = with_items(&["BF.MADD", "s"], &names);
    let start = Instant::now();
    let new = ints(ok(&mut c, &args)).iter().filter(|&&a| a == 1).count() as i64;
    assert_eq!(bf_info(&mut c, "s", "FILTERS"), 2);
    for round in 1..=4u32 {
        sleep_until(start, Duration::from_millis(500) * round);
        assert!(ints(ok(&mut c, &args)).iter().all(|&a| a == 0));
        let card = int(ok(&mut c, &["BF.CARD", "s"]));
        assert!(
            card.abs_diff(new) <= 4,
            "round {round}: BF.CARD {card} of {new}"
        );
    }
}

/// `Number of filters` counts the layers holding live items (and the newest), as `Capacity`
/// sums them: layers whose items all slid out count for nothing, before and after a reload.
#[test]
fn number_of_filters_counts_live_layers() {
    let s = Server::start();
    let mut c = s.conn();
    let names = items("x", 20_000);
    let args = with_items(
        &["BF.INSERT", "d", "CAPACITY", "5000", "WINDOW", "1", "ITEMS"],
        &names,
    );
    let start = Instant::now();
    ok(&mut c, &args);
    assert_eq!(bf_info(&mut c, "d", "FILTERS"), 3);
    assert_eq!(bf_info(&mut c, "d", "CAPACITY"), 35_000);
    // Slots of a quarter second: 1.5 s on, the items' slot is five slots old.
    sleep_until(start, Duration::from_millis(1500));
    ok(&mut c, &["BF.ADD", "d", "n0"]);
    assert_eq!(bf_info(&mut c, "d", "CAPACITY"), 20_000);
    assert_eq!(bf_info(&mut c, "d", "FILTERS"), 1);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(bf_info(&mut c, "d", "CAPACITY"), 20_000);
    assert_eq!(bf_info(&mut c, "d", "FILTERS"), 1);
}

#[test]
fn replicas_hold_identical_values_across_generation_changes() {
    let master = Server::start();
    let replica = Server::start();
    let mut m = master.conn();
    ok(
        &mut m,
        &["BF.RESERVE", "early", "0.01", "500", "WINDOW", "2"],
    );
    add_many(&mut m, "BF.MADD", "early", "e", 300);
    attach_replica(&master, &replica);
    let mut r = replica.conn();
    let start = Instant::now();
    let mut i = 0;
    // Adds through five generation changes (slots of half a second), some creating keys, and
    // pipelined bursts: most of a burst's adds run in the millisecond of the one before (at
    // the filter's own time), which propagates as sent, without AT.
    while start.elapsed() < Duration::from_millis(2600) {
        ok(&mut m, &["BF.ADD", "early", &format!("x{i}")]);
        ok(
            &mut m,
            &[
                "BF.INSERT",
                "made",
                "WINDOW",
                "2",
                "ITEMS",
                &format!("y{i}"),
            ],
        );
        ok(
            &mut m,
            &["BF.MADD", "made", &format!("y{}", i / 2), &format!("z{i}")],
        );
        let mut burst = redis::pipe();
        for j in 0..40 {
            burst.cmd("BF.ADD").arg("early").arg(format!("b{i}.{j}"));
            burst
                .cmd("BF.MADD")
                .arg("made")
                .arg(format!("b{i}.{j}"))
                .arg(j);
        }
        burst.exec(&mut m).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    for key in ["early", "made"] {
        let on_master: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut m).unwrap();
        let on_replica: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut r).unwrap();
        assert_eq!(on_master, on_replica, "{key}");
    }
    // Both ways reached the replica: adds as sent, and adds with their time.
    let stats = server_info(&mut r, "commandstats");
    for command in ["cmdstat_bf.add", "cmdstat_bf.insert"] {
        let calls = stats.get(command).map_or("", String::as_str);
        assert!(
            calls.starts_with("calls=") && !calls.starts_with("calls=0,"),
            "{command}: {calls}"
        );
    }
    // A replica that syncs now (full sync, RDB) holds the same bytes too.
    let late = Server::start();
    attach_replica(&master, &late);
    let mut l = late.conn();
    for key in ["early", "made"] {
        let on_master: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut m).unwrap();
        let on_late: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut l).unwrap();
        assert_eq!(on_master, on_late, "{key}");
    }
}

#[test]
fn reloads_and_aof_replays_keep_time() {
    for preamble in ["yes", "no"] {
        let mut s = Server::builder()
            .arg("appendonly", "yes")
            .arg("appendfsync", "always")
            .arg("aof-use-rdb-preamble", preamble)
            .start();
        let mut c = s.conn();
        // One fixed seed: seeded, so the seeded encoding travels every path, and fixed, since
        // under a random seed `old` would be a false positive among the 200 later items in
        // about one run in a hundred.
        ok(
            &mut c,
            &["BF.RESERVE", "t", "0.01", "100", "WINDOW", "3", "SEED", "7"],
        );
        let start = Instant::now();
        ok(&mut c, &["BF.ADD", "t", "old"]);
        sleep_until(start, Duration::from_millis(1500));
        ok(&mut c, &["BF.ADD", "t", "new"]);
        ok(&mut c, &["DEBUG", "RELOAD"]);
        assert!(exists(&mut c, "t", "old") && exists(&mut c, "t", "new"));
        ok(&mut c, &["BGREWRITEAOF"]);
        wait_aof_rewrite(&mut c);
        ok(&mut c, &["BF.ADD", "t", "after-rewrite"]);
        // A burst: most adds run at the filter's own time and are logged without AT.
        let mut burst = redis::pipe();
        for i in 0..200 {
            burst.cmd("BF.ADD").arg("t").arg(format!("burst{i}"));
        }
        burst.exec(&mut c).unwrap();
        let before: Vec<u8> = redis::cmd("DUMP").arg("t").query(&mut c).unwrap();
        s.restart();
        let mut c = s.conn();
        let after: Vec<u8> = redis::cmd("DUMP").arg("t").query(&mut c).unwrap();
        assert_eq!(before, after, "preamble {preamble}");
        assert!(exists(&mut c, "t", "old") && exists(&mut c, "t", "new"));
        // Time moved on while the server was down and after: old (added at 0) is gone by
        // 3.75 s, new (at 1.5 s) is still inside its window at 4.2 s.
        sleep_until(start, Duration::from_millis(4200));
        assert!(!exists(&mut c, "t", "old"), "preamble {preamble}");
        assert!(exists(&mut c, "t", "new"), "preamble {preamble}");
    }
}

#[test]
fn bad_windows_are_refused_and_create_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["BF.RESERVE", "plain", "0.01", "100"]);
    for (args, text) in [
        (
            &["BF.RESERVE", "k", "0.01", "100", "WINDOW", "0"][..],
            "ERR bad WINDOW",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "100", "WINDOW", "-5"],
            "ERR bad WINDOW",
        ),
        // Scaling: too small to leave room for 20 layers, though a plain filter takes it.
        (
            &["BF.RESERVE", "k", "1e-9", "100", "WINDOW", "60"],
            "ERR error rate too small (at least 1e-15 for a non-scaling windowed filter, \
             5.25e-9 for a scaling one, which then has room for 20 layers)",
        ),
        (
            &[
                "BF.INSERT",
                "k",
                "ERROR",
                "2e-15",
                "WINDOW",
                "60",
                "ITEMS",
                "a",
            ],
            "ERR error rate too small",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "100", "WINDOW", "soon"],
            "ERR bad WINDOW",
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "100",
                "WINDOW",
                "99999999999999999999",
            ],
            "ERR bad WINDOW",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "100", "WINDOW", "9999999999999"],
            "ERR bad WINDOW",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "100", "WINDOW"],
            "ERR bad WINDOW",
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "100",
                "WINDOW",
                "5",
                "WINDOW",
                "5",
            ],
            "ERR WINDOW given more than once",
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "100",
                "WINDOW",
                "5",
                "LAYOUT",
                "blocked",
            ],
            "ERR WINDOW and LAYOUT",
        ),
        // Capacities that size, but past max-memory-per-key (1 GiB).
        (
            &["BF.RESERVE", "k", "0.01", "100000000000000", "WINDOW", "10"],
            "ERR filter would use",
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "1125899906842624",
                "WINDOW",
                "10",
            ],
            "ERR filter would use",
        ),
        (
            &["BF.INSERT", "k", "WINDOW", "0", "ITEMS", "a"],
            "ERR bad WINDOW",
        ),
        (
            &["BF.INSERT", "plain", "WINDOW", "5", "ITEMS", "a"],
            "ERR WINDOW or AT on a filter without a window",
        ),
        (
            &["BF.RESERVE", "plain", "0.01", "100", "WINDOW", "5"],
            "ERR item exists: a filter without a window",
        ),
        // AT only takes a windowed filter, existing or made by the same command.
        (
            &["BF.INSERT", "plain", "AT", "1000", "ITEMS", "a"],
            "ERR WINDOW or AT on a filter without a window",
        ),
        (
            &["BF.INSERT", "k", "AT", "1000", "ITEMS", "a"],
            "ERR AT needs a windowed filter: no such key, and no WINDOW to create one",
        ),
        (
            &["BF.INSERT", "k", "WINDOW", "5", "AT", "-1", "ITEMS", "a"],
            "ERR bad AT",
        ),
        (
            &["BF.INSERT", "k", "WINDOW", "5", "AT", "soon", "ITEMS", "a"],
            "ERR bad AT",
        ),
        (
            &[
                "BF.INSERT",
                "k",
                "WINDOW",
                "5",
                "AT",
                "99999999999999999999",
                "ITEMS",
                "a",
            ],
            "ERR bad AT",
        ),
    ] {
        let e = err_text(cmd(&mut c, args));
        assert!(e.starts_with(text), "{args:?}: {e}");
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert_eq!(keys, vec!["plain".to_string()]);
    assert!(!exists(&mut c, "plain", "a"));
    // The rates the refusal names are taken.
    ok(
        &mut c,
        &["BF.RESERVE", "edge", "5.25e-9", "100", "WINDOW", "60"],
    );
    ok(
        &mut c,
        &[
            "BF.RESERVE",
            "fixed",
            "1e-15",
            "100",
            "NONSCALING",
            "WINDOW",
            "60",
        ],
    );
}

/// `BF.RESERVE` on an existing key: RedisBloom's `ERR item exists`, which says what else is
/// wrong when `WINDOW` meets a filter without a window; nothing changes.
#[test]
fn reserve_on_an_existing_filter_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["BF.RESERVE", "plain", "0.01", "100"]);
    ok(
        &mut c,
        &["BF.RESERVE", "win", "0.01", "100", "WINDOW", "60"],
    );
    ok(&mut c, &["BF.MADD", "plain", "a", "b"]);
    ok(&mut c, &["BF.MADD", "win", "a", "b"]);
    let dump = |c: &mut Connection, key: &str| -> Vec<u8> {
        redis::cmd("DUMP").arg(key).query(c).unwrap()
    };
    let (plain, win) = (dump(&mut c, "plain"), dump(&mut c, "win"));
    for (args, text) in [
        (
            &["BF.RESERVE", "plain", "0.01", "100", "WINDOW", "5"][..],
            "ERR item exists: a filter without a window",
        ),
        (&["BF.RESERVE", "plain", "0.01", "100"], "ERR item exists"),
        (&["BF.RESERVE", "win", "0.01", "100"], "ERR item exists"),
        (
            &["BF.RESERVE", "win", "0.01", "100", "WINDOW", "5"],
            "ERR item exists",
        ),
        (
            &["BF.INSERT", "plain", "WINDOW", "5", "ITEMS", "c"],
            "ERR WINDOW or AT on a filter without a window",
        ),
    ] {
        assert_eq!(err_text(cmd(&mut c, args)), text, "{args:?}");
    }
    assert_eq!(dump(&mut c, "plain"), plain);
    assert_eq!(dump(&mut c, "win"), win);
}

/// A client's `AT` may lie in the past (the filter's clock never goes back), never ahead of
/// the server's clock: refused, nothing changes, no key made. An AOF that carries a later
/// time (its master's) loads as written, as do creates at rates a client is refused.
#[test]
fn writes_refused_to_clients_are_taken_from_the_aof() {
    // Fixed seed: asks about "b" before it is added.
    let mut s = Server::builder()
        .fixed_seed()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .arg("aof-use-rdb-preamble", "no")
        .start();
    let mut c = s.conn();
    let now: i64 = {
        let (secs, micros): (String, String) = redis::cmd("TIME").query(&mut c).unwrap();
        secs.parse::<i64>().unwrap() * 1000 + micros.parse::<i64>().unwrap() / 1000
    };
    let ahead = (now + 3_600_000).to_string();
    ok(&mut c, &["BF.RESERVE", "w", "0.01", "100", "WINDOW", "60"]);
    ok(&mut c, &["BF.ADD", "w", "a"]);
    let before: Vec<u8> = redis::cmd("DUMP").arg("w").query(&mut c).unwrap();
    for args in [
        &["BF.INSERT", "w", "AT", &ahead, "ITEMS", "b"][..],
        &[
            "BF.INSERT",
            "new",
            "WINDOW",
            "60",
            "AT",
            &ahead,
            "ITEMS",
            "b",
        ],
    ] {
        let e = err_text(cmd(&mut c, args));
        assert_eq!(e, "ERR bad AT: later than the server's clock", "{args:?}");
    }
    assert_eq!(ok(&mut c, &["EXISTS", "new"]), Value::Int(0));
    let after: Vec<u8> = redis::cmd("DUMP").arg("w").query(&mut c).unwrap();
    assert_eq!(before, after);
    assert!(exists(&mut c, "w", "a") && !exists(&mut c, "w", "b"));
    // A time in the past is taken, at the filter's own time.
    let past = (now - 1000).to_string();
    ok(&mut c, &["BF.INSERT", "w", "AT", &past, "ITEMS", "c"]);
    assert!(exists(&mut c, "w", "c"));

    // A create at a rate a client is refused (no room for 20 layers).
    let tiny = [
        "BF.RESERVE",
        "tiny",
        "1e-9",
        "100",
        "WINDOW",
        "60",
        "SEED",
        "5",
    ];
    assert!(err_text(cmd(&mut c, &tiny)).starts_with("ERR error rate too small"));
    // Likewise a filter without a window (no room for 20 sub-filters). It was refused from
    // the AOF too, and Redis skips a refused AOF command: the key was lost at the start.
    let plain_tiny = ["BF.RESERVE", "plain", "1e-13", "100", "SEED", "5"];
    assert!(err_text(cmd(&mut c, &plain_tiny)).starts_with("ERR error rate too small"));

    // Both in the AOF, as a master whose clock was ahead, and one of an earlier version
    // that took the rate, would have logged them: taken.
    s.shutdown("SAVE");
    append_to_aof(
        &s,
        &[
            &["BF.INSERT", "w", "AT", &ahead, "ITEMS", "b"],
            &tiny,
            &plain_tiny,
        ],
    );
    s.restart();
    let mut c = s.conn();
    assert!(exists(&mut c, "w", "b"));
    assert_eq!(info_field(&mut c, "w", "Time"), Value::Int(now + 3_600_000));
    for key in ["tiny", "plain"] {
        assert_eq!(ok(&mut c, &["EXISTS", key]), Value::Int(1), "{key}");
        ok(&mut c, &["BF.ADD", key, "x"]);
        assert!(exists(&mut c, key, "x"), "{key}");
    }
}

#[test]
fn copy_memory_usage_events_and_info() {
    // Fixed seed: a "b" taken for a false positive would change nothing and fire no event.
    let s = Server::builder().fixed_seed().start();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Kd"]);
    let client = redis::Client::open(s.url()).unwrap();
    let mut sub = client.get_connection().unwrap();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("__keyspace@0__:ev").unwrap();
    pubsub.set_read_timeout(Some(EVENT_WAIT)).unwrap();

    // Measured as tests/it/bf_memory.rs does: the writes through a connection closed before
    // used_memory is read, a key written and deleted first (what the server allocates once).
    let fill = |keys: &[&str]| {
        let mut w = s.conn();
        for key in keys {
            ok(
                &mut w,
                &["BF.RESERVE", key, "0.01", "200000", "WINDOW", "60"],
            );
            add_many(&mut w, "BF.MADD", key, "i", 200_000);
        }
    };
    ok(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    fill(&["warm"]);
    ok(&mut c, &["DEL", "warm"]);
    let before = used_memory(&mut c, 2);
    // Six keys of about 300 KB: an idle connection's query buffer (16 KB, freed by
    // serverCron) stays a small part of the growth.
    let keys = ["w", "v1", "v2", "v3", "v4", "v5"];
    fill(&keys);
    let grown = used_memory(&mut c, 2) - before;
    // Summed over the keys: a key whose adds straddle a slot boundary holds two generations
    // and differs from one whose adds fell in one slot, so no single key stands for the mean.
    let usage: i64 = keys
        .iter()
        .map(|key| -> i64 {
            redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .query(&mut c)
                .unwrap()
        })
        .sum();
    let band = usage_band(&mut c);
    assert!(
        band.contains(&(usage as f64 / grown as f64)),
        "MEMORY USAGE of the keys {usage}, used_memory grew {grown}, outside {band:?}"
    );

    ok(&mut c, &["COPY", "w", "w2"]);
    let a: Vec<u8> = redis::cmd("DUMP").arg("w").query(&mut c).unwrap();
    let b: Vec<u8> = redis::cmd("DUMP").arg("w2").query(&mut c).unwrap();
    assert_eq!(a, b);
    assert_eq!(digest(&mut c, "w"), digest(&mut c, "w2"));
    // SCANDUMP / LOADCHUNK rebuild it byte for byte.
    scandump_into(&mut c, "w", "w3");
    let d: Vec<u8> = redis::cmd("DUMP").arg("w3").query(&mut c).unwrap();
    assert_eq!(a, d);

    ok(&mut c, &["BF.RESERVE", "ev", "0.01", "100", "WINDOW", "10"]);
    ok(&mut c, &["BF.ADD", "ev", "a"]);
    ok(&mut c, &["BF.INSERT", "ev", "ITEMS", "a", "b"]);
    let events: Vec<String> = (0..3)
        .map(|_| {
            pubsub
                .get_message()
                .unwrap()
                .get_payload::<String>()
                .unwrap()
        })
        .collect();
    assert_eq!(events, ["bf.reserve", "bf.add", "bf.insert"]);

    let info: String = redis::cmd("INFO").arg("lcbloom").query(&mut c).unwrap();
    assert!(info.contains("bf_window_keys:9"), "{info}");
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("BF.RESERVE")
        .query(&mut c)
        .unwrap();
    assert!(format!("{docs:?}").contains("WINDOW"));
}

/// A windowed filter made by `BF.RESERVE` has room for the layers it holds, as a loaded one
/// does: a small one costs the same before and after a reload, and under 344 bytes. A first
/// layer pushed into an empty list would make room for four (1,504 bytes for any filter of
/// capacity up to 1,000), a layer keeping its refreshed counts inline 192 bytes more (544
/// empty, against 352), and records each a size class larger (a value of 80 bytes, a layer
/// of 128, a partition of 64) 48 more (352 empty, against 304).
#[test]
fn small_windowed_filters_cost_what_loaded_ones_do() {
    let s = Server::start();
    let mut c = s.conn();
    for (key, capacity) in [("w10", "10"), ("w1000", "1000")] {
        ok(
            &mut c,
            &["BF.RESERVE", key, "0.001", capacity, "WINDOW", "2592000"],
        );
        ok(&mut c, &["BF.MADD", key, "a", "b", "c"]);
    }
    let usage = |c: &mut Connection, key: &str| int(ok(c, &["MEMORY", "USAGE", key]));
    let made = [usage(&mut c, "w10"), usage(&mut c, "w1000")];
    assert!(made.iter().all(|&m| m < 344), "{made:?}");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!([usage(&mut c, "w10"), usage(&mut c, "w1000")], made);
}

/// Windowed filters loaded from their encoding (RESTORE, an RDB load; `BF.LOADCHUNK` takes
/// the same decoder) cost what `MEMORY USAGE` says, as filters built by commands do: many
/// small keys, where a list the load allocated past its length would show.
#[test]
fn loaded_filters_cost_what_memory_usage_says() {
    const KEYS: usize = 1_000;
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["BF.RESERVE", "t", "0.01", "100", "WINDOW", "60"]);
    add_many(&mut c, "BF.MADD", "t", "i", 50);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("t").query(&mut c).unwrap();
    let band = usage_band(&mut c);
    restore_copies(&s, &payload, 100);
    ok(&mut c, &["FLUSHALL", "SYNC"]);
    let before = used_memory(&mut c, 1);
    let keys = restore_copies(&s, &payload, KEYS);
    let grown = used_memory(&mut c, 1) - before;
    let restored = memory_usage_of(&mut c, &keys);
    assert!(
        band.contains(&(restored as f64 / grown as f64)),
        "restored: MEMORY USAGE {restored}, used_memory grew {grown}, outside {band:?}"
    );
    ok(&mut c, &["DEBUG", "RELOAD"]);
    let (loaded, before) = (memory_usage_of(&mut c, &keys), used_memory(&mut c, 1));
    ok(&mut c, &["FLUSHALL", "SYNC"]);
    let freed = before - used_memory(&mut c, 1);
    assert!(
        band.contains(&(loaded as f64 / freed as f64)),
        "reloaded: MEMORY USAGE {loaded}, a flush freed {freed}, outside {band:?}"
    );
}

/// A windowed filter half-way through a `BF.LOADCHUNK` load keeps its load through every path
/// that copies it: `COPY`, `BF.SCANDUMP`, `DUMP`/`RESTORE`, `DEBUG RELOAD`, an AOF rewrite and
/// restart, and a replica's full sync each hold a value that takes the remaining chunks and
/// ends equal to the source. Until then it refuses adds, which the chunks would overwrite.
#[test]
fn a_load_in_progress_survives_saves_copies_and_replicas() {
    for preamble in ["yes", "no"] {
        let mut master = Server::builder()
            .arg("appendonly", "yes")
            .arg("appendfsync", "always")
            .arg("aof-use-rdb-preamble", preamble)
            .start();
        let replica = Server::start();
        let mut m = master.conn();
        let mut insert = vec![
            "BF.INSERT",
            "src",
            "CAPACITY",
            "1000",
            "WINDOW",
            "100",
            "ITEMS",
        ];
        let names = items("x", 800);
        insert.extend(names.iter().map(String::as_str));
        ok(&mut m, &insert);
        let mut parts = Vec::new();
        scandump_each(&mut m, "src", 0, |_, next, data| parts.push((next, data)));
        let (header, data) = match &parts[..] {
            [(1, header), (_, data)] => (header.clone(), data.clone()),
            _ => panic!("expected a header and one data chunk: {parts:?}"),
        };
        // Three pieces, cut inside records: BF.LOADCHUNK names each by 1 + its end offset.
        let cuts = [0, data.len() / 3 + 1, 2 * data.len() / 3 + 5, data.len()];
        let piece = |i: usize| (cuts[i + 1] + 1, &data[cuts[i]..cuts[i + 1]]);
        let load = |c: &mut Connection, key: &str, (iterator, bytes): (usize, &[u8])| {
            redis::cmd("BF.LOADCHUNK")
                .arg(key)
                .arg(iterator)
                .arg(bytes)
                .exec(c)
                .unwrap_or_else(|e| panic!("{key} at {iterator}: {e}"));
        };
        for key in ["dst", "bare"] {
            load(&mut m, key, (1, &header));
        }
        load(&mut m, "dst", piece(0));
        for add in [&["BF.ADD", "dst", "new"][..], &["BF.MADD", "dst", "a", "b"]] {
            let refused = format!("{:?}", cmd(&mut m, add));
            assert!(refused.contains("still being loaded"), "{refused}");
        }
        ok(&mut m, &["COPY", "dst", "copied"]);
        // BF.SCANDUMP of a load in progress replays into a load at the same point.
        scandump_into(&mut m, "dst", "scanned");
        let dumped: Vec<u8> = redis::cmd("DUMP").arg("dst").query(&mut m).unwrap();
        redis::cmd("RESTORE")
            .arg("restored")
            .arg(0)
            .arg(dumped)
            .exec(&mut m)
            .unwrap();
        ok(&mut m, &["DEBUG", "RELOAD"]);
        ok(&mut m, &["BGREWRITEAOF"]);
        wait_aof_rewrite(&mut m);
        master.restart();
        let mut m = master.conn();
        attach_replica(&master, &replica);
        let keys = ["dst", "copied", "scanned", "restored", "bare"];
        for key in keys {
            if key == "bare" {
                load(&mut m, key, piece(0));
            }
            load(&mut m, key, piece(1));
            load(&mut m, key, piece(2));
        }
        let digest = |c: &mut Connection, key: &str| -> String {
            redis::cmd("DEBUG")
                .arg("DIGEST-VALUE")
                .arg(key)
                .query::<Vec<String>>(c)
                .unwrap()
                .remove(0)
        };
        let source = digest(&mut m, "src");
        let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
        assert_eq!(acked, 1);
        let mut r = replica.conn();
        for key in keys {
            assert_eq!(digest(&mut m, key), source, "{key}, preamble {preamble}");
            assert_eq!(
                digest(&mut r, key),
                source,
                "replica {key}, preamble {preamble}"
            );
        }
        assert!(mexists(&mut m, "dst", &names).iter().all(|&found| found));
        ok(&mut m, &["BF.ADD", "dst", "new"]);
    }
}
