//! `Body`: the one allocation behind a chain (`chain.rs`), exactly sized: a run of u64 words
//! (the sub-filters' item counts and sparse sets, laid out by the chain) and the chain's bit
//! arrays, if it has any.
//!
//! A small key's whole value is the box Redis holds (the chain: an `Arc` of its shared
//! parameters and this body's pointer, 16 bytes) and this block; every separate allocation
//! would pay its own size-class rounding, and a `Vec` its spare capacity, which for keys of a
//! hundred bytes matter. So the block is thin (its length is in its first word), holds its
//! data inline, and is allocated at its size's allocator size class (`alloc::size_class`,
//! what jemalloc would hand out anyway): a set that grows by a word reallocates only when it
//! crosses into the next class. Bit arrays are large and never move: they live in a
//! `Vec` boxed apart, reached through the block's second word (0 when there are none), so a
//! chain of sparse sets pays nothing for them.
//!
//! Block: word 0 the data length n, word 1 the bit arrays' box (an exposed address, or 0),
//! words 2..2+n the data. Allocation is fallible: a failure is an error, never an abort.

use super::filter::BitArray;
use crate::core::alloc::{size_class, try_box};
use crate::core::defrag::Defrag;
use std::alloc::{alloc_zeroed, dealloc, realloc, Layout};
use std::ptr::NonNull;

const HEAD: usize = 2;

pub struct Body {
    block: NonNull<u64>,
}

// SAFETY: Body owns its block and bit arrays exclusively, like a Box.
unsafe impl Send for Body {}
// SAFETY: shared access is read-only, writes need `&mut`.
unsafe impl Sync for Body {}

/// The allocation of a block of `words` words: their size class.
fn layout(words: usize) -> Option<Layout> {
    let bytes = words.checked_mul(8)?;
    Layout::from_size_align(size_class(bytes as u64) as usize, 8).ok()
}

impl Body {
    /// A block of `len` zero data words and no bit arrays, or None if the allocator refuses.
    pub fn zeroed(len: usize) -> Option<Self> {
        let layout = layout(len.checked_add(HEAD)?)?;
        // SAFETY: the layout is at least HEAD words, non-zero-sized.
        let block = NonNull::new(unsafe { alloc_zeroed(layout) }.cast::<u64>())?;
        // SAFETY: the block has HEAD + len words; word 1 stays 0 (no bit arrays).
        unsafe { block.write(len as u64) };
        Some(Self { block })
    }

    fn len(&self) -> usize {
        // SAFETY: word 0 of a live block is its data length.
        unsafe { self.block.read() as usize }
    }

    /// The data words.
    pub fn data(&self) -> &[u64] {
        // SAFETY: the block holds HEAD + len initialised words.
        unsafe { std::slice::from_raw_parts(self.block.as_ptr().add(HEAD), self.len()) }
    }

