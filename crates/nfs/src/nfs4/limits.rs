//! The size limit on a COMPOUND's reply (RFC 8881 sections 2.10.6.1.3,
//! 2.10.6.4 and 18.46.3): a COMPOUND whose SEQUENCE asks for its reply to be
//! cached (sa_cachethis) must fit the session's ca_maxresponsesize_cached, or
//! the operation that would push it over is answered
//! NFS4ERR_REP_TOO_BIG_TO_CACHE and the COMPOUND stops there. (Replies not to
//! be cached are bounded by READ's and READDIR's own clamps to the record
//! size, not here.)
//!
//! Invariants:
//! - A reply that passed [`Limit::after`] for every operation is at most the
//!   limit, so the slot always caches a sa_cachethis reply whole and a retry
//!   never gets RETRY_UNCACHED_REP for it.
//! - Operations whose reply size the client chooses (READ's count, READDIR's
//!   maxcount) are refused before they run when that size cannot fit
//!   ([`Limit::before`]), as knfsd does; the rest are checked after they ran.
//!   Those that change state (OPEN, LOCK, CREATE...) have replies far under
//!   `state::MIN_CACHED`, so the check after them never undoes a change the
//!   client would not hear of unless the COMPOUND is mostly other operations.

use super::consts::*;
use super::ops::Op;
use super::state::Session;

/// The limit of one COMPOUND's reply.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    /// Bytes the whole COMPOUND4res may take.
    pub max: usize,
}

/// The least bytes an operation's result (after its number and status) will
/// take, known before it runs; 0 when only running it tells.
fn known_before(op: &Op<'_>) -> usize {
    match op {
        // eof, then the data as an opaque.
        Op::Read { count, .. } => 8 + (*count as usize).div_ceil(4) * 4,
        Op::Readdir { maxcount, .. } => *maxcount as usize,
        // Its attrsset bitmap is there even when it fails.
        Op::Setattr { .. } => 4,
        _ => 0,
    }
}

impl Limit {
    /// The limit of a COMPOUND on `session` (`cachethis`: sa_cachethis).
    pub fn of(session: &Session, cachethis: bool) -> Option<Limit> {
        cachethis.then_some(Limit {
            max: session.fore.maxresponsesize_cached as usize,
        })
    }

    /// May `op` run when the reply so far (COMPOUND4res header included, and
    /// the operation's number) is `used` bytes long?
    pub fn before(&self, used: usize, op: &Op<'_>) -> Result<(), u32> {
        self.fits(used + 4 + known_before(op))
    }

    /// Does the reply fit with an operation's status and `body` bytes of
    /// result after `used`?
    pub fn after(&self, used: usize, body: usize) -> Result<(), u32> {
        self.fits(used + 4 + body)
    }

    fn fits(&self, n: usize) -> Result<(), u32> {
        if n <= self.max {
            Ok(())
        } else {
            Err(NFS4ERR_REP_TOO_BIG_TO_CACHE)
        }
    }
}
