//! One error convention for every command, and every reply text in one place.
//!
//! The cores' errors (`ChainError`, `LcError`, `DecodeError` …) implement `Display` with the
//! reply text minus `ERR ` and know nothing of Redis; the `From` impls here make them replies, so
//! a handler writes `?`. The adapters' own texts are the constants and constructors below:
//! RedisBloom's exact wording where its clients see it (marked), lcbloom's elsewhere.

use crate::bloom::chain::ChainError;
use crate::bloom::redisbloom::chain::AddError;
use crate::core::decode::DecodeError;
use crate::lc::counter::LcError;
use redis_module::RedisError;

// Shared by both wings.
pub const NOT_FOUND: &str = "ERR not found"; // RedisBloom
pub const ITEM_EXISTS: &str = "ERR item exists"; // RedisBloom
pub const CHUNK_LENGTH: &str = "ERR invalid chunk: iterator and length do not match";
pub const INTERNAL: &str = "ERR lcbloom internal error (see the server log)";
pub const NOT_STORED: &str = "ERR lcbloom internal error (value not stored)";

// BF.* arguments (RedisBloom's texts, but for the options lcbloom adds or checks more strictly).
pub const BAD_ITERATOR: &str = "ERR Second argument must be numeric"; // RedisBloom
pub const BAD_ERROR_RATE: &str = "ERR bad error rate"; // RedisBloom
pub const ERROR_RATE_RANGE: &str = "ERR (0 < error rate range < 1)"; // RedisBloom
pub const BAD_CAPACITY: &str = "ERR bad capacity"; // RedisBloom
pub const CAPACITY_RANGE: &str = "ERR (capacity should be larger than 0)"; // RedisBloom
pub const BAD_EXPANSION: &str = "ERR bad expansion"; // RedisBloom
pub const NO_EXPANSION: &str = "ERR no expansion";
pub const NONSCALING_EXPANSION: &str = "ERR nonscaling filters cannot expand"; // RedisBloom
pub const BAD_LAYOUT: &str = "ERR LAYOUT must be standard or blocked";
pub const NO_LAYOUT: &str = "ERR no layout";
pub const BAD_WINDOW: &str = "ERR bad WINDOW: a whole number of seconds from 1 to 3153600000";
pub const BAD_AT: &str = "ERR bad AT: a time in ms since the epoch";
pub const WINDOW_LAYOUT: &str = "ERR WINDOW and LAYOUT cannot be combined";
pub const NOT_WINDOWED: &str = "ERR WINDOW or AT on a filter without a window";
pub const ITEMS_REQUIRED: &str = "ERR ITEMS and at least one item are required";
pub const BAD_INFO_FIELD: &str = "ERR Invalid information value"; // RedisBloom

// LC.* arguments.
pub const LC_ERROR_RATE: &str = "ERR error rate must be a number strictly between 0 and 1";
pub const LC_CAPACITY: &str = "ERR capacity must be an integer between 1 and 2^50";
pub const LC_CHUNK_ITERATOR: &str = "ERR invalid chunk iterator";

/// `ERR <the core's text>`.
pub fn reply(e: impl std::fmt::Display) -> RedisError {
    RedisError::String(format!("ERR {e}"))
}

pub fn expansion_range(max: i64) -> RedisError {
    RedisError::String(format!(
        "ERR expansion must be between 0 (non-scaling) and {max}"
    ))
}

/// An option the command does not know, quoted as escaped ASCII: the reply's bytes reach the
/// client as they are, and a client fails to parse an error line that is not valid UTF-8
/// (found by tests/it/hostile.rs).
pub fn unknown_argument(arg: &[u8]) -> RedisError {
    let text: String = arg
        .iter()
        .take(64)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect();
    RedisError::String(format!("ERR unknown argument '{text}'"))
}

pub fn given_twice(option: &str) -> RedisError {
    RedisError::String(format!("ERR {option} given more than once"))
}

pub fn too_many_items(items: usize, limit: u64) -> RedisError {
    RedisError::String(format!(
        "ERR too many items in one command ({items}, more than max-items-per-command ({limit}))"
    ))
}

/// A counter encoding `LC.LOADCHUNK` refused.
pub fn bad_counter_encoding(e: DecodeError) -> RedisError {
    RedisError::String(format!("ERR invalid counter encoding: {e}"))
}

/// A counter bitmap piece `LC.LOADCHUNK` refused.
pub fn bad_counter_chunk(e: DecodeError) -> RedisError {
    RedisError::String(format!("ERR invalid chunk: {e}"))
}

impl From<ChainError> for RedisError {
    fn from(e: ChainError) -> Self {
        reply(e)
    }
}

impl From<LcError> for RedisError {
    fn from(e: LcError) -> Self {
        reply(e)
    }
}

impl From<DecodeError> for RedisError {
    fn from(e: DecodeError) -> Self {
        reply(e)
    }
}

impl From<AddError> for RedisError {
    fn from(e: AddError) -> Self {
        reply(e)
    }
}
