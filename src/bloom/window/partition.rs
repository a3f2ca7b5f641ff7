//! One partition of a windowed layer (pure): the fingerprints of the items that hash to it,
//! one Elias–Fano set (`core/ef.rs`) per generation, for the `GENS` newest time slots.
//!
//! In memory a partition is its newest slot's id (`head`), the item count of each of the
//! `GENS` generations (oldest first: slot `head − GENS + 1 + i` at index i) and one block of
//! words holding their streams back to back, oldest first, each starting at a word boundary
//! and `⌈ef::Shape::new(count, U).bits() / 64⌉` words long (an empty set takes none). Only the
//! newest generation takes adds, and it is last, so an add shifts its stream alone: O(items
//! of one generation of one partition), a few hundred by the layer's sizing.
//!
//! Partitions move forward lazily: a write that touches one whose `head` is behind the
//! layer's drops the generations that slid out (one move of the words that stay) and opens
//! empty ones. A lookup never moves anything; it skips the generations that are no longer
//! live. The block grows and shrinks in the allocator's size classes (`alloc::size_class`),
//! so its length is what it costs; the words past the streams are zero. It is a boxed slice
//! and the streams' length a u32 beside the counts, not a `Vec`: the record takes 48 bytes
//! instead of 56 in a 64-byte class, and most windowed keys have one.

use crate::core::alloc::size_class;
use crate::core::batch::prefetch_line;
use crate::core::defrag::Defrag;
use crate::core::ef;

/// Time slots a window spans: an item is kept for its window plus at most one slot
/// (slack 1/SLOTS = 25% of the window).
pub const SLOTS: usize = 4;
/// Generations a partition keeps: the `SLOTS` slots a window spans and the one it started in.
pub const GENS: usize = SLOTS + 1;

/// Slots that slide out when counts of slot `from` move to slot `to`: at most GENS, 0 when
/// `to` is not ahead.
pub fn shift(from: u64, to: u64) -> usize {
    to.saturating_sub(from).min(GENS as u64) as usize
}

/// Per-generation `counts` moved `shift` (≤ GENS) slots forward: the oldest slide out, the
/// newest are 0.
pub fn shifted<T: Copy + Default>(counts: &[T; GENS], shift: usize) -> [T; GENS] {
    let mut out = [T::default(); GENS];
    out[..GENS - shift].copy_from_slice(&counts[shift..]);
    out
}

/// Why an add could not be done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

#[derive(Debug, Default)]
pub struct Partition {
    /// The slot of the newest generation held.
    head: u64,
    /// Items of each generation, oldest first.
    counts: [u32; GENS],
    /// Words the streams take, from the block's start.
    len: u32,
    /// The generations' streams, oldest first, then zeros to the block's end.
    words: Box<[u64]>,
}

/// Equal if they hold the same: the blocks' unused tails may differ.
impl PartialEq for Partition {
    fn eq(&self, other: &Self) -> bool {
        (self.head, self.counts) == (other.head, other.counts) && self.words() == other.words()
    }
}

impl Eq for Partition {}

/// Words of the stream of `count` fingerprints below `universe`.
#[inline]
pub fn stream_words(count: u32, universe: u64) -> usize {
    ef::Shape::new(count as u64, universe).bits().div_ceil(64) as usize
}

/// Bytes a block of `words` words is given by the allocator.
fn bytes_of(words: usize) -> u64 {
    size_class(words as u64 * 8)
}

impl Partition {
    /// A partition made of its parts (counts oldest first, the streams back to back), which
    /// the caller has validated (`validate`). The codec allocates the vector to its length,
    /// so that it becomes the block in place (a longer one would be shrunk by `realloc`).
    pub fn from_parts(head: u64, counts: [u32; GENS], words: Vec<u64>) -> Self {
        Self {
            head,
            counts,
            len: words.len() as u32,
            words: words.into_boxed_slice(),
        }
    }

    pub fn head(&self) -> u64 {
        self.head
    }

    pub fn counts(&self) -> &[u32; GENS] {
        &self.counts
    }

    /// The streams.
    pub fn words(&self) -> &[u64] {
        &self.words[..self.len as usize]
    }

