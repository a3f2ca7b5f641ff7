//! Least privilege and self-description through a real server (Redis 7.0 here, Valkey 9 under
//! `make test-valkey`): what ACL key permissions make of the key specs, key patterns across
//! `LC.COUNT`/`LC.MERGE`, ACL categories where the server has them, the README's
//! `ACL SETUSER` lines, what the flags make of read-only scripts and replicas, and
//! `COMMAND INFO` / `COMMAND DOCS` against the table below and docs/commands.md.

use crate::common::*;
use redis::{Connection, Value};
use std::collections::BTreeSet;

/// What `COMMAND INFO` must say about a command, and a call that succeeds on the fixture.
struct Expected {
    name: &'static str,
    flags: &'static [&'static str],
    arity: i64,
    /// first key, last key, step
    range: (i64, i64, i64),
    /// Per key spec: its flags, the index it begins at, its last key (relative; -1 = last).
    specs: &'static [(&'static [&'static str], i64, i64)],
    /// `$HEADER` is a BF.SCANDUMP header of `f`, `$COUNTER` an LC.LOADCHUNK payload.
    call: &'static [&'static str],
}

const READ: &[&str] = &["RO", "access"];
const ADD: &[&str] = &["RW", "access", "insert"];
const CREATE: &[&str] = &["OW", "insert"];
const RESTORE: &[&str] = &["RW", "update"];

const BLOOM: &[Expected] = &[
    Expected {
        name: "bf.reserve",
        flags: &["write", "denyoom", "module"],
        arity: -4,
        range: (1, 1, 1),
        specs: &[(CREATE, 1, 0)],
        call: &["BF.RESERVE", "f2", "0.01", "100", "EXPANSION", "4"],
    },
    Expected {
        name: "bf.add",
        flags: &["write", "denyoom", "module", "fast"],
        arity: 3,
        range: (1, 1, 1),
        specs: &[(ADD, 1, 0)],
        call: &["BF.ADD", "f", "z"],
    },
    Expected {
        name: "bf.madd",
        flags: &["write", "denyoom", "module"],
        arity: -3,
        range: (1, 1, 1),
        specs: &[(ADD, 1, 0)],
        call: &["BF.MADD", "f", "y", "z"],
    },
    Expected {
        name: "bf.insert",
        flags: &["write", "denyoom", "module"],
        arity: -4,
        range: (1, 1, 1),
        specs: &[(ADD, 1, 0)],
        call: &["BF.INSERT", "f", "NOCREATE", "ITEMS", "x", "y"],
    },
    Expected {
        name: "bf.exists",
        flags: &["readonly", "module", "fast"],
        arity: 3,
        range: (1, 1, 1),
        specs: &[(READ, 1, 0)],
        call: &["BF.EXISTS", "f", "a"],
    },
    Expected {
        name: "bf.mexists",
        flags: &["readonly", "module"],
        arity: -3,
        range: (1, 1, 1),
        specs: &[(READ, 1, 0)],
        call: &["BF.MEXISTS", "f", "a", "b"],
    },
    Expected {
        name: "bf.info",
        flags: &["readonly", "module", "fast"],
        arity: -2,
        range: (1, 1, 1),
        specs: &[(READ, 1, 0)],
        call: &["BF.INFO", "f", "CAPACITY"],
    },
    Expected {
        name: "bf.card",
        flags: &["readonly", "module", "fast"],
        arity: 2,
        range: (1, 1, 1),
        specs: &[(READ, 1, 0)],
        call: &["BF.CARD", "f"],
    },
    Expected {
        name: "bf.scandump",
        flags: &["readonly", "module"],
        arity: 3,
        range: (1, 1, 1),
        specs: &[(READ, 1, 0)],
        call: &["BF.SCANDUMP", "f", "0"],
    },
    Expected {
        name: "bf.loadchunk",
        flags: &["write", "denyoom", "module"],
        arity: 4,
        range: (1, 1, 1),
        specs: &[(RESTORE, 1, 0)],
        call: &["BF.LOADCHUNK", "f3", "1", "$HEADER"],
    },
];

