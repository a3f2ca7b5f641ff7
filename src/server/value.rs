//! The layer every stored type shares: what a type must say about itself ([`StoredValue`]),
//! the Redis type callbacks written once for all of them ([`methods`]) and the typed key
//! helpers the commands use ([`read`], [`write()`], [`store`], [`modify`]). How a write command
//! ends (what it applied is replicated and notified) is `write.rs`.
//!
//! Everything is generic, never `dyn`: each type gets its own monomorphic callbacks and
//! helpers, which compile to what a hand-written copy would.
//!
//! * Accounting: a value entering the keyspace (`store`, RDB load, `COPY`) is counted in its
//!   type's `INFO lcbloom` tally, a value leaving it (`free`) uncounted, and a write that may
//!   change a value's size runs inside `modify`.
//! * Borrowing: a value is lent out by its key, shared by [`read`] (`&Key`), exclusive by
//!   [`write()`] and [`store`] (`&mut Key`), so safe code cannot hold two `&mut` to one value.
//! * Holding ([`Held`]): Redis holds a box of each value, or, for a type that is one word
//!   owning what it names, the word itself (no box per key, no load through it), read with
//!   [`read_word`] and written with [`write_word`] and [`store_word`], which hand Redis the
//!   new word when a write changed it.

use crate::core::defrag::{Defrag, Mover};
use crate::server::ffi::{guard_callback, key_name_of_io, log_warning};
use crate::server::limits::{load_memory_limit, note_loaded_size};
use crate::server::save;
use crate::server::stats::{self, Tally};
use redis_module::{native_types::RedisType, raw, Context, RedisError, RedisString};
use std::alloc::Layout;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::ptr::{null_mut, NonNull};

/// A value stored under a key: one impl per Redis type.
pub trait StoredValue: Sized + 'static {
    /// What the logs call it ("Bloom filter").
    const NAME: &'static str;
    /// The type's RDB encoding version (`encver`), the one `rdb_save` writes.
    const ENCVER: c_int;
    /// The oldest encoding version `rdb_load` reads (only `ENCVER` unless a type says so);
    /// versions outside `OLDEST_ENCVER..=ENCVER` are refused at load.
    const OLDEST_ENCVER: c_int = Self::ENCVER;
    /// The command an AOF rewrite emits to rebuild the value.
    const AOF_COMMAND: &'static CStr;
    /// How Redis holds the values (boxed unless the type says otherwise).
    const HELD: Held = Held::Boxed;

    /// The registered type (a `static` next to the impl).
    const TYPE: &'static RedisType;
    /// Its `INFO lcbloom` tally.
    const TALLY: &'static Tally;
    /// A second tally this value also counts in, by a property fixed at its creation (blocked
    /// Bloom filters); none by default.
    fn sub_tally(&self) -> Option<&'static Tally> {
        None
    }
    /// Bytes the value's own allocations take, each rounded up to the allocator's size class
    /// (`alloc::size_class`), the box Redis holds (if [`Held::Boxed`]) included: what `BF.INFO`/`LC.INFO` report as
    /// Size and `INFO lcbloom` adds up. `MEMORY USAGE` adds `uncounted_key_bytes`.
    fn memory_bytes(&self) -> u64;
    /// Its share of what it holds with other keys (a filter's parameters, a counter's geometry:
    /// their bytes divided among their holders), which `MEMORY USAGE` adds, so that a key whose
    /// parameters no other key has shows what it costs. Not in `memory_bytes`: Size, `INFO lcbloom` and the
    /// memory limit count what a value holds alone, which changes only when it is written.
    fn shared_bytes(&self) -> u64 {
        0
    }
    /// A deep copy, or why it could not be made (`COPY`).
    fn try_copy(&self) -> Result<Self, String>;
    /// Reads a value written with encoding version `encver` (one of `OLDEST_ENCVER..=ENCVER`);
    /// `limit` bounds the bytes it may allocate.
    fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int, limit: u64) -> Result<Self, String>;
    /// Writes the value to an RDB (or a DUMP payload).
    fn rdb_save(&self, rdb: *mut raw::RedisModuleIO);
    /// The AOF form: `emit(None, payload)` for `AOF_COMMAND key payload`,
    /// `emit(Some(iterator), chunk)` for `AOF_COMMAND key iterator chunk`.
    fn aof_parts(&self, emit: impl FnMut(Option<u64>, &[u8]));
    /// The bytes `DEBUG DIGEST-VALUE` digests, in order: equal iff the values are.
    fn digest_parts(&self, add: impl FnMut(&[u8]));
    /// Visits every block the value owns beyond its box, in a fixed order, with `d` (active
    /// defragmentation, `core::defrag`); shared blocks (interned parameters) are not its own.
    fn defrag(&mut self, d: &mut Defrag);
}

