//! What a user switching from RedisBloom, or reading the README, meets: load arguments
//! (RedisBloom's honoured, its other types' ignored with a warning, anything else refused with
//! the argument, its value and what is allowed), the limits' texts and what they admit, the
//! error texts that differ from RedisBloom's, `BF.SCANDUMP key -1`, the yes/no-field rule in both protocols, the module version, and what
//! the README names (clients, tested servers).

use crate::common::*;
use redis::Value;
use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

fn config_get(c: &mut redis::Connection, name: &str) -> String {
    let reply: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query(c).unwrap();
    reply[1].clone()
}

#[test]
fn redisbloom_load_arguments_set_the_bloom_defaults() {
    let server = Server::builder()
        .module_arg("INITIAL_SIZE", "400")
        .module_arg("ERROR_RATE", "0.004")
        .module_arg("CF_MAX_EXPANSIONS", "8")
        .start();
    let mut c = server.conn();
    assert_eq!(config_get(&mut c, "lcbloom.bf-initial-size"), "400");
    assert_eq!(config_get(&mut c, "lcbloom.bf-error-rate"), "0.004");
    ok(&mut c, &["BF.ADD", "f", "a"]);
    let capacity: Vec<i64> = redis::cmd("BF.INFO")
        .arg("f")
        .arg("CAPACITY")
        .query(&mut c)
        .unwrap();
    assert_eq!(capacity, [400]);
    let log = server.log();
    assert!(
        log.contains("RedisBloom's load argument 'INITIAL_SIZE' '400' sets bf-initial-size"),
        "{log}"
    );
    assert!(log.contains("RedisBloom's load argument 'ERROR_RATE' '0.004' sets bf-error-rate"));
    // Warning level (`#` in the log): a cuckoo setting means nothing here.
    let ignored = log
        .lines()
        .find(|l| l.contains("ignoring RedisBloom's load argument 'CF_MAX_EXPANSIONS' '8'"))
        .expect("the ignored argument is logged");
    assert!(
        ignored.contains(" # ") && ignored.contains("no cuckoo filters"),
        "{ignored}"
    );
}

#[test]
fn own_load_arguments_take_units_and_either_case_and_the_config_file_wins() {
    let server = Server::builder()
        .module_arg("max-memory-per-key", "2mb")
        .module_arg("BF-LAYOUT", "blocked")
        .module_arg("lc-capacity", "1000")
        .arg("lcbloom.lc-capacity", "2000")
        .start();
    let mut c = server.conn();
    assert_eq!(config_get(&mut c, "lcbloom.max-memory-per-key"), "2097152");
    assert_eq!(config_get(&mut c, "lcbloom.bf-layout"), "blocked");
    assert_eq!(config_get(&mut c, "lcbloom.lc-capacity"), "2000");
}

#[test]
fn a_misspelt_argument_or_a_bad_value_stops_the_start_naming_it() {
    let log = Server::builder()
        .module_arg("bf-eror-rate", "0.001")
        .start_expecting_failure();
    assert!(
        log.contains("unknown load argument 'bf-eror-rate' (value '0.001'); allowed: "),
        "{log}"
    );
    assert!(
        log.contains("bf-error-rate (RedisBloom: ERROR_RATE)"),
        "{log}"
    );
    ServerBuilder::refusing_load_argument("bf-initial-size", "abc", "an integer from 1 to");
    ServerBuilder::refusing_load_argument("ERROR_RATE", "2", "a number from ");
}

