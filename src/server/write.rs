//! How a write command ends: replicas and the AOF get exactly what it applied, and a keyspace
//! event fires when it changed something. One policy for every family, so that a replica or an
//! AOF replay holds what the master holds, also after a command that stopped part-way.
//!
//! What is replicated is built as [`Replicated`] commands: the client's own argument strings,
//! [`Word`]s made once and the [`Remembered`] strings of repeated parameters are handed to
//! `RedisModule_Replicate` as they are (its "v" format takes its own references), so only
//! the numbers that change from call to call (a seed, a time) are made per command.

use redis_module::{raw, Context, NotifyEvent, RedisString};
use std::ffi::CStr;
use std::marker::PhantomData;
use std::ptr::{null_mut, NonNull};
use std::sync::{Mutex, OnceLock};

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

/// Keywords of the replicated commands of every family.
pub static CAPACITY: Word = Word::new(c"CAPACITY");
pub static ERROR: Word = Word::new(c"ERROR");
pub static ITEMS: Word = Word::new(c"ITEMS");

/// A parameter that replicated commands repeat with the same value call after call (a
/// create's rate or capacity: mostly the configured defaults). The string of the last value
/// is kept and handed out again while that value comes, which spares formatting it (an
/// `f64`'s shortest text takes several hundred instructions) and making a Redis string.
pub struct Remembered {
    /// The last value's identity (a number, or an `f64`'s bits) and its string.
    last: Mutex<Option<(u64, Kept)>>,
}

impl Remembered {
    pub const fn new() -> Self {
        Self {
            last: Mutex::new(None),
        }
    }

    /// The string of the value `id`, made from `text()` unless it is the last one's; with a
    /// reference for the caller, who frees it. (The one kept is freed when another value
    /// replaces it, so a command holds its own reference, not the table's.)
    fn string(&self, id: u64, text: impl FnOnce() -> Vec<u8>) -> RedisString {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let kept = match &*last {
            Some((same, kept)) if *same == id => kept.0,
            _ => {
                let made =
                    NonNull::new(make_string(&text())).expect("CreateString returns a string");
                if let Some((_, old)) = last.replace((id, Kept(made))) {
                    // SAFETY: the reference this table held (commands hold their own).
                    unsafe {
                        raw::RedisModule_FreeString.expect("FreeString")(null_mut(), old.0.as_ptr())
                    };
                }
                made
            }
        };
        // SAFETY: a live string (kept above); a null context retains it for the caller, who
        // frees it through the returned RedisString.
        unsafe { raw::RedisModule_RetainString.expect("RetainString")(null_mut(), kept.as_ptr()) };
        RedisString::from_redis_module_string(null_mut(), kept.as_ptr())
    }
}

impl Default for Remembered {
    fn default() -> Self {
        Self::new()
    }
}

/// `n` in decimal, written at the end of `digits` (20 is room for any u64): no allocation,
/// two digits a division (a random seed has twenty).
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    /// "00", "01", … "99".
    const PAIRS: [u8; 200] = {
        let mut pairs = [0; 200];
        let mut i = 0;
        while i < 100 {
            pairs[2 * i] = b'0' + (i / 10) as u8;
            pairs[2 * i + 1] = b'0' + (i % 10) as u8;
            i += 1;
        }
        pairs
    };
    let mut start = digits.len();
    while n >= 10 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        start -= 2;
        digits[start..start + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n > 0 || start == digits.len() {
        start -= 1;
        digits[start] = b'0' + n as u8;
    }
    &digits[start..]
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
/// client's arguments (alive for the whole command, hence `'a`), [`Word`]s and
/// [`Remembered`] parameters are passed as they are; other numbers and texts are made for it
/// and freed once it is replicated.
pub struct Replicated<'a> {
    name: &'a CStr,
    argv: Vec<*mut raw::RedisModuleString>,
    /// Which of the first 64 strings in `argv` this command holds a reference to, a bit
    /// each, released on drop: a mask, not a list, whose allocation would cost a create a
    /// few percent (a create holds four or five, its numbers).
    held: u64,
    /// Those it holds past the first 64 (sources' names), released on drop.
    held_past: Vec<RedisString>,
    client: PhantomData<&'a RedisString>,
}

impl<'a> Replicated<'a> {
    /// The command `name` with room for `args` arguments.
    pub fn new(name: &'a CStr, args: usize) -> Self {
        Self {
            name,
            argv: Vec::with_capacity(args),
            held: 0,
            held_past: Vec::new(),
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
        self.held(RedisString::from_redis_module_string(
            null_mut(),
            make_string(text),
        ))
    }

    /// A number that is mostly the same from one command to the next (see [`Remembered`]).
    pub fn remembered_number(&mut self, remembered: &Remembered, n: u64) -> &mut Self {
        self.held(remembered.string(n, || {
            let mut digits = [0; 20];
            decimal(n, &mut digits).to_vec()
        }))
    }

    /// An `f64` that is mostly the same from one command to the next, as the shortest text
    /// that parses back to it (see [`Remembered`]).
    pub fn remembered_f64(&mut self, remembered: &Remembered, x: f64) -> &mut Self {
        self.held(remembered.string(x.to_bits(), || x.to_string().into_bytes()))
    }

    /// A string this command holds a reference to, released on drop.
    fn held(&mut self, string: RedisString) -> &mut Self {
        let at = self.argv.len();
        self.argv.push(string.inner);
        match at < 64 {
            true => {
                self.held |= 1 << at;
                // Released through the mask (`Drop`).
                std::mem::forget(string);
            }
            false => self.held_past.push(string),
        }
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

impl Drop for Replicated<'_> {
    fn drop(&mut self) {
        let mut held = self.held;
        while held != 0 {
            let at = held.trailing_zeros() as usize;
            held &= held - 1;
            // SAFETY: a string `held` took a reference to (made without a context), released
            // once.
            unsafe { raw::RedisModule_FreeString.expect("FreeString")(null_mut(), self.argv[at]) };
        }
    }
}

/// What a write command applied, for [`finish_write`].
pub enum Applied<'a> {
    /// Nothing changed: nothing is propagated, no event fires.
    Nothing,
    /// The command as the client sent it: propagated verbatim.
    Whole,
    /// This command redoes what was applied (a create with its parameters spelled out, or the
    /// part done before an error): propagated instead of the command.
    Command(Replicated<'a>),
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
    /// `redo(done)`: the command that redoes the first `done` items (on a new key, creating it
    /// with the parameters used). Otherwise the command as sent if it changed anything, else
    /// nothing.
    pub fn applied<'a>(self, redo: impl FnOnce(usize) -> Replicated<'a>) -> Applied<'a> {
        if self.created || (self.changed && self.done < self.total) {
            Applied::Command(redo(self.done))
        } else if self.changed {
            Applied::Whole
        } else {
            Applied::Nothing
        }
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

    /// A command named after `done` (made without a server: no argument).
    fn redo(done: usize) -> Replicated<'static> {
        Replicated::new([c"0", c"1", c"2", c"3"][done], 0)
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
            Applied::Command(command) => command.name.to_str().ok()?.parse().ok(),
            _ => None,
        }
    }

    #[test]
    fn numbers_in_decimal() {
        let mut digits = [0; 20];
        let powers = (0..20).flat_map(|e| [10u64.pow(e) - 1, 10u64.pow(e)]);
        for n in (0..=1000)
            .chain(powers)
            .chain([1_763_900_000_123, u64::MAX])
        {
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
