//! The linear counter wing: a pure core (`counter`, with its `geometry`, its block's `header`
//! and one file per mode: `exact`, `tokens`, `registers`, and `sparse`, `dense` for bitmaps
//! saved by earlier versions; the sketch's `levels`, its `running` estimate and `union`, which
//! `collect`s many sketches (of several `precisions` too) and counts exact sets of several
//! sizes by their hash `intervals`, taking fingerprints to tokens in `token_lanes` on CPUs without
//! AVX-512; its one allocation, a `crate::core::block`, stored as one word
//! with its geometry's id (`stored`); its encoding, `codec`; its streams are
//! `crate::core::ef`'s) and its Redis adapters (`commands`, `datatype`).
pub mod codec;
mod collect;
pub mod commands;
pub mod config;
pub mod counter;
pub mod datatype;
mod dense;
pub mod errors;
mod exact;
pub mod geometry;
mod header;
mod intervals;
pub mod levels;
mod precisions;
mod registers;
mod running;
mod sparse;
pub mod stats;
pub mod stored;
pub mod table;
#[cfg(target_arch = "x86_64")]
mod token_lanes;
mod tokens;
mod union;