const LC: &[Expected] = &[
    Expected {
        name: "lc.reserve",
        flags: &["write", "denyoom", "module", "fast"],
        arity: 4,
        range: (1, 1, 1),
        specs: &[(CREATE, 1, 0)],
        call: &["LC.RESERVE", "c3", "0.01", "100"],
    },
    Expected {
        name: "lc.add",
        flags: &["write", "denyoom", "module"],
        arity: -2,
        range: (1, 1, 1),
        specs: &[(ADD, 1, 0)],
        call: &["LC.ADD", "c", "q", "r"],
    },
    Expected {
        name: "lc.insert",
        flags: &["write", "denyoom", "module"],
        arity: -4,
        range: (1, 1, 1),
        specs: &[(ADD, 1, 0)],
        call: &["LC.INSERT", "c", "CAPACITY", "100", "ITEMS", "s"],
    },
    Expected {
        name: "lc.count",
        flags: &["readonly", "module"],
        arity: -2,
        range: (1, -1, 1),
        specs: &[(READ, 1, -1)],
        call: &["LC.COUNT", "c", "c2", "missing"],
    },
    Expected {
        name: "lc.merge",
        flags: &["write", "denyoom", "module"],
        arity: -3,
        range: (1, -1, 1),
        specs: &[(ADD, 1, 0), (READ, 2, -1)],
        call: &["LC.MERGE", "c", "c2", "missing"],
    },
    Expected {
        name: "lc.info",
        flags: &["readonly", "module", "fast"],
        arity: 2,
        range: (1, 1, 1),
        specs: &[(READ, 1, 0)],
        call: &["LC.INFO", "c"],
    },
    Expected {
        name: "lc.loadchunk",
        flags: &["write", "denyoom", "module"],
        arity: -3,
        range: (1, 1, 1),
        specs: &[(RESTORE, 1, 0)],
        call: &["LC.LOADCHUNK", "c4", "$COUNTER"],
    },
];

/// One family's commands and the ACL category they join, as the module's families declare
/// them (`<family>/table.rs`); a new family adds its table and one line here.
struct Family {
    category: &'static str,
    commands: &'static [Expected],
}

const FAMILIES: &[Family] = &[
    Family {
        category: "bloom",
        commands: BLOOM,
    },
    Family {
        category: "lc",
        commands: LC,
    },
];

/// Every command of every family.
fn commands() -> impl Iterator<Item = &'static Expected> {
    FAMILIES.iter().flat_map(|f| f.commands)
}

impl Expected {
    fn reads(&self) -> bool {
        self.flags.contains(&"readonly")
    }

    fn fast(&self) -> bool {
        self.flags.contains(&"fast")
    }

    /// The ACL category of the family whose table lists the command.
    fn family(&self) -> &'static str {
        FAMILIES
            .iter()
            .find(|f| f.commands.iter().any(|e| e.name == self.name))
            .map(|f| f.category)
            .expect("every command is in a family's table")
    }
}

/// Keys `f` (a filter with "a"), `c` and `c2` (counters), and what the calls' placeholders
/// stand for. Returns `$HEADER`.
fn fixture(c: &mut Connection) -> Vec<u8> {
    ok(c, &["FLUSHALL"]);
    ok(c, &["BF.RESERVE", "f", "0.01", "1000"]);
    ok(c, &["BF.ADD", "f", "a"]);
    ok(c, &["LC.ADD", "c", "a", "b"]);
    ok(c, &["LC.ADD", "c2", "x"]);
    let (_, header): (i64, Vec<u8>) = redis::cmd("BF.SCANDUMP").arg("f").arg(0).query(c).unwrap();
    header
}

/// The arguments of `e`'s call, placeholders filled in.
fn call_args(e: &Expected, header: &[u8]) -> Vec<Vec<u8>> {
    e.call
        .iter()
        .map(|a| match *a {
            "$HEADER" => header.to_vec(),
            "$COUNTER" => crate::common::ops::empty_bitmap_encoding(5, 0.5, 20),
            a => a.as_bytes().to_vec(),
        })
        .collect()
}

