//! A fuzzer on the stable toolchain: mutated encodings into every decoder (`fuzz/targets.rs`,
//! the same checks the `cargo fuzz` targets run).
//!
//! `make test` runs a short pass: 5,000 mutations per decoder with a fixed seed (a few seconds
//! in all). `make fuzz` is the long pass: `cargo fuzz`, or this driver for `FUZZ_SECONDS` per
//! decoder when no nightly toolchain can run `cargo fuzz`.
//! Environment: `FUZZ_ITERATIONS` (mutations per decoder, default 5,000), `FUZZ_SECONDS` (time
//! per decoder, instead of a count), `FUZZ_SEED` (default 1), `FUZZ_WRITE_SEEDS` (a folder:
//! each decoder's valid encodings are written to `<folder>/<target>/`, where `cargo fuzz` looks
//! for its corpus, so that libFuzzer starts from inputs that pass the headers). A failure prints
//! the input as hex.

#[path = "../../fuzz/targets.rs"]
mod targets;

use crate::common::fixtures::saved_counters;
use crate::common::fuzz::{env_number, mutate, Rng};
use lcbloom::bloom::chain::Chain;
use lcbloom::bloom::codec as bf;
use lcbloom::bloom::filter::Layout;
use lcbloom::bloom::redisbloom::chain::RedisBloomChain;
use lcbloom::bloom::redisbloom::{dump, scandump};
use lcbloom::lc::codec as lc;
use lcbloom::lc::counter::Counter;
use std::time::{Duration, Instant};

fn chain(p: f64, capacity: u64, expansion: u32, items: u64) -> Chain {
    chain_of(Layout::Standard, 0, p, capacity, expansion, items)
}

fn chain_of(layout: Layout, seed: u64, p: f64, capacity: u64, expansion: u32, items: u64) -> Chain {
    let limit = targets::LIMIT;
    let mut c = Chain::with_layout(layout, seed, p, capacity, expansion, limit, 0).unwrap();
    for i in 0..items {
        let _ = c.add(&c.hash(&i.to_le_bytes()), limit);
    }
    c
}

fn chains() -> Vec<Chain> {
    vec![
        chain(0.01, 1, 0, 0),
        chain(0.01, 1, 0, 1),
        chain(0.1, 10, 2, 35),
        chain(0.001, 100, 0, 80),
        chain(0.5, 3, 1, 20),
        chain(0.01, 50, 4, 400),
        chain_of(Layout::Blocked, 0, 0.01, 1, 0, 1),
        chain_of(Layout::Blocked, 0, 0.01, 50, 2, 300),
        // Bit arrays only (encoding versions 1 and 2), and sparse sets followed by bit arrays.
        chain(0.01, 10_000, 0, 100),
        chain(0.01, 5_000, 2, 5_300),
        chain_of(Layout::Blocked, 0, 0.01, 5_000, 2, 5_300),
        // Seeded (encoding version 4): a sparse set, bit arrays, both, blocked.
        chain_of(Layout::Standard, 7, 0.01, 100, 2, 30),
        chain_of(Layout::Standard, u64::MAX, 0.01, 10_000, 0, 100),
        chain_of(Layout::Standard, 1 << 40, 0.01, 5_000, 2, 5_300),
        chain_of(Layout::Blocked, 0x5eed, 0.01, 50, 2, 300),
    ]
}

fn counters() -> Vec<Counter> {
    let mut out = Vec::new();
    for (rate, capacity, items) in [
        (0.01, 50_000, 0),
        (0.01, 50_000, 10),
        (0.01, 1_000, 100),
        (0.3, 10, 30),
        (0.01, 1_000, 2_000),
        (0.05, 5_000, 3_000),
        (0.1, 100, 5_000),
        (0.01, 50_000, 267),
        (0.01, 50_000, 300),
        (0.01, 50_000, 4_000),
        (0.01, 50_000, 6_000),
        (0.01, 50_000, 50_000),
        (0.01, 1_000_000, 3_000),
        // Sketches at the ends of the precisions and past the largest token list.
        (0.5, 10, 20_000),
        (0.0005, 100, 3_000),
        (0.02, 1_000, 200_000),
    ] {
        let mut c = Counter::reserve(rate, capacity, targets::LIMIT).unwrap();
        for i in 0..items {
            c.add(format!("item:{i}").as_bytes()).unwrap();
        }
        out.push(c);
    }
    out
}

