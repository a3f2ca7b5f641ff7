//! A size-class block: one heap allocation of `u64` words, the first of which is a header,
//! that grows and shrinks with `realloc`. Its size is always an allocator size class
//! (`alloc::size_class`, what jemalloc would hand out anyway), recorded in the header as a
//! class index, so the block knows its own layout (8 bytes of pointer, no length field) and
//! a small value costs its `Box` plus one block: a linear counter's data (`lc/counter.rs`),
//! a Bloom chain's body (`bloom/body.rs`). A block of one word (the smallest class) is no
//! allocation: the word sits where the pointer would, so a counter of one item is its box
//! alone.
//!
//! Header word, bit 0 first: bits 2–9 the class index, which only this file touches; the
//! others (bits 0–1 and from [`HEAD_FREE_SHIFT`] up) are the owner's, read and written
//! through [`Block::head`] / [`Block::set_head`]. An inline word's class index is 255, which
//! no allocation has: its bit 2 set tells it from an address.

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
            let base = 1u64 << (63 - (class - 1).leading_zeros());
            9 + 4 * (base.trailing_zeros() as u64 - 7) + class / (base / 4) - 5
        }
    }
}

/// The allocator refused a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

/// The class index of what is no allocation: a block of one word, kept inline, and none's
/// header. All class bits set: an index with `class_bytes` 0, and bit [`CLASS_SHIFT`] set,
/// which tells an inline word from a pointer (whose three low bits are zero).
const NO_CLASS: u64 = 0xff;
const INLINE_MARK: u64 = 1 << CLASS_SHIFT;
const _: () = assert!(NO_CLASS << CLASS_SHIFT & INLINE_MARK != 0);
const _: () = assert!(CLASS_BYTES[NO_CLASS as usize] == 0);
const _: () = assert!(size_of::<usize>() == size_of::<u64>());

/// What none points at: a header of no class (no words, no allocation), so that reading a
/// block takes one test (inline or not), none included.
static NONE_HEADER: u64 = NO_CLASS << CLASS_SHIFT;

/// An owned block of words, or none (an empty counter), in one word: for a block of one word
/// that word itself, header and all, with no allocation (a counter of one item takes its box
/// alone; the word is never 0, its class bits being set, and is held as an address with no
/// provenance); else a pointer to its header, the allocation's or none's (`NONE_HEADER`).
/// Never null, so that `Option<Block>` takes one word.
pub struct Block(NonNull<u64>);

// SAFETY: a Block uniquely owns its allocation, like a Box<[u64]>; it has no interior
// mutability (none's header is never written: none has no words), so sharing `&Block` across
// threads only allows reads.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

impl Block {
    pub const fn none() -> Block {
        // SAFETY: a static's address is not null.
        Block(unsafe { NonNull::new_unchecked((&raw const NONE_HEADER).cast_mut()) })
    }

    /// A block of one word, inline: `word` with its class bits set to `NO_CLASS`.
    fn inline(word: u64) -> Block {
        let word = word | NO_CLASS << CLASS_SHIFT;
        let address = std::ptr::without_provenance_mut::<u64>(word as usize);
        Block(NonNull::new(address).expect("class bits set"))
    }

