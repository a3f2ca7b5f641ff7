//! What a key holding a windowed filter stores (pure): the filter, and while its data is still
//! arriving in chunks (`BF.LOADCHUNK`, an RDB or AOF load), the state that loads the rest.
//! A value being loaded answers lookups from what has arrived and refuses adds (a chunk
//! arriving later would overwrite them). It saves as its header and the data received, so a
//! save, a copy or a replica's sync in the middle of a load holds a value that takes the
//! remaining chunks as the original does.

use super::codec::{self, Loading};
use super::filter::{WindowFilter, WindowParams, VALUE_BOX_BYTES};
use crate::bloom::chain::ChainError;
use crate::core::alloc::{size_class, try_box};
use crate::core::chunks::iterator_after;
use crate::core::decode::DecodeError;
use crate::core::defrag::Defrag;

// The limits' weight of the box is its size.
const _: () = assert!(size_class(std::mem::size_of::<Windowed>() as u64) == VALUE_BOX_BYTES);

#[derive(Debug, PartialEq)]
pub struct Windowed {
    pub filter: WindowFilter,
    /// Present until the data is complete.
    loading: Option<Box<Loading>>,
}

impl Windowed {
    /// A complete value.
    pub fn new(filter: WindowFilter) -> Self {
        Self {
            filter,
            loading: None,
        }
    }

    /// A new, empty filter of these parameters, if its first layer fits in `limit` bytes.
    pub fn with_params(params: WindowParams, limit: u64) -> Result<Self, ChainError> {
        Ok(Self::new(WindowFilter::new(params, limit)?))
    }

    /// A value from its encoded header, waiting for its data: loaded, it may take at most
    /// `limit` bytes, its box included (each chunk is checked as it arrives).
    pub fn from_header(header: &[u8], limit: u64) -> Result<Self, DecodeError> {
        let limit = limit.saturating_sub(VALUE_BOX_BYTES);
        let (filter, loading) = codec::decode_header(header, limit)?;
        Ok(Self {
            filter,
            loading: Some(Box::new(loading)),
        })
    }

    pub fn is_complete(&self) -> bool {
        self.loading.is_none()
    }

    /// Applies the data chunk that starts at byte `start` (whole or not at all).
    pub fn load_chunk(&mut self, start: u64, chunk: &[u8]) -> Result<(), DecodeError> {
        let loading = self
            .loading
            .as_mut()
            .ok_or(DecodeError("filter already complete"))?;
        codec::load_chunk(&mut self.filter, loading, start, chunk)?;
        if loading.is_complete() {
            self.loading = None;
        }
        Ok(())
    }

    /// Its encoded header: the one it was loaded from while a load is in progress.
    pub fn header(&self) -> Vec<u8> {
        match &self.loading {
            None => codec::encode_header(&self.filter),
            Some(loading) => loading.header().to_vec(),
        }
    }

    /// The data from byte `offset` on, at most a chunk (`BF.SCANDUMP`); None past the end. A
    /// value being loaded gives the data received so far, as a save does.
    pub fn data_chunk(&self, offset: u64) -> Option<Vec<u8>> {
        match &self.loading {
            None => codec::data_chunk(&self.filter, offset),
            Some(loading) => codec::received_chunk(&self.filter, loading, offset),
        }
    }

    /// Calls `emit` with the header (iterator 1), then with each data chunk and its
    /// `BF.SCANDUMP` iterator: RDB, AOF rewrite and digest alike. A value being loaded gives
    /// the header it was loaded from and the data received so far.
    pub fn for_each_part(&self, mut emit: impl FnMut(u64, &[u8])) {
        emit(1, &self.header());
        let chunk = |end, bytes: &[u8]| emit(iterator_after(end), bytes);
        match &self.loading {
            None => codec::for_each_chunk(&self.filter, chunk),
            Some(loading) => codec::for_each_received_chunk(&self.filter, loading, chunk),
        }
    }

    /// Bytes its allocations take, the box Redis holds included.
    pub fn memory_bytes(&self) -> u64 {
        let loading = self.loading.as_ref().map_or(0, |l| {
            size_class(std::mem::size_of::<Loading>() as u64) + l.memory_bytes()
        });
        VALUE_BOX_BYTES + self.filter.memory_bytes() + loading
    }

