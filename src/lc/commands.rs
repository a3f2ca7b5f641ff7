//! Placeholder handlers, replaced by the wing's implementation.
use redis_module::{Context, RedisError, RedisResult, RedisString};

pub fn reserve(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn add(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn count(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn merge(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn info(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}
