//! BF.* commands against a real redis-server: replies in RESP2 and RESP3, every error path,
//! scaling and non-scaling filters, WRONGTYPE both ways, MULTI/EXEC, Lua, EXPIRE, keyspace
//! events, and the memory limit (the Rust client's bloom API: tests/client_rust.rs).
use crate::common::*;
use redis::Value;

/// The reply as sent, errors inside arrays included (`query` would turn them into an Err).
fn raw(conn: &mut redis::Connection, args: &[&str]) -> Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    redis::ConnectionLike::req_command(conn, &c).unwrap()
}

fn err(conn: &mut redis::Connection, args: &[&str]) -> String {
    err_text(cmd(conn, args))
}

fn int(conn: &mut redis::Connection, args: &[&str]) -> i64 {
    match ok(conn, args) {
        Value::Int(i) => i,
        other => panic!("{args:?}: expected an integer, got {other:?}"),
    }
}

fn exists(conn: &mut redis::Connection, key: &str) -> bool {
    int(conn, &["EXISTS", key]) == 1
}

#[test]
fn replies_in_resp2() {
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    assert_eq!(ok(&mut c, &["BF.RESERVE", "f", "0.01", "100"]), Value::Okay);
    assert_eq!(ok(&mut c, &["BF.ADD", "f", "a"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["BF.ADD", "f", "a"]), Value::Int(0));
    assert_eq!(
        ok(&mut c, &["BF.MADD", "f", "a", "b", "c"]),
        Value::Array(vec![Value::Int(0), Value::Int(1), Value::Int(1)])
    );
    assert_eq!(ok(&mut c, &["BF.EXISTS", "f", "b"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["BF.EXISTS", "f", "zz"]), Value::Int(0));
    assert_eq!(
        ok(&mut c, &["BF.MEXISTS", "f", "a", "zz"]),
        Value::Array(vec![Value::Int(1), Value::Int(0)])
    );
    assert_eq!(int(&mut c, &["BF.CARD", "f"]), 3);
    // Size is the filter's own bytes; MEMORY USAGE adds the key's overhead.
    let size = bf_info(&mut c, "f", "SIZE");
    assert!(size > 16 && size < int(&mut c, &["MEMORY", "USAGE", "f"]));
    let info = ok(&mut c, &["BF.INFO", "f"]);
    let Value::Array(fields) = info else {
        panic!("{info:?}")
    };
    let expected = [
        ("Capacity", Value::Int(100)),
        ("Size", Value::Int(size)),
        ("Number of filters", Value::Int(1)),
        ("Number of items inserted", Value::Int(3)),
        ("Expansion rate", Value::Int(2)),
    ];
    assert_eq!(fields.len(), 10);
    for (i, (name, value)) in expected.iter().enumerate() {
        // Simple strings, as RedisBloom sends them.
        assert_eq!(fields[2 * i], Value::SimpleString(name.to_string()));
        assert_eq!(&fields[2 * i + 1], value);
    }
    for (field, value) in [
        ("CAPACITY", 100),
        ("size", size),
        ("Filters", 1),
        ("ITEMS", 3),
        ("EXPANSION", 2),
    ] {
        assert_eq!(
            ok(&mut c, &["BF.INFO", "f", field]),
            Value::Array(vec![Value::Int(value)])
        );
    }
    // Missing keys: EXISTS/MEXISTS 0s, CARD 0, INFO and SCANDUMP "not found".
    assert_eq!(ok(&mut c, &["BF.EXISTS", "none", "a"]), Value::Int(0));
    assert_eq!(
        ok(&mut c, &["BF.MEXISTS", "none", "a", "b"]),
        Value::Array(vec![Value::Int(0), Value::Int(0)])
    );
    assert_eq!(int(&mut c, &["BF.CARD", "none"]), 0);
    assert_eq!(err(&mut c, &["BF.INFO", "none"]), "ERR not found");
    assert_eq!(err(&mut c, &["BF.SCANDUMP", "none", "0"]), "ERR not found");
    assert!(!exists(&mut c, "none"));
}

#[test]
fn replies_in_resp3() {
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn3();
    assert_eq!(ok(&mut c, &["BF.ADD", "f", "a"]), Value::Boolean(true));
    assert_eq!(ok(&mut c, &["BF.ADD", "f", "a"]), Value::Boolean(false));
    assert_eq!(
        ok(&mut c, &["BF.MADD", "f", "a", "b"]),
        Value::Array(vec![Value::Boolean(false), Value::Boolean(true)])
    );
    assert_eq!(ok(&mut c, &["BF.EXISTS", "f", "a"]), Value::Boolean(true));
    assert_eq!(
        ok(&mut c, &["BF.MEXISTS", "f", "b", "zz"]),
        Value::Array(vec![Value::Boolean(true), Value::Boolean(false)])
    );
    assert_eq!(
        ok(&mut c, &["BF.INSERT", "f", "ITEMS", "c", "a"]),
        Value::Array(vec![Value::Boolean(true), Value::Boolean(false)])
    );
    let Value::Map(pairs) = ok(&mut c, &["BF.INFO", "f"]) else {
        panic!("INFO is not a map in RESP3")
    };
    let names: Vec<String> = pairs
        .iter()
        .map(|(k, _)| redis::from_redis_value(k.clone()).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Capacity",
            "Size",
            "Number of filters",
            "Number of items inserted",
            "Expansion rate"
        ]
    );
    assert_eq!(pairs[3].1, Value::Int(3));
    assert_eq!(
        ok(&mut c, &["BF.INFO", "f", "items"]),
        Value::Map(vec![(
            Value::SimpleString("Number of items inserted".to_string()),
            Value::Int(3)
        )])
    );
    ok(&mut c, &["BF.RESERVE", "n", "0.01", "10", "NONSCALING"]);
    let Value::Map(pairs) = ok(&mut c, &["BF.INFO", "n"]) else {
        panic!()
    };
    assert_eq!(pairs[4].1, Value::Nil);
    assert_eq!(
        ok(&mut c, &["BF.INFO", "n", "EXPANSION"]),
        Value::Map(vec![(
            Value::SimpleString("Expansion rate".to_string()),
            Value::Nil
        )])
    );
}

#[test]
fn non_scaling_filters_fill_up() {
    let server = Server::start();
    for mut c in [server.conn(), server.conn3()] {
        ok(&mut c, &["FLUSHALL"]);
        // Unseeded filters: with a random seed, an item past capacity is a false positive of
        // these tiny full filters in about one run in a hundred, answered instead of refused.
        ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-seed", "0"]);
        ok(&mut c, &["BF.RESERVE", "n", "0.01", "3", "NONSCALING"]);
        let reply = raw(&mut c, &["BF.MADD", "n", "a", "b", "c", "d", "e"]);
        let Value::Array(items) = reply else { panic!() };
        // Three added, the fourth is an error in its place, the fifth is not processed.
        assert_eq!(items.len(), 4, "{items:?}");
        assert!(format!("{:?}", items[3]).contains("non scaling filter is full"));
        assert_eq!(int(&mut c, &["BF.CARD", "n"]), 3);
        assert_eq!(
            err(&mut c, &["BF.ADD", "n", "f"]),
            "ERR non scaling filter is full"
        );
        // An item already present is answered, not refused.
        assert!(matches!(
            ok(&mut c, &["BF.ADD", "n", "a"]),
            Value::Int(0) | Value::Boolean(false)
        ));
        let reply = raw(&mut c, &["BF.INSERT", "n", "ITEMS", "a", "x", "y"]);
        let Value::Array(items) = reply else { panic!() };
        assert_eq!(items.len(), 2);
        // EXPANSION 0 is non-scaling too.
        ok(&mut c, &["BF.RESERVE", "z", "0.01", "1", "EXPANSION", "0"]);
        ok(&mut c, &["BF.ADD", "z", "a"]);
        assert_eq!(
            err(&mut c, &["BF.ADD", "z", "b"]),
            "ERR non scaling filter is full"
        );
    }
}

#[test]
fn scaling_filters_grow() {
    // Fixed seed: BF.CARD leaves out the items taken for false positives (3.5 of the 500 on
    // average), more than the 10 allowed in about 1 run of 1,000 under a random seed.
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    ok(&mut c, &["BF.RESERVE", "s", "0.01", "10", "EXPANSION", "3"]);
    let items: Vec<String> = (0..500).map(|i| format!("item{i}")).collect();
    let mut args = vec!["BF.MADD", "s"];
    args.extend(items.iter().map(String::as_str));
    ok(&mut c, &args);
    let filters = bf_info(&mut c, "s", "FILTERS");
    // 10 + 30 + 90 + 270 = 400 < ~500 ≤ 1210: five filters.
    assert_eq!(filters, 5);
    assert_eq!(
        ok(&mut c, &["BF.INFO", "s", "CAPACITY"]),
        Value::Array(vec![Value::Int(1210)])
    );
    assert_eq!(
        ok(&mut c, &["BF.INFO", "s", "EXPANSION"]),
        Value::Array(vec![Value::Int(3)])
    );
    let card = int(&mut c, &["BF.CARD", "s"]);
    assert!((490..=500).contains(&card), "{card}");
    let mut args = vec!["BF.MEXISTS", "s"];
    args.extend(items.iter().map(String::as_str));
    let Value::Array(found) = ok(&mut c, &args) else {
        panic!()
    };
    assert!(found.iter().all(|v| *v == Value::Int(1)));
}

#[test]
fn insert_options() {
    // Fixed seed: the item count after "c" asks whether it is a false positive.
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    ok(
        &mut c,
        &[
            "BF.INSERT",
            "i",
            "CAPACITY",
            "50",
            "ERROR",
            "0.001",
            "EXPANSION",
            "4",
            "ITEMS",
            "a",
            "b",
        ],
    );
    assert_eq!(bf_info(&mut c, "i", "CAPACITY"), 50);
    assert_eq!(bf_info(&mut c, "i", "EXPANSION"), 4);
    // Creation options are ignored when the key exists.
    ok(
        &mut c,
        &[
            "BF.INSERT",
            "i",
            "CAPACITY",
            "7",
            "NONSCALING",
            "ITEMS",
            "c",
        ],
    );
    assert_eq!(bf_info(&mut c, "i", "CAPACITY"), 50);
    assert_eq!(bf_info(&mut c, "i", "ITEMS"), 3);
    // They are parsed, not held to a new filter's limits: a rate too small to make a filter
    // is taken on one that exists, one out of range is refused.
    ok(&mut c, &["BF.INSERT", "i", "ERROR", "1e-20", "ITEMS", "e"]);
    assert!(err(
        &mut c,
        &["BF.INSERT", "new", "ERROR", "1e-20", "ITEMS", "e"]
    )
    .starts_with("ERR error rate too small"));
    assert!(err(&mut c, &["BF.INSERT", "i", "ERROR", "0", "ITEMS", "f"]).starts_with("ERR"));
    assert_eq!(bf_info(&mut c, "i", "ITEMS"), 4);
    // NOCREATE.
    assert_eq!(
        err(&mut c, &["BF.INSERT", "missing", "NOCREATE", "ITEMS", "a"]),
        "ERR not found"
    );
    assert!(!exists(&mut c, "missing"));
    ok(&mut c, &["BF.INSERT", "i", "NOCREATE", "ITEMS", "d"]);
    ok(
        &mut c,
        &[
            "BF.INSERT",
            "ns",
            "NONSCALING",
            "CAPACITY",
            "2",
            "ITEMS",
            "a",
        ],
    );
    assert_eq!(
        ok(&mut c, &["BF.INFO", "ns", "EXPANSION"]),
        Value::Array(vec![Value::Nil])
    );
    // Defaults come from the module configs.
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-initial-size", "77"]);
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.bf-expansion-factor", "5"],
    );
    ok(&mut c, &["BF.ADD", "d", "a"]);
    assert_eq!(bf_info(&mut c, "d", "CAPACITY"), 77);
    assert_eq!(bf_info(&mut c, "d", "EXPANSION"), 5);
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.bf-expansion-factor", "0"],
    );
    ok(&mut c, &["BF.MADD", "d0", "a"]);
    assert_eq!(
        ok(&mut c, &["BF.INFO", "d0", "EXPANSION"]),
        Value::Array(vec![Value::Nil])
    );
}

