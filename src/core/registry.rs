//! Small numbers for values many keys share (pure): a key names its shared value by a 16-bit id
//! where an `Arc` takes a word, which lets a counter's block address and its parameters share
//! one word (`lc/stored.rs`).
//!
//! Ids run from 1 to [`MAX_ID`]; 0 is never handed out, so a holder may give it a meaning of
//! its own. An entry lives while some holder has acquired it and not yet released it; its id
//! is then reused. Reading an entry takes no lock (a page, then a slot), so it may run on any
//! thread; acquiring and releasing take the lock, and run where values are made and freed
//! (commands, RDB load, copy; free, also on Redis's lazy-free thread).
//!
//! **Loans.** Each entry holds two counts of its `Arc`: its own and one it lends. [`lend`]
//! hands out the entry's `Arc` without a count of its own: the borrower forgets it
//! (`mem::forget`) instead of dropping it, and a borrower that dropped it after all (a counter
//! whose parameters a write replaced) gives the count back with [`relend`]. A borrowed value
//! thus costs no atomic operation, and a dropped loan never frees what the registry still
//! points at.
//!
//! [`lend`]: Registry::lend
//! [`relend`]: Registry::relend

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

const PAGE_BITS: u32 = 8;
const PAGE: usize = 1 << PAGE_BITS;
/// The largest id: 65,535 entries live at once at most.
pub const MAX_ID: u16 = u16::MAX;

type Page<T> = [AtomicPtr<T>; PAGE];

pub struct Registry<T> {
    /// Slot `id` is `pages[id >> 8][id & 0xff]`: the entry's `Arc` (as `Arc::into_raw`), null
    /// while free. Pages are made when first needed and kept (2 KiB each, 512 KiB at most).
    pages: [AtomicPtr<Page<T>>; PAGE],
    book: Mutex<Book>,
}

struct Book {
    /// Holders of each id (index = id; id 0 never has one).
    holders: Vec<u64>,
    /// The id of each live entry, by its value's address.
    ids: BTreeMap<usize, u16>,
    /// Ids released, reused before new ones.
    free: Vec<u16>,
}

/// What one entry takes besides its value: its holders' count, its slot, and its place in the
/// map of ids (an address and an id in a B-tree node, with the node's share of slack).
pub const ENTRY_BYTES: u64 = 40;

