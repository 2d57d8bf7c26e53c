//! A dataset handle: the internal data path (objects of one dataset) with space
//! checks, write throttling and the sync-write path in front of the object layer.
//!
//! Invariants:
//! - A write is accepted only if the pool and every quota above the dataset can
//!   hold it (plus what is already dirty); truncates and deletes are always
//!   accepted because they free space. A destroyed dataset refuses everything.
//! - Every write and truncate is applied and logged (intent log itx) under the
//!   object set's txg hold, so the itx's txg is the txg holding the change.
//! - Every change is logged: writes, truncates, punches, object creation and
//!   deletion, bonus updates, and the changes of a `Tx` as one atomic group
//!   (pushed when the `Tx` ends, still inside its txg hold). So `fsync` returns
//!   once the intent log is durable, whatever changed: a rename or a create costs
//!   one log write, not a txg. Only changes made while `sync=disabled` (not
//!   logged) make the next fsync commit a txg (`meta_txg`).
//! - A `Tx` logs a write as the bytes it changes (`changed_span`): replay applies
//!   records in order on the committed tree, so the unchanged bytes are already
//!   what they were. A directory insert logs its entry and the bucket header, not
//!   the whole 16 KiB bucket.
//! - `sync=disabled` makes fsync return at once (documented: data then reaches
//!   disk with the next commit); `sync=always` makes every write, and every `Tx`
//!   (a namespace change), durable before it returns.

use crate::catalog::DatasetKind;
use crate::error::{Result, StoreError};
use crate::store::Store;
use cachalot_objects::zil::{CommitOutcome, Record};
use cachalot_objects::{ObjectInfo, ObjectSet, Payload, ReadFrom};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};

/// Object type of plain objects created through the data path.
pub const OTYPE_PLAIN: u8 = 2;
/// Object type of a volume's data object.
pub const OTYPE_VOLUME: u8 = 3;

/// The `sync` property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SyncPolicy {
    Standard = 0,
    Always = 1,
    Disabled = 2,
}

impl SyncPolicy {
    pub fn parse(s: &str) -> Self {
        match s {
            "always" => SyncPolicy::Always,
            "disabled" => SyncPolicy::Disabled,
            _ => SyncPolicy::Standard,
        }
    }
}

pub struct Dataset {
    pub(crate) id: u64,
    name: RwLock<String>,
    kind: DatasetKind,
    pub(crate) objset: ObjectSet,
    store: Weak<Store>,
    destroyed: AtomicBool,
    users: AtomicU64,
    /// Highest txg holding a change that was not logged (made while
    /// sync=disabled): an fsync must commit it as a txg.
    meta_txg: AtomicU64,
    sync: AtomicU8,
    /// A snapshot's contents: every change is refused.
    readonly: bool,
    ops: cachalot_analytics::Stat,
}

impl Dataset {
    pub(crate) fn new(
        id: u64,
        name: String,
        kind: DatasetKind,
        objset: ObjectSet,
        store: Weak<Store>,
    ) -> Self {
        objset.zil().set_name(&name);
        Dataset {
            id,
            name: RwLock::new(name),
            kind,
            objset,
            store,
            destroyed: AtomicBool::new(false),
            users: AtomicU64::new(0),
            meta_txg: AtomicU64::new(0),
            sync: AtomicU8::new(SyncPolicy::Standard as u8),
            readonly: false,
            ops: cachalot_analytics::global().stat("objects.ops", &["dataset", "op"]),
        }
    }

    /// A read-only handle (a snapshot's contents).
    pub(crate) fn new_readonly(
        id: u64,
        name: String,
        kind: DatasetKind,
        objset: ObjectSet,
        store: Weak<Store>,
    ) -> Self {
        Dataset {
            readonly: true,
            ..Dataset::new(id, name, kind, objset, store)
        }
    }

    pub fn is_readonly(&self) -> bool {
        self.readonly
    }

