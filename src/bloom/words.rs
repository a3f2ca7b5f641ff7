//! `Words`: a filter's bit array as a zeroed, fixed-length run of u64 words with a chosen
//! alignment, held in one allocation when small and in fixed-size segments when large.
//!
//! Alignment. The blocked layout (`blocked.rs`) relies on each 64-byte block being exactly one
//! cache line, so its arrays are 64-byte aligned; a `Vec<u64>` only promises 8, hence this type.
//! The standard layout keeps 8-byte alignment. Every array comes from Redis's allocator, so
//! that it counts in `used_memory` and against `maxmemory`: `alloc.rs` sends layouts aligned
//! beyond 16 bytes to the system allocator, so the alignment is made here, from blocks of
//! ordinary (8-byte) alignment. The exact size is asked for first: jemalloc puts a request that
//! is a multiple of 64 bytes in a size class that is one too, in page-aligned slabs (or
//! page-aligned extents when large), so it comes back 64-byte aligned and nothing is wasted.
//! Otherwise (glibc's malloc in some Valkey builds) that block is freed and one `align − 8`
//! bytes larger is aligned by hand; the original pointer and size are kept to free it.
//!
//! Segments. jemalloc rounds a large allocation up to one of four size classes per doubling
//! (… 256, 320, 384, 448, 512 MiB …), so one allocation of n bytes wastes up to a quarter of n:
//! a 0.001 / 200M filter's 372.6 MiB of bits took 384 MiB, its blocked twin's 408.5 MiB took
//! 448 MiB, and 257 MiB took 320 MiB. An array larger than `SEGMENT_BYTES` (16 MiB) is
//! therefore made of 16 MiB segments, each its own allocation (16 MiB is a size class: no
//! rounding), and a last, shorter one, the only one rounded. The last segment is at most
//! 16 MiB, whose classes are 2 MiB apart, so an array of any size wastes less than 2 MiB
//! (< 0.6% of a 372 MiB filter, < 12.5% of one just above 16 MiB), against up to 25% before;
//! the segment table and the segments' records add 48 bytes a segment.
//! Arrays of at most 16 MiB stay one allocation, as they always were (a 0.01 / 10M filter's
//! 11.4 MiB among them). 16 rather than 64 MiB: the waste bound is 4× smaller and arrays of
//! 16–64 MiB are segmented too; the segment table, one pointer per segment, stays small (24
//! entries, 192 bytes, for 372 MiB; 2 KiB for a 4 GiB filter), so it stays in the L1 cache
//! beside the random lines a lookup misses on. Segments are whole multiples of 64 bytes and
//! each is aligned like the whole array, so a blocked filter's 64-byte blocks never straddle
//! two segments.
//!
//! Access. Word i of a segmented array is word `i % S` of segment `i / S` (S words per segment,
//! a power of two: a shift and a mask). The probe loops (`filter.rs`, `blocked.rs`) are generic
//! over `WordRead`/`WordWrite`, implemented by a slice (one allocation, the code as before) and
//! by `Segments` (one more load, from the table, per probe); `BitArray` picks one per item.
//! Byte ranges (`read_bytes`/`write_bytes`, the codec's data chunks) are split at segment ends,
//! which are whole words, so the byte stream of an array is the same however it is held.
//!
//! Allocation is fallible and all-or-nothing: an array whose every segment cannot be allocated
//! is an error (the segments already allocated are freed), never an abort. `allocated_bytes`
//! reports what the allocator really took: inside Redis its own figure for each allocation
//! (`alloc::allocated_size`: jemalloc's size class, or glibc's chunk for a Valkey built with
//! it, where a blocked segment aligned by hand costs 16 MiB and a page, not jemalloc's 20 MiB
//! class), the table's by its size class.

use crate::alloc::{allocated_size, size_class};
use crate::chunks::{bytes_into_words, words_to_bytes};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// Bytes of a segment of a large array (a jemalloc size class, a multiple of 64).
pub const SEGMENT_BYTES: usize = 16 << 20;
const SEGMENT_WORDS: usize = SEGMENT_BYTES / 8;

/// One allocation: `len` words, `align`-aligned, inside the block at `base` of `allocated`
/// bytes (0 when `len` is 0: nothing allocated), for which the allocator took `class` bytes.
struct Run {
    ptr: NonNull<u64>,
    len: usize,
    base: NonNull<u8>,
    allocated: usize,
    class: u64,
}