/// `bf-error-rate` holds only rates a scaling filter takes: one below made every implicit
/// create (`BF.ADD`, `BF.MADD`, `BF.INSERT` without options) fail, though the config took it.
#[test]
fn the_default_error_rate_is_one_a_new_filter_takes() {
    let server = Server::start();
    let mut c = server.conn();
    let refused = err(&mut c, &["CONFIG", "SET", "lcbloom.bf-error-rate", "1e-20"]);
    let allowed = "bf-error-rate must be a number from ";
    let least = refused
        .split_once(allowed)
        .and_then(|(_, rest)| rest.split_once(' '))
        .map(|(least, _)| least.to_string())
        .unwrap_or_else(|| panic!("{refused}"));
    assert!(
        refused.contains("(the smallest rate a scaling filter takes)"),
        "{refused}"
    );
    let shown = ok(&mut c, &["CONFIG", "GET", "lcbloom.bf-error-rate"]);
    assert_eq!(
        shown,
        Value::Array(vec![
            Value::BulkString(b"lcbloom.bf-error-rate".to_vec()),
            Value::BulkString(b"0.01".to_vec())
        ])
    );
    ok(&mut c, &["CONFIG", "SET", "lcbloom.bf-error-rate", &least]);
    assert_eq!(int(&mut c, &["BF.ADD", "a", "x"]), 1);
    ok(&mut c, &["BF.MADD", "m", "x"]);
    ok(&mut c, &["BF.INSERT", "i", "ITEMS", "x"]);
    ServerBuilder::refusing_load_argument(
        "bf-error-rate",
        "1e-30",
        &format!("a number from {least}"),
    );
}

