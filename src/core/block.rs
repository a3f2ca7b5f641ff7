//! A size-class block: one heap allocation of `u64` words, the first of which is a header,
//! that grows and shrinks with `realloc`. Its size is always an allocator size class
//! (`alloc::size_class`, what jemalloc would hand out anyway), recorded in the header as a
//! class index, so the block knows its own layout (8 bytes of pointer, no length field) and
//! a small value costs what holds it plus one block: a linear counter's data
//! (`lc/counter.rs`, held as one word: `lc/stored.rs`), a Bloom chain's body (`bloom/body.rs`).
//!
//! Header word, bit 0 first: bits 2–9 the class index, which only this file touches; the
//! others (bits 0–1 and from [`HEAD_FREE_SHIFT`] up) are the owner's, read and written
//! through [`Block::head`] / [`Block::set_head`].

use crate::core::alloc::size_class;
use crate::core::defrag::Defrag;
use std::alloc::{alloc_zeroed, dealloc, realloc, Layout};
use std::ptr::NonNull;

/// Header bits that hold the class index.
const CLASS_SHIFT: u32 = 2;
const CLASS_BITS: u64 = 0xff << CLASS_SHIFT;
/// The first header bit above the class index: an owner's field from here up.
pub const HEAD_FREE_SHIFT: u32 = 10;

/// The size classes by index: 8, 16, 32, 48 … 128 (nine classes), then four per doubling
/// (indices past the largest class that fits in a u64 read 0 and are never made). A table,
/// because every access to a block reads its length from its class.
const CLASS_BYTES: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = match i {
            0 => 8,
            1..=8 => 16 * i as u64,
            _ if (i - 9) / 4 > 55 => 0,
            _ => {
                let base = 128u64 << ((i - 9) / 4);
                base + ((i - 9) % 4 + 1) as u64 * (base / 4)
            }
        };
        i += 1;
    }
    table
};

/// The `i`-th size class.
fn class_bytes(i: u64) -> u64 {
    CLASS_BYTES[(i & 0xff) as usize]
}

/// The index of the size class of `bytes` (≥ 1).
fn class_index(bytes: u64) -> u64 {
    match size_class(bytes) {
        8 => 0,
        class @ ..=128 => class / 16,
        class => {
            // Four classes per doubling above 128: one in (2^e, 2^(e+1)] is a multiple of
            // 2^(e−2), so its place in the doubling is a shift, not a divide.
            let e = u64::from(63 - (class - 1).leading_zeros());
            9 + 4 * (e - 7) + (class >> (e - 2)) - 5
        }
    }
}

/// The allocator refused a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

/// An owned block of words, or none (an empty counter).
pub struct Block(Option<NonNull<u64>>);

// SAFETY: a Block uniquely owns its allocation, like a Box<[u64]>; it has no interior
// mutability, so sharing `&Block` across threads only allows reads.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

impl Block {
    pub const fn none() -> Block {
        Block(None)
    }