    /// The store, for an operation that changes something.
    fn store_rw(&self) -> Result<Arc<Store>> {
        if self.readonly {
            return Err(StoreError::ReadOnly(format!(
                "'{}' is a snapshot: it is read-only",
                self.name()
            )));
        }
        self.store()
    }

    pub fn name(&self) -> String {
        self.name.read().clone()
    }
    /// The dataset's id in its pool's catalog: never reused, kept across rename,
    /// export and import (NFS file handles name it).
    pub fn id(&self) -> u64 {
        self.id
    }
    pub(crate) fn set_name(&self, name: &str) {
        *self.name.write() = name.to_string();
        self.objset.zil().set_name(name);
    }
    pub fn kind(&self) -> DatasetKind {
        self.kind
    }
    pub fn objset(&self) -> &ObjectSet {
        &self.objset
    }

    /// The sync policy in force (what `get sync` reports is what this applies).
    pub fn sync_policy(&self) -> SyncPolicy {
        match self.sync.load(Ordering::Relaxed) {
            1 => SyncPolicy::Always,
            2 => SyncPolicy::Disabled,
            _ => SyncPolicy::Standard,
        }
    }

    /// Apply the `sync` and `logbias` properties.
    pub(crate) fn set_policy(&self, sync: SyncPolicy, logbias_latency: bool) {
        self.sync.store(sync as u8, Ordering::Relaxed);
        self.objset.zil().set_use_slog(logbias_latency);
    }

    /// Frontends (mounts, exports) hold the dataset busy so it cannot be destroyed.
    pub fn hold(&self) {
        self.users.fetch_add(1, Ordering::AcqRel);
    }
    pub fn release(&self) {
        self.users.fetch_sub(1, Ordering::AcqRel);
    }
    pub(crate) fn busy(&self) -> bool {
        self.users.load(Ordering::Acquire) > 0
    }
    pub(crate) fn mark_destroyed(&self) {
        self.destroyed.store(true, Ordering::Release);
    }

