//! The global allocator.
//!
//! Inside redis-server every allocation goes through Redis's allocator, so filters and counters
//! show up in `used_memory`, count against `maxmemory`, and `MEMORY USAGE` agrees with reality.
//! Outside Redis (unit tests, benches, the plotting tool) the module's API table is never filled
//! in, so the system allocator serves instead. The switch happens once, in `RedisModule_Init`,
//! before any Rust code of the module allocates, so no block crosses from one allocator to the
//! other.
//!
//! The server's `Try` functions serve where it has them (`TryAlloc` since Redis 7.0,
//! `TryCalloc` and `TryRealloc` since 7.4, and Valkey): they return null where the others
//! would abort the server, so a fallible allocation (`try_reserve`, `zeroed`) the host refuses
//! is an error reply. Where a server lacks one, the aborting function serves; calloc is kept
//! for zeroed blocks because a large one then costs no writes (fresh zero pages), and a large
//! one is first asked of the host (`host_grants`), so that a refusal is an error there too.
//!
//! A block larger than the machine's memory and swap is refused on every server
//! (`beyond_machine`): it could never be filled, yet under Linux's default overcommit jemalloc
//! gets its `MAP_NORESERVE` mapping granted, and `used_memory` would then count terabytes the
//! machine does not have (every key evicted under `maxmemory`, the server killed as it fills).
//!
//! Redis's allocator is jemalloc in Debian's redis-server but glibc malloc in some Valkey builds,
//! which only guarantees 16-byte alignment. Layouts that need more (none of ours today) therefore
//! always go to the system allocator: `dealloc` sees the same layout, so it picks the same side.

use redis_module::raw;
use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct ModuleAlloc;

/// The alignment every malloc on x86-64 and aarch64 Linux guarantees.
const MALLOC_ALIGN: usize = 16;

/// Whether a block of `layout` is one the server may move when it defragments (`defrag.rs`):
/// a real block (non-zero size) served by Redis's allocator (alignment up to MALLOC_ALIGN).
pub fn from_redis_allocator(layout: Layout) -> bool {
    layout.size() > 0 && layout.align() <= MALLOC_ALIGN
}

/// Redis's allocator for ordinary layouts once the module is loaded (`function` reads the API
/// table), or `None` for the system one. Miri, which runs the unit tests to check the unsafe
/// code, cannot read the table (an extern static): it always takes the system side.
fn redis_side<F>(layout: Layout, function: impl FnOnce() -> Option<F>) -> Option<F> {
    if layout.align() <= MALLOC_ALIGN && !cfg!(miri) {
        function()
    } else {
        None
    }
}