#[test]
fn error_paths_leave_no_key() {
    let server = Server::start();
    let mut c = server.conn();
    let cases: &[(&[&str], &str)] = &[
        (&["BF.RESERVE", "k", "x", "10"], "ERR bad error rate"),
        (
            &["BF.RESERVE", "k", "0", "10"],
            "ERR (0 < error rate range < 1)",
        ),
        (
            &["BF.RESERVE", "k", "1", "10"],
            "ERR (0 < error rate range < 1)",
        ),
        (&["BF.RESERVE", "k", "nan", "10"], "ERR bad error rate"),
        (&["BF.RESERVE", "k", "0.01", "ten"], "ERR bad capacity"),
        (&["BF.RESERVE", "k", "0.01", "1.5"], "ERR bad capacity"),
        // Integers are written as Redis writes them: no leading zeros, no `-0`.
        (&["BF.RESERVE", "k", "0.01", "0100"], "ERR bad capacity"),
        (
            &["BF.RESERVE", "k", "0.01", "10", "EXPANSION", "02"],
            "ERR bad expansion",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "10", "EXPANSION", "-0"],
            "ERR bad expansion",
        ),
        (
            &["BF.INSERT", "k", "CAPACITY", "010", "ITEMS", "a"],
            "ERR bad capacity",
        ),
        (
            &["BF.INSERT", "k", "EXPANSION", "-0", "ITEMS", "a"],
            "ERR bad expansion",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "0"],
            "ERR (capacity should be larger than 0)",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "-3"],
            "ERR (capacity should be larger than 0)",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "10", "EXPANSION"],
            "ERR no expansion",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "10", "EXPANSION", "x"],
            "ERR bad expansion",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "10", "EXPANSION", "-1"],
            "ERR expansion must be between 0 (non-scaling) and 32768",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "10", "EXPANSION", "40000"],
            "ERR expansion must be between 0 (non-scaling) and 32768",
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "10",
                "NONSCALING",
                "EXPANSION",
                "2",
            ],
            "ERR nonscaling filters cannot expand",
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "10",
                "EXPANSION",
                "2",
                "EXPANSION",
                "2",
            ],
            "ERR EXPANSION given more than once",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "10", "NONSCALING", "nonscaling"],
            "ERR NONSCALING given more than once",
        ),
        (
            &["BF.RESERVE", "k", "0.01", "10", "junk"],
            "ERR unknown argument 'junk'",
        ),
        (
            &["BF.RESERVE", "k", "1e-300", "10"],
            "ERR error rate too small (at least 1e-15 for a non-scaling filter, 7.71e-13 for a \
             scaling one, which then has room for 20 sub-filters)",
        ),
        (
            &["BF.INSERT", "k", "CAPACITY", "0", "ITEMS", "a"],
            "ERR (capacity should be larger than 0)",
        ),
        (
            &["BF.INSERT", "k", "ERROR", "2", "ITEMS", "a"],
            "ERR (0 < error rate range < 1)",
        ),
        (
            &["BF.INSERT", "k", "ERROR", "x", "ITEMS", "a"],
            "ERR bad error rate",
        ),
        (
            &["BF.INSERT", "k", "EXPANSION", "x", "ITEMS", "a"],
            "ERR bad expansion",
        ),
        (
            &[
                "BF.INSERT",
                "k",
                "NONSCALING",
                "EXPANSION",
                "2",
                "ITEMS",
                "a",
            ],
            "ERR nonscaling filters cannot expand",
        ),
        (
            &[
                "BF.INSERT",
                "k",
                "CAPACITY",
                "5",
                "CAPACITY",
                "5",
                "ITEMS",
                "a",
            ],
            "ERR CAPACITY given more than once",
        ),
        (
            &["BF.INSERT", "k", "CAPACITY", "5", "a", "b"],
            "ERR unknown argument 'a'",
        ),
        (
            &["BF.INSERT", "k", "CAPACITY", "5", "ITEMS"],
            "ERR ITEMS and at least one item are required",
        ),
        (
            &["BF.INSERT", "k", "NONSCALING", "CAPACITY", "5"],
            "ERR ITEMS and at least one item are required",
        ),
        (
            &["BF.INSERT", "k", "NOCREATE", "ITEMS", "a"],
            "ERR not found",
        ),
        (&["BF.INFO", "k"], "ERR not found"),
        (&["BF.SCANDUMP", "k", "0"], "ERR not found"),
        (&["BF.LOADCHUNK", "k", "5", "abcd"], "ERR not found"),
        (
            &["BF.LOADCHUNK", "k", "x", "abcd"],
            "ERR Second argument must be numeric",
        ),
        // An iterator below 1: RedisBloom's replies, on a missing key and on a filter.
        (&["BF.LOADCHUNK", "k", "0", "abcd"], "ERR not found"),
        (&["BF.LOADCHUNK", "k", "-3", "abcd"], "ERR not found"),
        (
            &["BF.LOADCHUNK", "k", "1", "not a header"],
            "ERR received bad data",
        ),
        (
            &["BF.ADD", "k"],
            "ERR wrong number of arguments for 'bf.add' command",
        ),
        (
            &["BF.ADD", "k", "a", "b"],
            "ERR wrong number of arguments for 'bf.add' command",
        ),
        (
            &["BF.MADD", "k"],
            "ERR wrong number of arguments for 'bf.madd' command",
        ),
        (
            &["BF.EXISTS", "k", "a", "b"],
            "ERR wrong number of arguments for 'bf.exists' command",
        ),
        (
            &["BF.MEXISTS", "k"],
            "ERR wrong number of arguments for 'bf.mexists' command",
        ),
        (
            &["BF.RESERVE", "k", "0.01"],
            "ERR wrong number of arguments for 'bf.reserve' command",
        ),
        (
            &["BF.INSERT", "k", "ITEMS"],
            "ERR wrong number of arguments for 'bf.insert' command",
        ),
        (
            &["BF.INFO", "k", "a", "b"],
            "ERR wrong number of arguments for 'bf.info' command",
        ),
        (
            &["BF.CARD", "k", "a"],
            "ERR wrong number of arguments for 'bf.card' command",
        ),
        (
            &["BF.SCANDUMP", "k"],
            "ERR wrong number of arguments for 'bf.scandump' command",
        ),
        (
            &["BF.LOADCHUNK", "k", "1"],
            "ERR wrong number of arguments for 'bf.loadchunk' command",
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(&err(&mut c, args), expected, "{args:?}");
        assert!(!exists(&mut c, "k"), "{args:?} left a key");
    }
    // Errors on an existing filter.
    ok(&mut c, &["BF.RESERVE", "f", "0.01", "10"]);
    assert_eq!(
        err(&mut c, &["BF.RESERVE", "f", "0.01", "10"]),
        "ERR item exists"
    );
    assert_eq!(
        err(&mut c, &["BF.INFO", "f", "bogus"]),
        "ERR Invalid information value"
    );
    for iterator in ["x", "00", "-0", "010"] {
        assert_eq!(
            err(&mut c, &["BF.SCANDUMP", "f", iterator]),
            "ERR Second argument must be numeric"
        );
    }
    for iterator in ["0", "-1"] {
        assert_eq!(
            err(&mut c, &["BF.LOADCHUNK", "f", iterator, "abcd"]),
            "ERR received bad data"
        );
    }
    assert_eq!(
        err(&mut c, &["BF.LOADCHUNK", "f", "1", "x"]),
        "ERR item exists"
    );
}