fn call(e: &Expected, header: &[u8]) -> redis::Cmd {
    let args = call_args(e, header);
    let mut cmd = redis::cmd(e.call[0]);
    cmd.arg(&args[1..]);
    cmd
}

fn dataset_digest(c: &mut Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap()
}

fn set_user(c: &mut Connection, line: &str) {
    let mut cmd = redis::cmd("ACL");
    for word in line.split_whitespace().skip(1) {
        cmd.arg(word);
    }
    let reply: Value = cmd.query(c).unwrap_or_else(|e| panic!("{line}: {e}"));
    assert_eq!(reply, Value::Okay, "{line}");
}

/// A connection authenticated as `user`.
fn login(server: &Server, user: &str, password: &str) -> Connection {
    let mut c = server.conn();
    ok(&mut c, &["AUTH", user, password]);
    c
}

fn is_noperm(result: &redis::RedisResult<Value>) -> bool {
    matches!(result, Err(e) if e.code() == Some("NOPERM"))
}

/// Which ACL category features the server has: categories on module commands (Redis 7.2+,
/// Valkey), and categories a module adds (Redis 7.4+, Valkey).
fn category_support(c: &mut Connection) -> (bool, bool) {
    (has_redis_api(c, 7, 2), has_redis_api(c, 7, 4))
}

// ---- RESP2 replies as plain values -------------------------------------------------------

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".to_string(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn list(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

fn texts(v: &Value) -> Vec<String> {
    list(v).iter().map(text).collect()
}

/// A flat RESP2 array of name, value pairs.
fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    list(v)
        .chunks(2)
        .find(|pair| text(&pair[0]) == name)
        .map(|pair| &pair[1])
}

fn sorted(items: &[impl ToString]) -> Vec<String> {
    let mut out: Vec<String> = items.iter().map(ToString::to_string).collect();
    out.sort();
    out
}

// ---- Key specs and ACL key permissions -----------------------------------------------------

#[test]
fn command_info_and_getkeysandflags_match_the_table() {
    let server = Server::start();
    let mut c = server.conn();
    let header = fixture(&mut c);
    let (categories, custom) = category_support(&mut c);
    let registered: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("MODULE")
        .arg("lcbloom")
        .query(&mut c)
        .unwrap();
    let names: Vec<&str> = commands().map(|e| e.name).collect();
    assert_eq!(sorted(&registered), sorted(&names));
    for e in commands() {
        let reply: Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(e.name)
            .query(&mut c)
            .unwrap();
        let info = list(&list(&reply)[0]);
        assert_eq!(text(&info[0]), e.name);
        assert_eq!(int(&info[1]), e.arity, "{} arity", e.name);
        assert_eq!(
            sorted(&texts(&info[2])),
            sorted(e.flags),
            "{} flags",
            e.name
        );
        let range = (int(&info[3]), int(&info[4]), int(&info[5]));
        assert_eq!(range, e.range, "{} first, last, step", e.name);
        let mut want_categories = Vec::new();
        if categories {
            want_categories.push(if e.reads() { "@read" } else { "@write" }.to_string());
            want_categories.push(if e.fast() { "@fast" } else { "@slow" }.to_string());
            if custom {
                want_categories.push(format!("@{}", e.family()));
            }
        }
        assert_eq!(
            sorted(&texts(&info[6])),
            sorted(&want_categories),
            "{} categories",
            e.name
        );
        let specs = list(&info[8]);
        assert_eq!(specs.len(), e.specs.len(), "{} key specs", e.name);
        for (spec, (flags, index, last)) in specs.iter().zip(e.specs) {
            assert_eq!(texts(field(spec, "flags").unwrap()), *flags, "{}", e.name);
            let begin = field(spec, "begin_search").unwrap();
            assert_eq!(text(field(begin, "type").unwrap()), "index");
            assert_eq!(
                int(field(field(begin, "spec").unwrap(), "index").unwrap()),
                *index
            );
            let find = field(spec, "find_keys").unwrap();
            assert_eq!(text(field(find, "type").unwrap()), "range");
            let find = field(find, "spec").unwrap();
            assert_eq!(int(field(find, "lastkey").unwrap()), *last, "{}", e.name);
            assert_eq!(int(field(find, "keystep").unwrap()), 1);
        }

        // COMMAND GETKEYSANDFLAGS on the call: every key the specs cover, with their flags
        // (cluster routing finds the keys the same way).
        let mut want: Vec<(String, Vec<String>)> = Vec::new();
        for (flags, index, last) in e.specs {
            let end = if *last < 0 {
                e.call.len() as i64 + last
            } else {
                index + last
            };
            for pos in *index..=end {
                let flags = flags.iter().map(|f| f.to_string()).collect();
                want.push((e.call[pos as usize].to_string(), flags));
            }
        }
        let mut getkeys = redis::cmd("COMMAND");
        getkeys.arg("GETKEYSANDFLAGS");
        for a in call(e, &header).args_iter() {
            if let redis::Arg::Simple(bytes) = a {
                getkeys.arg(bytes);
            }
        }
        let reply: Value = getkeys.query(&mut c).unwrap();
        let got: Vec<(String, Vec<String>)> = list(&reply)
            .iter()
            .map(|k| (text(&list(k)[0]), texts(&list(k)[1])))
            .collect();
        assert_eq!(got, want, "{}", e.name);
    }
}

