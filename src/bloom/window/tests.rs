//! The windowed filter's semantics, sizing and encoding, without a server.

use super::codec;
use super::filter::{WindowFilter, WindowParams, MAX_WINDOW_SECS};
use super::partition::SLOTS;
use crate::bloom::any::Added;
use crate::bloom::budget::{MIN_SCALE_OUTS, WINDOW};
use crate::bloom::chain::ChainError;
use crate::bloom::filter::MIN_ERROR_RATE;
use crate::core::decode::DecodeError;
use crate::core::hashing::{hash_item, ItemHash};
use proptest::prelude::*;
use std::collections::HashMap;

/// The window, ms.
const W: u64 = 40_000;
const NO_LIMIT: u64 = u64::MAX;

fn params(capacity: u64, rate: f64, expansion: u32) -> WindowParams {
    WindowParams {
        window_secs: (W / 1000) as u32,
        error_rate: rate,
        capacity,
        expansion,
        seed: 0,
    }
}

fn h(i: u64) -> ItemHash {
    hash_item(&i.to_le_bytes())
}

fn encode(f: &WindowFilter) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut chunks = Vec::new();
    codec::for_each_chunk(f, |_, c| chunks.push(c.to_vec()));
    (codec::encode_header(f), chunks)
}

fn round_trip(f: &WindowFilter) -> WindowFilter {
    let (header, chunks) = encode(f);
    codec::decode(&header, chunks.iter().map(|c| c.as_slice()), NO_LIMIT).unwrap()
}

proptest! {
    /// Against a model of last-add times: every item is found before its last add + window
    /// and not after + 1.25·window (up to false positives, which a 1e-12 rate excludes
    /// here); times go backwards too.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn found_inside_the_window_gone_after_the_slack(
        ops in proptest::collection::vec((0u64..60, -3_000i64..9_000, any::<bool>()), 1..300),
    ) {
        let mut f = WindowFilter::new(params(1000, 1e-12, 0), NO_LIMIT).unwrap();
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut now = 1_000_000u64;
        for (item, step, is_add) in ops {
            now = now.saturating_add_signed(step);
            let t = now.max(f.time());
            if is_add {
                let added = f.add(&h(item), now, NO_LIMIT).unwrap();
                prop_assert_eq!(added.is_new(), !live(&last, item, t));
                last.insert(item, t);
            }
            for (&i, &a) in &last {
                let found = f.contains(&h(i), now);
                if t < a + W {
                    prop_assert!(found, "item {} added at {} missing at {}", i, a, t);
                }
                if t >= a + W + W / SLOTS as u64 {
                    prop_assert!(!found, "item {} added at {} still there at {}", i, a, t);
                }
            }
            // One layer, re-adds moved: a fingerprint per item in a live generation, and the
            // cardinality those items, the oldest live slot's weighed by its share of the
            // window.
            prop_assert_eq!(f.layers().len(), 1);
            let live_items: Vec<u64> = last.keys().copied().filter(|&i| live(&last, i, t)).collect();
            prop_assert_eq!(f.stored(now), live_items.len() as u64);
            let slot = W / SLOTS as u64;
            let inside = ((t / slot + 1) * slot - t) as f64 / slot as f64;
            let card: f64 = live_items
                .iter()
                .map(|i| if last[i] / slot + SLOTS as u64 == t / slot { inside } else { 1.0 })
                .sum();
            prop_assert!(f.cardinality(now).abs_diff(card.round() as u64) <= 1);
        }
        let back = round_trip(&f);
        for &i in last.keys() {
            prop_assert_eq!(back.contains(&h(i), now), f.contains(&h(i), now));
        }
    }
}

proptest! {
    /// Adds of few items to small filters (many sharing a fingerprint, scaling or not, the
    /// budget often reached): never a false negative, a non-scaling filter refuses only an
    /// item it does not hold, and one layer holds at most a fingerprint per live item.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn moves_lose_nothing(
        ops in proptest::collection::vec((0u64..40, 0i64..8_000, any::<bool>()), 1..300),
        capacity in 1u64..30,
        expansion in 0u32..3,
        rate in prop_oneof![Just(0.3), Just(0.05)],
    ) {
        let mut f = WindowFilter::new(params(capacity, rate, expansion), NO_LIMIT).unwrap();
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut now = 1_000_000u64;
        for (item, step, is_add) in ops {
            now += step as u64;
            if is_add {
                match f.add(&h(item), now, NO_LIMIT) {
                    Ok(_) => {
                        last.insert(item, now);
                    }
                    // A scaling filter refuses an item of an earlier layer only when it
                    // cannot scale.
                    Err(ChainError::CannotScale | ChainError::MostSubFilters) => {
                        prop_assert!(expansion > 0)
                    }
                    Err(e) => {
                        prop_assert_eq!(e, ChainError::Full);
                        prop_assert!(!live(&last, item, now), "re-add of {} refused", item);
                    }
                }
            }
            for (&i, &a) in &last {
                if now < a + W {
                    prop_assert!(f.contains(&h(i), now), "item {} added at {} missing at {}", i, a, now);
                }
            }
            if f.layers().len() == 1 {
                let live_items = last.keys().filter(|&&i| live(&last, i, now)).count();
                prop_assert!(f.stored(now) <= live_items as u64);
            }
        }
        let back = round_trip(&f);
        prop_assert_eq!(encode(&back), encode(&f));
    }
}

