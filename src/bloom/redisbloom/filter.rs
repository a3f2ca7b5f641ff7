//! RedisBloom's chain as the `BF.*` commands serve every Bloom filter (`any::BloomFilter`):
//! its lookups and adds, its `BF.INFO` figures and its scan-dump (`scandump.rs`).

use super::chain::RedisBloomChain;
use super::murmur::HashPair;
use super::scandump;
use crate::bloom::any::{AddResults, Added, BloomFilter, ChunkError, Env, Info};
use crate::bloom::chain::ChainError;

/// RedisBloom's answers: item by item in order (each add may grow the chain), its own scan-dump
/// chunks, and its `BF.INFO` figures with `Size` by its own accounting.
impl BloomFilter for RedisBloomChain {
    fn contains_one(&self, item: &[u8], _: &dyn Env) -> bool {
        self.contains(&self.hash(item))
    }

    fn contains_all(&self, items: &[&[u8]], _: &dyn Env, found: &mut dyn FnMut(bool)) {
        // Hashed first so that the lookups can prefetch their lines (`core::batch`).
        let hashes: Vec<HashPair> = items.iter().map(|i| self.hash(i)).collect();
        self.contains_batch(&hashes, found);
    }

    fn add_one(&mut self, item: &[u8], env: &dyn Env) -> Result<Added, ChainError> {
        let limit = env.memory_limit();
        self.add(&self.hash(item), limit).map(Added::new_or_present)
    }

    fn add_all(&mut self, items: &[&[u8]], env: &dyn Env, results: &mut AddResults) {
        let limit = env.memory_limit();
        let hashes: Vec<HashPair> = items.iter().map(|i| self.hash(i)).collect();
        self.add_batch(&hashes, limit, |r| {
            results.push(r.map(Added::new_or_present))
        });
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