/// A read-only user: may read every key, write none, run every command.
#[test]
fn a_read_only_key_permission_runs_every_read_and_no_write() {
    let server = Server::start();
    let mut admin = server.conn();
    let header = fixture(&mut admin);
    set_user(&mut admin, "ACL SETUSER ro on >pw %R~* +@all");
    let mut c = login(&server, "ro", "pw");
    let before = dataset_digest(&mut admin);
    for e in commands() {
        let result: redis::RedisResult<Value> = call(e, &header).query(&mut c);
        if e.reads() {
            result.unwrap_or_else(|err| panic!("{}: {err}", e.name));
        } else {
            assert!(is_noperm(&result), "{}: {result:?}", e.name);
        }
    }
    assert_eq!(
        dataset_digest(&mut admin),
        before,
        "a refused write changed data"
    );
}

/// The flags hold where no ACL is involved: read-only scripts (`EVAL_RO`, and `FCALL_RO` of a
/// function flagged `no-writes`) and a read-only replica run every read and refuse every write,
/// with the server's own errors, and nothing changes.
#[test]
fn read_only_scripts_and_replicas_run_every_read_and_no_write() {
    let server = Server::start();
    let replica = Server::start();
    attach_replica(&server, &replica);
    let mut c = server.conn();
    let header = fixture(&mut c);
    ok(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lcbloom_test\n\
             redis.register_function{function_name='ro', flags={'no-writes'},\
             callback=function(keys, args) return redis.call(unpack(args)) end}",
        ],
    );
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut c).unwrap();
    assert_eq!(acked, 1);
    let mut r = replica.conn();
    let before = dataset_digest(&mut c);
    assert_eq!(dataset_digest(&mut r), before);
    for e in commands() {
        let args = call_args(e, &header);
        let mut script = redis::cmd("EVAL_RO");
        script
            .arg("return redis.call(unpack(ARGV))")
            .arg(0)
            .arg(&args);
        let mut function = redis::cmd("FCALL_RO");
        function.arg("ro").arg(0).arg(&args);
        for (how, cmd) in [
            ("EVAL_RO", script),
            ("FCALL_RO", function),
            ("the replica", call(e, &header)),
        ] {
            let conn = if how == "the replica" { &mut r } else { &mut c };
            let result: redis::RedisResult<Value> = cmd.query(conn);
            match (e.reads(), result) {
                (true, Ok(_)) => {}
                (true, Err(err)) => panic!("{} in {how}: {err}", e.name),
                (false, Ok(v)) => panic!("{} in {how}: {v:?}", e.name),
                (false, Err(err)) => {
                    let refused = err.code() == Some("READONLY")
                        || err.to_string().contains("Write commands are not allowed");
                    assert!(refused, "{} in {how}: {err}", e.name);
                }
            }
        }
    }
    assert_eq!(
        dataset_digest(&mut c),
        before,
        "a refused write changed data"
    );
    assert_eq!(dataset_digest(&mut r), before);
}