    /// A zeroed block of at least `words` words (≥ 1), the rest of its size class included;
    /// `None` if the allocator refuses.
    pub fn zeroed(words: u64) -> Option<Block> {
        let bytes = words.checked_mul(8)?;
        let index = class_index(bytes);
        let layout = Layout::from_size_align(class_bytes(index) as usize, 8).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }.cast::<u64>())?;
        // SAFETY: the block holds at least one word, just zeroed.
        unsafe { *ptr.as_ptr() = index << CLASS_SHIFT };
        Some(Block(Some(ptr)))
    }

    fn index(&self) -> Option<u64> {
        // SAFETY: a block's first word is its header, always initialised.
        self.0
            .map(|p| (unsafe { *p.as_ptr() } & CLASS_BITS) >> CLASS_SHIFT)
    }

    /// Bytes allocated (0 for none).
    pub fn memory_bytes(&self) -> u64 {
        self.index().map_or(0, class_bytes)
    }

    pub fn words(&self) -> &[u64] {
        match self.0 {
            // SAFETY: the allocation holds `bytes()/8` initialised words (zeroed when made or
            // grown), owned by `self`.
            Some(p) => unsafe {
                std::slice::from_raw_parts(p.as_ptr(), (self.memory_bytes() / 8) as usize)
            },
            None => &[],
        }
    }

    /// The words; the header's class bits must be left as they are (use `set_head`).
    pub fn words_mut(&mut self) -> &mut [u64] {
        let len = (self.memory_bytes() / 8) as usize;
        match self.0 {
            // SAFETY: as in `words`, borrowed mutably through `&mut self`.
            Some(p) => unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), len) },
            None => &mut [],
        }
    }

    /// The first `len` words, without reading the block's size from its class: for an owner
    /// that keeps its own length in the header, on its lookup paths.
    ///
    /// # Safety
    /// `len` ≤ the block's words (`bytes() / 8`).
    #[inline(always)]
    pub unsafe fn prefix(&self, len: usize) -> &[u64] {
        match self.0 {
            // SAFETY: the caller keeps `len` within the allocation, whose words are all
            // initialised (as in `words`).
            Some(p) => unsafe { std::slice::from_raw_parts(p.as_ptr(), len) },
            None => &[],
        }
    }

    /// `prefix`, mutable.
    ///
    /// # Safety
    /// As for `prefix`.
    #[inline(always)]
    pub unsafe fn prefix_mut(&mut self, len: usize) -> &mut [u64] {
        match self.0 {
            // SAFETY: as in `prefix`, borrowed mutably through `&mut self`.
            Some(p) => unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), len) },
            None => &mut [],
        }
    }

    /// Asks the CPU for every line of the block at once (a hint: nothing else happens), so
    /// that a pass that will touch most of them finds them arriving together instead of
    /// waiting for each in turn.
    #[inline]
    pub fn prefetch(&self) {
        self.prefetch_from(0);
    }

    /// [`Block::prefetch`], asking for the line of word 0 first, then those from word `first`
    /// on, then the rest: the caller's first reads first.
    #[inline]
    pub fn prefetch_from(&self, first: usize) {
        let words = self.words();
        let first = first.min(words.len()) & !7;
        let line = |at: usize| crate::core::batch::prefetch_line(words.as_ptr().wrapping_add(at));
        if first > 0 {
            line(0);
        }
        // Plain loops: `step_by`'s iterator cost a few times the prefetches of a short list.
        let mut at = first;
        while at < words.len() {
            line(at);
            at += 8;
        }
        let mut at = 8;
        while at < first {
            line(at);
            at += 8;
        }
    }

    /// The header without its class bits (0 for none).
    #[inline]
    pub fn head(&self) -> u64 {
        // SAFETY: a block's first word is its header, always initialised.
        self.0.map_or(0, |p| unsafe { *p.as_ptr() } & !CLASS_BITS)
    }

    /// Sets the header's other bits (`head` must leave the class bits zero).
    pub fn set_head(&mut self, head: u64) {
        debug_assert_eq!(head & CLASS_BITS, 0);
        if let Some(h) = self.words_mut().first_mut() {
            *h = (*h & CLASS_BITS) | head;
        }
    }

    /// Makes the block the size class of `words` words (≥ 1), keeping its words (those that
    /// fit) and zeroing new ones; from none, a zeroed block. Err (nothing changed) if the
    /// allocator refuses.
    pub fn resize(&mut self, words: u64) -> Result<(), OutOfMemory> {
        let Some(ptr) = self.0 else {
            *self = Block::zeroed(words).ok_or(OutOfMemory)?;
            return Ok(());
        };
        let index = class_index(words.checked_mul(8).ok_or(OutOfMemory)?);
        let (old, new) = (self.memory_bytes(), class_bytes(index));
        if old == new {
            return Ok(());
        }
        let layout = Layout::from_size_align(old as usize, 8).map_err(|_| OutOfMemory)?;
        // SAFETY: `ptr` was allocated by the global allocator with `layout`; the new size is
        // non-zero and a valid Layout size (class sizes stay far below isize::MAX for any
        // block the memory limit allows, and `Layout::from_size_align` checked the old one).
        let grown = unsafe { realloc(ptr.as_ptr().cast(), layout, new as usize) }.cast::<u64>();
        let grown = NonNull::new(grown).ok_or(OutOfMemory)?;
        self.0 = Some(grown);
        if new > old {
            // SAFETY: the new tail lies inside the reallocated block.
            unsafe {
                std::ptr::write_bytes(
                    grown.as_ptr().add((old / 8) as usize),
                    0,
                    ((new - old) / 8) as usize,
                )
            };
        }
        // The header still names the old class, so no slice of the block is made (one of the
        // old length would reach past a shrunk block): the header is written in place.
        // SAFETY: the block holds at least one word, its header, initialised.
        unsafe { *grown.as_ptr() = (index << CLASS_SHIFT) | (*grown.as_ptr() & !CLASS_BITS) };
        Ok(())
    }
}

