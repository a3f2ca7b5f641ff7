//! What a panic while writing a value out does: no file may hold a half value that would load
//! as something else.
//!
//! * In a fork child (BGSAVE, BGREWRITEAOF, a replica's full sync, disk or diskless), the
//!   panic is logged at warning level and the child aborts: Redis sees it die by a signal, the
//!   save fails (`Background saving terminated by signal 6`, `rdb_last_bgsave_status:err`),
//!   its temporary file is deleted and the previous RDB or AOF stays as it was. Catching the
//!   panic and writing on would rename a file holding a half value over the last good one.
//! * In the main process (SAVE, SHUTDOWN's save, DEBUG RELOAD, DUMP), the module API gives a
//!   save callback no way to fail. The panic is logged at warning level and an empty string
//!   field is written where the value's data goes on. Every type refuses an empty field where
//!   it reads data (the first field, a data chunk), and Redis refuses a module value followed by
//!   anything but its end marker, so loading that value fails with a logged reason (RESTORE:
//!   `Bad data format`; an RDB at start-up or in DEBUG RELOAD: refused, and the server stops)
//!   instead of loading something else.
//! * An AOF rewrite always runs in a fork child; were it ever run in the main process, its
//!   commands would stop at the panic, with nothing after them.
//! * Test builds only (`--features fault-injection`, which `make test` builds as
//!   `target/fault-injection/liblcbloom.so`): with `LCBLOOM_FAULT=save` in its environment,
//!   every value's save panics before writing anything. Release builds have no such point.

use crate::server::ffi::{log_warning, panic_message};
use redis_module::raw;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `write` (a save callback's body writing to `io`) under the rules above; `what` names
/// the callback and the type in the log, `cut_short` writes what makes the value refused at
/// load (the empty field, for an RDB or DUMP).
///
/// # Safety
/// `io` is the handle Redis passed to the running save callback.
pub unsafe fn guarded(
    io: *mut raw::RedisModuleIO,
    what: &str,
    write: impl FnOnce(),
    cut_short: impl FnOnce(),
) {
    let Err(panic) = catch_unwind(AssertUnwindSafe(|| {
        fault_point();
        write()
    })) else {
        return;
    };
    let message = panic_message(&panic);
    // SAFETY: the caller's contract.
    if unsafe { in_fork_child(io) } {
        log_warning(&format!(
            "lcbloom: internal error in {what} in a background save: {message}; aborting this \
             child so that the save fails and the previous file stays as it was"
        ));
        std::process::abort();
    }
    log_warning(&format!(
        "lcbloom: internal error in {what}: {message}; the value is written cut short, so that \
         loading it (RESTORE, or this RDB at start-up) is refused rather than wrong"
    ));
    cut_short();
}

/// The `cut_short` of an RDB or DUMP: an empty string field.
pub fn empty_field(io: *mut raw::RedisModuleIO) {
    raw::save_slice(io, &[]);
}

/// Whether this process is a fork child of redis-server (a background save or rewrite).
///
/// # Safety
/// `io` is the handle Redis passed to the running save callback.
unsafe fn in_fork_child(io: *mut raw::RedisModuleIO) -> bool {
    // SAFETY: reads of function pointers Redis sets once at load.
    let api = unsafe {
        (
            raw::RedisModule_GetContextFromIO,
            raw::RedisModule_GetContextFlags,
        )
    };
    let (Some(context), Some(flags)) = api else {
        return false;
    };
    // SAFETY: the caller's handle; Redis owns the context it returns and frees it with `io`.
    unsafe {
        let ctx = context(io);
        !ctx.is_null() && flags(ctx) as u32 & raw::REDISMODULE_CTX_FLAGS_IS_CHILD != 0
    }
}

/// Panics when the test environment asks for a failed save (test builds only).
#[cfg(feature = "fault-injection")]
fn fault_point() {
    if std::env::var_os("LCBLOOM_FAULT").is_some_and(|v| v == "save") {
        panic!("fault injected by LCBLOOM_FAULT=save");
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn fault_point() {}
