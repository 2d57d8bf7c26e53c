//! Resumable receive, as `zfs receive -s`: the state a cut-off receive leaves
//! behind, its resume token, and the bookkeeping around them.
//!
//! Invariants:
//! - A partial receive lives in the hidden dataset `FS%recv`; its catalog
//!   property `%resume` holds the token of the position up to which its data is
//!   committed in the same txg (checkpoints write data and token together), so
//!   the token never claims more than survived a crash, and `resume_token` does
//!   not show a checkpoint's token until its txg is on disk. Data beyond the token is
//!   harmless: a resumed stream re-sends it and WRITE/FREE are idempotent.
//! - The position `(object, offset)` means: every object below `object` is
//!   complete, and `object` is complete below `offset` (a resumed stream sends
//!   its OBJECT record again, then its data from `offset` on).
//! - Only one receive into a dataset runs at a time (`claim_receive`), so the
//!   partial state of one is never discarded under another.
//! - A `%recv` without a token (a plain receive cut by a crash) is removed at
//!   import; one with a token is kept until resumed, replaced or aborted.

use crate::error::{Result, StoreError};
use crate::store::Store;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The catalog property of `FS%recv` that holds its resume token.
pub(crate) const RESUME_PROP: &str = "%resume";
/// Bytes of stream between two checkpoints of a resumable receive.
pub(crate) const CHECKPOINT_BYTES: u64 = 32 << 20;
/// Longest token accepted (they are about 300 characters).
const MAX_TOKEN: usize = 8192;

/// Where a resumed stream starts: see the module invariants.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResumePos {
    pub object: u64,
    pub offset: u64,
}

/// What a resume token says: which stream, and how far it was received.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ResumeToken {
    /// The sender's snapshot (FS@SNAP), as in the stream's BEGIN.
    pub snapshot: String,
    pub guid: u64,
    /// 0 for a full stream.
    pub from_guid: u64,
    pub pos: ResumePos,
    /// Stream bytes received so far (over every attempt).
    pub bytes: u64,
}

impl ResumeToken {
    /// `1-` and the hex of the token's JSON (opaque to users, as zfs's).
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).expect("token serializes");
        let mut s = String::with_capacity(2 + json.len() * 2);
        s.push_str("1-");
        for b in json {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }

    pub fn decode(token: &str) -> Result<ResumeToken> {
        let bad = || {
            StoreError::Invalid(
                "invalid resume token: copy it whole from `cachalot get -H -o value receive_resume_token FS` on the target"
                    .into(),
            )
        };
        let hex = token.trim().strip_prefix("1-").ok_or_else(bad)?;
        if hex.len() > MAX_TOKEN || !hex.len().is_multiple_of(2) {
            return Err(bad());
        }
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect();
        let t: ResumeToken = serde_json::from_slice(&bytes.ok_or_else(bad)?).map_err(|_| bad())?;
        if !t.snapshot.contains('@') {
            return Err(bad());
        }
        Ok(t)
    }
}

/// Datasets being received into, per store (keyed by the store's address).
static RECEIVING: Mutex<BTreeSet<(usize, String)>> = Mutex::new(BTreeSet::new());

/// Releases the claim of [`Store::claim_receive`] when dropped.
pub(crate) struct ReceiveClaim {
    key: (usize, String),
}

impl Drop for ReceiveClaim {
    fn drop(&mut self) {
        RECEIVING.lock().remove(&self.key);
    }
}

impl Store {
    /// Claim `fs` for one receive; a second concurrent one is refused.
    pub(crate) fn claim_receive(&self, fs: &str) -> Result<ReceiveClaim> {
        let key = (self as *const Store as usize, fs.to_string());
        if !RECEIVING.lock().insert(key.clone()) {
            return Err(StoreError::Busy(format!(
                "receive: another receive into '{fs}' is in progress"
            )));
        }
        Ok(ReceiveClaim { key })
    }

    /// The resume token of a partial receive into `fs`, if there is one.
    pub fn resume_token(&self, fs: &str) -> Option<String> {
        // Wait out a checkpoint in progress: its token is not durable yet.
        let _durable = self.resume_checkpoint.lock();
        let st = self.state.lock();
        st.catalog
            .by_name(&format!("{fs}%recv"))
            .and_then(|d| d.props.get(RESUME_PROP).cloned())
    }