proptest! {
    /// A batch (`add_all`) leaves the filter as its items added one after the other do, with
    /// the same results: new items, repeats within the batch, items found in the newest slot,
    /// moved from older slots and refreshed from earlier layers, scale-outs, a non-scaling
    /// filter filling up, one partition or several, the clock moving by less and more than a
    /// slot.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn batches_are_adds_one_by_one(
        expansion in prop_oneof![Just(0u32), Just(2)],
        capacity in prop_oneof![10u64..200, 2_000u64..7_000],
        pool in prop_oneof![Just(300u64), Just(20_000)],
        batches in proptest::collection::vec(
            (proptest::collection::vec(any::<u64>(), 1..80), 0u64..15_000),
            1..30,
        ),
    ) {
        let make = || WindowFilter::new(params(capacity, 0.01, expansion), NO_LIMIT).unwrap();
        let (mut batched, mut single) = (make(), make());
        let mut now = 1_000_000;
        for (items, step) in batches {
            now += step;
            let hashes: Vec<ItemHash> = items.iter().map(|&i| h(i % pool)).collect();
            let mut got = Vec::new();
            batched.add_all(&hashes, now, NO_LIMIT, &mut got);
            let mut expected = Vec::new();
            for hash in &hashes {
                let result = single.add(hash, now, NO_LIMIT);
                expected.push(result);
                if result.is_err() {
                    break;
                }
            }
            prop_assert_eq!(&got, &expected);
            prop_assert!(batched == single);
            prop_assert_eq!(batched.memory_bytes(), single.memory_bytes());
        }
    }
}

/// Whether the generation of an item's last add is live at `t` (inside its window or its
/// slack): an add then finds it.
fn live(last: &HashMap<u64, u64>, item: u64, t: u64) -> bool {
    let slot = W / SLOTS as u64;
    last.get(&item)
        .is_some_and(|&a| t / slot <= a / slot + SLOTS as u64)
}

#[test]
fn re_adding_restarts_the_window() {
    let mut f = WindowFilter::new(params(100, 0.001, 0), NO_LIMIT).unwrap();
    assert_eq!(f.add(&h(1), 0, NO_LIMIT), Ok(Added::New));
    assert_eq!(f.add(&h(1), 5, NO_LIMIT), Ok(Added::Present));
    assert_eq!(f.add(&h(1), 30_000, NO_LIMIT), Ok(Added::Refreshed));
    assert!(f.contains(&h(1), 69_999));
    assert!(f.contains(&h(1), 30_000 + W - 1));
    assert!(!f.contains(&h(1), 30_000 + W + W / 4));
    // A read never moves the filter's time.
    assert_eq!(f.time(), 30_000);
}

/// Re-adding the same items every quarter window uses no more of the filter: a non-scaling
/// one never refuses them, a scaling one never scales, and the memory stays as after the
/// first add.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn re_adds_use_no_more_capacity() {
    for (n, expansion) in [(100u64, 0), (10_000, 2)] {
        let mut f = WindowFilter::new(params(n, 0.01, expansion), NO_LIMIT).unwrap();
        let new = (0..n)
            .filter(|&i| f.add(&h(i), 0, NO_LIMIT).unwrap().is_new())
            .count() as u64;
        let memory = f.memory_bytes();
        for q in 1..=12 {
            let t = q * W / SLOTS as u64;
            for i in 0..n {
                // Present: an item sharing a fingerprint with one moved just before.
                let added = f.add(&h(i), t, NO_LIMIT);
                assert!(
                    matches!(added, Ok(Added::Refreshed | Added::Present)),
                    "{n} {q} {i}: {added:?}"
                );
            }
            assert_eq!(f.layers().len(), 1);
            assert_eq!(f.stored(t), new);
            assert_eq!(f.cardinality(t), new);
            assert!(f.memory_bytes() <= memory + memory / 20, "{n} {q}");
        }
    }
}

/// An item re-added after the filter scaled is stored in the newest layer too, its old copy
/// kept; the refresh is recorded by the old copy's age, and slots are the same times in
/// every layer, so the cardinality counts the item once while both copies live, the oldest
/// slot partly outside the window included.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn items_refreshed_from_an_earlier_layer_count_once() {
    let n = 1000;
    let mut f = WindowFilter::new(params(n, 0.001, 2), NO_LIMIT).unwrap();
    let new = (0..2 * n)
        .filter(|&i| f.add(&h(i), 0, NO_LIMIT).unwrap().is_new())
        .count() as u64;
    assert_eq!(f.layers().len(), 2);
    let first = f.layers()[0].live_items(0);
    let quarter = W / SLOTS as u64;
    for q in 1..=4 {
        for i in 0..2 * n {
            assert!(!f.add(&h(i), q * quarter, NO_LIMIT).unwrap().is_new());
        }
        assert_eq!(f.layers().len(), 2);
        assert!(f.stored(q * quarter).abs_diff(new + first) <= 2);
        for t in [
            q * quarter,
            q * quarter + quarter / 2,
            q * quarter + quarter - 1,
        ] {
            let card = f.cardinality(t);
            assert!(card.abs_diff(new) <= 2, "{t}: {card} of {new}");
        }
    }
    // The first layer's copies slide out: the item counts in the newest alone.
    let later = 5 * quarter;
    assert!(f.stored(later).abs_diff(new) <= 2);
    assert!(f.cardinality(later).abs_diff(new) <= 2);
}