/// What a key holding a module value costs beyond the value and beyond what Redis's own
/// `MEMORY USAGE` adds to the type's `mem_usage` (the key's name and `sizeof(dictEntry)`): the
/// `robj` (16 B) and the `moduleValue` (16 B) that point to the value, the dict entry's rounding
/// to its allocator class, and the key's share of the keyspace's bucket array (8–16 B per key;
/// 8 counted). `mem_usage` adds it so that `MEMORY USAGE` tells what a key really costs
/// (`used_memory` growth per key). The rounding is the running allocator's, asked of it once:
/// Debian's jemalloc spaces its small classes by 16 B (a 24 B entry costs 32, 48 B in all),
/// the jemalloc Redis builds from its own sources by 8 B (40 B in all: an empty counter grows
/// `used_memory` by 89 B per key on Redis 7.2.6 and 7.4.1, against 104 B counted with 48).
fn uncounted_key_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| charged(16) + charged(16) + charged(24) - 24 + 8)
}

/// The bytes the server's allocator charges for a request of `bytes` (what `used_memory`
/// counts), or `bytes` where the server cannot say.
fn charged(bytes: usize) -> u64 {
    // SAFETY: function pointers Redis sets at load; the block is allocated, measured and freed
    // by the same allocator, and never read.
    unsafe {
        let (Some(alloc), Some(size), Some(free)) = (
            raw::RedisModule_Alloc,
            raw::RedisModule_MallocSize,
            raw::RedisModule_Free,
        ) else {
            return bytes as u64;
        };
        let block = alloc(bytes);
        if block.is_null() {
            return bytes as u64;
        }
        let charged = size(block);
        free(block);
        charged.max(bytes) as u64
    }
}

/// Redis's callback table for `T`: every callback runs inside `ffi::guard_callback`, so a bug
/// is logged and the value refused (or the work skipped), never an abort. No aux data or
/// unlink, none of the `*2` variants.
pub const fn methods<T: StoredValue>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save::<T>),
        aof_rewrite: Some(aof_rewrite::<T>),
        free: Some(free::<T>),
        mem_usage: Some(mem_usage::<T>),
        digest: Some(digest::<T>),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: Some(effort::<T>),
        unlink: None,
        copy: Some(copy::<T>),
        defrag: Some(defrag::<T>),
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
    }
}

/// How Redis holds a type's values (`StoredValue::HELD`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A box of the value: the pointer Redis holds is `Box::into_raw`'s.
    Boxed,
    /// The value itself, for a type of one word that owns what it names (never 0, as Redis
    /// takes a null value for a failure): a key pays no box, an access no load through it.
    /// Redis never reads a module value, it only hands it back to the type's callbacks.
    Word,
}

/// What Redis holds for `v`.
fn into_raw<T: StoredValue>(v: T) -> *mut c_void {
    match T::HELD {
        Held::Boxed => Box::into_raw(Box::new(v)).cast(),
        Held::Word => {
            assert_eq!(size_of::<T>(), size_of::<*mut c_void>(), "a word");
            // SAFETY: T is one word (checked), moved out of `v`, which is not dropped.
            unsafe { std::mem::transmute_copy(&ManuallyDrop::new(v)) }
        }
    }
}

/// The value `into_raw` gave `raw` for, owned again.
///
/// # Safety
/// `raw` came from `into_raw::<T>` and is taken back once (or lent: never dropped).
unsafe fn from_raw<T: StoredValue>(raw: *mut c_void) -> T {
    match T::HELD {
        // SAFETY: the caller's contract.
        Held::Boxed => *unsafe { Box::from_raw(raw.cast::<T>()) },
        Held::Word => {
            assert_eq!(size_of::<T>(), size_of::<*mut c_void>(), "a word");
            // SAFETY: the caller's contract; T is one word (checked).
            unsafe { std::mem::transmute_copy(&raw) }
        }
    }
}

