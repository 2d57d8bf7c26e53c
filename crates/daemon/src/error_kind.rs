//! The kind of an op's error, carried beside its message so the REST API picks
//! its error code from the kind, not from the message's words.
//!
//! Ops return `Result<Value, String>`; an error made from a typed engine error
//! (or a daemon error that knows its kind) goes through [`tag`], which records
//! `(kind, message)` for the current thread. `Daemon::handle` runs an op on one
//! thread and then asks [`take`] for the kind of the message it got back.
//!
//! Invariants:
//! - A kind is reported only when the final message is exactly the tagged one:
//!   a message rewrapped or replaced since (`format!("...: {e}")`) gets no kind,
//!   and the API falls back to its message rules; so a recorded kind can never
//!   be attached to an unrelated error.
//! - [`reset`] at the start and [`take`] at the end of each op: nothing leaks
//!   from one op to the next on a pooled thread.

use cachalot_datasets::ErrorKind;
use std::cell::RefCell;

thread_local! {
    static LAST: RefCell<Option<(ErrorKind, String)>> = const { RefCell::new(None) };
}

/// `msg`, remembered as an error of `kind` on this thread.
pub fn tag(kind: ErrorKind, msg: String) -> String {
    LAST.with(|l| *l.borrow_mut() = Some((kind, msg.clone())));
    msg
}

/// Forget any kind recorded on this thread.
pub fn reset() {
    LAST.with(|l| *l.borrow_mut() = None);
}

/// The kind of `msg` if it is the last tagged message of this thread (and forget it).
pub fn take(msg: &str) -> Option<ErrorKind> {
    LAST.with(|l| l.borrow_mut().take())
        .filter(|(_, m)| m == msg)
        .map(|(k, _)| k)
}

/// The REST API's code of a kind (see `api::error::CODES`).
pub fn code(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::NotFound => "not_found",
        ErrorKind::Exists => "already_exists",
        ErrorKind::Invalid => "invalid_request",
        ErrorKind::Busy => "busy",
        ErrorKind::Unavailable => "unavailable",
        // Out of space was `failed` before kinds existed; the codes stay stable.
        ErrorKind::NoSpace | ErrorKind::Failed => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_sticks_only_to_its_own_message() {
        reset();
        let m = tag(ErrorKind::Busy, "x is held".into());
        assert_eq!(take(&m), Some(ErrorKind::Busy));
        assert_eq!(take(&m), None, "taken once");
        let m = tag(ErrorKind::NotFound, "a".into());
        assert_eq!(take(&format!("wrapped: {m}")), None);
        tag(ErrorKind::NotFound, "b".into());
        reset();
        assert_eq!(take("b"), None);
    }
}