impl Run {
    const EMPTY: Run = Run {
        ptr: NonNull::dangling(),
        len: 0,
        base: NonNull::dangling(),
        allocated: 0,
        class: 0,
    };

    /// `len` (≥ 1) zero words aligned to `align` (a power of two ≥ 8), or None if the
    /// allocator refuses. Zeroed allocation lets the allocator hand out fresh pages of a large
    /// filter without touching them.
    fn zeroed(len: usize, align: usize) -> Option<Self> {
        let bytes = len.checked_mul(8)?;
        // The exact size first (aligned enough under jemalloc), else with room to align.
        for allocated in [bytes, bytes.checked_add(align - 8)?] {
            let layout = layout(allocated)?;
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
                    base,
                    allocated,
                    class: allocated_size(base, layout),
                });
            }
            // SAFETY: just allocated with this layout.
            unsafe { dealloc(base.as_ptr(), layout) };
        }
        None
    }

    fn words(&self) -> &[u64] {
        // SAFETY: ptr points at len initialised (zeroed or written) words, or is dangling
        // with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `words`, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.allocated > 0 {
            // SAFETY: `base` was allocated in `zeroed` with this very layout (valid then).
            unsafe { dealloc(self.base.as_ptr(), layout(self.allocated).expect("valid")) };
        }
    }
}

/// The layout of an allocation of `bytes`: u64 alignment, which Redis's allocator serves.
fn layout(bytes: usize) -> Option<Layout> {
    Layout::from_size_align(bytes, 8).ok()
}

/// A `Vec` of exactly `len` elements made by `make`, allocated fallibly; None if the allocator
/// or `make` refuses (what was made is dropped).
fn try_collect<T>(len: usize, make: impl FnMut(usize) -> Option<T>) -> Option<Box<[T]>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).ok()?;
    for item in (0..len).map(make) {
        out.push(item?);
    }
    Some(out.into_boxed_slice())
}

enum Storage {
    /// An array of at most one segment (or empty).
    One(Run),
    /// Segments of 2^shift words, the last one possibly shorter; `table` holds their first
    /// words' addresses, the lookups' index (the runs own the memory).
    Segments {
        table: Box<[NonNull<u64>]>,
        runs: Box<[Run]>,
        shift: u32,
    },
}

pub struct Words {
    len: usize,
    align: usize,
    storage: Storage,
    /// What the allocations take, by their size classes; kept because every write asks for it
    /// (`value::modify`).
    class: u64,
}

// SAFETY: Words owns its blocks exclusively, like Box<[u64]>.
unsafe impl Send for Words {}
// SAFETY: shared access is read-only, writes need `&mut`, like Box<[u64]>.
unsafe impl Sync for Words {}

impl Words {
    /// `len` zero words aligned to `align` bytes (a power of two ≥ 8), in segments of
    /// `SEGMENT_BYTES` if there are more; None if the allocator refuses.
    pub fn zeroed(len: usize, align: usize) -> Option<Self> {
        Self::zeroed_in(len, align, SEGMENT_WORDS)
    }

    /// `zeroed` with segments of `segment` words (a power of two, at least 8 and a multiple of
    /// `align`): tests use small ones to cross many segment ends cheaply.
    pub fn zeroed_in(len: usize, align: usize, segment: usize) -> Option<Self> {
        let align = align.max(8);
        if !align.is_power_of_two() || !segment.is_power_of_two() || segment < align.max(64) / 8 {
            return None;
        }
        let storage = if len == 0 {
            Storage::One(Run::EMPTY)
        } else if len <= segment {
            Storage::One(Run::zeroed(len, align)?)
        } else {
            let count = len.div_ceil(segment);
            let runs = try_collect(count, |i| {
                Run::zeroed(segment.min(len - i * segment), align)
            })?;
            let table = try_collect(count, |i| Some(runs[i].ptr))?;
            Storage::Segments {
                table,
                runs,
                shift: segment.trailing_zeros(),
            }
        };
        let class = match &storage {
            Storage::One(run) => run.class,
            Storage::Segments { runs, .. } => {
                runs.iter().map(|r| r.class).sum::<u64>() + table_bytes(runs.len())
            }
        };
        Some(Self {
            len,
            align,
            storage,
            class,
        })
    }

    /// Bytes the allocator hands out for these words (each allocation by its size class,
    /// alignment room and the segment table included).
    pub fn allocated_bytes(&self) -> u64 {
        self.class
    }

