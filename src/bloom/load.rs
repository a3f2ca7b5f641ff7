//! A `BF.LOADCHUNK` header on a missing key (pure): the one place that tells the stored formats
//! apart and makes a new filter of the kind the header says, for the handler to store.

use super::any::BloomFilter;
use super::chain::Chain;
use super::codec;
use super::redisbloom::chain::RedisBloomChain;
use super::redisbloom::scandump as rb_scandump;
use super::window::{codec as window_codec, value::Windowed};
use crate::core::decode::DecodeError;

/// A filter made by a `BF.LOADCHUNK` header on a missing key.
#[derive(Debug, PartialEq)]
pub enum NewFilter {
    Own(Chain),
    RedisBloom(RedisBloomChain),
    Window(Windowed),
}

impl NewFilter {
    pub fn as_filter_mut(&mut self) -> &mut dyn BloomFilter {
        match self {
            NewFilter::Own(chain) => chain,
            NewFilter::RedisBloom(chain) => chain,
            NewFilter::Window(filter) => filter,
        }
    }
}

/// A zero-filled filter from a `BF.LOADCHUNK` header, within `limit` bytes: lcbloom's format
/// (its magic `LCBF`) is tried first; bytes it refuses that have the shape of RedisBloom's
/// header (`rb_scandump::looks_like_header`) make a RedisBloom chain, which is how a RedisBloom
/// AOF rewrite or `BF.SCANDUMP` stream loads; a windowed filter's header starts with its own
/// magic (`LCBW`). The error is that of the format the bytes look like.
pub fn from_header(header: &[u8], limit: u64) -> Result<NewFilter, DecodeError> {
    if header.starts_with(window_codec::MAGIC) {
        return Windowed::from_header(header, limit).map(NewFilter::Window);
    }
    match codec::decode_header(header, limit) {
        Ok(own) => Ok(NewFilter::Own(own.into_chain()?)),
        Err(_) if rb_scandump::looks_like_header(header) => {
            rb_scandump::decode_header(header, limit).map(NewFilter::RedisBloom)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::any::tests::grown;
    use crate::bloom::codec::TOO_LARGE;

    #[test]
    fn either_format_of_header_makes_its_own_kind_of_filter() {
        let header = rb_scandump::encode_header(&grown());
        let empty = rb_scandump::decode_header(&header, u64::MAX).unwrap();
        assert_eq!(
            from_header(&header, u64::MAX),
            Ok(NewFilter::RedisBloom(empty))
        );
        let own = Chain::new(0.01, 100, 2, u64::MAX).unwrap();
        let own_header = codec::encode_header(&own);
        assert!(matches!(
            from_header(&own_header, u64::MAX),
            Ok(NewFilter::Own(_))
        ));
        // A RedisBloom-shaped header that RedisBloom's checks refuse gets RedisBloom's error;
        // anything else gets lcbloom's.
        let mut bad = header.clone();
        bad[0] ^= 1;
        assert_eq!(
            from_header(&bad, u64::MAX),
            Err(DecodeError(
                "bad RedisBloom data: item count does not match the filters"
            ))
        );
        assert_eq!(
            from_header(&own_header[..40], u64::MAX),
            Err(DecodeError("received bad data"))
        );
        assert_eq!(from_header(&header, 100), Err(TOO_LARGE));
    }
}
