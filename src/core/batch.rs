//! The order in which a batch of items touches memory far larger than the caches.
//!
//! Each item of a Bloom filter batch reads (or writes) a few random cache lines, almost all of
//! them misses in a large filter. The memory system serves many misses at once, but only if the
//! CPU knows the addresses early: a batch goes a window of about `WINDOW_LINES` lines at a
//! time, asking for the lines of all the window's items (software prefetches, computed from
//! the items' hashes) before it touches the first (`in_windows`). The schedule depends on no
//! CPU's tuning: the window is counted in lines, not in a distance that suits one memory
//! system's latency, and it only has to keep the prefetched lines in the first-level cache
//! until their turn comes (bench/floor's DRAM program measures the same schedule, the whole
//! batch asked for first). A window sliding one item at a time, each touch after the prefetch
//! of the item a window ahead, was slower on AMD EPYC: in process, blocked lookups of 100 items
//! on a 0.001 / 200M filter took 19.8 ns an item against 14.7, adds 25.8 against 19.8.
//!
//! Lookups of more than one line go in two rounds per window (`lookups`): the line of every
//! item's first test, then, for the items that passed it, the rest. A non-member is usually
//! refused by its first line, so it costs one line, not k; a member costs its k lines and one
//! more round trip per window. A lookup of one line (the blocked layout) goes like an add.
//!
//! A position that takes work to find (a standard filter's probe: a hash mix and a range
//! reduction) is found once: the prefetch writes it down and the touch reads it back
//! (`in_windows_located`, and both rounds of `lookups`). Computing it twice cost a cached
//! 100-item `BF.MADD` about an eighth of its instructions.

/// Cache lines a window holds: several times the misses an x86 core keeps in flight (about
/// 20), and 8 KiB, a quarter of the smallest first-level data cache of x86 server cores, so
/// that a window's lines are still there when touched; a 100-item batch of one line an item
/// goes in one window. Measured on AMD EPYC in process (`cargo bench --bench core --
/// batch_100_on`), against 64 and 256 lines: the best, or within 6% of it, in every layout.
pub const WINDOW_LINES: usize = 128;

/// Arrays smaller than this are likely in the CPU's caches: batches over them do not prefetch,
/// where the prefetches would only cost instructions.
pub const PREFETCH_MIN_BYTES: u64 = 1 << 20;

/// Items per window when each touches `lines` lines (at least one item).
pub fn window_items(lines: usize) -> usize {
    (WINDOW_LINES / lines.max(1)).max(1)
}

/// Runs `touch` on the items in order, a window of `window_items(lines)` items at a time (each
/// touching about `lines` lines of `memory`), the lines of all the window's items asked for by
/// `prefetch` first. Stops after the first `touch` that returns false.
#[inline(always)]
pub fn in_windows<T, M: ?Sized>(
    items: &[T],
    lines: usize,
    memory: &mut M,
    prefetch: impl Fn(&M, &T),
    mut touch: impl FnMut(&mut M, &T) -> bool,
) {
    for window in items.chunks(window_items(lines)) {
        window.iter().for_each(|item| prefetch(memory, item));
        for item in window {
            if !touch(memory, item) {
                return;
            }
        }
    }
}

/// `in_windows` for items each touching `per_item` (1 to `WINDOW_LINES`) places that take work
/// to find (a standard Bloom filter's probes: a hash mix and a range reduction each): `locate`
/// writes an item's positions and asks for their lines once, and `touch` gets the same
/// positions back instead of computing them again. `touch` is handed nothing but values
/// `locate` wrote (for that item, or for an earlier one where it wrote fewer than `per_item`)
/// or zeros.
#[inline(always)]
pub fn in_windows_located<T, M: ?Sized>(
    items: &[T],
    per_item: usize,
    memory: &mut M,
    locate: impl Fn(&M, &T, &mut [u64]),
    mut touch: impl FnMut(&mut M, &[u64]) -> bool,
) {
    assert!((1..=WINDOW_LINES).contains(&per_item));
    let mut located = [0u64; WINDOW_LINES];
    for window in items.chunks(window_items(per_item)) {
        for (at, item) in located.chunks_mut(per_item).zip(window) {
            locate(memory, item, at);
        }
        for at in located.chunks(per_item).take(window.len()) {
            if !touch(memory, at) {
                return;
            }
        }
    }
}

