//! One error convention for every command: the cores' errors implement `Display` with the
//! reply text minus `ERR ` and know nothing of Redis; the `From` impls here make them replies,
//! so a handler writes `?`. Reply texts the adapters of both wings share are constants here.

use crate::bloom::chain::ChainError;
use crate::lc::counter::LcError;
use redis_module::RedisError;

pub const NOT_FOUND: &str = "ERR not found";
pub const ITEM_EXISTS: &str = "ERR item exists";
pub const CHUNK_LENGTH: &str = "ERR invalid chunk: iterator and length do not match";

/// `ERR <the core's text>`.
pub fn reply(e: impl std::fmt::Display) -> RedisError {
    RedisError::String(format!("ERR {e}"))
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