/// A stored value lent out: a reference into its box, or its word (never dropped).
pub struct Lent<'a, T> {
    value: LentValue<'a, T>,
}

enum LentValue<'a, T> {
    Boxed(&'a T),
    Word(ManuallyDrop<T>, PhantomData<&'a T>),
}

impl<T> Deref for Lent<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        match &self.value {
            LentValue::Boxed(v) => v,
            LentValue::Word(v, _) => v,
        }
    }
}

/// # Safety
/// `value` must be a pointer this module handed to Redis for a `T` (`into_raw`), alive and
/// unchanged for `'a`: Redis passes callbacks only the values of their own type.
unsafe fn value<'a, T: StoredValue>(value: *const c_void) -> Lent<'a, T> {
    Lent {
        value: match T::HELD {
            // SAFETY: the caller's contract.
            Held::Boxed => LentValue::Boxed(unsafe { &*value.cast::<T>() }),
            // SAFETY: the caller's contract; the copy is never dropped.
            Held::Word => LentValue::Word(
                ManuallyDrop::new(unsafe { from_raw::<T>(value.cast_mut()) }),
                PhantomData,
            ),
        },
    }
}

/// The tallies `v` counts in.
fn tallies<T: StoredValue>(v: &T) -> impl Iterator<Item = &'static Tally> {
    std::iter::once(T::TALLY).chain(v.sub_tally())
}

fn into_redis<T: StoredValue>(v: T) -> *mut c_void {
    tallies(&v).for_each(|t| t.created(v.memory_bytes()));
    into_raw(v)
}

unsafe extern "C" fn rdb_load<T: StoredValue>(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    guard_callback("rdb_load", null_mut(), || {
        if !(T::OLDEST_ENCVER..=T::ENCVER).contains(&encver) {
            log_warning(&format!(
                "lcbloom: cannot load a {} of encoding version {encver}",
                T::NAME
            ));
            return null_mut();
        }
        // `max-memory-per-key` binds RESTORE, not the server's own files (limits::memory_limit).
        // SAFETY: `rdb` is the handle Redis passed to this rdb_load.
        let limit = unsafe { load_memory_limit(rdb) };
        match T::rdb_load(rdb, encver, limit) {
            Ok(v) if !raw::is_io_error(rdb) => {
                note_loaded_size(T::NAME, v.memory_bytes());
                into_redis(v)
            }
            result => {
                let why = result
                    .err()
                    .unwrap_or_else(|| "a field of another kind".into());
                // Only a client's RESTORE loads under a limit. Redis answers it "Bad data
                // format" whatever the reason: the log gives it, and points at corruption
                // only when the value was not simply over the limit.
                let (source, hint) = match limit {
                    u64::MAX => (
                        "RDB",
                        " (corrupt, or cut short by a save that failed: see the log of the \
                         server that wrote it)",
                    ),
                    _ if why.contains("max-memory-per-key") => ("RESTORE", ""),
                    _ => (
                        "RESTORE",
                        " (corrupt, or from a DUMP whose save failed: see the log of the \
                         server that made it)",
                    ),
                };
                // SAFETY: `rdb` is the handle Redis passed to this rdb_load.
                let key = match unsafe { key_name_of_io(rdb) } {
                    Some(name) => format!(" (key '{name}')"),
                    None => String::new(),
                };
                log_warning(&format!(
                    "lcbloom: refusing a {}{key} from {source}: {why}{hint}",
                    T::NAME
                ));
                null_mut()
            }
        }
    })
}

unsafe extern "C" fn rdb_save<T: StoredValue>(rdb: *mut raw::RedisModuleIO, v: *mut c_void) {
    let what = format!("rdb_save of a {}", T::NAME);
    // SAFETY: Redis passes its IO handle and a value of this type.
    let write = || unsafe { value::<T>(v) }.rdb_save(rdb);
    // SAFETY: the IO handle Redis passed to this rdb_save.
    unsafe { save::guarded(rdb, &what, write, || save::empty_field(rdb)) }
}

