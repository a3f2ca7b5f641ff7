//! Pure building blocks every family uses, with no Redis types: the hash scheme (`hashing`),
//! the order in which a batch touches memory (`batch`),
//! Elias–Fano coded sets and their sample packing (`ef`), whole streams decoded (`ef_decode`,
//! with AVX2 and AVX-512: `ef_chunks`), the little-endian byte reader and
//! writer and the chunked byte forms (`chunks`), shared parameters (`intern`) and small ids for them (`registry`), the allocator
//! and its size classes (`alloc`), the size-class block (`block`), moving a value's blocks
//! when the server defragments (`defrag`), and the decoders' error (`decode`); the unit tests'
//! pseudo-random sequence (`test_rng`).
pub mod alloc;
pub mod batch;
pub mod block;
pub mod chunks;
pub mod decode;
pub mod defrag;
pub mod ef;
#[cfg(target_arch = "x86_64")]
pub mod ef_chunks;
pub mod ef_decode;
pub mod hashing;
pub mod intern;
pub mod registry;
#[cfg(test)]
pub mod test_rng;