/// The refusal's text, and the smallest rates it names: both accepted, the scaling one with
/// room for the sub-filters it promises (refused at `BF.RESERVE`, not at the third item).
#[test]
fn the_smallest_error_rates_named_are_accepted() {
    let server = Server::start();
    let mut c = server.conn();
    let refusal = err_text(cmd(&mut c, &["BF.RESERVE", "t", "1e-15", "10"]));
    let prefix = "ERR error rate too small (at least 1e-15 for a non-scaling filter, ";
    let rest = refusal
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{refusal}"));
    let scaling = rest.split(' ').next().unwrap();
    assert!(
        rest.ends_with("for a scaling one, which then has room for 20 sub-filters)"),
        "{refusal}"
    );
    // The documented text.
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands.md"))
            .unwrap();
    assert!(
        docs.contains(&format!("{scaling} for a scaling")),
        "{scaling} in docs/commands.md"
    );
    ok(&mut c, &["BF.RESERVE", "n", "1e-15", "10", "NONSCALING"]);
    ok(&mut c, &["BF.RESERVE", "n2", "1.5e-15", "10", "NONSCALING"]);
    // 2e-15 scaling used to be accepted and then refused its third item.
    assert_eq!(
        err_text(cmd(&mut c, &["BF.RESERVE", "sc", "2e-15", "2"])),
        refusal
    );
    // The scaling minimum, capacity 1 and expansion 1: each item adds a sub-filter.
    ok(&mut c, &["BF.RESERVE", "s", scaling, "1", "EXPANSION", "1"]);
    for i in 0..=20 {
        ok(&mut c, &["BF.ADD", "s", &format!("item{i}")]);
    }
    let filters: Vec<i64> = redis::cmd("BF.INFO")
        .arg("s")
        .arg("FILTERS")
        .query(&mut c)
        .unwrap();
    assert_eq!(filters, [21]);
}

#[test]
fn a_capacity_beyond_any_filter_says_how_many_bytes_it_needs() {
    let server = Server::start();
    let mut c = server.conn();
    let refusal = err_text(cmd(&mut c, &["BF.RESERVE", "h", "0.01", "100000000000000"]));
    assert!(
        refusal.starts_with("ERR filter would use ")
            && refusal.ends_with(" bytes, more than max-memory-per-key (1073741824 bytes)"),
        "{refusal}"
    );
}

#[test]
fn scandump_of_a_negative_iterator_ends_the_dump() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, &["BF.RESERVE", "f", "0.01", "100"]);
    ok(&mut c, &["BF.ADD", "f", "a"]);
    for iterator in ["-1", "-5"] {
        let reply = ok(&mut c, &["BF.SCANDUMP", "f", iterator]);
        assert_eq!(
            reply,
            Value::Array(vec![Value::Int(0), Value::BulkString(Vec::new())]),
            "{iterator}"
        );
    }
}

