//! What the `BF.*` commands ask of a Bloom filter, whatever it is stored as: lcbloom's own
//! chains (`chain.rs`, implemented here), RedisBloom's imported chains (`redisbloom/`), and
//! any later representation (a folder of its own implementing [`BloomFilter`]). The handlers
//! (`commands.rs`) parse, look the key up once, and call these methods; they never name a
//! representation except to create one.
//!
//! The contract, one method per command family:
//! * `contains_all`: `BF.EXISTS`/`BF.MEXISTS`, one answer per item, in order.
//! * `add_all`: `BF.ADD`/`BF.MADD`/`BF.INSERT` on an existing filter, in order, stopping after
//!   the first error. Each result says whether the item was new (the reply's 1) and whether
//!   the filter changed (what is replicated and notified); a filter may change without the
//!   item being new (a windowed filter that restarts an item's window).
//! * `clock`: the filter's own time, for a filter whose writes depend on the time (they are
//!   replicated with it when it moves the filter's clock).
//! * `info`: `BF.INFO`'s five RedisBloom fields, the `LAYOUT` answer, and fields of the
//!   representation's own that follow RedisBloom's in the full reply.
//! * `card`: `BF.CARD`.
//! * `scandump`/`load_chunk`: `BF.SCANDUMP`'s parts after the key was found, and
//!   `BF.LOADCHUNK` into an existing filter. A header on a missing key makes a new filter of
//!   the kind its format says (`load::from_header`, where the formats are told apart).
//!
//! What a filter needs from the server it asks through [`Env`], only when it needs it (reading
//! the memory limit or the clock costs a call into Redis; a chain with room for the items asks
//! for neither).

use super::chain::{Chain, ChainError};
use super::codec;
use super::filter::Layout;
use crate::core::chunks::{chunk_start, iterator_after};
use crate::core::decode::DecodeError;
use crate::core::hashing::ItemHash;

/// What a filter may ask of the server while a command runs.
pub trait Env {
    /// The key's byte budget (`max-memory-per-key`; unlimited while the server loads).
    fn memory_limit(&self) -> u64;
    /// The command's time, in ms.
    fn now_ms(&self) -> u64;
}

/// What an add did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// Not (probably) present before: stored. The reply is 1.
    New,
    /// (Probably) present, and the filter changed all the same. The reply is 0.
    Refreshed,
    /// (Probably) present; nothing changed. The reply is 0.
    Present,
}

impl Added {
    pub fn is_new(self) -> bool {
        self == Added::New
    }

    /// Whether the filter changed (the write is replicated and notified).
    pub fn changed(self) -> bool {
        self != Added::Present
    }

    /// `New` if `new`, else `Present`: a filter whose adds change it only for new items.
    pub fn new_or_present(new: bool) -> Self {
        if new {
            Added::New
        } else {
            Added::Present
        }
    }
}

/// `BF.INFO`'s figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Info {
    /// Items the filter is sized for (RedisBloom: the sum of its sub-filters').
    pub capacity: u64,
    /// `Size`: bytes, by the representation's own accounting (RedisBloom's for its filters).
    pub size: u64,
    /// `Number of filters`.
    pub filters: u64,
    /// `Number of items inserted`.
    pub items: u64,
    /// `Expansion rate`, None for a non-scaling filter.
    pub expansion: Option<u32>,
    /// `BF.INFO key LAYOUT`.
    pub layout: &'static str,
    /// Fields after RedisBloom's five in the full reply (none for a filter RedisBloom could
    /// have made, so that its clients see RedisBloom's reply).
    pub extra: Vec<(&'static str, Field)>,
}

/// The value of a field of a representation's own in `BF.INFO`'s full reply.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Field {
    /// Yes or no (the reply's one rule for such fields decides how it is sent).
    Flag(bool),
    Number(i64),
}

/// Why `BF.LOADCHUNK` refused a chunk for an existing filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// An iterator the filter's format does not take.
    Iterator,
    /// A header (iterator 1) for a key that exists.
    Exists,
    /// The iterator and the chunk's length do not name a place in the data.
    Length,
    /// The bytes themselves.
    Data(DecodeError),
}

impl From<DecodeError> for ChunkError {
    fn from(e: DecodeError) -> Self {
        ChunkError::Data(e)
    }
}

/// What `add_all` appends each item's result to, in order (a list the caller owns: the
/// results are pushed, not passed through a callback per item).
pub type AddResults = Vec<Result<Added, ChainError>>;

