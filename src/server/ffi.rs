//! The boundary between redis-server and Rust.
//!
//! A Rust panic that unwinds into C aborts redis-server, losing every client's data in memory.
//! Every command handler and every type callback therefore runs inside [`guard`] or
//! [`guard_callback`]: a panic becomes an `ERR` reply (or a rejected load) and a warning in the
//! server log. The release profile keeps `panic = "unwind"` for this to work.
//!
//! Every command's C callback is made by `callback!` (its row in `command_table::COMMANDS`),
//! not by `redis_module!`, whose wrapper retains every argument into a fresh `Vec<RedisString>` and releases
//! them afterwards: about a fifth of a short command's time. Handlers borrow `argv` as
//! `&[RedisString]` views that are never dropped. Replies are `reply.rs`'s.

use redis_module::{raw, Context, RedisError, RedisResult, RedisString, Status};
use std::ffi::{c_int, CStr, CString};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

// The boundary is only as good as unwinding: with `panic = "abort"` it would catch nothing.
#[cfg(not(panic = "unwind"))]
compile_error!("lcbloom must be built with panic = \"unwind\" (see the release profile)");

/// Runs a command handler, turning a panic into an error reply.
///
/// What a caught panic leaves behind: unwinding drops the handler's locals, so no memory
/// leaks and open keys close. A write that panicked after changing a value leaves the value as
/// it was at the panic: a valid value (the cores change it through safe code only, so every
/// invariant the type relies on for memory safety holds), possibly with part of the command
/// applied, that was neither replicated nor propagated nor notified, and whose bytes the
/// `INFO lcbloom` tally may not yet count. A replica or an AOF replay may therefore differ
/// from the master for that key until it is rewritten; the warning in the log names the panic.
/// Dropping the value instead would lose acknowledged data, so it stays.
///
/// Inlined, with [`dispatch`], into each command's callback: the handler is then a direct
/// call, about 30 instructions fewer a command than through a function pointer.
#[inline(always)]
pub fn guard(ctx: &Context, args: &[RedisString], handler: Handler) -> RedisResult {
    match catch_unwind(AssertUnwindSafe(|| handler(ctx, args))) {
        Ok(result) => result,
        Err(panic) => {
            log_warning(&format!(
                "lcbloom: internal error in a command: {}",
                panic_message(&panic)
            ));
            Err(RedisError::Str(crate::server::errors::INTERNAL))
        }
    }
}

/// Runs a type callback (rdb_load, copy, digest ...), returning `fallback` if it panics.
pub fn guard_callback<T>(what: &str, fallback: T, callback: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(callback)) {
        Ok(value) => value,
        Err(panic) => {
            log_warning(&format!(
                "lcbloom: internal error in {what}: {}",
                panic_message(&panic)
            ));
            fallback
        }
    }
}

pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Logs at warning level, without a context (type callbacks have only an IO handle).
///
/// The crate hands the text to `RedisModule_Log` as its printf *format* and through
/// `CString::new(..).unwrap()`: a `%` would read garbage varargs and a NUL would panic outside
/// any boundary, and a panic message may quote anything. Both are escaped here. Outside
/// redis-server (unit tests) the text goes to stderr.
pub fn log_warning(message: &str) {
    log(redis_module::logging::RedisLogLevel::Warning, message);
}

/// A key name as a log line shows it: its first 200 bytes, escaped (`\xNN` for bytes
/// outside printable ASCII).
pub fn shown_key_name(name: &[u8]) -> String {
    name.iter()
        .take(200)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect()
}

/// The name of the key a type callback's IO handle loads, as [`shown_key_name`] shows it;
/// None where the server does not say.
///
/// # Safety
///
/// `io` is the handle Redis passed to the running callback.
pub unsafe fn key_name_of_io(io: *mut raw::RedisModuleIO) -> Option<String> {
    // SAFETY: function pointers Redis sets at load; the key, when there is one, is a string
    // the server owns for the callback's duration.
    unsafe {
        let key = raw::RedisModule_GetKeyNameFromIO?(io);
        if key.is_null() {
            return None;
        }
        let mut len = 0usize;
        let ptr = raw::RedisModule_StringPtrLen?(key, &mut len);
        (!ptr.is_null()).then(|| shown_key_name(std::slice::from_raw_parts(ptr.cast(), len)))
    }
}

/// [`log_warning`] at notice level.
pub fn log_notice(message: &str) {
    log(redis_module::logging::RedisLogLevel::Notice, message);
}

/// 64 unpredictable bits: a keyed hash (SipHash, the standard library's `RandomState`) of a
/// counter, under a 128-bit key drawn once per process from the operating system's random
/// source. The hash is a pseudo-random function: without the key, seeds seen (a dump of one
/// filter) say nothing about others. It costs about a hundred instructions, where
/// `RedisModule_GetRandomBytes` spends two HMAC-SHA256 computations (some 16,000 instructions,
/// a fifth of creating a small filter) on every call.
pub fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static KEY: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let key = KEY.get_or_init(std::collections::hash_map::RandomState::new);
    key.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed))
}

fn log(level: redis_module::logging::RedisLogLevel, message: &str) {
    let safe = message.replace('%', "%%").replace('\0', "\\0");
    // SAFETY: a plain read of a function pointer Redis sets once, before any callback runs.
    if unsafe { raw::RedisModule_Log }.is_some() {
        redis_module::logging::log(level, &safe);
    } else {
        eprintln!("{safe}");
    }
}

