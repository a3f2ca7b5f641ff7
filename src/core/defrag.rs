//! Active defragmentation of a value: moving its allocations to where the allocator packs
//! them tighter, in steps that a time budget can interrupt.
//!
//! Redis built with its own jemalloc (`activedefrag yes`) asks each stored value to move its
//! blocks. For each one, the allocator's advice decides: a block in a sparsely used slab is
//! copied into a fresh block of the same size class and freed, any other stays where it is.
//! That decision and the copy are the server's ([`Mover`], implemented in `server/value.rs`);
//! which blocks a value owns, and where it keeps pointers to them, only the value knows. So a
//! value visits its blocks in a fixed order through a [`Defrag`], which moves each one and
//! hands the new address back to be stored.
//!
//! Steps. A value of many blocks may be stopped part-way when the server's time budget is
//! spent ([`Mover::should_stop`], asked after every block): the number of blocks visited is the
//! cursor, and the next step skips that many before moving again. The value may change between
//! steps (commands run in between); a cursor is only a place to resume, so a block skipped or
//! visited twice then costs nothing but a missed or a redundant move.
//!
//! Only blocks the global allocator took from Redis's allocator may be moved: layouts aligned
//! beyond `alloc::MALLOC_ALIGN` come from the system allocator, and an empty `Vec` or a box of
//! a zero-sized type owns no block. [`Defrag`] skips those itself.

use crate::core::alloc::from_redis_allocator;
use std::alloc::Layout;
use std::ptr::NonNull;

/// Moves a block if the allocator advises it.
pub trait Mover {
    /// Moves the live block at `ptr` allocated with `layout`: Some(new address) when it moved
    /// (contents copied, the old block freed), None when it stays.
    ///
    /// # Safety
    /// `ptr` is a live block of the global allocator's Redis side, allocated with `layout`,
    /// owned by the caller, and every pointer into it is replaced when it moves.
    unsafe fn relocate(&mut self, ptr: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>>;

    /// Whether the time budget of this step is spent.
    fn should_stop(&mut self) -> bool;
}

/// One step of defragmenting a value: visits its blocks, moves those past the cursor until the
/// budget is spent.
pub struct Defrag<'a> {
    mover: &'a mut dyn Mover,
    /// Blocks visited by earlier steps, skipped.
    skip: u64,
    /// Blocks visited so far, skipped ones included.
    seen: u64,
    moved: u64,
    /// Where the next step resumes, once the budget is spent.
    stopped: Option<u64>,
}

impl<'a> Defrag<'a> {
    /// A step that resumes after the first `cursor` blocks (0: from the start).
    pub fn new(mover: &'a mut dyn Mover, cursor: u64) -> Self {
        Self {
            mover,
            skip: cursor,
            seen: 0,
            moved: 0,
            stopped: None,
        }
    }

    /// The cursor to resume from if the budget ran out before the last block, else None.
    pub fn resume_at(&self) -> Option<u64> {
        self.stopped
    }

    /// Blocks this step moved.
    pub fn moved(&self) -> u64 {
        self.moved
    }

    /// Visits the block at `ptr` allocated with `layout`: moves it if this step works on it and
    /// the allocator advises it; `ptr` then holds the new address.
    ///
    /// # Safety
    /// `ptr` is a live block of the global allocator allocated with `layout` (or dangling if
    /// `layout` has size 0), owned by the value being visited; the caller replaces every other
    /// pointer into the block when `ptr` changes.
    pub unsafe fn block(&mut self, ptr: &mut NonNull<u8>, layout: Layout) {
        let at = self.seen;
        self.seen += 1;
        if at < self.skip || self.stopped.is_some() || !from_redis_allocator(layout) {
            return;
        }
        // SAFETY: the caller's contract; `from_redis_allocator` checked the side.
        if let Some(new) = unsafe { self.mover.relocate(*ptr, layout) } {
            *ptr = new;
            self.moved += 1;
        }
        if self.mover.should_stop() {
            self.stopped = Some(self.seen);
        }
    }

    /// Visits a box's block.
    pub fn boxed<T>(&mut self, b: &mut Box<T>) {
        let mut ptr = NonNull::from(&mut **b).cast::<u8>();
        // SAFETY: a Box owns its block, allocated with T's layout by the global allocator
        // (dangling when T is zero-sized: the layout's size 0 makes `block` skip it).
        unsafe { self.block(&mut ptr, Layout::new::<T>()) };
        // SAFETY: the block (moved or not) holds the T. The old box is overwritten without
        // being read, as its block may be freed: even moving a dangling box is undefined.
        unsafe { std::ptr::write(b, Box::from_raw(ptr.as_ptr().cast::<T>())) };
    }

