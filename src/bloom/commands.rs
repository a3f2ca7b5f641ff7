//! `BF.*` command handlers: parse, run the chain, reply. RedisBloom 2.8's syntax, replies and
//! error texts, stricter where RedisBloom is lax:
//!
//! * Two kinds of filter: lcbloom's own (`chain.rs`, type `lcbloomBF`), which every command
//!   creates, and RedisBloom's (`crate::bloom::redisbloom`, type `MBbloom--`), imported from
//!   RedisBloom's RDB, `DUMP`, AOF or `BF.SCANDUMP`. Each command looks the key's type up once
//!   (`read_filter`/`write_filter`, lcbloom's type first, so its filters pay nothing for the
//!   other) and serves a Bloom filter through `any::BloomFilter`, whatever it is stored as.
//!   An imported filter answers, reports, scan-dumps and grows exactly as
//!   RedisBloom 2.8.2 would (`BF.INFO key LAYOUT` answers `redisbloom`). A negative
//!   `BF.SCANDUMP` iterator ends the dump of either, as in RedisBloom. `BF.LOADCHUNK` of a
//!   header on a missing key makes
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

use super::any::{Added, BloomFilter, ChunkError, Env, Field};
use super::chain::Chain;
use super::config::{self, MAX_EXPANSION};
use super::errors::{
    expansion_range, BAD_CAPACITY, BAD_ERROR_RATE, BAD_EXPANSION, BAD_INFO_FIELD, BAD_ITERATOR,
    BAD_LAYOUT, CAPACITY_RANGE, ERROR_RATE_RANGE, ITEMS_REQUIRED, NONSCALING_EXPANSION,
    NO_EXPANSION, NO_LAYOUT,
};
use super::filter::Layout;
use super::load::{from_header, NewFilter};
use crate::bloom::redisbloom::chain::RedisBloomChain;
use crate::server::args::{is_keyword, parse_f64, parse_i64, set_once, Args};
use crate::server::errors::{unknown_argument, CHUNK_LENGTH, INTERNAL, ITEM_EXISTS, NOT_FOUND};
use crate::server::limits::{check_item_count, memory_limit};
use crate::server::reply::{flag, ordered_map_simple_names};
use crate::server::stats::note_refused_write;
use crate::server::value::{modify, read_either, store, write_either, Either, Key};
use crate::server::write::{finish_write, Applied, Progress};
use redis_module::{raw, Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};
use std::ffi::CStr;

/// The parameters of a new filter.
#[derive(Clone, Copy)]
struct FilterParams {
    rate: f64,
    capacity: u64,
    /// 0: non-scaling.
    expansion: u32,
    layout: Layout,
}

