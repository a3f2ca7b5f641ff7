//! What every family shares with Redis, and nothing family-specific: the panic boundary and
//! dispatcher (`ffi`), replies and their RESP2/RESP3 rule (`reply`), the stored-value layer and
//! its type callbacks (`value`), the write policy (`write`), what a panic while saving does
//! (`save`), the command table (`command_table`), module configs (`config`), `INFO lcbloom`
//! (`stats`), the error convention (`errors`) and the argument cursor (`args`).
pub mod args;
pub mod command_table;
pub mod config;
pub mod errors;
pub mod ffi;
pub mod limits;
pub mod load_args;
pub mod module;
pub mod reply;
pub mod save;
pub mod stats;
pub mod value;
pub mod write;