unsafe extern "C" fn aof_rewrite<T: StoredValue>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    v: *mut c_void,
) {
    let what = format!("aof_rewrite of a {}", T::NAME);
    let write = || {
        // SAFETY: a read of a function pointer Redis sets once at load.
        let Some(emit) = (unsafe { raw::RedisModule_EmitAOF }) else {
            return;
        };
        let command = T::AOF_COMMAND.as_ptr();
        // SAFETY: Redis passes a value of this type.
        unsafe { value::<T>(v) }.aof_parts(|iterator, bytes| {
            let (data, len) = (bytes.as_ptr().cast::<c_char>(), bytes.len());
            // SAFETY: the AOF handle and key Redis passed; formats match the arguments
            // (s: key, l: long long, b: buffer and length). Redis copies everything.
            unsafe {
                match iterator {
                    None => emit(aof, command, c"sb".as_ptr(), key, data, len),
                    Some(it) => emit(
                        aof,
                        command,
                        c"slb".as_ptr(),
                        key,
                        it as c_longlong,
                        data,
                        len,
                    ),
                }
            }
        });
    };
    // SAFETY: the IO handle Redis passed to this aof_rewrite.
    unsafe { save::guarded(aof, &what, write, || ()) }
}

unsafe extern "C" fn free<T: StoredValue>(v: *mut c_void) {
    guard_callback("free", (), || {
        // SAFETY: Redis hands back ownership of a value this module gave it, once.
        let v = unsafe { from_raw::<T>(v) };
        tallies(&v).for_each(|t| t.freed(v.memory_bytes()));
    })
}

/// A type's `free_effort`: 1 + the pages a value holds. Redis frees a value in the background
/// (UNLINK, FLUSHALL ASYNC, lazyfree-lazy-* configs) when this exceeds its lazy-free threshold
/// (64), i.e. from about 256 KiB on; returning big blocks to the OS costs about one unit per
/// page, which is what stalls the main thread when a large filter is deleted synchronously.
/// Never 0: Redis reads 0 as "always free in the background". `free` is safe off the main
/// thread: it only drops Rust memory (Redis's allocator is thread-safe) and updates atomics.
fn free_effort(bytes: u64) -> usize {
    usize::try_from(1 + bytes / 4096).unwrap_or(usize::MAX)
}

unsafe extern "C" fn effort<T: StoredValue>(
    _key: *mut raw::RedisModuleString,
    v: *const c_void,
) -> usize {
    guard_callback("free_effort", 0, || {
        // SAFETY: Redis passes a value of this type.
        let v = unsafe { value::<T>(v) };
        free_effort(v.memory_bytes())
    })
}

unsafe extern "C" fn mem_usage<T: StoredValue>(v: *const c_void) -> usize {
    guard_callback("mem_usage", 0, || {
        // SAFETY: Redis passes a value of this type.
        let v = unsafe { value::<T>(v) };
        (v.memory_bytes() + v.shared_bytes() + uncounted_key_bytes()) as usize
    })
}

unsafe extern "C" fn digest<T: StoredValue>(md: *mut raw::RedisModuleDigest, v: *mut c_void) {
    guard_callback("digest", (), || {
        // SAFETY: reads of function pointers Redis sets once at load.
        let (Some(add), Some(end)) = (unsafe {
            (
                raw::RedisModule_DigestAddStringBuffer,
                raw::RedisModule_DigestEndSequence,
            )
        }) else {
            return;
        };
        // SAFETY: Redis passes a value of this type; the digest handle is live for the call
        // and the API copies the bytes.
        unsafe {
            value::<T>(v)
                .digest_parts(|bytes| add(md, bytes.as_ptr().cast::<c_char>(), bytes.len()));
            end(md);
        }
    })
}

unsafe extern "C" fn copy<T: StoredValue>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    v: *const c_void,
) -> *mut c_void {
    guard_callback("copy", null_mut(), || {
        // SAFETY: Redis passes a value of this type.
        match unsafe { value::<T>(v) }.try_copy() {
            Ok(copy) => into_redis(copy),
            Err(why) => {
                log_warning(&format!("lcbloom: COPY of a {} failed: {why}", T::NAME));
                null_mut()
            }
        }
    })
}

/// The server's side of `core::defrag`: `RedisModule_DefragAlloc` moves a block when jemalloc
/// advises it, `RedisModule_DefragShouldStop` tells when the step's time is up.
struct ServerMover {
    ctx: *mut raw::RedisModuleDefragCtx,
    alloc: unsafe extern "C" fn(*mut raw::RedisModuleDefragCtx, *mut c_void) -> *mut c_void,
    should_stop: unsafe extern "C" fn(*mut raw::RedisModuleDefragCtx) -> c_int,
}

