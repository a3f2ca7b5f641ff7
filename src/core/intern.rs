//! One shared copy of a value many keys hold alike (pure): a counter's geometry, a filter's
//! creation parameters. Millions of small keys created with the same defaults then point at one
//! `Arc` (8 bytes each) instead of each carrying the parameters, which matters when a whole key
//! costs about a hundred bytes.
//!
//! The table maps a value's 64-bit hash to a `Weak` reference and holds no copy of its own, so
//! a value costs its one `Arc` and a table slot, and a value no key uses any more is freed with
//! its last key (a hostile client creating many distinct parameters cannot make memory grow
//! for good). Entries whose value is gone are removed at once when their last holder gives
//! the value back through [`Interner::release`] (a filter replacing its parameters as it
//! grows), else swept when the table has doubled since the last sweep; until then such an
//! entry keeps the `Arc`'s allocation, not the value's own. Two values of one hash are rare
//! enough that the second is simply not shared. Dropping an `Arc` never touches the table, so
//! values may be freed on Redis's lazy-free thread; interning takes a lock and runs where
//! values are created (commands, RDB load, copy). [`share_of`] divides a value's bytes among
//! its holders: what a key's `MEMORY USAGE` counts of it.

use crate::core::alloc::size_class;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, Weak};

pub struct Interner<T> {
    table: LazyLock<Mutex<Table<T>>>,
}

struct Table<T> {
    entries: HashMap<u64, Weak<T>>,
    /// Entries after the last sweep: the next one runs at twice as many.
    swept_at: usize,
    /// The value interned last. Values come in runs of one (keys created one after another
    /// with the configured defaults), and comparing with it spares hashing the value. (Once
    /// the value is gone, this keeps its `Arc`'s block, as a swept entry does.)
    last: Weak<T>,
}

/// The table's key of a value (a fixed hasher: the same value, the same key).
fn key_of<T: Hash>(value: &T) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

