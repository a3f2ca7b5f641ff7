//! What Redis holds for a counter: one word naming both its block and its geometry (pure;
//! `Held::Word` in `server/value.rs`).
//!
//! ```text
//! bit 0        0: packed, as below; 1: the word less this bit is a Box<Counter>
//! bits 0–47    packed: the block's address (Block::into_raw; 0 for none)
//! bits 48–63   packed: the geometry's id in GEOMETRIES (core::registry), 1–65,535
//! ```
//!
//! Why: most counters are small (a message's readers: a median of 25), and a key costs about
//! a hundred bytes before its value, so every allocation counts. A `Counter` is two words (the
//! shared geometry's `Arc`, the block); boxed, it took a 16-byte allocation per key, and every
//! access a load through it. Packed, it takes none. Addresses fit 48 bits on the 64-bit Linux targets Redis runs
//! on (x86-64 and arm64 hand out higher ones only to a process that asks); a block whose
//! address does not, or a geometry when all 65,535 ids are held by other parameter sets,
//! takes the boxed form, which costs what every counter cost before and behaves the same (and
//! is packed by its first write once it fits). A leak checker that scans memory for pointers
//! (valgrind's) does not read a packed word as one: the blocks of counters still stored when
//! the server exits are reported lost, though Redis holds their words to the end.
//!
//! Reads and writes go through a `Counter` made from the word: the block as it is, the
//! geometry lent by the registry with no count of its own (no atomic operation per command).
//! A read ([`StoredCounter::view`]) only borrows it. A write ([`StoredCounter::with_mut`])
//! packs the counter again afterwards, also when the write panics (so the word never names a
//! freed block): the block may have moved, and a union may have given the counter another
//! geometry (another id; the lent `Arc` it dropped is then given back).

use super::counter::Counter;
use super::geometry::Geometry;
use crate::core::alloc::size_class;
use crate::core::block::Block;
use crate::core::defrag::Defrag;
use crate::core::intern;
use crate::core::registry::{self, Registry};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;

/// Every stored counter's geometry, by id.
static GEOMETRIES: Registry<Geometry> = Registry::new();

const BOXED: u64 = 1;
const ID_SHIFT: u32 = 48;
const ADDRESS: u64 = (1 << ID_SHIFT) - 1;

/// A counter as Redis holds it (see the module header).
pub struct StoredCounter(u64);

/// The two forms of the word.
enum Form {
    Packed { block: u64, id: u16 },
    Boxed(*mut Counter),
}

impl StoredCounter {
    pub fn new(counter: Counter) -> StoredCounter {
        let Counter { geometry, block } = counter;
        let raw = block.into_raw();
        if raw & !ADDRESS == 0 {
            if let Some(id) = GEOMETRIES.acquire(&geometry) {
                return StoredCounter(raw | u64::from(id) << ID_SHIFT);
            }
        }
        // SAFETY: just given up by `into_raw`.
        let block = unsafe { Block::from_raw(raw) };
        StoredCounter::boxed(Counter { geometry, block })
    }

    fn boxed(counter: Counter) -> StoredCounter {
        let address = Box::into_raw(Box::new(counter)).expose_provenance() as u64;
        StoredCounter(address | BOXED)
    }

    #[inline(always)]
    fn form(&self) -> Form {
        if self.0 & BOXED != 0 {
            let address = (self.0 & !BOXED) as usize;
            return Form::Boxed(std::ptr::with_exposed_provenance_mut(address));
        }
        Form::Packed {
            block: self.0 & ADDRESS,
            id: (self.0 >> ID_SHIFT) as u16,
        }
    }

