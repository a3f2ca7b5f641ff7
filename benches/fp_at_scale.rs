//! False-positive rate at capacity of the largest filters (`make bench`; prints a table,
//! asserts nothing): the shapes `bench/fp_sweep.py` cannot fill through a server in reasonable
//! time. For each capacity (`FP_SCALE_CAPACITIES`, default 10⁸ and 10⁹), rate
//! (`FP_SCALE_RATES`, default 10⁻², 10⁻³, 10⁻⁴) and layout, a filter is made as
//! `BF.RESERVE key p capacity NONSCALING LAYOUT layout` makes it, filled to capacity with
//! distinct items, then probed with 10,000/p non-members (5% of p at five standard
//! deviations). Also each filter's bytes (by allocator size class) and the bits per item of
//! its bit array. A 10⁹ filter at 10⁻⁴ takes 2.4–2.8 GB.
use lcbloom::bloom::chain::Chain;
use lcbloom::bloom::filter::Layout;
use lcbloom::core::hashing::{hash_item, ItemHash};
use std::time::Instant;

const BATCH: u64 = 1000;

fn list(name: &str, default: &str) -> Vec<f64> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|v| v.trim().parse().expect("a number"))
        .collect()
}

/// The hashes of items `tag`·i for i in `range`, a batch at a time.
fn each_batch(tag: u8, range: std::ops::Range<u64>, mut f: impl FnMut(&[ItemHash])) {
    let mut batch = Vec::with_capacity(BATCH as usize);
    for i in range {
        let mut item = [tag; 9];
        item[1..].copy_from_slice(&i.to_le_bytes());
        batch.push(hash_item(&item));
        if batch.len() == BATCH as usize {
            f(&batch);
            batch.clear();
        }
    }
    if !batch.is_empty() {
        f(&batch);
    }
}

fn main() {
    let capacities = list("FP_SCALE_CAPACITIES", "1e8,1e9");
    let rates = list("FP_SCALE_RATES", "0.01,0.001,0.0001");
    let limit = u64::MAX;
    println!("| layout | rate p | capacity | bytes | bits/item | probes | measured FP | FP ÷ p | seconds |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for &capacity in &capacities {
        let capacity = capacity as u64;
        for &p in &rates {
            for layout in [Layout::Standard, Layout::Blocked] {
                let start = Instant::now();
                let mut chain = Chain::with_layout(layout, 0, p, capacity, 0, limit, 0).unwrap();
                let mut refused = 0u64;
                each_batch(b'm', 0..capacity, |batch| {
                    chain.add_batch(batch, limit, |r| refused += r.is_err() as u64)
                });
                assert_eq!(refused, 0, "a non-scaling filter took its capacity");
                let probes = (10_000.0 / p) as u64;
                let mut hits = 0u64;
                each_batch(b'q', 0..probes, |batch| {
                    chain.contains_batch(batch, |hit| hits += hit as u64)
                });
                let fp = hits as f64 / probes as f64;
                let bytes = chain.memory_bytes();
                println!(
                    "| {} | {p} | {capacity} | {bytes} | {:.2} | {probes} | {:.5}% | {:.3} | {:.0} |",
                    layout.name(),
                    chain.data_bytes() as f64 * 8.0 / capacity as f64,
                    fp * 100.0,
                    fp / p,
                    start.elapsed().as_secs_f64()
                );
            }
        }
    }
}
