//! The bodies of a sketch (encoding version 3, codec.rs): kind 4, the listed tokens; kind 5,
//! the registers. Both start with the precision and end with the running estimate and its
//! variance, which a sketch's history made (levels.rs, "Estimators") and its indicators alone
//! do not give, checked against what any history could have made of the indicators
//! (running.rs, "Bounds"); `μ` follows from the indicators and is recomputed.

use super::{put_stream, read_stream, OVER_THE_LIMIT};
use crate::core::chunks::{bytes_into_words, Reader, Writer};
use crate::core::decode::DecodeError;
use crate::core::ef;
use crate::lc::counter::Counter;
use crate::lc::geometry::{charged_bytes, registers_words, token_limit, token_universe};
use crate::lc::header::{Mode, SKETCH_REGISTERS, SKETCH_STREAM};
use crate::lc::levels::{
    forgotten_levels, max_level, registers_counts, weight, REGISTER_BITS, WINDOW,
};
use crate::lc::registers::{read_register, registers_block_with};
use crate::lc::running::Running;
use crate::lc::tokens::tokens_block;

/// Body length of a tokens or registers counter.
pub fn body_len(counter: &Counter) -> u64 {
    let (precision, tail) = (1, 16);
    match counter.mode() == Mode::Tokens {
        true => {
            let shape = counter.tokens_shape();
            precision + super::varint_len(shape.k) as u64 + shape.bits().div_ceil(8) + tail
        }
        false => precision + registers_bytes(counter.geometry().precision) + tail,
    }
}

/// Bytes of `2^p` packed registers.
fn registers_bytes(p: u32) -> u64 {
    (REGISTER_BITS << p).div_ceil(8)
}

pub fn put_tokens(out: &mut Vec<u8>, counter: &Counter) {
    let shape = counter.tokens_shape();
    out.push(counter.geometry().precision as u8);
    out.put_varint(shape.k);
    put_stream(out, counter.block.words(), SKETCH_STREAM, shape.bits());
    put_running(out, counter.running());
}

pub fn put_registers(out: &mut Vec<u8>, counter: &Counter) {
    let p = counter.geometry().precision;
    out.push(p as u8);
    let bits = REGISTER_BITS << p;
    put_stream(
        out,
        counter.block.words(),
        SKETCH_REGISTERS as u64 * 64,
        bits,
    );
    put_running(out, counter.running());
}

/// The precision byte: this build derives a counter's precision from its error rate
/// (`levels::precision_for`), and the byte must say the same.
fn read_precision(r: &mut Reader, counter: &Counter) -> Result<u32, DecodeError> {
    let p = counter.geometry().precision;
    if u32::from(r.byte()?) != p {
        return Err(DecodeError(
            "sketch precision does not match the error rate",
        ));
    }
    Ok(p)
}

fn put_running(out: &mut Vec<u8>, running: Running) {
    out.put_f64(running.estimate);
    out.put_f64(running.variance);
}

/// The estimate and its variance, with the unset weight `mu` of indicators of which `set`
/// are known set and `decided` set or forgotten: refused unless some history gives them
/// (running.rs, "Bounds").
fn read_running(
    r: &mut Reader,
    counter: &Counter,
    set: u64,
    decided: u64,
    mu: u128,
) -> Result<Running, DecodeError> {
    let running = Running {
        estimate: r.f64()?,
        variance: r.f64()?,
        mu,
    };
    let first = counter.geometry().universe();
    running.possible(set, decided, first).map_err(DecodeError)?;
    Ok(running)
}

pub fn read_tokens(r: &mut Reader, mut counter: Counter) -> Result<Counter, DecodeError> {
    let p = read_precision(r, &counter)?;
    let k = r.varint()?;
    if k > token_limit(p) {
        return Err(DecodeError("token count out of range"));
    }
    if k == 0 {
        // A list of no tokens, which unions of empty counters of two sizes once stored (a
        // saved one stopped the whole RDB from loading): the empty counter, in exact mode.
        read_stream(r, 0, token_universe(p))?;
        let (estimate, variance) = (r.f64()?, r.f64()?);
        if estimate != 0.0 || variance != 0.0 {
            return Err(DecodeError("running estimate of no tokens not 0"));
        }
        return Ok(counter);
    }
    let (words, shape) = read_stream(r, k, token_universe(p))?;
    let mut set = 0u128;
    for t in ef::iter(&words, 0, shape) {
        let level = t & 0xff;
        if level == 0 || level > max_level(p) {
            return Err(DecodeError("token level out of range"));
        }
        set += u128::from(weight(level, p));
    }
    // Tokens forget nothing: every indicator not listed is unset.
    let running = read_running(r, &counter, k, k, (1u128 << 64) - set)?;
    let mut block =
        tokens_block(p, k, ef::iter(&words, 0, shape)).map_err(|_| DecodeError("out of memory"))?;
    running.write(block.words_mut());
    counter.block = block;
    Ok(counter)
}

pub fn read_registers(
    r: &mut Reader,
    mut counter: Counter,
    max_bytes: u64,
) -> Result<Counter, DecodeError> {
    let p = read_precision(r, &counter)?;
    if charged_bytes(registers_words(p)) > max_bytes {
        return Err(DecodeError(OVER_THE_LIMIT));
    }
    let len = registers_bytes(p);
    if r.remaining() < len as usize {
        return Err(DecodeError("truncated"));
    }
    let n = 1usize << p;
    let mut words = Vec::new();
    let mut registers = Vec::new();
    let word_count = len.div_ceil(8) as usize + 1;
    words
        .try_reserve_exact(word_count)
        .and_then(|_| registers.try_reserve_exact(n))
        .map_err(|_| DecodeError("out of memory"))?;
    words.resize(word_count, 0);
    bytes_into_words(&mut words, 0, r.take(len as usize)?);
    let mut forgotten = 0;
    for i in 0..n as u64 {
        let reg = read_register(&words, i);
        let top = u64::from(reg >> WINDOW);
        let window = u64::from(reg) & ((1 << WINDOW) - 1);
        // Levels 1 ..= max; window bit i − 1 stands for level top − i ≥ 1.
        let lowest_window = top.saturating_sub(1).min(WINDOW);
        if top > max_level(p) || window >> lowest_window != 0 {
            return Err(DecodeError("register out of range"));
        }
        forgotten += forgotten_levels(reg);
        registers.push(reg);
    }
    let (counts, mu) = registers_counts(&registers, p);
    let set: u64 = counts.0.iter().sum();
    let running = read_running(r, &counter, set, set + forgotten, mu)?;
    let block =
        registers_block_with(p, &registers, running).map_err(|_| DecodeError("out of memory"))?;
    counter.block = block;
    Ok(counter)
}
