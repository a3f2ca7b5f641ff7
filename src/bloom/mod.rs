//! The Bloom filter wing: a pure core (`filter`, `chain`, `codec`) and its Redis adapters
//! (`commands`, `datatype`).
pub mod chain;
pub mod codec;
pub mod commands;
pub mod datatype;
pub mod filter;
