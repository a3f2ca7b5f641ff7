//! `Body`: what a chain (`chain.rs`) owns, and the one place that knows how it is laid out:
//! one exactly sized block of u64 words holding each sub-filter's item count and the sparse
//! sets, and apart from it the bit arrays. The chain sees typed views of its sub-filters
//! ([`SetView`], and each bit array with its parameters), never the words.
//!
//! Data, in order: the sub-filters' item counts, one word each, oldest first; then the sparse
//! sub-filters' regions (`sparse.rs`), oldest first. A region's length follows from its set's
//! shape while it fills, and is in its first word once it is full (`frozen.rs`), so a set is
//! found by walking the regions before it; the newest sub-filter's region, the only one that
//! changes, ends the data. The bit arrays are a list in the order they were added.
//!
//! A small key's whole value is the box Redis holds (the chain: an `Arc` of its shared
//! parameters and this body's pointer, 16 bytes) and this block; every separate allocation
//! would pay its own size-class rounding, and a `Vec` its spare capacity, which for keys of a
//! hundred bytes matter. So the block is a size-class block (`core::block`): its data inline,
//! its size the allocator's class for it, so that a set that grows by a word reallocates only
//! when it crosses into the next class. Bit arrays are large and never move: they live in a
//! `Vec` boxed apart, reached through the block's second word (0 when there are none), so a
//! chain of sparse sets pays nothing for them.
//!
//! Block: word 0 its header (the data length n above the block's own bits), word 1 the bit
//! arrays' box (an exposed address, or 0), word 2 the chain's hash seed (`hashing.rs`; in the
//! block, not beside its pointer in the chain's box, where it would move the box from the 16-
//! to the 32-byte size class), words 3..3+n the data. Allocation is fallible: a
//! failure is an error, never an abort.

use super::filter::{BitArray, FilterParams, SizeError};
use super::params::{ChainParams, SparseParams, SubParams};
use super::sparse::{self, Shape};
use crate::core::alloc::{size_class, try_box};
use crate::core::block::{Block, HEAD_FREE_SHIFT};
use crate::core::defrag::Defrag;
use crate::core::hashing::ItemHash;
use std::ptr::NonNull;

/// Words before the data: the header, the bit arrays' box and the seed.
const HEAD: usize = 3;
/// The seed's word.
const SEED: usize = 2;

pub struct Body {
    block: Block,
}

/// A sparse sub-filter as the body holds it.
pub struct SetView<'a> {
    pub params: &'a SparseParams,
    /// The shape of its set (of `params.shape(items)`), worked out once per view: a lookup
    /// needs it to find the region and again to read it.
    shape: Shape,
    full: bool,
    /// Its region: index and stream while it fills, the frozen form when full.
    pub region: &'a [u64],
}

impl SetView<'_> {
    /// Whether the set holds the item's fingerprint.
    #[inline(always)]
    pub fn holds(&self, hash: &ItemHash) -> bool {
        let v = sparse::fingerprint(hash, self.params.universe);
        sparse::holds(self.region, &self.shape, self.full, v)
    }

    /// Its stream (its encoding), or None if the memory could not be had.
    pub fn stream(&self) -> Option<Vec<u64>> {
        sparse::stream_of(self.region, &self.shape, self.full)
    }
}

/// The sparse sub-filters of a body, oldest first ([`Body::sets`]). A type of its own rather
/// than a closure's map so that its step inlines into the lookups that walk it: a chain's
/// lookup is compiled for POPCNT, and a step called apart would be compiled without it.
pub struct Sets<'a> {
    /// The sub-filters' item counts (and the data after them).
    items: &'a [u64],
    /// The regions not yet visited.
    regions: &'a [u64],
    params: super::params::Sparse<'a>,
}

impl<'a> Iterator for Sets<'a> {
    type Item = SetView<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<SetView<'a>> {
        let (i, p) = self.params.next()?;
        let items = self.items[i];
        let (shape, full) = (p.shape(items), items == p.capacity);
        let len = sparse::region_len(self.regions, &shape, full);
        let (region, rest) = self.regions.split_at(len);
        self.regions = rest;
        Some(SetView {
            params: p,
            shape,
            full,
            region,
        })
    }
}

