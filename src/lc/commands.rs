//! `LC.*` command handlers: parse, run the core, reply, replicate, notify.
//!
//! Replication and AOF: a write that changed nothing is not propagated. `LC.ADD` or
//! `LC.INSERT` creating a key propagates `LC.INSERT key CAPACITY <capacity> ERROR <rate> ITEMS
//! <items>` with the parameters it actually used (`LC.RESERVE` when no item went in), so a
//! replica or an AOF replay with other `lc-*` defaults builds a byte-identical counter. The
//! other writes are deterministic given the keys they read and are propagated verbatim.
//!
//! Keyspace notifications, for writes that changed something: `lc.reserve`, `lc.add`,
//! `lc.insert`, `lc.merge`, `lc.loadchunk`, in class `d` (`REDISMODULE_NOTIFY_MODULE`, the
//! class Redis documents for module key types since 7.0, also used by RedisTimeSeries;
//! included in `A`).

use super::codec;
use super::config;
use super::counter::Counter;
use super::errors::{
    bad_counter_chunk, bad_counter_encoding, union_refused, union_too_large, LC_CAPACITY,
    LC_CHUNK_ITERATOR, LC_ERROR_RATE,
};
use super::stored::{CounterRef, StoredCounter};
use crate::core::chunks::chunk_start;
use crate::server::args::{is_keyword, parse_in_range, parse_rate, set_once, Args};
use crate::server::errors::{
    unknown_argument, CHUNK_LENGTH, ITEMS_REQUIRED, ITEM_EXISTS, NOT_FOUND,
};
use crate::server::limits::{
    check_item_count, memory_limit, memory_limit_while, rebuilding, MAX_CAPACITY,
};
use crate::server::reply::{count as count_reply, flag, ordered_map};
use crate::server::value::{
    modify, read_word, read_words_closing, store_word, write_word, write_word_or_store, Key, Lent,
};
use crate::server::write::{
    finish_write, Applied, Progress, Remembered, Replicated, CAPACITY, ERROR, ITEMS,
};
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};
use std::ffi::CStr;

const OK: RedisResult = Ok(RedisValue::SimpleStringStatic("OK"));

/// The parameters a created counter is replicated with (mostly the configured defaults).
static RATE_VALUE: Remembered = Remembered::new();
static CAPACITY_VALUE: Remembered = Remembered::new();

/// `LC.RESERVE key error_rate capacity`
pub fn reserve(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let [_, key_name, rate, capacity] = args else {
        return Err(RedisError::WrongArity);
    };
    let rate = parse_rate(rate, LC_ERROR_RATE)?;
    let capacity = parse_in_range(ctx, capacity, 1, MAX_CAPACITY, LC_CAPACITY)? as u64;
    let mut key = Key::write(ctx, key_name);
    if write_word::<StoredCounter>(&mut key)?.is_some() {
        return Err(RedisError::Str(ITEM_EXISTS));
    }
    store_word(&mut key, new_counter(ctx, rate, capacity)?)?;
    finish_write(ctx, c"lc.reserve", key_name, Applied::Whole);
    OK
}

/// An empty counter of these parameters, within max-memory-per-key. The smallest rate binds
/// clients: what a master or an AOF file logged must replay.
fn new_counter(ctx: &Context, rate: f64, capacity: u64) -> Result<StoredCounter, RedisError> {
    let rebuilding = rebuilding(ctx);
    let limit = memory_limit_while(rebuilding);
    let counter = match rebuilding {
        true => Counter::reserve_logged(rate, capacity, limit),
        false => Counter::reserve(rate, capacity, limit),
    }?;
    Ok(StoredCounter::new(counter))
}

/// `LC.ADD key [item ...]`
pub fn add(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let defaults = config::defaults();
    add_items(ctx, c"lc.add", &args[1], &args[2..], Some(defaults))
}