    fn store(&self) -> Result<Arc<Store>> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(StoreError::NotFound(self.name()));
        }
        let s = self
            .store
            .upgrade()
            .ok_or_else(|| StoreError::Exported(self.name()))?;
        s.check_live()?;
        Ok(s)
    }

    /// Structure changed in the open txg: an fsync must commit a txg.
    fn note_meta(&self) {
        self.meta_txg
            .fetch_max(self.objset.open_txg(), Ordering::AcqRel);
    }

    /// Log `recs` (one atomic group) as changes of the open txg, or, when the
    /// policy logs nothing, note that an fsync must commit a txg. Called inside
    /// the txg hold that covers the changes.
    fn log_changes(&self, recs: Vec<Record>) {
        if recs.is_empty() {
            return;
        }
        if self.sync_policy() == SyncPolicy::Disabled {
            self.note_meta();
        } else {
            self.objset.zil().log_group(self.objset.open_txg(), recs);
        }
    }

    /// `Create` record of object `obj` just created.
    fn create_record(&self, obj: u64) -> Result<Record> {
        let info = self.objset.info(obj)?;
        Ok(Record::Create {
            obj,
            otype: info.otype,
            blksz: info.blksz,
            gen: info.gen,
        })
    }

    /// Space check, with one commit of pending dirty data before giving up.
    fn reserve(&self, s: &Store, bytes: u64) -> Result<()> {
        if let Err(e) = s.check_space(self.id, bytes) {
            // The estimate counts dirty data pessimistically: commit it and look again
            // before telling the writer the space is gone.
            // Freed space becomes allocatable only after the next commit: with
            // deferred frees waiting, committing twice releases them.
            let deferred = s.pool().deferred_bytes() > 0;
            if !matches!(e, StoreError::NoSpace(_) | StoreError::Quota(_))
                || (s.dirty.load(Ordering::Relaxed) == 0 && !deferred)
            {
                return Err(e);
            }
            s.sync()?;
            if s.check_space(self.id, bytes).is_err() && deferred {
                s.sync()?;
            }
            s.check_space(self.id, bytes)?;
        }
        Ok(())
    }

    pub fn create_object(&self) -> Result<u64> {
        let s = self.store_rw()?;
        self.reserve(&s, 512)?;
        let _txg = self.objset.hold_txg();
        let id = self.objset.create_object(OTYPE_PLAIN)?;
        self.log_changes(vec![self.create_record(id)?]);
        Ok(id)
    }

    pub fn write(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
        self.write_payload(obj, off, &data.into())
    }

    /// [`Dataset::write`] of a [`Payload`]: its owned record-sized pieces
    /// become the records without a copy (`ObjectSet::write_payload`).
    pub fn write_payload(&self, obj: u64, off: u64, data: &Payload<'_>) -> Result<()> {
        self.write_inner(obj, off, data, false, false)
    }

    /// A write that is durable when it returns (O_DSYNC): one log commit, shared
    /// with concurrent sync writers.
    pub fn write_sync(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
        self.write_inner(obj, off, &data.into(), true, false)
    }

    /// A write (durable when it returns if `durable`) whose full records the
    /// caller also compresses, checksums and writes at their final place before
    /// returning (`ObjectSet::write_behind`): the next log commit logs them by
    /// reference and the txg sync links them, so neither writes them, and the
    /// work runs on the writers' threads in parallel instead of on the one
    /// committing thread. For a volume, whose writes are mostly whole blocks
    /// that a flush soon asks for; a block rewritten within the txg costs one
    /// extra block write. Owned block-sized pieces of `data` become the
    /// records without a copy (`ObjectSet::write_payload`).
    pub fn write_behind<'a>(
        &self,
        obj: u64,
        off: u64,
        data: impl Into<Payload<'a>>,
        durable: bool,
    ) -> Result<()> {
        self.write_inner(obj, off, &data.into(), durable, true)
    }

    /// A write of `receive`, which fills a hidden dataset that a crash discards
    /// whole: nothing is logged in the intent log (a log record would copy every
    /// byte of the stream once more).
    pub(crate) fn write_unlogged(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
        let s = self.store_rw()?;
        self.reserve(&s, data.len() as u64)?;
        s.throttle()?;
        {
            let _txg = self.objset.hold_txg();
            self.objset.write(obj, off, data)?;
        }
        s.dirty.fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// A hole of `receive` (unlogged, as `write_unlogged`), bounded by the data
    /// present in the range, whatever its length.
    pub(crate) fn punch_unlogged(&self, obj: u64, off: u64, len: u64) -> Result<()> {
        let s = self.store_rw()?;
        s.throttle()?;
        {
            let _txg = self.objset.hold_txg();
            self.objset.punch(obj, off, len)?;
        }
        s.dirty.fetch_add(4096, Ordering::Relaxed);
        Ok(())
    }

    /// Make `[off, off + len)` of object `obj` read as zeros; whole records
    /// become holes whose blocks are freed at the next commit (a volume's discard).
    /// Logged as a `Punch` record, so the next `fsync` writes the log only; a
    /// crash before that fsync may lose the punch (the range reads its old
    /// data), as it may lose any write that was not flushed.
    pub fn punch(&self, obj: u64, off: u64, len: u64) -> Result<()> {
        let s = self.store_rw()?;
        s.throttle()?;
        let t0 = std::time::Instant::now();
        {
            let _txg = self.objset.hold_txg();
            self.objset.punch(obj, off, len)?;
            self.log_changes(vec![Record::Punch { obj, off, len }]);
        }
        s.dirty.fetch_add(4096, Ordering::Relaxed);
        if self.sync_policy() == SyncPolicy::Always {
            self.commit_log(&s)?;
        }
        self.ops.record(&[&self.name(), "punch"], len, t0.elapsed());
        Ok(())
    }

    /// True once the dataset was destroyed or replaced by a rollback: a holder
    /// should look the dataset up again by name.
    pub fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::Acquire)
    }

    fn write_inner(
        &self,
        obj: u64,
        off: u64,
        data: &Payload<'_>,
        durable: bool,
        behind: bool,
    ) -> Result<()> {
        let s = self.store_rw()?;
        self.reserve(&s, data.len() as u64)?;
        s.throttle()?;
        let t0 = std::time::Instant::now();
        let policy = self.sync_policy();
        let txg = {
            let _txg = self.objset.hold_txg();
            self.objset.write_payload(obj, off, data)?;
            let txg = self.objset.open_txg();
            if policy != SyncPolicy::Disabled {
                // A large write is not copied into its itx: the log reads it
                // from the object set if it ever logs it (see `WriteLazy`).
                let rec = if data.len() >= cachalot_objects::zil::BY_REFERENCE_MIN {
                    Record::WriteLazy {
                        obj,
                        off,
                        len: data.len() as u64,
                    }
                } else {
                    Record::Write {
                        obj,
                        off,
                        data: data.shared(0, data.len()),
                    }
                };
                self.objset.zil().log(txg, rec);
            }
            txg
        };
        s.dirty.fetch_add(data.len() as u64, Ordering::Relaxed);
        if behind {
            // Outside the hold: a sync must not wait for these block writes. A
            // sync that froze `txg` meanwhile makes this a no-op or an orphan.
            self.objset.write_behind(obj, off, data.len() as u64, txg);
        }
        if policy == SyncPolicy::Always || (durable && policy != SyncPolicy::Disabled) {
            self.commit_log(&s)?;
        }
        self.ops.record(
            &[&self.name(), if durable { "write_sync" } else { "write" }],
            data.len() as u64,
            t0.elapsed(),
        );
        Ok(())
    }

    pub fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        self.store()?;
        let t0 = std::time::Instant::now();
        let data = self.objset.read(obj, off, len)?;
        self.record_read(data.len(), t0);
        Ok(data)
    }

    /// `read` with the whole records it covers shared, not copied
    /// (`ObjectSet::read_payload`). None when `from` is `Memory` and a record
    /// would have to come from a device (not counted as a read).
    pub fn read_payload(
        &self,
        obj: u64,
        off: u64,
        len: usize,
        from: ReadFrom,
    ) -> Result<Option<Payload<'static>>> {
        self.store()?;
        let t0 = std::time::Instant::now();
        let data = self.objset.read_payload(obj, off, len, from)?;
        if let Some(d) = &data {
            self.record_read(d.len(), t0);
        }
        Ok(data)
    }

    fn record_read(&self, len: usize, t0: std::time::Instant) {
        self.ops
            .record(&[&self.name(), "read"], len as u64, t0.elapsed());
    }

    pub fn truncate(&self, obj: u64, size: u64) -> Result<()> {
        let s = self.store_rw()?;
        if size > 1 << 60 {
            return Err(StoreError::Invalid(
                "size beyond the maximum object size".into(),
            ));
        }
        let policy = self.sync_policy();
        {
            let _txg = self.objset.hold_txg();
            self.objset.truncate(obj, size)?;
            if policy != SyncPolicy::Disabled {
                self.objset
                    .zil()
                    .log(self.objset.open_txg(), Record::Truncate { obj, size });
            }
        }
        s.dirty.fetch_add(4096, Ordering::Relaxed);
        if policy == SyncPolicy::Always {
            self.commit_log(&s)?;
        }
        Ok(())
    }

    pub fn delete_object(&self, obj: u64) -> Result<()> {
        self.store_rw()?;
        let _txg = self.objset.hold_txg();
        self.objset.delete_object(obj)?;
        self.log_changes(vec![Record::Delete { obj }]);
        Ok(())
    }

    pub fn object_size(&self, obj: u64) -> Result<u64> {
        self.store()?;
        Ok(self.objset.info(obj)?.size)
    }

    pub fn object_info(&self, obj: u64) -> Result<ObjectInfo> {
        self.store()?;
        Ok(self.objset.info(obj)?)
    }

    /// Replace an object's bonus bytes (up to 320: attributes of the layer above),
    /// logged, so the next fsync makes it durable (an mtime, a dropped suid bit).
    pub fn set_bonus(&self, obj: u64, bonus: &[u8]) -> Result<()> {
        self.store_rw()?;
        let _txg = self.objset.hold_txg();
        self.objset.set_bonus(obj, bonus)?;
        self.log_changes(vec![bonus_record(obj, bonus)]);
        Ok(())
    }

    /// Start a transaction for a multi-object change (a rename touches two
    /// directories and an inode): space is checked and the writer throttled first,
    /// then every change made through the `Tx` lands in the same txg, and is
    /// logged as one atomic group when the `Tx` ends. A later fsync of this
    /// dataset writes that group to the intent log.
    pub fn begin(&self, bytes: u64) -> Result<Tx<'_>> {
        let s = self.store_rw()?;
        if bytes > 0 {
            self.reserve(&s, bytes)?;
        }
        s.throttle()?;
        Ok(Tx {
            ds: self,
            store: s,
            log: Mutex::new(Vec::new()),
            txg: Some(self.objset.hold_txg()),
        })
    }

    pub fn list_objects(&self) -> Result<Vec<u64>> {
        self.store()?;
        Ok(self.objset.list_objects()?)
    }

    /// Make everything written so far durable.
    pub fn fsync(&self) -> Result<()> {
        let s = self.store()?;
        let t0 = std::time::Instant::now();
        match self.sync_policy() {
            SyncPolicy::Disabled => return Ok(()),
            _ if self.meta_txg.load(Ordering::Acquire) > s.synced_txg() => {
                s.sync()?;
            }
            _ => self.commit_log(&s)?,
        }
        self.ops.record(&[&self.name(), "fsync"], 0, t0.elapsed());
        Ok(())
    }

    /// Commit the intent log up to everything logged so far.
    fn commit_log(&self, s: &Store) -> Result<()> {
        // The log's blocks (copies of the dirty data, or its blocks written early
        // by reference) are allocated now, beside the space the next txg needs
        // for that same data: writes were admitted against free space that did
        // not count them. Invariant: a log commit never takes space a txg
        // commit needs; when the pool could not hold the dirty data twice over
        // (its log copy and its txg), commit the txg instead, which makes
        // everything durable and needs no log space. (An fsync with nothing
        // left to log returns first: the space check walks every dataset's
        // reservation under the state lock.)
        let tail = self.objset.zil().tail();
        if self.objset.zil().is_durable(tail) {
            return Ok(());
        }
        let dirty = s.dirty.load(Ordering::Relaxed);
        if s.check_space(self.id, dirty).is_err() {
            return s.sync().map(|_| ());
        }
        loop {
            match self.objset.zil_commit(tail)? {
                CommitOutcome::Durable => return Ok(()),
                // First log write since import, or after a log device failed: the
                // chain's header must be committed first; that commit also covers
                // everything asked for.
                CommitOutcome::NeedTxgCommit => {
                    s.sync()?;
                }
            }
        }
    }
}