#[test]
fn wrongtype_both_ways() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, &["SET", "s", "v"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["BF.RESERVE", "s", "0.01", "10"][..],
        &["BF.ADD", "s", "a"],
        &["BF.MADD", "s", "a"],
        &["BF.INSERT", "s", "ITEMS", "a"],
        &["BF.EXISTS", "s", "a"],
        &["BF.MEXISTS", "s", "a"],
        &["BF.INFO", "s"],
        &["BF.CARD", "s"],
        &["BF.SCANDUMP", "s", "0"],
        &["BF.LOADCHUNK", "s", "1", "x"],
    ] {
        assert_eq!(err(&mut c, args), wrongtype, "{args:?}");
    }
    assert_eq!(ok(&mut c, &["GET", "s"]), Value::BulkString(b"v".to_vec()));
    ok(&mut c, &["BF.ADD", "f", "a"]);
    assert_eq!(err(&mut c, &["GET", "f"]), wrongtype);
    assert_eq!(err(&mut c, &["LPUSH", "f", "x"]), wrongtype);
    assert_eq!(
        ok(&mut c, &["TYPE", "f"]),
        Value::SimpleString("lcbloomBF".into())
    );
}

#[test]
fn transactions_scripts_and_expiry() {
    // Fixed seed: BF.MADD must take "b" as new.
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    let reply: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("BF.ADD")
        .arg("t")
        .arg("a")
        .cmd("BF.MADD")
        .arg("t")
        .arg("a")
        .arg("b")
        .cmd("BF.EXISTS")
        .arg("t")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        reply,
        vec![
            Value::Int(1),
            Value::Array(vec![Value::Int(0), Value::Int(1)]),
            Value::Int(1)
        ]
    );
    let lua = ok(
        &mut c,
        &[
            "EVAL",
            "redis.call('BF.ADD', KEYS[1], 'x'); return {redis.call('BF.EXISTS', KEYS[1], 'x'), redis.call('BF.CARD', KEYS[1])}",
            "1",
            "l",
        ],
    );
    assert_eq!(lua, Value::Array(vec![Value::Int(1), Value::Int(1)]));
    let lua_err = err(
        &mut c,
        &[
            "EVAL",
            "return redis.call('BF.INFO', KEYS[1])",
            "1",
            "missing",
        ],
    );
    assert!(lua_err.contains("not found"), "{lua_err}");
    ok(&mut c, &["PEXPIRE", "t", "50"]);
    assert!(int(&mut c, &["PTTL", "t"]) > 0);
    // Until the server's clock passes the expiry (TIME does not touch the key).
    let expires = int(&mut c, &["PEXPIRETIME", "t"]);
    loop {
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut c).unwrap();
        if s * 1000 + us / 1000 > expires {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(ok(&mut c, &["BF.EXISTS", "t", "a"]), Value::Int(0));
    assert!(!exists(&mut c, "t"));
}