// SAFETY: every block comes from, and returns to, one allocator chosen by its layout alone
// (`redis_side`), and Redis's malloc family honours GlobalAlloc's contract for alignments up
// to MALLOC_ALIGN (the others go to System).
unsafe impl GlobalAlloc for ModuleAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if beyond_machine(layout.size()) {
            return null_mut();
        }
        // SAFETY: the API table's function pointers are written once, in RedisModule_Init,
        // before any allocation of the module's; the caller upholds GlobalAlloc::alloc's
        // contract, which is also malloc's.
        unsafe {
            match redis_side(layout, || {
                raw::RedisModule_TryAlloc.or(raw::RedisModule_Alloc)
            }) {
                Some(alloc) => alloc(layout.size()).cast(),
                None => System.alloc(layout),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Calloc lets jemalloc hand out fresh zero pages for large filters instead of memset.
        let size = layout.size();
        if beyond_machine(size) {
            return null_mut();
        }
        // SAFETY: as in `alloc`.
        unsafe {
            match redis_side(layout, || raw::RedisModule_Calloc) {
                None => System.alloc_zeroed(layout),
                Some(calloc) => match raw::RedisModule_TryCalloc {
                    Some(try_calloc) => try_calloc(1, size).cast(),
                    // Before Redis 7.4 calloc aborts on a refusal: a large block is asked of
                    // the host first.
                    None if size >= PROBED_BYTES && !host_grants(size) => null_mut(),
                    None => calloc(1, size).cast(),
                },
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout, so from the same side.
        unsafe {
            match redis_side(layout, || raw::RedisModule_Free) {
                Some(free) => free(ptr.cast()),
                None => System.dealloc(ptr, layout),
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if beyond_machine(new_size) {
            return null_mut();
        }
        // SAFETY: `ptr` came from `alloc` with this layout, so from the same side; the
        // alignment does not change.
        unsafe {
            match redis_side(layout, || {
                raw::RedisModule_TryRealloc.or(raw::RedisModule_Realloc)
            }) {
                Some(realloc) => realloc(ptr.cast(), new_size).cast(),
                None => System.realloc(ptr, layout, new_size),
            }
        }
    }
}

/// Blocks from this size on are weighed against the machine (`beyond_machine`), and zeroed ones
/// asked of the host before a server without `TryCalloc` allocates them: a system call pair,
/// small beside writing such a block.
const PROBED_BYTES: usize = 1 << 20;

/// The machine's memory and swap in bytes, once `learn_machine_memory` has read them; 0 (no
/// bound) before, and outside a server.
static MACHINE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Reads the machine's memory and swap (`MemTotal` and `SwapTotal` of /proc/meminfo), which
/// bound every block from then on. Called once the module's allocator serves, before any
/// value exists; a machine without /proc/meminfo keeps no bound.
pub fn learn_machine_memory() {
    let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") else {
        return;
    };
    MACHINE_BYTES.store(machine_bytes(&meminfo).unwrap_or(0), Ordering::Relaxed);
}

/// `MemTotal` plus `SwapTotal` of a /proc/meminfo text, in bytes.
pub fn machine_bytes(meminfo: &str) -> Option<usize> {
    let kib = |field: &str| -> Option<usize> {
        let line = meminfo.lines().find(|l| l.starts_with(field))?;
        let value = line[field.len()..].trim().strip_suffix("kB")?;
        value.trim().parse::<usize>().ok()
    };
    kib("MemTotal:")?
        .checked_add(kib("SwapTotal:").unwrap_or(0))?
        .checked_mul(1024)
}

/// Whether a block of `size` bytes is larger than the machine could ever hold (checked only from
/// `PROBED_BYTES` on: one comparison for every smaller block).
fn beyond_machine(size: usize) -> bool {
    size >= PROBED_BYTES && beyond(size, MACHINE_BYTES.load(Ordering::Relaxed))
}

/// Whether `size` bytes exceed a machine of `machine` bytes (0: unknown, no bound).
fn beyond(size: usize, machine: usize) -> bool {
    machine != 0 && size > machine
}

/// Whether the host would map `bytes` more now, asked as jemalloc asks (an anonymous private
/// mapping with `MAP_NORESERVE`, which the kernel still weighs under `vm.overcommit_memory=2`
/// and an address-space limit bounds). The mapping is made and removed at once, untouched.
#[cfg(target_os = "linux")]
fn host_grants(bytes: usize) -> bool {
    use std::ffi::{c_int, c_long, c_void};
    extern "C" {
        fn mmap(
            addr: *mut c_void,
            len: usize,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            offset: c_long,
        ) -> *mut c_void;
        fn munmap(addr: *mut c_void, len: usize) -> c_int;
    }
    // Linux's values on x86-64 and aarch64 alike.
    const PROT_READ_WRITE: c_int = 0x1 | 0x2;
    const MAP_PRIVATE_ANONYMOUS_NORESERVE: c_int = 0x02 | 0x20 | 0x4000;
    const MAP_FAILED: *mut c_void = !0usize as *mut c_void;
    // SAFETY: a new anonymous mapping at an address of the kernel's choosing, unmapped with
    // its own address and length; no memory of the process is touched.
    unsafe {
        let at = mmap(
            null_mut(),
            bytes,
            PROT_READ_WRITE,
            MAP_PRIVATE_ANONYMOUS_NORESERVE,
            -1,
            0,
        );
        if at == MAP_FAILED {
            return false;
        }
        munmap(at, bytes);
    }
    true
}

#[cfg(not(target_os = "linux"))]
fn host_grants(_bytes: usize) -> bool {
    true
}

/// Element types for which all-zero bytes are a valid value.
///
/// # Safety
/// Implement only for types whose every field is an integer (no references, no niches).
pub unsafe trait Zeroable: Copy {}

// SAFETY: integers; every bit pattern is a value.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for u64 {}

/// `len` zero values, allocated zeroed (calloc: the fresh pages of a large bitmap are not
/// touched, where `resize` would write every byte) and fallibly: None if the allocator refuses.
pub fn zeroed<T: Zeroable>(len: usize) -> Option<Vec<T>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = Layout::array::<T>(len).ok()?;
    // SAFETY: the layout has a non-zero size (`Zeroable` types are integers).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the global allocator made `ptr` with the layout of a Vec<T> of capacity `len`,
    // and its `len` zeroed values are initialised Ts (`Zeroable`).
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// `f` of each item, in a vector with room for `capacity` (at least the items) allocated
/// fallibly: `oom` if the allocator refuses, else `f`'s first error.
pub fn try_map<T, U, E>(
    items: &[T],
    capacity: usize,
    oom: E,
    mut f: impl FnMut(&T) -> Result<U, E>,
) -> Result<Vec<U>, E> {
    let mut out = Vec::new();
    out.try_reserve_exact(capacity.max(items.len()))
        .map_err(|_| oom)?;
    for item in items {
        out.push(f(item)?);
    }
    Ok(out)
}

/// A `Box`, allocated fallibly (`Box::new` aborts when memory runs out).
pub fn try_box<T>(value: T) -> Option<Box<T>> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(value));
    }
    // SAFETY: the layout is non-zero-sized.
    let raw = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) }.cast::<T>())?;
    // SAFETY: freshly allocated for one T with the global allocator and T's layout, which
    // is what `Box::from_raw` frees it with.
    unsafe {
        raw.as_ptr().write(value);
        Some(Box::from_raw(raw.as_ptr()))
    }
}

