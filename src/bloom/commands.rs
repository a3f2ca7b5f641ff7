//! `BF.*` command handlers: parse, run the chain, reply. RedisBloom 2.8's syntax, replies and
//! error texts, stricter where RedisBloom is lax:
//!
//! * Two kinds of filter: lcbloom's own (`chain.rs`, type `lcbloomBF`), which every command
//!   creates, and RedisBloom's (`crate::bloom::redisbloom`, type `MBbloom--`), imported from RedisBloom's
//!   RDB, `DUMP`, AOF or `BF.SCANDUMP`. Each command looks the key's type up once
//!   (`value::read_either`, lcbloom's type first, so its filters pay nothing for the other) and
//!   serves either. An imported filter answers, reports, scan-dumps and grows exactly as
//!   RedisBloom 2.8.2 would (a negative `BF.SCANDUMP` iterator ends its dump, as there; `BF.INFO
//!   key LAYOUT` answers `redisbloom`). `BF.LOADCHUNK` of a header on a missing key makes
//!   lcbloom's filter from lcbloom's header and RedisBloom's from RedisBloom's (told apart by
//!   their formats).
//!
//! * Every command answers `WRONGTYPE` on a key of another type (RedisBloom's EXISTS/MEXISTS
//!   answer 0), unknown or duplicate options, trailing arguments and `NONSCALING` with
//!   `EXPANSION` are errors, and a failed command leaves no key behind.
//! * `EXPANSION 0` means non-scaling, like `NONSCALING`.
//! * lcbloom's own option `LAYOUT standard|blocked` on `BF.RESERVE`/`BF.INSERT` picks a new
//!   filter's layout (`filter::Layout`; without it, the `bf-layout` config). The full `BF.INFO`
//!   of a blocked filter adds `Blocked: 1` after RedisBloom's five fields (a standard filter's
//!   is RedisBloom's), and `BF.INFO key LAYOUT` answers `standard` or `blocked`. A client that
//!   never sends `LAYOUT` (with the default config) sees nothing new.
//! * Replies: `RedisValue::Bool` (1/0 in RESP2, true/false in RESP3). In MADD/INSERT arrays an
//!   error (full non-scaling filter, scaling refused) takes that item's place and later items
//!   are not processed.
//!
//! Replication and AOF: a command that creates a key replicates the parameters it used, not
//! the defaults it relied on (`BF.ADD` on a missing key is replicated as `BF.INSERT key
//! CAPACITY c ERROR e EXPANSION x|NONSCALING LAYOUT l ITEMS ...`, `BF.RESERVE` with its
//! expansion and layout spelled out), so a replica or an AOF replay with other module defaults
//! (`bf-layout` included) builds the identical value. Other writes are replicated verbatim, and only when they changed something; a
//! MADD/INSERT stopped by an error propagates as `BF.MADD key <the items before it>`. Each
//! write that changed something fires a keyspace event of class `d` (module types) named
//! after the command (`bf.reserve`, `bf.add`, `bf.madd`, `bf.insert`, `bf.loadchunk`).

use super::chain::{Chain, ChainError};
use super::codec;
use super::filter::Layout;
use crate::bloom::redisbloom::chain::RbChain;
use crate::bloom::redisbloom::scandump::{self as rb_scandump, NewFilter};
use crate::bloom::window::codec as wcodec;
use crate::bloom::window::commands::{self as window, Created};
use crate::bloom::window::filter::Added;
use crate::bloom::window::value::Windowed;
use crate::core::chunks::{chunk_start, iterator_after};
use crate::core::hashing::{hash_item, ItemHash};
use crate::server::args::{is_keyword, parse_f64, parse_i64, set_once, Args};
use crate::server::config::{
    bf_defaults, bf_layout, check_item_count, memory_limit, MAX_EXPANSION,
};
use crate::server::errors::{
    expansion_range, unknown_argument, BAD_AT, BAD_CAPACITY, BAD_ERROR_RATE, BAD_EXPANSION,
    BAD_INFO_FIELD, BAD_ITERATOR, BAD_LAYOUT, BAD_WINDOW, CAPACITY_RANGE, CHUNK_LENGTH,
    ERROR_RATE_RANGE, ITEMS_REQUIRED, ITEM_EXISTS, NONSCALING_EXPANSION, NOT_FOUND, NOT_WINDOWED,
    NO_EXPANSION, NO_LAYOUT, WINDOW_LAYOUT,
};
use crate::server::ffi::reply_ordered_map_simple_names;
use crate::server::stats::lost_on_load;
use crate::server::value::{
    finish_write, modify, read, read_either, store, write, write_either, Applied, Either, Key,
};
use redis_module::{raw, Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};
use std::ffi::CStr;
use std::fmt::Display;

