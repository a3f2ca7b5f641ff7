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
//! * lcbloom's own option `SEED s` on `BF.RESERVE`/`BF.INSERT` gives a new filter, windowed or
//!   not, the hash seed s (0 to 2^64 − 1; without it, the `bf-seed` config: a random one by
//!   default). Filters made alike with the same seed hold the same bits; seed 0 hashes as
//!   filters made before seeds existed. On an existing filter it is ignored, like the other
//!   creation options.
//! * Replies: `RedisValue::Bool` (1/0 in RESP2, true/false in RESP3). In MADD/INSERT arrays an
//!   error (full non-scaling filter, scaling refused) takes that item's place and later items
//!   are not processed.
//!
//! Replication and AOF: a command that creates a key replicates the parameters it used, not
//! the defaults it relied on (`BF.ADD` on a missing key is replicated as `BF.INSERT key
//! CAPACITY c ERROR e EXPANSION x|NONSCALING LAYOUT l SEED s ITEMS ...`, `BF.RESERVE` with
//! its expansion, layout (or window) and seed spelled out), so a replica or an AOF replay with
//! other module defaults (`bf-layout` and `bf-seed` included) builds the identical value, its
//! random seed included. A create that comes from a master or an AOF file without `SEED` was
//! written by a version whose filters had no seeds, and makes an unseeded filter (seed 0), as
//! it did there.
//! Other writes are replicated verbatim, and only when they changed something; a
//! MADD/INSERT stopped by an error propagates as `BF.MADD key <the items before it>`; a write
//! that moves a windowed filter's clock carries its time (`finish_add`). Each
//! write that changed something fires a keyspace event of class `d` (module types) named
//! after the command (`bf.reserve`, `bf.add`, `bf.madd`, `bf.insert`, `bf.loadchunk`).

use super::any::{Added, BloomFilter, ChunkError, Env, Field};
use super::budget::{self, MAX_EXPANSION};
use super::chain::{Chain, ChainError};
use super::codec::BAD_DATA;
use super::config;
use super::errors::{
    expansion_range, AT_AHEAD, AT_WITHOUT_WINDOW, BAD_AT, BAD_CAPACITY, BAD_ERROR_RATE,
    BAD_EXPANSION, BAD_INFO_FIELD, BAD_ITERATOR, BAD_LAYOUT, BAD_SEED, BAD_WINDOW, CAPACITY_RANGE,
    ERROR_RATE_RANGE, EXISTS_NOT_WINDOWED, NONSCALING_EXPANSION, NOT_WINDOWED, NO_EXPANSION,
    NO_LAYOUT, WINDOW_LAYOUT,
};
use super::filter::Layout;
use super::load::{from_header, NewFilter};
use super::window::filter::{WindowParams, MAX_TIME, MAX_WINDOW_SECS};
use super::window::value::Windowed;
use crate::bloom::redisbloom::chain::RedisBloomChain;
use crate::server::args::{is_keyword, parse_f64, parse_i64, parse_u64, set_once, Args};
use crate::server::errors::{
    unknown_argument, CHUNK_LENGTH, INTERNAL, ITEMS_REQUIRED, ITEM_EXISTS, NOT_FOUND,
};
use crate::server::limits::{check_item_count, memory_limit, memory_limit_while, rebuilding};
use crate::server::reply::{self, flag, ordered_map_simple_names};
use crate::server::stats::note_refused_write;
use crate::server::value::{self, modify, read, read_either, store, write_either, Either, Key};
use crate::server::write::{
    finish_write, Applied, Progress, Remembered, Replicated, Word, CAPACITY, ERROR, ITEMS,
};
use redis_module::{raw, Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};
use std::cell::Cell;
use std::ffi::CStr;

/// The parameters of a new filter.
#[derive(Clone, Copy)]
struct FilterParams {
    rate: f64,
    capacity: u64,
    /// 0: non-scaling.
    expansion: u32,
    layout: Layout,
    /// The hash seed; None until the filter is built, which draws it (`bf-seed`).
    seed: Option<u64>,
    /// Seconds: a windowed filter (`window/`), which has no layout.
    window: Option<u32>,
}

