//! The integration tests, one binary (one link) with a module per area. They run real
//! redis-server processes through `common`; `cargo test --release --test it MODULE::` runs one area.

mod access_control;
mod bf_accuracy;
mod bf_commands;
mod bf_layout;
mod bf_memory;
mod bf_persistence;
mod bf_seed;
mod bf_window;
mod client_rust;
mod common;
mod compat;
mod fuzz_stable;
mod golden;
mod hostile;
mod lc_accuracy;
mod lc_commands;
mod lc_memory;
mod lc_model;
mod lc_persistence;
mod limits;
mod node_clients;
mod ops_cluster;
mod ops_defrag;
mod ops_durability;
mod ops_info_events;
mod ops_persistence;
mod ops_random_writes;
mod ops_replication;
mod ops_save_fault;
mod py_clients;
mod rb_format;
mod rb_hostile;
mod rb_import;
mod rb_replies;
mod smoke;