/// How to create a filter.
#[derive(Clone, Copy)]
struct Create {
    rate: f64,
    capacity: u64,
    /// 0: non-scaling.
    expansion: u32,
    layout: Layout,
    /// Seconds: a windowed filter.
    window: Option<u64>,
}

impl Create {
    fn defaults() -> Self {
        let (rate, capacity, expansion) = bf_defaults();
        Self {
            rate,
            capacity,
            expansion,
            layout: bf_layout(),
            window: None,
        }
    }

    /// The windowed filter it describes, and how to propagate its creation.
    fn build_window(&self, seconds: u64, limit: u64) -> Result<(Windowed, Created), RedisError> {
        let filter = window::create(seconds, self.rate, self.capacity, self.expansion, limit)?;
        let created = Created::new(self.rate, self.capacity, self.expansion, seconds);
        Ok((filter, created))
    }

    fn build(&self, limit: u64) -> Result<Chain, RedisError> {
        Ok(Chain::with_layout(
            self.layout,
            self.rate,
            self.capacity,
            self.expansion,
            limit,
        )?)
    }

    /// The parameters as text: rate (Rust prints the shortest text that parses back to the
    /// same f64), capacity, `EXPANSION x` or `NONSCALING`, and `LAYOUT l` (always: a
    /// replica's `bf-layout` may differ).
    fn spelled_out(&self) -> [String; 6] {
        let (keyword, expansion) = match self.expansion {
            0 => ("NONSCALING", String::new()),
            e => ("EXPANSION", e.to_string()),
        };
        [
            self.rate.to_string(),
            self.capacity.to_string(),
            keyword.to_string(),
            expansion,
            "LAYOUT".to_string(),
            self.layout.name().to_string(),
        ]
    }

    /// `key CAPACITY c ERROR e EXPANSION x|NONSCALING LAYOUT l ITEMS items...`: the arguments
    /// of the `BF.INSERT` that creates this filter holding `items`.
    fn insert_args<'a>(
        key: &'a RedisString,
        spelled: &'a [String; 6],
        items: &'a [RedisString],
    ) -> Vec<&'a [u8]> {
        let [rate, capacity, expansion @ ..] = spelled;
        let mut args = vec![key.as_slice(), b"CAPACITY", capacity.as_bytes(), b"ERROR"];
        args.push(rate.as_bytes());
        args.extend(
            expansion
                .iter()
                .filter(|a| !a.is_empty())
                .map(|a| a.as_bytes()),
        );
        args.push(b"ITEMS");
        args.extend(items.iter().map(|i| i.as_slice()));
        args
    }
}

fn parse_bf_rate(arg: &RedisString) -> Result<f64, RedisError> {
    let rate = parse_f64(arg).ok_or(RedisError::Str(BAD_ERROR_RATE))?;
    if rate <= 0.0 || rate >= 1.0 {
        return Err(RedisError::Str(ERROR_RATE_RANGE));
    }
    Ok(rate)
}

fn parse_capacity(arg: &RedisString) -> Result<u64, RedisError> {
    let capacity = parse_i64(arg).ok_or(RedisError::Str(BAD_CAPACITY))?;
    if capacity <= 0 {
        return Err(RedisError::Str(CAPACITY_RANGE));
    }
    Ok(capacity as u64)
}

fn parse_expansion(arg: &RedisString) -> Result<u32, RedisError> {
    let expansion = parse_i64(arg).ok_or(RedisError::Str(BAD_EXPANSION))?;
    if !(0..=MAX_EXPANSION).contains(&expansion) {
        return Err(expansion_range(MAX_EXPANSION));
    }
    Ok(expansion as u32)
}

