//! Durability: with `appendfsync always`, every acknowledged BF.ADD / LC.ADD survives a
//! `kill -9` in the middle of a stream of writes.
//!
//! A linear counter cannot be asked about one item, so the counter is kept in exact mode
//! (capacity 10,000,000 at 1%: exact up to 8,192 items, and the writer stays below that):
//! there LC.COUNT is the exact number of distinct items, which must be at least the number
//! acknowledged, and at most one more (the write in flight at the kill may have reached the
//! AOF without its reply reaching the client). The filter is checked item by item, and its
//! item count the same way.
use crate::common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const MAX_WRITES: usize = 8_000;

#[test]
fn every_acknowledged_write_survives_kill_9() {
    let mut server = Server::builder()
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let mut c = server.conn();
    ok(&mut c, &["BF.RESERVE", "bf", "0.001", "100000"]);
    ok(&mut c, &["LC.RESERVE", "lc", "0.01", "10000000"]);
    let acked = Arc::new(AtomicUsize::new(0));
    let writer = {
        let acked = Arc::clone(&acked);
        let mut w = server.conn();
        std::thread::spawn(move || {
            // Items acknowledged by BF.ADD (and how many of them as new), by LC.ADD.
            let (mut bf, mut bf_new, mut lc) = (0usize, 0usize, 0usize);
            for i in 0..MAX_WRITES {
                let item = format!("item-{i}");
                match redis::cmd("BF.ADD")
                    .arg("bf")
                    .arg(&item)
                    .query::<bool>(&mut w)
                {
                    Ok(new) => bf_new += new as usize,
                    Err(_) => break,
                }
                bf += 1;
                if redis::cmd("LC.ADD")
                    .arg("lc")
                    .arg(&item)
                    .query::<i64>(&mut w)
                    .is_err()
                {
                    break;
                }
                lc += 1;
                acked.store(i + 1, Ordering::SeqCst);
            }
            (bf, bf_new, lc)
        })
    };
    // Kill once a good part of the stream is acknowledged, while the writer is still going.
    while acked.load(Ordering::SeqCst) < 1_500 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    server.kill();
    let (bf, bf_new, lc) = writer.join().unwrap();
    assert!(bf < MAX_WRITES, "the kill came after the writer finished");

    server.restart();
    let mut c = server.conn();
    for i in 0..bf {
        let found: bool = redis::cmd("BF.EXISTS")
            .arg("bf")
            .arg(format!("item-{i}"))
            .query(&mut c)
            .unwrap();
        assert!(found, "acknowledged item-{i} lost ({bf} acknowledged)");
    }
    let card: usize = redis::cmd("BF.CARD").arg("bf").query(&mut c).unwrap();
    // BF.CARD counts the adds that answered 1 (a false positive answers 0).
    assert!(
        (bf_new..=bf_new + 1).contains(&card),
        "BF.CARD {card}, {bf_new} acknowledged as new"
    );
    assert_eq!(lc_mode(&mut c, "lc"), "exact");
    let count: usize = redis::cmd("LC.COUNT").arg("lc").query(&mut c).unwrap();
    assert!(
        (lc..=lc + 1).contains(&count),
        "LC.COUNT {count}, {lc} acknowledged"
    );
    eprintln!("acknowledged before kill -9: {bf} BF.ADD, {lc} LC.ADD; after restart BF.CARD {card}, LC.COUNT {count}");
}