    /// The counter, to read.
    #[inline]
    pub fn view(&self) -> CounterRef<'_> {
        CounterRef {
            // SAFETY: the word names a live block and a held id (or a live box); the copy is
            // never dropped (ManuallyDrop) and lent only while `self` is borrowed, unchanged.
            counter: ManuallyDrop::new(unsafe { self.borrowed() }),
            stored: PhantomData,
        }
    }

    /// A `Counter` owning nothing of its own: the block's word, the geometry's loan (or the
    /// box's contents, bit for bit).
    ///
    /// # Safety
    /// The result must not be dropped, nor outlive the word's current value.
    #[inline(always)]
    unsafe fn borrowed(&self) -> Counter {
        match self.form() {
            // SAFETY: the caller's contract: the block and the loan are only borrowed.
            Form::Packed { block, id } => unsafe {
                Counter {
                    geometry: ManuallyDrop::into_inner(GEOMETRIES.lend(id)),
                    block: Block::from_raw(block),
                }
            },
            // SAFETY: as above; the box holds a live Counter.
            Form::Boxed(counter) => unsafe { std::ptr::read(counter) },
        }
    }

    /// Runs a write on the counter, then stores what it left (see the module header). A
    /// boxed counter is packed after its write if it can be by then (ids freed since).
    pub fn with_mut<R>(&mut self, write: impl FnOnce(&mut Counter) -> R) -> R {
        let id = match self.form() {
            Form::Boxed(counter) => {
                // SAFETY: the box holds a live Counter, borrowed through `&mut self`.
                let result = write(unsafe { &mut *counter });
                self.unbox();
                return result;
            }
            Form::Packed { id, .. } => id,
        };
        // SAFETY: owned by `packing`, which stores it back into `self` when dropped.
        let counter = ManuallyDrop::new(unsafe { self.borrowed() });
        let mut packing = Repack {
            lent: Arc::as_ptr(&counter.geometry),
            counter,
            stored: self,
            id,
        };
        write(&mut packing.counter)
    }

    /// Packs a boxed counter if its block and geometry now fit the word (boxed again if not).
    fn unbox(&mut self) {
        let Form::Boxed(counter) = self.form() else {
            return;
        };
        // SAFETY: the box this word owns, taken back once: the word is replaced below.
        let counter = *unsafe { Box::from_raw(counter) };
        let stored = ManuallyDrop::new(StoredCounter::new(counter));
        self.0 = stored.0;
    }

    /// Its share of its geometry (`MEMORY USAGE`): what the interned geometry takes and its
    /// registry entry, divided among the counters holding its id (a boxed counter's, among its
    /// `Arc`'s holders). Counters created alike share next to nothing each; one of its own pays
    /// all.
    pub fn shared_bytes(&self) -> u64 {
        match self.form() {
            Form::Packed { id, .. } => {
                let bytes = intern::held_bytes::<Geometry>() + registry::ENTRY_BYTES;
                bytes / GEOMETRIES.holders_of(id).max(1)
            }
            // SAFETY: the box holds a live Counter.
            Form::Boxed(counter) => intern::share_of(unsafe { &(*counter).geometry }, 0),
        }
    }

    /// Bytes this counter takes: its block (and the box of the boxed form).
    #[inline]
    pub fn memory_bytes(&self) -> u64 {
        match self.form() {
            Form::Packed { block, .. } => {
                // SAFETY: the word's block, only measured (never dropped).
                ManuallyDrop::new(unsafe { Block::from_raw(block) }).memory_bytes()
            }
            Form::Boxed(counter) => {
                // SAFETY: the box holds a live Counter.
                let counter = unsafe { &*counter };
                size_class(size_of::<Counter>() as u64) + counter.memory_bytes()
            }
        }
    }

    /// Visits the counter's own blocks for defragmentation (the geometry is shared).
    pub fn defrag(&mut self, d: &mut Defrag) {
        if let Form::Boxed(counter) = self.form() {
            let mut ptr = std::ptr::NonNull::new(counter.cast::<u8>()).expect("a box");
            // SAFETY: a box of the global allocator with this layout, owned by `self`.
            unsafe { d.block(&mut ptr, std::alloc::Layout::new::<Counter>()) };
            self.0 = ptr.as_ptr().expose_provenance() as u64 | BOXED;
        }
        self.with_mut(|c| c.defrag(d));
    }
}

impl Drop for StoredCounter {
    fn drop(&mut self) {
        match self.form() {
            Form::Packed { block, id } => {
                // SAFETY: the word owns its block; this is its last use.
                drop(unsafe { Block::from_raw(block) });
                GEOMETRIES.release(id);
            }
            // SAFETY: the box this word owns.
            Form::Boxed(counter) => drop(unsafe { Box::from_raw(counter) }),
        }
    }
}

/// A stored counter, to read (`StoredCounter::view`).
pub struct CounterRef<'a> {
    counter: ManuallyDrop<Counter>,
    stored: PhantomData<&'a StoredCounter>,
}