/// Whole seconds, 1 up to `MAX_WINDOW_MS`.
fn parse_window(arg: &RedisString) -> Result<u64, RedisError> {
    parse_i64(arg)
        .and_then(|s| u64::try_from(s).ok())
        .filter(|&s| {
            s >= 1 && s.saturating_mul(1000) <= crate::bloom::window::filter::MAX_WINDOW_MS
        })
        .ok_or(RedisError::Str(BAD_WINDOW))
}

/// Milliseconds since the epoch, 0 up to the latest time a filter holds.
fn parse_at(arg: &RedisString) -> Result<u64, RedisError> {
    parse_i64(arg)
        .and_then(|t| u64::try_from(t).ok())
        .filter(|&t| t <= crate::bloom::window::filter::MAX_TIME)
        .ok_or(RedisError::Str(BAD_AT))
}

fn parse_layout(arg: &RedisString) -> Result<Layout, RedisError> {
    [Layout::Standard, Layout::Blocked]
        .into_iter()
        .find(|l| is_keyword(arg, l.name()))
        .ok_or(RedisError::Str(BAD_LAYOUT))
}

/// The options of `BF.RESERVE` (`EXPANSION`, `NONSCALING`, `LAYOUT`) and `BF.INSERT` (those,
/// `CAPACITY`, `ERROR`, `NOCREATE`, then `ITEMS`), each at most once.
#[derive(Default)]
struct Options {
    capacity: Option<u64>,
    rate: Option<f64>,
    expansion: Option<u32>,
    layout: Option<Layout>,
    nocreate: Option<()>,
    nonscaling: Option<()>,
    window: Option<u64>,
    at: Option<u64>,
}

impl Options {
    /// Parses options until the end, or for `BF.INSERT` (`insert`) until `ITEMS`, which
    /// leaves `args` at the items: true if `ITEMS` was found.
    fn parse(&mut self, args: &mut Args, insert: bool) -> Result<bool, RedisError> {
        while let Some(arg) = args.next() {
            let is = |keyword| is_keyword(arg, keyword);
            if insert && is("ITEMS") {
                return Ok(true);
            } else if is("LAYOUT") {
                set_once(&mut self.layout, "LAYOUT", || {
                    parse_layout(args.value(NO_LAYOUT)?)
                })?;
            } else if insert && is("CAPACITY") {
                set_once(&mut self.capacity, "CAPACITY", || {
                    parse_capacity(args.value(BAD_CAPACITY)?)
                })?;
            } else if insert && is("ERROR") {
                set_once(&mut self.rate, "ERROR", || {
                    parse_bf_rate(args.value(BAD_ERROR_RATE)?)
                })?;
            } else if is("WINDOW") {
                set_once(&mut self.window, "WINDOW", || {
                    parse_window(args.value(BAD_WINDOW)?)
                })?;
            } else if insert && is("AT") {
                set_once(&mut self.at, "AT", || parse_at(args.value(BAD_AT)?))?;
            } else if is("EXPANSION") {
                set_once(&mut self.expansion, "EXPANSION", || {
                    parse_expansion(args.value(NO_EXPANSION)?)
                })?;
            } else if insert && is("NOCREATE") {
                set_once(&mut self.nocreate, "NOCREATE", || Ok(()))?;
            } else if is("NONSCALING") {
                set_once(&mut self.nonscaling, "NONSCALING", || Ok(()))?;
            } else {
                return Err(unknown_argument(arg.as_slice()));
            }
        }
        Ok(false)
    }