/// A `Bonus` record: the bonus without its trailing zeros (`set_bonus` pads
/// with zeros, so they need not be logged).
fn bonus_record(obj: u64, bonus: &[u8]) -> Record {
    let len = bonus.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
    Record::Bonus {
        obj,
        data: bonus[..len].into(),
    }
}

/// The part of `new`, about to be written where `old` is (`old` may be shorter:
/// the object ends there), that changes anything: `(start, end)` offsets in
/// `new`, or `None` if nothing changes. Bytes past the end of `old` always count
/// (writing them grows the object), so the logged write ends where the real one
/// does and replays the same size and block-size growth.
fn changed_span(old: &[u8], new: &[u8]) -> Option<(usize, usize)> {
    let end = if new.len() > old.len() {
        new.len()
    } else {
        new.iter().zip(old).rposition(|(a, b)| a != b)? + 1
    };
    let start = new
        .iter()
        .zip(old)
        .position(|(a, b)| a != b)
        .unwrap_or(old.len())
        .min(end);
    Some((start, end))
}

/// A group of changes to one dataset that commit together (see `Dataset::begin`).
pub struct Tx<'a> {
    ds: &'a Dataset,
    store: Arc<Store>,
    /// The changes made so far, logged as one group when the `Tx` ends.
    log: Mutex<Vec<Record>>,
    /// The txg hold (released at the end of `drop`, before a sync=always commit).
    txg: Option<parking_lot::RwLockReadGuard<'a, ()>>,
}

