//! The store: one imported pool with its meta object set, dataset catalog, open
//! datasets and the transaction group engine. Its parts:
//! - `open`: creating and importing the pool, intent-log replay, export;
//! - `txg`: the transaction group engine, its sync thread and the write throttle;
//! - `lifecycle`: dataset create, destroy, rename and list;
//! - `snapshots`: snapshot, rollback, clone, promote and their listing;
//! - `properties`: get, set, inherit and their resolution;
//! - `space`: space accounting, quotas, reservations and space checks.
//!
//! Invariants: the on-disk state is always the state of one committed txg; a
//! destroyed dataset disappears from the catalog in the same txg that frees its
//! blocks; the catalog held in memory is the one that will be written; every
//! dataset in the catalog has exactly one open handle, and every handle's id is in
//! the catalog (`Store::verify`).

mod devices;
mod lifecycle;
mod listing;
mod open;
mod properties;
mod snapshots;
mod space;
mod txg;
mod verify;

pub(crate) use properties::{resolve, resolve_objset_props, resolve_recordsize};
pub use space::slop_space;
pub(crate) use space::used_of;

use open::{mos_props, read_catalog};
use properties::{apply_props, num_prop, refresh_props};
use snapshots::written_since_txg;
use txg::sync_thread;

use crate::catalog::*;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::scrub::{self, ScrubStatus};
use cachalot_objects::{BlockCache, ObjectSet};
use cachalot_pool::{BlkPtr, DeviceStatus, Importable, Pool, SpaceInfo};
use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Tunables of a store.
#[derive(Clone, Debug)]
pub struct StoreOpts {
    /// ARC byte limit.
    pub arc_max: u64,
    /// Longest time between commits.
    pub txg_timeout: Duration,
    /// Dirty bytes at which writers are throttled.
    pub dirty_max: u64,
}

impl Default for StoreOpts {
    fn default() -> Self {
        StoreOpts {
            arc_max: 256 << 20,
            txg_timeout: Duration::from_secs(5),
            dirty_max: 256 << 20,
        }
    }
}

/// One row of `list`.
#[derive(Clone, Debug, Serialize)]
pub struct DatasetInfo {
    pub name: String,
    pub kind: DatasetKind,
    pub used: u64,
    pub available: u64,
    pub referenced: u64,
    pub mountpoint: String,
}

/// One row of `get`.
#[derive(Clone, Debug, Serialize)]
pub struct PropRow {
    pub property: String,
    pub value: String,
    pub raw: String,
    pub source: String,
}

#[derive(Clone, Copy, Debug, Serialize, Default)]
pub struct SpaceInfoSer {
    pub size: u64,
    pub allocated: u64,
    pub free: u64,
    pub frag: u64,
}

impl From<SpaceInfo> for SpaceInfoSer {
    fn from(s: SpaceInfo) -> Self {
        SpaceInfoSer {
            size: s.size,
            allocated: s.allocated,
            free: s.free,
            frag: s.frag,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PoolStatusInfo {
    pub name: String,
    pub health: String,
    pub space: SpaceInfoSer,
    pub devices: Vec<DeviceStatus>,
    pub scrub: ScrubStatus,
    pub txg: u64,
    pub suspended: Option<String>,
    /// Events worth the operator's attention (intent log replayed, log device lost).
    pub notices: Vec<String>,
}

pub(crate) struct State {
    pub catalog: Catalog,
    pub handles: HashMap<u64, Arc<Dataset>>,
    /// Destroyed datasets whose blocks the next commit frees: (object set root).
    pub pending_destroy: Vec<(u64, Arc<Dataset>, DatasetRecord)>,
    /// Snapshot operations for the next commit, in order.
    pub snap_ops: Vec<crate::snapshot::SnapOp>,
    pub catalog_dirty: bool,
    /// Catalog changes since the store was opened (see [`Store::catalog_changes`]).
    pub catalog_changes: u64,
}

impl State {
    /// The catalog changed: the next commit writes it, and caches derived from
    /// it (e.g. parsed share options) are stale.
    pub fn mark_catalog_dirty(&mut self) {
        self.catalog_dirty = true;
        self.catalog_changes += 1;
    }
}

struct TxgState {
    open_txg: u64,
    synced_txg: u64,
    /// A commit of at least this txg was asked for.
    requested: u64,
    stop: bool,
    stopped: bool,
    error: Option<String>,
    /// When the last commit ended, on the pool's clock (`Store::step`).
    last_commit_ns: u64,
}

/// An imported pool with its datasets.
pub struct Store {
    me: Weak<Store>,
    pool: Arc<Pool>,
    cache: Arc<BlockCache>,
    mos: ObjectSet,
    pub(crate) state: Mutex<State>,
    txg: Mutex<TxgState>,
    txg_cv: Condvar,
    /// Serializes commits (sync thread, export).
    commit_lock: Mutex<()>,
    /// Held by a resumable receive's checkpoint from setting its token until the
    /// txg holding token and data is on disk, and by `resume_token`, so no reader
    /// (a replication peer deciding where to resume) sees a token before it is
    /// durable.
    pub(crate) resume_checkpoint: Mutex<()>,
    /// When the last throttled writer was let go (`Store::throttle` spaces them).
    throttle_last_wakeup: Mutex<std::time::Instant>,
    opts: StoreOpts,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    exported: AtomicBool,
    pub(crate) dirty: AtomicU64,
    pub(crate) scrub: Arc<Mutex<ScrubStatus>>,
    /// Test hook: the next commit panics (`Store::inject_commit_panic`).
    panic_next_commit: AtomicBool,
    /// Test hook: called between the catalog steps that put a received
    /// dataset in place (`Store::set_receive_step_hook`).
    receive_step_hook: Mutex<Option<ReceiveStepHook>>,
}

/// See `Store::set_receive_step_hook`.
pub type ReceiveStepHook = Arc<dyn Fn(&str) + Send + Sync>;

impl Store {
    /// Seconds since the epoch on the pool's clock (creation times).
    fn now_s(&self) -> u64 {
        self.pool.env().now_secs()
    }
}

/// Validate a dataset name: pool/child/..., each part [A-Za-z0-9_.:-], not empty.
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name.split('/').all(|c| {
            !c.is_empty()
                && c.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "_-.:".contains(ch))
                && c != "."
                && c != ".."
        });
    if !ok {
        return Err(StoreError::Invalid(format!(
            "invalid dataset name '{name}': use letters, digits, _ - . : separated by /"
        )));
    }
    if name.contains('@') {
        return Err(StoreError::Invalid(format!(
            "invalid dataset name '{name}': '@' names a snapshot"
        )));
    }
    Ok(())
}

/// Split `fs@snap`, validating both parts.
fn split_snapshot(full: &str) -> Result<(&str, &str)> {
    let Some((fs, snap)) = full.split_once('@') else {
        return Err(StoreError::Invalid(format!(
            "'{full}' is not a snapshot name (FS@SNAP)"
        )));
    };
    // A receive in progress (`FS%recv`) passes: users cannot type it.
    match fs.strip_suffix("%recv") {
        Some(base) => check_name(base)?,
        None => check_name(fs)?,
    }
    if snap.is_empty()
        || snap.len() > 255
        || !snap
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c))
    {
        return Err(StoreError::Invalid(format!(
            "invalid snapshot name '{snap}': use letters, digits, _ - . :"
        )));
    }
    Ok((fs, snap))
}

