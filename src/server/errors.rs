//! One error convention for every command, and the reply texts every family shares.
//!
//! The cores' errors (`DecodeError` here, a family's own beside its commands) implement
//! `Display` with the reply text minus `ERR ` and know nothing of Redis; a `From` impl makes
//! each a reply through [`reply`], so a handler writes `?`. A family's own texts live in its
//! `errors.rs`: RedisBloom's exact wording where its clients see it (marked), lcbloom's
//! elsewhere.

use crate::core::decode::DecodeError;
use redis_module::RedisError;

pub const NOT_FOUND: &str = "ERR not found"; // RedisBloom
pub const ITEM_EXISTS: &str = "ERR item exists"; // RedisBloom
pub const ITEMS_REQUIRED: &str = "ERR ITEMS and at least one item are required";
pub const CHUNK_LENGTH: &str = "ERR invalid chunk: iterator and length do not match";
pub const INTERNAL: &str = "ERR lcbloom internal error (see the server log)";
pub const NOT_STORED: &str = "ERR lcbloom internal error (value not stored)";

/// `ERR <the core's text>`.
pub fn reply(e: impl std::fmt::Display) -> RedisError {
    RedisError::String(format!("ERR {e}"))
}

/// An option the command does not know, quoted as escaped ASCII: the reply's bytes reach the
/// client as they are, and a client fails to parse an error line that is not valid UTF-8
/// (found by tests/it/hostile.rs).
pub fn unknown_argument(arg: &[u8]) -> RedisError {
    RedisError::String(format!("ERR unknown argument '{}'", quoted(arg)))
}

/// A client's bytes (an argument, a key name) for an error reply: at most 64 of them, as
/// escaped ASCII (see `unknown_argument`).
pub fn quoted(arg: &[u8]) -> String {
    arg.iter()
        .take(64)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect()
}

pub fn given_twice(option: &str) -> RedisError {
    RedisError::String(format!("ERR {option} given more than once"))
}

pub fn too_many_items(items: usize, limit: u64) -> RedisError {
    RedisError::String(format!(
        "ERR too many items in one command ({items}, more than max-items-per-command ({limit}))"
    ))
}

impl From<DecodeError> for RedisError {
    fn from(e: DecodeError) -> Self {
        reply(e)
    }
}