/// A scaling filter is made only with room for 20 layers (`budget::WINDOW`), so that a
/// rate too small is refused by `BF.RESERVE`, not by a later add; a non-scaling one takes
/// rates down to `MIN_ERROR_RATE`.
#[test]
fn the_smallest_rates_named_are_accepted_and_scale_as_promised() {
    let min = WINDOW.min_scaling_error_rate();
    assert!(ChainError::WindowErrorRate
        .to_string()
        .contains(&format!("{min:.2e} for a scaling one")));
    for rate in [min * 0.99, 7.71e-13, 2e-15] {
        assert!(!WINDOW.has_room(rate, 2), "{rate}");
    }
    assert!(WINDOW.has_room(min, 2) && WINDOW.has_room(2e-15, 0));
    // Without room, as a master's create is taken: down to the floor.
    assert!(WindowFilter::new(params(1, 2e-15, 2), NO_LIMIT).is_ok());
    assert_eq!(
        WindowFilter::new(params(1, 1.2e-15, 2), NO_LIMIT),
        Err(ChainError::WindowErrorRate)
    );
    assert_eq!(
        WindowFilter::new(params(1, 9e-16, 0), NO_LIMIT),
        Err(ChainError::WindowErrorRate)
    );
    assert!(WindowFilter::new(params(1, MIN_ERROR_RATE, 0), NO_LIMIT).is_ok());
    // Expansion 1 and capacity 1: a layer takes an item or two, all within one slot.
    let mut f = WindowFilter::new(params(1, min, 1), NO_LIMIT).unwrap();
    let mut i = 0;
    while f.layers().len() <= MIN_SCALE_OUTS {
        let added = f.add(&h(i), 1_000, NO_LIMIT);
        assert!(
            added.is_ok(),
            "item {i}, {} layers: {added:?}",
            f.layers().len()
        );
        i += 1;
    }
}

/// A capacity whose filter can be sized but passes the limit is refused as too large for it;
/// one no layer can have (more than 2^32 partitions), under a limit that would admit its
/// size, as overflowing.
#[test]
fn too_large_for_the_limit_before_overflowing() {
    const GIB: u64 = 1 << 30;
    for capacity in [100_000_000_000_000u64, 1 << 50] {
        for expansion in [0, 2] {
            let refused = WindowFilter::new(params(capacity, 0.01, expansion), GIB);
            assert!(
                matches!(refused, Err(ChainError::TooLarge { needed, limit: GIB }) if needed > capacity),
                "{capacity}: {refused:?}"
            );
            let refused = WindowFilter::new(params(capacity, 0.01, expansion), NO_LIMIT);
            assert_eq!(refused, Err(ChainError::Overflow));
        }
    }
    let refused = WindowFilter::new(params(10_000_000, 0.01, 0), 1 << 20);
    assert!(matches!(refused, Err(ChainError::TooLarge { .. })));
}

#[test]
fn a_clock_going_backwards_loses_nothing() {
    let mut f = WindowFilter::new(params(100, 0.001, 0), NO_LIMIT).unwrap();
    let t = 10_000_000;
    f.add(&h(1), t, NO_LIMIT).unwrap();
    // The clock jumps back an hour: the add counts as made at the filter's time.
    f.add(&h(2), t - 3_600_000, NO_LIMIT).unwrap();
    assert_eq!(f.time(), t);
    for now in [0, t / 2, t, t + W - 1] {
        assert!(f.contains(&h(1), now) && f.contains(&h(2), now), "{now}");
    }
    assert!(!f.contains(&h(2), t + W + W / 4));
}

/// A steady stream at capacity for several windows: the measured false-positive rate stays
/// within the rate (the bound is B/(P·u) ≤ 0.9·p), measured at every other quarter window
/// (when the filter holds its whole budget) over 2,000/rate non-members, so that the
/// measurement's deviation is about 2% of the rate.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn false_positives_stay_within_the_rate_under_a_steady_stream() {
    for (rate, expansion) in [(0.01, 0), (0.01, 2), (0.001, 0)] {
        let n = 20_000u64;
        let mut f = WindowFilter::new(params(n, rate, expansion), NO_LIMIT).unwrap();
        let step = W / n;
        let mut worst = 0.0f64;
        for i in 0..4 * n {
            f.add(&h(i), i * step, NO_LIMIT).unwrap();
            if i % (n / 2) == n / 4 - 1 && i > n {
                let now = i * step;
                let probes = (2000.0 / rate) as u64;
                let fp = (0..probes)
                    .filter(|j| f.contains(&h(u64::MAX - j), now))
                    .count();
                worst = worst.max(fp as f64 / probes as f64);
                // The whole last window is there.
                assert!((i + 1 - n..=i).all(|k| f.contains(&h(k), now)));
            }
        }
        assert_eq!(
            f.layers().len(),
            1,
            "a steady stream at capacity never scales"
        );
        assert!(worst <= rate, "rate {rate}: measured {worst}");
    }
}

