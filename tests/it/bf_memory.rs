//! `MEMORY USAGE` of a filter tells what the key really costs: for every shape (small and
//! large, scaling and not, both layouts, every representation of a sub-filter) it is within
//! ±10% (on jemalloc; `usage_band` says why glibc gets a wider band) of the growth of
//! `used_memory` the key causes, measured over many keys of the shape on
//! a server the test started (thousands of keys for the small shapes, fewer for big ones).
//!
//! The writes go through a connection that is closed before `used_memory` is read again, so
//! that its buffers are not counted, after a pause that lets the keyspace's incremental rehash
//! finish. The server allocates some things once, on first use (tens of KB: the arrays a
//! command's propagation uses, and more the first time thousands of keys are created), and
//! those are not any key's cost: the first shape is measured twice and each shape is first
//! written once to a few keys and flushed.
use crate::common::*;
use redis::Connection;

/// A shape: its name, how many keys, how each is created, and the items added to each. Keys
/// come by the thousand: serverCron frees or shrinks an idle connection's query buffer (16 KB,
/// and tens of KB after a `BF.MADD` of 1,000 items) whenever it runs, which must stay a small
/// part of the growth measured, also on a loaded machine.
struct Shape {
    name: &'static str,
    keys: usize,
    create: &'static [&'static str],
    items: usize,
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "default, 1 item",
        keys: 16_000,
        create: &[],
        items: 1,
    },
    Shape {
        name: "default, 10 items",
        keys: 16_000,
        create: &[],
        items: 10,
    },
    Shape {
        name: "default, 100 items",
        keys: 8_000,
        create: &[],
        items: 100,
    },
    Shape {
        name: "default, 250 items (two sub-filters)",
        keys: 4_000,
        create: &[],
        items: 250,
    },
    Shape {
        name: "default, 1,000 items",
        keys: 2_000,
        create: &[],
        items: 1_000,
    },
    Shape {
        name: "default, 20,000 items",
        keys: 100,
        create: &[],
        items: 20_000,
    },
    Shape {
        name: "0.01 / 1,000 non-scaling, 700 items",
        keys: 300,
        create: &["BF.RESERVE", "0.01", "1000", "NONSCALING"],
        items: 700,
    },
    Shape {
        name: "0.5 / 50, 20 items",
        keys: 16_000,
        create: &["BF.RESERVE", "0.5", "50"],
        items: 20,
    },
    Shape {
        name: "0.5 / 2,000, 500 items (a small bit array)",
        keys: 4_000,
        create: &["BF.RESERVE", "0.5", "2000"],
        items: 500,
    },
    Shape {
        name: "1e-9 / 100, 50 items",
        keys: 4_000,
        create: &["BF.RESERVE", "1e-9", "100"],
        items: 50,
    },
    Shape {
        name: "0.001 / 200,000, 1,000 items",
        keys: 20,
        create: &["BF.RESERVE", "0.001", "200000"],
        items: 1_000,
    },
    Shape {
        name: "blocked 0.01 / 100, 30 items",
        keys: 16_000,
        create: &["BF.RESERVE", "0.01", "100", "LAYOUT", "blocked"],
        items: 30,
    },
    Shape {
        name: "blocked 0.01 / 100 grown, 1,000 items",
        keys: 300,
        create: &["BF.RESERVE", "0.01", "100", "LAYOUT", "blocked"],
        items: 1_000,
    },
    Shape {
        name: "blocked 0.001 / 200,000, 1,000 items",
        keys: 20,
        create: &["BF.RESERVE", "0.001", "200000", "LAYOUT", "blocked"],
        items: 1_000,
    },
];

/// (bytes per key by used_memory growth, mean MEMORY USAGE) for `shape`.
fn measure(server: &Server, c: &mut Connection, shape: &Shape) -> (f64, f64) {
    // Flushes are synchronous: Valkey flushes in the background by default, and its values
    // may not all be freed yet when `lazyfree_pending_objects` already reads 0.
    ok(c, &["FLUSHALL", "SYNC"]);
    // A few keys of a large shape warm up as well as a hundred.
    write(
        server,
        shape,
        if shape.keys < 10 { shape.keys } else { 100 },
    );
    ok(c, &["FLUSHALL", "SYNC"]);
    let before = used_memory(c, 1);
    let keys = write(server, shape, shape.keys);
    let after = used_memory(c, 1);
    let real = (after - before) as f64 / keys.len() as f64;
    let reported = memory_usage_of(c, &keys) as f64 / keys.len() as f64;
    (real, reported)
}