impl Tx<'_> {
    pub fn create_object(&self) -> Result<u64> {
        let obj = self.ds.objset.create_object(OTYPE_PLAIN)?;
        self.log.lock().push(self.ds.create_record(obj)?);
        Ok(obj)
    }
    pub fn delete_object(&self, obj: u64) -> Result<()> {
        self.ds.objset.delete_object(obj)?;
        self.log.lock().push(Record::Delete { obj });
        Ok(())
    }
    pub fn write(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
        let old = self.ds.objset.read(obj, off, data.len())?;
        self.ds.objset.write(obj, off, data)?;
        self.store
            .dirty
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        if let Some((a, b)) = changed_span(&old, data) {
            self.log.lock().push(Record::Write {
                obj,
                off: off + a as u64,
                data: data[a..b].into(),
            });
        }
        Ok(())
    }
    pub fn truncate(&self, obj: u64, size: u64) -> Result<()> {
        if size > 1 << 60 {
            return Err(StoreError::Invalid(
                "size beyond the maximum object size".into(),
            ));
        }
        self.ds.objset.truncate(obj, size)?;
        self.store.dirty.fetch_add(4096, Ordering::Relaxed);
        self.log.lock().push(Record::Truncate { obj, size });
        Ok(())
    }
    pub fn set_bonus(&self, obj: u64, bonus: &[u8]) -> Result<()> {
        self.ds.objset.set_bonus(obj, bonus)?;
        self.log.lock().push(bonus_record(obj, bonus));
        Ok(())
    }
    pub fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        Ok(self.ds.objset.read(obj, off, len)?)
    }
    pub fn info(&self, obj: u64) -> Result<ObjectInfo> {
        Ok(self.ds.objset.info(obj)?)
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // A panic inside the change left it half made (a rename's remove
        // without its insert): logging it would replay half a change, and the
        // next txg would commit it. Fail closed instead: the pool suspends
        // before the hold is released, so no commit takes it; `pool clear`
        // re-imports from the last txg and the log, without it. (A frontend
        // that catches the panic answers EIO; the pool stays suspended.)
        if std::thread::panicking() {
            self.store.pool().suspend(format!(
                "internal error (a panic) inside a change to dataset '{}': its state is not trusted",
                self.ds.name()
            ));
            return;
        }
        // Still inside the txg hold: the group's txg is the one holding the
        // changes, and no commit can start between the changes and their itxs.
        let recs = std::mem::take(&mut *self.log.lock());
        let logged = !recs.is_empty();
        self.ds.log_changes(recs);
        self.txg.take();
        // sync=always: the change is durable when the operation returns. Outside
        // the hold, because the first log write may need a txg commit. A failure
        // cannot be returned from here: it suspends the pool, and the next fsync
        // or write reports it.
        if logged && self.ds.sync_policy() == SyncPolicy::Always {
            let _ = self.ds.commit_log(&self.store);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::changed_span;

    #[test]
    fn changed_span_covers_every_changed_byte_and_the_growth() {
        assert_eq!(changed_span(b"abcdef", b"abcdef"), None);
        assert_eq!(changed_span(b"abcdef", b"abXdeY"), Some((2, 6)));
        assert_eq!(changed_span(b"abcdef", b"aXcdef"), Some((1, 2)));
        // Past the old end everything counts, zeros included.
        assert_eq!(changed_span(b"ab", b"ab\0\0"), Some((2, 4)));
        assert_eq!(changed_span(b"", b"\0"), Some((0, 1)));
        assert_eq!(changed_span(b"ab", b"Xb\0"), Some((0, 3)));
    }
}
