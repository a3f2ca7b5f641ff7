//! What a counter key really costs: `MEMORY USAGE` against the `used_memory` growth that keys of
//! one shape cause (thousands of keys per shape, on a server this test started), for every mode
//! and several sizes. The two agree within ±10%, and the bytes per key stay what
//! the memory table of docs/BENCHMARKS.md shows.
use crate::common::*;
use redis::{Connection, Value};

/// A shape: how its keys are made.
enum Make {
    /// `LC.ADD` of `n` distinct items to each key (defaults, or after `LC.RESERVE rate cap`).
    Add(u32, Option<(&'static str, &'static str)>),
    /// One key made so, then `COPY`ed to the others (large values, built once).
    Copy(Box<Make>),
    /// `LC.ADD` of `n` items after `LC.RESERVE 0.01 <1000 + the key's index>`: each key a
    /// geometry of its own, whose bytes its `MEMORY USAGE` counts.
    OwnCapacity(u32),
}

/// Makes `keys` keys of a shape on a connection of their own (closed before measuring, so that
/// its buffers are not counted) and returns the real bytes per key and the mean MEMORY USAGE.
fn measure(server: &Server, make: &Make, keys: usize) -> (f64, f64) {
    let mut c = server.conn();
    // Synchronous, as in bf_memory's `measure`: a background flush may not be done when
    // `used_memory` reads its count of pending frees as 0.
    ok(&mut c, &["FLUSHALL", "SYNC"]);
    // Two connections stay open: this one and the test's own.
    let before = used_memory(&mut c, 2);
    let names: Vec<String> = (0..keys).map(|i| format!("k:{i:07}")).collect();
    {
        let mut w = server.conn();
        let build = |w: &mut Connection, name: &str, n: u32, params: Option<(&str, &str)>| {
            let mut pipe = redis::pipe();
            if let Some((rate, capacity)) = params {
                pipe.cmd("LC.RESERVE")
                    .arg(name)
                    .arg(rate)
                    .arg(capacity)
                    .ignore();
            }
            let all = items(&format!("{name}:"), n);
            for batch in all.chunks(1000) {
                pipe.cmd("LC.ADD").arg(name).arg(batch).ignore();
            }
            if n == 0 {
                pipe.cmd("LC.ADD").arg(name).ignore();
            }
            let _: () = pipe.query(w).unwrap();
        };
        match make {
            Make::Add(n, params) => {
                for name in &names {
                    build(&mut w, name, *n, *params);
                }
            }
            Make::OwnCapacity(n) => {
                for (i, name) in names.iter().enumerate() {
                    build(&mut w, name, *n, Some(("0.01", &(1_000 + i).to_string())));
                }
            }
            Make::Copy(inner) => {
                let Make::Add(n, params) = **inner else {
                    panic!("copies of built keys")
                };
                build(&mut w, &names[0], n, params);
                for chunk in names[1..].chunks(500) {
                    let mut pipe = redis::pipe();
                    for name in chunk {
                        pipe.cmd("COPY").arg(&names[0]).arg(name).ignore();
                    }
                    let _: () = pipe.query(&mut w).unwrap();
                }
            }
        }
    }
    let after = used_memory(&mut c, 2);
    let real = (after - before) as f64 / keys as f64;
    let sample: Vec<&String> = names.iter().step_by(keys.div_ceil(200)).collect();
    let mut usage = 0.0;
    for name in &sample {
        let bytes: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(name)
            .arg("SAMPLES")
            .arg(0)
            .query(&mut c)
            .unwrap();
        usage += bytes as f64;
    }
    (real, usage / sample.len() as f64)
}

