//! Accuracy of unions of counters of different precisions (prints a table, asserts nothing):
//! a counter reserved at a finer rate (`UNION_RATES`, default 0.007, 0.005, 0.0025, 0.001) and
//! one of the default 1% fed the same n random hashes, each united with an empty default
//! counter (`Counter::union_count`, what `LC.COUNT fine empty` runs), `UNION_TRIALS` times
//! (default 40) at each n: the mean relative error (bias) and the RMSE of both unions. Also
//! the finer counter united with the 1% one (the same items), and a finer counter of half the
//! items united with a 1% counter of the other half (precisions.rs: what each knows at its
//! own resolution).
//! Then, for default counters, the RMSE of merges of two halves of n items against the
//! `Standard error` they report (`LC.INFO`), and the same for one counter fed all n; the same
//! for finer counters merged into 1% ones (the three shapes above); and the time of a union of
//! a finer counter with a 1% counter of half its items (best of 200 calls).
use lcbloom::lc::counter::Counter;
use std::time::Instant;

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() {
    let rates: Vec<f64> = std::env::var("UNION_RATES")
        .unwrap_or_else(|_| "0.007,0.005,0.0025,0.001".into())
        .split(',')
        .map(|r| r.trim().parse().expect("a rate"))
        .collect();
    let trials: u64 = std::env::var("UNION_TRIALS").map_or(40, |t| t.parse().expect("a number"));
    let mut seed = 12_345u64;
    println!(
        "| rate | n | finer ∪ empty: bias | RMSE | finer ∪ 1%, same items: bias | RMSE | \
         finer ½ ∪ 1% other ½: bias | RMSE | 1% ∪ empty: bias | RMSE |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &rate in &rates {
        for n in [1_000u64, 3_000, 10_000, 20_000, 50_000, 200_000, 1_000_000] {
            let mut sums = [(0.0, 0.0); 4];
            for _ in 0..trials {
                let new = |rate: f64| Counter::reserve(rate, 100, u64::MAX).unwrap();
                let (mut a, mut c, empty) = (new(rate), new(0.01), new(0.01));
                let (mut half, mut other_half) = (new(rate), new(0.01));
                for i in 0..n {
                    let h = splitmix(&mut seed);
                    a.add_hash(h).unwrap();
                    c.add_hash(h).unwrap();
                    if i % 2 == 0 {
                        &mut half
                    } else {
                        &mut other_half
                    }
                    .add_hash(h)
                    .unwrap();
                }
                let unions: [&[&Counter]; 4] = [
                    &[&a, &empty],
                    &[&a, &c],
                    &[&half, &other_half],
                    &[&c, &empty],
                ];
                for (acc, union) in sums.iter_mut().zip(unions) {
                    let e = Counter::union_count(union).unwrap() as f64 / n as f64 - 1.0;
                    acc.0 += e;
                    acc.1 += e * e;
                }
            }
            let t = trials as f64;
            let cells: Vec<String> = sums
                .iter()
                .map(|s| {
                    format!(
                        "{:+.2}% | {:.2}%",
                        100.0 * s.0 / t,
                        100.0 * (s.1 / t).sqrt()
                    )
                })
                .collect();
            println!("| {rate} | {n} | {} |", cells.join(" | "));
        }
    }
    println!();
    println!("| n | merged halves: RMSE | reported | one counter: RMSE | reported |");
    println!("|---:|---:|---:|---:|---:|");
    for n in [600u64, 2_000, 5_000, 20_000, 100_000, 1_000_000] {
        let (mut merged_sq, mut merged_se, mut one_sq, mut one_se) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..trials {
            let new = || Counter::reserve(0.01, 100, u64::MAX).unwrap();
            let (mut halves, mut one) = ([new(), new()], new());
            for i in 0..n {
                let h = splitmix(&mut seed);
                halves[(i % 2) as usize].add_hash(h).unwrap();
                one.add_hash(h).unwrap();
            }
            let [mut merged, other] = halves;
            merged.absorb(&other).unwrap();
            let error = |c: &Counter| (c.count() as f64 / n as f64 - 1.0).powi(2);
            merged_sq += error(&merged);
            merged_se += merged.standard_error();
            one_sq += error(&one);
            one_se += one.standard_error();
        }
        let t = trials as f64;
        println!(
            "| {n} | {:.2}% | {:.2}% | {:.2}% | {:.2}% |",
            100.0 * (merged_sq / t).sqrt(),
            100.0 * merged_se / t,
            100.0 * (one_sq / t).sqrt(),
            100.0 * one_se / t
        );
    }
    println!();
    finer_merges_standard_error(trials, &mut seed);
    println!();
    union_time(&mut seed);
}

/// A finer counter and a 1% one of `n` items, in one of the three shapes: the finer one
/// alone, both the same items, or half each.
fn finer_and_coarse(rate: f64, n: u64, shape: usize, seed: &mut u64) -> (Counter, Counter) {
    let new = |rate: f64| Counter::reserve(rate, 100, u64::MAX).unwrap();
    let (mut fine, mut coarse) = (new(rate), new(0.01));
    for i in 0..n {
        let h = splitmix(seed);
        if shape != 2 || i % 2 == 0 {
            fine.add_hash(h).unwrap();
        }
        if shape == 1 || (shape == 2 && i % 2 == 1) {
            coarse.add_hash(h).unwrap();
        }
    }
    (fine, coarse)
}

/// Finer counters merged into 1% ones: the RMSE and the `Standard error` reported.
fn finer_merges_standard_error(trials: u64, seed: &mut u64) {
    println!("| rate | n | into an empty 1%: RMSE / reported | same items | other halves |");
    println!("|---|---:|---|---|---|");
    for rate in [0.005, 0.001] {
        for n in [5_000u64, 50_000, 500_000] {
            let cells: Vec<String> = (0..3)
                .map(|shape| {
                    let (mut squares, mut reported) = (0.0, 0.0);
                    for _ in 0..trials {
                        let (fine, mut coarse) = finer_and_coarse(rate, n, shape, seed);
                        coarse.absorb(&fine).unwrap();
                        squares += (coarse.count() as f64 / n as f64 - 1.0).powi(2);
                        reported += coarse.standard_error();
                    }
                    let t = trials as f64;
                    format!(
                        "{:.2}% / {:.2}%",
                        100.0 * (squares / t).sqrt(),
                        100.0 * reported / t
                    )
                })
                .collect();
            println!("| {rate} | {n} | {} |", cells.join(" | "));
        }
    }
}

/// The time of `Counter::union_count` of a finer counter and a 1% counter of half its items.
fn union_time(seed: &mut u64) {
    println!("| finer rate | n | union_count, best of 200 |");
    println!("|---|---:|---:|");
    for (rate, n) in [(0.005, 50_000u64), (0.001, 1_000_000), (0.0004, 1_000_000)] {
        let mut again = *seed;
        let (fine, _) = finer_and_coarse(rate, n, 0, seed);
        // Half of the finer counter's items: its first hashes again.
        let mut coarse = Counter::reserve(0.01, 100, u64::MAX).unwrap();
        for _ in 0..n / 2 {
            coarse.add_hash(splitmix(&mut again)).unwrap();
        }
        let best = (0..200)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(Counter::union_count(&[&fine, &coarse]).unwrap());
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        println!("| {rate} | {n} | {:.2} ms |", best * 1e3);
    }
}
