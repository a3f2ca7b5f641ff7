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
//! (… 256, 320, 384, 448, 512 MiB …), so one allocation of n bytes would waste up to a quarter
//! of n: a 0.001 / 200M filter's 372.6 MiB of bits would take 384 MiB, its blocked twin's
//! 408.5 MiB 448 MiB, and 257 MiB 320 MiB. An array larger than `SEGMENT_BYTES` (16 MiB) is
//! therefore cut in 16 MiB segments (16 MiB is a size class), and only its last, shorter one
//! is rounded. That one is at most 16 MiB, whose classes are 2 MiB apart, so an array of any
//! size wastes less than 2 MiB (< 0.6% of a 372 MiB filter, < 12.5% of one just above 16 MiB),
//! where one allocation wastes up to 25%; the segment table and the allocations' records add
//! 8 bytes a segment and 24 an allocation. Arrays of at most 16 MiB stay one allocation (a
//! 0.01 / 10M filter's 11.4 MiB among them). Segments are whole multiples of 64 bytes and each
//! is aligned like the whole array, so a blocked filter's 64-byte blocks never straddle two.
//!
//! The head. A segmented array's first segments are one allocation, its *head*: as many whole
//! segments as make the largest size class they can (320 MiB of a 372.6 MiB array, 256 MiB of
//! 300, all of a 384 MiB one), so the head is never rounded either; each later segment is an
//! allocation of its own. An RDB save writes each allocation as one string, which a load
//! keeps as it is (`adopt`). `DUMP` builds its payload in one buffer that Redis enlarges at
//! each string by the string's length plus 1 MiB, moving it to fresh memory most times; past
//! the head it lies in the class above the head's, which holds the whole array from four
//! segments on (the segments after the head are fewer than a class step), so it is enlarged
//! once, as for RedisBloom's one string of the whole array, where 16 MiB strings enlarged it
//! at nearly every one (docs/BENCHMARKS.md, "Persistence of a big filter").
//!
//! Access. Word i of a segmented array is word `i % S` of segment `i / S` (S = 2^21 words, a
//! power of two: a shift, and the table's entry; the entries of the head's segments point
//! into the head). The table, one pointer per segment, stays small, so it stays in the L1
//! cache beside the random lines a lookup misses on. The probe loops
//! (`filter.rs`, `blocked.rs`) are generic over `WordRead`/`WordWrite`, implemented by a slice
//! (one allocation) and by `Segments`; `BitArray` picks one per item.
//! Byte ranges (`read_bytes`/`write_bytes`, the codec's data chunks) are split at segment ends,
//! which are whole words, so the byte stream of an array is the same however it is held.
//! Unit tests use 512-byte segments, so every array of theirs above 64 words is segmented
//! (and, as in the server, has a head from two segments on).
//!
//! Allocation is fallible and all-or-nothing: an array whose every segment cannot be allocated
//! is an error (the segments already allocated are freed), never an abort. `memory_bytes`
//! reports each allocation by jemalloc's size class of its words' bytes (`alloc::size_class`,
//! exact under Debian's redis-server, where the exact request is always aligned enough): a
//! function of the array alone, so a value reports the same size on a master, its replicas and
//! after a reload, whatever the allocator. Under glibc's malloc (a Valkey built with libc) the
//! real figure differs a little: its chunk headers, a page when a request is served by mmap,
//! and the room to align a blocked array by hand when the exact request was not aligned.

use super::huge_pages;
use crate::core::alloc::{class_at_most, size_class, try_box};
use crate::core::chunks::{bytes_into_words, words_as_le_bytes, words_to_bytes};
use crate::core::defrag::Defrag;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::marker::PhantomData;
use std::ops::Range;
use std::ptr::NonNull;

/// Words of a segment in the server: 16 MiB (a jemalloc size class, a multiple of 64 bytes).
pub const SERVER_SEGMENT_WORDS: usize = 2 << 20;
/// Words of a segment: the server's, 512 bytes in unit tests so that their arrays (every one
/// above 64 words) cross many segment ends.
const SEGMENT_WORDS: usize = if cfg!(test) { 64 } else { SERVER_SEGMENT_WORDS };
/// `SEGMENT_WORDS` is `2^SEGMENT_SHIFT`: a word's segment is its index shifted.
const SEGMENT_SHIFT: u32 = SEGMENT_WORDS.trailing_zeros();
/// Bytes of a segment.
pub const SEGMENT_BYTES: usize = SEGMENT_WORDS * 8;

/// How an array of more than one segment is cut into allocations: its head, `head` segments
/// of `segment` words (the largest run of whole segments whose bytes are a size class), then
/// one allocation a segment, the last possibly shorter. A function of the length alone, so a
/// value is held (and reports its memory) the same on a master, its replicas and after a
/// reload.
#[derive(Clone, Copy)]
struct Cut {
    len: usize,
    segment: usize,
    head: usize,
}

impl Cut {
    /// The cut of `len` words (more than `segment`, a power of two whose bytes are a size
    /// class) in segments of `segment` words.
    fn in_segments(len: usize, segment: usize) -> Cut {
        let whole = (len / segment) as u64 * segment as u64;
        // At least one segment, itself a class.
        let head = (class_at_most(whole.saturating_mul(8)) / (segment as u64 * 8)) as usize;
        Cut { len, segment, head }
    }