    /// Bytes its allocation takes.
    pub fn memory_bytes(&self) -> u64 {
        bytes_of(self.words.len())
    }

    /// Counts and streams as of slot `head` (≥ the partition's): what it would hold after
    /// moving there, without moving (what the encoding writes).
    pub fn view_at(&self, head: u64, universe: u64) -> ([u32; GENS], &[u64]) {
        let shift = shift(self.head, head);
        let counts = shifted(&self.counts, shift);
        let dropped: usize = self.counts[..shift]
            .iter()
            .map(|&c| stream_words(c, universe))
            .sum();
        (counts, &self.words()[dropped..])
    }

    /// The newest live slot whose generation holds fingerprint `fp`, looking at generations
    /// of slots ≥ `oldest`.
    #[inline]
    pub fn find(&self, universe: u64, fp: u64, oldest: u64) -> Option<u64> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has the instruction.
            return unsafe { self.find_with_popcnt(universe, fp, oldest) };
        }
        self.find_portable(universe, fp, oldest)
    }

    /// `find` compiled for the POPCNT instruction: counting the zeros before a bucket is most
    /// of a lookup's work, and the x86-64 baseline Rust targets has no such instruction.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn find_with_popcnt(&self, universe: u64, fp: u64, oldest: u64) -> Option<u64> {
        self.find_portable(universe, fp, oldest)
    }

    #[inline(always)]
    fn find_portable(&self, universe: u64, fp: u64, oldest: u64) -> Option<u64> {
        // The live generations' streams, newest first; the lines their lookups start on are
        // fetched first, so that the generations' cache misses overlap.
        let mut gens = [(0usize, 0usize, ef::Shape::new(0, 1), 0u64); GENS];
        let (mut live, mut end) = (0, self.len as usize);
        for i in (0..GENS).rev() {
            let Some(slot) = (self.head + i as u64).checked_sub(GENS as u64 - 1) else {
                break;
            };
            if slot < oldest {
                break;
            }
            let count = self.counts[i] as u64;
            if count == 0 {
                continue;
            }
            let shape = ef::Shape::new(count, universe);
            let start = end - shape.bits().div_ceil(64) as usize;
            // Bucket fp >> l starts near its share of the upper bits.
            let bucket = fp >> shape.l;
            let near = count * shape.l as u64 + bucket + bucket * count / shape.buckets;
            if let Some(word) = self.words[start..end].get((near / 64) as usize) {
                prefetch_line(word);
            }
            gens[live] = (start, end, shape, slot);
            live += 1;
            end = start;
        }
        gens[..live]
            .iter()
            .find(|(start, end, shape, _)| stream_holds(&self.words[*start..*end], *shape, fp))
            .map(|g| g.3)
    }
    /// Moves to slot `head` if it is ahead: generations older than `head − SLOTS` are
    /// dropped, new ones open empty. Returns the change in allocated bytes.
    pub fn advance(&mut self, head: u64, universe: u64) -> i64 {
        if head <= self.head {
            return 0;
        }
        let before = self.memory_bytes();
        let shift = shift(self.head, head);
        let dropped: usize = self.counts[..shift]
            .iter()
            .map(|&c| stream_words(c, universe))
            .sum();
        self.counts = shifted(&self.counts, shift);
        self.head = head;
        if dropped > 0 {
            self.cut(0..dropped);
        }
        self.memory_bytes() as i64 - before as i64
    }

    /// Removes the words of `range` from the streams, moving those after it down, and gives
    /// back the block beyond the size class of what is left.
    fn cut(&mut self, range: std::ops::Range<usize>) {
        let (len, gone) = (self.len as usize, range.len());
        self.words.copy_within(range.end..len, range.start);
        self.words[len - gone..len].fill(0);
        self.len -= gone as u32;
        let fit = (bytes_of(self.len as usize) / 8) as usize;
        if self.len == 0 {
            self.words = Box::default();
        } else if fit < self.words.len() {
            let mut words = std::mem::take(&mut self.words).into_vec();
            words.truncate(fit);
            self.words = words.into_boxed_slice();
        }
    }

    /// Grows the block to the size class of `len` words, its new words zero (`realloc`, as a
    /// vector grows). Refused, it changes nothing.
    fn grow(&mut self, len: usize) -> Result<(), OutOfMemory> {
        let target = (bytes_of(len) / 8) as usize;
        let mut words = std::mem::take(&mut self.words).into_vec();
        let grown = words.try_reserve_exact(target - words.len());
        if grown.is_ok() {
            words.resize(target, 0);
        }
        // The vector's capacity is its length either way: boxed again without a copy.
        self.words = words.into_boxed_slice();
        grown.map_err(|_| OutOfMemory)
    }

    /// Adds `fp` to the newest generation (the caller has moved the partition to its slot and
    /// found `fp` absent from it). Returns the change in allocated bytes.
    pub fn insert(&mut self, universe: u64, fp: u64) -> Result<i64, OutOfMemory> {
        let before = self.memory_bytes();
        let count = self.counts[GENS - 1];
        let old = ef::Shape::new(count as u64, universe);
        let new = ef::Shape::new(count as u64 + 1, universe);
        let end = self.len as usize;
        let start = end - old.bits().div_ceil(64) as usize;
        let len = start + new.bits().div_ceil(64) as usize;
        let len32 = u32::try_from(len).map_err(|_| OutOfMemory)?;
        // The values of a set rewritten afresh, asked for before anything changes.
        let mut values = Vec::new();
        let rewritten = count == 0 || new.l != old.l;
        if rewritten {
            values
                .try_reserve_exact(count as usize + 1)
                .map_err(|_| OutOfMemory)?;
        }
        if len > self.words.len() {
            // Grow to a whole size class: the allocator hands out that much anyway.
            self.grow(len)?;
        }
        if rewritten {
            // The low-bit width changes: write the set afresh.
            self.insert_all(universe, std::iter::once(fp), &mut values);
        } else {
            let probe = ef::find(&self.words[start..end], 0, old, fp);
            debug_assert!(!probe.found);
            ef::insert(&mut self.words[start..len], 0, old, probe.rank, fp);
            self.len = len32;
            self.counts[GENS - 1] = count + 1;
        }
        Ok(self.memory_bytes() as i64 - before as i64)
    }

    /// Where the newest generation's stream starts, and the words it takes with `count`
    /// fingerprints.
    fn newest_range(&self, universe: u64, count: u32) -> (usize, usize) {
        let held = stream_words(self.counts[GENS - 1], universe);
        (self.len as usize - held, stream_words(count, universe))
    }

    /// Makes room for `added` more fingerprints in the newest generation (the caller has
    /// moved the partition to its slot): the block grows to the size class of what it will
    /// hold, as `insert`s one at a time grow it. Returns the change in allocated bytes;
    /// refused, it changes nothing.
    pub fn make_room(&mut self, universe: u64, added: u32) -> Result<i64, OutOfMemory> {
        let before = self.memory_bytes();
        let count = self.counts[GENS - 1]
            .checked_add(added)
            .ok_or(OutOfMemory)?;
        let (start, words) = self.newest_range(universe, count);
        let len = start + words;
        u32::try_from(len).map_err(|_| OutOfMemory)?;
        if len > self.words.len() {
            self.grow(len)?;
        }
        Ok(self.memory_bytes() as i64 - before as i64)
    }

    /// Adds `fps` (increasing, none in the newest generation) to the newest generation, whose
    /// set is written afresh once: the set `insert`s one at a time reach. The block has room
    /// (`make_room`), and `values` room for the whole set.
    pub fn insert_all(
        &mut self,
        universe: u64,
        fps: impl Iterator<Item = u64>,
        values: &mut Vec<u64>,
    ) {
        let count = self.counts[GENS - 1];
        let (start, old_words) = self.newest_range(universe, count);
        let end = start + old_words;
        let old = ef::Shape::new(count as u64, universe);
        values.clear();
        // Driven by the held values' `for_each`, the stream's fast decoding loop.
        let mut fps = fps.peekable();
        ef::iter(&self.words[start..end], 0, old).for_each(|v| {
            while let Some(fp) = fps.next_if(|&fp| fp < v) {
                values.push(fp);
            }
            values.push(v);
        });
        values.extend(fps);
        let total = values.len();
        let new = ef::Shape::new(total as u64, universe);
        let len = start + new.bits().div_ceil(64) as usize;
        self.words[start..end.max(len)].fill(0);
        ef::write(&mut self.words[start..len], 0, new, values.iter().copied());
        self.len = len as u32;
        self.counts[GENS - 1] = total as u32;
    }

    /// Removes `fp` from the generation of `slot`, older than the newest (the caller has
    /// moved the partition to its slot and added `fp` to the newest generation: the item
    /// moves forward). Returns the change in allocated bytes, or None if that generation does
    /// not hold `fp` or the memory to rewrite its set could not be had (then the copy stays,
    /// which loses nothing: it only lives longer than needed).
    pub fn remove(&mut self, universe: u64, slot: u64, fp: u64) -> Option<i64> {
        let newest = GENS as u64 - 1;
        let i = (slot + newest)
            .checked_sub(self.head)
            .filter(|&i| i < newest)? as usize;
        let count = self.counts[i];
        let start: usize = self.counts[..i]
            .iter()
            .map(|&c| stream_words(c, universe))
            .sum();
        let old = ef::Shape::new(count as u64, universe);
        let end = start + old.bits().div_ceil(64) as usize;
        let probe = match count {
            0 => return None,
            _ => ef::find(&self.words[start..end], 0, old, fp),
        };
        if !probe.found {
            return None;
        }
        let before = self.memory_bytes();
        // A set of one value fewer never takes more bits, so it is rewritten in place (its
        // tail shifted down, or the whole set when its low bits change) and the words after
        // it move down.
        let new = ef::Shape::new(count as u64 - 1, universe);
        let len = start + new.bits().div_ceil(64) as usize;
        if new.l == old.l {
            ef::remove(&mut self.words[start..end], 0, old, probe.rank, fp);
        } else {
            let mut values = Vec::new();
            values.try_reserve_exact(count as usize - 1).ok()?;
            values.extend(ef::iter(&self.words[start..end], 0, old).filter(|&v| v != fp));
            self.words[start..end].fill(0);
            ef::write(&mut self.words[start..len], 0, new, values);
        }
        self.cut(len..end);
        self.counts[i] = count - 1;
        Some(self.memory_bytes() as i64 - before as i64)
    }

    /// Visits its block (`core::defrag`).
    pub fn defrag(&mut self, d: &mut Defrag) {
        d.boxed_slice(&mut self.words);
    }

    /// A deep copy, or None if the memory could not be had.
    pub fn try_clone(&self) -> Option<Self> {
        let mut words = Vec::new();
        words.try_reserve_exact(self.words.len()).ok()?;
        words.extend_from_slice(&self.words);
        Some(Self {
            head: self.head,
            counts: self.counts,
            len: self.len,
            words: words.into_boxed_slice(),
        })
    }
}

