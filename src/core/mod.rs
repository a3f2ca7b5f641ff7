//! Pure building blocks every family uses, with no Redis types: the hash scheme (`hashing`),
//! Elias–Fano coded sets (`ef`), chunked byte forms (`chunks`), shared parameters (`intern`),
//! the allocator and its size classes (`alloc`), moving a value's blocks when the server
//! defragments (`defrag`), and the decoders' error (`decode`).
pub mod alloc;
pub mod chunks;
pub mod decode;
pub mod defrag;
pub mod ef;
pub mod hashing;
pub mod intern;