impl Mover for ServerMover {
    unsafe fn relocate(&mut self, ptr: NonNull<u8>, _layout: Layout) -> Option<NonNull<u8>> {
        // SAFETY: the defrag context Redis passed to this callback; `ptr` is a block of Redis's
        // allocator (the trait's contract), which DefragAlloc copies whole into a block of the
        // same size class before freeing it.
        NonNull::new(unsafe { (self.alloc)(self.ctx, ptr.as_ptr().cast()) }.cast())
    }

    fn should_stop(&mut self) -> bool {
        // SAFETY: the defrag context Redis passed to this callback.
        unsafe { (self.should_stop)(self.ctx) != 0 }
    }
}

/// Moves the value's box and blocks that jemalloc advises moving. Small values are done in one
/// call. Redis calls a value whose `free_effort` exceeds `active-defrag-max-scan-fields` (about
/// 4 MB with the default 1000) in steps with a time budget and a cursor: the call then stops
/// when `DefragShouldStop` says so, stores how many blocks it visited, and returns 1 for "call
/// again"; the next call resumes there. The heads and 16 MiB segments of large bit arrays are
/// never moved by jemalloc (only slab-sized blocks are), so a 400 MB filter's step is short
/// anyway.
/// The API exists from Redis 6.2 and in Valkey; on a server without it this does nothing.
unsafe extern "C" fn defrag<T: StoredValue>(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    v: *mut *mut c_void,
) -> c_int {
    guard_callback("defrag", 0, || {
        // SAFETY: reads of function pointers Redis sets once at load.
        let api = unsafe {
            (
                raw::RedisModule_DefragAlloc,
                raw::RedisModule_DefragShouldStop,
                raw::RedisModule_DefragCursorGet,
                raw::RedisModule_DefragCursorSet,
            )
        };
        let (Some(alloc), Some(should_stop), Some(get), Some(set)) = api else {
            return 0;
        };
        let mut cursor: std::os::raw::c_ulong = 0;
        // SAFETY: the context Redis passed; outside a stepped defrag the call fails and leaves
        // the cursor at 0.
        unsafe { get(ctx, &mut cursor) };
        let mut mover = ServerMover {
            ctx,
            alloc,
            should_stop,
        };
        let mut d = Defrag::new(&mut mover, cursor);
        // SAFETY: `*v` is what this module handed Redis for a T (`into_raw`); Redis keeps the
        // pointer it finds in `*v` after the call.
        unsafe {
            match T::HELD {
                Held::Boxed => {
                    let Some(mut boxed) = NonNull::new((*v).cast::<u8>()) else {
                        return 0;
                    };
                    d.block(&mut boxed, Layout::new::<T>());
                    *v = boxed.as_ptr().cast();
                    (*v).cast::<T>().as_mut().expect("non-null").defrag(&mut d);
                }
                Held::Word => Writing::<T>::of_slot(v).defrag(&mut d),
            }
        }
        let resume = d.resume_at();
        // SAFETY: the context Redis passed; the call fails outside a stepped defrag.
        let again =
            resume.is_some_and(|at| unsafe { set(ctx, at as _) } == raw::REDISMODULE_OK as c_int);
        stats::DEFRAG.note(d.moved(), again);
        c_int::from(again)
    })
}

/// A key a command opened (`RedisModule_OpenKey`), closed when dropped.
///
/// The typed helpers below ask the module API directly: the key's type, its module type, its
/// value (three calls). The crate's `get_value` does the same and also builds a `RedisResult`,
/// borrows a `RefCell` and maps errors, about a hundred instructions more: a tenth of a short
/// command such as `LC.COUNT` (callgrind).
pub struct Key {
    inner: *mut raw::RedisModuleKey,
}

impl Key {
    /// Opens `name` for reading; a missing key gives a handle that reads as empty.
    pub fn read(ctx: &Context, name: &RedisString) -> Key {
        Key {
            inner: raw::open_key(ctx.ctx, name.inner, raw::KeyMode::READ),
        }
    }