/// The bytes the allocator really hands out for a request of `bytes`: jemalloc 5's size
/// classes (Debian's redis-server, which accounts `used_memory` by them): 8, then multiples of
/// 16 up to 128, then four classes per doubling (160, 192, 224, 256, 320 …; 1280, 1536 …).
/// Every separate allocation pays its own rounding, which is why small values keep few of
/// them. glibc's malloc (some Valkey builds) rounds differently; this stays an estimate there.
pub const fn size_class(bytes: u64) -> u64 {
    match bytes {
        0 => 0,
        1..=8 => 8,
        9..=128 => bytes.next_multiple_of(16),
        _ => {
            // The largest power of two below `bytes`, split in four steps: a power of two,
            // so rounded up by a mask (every insert into a list asks, and a divide is slow).
            let step = 1u64 << (61 - (bytes - 1).leading_zeros());
            (bytes + step - 1) & !(step - 1)
        }
    }
}

/// The largest size class of at most `bytes` (0 below 8): how much of `bytes` one
/// allocation can hold without rounding.
pub fn class_at_most(bytes: u64) -> u64 {
    match bytes {
        0..=7 => 0,
        8..=15 => 8,
        16..=128 => bytes & !15,
        _ => {
            // The largest power of two at most `bytes`, split in four steps.
            let step = 1u64 << (61 - bytes.leading_zeros());
            bytes & !(step - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_bytes_are_memory_and_swap() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n\
                       SwapTotal:       1024000 kB\nSwapFree:        1024000 kB\n";
        assert_eq!(
            machine_bytes(meminfo),
            Some((24_576_000 + 1_024_000) * 1024)
        );
        let no_swap = "MemTotal:       8000 kB\n";
        assert_eq!(machine_bytes(no_swap), Some(8000 * 1024));
        for bad in ["", "MemTotal: lots\n", "MemTotal: 8000 MB\n"] {
            assert_eq!(machine_bytes(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn blocks_past_a_known_machine_are_beyond_it() {
        assert!(!beyond(usize::MAX, 0), "an unknown machine bounds nothing");
        assert!(!beyond(64 << 20, 64 << 20));
        assert!(beyond((64 << 20) + 1, 64 << 20));
        // Outside a server nothing has read the machine: no block is bounded.
        assert!(!beyond_machine(usize::MAX));
    }

    #[test]
    fn jemalloc_size_classes() {
        let cases = [
            (0, 0),
            (1, 8),
            (8, 8),
            (9, 16),
            (24, 32),
            (48, 48),
            (120, 128),
            (128, 128),
            (129, 160),
            (257, 320),
            (897, 1024),
            (1025, 1280),
            (2152, 2560),
            (4097, 5120),
            (14_337, 16_384),
            (16_385, 20_480),
            ((1 << 30) + 1, (1 << 30) + (1 << 28)),
        ];
        for (bytes, class) in cases {
            assert_eq!(size_class(bytes), class, "{bytes}");
        }
    }

    proptest::proptest! {
        /// Above 128 bytes, a size rounds up to a multiple of a quarter of the largest power of
        /// two below it (the mask's answer is the division's).
        #[test]
        fn sizes_round_up_to_a_quarter_of_their_power_of_two(bytes in 129u64..1 << 50) {
            let base = 1u64 << (63 - (bytes - 1).leading_zeros());
            proptest::prop_assert_eq!(size_class(bytes), bytes.next_multiple_of(base / 4));
        }

        /// `class_at_most` is a class, at most the bytes, and the next class is above them.
        #[test]
        fn the_largest_class_within_bytes(bytes in 0u64..1 << 50) {
            let class = class_at_most(bytes);
            proptest::prop_assert!(class <= bytes);
            proptest::prop_assert_eq!(size_class(class), class);
            proptest::prop_assert!(size_class(class + 1) > bytes);
        }
    }
}