/// Bytes the block and the bit arrays' list of a chain of these sub-filters holding these
/// items take, by their size classes, before allocating (`Body::memory_bytes`'s sum; a
/// large bit array by its segments, `words.rs`; a blocked bit array that needs room to align
/// is counted without it).
pub fn planned_bytes(subs: &[SubParams], items: &[u64]) -> Option<u64> {
    let mut block = HEAD as u64 + subs.len() as u64;
    let (mut arrays, mut bits) = (0u64, 0u64);
    for (sub, n) in subs.iter().zip(items) {
        match sub {
            SubParams::Bits(p) => {
                let words = usize::try_from(p.words()).ok()?;
                arrays = arrays.checked_add(super::words::planned_bytes(words))?;
                bits += 1;
            }
            SubParams::Sparse(_) => block += sub.region_words(*n) as u64,
        }
    }
    let mut total = size_class(block * 8);
    if bits > 0 {
        total += size_class(std::mem::size_of::<Vec<BitArray>>() as u64)
            + size_class(bits.checked_mul(std::mem::size_of::<BitArray>() as u64)?);
    }
    total.checked_add(arrays)
}

/// The sparse sub-filters of `subs` as (shape, full, stream), their streams read one after
/// the other from `streams`.
fn sets_of<'a>(
    subs: &'a [(SubParams, u64)],
    streams: &'a [u64],
) -> impl Iterator<Item = (Shape, bool, &'a [u64])> {
    let mut read = 0;
    subs.iter().filter_map(move |(sub, n)| {
        let SubParams::Sparse(p) = sub else {
            return None;
        };
        let shape = p.shape(*n);
        let stream = &streams[read..read + shape.stream_words()];
        read += shape.stream_words();
        Some((shape, *n == p.capacity, stream))
    })
}

impl Body {
    /// The body of a chain hashing with `seed`, of sub-filters each with its items, the sparse
    /// ones' streams one after the other in `streams` (valid, `sparse::is_valid`), the bit
    /// arrays zero; its block made with room for `room` more data words, which the data grows
    /// into without moving while it stays in the block's size class (a create by an add: its
    /// first items' region).
    pub fn from_parts(
        seed: u64,
        subs: &[(SubParams, u64)],
        streams: &[u64],
        room: usize,
    ) -> Result<Self, SizeError> {
        let count = subs.len();
        // A full set's region (frozen.rs) is sized by its values: built first. The others
        // are sized by their shapes, and written into the block.
        let mut frozen = Vec::new();
        let mut words = 0;
        for (shape, full, stream) in sets_of(subs, streams) {
            words += match full {
                true => {
                    let region = sparse::frozen_region_of(stream, &shape);
                    frozen.push(region.ok_or(SizeError::OutOfMemory)?);
                    frozen.last().map_or(0, Vec::len)
                }
                false => shape.region_words(),
            };
        }
        let mut body = Body::zeroed(count + words, room).ok_or(SizeError::OutOfMemory)?;
        body.block.words_mut()[SEED] = seed;
        let data = body.data_mut();
        for (word, (_, n)) in data.iter_mut().zip(subs) {
            *word = *n;
        }
        let mut at = count;
        let mut frozen = frozen.iter();
        for (shape, full, stream) in sets_of(subs, streams) {
            at += match full {
                true => {
                    let region = frozen.next().map_or(&[][..], Vec::as_slice);
                    data[at..at + region.len()].copy_from_slice(region);
                    region.len()
                }
                false => {
                    let words = shape.region_words();
                    sparse::load(&mut data[at..at + words], stream, &shape);
                    words
                }
            };
        }
        for (sub, _) in subs {
            if let SubParams::Bits(p) = sub {
                body.push_bits(BitArray::new(p)?)
                    .map_err(|_| SizeError::OutOfMemory)?;
            }
        }
        Ok(body)
    }

    /// The chain's hash seed.
    #[inline]
    pub fn seed(&self) -> u64 {
        // SAFETY: a body's block always holds its HEAD words.
        let head = unsafe { self.block.prefix(HEAD) };
        head[SEED]
    }

    /// Items in each sub-filter, oldest first.
    #[inline]
    pub fn items(&self, params: &ChainParams) -> &[u64] {
        &self.data()[..params.subs.len()]
    }

