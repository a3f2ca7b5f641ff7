//! How a write command ends: replicas and the AOF get exactly what it applied, and a keyspace
//! event fires when it changed something. One policy for every family, so that a replica or an
//! AOF replay holds what the master holds, also after a command that stopped part-way.

use redis_module::{raw, Context, NotifyEvent, RedisString};
use std::ffi::CStr;

/// A command as it is replicated: its name and arguments.
pub type Command<'a> = (&'a str, Vec<&'a [u8]>);

/// What a write command applied, for [`finish_write`].
pub enum Applied<'a> {
    /// Nothing changed: nothing is propagated, no event fires.
    Nothing,
    /// The command as the client sent it: propagated verbatim.
    Whole,
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
    pub fn applied<'a>(self, redo: impl FnOnce(usize) -> Vec<Command<'a>>) -> Applied<'a> {
        if self.created || (self.changed && self.done < self.total) {
            Applied::Redo(redo(self.done))
        } else if self.changed {
            Applied::Whole
        } else {
            Applied::Nothing
        }
    }
}

/// The one way a write command ends: replicas and the AOF get what was applied (see
/// [`Applied`]) and, when something changed, the keyspace event `event` fires on `key` (class
/// `d`, module types). Called before the reply, also when the reply is an error: a command
/// that stopped part-way has still applied its first part.
pub fn finish_write(ctx: &Context, event: &CStr, key: &RedisString, applied: Applied) {
    match applied {
        Applied::Nothing => return,
        Applied::Whole => {
            ctx.replicate_verbatim();
        }
        Applied::Redo(commands) => {
            for (command, args) in &commands {
                ctx.replicate(command, &args[..]);
            }
        }
    }
    notify(ctx, NotifyEvent::MODULE, event, key);
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
