//! The linear counter wing: a pure core (`counter`, `codec`) and its Redis adapters
//! (`commands`, `datatype`).
pub mod commands;
pub mod datatype;