    #[inline]
    pub fn items_mut(&mut self, params: &ChainParams) -> &mut [u64] {
        &mut self.data_mut()[..params.subs.len()]
    }

    /// The bit arrays with their parameters, oldest first.
    #[inline]
    pub fn arrays<'a>(
        &'a self,
        params: &'a ChainParams,
    ) -> impl Iterator<Item = (&'a FilterParams, &'a BitArray)> {
        params.bits().iter().zip(self.bits())
    }

    pub fn arrays_mut<'a>(
        &'a mut self,
        params: &'a ChainParams,
    ) -> impl Iterator<Item = (&'a FilterParams, &'a mut BitArray)> {
        params.bits().iter().zip(self.bits_mut().iter_mut())
    }

    /// The sparse sub-filters, oldest first.
    #[inline(always)]
    pub fn sets<'a>(&'a self, params: &'a ChainParams) -> Sets<'a> {
        let data = self.data();
        Sets {
            items: data,
            regions: &data[params.subs.len()..],
            params: params.sparse(),
        }
    }

    /// Where the region of the newest sub-filter, a sparse set of `n` items that is not full,
    /// starts: it ends the data.
    fn last_set_start(&self, p: &SparseParams, n: u64) -> usize {
        self.data().len() - p.shape(n).region_words()
    }

    /// Adds a fingerprint to the newest sub-filter, a sparse set with room (`last` its place):
    /// whether it was new there (its count is then one more). A set that cannot grow refuses
    /// (out of memory), changing nothing.
    #[inline(never)]
    pub fn add_to_last_set(
        &mut self,
        last: usize,
        p: &SparseParams,
        v: u64,
    ) -> Result<bool, SizeError> {
        let n = self.data()[last];
        let shape = p.shape(n);
        let at = self.last_set_start(p, n);
        let words = shape.region_words();
        let pending = match sparse::prepare_add(&self.data()[at..], &shape, p.universe, v) {
            None => return Err(SizeError::OutOfMemory),
            Some(sparse::Add::Present) => return Ok(false),
            Some(sparse::Add::Absent(pending)) => pending,
        };
        let grown = Shape::new(n + 1, p.universe);
        if n + 1 < p.capacity {
            if !self.resize(at, words, grown.region_words()) {
                return Err(SizeError::OutOfMemory);
            }
            sparse::insert(&mut self.data_mut()[at..], &shape, p.universe, pending);
        } else {
            // Full now: into the lookup form (frozen.rs), built apart so that a failure
            // changes nothing.
            let mut region = Vec::new();
            region
                .try_reserve_exact(grown.region_words())
                .map_err(|_| SizeError::OutOfMemory)?;
            region.extend_from_slice(&self.data()[at..]);
            region.resize(grown.region_words(), 0);
            sparse::insert(&mut region, &shape, p.universe, pending);
            let frozen = sparse::freeze(&region, &grown).ok_or(SizeError::OutOfMemory)?;
            if !self.resize(at, words, frozen.len()) {
                return Err(SizeError::OutOfMemory);
            }
            self.data_mut()[at..].copy_from_slice(&frozen);
        }
        self.data_mut()[last] += 1;
        Ok(true)
    }

    /// Adds the fingerprints `vs` to the newest sub-filter, a sparse set that takes them all
    /// without filling up, re-coding its set once (`sparse::add_all`): whether each was new.
    /// None, with nothing changed, if the memory could not be had.
    pub fn add_all_to_last_set(
        &mut self,
        last: usize,
        p: &SparseParams,
        vs: &[u64],
    ) -> Option<Vec<bool>> {
        let n = self.data()[last];
        let shape = p.shape(n);
        let at = self.last_set_start(p, n);
        let (new, region, grown) = sparse::add_all(&self.data()[at..], &shape, p.universe, vs)?;
        if !self.resize(at, shape.region_words(), grown.region_words()) {
            return None;
        }
        let data = self.data_mut();
        data[at..].copy_from_slice(&region);
        data[last] = grown.len();
        Some(new)
    }

    /// Adds an empty sub-filter after the `count` there are: its item count, and its bit array
    /// if it has one (a new sparse set has no region yet). Nothing changes on an error.
    pub fn push(&mut self, count: usize, sub: &SubParams) -> Result<(), SizeError> {
        if let SubParams::Bits(p) = sub {
            self.push_bits(BitArray::new(p)?)
                .map_err(|_| SizeError::OutOfMemory)?;
        }
        if !self.resize(count, 0, 1) {
            if let SubParams::Bits(_) = sub {
                self.pop_bits();
            }
            return Err(SizeError::OutOfMemory);
        }
        Ok(())
    }

    /// A block of `len` zero data words and no bit arrays, its size class that of `len` +
    /// `room` words, or None if the allocator refuses.
    fn zeroed(len: usize, room: usize) -> Option<Self> {
        let words = len.checked_add(room)?.checked_add(HEAD)?;
        let mut block = Block::zeroed(words as u64)?;
        block.set_head((len as u64) << HEAD_FREE_SHIFT);
        Some(Self { block })
    }

    #[inline]
    fn len(&self) -> usize {
        (self.block.head() >> HEAD_FREE_SHIFT) as usize
    }

    /// The data words.
    #[inline]
    fn data(&self) -> &[u64] {
        // SAFETY: `zeroed` and `resize` keep HEAD + len within the block.
        let words = unsafe { self.block.prefix(HEAD + self.len()) };
        &words[HEAD..]
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u64] {
        let len = self.len();
        // SAFETY: as in `data`.
        let words = unsafe { self.block.prefix_mut(HEAD + len) };
        &mut words[HEAD..]
    }

    /// Makes the `old` data words at `at` `new` words long: the words after them move, the
    /// ones added are zero, those removed are lost. False (nothing changed) if the allocator
    /// refuses.
    fn resize(&mut self, at: usize, old: usize, new: usize) -> bool {
        let len = self.len();
        debug_assert!(at + old <= len);
        if new == old {
            return true;
        }
        let Some(new_len) = (len - old)
            .checked_add(new)
            .filter(|n| n.checked_add(HEAD).is_some())
        else {
            return false;
        };
        let tail = len - at - old;
        if new < old {
            self.data_mut().copy_within(at + old.., at + new);
        }
        if self.block.resize((HEAD + new_len) as u64).is_err() {
            if new < old {
                // Undo the move: the block is unchanged otherwise.
                self.data_mut()
                    .copy_within(at + new..at + new + tail, at + old);
            }
            return false;
        }
        self.block.set_head((new_len as u64) << HEAD_FREE_SHIFT);
        if new > old {
            let data = self.data_mut();
            data.copy_within(at + old..at + old + tail, at + new);
            data[at + old..at + new].fill(0);
        }
        true
    }

    fn bits_box(&self) -> Option<NonNull<Vec<BitArray>>> {
        // Word 1 is 0 or the exposed address of the bit arrays' box.
        // SAFETY: a body's block always holds its HEAD words.
        let head = unsafe { self.block.prefix(HEAD) };
        let address = head[1] as usize;
        NonNull::new(std::ptr::with_exposed_provenance_mut(address))
    }

    /// The bit arrays, in the order the chain added them.
    pub fn bits(&self) -> &[BitArray] {
        match self.bits_box() {
            // SAFETY: the box is owned by this body and lives as long as it.
            Some(b) => unsafe { b.as_ref() },
            None => &[],
        }
    }

    pub fn bits_mut(&mut self) -> &mut [BitArray] {
        match self.bits_box() {
            // SAFETY: as in `bits`, and &mut self makes the access exclusive.
            Some(mut b) => unsafe { b.as_mut() },
            None => &mut [],
        }
    }

    /// Appends a bit array; gives it back if the allocator refuses the room.
    fn push_bits(&mut self, bits: BitArray) -> Result<(), BitArray> {
        let mut b = match self.bits_box() {
            Some(b) => b,
            None => {
                let Some(boxed) = try_box(Vec::new()) else {
                    return Err(bits);
                };
                // Owned by the body from now on: Drop gives it back to `Box::from_raw`.
                let b = NonNull::from(Box::leak(boxed));
                self.block.words_mut()[1] = b.as_ptr().expose_provenance() as u64;
                b
            }
        };
        // SAFETY: owned by this body, and &mut self makes the access exclusive.
        let list = unsafe { b.as_mut() };
        if list.try_reserve_exact(1).is_err() {
            return Err(bits);
        }
        list.push(bits);
        Ok(())
    }

    /// Removes the last bit array (undoing a `push_bits`).
    fn pop_bits(&mut self) {
        if let Some(mut b) = self.bits_box() {
            // SAFETY: owned by this body, and &mut self makes the access exclusive.
            unsafe { b.as_mut() }.pop();
        }
    }

    /// Bytes the allocator hands out for the block, the bit arrays' box and list, and the bit
    /// arrays, each rounded up to its size class.
    pub fn memory_bytes(&self) -> u64 {
        let block = self.block.memory_bytes();
        let Some(b) = self.bits_box() else {
            return block;
        };
        // SAFETY: as in `bits`.
        let list = unsafe { b.as_ref() };
        let arrays: u64 = list.iter().map(BitArray::memory_bytes).sum();
        block
            + size_class(std::mem::size_of::<Vec<BitArray>>() as u64)
            + size_class((list.capacity() * std::mem::size_of::<BitArray>()) as u64)
            + arrays
    }

    /// Visits the body's blocks for defragmentation (`core::defrag`): the block, then the bit
    /// arrays' box, list and arrays; word 1 then holds the box's new address.
    pub fn defrag(&mut self, d: &mut Defrag) {
        self.block.defrag(d);
        let Some(b) = self.bits_box() else {
            return;
        };
        // SAFETY: the box was leaked into word 1 by `push_bits`; it is leaked back below, its
        // new address in word 1 (nothing between panics).
        let mut list = unsafe { Box::from_raw(b.as_ptr()) };
        d.boxed(&mut list);
        d.vec(&mut list);
        list.iter_mut().for_each(|bits| bits.defrag(d));
        self.block.words_mut()[1] = Box::into_raw(list).expose_provenance() as u64;
    }

    /// A deep copy, allocated fallibly.
    pub fn try_clone(&self) -> Option<Self> {
        let mut copy = Self::zeroed(self.len(), 0)?;
        copy.block.words_mut()[SEED] = self.seed();
        copy.data_mut().copy_from_slice(self.data());
        for bits in self.bits() {
            copy.push_bits(bits.try_clone().ok()?).ok()?;
        }
        Some(copy)
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        self.seed() == other.seed() && self.data() == other.data() && self.bits() == other.bits()
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Some(b) = self.bits_box() {
            // SAFETY: the box was leaked into word 1 by `push_bits` and is dropped once.
            drop(unsafe { Box::from_raw(b.as_ptr()) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::filter::{FilterParams, Layout};

    #[test]
    fn resizes_keep_the_other_words() {
        let mut b = Body::zeroed(6, 0).unwrap();
        b.data_mut().copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        assert!(b.resize(2, 1, 3));
        assert_eq!(b.data(), &[1, 2, 3, 0, 0, 4, 5, 6]);
        assert!(b.resize(1, 4, 1));
        assert_eq!(b.data(), &[1, 2, 4, 5, 6]);
        assert!(b.resize(5, 0, 2));
        assert_eq!(b.data(), &[1, 2, 4, 5, 6, 0, 0]);
        assert!(b.resize(0, 7, 0));
        assert!(b.data().is_empty());
        assert!(!b.resize(0, 0, usize::MAX));
        assert_eq!(b.memory_bytes(), 32);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn owns_its_bit_arrays() {
        let params = FilterParams::for_layout(Layout::Blocked, 1000, 0.01).unwrap();
        let mut b = Body::zeroed(3, 0).unwrap();
        assert!(b.bits().is_empty());
        for _ in 0..3 {
            assert!(b.push_bits(BitArray::new(&params).unwrap()).is_ok());
        }
        b.bits_mut()[1].write_bytes(0, &[7]);
        let c = b.try_clone().unwrap();
        assert_eq!(c.bits().len(), 3);
        assert_eq!(c.bits()[1], b.bits()[1]);
        assert_ne!(c.bits()[0], b.bits()[1]);
        assert!(b.resize(0, 3, 100));
        assert_eq!(c.bits()[1], b.bits()[1]);
        let arrays: u64 = b.bits().iter().map(BitArray::memory_bytes).sum();
        assert!(arrays >= 3 * params.bytes(), "{arrays}");
        let list = size_class(3 * std::mem::size_of::<BitArray>() as u64);
        assert_eq!(b.memory_bytes(), size_class(105 * 8) + 32 + list + arrays);
    }
}