    /// How to create a filter: these options over the module defaults.
    fn create(&self) -> Result<Create, RedisError> {
        if self.nonscaling.is_some() && self.expansion.is_some() {
            return Err(RedisError::Str(NONSCALING_EXPANSION));
        }
        if self.window.is_some() && self.layout.is_some() {
            return Err(RedisError::Str(WINDOW_LAYOUT));
        }
        let defaults = Create::defaults();
        Ok(Create {
            rate: self.rate.unwrap_or(defaults.rate),
            capacity: self.capacity.unwrap_or(defaults.capacity),
            expansion: match self.nonscaling {
                Some(()) => 0,
                None => self.expansion.unwrap_or(defaults.expansion),
            },
            layout: self.layout.unwrap_or(defaults.layout),
            window: self.window,
        })
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [LAYOUT standard|blocked]`
pub fn reserve(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    reserve_key(ctx, args).inspect_err(|e| lost_on_load(ctx, "BF.RESERVE", &args[1], e))
}

fn reserve_key(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let mut options = Options {
        rate: Some(parse_bf_rate(&args[2])?),
        capacity: Some(parse_capacity(&args[3])?),
        ..Options::default()
    };
    options.parse(&mut Args::new(&args[4..]), false)?;
    let create = options.create()?;
    let key = Key::write(ctx, &args[1]);
    if !key.is_empty() {
        if let Err(e) = read_either::<Chain, RbChain>(&key) {
            read_window(&key, e)?;
        }
        return Err(RedisError::Str(ITEM_EXISTS));
    }
    if let Some(seconds) = create.window {
        let (filter, created) = create.build_window(seconds, memory_limit(ctx))?;
        store(&key, filter)?;
        let mut reserve = vec![args[1].as_slice()];
        reserve.extend(created.reserve_args());
        let commands = [("BF.RESERVE", reserve)];
        finish_write(ctx, c"bf.reserve", &args[1], Applied::As(&commands));
        return Ok(RedisValue::SimpleStringStatic("OK"));
    }
    store(&key, create.build(memory_limit(ctx))?)?;
    // BF.RESERVE key rate capacity EXPANSION x|NONSCALING LAYOUT l: all spelled out.
    let spelled = create.spelled_out();
    let mut reserve = vec![args[1].as_slice()];
    reserve.extend(
        spelled
            .iter()
            .filter(|a| !a.is_empty())
            .map(|a| a.as_bytes()),
    );
    let commands = [("BF.RESERVE", reserve)];
    finish_write(ctx, c"bf.reserve", &args[1], Applied::As(&commands));
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `BF.ADD key item`
pub fn add(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    add_items(
        ctx,
        c"bf.add",
        &args[1],
        &args[2..],
        Some(Create::defaults()),
        None,
        false,
    )
}

/// `BF.MADD key item [item ...]`
pub fn madd(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    add_items(
        ctx,
        c"bf.madd",
        &args[1],
        &args[2..],
        Some(Create::defaults()),
        None,
        true,
    )
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING]
/// [LAYOUT standard|blocked] ITEMS item...`
pub fn insert(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    insert_items(ctx, args).inspect_err(|e| lost_on_load(ctx, "BF.INSERT", &args[1], e))
}

fn insert_items(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let mut options = Options::default();
    let mut rest = Args::new(&args[2..]);
    let items = match options.parse(&mut rest, true)? {
        true if !rest.rest().is_empty() => rest.rest(),
        _ => return Err(RedisError::Str(ITEMS_REQUIRED)),
    };
    let create = options.create()?;
    let at = (options.window.is_some() || options.at.is_some()).then_some(options.at);
    let create = options.nocreate.is_none().then_some(create);
    add_items(ctx, c"bf.insert", &args[1], items, create, at, true)
}

/// Adds items, creating the key with `create` if it is missing (None: `ERR not found`).
/// `windowed`: `BF.INSERT` gave `WINDOW` or `AT` (refused for a filter without a window),
/// with the `AT` time if any. `multi`: reply with an array (MADD, INSERT), else with the one
/// result (ADD).
fn add_items(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    create: Option<Create>,
    windowed: Option<Option<u64>>,
    multi: bool,
) -> RedisResult {
    check_item_count(ctx, items.len())?;
    let key = Key::write(ctx, name);
    let at = windowed.flatten();
    let existing = match write_either::<Chain, RbChain>(&key) {
        Err(e) => match write::<Windowed>(&key) {
            Ok(Some(value)) => {
                let (now, limit) = (window::now(at), memory_limit(ctx));
                let results = window::add(ctx, event, name, items, value, now, limit, None);
                return reply_window_adds(ctx, multi, results);
            }
            _ => return Err(e),
        },
        Ok(_) if windowed.is_some() && !key.is_empty() => {
            return Err(RedisError::Str(NOT_WINDOWED));
        }
        Ok(existing) => existing,
    };
    if let (
        None,
        Some(Create {
            window: Some(seconds),
            ..
        }),
    ) = (&existing, &create)
    {
        let limit = memory_limit(ctx);
        let (filter, created) = create.as_ref().unwrap().build_window(*seconds, limit)?;
        let value = store(&key, filter)?;
        let now = window::now(at);
        let results = window::add(ctx, event, name, items, value, now, limit, Some(&created));
        return reply_window_adds(ctx, multi, results);
    }
    let (chain, limit, created) = match existing {
        // The limit only matters when a sub-filter is added, and reading it costs a
        // RedisModule_GetContextFlags call: skip that for the writes that cannot scale.
        Some(Either::First(chain)) if chain.can_hold(items.len() as u64) => (chain, u64::MAX, None),
        Some(Either::First(chain)) => (chain, memory_limit(ctx), None),
        Some(Either::Second(chain)) => return add_imported(ctx, event, name, items, chain, multi),
        None => {
            let create = create.ok_or(RedisError::Str(NOT_FOUND))?;
            let limit = memory_limit(ctx);
            (store(&key, create.build(limit)?)?, limit, Some(create))
        }
    };
    if !multi {
        // BF.ADD: one item, no batch buffers.
        let result = modify(chain, |c| c.add(&hash_item(items[0].as_slice()), limit));
        let done = usize::from(result.is_ok());
        finish_add(
            ctx,
            event,
            name,
            items,
            done,
            matches!(result, Ok(true)),
            created,
        );
        return Ok(RedisValue::Bool(result?));
    }
    // Hash everything first so that the chain can prefetch ahead of its probes.
    let hashes: Vec<ItemHash> = items.iter().map(|i| hash_item(i.as_slice())).collect();
    let mut results = Vec::with_capacity(items.len());
    modify(chain, |c| c.add_batch(&hashes, limit, |r| results.push(r)));
    let changed = results.iter().any(|r| matches!(r, Ok(true)));
    let done = results.iter().take_while(|r| r.is_ok()).count();
    finish_add(ctx, event, name, items, done, changed, created);
    reply_adds(ctx, true, results)
}

/// Adds to a filter imported from RedisBloom, by RedisBloom's rules: one item at a time (each
/// add may grow the chain), stopping at the first error.
fn add_imported(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    chain: &mut RbChain,
    multi: bool,
) -> RedisResult {
    let limit = memory_limit(ctx);
    let mut results = Vec::with_capacity(items.len());
    modify(chain, |c| {
        for item in items {
            let result = c.add(&c.hash(item.as_slice()), limit);
            let stop = result.is_err();
            results.push(result);
            if stop {
                break;
            }
        }
    });
    let changed = results.iter().any(|r| matches!(r, Ok(true)));
    let done = results.iter().take_while(|r| r.is_ok()).count();
    finish_add(ctx, event, name, items, done, changed, None);
    reply_adds(ctx, multi, results)
}

/// The reply to adds to a windowed filter: 1 for a new item, 0 for one found.
fn reply_window_adds(
    ctx: &Context,
    multi: bool,
    results: Vec<Result<Added, ChainError>>,
) -> RedisResult {
    let results = results.into_iter().map(|r| r.map(|a| a.is_new())).collect();
    reply_adds(ctx, multi, results)
}

/// The reply to an add: BF.ADD's one result (`multi` false), or an array in which an error
/// takes its item's place (later items were not processed).
fn reply_adds<E: Display + Into<RedisError>>(
    ctx: &Context,
    multi: bool,
    mut results: Vec<Result<bool, E>>,
) -> RedisResult {
    if !multi {
        if let Some(result) = results.pop() {
            return Ok(RedisValue::Bool(result.map_err(Into::into)?));
        }
    }
    raw::reply_with_array(ctx.ctx, results.len() as std::os::raw::c_long);
    for result in results {
        match result {
            Ok(added) => {
                raw::reply_with_bool(ctx.ctx, added.into());
            }
            Err(e) => {
                ctx.reply(Err(e.into()));
            }
        }
    }
    Ok(RedisValue::NoReply)
}

/// After an add of which the first `done` items were applied: a filter this command created
/// propagates as the `BF.INSERT` that builds it with those items, a stop part-way as the
/// `BF.MADD` of those items. Replicas and AOF replays do not apply max-memory-per-key
/// (config::memory_limit), so they would otherwise add items the master refused.
fn finish_add(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    done: usize,
    changed: bool,
    created: Option<Create>,
) {
    let spelled;
    let commands;
    let applied = match created {
        Some(create) => {
            spelled = create.spelled_out();
            commands = [(
                "BF.INSERT",
                Create::insert_args(name, &spelled, &items[..done]),
            )];
            Applied::As(&commands)
        }
        None if !changed => Applied::Nothing,
        None if done == items.len() => Applied::Whole,
        None => {
            let mut madd = vec![name.as_slice()];
            madd.extend(items[..done].iter().map(|i| i.as_slice()));
            commands = [("BF.MADD", madd)];
            Applied::As(&commands)
        }
    };
    finish_write(ctx, event, name, applied);
}

/// `BF.EXISTS key item`
pub fn exists(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let item = args[2].as_slice();
    let found = match read_either::<Chain, RbChain>(&key) {
        Ok(Some(Either::First(chain))) => chain.contains(&hash_item(item)),
        Ok(Some(Either::Second(chain))) => chain.contains(&chain.hash(item)),
        Ok(None) => false,
        Err(e) => read_window(&key, e)?
            .filter
            .contains(&hash_item(item), window::now(None)),
    };
    Ok(RedisValue::Bool(found))
}

/// `BF.MEXISTS key item [item ...]`
pub fn mexists(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    check_item_count(ctx, args.len() - 2)?;
    let key = Key::read(ctx, &args[1]);
    let items = &args[2..];
    let filter = match read_either::<Chain, RbChain>(&key) {
        Ok(filter) => filter,
        Err(e) => {
            let (w, now) = (read_window(&key, e)?, window::now(None));
            let found = items
                .iter()
                .map(|i| w.filter.contains(&hash_item(i.as_slice()), now));
            return Ok(RedisValue::Array(found.map(RedisValue::Bool).collect()));
        }
    };
    raw::reply_with_array(ctx.ctx, items.len() as std::os::raw::c_long);
    match filter {
        Some(Either::First(chain)) => {
            let hashes: Vec<ItemHash> = items.iter().map(|i| hash_item(i.as_slice())).collect();
            chain.contains_batch(&hashes, |found| {
                raw::reply_with_bool(ctx.ctx, found.into());
            });
        }
        Some(Either::Second(chain)) => items.iter().for_each(|i| {
            let found = chain.contains(&chain.hash(i.as_slice()));
            raw::reply_with_bool(ctx.ctx, found.into());
        }),
        None => items.iter().for_each(|_| {
            raw::reply_with_bool(ctx.ctx, 0);
        }),
    }
    Ok(RedisValue::NoReply)
}

/// `BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION|LAYOUT]`
pub fn info(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if !(2..=3).contains(&args.len()) {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    // An imported filter reports what RedisBloom does, Size by RedisBloom's own accounting.
    let mut own = Vec::new();
    let (capacity, size, filters, items, expansion, layout) =
        match read_either::<Chain, RbChain>(&key) {
            Err(e) => {
                let w = read_window(&key, e)?;
                let (f, now) = (&w.filter, window::now(None));
                let p = f.params();
                own.push(("Window", RedisValue::Integer((p.window_ms / 1000) as i64)));
                own.push(("Stored", RedisValue::Integer(f.stored(now) as i64)));
                own.push(("Time", RedisValue::Integer(f.time() as i64)));
                let expansion = (p.expansion > 0).then_some(p.expansion);
                let items = f.cardinality(now);
                let layers = f.layers().len();
                (
                    f.capacity(now),
                    w.memory_bytes(),
                    layers,
                    items,
                    expansion,
                    window::LAYOUT,
                )
            }
            Ok(None) => return Err(RedisError::Str(NOT_FOUND)),
            Ok(Some(Either::First(c))) => (
                c.capacity(),
                c.memory_bytes(),
                c.filters().len(),
                c.items(),
                c.expansion(),
                c.layout().name(),
            ),
            Ok(Some(Either::Second(c))) => (
                c.capacity(),
                c.info_size(),
                c.links().len(),
                c.size(),
                c.expansion(),
                "redisbloom",
            ),
        };
    let expansion = match expansion {
        Some(e) => RedisValue::Integer(e as i64),
        None => RedisValue::Null,
    };
    let fields = [
        ("CAPACITY", "Capacity", RedisValue::Integer(capacity as i64)),
        ("SIZE", "Size", RedisValue::Integer(size as i64)),
        (
            "FILTERS",
            "Number of filters",
            RedisValue::Integer(filters as i64),
        ),
        (
            "ITEMS",
            "Number of items inserted",
            RedisValue::Integer(items as i64),
        ),
        ("EXPANSION", "Expansion rate", expansion),
    ];
    let Some(which) = args.get(2) else {
        let mut fields: Vec<_> = fields.into_iter().map(|(_, n, v)| (n, v)).collect();
        // lcbloom's own field, after RedisBloom's and only for blocked filters (a standard
        // filter's reply is RedisBloom's); a number, because typed clients (the redis crate's
        // bf_info) read every value of this reply as one.
        if layout == Layout::Blocked.name() {
            fields.push(("Blocked", RedisValue::Integer(1)));
        }
        // A windowed filter's state, after RedisBloom's fields, numbers too.
        fields.extend(own);
        return reply_ordered_map_simple_names(ctx, fields);
    };
    let layout = ("LAYOUT", "Layout", RedisValue::SimpleStringStatic(layout));
    let (_, name, value) = fields
        .into_iter()
        .chain([layout])
        .find(|(keyword, _, _)| is_keyword(which, keyword))
        .ok_or(RedisError::Str(BAD_INFO_FIELD))?;
    // RedisBloom: a one-entry map in RESP3, a one-element array in RESP2.
    if ctx.get_flags().contains(ContextFlags::FLAGS_RESP3) {
        reply_ordered_map_simple_names(ctx, vec![(name, value)])
    } else {
        Ok(RedisValue::Array(vec![value]))
    }
}

/// `BF.CARD key`
pub fn card(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let items = match read_either::<Chain, RbChain>(&key) {
        Ok(Some(Either::First(chain))) => chain.items(),
        Ok(Some(Either::Second(chain))) => chain.size(),
        Ok(None) => 0,
        Err(e) => read_window(&key, e)?.filter.cardinality(window::now(None)),
    };
    Ok(RedisValue::Integer(items as i64))
}

/// `BF.SCANDUMP key iterator`: `[1, header]` for iterator 0, then `[next, chunk]` where next
/// is 1 + the chunk's end offset in the data, and `[0, ""]` at the end.
pub fn scandump(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let filter = read_either::<Chain, RbChain>(&key);
    let iterator = parse_i64(&args[2]).ok_or(RedisError::Str(BAD_ITERATOR))?;
    // lcbloom's own kinds: the header, then chunks named by their end offset.
    let own = match filter {
        Err(e) => Either::Second(read_window(&key, e)?),
        Ok(None) => return Err(RedisError::Str(NOT_FOUND)),
        Ok(Some(Either::First(chain))) => Either::First(chain),
        Ok(Some(Either::Second(chain))) => return Ok(scandump_imported(chain, iterator)),
    };
    if iterator < 0 {
        return Err(RedisError::Str(BAD_ITERATOR));
    }
    if iterator == 0 {
        let header = match own {
            Either::First(chain) => codec::encode_header(chain),
            Either::Second(w) => wcodec::encode_header(&w.filter),
        };
        return Ok(RedisValue::Array(vec![
            RedisValue::Integer(1),
            RedisValue::StringBuffer(header),
        ]));
    }
    let offset = iterator as u64 - 1;
    let chunk = match own {
        Either::First(chain) => codec::data_chunk(chain, offset),
        Either::Second(w) => wcodec::data_chunk(&w.filter, offset),
    };
    Ok(RedisValue::Array(match chunk {
        Some(chunk) => vec![
            RedisValue::Integer(iterator_after(offset + chunk.len() as u64) as i64),
            RedisValue::StringBuffer(chunk),
        ],
        None => vec![RedisValue::Integer(0), RedisValue::StringBuffer(Vec::new())],
    }))
}

/// RedisBloom's `BF.SCANDUMP` of an imported filter: as for lcbloom's, except that the chunks
/// are RedisBloom's and any iterator past the end, or negative, ends the dump.
fn scandump_imported(chain: &RbChain, iterator: i64) -> RedisValue {
    if iterator == 0 {
        return RedisValue::Array(vec![
            RedisValue::Integer(1),
            RedisValue::StringBuffer(rb_scandump::encode_header(chain)),
        ]);
    }
    let chunk = u64::try_from(iterator)
        .ok()
        .and_then(|it| rb_scandump::chunk(chain, it));
    RedisValue::Array(match chunk {
        Some((next, data)) => vec![
            RedisValue::Integer(next as i64),
            RedisValue::StringBuffer(data.to_vec()),
        ],
        None => vec![RedisValue::Integer(0), RedisValue::StringBuffer(Vec::new())],
    })
}

/// `BF.LOADCHUNK key iterator data`: iterator 1 creates the key from a header (lcbloom's or
/// RedisBloom's); later chunks write `data` at offset iterator − 1 − len, after full
/// validation (RedisBloom's rules and texts for an imported filter).
pub fn loadchunk(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    load_chunk(ctx, &args[1], &args[2], args[3].as_slice())
        .inspect_err(|e| lost_on_load(ctx, "BF.LOADCHUNK", &args[1], e))?;
    finish_write(ctx, c"bf.loadchunk", &args[1], Applied::Whole);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

fn load_chunk(
    ctx: &Context,
    name: &RedisString,
    iterator: &RedisString,
    data: &[u8],
) -> Result<(), RedisError> {
    let iterator = parse_i64(iterator).ok_or(RedisError::Str(BAD_ITERATOR))?;
    let key = Key::write(ctx, name);
    let filter = match write_either::<Chain, RbChain>(&key) {
        Ok(filter) => filter,
        Err(e) => {
            let w = write::<Windowed>(&key).ok().flatten().ok_or(e)?;
            if iterator < 1 {
                return Err(RedisError::Str(BAD_ITERATOR));
            } else if iterator == 1 {
                return Err(RedisError::Str(ITEM_EXISTS));
            }
            let start =
                chunk_start(iterator as u64, data.len()).ok_or(RedisError::Str(CHUNK_LENGTH))?;
            return Ok(modify(w, |w| w.load_chunk(start, data))?);
        }
    };
    match filter {
        Some(Either::Second(chain)) => Ok(rb_scandump::load_chunk(chain, iterator, data)?),
        _ if iterator < 1 => Err(RedisError::Str(BAD_ITERATOR)),
        Some(Either::First(_)) if iterator == 1 => Err(RedisError::Str(ITEM_EXISTS)),
        Some(Either::First(chain)) => {
            let offset =
                chunk_start(iterator as u64, data.len()).ok_or(RedisError::Str(CHUNK_LENGTH))?;
            Ok(codec::write_data(chain, offset, data)?)
        }
        None if iterator == 1 && data.starts_with(wcodec::MAGIC) => {
            store(&key, Windowed::from_header(data, memory_limit(ctx))?).map(drop)
        }
        None if iterator == 1 => match rb_scandump::decode_any_header(data, memory_limit(ctx))? {
            NewFilter::Own(chain) => store(&key, chain).map(drop),
            NewFilter::RedisBloom(chain) => store(&key, chain).map(drop),
        },
        None => Err(RedisError::Str(NOT_FOUND)),
    }
}

/// The windowed filter under a key that holds no other kind of Bloom filter, or `other` (the
/// error the other kinds' lookup gave: WRONGTYPE).
fn read_window(key: &Key, other: RedisError) -> Result<&Windowed, RedisError> {
    match read::<Windowed>(key) {
        Ok(Some(w)) => Ok(w),
        _ => Err(other),
    }
}