impl<T> Registry<T> {
    pub const fn new() -> Self {
        Self {
            pages: [const { AtomicPtr::new(null_mut()) }; PAGE],
            book: Mutex::new(Book {
                holders: Vec::new(),
                ids: BTreeMap::new(),
                free: Vec::new(),
            }),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // Every step under the lock leaves the book whole, so a poisoned lock is still usable.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot of `id`, its page made if `make` and missing; None if its page is missing.
    fn slot(&self, id: u16, make: bool) -> Option<&AtomicPtr<T>> {
        let page = &self.pages[usize::from(id) >> PAGE_BITS];
        let mut ptr = page.load(Ordering::Acquire);
        if ptr.is_null() && make {
            let fresh: Box<Page<T>> = Box::new([const { AtomicPtr::new(null_mut()) }; PAGE]);
            ptr = Box::into_raw(fresh);
            page.store(ptr, Ordering::Release);
        }
        // SAFETY: a page, once stored, lives as long as the registry.
        unsafe { ptr.as_ref() }.map(|p| &p[usize::from(id) & (PAGE - 1)])
    }

    /// The id of `value`, which the caller now holds once more; None when all
    /// [`MAX_ID`] ids are held by other values.
    pub fn acquire(&self, value: &Arc<T>) -> Option<u16> {
        let mut book = self.book();
        let address = Arc::as_ptr(value) as usize;
        if let Some(&id) = book.ids.get(&address) {
            book.holders[usize::from(id)] += 1;
            return Some(id);
        }
        let id = match book.free.pop() {
            Some(id) => id,
            None if book.holders.len() <= usize::from(MAX_ID) => {
                let id = book.holders.len().max(1);
                book.holders.resize(id + 1, 0);
                id as u16
            }
            None => return None,
        };
        let raw = Arc::into_raw(Arc::clone(value));
        // SAFETY: `raw` is a live Arc's; the second count is the one lent out (module header).
        unsafe { Arc::increment_strong_count(raw) };
        // Called with the lock held: pages are only made under it.
        self.slot(id, true)
            .expect("made")
            .store(raw.cast_mut(), Ordering::Release);
        book.ids.insert(address, id);
        book.holders[usize::from(id)] = 1;
        Some(id)
    }

    /// Gives back one hold of `id`; the entry is dropped, and its id freed, with the last.
    pub fn release(&self, id: u16) {
        let mut book = self.book();
        let Some(holders) = book.holders.get_mut(usize::from(id)).filter(|h| **h > 0) else {
            debug_assert!(false, "release of id {id}, which nobody holds");
            return;
        };
        *holders -= 1;
        if *holders > 0 {
            return;
        }
        let slot = self.slot(id, false).expect("a held id's page exists");
        let raw = slot.swap(null_mut(), Ordering::AcqRel);
        book.ids.remove(&(raw as usize));
        book.free.push(id);
        // SAFETY: the entry's own count and the lent one, both taken in `acquire`.
        unsafe {
            Arc::decrement_strong_count(raw);
            Arc::decrement_strong_count(raw);
        }
    }

    /// The entry of `id`, as a pointer.
    ///
    /// # Safety
    /// The caller holds `id` (acquired, not released).
    #[inline]
    pub unsafe fn get(&self, id: u16) -> *const T {
        let page = self.pages[usize::from(id) >> PAGE_BITS].load(Ordering::Acquire);
        // SAFETY: a held id's page exists and lives as long as the registry.
        unsafe { (*page)[usize::from(id) & (PAGE - 1)].load(Ordering::Acquire) }
    }

    /// The entry of `id` as an `Arc` with no count of its own: forget it, never drop it (or
    /// [`relend`](Registry::relend) after dropping it).
    ///
    /// # Safety
    /// The caller holds `id`, and the loan is neither dropped without a `relend` nor used
    /// after the caller releases `id`.
    #[inline]
    pub unsafe fn lend(&self, id: u16) -> ManuallyDrop<Arc<T>> {
        // SAFETY: the pointer came from `Arc::into_raw`, and the lent count covers the Arc.
        ManuallyDrop::new(unsafe { Arc::from_raw(self.get(id)) })
    }

    /// Restores the lent count of `id` after its loan was dropped.
    ///
    /// # Safety
    /// The caller holds `id`, and the loan of `id` was dropped once since it was last made
    /// whole.
    pub unsafe fn relend(&self, id: u16) {
        // SAFETY: the entry's own count keeps the Arc alive.
        unsafe { Arc::increment_strong_count(self.get(id)) };
    }

    /// How many hold `id` now (0 for a free one).
    pub fn holders_of(&self, id: u16) -> u64 {
        let book = self.book();
        book.holders.get(usize::from(id)).copied().unwrap_or(0)
    }

    /// How many hold `value`'s entry (for tests). Asked by value, not by id: a released id may
    /// already name another value.
    pub fn holders(&self, value: &Arc<T>) -> u64 {
        let book = self.book();
        let address = Arc::as_ptr(value) as usize;
        book.ids
            .get(&address)
            .map_or(0, |&id| book.holders[usize::from(id)])
    }
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for Registry<T> {
    fn drop(&mut self) {
        for page in &mut self.pages {
            let page = *page.get_mut();
            if page.is_null() {
                continue;
            }
            // SAFETY: made by `Box::into_raw` in `slot`, and no one else holds the registry.
            let mut page = unsafe { Box::from_raw(page) };
            for slot in page.iter_mut() {
                let raw = *slot.get_mut();
                if !raw.is_null() {
                    // SAFETY: the entry's two counts, as in `release`.
                    unsafe {
                        Arc::decrement_strong_count(raw);
                        Arc::decrement_strong_count(raw);
                    }
                }
            }
        }
    }
}

// SAFETY: the pages hold `Arc<T>`s, shared across threads as `Arc<T>` is when `T: Send + Sync`;
// the book is behind its lock.
unsafe impl<T: Send + Sync> Sync for Registry<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Send for Registry<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_keeps_its_id_while_held_and_frees_it_after() {
        let registry: Registry<u64> = Registry::new();
        let a = Arc::new(7u64);
        let id = registry.acquire(&a).unwrap();
        assert_eq!(id, 1, "0 is never handed out");
        assert_eq!(registry.acquire(&a), Some(id));
        assert_eq!(registry.holders(&a), 2);
        assert_eq!(registry.holders_of(id), 2);
        assert_eq!(registry.holders_of(id + 1), 0, "a free id");
        assert_eq!(
            Arc::strong_count(&a),
            3,
            "the caller's, the entry's, the lent one"
        );
        // SAFETY: `id` is held.
        assert_eq!(unsafe { *registry.get(id) }, 7);
        let b = Arc::new(7u64);
        let other = registry.acquire(&b).unwrap();
        assert_ne!(other, id, "ids follow the Arc, not its value");
        registry.release(id);
        assert_eq!(Arc::strong_count(&a), 3);
        registry.release(id);
        assert_eq!((registry.holders(&a), Arc::strong_count(&a)), (0, 1));
        let c = Arc::new(9u64);
        assert_eq!(registry.acquire(&c), Some(id), "a freed id is reused");
        registry.release(other);
        assert_eq!(Arc::strong_count(&b), 1);
    }

    #[test]
    fn a_dropped_loan_is_made_whole_by_relend() {
        let registry: Registry<String> = Registry::new();
        let value = Arc::new("geometry".to_string());
        let id = registry.acquire(&value).unwrap();
        drop(value);
        // SAFETY: `id` is held; the loan is forgotten.
        let loan = unsafe { registry.lend(id) };
        assert_eq!(loan.as_str(), "geometry");
        // A borrower that drops its loan (as a write replacing the value does) ...
        drop(ManuallyDrop::into_inner(loan));
        // SAFETY: `id` is held and its loan was dropped once.
        unsafe { registry.relend(id) };
        // ... leaves the entry alive and whole.
        // SAFETY: `id` is held.
        let again = unsafe { registry.lend(id) };
        assert_eq!(Arc::strong_count(&again), 2);
        registry.release(id);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn ids_run_out_at_the_limit_and_come_back() {
        let registry: Registry<u32> = Registry::new();
        let values: Vec<Arc<u32>> = (0..=u32::from(MAX_ID)).map(Arc::new).collect();
        let ids: Vec<u16> = values[..usize::from(MAX_ID)]
            .iter()
            .map(|v| registry.acquire(v).unwrap())
            .collect();
        assert_eq!(ids.first(), Some(&1));
        assert_eq!(ids.last(), Some(&MAX_ID));
        let last = &values[usize::from(MAX_ID)];
        assert_eq!(registry.acquire(last), None, "every id held");
        assert_eq!(
            registry.acquire(&values[5]),
            Some(ids[5]),
            "a held value still gets its id"
        );
        registry.release(ids[5]);
        registry.release(ids[9]);
        assert_eq!(registry.acquire(last), Some(ids[9]));
        // Dropping the registry gives back every entry's counts.
        drop(registry);
        assert!(values.iter().all(|v| Arc::strong_count(v) == 1));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn entries_are_read_while_others_come_and_go_on_another_thread() {
        let registry: Arc<Registry<u64>> = Arc::new(Registry::new());
        let kept = Arc::new(42u64);
        let id = registry.acquire(&kept).unwrap();
        let churn = {
            let registry = Arc::clone(&registry);
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    let v = Arc::new(i);
                    let other = registry.acquire(&v).unwrap();
                    registry.release(other);
                }
            })
        };
        for _ in 0..20_000 {
            // SAFETY: `id` is held throughout.
            assert_eq!(unsafe { *registry.get(id) }, 42);
        }
        churn.join().unwrap();
        registry.release(id);
        assert_eq!(Arc::strong_count(&kept), 1);
    }
}