/// Whether the Elias–Fano stream (`ef.rs`'s layout) of `shape` holds `v` (below its universe).
/// As `ef::find`, but counting the zeros before `v`'s bucket from the upper bits' start word
/// by word (a generation's upper bits are a few words), inlined into the POPCNT build.
#[inline(always)]
fn stream_holds(stream: &[u64], shape: ef::Shape, v: u64) -> bool {
    let (l, k) = (shape.l, shape.k);
    let (high, low) = (v >> l, v & !(!0u64 << l));
    let upper = k * l as u64;
    // Bucket `high` starts after zero number high − 1 (from 0) of the upper bits; a valid
    // stream has `buckets` > high zeros there.
    let mut position = match high {
        0 => 0,
        h => match ef::after_zero(stream, upper, 0, h - 1) {
            Some(start) => start,
            None => return false,
        },
    };
    // The bucket's values, in order, as `ef::find_from` reads them (its bounds on a rank
    // cost a lookup here a few percent).
    let mut rank = position - high;
    while rank < k {
        let at = upper + position;
        if stream[(at / 64) as usize] >> (at % 64) & 1 == 0 {
            return false;
        }
        let stored = ef::read_bits(stream, rank * l as u64, l);
        if stored >= low {
            return stored == low;
        }
        position += 1;
        rank += 1;
    }
    false
}

