//! The transaction group engine. Changes accumulate in memory in the open txg. A
//! sync thread commits it every `txg_timeout`, when dirty data passes 60% of
//! `dirty_max`, or when someone asks (`sync`, `fsync`). Writers are delayed more
//! and more as dirty data goes from 60% of `dirty_max` to `dirty_max` (the
//! OpenZFS write throttle, `write_delay`), and above `dirty_max` wait for the
//! commit: they are throttled, never failed.
//!
//! Commit of txg T, by one committer at a time (`commit_lock`):
//! 1. freeze: copy the catalog, take the pending dataset destroys and snapshot
//!    operations, open txg T+1;
//! 2. sync every dataset's object set (new blocks; replaced blocks freed or put
//!    on a dead list);
//! 3. apply snapshot operations; free every block of destroyed datasets;
//! 4. write the catalog copy (with the new object set roots) into the meta object
//!    set, sync it, and `Pool::commit(T, mos_root)`.
//!
//! Who triggers commits comes from the pool's environment (`cachalot_pool::Env`):
//! the sync thread above, or with `TxgTrigger::Manual` no thread at all: `sync`,
//! fsync and throttled writers commit inline, and `Store::step` does what the
//! thread would do at that moment of the pool's clock, so a test or the simulator
//! (crates/sim) drives the whole engine from one thread, reproducibly.
//!
//! Invariants: `synced_txg < open_txg`; a txg's changes are visible to readers
//! before and after its commit; a failed commit (an I/O error, a failed
//! invariant, a panic) becomes the store's error, every waiter sees it, and it
//! suspends the pool: nothing is committed after it (fail closed, no
//! catch-and-continue) until the pool is re-imported (`pool clear`).

use crate::catalog::*;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::store::*;
use cachalot_objects::ObjectSet;
use cachalot_pool::BlkPtr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Dirty data, in percent of `dirty_max`, above which writes are delayed
/// (OpenZFS: zfs_delay_min_dirty_percent). Commits start there too.
const DELAY_MIN_DIRTY_PCT: u64 = 60;
/// The delay halfway between that start and `dirty_max` (zfs_delay_scale).
const DELAY_SCALE: Duration = Duration::from_micros(500);
/// The longest delay of one write (zfs_delay_max_ns).
const DELAY_MAX: Duration = Duration::from_millis(100);

/// How long a write waits with `dirty` bytes dirty of `max`: zero up to
/// `DELAY_MIN_DIRTY_PCT`, then `DELAY_SCALE * (dirty - start) / (max - dirty)`,
/// which grows without bound towards `max`, capped at `DELAY_MAX`.
pub(crate) fn write_delay(dirty: u64, max: u64) -> Duration {
    let start = max / 100 * DELAY_MIN_DIRTY_PCT;
    if dirty <= start {
        return Duration::ZERO;
    }
    if dirty >= max {
        return DELAY_MAX;
    }
    let ns = DELAY_SCALE.as_nanos() * u128::from(dirty - start) / u128::from(max - dirty);
    Duration::from_nanos(ns.min(DELAY_MAX.as_nanos()) as u64)
}

pub(super) fn sync_thread(me: Weak<Store>) {
    loop {
        let Some(store) = me.upgrade() else { return };
        let deadline = Instant::now() + store.opts.txg_timeout;
        let stop;
        {
            let mut t = store.txg.lock();
            loop {
                if t.stop || t.requested >= t.open_txg {
                    break;
                }
                if store.dirty.load(Ordering::Relaxed) > store.opts.dirty_max * 6 / 10 {
                    break;
                }
                if store.txg_cv.wait_until(&mut t, deadline).timed_out() {
                    break;
                }
            }
            stop = t.stop;
        }
        store.commit_if_work();
        if stop {
            let mut t = store.txg.lock();
            t.stopped = true;
            store.txg_cv.notify_all();
            return;
        }
        drop(store);
    }
}

