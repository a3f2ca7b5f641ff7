//! The linear counter wing: a pure core (`counter`; its Elias–Fano streams, `ef`; its one
//! allocation, `block`; its encoding, `codec`) and its Redis adapters (`commands`, `datatype`).
mod block;
pub mod codec;
pub mod commands;
pub mod counter;
pub mod datatype;
pub mod ef;
