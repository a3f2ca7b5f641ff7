//! Criterion micro-benchmarks of the pure core (no server): `cargo bench` / `make bench`.
//!
//! Each group measures one operation on fixed inputs; items are derived from a counter so runs
//! are reproducible. Server-side benchmarks (redis-benchmark against real servers) live in
//! bench/server_bench.py.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

use lcbloom::hashing::hash_item;

/// Distinct items of `len` bytes: a counter in the first 8 bytes, filler after.
fn items(len: usize, count: usize) -> Vec<Vec<u8>> {
    (0..count as u64)
        .map(|i| {
            let mut item = vec![b'x'; len];
            item[..8].copy_from_slice(&i.to_le_bytes());
            item
        })
        .collect()
}

fn bench_hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("hash_item");
    for len in [16usize, 64] {
        let batch = items(len, 1024);
        group.throughput(Throughput::Elements(batch.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(len), &batch, |b, batch| {
            b.iter(|| {
                for item in batch {
                    black_box(hash_item(black_box(item)));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_hash);
criterion_main!(benches);
