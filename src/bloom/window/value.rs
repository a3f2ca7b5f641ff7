//! What a key holding a windowed filter stores (pure): the filter, and while its data is still
//! arriving in chunks (`BF.LOADCHUNK`, an RDB or AOF load), the state that loads the rest.
//! A value being loaded answers from what has arrived and encodes as what it holds, so a save
//! in the middle of a load writes a value that loads.

use super::codec::{self, Loading};
use super::filter::{WindowFilter, WindowParams};
use crate::bloom::chain::ChainError;
use crate::core::alloc::size_class;
use crate::core::chunks::iterator_after;
use crate::core::decode::DecodeError;
use crate::core::defrag::Defrag;

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

    /// A value from its encoded header (within `limit` bytes), waiting for its data.
    pub fn from_header(header: &[u8], limit: u64) -> Result<Self, DecodeError> {
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

    /// Calls `emit` with the header (iterator 1), then with each data chunk and its
    /// `BF.SCANDUMP` iterator: RDB, AOF rewrite and digest alike.
    pub fn for_each_part(&self, mut emit: impl FnMut(u64, &[u8])) {
        emit(1, &codec::encode_header(&self.filter));
        codec::for_each_chunk(&self.filter, |end, chunk| emit(iterator_after(end), chunk));
    }

    /// Bytes its allocations take, the box Redis holds included.
    pub fn memory_bytes(&self) -> u64 {
        let loading = self.loading.as_ref().map_or(0, |l| {
            size_class(std::mem::size_of::<Loading>() as u64) + l.memory_bytes()
        });
        size_class(std::mem::size_of::<Self>() as u64) + self.filter.memory_bytes() + loading
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

    /// A deep copy (a value being loaded is copied as what it holds, complete).
    pub fn try_copy(&self) -> Result<Self, ChainError> {
        Ok(Self::new(self.filter.try_clone()?))
    }
}