    /// Opens `name` for reading and writing.
    pub fn write(ctx: &Context, name: &RedisString) -> Key {
        Key {
            inner: raw::open_key(
                ctx.ctx,
                name.inner,
                raw::KeyMode::READ | raw::KeyMode::WRITE,
            ),
        }
    }

    /// Whether the key holds nothing.
    pub fn is_empty(&self) -> bool {
        // SAFETY: a read of a function pointer Redis sets at load; the handle is open (or null,
        // which the API reads as an empty key).
        let kind = unsafe { raw::RedisModule_KeyType.expect("KeyType")(self.inner) };
        kind == raw::REDISMODULE_KEYTYPE_EMPTY as c_int
    }

    /// What Redis holds if the key holds a `T`: None if it is empty, `WRONGTYPE` for any other
    /// type.
    fn value<T: StoredValue>(&self) -> Result<Option<*mut c_void>, RedisError> {
        let wanted = *T::TYPE.raw_type.borrow();
        // SAFETY: as in `is_empty`. The module type of an empty key, or of a key that is not a
        // module key, is null, never `wanted`: only then is the key's type asked for.
        unsafe {
            if raw::RedisModule_ModuleTypeGetType.expect("ModuleTypeGetType")(self.inner) != wanted
            {
                return if self.is_empty() {
                    Ok(None)
                } else {
                    Err(RedisError::WrongType)
                };
            }
            Ok(Some(raw::RedisModule_ModuleTypeGetValue
                .expect("ModuleTypeGetValue")(
                self.inner
            )))
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        // SAFETY: the handle OpenKey gave, closed once (CloseKey accepts null).
        unsafe { raw::RedisModule_CloseKey.expect("CloseKey")(self.inner) };
    }
}

/// The value under a key (of a boxed type); `WRONGTYPE` for a key of another type.
pub fn read<T: StoredValue>(key: &Key) -> Result<Option<&T>, RedisError> {
    const {
        assert!(
            matches!(T::HELD, Held::Boxed),
            "a word is read by read_word"
        )
    };
    // SAFETY: Redis keeps a value of type T (a boxed T, see `into_raw`) under the key while
    // it is open, and nothing frees it during the command.
    Ok(key.value::<T>()?.map(|v| unsafe { &*v.cast::<T>() }))
}

/// The value under a key opened for writing; `WRONGTYPE` for a key of another type.
///
/// The value belongs to Redis, not to the handle, but the handle is the only way to it, so
/// borrowing the handle exclusively makes the value's borrow exclusive too.
pub fn write<T: StoredValue>(key: &mut Key) -> Result<Option<&mut T>, RedisError> {
    const {
        assert!(
            matches!(T::HELD, Held::Boxed),
            "a word is written by write_word"
        )
    };
    // SAFETY: as in `read`; the command runs alone on the main thread, the key was opened for
    // writing, and `key` stays borrowed while the returned reference lives.
    Ok(key.value::<T>()?.map(|v| unsafe { &mut *v.cast::<T>() }))
}

/// The value under a key, of a type Redis holds as a word ([`Held::Word`]); `WRONGTYPE` for
/// a key of another type.
pub fn read_word<T: StoredValue>(key: &Key) -> Result<Option<Lent<'_, T>>, RedisError> {
    const { assert!(matches!(T::HELD, Held::Word), "a box is read by read") };
    // SAFETY: Redis keeps a value of type T under the key, unchanged while `key` is borrowed
    // (writes need `&mut Key`).
    Ok(key.value::<T>()?.map(|v| unsafe { value::<T>(v) }))
}

