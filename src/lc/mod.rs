//! The linear counter wing: a pure core (`counter`; its one allocation, `block`; its encoding,
//! `codec`; its streams are `crate::core::ef`'s) and its Redis adapters (`commands`, `datatype`).
mod block;
pub mod codec;
pub mod commands;
pub mod counter;
pub mod datatype;
