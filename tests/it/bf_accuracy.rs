//! The requested error rate holds, measured through the server: non-scaling filters at
//! capacity, and scaling filters grown to 100× the capacity they were reserved with (where
//! RedisBloom measures 2.05–3.4% at a requested 1%).
//!
//! Items and probes are fixed strings (members `m:<key>:<i>`, non-members `q:<key>:<i>`) and
//! the servers hash under one fixed seed (`ServerBuilder::fixed_seed`), so every run measures
//! the same thing. The bound is p·N + 4·√(p·N) false positives out of N probes: four standard
//! deviations above a filter that exactly meets p, which a correct filter passes essentially
//! always, while RedisBloom's 2.05% for 0.01 from capacity 10 (or 0.59% for 0.001) is tens of
//! deviations beyond it.
use crate::common::*;

const PROBES: usize = 200_000;
const BATCH: usize = 2_000;

fn madd(c: &mut redis::Connection, key: &str, items: impl Iterator<Item = String>) {
    let items: Vec<String> = items.collect();
    for batch in items.chunks(BATCH) {
        let mut cmd = redis::cmd("BF.MADD");
        cmd.arg(key).arg(batch);
        let reply: Vec<i64> = cmd.query(c).unwrap();
        assert_eq!(reply.len(), batch.len());
    }
}

/// False positives among `PROBES` non-members.
fn false_positives(c: &mut redis::Connection, key: &str) -> usize {
    false_positives_of(c, key, PROBES)
}

/// False positives among `probes` non-members (a multiple of `BATCH`).
fn false_positives_of(c: &mut redis::Connection, key: &str, probes: usize) -> usize {
    let mut hits = 0;
    for start in (0..probes).step_by(BATCH) {
        let mut cmd = redis::cmd("BF.MEXISTS");
        cmd.arg(key);
        for i in start..start + BATCH {
            cmd.arg(format!("q:{key}:{i}"));
        }
        let reply: Vec<i64> = cmd.query(c).unwrap();
        hits += reply.iter().filter(|&&v| v == 1).count();
    }
    hits
}

/// Bytes of the sub-filters' contents: the sparse sets (in the header, after its fixed part
/// and 40 bytes per sub-filter) and the bit arrays (what `BF.SCANDUMP` sends after it).
fn data_bytes(c: &mut redis::Connection, key: &str) -> usize {
    let mut total = 0;
    scandump_each(c, key, 0, |_, it, data| {
        total += match it {
            1 => {
                data.len() - 32 - 40 * u32::from_le_bytes(data[20..24].try_into().unwrap()) as usize
            }
            _ => data.len(),
        }
    });
    total
}

/// Reserves, fills with `items` members, checks there are no false negatives and that the
/// measured rate is within the bound; returns (rate, bits per item).
fn measure(
    c: &mut redis::Connection,
    p: f64,
    capacity: u64,
    items: usize,
    scaling: bool,
) -> (f64, f64) {
    measure_layout(c, "standard", p, capacity, items, scaling)
}

/// `BF.RESERVE key p capacity LAYOUT layout [NONSCALING]`, then `items` items named after the key.
fn reserve_and_fill(
    c: &mut redis::Connection,
    key: &str,
    layout: &str,
    p: f64,
    capacity: u64,
    items: usize,
    scaling: bool,
) {
    let mut reserve = redis::cmd("BF.RESERVE");
    reserve
        .arg(key)
        .arg(p)
        .arg(capacity)
        .arg("LAYOUT")
        .arg(layout);
    if !scaling {
        reserve.arg("NONSCALING");
    }
    reserve.exec(c).unwrap();
    madd(c, key, (0..items).map(|i| format!("m:{key}:{i}")));
}

fn measure_layout(
    c: &mut redis::Connection,
    layout: &str,
    p: f64,
    capacity: u64,
    items: usize,
    scaling: bool,
) -> (f64, f64) {
    let key = format!("{layout}/{p}/{capacity}/{items}/{scaling}");
    reserve_and_fill(c, &key, layout, p, capacity, items, scaling);
    // No false negatives.
    for start in (0..items).step_by(BATCH) {
        let mut cmd = redis::cmd("BF.MEXISTS");
        cmd.arg(&key);
        for i in start..items.min(start + BATCH) {
            cmd.arg(format!("m:{key}:{i}"));
        }
        let reply: Vec<i64> = cmd.query(c).unwrap();
        assert!(reply.iter().all(|&v| v == 1), "{key}: a member is missing");
    }
    let hits = false_positives(c, &key);
    let expected = p * PROBES as f64;
    let bound = expected + 4.0 * expected.sqrt();
    let rate = hits as f64 / PROBES as f64;
    let bits_per_item = data_bytes(c, &key) as f64 * 8.0 / items as f64;
    eprintln!(
        "{key}: {} filters, FP {:.4}% (target {}%), {:.1} bits/item",
        bf_info(c, &key, "FILTERS"),
        rate * 100.0,
        p * 100.0,
        bits_per_item
    );
    assert!(
        (hits as f64) <= bound,
        "{key}: {hits} false positives in {PROBES} probes ({:.3}%), bound {bound:.0}",
        rate * 100.0
    );
    (rate, bits_per_item)
}

