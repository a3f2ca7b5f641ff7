//! The `BF.*` commands on windowed filters (`bloom/commands.rs` parses and dispatches here):
//! every operation runs at the command's time, taken from the primary's clock
//! (`RedisModule_Milliseconds`) or from the `AT ms` a write carries, and every write that
//! changes a filter is propagated as `BF.INSERT key [creation options] AT <time> ITEMS <the
//! items applied>`, so that replicas and AOF replays apply it at the primary's time and hold
//! byte-identical values. Reads never change a filter.
//!
//! * `BF.ADD`/`BF.MADD`/`BF.INSERT`: 1 for an item not found, 0 for one found (its window
//!   restarts: the filter changes, so the write propagates all the same).
//! * `BF.CARD` and `BF.INFO`'s `Number of items inserted`: the estimated distinct items added
//!   within the window. `Capacity`: items per window the live layers are sized for; `Number of
//!   filters`: layers. After RedisBloom's five fields: `Window` (seconds), `Stored`
//!   (fingerprints held, an item added in several slots counting in each) and `Time` (the
//!   filter's clock: its latest stored write, ms since the epoch). `BF.INFO key LAYOUT`:
//!   `window`.

use super::filter::{Added, WindowFilter, WindowParams, MAX_TIME};
use super::value::Windowed;
use crate::bloom::chain::ChainError;
use crate::core::hashing::hash_item;
use crate::server::value::{finish_write, modify, Applied};
use redis_module::{raw, Context, RedisString};
use std::ffi::CStr;

/// `BF.INFO key LAYOUT` of a windowed filter.
pub const LAYOUT: &str = "window";

/// The command's time: `AT` if given, else the server's clock, in ms.
pub fn now(at: Option<u64>) -> u64 {
    at.unwrap_or_else(|| {
        // SAFETY: a function pointer Redis sets at load, called on the main thread.
        let ms = unsafe { raw::RedisModule_Milliseconds.expect("Milliseconds")() };
        (ms.max(0) as u64).min(MAX_TIME)
    })
}

/// A new windowed filter of a window of `seconds`.
pub fn create(
    seconds: u64,
    error_rate: f64,
    capacity: u64,
    expansion: u32,
    limit: u64,
) -> Result<Windowed, ChainError> {
    let params = WindowParams {
        window_ms: seconds.checked_mul(1000).ok_or(ChainError::Overflow)?,
        error_rate,
        capacity,
        expansion,
    };
    Ok(Windowed::new(WindowFilter::new(params, limit)?))
}

/// The parameters a command created a filter with, spelled out for propagation.
pub struct Created {
    /// The rate as the shortest text that parses back to the same f64.
    rate: String,
    capacity: String,
    /// `EXPANSION x` or `NONSCALING`.
    growth: Vec<String>,
    window: String,
}

impl Created {
    pub fn new(error_rate: f64, capacity: u64, expansion: u32, seconds: u64) -> Self {
        let growth = match expansion {
            0 => vec!["NONSCALING".to_string()],
            e => vec!["EXPANSION".to_string(), e.to_string()],
        };
        Self {
            rate: error_rate.to_string(),
            capacity: capacity.to_string(),
            growth,
            window: seconds.to_string(),
        }
    }

    /// `rate capacity EXPANSION x|NONSCALING WINDOW s`: `BF.RESERVE`'s arguments after the key.
    pub fn reserve_args(&self) -> Vec<&[u8]> {
        let mut args = vec![self.rate.as_bytes(), self.capacity.as_bytes()];
        args.extend(self.growth.iter().map(|g| g.as_bytes()));
        args.extend([b"WINDOW".as_slice(), self.window.as_bytes()]);
        args
    }

    /// `CAPACITY c ERROR e EXPANSION x|NONSCALING WINDOW s`: `BF.INSERT`'s options.
    fn insert_options(&self) -> Vec<&[u8]> {
        let mut args = vec![
            b"CAPACITY".as_slice(),
            self.capacity.as_bytes(),
            b"ERROR",
            self.rate.as_bytes(),
        ];
        args.extend(self.growth.iter().map(|g| g.as_bytes()));
        args.extend([b"WINDOW".as_slice(), self.window.as_bytes()]);
        args
    }
}

/// Adds `items` at time `now`, stopping at the first error; propagates what was applied as
/// `BF.INSERT key [creation options] AT now ITEMS <applied items>` (a key this command made
/// with nothing applied: its `BF.RESERVE`) and fires `event`. Returns each add's result.
#[allow(clippy::too_many_arguments)]
pub fn add(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    value: &mut Windowed,
    now: u64,
    limit: u64,
    created: Option<&Created>,
) -> Vec<Result<Added, ChainError>> {
    let mut results = Vec::with_capacity(items.len());
    modify(value, |v| {
        for item in items {
            let result = v.filter.add(&hash_item(item.as_slice()), now, limit);
            let stop = result.is_err();
            results.push(result);
            if stop {
                break;
            }
        }
    });
    let done = results.iter().take_while(|r| r.is_ok()).count();
    let changed = results.iter().any(|r| r.is_ok_and(Added::changed));
    let time = now.to_string();
    let commands = match created {
        None if !changed => {
            finish_write(ctx, event, name, Applied::Nothing);
            return results;
        }
        Some(c) if done == 0 => {
            let mut args = vec![name.as_slice()];
            args.extend(c.reserve_args());
            [("BF.RESERVE", args)]
        }
        _ => {
            let mut args = vec![name.as_slice()];
            args.extend(created.map(Created::insert_options).unwrap_or_default());
            args.extend([b"AT".as_slice(), time.as_bytes(), b"ITEMS"]);
            args.extend(items[..done].iter().map(RedisString::as_slice));
            [("BF.INSERT", args)]
        }
    };
    finish_write(ctx, event, name, Applied::As(&commands));
    results
}