/// docs/operations.md's "Stricter or different": the error texts that differ from RedisBloom
/// 2.8.2's, each asked of both servers, and neither server making a key of a refused command.
#[test]
fn error_texts_differ_from_redisbloom_as_documented() {
    let Some(module) = redisbloom::module() else {
        return;
    };
    let (ours, theirs) = (Server::start(), redisbloom::server(&module));
    let (mut a, mut b) = (ours.conn(), theirs.conn());
    ok(&mut a, &["BF.ADD", "f", "a"]);
    ok(&mut b, &["BF.ADD", "f", "a"]);
    // The error line as sent, trailing spaces kept (clients' parsers trim them).
    let error_line = |server: &Server, args: &[&str]| -> String {
        use std::io::{BufRead, BufReader, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request += &format!("${}\r\n{arg}\r\n", arg.len());
        }
        stream.write_all(request.as_bytes()).unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        let text = line.strip_suffix("\r\n").unwrap_or(&line);
        let error = text.strip_prefix('-');
        error
            .unwrap_or_else(|| panic!("{args:?}: not an error: {line:?}"))
            .to_string()
    };
    let arity = |command: &str| format!("ERR wrong number of arguments for '{command}' command");
    let (reserve, insert) = (arity("bf.reserve"), arity("bf.insert"));
    // (command, lcbloom's reply, RedisBloom's)
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["BF.INSERT", "k", "CAPACITY", "x", "ITEMS", "a"],
            "ERR bad capacity",
            "Bad capacity",
        ),
        (
            &["BF.INFO", "f", "x"],
            "ERR Invalid information value",
            "Invalid information value",
        ),
        (
            &["BF.INSERT", "k", "X", "ITEMS", "a"],
            "ERR unknown argument 'X'",
            "Unknown argument received",
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.01",
                "2",
                "EXPANSION",
                "2",
                "NONSCALING",
            ],
            "ERR nonscaling filters cannot expand",
            "Nonscaling filters cannot expand",
        ),
        (
            &["BF.RESERVE", "k", "2", "2"],
            "ERR (0 < error rate range < 1)",
            "ERR (0 < error rate range < 1) ",
        ),
        (
            &["BF.INSERT", "k", "ERROR", "abc", "ITEMS", "a"],
            "ERR bad error rate",
            "Bad error rate",
        ),
        (
            &["BF.INSERT", "k", "EXPANSION", "abc", "ITEMS", "a"],
            "ERR bad expansion",
            "Bad expansion",
        ),
        (
            &["BF.SCANDUMP", "f", "abc"],
            "ERR Second argument must be numeric",
            "Second argument must be numeric",
        ),
        (
            &["BF.INSERT", "k", "ERROR", "2", "ITEMS", "a"],
            "ERR (0 < error rate range < 1)",
            "Bad argument received",
        ),
        (
            &["BF.INSERT", "k", "CAPACITY", "0", "ITEMS", "a"],
            "ERR (capacity should be larger than 0)",
            "Bad argument received",
        ),
        (
            &["BF.INSERT", "k", "CAPACITY", "100"],
            "ERR ITEMS and at least one item are required",
            &insert,
        ),
        (
            &[
                "BF.RESERVE",
                "k",
                "0.05",
                "3",
                "EXPANSION",
                "1",
                "EXPANSION",
                "4",
            ],
            "ERR EXPANSION given more than once",
            &reserve,
        ),
        (
            &["BF.RESERVE", "k", "0.01", "2", "EXPANSION", "NONSCALING"],
            "ERR bad expansion",
            "Nonscaling filters cannot expand",
        ),
        (
            &["BF.LOADCHUNK", "f", "1", "x"],
            "ERR item exists",
            "ERR invalid offset - no link found",
        ),
        (
            &["BF.LOADCHUNK", "f", "99999999", "x"],
            "ERR invalid chunk: offset and length must lie within the filter's data",
            "ERR invalid offset - no link found",
        ),
    ];
    for (args, lcbloom, redisbloom) in cases {
        assert_eq!(error_line(&ours, args), *lcbloom, "lcbloom: {args:?}");
        assert_eq!(
            error_line(&theirs, args),
            *redisbloom,
            "RedisBloom: {args:?}"
        );
    }
    for c in [&mut a, &mut b] {
        assert_eq!(ok(c, &["DBSIZE"]), Value::Int(1));
    }
    // The error-rate floor, which RedisBloom does not have.
    let tiny = ["BF.RESERVE", "k", "1e-14", "100"];
    assert!(error_line(&ours, &tiny).starts_with("ERR error rate too small (at least 1e-15"));
    assert_eq!(ok(&mut b, &tiny), Value::Okay);
}

/// docs/commands.md's rule: a yes/no field of an INFO-like reply is the integer 1 or 0 in RESP2
/// and in RESP3.
#[test]
fn yes_no_fields_are_integers_in_both_protocols() {
    let server = Server::start();
    let mut c = server.conn();
    ok(
        &mut c,
        &["BF.RESERVE", "b", "0.01", "100", "LAYOUT", "blocked"],
    );
    ok(&mut c, &["LC.ADD", "l", "a"]);
    for (proto, mut c) in [("resp2", server.conn()), ("resp3", server.conn3())] {
        let bf = ok(&mut c, &["BF.INFO", "b"]);
        let lc = ok(&mut c, &["LC.INFO", "l"]);
        let field = |reply: &Value, name: &str| -> Value {
            match reply {
                Value::Map(pairs) => pairs
                    .iter()
                    .find(|(k, _)| {
                        matches!(k, Value::SimpleString(s) if s == name)
                            || matches!(k, Value::BulkString(b) if b == name.as_bytes())
                    })
                    .map(|(_, v)| v.clone()),
                Value::Array(items) => items
                    .chunks(2)
                    .find(|p| {
                        matches!(&p[0], Value::SimpleString(s) if s == name)
                            || matches!(&p[0], Value::BulkString(b) if b == name.as_bytes())
                    })
                    .map(|p| p[1].clone()),
                other => panic!("{other:?}"),
            }
            .unwrap_or_else(|| panic!("{name} missing"))
        };
        assert_eq!(field(&bf, "Blocked"), Value::Int(1), "{proto}");
        assert_eq!(field(&lc, "Saturated"), Value::Int(0), "{proto}");
    }
}

