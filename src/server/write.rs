//! How a write command ends: replicas and the AOF get exactly what it applied, and a keyspace
//! event fires when it changed something. One policy for every family, so that a replica or an
//! AOF replay holds what the master holds, also after a command that stopped part-way.
//!
//! A command replicated on every call (a windowed filter's add carries its time) is built as
//! a [`Replicated`]: the client's own argument strings and [`Word`]s made once are handed to
//! `RedisModule_Replicate` as they are (its "v" format takes its own references), so only
//! the numbers it carries are made per call.

use redis_module::{raw, Context, NotifyEvent, RedisString};
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::ptr::{null_mut, NonNull};
use std::sync::OnceLock;

/// A command as it is replicated: its name and arguments.
pub type Command<'a> = (&'a str, Vec<&'a [u8]>);

/// A word replicated commands repeat (`ITEMS`, `AT`): made into a Redis string on first use and
/// kept for the module's life.
pub struct Word {
    text: &'static CStr,
    string: OnceLock<Kept>,
}

/// A string made without a context and never freed.
struct Kept(NonNull<raw::RedisModuleString>);

// SAFETY: only its pointer is shared. Redis touches the string (its reference count, when a
// command replicated with it is propagated) on the main thread only, where every command runs.
unsafe impl Send for Kept {}
// SAFETY: as for Send.
unsafe impl Sync for Kept {}

impl Word {
    pub const fn new(text: &'static CStr) -> Self {
        Self {
            text,
            string: OnceLock::new(),
        }
    }

    fn string(&self) -> *mut raw::RedisModuleString {
        let kept = self.string.get_or_init(|| {
            let made = make_string(self.text.to_bytes());
            Kept(NonNull::new(made).expect("CreateString returns a string"))
        });
        kept.0.as_ptr()
    }
}

/// `n` in decimal, written at the end of `digits` (20 is room for any u64): no allocation.
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[start..];
        }
    }
}

/// A new Redis string without a context (so not freed with one): the caller frees or keeps it.
fn make_string(bytes: &[u8]) -> *mut raw::RedisModuleString {
    // SAFETY: a function pointer Redis sets at load; a null context makes an unmanaged string
    // from a copy of `bytes`.
    unsafe {
        raw::RedisModule_CreateString.expect("CreateString")(
            null_mut(),
            bytes.as_ptr().cast(),
            bytes.len(),
        )
    }
}

/// One command to replicate, built from strings Redis already holds where it can: the
/// client's arguments (alive for the whole command, hence `'a`) and [`Word`]s are passed as
/// they are; numbers and texts are made for it and freed once it is replicated.
pub struct Replicated<'a> {
    name: &'a CStr,
    argv: Vec<*mut raw::RedisModuleString>,
    /// The strings made for this command (in `argv` too), freed on drop.
    made: Vec<RedisString>,
    client: PhantomData<&'a RedisString>,
}

impl<'a> Replicated<'a> {
    /// The command `name` with room for `args` arguments.
    pub fn new(name: &'a CStr, args: usize) -> Self {
        Self {
            name,
            argv: Vec::with_capacity(args),
            made: Vec::new(),
            client: PhantomData,
        }
    }

    /// One of the client's arguments.
    pub fn arg(&mut self, arg: &'a RedisString) -> &mut Self {
        self.argv.push(arg.inner);
        self
    }

    /// The client's arguments, in order.
    pub fn args(&mut self, args: &'a [RedisString]) -> &mut Self {
        self.argv.extend(args.iter().map(|a| a.inner));
        self
    }

    pub fn word(&mut self, word: &'static Word) -> &mut Self {
        self.argv.push(word.string());
        self
    }

    /// A number, in decimal.
    pub fn number(&mut self, n: u64) -> &mut Self {
        let mut digits = [0; 20];
        self.text(decimal(n, &mut digits))
    }

    /// Any other text (made for this command).
    pub fn text(&mut self, text: &[u8]) -> &mut Self {
        let made = RedisString::from_redis_module_string(null_mut(), make_string(text));
        self.argv.push(made.inner);
        self.made.push(made);
        self
    }

    fn replicate(&self, ctx: &Context) {
        // SAFETY: every pointer in `argv` is a live string: the client's arguments outlive the
        // command, words are never freed, made strings live until `self` drops. The "v" format
        // reads `argv.len()` pointers and takes a reference to each, released when Redis has
        // propagated the command.
        unsafe {
            raw::RedisModule_Replicate.expect("Replicate")(
                ctx.ctx,
                self.name.as_ptr(),
                raw::FMT,
                self.argv.as_ptr(),
                self.argv.len(),
            );
        }
    }
}