/// A lookup that `lookups` runs in two rounds: a first test on one line, then the rest. Each
/// round locates an item's lines (asking for them) before testing; what locating found is
/// handed to the test, so that a lookup whose positions take work computes them once. A test
/// is handed nothing but values its `locate_` method wrote for the item, or zeros.
pub trait Lookup<T> {
    /// Lines the rest of the lookup reads.
    fn rest_lines(&self) -> usize;
    /// Positions `locate_rest` writes for `rest` (at most `WINDOW_LINES`; 0 if it keeps none).
    fn rest_positions(&self) -> usize;
    /// Starts loading the first test's line; what `first` needs of it.
    fn locate_first(&self, item: &T) -> u64;
    /// False if the item is certainly absent.
    fn first(&self, item: &T, at: u64) -> bool;
    /// Starts loading the lines of the rest of the lookup, writing their `rest_positions`.
    fn locate_rest(&self, item: &T, at: &mut [u64]);
    /// The rest of the lookup, for an item that passed `first`.
    fn rest(&self, item: &T, at: &[u64]) -> bool;
}

/// The lookup's answer for each item, in order (see the top of this file).
#[inline(always)]
pub fn lookups<T, L: Lookup<T>>(lookup: &L, items: &[T], found: &mut impl FnMut(bool)) {
    let mut passed = [false; WINDOW_LINES];
    let mut first = [0u64; WINDOW_LINES];
    // Indexes into the window of the items that passed their first test.
    let mut survivors = [0u16; WINDOW_LINES];
    let mut rest = [0u64; WINDOW_LINES];
    let per_item = lookup.rest_positions();
    assert!(per_item <= WINDOW_LINES);
    let group_items = window_items(lookup.rest_lines()).min(window_items(per_item));
    for window in items.chunks(WINDOW_LINES) {
        for (at, item) in first.iter_mut().zip(window) {
            *at = lookup.locate_first(item);
        }
        let mut count = 0;
        for (i, item) in window.iter().enumerate() {
            passed[i] = lookup.first(item, first[i]);
            survivors[count] = i as u16;
            count += usize::from(passed[i]);
        }
        for group in survivors[..count].chunks(group_items) {
            for (g, &i) in group.iter().enumerate() {
                let at = &mut rest[g * per_item..(g + 1) * per_item];
                lookup.locate_rest(&window[i as usize], at);
            }
            for (g, &i) in group.iter().enumerate() {
                let at = &rest[g * per_item..(g + 1) * per_item];
                passed[i as usize] = lookup.rest(&window[i as usize], at);
            }
        }
        passed[..window.len()].iter().for_each(|&p| found(p));
    }
}

