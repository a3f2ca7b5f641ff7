//! One shared copy of a value many keys hold alike (pure): a counter's geometry, a filter's
//! creation parameters. Millions of small keys created with the same defaults then point at one
//! `Arc` (8 bytes each) instead of each carrying the parameters, which matters when a whole key
//! costs about a hundred bytes.
//!
//! The table holds `Weak` references, so a value no key uses any more is freed with its last
//! key (a hostile client creating many distinct parameters cannot make memory grow for good);
//! entries whose value is gone are swept when the table has doubled since the last sweep.
//! Dropping an `Arc` never touches the table, so values may be freed on Redis's lazy-free
//! thread; interning takes a lock and runs where values are created (commands, RDB load, copy).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex, Weak};

pub struct Interner<T> {
    table: LazyLock<Mutex<Table<T>>>,
}

struct Table<T> {
    entries: HashMap<T, Weak<T>>,
    /// Entries after the last sweep: the next one runs at twice as many.
    swept_at: usize,
}

impl<T: Eq + Hash + Clone> Interner<T> {
    pub const fn new() -> Self {
        Self {
            table: LazyLock::new(|| {
                Mutex::new(Table {
                    entries: HashMap::new(),
                    swept_at: 0,
                })
            }),
        }
    }

    /// The shared copy of `value`, made if no live one exists.
    pub fn intern(&self, value: T) -> Arc<T> {
        // A panic while the lock is held cannot leave the map inconsistent (each step below is
        // one map operation), so a poisoned lock is still usable.
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(live) = table.entries.get(&value).and_then(Weak::upgrade) {
            return live;
        }
        if table.entries.len() >= 2 * table.swept_at.max(32) {
            table.entries.retain(|_, weak| weak.strong_count() > 0);
            table.swept_at = table.entries.len();
        }
        let shared = Arc::new(value.clone());
        table.entries.insert(value, Arc::downgrade(&shared));
        shared
    }

    /// Entries in the table, live or not yet swept (for tests).
    pub fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Eq + Hash + Clone> Default for Interner<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