impl<T: Eq + Hash> Interner<T> {
    pub const fn new() -> Self {
        Self {
            table: LazyLock::new(|| {
                Mutex::new(Table {
                    entries: HashMap::new(),
                    swept_at: 0,
                    last: Weak::new(),
                })
            }),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table<T>> {
        // A panic while the lock is held cannot leave the map inconsistent (each step is one
        // map operation), so a poisoned lock is still usable.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared copy of `value`, made if no live one exists.
    pub fn intern(&self, value: T) -> Arc<T> {
        let mut table = self.table();
        if let Some(last) = table.last.upgrade().filter(|last| **last == value) {
            return last;
        }
        let key = key_of(&value);
        match table.entries.get(&key).map(Weak::upgrade) {
            Some(Some(live)) if *live == value => {
                table.last = Arc::downgrade(&live);
                return live;
            }
            // Another value of the same hash: this one goes unshared.
            Some(Some(_)) => return Arc::new(value),
            _ => {}
        }
        if table.entries.len() >= 2 * table.swept_at.max(32) {
            table.entries.retain(|_, weak| weak.strong_count() > 0);
            table.swept_at = table.entries.len();
        }
        let shared = Arc::new(value);
        table.entries.insert(key, Arc::downgrade(&shared));
        table.last = Arc::downgrade(&shared);
        shared
    }

    /// Gives `value` back: when it was the last holder, its entry goes with it now rather
    /// than at the next sweep. (Other holders may drop theirs without this, on any thread.)
    pub fn release(&self, value: Arc<T>) {
        if Arc::strong_count(&value) > 1 {
            return;
        }
        let key = key_of(&*value);
        let mut table = self.table();
        // Under the lock no one can upgrade the entry: a count of 1 is this holder alone.
        let ours = table
            .entries
            .get(&key)
            .is_some_and(|weak| weak.as_ptr() == Arc::as_ptr(&value));
        if ours && Arc::strong_count(&value) == 1 {
            table.entries.remove(&key);
        }
        drop(table);
        drop(value);
    }

    /// Entries in the table, live or not yet swept (for tests).
    pub fn len(&self) -> usize {
        self.table().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one entry of a table takes on average: its bucket (a 64-bit hash and a `Weak`, 16
/// bytes) and control byte, in a table between 7/16 and 7/8 full.
const ENTRY_BYTES: u64 = 28;

/// What an interned `T` takes besides blocks of its own: its `Arc`'s block (two counts and
/// the value, in its size class) and its table entry.
pub fn held_bytes<T>() -> u64 {
    size_class((2 * 8 + std::mem::size_of::<T>()) as u64) + ENTRY_BYTES
}

/// A holder's share of a shared value whose own further blocks take `bytes`: those and
/// [`held_bytes`], divided among the value's holders. Keys created alike share nearly nothing
/// each; a key whose value no other key has pays the whole.
pub fn share_of<T>(shared: &Arc<T>, bytes: u64) -> u64 {
    (bytes + held_bytes::<T>()) / Arc::strong_count(shared) as u64
}

impl<T: Eq + Hash> Default for Interner<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The value made last, by the parameters it was made from: values are made in runs of one
/// (keys created one after another with the configured defaults), and making one again from
/// its parameters (sizing it, then interning it) can be most of a create's work. Weakly held,
/// so that the value goes with its last holder (its `Arc`'s block stays until another value
/// replaces it).
pub struct LastMade<K, T> {
    last: Mutex<Option<(K, Weak<T>)>>,
}

impl<K: PartialEq, T> LastMade<K, T> {
    pub const fn new() -> Self {
        Self {
            last: Mutex::new(None),
        }
    }

    /// The value made from `key` last, while something holds it; else `make()`'s, remembered.
    pub fn get_or_make<E>(
        &self,
        key: K,
        make: impl FnOnce() -> Result<Arc<T>, E>,
    ) -> Result<Arc<T>, E> {
        // As `Interner::table`: a panic cannot leave the slot half written.
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((made_from, value)) = &*last {
            if let Some(value) = value.upgrade().filter(|_| *made_from == key) {
                return Ok(value);
            }
        }
        let made = make()?;
        *last = Some((key, Arc::downgrade(&made)));
        Ok(made)
    }
}

impl<K: PartialEq, T> Default for LastMade<K, T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_share_a_value_and_its_entry() {
        let interner: Interner<(u64, u64)> = Interner::new();
        let one = interner.intern((7, 7));
        // The Arc's block: two counts and 16 bytes of value, 32 bytes.
        let whole = 100 + 32 + ENTRY_BYTES;
        assert_eq!(held_bytes::<(u64, u64)>(), 32 + ENTRY_BYTES);
        assert_eq!(share_of(&one, 100), whole);
        let others: Vec<_> = (0..3).map(|_| interner.intern((7, 7))).collect();
        assert_eq!(share_of(&one, 100), whole / 4);
        drop(others);
        assert_eq!(share_of(&one, 100), whole);
    }

    #[test]
    fn equal_values_share_one_copy_while_used() {
        let interner: Interner<(u64, u64)> = Interner::new();
        let a = interner.intern((1, 2));
        let b = interner.intern((1, 2));
        assert!(Arc::ptr_eq(&a, &b));
        let c = interner.intern((1, 3));
        assert!(!Arc::ptr_eq(&a, &c));
        drop((a, b));
        // Freed with its last user: a new one is made.
        let again = interner.intern((1, 2));
        assert_eq!(Arc::strong_count(&again), 1);
    }

    #[test]
    fn released_values_leave_the_table_at_once() {
        let interner: Interner<Vec<u64>> = Interner::new();
        let kept = interner.intern(vec![0]);
        // A value grown step by step, each step giving the last one back.
        let mut grown = interner.intern(vec![1]);
        for i in 2..100 {
            let mut next = (*grown).clone();
            next.push(i);
            let old = std::mem::replace(&mut grown, interner.intern(next));
            interner.release(old);
        }
        assert_eq!(interner.len(), 2);
        // A value still held elsewhere stays.
        let other = grown.clone();
        interner.release(grown);
        assert!(Arc::ptr_eq(&other, &interner.intern((*other).clone())));
        interner.release(other);
        assert_eq!(interner.len(), 1);
        assert!(Arc::ptr_eq(&kept, &interner.intern(vec![0])));
    }

    /// Values whose hashes collide (all hash alike here) stay correct: the first is shared,
    /// the others are not.
    #[test]
    fn values_of_one_hash_are_each_right() {
        #[derive(PartialEq, Eq, Debug)]
        struct Same(u64);
        impl Hash for Same {
            fn hash<H: Hasher>(&self, _: &mut H) {}
        }
        let interner: Interner<Same> = Interner::new();
        let a = interner.intern(Same(1));
        let b = interner.intern(Same(2));
        assert_eq!((a.0, b.0), (1, 2));
        assert!(Arc::ptr_eq(&a, &interner.intern(Same(1))));
        assert_eq!(interner.intern(Same(2)).0, 2);
        // Once the first is gone, the slot takes the next.
        interner.release(a);
        let b2 = interner.intern(Same(2));
        assert!(Arc::ptr_eq(&b2, &interner.intern(Same(2))));
    }

    /// The last value made is given again for the same parameters while it is held; other
    /// parameters, or a value no one holds, are made anew.
    #[test]
    fn the_last_value_made_is_made_once() {
        let last: LastMade<u64, u64> = LastMade::new();
        let mut made = 0;
        let mut make = |key: u64| {
            last.get_or_make(key, || {
                made += 1;
                Ok::<_, ()>(Arc::new(key * 10))
            })
            .unwrap()
        };
        let a = make(1);
        let again = make(1);
        assert!(Arc::ptr_eq(&a, &again));
        let b = make(2);
        assert_eq!((*a, *b), (10, 20));
        let a2 = make(1);
        assert!(!Arc::ptr_eq(&a, &a2) && *a2 == 10);
        drop((a, again, a2));
        assert_eq!(*make(1), 10);
        assert_eq!(made, 4);
        assert_eq!(last.get_or_make(3, || Err("refused")), Err("refused"));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn unused_entries_are_swept() {
        let interner: Interner<u64> = Interner::new();
        let kept = interner.intern(u64::MAX);
        for i in 0..10_000 {
            drop(interner.intern(i));
        }
        assert!(interner.len() <= 64, "{}", interner.len());
        assert!(Arc::ptr_eq(&kept, &interner.intern(u64::MAX)));
    }
}