/// Asks the CPU to start loading the cache line holding `at` (a hint: nothing else happens, and
/// no address can fault).
#[inline(always)]
pub fn prefetch_line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Items are numbers; an item is "present" if divisible by 3, and passes the first test if
    /// even or divisible by 3. Every call is logged.
    struct Logged(RefCell<Vec<(char, u32)>>, usize);

    /// Positions are the item itself (first test) and item + j (rest), checked when tested.
    impl Lookup<u32> for Logged {
        fn rest_lines(&self) -> usize {
            self.1
        }
        fn rest_positions(&self) -> usize {
            self.1.min(WINDOW_LINES)
        }
        fn locate_first(&self, i: &u32) -> u64 {
            self.0.borrow_mut().push(('p', *i));
            u64::from(*i)
        }
        fn first(&self, i: &u32, at: u64) -> bool {
            assert_eq!(at, u64::from(*i));
            self.0.borrow_mut().push(('f', *i));
            i.is_multiple_of(2) || i.is_multiple_of(3)
        }
        fn locate_rest(&self, i: &u32, at: &mut [u64]) {
            assert_eq!(at.len(), self.rest_positions());
            for (j, at) in at.iter_mut().enumerate() {
                *at = u64::from(*i) + j as u64;
            }
            self.0.borrow_mut().push(('q', *i));
        }
        fn rest(&self, i: &u32, at: &[u64]) -> bool {
            assert!(at
                .iter()
                .enumerate()
                .all(|(j, &a)| a == u64::from(*i) + j as u64));
            self.0.borrow_mut().push(('r', *i));
            i.is_multiple_of(3)
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn lookups_answer_in_order_and_prefetch_before_touching() {
        for n in [0u32, 1, 7, 255, 256, 257, 1000] {
            for rest in [0, 1, 10, 64, 300] {
                let items: Vec<u32> = (0..n).collect();
                let l = Logged(RefCell::new(Vec::new()), rest);
                let mut got = Vec::new();
                lookups(&l, &items, &mut |f| got.push(f));
                let want: Vec<bool> = items.iter().map(|i| i.is_multiple_of(3)).collect();
                assert_eq!(got, want, "n={n} rest={rest}");
                let log = l.0.into_inner();
                // Every touch follows its prefetch, and the rest only for items that passed.
                for (at, &(what, i)) in log.iter().enumerate() {
                    let before = |p: char| log[..at].contains(&(p, i));
                    match what {
                        'f' => assert!(before('p')),
                        'r' => assert!(
                            before('q')
                                && before('f')
                                && (i.is_multiple_of(2) || i.is_multiple_of(3))
                        ),
                        _ => {}
                    }
                }
                // A window's first lines are all asked for before any is read.
                if n >= 2 {
                    let first_touch = log.iter().position(|e| e.0 == 'f').unwrap();
                    let asked = log[..first_touch].len();
                    assert_eq!(asked, (n as usize).min(WINDOW_LINES));
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn located_windows_hand_each_touch_its_own_positions() {
        for per_item in [1, 3, 11, 21, 32, 63, 64] {
            for n in [0u64, 1, 5, 64, 100, 257] {
                let items: Vec<u64> = (0..n).collect();
                let located = RefCell::new(Vec::new());
                let mut touched = Vec::new();
                let locate = |_: &Vec<u64>, &i: &u64, at: &mut [u64]| {
                    assert_eq!(at.len(), per_item);
                    for (j, at) in at.iter_mut().enumerate() {
                        *at = i * 1000 + j as u64;
                    }
                    located.borrow_mut().push(i);
                };
                let touch = |t: &mut Vec<u64>, at: &[u64]| {
                    let i = at[0] / 1000;
                    assert!(at
                        .iter()
                        .enumerate()
                        .all(|(j, &a)| a == i * 1000 + j as u64));
                    // Located before touched, and at most a window of items ahead of it.
                    let located = located.borrow();
                    assert!(located.contains(&i));
                    assert!(located.len() as u64 <= i + 1 + window_items(per_item) as u64);
                    t.push(i);
                    i != 70
                };
                in_windows_located(&items, per_item, &mut touched, locate, touch);
                let want: Vec<u64> = (0..n.min(71)).collect();
                assert_eq!(touched, want, "per_item={per_item} n={n}");
            }
        }
    }

    #[test]
    fn windows_are_asked_for_before_their_touches_and_stop_on_false() {
        let items: Vec<u32> = (0..100).collect();
        let log = RefCell::new(Vec::new());
        let mut touched = 0;
        in_windows(
            &items,
            11,
            &mut touched,
            |_, &i| log.borrow_mut().push(('p', i)),
            |touched, &i| {
                *touched += 1;
                log.borrow_mut().push(('t', i));
                i != 60
            },
        );
        assert_eq!(touched, 61);
        let log = log.into_inner();
        let ahead = window_items(11) as u32;
        assert_eq!(ahead as usize, WINDOW_LINES / 11);
        // Each window's items asked for, then touched, up to the touch that said stop.
        let mut want: Vec<(char, u32)> = Vec::new();
        for start in (0..=60).step_by(ahead as usize) {
            let end = (start + ahead).min(100);
            want.extend((start..end).map(|i| ('p', i)));
            want.extend((start..end.min(61)).map(|i| ('t', i)));
        }
        assert_eq!(log, want);
        assert_eq!(window_items(0), WINDOW_LINES);
        assert_eq!(window_items(10_000), 1);
    }
}