/// `BF.LOADCHUNK` sessions in the format of `targets::bf_loadchunk`: a whole dump, in pieces.
fn loadchunk_sessions() -> Vec<Vec<u8>> {
    chains()
        .iter()
        .map(|c| {
            let header = bf::encode_header(c);
            let mut out = (header.len() as u16).to_le_bytes().to_vec();
            out.extend_from_slice(&header);
            let data = &bf::encode(c)[header.len()..];
            for (i, piece) in data.chunks(24).enumerate() {
                out.extend_from_slice(&((i * 24) as u32).to_le_bytes());
                out.extend_from_slice(&(piece.len() as u16).to_le_bytes());
                out.extend_from_slice(piece);
            }
            out
        })
        .collect()
}

/// Runs `target` on the seeds, then on mutations of them; returns how many inputs ran.
fn fuzz(name: &str, seeds: Vec<Vec<u8>>, target: fn(&[u8])) -> u64 {
    let seed: u64 = env_number("FUZZ_SEED").unwrap_or(1);
    let budget = env_number("FUZZ_SECONDS").map(Duration::from_secs);
    let iterations: u64 = env_number("FUZZ_ITERATIONS").unwrap_or(5_000);
    if let Some(folder) = std::env::var_os("FUZZ_WRITE_SEEDS") {
        let folder = std::path::Path::new(&folder).join(name);
        std::fs::create_dir_all(&folder).unwrap();
        for (i, s) in seeds.iter().enumerate() {
            std::fs::write(folder.join(format!("seed-{i}")), s).unwrap();
        }
    }
    let mut rng = Rng::seeded(seed);
    let start = Instant::now();
    let mut corpus = seeds;
    let mut ran = 0u64;
    for s in &corpus {
        target(s);
    }
    loop {
        let done = match budget {
            Some(budget) => start.elapsed() >= budget,
            None => ran >= iterations,
        };
        if done {
            break;
        }
        let parent = rng.below(corpus.len());
        let input = mutate(&mut rng, &corpus[parent], &corpus);
        let result = std::panic::catch_unwind(|| target(&input));
        if result.is_err() {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            panic!("{name}: input #{ran} (seed {seed}) failed: {hex}");
        }
        // Keep some mutants as parents: deeper mutations reach further into the formats.
        if corpus.len() < 512 && rng.below(8) == 0 {
            corpus.push(input);
        }
        ran += 1;
    }
    println!("{name}: {ran} mutated inputs, no failure");
    ran
}

#[test]
fn bloom_values() {
    let seeds = chains().iter().map(bf::encode).collect();
    assert!(fuzz("bf_value", seeds, targets::bf_value) > 0);
}

#[test]
fn bloom_loadchunk_sessions() {
    assert!(fuzz("bf_loadchunk", loadchunk_sessions(), targets::bf_loadchunk) > 0);
}

#[test]
fn counter_values() {
    let mut seeds: Vec<Vec<u8>> = counters().iter().map(lc::encode).collect();
    seeds.extend(saved_counters().0);
    assert!(fuzz("lc_value", seeds, targets::lc_value) > 0);
}

/// `LC.LOADCHUNK` sessions in the format of `targets::lc_loadchunk`: the chunked form of each
/// counter (its shell, then its bitmap in pieces of 24 bytes), and whole encodings.
#[test]
fn counter_loadchunk_sessions() {
    let mut sessions = Vec::new();
    for c in counters() {
        let mut out = Vec::new();
        lc::aof_parts(&c, 24, |iterator, bytes| match iterator {
            None => {
                out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
                out.extend_from_slice(bytes);
            }
            Some(it) => {
                let offset = it - 1 - bytes.len() as u64;
                out.extend_from_slice(&(offset as u32).to_le_bytes());
                out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
                out.extend_from_slice(bytes);
            }
        });
        sessions.push(out);
    }
    assert!(fuzz("lc_loadchunk", sessions, targets::lc_loadchunk) > 0);
}

/// RedisBloom chains of every shape its releases made: scaling, non-scaling, grown.
fn rb_chains() -> Vec<RedisBloomChain> {
    [
        (0.01, 100, Some(2), 0),
        (0.1, 10, Some(2), 60),
        (0.001, 50, None, 40),
        (0.5, 3, Some(1), 30),
        (0.01, 20, Some(4), 300),
    ]
    .into_iter()
    .map(|(p, capacity, growth, adds)| {
        let mut c = RedisBloomChain::reserve(p, capacity, growth, targets::LIMIT).unwrap();
        for i in 0..adds {
            let _ = c.add(&c.hash(&(i as u64).to_le_bytes()), targets::LIMIT);
        }
        c
    })
    .collect()
}