/// A Bloom filter as the `BF.*` commands serve it (see the top of this file).
pub trait BloomFilter {
    /// Whether the filter (probably) holds the item: `contains_all` of one item, which
    /// `BF.EXISTS` calls without the slice and the callback.
    fn contains_one(&self, item: &[u8], env: &dyn Env) -> bool {
        let mut found = false;
        self.contains_all(&[item], env, &mut |f| found = f);
        found
    }

    /// Looks the items up in order, passing each answer to `found`.
    fn contains_all(&self, items: &[&[u8]], env: &dyn Env, found: &mut dyn FnMut(bool));

    /// Adds the item: `add_all` of one item, which `BF.ADD` calls without the lists.
    fn add_one(&mut self, item: &[u8], env: &dyn Env) -> Result<Added, ChainError>;

    /// Adds the items in order, appending each result to `results`, and stops after the first
    /// error (later items are not processed). An error changes nothing.
    fn add_all(&mut self, items: &[&[u8]], env: &dyn Env, results: &mut AddResults);

    /// For a filter whose writes depend on the command's time (`Env::now_ms`), as a windowed
    /// filter's do, its own time (ms): a write at a time no later than that runs at the
    /// filter's time, otherwise at its own, which the handlers then replicate with it
    /// (`BF.INSERT ... AT`). Only such a filter takes `WINDOW` or `AT` on an existing key.
    /// None: the time does not matter.
    fn clock(&self) -> Option<u64> {
        None
    }

    fn info(&self, env: &dyn Env) -> Info;

    /// `BF.CARD`: the items the filter holds (an estimate where that is all it has).
    fn card(&self, env: &dyn Env) -> u64;

    /// `BF.SCANDUMP key iterator`: `(next, bytes)`, the header at iterator 0 (next 1), then
    /// chunks, and `(0, [])` past the end or for a negative iterator (as RedisBloom answers).
    fn scandump(&self, iterator: i64) -> (u64, Vec<u8>);

    /// `BF.LOADCHUNK key iterator data` into this filter; nothing changes on an error.
    fn load_chunk(&mut self, iterator: i64, data: &[u8]) -> Result<(), ChunkError>;
}

impl BloomFilter for Chain {
    fn contains_one(&self, item: &[u8], _: &dyn Env) -> bool {
        self.contains(&self.hash(item))
    }

    fn contains_all(&self, items: &[&[u8]], env: &dyn Env, found: &mut dyn FnMut(bool)) {
        if let [item] = items {
            return found(self.contains_one(item, env));
        }
        // Hashed first so that the chain can prefetch ahead of its probes.
        let hashes: Vec<ItemHash> = items.iter().map(|i| self.hash(i)).collect();
        self.contains_batch(&hashes, found);
    }

    fn add_one(&mut self, item: &[u8], env: &dyn Env) -> Result<Added, ChainError> {
        let limit = self.limit_for(1, env);
        self.add(&self.hash(item), limit).map(Added::new_or_present)
    }

    fn add_all(&mut self, items: &[&[u8]], env: &dyn Env, results: &mut AddResults) {
        if let [item] = items {
            return results.push(self.add_one(item, env));
        }
        let limit = self.limit_for(items.len() as u64, env);
        let hashes: Vec<ItemHash> = items.iter().map(|i| self.hash(i)).collect();
        self.add_batch(&hashes, limit, |r| {
            results.push(r.map(Added::new_or_present))
        });
    }

    fn info(&self, _: &dyn Env) -> Info {
        let blocked = self.layout() == Layout::Blocked;
        Info {
            capacity: self.capacity(),
            size: self.memory_bytes(),
            filters: self.filters().len() as u64,
            items: self.items(),
            expansion: self.expansion(),
            layout: self.layout().name(),
            // A standard filter's reply is RedisBloom's; a blocked one says so.
            extra: if blocked {
                vec![("Blocked", Field::Flag(true))]
            } else {
                vec![]
            },
        }
    }

    fn card(&self, _: &dyn Env) -> u64 {
        self.items()
    }

    fn scandump(&self, iterator: i64) -> (u64, Vec<u8>) {
        scandump_part(
            iterator,
            || codec::encode_header(self),
            |offset| codec::data_chunk(self, offset),
        )
    }

    fn load_chunk(&mut self, iterator: i64, data: &[u8]) -> Result<(), ChunkError> {
        let offset = data_offset(iterator, data.len())?;
        Ok(codec::write_data(self, offset, data)?)
    }
}