impl Block {
    /// The block as one word, its address (0 for none), kept alive: the caller owns it until
    /// [`Block::from_raw`] takes it back.
    pub fn into_raw(self) -> u64 {
        let word = self.0.map_or(0, |p| p.as_ptr().expose_provenance() as u64);
        std::mem::forget(self);
        word
    }

    /// The block [`Block::into_raw`] gave this word for.
    ///
    /// # Safety
    /// `word` came from `into_raw` and is taken back once (or lent, never dropped: see
    /// `lc/stored.rs`).
    #[inline(always)]
    pub unsafe fn from_raw(word: u64) -> Block {
        Block(NonNull::new(std::ptr::with_exposed_provenance_mut(
            word as usize,
        )))
    }

    /// Visits the block for defragmentation (`core::defrag`).
    pub fn defrag(&mut self, d: &mut Defrag) {
        let Some(p) = self.0 else {
            return;
        };
        let layout =
            Layout::from_size_align(self.memory_bytes() as usize, 8).expect("as allocated");
        let mut ptr = p.cast::<u8>();
        // SAFETY: allocated by the global allocator with this layout; `self.0` is its one
        // pointer.
        unsafe { d.block(&mut ptr, layout) };
        self.0 = Some(ptr.cast());
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            let layout = Layout::from_size_align(self.memory_bytes() as usize, 8)
                .expect("the layout it was allocated with");
            // SAFETY: allocated by the global allocator with this layout, owned by `self`.
            unsafe { dealloc(p.as_ptr().cast(), layout) };
        }
    }
}

impl Clone for Block {
    /// A copy; aborts like any allocation if memory runs out (`try_clone` reports it).
    fn clone(&self) -> Block {
        self.try_clone()
            .unwrap_or_else(|| std::alloc::handle_alloc_error(Layout::new::<u64>()))
    }
}

impl Block {
    /// A copy, or None if the allocator refuses.
    pub fn try_clone(&self) -> Option<Block> {
        if self.0.is_none() {
            return Some(Block::none());
        }
        let words = self.words();
        let mut copy = Block::zeroed(words.len() as u64)?;
        copy.words_mut().copy_from_slice(words);
        Some(copy)
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({} bytes)", self.memory_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_indexes_round_trip_through_the_size_classes() {
        let mut bytes = 1u64;
        while bytes < 1 << 40 {
            let class = size_class(bytes);
            assert_eq!(class_bytes(class_index(bytes)), class, "{bytes}");
            assert!(class_index(bytes) <= 0xff);
            bytes = bytes * 9 / 8 + 1;
        }
        for i in 0..40 {
            assert_eq!(class_index(class_bytes(i)), i);
        }
    }

    #[test]
    fn blocks_grow_shrink_and_copy() {
        let mut b = Block::zeroed(3).unwrap();
        assert_eq!(b.memory_bytes(), 32);
        b.set_head(0b11 | (77 << 10));
        b.words_mut()[3] = 9;
        b.resize(40).unwrap();
        assert_eq!(b.memory_bytes(), 320);
        assert_eq!(b.head(), 0b11 | (77 << 10));
        assert_eq!(b.words()[3], 9);
        assert!(b.words()[4..].iter().all(|&w| w == 0));
        let c = b.clone();
        assert_eq!(c.words(), b.words());
        b.resize(2).unwrap();
        assert_eq!(b.memory_bytes(), 16);
        assert_eq!(b.head(), 0b11 | (77 << 10));
        assert_eq!(Block::none().memory_bytes(), 0);
        assert!(Block::none().words().is_empty());
    }

    /// A block, and none, survive the trip through their raw word.
    #[test]
    fn raw_words_keep_the_block() {
        let mut b = Block::zeroed(1).unwrap();
        b.set_head(0b10 | (5 << HEAD_FREE_SHIFT));
        let raw = b.into_raw();
        assert!(raw != 0 && raw.is_multiple_of(8), "an address");
        // SAFETY: taken back once.
        let mut b = unsafe { Block::from_raw(raw) };
        b.resize(3).unwrap();
        assert_eq!(
            (b.head(), b.memory_bytes()),
            (0b10 | (5 << HEAD_FREE_SHIFT), 32)
        );
        assert_eq!(Block::none().into_raw(), 0);
        // SAFETY: none's word.
        let none = unsafe { Block::from_raw(0) };
        assert!(none.words().is_empty());
    }
}
