//! Deliberately planted bugs, for showing that the simulator (crates/sim) finds
//! what it claims to. They exist only with the `planted-bugs` cargo feature,
//! which nothing that ships enables; without it `active` is a constant `false`
//! and the planted branches compile away.

use std::sync::atomic::{AtomicU8, Ordering};

/// A bug that can be planted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Bug {
    None = 0,
    /// `commit` skips the flush between the txg's blocks and its uberblock: a
    /// power cut can leave an uberblock pointing at blocks that never landed.
    NoFlushBeforeUberblock = 1,
    /// An intent-log commit skips the device flush: an fsync is acknowledged
    /// before its records are durable.
    NoLogFlush = 2,
    /// A raidz read whose data columns all read but fail the checksum gives up
    /// instead of reconstructing from parity: one corrupt column is an error.
    RaidzNoReconstruct = 3,
    /// A resilver leaves out one block of its list (the middle one): the
    /// replacement lacks it, which the loss of another device shows.
    ResilverSkipBlock = 4,
}

impl Bug {
    pub fn parse(s: &str) -> Option<Bug> {
        match s {
            "none" => Some(Bug::None),
            "no-flush-before-uberblock" => Some(Bug::NoFlushBeforeUberblock),
            "no-log-flush" => Some(Bug::NoLogFlush),
            "raidz-no-reconstruct" => Some(Bug::RaidzNoReconstruct),
            "resilver-skip-block" => Some(Bug::ResilverSkipBlock),
            _ => None,
        }
    }
}

static ACTIVE: AtomicU8 = AtomicU8::new(0);

/// Plant `bug` process-wide. Without the feature this changes nothing and
/// returns false.
pub fn plant(bug: Bug) -> bool {
    ACTIVE.store(bug as u8, Ordering::Relaxed);
    cfg!(feature = "planted-bugs")
}

/// True if `bug` is planted (always false without the feature).
#[inline]
pub fn active(bug: Bug) -> bool {
    cfg!(feature = "planted-bugs") && ACTIVE.load(Ordering::Relaxed) == bug as u8
}