/// Identity of a snapshot, for send and receive.
#[derive(Clone, Debug)]
pub(crate) struct SnapshotMeta {
    pub name: String,
    pub txg: u64,
    pub guid: u64,
    pub volblocksize: Option<u32>,
}

/// One row of `list -t snapshot`.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotInfo {
    pub name: String,
    /// Bytes only this snapshot holds (freed if it is destroyed).
    pub used: u64,
    pub referenced: u64,
    /// Bytes written between the previous snapshot and this one.
    pub written: u64,
    pub creation: u64,
    pub txg: u64,
}

/// Validate a pool name.
pub fn check_pool_name(name: &str) -> Result<()> {
    check_name(name)?;
    if name.contains('/') {
        return Err(StoreError::Invalid(format!(
            "invalid pool name '{name}': must not contain '/'"
        )));
    }
    if [
        "mirror", "raidz", "raidz1", "raidz2", "log", "cache", "spare",
    ]
    .contains(&name)
    {
        return Err(StoreError::Invalid(format!(
            "invalid pool name '{name}': reserved word"
        )));
    }
    Ok(())
}

impl Drop for Store {
    fn drop(&mut self) {
        let mut t = self.txg.lock();
        t.stop = true;
        self.txg_cv.notify_all();
    }
}

impl Store {
    pub fn discover(paths: &[PathBuf]) -> Vec<Importable> {
        Pool::discover(paths)
    }

    pub fn name(&self) -> String {
        self.pool.name()
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    pub fn cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }

    pub fn opts(&self) -> &StoreOpts {
        &self.opts
    }

    pub(crate) fn check_live(&self) -> Result<()> {
        if self.exported.load(Ordering::Acquire) {
            return Err(StoreError::Exported(self.pool.name()));
        }
        if let Some(why) = self.pool.suspended() {
            return Err(StoreError::Pool(cachalot_pool::PoolError::Suspended(why)));
        }
        Ok(())
    }

    pub fn status(&self) -> PoolStatusInfo {
        PoolStatusInfo {
            name: self.pool.name(),
            health: self.pool.health().into(),
            space: self.pool.space().into(),
            devices: self.pool.device_status(),
            scrub: self.scrub_status(),
            txg: self.synced_txg(),
            suspended: self.pool.suspended(),
            notices: self.pool.notices(),
        }
    }

    pub fn scrub_start(&self) -> Result<()> {
        self.check_live()?;
        scrub::start(self.me.upgrade().expect("store alive"))
    }

    pub fn scrub_status(&self) -> ScrubStatus {
        let mut s = self.scrub.lock().clone();
        s.fill_progress(self.pool.env().now_secs());
        s
    }

    /// Wait for a running scrub to finish.
    pub fn scrub_wait(&self) -> ScrubStatus {
        loop {
            let s = self.scrub_status();
            if s.state != "scanning" {
                return s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Object set roots of every dataset and snapshot as of the last commit
    /// (for scrub and resilver), each with the txg below which its blocks are
    /// skipped: those are held by a root before it in the list, the snapshot
    /// before it or a clone's origin (a block born before a snapshot and
    /// still referenced after it is in that snapshot), so each block is
    /// visited about once however many snapshots share it. A parent is born
    /// with or after its children, so a skipped block's subtree is skipped.
    pub(crate) fn committed_roots(&self) -> Result<Vec<(BlkPtr, u64)>> {
        let ub = self.pool.uberblock();
        let mos = ObjectSet::open(self.cache.clone(), mos_props(), &ub.mos, ub.txg + 1)?;
        let cat = read_catalog(&mos)?;
        let mut roots = vec![(ub.mos, 0)];
        for d in cat.datasets.values() {
            let origin = d.origin.as_ref().and_then(|(id, snap)| {
                let o = cat.datasets.get(id)?;
                o.snapshots.iter().find(|s| s.name == *snap)
            });
            let mut floor = origin.map_or(0, |s| s.txg);
            for s in &d.snapshots {
                roots.push((s.objset, floor));
                floor = s.txg;
            }
            roots.push((d.objset, floor));
        }
        Ok(roots)
    }
}