/// Bits per item of capacity, the filter full (a steady stream for two windows, the
/// maximum over a window).
fn bits_per_item(n: u64, rate: f64, expansion: u32) -> f64 {
    let mut f = WindowFilter::new(params(n, rate, expansion), NO_LIMIT).unwrap();
    let step_us = W * 1000 / n;
    let mut most = 0;
    for i in 0..2 * n {
        f.add(&h(i), i * step_us / 1000, NO_LIMIT).unwrap();
        if i >= n {
            most = most.max(f.memory_bytes());
        }
    }
    most as f64 * 8.0 / n as f64
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn memory_per_item_at_capacity() {
    let one = bits_per_item(200_000, 0.01, 0);
    let scaling = bits_per_item(200_000, 0.01, 2);
    let tenth = bits_per_item(200_000, 0.001, 0);
    eprintln!("bits per item: 1% {one:.2}, 1% scaling {scaling:.2}, 0.1% {tenth:.2}");
    assert!(one <= 16.0 && scaling <= 16.0, "{one} {scaling}");
    assert!(tenth <= 21.0, "{tenth}");
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn non_scaling_refuses_past_its_budget_then_recovers() {
    let n = 1000;
    let mut f = WindowFilter::new(params(n, 0.01, 0), NO_LIMIT).unwrap();
    let budget = n + n / SLOTS as u64;
    let mut i = 0;
    while f.add(&h(i), 0, NO_LIMIT).is_ok() {
        i += 1;
    }
    assert_eq!(f.add(&h(i), 0, NO_LIMIT), Err(ChainError::Full));
    assert_eq!(f.stored(0), budget);
    // Present items still answer; after the slack everything is gone and room is back.
    assert_eq!(f.add(&h(0), 0, NO_LIMIT), Ok(Added::Present));
    assert_eq!(f.add(&h(i), W + W / 4, NO_LIMIT), Ok(Added::New));
    assert_eq!(f.stored(W + W / 4), 1);
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn scaling_adds_layers_keeps_the_rate_and_drops_them_later() {
    let n = 1000;
    let mut f = WindowFilter::new(params(n, 0.01, 2), NO_LIMIT).unwrap();
    for i in 0..10 * n {
        f.add(&h(i), 0, NO_LIMIT).unwrap();
    }
    assert!(f.layers().len() >= 3);
    let rates: f64 = f.layers().iter().map(|l| l.params().error_rate).sum();
    assert!(rates <= 0.01);
    assert!((0..10 * n).all(|i| f.contains(&h(i), W - 1)));
    let fp = (0..100_000u64)
        .filter(|j| f.contains(&h(u64::MAX - j), 0))
        .count();
    assert!(fp <= 1000, "{fp}");
    assert!(f.cardinality(0).abs_diff(10 * n) < n / 2);
    let layers = f.layers().len() as u64;
    assert_eq!(f.live_layer_count(0), layers);
    assert_eq!(f.capacity(0), (0..layers).map(|i| n << i).sum::<u64>());
    // Long after, the dead layers count for nothing at once, before the sweep drops them.
    f.add(&h(0), 10 * W, NO_LIMIT).unwrap();
    assert!(f.layers().len() > 1);
    assert_eq!(f.live_layer_count(10 * W), 1);
    assert_eq!(f.capacity(10 * W), n << (layers - 1));
    // Writes sweep the dead layers' partitions and drop them.
    for i in 0..2000 {
        f.add(&h(i), 10 * W, NO_LIMIT).unwrap();
    }
    assert_eq!(f.layers().len(), 1);
    assert_eq!(f.stored(10 * W), 2000);
    // No room kept for the dropped layers: as many bytes as a copy loaded from it (a replica).
    assert_eq!(f.memory_bytes(), round_trip(&f).memory_bytes());
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn cardinality_estimates_the_window() {
    let n = 40_000u64;
    let mut f = WindowFilter::new(params(n, 0.01, 0), NO_LIMIT).unwrap();
    let step = W / n;
    for i in 0..2 * n {
        // Every tenth add repeats an item from half a window before.
        let item = if i % 10 == 0 && i > n / 2 {
            i - n / 2
        } else {
            i
        };
        f.add(&h(item), i * step, NO_LIMIT).unwrap();
    }
    let now = (2 * n - 1) * step;
    let card = f.cardinality(now);
    assert!(card.abs_diff(n) < n / 20, "{card}");
    // Reads at a later time see the window slide.
    assert!(f.cardinality(now + W / 2).abs_diff(n / 2) < n / 20);
    assert_eq!(f.cardinality(now + 2 * W), 0);
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn encoding_is_canonical_and_round_trips() {
    let mut f = WindowFilter::new(params(5000, 0.01, 2), NO_LIMIT).unwrap();
    for i in 0..20_000u64 {
        f.add(&h(i), i * 3, NO_LIMIT).unwrap();
    }
    let back = round_trip(&f);
    assert_eq!(encode(&back), encode(&f));
    for i in 0..20_000u64 {
        assert_eq!(back.contains(&h(i), 60_000), f.contains(&h(i), 60_000));
    }
    assert_eq!(back.cardinality(60_000), f.cardinality(60_000));
    assert_eq!(back.memory_bytes(), round_trip(&back).memory_bytes());
    // A copy that swept differently (a write moved time, then the same state) encodes alike.
    let mut a = f.try_clone().unwrap();
    let mut b = round_trip(&f);
    a.add(&h(7), 90_000, NO_LIMIT).unwrap();
    b.add(&h(7), 90_000, NO_LIMIT).unwrap();
    assert_eq!(encode(&a), encode(&b));
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn chunks_may_be_cut_anywhere() {
    let mut f = WindowFilter::new(params(3000, 0.01, 0), NO_LIMIT).unwrap();
    for i in 0..3000u64 {
        f.add(&h(i), i * 10, NO_LIMIT).unwrap();
    }
    let (header, chunks) = encode(&f);
    let data: Vec<u8> = chunks.concat();
    for cut in [1usize, 7, 20, 333, 4096] {
        let pieces: Vec<&[u8]> = data.chunks(cut).collect();
        let back = codec::decode(&header, pieces, NO_LIMIT).unwrap();
        assert_eq!(encode(&back), encode(&f));
    }
    // Out of order, short, or long data is refused.
    assert!(codec::decode(&header, [&data[1..]], NO_LIMIT).is_err());
    assert!(codec::decode(&header, [&data[..data.len() - 4]], NO_LIMIT).is_err());
    let mut long = data.clone();
    long.extend_from_slice(&[0; 20]);
    assert!(codec::decode(&header, [long.as_slice()], NO_LIMIT).is_err());
    // The limit binds before anything is allocated.
    assert!(codec::decode_header(&header, 1000).is_err());
}

/// A filter of `params` under `seed` holding items `0..n`, added `step` ms apart.
fn filled(params: WindowParams, seed: u64, n: u64, step: u64) -> WindowFilter {
    let mut f = WindowFilter::new(WindowParams { seed, ..params }, NO_LIMIT).unwrap();
    for i in 0..n {
        f.add(&f.hash(&i.to_le_bytes()), i * step, NO_LIMIT)
            .unwrap();
    }
    f
}

/// Decodes `header` with `value` written at byte `at`.
fn header_with(header: &[u8], at: usize, value: &[u8]) -> Result<(), DecodeError> {
    let mut h = header.to_vec();
    h[at..at + value.len()].copy_from_slice(value);
    codec::decode_header(&h, NO_LIMIT).map(|_| ())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn seeded_filters_are_version_2_and_unseeded_ones_version_1() {
    const SEED: u64 = 0x0123_4567_89ab_cdef;
    // One layer of one partition, several layers, several partitions.
    for (capacity, expansion, n) in [(100, 0, 100), (500, 2, 3_000), (5_000, 0, 5_000)] {
        let f = filled(params(capacity, 0.01, expansion), SEED, n, 7);
        let (header, chunks) = encode(&f);
        assert_eq!(&header[..8], b"LCBW\x02\x01\x04\x00");
        assert_eq!(u64_at(&header, 56), SEED);
        assert_eq!(u64_at(&header, 64), f.layers()[0].params().capacity);
        let back = round_trip(&f);
        assert_eq!(back.params(), f.params());
        assert_eq!(encode(&back), (header.clone(), chunks.clone()));
        assert!((0..n).all(|i| back.contains(&back.hash(&i.to_le_bytes()), 7 * n)));
        // The same filter unseeded: version 1, the same fields but the seed, other data.
        let plain = filled(params(capacity, 0.01, expansion), 0, n, 7);
        let (plain_header, plain_chunks) = encode(&plain);
        assert_eq!(&plain_header[..8], b"LCBW\x01\x01\x04\x00");
        assert_eq!(plain_header[8..48], header[8..48]);
        assert_eq!(plain_header[56..64], header[64..72]);
        assert_eq!(plain_header.len() + 8, header.len());
        assert_eq!(
            encode(&round_trip(&plain)),
            (plain_header.clone(), plain_chunks.clone())
        );
        assert_ne!(plain_chunks.concat(), chunks.concat());
        // Refused: seed 0 in version 2 (written as version 1), either version with the
        // other's header, a cut header, an unknown version.
        let mutate = |at: usize, value: &[u8]| header_with(&header, at, value);
        assert!(mutate(56, &0u64.to_le_bytes()).is_err());
        assert!(mutate(4, &[1]).is_err());
        assert!(mutate(4, &[3]).is_err());
        let mut as_seeded = plain_header.clone();
        as_seeded[4] = 2;
        assert!(codec::decode_header(&as_seeded, NO_LIMIT).is_err());
        assert!(codec::decode_header(&header[..60], NO_LIMIT).is_err());
        assert!(codec::decode_header(&header[..header.len() - 1], NO_LIMIT).is_err());
    }
}

/// Layers grow from the filter's capacity by its expansion, as scaling makes them (the oldest
/// may have slid out): a header whose layers no filter of its parameters has is refused.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn layers_must_have_grown_from_the_filters_capacity() {
    let f = filled(params(500, 0.01, 2), 9, 3_000, 7);
    let capacities: Vec<u64> = f.layers().iter().map(|l| l.params().capacity).collect();
    assert_eq!(capacities, [500, 1_000, 2_000]);
    let (header, _) = encode(&f);
    let per_layer = (header.len() - 64) / 3;
    let mutate = |at: usize, value: &[u8]| header_with(&header, at, value);
    let layer = |i: usize| 64 + i * per_layer;
    let refused = Err(DecodeError("bad layer capacity"));
    assert_eq!(mutate(24, &500u64.to_le_bytes()), Ok(()), "unchanged");
    // A filter of 250 whose first layer slid out.
    assert_eq!(mutate(24, &250u64.to_le_bytes()), Ok(()));
    assert_eq!(mutate(24, &1u64.to_le_bytes()), refused, "500 is not 1·2^j");
    assert_eq!(mutate(24, &300u64.to_le_bytes()), refused);
    assert_eq!(mutate(32, &3u32.to_le_bytes()), refused, "expansion 3");
    assert_eq!(
        mutate(layer(1), &500u64.to_le_bytes()),
        refused,
        "not grown"
    );
    assert_eq!(mutate(layer(2), &1_000u64.to_le_bytes()), refused);
    assert_eq!(mutate(layer(0), &600u64.to_le_bytes()), refused);
}

/// A slot's refreshed counts are adds stored in that slot, which its layer holds at most its
/// budget of: a header claiming more is refused (one of 2^64 − 1 loaded, and took its layer's
/// items out of `BF.CARD`: 2,359 for a filter of 2,984).
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn refreshed_counts_are_at_most_the_layers_budget() {
    let f = filled(params(500, 0.01, 2), 0, 3_000, 7);
    let (header, _) = encode(&f);
    let budget = f.layers()[0].params().budget();
    assert_eq!(budget, 625);
    let per_layer = (header.len() - 56) / f.layers().len();
    let refreshed = |slot: usize, age: usize| 56 + 16 + 8 * (slot * SLOTS + age);
    let with = |values: &[(usize, u64)]| {
        let mut h = header.clone();
        for &(at, v) in values {
            h[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        codec::decode_header(&h, NO_LIMIT).map(|_| ())
    };
    let refused = Err(DecodeError("bad refreshed counts"));
    // Each slot may hold its layer's whole budget of refreshes.
    let full: Vec<(usize, u64)> = (0..5).map(|s| (refreshed(s, s % SLOTS), budget)).collect();
    assert_eq!(with(&full), Ok(()));
    assert_eq!(with(&[(refreshed(4, 0), budget + 1)]), refused);
    assert_eq!(with(&[(refreshed(2, 3), u64::MAX)]), refused);
    let split = budget / 2 + 1;
    assert_eq!(
        with(&[(refreshed(4, 0), split), (refreshed(4, 1), split)]),
        refused
    );
    assert_eq!(
        with(&[(refreshed(4, 0), u64::MAX), (refreshed(4, 1), 2)]),
        refused,
        "a sum that wraps"
    );
    // The next layer's budget is its own (twice the capacity).
    let next = per_layer + refreshed(4, 0);
    assert_eq!(with(&[(next, 2 * budget)]), Ok(()));
    assert_eq!(with(&[(next, 2 * budget + 1)]), refused);
}

/// Adds keep what a load checks: a value loaded with a slot's refreshed counts at its layer's
/// budget (more than its adds made) stays at it when an item of an older layer is re-added,
/// so that it saves and loads again (it reached budget + 1, and its own DUMP, the RDB and a
/// replica's full sync refused it).
#[test]
fn adds_keep_refreshed_counts_within_the_budget() {
    let slot = W / SLOTS as u64;
    let mut f = WindowFilter::new(params(1, 0.01, 2), NO_LIMIT).unwrap();
    for (i, t) in [(1u64, 1), (2, 2), (3, slot + 1)] {
        f.add(&h(i), t, NO_LIMIT).unwrap();
    }
    assert_eq!(f.layers().len(), 2);
    let budget = f.layers()[1].params().budget();
    let (mut header, chunks) = encode(&f);
    // The newest layer's newest slot: refreshed from one slot back.
    let at = 56 + 176 + 16 + 8 * (4 * SLOTS);
    header[at..at + 8].copy_from_slice(&budget.to_le_bytes());
    let mut loaded = codec::decode(&header, chunks.iter().map(|c| c.as_slice()), NO_LIMIT).unwrap();
    assert_eq!(loaded.add(&h(1), slot + 2, NO_LIMIT), Ok(Added::Refreshed));
    let (header, chunks) = encode(&loaded);
    assert_eq!(u64_at(&header, at), budget);
    assert!(codec::decode(&header, chunks.iter().map(|c| c.as_slice()), NO_LIMIT).is_ok());
}

/// The data holds a record for every partition of every layer: data whose stated length ends
/// after the first record loaded as complete, its other partitions empty, and re-encoded to
/// other bytes.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn data_ending_before_the_last_record_is_refused() {
    let f = filled(params(7_000, 0.01, 0), 0, 3_000, 1);
    assert!(f.layers()[0].params().partitions() > 1);
    let (mut header, chunks) = encode(&f);
    let data = chunks.concat();
    let u = f.layers()[0].params().universe;
    let words: usize = (0..super::partition::GENS)
        .map(|g| u32::from_le_bytes(data[4 * g..4 * g + 4].try_into().unwrap()))
        .map(|c| super::partition::stream_words(c, u))
        .sum();
    let first = 4 * super::partition::GENS + 8 * words;
    header[48..56].copy_from_slice(&(first as u64).to_le_bytes());
    let decoded = codec::decode(&header, [&data[..first]], NO_LIMIT);
    assert_eq!(
        decoded.err(),
        Some(DecodeError("data ends before its last record"))
    );
}

/// A header's window is whole seconds, as `WINDOW seconds` makes it: one of 4 ms or 1,004 ms
/// loaded, and `BF.INFO` showed `Window 0` or `1`.
#[test]
fn windows_are_whole_seconds() {
    let (header, _) = encode(&filled(params(100, 0.01, 2), 9, 10, 7));
    let window = |ms: u64| header_with(&header, 8, &ms.to_le_bytes());
    assert_eq!(window(W), Ok(()), "unchanged");
    let most = MAX_WINDOW_SECS as u64 * 1000;
    for ms in [1_000, 3_000, most] {
        assert_eq!(window(ms), Ok(()), "{ms}");
    }
    for ms in [0, 4, 996, 1_004, 40_004, most + 1_000, 1 << 52] {
        assert_eq!(window(ms), Err(DecodeError("bad window")), "{ms}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn seeds_move_the_items() {
    // The same items under seed 0, seed 1 and seed 2: three sets of fingerprints, each
    // filter finding its own items.
    let data: Vec<Vec<u8>> = [0, 1, 2]
        .map(|seed| {
            let f = filled(params(1000, 0.01, 0), seed, 1000, 1);
            assert!((0..1000u64).all(|i| f.contains(&f.hash(&i.to_le_bytes()), 1000)));
            encode(&f).1.concat()
        })
        .into();
    assert_ne!(data[0], data[1]);
    assert_ne!(data[1], data[2]);
    assert_ne!(data[0], data[2]);
}

proptest! {
    /// Hostile headers and data: refused or decoded, never a panic or a huge allocation.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn hostile_bytes_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
        seed in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let f = filled(params(500, 0.01, 2), seed, 900, 50);
        let (mut header, chunks) = encode(&f);
        let mut data = chunks.concat();
        for (at, byte) in flips {
            let total = header.len() + data.len();
            let at = at % total;
            if at < header.len() { header[at] ^= byte | 1 } else { data[at - header.len()] ^= byte | 1 }
        }
        let cut = cut % (data.len() + 1);
        if let Ok(back) = codec::decode(&header, [&data[..cut], &data[cut..]].into_iter().filter(|c| !c.is_empty()), 1 << 26) {
            // Whatever decodes, re-encodes to itself and answers.
            prop_assert_eq!(encode(&round_trip(&back)), encode(&back));
            let _ = back.contains(&h(1), 0);
            let _ = back.cardinality(u64::MAX);
        }
    }
}

/// Decoding refuses a value that would take more than the limit, by the bytes `MEMORY USAGE`
/// counts: its layers' list, each partition's words in their size classes and the blocks of
/// refreshed counts included (a filter of 41 layers took 4.2 times the limit that let it
/// load). Chunk by chunk or whole.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn loads_are_refused_past_the_limit_by_their_real_bytes() {
    use super::value::Windowed;
    let mut shapes: Vec<_> = [(5, 1, 150), (1, 2, 500), (10, 2, 300), (100, 1, 2_000)]
        .map(|(capacity, expansion, n)| filled(params(capacity, 0.01, expansion), 0, n, 5))
        .into();
    // Items re-added a slot later, found in earlier layers: the newest records refreshes.
    let mut refreshed = filled(params(2, 0.01, 2), 0, 300, 0);
    for i in 0..300u64 {
        let hash = refreshed.hash(&i.to_le_bytes());
        refreshed.add(&hash, W / SLOTS as u64, NO_LIMIT).unwrap();
    }
    let newest = refreshed.layers().last().unwrap();
    assert!(newest
        .counts_at(newest.head())
        .iter()
        .any(|c| c.refreshed[0] > 0));
    shapes.push(refreshed);
    for f in shapes {
        let capacity = f.params().capacity;
        let expansion = f.params().expansion;
        let (header, chunks) = encode(&f);
        let load = |limit: u64, cut: usize| -> Result<Windowed, DecodeError> {
            let mut v = Windowed::from_header(&header, limit)?;
            let data = chunks.concat();
            let mut start = 0;
            for piece in data.chunks(cut) {
                v.load_chunk(start, piece)?;
                start += piece.len() as u64;
            }
            Ok(v)
        };
        let bytes = load(NO_LIMIT, usize::MAX).unwrap().memory_bytes();
        assert!(f.layers().len() > 4, "{capacity}");
        for cut in [usize::MAX, 64, 1_000] {
            assert!(load(bytes, cut).is_ok(), "{capacity}/{expansion}: {bytes}");
            let refused = load(bytes - 1, cut).err();
            assert_eq!(
                refused,
                Some(DecodeError("value larger than max-memory-per-key")),
                "{capacity}/{expansion}: {bytes}, pieces of {cut}"
            );
        }
    }
}

/// The smallest limit a filter of `params` is made under.
fn needed(params: WindowParams) -> u64 {
    match WindowFilter::new(params, 0) {
        Err(ChainError::TooLarge { needed, .. }) => needed,
        other => panic!("{other:?}"),
    }
}

/// A layer of several partitions filled to its budget over its live slots, items spread
/// evenly over them, stays within the plan its filter was made by, its value's box included.
/// The plan took every partition at the mean: those the hash gave more items crossed a size
/// class, and the value took up to 5% more than the limit that made it (the box was not
/// counted either). A plan of the mean plus six standard deviations of the sum was still
/// passed by the seeds named here, where one partition of a few crossed a class.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn a_layer_filled_over_its_window_stays_within_its_plan() {
    use super::value::Windowed;
    let shapes = [4_666, 5_365, 9_381, 12_406, 18_865, 21_694, 24_948, 32_993]
        .map(|c| (c, 0.001, 0..3))
        .into_iter()
        .chain([
            (3_000, 0.01, 0..3),
            (40_000, 0.01, 0..3),
            (7_000, 0.0001, 0..3),
            (60_000, 0.0001, 0..3),
            (14_928, 0.001, 84..85),
            (13_473, 0.001, 15..16),
            (13_473, 0.001, 51..52),
        ]);
    let slot = W / SLOTS as u64;
    for (capacity, rate, seeds) in shapes {
        for seed in seeds {
            let p = WindowParams {
                seed,
                ..params(capacity, rate, 0)
            };
            let mut f = WindowFilter::new(p, NO_LIMIT).unwrap();
            let layer = f.layers()[0].params();
            let budget = layer.budget();
            assert!(layer.partitions() > 1, "{capacity}");
            for i in 0..budget {
                let t = i * (SLOTS as u64 + 1) / budget * slot;
                f.add(&f.hash(&i.to_le_bytes()), t, NO_LIMIT).unwrap();
            }
            // All but the false positives' few.
            assert!(f.stored(f.time()) * 100 >= budget * 99);
            let bytes = Windowed::new(f).memory_bytes();
            assert!(bytes <= needed(p), "{capacity} {rate} {seed}: {bytes}");
        }
    }
}

/// A filter never takes more than the limit it is made and grown under, whatever the shape
/// and the stream: new items at a varying pace, and items re-added from earlier slots, which
/// layers after the first count in a block of their own (not counted before, nor the value's
/// box: small scaling filters took up to 13% over their limit). Its encoding loads under the
/// same limit.
#[test]
#[cfg_attr(miri, ignore = "too slow under Miri")]
fn a_filter_made_within_a_limit_stays_within_it() {
    use super::value::Windowed;
    let slot = W / SLOTS as u64;
    let shapes = [
        (1, 1),
        (2, 1),
        (5, 1),
        (5, 2),
        (10, 1),
        (3, 3),
        (50, 2),
        (100, 2),
    ]
    .into_iter()
    .chain([(300, 4), (1_000, 2), (1_500, 1), (3_000, 2), (2_000, 0)]);
    for (capacity, expansion) in shapes {
        for rate in [0.01, 0.001] {
            for limit in [
                400, 700, 1_000, 1_500, 2_000, 4_000, 10_000, 30_000, 100_000,
            ] {
                let p = WindowParams {
                    seed: 7,
                    ..params(capacity, rate, expansion)
                };
                let Ok(f) = WindowFilter::new(p, limit) else {
                    assert!(needed(p) > limit);
                    continue;
                };
                let mut w = Windowed::new(f);
                let mut newest = 0u64;
                'stream: for s in 0..40u64 {
                    // Each third item of a slot is one of the slot before last's.
                    let per = capacity * (1 + s % 3) / 2 + 1;
                    for j in 0..per {
                        let i = match j % 3 == 0 && newest > 2 * per {
                            true => newest - 2 * per + j,
                            false => {
                                newest += 1;
                                newest
                            }
                        };
                        let hash = w.filter.hash(&i.to_le_bytes());
                        match w.filter.add(&hash, s * slot + j * slot / per, limit) {
                            Ok(_) | Err(ChainError::Full) => {}
                            Err(ChainError::TooLarge { .. } | ChainError::MostSubFilters) => {
                                break 'stream
                            }
                            Err(e) => panic!("{e:?}"),
                        }
                        let bytes = w.memory_bytes();
                        let what = format!("{capacity}/{expansion} {rate} under {limit}");
                        assert!(bytes <= limit, "{what}: {bytes}, slot {s}");
                    }
                }
                let (header, chunks) = encode(&w.filter);
                let mut loaded = Windowed::from_header(&header, limit).unwrap();
                loaded.load_chunk(0, &chunks.concat()).unwrap();
                assert_eq!(encode(&loaded.filter), (header, chunks));
            }
        }
    }
}

/// A layer that holds refreshed counts keeps them when the layers before it slide out and it
/// becomes the first: the plan of a layer added after it weighs its block. (It was taken for
/// a first layer's, which never holds one: the filter went up to 160 bytes over its limit.)
#[test]
fn a_layer_become_first_keeps_its_refreshed_counts_in_the_plan() {
    use super::value::Windowed;
    let slot = W / SLOTS as u64;
    for capacity in [1u64, 2, 3, 5] {
        // A layer's fill, re-adds of it a slot later (refreshed in the second layer), then
        // after the first layer slid out, new items and the same re-adds again.
        let first: Vec<u64> = (0..capacity + capacity.div_ceil(4) + 1).collect();
        let again = &first[..first.len() - 1];
        let late = 100..100 + capacity;
        let schedule = first
            .iter()
            .map(|&i| (0, i))
            .chain(again.iter().map(|&i| (slot, i)))
            .chain(late.map(|i| (5 * slot, i)))
            .chain(again.iter().map(|&i| (5 * slot, i)));
        let schedule: Vec<(u64, u64)> = schedule.collect();
        let mut third_layers = 0;
        for seed in 0..4 {
            for limit in (400..3_000).step_by(16) {
                let p = WindowParams {
                    seed,
                    ..params(capacity, 0.01, 1)
                };
                let Ok(f) = WindowFilter::new(p, limit) else {
                    continue;
                };
                let mut w = Windowed::new(f);
                for &(t, i) in &schedule {
                    let hash = w.filter.hash(&i.to_le_bytes());
                    if w.filter.add(&hash, t, limit).is_ok() {
                        let bytes = w.memory_bytes();
                        assert!(bytes <= limit, "{capacity} {seed} {limit}: {bytes} at {t}");
                    }
                }
                // A layer added after one that became the first holding refreshed counts.
                let layers = w.filter.layers();
                third_layers += (layers.len() > 1 && layers[0].refreshed_block_bytes() > 0) as u32;
            }
        }
        assert!(third_layers > 0, "{capacity}");
    }
}