/// Creates `count` keys of `shape` through a connection of its own, closed at the end.
fn write(server: &Server, shape: &Shape, count: usize) -> Vec<String> {
    let keys: Vec<String> = (0..count).map(|i| format!("key:{i:06}")).collect();
    let mut writer = server.conn();
    let mut pipe = redis::pipe();
    for (n, key) in keys.iter().enumerate() {
        if let Some((command, args)) = shape.create.split_first() {
            pipe.cmd(command).arg(key).arg(args).ignore();
        }
        let items: Vec<String> = (0..shape.items).map(|i| format!("{key}:{i}")).collect();
        for batch in items.chunks(1_000) {
            pipe.cmd("BF.MADD").arg(key).arg(batch).ignore();
        }
        if n % 50 == 49 || n == keys.len() - 1 {
            pipe.exec(&mut writer).unwrap();
            pipe = redis::pipe();
        }
    }
    keys
}

#[test]
fn memory_usage_is_within_ten_percent_of_used_memory() {
    let server = Server::start();
    let mut c = server.conn();
    let mut report = String::new();
    let mut off = Vec::new();
    let band = usage_band(&mut c);
    measure(&server, &mut c, &SHAPES[0]);
    for shape in SHAPES {
        // A shape off the band is measured once more: under a loaded CI runner, one
        // used_memory reading of Valkey's (glibc malloc) was once 40% short of the keys'
        // growth, a fluke the second reading does not repeat; a wrong count repeats.
        for attempt in 1..=2 {
            let (real, reported) = measure(&server, &mut c, shape);
            let ratio = reported / real;
            report += &format!(
                "{:<42} {real:>10.0} B/key real, MEMORY USAGE {reported:>10.0} ({ratio:.3})\n",
                shape.name
            );
            if band.contains(&ratio) {
                break;
            }
            if attempt == 2 {
                off.push(shape.name);
            }
        }
    }
    eprintln!("{report}");
    assert!(off.is_empty(), "off the band {band:?}: {off:?}\n{report}");
}

/// Bit arrays above 16 MiB are held in 16 MiB segments, the first ones together as large a size
/// class as they make (src/bloom/words.rs), so only the last one is rounded up to a class: a filter whose bits are just over 32 MiB costs
/// about its bits, where one allocation took the 40 MiB class (25% more). MEMORY USAGE says
/// what it costs, within ±10% of the used_memory growth, as for every shape above.
#[test]
fn large_filters_cost_their_bits_not_a_size_class() {
    const LARGE: &[Shape] = &[
        Shape {
            name: "0.01 / 28,100,000 non-scaling (32.1 MiB of bits)",
            keys: 3,
            create: &["BF.RESERVE", "0.01", "28100000", "NONSCALING"],
            items: 1_000,
        },
        Shape {
            name: "blocked 0.01 / 27,100,000 non-scaling (32.1 MiB of bits)",
            keys: 3,
            create: &[
                "BF.RESERVE",
                "0.01",
                "27100000",
                "NONSCALING",
                "LAYOUT",
                "blocked",
            ],
            items: 1_000,
        },
    ];
    let server = Server::start();
    let mut c = server.conn();
    let mut report = String::new();
    let mut off = Vec::new();
    for shape in LARGE {
        let (real, reported) = measure(&server, &mut c, shape);
        let ratio = reported / real;
        report += &format!(
            "{:<58} {real:>10.0} B/key real, MEMORY USAGE {reported:>10.0} ({ratio:.3})\n",
            shape.name
        );
        // The bits are 32.1 MiB: one allocation took the 40 MiB class.
        let (bits_low, one_allocation) = (32 << 20, 40 << 20);
        if !(0.9..=1.1).contains(&ratio)
            || real < bits_low as f64
            || real > 0.85 * one_allocation as f64
        {
            off.push(shape.name);
        }
    }
    eprintln!("{report}");
    assert!(off.is_empty(), "off: {off:?}\n{report}");
}