/// `LC.INSERT key [CAPACITY capacity] [ERROR error_rate] [NOCREATE] ITEMS item [item ...]`:
/// `LC.ADD` creating a missing key with these parameters (the defaults for those not given),
/// or not at all (`NOCREATE`: `ERR not found`). A key that exists keeps its own.
pub fn insert(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let (mut rate, mut capacity, mut nocreate) = (None, None, None);
    let mut rest = Args::new(&args[2..]);
    let items = loop {
        let Some(arg) = rest.next() else {
            return Err(RedisError::Str(ITEMS_REQUIRED));
        };
        let is = |keyword| is_keyword(arg, keyword);
        if is("ITEMS") {
            break rest.rest();
        } else if is("CAPACITY") {
            set_once(&mut capacity, "CAPACITY", || {
                let arg = rest.value(LC_CAPACITY)?;
                Ok(parse_in_range(ctx, arg, 1, MAX_CAPACITY, LC_CAPACITY)? as u64)
            })?;
        } else if is("ERROR") {
            set_once(&mut rate, "ERROR", || {
                parse_rate(rest.value(LC_ERROR_RATE)?, LC_ERROR_RATE)
            })?;
        } else if is("NOCREATE") {
            set_once(&mut nocreate, "NOCREATE", || Ok(()))?;
        } else {
            return Err(unknown_argument(arg.as_slice()));
        }
    };
    if items.is_empty() {
        return Err(RedisError::Str(ITEMS_REQUIRED));
    }
    let create = nocreate.is_none().then(|| {
        let (default_rate, default_capacity) = config::defaults();
        (
            rate.unwrap_or(default_rate),
            capacity.unwrap_or(default_capacity),
        )
    });
    add_items(ctx, c"lc.insert", &args[1], items, create)
}

/// Adds `items` to the counter at `key_name`, creating it with the rate and capacity of
/// `create` when missing (`None`: `ERR not found`). Replicated as what it applied: a new key
/// as the `LC.INSERT` that creates it with those parameters and adds its items (`LC.RESERVE`
/// when none went in), so that a replica or an AOF replay with other `lc-*` defaults builds the
/// same counter; items added to an existing key verbatim, or as the `LC.ADD` of those before
/// the one refused.
fn add_items(
    ctx: &Context,
    event: &CStr,
    key_name: &RedisString,
    items: &[RedisString],
    create: Option<(f64, u64)>,
) -> RedisResult {
    check_item_count(ctx, items.len())?;
    let mut key = Key::write(ctx, key_name);
    let (mut counter, created) = match create {
        Some((rate, capacity)) => {
            write_word_or_store(&mut key, || new_counter(ctx, rate, capacity))?
        }
        None => {
            let counter = write_word::<StoredCounter>(&mut key)?;
            (counter.ok_or(RedisError::Str(NOT_FOUND))?, false)
        }
    };
    let created = create.filter(|_| created);
    // The limit binds only the switch to the larger form; reading it costs a
    // RedisModule_GetContextFlags call, so skip that for adds that cannot switch.
    let limit = if items.len() as u64 <= counter.view().room_before_dense() {
        u64::MAX
    } else {
        memory_limit(ctx)
    };
    let (changed, done, error) = modify(&mut *counter, |s| {
        s.with_mut(|c| {
            c.whole_or_refused(limit, false, |c| {
                let (changed, done, e) =
                    c.add_all_within(items.iter().map(RedisString::as_slice), limit);
                (changed as i64, done, e)
            })
        })
    });
    // Redis holds the counter's new word before anyone is told of the write.
    drop(counter);
    let progress = Progress {
        created: created.is_some(),
        changed: changed > 0,
        done,
        total: items.len(),
    };
    let applied = progress.applied(|done| match (created, done) {
        (Some((rate, capacity)), 0) => {
            let mut reserve = Replicated::new(c"LC.RESERVE", 3);
            reserve
                .arg(key_name)
                .remembered_f64(&RATE_VALUE, rate)
                .remembered_number(&CAPACITY_VALUE, capacity);
            reserve
        }
        (Some((rate, capacity)), done) => {
            let mut insert = Replicated::new(c"LC.INSERT", 6 + done);
            insert
                .arg(key_name)
                .word(&CAPACITY)
                .remembered_number(&CAPACITY_VALUE, capacity)
                .word(&ERROR)
                .remembered_f64(&RATE_VALUE, rate)
                .word(&ITEMS)
                .args(&items[..done]);
            insert
        }
        (None, done) => {
            let mut add = Replicated::new(c"LC.ADD", 1 + done);
            add.arg(key_name).args(&items[..done]);
            add
        }
    });
    finish_write(ctx, event, key_name, applied);
    match error {
        Some(e) => Err(e.into()),
        None => Ok(RedisValue::Integer(changed)),
    }
}