/// The words of type `T` under `names`, in order, the missing keys skipped; `WRONGTYPE` at the
/// first key of another type. Each key is opened, read and closed before the next: a read of
/// thousands of keys then holds no handle per key (each an allocation of the server's, made
/// afresh while thousands are held, reused when each is closed at once).
///
/// # Safety
///
/// The command changes none of these keys while the values are lent (for `'c`, the
/// command's context): Redis keeps a value unchanged until a command replaces or deletes it.
pub unsafe fn read_words_closing<'c, 'n, T: StoredValue>(
    ctx: &'c Context,
    names: &[&'n RedisString],
) -> Result<Vec<(&'n RedisString, Lent<'c, T>)>, RedisError> {
    const { assert!(matches!(T::HELD, Held::Word), "a box is read by read") };
    let mut values = Vec::with_capacity(names.len());
    for &name in names {
        let key = Key::read(ctx, name);
        if let Some(v) = key.value::<T>()? {
            // SAFETY: Redis keeps a value of type T under the key, unchanged for `'c` (the
            // caller's contract), whether or not its handle is open.
            values.push((name, unsafe { value::<T>(v) }));
        }
    }
    Ok(values)
}

/// [`read_word`] for a key opened for writing: the value to write, whose new word Redis is
/// given when the writing ends.
pub fn write_word<T: StoredValue>(key: &mut Key) -> Result<Option<Writing<'_, T>>, RedisError> {
    const { assert!(matches!(T::HELD, Held::Word), "a box is written by write") };
    let held = key.value::<T>()?;
    // SAFETY: as in `read_word`; the key was opened for writing and stays borrowed while the
    // writing lives.
    Ok(held.map(|held| unsafe { Writing::of_key(key, held) }))
}

/// [`write_word`], or when the key is empty, the value `make` gives stored there ([`store_word`])
/// and written; true if it was made.
pub fn write_word_or_store<T: StoredValue>(
    key: &mut Key,
    make: impl FnOnce() -> Result<T, RedisError>,
) -> Result<(Writing<'_, T>, bool), RedisError> {
    const { assert!(matches!(T::HELD, Held::Word), "a box is written by write") };
    let (held, made) = match key.value::<T>()? {
        Some(held) => (held, false),
        None => (set_value(key, make()?)?, true),
    };
    // SAFETY: the word the key holds (or now holds), which stays borrowed while the writing
    // lives.
    Ok((unsafe { Writing::of_key(key, held) }, made))
}

/// [`store`] for a type Redis holds as a word.
pub fn store_word<T: StoredValue>(key: &mut Key, v: T) -> Result<Writing<'_, T>, RedisError> {
    const { assert!(matches!(T::HELD, Held::Word), "a box is stored by store") };
    let held = set_value(key, v)?;
    // SAFETY: the word just stored under the key, which stays borrowed while the writing lives.
    Ok(unsafe { Writing::of_key(key, held) })
}

/// A value Redis holds as a word, being written: when dropped (also when the write panics),
/// Redis is given the new word if the write changed it, so that it never holds a word whose
/// block the write freed or moved.
pub struct Writing<'a, T: StoredValue> {
    value: ManuallyDrop<T>,
    /// The word Redis holds now.
    held: *mut c_void,
    to: Holder,
    key: PhantomData<&'a mut Key>,
}

/// Where the word is held: under an open key, or in a slot Redis lent (defrag).
enum Holder {
    Key(*mut raw::RedisModuleKey),
    Slot(*mut *mut c_void),
}

impl<T: StoredValue> Writing<'_, T> {
    /// # Safety
    /// `held` is the word of a T that `key` (open for writing) holds.
    unsafe fn of_key(key: &mut Key, held: *mut c_void) -> Writing<'_, T> {
        // SAFETY: the caller's contract.
        unsafe { Writing::holding(held, Holder::Key(key.inner)) }
    }

    /// # Safety
    /// `slot` holds the word of a T, and nothing else reads or writes it while the writing
    /// lives.
    unsafe fn of_slot<'a>(slot: *mut *mut c_void) -> Writing<'a, T> {
        // SAFETY: the caller's contract.
        unsafe { Writing::holding(*slot, Holder::Slot(slot)) }
    }

    /// # Safety
    /// `held` is the word of a T that `to` holds, for the writing's lifetime.
    unsafe fn holding<'a>(held: *mut c_void, to: Holder) -> Writing<'a, T> {
        Writing {
            // SAFETY: the caller's contract; the copy is the writing's until it is dropped.
            value: ManuallyDrop::new(unsafe { from_raw::<T>(held) }),
            held,
            to,
            key: PhantomData,
        }
    }
}