    /// Visits a vector's buffer.
    pub fn vec<T>(&mut self, v: &mut Vec<T>) {
        let Ok(layout) = Layout::array::<T>(v.capacity()) else {
            return;
        };
        let (len, capacity) = (v.len(), v.capacity());
        let mut ptr = NonNull::new(v.as_mut_ptr())
            .expect("a Vec's pointer")
            .cast::<u8>();
        // SAFETY: a Vec owns its buffer, allocated with this layout by the global allocator
        // (dangling, size 0, when it has no capacity: skipped).
        unsafe { self.block(&mut ptr, layout) };
        // SAFETY: the buffer (moved or not) holds `len` elements in `capacity`; the old Vec
        // is overwritten without being read or freed, as in `boxed`.
        unsafe {
            std::ptr::write(
                v,
                Vec::from_raw_parts(ptr.as_ptr().cast::<T>(), len, capacity),
            )
        };
    }

    /// Visits a boxed slice's block.
    pub fn boxed_slice<T>(&mut self, b: &mut Box<[T]>) {
        let mut v = std::mem::take(b).into_vec();
        self.vec(&mut v);
        *b = v.into_boxed_slice();
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// Moves every block (a fresh allocation, a copy, the old one freed), and stops after
    /// `budget` blocks: what jemalloc's advice would do on a badly fragmented heap.
    pub struct MoveAll {
        pub budget: u64,
        pub moved: u64,
    }

    impl MoveAll {
        pub fn new(budget: u64) -> Self {
            Self { budget, moved: 0 }
        }
    }

    impl Mover for MoveAll {
        unsafe fn relocate(&mut self, ptr: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
            // SAFETY: the layout has a non-zero size (Defrag skips empty blocks); `ptr` holds
            // `layout.size()` bytes allocated with that layout.
            unsafe {
                let new = NonNull::new(std::alloc::alloc(layout))?;
                std::ptr::copy_nonoverlapping(ptr.as_ptr(), new.as_ptr(), layout.size());
                // Scribbled before being freed: a pointer left to the old block reads garbage.
                std::ptr::write_bytes(ptr.as_ptr(), 0xa5, layout.size());
                std::alloc::dealloc(ptr.as_ptr(), layout);
                self.moved += 1;
                Some(new)
            }
        }

        fn should_stop(&mut self) -> bool {
            self.moved >= self.budget
        }
    }

    /// Defragments `value` with `visit` in steps of `budget` blocks, as the server's late
    /// defrag does, until a step finishes; returns the steps taken.
    pub fn in_steps<V>(value: &mut V, budget: u64, visit: impl Fn(&mut V, &mut Defrag)) -> u64 {
        let (mut cursor, mut steps) = (0, 0);
        loop {
            steps += 1;
            let mut mover = MoveAll::new(budget);
            let mut d = Defrag::new(&mut mover, cursor);
            visit(value, &mut d);
            match d.resume_at() {
                Some(at) => cursor = at,
                None => return steps,
            }
            assert!(steps < 1_000_000, "defrag makes no progress");
        }
    }

    #[test]
    fn moves_boxes_vectors_and_slices_in_steps() {
        let mut b = Box::new([7u64; 5]);
        let mut v: Vec<u32> = (0..100).collect();
        let mut s: Box<[u8]> = vec![3; 40].into_boxed_slice();
        let mut empty: Vec<u64> = Vec::new();
        let visit = |(b, v, s, e): &mut (_, _, _, _), d: &mut Defrag| {
            d.boxed(b);
            d.vec(v);
            d.boxed_slice(s);
            d.vec(e);
        };
        let mut all = (b, v, s, empty);
        // One block per step: three steps move the three blocks, a fourth finds nothing left.
        assert_eq!(in_steps(&mut all, 1, visit), 4);
        (b, v, s, empty) = all;
        assert_eq!(*b, [7; 5]);
        assert_eq!(v, (0..100).collect::<Vec<_>>());
        assert_eq!(&*s, &[3; 40][..]);
        assert!(empty.is_empty());
        v.push(5);
        assert_eq!(v.len(), 101);
    }
}
