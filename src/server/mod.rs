//! What every family shares with Redis, and nothing family-specific: the panic boundary and
//! dispatcher (`ffi`), the stored-value layer and its type callbacks (`value`), the command
//! table (`command_table`), module configs (`config`), `INFO lcbloom` (`stats`), the error
//! convention (`errors`), the argument cursor (`args`) and what a panic while saving does
//! (`save`).
pub mod args;
pub mod command_table;
pub mod config;
pub mod errors;
pub mod ffi;
pub mod save;
pub mod stats;
pub mod value;