/// `MODULE LIST`'s version is the crate's, 1.2.3 as 10203 (as RedisBloom 2.8.2 is 20802), and
/// `INFO lcbloom` shows the same.
#[test]
fn the_module_version_is_the_crates() {
    let [major, minor, patch] = [0, 1, 2].map(|i| {
        env!("CARGO_PKG_VERSION")
            .split('.')
            .nth(i)
            .and_then(|p| p.parse::<i64>().ok())
            .unwrap()
    });
    let expected = major * 10_000 + minor * 100 + patch;
    let server = Server::start();
    let mut c = server.conn();
    let modules: Vec<Vec<Value>> = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let ours = modules
        .iter()
        .find(|m| m.contains(&Value::BulkString(b"lcbloom".to_vec())))
        .expect("lcbloom in MODULE LIST");
    let at = ours
        .iter()
        .position(|v| *v == Value::BulkString(b"ver".to_vec()))
        .unwrap();
    assert_eq!(ours[at + 1], Value::Int(expected));
    let info: String = redis::cmd("INFO").arg("lcbloom").query(&mut c).unwrap();
    assert!(
        info.lines()
            .any(|l| l == format!("lcbloom_version:{expected}")),
        "{info}"
    );
}

/// The README names only clients whose tests run here: redis-py (tests/py), node-redis
/// (tests/node) and the Rust `redis` crate (tests/it/client_rust.rs).
#[test]
fn the_readme_names_only_tested_clients() {
    let readme = readme();
    for untested in [
        "Jedis",
        "go-redis",
        "ioredis",
        "Lettuce",
        "NRedisStack",
        "rueidis",
        "StackExchange",
    ] {
        assert!(!readme.contains(untested), "the README names {untested}");
    }
    assert!(
        readme.contains("redis-py")
            && readme.contains("node-redis")
            && readme.contains("`redis` crate")
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(root.join("tests/py/test_bf_client.py").exists());
    assert!(root.join("tests/node/bf_client.test.mjs").exists());
    assert!(root.join("tests/it/client_rust.rs").exists());
}

/// docs/architecture.md's map names every source file, so that a newcomer finds each one
/// there (`mod.rs` files are their folders' entries).
#[test]
fn the_architecture_map_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut folders = vec![root.join("src")];
    let mut unnamed = Vec::new();
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                folders.push(path);
            } else if name.ends_with(".rs") && name != "mod.rs" && !map.contains(&name) {
                unnamed.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "not in docs/architecture.md: {unnamed:?}"
    );
}

/// The README's list of tested servers is what `make test` and `make test-valkey` run.
#[test]
fn the_readme_states_the_servers_make_test_runs() {
    let makefile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Makefile")).unwrap();
    let versions = makefile
        .lines()
        .find_map(|l| l.strip_prefix("REDIS_VERSIONS := "))
        .expect("REDIS_VERSIONS in the Makefile");
    let readme = readme();
    let line = readme
        .lines()
        .find(|l| l.starts_with("Tested on "))
        .expect("the README's \"Tested on\" line");
    for version in versions.split_whitespace() {
        assert!(line.contains(&format!("Redis {version}")), "{line}");
    }
    assert!(
        line.contains("Redis 7.0") && line.contains("Valkey 9"),
        "{line}"
    );
}
