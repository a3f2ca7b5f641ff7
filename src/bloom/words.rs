//! `Words`: a filter's bit array as a zeroed, fixed-length run of u64 words with a chosen
//! alignment.
//!
//! The blocked layout (`blocked.rs`) relies on each 64-byte block being exactly one cache line,
//! so its arrays are 64-byte aligned; a `Vec<u64>` only promises 8, hence this type. The
//! standard layout keeps 8-byte alignment.
//!
//! Every array comes from Redis's allocator, so that it counts in `used_memory` and against
//! `maxmemory`: `alloc.rs` sends layouts aligned beyond 16 bytes to the system allocator, so
//! the alignment is made here, from blocks of ordinary (8-byte) alignment. The exact size is
//! asked for first: jemalloc puts a request that is a multiple of 64 bytes in a size class that
//! is one too, in page-aligned slabs (or page-aligned extents when large), so it comes back
//! 64-byte aligned and nothing is wasted. Otherwise (glibc's malloc in some Valkey builds) that
//! block is freed and one `align − 8` bytes larger is aligned by hand; the original pointer and
//! size are kept to free it. `allocated_bytes` reports what was really asked for.
//!
//! Allocation is fallible: a filter that cannot be allocated is an error, never an abort.

use crate::alloc::size_class;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

pub struct Words {
    /// The first word, `align`-aligned, inside the allocation at `base`.
    ptr: NonNull<u64>,
    len: usize,
    align: usize,
    /// The allocation: its start and its size in bytes (0 when `len` is 0: nothing allocated).
    base: NonNull<u8>,
    allocated: usize,
    /// `allocated`'s size class, kept because every write asks for it (`value::modify`).
    class: u64,
}

// SAFETY: Words owns its block exclusively, like Box<[u64]>.
unsafe impl Send for Words {}
// SAFETY: shared access is read-only (`Deref`), writes need `&mut`, like Box<[u64]>.
unsafe impl Sync for Words {}

impl Words {
    /// `len` zero words aligned to `align` bytes (a power of two ≥ 8), or None if the allocator
    /// refuses. Zeroed allocation lets the allocator hand out fresh pages of a large filter
    /// without touching them.
    pub fn zeroed(len: usize, align: usize) -> Option<Self> {
        let align = align.max(8);
        if len == 0 || !align.is_power_of_two() {
            return (len == 0).then(|| Self {
                ptr: NonNull::dangling(),
                len,
                align,
                base: NonNull::dangling(),
                allocated: 0,
                class: 0,
            });
        }
        let bytes = len.checked_mul(8)?;
        // The exact size first (aligned enough under jemalloc), else with room to align.
        for allocated in [bytes, bytes.checked_add(align - 8)?] {
            let layout = Self::layout(allocated)?;
            // SAFETY: the layout is non-zero-sized.
            let base = NonNull::new(unsafe { alloc_zeroed(layout) })?;
            let offset = base.as_ptr().align_offset(align);
            if offset
                .checked_add(bytes)
                .is_some_and(|end| end <= allocated)
            {
                // SAFETY: offset + len·8 ≤ allocated: the words lie inside the allocation.
                let ptr = unsafe { base.add(offset) }.cast::<u64>();
                return Some(Self {
                    ptr,
                    len,
                    align,
                    base,
                    allocated,
                    class: size_class(allocated as u64),
                });
            }
            // SAFETY: just allocated with this layout.
            unsafe { dealloc(base.as_ptr(), layout) };
        }
        None
    }

    /// Bytes the allocator hands out for these words (its size class of what was asked for,
    /// alignment room included).
    pub fn allocated_bytes(&self) -> u64 {
        self.class
    }

    /// A copy, allocated fallibly.
    pub fn try_clone(&self) -> Option<Self> {
        let mut copy = Self::zeroed(self.len, self.align)?;
        copy.copy_from_slice(self);
        Some(copy)
    }

    /// The layout of an allocation of `bytes`: u64 alignment, which Redis's allocator serves.
    fn layout(bytes: usize) -> Option<Layout> {
        Layout::from_size_align(bytes, 8).ok()
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if self.allocated > 0 {
            // SAFETY: `base` was allocated in `zeroed` with this very layout (valid then).
            unsafe {
                dealloc(
                    self.base.as_ptr(),
                    Self::layout(self.allocated).expect("valid when allocated"),
                )
            };
        }
    }
}

impl Deref for Words {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        // SAFETY: ptr points at len initialised (zeroed or written) words, or is dangling
        // with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Words {
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for Words {
    /// Infallible clone for tests and tools; Redis paths use `try_clone`.
    fn clone(&self) -> Self {
        self.try_clone()
            .expect("out of memory cloning filter words")
    }
}

impl PartialEq for Words {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Words({} × u64, align {})", self.len, self.align)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_owned() {
        for (len, align) in [(0usize, 64usize), (1, 8), (8, 64), (1000, 64), (3, 8)] {
            let mut w = Words::zeroed(len, align).unwrap();
            assert_eq!(w.len(), len);
            assert!(w.iter().all(|x| *x == 0));
            if len > 0 {
                assert_eq!(w.as_ptr() as usize % align, 0);
                w[len - 1] = 7;
            }
            let c = w.try_clone().unwrap();
            assert_eq!(c, w);
            assert!(len == 0 || (c.as_ptr() as usize).is_multiple_of(align));
            // Never less than the words, and at most the alignment room more.
            let bytes = len as u64 * 8;
            assert!(w.allocated_bytes() >= size_class(bytes));
            assert!(w.allocated_bytes() <= size_class(bytes + align as u64 - 8));
        }
        assert!(Words::zeroed(usize::MAX / 4, 64).is_none());
        assert!(Words::zeroed(usize::MAX / 8 - 2, 64).is_none());
    }

    #[test]
    fn aligned_words_use_ordinary_layouts() {
        // alloc.rs sends layouts aligned beyond 16 bytes to the system allocator, invisible to
        // used_memory: every allocation here must be 8-byte aligned.
        for len in [1usize, 7, 8, 9, 100, 4096] {
            let w = Words::zeroed(len, 64).unwrap();
            assert!(Words::layout(w.allocated).unwrap().align() <= 16);
        }
    }
}
