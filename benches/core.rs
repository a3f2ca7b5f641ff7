//! Criterion micro-benchmarks of the pure core (no server): `cargo bench` / `make bench`.
//!
//! Each group measures one operation on fixed inputs; items are derived from a counter so runs
//! are reproducible. Server-side benchmarks (redis-benchmark against real servers) live in
//! bench/server_bench.py. Throughput is per item, so the numbers compare across batch sizes.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

use lcbloom::bloom::chain::Chain;
use lcbloom::bloom::codec as bf_codec;
use lcbloom::bloom::filter::Layout;
use lcbloom::core::hashing::{hash_item, ItemHash};
use lcbloom::lc::codec as lc_codec;
use lcbloom::lc::counter::Counter;

const LIMIT: u64 = 1 << 40;

/// Distinct items of `len` bytes: a counter in the first 8 bytes, filler after.
fn items(len: usize, count: usize) -> Vec<Vec<u8>> {
    items_from(0, len, count)
}

fn items_from(start: u64, len: usize, count: usize) -> Vec<Vec<u8>> {
    (start..start + count as u64)
        .map(|i| {
            let mut item = vec![b'x'; len];
            item[..8].copy_from_slice(&i.to_le_bytes());
            item
        })
        .collect()
}

/// `keys` default counters (0.01 / 50,000) of `per_key` items each, each with items of its own.
fn default_counters(keys: u64, per_key: usize) -> Vec<Counter> {
    (0..keys)
        .map(|k| {
            let mut counter = Counter::reserve(0.01, 50_000, LIMIT).unwrap();
            for item in items_from(k << 32, 12, per_key) {
                counter.add(&item).unwrap();
            }
            counter
        })
        .collect()
}

fn hashes(start: u64, count: usize) -> Vec<ItemHash> {
    items_from(start, 12, count)
        .iter()
        .map(|i| hash_item(i))
        .collect()
}

