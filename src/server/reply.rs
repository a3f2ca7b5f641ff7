//! Replies: what the crate's `RedisValue` cannot express (maps with a fixed field order), the
//! one rule for yes/no fields, and the sending of a handler's result.
//!
//! Yes/no fields. A field of an INFO-like reply that is yes or no (`BF.INFO`'s `Blocked`,
//! `LC.INFO`'s `Saturated`, and any such field of a new INFO-like reply) is the integer 1 or 0
//! in RESP2 and in RESP3, as every field of RedisBloom's `BF.INFO` and `CF.INFO` is a number:
//! typed clients read these replies as maps of numbers (the `redis` crate's `bf_info` fails on a
//! RESP3 boolean). [`flag`] makes every such field. A reply that answers a yes/no question
//! itself (`BF.ADD`, `BF.EXISTS`) is a RESP3 boolean, as RedisBloom's. docs/commands.md states
//! the rule.

use redis_module::{raw, Context, ContextFlags, RedisResult, RedisValue};
use std::ffi::{c_int, CString};

/// A yes/no field of an INFO-like reply: 1 or 0, in RESP2 and RESP3 alike.
pub fn flag(yes: bool) -> RedisValue {
    RedisValue::Integer(i64::from(yes))
}

/// A count as an integer reply: the largest, `2^63 − 1`, for one beyond it (a sketch's
/// estimate may be), never a negative number.
pub fn count(n: u64) -> RedisValue {
    RedisValue::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// A map reply with a fixed field order: a RESP3 map, or a flat array under RESP2.
/// Returns `NoReply` so that the handler's caller sends nothing more.
pub fn ordered_map(ctx: &Context, fields: Vec<(&str, RedisValue)>) -> RedisResult {
    map(ctx, fields, false)
}

/// [`ordered_map`] with the field names as simple strings (`+Capacity`, not `$8 Capacity`),
/// as RedisBloom's `BF.INFO` sends them.
pub fn ordered_map_simple_names(ctx: &Context, fields: Vec<(&str, RedisValue)>) -> RedisResult {
    map(ctx, fields, true)
}

fn map(ctx: &Context, fields: Vec<(&str, RedisValue)>, simple: bool) -> RedisResult {
    let resp3 = ctx.get_flags().contains(ContextFlags::FLAGS_RESP3);
    raw::reply_with_map(ctx.ctx, fields.len() as std::os::raw::c_long);
    for (name, value) in fields {
        match CString::new(name) {
            Ok(name) if simple => raw::reply_with_simple_string(ctx.ctx, name.as_ptr()),
            _ => raw::reply_with_string_buffer(ctx.ctx, name.as_ptr().cast(), name.len()),
        };
        match value {
            RedisValue::Float(x) if !resp3 => ctx.reply(Ok(resp2_double(x))),
            value => ctx.reply(Ok(value)),
        };
    }
    Ok(RedisValue::NoReply)
}

/// A double as RESP2's bulk string, in the fewest digits that read back as the same double
/// (`0.05`), as Redis 7.2 and later send it; Redis 7.0 writes 17 significant digits
/// (`0.050000000000000003`).
fn resp2_double(x: f64) -> RedisValue {
    RedisValue::BulkString(shortest_double(x))
}

/// `x` in the fewest digits that read back as it, written out where `%.17g` would (decimal
/// exponent from −4 to 16) and with an exponent beyond (`1e-150`, not 150 zeros); `inf`,
/// `-inf` and `nan` as Redis writes them.
fn shortest_double(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    let scientific = format!("{x:e}");
    let exponent: i32 = scientific
        .rsplit_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0);
    if x.is_finite() && !(-4..17).contains(&exponent) {
        scientific
    } else {
        format!("{x}")
    }
}

/// Sends a handler's reply: the common scalar replies straight to the module API, the rest
/// through the crate (which moves and then drops every `RedisValue` it is given).
#[inline(always)]
pub fn send(context: &Context, result: RedisResult) -> c_int {
    let status = match &result {
        Ok(RedisValue::NoReply) => raw::Status::Ok,
        Ok(RedisValue::Integer(n)) => raw::reply_with_long_long(context.ctx, *n),
        Ok(RedisValue::Bool(b)) => raw::reply_with_bool(context.ctx, (*b).into()),
        _ => return context.reply(result) as c_int,
    };
    // These variants own nothing: forgetting them skips the out-of-line drop of a
    // `RedisValue` that every integer reply otherwise paid.
    std::mem::forget(result);
    status as c_int
}

#[cfg(test)]
mod tests {
    use super::shortest_double;

    #[test]
    fn doubles_take_an_exponent_where_printf_g_does() {
        for (x, text) in [
            (0.05, "0.05"),
            (0.0001, "0.0001"),
            (0.00001, "1e-5"),
            (1.5e-150, "1.5e-150"),
            (0.0, "0"),
            (1e16, "10000000000000000"),
            (1.25e17, "1.25e17"),
            (-2.5e300, "-2.5e300"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(shortest_double(x), text, "{x:?}");
            if x.is_finite() {
                assert_eq!(shortest_double(x).parse::<f64>(), Ok(x));
            }
        }
    }
}
