//! The Bloom filter wing: a pure core (`filter`, `chain`, `codec`) and its Redis adapters
//! (`commands`, `datatype`).
pub mod commands;
pub mod datatype;
