//! Tokens mode: a sketch's set indicators listed (levels.rs), each as `index·256 + level`,
//! Elias–Fano coded over `2^(p+8)` from bit `header::SKETCH_STREAM` of the block; the running
//! estimate, its variance and `μ` before it. A counter leaving exact mode comes here, with
//! its exact count as the running estimate, and turns into registers past `token_limit`.

use super::counter::{bytes_within, Counter, LcError};
use super::geometry::{charged_bytes, registers_words, token_universe, tokens_words};
use super::header::{Header, Mode, SKETCH_STREAM};
use super::levels::{token, update, weight};
use super::running::Running;
use crate::core::block::Block;
use crate::core::ef::{self, Shape};
use crate::core::ef_decode;

/// The token of `h` at precision `p` as a stream value.
#[inline]
pub fn token_value(h: u64, p: u32) -> u64 {
    let (index, level) = token(h, p);
    index << 8 | level
}

/// Whether this CPU has AVX-512 DQ, CD and VL (and so F): the eight-lane copies of the loops
/// that take fingerprints to tokens (`spread_tokens_avx512`, `tokens_in_halves_avx512`)
/// multiply 64-bit lanes and count their leading zeros with them.
#[cfg(target_arch = "x86_64")]
pub fn wide_tokens_usable() -> bool {
    std::is_x86_feature_detected!("avx512dq")
        && std::is_x86_feature_detected!("avx512cd")
        && std::is_x86_feature_detected!("avx512vl")
}

impl Counter {
    pub(super) fn tokens_shape(&self) -> Shape {
        let p = self.geometry.precision;
        Shape::new(self.header().count, token_universe(p))
    }

    /// The listed tokens, in order (tokens mode).
    pub fn tokens(&self) -> ef::Iter<'_> {
        ef::iter(self.block.words(), SKETCH_STREAM, self.tokens_shape())
    }

    pub(super) fn running(&self) -> Running {
        Running::read(self.block.words())
    }

    /// Adds `h` in tokens mode; past the token limit the sketch turns into registers, refused
    /// (nothing changed) when they would take more than `limit` bytes.
    pub(super) fn add_token(&mut self, h: u64, limit: u64) -> Result<bool, LcError> {
        let p = self.geometry.precision;
        let t = token_value(h, p);
        let shape = self.tokens_shape();
        let probe = ef::find(self.block.words(), SKETCH_STREAM, shape, t);
        if probe.found {
            return Ok(false);
        }
        let mut running = self.running();
        running.step(u128::from(weight(t & 0xff, p)));
        if shape.k < self.geometry.token_limit {
            let next = Shape::new(shape.k + 1, token_universe(p));
            if next.l == shape.l {
                self.block
                    .resize(tokens_words(next))
                    .map_err(|_| LcError::OutOfMemory)?;
                ef::insert(self.block.words_mut(), SKETCH_STREAM, shape, probe.rank, t);
            } else {
                let words = self.block.words();
                let values =
                    ef_decode::values_inserting(words, SKETCH_STREAM, shape, probe.rank, t)
                        .ok_or(LcError::OutOfMemory)?;
                self.block = tokens_block(p, next.k, values.into_iter())?;
            }
            Header {
                mode: Mode::Tokens,
                count: next.k,
            }
            .write(&mut self.block);
            running.write(self.block.words_mut());
        } else {
            self.check_registers_within(limit)?;
            let tokens = self.tokens().chain(std::iter::once(t));
            let block = registers_from_tokens(p, tokens, running)?;
            self.block = block;
        }
        Ok(true)
    }

    pub(super) fn check_registers_within(&self, limit: u64) -> Result<(), LcError> {
        bytes_within(
            charged_bytes(registers_words(self.geometry.precision)),
            limit,
        )
    }
}

/// A tokens block of `k` sorted distinct token values (running state left zero).
pub fn tokens_block(p: u32, k: u64, values: impl Iterator<Item = u64>) -> Result<Block, LcError> {
    let shape = Shape::new(k, token_universe(p));
    let mut block = Block::zeroed(tokens_words(shape)).ok_or(LcError::OutOfMemory)?;
    ef::write(block.words_mut(), SKETCH_STREAM, shape, values);
    Header {
        mode: Mode::Tokens,
        count: k,
    }
    .write(&mut block);
    Ok(block)
}

/// A registers block holding the indicators of these tokens, with this running state
/// (its `μ` recomputed from the registers).
pub fn registers_from_tokens(
    p: u32,
    tokens: impl Iterator<Item = u64>,
    running: Running,
) -> Result<Block, LcError> {
    let mut registers = vec![0u32; 1 << p];
    for t in tokens {
        let r = &mut registers[(t >> 8) as usize];
        *r = update(*r, t & 0xff);
    }
    super::registers::registers_block(p, &registers, running.estimate, running.variance)
}