fn bench_hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("hash_item");
    for len in [12usize, 64] {
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

/// A non-scaling filter of `capacity` at 1%, half full.
fn half_full(capacity: u64) -> Chain {
    let mut chain = Chain::new(0.01, capacity, 0, LIMIT).unwrap();
    for h in hashes(1 << 40, (capacity / 2) as usize) {
        chain.add(&h, LIMIT).unwrap();
    }
    chain
}

/// Single adds and lookups on a small (cache-resident) and a large (10M, 11 MiB) filter; the
/// large one is where cache misses dominate.
fn bench_filter(c: &mut Criterion) {
    let mut group = c.benchmark_group("filter");
    let probe = hashes(0, 4096);
    group.throughput(Throughput::Elements(probe.len() as u64));
    for capacity in [10_000u64, 10_000_000] {
        let mut chain = half_full(capacity);
        group.bench_function(BenchmarkId::new("exists", capacity), |b| {
            b.iter(|| {
                for h in &probe {
                    black_box(chain.contains(h));
                }
            })
        });
        // Re-adding the same items after the first iteration measures the full lookup-and-set
        // path without letting the filter fill up.
        group.bench_function(BenchmarkId::new("add", capacity), |b| {
            b.iter(|| {
                for h in &probe {
                    black_box(chain.add(h, LIMIT).unwrap());
                }
            })
        });
        group.bench_function(BenchmarkId::new("add_batch", capacity), |b| {
            b.iter(|| {
                for batch in probe.chunks(100) {
                    chain.add_batch(batch, LIMIT, |r| {
                        black_box(r.unwrap());
                    });
                }
            })
        });
    }
    group.finish();
}

/// A default-created chain (capacity 100, expansion 2) grown to 1M items: 14 sub-filters.
fn bench_chain(c: &mut Criterion) {
    let mut chain = Chain::new(0.01, 100, 2, LIMIT).unwrap();
    for h in hashes(1 << 40, 1_000_000) {
        chain.add(&h, LIMIT).unwrap();
    }
    let mut group = c.benchmark_group("chain_1M_items");
    let probe = hashes(0, 4096);
    group.throughput(Throughput::Elements(probe.len() as u64));
    group.bench_function(BenchmarkId::new("exists", chain.filters().len()), |b| {
        b.iter(|| {
            for h in &probe {
                black_box(chain.contains(h));
            }
        })
    });
    group.bench_function(BenchmarkId::new("add", chain.filters().len()), |b| {
        b.iter(|| {
            for h in &probe {
                black_box(chain.add(h, LIMIT).unwrap());
            }
        })
    });
    group.finish();
}

fn bench_lc(c: &mut Criterion) {
    let mut group = c.benchmark_group("lc");
    let batch = items(12, 4096);
    group.throughput(Throughput::Elements(batch.len() as u64));
    // Default counter (1% at 1M), past exact and sparse mode: the dense path.
    let mut counter = Counter::reserve(0.01, 1_000_000, LIMIT).unwrap();
    for item in items_from(1 << 40, 12, 50_000) {
        counter.add(&item).unwrap();
    }
    group.bench_function("add", |b| {
        b.iter(|| {
            for item in &batch {
                black_box(counter.add(item).unwrap());
            }
        })
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("count", |b| b.iter(|| black_box(counter.count())));
    // The compact modes with the defaults (0.01/50,000): 50 new items into counters of 200
    // (exact, staying exact) and of 1,000 (sparse, staying sparse), per item.
    for (name, start, new) in [
        ("add_exact_200", 200, 50),
        ("add_sparse_1000", 1_000, 1_000),
    ] {
        let mut template = Counter::reserve(0.01, 50_000, LIMIT).unwrap();
        for item in items_from(1 << 41, 12, start) {
            template.add(&item).unwrap();
        }
        let fresh = items_from(1 << 42, 12, new);
        group.throughput(Throughput::Elements(new as u64));
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || template.clone(),
                |c| {
                    for item in &fresh {
                        black_box(c.add(item).unwrap());
                    }
                },
                criterion::BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// One new item each to 2,000 counters listing 3,000 tokens, in turn, as `LC.ADD` meets keys
/// among many: 9 MB of lists, out of the second-level cache, so that an add's search and shift
/// wait for memory (each counter's lines asked for first, as `add_all_within` does). The counters
/// start again from the same 3,000 items every 100 rounds, so that they stay in tokens mode.
fn bench_lc_add_cold(c: &mut Criterion) {
    const KEYS: usize = 2_000;
    const ROUNDS: u64 = 100;
    let mut group = c.benchmark_group("lc_add_cold");
    let template = default_counters(KEYS as u64, 3_000);
    let mut counters = template.clone();
    let (mut done, mut next) = (0u64, 1u64 << 62);
    group.bench_function("tokens_3000", |b| {
        b.iter_custom(|mut iters| {
            let mut spent = std::time::Duration::ZERO;
            while iters > 0 {
                if done == ROUNDS * KEYS as u64 {
                    counters.clone_from(&template);
                    done = 0;
                }
                let run = iters.min(ROUNDS * KEYS as u64 - done);
                let start = std::time::Instant::now();
                for _ in 0..run {
                    let counter = &mut counters[done as usize % KEYS];
                    let item = next.to_le_bytes();
                    black_box(counter.add_all_within(std::iter::once(&item[..]), u64::MAX));
                    (done, next) = (done + 1, next + 1);
                }
                spent += start.elapsed();
                iters -= run;
            }
            spent
        })
    });
    group.finish();
}

/// Many-key counts (`LC.COUNT k1 … kN`) over default counters in tokens mode (2,000 and 3,400
/// items: the longest token lists) and in registers mode (5,000 items), per counter: each has
/// items of its own, so every token is decoded.
fn bench_lc_union(c: &mut Criterion) {
    let mut group = c.benchmark_group("lc_union_200_counters");
    for per_key in [2_000usize, 3_400, 5_000] {
        let counters = default_counters(200, per_key);
        let refs: Vec<&Counter> = counters.iter().collect();
        group.throughput(Throughput::Elements(refs.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(per_key), |b| {
            b.iter(|| black_box(Counter::union_count(&refs).unwrap()))
        });
    }
    group.finish();
}

/// A many-key count over 100,000 exact counters of 100 items (38 MB of blocks, beyond the
/// caches, as in the server), per counter: their fingerprints spread into level bits; then
/// the same with a sketch among every hundred.
fn bench_lc_union_exact(c: &mut Criterion) {
    let mut group = c.benchmark_group("lc_union_exact_100000_counters");
    group.sample_size(10);
    let counters = default_counters(100_000, 100);
    let refs: Vec<&Counter> = counters.iter().collect();
    group.throughput(Throughput::Elements(refs.len() as u64));
    group.bench_function("100", |b| {
        b.iter(|| black_box(Counter::union_count(&refs).unwrap()))
    });
    // Message summaries as they come: one in a hundred of 5,000 items (registers), so that
    // every exact counter's fingerprints are taken to their items' tokens.
    let mut mixed = counters;
    for (k, large) in default_counters(1_000, 5_000).into_iter().enumerate() {
        mixed[k * 100] = large;
    }
    let refs: Vec<&Counter> = mixed.iter().collect();
    group.bench_function("100_with_sketches", |b| {
        b.iter(|| black_box(Counter::union_count(&refs).unwrap()))
    });
    group.finish();
}

/// Few-key counts (`LC.COUNT k1 … kN`, N = 2 and 8) over default counters whose union is
/// registers: the fixed part of a call (the union's registers, their tallies and the
/// maximum-likelihood solve) outweighs the reading of the keys here.
fn bench_lc_union_few(c: &mut Criterion) {
    let mut group = c.benchmark_group("lc_union_few");
    for (keys, per_key) in [(2u64, 3_400usize), (8, 3_400), (2, 50_000)] {
        let counters = default_counters(keys, per_key);
        let refs: Vec<&Counter> = counters.iter().collect();
        group.bench_function(BenchmarkId::new(format!("{keys}_keys"), per_key), |b| {
            b.iter(|| black_box(Counter::union_count(&refs).unwrap()))
        });
    }
    group.finish();
}

fn bench_codec(c: &mut Criterion) {
    let mut group = c.benchmark_group("codec");
    let chain = half_full(1_000_000);
    let encoded = bf_codec::encode(&chain);
    group.throughput(Throughput::Bytes(encoded.len() as u64));
    group.bench_function("bf_encode_1M", |b| {
        b.iter(|| black_box(bf_codec::encode(&chain)))
    });
    group.bench_function("bf_decode_1M", |b| {
        b.iter(|| black_box(bf_codec::decode(&encoded, LIMIT).unwrap()))
    });
    let mut counter = Counter::reserve(0.01, 1_000_000, LIMIT).unwrap();
    for item in items(12, 50_000) {
        counter.add(&item).unwrap();
    }
    let encoded = lc_codec::encode(&counter);
    group.throughput(Throughput::Bytes(encoded.len() as u64));
    group.bench_function("lc_encode_1M", |b| {
        b.iter(|| black_box(lc_codec::encode(&counter)))
    });
    group.bench_function("lc_decode_1M", |b| {
        b.iter(|| black_box(lc_codec::decode(&encoded, LIMIT).unwrap()))
    });
    group.finish();
}

/// Batches of 100 (a `BF.MADD`/`BF.MEXISTS`) on a 0.001 / 200M filter in both
/// layouts, over 2M fresh items so that nearly every probe is a cache miss, as in the server:
/// the number to hold against `bench/floor/dram_floor` (same array size, same reads per item).
/// The same batches on a 0.001 / 2M filter (3.6 MB, beyond the private caches, within the
/// shared one) give the cost of the batch schedule itself where memory is near.
fn bench_large_batches(c: &mut Criterion) {
    batches_on(c, "batch_100_on_0.001_200M", 200_000_000);
    batches_on(c, "batch_100_on_0.001_2M", 2_000_000);
}

fn batches_on(c: &mut Criterion, name: &str, capacity: u64) {
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    // At most a quarter of the capacity each, so that the filter never scales.
    let items = capacity.min(8_000_000) as usize / 4;
    let fresh = hashes(0, items);
    for layout in [Layout::Standard, Layout::Blocked] {
        let mut chain = Chain::with_layout(layout, 0, 0.001, capacity, 2, LIMIT, 0).unwrap();
        // Touch every page first (zeroed pages are mapped lazily): ≥ 1 probe per item.
        for batch in hashes(1 << 40, items).chunks(100) {
            chain.add_batch(batch, LIMIT, |r| {
                r.unwrap();
            });
        }
        let name = layout.name();
        group.throughput(Throughput::Elements(fresh.len() as u64));
        group.bench_function(BenchmarkId::new("mexists", name), |b| {
            b.iter(|| {
                for batch in fresh.chunks(100) {
                    chain.contains_batch(batch, |found| {
                        black_box(found);
                    });
                }
            })
        });
        // The same items again after the first iteration: every probe is read and written.
        group.bench_function(BenchmarkId::new("madd", name), |b| {
            b.iter(|| {
                for batch in fresh.chunks(100) {
                    chain.add_batch(batch, LIMIT, |r| {
                        black_box(r.unwrap());
                    });
                }
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(20);
    targets = bench_hash, bench_filter, bench_chain, bench_lc, bench_lc_add_cold, bench_lc_union, bench_lc_union_exact, bench_lc_union_few, bench_codec,
        bench_large_batches
}
criterion_main!(benches);