impl FilterParams {
    fn defaults() -> Self {
        let (rate, capacity, expansion) = config::defaults();
        Self {
            rate,
            capacity,
            expansion,
            layout: config::layout(),
            seed: None,
            window: None,
        }
    }

    /// The filter, within `limit` bytes, made for an add of `coming` items (0: none); its
    /// seed is drawn now if none was given (`rebuilding`: the command comes from a master or
    /// an AOF file, see `default_seed`), so that writes to existing keys never draw one.
    fn build(
        &mut self,
        limit: u64,
        rebuilding: bool,
        coming: usize,
    ) -> Result<NewFilter, RedisError> {
        let seed = *self.seed.get_or_insert_with(|| default_seed(rebuilding));
        Ok(match self.window {
            Some(seconds) => {
                let params = WindowParams {
                    window_secs: seconds,
                    error_rate: self.rate,
                    capacity: self.capacity,
                    expansion: self.expansion,
                    seed,
                };
                if !rebuilding && !budget::WINDOW.has_room(self.rate, self.expansion) {
                    return Err(ChainError::WindowErrorRate.into());
                }
                NewFilter::Window(Windowed::with_params(params, limit)?)
            }
            None => {
                if !rebuilding && !budget::CHAIN.has_room(self.rate, self.expansion) {
                    return Err(ChainError::ErrorRate.into());
                }
                NewFilter::Own(Chain::with_layout(
                    self.layout,
                    seed,
                    self.rate,
                    self.capacity,
                    self.expansion,
                    limit,
                    coming as u64,
                )?)
            }
        })
    }

    /// Appends the parameters of a built filter beyond its rate and capacity: `EXPANSION x`
    /// or `NONSCALING`, `LAYOUT l` or, for a windowed filter, `WINDOW s`, and `SEED s`
    /// (always: a replica's `bf-layout` may differ, and a random seed is the master's).
    /// Keywords are [`Word`]s made once; only the numbers are made per command.
    fn spell_rest(&self, command: &mut Replicated) {
        match self.expansion {
            0 => command.word(&NONSCALING),
            e => command
                .word(&EXPANSION)
                .remembered_number(&EXPANSION_VALUE, e.into()),
        };
        match self.window {
            Some(seconds) => command
                .word(&WINDOW)
                .remembered_number(&WINDOW_VALUE, seconds.into()),
            None => command.word(&LAYOUT).word(match self.layout {
                Layout::Standard => &STANDARD,
                Layout::Blocked => &BLOCKED,
            }),
        };
        command.word(&SEED).number(self.seed.unwrap_or(0));
    }
}

/// The words of the commands replicated for Bloom writes.
static AT: Word = Word::new(c"AT");
static EXPANSION: Word = Word::new(c"EXPANSION");
static NONSCALING: Word = Word::new(c"NONSCALING");
static LAYOUT: Word = Word::new(c"LAYOUT");
static STANDARD: Word = Word::new(c"standard");
static BLOCKED: Word = Word::new(c"blocked");
static WINDOW: Word = Word::new(c"WINDOW");
static SEED: Word = Word::new(c"SEED");
/// The parameters created filters are replicated with, mostly the configured defaults.
static RATE_VALUE: Remembered = Remembered::new();
static CAPACITY_VALUE: Remembered = Remembered::new();
static EXPANSION_VALUE: Remembered = Remembered::new();
static WINDOW_VALUE: Remembered = Remembered::new();

/// The seed of a filter created without `SEED`: the `bf-seed` config's, except for a
/// create that comes from a master or an AOF file (`rebuilding`), which this version always
/// writes with its seed: one without was written by a version whose filters had none (0).
fn default_seed(rebuilding: bool) -> u64 {
    match rebuilding {
        true => 0,
        false => config::seed(),
    }
}

/// `BF.RESERVE key rate capacity EXPANSION x|NONSCALING LAYOUT l|WINDOW s SEED s`: the
/// command that creates a filter of these parameters, all spelled out.
fn reserve_command<'a>(key: &'a RedisString, params: &FilterParams) -> Replicated<'a> {
    let mut command = Replicated::new(c"BF.RESERVE", 9);
    command
        .arg(key)
        .remembered_f64(&RATE_VALUE, params.rate)
        .remembered_number(&CAPACITY_VALUE, params.capacity);
    params.spell_rest(&mut command);
    command
}

