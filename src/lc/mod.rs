//! The linear counter wing: a pure core (`counter`, `codec`) and its Redis adapters
//! (`commands`, `datatype`).
pub mod codec;
pub mod commands;
pub mod counter;
pub mod datatype;