/// Each key name once, in first-seen order: a union does not change when a key repeats, and
/// reading it once bounds a command's work by the data it names, whatever its length.
fn distinct(names: &[RedisString]) -> Vec<&RedisString> {
    let hashing = NameHashing(crate::server::ffi::random_u64());
    let mut seen = std::collections::HashSet::with_capacity_and_hasher(names.len(), hashing);
    names.iter().filter(|n| seen.insert(n.as_slice())).collect()
}

/// How `distinct` hashes names: xxh3 (a few nanoseconds for a short name, where the standard
/// SipHash takes a good part of a many-key count's time per key), seeded anew for each
/// command so that no list of names can be chosen to collide.
struct NameHashing(u64);

impl std::hash::BuildHasher for NameHashing {
    type Hasher = NameHasher;

    fn build_hasher(&self) -> NameHasher {
        NameHasher(self.0)
    }
}

struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A counter with the name of the key it was read from.
type Named<'a, C> = (&'a [u8], C);

/// The counters stored at `names` (missing keys skipped), with their names; WRONGTYPE for
/// another type.
///
/// # Safety
///
/// As `read_words_closing`: the command changes none of these keys while they are read.
unsafe fn read_counters<'a>(
    ctx: &'a Context,
    names: &[&'a RedisString],
) -> Result<Vec<Named<'a, Lent<'a, StoredCounter>>>, RedisError> {
    // SAFETY: the caller's contract.
    let read = unsafe { read_words_closing::<StoredCounter>(ctx, names) }?;
    Ok(read.into_iter().map(|(n, c)| (n.as_slice(), c)).collect())
}

/// The counters of `read_counters`, to read.
fn views<'a>(stored: &'a [Named<'a, Lent<'a, StoredCounter>>]) -> Vec<Named<'a, CounterRef<'a>>> {
    stored.iter().map(|(name, c)| (*name, c.view())).collect()
}

/// The counters of `views`, borrowed, with their names and alone, in the order a union takes
/// them (`Counter::bitmaps_first`; a merge stopped part-way propagates its sources in it).
fn borrow<'a>(
    named: &'a [Named<'a, CounterRef<'a>>],
) -> (Vec<Named<'a, &'a Counter>>, Vec<&'a Counter>) {
    let mut named: Vec<Named<&Counter>> = named.iter().map(|(n, c)| (*n, &**c)).collect();
    Counter::bitmaps_first(&mut named, |(_, c)| c);
    let counters = named.iter().map(|(_, c)| *c).collect();
    (named, counters)
}

/// `LC.COUNT key [key ...]`
pub fn count(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    if let [_, name] = args {
        // One key, the common case: no buffers.
        let key = Key::read(ctx, name);
        let n = read_word::<StoredCounter>(&key)?.map_or(0, |c| c.view().count());
        return Ok(count_reply(n));
    }
    check_item_count(ctx, args.len() - 1)?;
    let names = distinct(&args[1..]);
    // SAFETY: LC.COUNT writes nothing.
    let stored = unsafe { read_counters(ctx, &names) }?;
    let views = views(&stored);
    let (named, counters) = borrow(&views);
    check_union_bytes(ctx, "LC.COUNT", counters.iter().copied())?;
    let n = Counter::union_count(&counters).map_err(|e| union_refused(e, &named))?;
    Ok(count_reply(n))
}