    /// The cut of `len` words in the server's segments (the tests' in unit tests).
    fn of(len: usize) -> Cut {
        Cut::in_segments(len, SEGMENT_WORDS)
    }

    fn segments(&self) -> usize {
        self.len.div_ceil(self.segment)
    }

    fn allocations(&self) -> usize {
        1 + self.segments() - self.head
    }

    /// The words of allocation `a`.
    fn allocation(&self, a: usize) -> Range<usize> {
        let first = if a == 0 { 0 } else { self.head + a - 1 };
        let last = if a == 0 { self.head } else { first + 1 };
        first * self.segment..(last * self.segment).min(self.len)
    }

    /// The allocation holding segment `s`.
    fn allocation_of(&self, s: usize) -> usize {
        s.saturating_sub(self.head - 1)
    }
}

/// One allocation: words `align`-aligned at `ptr`, inside the block at `base` of `allocated`
/// bytes (0 when there are no words: nothing allocated). How many words is the owner's to
/// know: a `Words` is small in every key that has a bit array.
struct Run {
    ptr: NonNull<u64>,
    base: NonNull<u8>,
    allocated: usize,
}

impl Run {
    const EMPTY: Run = Run {
        ptr: NonNull::dangling(),
        base: NonNull::dangling(),
        allocated: 0,
    };

    /// `len` (≥ 1) zero words aligned to `align` (a power of two ≥ 8), and the bytes the
    /// allocator took for them, or None if the allocator refuses. Zeroed allocation lets the
    /// allocator hand out fresh pages of a large filter without touching them.
    fn zeroed(len: usize, align: usize) -> Option<(Self, u64)> {
        let bytes = len.checked_mul(8)?;
        // The exact size first (aligned enough under jemalloc), else with room to align.
        for allocated in [bytes, bytes.checked_add(align - 8)?] {
            let layout = layout(allocated)?;
            // SAFETY: the layout is non-zero-sized.
            let base = NonNull::new(unsafe { alloc_zeroed(layout) })?;
            huge_pages::advise(base, allocated);
            let offset = base.as_ptr().align_offset(align);
            if offset
                .checked_add(bytes)
                .is_some_and(|end| end <= allocated)
            {
                // SAFETY: offset + len·8 ≤ allocated: the words lie inside the allocation.
                let ptr = unsafe { base.add(offset) }.cast::<u64>();
                let run = Self {
                    ptr,
                    base,
                    allocated,
                };
                return Some((run, size_class(bytes as u64)));
            }
            // SAFETY: just allocated with this layout.
            unsafe { dealloc(base.as_ptr(), layout) };
        }
        None
    }

    /// Its words, `len` of them as allocated.
    fn words(&self, len: usize) -> &[u64] {
        // SAFETY: ptr points at len initialised (zeroed or written) words (the caller's len is
        // the one allocated), or is dangling with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    fn words_mut(&mut self, len: usize) -> &mut [u64] {
        // SAFETY: as in `words`, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), len) }
    }