#[test]
fn keyspace_events_for_writes_that_change_something() {
    // Fixed seed: "b" or "c" taken for a false positive of this capacity-10 filter would
    // change nothing and fire no event.
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ed"]);
    let mut sub = server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    pubsub.set_read_timeout(Some(EVENT_WAIT)).unwrap();
    ok(&mut c, &["BF.RESERVE", "k", "0.01", "10"]);
    ok(&mut c, &["BF.ADD", "k", "a"]);
    ok(&mut c, &["BF.ADD", "k", "a"]); // no change, no event
    ok(&mut c, &["BF.MADD", "k", "b"]);
    ok(&mut c, &["BF.INSERT", "k", "ITEMS", "c"]);
    let Value::Array(dump) = ok(&mut c, &["BF.SCANDUMP", "k", "0"]) else {
        panic!()
    };
    let Value::BulkString(header) = &dump[1] else {
        panic!()
    };
    redis::cmd("BF.LOADCHUNK")
        .arg("k2")
        .arg(1)
        .arg(header.as_slice())
        .query::<()>(&mut c)
        .unwrap();
    let mut events = Vec::new();
    for _ in 0..5 {
        let msg = pubsub.get_message().unwrap();
        let key: String = msg.get_payload().unwrap();
        events.push((msg.get_channel_name().to_string(), key));
    }
    let names: Vec<&str> = events
        .iter()
        .map(|(ch, _)| ch.trim_start_matches("__keyevent@0__:"))
        .collect();
    assert_eq!(
        names,
        [
            "bf.reserve",
            "bf.add",
            "bf.madd",
            "bf.insert",
            "bf.loadchunk"
        ]
    );
    assert_eq!(events[4].1, "k2");
}