impl Deref for CounterRef<'_> {
    type Target = Counter;

    #[inline(always)]
    fn deref(&self) -> &Counter {
        &self.counter
    }
}

/// A packed counter being written: packs it again when dropped (`StoredCounter::with_mut`).
struct Repack<'a> {
    counter: ManuallyDrop<Counter>,
    stored: &'a mut StoredCounter,
    /// The id the counter was lent under, and that id's geometry.
    id: u16,
    lent: *const Geometry,
}

impl Repack<'_> {
    /// Packs `counter` (what a write left of the one lent under `self.id`) into the word.
    #[inline]
    fn store(&mut self, counter: Counter) {
        let Counter {
            geometry,
            mut block,
        } = counter;
        let same = std::ptr::eq(Arc::as_ptr(&geometry), self.lent);
        if same {
            let raw = block.into_raw();
            if raw & !ADDRESS == 0 {
                // The loan, or a clone of it that replaced it after dropping it: either way
                // the entry's counts stay as they were when it is forgotten.
                std::mem::forget(geometry);
                self.stored.0 = raw | u64::from(self.id) << ID_SHIFT;
                return;
            }
            // SAFETY: just given up by `into_raw`.
            block = unsafe { Block::from_raw(raw) };
        }
        let geometry = match same {
            // A count of its own for the boxed form, the loan forgotten.
            true => Arc::clone(&ManuallyDrop::new(geometry)),
            false => {
                // SAFETY: the word holds `id`; the write dropped the loan with the geometry
                // it replaced.
                unsafe { GEOMETRIES.relend(self.id) };
                geometry
            }
        };
        let packed = ManuallyDrop::new(StoredCounter::new(Counter { geometry, block }));
        GEOMETRIES.release(self.id);
        self.stored.0 = packed.0;
    }
}