/// Checks the streams of a partition read from outside: `words` is exactly the streams of
/// `counts` fingerprints below `universe`, each a strictly increasing set, bits past each
/// stream's end zero (the form the encoder writes, so a value re-encodes to its bytes), at
/// most `u32::MAX` words in all.
pub fn validate(counts: &[u32; GENS], words: &[u64], universe: u64) -> Result<(), &'static str> {
    if u32::try_from(words.len()).is_err() {
        return Err("partition too large");
    }
    let mut start = 0usize;
    for &count in counts {
        if count as u64 > universe {
            return Err("generation larger than its universe");
        }
        let shape = ef::Shape::new(count as u64, universe);
        let len = shape.bits().div_ceil(64) as usize;
        let stream = words
            .get(start..start + len)
            .ok_or("partition shorter than its counts")?;
        let bits = shape.bits();
        if !bits.is_multiple_of(64) && stream.last().is_some_and(|w| w >> (bits % 64) != 0) {
            return Err("bits past a stream's end");
        }
        ef::validate(stream, 0, shape, universe)?;
        start += len;
    }
    if start != words.len() {
        return Err("partition longer than its counts");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Adds over moving slots match a model (fingerprint → its slot): a fingerprint found
        /// in an older generation moves to the newest, so each is held once; the streams stay
        /// valid and exactly sized.
        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn matches_a_model(
            ops in proptest::collection::vec((0u64..3, 0u64..500), 1..400),
            universe in 1u64..2_000,
        ) {
            let mut part = Partition::default();
            let mut model: BTreeMap<u64, u64> = BTreeMap::new();
            let mut slot = 0u64;
            let mut bytes = 0i64;
            for (step, v) in ops {
                if step == 2 {
                    slot += 1 + v % 7;
                }
                bytes += part.advance(slot, universe);
                let fp = v % universe;
                let oldest = slot.saturating_sub(SLOTS as u64);
                model.retain(|_, s| *s >= oldest);
                let want = model.get(&fp).copied();
                prop_assert_eq!(part.find(universe, fp, oldest), want);
                if want != Some(slot) {
                    bytes += part.insert(universe, fp).unwrap();
                    if let Some(from) = want {
                        bytes += part.remove(universe, from, fp).unwrap();
                    }
                    model.insert(fp, slot);
                }
                prop_assert_eq!(bytes as u64, part.memory_bytes());
                let (counts, words) = part.view_at(slot, universe);
                prop_assert!(validate(&counts, words, universe).is_ok());
                let total: u32 = counts.iter().sum();
                prop_assert_eq!(total as usize, model.len());
                // Removing from the newest generation, or what a generation does not hold,
                // changes nothing.
                prop_assert_eq!(part.remove(universe, slot, fp), None);
                let other = (fp + 1) % universe;
                if !model.contains_key(&other) {
                    for s in oldest..slot {
                        prop_assert_eq!(part.remove(universe, s, other), None);
                    }
                }
            }
        }

        /// Hostile parts are refused or valid, never a panic.
        #[test]
        fn validate_never_panics(
            counts in proptest::array::uniform5(0u32..40),
            words in proptest::collection::vec(any::<u64>(), 0..40),
            universe in 1u64..10_000,
        ) {
            let _ = validate(&counts, &words, universe);
        }
    }

    #[test]
    fn view_at_a_later_slot_drops_old_generations() {
        let u = 1000;
        let mut part = Partition::default();
        for slot in 0..3u64 {
            part.advance(slot, u);
            part.insert(u, 10 + slot).unwrap();
        }
        let (counts, words) = part.view_at(7, u);
        assert_eq!(counts, [0, 0, 0, 0, 0]);
        assert!(words.is_empty());
        let (counts, words) = part.view_at(5, u);
        assert_eq!(counts, [1, 1, 0, 0, 0]);
        assert!(validate(&counts, words, u).is_ok());
        assert_eq!(part.find(u, 12, 1), Some(2));
        assert_eq!(part.find(u, 10, 1), None);
        assert_eq!(part.find(u, 10, 0), Some(0));
        part.advance(9, u);
        assert_eq!(part.memory_bytes(), 0);
        assert_eq!(part.counts(), &[0; GENS]);
    }
}
