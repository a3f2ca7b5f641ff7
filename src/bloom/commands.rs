//! Placeholder handlers, replaced by the wing's implementation.
use redis_module::{Context, RedisError, RedisResult, RedisString};

pub fn reserve(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn add(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn madd(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn insert(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn exists(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn mexists(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn info(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn card(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn scandump(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}

pub fn loadchunk(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Err(RedisError::Str("ERR not implemented yet"))
}