/// Refuses a union that would read more than `lc-max-union-bytes` of `counters`, where more
/// than one of them holds items (one alone is read as one key: counted, or copied into a
/// new one); no limit while rebuilding (a replica or a replay applies what its master
/// accepted).
fn check_union_bytes<'a>(
    ctx: &Context,
    command: &str,
    counters: impl IntoIterator<Item = &'a Counter>,
) -> Result<(), RedisError> {
    let counters: Vec<&Counter> = counters.into_iter().collect();
    if counters.iter().filter(|c| !c.holds_nothing()).count() < 2 {
        return Ok(());
    }
    let bytes = Counter::union_bytes(&counters);
    let limit = config::max_union_bytes();
    if bytes > limit && !rebuilding(ctx) {
        return Err(union_too_large(command, bytes, limit));
    }
    Ok(())
}

/// `LC.MERGE destkey sourcekey [sourcekey ...]`
///
/// An existing destination keeps its size and absorbs the sources (a source may be the
/// destination itself). A missing destination gets the geometry of the sources'
/// union (`Counter::empty_for_union`); when no source exists either, nothing is created.
/// Incompatible sizes are refused before anything changes.
pub fn merge(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    check_item_count(ctx, args.len() - 2)?;
    let dest_name = &args[1];
    let mut dest_key = Key::write(ctx, dest_name);
    let dest = write_word::<StoredCounter>(&mut dest_key)?;
    // The destination absorbing itself is a no-op; skipping it also avoids aliasing its value.
    let source_names: Vec<&RedisString> = distinct(&args[2..])
        .into_iter()
        .filter(|k| k.as_slice() != dest_name.as_slice())
        .collect();
    // SAFETY: the sources are not the destination (filtered above), the one key written.
    let stored = unsafe { read_counters(ctx, &source_names) }?;
    let views = views(&stored);
    let (named, sources) = borrow(&views);
    {
        let dest = dest.as_ref().map(|d| d.view());
        check_union_bytes(
            ctx,
            "LC.MERGE",
            sources.iter().copied().chain(dest.as_deref()),
        )?;
    }
    let mut dest = match dest {
        Some(dest) => dest,
        None => {
            // The empty `Option` still borrows the key until dropped; `store_word` needs it.
            drop(dest);
            let Some(mut union) = Counter::empty_for_union(&sources) else {
                return OK;
            };
            // A new key, bound by the limit as one LC.RESERVE makes: by the most it grows to
            // (a saved bitmap's union, by the bitmap it makes).
            let limit = memory_limit(ctx);
            if !sources.iter().any(|c| c.is_bitmap()) {
                union.check_growth_within(limit)?;
            }
            if let (_, _, Some(e)) = union.absorb_all_within(&sources, limit) {
                return Err(union_refused(e, &named));
            }
            store_word(&mut dest_key, StoredCounter::new(union))?;
            finish_write(ctx, c"lc.merge", dest_name, Applied::Whole);
            return OK;
        }
    };
    {
        let view = dest.view();
        for (name, source) in &named {
            view.check_absorbable(source)
                .map_err(|e| union_refused(e, &[(dest_name.as_slice(), &view), (name, source)]))?;
        }
    }
    // The limit binds only the switch to a larger form, and refuses the whole merge. A merge
    // the allocator stopped part-way propagates as the merge of the sources it absorbed (each
    // whole or not at all: Counter::absorb_within).
    let limit = memory_limit(ctx);
    let bitmaps = sources.iter().any(|c| c.is_bitmap());
    let (changed, done, error) = modify(&mut *dest, |s| {
        s.with_mut(|dest| {
            dest.whole_or_refused(limit, bitmaps, |d| d.absorb_all_within(&sources, limit))
        })
    });
    drop(dest);
    let progress = Progress {
        created: false,
        changed,
        done,
        total: sources.len(),
    };
    let applied = progress.applied(|done| {
        // Missing sources were skipped by `read_counters`: name the keys that were read.
        let mut merge = Replicated::new(c"LC.MERGE", 1 + done);
        merge.arg(dest_name);
        named
            .iter()
            .take(done)
            .for_each(|(name, _)| _ = merge.text(name));
        merge
    });
    finish_write(ctx, c"lc.merge", dest_name, applied);
    match error {
        Some(e) => Err(e.into()),
        None => OK,
    }
}