    /// A zeroed block of at least `words` words (≥ 1), the rest of its size class included;
    /// `None` if the allocator refuses.
    pub fn zeroed(words: u64) -> Option<Block> {
        let bytes = words.checked_mul(8)?;
        let index = class_index(bytes);
        if index == 0 {
            return Some(Block::inline(0));
        }
        let layout = Layout::from_size_align(class_bytes(index) as usize, 8).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }.cast::<u64>())?;
        // SAFETY: the block holds at least one word, just zeroed.
        unsafe { *ptr.as_ptr() = index << CLASS_SHIFT };
        Some(Block(ptr))
    }

    /// Whether the block is one word kept inline (no allocation, no address).
    #[inline(always)]
    pub fn is_inline(&self) -> bool {
        self.0.as_ptr().addr() as u64 & INLINE_MARK != 0
    }

    /// The header a block that is not inline points at.
    #[inline(always)]
    fn header(&self) -> *mut u64 {
        debug_assert!(!self.is_inline());
        self.0.as_ptr()
    }

    /// The allocation and its words, if the block has one (not inline, not none).
    #[inline(always)]
    fn heap(&self) -> Option<(NonNull<u64>, usize)> {
        if self.is_inline() {
            return None;
        }
        let len = self.heap_len();
        Some((self.0, len)).filter(|_| len > 0)
    }

    /// The words of the block a non-inline block points at (0 for none).
    #[inline(always)]
    fn heap_len(&self) -> usize {
        // SAFETY: a pointed-at header is always initialised.
        let class = (unsafe { *self.header() } & CLASS_BITS) >> CLASS_SHIFT;
        (class_bytes(class) / 8) as usize
    }

    /// Bytes allocated (0 for none and for an inline word).
    pub fn memory_bytes(&self) -> u64 {
        match self.is_inline() {
            true => 0,
            false => self.heap_len() as u64 * 8,
        }
    }

    #[inline]
    pub fn words(&self) -> &[u64] {
        match self.is_inline() {
            // SAFETY: the inline word is the pointer's 8 bytes, read as a number.
            true => std::slice::from_ref(unsafe { &*(&raw const self.0).cast::<u64>() }),
            // SAFETY: the header starts the allocation's `heap_len()` initialised words (zeroed
            // when made or grown), owned by `self`; none's, no words.
            false => unsafe { std::slice::from_raw_parts(self.header(), self.heap_len()) },
        }
    }

    /// The words; the header's class bits must be left as they are (use `set_head`).
    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64] {
        match self.is_inline() {
            // SAFETY: as in `words`; the owner leaves the class bits set, so the word stays
            // non-zero.
            true => std::slice::from_mut(unsafe { &mut *(&raw mut self.0).cast::<u64>() }),
            // SAFETY: as in `words`, borrowed mutably through `&mut self`; none's slice is
            // empty, so its header is never written.
            false => unsafe { std::slice::from_raw_parts_mut(self.header(), self.heap_len()) },
        }
    }

    /// The first `len` words, without reading the block's size from its class: for an owner
    /// that keeps its own length in the header, on its lookup paths.
    ///
    /// # Safety
    /// `len` ≤ the block's words (`words().len()`).
    #[inline(always)]
    pub unsafe fn prefix(&self, len: usize) -> &[u64] {
        match self.is_inline() {
            true => &self.words()[..len],
            // SAFETY: the caller keeps `len` within the block's words, all initialised (as in
            // `words`).
            false => unsafe { std::slice::from_raw_parts(self.header(), len) },
        }
    }

    /// `prefix`, mutable.
    ///
    /// # Safety
    /// As for `prefix`.
    #[inline(always)]
    pub unsafe fn prefix_mut(&mut self, len: usize) -> &mut [u64] {
        match self.is_inline() {
            true => &mut self.words_mut()[..len],
            // SAFETY: as in `prefix`, borrowed mutably through `&mut self`.
            false => unsafe { std::slice::from_raw_parts_mut(self.header(), len) },
        }
    }

    /// The header without its class bits (0 for none).
    #[inline]
    pub fn head(&self) -> u64 {
        let first = match self.is_inline() {
            true => self.0.as_ptr().addr() as u64,
            // SAFETY: a pointed-at header is always initialised (none's is 0 but its class).
            false => unsafe { *self.header() },
        };
        first & !CLASS_BITS
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
        let index = class_index(words.checked_mul(8).ok_or(OutOfMemory)?);
        if self.is_inline() {
            // An inline word: into an allocation, or nothing to do.
            if index != 0 {
                let mut grown = Block::zeroed(words).ok_or(OutOfMemory)?;
                grown.set_head(self.head());
                *self = grown;
            }
            return Ok(());
        }
        let Some((ptr, old_len)) = self.heap() else {
            *self = Block::zeroed(words).ok_or(OutOfMemory)?;
            return Ok(());
        };
        if index == 0 {
            // One word left: kept inline, the allocation freed.
            *self = Block::inline(self.head());
            return Ok(());
        }
        let (old, new) = (old_len as u64 * 8, class_bytes(index));
        if old == new {
            return Ok(());
        }
        let layout = Layout::from_size_align(old as usize, 8).map_err(|_| OutOfMemory)?;
        // SAFETY: `ptr` was allocated by the global allocator with `layout`; the new size is
        // non-zero and a valid Layout size (class sizes stay far below isize::MAX for any
        // block the memory limit allows, and `Layout::from_size_align` checked the old one).
        let grown = unsafe { realloc(ptr.as_ptr().cast(), layout, new as usize) }.cast::<u64>();
        let grown = NonNull::new(grown).ok_or(OutOfMemory)?;
        self.0 = grown;
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
        let head = self.head();
        self.words_mut()[0] = (index << CLASS_SHIFT) | head;
        Ok(())
    }
}

impl Block {
    /// The block as its one word (an address, or the inline word), kept alive: the caller
    /// owns it until [`Block::from_raw`] takes it back.
    pub fn into_raw(self) -> u64 {
        let word = self.0.as_ptr().expose_provenance() as u64;
        std::mem::forget(self);
        word
    }

    /// The block [`Block::into_raw`] gave this word for.
    ///
    /// # Safety
    /// `word` came from `into_raw` and is taken back once (or lent: see `lc/stored.rs`).
    #[inline(always)]
    pub unsafe fn from_raw(word: u64) -> Block {
        let address = std::ptr::with_exposed_provenance_mut::<u64>(word as usize);
        // SAFETY: `into_raw`'s words are never 0 (addresses, or words with class bits set).
        Block(unsafe { NonNull::new_unchecked(address) })
    }

