//! Argument parsing shared by every command: numbers and keywords.
//!
//! Numbers are parsed strictly, as Redis does: the whole argument must be the number, no
//! whitespace, no NaN or infinity. Callers attach their own `ERR ...` text so that replies match
//! what RedisBloom's clients expect.

use crate::server::limits::rebuilding;
use redis_module::{Context, RedisError, RedisString};

/// A finite float written in full (`0.01`, `1e-3`).
pub fn parse_f64(arg: &RedisString) -> Option<f64> {
    let text = std::str::from_utf8(arg.as_slice()).ok()?;
    if text.is_empty() || text.trim() != text {
        return None;
    }
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A decimal integer in i64 range, written as Redis writes it (`string2ll`): `+5`, ` 5`,
/// `5.0`, `05` and `-0` are refused, but while rebuilding (`readable`).
pub fn parse_i64(ctx: &Context, arg: &RedisString) -> Option<i64> {
    let text = std::str::from_utf8(arg.as_slice()).ok()?;
    let (digits, negative) = match text.strip_prefix('-') {
        Some(digits) => (digits, true),
        None => (text, false),
    };
    let as_redis_writes = is_canonical(digits) && !(negative && digits == "0");
    readable(ctx, digits, as_redis_writes)
        .then(|| text.parse::<i64>().ok())
        .flatten()
}

/// A decimal integer from 0 to 2^64 − 1, written as Redis writes it, but while rebuilding
/// (`readable`).
pub fn parse_u64(ctx: &Context, arg: &RedisString) -> Option<u64> {
    let text = std::str::from_utf8(arg.as_slice()).ok()?;
    // Readable text is digits only, which `parse` reads as they are.
    readable(ctx, text, is_canonical(text))
        .then(|| text.parse::<u64>().ok())
        .flatten()
}

/// Whether a number's `digits` (its sign taken off) may be read: when they are written as
/// Redis writes numbers (`as_redis_writes`), or while the server rebuilds what it accepted
/// once (an AOF, a master's stream: `limits::rebuilding`), where commands propagated as they
/// were sent may hold leading zeros or `-0` from versions that took them. `ctx` is asked only
/// for such a number.
fn readable(ctx: &Context, digits: &str, as_redis_writes: bool) -> bool {
    as_redis_writes || (is_digits(digits) && rebuilding(ctx))
}

/// Digits only, and no leading zero but in `0` itself: the one way Redis writes a number.
fn is_canonical(digits: &str) -> bool {
    is_digits(digits) && (digits == "0" || !digits.starts_with('0'))
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// An error rate: a float strictly between 0 and 1.
pub fn parse_rate(arg: &RedisString, error: &'static str) -> Result<f64, RedisError> {
    parse_f64(arg)
        .filter(|r| *r > 0.0 && *r < 1.0)
        .ok_or(RedisError::Str(error))
}

/// An integer in `min..=max` (`parse_i64`).
pub fn parse_in_range(
    ctx: &Context,
    arg: &RedisString,
    min: i64,
    max: i64,
    error: &'static str,
) -> Result<i64, RedisError> {
    parse_i64(ctx, arg)
        .filter(|v| (min..=max).contains(v))
        .ok_or(RedisError::Str(error))
}

/// Case-insensitive keyword match, as Redis commands treat their options.
pub fn is_keyword(arg: &RedisString, keyword: &str) -> bool {
    arg.as_slice().eq_ignore_ascii_case(keyword.as_bytes())
}

/// A cursor over a command's arguments: options are taken in order, never by index arithmetic.
pub struct Args<'a> {
    rest: &'a [RedisString],
}

impl<'a> Args<'a> {
    pub fn new(args: &'a [RedisString]) -> Self {
        Self { rest: args }
    }

    /// The next argument, consumed.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<&'a RedisString> {
        let (first, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(first)
    }

    /// The next argument, or the error `missing` when there is none (an option's value).
    pub fn value(&mut self, missing: &'static str) -> Result<&'a RedisString, RedisError> {
        self.next().ok_or(RedisError::Str(missing))
    }

    /// What is left.
    pub fn rest(&self) -> &'a [RedisString] {
        self.rest
    }
}

/// Sets an option that may be given once: `ERR <NAME> given more than once` the second time.
pub fn set_once<T>(
    slot: &mut Option<T>,
    name: &str,
    value: impl FnOnce() -> Result<T, RedisError>,
) -> Result<(), RedisError> {
    if slot.is_some() {
        return Err(crate::server::errors::given_twice(name));
    }
    *slot = Some(value()?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_only_as_redis_writes_them() {
        for text in ["0", "7", "10", "18446744073709551615"] {
            assert!(is_canonical(text), "{text:?}");
        }
        for text in ["", "00", "07", "-0", "-1", "+1", " 1", "1 ", "1.0", "0x1"] {
            assert!(!is_canonical(text), "{text:?}");
        }
    }
}