impl Chain {
    /// The memory limit for adding `n` items. It only matters when a sub-filter is added:
    /// the writes that cannot scale skip asking the server for it.
    #[inline]
    fn limit_for(&self, n: u64, env: &dyn Env) -> u64 {
        match self.can_hold(n) {
            true => u64::MAX,
            false => env.memory_limit(),
        }
    }
}

/// `BF.SCANDUMP`'s part at `iterator` of a filter whose dump is `header()` then its data in
/// chunks (`chunk(offset)`: the chunk starting at that data offset, None past the end): a
/// negative iterator ends the dump, 0 gives the header (next: 1), n ≥ 1 the chunk at data
/// offset n − 1 (next: 1 + its end), past the data the end (0 and nothing).
pub fn scandump_part<C: Into<Vec<u8>>>(
    iterator: i64,
    header: impl FnOnce() -> Vec<u8>,
    chunk: impl FnOnce(u64) -> Option<C>,
) -> (u64, Vec<u8>) {
    let Ok(iterator) = u64::try_from(iterator) else {
        return (0, Vec::new());
    };
    let Some(offset) = iterator.checked_sub(1) else {
        return (1, header());
    };
    match chunk(offset).map(Into::into) {
        Some(chunk) => (iterator_after(offset + chunk.len() as u64), chunk),
        None => (0, Vec::new()),
    }
}

/// Where a `BF.LOADCHUNK` data chunk of `len` bytes named by `iterator` starts in the data:
/// iterator 1 is the header, which only a missing key takes.
pub fn data_offset(iterator: i64, len: usize) -> Result<u64, ChunkError> {
    let iterator = u64::try_from(iterator)
        .ok()
        .filter(|&i| i >= 1)
        .ok_or(ChunkError::Iterator)?;
    if iterator == 1 {
        return Err(ChunkError::Exists);
    }
    chunk_start(iterator, len).ok_or(ChunkError::Length)
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::bloom::load::from_header;
    use crate::bloom::redisbloom::chain::RedisBloomChain;
    use crate::core::hashing::hash_item;

    /// The server as a test sees it: no memory limit, time stands still.
    pub struct Unlimited;

    impl Env for Unlimited {
        fn memory_limit(&self) -> u64 {
            u64::MAX
        }

        fn now_ms(&self) -> u64 {
            0
        }
    }

    /// A RedisBloom chain grown to five links through the trait's adds.
    pub fn grown() -> RedisBloomChain {
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(2), u64::MAX).unwrap();
        let items: Vec<String> = (0..200).map(|i| format!("i{i}")).collect();
        let items: Vec<&[u8]> = items.iter().map(|i| i.as_bytes()).collect();
        let mut results = Vec::new();
        c.add_all(&items, &Unlimited, &mut results);
        let new = results.iter().filter(|r| r.unwrap().is_new()).count() as u64;
        assert_eq!((new, c.links().len()), (c.size(), 5));
        c
    }

    /// Every part `BF.SCANDUMP` gives, header first.
    fn dump(filter: &dyn BloomFilter) -> Vec<(u64, Vec<u8>)> {
        let mut parts = vec![filter.scandump(0)];
        loop {
            let part = filter.scandump(parts.last().unwrap().0 as i64);
            if part.0 == 0 {
                return parts;
            }
            parts.push(part);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn scandump_and_loadchunk_rebuild_either_kind() {
        let mut own = Chain::new(0.01, 10_000, 2, u64::MAX).unwrap();
        for i in 0..15_000u64 {
            own.add(&hash_item(&i.to_le_bytes()), u64::MAX).unwrap();
        }
        let filters: [&dyn BloomFilter; 2] = [&own, &grown()];
        for filter in filters {
            let parts = dump(filter);
            assert!(parts.len() >= 2);
            let mut copy = from_header(&parts[0].1, u64::MAX).unwrap();
            let copy = copy.as_filter_mut();
            assert!(copy.load_chunk(1, &parts[0].1).is_err());
            for (next, bytes) in &parts[1..] {
                copy.load_chunk(*next as i64, bytes).unwrap();
            }
            assert_eq!(dump(copy), parts);
        }
        assert_eq!(own.scandump(-1), (0, Vec::new()));
        assert_eq!(grown().scandump(-1), (0, Vec::new()));
        let mut again = own.clone();
        assert_eq!(again.load_chunk(0, b"x"), Err(ChunkError::Iterator));
        assert_eq!(again.load_chunk(1, b"x"), Err(ChunkError::Exists));
        assert_eq!(again.load_chunk(2, b"xy"), Err(ChunkError::Length));
        assert_eq!(again, own);
    }
}