#[test]
fn non_scaling_filters_at_capacity() {
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    for p in [0.01, 0.001] {
        let (_, bits) = measure(&mut c, p, 100_000, 100_000, false);
        // Sized for 95% of p (src/bloom/chain.rs): -ln(0.95·p)/ln²2 bits per item, within 1%.
        let optimal = -(0.95 * p).ln() / std::f64::consts::LN_2.powi(2);
        assert!(bits <= optimal * 1.01, "{bits} bits per item vs {optimal}");
    }
}

#[test]
fn scaling_filters_grown_to_100x() {
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    for (p, capacity) in [
        (0.01, 1u64),
        (0.01, 10),
        (0.01, 1000),
        (0.001, 10),
        (0.001, 1000),
    ] {
        let (_, bits) = measure(&mut c, p, capacity, 100 * capacity as usize, true);
        // RedisBloom spends 23–33 bits per item here; lcbloom's schedule (chain.rs) trades a
        // little of the 100× case for a first sub-filter smaller than RedisBloom's.
        let budget = if p == 0.01 { 24.0 } else { 28.0 };
        assert!(bits < budget, "{p}/{capacity}: {bits} bits per item");
    }
}

#[test]
fn small_filters_at_every_fill_both_layouts() {
    // Sub-filters of small capacity are sparse sets of fingerprints (src/bloom/sparse.rs),
    // whose rate grows with the fill up to p (a bit array's stays far below p until nearly
    // full): non-scaling ones at 10%, 50% and 100% of capacity, scaling ones grown 10×, in
    // both layouts, including a capacity whose bit arrays and sparse sets mix when grown.
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    for layout in ["standard", "blocked"] {
        for p in [0.01, 0.001] {
            for capacity in [10u64, 300, 5_000] {
                for fill in [10, 50, 100] {
                    let items = (capacity * fill / 100) as usize;
                    measure_layout(&mut c, layout, p, capacity, items, false);
                }
                let (_, bits) =
                    measure_layout(&mut c, layout, p, capacity, 10 * capacity as usize, true);
                // Sparse sets take about log2(1/p_i) + 2 bits per item; grown 10×, the newest
                // sub-filter is partly empty (a third full when it is a bit array), and blocked
                // bit arrays take up to 10% more (src/bloom/blocked.rs).
                let blocked = if layout == "blocked" { 1.1 } else { 1.0 };
                let budget = if p == 0.01 { 24.0 } else { 32.0 } * blocked;
                assert!(
                    bits < budget,
                    "{layout} {p}/{capacity}: {bits} bits per item"
                );
            }
        }
    }
}

#[test]
fn filters_at_capacity_stay_within_the_rate_with_margin() {
    // Measured over 10,000/p non-members (which resolve 5% of p at five standard deviations),
    // the rate at capacity is at most p itself: non-scaling filters, sized for 95% of p
    // (src/bloom/chain.rs), as a standard bit array, a sparse set of fingerprints, and blocked
    // (whose sizing keeps its own spread within that share, src/bloom/blocked.rs) from a few
    // blocks to the 0.001 / 2M filter that measured 0.1066% when sized for the mean alone; and
    // scaling filters of either layout, whose first sub-filter is sized for 55% of p.
    // bench/fp_sweep.py runs the full sweep of shapes.
    let server = Server::builder().fixed_seed().start();
    let mut c = server.conn();
    for (layout, p, capacity, scaling) in [
        ("standard", 0.01, 100_000u64, false),
        ("standard", 0.001, 200_000, false),
        ("standard", 0.01, 2_000, false),
        ("blocked", 0.001, 2_000_000, false),
        ("blocked", 0.001, 10_000, false),
        ("blocked", 0.01, 100_000, false),
        ("blocked", 0.001, 100_000, true),
        ("standard", 0.001, 100_000, true),
    ] {
        let key = format!("margin/{layout}/{p}/{capacity}/{scaling}");
        reserve_and_fill(
            &mut c,
            &key,
            layout,
            p,
            capacity,
            capacity as usize,
            scaling,
        );
        let probes = ((10_000.0 / p) as usize).div_ceil(BATCH) * BATCH;
        let hits = false_positives_of(&mut c, &key, probes);
        let rate = hits as f64 / probes as f64;
        eprintln!("{key}: FP {:.4}% over {probes} probes", rate * 100.0);
        assert!(rate <= p, "{key}: {:.4}% at capacity", rate * 100.0);
    }
}
