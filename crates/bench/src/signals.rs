//! Ctrl-C handling: SIGINT, SIGTERM and SIGHUP set a process-wide flag instead of
//! killing the process, so every long wait can notice it, stop its child and return
//! [`Interrupted`]; the callers' guards then stop servers, unmount and detach loop
//! devices on the normal return path.
//!
//! Invariants:
//! - The handler only stores the signal number (async-signal-safe); it never exits.
//! - Children run in their own process groups (see `exec`), so a terminal's Ctrl-C
//!   reaches only this process; cleanup of children is always done by us.
//! - Once set, the flag stays set for the life of the process.

use std::sync::atomic::{AtomicI32, Ordering};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// Install the handler for SIGINT, SIGTERM and SIGHUP (idempotent).
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a plain handler and an empty mask is valid;
        // the handler only touches an atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal that interrupted the run, if any.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// `Err(Interrupted)` once a signal has arrived.
pub fn check() -> anyhow::Result<()> {
    match received() {
        Some(s) => Err(Interrupted(s).into()),
        None => Ok(()),
    }
}

/// The error returned by every step that was stopped by a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted(pub i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            libc::SIGINT => "SIGINT",
            libc::SIGTERM => "SIGTERM",
            libc::SIGHUP => "SIGHUP",
            _ => "a signal",
        };
        write!(f, "interrupted by {name}")
    }
}

impl std::error::Error for Interrupted {}

/// True if `e` (or anything in its chain) is an [`Interrupted`].
pub fn is_interrupted(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<Interrupted>().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn interrupted_is_found_through_context() {
        let e: anyhow::Error = Interrupted(libc::SIGINT).into();
        let e = Err::<(), _>(e).context("running sysbench").unwrap_err();
        assert!(is_interrupted(&e));
        assert_eq!(format!("{e:#}"), "running sysbench: interrupted by SIGINT");
        assert!(!is_interrupted(&anyhow::anyhow!("other")));
    }
}
