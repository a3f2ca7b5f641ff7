//! A panic while a value is saved, injected by the fault-injection build of the module
//! (`target/fault-injection/liblcbloom.so`, `LCBLOOM_FAULT=save`: every value's save panics;
//! src/server/save.rs). A background save must fail and leave the previous RDB byte for byte;
//! a foreground save (SAVE, DUMP, DEBUG RELOAD) must write the value so that loading it is
//! refused with a logged reason, never loaded as something else.

use crate::common::fuzz::dump_payload;
use crate::common::redisbloom::{legacy_chain, RDB_VERSION};
use crate::common::*;
use lcbloom::bloom::redisbloom::dump::encode_value;
use redis::{Connection, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// A server running the fault-injection build with every save failing, on `dir`.
fn faulty_server(dir: &Path) -> Server {
    let module = fault_module_path();
    assert!(
        module.exists(),
        "{} is missing: run `make test` (it builds it)",
        module.display()
    );
    Server::builder()
        .module(&module)
        .env("LCBLOOM_FAULT", "save")
        .panics_expected()
        .dir(dir)
        .start()
}

/// One key of each stored type: `bf`, `lc` and `rb` (a filter imported from RedisBloom).
fn fill(c: &mut Connection) {
    ok(c, &["BF.ADD", "bf", "before"]);
    ok(c, &["LC.ADD", "lc", "1", "2", "3"]);
    let rb = dump_payload(&encode_value(&legacy_chain(0, 100, 50)), RDB_VERSION);
    let _: Value = redis::cmd("RESTORE")
        .arg("rb")
        .arg(0)
        .arg(rb)
        .query(c)
        .unwrap();
}

fn persistence_field(c: &mut Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} missing"))
        .trim()
        .to_string()
}

#[test]
fn a_failed_background_save_keeps_the_previous_rdb() {
    let dir = Server::fresh_dir();
    let rdb = dir.join("dump.rdb");
    // Fixed seed: "after" is asked about in a filter that never got it.
    let mut good = Server::builder().dir(&dir).fixed_seed().start();
    fill(&mut good.conn());
    ok(&mut good.conn(), &["SAVE"]);
    let before = std::fs::read(&rdb).unwrap();
    good.shutdown("NOSAVE");

    let mut faulty = faulty_server(&dir);
    let mut c = faulty.conn();
    // Loading is not affected: the values are back.
    assert_eq!(
        cmd(&mut c, &["BF.EXISTS", "bf", "before"]).unwrap(),
        Value::Int(1)
    );
    ok(&mut c, &["BF.ADD", "bf", "after"]);
    ok(&mut c, &["BGSAVE"]);
    let start = Instant::now();
    while persistence_field(&mut c, "rdb_bgsave_in_progress") != "0" {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "BGSAVE never ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(persistence_field(&mut c, "rdb_last_bgsave_status"), "err");
    assert_eq!(
        std::fs::read(&rdb).unwrap(),
        before,
        "the previous RDB changed"
    );
    assert!(faulty.alive(), "the server itself must survive");
    let log = faulty.log();
    assert!(
        log.contains("lcbloom: internal error in rdb_save of a")
            && log.contains("aborting this child so that the save fails"),
        "{log}"
    );
    faulty.kill();

    let restarted = Server::builder().dir(&dir).start();
    let mut c = restarted.conn();
    assert_eq!(
        cmd(&mut c, &["BF.EXISTS", "bf", "before"]).unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        cmd(&mut c, &["BF.EXISTS", "bf", "after"]).unwrap(),
        Value::Int(0)
    );
    assert_eq!(cmd(&mut c, &["LC.COUNT", "lc"]).unwrap(), Value::Int(3));
    assert_eq!(
        cmd(&mut c, &["TYPE", "rb"]).unwrap(),
        Value::SimpleString("MBbloom--".into())
    );
}

#[test]
fn a_failed_foreground_save_is_refused_at_load() {
    let dir = Server::fresh_dir();
    let mut faulty = faulty_server(&dir);
    let mut c = faulty.conn();
    fill(&mut c);
    let clean = Server::start();
    let mut to = clean.conn();
    for (key, name) in [
        ("bf", "Bloom filter"),
        ("lc", "linear counter"),
        ("rb", "RedisBloom filter"),
    ] {
        let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(&mut c).unwrap();
        let err = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(payload)
            .query::<Value>(&mut to)
            .unwrap_err();
        assert!(err.to_string().contains("Bad data format"), "{key}: {err}");
        assert!(
            clean.log().contains(&format!(
                "lcbloom: refusing a {name} (key '{key}') from RESTORE"
            )),
            "{key}: {}",
            clean.log()
        );
        assert!(faulty.log().contains(&format!(
            "lcbloom: internal error in rdb_save of a {name}: fault injected"
        )));
    }
    assert_eq!(cmd(&mut to, &["DBSIZE"]).unwrap(), Value::Int(0));

    // SAVE writes the file; a server starting from it refuses it and says why.
    ok(&mut c, &["SAVE"]);
    faulty.shutdown("NOSAVE");
    let log = Server::builder().dir(&dir).start_expecting_failure();
    assert!(log.contains("lcbloom: refusing a"), "{log}");
    assert!(log.contains("cut short by a save"), "{log}");
}

#[test]
fn debug_reload_of_a_failed_save_loads_nothing_wrong() {
    let mut faulty = faulty_server(&Server::fresh_dir());
    let mut c = faulty.conn();
    fill(&mut c);
    // DEBUG RELOAD saves (each value written cut short), empties the dataset, then loads the
    // file: the load refuses it, and the server goes on with nothing rather than a wrong value.
    let err = redis::cmd("DEBUG")
        .arg("RELOAD")
        .query::<Value>(&mut c)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Error trying to load the RDB dump"),
        "{err}"
    );
    assert!(faulty.alive());
    assert_eq!(cmd(&mut c, &["DBSIZE"]).unwrap(), Value::Int(0));
    let log = faulty.log();
    assert!(
        log.contains("lcbloom: internal error in rdb_save of a"),
        "{log}"
    );
    assert!(log.contains("lcbloom: refusing a"), "{log}");
    assert!(log.contains("cut short by a save"), "{log}");
}