/// `LC.INFO key`
pub fn info(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let [_, key_name] = args else {
        return Err(RedisError::WrongArity);
    };
    let key = Key::read(ctx, key_name);
    let stored = read_word::<StoredCounter>(&key)?.ok_or(RedisError::Str(NOT_FOUND))?;
    let counter = stored.view();
    ordered_map(
        ctx,
        vec![
            ("Capacity", RedisValue::Integer(counter.capacity() as i64)),
            ("Error rate", RedisValue::Float(counter.error_rate())),
            ("Size", RedisValue::Integer(stored.memory_bytes() as i64)),
            ("Bits", RedisValue::Integer(counter.bits() as i64)),
            ("Bits set", RedisValue::Integer(counter.bits_set() as i64)),
            (
                "Mode",
                RedisValue::SimpleStringStatic(counter.mode().name()),
            ),
            ("Count", count_reply(counter.count())),
            (
                "Standard error",
                RedisValue::Float(counter.standard_error()),
            ),
            ("Saturated", flag(counter.saturated())),
            (
                "Exact up to",
                RedisValue::Integer(counter.exact_up_to() as i64),
            ),
        ],
    )
}

/// `LC.LOADCHUNK key payload` — internal: recreates a counter from its encoding (`codec.rs`),
/// as emitted by AOF rewrite. The key must not exist (`ERR item exists`); the payload is
/// validated in full and limited by `max-memory-per-key`.
///
/// `LC.LOADCHUNK key iterator piece` — internal: a piece of a large counter's bitmap, after
/// its shell (codec.rs, "Chunked form"); iterator = 1 + the byte offset where the piece ends.
pub fn loadchunk(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key_name, payload) = match args {
        [_, key_name, payload] => (key_name, payload),
        [_, key_name, iterator, piece] => return load_piece(ctx, key_name, iterator, piece),
        _ => return Err(RedisError::WrongArity),
    };
    let mut key = Key::write(ctx, key_name);
    if write_word::<StoredCounter>(&mut key)?.is_some() {
        return Err(RedisError::Str(ITEM_EXISTS));
    }
    let counter =
        codec::decode(payload.as_slice(), memory_limit(ctx)).map_err(bad_counter_encoding)?;
    store_word(&mut key, StoredCounter::new(counter))?;
    finish_write(ctx, c"lc.loadchunk", key_name, Applied::Whole);
    OK
}

fn load_piece(
    ctx: &Context,
    key_name: &RedisString,
    iterator: &RedisString,
    piece: &RedisString,
) -> RedisResult {
    let iterator = parse_in_range(ctx, iterator, 1, i64::MAX, LC_CHUNK_ITERATOR)? as u64;
    let piece = piece.as_slice();
    let offset = chunk_start(iterator, piece.len()).ok_or(RedisError::Str(CHUNK_LENGTH))?;
    let mut key = Key::write(ctx, key_name);
    let mut counter = write_word::<StoredCounter>(&mut key)?.ok_or(RedisError::Str(NOT_FOUND))?;
    let limit = memory_limit(ctx);
    // A sparse shell turns dense with its first piece: accounted like any write.
    let written = modify(&mut *counter, |s| {
        s.with_mut(|c| codec::write_dense(c, offset, piece, limit))
    });
    drop(counter);
    written.map_err(bad_counter_chunk)?;
    finish_write(ctx, c"lc.loadchunk", key_name, Applied::Whole);
    OK
}