    /// Visits every block it owns beyond its box, in a fixed order: the filter's, then the
    /// load state's.
    pub fn defrag(&mut self, d: &mut Defrag) {
        self.filter.defrag(d);
        if let Some(loading) = &mut self.loading {
            d.boxed(loading);
            loading.defrag(d);
        }
    }

    /// A deep copy, the state of a load in progress included.
    pub fn try_copy(&self) -> Result<Self, ChainError> {
        let loading = match &self.loading {
            None => None,
            Some(l) => Some(
                l.try_clone()
                    .and_then(try_box)
                    .ok_or(ChainError::OutOfMemory)?,
            ),
        };
        Ok(Self {
            filter: self.filter.try_clone()?,
            loading,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hashing::hash_item;

    fn parts(v: &Windowed) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        v.for_each_part(|iterator, bytes| out.push((iterator, bytes.to_vec())));
        out
    }

    /// What `BF.SCANDUMP` gives, call after call.
    fn scandumped(v: &Windowed) -> Vec<(u64, Vec<u8>)> {
        let mut out = vec![(1, v.header())];
        let mut offset = 0;
        while let Some(chunk) = v.data_chunk(offset) {
            offset += chunk.len() as u64;
            out.push((iterator_after(offset), chunk));
        }
        out
    }

    /// A value rebuilt from what `for_each_part` gives, as RDB, AOF rewrite and replicas do.
    fn rebuilt(parts: &[(u64, Vec<u8>)]) -> Windowed {
        let mut v = Windowed::from_header(&parts[0].1, u64::MAX).unwrap();
        let mut start = 0;
        for (_, chunk) in &parts[1..] {
            v.load_chunk(start, chunk).unwrap();
            start += chunk.len() as u64;
        }
        v
    }

    /// Most windowed keys are one small layer: three blocks of 64, 112 and 48 bytes (the
    /// value, its list of one layer, the layer's one partition record) before any words.
    #[test]
    fn a_small_filter_takes_three_small_blocks() {
        let params = WindowParams {
            window_secs: 2_592_000,
            error_rate: 0.001,
            capacity: 100,
            expansion: 2,
            seed: 1,
        };
        let v = Windowed::with_params(params, u64::MAX).unwrap();
        assert_eq!(size_class(std::mem::size_of::<Windowed>() as u64), 64);
        assert_eq!(v.memory_bytes(), 64 + 112 + 48);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn a_load_in_progress_saves_copies_and_dumps_as_it_arrived() {
        // Two layers, so that a cut can fall before the newest layer's records.
        let params = WindowParams {
            window_secs: 40,
            error_rate: 0.01,
            capacity: 3000,
            expansion: 2,
            seed: 9,
        };
        let mut filter = WindowFilter::new(params, u64::MAX).unwrap();
        for i in 0..6000u64 {
            filter
                .add(&hash_item(&i.to_le_bytes()), i, u64::MAX)
                .unwrap();
        }
        assert_eq!(filter.layers().len(), 2);
        let complete = Windowed::new(filter);
        let whole = parts(&complete);
        assert_eq!(scandumped(&complete), whole);
        let data: Vec<u8> = whole[1..].iter().flat_map(|(_, c)| c.clone()).collect();
        for cut in [0, 1, 20, 333, data.len() / 2, data.len() - 1] {
            let mut loading = Windowed::from_header(&whole[0].1, u64::MAX).unwrap();
            if cut > 0 {
                loading.load_chunk(0, &data[..cut]).unwrap();
            }
            let saved = parts(&loading);
            assert_eq!(saved[0], whole[0], "the header as it arrived");
            let received: Vec<u8> = saved[1..].iter().flat_map(|(_, c)| c.clone()).collect();
            assert_eq!(received, data[..cut], "cut at {cut}");
            assert_eq!(scandumped(&loading), saved, "BF.SCANDUMP, cut at {cut}");
            let copy = loading.try_copy().unwrap();
            for mut v in [rebuilt(&saved), copy] {
                assert!(!v.is_complete());
                assert_eq!(parts(&v), saved);
                v.load_chunk(cut as u64, &data[cut..]).unwrap();
                assert!(v.is_complete());
                assert_eq!(parts(&v), whole, "cut at {cut}");
            }
        }
    }
}