    /// The words for reading, as one slice or as segments.
    #[inline(always)]
    pub fn view(&self) -> View<'_> {
        match &self.storage {
            Storage::One(run) => View::One(run.words()),
            Storage::Segments { table, shift, .. } => View::Segments(Segments {
                table,
                shift: *shift,
                len: self.len,
                _words: PhantomData,
            }),
        }
    }

    /// The words for writing, as one slice or as segments.
    #[inline(always)]
    pub fn view_mut(&mut self) -> ViewMut<'_> {
        match &mut self.storage {
            Storage::One(run) => ViewMut::One(run.words_mut()),
            Storage::Segments { table, shift, .. } => ViewMut::Segments(SegmentsMut(Segments {
                table,
                shift: *shift,
                len: self.len,
                _words: PhantomData,
            })),
        }
    }

    /// The allocations' words in order (their concatenation is the array).
    fn pieces(&self) -> impl Iterator<Item = &[u64]> {
        let runs = match &self.storage {
            Storage::One(run) => std::slice::from_ref(run),
            Storage::Segments { runs, .. } => runs,
        };
        runs.iter().map(Run::words)
    }

    fn pieces_mut(&mut self) -> impl Iterator<Item = &mut [u64]> {
        let runs = match &mut self.storage {
            Storage::One(run) => std::slice::from_mut(run),
            Storage::Segments { runs, .. } => runs,
        };
        runs.iter_mut().map(Run::words_mut)
    }

    /// Appends bytes `start..start + len` of the array read as little-endian words (the
    /// codec's data); the range lies within the array.
    pub fn read_bytes(&self, start: usize, len: usize, out: &mut Vec<u8>) {
        let end = start + len;
        let mut at = 0;
        for piece in self.pieces() {
            let piece_end = at + piece.len() * 8;
            if piece_end > start && at < end {
                let a = start.max(at);
                words_to_bytes(piece, a - at, end.min(piece_end) - a, out);
            }
            at = piece_end;
        }
    }

    /// Writes `src` at byte offset `start` of the array (little-endian words); the range lies
    /// within the array.
    pub fn write_bytes(&mut self, start: usize, src: &[u8]) {
        let end = start + src.len();
        let mut at = 0;
        for piece in self.pieces_mut() {
            let piece_end = at + piece.len() * 8;
            if piece_end > start && at < end {
                let a = start.max(at);
                bytes_into_words(piece, a - at, &src[a - start..end.min(piece_end) - start]);
            }
            at = piece_end;
        }
    }

    /// A copy, allocated fallibly.
    pub fn try_clone(&self) -> Option<Self> {
        let segment = match &self.storage {
            Storage::One(_) => SEGMENT_WORDS.max(self.len.next_power_of_two()),
            Storage::Segments { shift, .. } => 1 << shift,
        };
        let mut copy = Self::zeroed_in(self.len, self.align, segment)?;
        for (to, from) in copy.pieces_mut().zip(self.pieces()) {
            to.copy_from_slice(from);
        }
        Some(copy)
    }
}

/// Bytes the allocator hands out for an array of `len` words made by `Words::zeroed`, when
/// its allocations come back aligned (jemalloc; known before allocating).
pub fn planned_bytes(len: usize) -> u64 {
    if len <= SEGMENT_WORDS {
        return size_class(len as u64 * 8);
    }
    let (full, rest) = (len / SEGMENT_WORDS, len % SEGMENT_WORDS);
    full as u64 * SEGMENT_BYTES as u64
        + size_class(rest as u64 * 8)
        + table_bytes(len.div_ceil(SEGMENT_WORDS))
}

/// Bytes of the segment table and the runs' records of `count` segments.
fn table_bytes(count: usize) -> u64 {
    size_class((count * std::mem::size_of::<NonNull<u64>>()) as u64)
        + size_class((count * std::mem::size_of::<Run>()) as u64)
}

impl Clone for Words {
    /// Infallible clone for tests and tools; Redis paths use `try_clone`.
    fn clone(&self) -> Self {
        self.try_clone()
            .expect("out of memory cloning filter words")
    }
}

impl PartialEq for Words {
    /// The same words, however each array is held.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.pieces().flatten().eq(other.pieces().flatten())
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pieces = self.pieces().count();
        write!(
            f,
            "Words({} × u64, align {}, {pieces} allocation(s))",
            self.len, self.align
        )
    }
}