/// A command handler: the one signature, arguments borrowed.
pub type Handler = fn(&Context, &[RedisString]) -> RedisResult;

/// Runs `handler` on `argv` inside [`guard`] and sends its reply: the body of the C callback
/// that `callback!` generates.
///
/// # Safety
/// `ctx`, `argv` and `argc` must be what Redis passed to a command callback.
#[inline(always)]
pub unsafe fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: Handler,
) -> c_int {
    const ON_STACK: usize = 8;
    let context = Context::new(ctx);
    let raw_args: &[*mut raw::RedisModuleString] = match usize::try_from(argc) {
        // SAFETY: Redis passes argc valid strings in argv for the duration of the call.
        Ok(n) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    };
    // Views of Redis's own strings: not retained, and ManuallyDrop never releases them.
    let view = |s| ManuallyDrop::new(RedisString::from_redis_module_string(ctx, s));
    let result = if raw_args.len() <= ON_STACK {
        // Only as many views as arguments are made (most commands have three or four).
        let mut views = [const { MaybeUninit::<ManuallyDrop<RedisString>>::uninit() }; ON_STACK];
        for (slot, &s) in views.iter_mut().zip(raw_args) {
            slot.write(view(s));
        }
        let made = &views[..raw_args.len()];
        // SAFETY: the first `raw_args.len()` slots were just written; MaybeUninit<T> has T's
        // layout, so the initialised part is a slice of views.
        let made = unsafe { &*(made as *const [MaybeUninit<_>] as *const [ManuallyDrop<_>]) };
        guard(&context, as_strings(made), handler)
    } else {
        let views: Vec<ManuallyDrop<RedisString>> = raw_args.iter().map(|&s| view(s)).collect();
        guard(&context, as_strings(&views), handler)
    };
    crate::server::reply::send(&context, result)
}

fn as_strings(views: &[ManuallyDrop<RedisString>]) -> &[RedisString] {
    // SAFETY: ManuallyDrop<T> is #[repr(transparent)] over T, so the slices have one layout.
    unsafe { &*(views as *const [ManuallyDrop<RedisString>] as *const [RedisString]) }
}

/// `RedisModule_CreateCommand` with a C callback made by `callback!`.
pub fn create_command(
    ctx: &Context,
    name: &CStr,
    callback: raw::RedisModuleCmdFunc,
    flags: &str,
    (first, last, step): (c_int, c_int, c_int),
) -> Status {
    let Ok(flags) = CString::new(flags) else {
        return Status::Err;
    };
    // SAFETY: called from OnLoad with its context; Redis copies the name and flags.
    let status = unsafe {
        raw::RedisModule_CreateCommand.expect("CreateCommand")(
            ctx.ctx,
            name.as_ptr(),
            callback,
            flags.as_ptr(),
            first,
            last,
            step,
        )
    };
    if status == raw::Status::Ok as c_int {
        Status::Ok
    } else {
        Status::Err
    }
}

/// The C callback for a handler that borrows its arguments (see [`dispatch`]):
/// `callback!(bf::add)`.
macro_rules! callback {
    ($handler:path) => {{
        extern "C" fn callback(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: *mut *mut redis_module::raw::RedisModuleString,
            argc: std::ffi::c_int,
        ) -> std::ffi::c_int {
            // SAFETY: the arguments are Redis's own, passed straight through.
            unsafe { $crate::server::ffi::dispatch(ctx, argv, argc, $handler) }
        }
        Some(callback)
    }};
}
pub(crate) use callback;

#[cfg(test)]
mod tests {
    use super::*;
    use redis_module::RedisValue;

    #[test]
    #[cfg_attr(miri, ignore = "logs through the server's API")]
    fn a_panicking_callback_returns_its_fallback() {
        let value: *mut u8 = guard_callback("test", std::ptr::null_mut(), || {
            let bytes: &[u8] = &[];
            // An out-of-bounds index: the kind of bug the boundary exists for.
            &bytes[usize::from(bytes.is_empty()) * 7] as *const u8 as *mut u8
        });
        assert!(value.is_null());
        // Formatted panics, and messages that would break a C format string, are logged too.
        let n: u32 = guard_callback("test", 0, || panic!("bad %s %n \0 {}", 42));
        assert_eq!(n, 0);
        assert_eq!(guard_callback("test", 0, || 5), 5);
    }

    #[test]
    #[cfg_attr(miri, ignore = "logs through the server's API")]
    fn a_panicking_handler_replies_with_an_error() {
        let context = Context::dummy();
        let panics: Handler = |_, args| Ok(RedisValue::Integer(args[7].len() as i64));
        assert!(matches!(
            guard(&context, &[], panics),
            Err(RedisError::Str(crate::server::errors::INTERNAL))
        ));
        let answers: Handler = |_, _| Ok(RedisValue::Integer(5));
        assert!(matches!(
            guard(&context, &[], answers),
            Ok(RedisValue::Integer(5))
        ));
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn random_draws_are_distinct_and_spread() {
        // 100,000 draws: no repeat (a repeat among 2^64 values would be a one-in-10^9 event),
        // and every bit set in about half of them (within 1%, some 6 standard deviations).
        let draws: Vec<u64> = (0..100_000).map(|_| random_u64()).collect();
        let distinct: std::collections::HashSet<&u64> = draws.iter().collect();
        assert_eq!(distinct.len(), draws.len());
        for bit in 0..64 {
            let ones = draws.iter().filter(|d| *d >> bit & 1 == 1).count();
            assert!((49_000..=51_000).contains(&ones), "bit {bit}: {ones}");
        }
    }
}