    /// Record `token` on `tmp` and commit it with the data received so far.
    pub(crate) fn checkpoint_receive(&self, tmp: &str, token: Option<&ResumeToken>) -> Result<()> {
        let _durable = self.resume_checkpoint.lock();
        {
            let mut st = self.state.lock();
            let id = st
                .catalog
                .by_name(tmp)
                .map(|d| d.id)
                .ok_or_else(|| StoreError::NotFound(tmp.into()))?;
            let props = &mut st.catalog.datasets.get_mut(&id).expect("found").props;
            match token {
                Some(t) => props.insert(RESUME_PROP.into(), t.encode()),
                None => props.remove(RESUME_PROP),
            };
            st.mark_catalog_dirty();
        }
        if token.is_some() {
            self.sync()?;
        }
        Ok(())
    }

    /// The saved state of `tmp` must be the one a resumed stream continues.
    pub(crate) fn check_resume_state(
        &self,
        fs: &str,
        snapshot: &str,
        guid: u64,
        from_guid: u64,
        pos: ResumePos,
    ) -> Result<u64> {
        let Some(token) = self.resume_token(fs) else {
            return Err(StoreError::Invalid(format!(
                "receive: '{fs}' has no partially received state for this resumed stream of '{snapshot}': send the stream whole"
            )));
        };
        let saved = ResumeToken::decode(&token)?;
        if saved.guid != guid || saved.from_guid != from_guid || saved.pos != pos {
            return Err(StoreError::Invalid(format!(
                "receive: the resumed stream of '{snapshot}' does not continue the partial state of '{fs}' (it is of '{}'): send with the current token (cachalot get receive_resume_token {fs}) or abort it (receive -A {fs})",
                saved.snapshot
            )));
        }
        Ok(saved.bytes)
    }

    /// `receive -A FS`: discard a partial receive into `fs`.
    pub fn abort_receive(&self, fs: &str) -> Result<String> {
        self.check_live()?;
        let _claim = self.claim_receive(fs)?;
        let tmp = format!("{fs}%recv");
        if self.dataset(&tmp).is_err() {
            return Err(StoreError::Invalid(format!(
                "receive -A: '{fs}' has no partially received state to abort"
            )));
        }
        self.discard_partial(fs)
    }

    /// Destroy `FS%recv`; returns what it held, for the one-line message.
    pub(crate) fn discard_partial(&self, fs: &str) -> Result<String> {
        let tmp = format!("{fs}%recv");
        let what = match self.resume_token(fs).map(|t| ResumeToken::decode(&t)) {
            Some(Ok(t)) => format!(
                "discarded the partial receive of '{}' into '{fs}' ({} bytes received)",
                t.snapshot, t.bytes
            ),
            _ => format!("discarded the partial receive into '{fs}'"),
        };
        self.destroy_dataset(&tmp, true)?;
        self.sync()?;
        Ok(what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trips_and_garbage_is_refused() {
        let t = ResumeToken {
            snapshot: "tank/a@s1".into(),
            guid: 7,
            from_guid: 3,
            pos: ResumePos {
                object: 9,
                offset: 131072,
            },
            bytes: 12345,
        };
        assert_eq!(ResumeToken::decode(&t.encode()).unwrap(), t);
        // Mutated tokens (a user's typo, a cut paste) never panic.
        let good = t.encode().into_bytes();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(500) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut b = good.clone();
            let i = seed as usize % b.len();
            match seed >> 60 {
                0..=5 => b[i] = (seed >> 8) as u8,
                6..=10 => b.truncate(i),
                _ => b.insert(i, b"0123456789abcdef"[(seed >> 20) as usize % 16]),
            }
            let _ = ResumeToken::decode(&String::from_utf8_lossy(&b));
        }
        for bad in [
            "",
            "1-",
            "1-zz",
            "2-00",
            "1-7b7d",
            "1-0",
            &"1-00".repeat(5000),
        ] {
            assert!(ResumeToken::decode(bad).is_err(), "{bad:.20}");
        }
    }
}
