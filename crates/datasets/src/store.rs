//! The store: one imported pool with its meta object set, dataset catalog, open
//! datasets and the transaction group engine.
//!
//! Transaction groups. Changes accumulate in memory in the open txg. A sync thread
//! commits it every `txg_timeout`, when dirty data passes 60% of `dirty_max`, or
//! when someone asks (`sync`, `fsync`). Writers that find dirty data above
//! `dirty_max` wait for the commit: they are throttled, never failed.
//!
//! Commit of txg T, by the sync thread only:
//! 1. freeze: copy the catalog, take the pending dataset destroys, open txg T+1;
//! 2. sync every dataset's object set (new blocks; replaced blocks freed);
//! 3. free every block of destroyed datasets;
//! 4. write the catalog copy (with the new object set roots) into the meta object
//!    set, sync it, and `Pool::commit(T, mos_root)`.
//!
//! Invariants: the on-disk state is always the state of one committed txg; a
//! destroyed dataset disappears from the catalog in the same txg that frees its
//! blocks; the catalog held in memory is the one that will be written.

use crate::catalog::*;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::props;
use crate::scrub::{self, ScrubStatus};
use cachalot_objects::{BlockCache, ObjectSet, ObjsetProps};
use cachalot_pool::{
    BlkPtr, BlockDevice, Compression, CreateOpts, DeviceStatus, Importable, Pool, SpaceInfo,
    VdevSpec,
};
use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

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
}

