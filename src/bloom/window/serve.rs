//! How a windowed filter answers the `BF.*` commands (`any.rs`'s `BloomFilter`): every
//! operation at the command's time (`Env::now_ms`, which the handlers take from the
//! primary's clock or from the `AT` a replicated write carries).
//!
//! * `BF.ADD`/`BF.MADD`/`BF.INSERT`: 1 for an item not found, 0 for one found (its window
//!   restarts: the filter changes, so the write is replicated and notified all the same).
//! * `BF.EXISTS`/`BF.MEXISTS`: whether the item was added within the window (or a false
//!   positive).
//! * `BF.CARD` and `BF.INFO`'s `Number of items inserted`: the estimated distinct items
//!   added within the window. `Capacity`: items per window the live layers are sized for;
//!   `Number of filters`: the live layers. After RedisBloom's five fields: `Window`
//!   (seconds), `Stored` (fingerprints held: one per item re-added within a layer, one in
//!   each layer for an item re-added after the filter scaled) and `Time` (the filter's
//!   clock: the latest write's time, ms since the epoch).
//!   `BF.INFO key LAYOUT` answers `window`.
//! * `BF.SCANDUMP`/`BF.LOADCHUNK`: the header at iterator 0, then data chunks named by
//!   1 + their end offset; chunks load in order only, and a filter still loading refuses
//!   adds (a later chunk would overwrite them) and dumps the header it arrived with and the
//!   data received, as it saves. A negative iterator ends the dump, as
//!   for every Bloom filter.
//! * Its writes depend on the time (`clock`: the filter's own, the latest a write brought):
//!   the handlers replicate a write that moves it forward with its time.
//! * Items are hashed under the filter's own seed (`WindowFilter::hash`), which `BF.INFO`
//!   does not show, as for every filter.

use super::value::Windowed;
use crate::bloom::any::{
    data_offset, scandump_part, AddResults, Added, BloomFilter, ChunkError, Env, Field, Info,
};
use crate::bloom::chain::ChainError;
use crate::core::hashing::ItemHash;

/// `BF.INFO key LAYOUT` of a windowed filter.
pub const LAYOUT: &str = "window";

impl BloomFilter for Windowed {
    fn contains_one(&self, item: &[u8], env: &dyn Env) -> bool {
        self.filter.contains(&self.filter.hash(item), env.now_ms())
    }

    fn contains_all(&self, items: &[&[u8]], env: &dyn Env, found: &mut dyn FnMut(bool)) {
        let now = env.now_ms();
        for item in items {
            found(self.filter.contains(&self.filter.hash(item), now));
        }
    }

    fn add_one(&mut self, item: &[u8], env: &dyn Env) -> Result<Added, ChainError> {
        if !self.is_complete() {
            return Err(ChainError::Loading);
        }
        self.filter
            .add(&self.filter.hash(item), env.now_ms(), env.memory_limit())
    }

    fn add_all(&mut self, items: &[&[u8]], env: &dyn Env, results: &mut AddResults) {
        if !self.is_complete() {
            return results.push(Err(ChainError::Loading));
        }
        let (now, limit) = (env.now_ms(), env.memory_limit());
        let hashes: Vec<ItemHash> = items.iter().map(|item| self.filter.hash(item)).collect();
        self.filter.add_all(&hashes, now, limit, results);
    }

    fn clock(&self) -> Option<u64> {
        Some(self.filter.time())
    }

    fn info(&self, env: &dyn Env) -> Info {
        let (f, now) = (&self.filter, env.now_ms());
        let p = f.params();
        let number = |n: u64| Field::Number(i64::try_from(n).unwrap_or(i64::MAX));
        Info {
            capacity: f.capacity(now),
            size: self.memory_bytes(),
            filters: f.live_layer_count(now),
            items: f.cardinality(now),
            expansion: (p.expansion > 0).then_some(p.expansion),
            layout: LAYOUT,
            extra: vec![
                ("Window", number(p.window_secs.into())),
                ("Stored", number(f.stored(now))),
                ("Time", number(f.time())),
            ],
        }
    }

    fn card(&self, env: &dyn Env) -> u64 {
        self.filter.cardinality(env.now_ms())
    }

    fn scandump(&self, iterator: i64) -> (u64, Vec<u8>) {
        scandump_part(iterator, || self.header(), |offset| self.data_chunk(offset))
    }

    fn load_chunk(&mut self, iterator: i64, data: &[u8]) -> Result<(), ChunkError> {
        let start = data_offset(iterator, data.len())?;
        Ok(Windowed::load_chunk(self, start, data)?)
    }
}
