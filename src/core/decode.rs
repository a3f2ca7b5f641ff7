//! What every decoder refuses with (pure): lcbloom's own encodings (`bloom/codec.rs`,
//! `lc/codec.rs`) and RedisBloom's (`bloom/redisbloom/`). The text says what is wrong, without `ERR`;
//! `errors.rs` turns it into the reply, and the type callbacks log it when a load fails.

/// Why bytes were refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