#[test]
fn redisbloom_values() {
    let mut seeds: Vec<Vec<u8>> = rb_chains().iter().map(dump::encode_value).collect();
    seeds.extend(rb_chains().iter().map(|c| dump::encode_value_legacy(c, 1)));
    seeds.extend(rb_chains().iter().map(|c| dump::encode_value_legacy(c, 0)));
    assert!(fuzz("rb_value", seeds, targets::rb_value) > 0);
}

/// `BF.LOADCHUNK` sessions of RedisBloom chains in the format of `targets::rb_loadchunk`.
fn redisbloom_sessions() -> Vec<Vec<u8>> {
    rb_chains()
        .iter()
        .map(|c| {
            let header = scandump::encode_header(c);
            let mut out = (header.len() as u16).to_le_bytes().to_vec();
            out.extend_from_slice(&header);
            let mut it = 1;
            while let Some((next, data)) = scandump::chunk(c, it) {
                for piece in data.chunks(24) {
                    it += piece.len() as u64;
                    out.extend_from_slice(&(it as u32).to_le_bytes());
                    out.extend_from_slice(&(piece.len() as u16).to_le_bytes());
                    out.extend_from_slice(piece);
                }
                assert_eq!(it, next);
            }
            out
        })
        .collect()
}

#[test]
fn redisbloom_loadchunk_sessions() {
    assert!(fuzz("rb_loadchunk", redisbloom_sessions(), targets::rb_loadchunk) > 0);
}

/// Sessions of both kinds through the header dispatch of `BF.LOADCHUNK`: RedisBloom's, and
/// lcbloom's with each chunk named by its iterator (1 + its end offset).
#[test]
fn loadchunk_sessions_of_either_format() {
    let mut seeds = redisbloom_sessions();
    seeds.extend(chains().iter().map(|c| {
        let header = bf::encode_header(c);
        let mut out = (header.len() as u16).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        let data = &bf::encode(c)[header.len()..];
        for (i, piece) in data.chunks(24).enumerate() {
            let iterator = i * 24 + piece.len() + 1;
            out.extend_from_slice(&(iterator as u32).to_le_bytes());
            out.extend_from_slice(&(piece.len() as u16).to_le_bytes());
            out.extend_from_slice(piece);
        }
        out
    }));
    assert!(fuzz("bf_any_loadchunk", seeds, targets::bf_any_loadchunk) > 0);
}

/// Windowed filters (scaled, non-scaling, one a clock jump apart; unseeded, encoding version
/// 1, and seeded, version 2) as `targets::bf_window_value` sessions: header, then the data in
/// pieces.
#[test]
fn windowed_values() {
    use lcbloom::bloom::window::codec;
    use lcbloom::bloom::window::filter::{WindowFilter, WindowParams};
    let mut seeds = Vec::new();
    for (capacity, rate, expansion, items, step, seed) in [
        (10u64, 0.01, 2u32, 40u64, 300u64, 0u64),
        (100, 0.001, 0, 100, 50, 0),
        (300, 0.05, 1, 900, 7, 0),
        (10, 0.01, 2, 40, 300, 0x5eed),
        (300, 0.05, 1, 900, 7, u64::MAX),
    ] {
        let params = WindowParams {
            window_secs: 4,
            error_rate: rate,
            capacity,
            expansion,
            seed,
        };
        let mut f = WindowFilter::new(params, targets::LIMIT).unwrap();
        for i in 0..items {
            let _ = f.add(
                &f.hash(&i.to_le_bytes()),
                1_000_000 + i * step,
                targets::LIMIT,
            );
        }
        let header = codec::encode_header(&f);
        let mut out = (header.len() as u16).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        let mut data = Vec::new();
        codec::for_each_chunk(&f, |_, c| data.extend_from_slice(c));
        for (i, piece) in data.chunks(40).enumerate() {
            out.extend_from_slice(&((i * 40) as u32).to_le_bytes());
            out.extend_from_slice(&(piece.len() as u16).to_le_bytes());
            out.extend_from_slice(piece);
        }
        seeds.push(out);
    }
    assert!(fuzz("bf_window_value", seeds, targets::bf_window_value) > 0);
}