/// What a write command applied, for [`finish_write`].
pub enum Applied<'a> {
    /// Nothing changed: nothing is propagated, no event fires.
    Nothing,
    /// The command as the client sent it: propagated verbatim.
    Whole,
    /// This command redoes what was applied: propagated instead of the command.
    Command(Replicated<'a>),
    /// Exactly these commands redo what was applied (a create with its parameters spelled
    /// out, or the part done before an error): propagated instead of the command.
    Redo(Vec<Command<'a>>),
}

/// How far a write that applies its items (or sources) one after the other got: all of them,
/// or those before the first one refused.
#[derive(Clone, Copy)]
pub struct Progress {
    /// The write created the key, with parameters it chose (defaults a replica may not share).
    pub created: bool,
    /// An applied item changed the value.
    pub changed: bool,
    /// Items applied.
    pub done: usize,
    /// Items the command named.
    pub total: usize,
}

impl Progress {
    /// What such a write applied. A key it created, or a stop part-way, propagate as
    /// `redo(done)`: the commands that redo the first `done` items (on a new key, creating it
    /// with the parameters used). Otherwise the command as sent if it changed anything, else
    /// nothing.
    pub fn applied<'a, R: Into<Applied<'a>>>(self, redo: impl FnOnce(usize) -> R) -> Applied<'a> {
        if self.created || (self.changed && self.done < self.total) {
            redo(self.done).into()
        } else if self.changed {
            Applied::Whole
        } else {
            Applied::Nothing
        }
    }
}

impl<'a> From<Vec<Command<'a>>> for Applied<'a> {
    fn from(commands: Vec<Command<'a>>) -> Self {
        Applied::Redo(commands)
    }
}

impl<'a> From<Replicated<'a>> for Applied<'a> {
    fn from(command: Replicated<'a>) -> Self {
        Applied::Command(command)
    }
}

/// The one way a write command ends: replicas and the AOF get what was applied (see
/// [`Applied`]) and, when something changed, `key` is signalled as modified and the keyspace
/// event `event` fires on it (class `d`, module types). Called before the reply, also when
/// the reply is an error: a command that stopped part-way has still applied its first part.
pub fn finish_write(ctx: &Context, event: &CStr, key: &RedisString, applied: Applied) {
    match applied {
        Applied::Nothing => return,
        Applied::Whole => {
            ctx.replicate_verbatim();
        }
        Applied::Command(command) => command.replicate(ctx),
        Applied::Redo(commands) => redo(ctx, commands),
    }
    signal_modified(ctx, key);
    notify(ctx, NotifyEvent::MODULE, event, key);
}

/// Tells Redis that the key changed: transactions that `WATCH` it abort, and clients caching
/// it (`CLIENT TRACKING`) are told to drop it. The module has Redis leave this to it
/// (`NO_IMPLICIT_SIGNAL_MODIFIED`, module.rs), which would otherwise do it for every key a
/// write command opens: a write that changes nothing then disturbs no one, as with `PFADD`.
fn signal_modified(ctx: &Context, key: &RedisString) {
    // SAFETY: the context and key are live for the whole command.
    unsafe {
        raw::RedisModule_SignalModifiedKey.expect("SignalModifiedKey")(ctx.ctx, key.inner);
    }
}

/// Propagates the commands that redo a write: out of line, since creates and partial writes
/// are rare, so that the common ends of a write (verbatim, or nothing) stay short.
#[cold]
#[inline(never)]
fn redo(ctx: &Context, commands: Vec<Command>) {
    for (name, args) in commands {
        // Command names are literals of ours: never a NUL inside.
        let Ok(name) = CString::new(name) else {
            continue;
        };
        let mut command = Replicated::new(&name, args.len());
        args.iter().for_each(|arg| _ = command.text(arg));
        command.replicate(ctx);
    }
}

/// Fires a keyspace event; `event` is a C string literal, so nothing is allocated per call
/// (the crate's `notify_keyspace_event` copies the name into a fresh `CString` every time).
fn notify(ctx: &Context, class: NotifyEvent, event: &CStr, key: &RedisString) {
    // SAFETY: the context and key are live for the whole command; the API copies nothing it
    // keeps beyond the call.
    unsafe {
        raw::RedisModule_NotifyKeyspaceEvent.expect("NotifyKeyspaceEvent")(
            ctx.ctx,
            class.bits(),
            event.as_ptr(),
            key.inner,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redo(done: usize) -> Vec<Command<'static>> {
        vec![("X", vec![b"items".as_slice(); done])]
    }

    fn progress(created: bool, changed: bool, done: usize, total: usize) -> Progress {
        Progress {
            created,
            changed,
            done,
            total,
        }
    }

    fn redone(applied: Applied) -> Option<usize> {
        match applied {
            Applied::Redo(commands) => Some(commands[0].1.len()),
            _ => None,
        }
    }

    #[test]
    fn numbers_in_decimal() {
        let mut digits = [0; 20];
        for n in [0, 7, 10, 1_763_900_000_123, u64::MAX] {
            assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
        }
    }

    #[test]
    fn what_an_in_order_write_applied() {
        assert!(matches!(
            progress(false, false, 3, 3).applied(redo),
            Applied::Nothing
        ));
        assert!(matches!(
            progress(false, false, 1, 3).applied(redo),
            Applied::Nothing
        ));
        assert!(matches!(
            progress(false, true, 3, 3).applied(redo),
            Applied::Whole
        ));
        // Stopped part-way, or created: the first `done` items are redone.
        assert_eq!(redone(progress(false, true, 2, 3).applied(redo)), Some(2));
        assert_eq!(redone(progress(true, true, 3, 3).applied(redo)), Some(3));
        assert_eq!(redone(progress(true, false, 0, 3).applied(redo)), Some(0));
    }
}
