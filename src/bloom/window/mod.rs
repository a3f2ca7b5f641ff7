//! Windowed Bloom filters: `BF.RESERVE key rate capacity WINDOW seconds` makes a filter that
//! remembers each item for `seconds` after it was last added, then forgets it, served by the
//! same `BF.*` commands as every Bloom filter (through `any::BloomFilter`, `serve.rs`).
//!
//! A pure core: `filter.rs` (time, semantics, scaling), `layer.rs` (sizing, per-slot counts,
//! cardinality), `partition.rs` (per-generation Elias–Fano fingerprint sets), `codec.rs`
//! (the encoding, chunked), `value.rs` (what a key stores: the filter and its load state).
//! Its Redis side: `datatype.rs` (the type `lcbloomBW`) and `table.rs` (its registration).
//!
//! Why a folder of its own inside `bloom/`: it is a stored representation of a Bloom filter,
//! like `redisbloom/`, answering the `BF.*` family's commands; it shares the family's hashing,
//! error type and Elias–Fano coder, and nothing outside the family needs it.
pub mod codec;
pub mod datatype;
pub mod filter;
pub mod layer;
pub mod partition;
pub mod serve;
pub mod table;
pub mod value;

#[cfg(test)]
mod tests;