    /// Visits the block for defragmentation (`core::defrag`). A moved block keeps its size
    /// class, so under jemalloc its alignment too; a block aligned by hand re-aligns its `len`
    /// words inside the room it has, and an exact block that came back less aligned (another
    /// allocator) is copied into one aligned by hand, or, if none can be had, keeps its words
    /// where they are: alignment only speeds lookups up.
    fn defrag(&mut self, d: &mut Defrag, len: usize, align: usize) {
        let Some(layout) = layout(self.allocated).filter(|_| self.allocated > 0) else {
            return;
        };
        let offset = self.ptr.as_ptr() as usize - self.base.as_ptr() as usize;
        let mut base = self.base;
        // SAFETY: `base` is this run's block, allocated with `layout`; `ptr` is recomputed
        // from it below, and nothing else points into the block but the owner's segment
        // table, which `Words::defrag` updates.
        unsafe { d.block(&mut base, layout) };
        if base == self.base {
            return;
        }
        let aligned = base.as_ptr().align_offset(align);
        let fits = aligned + len * 8 <= self.allocated;
        let offset = if aligned != offset && fits {
            // SAFETY: both ranges of len·8 bytes lie inside the moved block.
            unsafe {
                std::ptr::copy(
                    base.as_ptr().add(offset),
                    base.as_ptr().add(aligned),
                    len * 8,
                )
            };
            aligned
        } else {
            offset
        };
        self.base = base;
        // SAFETY: offset + len·8 ≤ allocated, as before the move.
        self.ptr = unsafe { base.add(offset) }.cast();
        if !fits {
            if let Some((mut aligned, _)) = Run::zeroed(len, align) {
                aligned.words_mut(len).copy_from_slice(self.words(len));
                *self = aligned;
            }
        }
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

/// The allocations of a segmented array (`Cut`). The lookups' index `table` holds, for
/// segment s, where word 0 would be if the array were contiguous and segment s in its place
/// (its first word's address − s·S words, computed with wrapping arithmetic), so word i is at
/// table[i / S] + i; the runs, one an allocation, own the memory.
struct Segmented {
    table: Box<[*mut u64]>,
    runs: Box<[Run]>,
}

impl Segmented {
    /// Points the table entries of allocation `a`'s segments at its run.
    fn point(&mut self, a: usize, cut: Cut) {
        let words = cut.allocation(a);
        let start = self.runs[a].ptr.as_ptr().wrapping_sub(words.start);
        for s in words.start / cut.segment..words.end.div_ceil(cut.segment) {
            self.table[s] = start;
        }
    }
}

enum Storage {
    /// An array of at most one segment (or empty).
    One(Run),
    /// A larger one (`Cut`), boxed so that a `Words` stays as small as one allocation's record.
    Segments(Box<Segmented>),
}

pub struct Words {
    len: usize,
    align: usize,
    storage: Storage,
    /// What the allocations take (their size classes, `planned_bytes`); kept because every
    /// write asks for it (`value::modify`).
    class: u64,
}

// SAFETY: Words owns its blocks exclusively, like Box<[u64]>.
unsafe impl Send for Words {}
// SAFETY: shared access is read-only, writes need `&mut`, like Box<[u64]>.
unsafe impl Sync for Words {}

impl Words {
    /// `len` zero words aligned to `align` bytes (a power of two from 8 to 64), in segments of
    /// `SEGMENT_BYTES` if there are more; None if the allocator refuses.
    pub fn zeroed(len: usize, align: usize) -> Option<Self> {
        let align = align.max(8);
        if !align.is_power_of_two() || align > 64 {
            return None;
        }
        let (storage, class) = if len == 0 {
            (Storage::One(Run::EMPTY), 0)
        } else if len <= SEGMENT_WORDS {
            let (run, class) = Run::zeroed(len, align)?;
            (Storage::One(run), class)
        } else {
            let cut = Cut::of(len);
            let mut class = table_bytes(cut);
            let runs = try_collect(cut.allocations(), |a| {
                let (run, bytes) = Run::zeroed(cut.allocation(a).len(), align)?;
                class += bytes;
                Some(run)
            })?;
            let table = try_collect(cut.segments(), |_| Some(std::ptr::null_mut()))?;
            let mut segmented = try_box(Segmented { table, runs })?;
            (0..cut.allocations()).for_each(|a| segmented.point(a, cut));
            (Storage::Segments(segmented), class)
        };
        Some(Self {
            len,
            align,
            storage,
            class,
        })
    }

    /// Bytes the allocator hands out for these words (each allocation by its size class, the
    /// segment table included): `planned_bytes(len)`, kept because every write asks for it.
    pub fn memory_bytes(&self) -> u64 {
        self.class
    }

    /// The words for reading, as one slice or as segments.
    #[inline(always)]
    pub fn view(&self) -> View<'_> {
        match &self.storage {
            Storage::One(run) => View::One(run.words(self.len)),
            Storage::Segments(s) => View::Segments(Segments {
                table: &s.table,
                len: self.len,
                _words: PhantomData,
            }),
        }
    }

    /// The words for writing, as one slice or as segments.
    #[inline(always)]
    pub fn view_mut(&mut self) -> ViewMut<'_> {
        match &mut self.storage {
            Storage::One(run) => ViewMut::One(run.words_mut(self.len)),
            Storage::Segments(s) => ViewMut::Segments(SegmentsMut(Segments {
                table: &s.table,
                len: self.len,
                _words: PhantomData,
            })),
        }
    }

    /// The allocations' words in order (their concatenation is the array).
    fn pieces(&self) -> impl Iterator<Item = &[u64]> {
        let len = self.len;
        let (runs, cut) = match &self.storage {
            Storage::One(run) => (std::slice::from_ref(run), None),
            Storage::Segments(s) => (&s.runs[..], Some(Cut::of(len))),
        };
        runs.iter()
            .enumerate()
            .map(move |(a, run)| run.words(cut.map_or(len, |c| c.allocation(a).len())))
    }