#[test]
fn a_key_pattern_bounds_lc_count_and_lc_merge_sources() {
    let server = Server::start();
    let mut admin = server.conn();
    for key in ["mine:a", "mine:b", "other:a", "shared:a"] {
        ok(&mut admin, &["LC.ADD", key, key, "common"]);
    }
    // Read and write mine:*, nothing else.
    set_user(
        &mut admin,
        "ACL SETUSER mine on >pw resetkeys ~mine:* +@all",
    );
    let mut c = login(&server, "mine", "pw");
    let before = dataset_digest(&mut admin);
    for refused in [
        &["LC.COUNT", "mine:a", "other:a"][..],
        &["LC.COUNT", "other:a"],
        &["LC.MERGE", "mine:a", "mine:b", "other:a"],
        &["LC.MERGE", "other:a", "mine:a"],
        &["LC.MERGE", "mine:new", "other:a"],
    ] {
        let result = cmd(&mut c, refused);
        assert!(is_noperm(&result), "{refused:?}: {result:?}");
    }
    assert_eq!(dataset_digest(&mut admin), before);
    assert_eq!(ok(&mut c, &["LC.COUNT", "mine:a", "mine:b"]), Value::Int(3));
    ok(&mut c, &["LC.MERGE", "mine:a", "mine:b"]);
    assert_eq!(ok(&mut c, &["LC.COUNT", "mine:a"]), Value::Int(3));

    // Read shared:* as well: a source, never a destination.
    set_user(&mut admin, "ACL SETUSER mine %R~shared:*");
    assert_eq!(
        ok(&mut c, &["LC.COUNT", "mine:b", "shared:a"]),
        Value::Int(3)
    );
    ok(&mut c, &["LC.MERGE", "mine:b", "shared:a"]);
    assert_eq!(ok(&mut c, &["LC.COUNT", "mine:b"]), Value::Int(3));
    let before = dataset_digest(&mut admin);
    let result = cmd(&mut c, &["LC.MERGE", "shared:a", "mine:a"]);
    assert!(is_noperm(&result), "{result:?}");
    let result = cmd(&mut c, &["LC.ADD", "shared:a", "x"]);
    assert!(is_noperm(&result), "{result:?}");
    assert_eq!(dataset_digest(&mut admin), before);
}

// ---- ACL categories ------------------------------------------------------------------------

/// `ACL DRYRUN user <call>`: whether the user may run the call, without running it.
fn may_run(c: &mut Connection, user: &str, e: &Expected, header: &[u8]) -> bool {
    let mut dry = redis::cmd("ACL");
    dry.arg("DRYRUN").arg(user);
    for a in call(e, header).args_iter() {
        if let redis::Arg::Simple(bytes) = a {
            dry.arg(bytes);
        }
    }
    let reply: Value = dry.query(c).unwrap();
    matches!(&reply, Value::Okay) || matches!(&reply, Value::SimpleString(s) if s == "OK")
}

/// Whether `ACL CAT <category>` lists module commands (Valkey) or only the server's own (Redis).
fn lists_module_commands(c: &mut Connection) -> bool {
    let read: Vec<String> = redis::cmd("ACL").arg("CAT").arg("read").query(c).unwrap();
    read.iter().any(|name| name == "bf.exists")
}

/// An ACL rule and which commands it should grant.
type Grant = (String, Box<dyn Fn(&Expected) -> bool>);

