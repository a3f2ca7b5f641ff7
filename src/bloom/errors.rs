//! The `BF.*` commands' own reply texts (RedisBloom's wording where its clients see it,
//! marked), and the Bloom cores' errors as replies.

use super::chain::ChainError;
use crate::server::errors::reply;
use redis_module::RedisError;

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
pub const AT_AHEAD: &str = "ERR bad AT: later than the server's clock";
pub const WINDOW_LAYOUT: &str = "ERR WINDOW and LAYOUT cannot be combined";
pub const BAD_SEED: &str = "ERR bad SEED: an integer from 0 to 18446744073709551615";
pub const NOT_WINDOWED: &str = "ERR WINDOW or AT on a filter without a window";
/// `AT` where the command would create a filter without `WINDOW`.
pub const AT_WITHOUT_WINDOW: &str =
    "ERR AT needs a windowed filter: no such key, and no WINDOW to create one";
/// `BF.RESERVE ... WINDOW` on a key holding a filter without one (RedisBloom's text first).
pub const EXISTS_NOT_WINDOWED: &str = "ERR item exists: a filter without a window";
pub const BAD_INFO_FIELD: &str = "ERR Invalid information value"; // RedisBloom

pub fn expansion_range(max: u32) -> RedisError {
    RedisError::String(format!(
        "ERR expansion must be between 0 (non-scaling) and {max}"
    ))
}

impl From<ChainError> for RedisError {
    fn from(e: ChainError) -> Self {
        reply(e)
    }
}