struct TxgState {
    open_txg: u64,
    synced_txg: u64,
    /// A commit of at least this txg was asked for.
    requested: u64,
    stop: bool,
    stopped: bool,
    error: Option<String>,
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
    opts: StoreOpts,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    exported: AtomicBool,
    pub(crate) dirty: AtomicU64,
    pub(crate) scrub: Arc<Mutex<ScrubStatus>>,
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
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

/// Refuse to remove snapshot `snap` of dataset `id` while a clone depends on it.
fn check_no_clones(cat: &Catalog, id: u64, snap: &str) -> Result<()> {
    let origin = Some((id, snap.to_string()));
    match cat.datasets.values().find(|d| d.origin == origin) {
        Some(c) => Err(StoreError::Busy(format!(
            "snapshot '{}@{snap}' has dependent clones (e.g. '{}')",
            cat.datasets[&id].name, c.name
        ))),
        None => Ok(()),
    }
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

/// The txg of snapshot SNAP named by property `written@SNAP` (SNAP or FS@SNAP) of
/// dataset `rec`; it must be older than `before` (a snapshot's own txg).
fn written_since_txg(rec: &DatasetRecord, prop: &str, before: u64) -> Result<u64> {
    let name = &prop["written@".len()..];
    let short = match name.split_once('@') {
        Some((fs, s)) if fs == rec.name => s,
        Some(_) => {
            return Err(StoreError::Invalid(format!(
                "{prop}: '{name}' is not a snapshot of '{}'",
                rec.name
            )))
        }
        None => name,
    };
    let snap = rec
        .snapshots
        .iter()
        .find(|s| s.name == short)
        .ok_or_else(|| {
            StoreError::Invalid(format!("{prop}: '{}@{short}' does not exist", rec.name))
        })?;
    if snap.txg >= before {
        return Err(StoreError::Invalid(format!(
            "{prop}: '{}@{short}' is not older",
            rec.name
        )));
    }
    Ok(snap.txg)
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

impl Store {
    /// Create a pool and its root dataset; txg 1 is committed before this returns.
    pub fn create(
        name: &str,
        specs: &[VdevSpec],
        copts: &CreateOpts,
        props: &[(String, String)],
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        check_pool_name(name)?;
        let mut local = BTreeMap::new();
        for (k, v) in props {
            local.insert(k.clone(), props::validate(k, v, false)?);
        }
        let pool = Arc::new(Pool::create(name, specs, copts)?);
        Store::initialize(pool, local, opts)
    }

    /// A new pool's first commit: the catalog with the root dataset, in txg 1.
    fn initialize(
        pool: Arc<Pool>,
        root_props: BTreeMap<String, String>,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        let name = pool.name();
        let catalog = Catalog {
            version: CATALOG_VERSION,
            next_id: 2,
            datasets: BTreeMap::from([(
                1,
                DatasetRecord::new(1, &name, None, DatasetKind::Filesystem, root_props, now_s()),
            )]),
        };
        let store = Store::assemble(pool, catalog, BlkPtr::HOLE, 1, opts)?;
        let id = store.mos.create_object(1)?;
        debug_assert_eq!(id, CATALOG_OBJECT);
        store.sync_txg()?;
        store.start_thread();
        Ok(store)
    }

    /// Import a pool found on `paths`.
    pub fn import(paths: &[PathBuf], name: Option<&str>, opts: StoreOpts) -> Result<Arc<Store>> {
        let pool = Arc::new(Pool::import(paths, name)?);
        Store::open_pool(pool, opts)
    }

    /// Import from already-open devices (crash tests use simulated devices).
    pub fn import_devices(
        devices: Vec<Arc<dyn BlockDevice>>,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        let pool = Arc::new(Pool::import_devices(devices)?);
        Store::open_pool(pool, opts)
    }

    /// Create on already-open devices (tests).
    pub fn create_on_devices(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        mirror: bool,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        Store::create_on_devices_with_log(name, devices, mirror, vec![], opts)
    }

    /// Create on already-open devices with separate log devices (tests).
    pub fn create_on_devices_with_log(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        mirror: bool,
        log: Vec<Arc<dyn BlockDevice>>,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        check_pool_name(name)?;
        let pool = Arc::new(Pool::create_on_devices_with_log(
            name, devices, mirror, log, 12,
        )?);
        Store::initialize(pool, BTreeMap::new(), opts)
    }

    fn open_pool(pool: Arc<Pool>, opts: StoreOpts) -> Result<Arc<Store>> {
        let ub = pool.uberblock();
        let cache = Arc::new(BlockCache::new(pool.clone(), opts.arc_max));
        let mos = ObjectSet::open(cache.clone(), mos_props(), &ub.mos, ub.txg + 1)?;
        let catalog = read_catalog(&mos)?;
        let store = Store::assemble_with(pool, cache, mos, catalog, ub.txg + 1, opts)?;
        store.replay_logs(ub.txg)?;
        store.clean_interrupted_receives()?;
        store.start_thread();
        Ok(store)
    }

    /// A receive cut by a crash leaves a hidden `FS%recv`: remove it at import.
    fn clean_interrupted_receives(&self) -> Result<()> {
        let names: Vec<String> = {
            let st = self.state.lock();
            st.catalog
                .datasets
                .values()
                .filter(|d| d.name.contains('%'))
                .map(|d| d.name.clone())
                .collect()
        };
        for n in &names {
            self.destroy_dataset(n, true)?;
            self.pool
                .add_notice(format!("removed '{n}', left by an interrupted receive"));
        }
        if !names.is_empty() {
            self.sync_txg()?;
        }
        Ok(())
    }

    /// Re-apply every dataset's intent log, then commit, before anything is served.
    /// A crash during replay leaves the logs in place: the next import replays
    /// them again (records are whole writes and truncates, applied in order).
    fn replay_logs(&self, committed_txg: u64) -> Result<()> {
        let handles: Vec<Arc<Dataset>> = self.state.lock().handles.values().cloned().collect();
        let mut any = false;
        for ds in handles {
            let r = ds.objset.replay_log(committed_txg)?;
            if r.blocks > 0 || r.problem.is_some() {
                any = true;
            }
            if r.records_applied > 0 {
                self.pool.add_notice(format!(
                    "dataset {}: replayed {} intent log records from {} blocks",
                    ds.name(),
                    r.records_applied,
                    r.blocks
                ));
            }
            if let Some(p) = r.problem {
                self.pool.add_notice(format!("dataset {}: {p}", ds.name()));
            }
        }
        if any {
            self.sync_txg()?;
        }
        Ok(())
    }

    fn assemble(
        pool: Arc<Pool>,
        catalog: Catalog,
        mos_root: BlkPtr,
        txg: u64,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        let cache = Arc::new(BlockCache::new(pool.clone(), opts.arc_max));
        let mos = ObjectSet::open(cache.clone(), mos_props(), &mos_root, txg)?;
        Store::assemble_with(pool, cache, mos, catalog, txg, opts)
    }

    fn assemble_with(
        pool: Arc<Pool>,
        cache: Arc<BlockCache>,
        mos: ObjectSet,
        catalog: Catalog,
        txg: u64,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        let mut handles = HashMap::new();
        let store = Arc::new_cyclic(|me: &Weak<Store>| Store {
            me: me.clone(),
            pool,
            cache,
            mos,
            state: Mutex::new(State {
                catalog: catalog.clone(),
                handles: HashMap::new(),
                pending_destroy: vec![],
                snap_ops: vec![],
                catalog_dirty: false,
            }),
            txg: Mutex::new(TxgState {
                open_txg: txg,
                synced_txg: txg - 1,
                requested: 0,
                stop: false,
                stopped: false,
                error: None,
            }),
            txg_cv: Condvar::new(),
            commit_lock: Mutex::new(()),
            opts,
            thread: Mutex::new(None),
            exported: AtomicBool::new(false),
            dirty: AtomicU64::new(0),
            scrub: Arc::new(Mutex::new(ScrubStatus::default())),
        });
        for rec in catalog.datasets.values() {
            let os = ObjectSet::open(
                store.cache.clone(),
                resolve_objset_props(&catalog, rec.id),
                &rec.objset,
                txg,
            )?;
            handles.insert(
                rec.id,
                Arc::new(Dataset::new(
                    rec.id,
                    rec.name.clone(),
                    rec.kind,
                    os,
                    store.me.clone(),
                )),
            );
        }
        for (id, h) in &handles {
            apply_props(&catalog, *id, h);
        }
        store.state.lock().handles = handles;
        Ok(store)
    }

    fn start_thread(&self) {
        let me = self.me.clone();
        let h = std::thread::Builder::new()
            .name(format!("txg-sync-{}", self.pool.name()))
            .spawn(move || sync_thread(me))
            .expect("spawn sync thread");
        *self.thread.lock() = Some(h);
    }

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
        t.requested = t.requested.max(t.open_txg);
        self.txg_cv.notify_all();
    }

    /// Block while dirty data is above the limit (writers are throttled, not failed).
    pub(crate) fn throttle(&self) -> Result<()> {
        let max = self.opts.dirty_max;
        let d = self.dirty.load(Ordering::Relaxed);
        if d > max * 6 / 10 {
            self.kick();
        }
        if d <= max {
            return Ok(());
        }
        let mut t = self.txg.lock();
        while self.dirty.load(Ordering::Relaxed) > max {
            if t.error.is_some() || t.stopped {
                break;
            }
            t.requested = t.requested.max(t.open_txg);
            self.txg_cv.notify_all();
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
        let pool = self.pool.clone();
        // Birth time decides a killed block's fate: born after the newest snapshot
        // it is freed, otherwise a snapshot holds it and it joins the dead list.
        for ds in &handles {
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
            r.objset = root;
            r.acct = acct.into();
            r.deadlist_bytes +=
                crate::snapshot::append_deadlist(&self.mos, &mut r.deadlist, &dead)?;
        }
        let mut rolled_back = Vec::new();
        {
            let mut free_fn = |bp: &BlkPtr| pool.free_block(bp);
            let mut ctx = crate::snapshot::SyncCtx {
                mos: &self.mos,
                cache: &self.cache,
                txg,
                free: &mut free_fn,
            };
            for op in ops {
                match op {
                    crate::snapshot::SnapOp::Create(list) => {
                        for (id, name, guid) in list {
                            if let Some(r) = cat.datasets.get_mut(&id) {
                                crate::snapshot::create(r, &name, guid, &ctx, now_s());
                            }
                        }
                    }
                    crate::snapshot::SnapOp::Destroy { id, name } => {
                        if let Some(r) = cat.datasets.get_mut(&id) {
                            if let Some(idx) = r.snapshots.iter().position(|s| s.name == name) {
                                let origin_txg = r.origin_txg;
                                crate::snapshot::destroy(r, idx, origin_txg, &mut ctx)?;
                            }
                        }
                    }
                    crate::snapshot::SnapOp::Rollback { id, name } => {
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
        }
        {
            let mut st = self.state.lock();
            for (id, r) in &cat.datasets {
                if let Some(live) = st.catalog.datasets.get_mut(id) {
                    live.objset = r.objset;
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
            // A rolled-back head restarts from its snapshot's root, with a new handle.
            for id in rolled_back {
                let (Some(r), Some(old)) = (cat.datasets.get(&id), st.handles.get(&id).cloned())
                else {
                    continue;
                };
                old.mark_destroyed();
                old.objset
                    .zil()
                    .free_all(&mut |d| self.pool.free_log_block(d));
                let os = ObjectSet::open_fresh_log(
                    self.cache.clone(),
                    resolve_objset_props(&cat, id),
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
                apply_props(&cat, id, &ds);
                st.handles.insert(id, ds);
            }
        }
        let json = serde_json::to_vec(&cat).expect("catalog serializes");
        self.mos.write(CATALOG_OBJECT, 0, &json)?;
        self.mos.truncate(CATALOG_OBJECT, json.len() as u64)?;
        // MOS blocks are never in a snapshot: free them directly.
        let mos_root = self.mos.sync(txg, &mut |bp: &BlkPtr| pool.free_block(bp))?;
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
        self.txg_cv.notify_all();
        drop(t);
        Ok(txg)
    }

    /// Stop the sync thread after a final commit. The store is unusable afterwards.
    pub fn export(&self) -> Result<()> {
        if self.exported.swap(true, Ordering::AcqRel) {
            return Err(StoreError::Exported(self.pool.name()));
        }
        scrub::cancel(self);
        {
            let mut t = self.txg.lock();
            t.stop = true;
            self.txg_cv.notify_all();
        }
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
        let err = self.txg.lock().error.clone();
        if let Some(e) = err {
            return Err(StoreError::Pool(cachalot_pool::PoolError::Suspended(e)));
        }
        self.pool.flush_all()?;
        Ok(())
    }

    /// Export and erase the labels.
    pub fn destroy_pool(&self) -> Result<()> {
        self.export()?;
        self.pool.destroy_labels()?;
        Ok(())
    }

    pub fn add_vdevs(&self, specs: &[VdevSpec], copts: &CreateOpts) -> Result<()> {
        self.check_live()?;
        let _one = self.commit_lock.lock();
        let next = self.open_txg();
        self.pool.add_vdevs(specs, copts, next)?;
        drop(_one);
        self.sync()?;
        Ok(())
    }

    /// Handle of a dataset.
    pub fn dataset(&self, name: &str) -> Result<Arc<Dataset>> {
        self.check_live()?;
        let st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?;
        Ok(st.handles[&rec.id].clone())
    }

    pub fn create_dataset(
        &self,
        name: &str,
        kind: DatasetKind,
        volsize: Option<u64>,
        props_in: &[(String, String)],
        parents: bool,
    ) -> Result<()> {
        check_name(name)?;
        self.create_dataset_unchecked(name, kind, volsize, props_in, parents)
    }

    /// `create_dataset` without the name check: receive creates `FS%recv`, a name
    /// users cannot type, so a half-received dataset can never collide with theirs.
    pub(crate) fn create_dataset_unchecked(
        &self,
        name: &str,
        kind: DatasetKind,
        volsize: Option<u64>,
        props_in: &[(String, String)],
        parents: bool,
    ) -> Result<()> {
        self.check_live()?;
        let Some((parent_name, _)) = name.rsplit_once('/') else {
            return Err(StoreError::Invalid(format!(
                "'{name}' is a pool name: datasets are created as POOL/NAME"
            )));
        };
        let mut st = self.state.lock();
        if st.catalog.by_name(name).is_some() {
            return Err(StoreError::Exists(name.into()));
        }
        if !name.starts_with(&format!("{}/", self.pool.name())) {
            return Err(StoreError::NotFound(parent_name.into()));
        }
        let is_volume = kind == DatasetKind::Volume;
        let mut local = BTreeMap::new();
        let mut volblocksize = None;
        for (k, v) in props_in {
            if k == "sparse" {
                continue;
            }
            if k == "volblocksize" {
                if !is_volume {
                    return Err(StoreError::Invalid(
                        "property 'volblocksize' applies only to volumes".into(),
                    ));
                }
                let n = props::parse_size(v)
                    .filter(|n| n.is_power_of_two() && (512..=1 << 20).contains(n))
                    .ok_or_else(|| StoreError::Invalid(format!("invalid value '{v}' for property 'volblocksize': must be a power of two from 512 to 1M")))?;
                volblocksize = Some(n as u32);
                continue;
            }
            local.insert(k.clone(), props::validate(k, v, is_volume)?);
        }
        if is_volume {
            let size =
                volsize.ok_or_else(|| StoreError::Invalid("a volume needs a size (-V)".into()))?;
            if size == 0 {
                return Err(StoreError::Invalid(
                    "volume size must be greater than 0".into(),
                ));
            }
            let bs = volblocksize.unwrap_or(16384) as u64;
            if !size.is_multiple_of(bs) {
                return Err(StoreError::Invalid(format!(
                    "volume size must be a multiple of the volume block size ({})",
                    props::format_size(bs)
                )));
            }
            volblocksize = Some(bs as u32);
            local.insert("volsize".into(), size.to_string());
        }
        // Missing parents.
        let mut to_create: Vec<String> = Vec::new();
        let mut cur = parent_name.to_string();
        while st.catalog.by_name(&cur).is_none() {
            if !parents {
                return Err(StoreError::NotFound(cur));
            }
            to_create.push(cur.clone());
            match cur.rsplit_once('/') {
                Some((p, _)) => cur = p.to_string(),
                None => return Err(StoreError::NotFound(cur)),
            }
        }
        if st
            .catalog
            .by_name(&cur)
            .is_some_and(|r| r.kind == DatasetKind::Volume)
        {
            return Err(StoreError::Invalid(format!(
                "'{cur}' is a volume: it cannot have children"
            )));
        }
        // Refuse a thick volume that does not fit before changing anything.
        if is_volume && !local.contains_key("reservation") {
            let size = volsize.unwrap();
            if !props_in.iter().any(|(k, _)| k == "sparse") {
                let avail = self.available_in(&st.catalog, st.catalog.by_name(&cur).unwrap().id);
                if size > avail {
                    return Err(StoreError::NoSpace(self.pool.name()));
                }
            }
        }
        to_create.reverse();
        let txg = self.open_txg();
        let make = |st: &mut State,
                    n: &str,
                    kind: DatasetKind,
                    local: BTreeMap<String, String>,
                    vbs: Option<u32>|
         -> Result<u64> {
            let parent = st
                .catalog
                .by_name(n.rsplit_once('/').unwrap().0)
                .map(|r| r.id);
            let id = st.catalog.next_id;
            st.catalog.next_id += 1;
            let mut rec = DatasetRecord::new(id, n, parent, kind, local, now_s());
            rec.volblocksize = vbs;
            st.catalog.datasets.insert(id, rec);
            // resolve_objset_props applies a volume's block size as its record size.
            let p = resolve_objset_props(&st.catalog, id);
            let os = ObjectSet::create(self.cache.clone(), p, txg);
            let ds = Arc::new(Dataset::new(id, n.to_string(), kind, os, self.me.clone()));
            apply_props(&st.catalog, id, &ds);
            st.handles.insert(id, ds);
            st.catalog_dirty = true;
            Ok(id)
        };
        for p in &to_create {
            make(&mut st, p, DatasetKind::Filesystem, BTreeMap::new(), None)?;
        }
        let sparse = props_in.iter().any(|(k, _)| k == "sparse");
        if is_volume && !sparse && !local.contains_key("reservation") {
            local.insert("reservation".into(), volsize.unwrap().to_string());
        }
        let id = make(&mut st, name, kind, local, volblocksize)?;
        if is_volume {
            let ds = st.handles[&id].clone();
            drop(st);
            // Records of volblocksize from the start: a volume never grows from
            // one small block the way a file does.
            let obj = ds
                .objset
                .create_object_sized(crate::dataset::OTYPE_VOLUME, volblocksize.unwrap_or(16384))?;
            ds.objset.truncate(obj, volsize.unwrap())?;
        }
        Ok(())
    }

    pub fn destroy_dataset(&self, name: &str, recursive: bool) -> Result<()> {
        self.check_live()?;
        if name.contains('@') {
            return self.destroy_snapshot(name);
        }
        // No commit in flight: the record taken here is the one on disk.
        let _c = self.commit_lock.lock();
        let mut st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?
            .clone();
        if rec.parent.is_none() {
            return Err(StoreError::Invalid(format!(
                "'{name}' is the pool's root dataset: use 'pool destroy'"
            )));
        }
        let ids = st.catalog.subtree(rec.id);
        if ids.len() > 1 && !recursive {
            return Err(StoreError::Busy(format!(
                "'{name}' has children: use -r to destroy them too"
            )));
        }
        for id in ids.iter().rev() {
            if let Some(h) = st.handles.get(id) {
                if h.busy() {
                    return Err(StoreError::Busy(format!(
                        "dataset '{}' is busy (mounted or in use)",
                        h.name()
                    )));
                }
            }
        }
        for id in ids.iter() {
            if let Some(c) =
                st.catalog.datasets.values().find(|d| {
                    d.origin.as_ref().is_some_and(|(o, _)| *o == *id) && !ids.contains(&d.id)
                })
            {
                return Err(StoreError::Busy(format!(
                    "'{}' has dependent clones (e.g. '{}'): destroy or promote them first",
                    st.catalog.datasets[id].name, c.name
                )));
            }
        }
        for id in ids.iter().rev() {
            let rec = st.catalog.datasets.remove(id).expect("listed dataset");
            if let Some(h) = st.handles.remove(id) {
                h.mark_destroyed();
                st.pending_destroy.push((*id, h, rec));
            }
        }
        st.catalog_dirty = true;
        Ok(())
    }

    /// Take one atomic snapshot of every `FS@SNAP` given (they commit in the same
    /// txg). O(1) per dataset. Returns the txg.
    pub fn snapshot(&self, names: &[String]) -> Result<u64> {
        self.snapshot_with_guid(names, None)
    }

    /// `snapshot`, keeping a given guid (receive).
    pub(crate) fn snapshot_with_guid(&self, names: &[String], guid: Option<u64>) -> Result<u64> {
        self.check_live()?;
        if names.is_empty() {
            return Err(StoreError::Invalid("no snapshot names given".into()));
        }
        {
            let mut st = self.state.lock();
            let mut list: Vec<(u64, String, Option<u64>)> = Vec::new();
            for full in names {
                let (fs, snap) = split_snapshot(full)?;
                let rec = st
                    .catalog
                    .by_name(fs)
                    .ok_or_else(|| StoreError::NotFound(fs.into()))?;
                let queued = st.snap_ops.iter().any(|op| {
                    matches!(op, crate::snapshot::SnapOp::Create(l) if l.iter().any(|(i, n, _)| *i == rec.id && n == snap))
                });
                if rec.snapshots.iter().any(|s| s.name == snap)
                    || queued
                    || list.iter().any(|(i, n, _)| *i == rec.id && n == snap)
                {
                    return Err(StoreError::Exists(full.clone()));
                }
                list.push((rec.id, snap.to_string(), guid));
            }
            st.snap_ops.push(crate::snapshot::SnapOp::Create(list));
            st.catalog_dirty = true;
        }
        self.sync()
    }

    fn find_snapshot(&self, st: &State, full: &str) -> Result<(u64, usize)> {
        let (fs, snap) = split_snapshot(full)?;
        let rec = st
            .catalog
            .by_name(fs)
            .ok_or_else(|| StoreError::NotFound(fs.into()))?;
        let idx = rec
            .snapshots
            .iter()
            .position(|s| s.name == snap)
            .ok_or_else(|| StoreError::NotFound(full.into()))?;
        Ok((rec.id, idx))
    }

    /// Destroy a snapshot: frees exactly what only it held.
    pub fn destroy_snapshot(&self, full: &str) -> Result<()> {
        self.check_live()?;
        {
            let mut st = self.state.lock();
            let (id, idx) = self.find_snapshot(&st, full)?;
            let snap = st.catalog.datasets[&id].snapshots[idx].name.clone();
            check_no_clones(&st.catalog, id, &snap)?;
            st.snap_ops
                .push(crate::snapshot::SnapOp::Destroy { id, name: snap });
            st.catalog_dirty = true;
        }
        self.sync()?;
        Ok(())
    }

    /// Roll a filesystem back to a snapshot. Newer snapshots must be destroyed
    /// (`recursive`); the dataset must not be in use (mounted).
    pub fn rollback(&self, full: &str, recursive: bool) -> Result<()> {
        self.check_live()?;
        {
            let mut st = self.state.lock();
            let (id, idx) = self.find_snapshot(&st, full)?;
            let rec = &st.catalog.datasets[&id];
            let newer: Vec<String> = rec.snapshots[idx + 1..]
                .iter()
                .map(|s| s.name.clone())
                .collect();
            if !newer.is_empty() && !recursive {
                return Err(StoreError::Busy(format!(
                    "'{full}' is not the newest snapshot ({} newer, e.g. '{}@{}'): use -r to destroy them",
                    newer.len(),
                    rec.name,
                    newer[newer.len() - 1]
                )));
            }
            for n in &newer {
                check_no_clones(&st.catalog, id, n)?;
            }
            if st.handles.get(&id).is_some_and(|h| h.busy()) {
                return Err(StoreError::Busy(format!(
                    "dataset '{}' is busy (mounted or in use): unmount it first",
                    rec.name
                )));
            }
            let snap = rec.snapshots[idx].name.clone();
            for n in newer.into_iter().rev() {
                st.snap_ops
                    .push(crate::snapshot::SnapOp::Destroy { id, name: n });
            }
            st.snap_ops
                .push(crate::snapshot::SnapOp::Rollback { id, name: snap });
            st.catalog_dirty = true;
        }
        self.sync()?;
        Ok(())
    }

    /// Create `new` as a writable clone of snapshot `full`: it shares every block
    /// with the snapshot until written.
    pub fn clone_snapshot(
        &self,
        full: &str,
        new: &str,
        props_in: &[(String, String)],
    ) -> Result<()> {
        check_name(new)?;
        self.clone_unchecked(full, new, props_in)
    }

    pub(crate) fn clone_unchecked(
        &self,
        full: &str,
        new: &str,
        props_in: &[(String, String)],
    ) -> Result<()> {
        self.check_live()?;
        let _c = self.commit_lock.lock();
        let mut st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        if st.catalog.by_name(new).is_some() {
            return Err(StoreError::Exists(new.into()));
        }
        let parent_name = new.rsplit_once('/').map(|p| p.0).ok_or_else(|| {
            StoreError::Invalid(format!(
                "'{new}' is a pool name: clones are created as POOL/NAME"
            ))
        })?;
        let parent = st
            .catalog
            .by_name(parent_name)
            .ok_or_else(|| StoreError::NotFound(parent_name.into()))?
            .id;
        let src = st.catalog.datasets[&id].clone();
        let snap = src.snapshots[idx].clone();
        let mut local = BTreeMap::new();
        for (k, v) in props_in {
            local.insert(
                k.clone(),
                props::validate(k, v, src.kind == DatasetKind::Volume)?,
            );
        }
        let new_id = st.catalog.next_id;
        st.catalog.next_id += 1;
        let mut rec = DatasetRecord::new(new_id, new, Some(parent), src.kind, local, now_s());
        // The clone starts at the snapshot's root and shares every block born
        // before it: those are never freed by the clone.
        rec.objset = snap.objset;
        rec.acct = snap.acct;
        rec.volblocksize = src.volblocksize;
        rec.prev_snap_txg = snap.txg;
        rec.origin = Some((id, snap.name.clone()));
        rec.origin_txg = snap.txg;
        st.catalog.datasets.insert(new_id, rec);
        let txg = self.open_txg();
        let os = ObjectSet::open_fresh_log(
            self.cache.clone(),
            resolve_objset_props(&st.catalog, new_id),
            &snap.objset,
            txg,
        )?;
        let ds = Arc::new(Dataset::new(
            new_id,
            new.to_string(),
            src.kind,
            os,
            self.me.clone(),
        ));
        apply_props(&st.catalog, new_id, &ds);
        st.handles.insert(new_id, ds);
        st.catalog_dirty = true;
        Ok(())
    }

    /// Promote a clone: it takes over its origin's snapshots up to and including
    /// the origin snapshot, and the old origin becomes a clone of it, so the old
    /// origin can then be destroyed. Only catalog records move: every dead list
    /// stays valid because it describes blocks between consecutive snapshots of
    /// the same lineage.
    pub fn promote(&self, clone: &str) -> Result<()> {
        self.check_live()?;
        let _c = self.commit_lock.lock();
        let mut st = self.state.lock();
        let cid = st
            .catalog
            .by_name(clone)
            .ok_or_else(|| StoreError::NotFound(clone.into()))?
            .id;
        let Some((oid, sname)) = st.catalog.datasets[&cid].origin.clone() else {
            return Err(StoreError::Invalid(format!("'{clone}' is not a clone")));
        };
        let origin = st.catalog.datasets[&oid].clone();
        let idx = origin
            .snapshots
            .iter()
            .position(|s| s.name == sname)
            .ok_or_else(|| {
                StoreError::Invalid(format!("origin snapshot of '{clone}' is missing"))
            })?;
        let moving: Vec<String> = origin.snapshots[..=idx]
            .iter()
            .map(|s| s.name.clone())
            .collect();
        let own: Vec<String> = st.catalog.datasets[&cid]
            .snapshots
            .iter()
            .map(|s| s.name.clone())
            .collect();
        if let Some(dup) = moving.iter().find(|m| own.contains(m)) {
            return Err(StoreError::Exists(format!("{clone}@{dup}")));
        }
        let moved: Vec<_> = origin.snapshots[..=idx].to_vec();
        let cat = &mut st.catalog;
        {
            let o = cat.datasets.get_mut(&oid).unwrap();
            o.snapshots.drain(..=idx);
            o.origin = Some((cid, sname.clone()));
            o.origin_txg = moved[idx].txg;
        }
        {
            let c = cat.datasets.get_mut(&cid).unwrap();
            let mut snaps = moved;
            snaps.append(&mut c.snapshots);
            c.snapshots = snaps;
            c.origin = origin.origin.clone();
            c.origin_txg = origin.origin_txg;
        }
        // Other clones of the moved snapshots now depend on the promoted dataset.
        for d in cat.datasets.values_mut() {
            if let Some((o, n)) = &d.origin {
                if *o == oid && moving.contains(n) && d.id != oid {
                    d.origin = Some((cid, n.clone()));
                }
            }
        }
        st.catalog_dirty = true;
        Ok(())
    }

    /// The catalog record of snapshot `full`, with its dataset's volume block size.
    pub(crate) fn snapshot_record(&self, full: &str) -> Result<SnapshotMeta> {
        let st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        let rec = &st.catalog.datasets[&id];
        let s = &rec.snapshots[idx];
        Ok(SnapshotMeta {
            name: s.name.clone(),
            txg: s.txg,
            guid: s.guid,
            volblocksize: rec.volblocksize,
        })
    }

    /// Snapshots of `fs`, oldest first.
    pub(crate) fn snapshot_records(&self, fs: &str) -> Result<Vec<SnapshotMeta>> {
        let st = self.state.lock();
        let rec = st
            .catalog
            .by_name(fs)
            .ok_or_else(|| StoreError::NotFound(fs.into()))?;
        Ok(rec
            .snapshots
            .iter()
            .map(|s| SnapshotMeta {
                name: s.name.clone(),
                txg: s.txg,
                guid: s.guid,
                volblocksize: rec.volblocksize,
            })
            .collect())
    }

    /// Snapshots carry only user properties (`com.example:key`): the MySQL
    /// integration records binlog and GTID positions there. Open context edits
    /// them; commits keep what open context set.
    fn set_snapshot_prop(&self, full: &str, prop: &str, value: &str) -> Result<()> {
        if !props::is_user_prop(prop) {
            return Err(StoreError::Invalid(format!(
                "snapshots are read-only: only user properties (like com.example:key) can be set on '{full}'"
            )));
        }
        let canon = props::validate(prop, value, false)?;
        let mut st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        let rec = st.catalog.datasets.get_mut(&id).expect("found above");
        rec.snapshots[idx].props.insert(prop.to_string(), canon);
        st.catalog_dirty = true;
        Ok(())
    }

    /// Properties of a snapshot: its statistics and user properties.
    fn snapshot_props(&self, full: &str, which: Option<&[String]>) -> Result<Vec<PropRow>> {
        let info = self
            .list_snapshots(Some(split_snapshot(full)?.0))?
            .into_iter()
            .find(|s| s.name == full)
            .ok_or_else(|| StoreError::NotFound(full.into()))?;
        let (user, written_since) = {
            let st = self.state.lock();
            let (id, idx) = self.find_snapshot(&st, full)?;
            let rec = &st.catalog.datasets[&id];
            let snap = &rec.snapshots[idx];
            // written@OLDER of a snapshot: what it holds that was born after OLDER.
            let mut since = BTreeMap::new();
            for p in which.unwrap_or_default() {
                if p.starts_with("written@") {
                    let txg = written_since_txg(rec, p, snap.txg)?;
                    let n = crate::snapshot::written_bytes(&self.cache, &snap.objset, txg)?;
                    since.insert(p.clone(), n);
                }
            }
            (snap.props.clone(), since)
        };
        let mut all: Vec<String> = ["type", "creation", "used", "referenced", "written"]
            .map(String::from)
            .to_vec();
        all.extend(user.keys().cloned());
        let list: Vec<String> = match which {
            Some(w) if !w.iter().any(|p| p == "all") => w.to_vec(),
            _ => all,
        };
        let mut out = Vec::new();
        for p in list {
            let (raw, source) = match p.as_str() {
                "type" => ("snapshot".to_string(), "-"),
                "creation" => (info.creation.to_string(), "-"),
                "used" => (info.used.to_string(), "-"),
                "referenced" | "refer" => (info.referenced.to_string(), "-"),
                "written" => (info.written.to_string(), "-"),
                p if written_since.contains_key(p) => (written_since[p].to_string(), "-"),
                p if props::is_user_prop(p) => match user.get(p) {
                    Some(v) => (v.clone(), "local"),
                    None => ("-".to_string(), "-"),
                },
                p if props::SETTABLE.contains(&p) || props::READONLY.contains(&p) => {
                    ("-".to_string(), "-")
                }
                p => return Err(StoreError::Invalid(format!("invalid property '{p}'"))),
            };
            out.push(PropRow {
                value: props::humanize(&p, &raw),
                property: p,
                raw,
                source: source.to_string(),
            });
        }
        Ok(out)
    }

    /// Rename a dataset without children (receive moves `FS%recv` into place).
    pub(crate) fn rename_leaf(&self, old: &str, new: &str) -> Result<()> {
        let _c = self.commit_lock.lock();
        let mut st = self.state.lock();
        if st.catalog.by_name(new).is_some() {
            return Err(StoreError::Exists(new.into()));
        }
        let id = st
            .catalog
            .by_name(old)
            .ok_or_else(|| StoreError::NotFound(old.into()))?
            .id;
        if st.catalog.children(id).next().is_some() {
            return Err(StoreError::Busy(format!("'{old}' has children")));
        }
        st.catalog.datasets.get_mut(&id).unwrap().name = new.to_string();
        if let Some(h) = st.handles.get(&id) {
            h.set_name(new);
        }
        st.catalog_dirty = true;
        refresh_props(&st);
        Ok(())
    }

    /// Snapshots of `fs` (or of every dataset), oldest first per dataset.
    pub fn list_snapshots(&self, fs: Option<&str>) -> Result<Vec<SnapshotInfo>> {
        self.check_live()?;
        let st = self.state.lock();
        let ids: Vec<u64> = match fs {
            Some(n) => vec![
                st.catalog
                    .by_name(n)
                    .ok_or_else(|| StoreError::NotFound(n.into()))?
                    .id,
            ],
            None => st.catalog.subtree(1),
        };
        let mut out = Vec::new();
        for id in ids {
            let rec = &st.catalog.datasets[&id];
            if rec.name.contains('%') {
                continue; // a receive in progress
            }
            for (i, s) in rec.snapshots.iter().enumerate() {
                let prev = if i > 0 {
                    rec.snapshots[i - 1].txg
                } else {
                    rec.origin_txg
                };
                out.push(SnapshotInfo {
                    name: format!("{}@{}", rec.name, s.name),
                    used: crate::snapshot::unique_bytes(&self.mos, rec, i, rec.origin_txg)?,
                    referenced: s.acct.used,
                    written: crate::snapshot::written_bytes(&self.cache, &s.objset, prev)?,
                    creation: s.creation,
                    txg: s.txg,
                });
            }
        }
        Ok(out)
    }

    /// The identity of snapshot `full` (FS@SNAP): a name can be destroyed and
    /// taken again, its guid cannot.
    pub fn snapshot_guid(&self, full: &str) -> Result<u64> {
        Ok(self.snapshot_record(full)?.guid)
    }

    /// The snapshot names (without `FS@`) of `fs`, oldest first.
    pub fn snapshot_names(&self, fs: &str) -> Result<Vec<String>> {
        Ok(self
            .snapshot_records(fs)?
            .into_iter()
            .map(|s| s.name)
            .collect())
    }

    /// A read-only handle on a snapshot's contents.
    pub fn snapshot_dataset(&self, full: &str) -> Result<Arc<Dataset>> {
        self.check_live()?;
        let st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        let rec = &st.catalog.datasets[&id];
        let os = ObjectSet::open_fresh_log(
            self.cache.clone(),
            resolve_objset_props(&st.catalog, id),
            &rec.snapshots[idx].objset,
            self.open_txg(),
        )?;
        Ok(Arc::new(Dataset::new_readonly(
            id,
            full.to_string(),
            rec.kind,
            os,
            self.me.clone(),
        )))
    }

    pub fn list(&self, root: Option<&str>, recursive: bool) -> Result<Vec<DatasetInfo>> {
        self.check_live()?;
        let st = self.state.lock();
        let ids: Vec<u64> = match root {
            None => st.catalog.subtree(1),
            Some(n) => {
                let r = st
                    .catalog
                    .by_name(n)
                    .ok_or_else(|| StoreError::NotFound(n.into()))?;
                if recursive {
                    st.catalog.subtree(r.id)
                } else {
                    vec![r.id]
                }
            }
        };
        let mut out: Vec<DatasetInfo> = ids
            .iter()
            // A receive in progress (FS%recv) is not a dataset yet.
            .filter(|id| !st.catalog.datasets[id].name.contains('%'))
            .map(|id| {
                let r = &st.catalog.datasets[id];
                DatasetInfo {
                    name: r.name.clone(),
                    kind: r.kind,
                    used: self.used_reported(&st.catalog, *id),
                    available: self.available_in(&st.catalog, *id),
                    referenced: r.acct.used,
                    mountpoint: match r.kind {
                        DatasetKind::Volume => "-".into(),
                        DatasetKind::Filesystem => resolve(&st.catalog, *id, "mountpoint").0,
                    },
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Space a dataset may still use: the pool's unreserved free space (plus its own
    /// unused reservation), capped by the quotas of it and its ancestors.
    pub(crate) fn available_in(&self, cat: &Catalog, id: u64) -> u64 {
        let space = self.pool.space();
        let slop = slop_space(space.size);
        let reserved_elsewhere = reserved_elsewhere(cat, id);
        let dirty = self.dirty.load(Ordering::Relaxed);
        let mut avail = space.free.saturating_sub(slop + reserved_elsewhere + dirty);
        for a in cat.ancestry(id) {
            let d = &cat.datasets[&a];
            let q = num_prop(d, "quota");
            if q > 0 {
                avail = avail.min(q.saturating_sub(used_of(cat, a)));
            }
        }
        avail
    }

    /// Check that `bytes` more may be written to dataset `id`.
    pub(crate) fn check_space(&self, id: u64, bytes: u64) -> Result<()> {
        let st = self.state.lock();
        let cat = &st.catalog;
        let Some(rec) = cat.datasets.get(&id) else {
            return Err(StoreError::NotFound(format!("dataset {id}")));
        };
        // Pending writes cost about their size plus metadata (two copies of indirects).
        let est = bytes + bytes / 8 + 4096;
        let (size, free) = self.pool.space_totals();
        let dirty = self.dirty.load(Ordering::Relaxed);
        let reserved_elsewhere = reserved_elsewhere(cat, id);
        let need = slop_space(size) + reserved_elsewhere + dirty + dirty / 4 + est;
        // Only free space in extents that can hold this dataset's records counts
        // (no gang blocks: a record must be contiguous); metadata needs 16K pieces.
        let blksz = (resolve_objset_props(cat, id).recordsize as u64).max(16384);
        let usable = self.pool.usable_free(blksz).min(free);
        if usable < need {
            return Err(StoreError::NoSpace(self.pool.name()));
        }
        for a in cat.ancestry(id) {
            let d = &cat.datasets[&a];
            let q = num_prop(d, "quota");
            if q > 0 {
                let sub_dirty: u64 = cat
                    .subtree(a)
                    .iter()
                    .filter_map(|i| st.handles.get(i))
                    .map(|h| h.objset.dirty_bytes())
                    .sum();
                if used_of(cat, a) + sub_dirty + est > q {
                    return Err(StoreError::Quota(d.name.clone()));
                }
            }
        }
        let _ = rec;
        Ok(())
    }

    pub fn get_props(&self, name: &str, which: Option<&[String]>) -> Result<Vec<PropRow>> {
        self.check_live()?;
        if name.contains('@') {
            return self.snapshot_props(name, which);
        }
        let st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?;
        let all: Vec<String> = {
            let mut v: Vec<String> = [
                "type",
                "creation",
                "used",
                "available",
                "referenced",
                "compressratio",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            for p in props::SETTABLE {
                if (*p == "volsize" || *p == "volblocksize") && rec.kind != DatasetKind::Volume {
                    continue;
                }
                if (*p == "recordsize" || *p == "mountpoint") && rec.kind == DatasetKind::Volume {
                    continue;
                }
                v.push(p.to_string());
            }
            if rec.kind == DatasetKind::Volume {
                v.push("volblocksize".into());
            }
            v.extend(
                ["logicalused", "written", "origin"]
                    .iter()
                    .map(|s| s.to_string()),
            );
            // User properties set here or inherited.
            let mut user: Vec<String> = Vec::new();
            for a in st.catalog.ancestry(rec.id) {
                for k in st.catalog.datasets[&a].props.keys() {
                    if props::is_user_prop(k) && !user.contains(k) {
                        user.push(k.clone());
                    }
                }
            }
            user.sort();
            v.extend(user);
            v
        };
        let list: Vec<String> = match which {
            None => all,
            Some(w) if w.iter().any(|p| p == "all") => all,
            Some(w) => w.to_vec(),
        };
        let mut out = Vec::new();
        for p in list {
            let (raw, source) = self.prop_value(&st.catalog, rec.id, &p)?;
            out.push(PropRow {
                value: props::humanize(&p, &raw),
                property: p,
                raw,
                source,
            });
        }
        Ok(out)
    }

    /// `used` as users see it (zfs's meaning): what destroying the dataset and
    /// its snapshots and children would free. For a clone that excludes the
    /// blocks it still shares with its origin (born at or before the origin's
    /// txg), found by walking only what was born since (the head's new blocks
    /// and the dead-list entries born after the origin). Space checks keep the
    /// cheaper, conservative `used_of`.
    fn used_reported(&self, cat: &Catalog, id: u64) -> u64 {
        used_with(cat, id, &|d| match d.origin_txg {
            0 => own_used(d),
            origin => self
                .clone_own_bytes(d, origin)
                .unwrap_or_else(|_| own_used(d)),
        })
    }

    /// Bytes of clone `d` born after its origin `origin_txg`: in its head and in
    /// its dead lists.
    fn clone_own_bytes(&self, d: &DatasetRecord, origin_txg: u64) -> Result<u64> {
        let mut own = crate::snapshot::written_bytes(&self.cache, &d.objset, origin_txg)?;
        for list in std::iter::once(d.deadlist).chain(d.snapshots.iter().map(|s| s.deadlist)) {
            own += crate::snapshot::deadlist_bytes_born_after(&self.mos, list, origin_txg)?;
        }
        Ok(own)
    }

    fn prop_value(&self, cat: &Catalog, id: u64, p: &str) -> Result<(String, String)> {
        let rec = &cat.datasets[&id];
        let ro = |v: String| Ok((v, "-".to_string()));
        match p {
            "name" => ro(rec.name.clone()),
            "type" => ro(match rec.kind {
                DatasetKind::Filesystem => "filesystem".into(),
                DatasetKind::Volume => "volume".into(),
            }),
            "creation" => ro(rec.creation.to_string()),
            "used" => ro(self.used_reported(cat, id).to_string()),
            "available" | "avail" => ro(self.available_in(cat, id).to_string()),
            "referenced" | "refer" => ro(rec.acct.used.to_string()),
            "written" => {
                ro(
                    crate::snapshot::written_bytes(&self.cache, &rec.objset, rec.prev_snap_txg)
                        .unwrap_or(rec.acct.used)
                        .to_string(),
                )
            }
            p if p.starts_with("written@") => {
                let txg = written_since_txg(rec, p, u64::MAX)?;
                ro(crate::snapshot::written_bytes(&self.cache, &rec.objset, txg)?.to_string())
            }
            "logicalused" => ro(cat
                .subtree(id)
                .iter()
                .map(|i| cat.datasets[i].acct.logical)
                .sum::<u64>()
                .to_string()),
            "compressratio" => {
                let (l, p) = cat.subtree(id).iter().fold((0u64, 0u64), |(l, p), i| {
                    let a = &cat.datasets[i].acct;
                    (l + a.data_logical, p + a.data_physical)
                });
                let r = if p == 0 { 1.0 } else { l as f64 / p as f64 };
                ro(format!("{r:.2}"))
            }
            "origin" => ro(match &rec.origin {
                Some((o, n)) => cat
                    .datasets
                    .get(o)
                    .map_or("-".into(), |d| format!("{}@{n}", d.name)),
                None => "-".into(),
            }),
            // Properties that do not apply to this kind of dataset read as "-", as in zfs.
            "volblocksize" => ro(rec.volblocksize.map_or("-".into(), |b| b.to_string())),
            "volsize" if rec.kind != DatasetKind::Volume => ro("-".into()),
            "recordsize" | "mountpoint" if rec.kind == DatasetKind::Volume => ro("-".into()),
            "quota" | "reservation" | "volsize" => match rec.props.get(p) {
                Some(v) => Ok((v.clone(), "local".into())),
                None => Ok((
                    props::default_value(p).unwrap_or("none").into(),
                    "default".into(),
                )),
            },
            p if props::is_inheritable(p) => {
                let (v, src) = resolve(cat, id, p);
                if v.is_empty() && props::is_user_prop(p) {
                    return Ok(("-".into(), "-".into()));
                }
                Ok((v, src))
            }
            p => Err(StoreError::Invalid(format!("invalid property '{p}'"))),
        }
    }

    pub fn set_prop(&self, name: &str, prop: &str, value: &str) -> Result<()> {
        self.check_live()?;
        if name.contains('@') {
            return self.set_snapshot_prop(name, prop, value);
        }
        let mut st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?
            .clone();
        let canon = props::validate(prop, value, rec.kind == DatasetKind::Volume)?;
        if prop == "volsize" {
            let bs = rec.volblocksize.unwrap_or(16384) as u64;
            let n: u64 = canon.parse().unwrap_or(0);
            if !n.is_multiple_of(bs) {
                return Err(StoreError::Invalid(format!(
                    "volume size must be a multiple of the volume block size ({})",
                    props::format_size(bs)
                )));
            }
        }
        if prop == "quota" && canon != "none" {
            let q: u64 = canon.parse().unwrap_or(0);
            if q < used_of(&st.catalog, rec.id) {
                return Err(StoreError::Invalid(format!(
                    "cannot set quota below what '{name}' already uses ({})",
                    props::format_size(used_of(&st.catalog, rec.id))
                )));
            }
        }
        if prop == "reservation" && canon != "none" {
            let r: u64 = canon.parse().unwrap_or(0);
            let old = num_prop(&rec, "reservation");
            let avail = self.available_in(&st.catalog, rec.id)
                + old.saturating_sub(used_of(&st.catalog, rec.id));
            if r > avail + used_of(&st.catalog, rec.id) {
                return Err(StoreError::NoSpace(self.pool.name()));
            }
        }
        st.catalog
            .datasets
            .get_mut(&rec.id)
            .unwrap()
            .props
            .insert(prop.to_string(), canon.clone());
        st.catalog_dirty = true;
        if prop == "volsize" {
            let h = st.handles[&rec.id].clone();
            drop(st);
            let objs = h.objset.list_objects()?;
            if let Some(o) = objs.first() {
                h.objset.truncate(*o, canon.parse().unwrap_or(0))?;
            }
            st = self.state.lock();
        }
        refresh_props(&st);
        Ok(())
    }

    pub fn inherit_prop(&self, name: &str, prop: &str) -> Result<()> {
        self.check_live()?;
        let mut st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?
            .clone();
        if !props::is_inheritable(prop) && !["quota", "reservation"].contains(&prop) {
            if props::READONLY.contains(&prop) || props::SETTABLE.contains(&prop) {
                return Err(StoreError::Invalid(format!(
                    "property '{prop}' cannot be inherited"
                )));
            }
            return Err(StoreError::Invalid(format!("invalid property '{prop}'")));
        }
        st.catalog
            .datasets
            .get_mut(&rec.id)
            .unwrap()
            .props
            .remove(prop);
        st.catalog_dirty = true;
        refresh_props(&st);
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
        self.scrub.lock().clone()
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

    /// Object set roots of every dataset as of the last commit (for scrub).
    pub(crate) fn committed_roots(&self) -> Result<Vec<BlkPtr>> {
        let ub = self.pool.uberblock();
        let mos = ObjectSet::open(self.cache.clone(), mos_props(), &ub.mos, ub.txg + 1)?;
        let cat = read_catalog(&mos)?;
        let mut roots = vec![ub.mos];
        roots.extend(cat.datasets.values().map(|d| d.objset));
        Ok(roots)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let mut t = self.txg.lock();
        t.stop = true;
        self.txg_cv.notify_all();
    }
}

fn sync_thread(me: Weak<Store>) {
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
        let has_work = {
            let st = store.state.lock();
            st.catalog_dirty
                || !st.pending_destroy.is_empty()
                || st.handles.values().any(|h| h.objset.is_dirty())
        };
        let requested = {
            let t = store.txg.lock();
            t.requested >= t.open_txg
        };
        if (has_work || requested) && store.txg.lock().error.is_none() {
            // A bug must not leave writers waiting forever for a commit that will
            // never come: a panic becomes the pool's error.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.sync_txg()));
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
            if let Some(e) = err {
                let mut t = store.txg.lock();
                t.error = Some(e);
                store.txg_cv.notify_all();
            }
        }
        if stop {
            let mut t = store.txg.lock();
            t.stopped = true;
            store.txg_cv.notify_all();
            return;
        }
        drop(store);
    }
}

fn mos_props() -> ObjsetProps {
    ObjsetProps {
        recordsize: 128 * 1024,
        compression: Compression::Lz4,
        cache_data: true,
    }
}

fn read_catalog(mos: &ObjectSet) -> Result<Catalog> {
    let size = mos.info(CATALOG_OBJECT)?.size;
    let bytes = mos.read(CATALOG_OBJECT, 0, size as usize)?;
    let cat: Catalog = serde_json::from_slice(&bytes)
        .map_err(|e| StoreError::Invalid(format!("catalog is unreadable: {e}")))?;
    if cat.version > CATALOG_VERSION {
        return Err(StoreError::Invalid(format!(
            "pool catalog version {} is newer than this software ({CATALOG_VERSION})",
            cat.version
        )));
    }
    Ok(cat)
}

/// Value of an inheritable property and where it came from.
pub(crate) fn resolve(cat: &Catalog, id: u64, p: &str) -> (String, String) {
    let chain = cat.ancestry(id);
    for (i, a) in chain.iter().enumerate() {
        let d = &cat.datasets[a];
        if let Some(v) = d.props.get(p) {
            if p == "mountpoint" && i > 0 {
                // Inherited mountpoints append the relative path, as in ZFS.
                let rel = &cat.datasets[&id].name[d.name.len()..];
                let v = if v == "none" || v == "legacy" {
                    v.clone()
                } else {
                    format!("{}{}", v.trim_end_matches('/'), rel)
                };
                return (v, format!("inherited from {}", d.name));
            }
            let src = if i == 0 {
                "local".to_string()
            } else {
                format!("inherited from {}", d.name)
            };
            return (v.clone(), src);
        }
    }
    if p == "mountpoint" {
        return (format!("/{}", cat.datasets[&id].name), "default".into());
    }
    match props::default_value(p) {
        Some(v) => (v.to_string(), "default".into()),
        None => (String::new(), "-".into()),
    }
}

pub(crate) fn resolve_objset_props(cat: &Catalog, id: u64) -> ObjsetProps {
    let rec = &cat.datasets[&id];
    let recordsize = match rec.volblocksize {
        Some(b) => b,
        None => resolve(cat, id, "recordsize").0.parse().unwrap_or(131072),
    };
    ObjsetProps {
        recordsize,
        compression: Compression::parse(&resolve(cat, id, "compression").0)
            .unwrap_or(Compression::Lz4),
        cache_data: resolve(cat, id, "primarycache").0 == "all",
    }
}

fn refresh_props(st: &State) {
    for (id, h) in &st.handles {
        if st.catalog.datasets.contains_key(id) {
            apply_props(&st.catalog, *id, h);
        }
    }
}

/// Push a dataset's resolved properties into the layers that apply them.
fn apply_props(cat: &Catalog, id: u64, h: &Dataset) {
    h.objset.set_props(resolve_objset_props(cat, id));
    h.set_policy(
        crate::dataset::SyncPolicy::parse(&resolve(cat, id, "sync").0),
        resolve(cat, id, "logbias").0 != "throughput",
    );
}

/// Space other datasets' unused reservations hold back from dataset `id` (its own
/// and its ancestors' reservations are space it may use).
fn reserved_elsewhere(cat: &Catalog, id: u64) -> u64 {
    let mine = cat.ancestry(id);
    cat.datasets
        .values()
        .filter(|d| !mine.contains(&d.id))
        .map(|d| num_prop(d, "reservation").saturating_sub(used_of(cat, d.id)))
        .sum()
}

fn num_prop(d: &DatasetRecord, p: &str) -> u64 {
    d.props.get(p).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// used = referenced + what each child charges (at least its reservation).
pub(crate) fn used_of(cat: &Catalog, id: u64) -> u64 {
    used_with(cat, id, &own_used)
}

/// Head, plus what only snapshots hold (the sum of the dead lists).
fn own_used(d: &DatasetRecord) -> u64 {
    d.acct.used + d.deadlist_bytes + d.snapshots.iter().map(|s| s.deadlist_bytes).sum::<u64>()
}

/// `own(dataset)` plus, for each child, the larger of its used and its reservation.
fn used_with(cat: &Catalog, id: u64, own: &dyn Fn(&DatasetRecord) -> u64) -> u64 {
    own(&cat.datasets[&id])
        + cat
            .children(id)
            .map(|c| used_with(cat, c.id, own).max(num_prop(c, "reservation")))
            .sum::<u64>()
}

/// Space held back so commits (which need new metadata even to free) always fit.
pub fn slop_space(size: u64) -> u64 {
    (size / 32).max(4 << 20).min(size / 4)
}