#[test]
fn acl_categories_grant_exactly_their_commands_where_supported() {
    let server = Server::start();
    let mut admin = server.conn();
    let header = fixture(&mut admin);
    let (categories, custom) = category_support(&mut admin);
    set_user(&mut admin, "ACL SETUSER r on >pw ~* -@all +@read");
    if !categories {
        // Redis 7.0 cannot give module commands categories: +@read grants none of them
        // (the README gives 7.0's per-command lines instead).
        for e in commands() {
            assert!(!may_run(&mut admin, "r", e, &header), "{}", e.name);
        }
        return;
    }
    let mut grants: Vec<Grant> = vec![
        ("+@read".into(), Box::new(|e| e.reads())),
        ("+@write".into(), Box::new(|e| !e.reads())),
        ("+@fast".into(), Box::new(|e| e.fast())),
        ("+@slow".into(), Box::new(|e| !e.fast())),
    ];
    if custom {
        // Each family's category grants exactly its table's commands.
        for family in FAMILIES {
            let category = family.category;
            grants.push((
                format!("+@{category}"),
                Box::new(move |e| e.family() == category),
            ));
            grants.push((
                format!("+@{category} -@write"),
                Box::new(move |e| e.family() == category && e.reads()),
            ));
            let listed: Vec<String> = redis::cmd("ACL")
                .arg("CAT")
                .arg(category)
                .query(&mut admin)
                .unwrap();
            // Redis's ACL CAT lists its own commands only (7.2 and 7.4: `ACL CAT read` names
            // no module command either); Valkey lists module commands too. The grants below
            // check what the category does on both.
            let want: Vec<&str> = if lists_module_commands(&mut admin) {
                family.commands.iter().map(|e| e.name).collect()
            } else {
                Vec::new()
            };
            assert_eq!(sorted(&listed), sorted(&want), "ACL CAT {category}");
        }
    }
    for (grant, expected) in &grants {
        set_user(
            &mut admin,
            &format!("ACL SETUSER g on >pw ~* -@all {grant}"),
        );
        for e in commands() {
            assert_eq!(
                may_run(&mut admin, "g", e, &header),
                expected(e),
                "{grant} {}",
                e.name
            );
        }
    }
    // And for real: the +@read user runs every read and no write.
    let mut c = login(&server, "r", "pw");
    for e in commands() {
        let result: redis::RedisResult<Value> = call(e, &header).query(&mut c);
        if e.reads() {
            result.unwrap_or_else(|err| panic!("{}: {err}", e.name));
        } else {
            assert!(is_noperm(&result), "{}: {result:?}", e.name);
        }
    }
}

// ---- The README's ACL SETUSER lines --------------------------------------------------------