/// A read-only view of an array's words.
pub enum View<'a> {
    One(&'a [u64]),
    Segments(Segments<'a>),
}

/// A writable view of an array's words.
pub enum ViewMut<'a> {
    One(&'a mut [u64]),
    Segments(SegmentsMut<'a>),
}

/// The words of a segmented array: word i is word `i & mask` of segment `i >> shift`.
#[derive(Clone, Copy)]
pub struct Segments<'a> {
    table: &'a [NonNull<u64>],
    shift: u32,
    len: usize,
    _words: PhantomData<&'a [u64]>,
}

/// `Segments`, borrowed exclusively.
pub struct SegmentsMut<'a>(Segments<'a>);

/// 64-byte lines of 8 words (blocked filters' blocks; segments hold whole lines).
pub type Line = [u64; 8];

/// Word access the probe loops are generic over.
pub trait WordRead {
    /// Number of words.
    fn words(&self) -> usize;
    /// Word i (panics if i is out of range, like slice indexing).
    fn word(&self, i: usize) -> u64;
    /// Word i, if in range (for prefetching).
    fn get(&self, i: usize) -> Option<&u64>;
    /// Line `line` (words 8·line..8·line + 8; panics if out of range).
    fn line(&self, line: usize) -> &Line;
}

/// Word access for writing.
pub trait WordWrite: WordRead {
    fn word_mut(&mut self, i: usize) -> &mut u64;
    fn line_mut(&mut self, line: usize) -> &mut Line;
}

impl WordRead for [u64] {
    #[inline(always)]
    fn words(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        self[i]
    }
    #[inline(always)]
    fn get(&self, i: usize) -> Option<&u64> {
        <[u64]>::get(self, i)
    }
    #[inline(always)]
    fn line(&self, line: usize) -> &Line {
        (&self[line * 8..line * 8 + 8])
            .try_into()
            .expect("eight words")
    }
}

impl WordWrite for [u64] {
    #[inline(always)]
    fn word_mut(&mut self, i: usize) -> &mut u64 {
        &mut self[i]
    }
    #[inline(always)]
    fn line_mut(&mut self, line: usize) -> &mut Line {
        (&mut self[line * 8..line * 8 + 8])
            .try_into()
            .expect("eight words")
    }
}

impl Segments<'_> {
    /// The address of word i < len.
    #[inline(always)]
    fn at(&self, i: usize) -> *mut u64 {
        debug_assert!(i < self.len);
        // SAFETY: the callers check i < len. The table has ⌈len / 2^shift⌉ entries, so
        // i >> shift indexes one, and every segment but the last has 2^shift words, the last
        // len − (its index << shift): word i & mask lies inside it.
        unsafe {
            self.table
                .get_unchecked(i >> self.shift)
                .as_ptr()
                .add(i & ((1 << self.shift) - 1))
        }
    }
}

impl WordRead for Segments<'_> {
    #[inline(always)]
    fn words(&self) -> usize {
        self.len
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        assert!(i < self.len, "word out of range");
        // SAFETY: in range (above, and `at`), and shared access is read-only.
        unsafe { *self.at(i) }
    }
    #[inline(always)]
    fn get(&self, i: usize) -> Option<&u64> {
        // SAFETY: in range, as in `word`.
        (i < self.len).then(|| unsafe { &*self.at(i) })
    }
    #[inline(always)]
    fn line(&self, line: usize) -> &Line {
        assert!(line < self.len / 8, "line out of range");
        // SAFETY: the line's first word is in range, and segments hold whole lines (their
        // length is a multiple of 8 words, the array's too when it has whole lines), so its 8
        // words are in the same segment; u64 alignment suffices for [u64; 8].
        unsafe { &*self.at(line * 8).cast::<Line>() }
    }
}

impl WordRead for SegmentsMut<'_> {
    #[inline(always)]
    fn words(&self) -> usize {
        self.0.len
    }
    #[inline(always)]
    fn word(&self, i: usize) -> u64 {
        self.0.word(i)
    }
    #[inline(always)]
    fn get(&self, i: usize) -> Option<&u64> {
        self.0.get(i)
    }
    #[inline(always)]
    fn line(&self, line: usize) -> &Line {
        self.0.line(line)
    }
}