    /// Moves an inline word into an allocation of its own (one word), so that the block has
    /// an address; other blocks are left as they are.
    pub fn spill(&mut self) -> Result<(), OutOfMemory> {
        if !self.is_inline() {
            return Ok(());
        }
        let layout = Layout::new::<u64>();
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }.cast::<u64>()).ok_or(OutOfMemory)?;
        // SAFETY: one word, just allocated; class index 0 is the one-word class.
        unsafe { *ptr.as_ptr() = self.head() };
        *self = Block(ptr);
        Ok(())
    }

    /// Visits the block for defragmentation (`core::defrag`); an inline word and none have
    /// nothing to move.
    pub fn defrag(&mut self, d: &mut Defrag) {
        let Some((p, len)) = self.heap() else {
            return;
        };
        let layout = Layout::from_size_align(len * 8, 8).expect("as allocated");
        let mut ptr = p.cast::<u8>();
        // SAFETY: allocated by the global allocator with this layout; the block holds its one
        // pointer.
        unsafe { d.block(&mut ptr, layout) };
        self.0 = ptr.cast();
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some((p, len)) = self.heap() {
            let layout =
                Layout::from_size_align(len * 8, 8).expect("the layout it was allocated with");
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
        if self.heap().is_none() {
            // An inline word or none: the word is the whole block.
            return Some(Block(self.0));
        }
        let words = self.words();
        // A one-word allocation (a spilled word) copies into an inline word: the header is
        // set through `set_head`, never copied with this block's class bits.
        let mut copy = Block::zeroed(words.len() as u64)?;
        copy.words_mut()[1..].copy_from_slice(&words[1..]);
        copy.set_head(self.head());
        Some(copy)
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.is_inline() {
            true => write!(f, "Block(inline)"),
            false => write!(f, "Block({} bytes)", self.memory_bytes()),
        }
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
        assert_eq!(Block::none().head(), 0);
    }

    /// A block of one word holds it inline, with no allocation, and moves it into one (and
    /// back) as it grows and shrinks, every owner bit kept.
    #[test]
    fn a_block_of_one_word_is_inline() {
        let mut b = Block::zeroed(1).unwrap();
        assert_eq!(
            (b.memory_bytes(), b.words(), b.head()),
            (0, &[NO_CLASS << 2][..], 0)
        );
        let owner = 0b01 | (0x3f_ffff_ffff_ffff << HEAD_FREE_SHIFT);
        b.set_head(owner);
        assert_eq!(b.head(), owner);
        assert_eq!(b.words().len(), 1);
        // SAFETY: one word.
        assert_eq!(unsafe { b.prefix(1) }[0] & !CLASS_BITS, owner);
        let c = b.clone();
        assert_eq!((c.head(), c.memory_bytes()), (owner, 0));
        b.resize(1).unwrap();
        assert_eq!((b.head(), b.memory_bytes()), (owner, 0));
        b.resize(3).unwrap();
        assert_eq!((b.head(), b.memory_bytes()), (owner, 32));
        assert!(b.words()[1..].iter().all(|&w| w == 0));
        b.words_mut()[2] = 7;
        b.resize(1).unwrap();
        assert_eq!((b.head(), b.memory_bytes(), b.words().len()), (owner, 0, 1));
        b.resize(2).unwrap();
        assert_eq!((b.head(), b.words()), (owner, &[b.words()[0], 0][..]));
        assert_eq!(format!("{c:?}"), "Block(inline)");
        let mut none = Block::none();
        none.spill().unwrap();
        assert_eq!(none.memory_bytes(), 0, "none stays none");
        none.resize(1).unwrap();
        assert_eq!(
            (none.memory_bytes(), none.words().len(), none.head()),
            (0, 1, 0)
        );
    }

    /// A spilled inline word is a one-word allocation with every owner bit, and a block
    /// survives the trip through its raw word.
    #[test]
    fn spilled_words_and_raw_words_keep_the_block() {
        let owner = 0b10 | (0x3f_ffff_ffff_ffff << HEAD_FREE_SHIFT);
        let mut b = Block::zeroed(1).unwrap();
        b.set_head(owner);
        b.spill().unwrap();
        assert!(!b.is_inline());
        assert_eq!((b.head(), b.memory_bytes(), b.words().len()), (owner, 8, 1));
        let raw = b.into_raw();
        assert_eq!(raw % 8, 0, "an address");
        // SAFETY: taken back once.
        let mut b = unsafe { Block::from_raw(raw) };
        b.resize(3).unwrap();
        assert_eq!((b.head(), b.memory_bytes()), (owner, 32));
        b.resize(1).unwrap();
        assert!(b.is_inline(), "shrunk to one word: inline again");
        assert_eq!(b.head(), owner);
        let inline = b.into_raw();
        // SAFETY: taken back once.
        let mut b = unsafe { Block::from_raw(inline) };
        assert_eq!((b.head(), b.memory_bytes()), (owner, 0));
        // A spilled word copies (into an inline word) with its owner bits.
        b.spill().unwrap();
        let copy = b.try_clone().unwrap();
        assert!(copy.is_inline());
        assert_eq!((copy.head(), copy.words().len()), (owner, 1));
    }
}
