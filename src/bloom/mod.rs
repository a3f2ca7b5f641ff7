//! The Bloom filter wing: a pure core (`filter`, `blocked`, `words`, `chain`, `codec`) and its
//! Redis adapters (`commands`, `datatype`).
pub mod any;
pub mod blocked;
pub mod body;
pub mod budget;
pub mod chain;
pub mod codec;
pub mod commands;
pub mod config;
pub mod datatype;
pub mod errors;
pub mod filter;
pub mod fp;
pub mod frozen;
pub mod huge_pages;
pub mod load;
pub mod params;
pub mod redisbloom;
pub mod sparse;
pub mod stats;
pub mod table;
pub mod window;
pub mod words;