impl WordWrite for SegmentsMut<'_> {
    #[inline(always)]
    fn word_mut(&mut self, i: usize) -> &mut u64 {
        assert!(i < self.0.len, "word out of range");
        // SAFETY: in range, and the view was made from `&mut Words`: access is exclusive.
        unsafe { &mut *self.0.at(i) }
    }
    #[inline(always)]
    fn line_mut(&mut self, line: usize) -> &mut Line {
        assert!(line < self.0.len / 8, "line out of range");
        // SAFETY: as in `line`, and the view was made from `&mut Words`.
        unsafe { &mut *self.0.at(line * 8).cast::<Line>() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zeroed_aligned_and_owned() {
        for (len, align) in [(0usize, 64usize), (1, 8), (8, 64), (1000, 64), (3, 8)] {
            let mut w = Words::zeroed(len, align).unwrap();
            assert_eq!(w.len, len);
            assert!(w.pieces().flatten().all(|x| *x == 0));
            if len > 0 {
                let ViewMut::One(words) = w.view_mut() else {
                    panic!("one allocation")
                };
                assert_eq!(words.as_ptr() as usize % align, 0);
                words[len - 1] = 7;
            }
            let c = w.try_clone().unwrap();
            assert_eq!(c, w);
            // Never less than the words, and at most the alignment room more.
            let bytes = len as u64 * 8;
            assert!(w.allocated_bytes() >= size_class(bytes));
            assert!(w.allocated_bytes() <= size_class(bytes + align as u64 - 8));
            assert!(w.allocated_bytes() >= planned_bytes(len));
        }
        assert!(Words::zeroed(usize::MAX / 4, 64).is_none());
        assert!(Words::zeroed(usize::MAX / 8 - 2, 64).is_none());
        // Segments too large for memory: refused whole, nothing leaked.
        assert!(Words::zeroed_in(usize::MAX / 16, 64, 1 << 40).is_none());
        // Segments must hold whole 64-byte lines.
        assert!(Words::zeroed_in(100, 8, 4).is_none());
        assert!(Words::zeroed_in(100, 64, 12).is_none());
    }

    #[test]
    fn aligned_words_use_ordinary_layouts() {
        // alloc.rs sends layouts aligned beyond 16 bytes to the system allocator, invisible to
        // used_memory: every allocation here must be 8-byte aligned.
        for len in [1usize, 7, 8, 9, 100, 4096] {
            let w = Words::zeroed_in(len, 64, 64).unwrap();
            assert!(w.pieces().count() >= len / 64);
            let runs = match &w.storage {
                Storage::One(run) => std::slice::from_ref(run),
                Storage::Segments { runs, .. } => runs,
            };
            for run in runs.iter() {
                assert!(layout(run.allocated).unwrap().align() <= 16);
                assert_eq!(run.ptr.as_ptr() as usize % 64, 0);
            }
        }
    }

    #[test]
    fn large_arrays_are_segments_of_16_mib() {
        // One word more than a segment: a full segment and a one-word one.
        let w = Words::zeroed(SEGMENT_WORDS + 1, 64).unwrap();
        let lens: Vec<usize> = w.pieces().map(<[u64]>::len).collect();
        assert_eq!(lens, [SEGMENT_WORDS, 1]);
        assert!(w.allocated_bytes() >= planned_bytes(SEGMENT_WORDS + 1));
        assert_eq!(
            planned_bytes(SEGMENT_WORDS + 1),
            SEGMENT_BYTES as u64 + 8 + table_bytes(2)
        );
        assert_eq!(table_bytes(2), 16 + 80);
        // At most one segment: one allocation, as before segments.
        let w = Words::zeroed(SEGMENT_WORDS, 8).unwrap();
        assert!(matches!(w.view(), View::One(s) if s.len() == SEGMENT_WORDS));
        assert_eq!(planned_bytes(SEGMENT_WORDS), SEGMENT_BYTES as u64);
    }

    #[test]
    fn planned_bytes_waste_less_than_2_mib() {
        // The 0.001 / 200M filters: 390,738,528 and 428,318,208 bytes of bits.
        let mib = 1u64 << 20;
        for (bytes, old) in [
            (390_738_528u64, 384 * mib),
            (428_318_208, 448 * mib),
            (257 * mib, 320 * mib),
            (16 * mib + 8, 20 * mib),
        ] {
            assert_eq!(size_class(bytes), old);
            let planned = planned_bytes((bytes / 8) as usize);
            assert!(
                planned >= bytes && planned < bytes + 2 * mib,
                "{bytes}: {planned}"
            );
        }
        // Every size: the rounding stays below 2 MiB, the table apart (48 bytes a segment).
        for len in (1..=64usize).map(|i| i * (5 << 20) + 3) {
            let table = table_bytes(len.div_ceil(SEGMENT_WORDS));
            let rounding =
                planned_bytes(len) - len as u64 * 8 - table * u64::from(len > SEGMENT_WORDS);
            assert!(rounding < 2 * mib, "{len} words: {rounding}");
        }
    }

    /// Word i of a test array.
    fn pattern(i: usize) -> u64 {
        (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// Every word and line of `v` reads as `expected`, lines aligned to `align`.
    fn check_reads<W: WordRead + ?Sized>(v: &W, expected: &[u64], align: usize) {
        let len = expected.len();
        assert_eq!(v.words(), len);
        for (i, x) in expected.iter().enumerate() {
            assert_eq!(v.word(i), *x);
            assert_eq!(v.get(i), Some(x));
        }
        assert_eq!(v.get(len), None);
        for line in 0..len / 8 {
            assert_eq!(v.line(line)[..], expected[line * 8..line * 8 + 8]);
            assert_eq!(v.line(line).as_ptr() as usize % align, 0);
        }
    }

    #[test]
    fn every_word_and_line_at_every_segment_end() {
        // Segments of 16 words (two lines); arrays ending inside, at and past segment ends.
        for len in [8usize, 16, 24, 32, 40, 200, 203] {
            for align in [8usize, 64] {
                let mut w = Words::zeroed_in(len, align, 16).unwrap();
                let expected: Vec<u64> = (0..len).map(pattern).collect();
                match w.view_mut() {
                    ViewMut::One(words) => {
                        assert!(len <= 16);
                        (0..len).for_each(|i| *words.word_mut(i) = pattern(i));
                    }
                    ViewMut::Segments(mut s) => {
                        assert!(len > 16);
                        (0..len).for_each(|i| *s.word_mut(i) = pattern(i));
                    }
                }
                match w.view() {
                    View::One(s) => check_reads(s, &expected, align),
                    View::Segments(s) => check_reads(&s, &expected, align),
                }
                // Every byte range touching a segment end reads and writes like a slice.
                let bytes: Vec<u8> = expected.iter().flat_map(|x| x.to_le_bytes()).collect();
                for end in (0..=len).step_by(16).map(|w| w * 8) {
                    for start in end.saturating_sub(9)..(end + 9).min(len * 8) {
                        for stop in (start + 1).max(end.saturating_sub(3))..=(end + 11).min(len * 8)
                        {
                            let mut out = vec![0xaa];
                            w.read_bytes(start, stop - start, &mut out);
                            assert_eq!(out[1..], bytes[start..stop], "{len}: {start}..{stop}");
                            let mut copy = Words::zeroed_in(len, align, 16).unwrap();
                            copy.write_bytes(0, &bytes);
                            let ones = vec![0xff; stop - start];
                            copy.write_bytes(start, &ones);
                            let mut all = Vec::new();
                            copy.read_bytes(0, len * 8, &mut all);
                            let mut want = bytes.clone();
                            want[start..stop].fill(0xff);
                            assert_eq!(all, want);
                        }
                    }
                }
                let c = w.try_clone().unwrap();
                assert_eq!(c, w);
                assert_eq!(c.pieces().count(), w.pieces().count());
            }
        }
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn segments_refuse_words_past_the_end() {
        let w = Words::zeroed_in(40, 8, 16).unwrap();
        let View::Segments(s) = w.view() else {
            panic!("segments")
        };
        s.word(40);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn segments_refuse_lines_past_the_end() {
        let w = Words::zeroed_in(44, 8, 16).unwrap();
        let View::Segments(s) = w.view() else {
            panic!("segments")
        };
        s.line(5);
    }

    proptest! {
        #[test]
        fn segmented_arrays_equal_one_allocation(
            len in 1usize..300,
            shift in 3u32..7,
            writes in proptest::collection::vec((0usize..2400, any::<u64>()), 0..40),
        ) {
            let mut one = Words::zeroed_in(len, 64, 512).unwrap();
            let mut seg = Words::zeroed_in(len, 64, 1 << shift).unwrap();
            for (at, value) in writes {
                let at = at % (len * 8);
                let src = value.to_le_bytes();
                let src = &src[..(len * 8 - at).min(8)];
                one.write_bytes(at, src);
                seg.write_bytes(at, src);
            }
            prop_assert_eq!(&one, &seg);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            one.read_bytes(0, len * 8, &mut a);
            seg.read_bytes(0, len * 8, &mut b);
            prop_assert_eq!(a, b);
        }
    }
}