#[test]
fn memory_limit_and_a_billion_items() {
    let server = Server::start();
    let mut c = server.conn();
    // 0.001 at 10^9 items needs ~1.8 GB (non-scaling) or ~1.95 GB (scaling, tighter first link).
    let refused = err(&mut c, &["BF.RESERVE", "big", "0.001", "1000000000"]);
    assert!(refused.starts_with("ERR filter would use "), "{refused}");
    assert!(refused.contains("max-memory-per-key (1073741824 bytes)"));
    assert!(!exists(&mut c, "big"));
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "3gb"],
    );
    ok(&mut c, &["BF.RESERVE", "big", "0.001", "1000000000"]);
    assert_eq!(bf_info(&mut c, "big", "CAPACITY"), 1_000_000_000);
    let size = bf_info(&mut c, "big", "SIZE");
    assert!(size > 1_900_000_000 && size < 3 << 30, "{size}");
    ok(&mut c, &["DEL", "big"]);
    ok(
        &mut c,
        &["BF.RESERVE", "big", "0.001", "1000000000", "NONSCALING"],
    );
    let size = bf_info(&mut c, "big", "SIZE");
    // Sized for 95% of p: -n·ln(0.95·p)/ln²2 bits = 1.811 GB; within 1%, in a 1.5 GiB head and
    // 16 MiB segments (below jemalloc's 1.75 GiB class), plus the chain's own few hundred bytes.
    assert!(size <= 1_879_048_192 + 1024, "{size}");
    let bits = bf_bits(&mut c, "big");
    assert!(bits as f64 / 8.0 <= 1_810_600_000.0 * 1.01, "{bits}");
    ok(&mut c, &["DEL", "big"]);
    // Scaling stops at the limit with a clear error, and the filter keeps working.
    ok(
        &mut c,
        &["CONFIG", "SET", "lcbloom.max-memory-per-key", "2048"],
    );
    ok(
        &mut c,
        &["BF.RESERVE", "g", "0.01", "100", "EXPANSION", "4"],
    );
    let mut refused = None;
    for i in 0..100 {
        let batch: Vec<String> = (0..20).map(|j| format!("{i}-{j}")).collect();
        let mut args = vec!["BF.MADD", "g"];
        args.extend(batch.iter().map(String::as_str));
        let Value::Array(items) = raw(&mut c, &args) else {
            panic!()
        };
        if let Some(e) = items.iter().find(|v| matches!(v, Value::ServerError(_))) {
            refused = Some(format!("{e:?}"));
            break;
        }
    }
    let refused = refused.expect("scaling was never refused");
    assert!(refused.contains("max-memory-per-key"), "{refused}");
    assert!(bf_info(&mut c, "g", "SIZE") <= 2048);
    assert_eq!(ok(&mut c, &["BF.EXISTS", "g", "0-0"]), Value::Int(1));
}