impl Drop for Repack<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: taken once, here.
        let counter = unsafe { ManuallyDrop::take(&mut self.counter) };
        self.store(counter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::defrag::tests::in_steps;
    use crate::lc::counter::Mode;

    fn item(i: u64) -> Vec<u8> {
        format!("stored:{i}").into_bytes()
    }

    /// A counter of `items` items; each test takes a capacity of its own, so that the ids it
    /// looks at are its own while other tests run beside it.
    fn filled(error_rate: f64, capacity: u64, items: u64) -> Counter {
        let mut c = Counter::reserve(error_rate, capacity, u64::MAX).unwrap();
        for i in 0..items {
            c.add(&item(i)).unwrap();
        }
        c
    }

    /// The geometry `stored` names, held so that its holders can be asked for.
    fn geometry(stored: &StoredCounter) -> Arc<Geometry> {
        Arc::clone(&stored.view().geometry)
    }

    fn id(stored: &StoredCounter) -> u16 {
        match stored.form() {
            Form::Packed { id, .. } => id,
            Form::Boxed(_) => 0,
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn every_mode_reads_back_from_its_word() {
        for (items, mode, bytes) in [
            (0, Mode::Exact, 0),
            (1, Mode::Exact, 8),
            (10, Mode::Exact, 48),
            (100, Mode::Exact, 384),
            (300, Mode::Tokens, 640),
            (6_000, Mode::Registers, 7_168),
        ] {
            let counter = filled(0.01, 50_001, items);
            let stored = StoredCounter::new(counter.clone());
            assert_ne!(id(&stored), 0, "packed");
            assert_eq!(*stored.view(), counter, "{items} items");
            assert_eq!(stored.view().mode(), mode);
            assert_eq!(stored.memory_bytes(), bytes, "{items} items");
            // A copy (COPY) of the stored counter.
            let copy = StoredCounter::new(stored.view().try_clone().unwrap());
            assert_eq!(*copy.view(), counter, "copy of {items} items");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn writes_through_the_word_match_a_plain_counter_and_hold_one_id() {
        let mut plain = Counter::reserve(0.01, 50_002, u64::MAX).unwrap();
        let mut stored = StoredCounter::new(plain.clone());
        let first = id(&stored);
        let shape = geometry(&stored);
        for i in 0..6_000 {
            let changed = stored.with_mut(|c| c.add(&item(i)).unwrap());
            assert_eq!(changed, plain.add(&item(i)).unwrap());
            if [0, 1, 2, 250, 300, 3_000, 5_999].contains(&i) {
                assert_eq!(*stored.view(), plain, "after {i}");
            }
        }
        assert_eq!(plain.mode(), Mode::Registers);
        assert_eq!(id(&stored), first, "the same geometry keeps its id");
        assert_eq!(GEOMETRIES.holders(&shape), 1);
        let copy = StoredCounter::new(stored.view().try_clone().unwrap());
        assert_eq!((id(&copy), GEOMETRIES.holders(&shape)), (first, 2));
        drop((stored, copy));
        assert_eq!(
            GEOMETRIES.holders(&shape),
            0,
            "released with the last counter"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_union_that_takes_another_geometry_moves_to_its_id() {
        let keeps = StoredCounter::new(filled(0.01, 50_003, 10));
        let mut dest = StoredCounter::new(filled(0.01, 50_003, 5_000));
        let coarse = StoredCounter::new(filled(0.04, 50_003, 5_000));
        let (fine_id, coarse_id) = (id(&dest), id(&coarse));
        let (fine, coarser) = (geometry(&dest), geometry(&coarse));
        assert_ne!(fine_id, coarse_id);
        assert_eq!(GEOMETRIES.holders(&fine), 2);
        let mut expected = dest.view().clone();
        expected.absorb_all_within(&[&coarse.view()], u64::MAX);
        let source = coarse.view();
        dest.with_mut(|d| d.absorb_all_within(&[&source], u64::MAX));
        assert_eq!(*dest.view(), expected);
        assert_eq!(
            dest.view().error_rate(),
            0.04,
            "the coarser input's geometry"
        );
        assert_eq!(id(&dest), coarse_id);
        assert_eq!(GEOMETRIES.holders(&fine), 1);
        assert_eq!(GEOMETRIES.holders(&coarser), 2);
        // The geometry the union dropped is still whole for the counter that keeps it.
        assert_eq!(keeps.view().error_rate(), 0.01);
        assert_eq!(keeps.view().count(), 10);
        drop(keeps);
        assert_eq!(GEOMETRIES.holders(&fine), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_write_that_panics_leaves_a_whole_counter() {
        let mut stored = StoredCounter::new(filled(0.01, 50_004, 100));
        let grown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            stored.with_mut(|c| {
                for i in 100..400 {
                    c.add(&item(i)).unwrap();
                }
                panic!("a bug in a write");
            })
        }));
        assert!(grown.is_err());
        // The block moved as it grew; the word names the block the counter was left with.
        assert_eq!(*stored.view(), filled(0.01, 50_004, 400));
    }

    #[test]
    fn the_boxed_form_behaves_the_same() {
        let counter = filled(0.01, 50_005, 1);
        let mut stored = StoredCounter::boxed(counter.clone());
        assert_eq!(id(&stored), 0);
        assert_eq!(*stored.view(), counter);
        assert_eq!(
            stored.memory_bytes(),
            16 + 8,
            "the box and a one-word block"
        );
        in_steps(&mut stored, 1, |s, d| s.defrag(d));
        assert_eq!(*stored.view(), counter);
        // Its first write packs it, ids being free.
        stored.with_mut(|c| c.add(&item(7)).unwrap());
        let mut expected = counter;
        expected.add(&item(7)).unwrap();
        assert_eq!(*stored.view(), expected);
        assert_ne!(id(&stored), 0);
        assert_eq!(stored.memory_bytes(), expected.memory_bytes());
    }

    #[test]
    fn defrag_moves_the_block_and_keeps_the_id() {
        let mut stored = StoredCounter::new(filled(0.01, 50_006, 30));
        let (before, counter) = (id(&stored), stored.view().clone());
        in_steps(&mut stored, 1, |s, d| s.defrag(d));
        assert_eq!((id(&stored), &*stored.view()), (before, &counter));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn counters_are_freed_on_another_thread() {
        let stored: Vec<StoredCounter> = (0..50)
            .map(|n| StoredCounter::new(filled(0.01, 50_007, n)))
            .collect();
        let shared = geometry(&stored[0]);
        assert_eq!(GEOMETRIES.holders(&shared), 50);
        std::thread::spawn(move || drop(stored)).join().unwrap();
        assert_eq!(GEOMETRIES.holders(&shared), 0);
    }
}