/// The server's resident anonymous memory in huge pages (`AnonHugePages` of
/// /proc/PID/smaps_rollup), in bytes.
fn anon_huge_pages(server: &Server) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", server.pid())).unwrap();
    let line = rollup
        .lines()
        .find(|l| l.starts_with("AnonHugePages:"))
        .expect("AnonHugePages in smaps_rollup");
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// `bf-huge-pages`: off by default, a large filter's bits stay in 4 KiB pages; on (by `CONFIG
/// SET` or as a load argument), a large filter made afterwards is backed by 2 MiB pages. Only
/// where the kernel's THP mode is `madvise`, the one where the advice alone decides (under
/// `always` Redis turns THP off for itself or every block gets huge pages; under `never` none
/// does); elsewhere the test says it skipped.
#[test]
fn huge_pages_back_large_filters_when_asked() {
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !mode.contains("[madvise]") {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED huge_pages_back_large_filters_when_asked: THP mode {:?} ***\n",
            mode.trim()
        );
        return;
    }
    // A 0.001 / 20M filter: 34 MiB of bits (two 16 MiB segments and a shorter one); 20,000
    // items write to nearly every 4 KiB page of it.
    let fill = |c: &mut Connection, key: &str| {
        ok(c, &["BF.RESERVE", key, "0.001", "20000000", "NONSCALING"]);
        add_many(c, "BF.MADD", key, key, 20_000);
    };
    let server = Server::start();
    let mut c = server.conn();
    let shown: Vec<String> = redis::cmd("CONFIG")
        .arg(&["GET", "lcbloom.bf-huge-pages"])
        .query(&mut c)
        .unwrap();
    assert_eq!(shown[1], "no");
    let before = anon_huge_pages(&server);
    fill(&mut c, "bf:4k");
    let off = anon_huge_pages(&server) - before;
    assert!(off < 4 << 20, "bf-huge-pages no: {off} bytes in huge pages");

    let e = err_text(cmd(
        &mut c,
        &["CONFIG", "SET", "lcbloom.bf-huge-pages", "maybe"],
    ));
    assert!(e.contains("bf-huge-pages"), "{e}");
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-huge-pages", "yes"]);
    fill(&mut c, "bf:2m");
    let on = anon_huge_pages(&server) - before - off;
    // All but the pages at the segments' unaligned ends, unless the kernel had no free 2 MiB
    // pages to give: a quarter is asked.
    assert!(on >= 8 << 20, "bf-huge-pages yes: {on} bytes in huge pages");
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-huge-pages", "no"]);
    fill(&mut c, "bf:4k-again");
    let again = anon_huge_pages(&server) - before - off - on;
    assert!(
        again < 4 << 20,
        "set back to no: {again} bytes in huge pages"
    );

    let loaded = Server::builder().module_arg("bf-huge-pages", "yes").start();
    let mut c = loaded.conn();
    let before = anon_huge_pages(&loaded);
    fill(&mut c, "bf:2m");
    let on = anon_huge_pages(&loaded) - before;
    assert!(
        on >= 8 << 20,
        "loaded with bf-huge-pages yes: {on} bytes in huge pages"
    );
    eprintln!("huge-page bytes of a 34 MiB filter: off {off}, on {on}, off again {again}");
}

/// A filter whose rate no other key has pays for its own copy of the parameters, one
/// sub-filter's about 200 bytes with its table entry, and `MEMORY USAGE` says so: each key
/// counts its share of the parameters it holds (the whole copy here; next to nothing for keys
/// created alike). The copy is allocated to its length: a list collected from an
/// iterator kept room for four sub-filters, 462 bytes a key in all, and `MEMORY USAGE`
/// counted none of it; a copy of the sparse sets' parameters beside it took 72 bytes more.
#[test]
fn parameters_of_a_keys_own_cost_one_copy_which_memory_usage_counts() {
    let server = Server::start();
    let mut c = server.conn();
    let band = usage_band(&mut c);
    // (used_memory growth, MEMORY USAGE) a key: each key of a rate of its own, from the
    // `first`th rate on, or all alike.
    let per_key = |c: &mut Connection, own_rates_from: Option<usize>| -> (f64, f64) {
        const KEYS: usize = 5_000;
        ok(c, &["FLUSHALL", "SYNC"]);
        let before = used_memory(c, 1);
        let names: Vec<String> = (0..KEYS).map(|i| format!("k{i}")).collect();
        let mut writer = server.conn();
        for (chunk, first) in names.chunks(100).zip((0..).step_by(100)) {
            let mut pipe = redis::pipe();
            for (i, key) in (first..).zip(chunk) {
                let rate = match own_rates_from {
                    Some(from) => 0.001 * (1.0 + (from + i) as f64 / 1e6),
                    None => 0.001,
                };
                pipe.cmd("BF.RESERVE").arg(key).arg(rate).arg(100).ignore();
                pipe.cmd("BF.MADD").arg(key).arg(items(key, 30)).ignore();
            }
            pipe.exec(&mut writer).unwrap();
        }
        drop(writer);
        let keys: usize = redis::cmd("DBSIZE").query(c).unwrap();
        assert_eq!(keys, KEYS);
        let real = (used_memory(c, 1) - before) as f64 / KEYS as f64;
        (real, memory_usage_of(c, &names) as f64 / KEYS as f64)
    };
    // The server's one-time allocations first, with keys alike: keys of their own rates would
    // leave entries in the table of parameters, which the measured keys' sweep would free.
    per_key(&mut c, None);
    let alike = per_key(&mut c, None);
    let own = per_key(&mut c, Some(0));
    let report = format!(
        "a key of its own rate: {:.0} B, MEMORY USAGE {:.0}; alike: {:.0} B, MEMORY USAGE {:.0}",
        own.0, own.1, alike.0, alike.1
    );
    eprintln!("{report}");
    assert!(own.0 - alike.0 < 230.0, "{report}");
    // (Keys alike: `memory_usage_is_within_ten_percent_of_used_memory`.)
    assert!(band.contains(&(own.1 / own.0)), "{report}");
}
