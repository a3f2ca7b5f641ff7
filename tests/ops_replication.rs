//! Replication: a replica loaded with other module defaults and a lower max-memory-per-key
//! ends up with byte-identical values (full sync and the command stream), and refuses writes.
mod common;
mod ops_util;
use common::*;
use ops_util::*;

#[test]
fn replica_with_other_defaults_holds_identical_values_and_refuses_writes() {
    let master = Server::start();
    let mut replica_builder = Server::builder();
    for (name, value) in OTHER_DEFAULTS {
        replica_builder = replica_builder.module_arg(name, value);
    }
    let replica = replica_builder.start();
    let mut m = master.conn();
    // Some values before the replica attaches: they arrive by full sync (RDB), large ones too.
    ok(&mut m, &["BF.RESERVE", "synced:large", "0.001", "2000000"]);
    ok(&mut m, &["LC.RESERVE", "synced:lc", "0.001", "20000000"]);
    add_many(&mut m, "LC.ADD", "synced:lc", "s", 10_000);
    attach_replica(&master, &replica);
    // The rest through the command stream.
    mixed_workload(&mut m);
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);

    let mut r = replica.conn();
    let on_master = digests(&mut m);
    assert_eq!(on_master.len(), 16, "{on_master:?}");
    assert_eq!(digests(&mut r), on_master);
    assert_eq!(info_lcbloom(&mut r)[0], info_lcbloom(&mut m)[0]);
    assert_eq!(info_lcbloom(&mut r)[2], info_lcbloom(&mut m)[2]);

    for write in [
        &["BF.RESERVE", "new", "0.01", "10"][..],
        &["BF.ADD", "bf:add", "z"],
        &["BF.MADD", "bf:add", "z"],
        &["BF.INSERT", "bf:add", "ITEMS", "z"],
        &["BF.LOADCHUNK", "new", "1", "x"],
        &["LC.RESERVE", "new", "0.01", "10"],
        &["LC.ADD", "lc:add", "z"],
        &["LC.MERGE", "lc:add", "lc:bitmap"],
        &["LC.LOADCHUNK", "new", "x"],
    ] {
        let mut cmd = redis::cmd(write[0]);
        for a in &write[1..] {
            cmd.arg(*a);
        }
        let e = err_text(cmd.query::<redis::Value>(&mut r));
        assert!(e.starts_with("READONLY"), "{write:?}: {e}");
    }
    // Reads work on the replica.
    let found: bool = redis::cmd("BF.EXISTS")
        .arg(&["bf:add", "a"])
        .query(&mut r)
        .unwrap();
    assert!(found);
    assert_eq!(digests(&mut r), on_master);
}
