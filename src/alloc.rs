//! The global allocator.
//!
//! Inside redis-server every allocation goes through Redis's allocator, so filters and counters
//! show up in `used_memory`, count against `maxmemory`, and `MEMORY USAGE` agrees with reality.
//! Outside Redis (unit tests, benches, the plotting tool) the module's API table is never filled
//! in, so the system allocator serves instead. The switch happens once, in `RedisModule_Init`,
//! before any Rust code of the module allocates, so no block crosses from one allocator to the
//! other.

use redis_module::raw;
use std::alloc::{GlobalAlloc, Layout, System};

pub struct ModuleAlloc;

/// jemalloc aligns each size class to its size; rounding the size up to the alignment is how the
/// redis-module crate gets aligned blocks from `RedisModule_Alloc`, and it is what we do too.
fn rounded(layout: Layout) -> usize {
    (layout.size() + layout.align() - 1) & !(layout.align() - 1)
}

unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match raw::RedisModule_Alloc {
            Some(alloc) => alloc(rounded(layout)).cast(),
            None => System.alloc(layout),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Calloc lets jemalloc hand out fresh zero pages for large filters instead of memset.
        match raw::RedisModule_Calloc {
            Some(calloc) => calloc(1, rounded(layout)).cast(),
            None => System.alloc_zeroed(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match raw::RedisModule_Free {
            Some(free) => free(ptr.cast()),
            None => System.dealloc(ptr, layout),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match raw::RedisModule_Realloc {
            Some(realloc) => {
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                realloc(ptr.cast(), rounded(new_layout)).cast()
            }
            None => System.realloc(ptr, layout, new_size),
        }
    }
}