impl<T: StoredValue> Deref for Writing<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: StoredValue> DerefMut for Writing<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: StoredValue> Drop for Writing<'_, T> {
    fn drop(&mut self) {
        // SAFETY: T is one word (`into_raw` checked it when the word was made).
        let now: *mut c_void = unsafe { std::mem::transmute_copy(&*self.value) };
        if now == self.held {
            return;
        }
        match self.to {
            // SAFETY: the slot's contract (`of_slot`).
            Holder::Slot(slot) => unsafe { *slot = now },
            Holder::Key(key) => {
                let ty = *T::TYPE.raw_type.borrow();
                let mut old = null_mut();
                // SAFETY: a function pointer Redis sets at load; the key is open for writing
                // and holds a value of this type (`of_key`). Redis swaps the word and frees
                // nothing: the old word's block is the write's to have freed or kept.
                let status = unsafe {
                    raw::RedisModule_ModuleTypeReplaceValue.expect("ModuleTypeReplaceValue")(
                        key, ty, now, &mut old,
                    )
                };
                if status != raw::Status::Ok as c_int || old != self.held {
                    log_warning(&format!(
                        "lcbloom: Redis refused the new word of a {} (status {status})",
                        T::NAME
                    ));
                }
            }
        }
    }
}

/// A key's value when a command serves two types (`BF.*`: lcbloom's filters and RedisBloom's).
pub enum Either<A, B> {
    First(A),
    Second(B),
}

/// The value under a key, of type `A` or `B`; `WRONGTYPE` for others. `A` is looked up first,
/// exactly as [`read`] does, so its commands pay nothing for `B`.
pub fn read_either<A: StoredValue, B: StoredValue>(
    key: &Key,
) -> Result<Option<Either<&A, &B>>, RedisError> {
    match read::<A>(key) {
        Ok(a) => Ok(a.map(Either::First)),
        Err(_) => Ok(read::<B>(key)?.map(Either::Second)),
    }
}

/// [`read_either`] for a key opened for writing.
pub fn write_either<A: StoredValue, B: StoredValue>(
    key: &mut Key,
) -> Result<Option<Either<&mut A, &mut B>>, RedisError> {
    const {
        assert!(
            matches!((A::HELD, B::HELD), (Held::Boxed, Held::Boxed)),
            "a word is written by write_word"
        )
    };
    // One of the two lookups lends the value, exclusively, as `write` does.
    match key.value::<A>() {
        // SAFETY: as in `write`.
        Ok(a) => Ok(a.map(|v| Either::First(unsafe { &mut *v.cast::<A>() }))),
        Err(_) => Ok(key.value::<B>()?.map(|v| {
            // SAFETY: as in `write`.
            Either::Second(unsafe { &mut *v.cast::<B>() })
        })),
    }
}

/// Stores a new value (of a boxed type) under an empty key (opened for writing) and counts
/// it; returns it, stored.
pub fn store<T: StoredValue>(key: &mut Key, v: T) -> Result<&mut T, RedisError> {
    const {
        assert!(
            matches!(T::HELD, Held::Boxed),
            "a word is stored by store_word"
        )
    };
    let ptr = set_value(key, v)?.cast::<T>();
    // SAFETY: the box now stored under the key, alive while it is open; `key` stays borrowed
    // while the returned reference lives.
    Ok(unsafe { &mut *ptr })
}

/// Hands `v` to Redis under an empty key (opened for writing) and counts it; what Redis holds.
fn set_value<T: StoredValue>(key: &mut Key, v: T) -> Result<*mut c_void, RedisError> {
    let (bytes, sub) = (v.memory_bytes(), v.sub_tally());
    let ty = *T::TYPE.raw_type.borrow();
    let held = into_raw(v);
    // SAFETY: the key is open for writing and empty; Redis takes ownership of the value (and
    // frees it through the type's `free`) when the call succeeds.
    let status = unsafe {
        raw::RedisModule_ModuleTypeSetValue.expect("ModuleTypeSetValue")(key.inner, ty, held)
    };
    if status != raw::Status::Ok as c_int {
        // SAFETY: Redis refused the value, so it is still this function's.
        drop(unsafe { from_raw::<T>(held) });
        return Err(RedisError::Str(crate::server::errors::NOT_STORED));
    }
    std::iter::once(T::TALLY)
        .chain(sub)
        .for_each(|t| t.created(bytes));
    Ok(held)
}

/// Runs a write on a stored value, accounting for the bytes it adds or frees.
pub fn modify<T: StoredValue, R>(v: &mut T, write: impl FnOnce(&mut T) -> R) -> R {
    let before = v.memory_bytes();
    let result = write(v);
    tallies(v).for_each(|t| t.resized(before, v.memory_bytes()));
    result
}