#[test]
fn memory_usage_tells_what_a_key_costs_in_every_mode() {
    let server = Server::start();
    let mut c = server.conn();
    let add = |n| Make::Add(n, None);
    let big = |n| Make::Copy(Box::new(Make::Add(n, None)));
    let million = |n| Make::Copy(Box::new(Make::Add(n, Some(("0.01", "1000000")))));
    // (shape, keys, mode, most bytes per key): the defaults' table (docs/BENCHMARKS.md) with a
    // little room for the allocator's and the keyspace's rounding. Small keys come by the
    // thousand: serverCron frees an idle connection's query buffer (16 KB) whenever it runs,
    // which must stay a small part of the growth measured.
    let shapes: Vec<(&str, Make, usize, &str, f64)> = vec![
        ("empty", add(0), 16_000, "exact", 120.0),
        ("1 item", add(1), 16_000, "exact", 123.0),
        ("10 items", add(10), 16_000, "exact", 174.0),
        ("30 items", add(30), 16_000, "exact", 259.0),
        (
            "50 items, a capacity of its own",
            Make::OwnCapacity(50),
            16_000,
            "exact",
            490.0,
        ),
        ("100 items", add(100), 8_000, "exact", 532.0),
        ("250 items", add(250), 4_000, "exact", 1_160.0),
        ("268 items", add(268), 4_000, "tokens", 640.0),
        ("1,000 items", add(1_000), 2_000, "tokens", 1_700.0),
        ("4,000 items", big(4_000), 2_000, "registers", 7_400.0),
        ("5,000 items", big(5_000), 2_000, "registers", 7_400.0),
        ("50,000 items", big(50_000), 2_000, "registers", 7_400.0),
        (
            "1M capacity, 2,000 items",
            million(2_000),
            1_000,
            "exact",
            9_000.0,
        ),
        (
            "1M capacity, 3,000 items",
            million(3_000),
            1_000,
            "tokens",
            4_300.0,
        ),
        (
            "1M capacity, 30,000 items",
            million(30_000),
            500,
            "registers",
            7_400.0,
        ),
    ];
    // The bytes per key are held to the table's on jemalloc, whose size classes they count.
    let jemalloc = server_info(&mut c, "memory")["mem_allocator"].starts_with("jemalloc");
    let band = usage_band(&mut c);
    // The first keys of a fresh server also grow its own structures: make and drop some first.
    measure(&server, &add(1), 2_000);
    let mut report = String::from("| shape | mode | bytes per key | MEMORY USAGE | ratio |\n");
    let mut off = Vec::new();
    for (label, make, keys, mode, most) in &shapes {
        let (real, usage) = measure(&server, make, *keys);
        let got_mode = lc_mode(&mut c, "k:0000000");
        let ratio = usage / real;
        report += &format!("| {label} | {got_mode} | {real:.0} | {usage:.0} | {ratio:.3} |\n");
        assert_eq!(got_mode, *mode, "{label}");
        if !band.contains(&ratio) || (jemalloc && real > *most) {
            off.push(*label);
        }
    }
    eprintln!("{report}");
    assert!(off.is_empty(), "off: {off:?}\n{report}");
}

/// Counters name their parameters by a 16-bit id (src/lc/stored.rs): with more than 65,535
/// parameter sets in use at once, a counter of yet another set keeps a 16-byte box of its
/// own. It answers, copies, saves and loads like any other, and once ids are freed a counter
/// of a new set is packed, and a boxed one by its next write.
#[test]
fn counters_past_the_parameter_ids_keep_a_box_and_work() {
    let server = Server::start();
    let mut c = server.conn();
    let sets: u64 = 65_535 + 40;
    let name = |i: u64| format!("p:{i}");
    let ids: Vec<u64> = (0..sets).collect();
    for chunk in ids.chunks(5_000) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            // One parameter set per key: capacities 1,000 and up.
            let capacity = (1_000 + i).to_string();
            pipe.cmd("LC.RESERVE")
                .arg(name(i))
                .arg("0.01")
                .arg(capacity)
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
    let size = |c: &mut Connection, key: &str| match lc_info_field(c, key, "Size") {
        Value::Int(n) => n,
        other => panic!("Size: {other:?}"),
    };
    let count = |c: &mut Connection, key: &str| -> i64 {
        redis::cmd("LC.COUNT").arg(key).query(c).unwrap()
    };
    let (first, last) = (name(0), name(sets - 1));
    for key in [&first, &last] {
        add_many(&mut c, "LC.ADD", key, "item:", 10);
    }
    assert_eq!(size(&mut c, &last), size(&mut c, &first) + 16, "boxed");
    ok(&mut c, &["COPY", &last, "copy"]);
    add_many(&mut c, "LC.ADD", "copy", "more:", 5);
    assert_eq!((count(&mut c, &last), count(&mut c, "copy")), (10, 15));
    let dump: Vec<u8> = redis::cmd("DUMP").arg(&last).query(&mut c).unwrap();
    let _: Value = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(dump)
        .query(&mut c)
        .unwrap();
    ok(&mut c, &["DEBUG", "RELOAD"]);
    for (key, n) in [
        (first.as_str(), 10),
        (&last, 10),
        ("copy", 15),
        ("restored", 10),
    ] {
        assert_eq!(count(&mut c, key), n, "{key} after reload");
    }
    let merged: Value = redis::cmd("LC.MERGE")
        .arg(&first)
        .arg("copy")
        .query(&mut c)
        .unwrap();
    assert_eq!(merged, Value::Okay);
    assert_eq!(count(&mut c, &first), 15);
    // Ids come back with the counters that held them: a parameter set that found none is
    // packed once some are free.
    ok(&mut c, &["LC.RESERVE", "late", "0.01", "999999999"]);
    add_many(&mut c, "LC.ADD", "late", "item:", 10);
    let mut pipe = redis::pipe();
    for i in 1..2_000 {
        pipe.cmd("DEL").arg(name(i)).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    ok(&mut c, &["LC.RESERVE", "fresh", "0.01", "999999999"]);
    add_many(&mut c, "LC.ADD", "fresh", "item:", 10);
    assert_eq!(size(&mut c, "late"), size(&mut c, "fresh") + 16);
    assert_eq!(count(&mut c, "fresh"), 10);
    // A boxed counter is packed by its next write.
    add_many(&mut c, "LC.ADD", "late", "again:", 1);
    assert_eq!(size(&mut c, "late"), size(&mut c, "fresh"));
    assert_eq!(count(&mut c, "late"), 11);
}