    fn pieces_mut(&mut self) -> impl Iterator<Item = &mut [u64]> {
        let len = self.len;
        let (runs, cut) = match &mut self.storage {
            Storage::One(run) => (std::slice::from_mut(run), None),
            Storage::Segments(s) => (&mut s.runs[..], Some(Cut::of(len))),
        };
        runs.iter_mut()
            .enumerate()
            .map(move |(a, run)| run.words_mut(cut.map_or(len, |c| c.allocation(a).len())))
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

    /// Bytes `start..start + len` of the array borrowed from its memory, when they lie in one
    /// piece of it (`chunks::words_as_le_bytes`); None otherwise, and `read_bytes` copies.
    pub fn borrow_bytes(&self, start: usize, len: usize) -> Option<&[u8]> {
        let (at, piece) = self.piece_holding(start)?;
        // Ending past this piece, the bytes span two.
        (start + len <= at + piece.len() * 8)
            .then(|| words_as_le_bytes(piece, start - at, len))
            .flatten()
    }

    /// The allocation's words that hold byte `start` of the array, and the byte where they
    /// start; None past the end.
    fn piece_holding(&self, start: usize) -> Option<(usize, &[u64])> {
        let mut at = 0;
        for piece in self.pieces() {
            if start < at + piece.len() * 8 {
                return Some((at, piece));
            }
            at += piece.len() * 8;
        }
        None
    }

    /// Whether the array is more than one allocation (`Cut`).
    pub fn is_segmented(&self) -> bool {
        matches!(self.storage, Storage::Segments(_))
    }

    /// Bytes `start..` of the allocation that holds byte `start` of the array, to that
    /// allocation's end, borrowed as little-endian bytes (`chunks::words_as_le_bytes`); None
    /// past the end.
    pub fn rest_of_piece(&self, start: usize) -> Option<&[u8]> {
        let (at, piece) = self.piece_holding(start)?;
        words_as_le_bytes(piece, start - at, at + piece.len() * 8 - start)
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

    /// Takes over `block`, `bytes` bytes holding little-endian words, as the words of the
    /// allocation that holds bytes `start..start + bytes` of the array, in place of the zero
    /// words there (freed): a load then keeps the block Redis read the data into instead of
    /// copying it. Only when the range is exactly one allocation (the head or a later segment
    /// of a segmented array, or the whole array) and the block is aligned as the array needs;
    /// otherwise the block is handed back.
    ///
    /// # Safety
    /// `block` must be a block of `bytes` bytes from the global allocator with the layout
    /// `layout(bytes)` (u64 alignment: Redis's allocator, as `RedisModule_LoadStringBuffer`
    /// hands them out), owned by the caller; on `Ok` it is the array's.
    pub unsafe fn adopt(
        &mut self,
        start: usize,
        block: NonNull<u8>,
        bytes: usize,
    ) -> Result<(), NonNull<u8>> {
        let fits = cfg!(target_endian = "little")
            && block.as_ptr().align_offset(self.align) == 0
            && layout(bytes).is_some();
        let len = self.len;
        let adopted = || Run {
            ptr: block.cast(),
            base: block,
            allocated: bytes,
        };
        match &mut self.storage {
            Storage::One(run) if fits && start == 0 && bytes == len * 8 => *run = adopted(),
            Storage::Segments(s) if fits => {
                let cut = Cut::of(len);
                let a = cut.allocation_of(start / SEGMENT_BYTES);
                let one = (a < s.runs.len()).then(|| cut.allocation(a));
                if one.is_none_or(|w| w.start * 8 != start || w.len() * 8 != bytes) {
                    return Err(block);
                }
                s.runs[a] = adopted();
                s.point(a, cut);
            }
            _ => return Err(block),
        }
        huge_pages::advise(block, bytes);
        Ok(())
    }

    /// Visits the array's blocks for defragmentation (`core::defrag`): its one run, or the
    /// segments' records, table and runs (the table then points at the runs' new places).
    pub fn defrag(&mut self, d: &mut Defrag) {
        let (len, align) = (self.len, self.align);
        match &mut self.storage {
            Storage::One(run) => run.defrag(d, len, align),
            Storage::Segments(s) => {
                d.boxed(s);
                d.boxed_slice(&mut s.table);
                d.boxed_slice(&mut s.runs);
                let cut = Cut::of(len);
                for a in 0..s.runs.len() {
                    s.runs[a].defrag(d, cut.allocation(a).len(), align);
                    s.point(a, cut);
                }
            }
        }
    }

    /// A copy, allocated fallibly.
    pub fn try_clone(&self) -> Option<Self> {
        let mut copy = Self::zeroed(self.len, self.align)?;
        for (to, from) in copy.pieces_mut().zip(self.pieces()) {
            to.copy_from_slice(from);
        }
        Some(copy)
    }
}

/// Bytes the allocator hands out for an array of `len` words made by `Words::zeroed`, when
/// its allocations come back aligned (jemalloc; known before allocating).
pub fn planned_bytes(len: usize) -> u64 {
    planned_bytes_in(len, SEGMENT_WORDS)
}

/// `planned_bytes` with segments of `segment` words (a power of two whose bytes are a size
/// class).
pub fn planned_bytes_in(len: usize, segment: usize) -> u64 {
    if len <= segment {
        return size_class(len as u64 * 8);
    }
    let cut = Cut::in_segments(len, segment);
    (0..cut.allocations())
        .map(|a| size_class(cut.allocation(a).len() as u64 * 8))
        .sum::<u64>()
        + table_bytes(cut)
}

/// Bytes of the segment table, the runs' records and their box.
fn table_bytes(cut: Cut) -> u64 {
    size_class((cut.segments() * std::mem::size_of::<*mut u64>()) as u64)
        + size_class((cut.allocations() * std::mem::size_of::<Run>()) as u64)
        + size_class(std::mem::size_of::<Segmented>() as u64)
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

/// The words of a segmented array: word i is word `i % S` of segment `i / S`, S =
/// `SEGMENT_WORDS`.
#[derive(Clone, Copy)]
pub struct Segments<'a> {
    table: &'a [*mut u64],
    len: usize,
    _words: PhantomData<&'a [u64]>,
}

/// `Segments`, borrowed exclusively.
pub struct SegmentsMut<'a>(Segments<'a>);

/// 64-byte lines of 8 words (blocked filters' blocks; segments hold whole lines).
pub type Line = [u64; 8];

/// Word access the probe loops are generic over. Probes are below the filter's m bits by
/// construction (`hashing::reduce`), so a loop checks m against the words once per item and
/// reads its probes' words unchecked.
pub trait WordRead {
    /// Number of words.
    fn words(&self) -> usize;
    /// Word i.
    ///
    /// # Safety
    /// i < `words()`.
    unsafe fn word_unchecked(&self, i: usize) -> u64;
    /// The address of word i, for prefetching.
    ///
    /// # Safety
    /// i < `words()`.
    unsafe fn word_ptr_unchecked(&self, i: usize) -> *const u64;
    /// Line `line` (words 8·line..8·line + 8; panics if out of range).
    fn line(&self, line: usize) -> &Line;
}

/// Word access for writing.
pub trait WordWrite: WordRead {
    /// Word i, mutably.
    ///
    /// # Safety
    /// i < `words()`.
    unsafe fn word_mut_unchecked(&mut self, i: usize) -> &mut u64;
    /// Line `line`, mutably (panics if out of range).
    fn line_mut(&mut self, line: usize) -> &mut Line;
}

impl WordRead for [u64] {
    #[inline(always)]
    fn words(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    unsafe fn word_unchecked(&self, i: usize) -> u64 {
        // SAFETY: the caller guarantees i < len.
        unsafe { *self.get_unchecked(i) }
    }
    #[inline(always)]
    unsafe fn word_ptr_unchecked(&self, i: usize) -> *const u64 {
        // SAFETY: the caller guarantees i < len.
        unsafe { self.as_ptr().add(i) }
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
    unsafe fn word_mut_unchecked(&mut self, i: usize) -> &mut u64 {
        // SAFETY: the caller guarantees i < len.
        unsafe { self.get_unchecked_mut(i) }
    }
    #[inline(always)]
    fn line_mut(&mut self, line: usize) -> &mut Line {
        (&mut self[line * 8..line * 8 + 8])
            .try_into()
            .expect("eight words")
    }
}

impl Segments<'_> {
    /// The address of word i.
    ///
    /// # Safety
    /// i < len.
    #[inline(always)]
    unsafe fn at(&self, i: usize) -> *mut u64 {
        debug_assert!(i < self.len);
        // SAFETY: i < len, and the table has ⌈len / S⌉ entries (S = 2^SEGMENT_SHIFT), so i / S
        // indexes one. Entry s is segment s's first word moved back by s·S words (wrapping,
        // with its provenance); word i lies in segment s = i / S, at its word i − s·S < its
        // length (S, or len − s·S for the last), so the pointer moved forward by i is back
        // inside that segment.
        unsafe { self.table.get_unchecked(i >> SEGMENT_SHIFT).wrapping_add(i) }
    }
}

impl WordRead for Segments<'_> {
    #[inline(always)]
    fn words(&self) -> usize {
        self.len
    }
    #[inline(always)]
    unsafe fn word_unchecked(&self, i: usize) -> u64 {
        // SAFETY: the caller guarantees i < len (`at`); shared access is read-only.
        unsafe { *self.at(i) }
    }
    #[inline(always)]
    unsafe fn word_ptr_unchecked(&self, i: usize) -> *const u64 {
        // SAFETY: the caller guarantees i < len.
        unsafe { self.at(i) }
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
    unsafe fn word_unchecked(&self, i: usize) -> u64 {
        // SAFETY: the caller's guarantee.
        unsafe { self.0.word_unchecked(i) }
    }
    #[inline(always)]
    unsafe fn word_ptr_unchecked(&self, i: usize) -> *const u64 {
        // SAFETY: the caller's guarantee.
        unsafe { self.0.word_ptr_unchecked(i) }
    }
    #[inline(always)]
    fn line(&self, line: usize) -> &Line {
        self.0.line(line)
    }
}

impl WordWrite for SegmentsMut<'_> {
    #[inline(always)]
    unsafe fn word_mut_unchecked(&mut self, i: usize) -> &mut u64 {
        // SAFETY: the caller guarantees i < len, and the view was made from `&mut Words`:
        // access is exclusive.
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

    /// A block of the global allocator holding `words` as little-endian bytes, as a load
    /// hands it to `Words::adopt`.
    fn block_of(words: &[u64]) -> (NonNull<u8>, usize) {
        let bytes = words.len() * 8;
        // SAFETY: a non-zero-sized layout.
        let block = NonNull::new(unsafe { std::alloc::alloc(layout(bytes).unwrap()) }).unwrap();
        for (i, w) in words.iter().enumerate() {
            // SAFETY: 8 bytes at 8·i lie inside the block.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    w.to_le_bytes().as_ptr(),
                    block.as_ptr().add(8 * i),
                    8,
                )
            };
        }
        (block, bytes)
    }