impl Store {
    /// What the sync thread does when it wakes: commit if anything changed or a
    /// commit was asked for, unless an earlier commit failed. A panic inside the
    /// commit becomes the store's error (writers waiting for the commit see it);
    /// it is never caught to carry on: nothing is committed after it.
    pub(super) fn commit_if_work(&self) {
        let has_work = {
            let st = self.state.lock();
            st.catalog_dirty
                || !st.pending_destroy.is_empty()
                || st.handles.values().any(|h| h.objset.is_dirty())
        };
        let requested = {
            let t = self.txg.lock();
            t.requested >= t.open_txg
        };
        if (has_work || requested) && self.txg.lock().error.is_none() {
            self.commit_guarded();
        }
    }

    /// Run one commit; a failure or a panic becomes the store's error.
    fn commit_guarded(&self) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.sync_txg()));
        let err = match r {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(p) => Some(format!(
                "internal error during commit: {}",
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            )),
        };
        let mut t = self.txg.lock();
        if let Some(e) = err {
            t.error.get_or_insert(e);
        }
        // Fail closed: whatever stopped commits (an I/O failure, a failed
        // invariant, a panic) suspends the pool, so writers get an error at once
        // instead of filling memory that no commit will ever write.
        if let Some(e) = &t.error {
            self.pool.suspend(e.clone());
        }
        t.last_commit_ns = self.pool.env().now_ns();
        self.txg_cv.notify_all();
    }

    /// Make the next commit panic halfway (tests of failing closed).
    pub fn inject_commit_panic(&self) {
        self.panic_next_commit.store(true, Ordering::Relaxed);
    }

    /// Test hook (crash tests of receive): `hook(step)` is called after each
    /// step that puts a received dataset in place ("snapshot", "promote",
    /// "adopt", "destroy"), where the sync thread could start a commit. It
    /// must not call this store on its own thread.
    #[doc(hidden)]
    pub fn set_receive_step_hook(&self, hook: Option<ReceiveStepHook>) {
        *self.receive_step_hook.lock() = hook;
    }

    pub(crate) fn receive_step(&self, step: &str) {
        let hook = self.receive_step_hook.lock().clone();
        if let Some(h) = hook {
            h(step);
        }
    }

    /// Manual txg trigger (`Env::txg`): do what the sync thread would do now, on
    /// the pool's clock: commit when asked, when dirty data passed 60% of
    /// `dirty_max`, or when `txg_timeout` passed since the last commit. Returns
    /// the txg committed, if any. With the sync thread this does nothing.
    pub fn step(&self) -> Result<Option<u64>> {
        if !self.pool.env().manual_txg() {
            return Ok(None);
        }
        self.check_live()?;
        let due = {
            let t = self.txg.lock();
            let elapsed = self.pool.env().now_ns().saturating_sub(t.last_commit_ns);
            t.requested >= t.open_txg
                || self.dirty.load(Ordering::Relaxed) > self.opts.dirty_max * 6 / 10
                || elapsed >= self.opts.txg_timeout.as_nanos() as u64
        };
        if !due {
            return Ok(None);
        }
        let before = self.synced_txg();
        self.commit_if_work();
        let t = self.txg.lock();
        if let Some(e) = &t.error {
            return Err(StoreError::Pool(cachalot_pool::PoolError::Suspended(
                e.clone(),
            )));
        }
        Ok((t.synced_txg > before).then_some(t.synced_txg))
    }

    /// The txg changes made now will belong to.
    pub fn open_txg(&self) -> u64 {
        self.txg.lock().open_txg
    }

    /// Last committed txg.
    pub fn synced_txg(&self) -> u64 {
        self.txg.lock().synced_txg
    }

    /// Commit the open txg now and wait for it. Returns the committed txg.
    pub fn sync(&self) -> Result<u64> {
        self.check_live()?;
        if self.pool.env().manual_txg() {
            // No sync thread: commit here, in the caller's thread.
            if self.txg.lock().error.is_none() {
                self.commit_guarded();
            }
            let t = self.txg.lock();
            return match &t.error {
                Some(e) => Err(StoreError::Pool(cachalot_pool::PoolError::Suspended(
                    e.clone(),
                ))),
                None => Ok(t.synced_txg),
            };
        }
        let mut t = self.txg.lock();
        let target = t.open_txg;
        t.requested = t.requested.max(target);
        self.txg_cv.notify_all();
        while t.synced_txg < target {
            if let Some(e) = &t.error {
                return Err(StoreError::Pool(cachalot_pool::PoolError::Suspended(
                    e.clone(),
                )));
            }
            if t.stopped {
                return Err(StoreError::Exported(self.pool.name()));
            }
            self.txg_cv.wait(&mut t);
        }
        Ok(target)
    }

    /// Ask for a commit soon without waiting.
    pub(crate) fn kick(&self) {
        let mut t = self.txg.lock();
        self.request_commit(&mut t);
    }

    /// Ask the sync thread for a commit of the open txg. Wakes the condvar's
    /// waiters only when the request is new: the sync thread checks `requested`
    /// under the lock before it waits, so one wake-up per txg reaches it. (Waking
    /// on every call made throttled writers wake each other in a loop, each
    /// notify_all answered by another, until the commit came: a futex storm that
    /// took most of the daemon's CPU under sustained writes.)
    fn request_commit(&self, t: &mut TxgState) {
        if t.requested < t.open_txg {
            t.requested = t.open_txg;
            self.txg_cv.notify_all();
        }
    }

    /// Throttle a writer (throttled, never failed), as OpenZFS's write throttle
    /// (dmu_tx_delay): below `DELAY_MIN_DIRTY_PCT` of `dirty_max` nothing; above
    /// it each write is delayed by `write_delay`, a delay that grows smoothly as
    /// dirty data nears the limit, with the wake-ups of all writers spaced that
    /// far apart (so the delay limits the aggregate rate, however many writers
    /// there are); at the limit writers wait for the commit. A smooth delay keeps
    /// the incoming rate near what the pool writes instead of letting writers run
    /// into a wall and all stall for a whole commit, which showed as multi-second
    /// maximum latencies in sysbench.
    pub(crate) fn throttle(&self) -> Result<()> {
        let max = self.opts.dirty_max;
        let d = self.dirty.load(Ordering::Relaxed);
        if d > max * 6 / 10 {
            self.kick();
        }
        if d <= max {
            let delay = write_delay(d, max);
            if !delay.is_zero() && !self.pool.env().manual_txg() {
                let now = Instant::now();
                let wake = {
                    let mut last = self.throttle_last_wakeup.lock();
                    let wake = (now.max(*last) + delay).min(now + DELAY_MAX);
                    *last = wake;
                    wake
                };
                std::thread::sleep(wake.saturating_duration_since(now));
            }
            return Ok(());
        }
        if self.pool.env().manual_txg() {
            // No sync thread to wait for: the throttled writer commits.
            if self.txg.lock().error.is_none() {
                self.commit_guarded();
            }
            return Ok(());
        }
        let mut t = self.txg.lock();
        while self.dirty.load(Ordering::Relaxed) > max {
            if t.error.is_some() || t.stopped {
                break;
            }
            self.request_commit(&mut t);
            self.txg_cv.wait_for(&mut t, Duration::from_millis(100));
        }
        Ok(())
    }

    /// Commit one txg (sync thread, create, export).
    pub(crate) fn sync_txg(&self) -> Result<u64> {
        let _one = self.commit_lock.lock();
        let txg = {
            let mut t = self.txg.lock();
            let txg = t.open_txg;
            t.open_txg += 1;
            txg
        };
        let (mut cat, destroys, ops, handles) = {
            let mut st = self.state.lock();
            st.catalog_dirty = false;
            let handles: Vec<Arc<Dataset>> = st
                .catalog
                .datasets
                .keys()
                .filter_map(|id| st.handles.get(id).cloned())
                .collect();
            (
                st.catalog.clone(),
                std::mem::take(&mut st.pending_destroy),
                std::mem::take(&mut st.snap_ops),
                handles,
            )
        };
        self.sync_datasets(txg, &mut cat, &handles)?;
        // Test hook (`debug panic commit`): a bug in the middle of a commit, after
        // its blocks were written and before its uberblock.
        if self.panic_next_commit.swap(false, Ordering::Relaxed) {
            panic!("injected panic in the commit of txg {txg}");
        }
        let rolled_back = self.sync_snapshot_ops(txg, &mut cat, ops, destroys)?;
        self.publish_synced(txg, &cat, rolled_back)?;
        let json = serde_json::to_vec(&cat).expect("catalog serializes");
        self.mos.write(CATALOG_OBJECT, 0, &json)?;
        self.mos.truncate(CATALOG_OBJECT, json.len() as u64)?;
        // MOS blocks are never in a snapshot: free them directly.
        let pool = &self.pool;
        let mos_root = self.mos.sync(txg, &mut |bp: &BlkPtr| pool.free_block(bp))?;
        // Read-ahead may run between the block writes and the uberblock
        // (`IoExecutor::yield_point`; only the simulator acts on it).
        self.pool.env().io.yield_point();
        let r = self.pool.commit(txg, mos_root);
        let mut t = self.txg.lock();
        match r {
            Ok(()) => {
                t.synced_txg = txg;
                let dirty: u64 = handles.iter().map(|d| d.objset.dirty_bytes()).sum();
                self.dirty.store(dirty, Ordering::Relaxed);
                // Intent log records of this txg are now in the tree.
                for ds in &handles {
                    ds.objset.txg_committed(txg);
                }
            }
            Err(e) => t.error = Some(e.to_string()),
        }
        // Debug builds check the catalog after every commit (the pool checked
        // itself in `commit`); a violation stops further commits.
        if t.error.is_none() && cachalot_pool::verify_after_commit() {
            drop(t);
            let bad = self.verify_catalog().err();
            t = self.txg.lock();
            if let Some(e) = bad {
                t.error = Some(format!("invariant violated after txg {txg}: {e}"));
            }
        }
        self.txg_cv.notify_all();
        drop(t);
        self.pool.env().io.yield_point();
        Ok(txg)
    }

    /// Step 2 of a commit: write every dataset's object set. Birth time decides a
    /// killed block's fate: born after the newest snapshot it is freed, otherwise
    /// a snapshot holds it and it joins the dead list.
    fn sync_datasets(&self, txg: u64, cat: &mut Catalog, handles: &[Arc<Dataset>]) -> Result<()> {
        let pool = &self.pool;
        for ds in handles {
            let Some(prev) = cat.datasets.get(&ds.id).map(|r| r.prev_snap_txg) else {
                continue;
            };
            let mut dead = Vec::new();
            let root = ds.objset.sync(txg, &mut |bp: &BlkPtr| {
                if bp.birth_txg > prev {
                    pool.free_block(bp)
                } else {
                    dead.push(*bp)
                }
            })?;
            let acct = ds.objset.accounting();
            let r = cat
                .datasets
                .get_mut(&ds.id)
                .expect("record of a synced dataset");
            if root != r.objset {
                // A root of the head's own, with its own intent log header.
                r.root_from_snapshot = false;
            }
            r.objset = root;
            r.acct = acct.into();
            r.deadlist_bytes +=
                crate::snapshot::append_deadlist(&self.mos, &mut r.deadlist, &dead)?;
        }
        Ok(())
    }

    /// Step 3 of a commit: apply the queued snapshot operations, then free what
    /// only destroyed datasets held. Returns the ids of rolled-back datasets.
    fn sync_snapshot_ops(
        &self,
        txg: u64,
        cat: &mut Catalog,
        ops: Vec<crate::snapshot::SnapOp>,
        destroys: Vec<(u64, Arc<Dataset>, DatasetRecord)>,
    ) -> Result<Vec<u64>> {
        use crate::snapshot::SnapOp;
        let mut rolled_back = Vec::new();
        let pool = &self.pool;
        let now = self.now_s();
        let mut free_fn = |bp: &BlkPtr| pool.free_block(bp);
        let mut ctx = crate::snapshot::SyncCtx {
            mos: &self.mos,
            cache: &self.cache,
            txg,
            free: &mut free_fn,
        };
        for op in ops {
            match op {
                SnapOp::Create(list) => {
                    for (id, name, guid) in list {
                        if let Some(r) = cat.datasets.get_mut(&id) {
                            // Identities and times come from the pool's environment.
                            let guid = guid.unwrap_or_else(|| pool.env().guid());
                            crate::snapshot::create(r, &name, Some(guid), &ctx, now);
                        }
                    }
                }
                SnapOp::Destroy { id, name } => {
                    if let Some(r) = cat.datasets.get_mut(&id) {
                        if let Some(idx) = r.snapshots.iter().position(|s| s.name == name) {
                            let origin_txg = r.origin_txg;
                            crate::snapshot::destroy(r, idx, origin_txg, &mut ctx)?;
                        }
                    }
                }
                SnapOp::Rollback { id, name } => {
                    if let Some(r) = cat.datasets.get_mut(&id) {
                        if let Some(idx) = r.snapshots.iter().position(|s| s.name == name) {
                            crate::snapshot::rollback(r, idx, &mut ctx)?;
                            rolled_back.push(id);
                        }
                    }
                }
            }
        }
        for (_, ds, mut rec) in destroys {
            // Unsynced changes of a destroyed dataset are dropped; free what
            // only it held on disk.
            rec.objset = ds.objset.root_bp();
            let origin_txg = rec.origin_txg;
            crate::snapshot::destroy_all(&mut rec, origin_txg, &mut ctx)?;
            ds.objset
                .zil()
                .free_all(&mut |d| self.pool.free_log_block(d));
        }
        Ok(rolled_back)
    }

    /// Copy what the commit changed into the live catalog (which open context may
    /// have changed meanwhile), and give each rolled-back head a new handle that
    /// restarts from its snapshot's root.
    fn publish_synced(&self, txg: u64, cat: &Catalog, rolled_back: Vec<u64>) -> Result<()> {
        let mut st = self.state.lock();
        for (id, r) in &cat.datasets {
            if let Some(live) = st.catalog.datasets.get_mut(id) {
                live.objset = r.objset;
                live.root_from_snapshot = r.root_from_snapshot;
                live.acct = r.acct;
                live.prev_snap_txg = r.prev_snap_txg;
                live.deadlist = r.deadlist;
                live.deadlist_bytes = r.deadlist_bytes;
                // Snapshot user properties are set in open context: keep those.
                let mut snaps = r.snapshots.clone();
                for sn in &mut snaps {
                    if let Some(l) = live.snapshots.iter().find(|l| l.name == sn.name) {
                        sn.props = l.props.clone();
                    }
                }
                live.snapshots = snaps;
            }
        }
        for id in rolled_back {
            let (Some(r), Some(old)) = (cat.datasets.get(&id), st.handles.get(&id).cloned()) else {
                continue;
            };
            old.mark_destroyed();
            old.objset
                .zil()
                .free_all(&mut |d| self.pool.free_log_block(d));
            let os = ObjectSet::open_fresh_log(
                self.cache.clone(),
                resolve_objset_props(cat, id),
                &r.objset,
                txg + 1,
            )?;
            let ds = Arc::new(Dataset::new(
                id,
                r.name.clone(),
                r.kind,
                os,
                self.me.clone(),
            ));
            apply_props(cat, id, &ds);
            st.handles.insert(id, ds);
        }
        Ok(())
    }
}

#[cfg(test)]
mod write_delay_tests {
    use super::*;

    #[test]
    fn zero_below_the_start_then_monotone_and_bounded() {
        let max = 256u64 << 20;
        assert_eq!(write_delay(0, max), Duration::ZERO);
        assert_eq!(
            write_delay(max / 100 * DELAY_MIN_DIRTY_PCT, max),
            Duration::ZERO
        );
        let mut last = Duration::ZERO;
        for pct in 61..=100 {
            let d = write_delay(max / 100 * pct, max);
            assert!(d >= last, "{pct}%: {d:?} < {last:?}");
            assert!(d <= DELAY_MAX, "{pct}%: {d:?}");
            last = d;
        }
        assert_eq!(write_delay(max, max), DELAY_MAX);
        assert_eq!(write_delay(max + 1, max), DELAY_MAX);
        // Halfway between the start and the limit: the scale.
        let mid = write_delay(max / 100 * 80, max);
        assert!(
            mid.abs_diff(DELAY_SCALE) < Duration::from_micros(5),
            "{mid:?}"
        );
    }
}