    pub fn data_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `data`, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.block.as_ptr().add(HEAD), self.len()) }
    }

    /// Makes the `old` data words at `at` `new` words long: the words after them move, the
    /// ones added are zero, those removed are lost. False (nothing changed) if the allocator
    /// refuses.
    pub fn resize(&mut self, at: usize, old: usize, new: usize) -> bool {
        let len = self.len();
        debug_assert!(at + old <= len);
        if new == old {
            return true;
        }
        let Some(new_len) = (len - old).checked_add(new) else {
            return false;
        };
        let tail = len - at - old;
        let (Some(from), Some(to)) = (
            layout(HEAD + len),
            new_len.checked_add(HEAD).and_then(layout),
        ) else {
            return false;
        };
        if new < old {
            self.data_mut().copy_within(at + old.., at + new);
        }
        if from.size() != to.size() {
            // SAFETY: the block was allocated with `from`; `to` has the same alignment and a
            // non-zero size.
            let moved = unsafe { realloc(self.block.as_ptr().cast(), from, to.size()) };
            let Some(block) = NonNull::new(moved.cast::<u64>()) else {
                if new < old {
                    // Undo the move: the block is unchanged otherwise.
                    self.data_mut()
                        .copy_within(at + new..at + new + tail, at + old);
                }
                return false;
            };
            self.block = block;
        }
        // SAFETY: the block now has HEAD + new_len words.
        unsafe { self.block.write(new_len as u64) };
        if new > old {
            let data = self.data_mut();
            data.copy_within(at + old..at + old + tail, at + new);
            data[at + old..at + new].fill(0);
        }
        true
    }

    fn bits_box(&self) -> Option<NonNull<Vec<BitArray>>> {
        // SAFETY: word 1 of a live block is 0 or the exposed address of the bit arrays' box.
        let address = unsafe { self.block.add(1).read() } as usize;
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
    pub fn push_bits(&mut self, bits: BitArray) -> Result<(), BitArray> {
        let mut b = match self.bits_box() {
            Some(b) => b,
            None => {
                let Some(boxed) = try_box(Vec::new()) else {
                    return Err(bits);
                };
                // Owned by the body from now on: Drop gives it back to `Box::from_raw`.
                let b = NonNull::from(Box::leak(boxed));
                // SAFETY: word 1 of the block; the box is owned from now on (see Drop).
                unsafe {
                    self.block
                        .add(1)
                        .write(b.as_ptr().expose_provenance() as u64)
                };
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
    pub fn pop_bits(&mut self) {
        if let Some(mut b) = self.bits_box() {
            // SAFETY: owned by this body, and &mut self makes the access exclusive.
            unsafe { b.as_mut() }.pop();
        }
    }

    /// Bytes the allocator hands out for the block, the bit arrays' box and list, and the bit
    /// arrays, each rounded up to its size class.
    pub fn memory_bytes(&self) -> u64 {
        let block = size_class(((HEAD + self.len()) * 8) as u64);
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
        let mut block = self.block.cast::<u8>();
        let layout = layout(HEAD + self.len()).expect("valid when allocated");
        // SAFETY: the block was allocated with this layout; `self.block` is its one pointer.
        unsafe { d.block(&mut block, layout) };
        self.block = block.cast();
        let Some(b) = self.bits_box() else {
            return;
        };
        // SAFETY: the box was leaked into word 1 by `push_bits`; it is leaked back below, its
        // new address in word 1 (nothing between panics).
        let mut list = unsafe { Box::from_raw(b.as_ptr()) };
        d.boxed(&mut list);
        d.vec(&mut list);
        list.iter_mut().for_each(|bits| bits.defrag(d));
        let address = Box::into_raw(list).expose_provenance() as u64;
        // SAFETY: word 1 of the live block.
        unsafe { self.block.add(1).write(address) };
    }

    /// A deep copy, allocated fallibly.
    pub fn try_clone(&self) -> Option<Self> {
        let mut copy = Self::zeroed(self.len())?;
        copy.data_mut().copy_from_slice(self.data());
        for bits in self.bits() {
            copy.push_bits(bits.try_clone().ok()?).ok()?;
        }
        Some(copy)
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Some(b) = self.bits_box() {
            // SAFETY: the box was leaked into word 1 by `push_bits` and is dropped once.
            drop(unsafe { Box::from_raw(b.as_ptr()) });
        }
        // SAFETY: allocated with this layout (valid then, the length is unchanged since).
        unsafe {
            dealloc(
                self.block.as_ptr().cast(),
                layout(HEAD + self.len()).expect("valid when allocated"),
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::filter::{FilterParams, Layout};

    #[test]
    fn resizes_keep_the_other_words() {
        let mut b = Body::zeroed(6).unwrap();
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
        assert_eq!(b.memory_bytes(), 16);
    }

    #[test]
    fn owns_its_bit_arrays() {
        let params = FilterParams::for_layout(Layout::Blocked, 1000, 0.01).unwrap();
        let mut b = Body::zeroed(3).unwrap();
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
        assert!(arrays >= 3 * size_class(params.bytes()));
        let list = size_class(3 * std::mem::size_of::<BitArray>() as u64);
        assert_eq!(b.memory_bytes(), size_class(104 * 8) + 32 + list + arrays);
    }
}
