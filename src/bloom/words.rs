//! `Words`: a filter's bit array as a zeroed, fixed-length run of u64 words with a chosen
//! alignment.
//!
//! The blocked layout (`blocked.rs`) relies on each 64-byte block being exactly one cache line,
//! so its arrays are 64-byte aligned; a `Vec<u64>` only promises 8, and freeing memory with
//! another alignment than it was allocated with is undefined behaviour, hence this type. The
//! standard layout keeps 8-byte alignment so that small filters land in the same allocator size
//! classes as before. Allocation is fallible: a filter that cannot be allocated is an error,
//! never an abort.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

pub struct Words {
    ptr: NonNull<u64>,
    len: usize,
    align: usize,
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
        if len == 0 {
            return Some(Self {
                ptr: NonNull::dangling(),
                len,
                align,
            });
        }
        let layout = Self::layout(len, align)?;
        // SAFETY: the layout is non-zero-sized.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }.cast::<u64>())?;
        Some(Self { ptr, len, align })
    }

    /// A copy, allocated fallibly.
    pub fn try_clone(&self) -> Option<Self> {
        let mut copy = Self::zeroed(self.len, self.align)?;
        copy.copy_from_slice(self);
        Some(copy)
    }

    fn layout(len: usize, align: usize) -> Option<Layout> {
        Layout::from_size_align(len.checked_mul(8)?, align.max(8)).ok()
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with this very layout (it was valid then).
            unsafe {
                dealloc(
                    self.ptr.as_ptr().cast(),
                    Self::layout(self.len, self.align).expect("valid when allocated"),
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
        }
        assert!(Words::zeroed(usize::MAX / 4, 64).is_none());
    }
}