impl FilterParams {
    fn defaults() -> Self {
        let (rate, capacity, expansion) = config::defaults();
        Self {
            rate,
            capacity,
            expansion,
            layout: config::layout(),
        }
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
    fn create(&self) -> Result<FilterParams, RedisError> {
        if self.nonscaling.is_some() && self.expansion.is_some() {
            return Err(RedisError::Str(NONSCALING_EXPANSION));
        }
        let defaults = FilterParams::defaults();
        Ok(FilterParams {
            rate: self.rate.unwrap_or(defaults.rate),
            capacity: self.capacity.unwrap_or(defaults.capacity),
            expansion: match self.nonscaling {
                Some(()) => 0,
                None => self.expansion.unwrap_or(defaults.expansion),
            },
            layout: self.layout.unwrap_or(defaults.layout),
        })
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [LAYOUT standard|blocked]`
pub fn reserve(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    reserve_key(ctx, args).inspect_err(|e| note_refused_write(ctx, "BF.RESERVE", &args[1], e))
}

fn reserve_key(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let mut options = Options {
        rate: Some(parse_bf_rate(&args[2])?),
        capacity: Some(parse_capacity(&args[3])?),
        ..Options::default()
    };
    options.parse(&mut Args::new(&args[4..]), false)?;
    let create = options.create()?;
    let mut key = Key::write(ctx, &args[1]);
    if write_either::<Chain, RedisBloomChain>(&mut key)?.is_some() {
        return Err(RedisError::Str(ITEM_EXISTS));
    }
    store(&mut key, create.build(memory_limit(ctx))?)?;
    // BF.RESERVE key rate capacity EXPANSION x|NONSCALING LAYOUT l: all spelled out.
    let spelled = create.spelled_out();
    let mut reserve = vec![args[1].as_slice()];
    reserve.extend(
        spelled
            .iter()
            .filter(|a| !a.is_empty())
            .map(|a| a.as_bytes()),
    );
    finish_write(
        ctx,
        c"bf.reserve",
        &args[1],
        Applied::Redo(vec![("BF.RESERVE", reserve)]),
    );
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `BF.ADD key item`
pub fn add(ctx: &Context, args: &[RedisString]) -> RedisResult {
    add_with_defaults(ctx, c"bf.add", args, false)
}

/// `BF.MADD key item [item ...]`
pub fn madd(ctx: &Context, args: &[RedisString]) -> RedisResult {
    add_with_defaults(ctx, c"bf.madd", args, true)
}

/// `BF.ADD` (one item) and `BF.MADD` (`many`): a missing key gets a filter with the
/// configured defaults.
fn add_with_defaults(ctx: &Context, event: &CStr, args: &[RedisString], many: bool) -> RedisResult {
    if args.len() < 3 || (!many && args.len() != 3) {
        return Err(RedisError::WrongArity);
    }
    let defaults = Some(FilterParams::defaults());
    add_items(ctx, event, &args[1], &args[2..], defaults, many)
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING]
/// [LAYOUT standard|blocked] ITEMS item...`
pub fn insert(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    insert_items(ctx, args).inspect_err(|e| note_refused_write(ctx, "BF.INSERT", &args[1], e))
}

fn insert_items(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let mut options = Options::default();
    let mut rest = Args::new(&args[2..]);
    let items = match options.parse(&mut rest, true)? {
        true if !rest.rest().is_empty() => rest.rest(),
        _ => return Err(RedisError::Str(ITEMS_REQUIRED)),
    };
    let create = options.create()?;
    let create = options.nocreate.is_none().then_some(create);
    add_items(ctx, c"bf.insert", &args[1], items, create, true)
}

/// The server as a filter sees it while a command runs.
struct Server<'a>(&'a Context);

impl Env for Server<'_> {
    fn memory_limit(&self) -> u64 {
        memory_limit(self.0)
    }

    fn now_ms(&self) -> u64 {
        // SAFETY: a function pointer Redis sets at load, called on the main thread.
        unsafe { raw::RedisModule_Milliseconds.expect("Milliseconds")() as u64 }
    }
}

/// The Bloom filter under a key, of any representation: None if the key is empty,
/// `WRONGTYPE` if it holds another type. lcbloom's type is looked up first, so its filters
/// pay nothing for the others.
fn read_filter(key: &Key) -> Result<Option<&dyn BloomFilter>, RedisError> {
    Ok(match read_either::<Chain, RedisBloomChain>(key)? {
        Some(Either::First(chain)) => Some(chain),
        Some(Either::Second(chain)) => Some(chain),
        None => None,
    })
}

/// Runs `write` on the Bloom filter under a key opened for writing, accounting for the bytes
/// it adds or frees: None (and `write` not run) if the key is empty.
fn write_filter<R>(
    key: &mut Key,
    write: impl FnOnce(&mut dyn BloomFilter) -> R,
) -> Result<Option<R>, RedisError> {
    Ok(match write_either::<Chain, RedisBloomChain>(key)? {
        Some(Either::First(chain)) => Some(modify(chain, |c| write(c))),
        Some(Either::Second(chain)) => Some(modify(chain, |c| write(c))),
        None => None,
    })
}

/// Adds items, creating the key with `create` if it is missing (None: `ERR not found`).
/// `multi`: reply with an array (MADD, INSERT), else with the one result (ADD).
fn add_items(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    create: Option<FilterParams>,
    multi: bool,
) -> RedisResult {
    check_item_count(ctx, items.len())?;
    let mut key = Key::write(ctx, name);
    let env = Server(ctx);
    // BF.ADD's one item needs no lists: no allocation on the most frequent write.
    let (mut results, mut last) = (Vec::new(), None);
    let mut add = |filter: &mut dyn BloomFilter| match (multi, items) {
        (false, [item]) => last = Some(filter.add_one(item.as_slice(), &env)),
        _ => {
            let bytes: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
            results.reserve_exact(items.len());
            filter.add_all(&bytes, &env, &mut |r| results.push(r));
        }
    };
    let created = match write_filter(&mut key, &mut add)? {
        Some(()) => None,
        None => {
            let create = create.ok_or(RedisError::Str(NOT_FOUND))?;
            let chain = store(&mut key, create.build(memory_limit(ctx))?)?;
            modify(chain, |c| add(c));
            Some(create)
        }
    };
    let outcomes = results.iter().chain(&last);
    let changed = outcomes.clone().any(|r| r.is_ok_and(Added::changed));
    let done = outcomes.take_while(|r| r.is_ok()).count();
    finish_add(ctx, event, name, items, done, changed, created);
    if !multi {
        let added = last.ok_or(RedisError::Str(INTERNAL))?;
        return Ok(RedisValue::Bool(added?.is_new()));
    }
    raw::reply_with_array(ctx.ctx, results.len() as std::os::raw::c_long);
    for result in results {
        match result {
            Ok(added) => {
                raw::reply_with_bool(ctx.ctx, added.is_new().into());
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
/// (limits::memory_limit), so they would otherwise add items the master refused.
fn finish_add(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    done: usize,
    changed: bool,
    created: Option<FilterParams>,
) {
    let spelled = created.map(|c| c.spelled_out());
    let progress = Progress {
        created: created.is_some(),
        changed,
        done,
        total: items.len(),
    };
    let applied = progress.applied(|done| match &spelled {
        Some(spelled) => vec![(
            "BF.INSERT",
            FilterParams::insert_args(name, spelled, &items[..done]),
        )],
        None => {
            let mut madd = vec![name.as_slice()];
            madd.extend(items[..done].iter().map(|i| i.as_slice()));
            vec![("BF.MADD", madd)]
        }
    });
    finish_write(ctx, event, name, applied);
}

/// `BF.EXISTS key item`
pub fn exists(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let found = match read_filter(&key)? {
        Some(filter) => filter.contains_one(args[2].as_slice(), &Server(ctx)),
        None => false,
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
    let filter = read_filter(&key)?;
    let items = &args[2..];
    raw::reply_with_array(ctx.ctx, items.len() as std::os::raw::c_long);
    let mut reply = |found: bool| {
        raw::reply_with_bool(ctx.ctx, found.into());
    };
    match filter {
        Some(filter) => {
            let bytes: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
            filter.contains_all(&bytes, &Server(ctx), &mut reply);
        }
        None => items.iter().for_each(|_| reply(false)),
    }
    Ok(RedisValue::NoReply)
}

/// `BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION|LAYOUT]`
pub fn info(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if !(2..=3).contains(&args.len()) {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let info = read_filter(&key)?
        .ok_or(RedisError::Str(NOT_FOUND))?
        .info(&Server(ctx));
    let integer = |n: u64| RedisValue::Integer(n as i64);
    let expansion = match info.expansion {
        Some(e) => RedisValue::Integer(e as i64),
        None => RedisValue::Null,
    };
    let fields = [
        ("CAPACITY", "Capacity", integer(info.capacity)),
        ("SIZE", "Size", integer(info.size)),
        ("FILTERS", "Number of filters", integer(info.filters)),
        ("ITEMS", "Number of items inserted", integer(info.items)),
        ("EXPANSION", "Expansion rate", expansion),
    ];
    let Some(which) = args.get(2) else {
        let mut fields: Vec<_> = fields.into_iter().map(|(_, n, v)| (n, v)).collect();
        // The representation's own fields, after RedisBloom's.
        fields.extend(info.extra.into_iter().map(|(n, v)| match v {
            Field::Flag(yes) => (n, flag(yes)),
            Field::Number(v) => (n, RedisValue::Integer(v)),
        }));
        return ordered_map_simple_names(ctx, fields);
    };
    let layout = (
        "LAYOUT",
        "Layout",
        RedisValue::SimpleStringStatic(info.layout),
    );
    let (_, name, value) = fields
        .into_iter()
        .chain([layout])
        .find(|(keyword, _, _)| is_keyword(which, keyword))
        .ok_or(RedisError::Str(BAD_INFO_FIELD))?;
    // RedisBloom: a one-entry map in RESP3, a one-element array in RESP2.
    if ctx.get_flags().contains(ContextFlags::FLAGS_RESP3) {
        ordered_map_simple_names(ctx, vec![(name, value)])
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
    let items = match read_filter(&key)? {
        Some(filter) => filter.card(&Server(ctx)),
        None => 0,
    };
    Ok(RedisValue::Integer(items as i64))
}

/// `BF.SCANDUMP key iterator`: `[1, header]` for iterator 0, then `[next, chunk]` where next
/// is 1 + the chunk's end offset in the data, and `[0, ""]` at the end (or for a negative
/// iterator, as RedisBloom).
pub fn scandump(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let filter = read_filter(&key)?.ok_or(RedisError::Str(NOT_FOUND))?;
    let iterator = parse_i64(&args[2]).ok_or(RedisError::Str(BAD_ITERATOR))?;
    let (next, bytes) = filter.scandump(iterator);
    Ok(RedisValue::Array(vec![
        RedisValue::Integer(next as i64),
        RedisValue::StringBuffer(bytes),
    ]))
}

/// `BF.LOADCHUNK key iterator data`: iterator 1 creates the key from a header (lcbloom's or
/// RedisBloom's); later chunks write `data` at offset iterator − 1 − len, after full
/// validation (RedisBloom's rules and texts for an imported filter).
pub fn loadchunk(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    load_chunk(ctx, &args[1], &args[2], args[3].as_slice())
        .inspect_err(|e| note_refused_write(ctx, "BF.LOADCHUNK", &args[1], e))?;
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
    let mut key = Key::write(ctx, name);
    match write_filter(&mut key, |f| f.load_chunk(iterator, data))? {
        Some(loaded) => loaded.map_err(|e| match e {
            ChunkError::Iterator => RedisError::Str(BAD_ITERATOR),
            ChunkError::Exists => RedisError::Str(ITEM_EXISTS),
            ChunkError::Length => RedisError::Str(CHUNK_LENGTH),
            ChunkError::Data(e) => e.into(),
        }),
        None if iterator == 1 => create_from_header(&mut key, data, memory_limit(ctx)),
        None if iterator < 1 => Err(RedisError::Str(BAD_ITERATOR)),
        None => Err(RedisError::Str(NOT_FOUND)),
    }
}

/// A zero-filled filter under an empty key from a `BF.LOADCHUNK` header, of the kind its
/// format says (`load::from_header`), within `limit` bytes.
fn create_from_header(key: &mut Key, header: &[u8], limit: u64) -> Result<(), RedisError> {
    match from_header(header, limit)? {
        NewFilter::Own(chain) => store(key, chain).map(drop),
        NewFilter::RedisBloom(chain) => store(key, chain).map(drop),
    }
}
