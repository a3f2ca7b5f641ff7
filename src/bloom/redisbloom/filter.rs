//! RedisBloom's chain as the `BF.*` commands serve every Bloom filter (`any::BloomFilter`):
//! its lookups and adds, its `BF.INFO` figures and its scan-dump (`scandump.rs`).

use super::chain::RedisBloomChain;
use super::scandump;
use crate::bloom::any::{Added, BloomFilter, ChunkError, Env, Info};
use crate::bloom::chain::ChainError;

/// RedisBloom's answers: one item at a time (each add may grow the chain), its own scan-dump
/// chunks, and its `BF.INFO` figures with `Size` by its own accounting.
impl BloomFilter for RedisBloomChain {
    fn contains_one(&self, item: &[u8], _: &dyn Env) -> bool {
        self.contains(&self.hash(item))
    }

    fn contains_all(&self, items: &[&[u8]], _: &dyn Env, found: &mut dyn FnMut(bool)) {
        items
            .iter()
            .for_each(|item| found(self.contains(&self.hash(item))));
    }

    fn add_all(
        &mut self,
        items: &[&[u8]],
        env: &dyn Env,
        done: &mut dyn FnMut(Result<Added, ChainError>),
    ) {
        let limit = env.memory_limit();
        for item in items {
            let result = self.add(&self.hash(item), limit);
            let stop = result.is_err();
            done(result.map(Added::new_or_present));
            if stop {
                return;
            }
        }
    }

    fn info(&self, _: &dyn Env) -> Info {
        Info {
            capacity: self.capacity(),
            size: self.redisbloom_size(),
            filters: self.links().len() as u64,
            items: self.size(),
            expansion: self.expansion(),
            layout: "redisbloom",
            extra: Vec::new(),
        }
    }

    fn card(&self, _: &dyn Env) -> u64 {
        self.size()
    }

    /// As RedisBloom: any iterator past the end, or negative, ends the dump.
    fn scandump(&self, iterator: i64) -> (u64, Vec<u8>) {
        if iterator == 0 {
            return (1, scandump::encode_header(self));
        }
        let chunk = u64::try_from(iterator)
            .ok()
            .and_then(|it| scandump::chunk(self, it));
        match chunk {
            Some((next, data)) => (next, data.to_vec()),
            None => (0, Vec::new()),
        }
    }

    /// RedisBloom's rules and texts (`scandump::load_chunk`).
    fn load_chunk(&mut self, iterator: i64, data: &[u8]) -> Result<(), ChunkError> {
        Ok(scandump::load_chunk(self, iterator, data)?)
    }
}