    fn free(block: NonNull<u8>, bytes: usize) {
        // SAFETY: allocated by block_of with this layout and handed back.
        unsafe { dealloc(block.as_ptr(), layout(bytes).unwrap()) };
    }

    #[test]
    fn a_block_that_is_one_allocation_is_taken_over() {
        // Segments of 64 words in unit tests: 200 words are a head of three (192 words, 1,536
        // bytes: a size class) and 8.
        let len = 200;
        let mut w = Words::zeroed(len, 8).unwrap();
        let class = w.memory_bytes();
        let expected: Vec<u64> = (0..len as u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        for (start, words) in [(192, 8), (0, 192)] {
            let (block, bytes) = block_of(&expected[start..start + words]);
            // SAFETY: a block of the global allocator with the layout adopt expects.
            let adopted = unsafe { w.adopt(start * 8, block, bytes) };
            assert!(adopted.is_ok(), "{start}");
        }
        // Not one allocation: across two, or part of one (a segment of the head among them).
        for (start, words) in [(32, 64), (128, 32), (128, 72), (64, 64), (0, 64), (0, 200)] {
            let (block, bytes) = block_of(&expected[start..start + words]);
            // SAFETY: as above.
            let back = unsafe { w.adopt(start * 8, block, bytes) }.expect_err("refused");
            free(back, bytes);
        }
        let le =
            |words: &[u64]| -> Vec<u8> { words.iter().flat_map(|w| w.to_le_bytes()).collect() };
        w.write_bytes(128 * 8, &le(&expected[128..192]));
        let mut out = Vec::new();
        w.read_bytes(0, len * 8, &mut out);
        assert_eq!(out, le(&expected));
        assert_eq!(w.memory_bytes(), class);
        let copy = w.try_clone().unwrap();
        let mut again = Vec::new();
        copy.read_bytes(0, len * 8, &mut again);
        assert_eq!(again, out);

        // One allocation for a small array; a block aligned less than the array needs (the
        // blocked layout's 64 bytes) is handed back.
        let mut small = Words::zeroed(10, 8).unwrap();
        let (block, bytes) = block_of(&expected[..10]);
        // SAFETY: as above.
        assert!(unsafe { small.adopt(0, block, bytes) }.is_ok());
        assert!(matches!(small.view(), View::One(s) if s == &expected[..10]));
        let mut aligned = Words::zeroed(10, 64).unwrap();
        let (block, bytes) = block_of(&expected[..11]);
        // SAFETY: 8 bytes into a malloc block (16-byte aligned) is never 64-byte aligned;
        // the refused pointer is not freed, the block is.
        let skewed = unsafe { NonNull::new_unchecked(block.as_ptr().add(8)) };
        // SAFETY: refused before it is used as a block (alignment), see above.
        assert!(unsafe { aligned.adopt(0, skewed, bytes - 8) }.is_err());
        free(block, bytes);
    }

    #[test]
    fn the_head_holds_the_largest_class_of_whole_segments() {
        // 64-word (512-byte) segments in unit tests: 1,100 words are 17 whole segments and 12
        // words; 16 segments (8 KiB) are the largest class among them.
        let len = 1100;
        let mut w = Words::zeroed(len, 8).unwrap();
        let lens: Vec<usize> = w.pieces().map(<[u64]>::len).collect();
        assert_eq!(lens, [1024, 64, 12]);
        assert_eq!(w.memory_bytes(), planned_bytes(len));
        let expected: Vec<u64> = (0..len).map(pattern).collect();
        let le =
            |words: &[u64]| -> Vec<u8> { words.iter().flat_map(|w| w.to_le_bytes()).collect() };
        // From any byte, the rest of its allocation.
        for start in 0..len * 8 {
            let end = [1024, 1088, 1100]
                .into_iter()
                .find(|&e| start < e * 8)
                .unwrap();
            assert_eq!(
                w.rest_of_piece(start).map(<[u8]>::len),
                Some(end * 8 - start)
            );
        }
        assert_eq!(w.rest_of_piece(len * 8), None);
        // Blocks of the head and of the later segments are taken over; one of a segment of
        // the head is not.
        for (start, words) in [(1024, 64), (1088, 12), (0, 1024)] {
            let (block, bytes) = block_of(&expected[start..start + words]);
            // SAFETY: a block of the global allocator with the layout adopt expects.
            let adopted = unsafe { w.adopt(start * 8, block, bytes) };
            assert!(adopted.is_ok(), "{start}");
        }
        let (block, bytes) = block_of(&expected[512..576]);
        // SAFETY: as above.
        let back = unsafe { w.adopt(512 * 8, block, bytes) }.expect_err("refused");
        free(back, bytes);
        match w.view() {
            View::Segments(s) => check_reads(&s, &expected, 8),
            View::One(_) => panic!("one allocation"),
        }
        assert_eq!(
            w.rest_of_piece(300 * 8),
            Some(&le(&expected[300..1024])[..])
        );
        assert!(!Words::zeroed(64, 8).unwrap().is_segmented());
        assert!(w.is_segmented());
    }

    proptest! {
        /// The cut of any array in the server's segments: the head is the largest class of
        /// whole segments, every later allocation one segment (the last possibly shorter),
        /// together the array. From four segments on, the class above the head's holds the
        /// whole array, so `DUMP`'s buffer, enlarged past the head, holds the rest.
        #[test]
        fn the_cut_of_any_array(len in SERVER_SEGMENT_WORDS + 1..1usize << 36) {
            let segment = SERVER_SEGMENT_WORDS;
            let cut = Cut::in_segments(len, segment);
            let head = (cut.head * segment * 8) as u64;
            prop_assert_eq!(size_class(head), head);
            prop_assert!(cut.head >= 1 && cut.head <= len / segment);
            prop_assert!((cut.head + 1..=len / segment)
                .all(|k| size_class((k * segment * 8) as u64) != (k * segment * 8) as u64));
            let mut at = 0;
            for a in 0..cut.allocations() {
                let words = cut.allocation(a);
                prop_assert_eq!(words.start, at);
                prop_assert!(a == 0 || words.len() <= segment);
                prop_assert!(a == 0 || a + 1 == cut.allocations() || words.len() == segment);
                for s in words.start / segment..words.end.div_ceil(segment) {
                    prop_assert_eq!(cut.allocation_of(s), a);
                }
                at = words.end;
            }
            prop_assert_eq!(at, len);
            if len >= 4 * segment {
                prop_assert!(size_class(head + 1) >= (len * 8) as u64);
            }
        }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    #[cfg_attr(miri, ignore = "allocates more than Miri can hold")]
    fn zeroed_aligned_and_owned() {
        for (len, align) in [
            (0usize, 64usize),
            (1, 8),
            (3, 8),
            (8, 64),
            (64, 64),
            (65, 8),
            (1000, 64),
        ] {
            let mut w = Words::zeroed(len, align).unwrap();
            assert_eq!(w.len, len);
            assert!(w.pieces().flatten().all(|x| *x == 0));
            for piece in w.pieces_mut().filter(|p| !p.is_empty()) {
                assert_eq!(piece.as_ptr() as usize % align, 0);
                *piece.last_mut().unwrap() = 7;
            }
            let c = w.try_clone().unwrap();
            assert_eq!(c, w);
            assert!(c.pieces().zip(w.pieces()).all(|(a, b)| a.len() == b.len()));
            // Never less than planned, at most the alignment room more per allocation.
            let most: u64 = w
                .pieces()
                .map(|p| size_class((p.len() * 8 + align - 8) as u64))
                .sum();
            let table = match w.is_segmented() {
                false => 0,
                true => table_bytes(Cut::of(len)),
            };
            assert_eq!(w.memory_bytes(), planned_bytes(len));
            assert!(w.memory_bytes() <= most + table);
        }
        assert!(Words::zeroed(usize::MAX / 4, 64).is_none());
        assert!(Words::zeroed(usize::MAX / 8 - 2, 64).is_none());
        assert!(Words::zeroed(100, 128).is_none());
    }

    #[test]
    fn aligned_words_use_ordinary_layouts() {
        // alloc.rs sends layouts aligned beyond 16 bytes to the system allocator, invisible to
        // used_memory: every allocation here must be 8-byte aligned.
        for len in [1usize, 7, 8, 9, 100, 4096] {
            let w = Words::zeroed(len, 64).unwrap();
            let runs = match &w.storage {
                Storage::One(run) => std::slice::from_ref(run),
                Storage::Segments(s) => &s.runs[..],
            };
            let allocations = match len > SEGMENT_WORDS {
                true => Cut::of(len).allocations(),
                false => 1,
            };
            assert_eq!(runs.len(), allocations);
            for run in runs.iter() {
                assert!(layout(run.allocated).unwrap().align() <= 16);
                assert_eq!(run.ptr.as_ptr() as usize % 64, 0);
            }
        }
    }

    #[test]
    fn large_arrays_are_segments() {
        // One word more than a segment: a full segment and a one-word one.
        let w = Words::zeroed(SEGMENT_WORDS + 1, 64).unwrap();
        let lens: Vec<usize> = w.pieces().map(<[u64]>::len).collect();
        assert_eq!(lens, [SEGMENT_WORDS, 1]);
        assert_eq!(
            planned_bytes(SEGMENT_WORDS + 1),
            SEGMENT_BYTES as u64 + 8 + table_bytes(Cut::of(SEGMENT_WORDS + 1))
        );
        assert_eq!(table_bytes(Cut::of(SEGMENT_WORDS + 1)), 16 + 48 + 32);
        // A `Words` is as small as a slice and its allocation's record: a key's list of bit
        // arrays stays small.
        assert_eq!(std::mem::size_of::<Words>(), 48);
        // At most one segment: one allocation.
        let w = Words::zeroed(SEGMENT_WORDS, 8).unwrap();
        assert!(matches!(w.view(), View::One(s) if s.len() == SEGMENT_WORDS));
        assert_eq!(planned_bytes(SEGMENT_WORDS), SEGMENT_BYTES as u64);
    }

    #[test]
    fn segments_waste_less_than_two_mib() {
        let planned = |bytes: u64| planned_bytes_in((bytes / 8) as usize, SERVER_SEGMENT_WORDS);
        // (bits of an array, its cost in one allocation, cut): the 0.001 / 200M filters
        // (390,738,528 and 428,318,208 bytes of bits: heads of 320 and 384 MiB), 257 MiB
        // (a head of 256), just over 16 MiB, and at most 16 MiB (one allocation).
        for (bytes, old, now) in [
            (390_738_528u64, 384 * MIB, 373 * MIB + 192 + 128 + 32),
            (428_318_208, 448 * MIB, 410 * MIB + 224 + 80 + 32),
            (257 * MIB, 320 * MIB, 257 * MIB + 160 + 48 + 32),
            (16 * MIB + 8, 20 * MIB, 16 * MIB + 8 + 16 + 48 + 32),
            (12 * MIB + 8, 14 * MIB, 14 * MIB),
        ] {
            assert_eq!((size_class(bytes), planned(bytes)), (old, now), "{bytes}");
        }
        // Every size: the rounding stays below 2 MiB, the table apart.
        for bytes in (1..=200u64).map(|i| i * 5 * MIB + 24) {
            let table = match bytes > 16 * MIB {
                true => table_bytes(Cut::in_segments((bytes / 8) as usize, SERVER_SEGMENT_WORDS)),
                false => 0,
            };
            let rounding = planned(bytes) - bytes - table;
            assert!(rounding < 2 * MIB, "{bytes}: {rounding}");
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
            // SAFETY: i < len.
            let (word, ptr) = unsafe { (v.word_unchecked(i), v.word_ptr_unchecked(i)) };
            assert_eq!(word, *x);
            // SAFETY: as above.
            assert_eq!(unsafe { *ptr }, *x);
        }
        for line in 0..len / 8 {
            assert_eq!(v.line(line)[..], expected[line * 8..line * 8 + 8]);
            assert_eq!(v.line(line).as_ptr() as usize % align, 0);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn every_word_line_and_byte_range_at_every_segment_end() {
        // Arrays ending inside, at and past segment ends (64 words in tests) and their heads.
        for len in [8usize, 64, 72, 128, 136, 200, 203, 1024, 1100] {
            let segment = SEGMENT_WORDS;
            for align in [8usize, 64] {
                let mut w = Words::zeroed(len, align).unwrap();
                let expected: Vec<u64> = (0..len).map(pattern).collect();
                match w.view_mut() {
                    ViewMut::One(words) => {
                        assert!(len <= SEGMENT_WORDS);
                        // SAFETY: i < len.
                        (0..len).for_each(|i| *unsafe { words.word_mut_unchecked(i) } = pattern(i));
                    }
                    ViewMut::Segments(mut s) => {
                        assert!(len > SEGMENT_WORDS);
                        // SAFETY: i < len.
                        (0..len).for_each(|i| *unsafe { s.word_mut_unchecked(i) } = pattern(i));
                        for line in 0..len / 8 {
                            assert_eq!(s.line_mut(line)[..], expected[line * 8..line * 8 + 8]);
                        }
                    }
                }
                match w.view() {
                    View::One(s) => check_reads(s, &expected, align),
                    View::Segments(s) => check_reads(&s, &expected, align),
                }
                // Every byte range touching a segment end reads and writes like a slice.
                let bytes: Vec<u8> = expected.iter().flat_map(|x| x.to_le_bytes()).collect();
                for end in (0..=len).step_by(segment).map(|w| w * 8) {
                    for start in end.saturating_sub(9)..(end + 9).min(len * 8) {
                        for stop in (start + 1).max(end.saturating_sub(3))..=(end + 11).min(len * 8)
                        {
                            let mut out = vec![0xaa];
                            w.read_bytes(start, stop - start, &mut out);
                            assert_eq!(out[1..], bytes[start..stop], "{len}: {start}..{stop}");
                            // Borrowed where one piece holds the range, and only there.
                            let allocation = |byte: usize| Cut::of(len).allocation_of(byte / 512);
                            let one_piece =
                                len <= SEGMENT_WORDS || allocation(start) == allocation(stop - 1);
                            match w.borrow_bytes(start, stop - start) {
                                Some(borrowed) => assert_eq!(borrowed, &bytes[start..stop]),
                                None => assert!(!one_piece, "{len}: {start}..{stop}"),
                            }
                            let mut copy = Words::zeroed(len, align).unwrap();
                            copy.write_bytes(0, &bytes);
                            copy.write_bytes(start, &vec![0xff; stop - start]);
                            let mut all = Vec::new();
                            copy.read_bytes(0, len * 8, &mut all);
                            let mut want = bytes.clone();
                            want[start..stop].fill(0xff);
                            assert_eq!(all, want);
                        }
                    }
                }
                assert_eq!(w.try_clone().unwrap(), w);
            }
        }
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn segments_refuse_lines_past_the_end() {
        let w = Words::zeroed(100, 8).unwrap();
        let View::Segments(s) = w.view() else {
            panic!("segments")
        };
        s.line(12);
    }

    proptest! {
        #[test]
        fn segmented_arrays_hold_what_a_slice_holds(
            len in 1usize..700,
            writes in proptest::collection::vec((0usize..5600, any::<u64>()), 0..40),
        ) {
            let mut words = Words::zeroed(len, 64).unwrap();
            let mut slice = vec![0u64; len];
            for (at, value) in writes {
                let at = at % (len * 8);
                let src = value.to_le_bytes();
                let src = &src[..(len * 8 - at).min(8)];
                words.write_bytes(at, src);
                bytes_into_words(&mut slice, at, src);
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            words.read_bytes(0, len * 8, &mut a);
            words_to_bytes(&slice, 0, len * 8, &mut b);
            prop_assert_eq!(a, b);
            prop_assert!(words.pieces().flatten().eq(slice.iter()));
            prop_assert_eq!(words.try_clone().unwrap(), words);
        }
    }

    #[test]
    fn defrag_keeps_the_words_and_the_segment_table() {
        use crate::core::defrag::tests::in_steps;
        for (len, align) in [(5usize, 8usize), (40, 64), (64 * 5 + 3, 64), (64 * 4, 8)] {
            let mut w = Words::zeroed(len, align).unwrap();
            let bytes: Vec<u8> = (0..len * 8).map(|i| (i * 7 % 251) as u8).collect();
            w.write_bytes(0, &bytes);
            let before = w.clone();
            in_steps(&mut w, 1, |w, d| w.defrag(d));
            assert_eq!(w, before);
            let mut out = Vec::new();
            w.read_bytes(0, len * 8, &mut out);
            assert_eq!(out, bytes);
            // Lookups go through the table: every word reads back by index.
            let read: Vec<u64> = match w.view() {
                View::One(s) => s.to_vec(),
                // SAFETY: i < len.
                View::Segments(s) => (0..len).map(|i| unsafe { s.word_unchecked(i) }).collect(),
            };
            assert_eq!(read, before.pieces().flatten().copied().collect::<Vec<_>>());
            for piece in w.pieces() {
                assert_eq!(piece.as_ptr() as usize % align, 0);
            }
        }
    }
}