/// The lines of the README block after `<!-- readme-test: {name} -->`.
fn readme_block(name: &str) -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let marker = format!("<!-- readme-test: {name} -->\n```\n");
    let block = readme
        .split(&marker)
        .nth(1)
        .unwrap_or_else(|| panic!("README block {name} not found"));
    block
        .split("```")
        .next()
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// Runs each `ACL SETUSER` line, then checks its user: `reader` runs every read command and
/// gets NOPERM on every write, `writer` runs everything.
fn check_readme_users(server: &Server, lines: &[String]) {
    let mut admin = server.conn();
    let mut seen = BTreeSet::new();
    for line in lines {
        assert!(line.starts_with("ACL SETUSER "), "{line}");
        let header = fixture(&mut admin);
        set_user(&mut admin, line);
        let words: Vec<&str> = line.split_whitespace().collect();
        let (user, password) = (
            words[2],
            words.iter().find_map(|w| w.strip_prefix('>')).unwrap(),
        );
        seen.insert(user.to_string());
        let mut c = login(server, user, password);
        ok(&mut c, &["PING"]);
        let before = dataset_digest(&mut admin);
        for e in commands() {
            let result: redis::RedisResult<Value> = call(e, &header).query(&mut c);
            match user {
                "reader" if !e.reads() => assert!(is_noperm(&result), "{line}: {}", e.name),
                "reader" | "writer" => {
                    result.unwrap_or_else(|err| panic!("{line}: {}: {err}", e.name));
                }
                other => panic!("the test does not know what user {other} may do"),
            }
        }
        if user == "reader" {
            assert_eq!(dataset_digest(&mut admin), before, "{line}");
            // Reads other than lcbloom's work too.
            cmd(&mut c, &["TYPE", "f"]).unwrap();
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from(["reader".to_string(), "writer".to_string()])
    );
}

#[test]
fn the_readme_acl_lines_give_a_reader_and_a_writer() {
    let server = Server::start();
    let (categories, _) = category_support(&mut server.conn());
    // The lines for Redis 7.0 work on every server.
    check_readme_users(&server, &readme_block("acl-by-name"));
    if categories {
        check_readme_users(&server, &readme_block("acl-by-category"));
    }
}

// ---- COMMAND DOCS --------------------------------------------------------------------------

/// An argument of `COMMAND DOCS` in the syntax of docs/commands.md (Redis's own notation):
/// `[optional]`, `<one | of>`, `TOKEN value`, `item [item ...]`.
fn render(arg: &Value) -> String {
    let kind = text(field(arg, "type").unwrap());
    let token = field(arg, "token").map(text);
    let flags = field(arg, "flags").map(texts).unwrap_or_default();
    let subs = || list(field(arg, "arguments").expect("sub-arguments"));
    let mut unit = match kind.as_str() {
        "pure-token" => token.clone().unwrap(),
        "oneof" => subs().iter().map(render).collect::<Vec<_>>().join(" | "),
        "block" => subs().iter().map(render).collect::<Vec<_>>().join(" "),
        _ => text(field(arg, "name").unwrap()),
    };
    let optional = flags.iter().any(|f| f == "optional");
    if kind == "oneof" && !optional {
        unit = format!("<{unit}>");
    }
    let mut s = match &token {
        Some(t) if kind != "pure-token" => format!("{t} {unit}"),
        _ => unit.clone(),
    };
    if flags.iter().any(|f| f == "multiple_token") {
        s = format!("{s} [{s} ...]");
    } else if flags.iter().any(|f| f == "multiple") {
        s = format!("{s} [{unit} ...]");
    }
    if optional {
        s = format!("[{s}]");
    }
    s
}

/// docs/commands.md's `### NAME syntax` headings: (lower-case name, syntax, section text).
fn documented_commands() -> Vec<(String, String, String)> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md")).unwrap();
    doc.split("\n### ")
        .skip(1)
        .map(|section| {
            let section = section.split("\n## ").next().unwrap();
            let heading = section.lines().next().unwrap();
            let (name, syntax) = heading.split_once(' ').unwrap_or((heading, ""));
            (name.to_lowercase(), syntax.to_string(), section.to_string())
        })
        .collect()
}

#[test]
fn command_docs_are_complete_and_match_docs_commands_md() {
    let server = Server::start();
    let mut c = server.conn();
    let documented = documented_commands();
    let doc_names: Vec<&str> = documented.iter().map(|d| d.0.as_str()).collect();
    let names: Vec<&str> = commands().map(|e| e.name).collect();
    assert_eq!(
        sorted(&doc_names),
        sorted(&names),
        "one docs/commands.md section per command"
    );
    for (name, syntax, section) in &documented {
        let reply: Value = redis::cmd("COMMAND")
            .arg("DOCS")
            .arg(name)
            .query(&mut c)
            .unwrap();
        let reply = list(&reply);
        assert_eq!(text(&reply[0]), *name);
        let docs = &reply[1];
        for required in ["summary", "since", "complexity"] {
            let value = field(docs, required).map(text).unwrap_or_default();
            assert!(!value.is_empty(), "{name}: no {required}");
        }
        assert_eq!(text(field(docs, "group").unwrap()), "module");
        assert_eq!(text(field(docs, "module").unwrap()), "lcbloom");
        let complexity = text(field(docs, "complexity").unwrap());
        assert!(
            section.contains(&format!("- Complexity: {complexity}.")),
            "{name}: docs/commands.md should say '- Complexity: {complexity}.'"
        );
        let args = list(field(docs, "arguments").expect("arguments"));
        let rendered: Vec<String> = args.iter().map(render).collect();
        assert_eq!(
            rendered.join(" "),
            *syntax,
            "{name}: COMMAND DOCS vs docs/commands.md"
        );
    }
}
