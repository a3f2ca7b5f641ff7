//! Huge pages for large bit arrays (the config `bf-huge-pages`, off by default): blocks of two
//! huge pages (4 MiB) and more are advised to the kernel as huge-page memory
//! (`madvise(MADV_HUGEPAGE)`) as `words.rs` allocates them or a load hands them over.
//!
//! Why: a random probe of a filter of hundreds of MiB misses the TLB on nearly every line with
//! 4 KiB pages, and the page walk adds to the line's own miss; 2 MiB pages put a 400 MiB array
//! within the TLB's reach. What it costs (docs/operations.md): a sparsely filled array is
//! resident in 2 MiB units, a fork's copy-on-write copies 2 MiB at a time, and the kernel may
//! compact memory when it faults a huge page in. Advice only: the kernel decides (THP
//! `madvise` or `always` mode; none under `never`, or where Redis disabled THP for its
//! process).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the advice is on.
static HUGE_PAGES: AtomicBool = AtomicBool::new(false);
/// The huge page size the advice aims at (x86-64's, and aarch64's with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// Turns the huge-page advice on or off for blocks allocated (or adopted by loads) from now on.
pub fn set(on: bool) {
    HUGE_PAGES.store(on, Ordering::Relaxed);
}

/// Advises the block at `base` of `bytes` bytes as huge-page memory, when asked to and when
/// it is large enough to hold at least one aligned huge page whatever its start; the pages
/// wholly inside it only (advice needs page bounds).
pub fn advise(base: NonNull<u8>, bytes: usize) {
    if bytes < 2 * HUGE_PAGE || !HUGE_PAGES.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        const MADV_HUGEPAGE: std::ffi::c_int = 14;
        extern "C" {
            fn madvise(
                addr: *mut std::ffi::c_void,
                len: usize,
                advice: std::ffi::c_int,
            ) -> std::ffi::c_int;
        }
        let start = (base.as_ptr() as usize).next_multiple_of(PAGE);
        let end = (base.as_ptr() as usize + bytes) & !(PAGE - 1);
        // SAFETY: the range lies inside a live allocation the caller owns; MADV_HUGEPAGE
        // changes how the kernel backs it, never its contents. A refusal (a kernel without
        // THP) leaves it as it was, which is all the advice can fall back to.
        unsafe { madvise(start as *mut std::ffi::c_void, end - start, MADV_HUGEPAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};

    /// Advice changes how memory is backed, never what it holds: a block advised while the
    /// setting is on (at an unaligned start, as a block with a header before it would be)
    /// reads back what was written, and so does one too small to be advised.
    #[test]
    #[cfg_attr(miri, ignore = "calls madvise, which Miri cannot")]
    fn advised_blocks_keep_their_contents() {
        set(true);
        for (offset, bytes) in [(0, 8 << 20), (24, 5 << 20), (0, 1 << 20)] {
            let layout = Layout::from_size_align(offset + bytes, 8).unwrap();
            // SAFETY: a non-zero-sized layout.
            let base = unsafe { alloc_zeroed(layout) };
            // SAFETY: `offset` is inside the allocation.
            let block = NonNull::new(unsafe { base.add(offset) }).unwrap();
            advise(block, bytes);
            // SAFETY: `bytes` bytes from `block` lie inside the allocation.
            let memory = unsafe { std::slice::from_raw_parts_mut(block.as_ptr(), bytes) };
            assert!(memory.iter().all(|&b| b == 0));
            for (i, b) in memory.iter_mut().enumerate().step_by(4093) {
                *b = i as u8 | 1;
            }
            assert!(memory
                .iter()
                .enumerate()
                .step_by(4093)
                .all(|(i, &b)| b == i as u8 | 1));
            // SAFETY: allocated above with this layout.
            unsafe { dealloc(base, layout) };
        }
        set(false);
    }
}