/// `BF.INSERT key [CAPACITY c ERROR e EXPANSION x|NONSCALING LAYOUT l|WINDOW s SEED s] [AT t]
/// ITEMS items...`: the command that adds `items` at time `at` (a clocked filter's write), creating
/// the filter of parameters `create` if given.
fn insert_command<'a>(
    key: &'a RedisString,
    create: Option<&FilterParams>,
    at: Option<u64>,
    items: &'a [RedisString],
) -> Replicated<'a> {
    let mut command = Replicated::new(c"BF.INSERT", items.len() + 14);
    command.arg(key);
    if let Some(params) = create {
        command
            .word(&CAPACITY)
            .remembered_number(&CAPACITY_VALUE, params.capacity);
        command
            .word(&ERROR)
            .remembered_f64(&RATE_VALUE, params.rate);
        params.spell_rest(&mut command);
    }
    if let Some(at) = at {
        command.word(&AT).number(at);
    }
    command.word(&ITEMS).args(items);
    command
}

fn parse_bf_rate(arg: &RedisString) -> Result<f64, RedisError> {
    let rate = parse_f64(arg).ok_or(RedisError::Str(BAD_ERROR_RATE))?;
    if rate <= 0.0 || rate >= 1.0 {
        return Err(RedisError::Str(ERROR_RATE_RANGE));
    }
    Ok(rate)
}

fn parse_capacity(ctx: &Context, arg: &RedisString) -> Result<u64, RedisError> {
    let capacity = parse_i64(ctx, arg).ok_or(RedisError::Str(BAD_CAPACITY))?;
    if capacity <= 0 {
        return Err(RedisError::Str(CAPACITY_RANGE));
    }
    Ok(capacity as u64)
}

fn parse_expansion(ctx: &Context, arg: &RedisString) -> Result<u32, RedisError> {
    let expansion = parse_i64(ctx, arg).ok_or(RedisError::Str(BAD_EXPANSION))?;
    if !(0..=i64::from(MAX_EXPANSION)).contains(&expansion) {
        return Err(expansion_range(MAX_EXPANSION));
    }
    Ok(expansion as u32)
}

/// Whole seconds, 1 up to `MAX_WINDOW_SECS` (100 years).
fn parse_window(ctx: &Context, arg: &RedisString) -> Result<u32, RedisError> {
    parse_i64(ctx, arg)
        .and_then(|s| u32::try_from(s).ok())
        .filter(|&s| (1..=MAX_WINDOW_SECS).contains(&s))
        .ok_or(RedisError::Str(BAD_WINDOW))
}

/// Milliseconds since the epoch, 0 up to the latest time a windowed filter holds.
fn parse_at(ctx: &Context, arg: &RedisString) -> Result<u64, RedisError> {
    parse_i64(ctx, arg)
        .and_then(|t| u64::try_from(t).ok())
        .filter(|&t| t <= MAX_TIME)
        .ok_or(RedisError::Str(BAD_AT))
}

fn parse_seed(ctx: &Context, arg: &RedisString) -> Result<u64, RedisError> {
    parse_u64(ctx, arg).ok_or(RedisError::Str(BAD_SEED))
}

fn parse_layout(arg: &RedisString) -> Result<Layout, RedisError> {
    [Layout::Standard, Layout::Blocked]
        .into_iter()
        .find(|l| is_keyword(arg, l.name()))
        .ok_or(RedisError::Str(BAD_LAYOUT))
}

/// The options of `BF.RESERVE` (`EXPANSION`, `NONSCALING`, `LAYOUT`, `SEED`, `WINDOW`) and
/// `BF.INSERT`
/// (those, `CAPACITY`, `ERROR`, `NOCREATE`, `AT`, then `ITEMS`), each at most once.
#[derive(Default)]
struct Options {
    capacity: Option<u64>,
    rate: Option<f64>,
    expansion: Option<u32>,
    layout: Option<Layout>,
    seed: Option<u64>,
    nocreate: Option<()>,
    nonscaling: Option<()>,
    window: Option<u32>,
    at: Option<u64>,
}

