//! The blocked layout's false-positive rate measured at 200M items (`make bench`; prints
//! a table, asserts nothing): a filter reserved at 0.001 / 200,000,000 (scaling, as
//! `BF.RESERVE key 0.001 200000000` makes it) filled to capacity, then 1,000,000 non-members.
//! Also its memory against the standard layout's. `BLOCKED_FP_ITEMS` overrides the capacity
//! (and fill) for a quicker run.
use lcbloom::bloom::chain::Chain;
use lcbloom::bloom::filter::Layout;
use lcbloom::core::hashing::{hash_item, ItemHash};
use std::time::Instant;

fn main() {
    let capacity: u64 = std::env::var("BLOCKED_FP_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000_000);
    let rate = 0.001;
    let limit = u64::MAX;
    let standard = Chain::new(rate, capacity, 2, limit).expect("standard chain");
    let standard_bytes = standard.memory_bytes();
    drop(standard);
    let start = Instant::now();
    let mut chain = Chain::with_layout(Layout::Blocked, 0, rate, capacity, 2, limit).unwrap();
    let mut batch: Vec<ItemHash> = Vec::with_capacity(1000);
    let mut added = 0u64;
    for i in 0..capacity {
        batch.push(hash_item(format!("member:{i}").as_bytes()));
        if batch.len() == 1000 || i + 1 == capacity {
            chain.add_batch(&batch, limit, |r| added += r.unwrap() as u64);
            batch.clear();
        }
    }
    let filled = start.elapsed();
    let probes = 1_000_000u64;
    let hits = (0..probes)
        .filter(|i| chain.contains(&hash_item(format!("other:{i}").as_bytes())))
        .count();
    let fp = hits as f64 / probes as f64;
    println!("| layout | capacity | items added | sub-filters | bytes | ÷ standard | FP over {probes} non-members |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| blocked | {capacity} | {added} | {} | {} | {:.3} | {fp:.6} (target {rate}) |",
        chain.filters().len(),
        chain.memory_bytes(),
        chain.memory_bytes() as f64 / standard_bytes as f64,
    );
    println!("| standard | {capacity} | — | 1 | {standard_bytes} | 1.000 | — |");
    println!("(filled in {:.1} s)", filled.as_secs_f64());
}
