//! The `LC.*` commands' own reply texts, and the counter's errors as replies.

use super::counter::{Counter, LcError};
use crate::core::decode::DecodeError;
use crate::server::errors::{quoted, reply};
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

/// A union refused because it would read more than `lc-max-union-bytes`.
pub fn union_too_large(command: &str, bytes: u64, limit: u64) -> RedisError {
    RedisError::String(format!(
        "ERR {command} would read {bytes} bytes of counters, more than lc-max-union-bytes \
         ({limit}): name fewer keys at a time"
    ))
}

/// A union refused because bitmaps saved by earlier versions take part (`LcError::SavedBitmap`:
/// with a sketch; `IncompatibleSizes`: with a bitmap whose size does not divide theirs), named
/// by key with how to rebuild them; any other error as it is. `named`: the counters of the
/// union with their keys.
pub fn union_refused(e: LcError, named: &[(&[u8], &Counter)]) -> RedisError {
    let what = match e {
        LcError::SavedBitmap => "cannot combine a counter saved as a bitmap by an earlier \
                                 version with a newer counter"
            .to_string(),
        LcError::IncompatibleSizes { dest, source } => format!(
            "cannot combine counters of {dest} and {source} bits (bitmaps saved by an earlier \
             version fold only into one whose size divides their own)"
        ),
        e => return e.into(),
    };
    let bitmaps: Vec<String> = named
        .iter()
        .filter(|(_, c)| c.is_bitmap())
        .map(|(name, _)| format!("'{}'", quoted(name)))
        .collect();
    let listed = match bitmaps.len() {
        0..=3 => bitmaps.join(", "),
        n => format!("{} and {} more", bitmaps[..3].join(", "), n - 3),
    };
    let (their, keys) = match bitmaps.len() {
        1 => ("its", "a new key"),
        _ => ("their", "new keys"),
    };
    RedisError::String(format!(
        "ERR {what}: rebuild {listed} by adding {their} items to {keys} with LC.ADD (a new \
         counter combines with every other)"
    ))
}

impl From<LcError> for RedisError {
    fn from(e: LcError) -> Self {
        reply(e)
    }
}