impl Options {
    /// Parses options until the end, or for `BF.INSERT` (`insert`) until `ITEMS`, which
    /// leaves `args` at the items: true if `ITEMS` was found.
    fn parse(&mut self, ctx: &Context, args: &mut Args, insert: bool) -> Result<bool, RedisError> {
        while let Some(arg) = args.next() {
            let is = |keyword| is_keyword(arg, keyword);
            if insert && is("ITEMS") {
                return Ok(true);
            } else if is("LAYOUT") {
                set_once(&mut self.layout, "LAYOUT", || {
                    parse_layout(args.value(NO_LAYOUT)?)
                })?;
            } else if is("SEED") {
                set_once(&mut self.seed, "SEED", || {
                    parse_seed(ctx, args.value(BAD_SEED)?)
                })?;
            } else if insert && is("CAPACITY") {
                set_once(&mut self.capacity, "CAPACITY", || {
                    parse_capacity(ctx, args.value(BAD_CAPACITY)?)
                })?;
            } else if insert && is("ERROR") {
                set_once(&mut self.rate, "ERROR", || {
                    parse_bf_rate(args.value(BAD_ERROR_RATE)?)
                })?;
            } else if is("WINDOW") {
                set_once(&mut self.window, "WINDOW", || {
                    parse_window(ctx, args.value(BAD_WINDOW)?)
                })?;
            } else if insert && is("AT") {
                set_once(&mut self.at, "AT", || parse_at(ctx, args.value(BAD_AT)?))?;
            } else if is("EXPANSION") {
                set_once(&mut self.expansion, "EXPANSION", || {
                    parse_expansion(ctx, args.value(NO_EXPANSION)?)
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
        if self.window.is_some() && self.layout.is_some() {
            return Err(RedisError::Str(WINDOW_LAYOUT));
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
            seed: self.seed,
            window: self.window,
        })
    }

    /// Whether the write must go to a windowed filter (`WINDOW` or `AT` given).
    fn windowed(&self) -> bool {
        self.window.is_some() || self.at.is_some()
    }
}

/// `BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [LAYOUT standard|blocked]
/// [SEED s] [WINDOW seconds]`
pub fn reserve(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    reserve_key(ctx, args).inspect_err(|e| note_refused_write(ctx, "BF.RESERVE", &args[1], e))
}

fn reserve_key(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let mut options = Options {
        rate: Some(parse_bf_rate(&args[2])?),
        capacity: Some(parse_capacity(ctx, &args[3])?),
        ..Options::default()
    };
    options.parse(ctx, &mut Args::new(&args[4..]), false)?;
    let mut create = options.create()?;
    let mut key = Key::write(ctx, &args[1]);
    if let Some(clock) = write_filter(&mut key, |filter| filter.clock())? {
        let plain = options.window.is_some() && clock.is_none();
        return Err(RedisError::Str(if plain {
            EXISTS_NOT_WINDOWED
        } else {
            ITEM_EXISTS
        }));
    }
    let rebuilding = rebuilding(ctx);
    let filter = create.build(memory_limit_while(rebuilding), rebuilding, 0)?;
    create_filter(&mut key, filter, |_| ())?;
    // BF.RESERVE key rate capacity EXPANSION x|NONSCALING LAYOUT l|WINDOW s SEED s: all
    // spelled out.
    let reserve = reserve_command(&args[1], &create);
    finish_write(ctx, c"bf.reserve", &args[1], Applied::Command(reserve));
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
    add_items(ctx, event, &args[1], &args[2..], defaults, None, many)
}

/// `BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION n] [NOCREATE] [NONSCALING]
/// [LAYOUT standard|blocked] [SEED s] [WINDOW seconds] [AT ms] ITEMS item...`
pub fn insert(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    insert_items(ctx, args).inspect_err(|e| note_refused_write(ctx, "BF.INSERT", &args[1], e))
}

fn insert_items(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let mut options = Options::default();
    let mut rest = Args::new(&args[2..]);
    let items = match options.parse(ctx, &mut rest, true)? {
        true if !rest.rest().is_empty() => rest.rest(),
        _ => return Err(RedisError::Str(ITEMS_REQUIRED)),
    };
    let create = options.create()?;
    // A client's AT may be in the past (the filter's clock never goes back), never ahead of
    // the server's clock: it would move a windowed filter's clock forward for good,
    // forgetting everything. A replicated or loaded AT is the master's: taken as it is.
    if options.at.is_some_and(|at| at > clock_ms()) && !rebuilding(ctx) {
        return Err(RedisError::Str(AT_AHEAD));
    }
    let windowed = options.windowed().then_some(options.at);
    let create = options.nocreate.is_none().then_some(create);
    add_items(ctx, c"bf.insert", &args[1], items, create, windowed, true)
}

/// The server as a filter sees it while a command runs. The command's time is read once,
/// when a filter first asks for it (or is the `AT` the command gave), so that every item of
/// the command and what is replicated of it share one time. A write that rebuilds
/// acknowledged data (a replica applying its master's stream, a file loading) never reads the
/// clock: without `AT` it runs at the filter's own time (its master ran it there, see
/// `finish_add`).
struct Server<'a> {
    ctx: &'a Context,
    now: Cell<Option<u64>>,
    /// `limits::rebuilding`, read once when first needed.
    rebuilding: Cell<Option<bool>>,
}

impl<'a> Server<'a> {
    /// The server of a read: it runs at the clock's time (it changes nothing, so nothing
    /// rebuilds it).
    fn reading(ctx: &'a Context) -> Self {
        Self {
            ctx,
            now: Cell::new(None),
            rebuilding: Cell::new(Some(false)),
        }
    }

    /// The server of a write that runs at `at` ms (None: the clock's time, or the filter's
    /// own while rebuilding).
    fn writing(ctx: &'a Context, at: Option<u64>) -> Self {
        Self {
            ctx,
            now: Cell::new(at),
            rebuilding: Cell::new(None),
        }
    }

    fn rebuilding(&self) -> bool {
        let rebuilding = self
            .rebuilding
            .get()
            .unwrap_or_else(|| rebuilding(self.ctx));
        self.rebuilding.set(Some(rebuilding));
        rebuilding
    }
}

impl Env for Server<'_> {
    fn memory_limit(&self) -> u64 {
        memory_limit_while(self.rebuilding())
    }

    fn now_ms(&self) -> u64 {
        if let Some(now) = self.now.get() {
            return now;
        }
        // 0: no later than any filter's own time, which a clocked filter then runs at.
        let now = if self.rebuilding() { 0 } else { clock_ms() };
        self.now.set(Some(now));
        now
    }
}

/// The server's clock, ms since the epoch (at most the latest time a filter holds).
fn clock_ms() -> u64 {
    // SAFETY: a function pointer Redis sets at load, called on the main thread.
    let ms = unsafe { raw::RedisModule_Milliseconds.expect("Milliseconds")() };
    u64::try_from(ms).unwrap_or(0).min(MAX_TIME)
}

/// The Bloom filter under a key, of any representation: None if the key is empty,
/// `WRONGTYPE` if it holds another type. lcbloom's type is looked up first, so its filters
/// pay nothing for the others; windowed filters last.
fn read_filter(key: &Key) -> Result<Option<&dyn BloomFilter>, RedisError> {
    Ok(match read_either::<Chain, RedisBloomChain>(key) {
        Ok(Some(Either::First(chain))) => Some(chain),
        Ok(Some(Either::Second(chain))) => Some(chain),
        Ok(None) => None,
        Err(other) => Some(read::<Windowed>(key).ok().flatten().ok_or(other)?),
    })
}

/// Runs `write` on the Bloom filter under a key opened for writing, accounting for the bytes
/// it adds or frees: None (and `write` not run) if the key is empty.
fn write_filter<R>(
    key: &mut Key,
    write: impl FnOnce(&mut dyn BloomFilter) -> R,
) -> Result<Option<R>, RedisError> {
    let other = match write_either::<Chain, RedisBloomChain>(key) {
        Ok(Some(Either::First(chain))) => return Ok(Some(modify(chain, |c| write(c)))),
        Ok(Some(Either::Second(chain))) => return Ok(Some(modify(chain, |c| write(c)))),
        Ok(None) => return Ok(None),
        Err(other) => other,
    };
    let windowed = value::write::<Windowed>(key).ok().flatten().ok_or(other)?;
    Ok(Some(modify(windowed, |w| write(w))))
}

/// Stores a new filter under an empty key opened for writing and runs `write` on it,
/// accounting for the bytes it adds.
fn create_filter<R>(
    key: &mut Key,
    filter: NewFilter,
    write: impl FnOnce(&mut dyn BloomFilter) -> R,
) -> Result<R, RedisError> {
    Ok(match filter {
        NewFilter::Own(chain) => modify(store(key, chain)?, |c| write(c)),
        NewFilter::RedisBloom(chain) => modify(store(key, chain)?, |c| write(c)),
        NewFilter::Window(windowed) => modify(store(key, windowed)?, |w| write(w)),
    })
}

/// Adds items, creating the key with `create` if it is missing (None: `ERR not found`).
/// `windowed`: `BF.INSERT` gave `WINDOW` or `AT` (with the `AT` time if any), which only a
/// windowed filter takes. `multi`: reply with an array (MADD, INSERT), else with the one
/// result (ADD).
fn add_items(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    create: Option<FilterParams>,
    windowed: Option<Option<u64>>,
    multi: bool,
) -> RedisResult {
    check_item_count(ctx, items.len())?;
    let mut key = Key::write(ctx, name);
    let env = Server::writing(ctx, windowed.flatten());
    // BF.ADD's one item needs no lists: no allocation on the most frequent write.
    let (mut results, mut last, mut clock) = (Vec::new(), None, None);
    let mut add = |filter: &mut dyn BloomFilter| {
        clock = filter.clock();
        if windowed.is_some() && clock.is_none() {
            return Err(RedisError::Str(NOT_WINDOWED));
        }
        match (multi, items) {
            (false, [item]) => last = Some(filter.add_one(item.as_slice(), &env)),
            _ => {
                let bytes: Vec<&[u8]> = items.iter().map(RedisString::as_slice).collect();
                results.reserve_exact(items.len());
                filter.add_all(&bytes, &env, &mut results);
            }
        }
        Ok(())
    };
    let created = match write_filter(&mut key, &mut add)? {
        Some(added) => added.map(|()| None)?,
        None => {
            let mut create = create.ok_or(RedisError::Str(NOT_FOUND))?;
            // WINDOW or AT, and no WINDOW: AT alone, which a filter without a window refuses.
            if windowed.is_some() && create.window.is_none() {
                return Err(RedisError::Str(AT_WITHOUT_WINDOW));
            }
            let filter = create.build(env.memory_limit(), env.rebuilding(), items.len())?;
            create_filter(&mut key, filter, &mut add)??;
            Some(create)
        }
    };
    let outcomes = results.iter().chain(&last);
    let changed = outcomes.clone().any(|r| r.is_ok_and(Added::changed));
    let done = outcomes.take_while(|r| r.is_ok()).count();
    // A clocked filter's write that moved its clock carries its time (see `finish_add`).
    let at = clock.and_then(|before| Some(env.now_ms()).filter(|&now| now > before));
    finish_add(ctx, event, name, items, done, changed, created, at);
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
/// propagates as the `BF.INSERT` that builds it with those items (its `BF.RESERVE` if none
/// was), a stop part-way as the `BF.MADD` of those items. Replicas and AOF replays do not
/// apply max-memory-per-key (limits::memory_limit), so they would otherwise add items the
/// master refused. A write that moved a clocked (windowed) filter's clock to `at` propagates
/// as `BF.INSERT key [parameters] AT <at> ITEMS <the items applied>`, so that the replica or
/// the replay applies it at the master's time. One that ran at the filter's own time (its
/// clock already there, or past the server's) propagates as any other write: without `AT`,
/// the replica or the replay runs it at the filter's time too, and under load (several writes
/// to a key within a millisecond) most writes go out as sent.
#[allow(clippy::too_many_arguments)]
fn finish_add(
    ctx: &Context,
    event: &CStr,
    name: &RedisString,
    items: &[RedisString],
    done: usize,
    changed: bool,
    created: Option<FilterParams>,
    at: Option<u64>,
) {
    let progress = Progress {
        created: created.is_some(),
        changed,
        done,
        total: items.len(),
    };
    let redo = |done| match (&created, done) {
        (Some(params), 0) => reserve_command(name, params),
        (None, _) if at.is_none() => {
            let mut madd = Replicated::new(c"BF.MADD", 1 + done);
            madd.arg(name).args(&items[..done]);
            madd
        }
        _ => insert_command(name, created.as_ref(), at, &items[..done]),
    };
    let applied = match progress.applied(redo) {
        Applied::Whole if at.is_some() => Applied::Command(redo(done)),
        applied => applied,
    };
    finish_write(ctx, event, name, applied);
}

/// `BF.EXISTS key item`
pub fn exists(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let found = match read_filter(&key)? {
        Some(filter) => filter.contains_one(args[2].as_slice(), &Server::reading(ctx)),
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
            filter.contains_all(&bytes, &Server::reading(ctx), &mut reply);
        }
        None => items.iter().for_each(|_| reply(false)),
    }
    Ok(RedisValue::NoReply)
}

/// `BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION|LAYOUT|<a field of the filter's own>]`
pub fn info(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if !(2..=3).contains(&args.len()) {
        return Err(RedisError::WrongArity);
    }
    let key = Key::read(ctx, &args[1]);
    let info = read_filter(&key)?
        .ok_or(RedisError::Str(NOT_FOUND))?
        .info(&Server::reading(ctx));
    let expansion = match info.expansion {
        Some(e) => RedisValue::Integer(e as i64),
        None => RedisValue::Null,
    };
    let fields = [
        ("CAPACITY", "Capacity", reply::count(info.capacity)),
        ("SIZE", "Size", reply::count(info.size)),
        ("FILTERS", "Number of filters", reply::count(info.filters)),
        (
            "ITEMS",
            "Number of items inserted",
            reply::count(info.items),
        ),
        ("EXPANSION", "Expansion rate", expansion),
    ];
    // The representation's own fields, after RedisBloom's; each is also its own keyword.
    let extra = info.extra.into_iter().map(|(n, v)| match v {
        Field::Flag(yes) => (n, n, flag(yes)),
        Field::Number(v) => (n, n, RedisValue::Integer(v)),
    });
    let Some(which) = args.get(2) else {
        let fields = fields.into_iter().chain(extra).map(|(_, n, v)| (n, v));
        return ordered_map_simple_names(ctx, fields.collect());
    };
    let layout = (
        "LAYOUT",
        "Layout",
        RedisValue::SimpleStringStatic(info.layout),
    );
    let (_, name, value) = fields
        .into_iter()
        .chain([layout])
        .chain(extra)
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
        Some(filter) => filter.card(&Server::reading(ctx)),
        None => 0,
    };
    Ok(reply::count(items))
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
    let iterator = parse_i64(ctx, &args[2]).ok_or(RedisError::Str(BAD_ITERATOR))?;
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
    let iterator = parse_i64(ctx, iterator).ok_or(RedisError::Str(BAD_ITERATOR))?;
    let mut key = Key::write(ctx, name);
    match write_filter(&mut key, |f| f.load_chunk(iterator, data))? {
        Some(loaded) => loaded.map_err(|e| match e {
            ChunkError::Iterator => BAD_DATA.into(),
            ChunkError::Exists => RedisError::Str(ITEM_EXISTS),
            ChunkError::Length => RedisError::Str(CHUNK_LENGTH),
            ChunkError::Data(e) => e.into(),
        }),
        None if iterator == 1 => create_from_header(&mut key, data, memory_limit(ctx)),
        None => Err(RedisError::Str(NOT_FOUND)),
    }
}

/// A zero-filled filter under an empty key from a `BF.LOADCHUNK` header, of the kind its
/// format says (`load::from_header`), within `limit` bytes.
fn create_from_header(key: &mut Key, header: &[u8], limit: u64) -> Result<(), RedisError> {
    create_filter(key, from_header(header, limit)?, |_| ())
}
