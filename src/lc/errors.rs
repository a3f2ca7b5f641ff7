//! The `LC.*` commands' own reply texts, and the counter's errors as replies.

use super::counter::LcError;
use crate::core::decode::DecodeError;
use crate::server::errors::reply;
use redis_module::RedisError;

pub const LC_ERROR_RATE: &str = "ERR error rate must be a number strictly between 0 and 1";
pub const LC_CAPACITY: &str = "ERR capacity must be an integer between 1 and 2^50";
pub const LC_CHUNK_ITERATOR: &str = "ERR invalid chunk iterator";

/// A counter encoding `LC.LOADCHUNK` refused.
pub fn bad_counter_encoding(e: DecodeError) -> RedisError {
    RedisError::String(format!("ERR invalid counter encoding: {e}"))
}

/// A counter bitmap piece `LC.LOADCHUNK` refused.
pub fn bad_counter_chunk(e: DecodeError) -> RedisError {
    RedisError::String(format!("ERR invalid chunk: {e}"))
}

impl From<LcError> for RedisError {
    fn from(e: LcError) -> Self {
        reply(e)
    }
}
