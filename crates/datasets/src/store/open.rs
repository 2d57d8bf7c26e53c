//! Opening a store: creating a pool with its root dataset (txg 1), importing one
//! (catalog, dataset handles, intent-log replay, removal of interrupted receives),
//! and closing it (export, destroy, adding vdevs under the commit lock).
//!
//! Invariants: nothing is served before every dataset's intent log is replayed
//! and committed; a crash during replay leaves the logs in place for the next
//! import; export commits what is open, then stops the sync thread.

use crate::catalog::*;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::props;
use crate::store::*;
use cachalot_objects::{BlockCache, CachePolicy, ObjectSet, ObjsetProps};
use cachalot_pool::{BlkPtr, BlockDevice, Compression, CreateOpts, Pool, Rewind, VdevSpec};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

pub(super) fn mos_props() -> ObjsetProps {
    ObjsetProps {
        recordsize: 128 * 1024,
        compression: Compression::Lz4,
        cache: CachePolicy::ALL,
    }
}

pub(super) fn read_catalog(mos: &ObjectSet) -> Result<Catalog> {
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
    pub(super) fn initialize(
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
                DatasetRecord::new(
                    1,
                    &name,
                    None,
                    DatasetKind::Filesystem,
                    root_props,
                    pool.env().now_secs(),
                ),
            )]),
        };
        let store = Store::assemble(pool, catalog, BlkPtr::HOLE, 1, opts)?;
        let id = store.mos.create_object(1)?;
        debug_assert_eq!(id, CATALOG_OBJECT);
        store.sync_txg()?;
        store.start_thread();
        super::devices::start_spare_watcher(&store);
        Ok(store)
    }

    /// Import a pool found on `paths`.
    pub fn import(paths: &[PathBuf], name: Option<&str>, opts: StoreOpts) -> Result<Arc<Store>> {
        Store::import_with(paths, name, Rewind::Refuse, opts)
    }

    /// `import`, rewinding to an older txg if `rewind` allows it when the newest
    /// committed one's tree does not read (`pool import -F`; `Pool::import_with`).
    pub fn import_with(
        paths: &[PathBuf],
        name: Option<&str>,
        rewind: Rewind,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        let pool = Arc::new(Pool::import_with(paths, name, rewind)?);
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

    /// Create on already-open devices forming one vdev of `kind` (crash tests).
    pub fn create_on_group(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        kind: cachalot_pool::VdevKind,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        Store::create_on_group_with_log(name, devices, kind, vec![], opts)
    }

    /// Like `create_on_group`, with separate log devices (the simulator).
    pub fn create_on_group_with_log(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        kind: cachalot_pool::VdevKind,
        log: Vec<Arc<dyn BlockDevice>>,
        opts: StoreOpts,
    ) -> Result<Arc<Store>> {
        check_pool_name(name)?;
        let pool = Arc::new(Pool::create_on_group_with_log(
            name, devices, kind, log, 12,
        )?);
        Store::initialize(pool, BTreeMap::new(), opts)
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

    pub(super) fn open_pool(pool: Arc<Pool>, opts: StoreOpts) -> Result<Arc<Store>> {
        let ub = pool.uberblock();
        let cache = Arc::new(BlockCache::new(pool.clone(), opts.arc_max));
        let mos = ObjectSet::open(cache.clone(), mos_props(), &ub.mos, ub.txg + 1)?;
        let catalog = read_catalog(&mos)?;
        let store = Store::assemble_with(pool, cache, mos, catalog, ub.txg + 1, opts)?;
        // The L2ARC comes back with what its cache devices hold (persistent).
        store.cache.attach_l2();
        store.replay_logs(ub.txg)?;
        store.clean_interrupted_receives()?;
        store.start_thread();
        // A resilver cut by a restart or export continues (from the position
        // saved in the labels): the replacement is still marked untrusted.
        if store.pool().resilver_pending() {
            crate::scrub::start(store.clone())?;
        }
        super::devices::start_spare_watcher(&store);
        Ok(store)
    }

    /// A receive cut by a crash leaves a hidden `FS%recv`: remove it at import,
    /// unless it is resumable (`receive -s`: it has a resume token).
    pub(super) fn clean_interrupted_receives(&self) -> Result<()> {
        let names: Vec<String> = {
            let st = self.state.lock();
            st.catalog
                .datasets
                .values()
                .filter(|d| d.name.contains('%'))
                .filter(|d| !d.props.contains_key(crate::resume::RESUME_PROP))
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
    /// them again, from the same committed tree, in the same order (see the
    /// invariants of `cachalot_objects::zil`).
    pub(super) fn replay_logs(&self, committed_txg: u64) -> Result<()> {
        // In id order: a replay is a function of the pool (the simulator's
        // same-seed-same-bytes test), not of a hash map's random order.
        let mut handles: Vec<Arc<Dataset>> = self.state.lock().handles.values().cloned().collect();
        handles.sort_by_key(|d| d.id());
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

    pub(super) fn assemble(
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

    pub(super) fn assemble_with(
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
                catalog_changes: 0,
            }),
            txg: Mutex::new(TxgState {
                open_txg: txg,
                synced_txg: txg - 1,
                requested: 0,
                stop: false,
                stopped: false,
                error: None,
                last_commit_ns: 0,
            }),
            txg_cv: Condvar::new(),
            commit_lock: Mutex::new(()),
            resume_checkpoint: Mutex::new(()),
            throttle_last_wakeup: Mutex::new(std::time::Instant::now()),
            opts,
            thread: Mutex::new(None),
            exported: AtomicBool::new(false),
            dirty: AtomicU64::new(0),
            scrub: Arc::new(Mutex::new(ScrubStatus::default())),
            panic_next_commit: AtomicBool::new(false),
            receive_step_hook: Mutex::new(None),
        });
        for rec in catalog.datasets.values() {
            let props = resolve_objset_props(&catalog, rec.id);
            // A head committed by a rollback still has its snapshot's root, whose
            // intent log header names blocks freed since (maybe reused): never
            // claim or replay them; the head's log starts afresh.
            let os = if rec.root_from_snapshot {
                ObjectSet::open_ignoring_log(store.cache.clone(), props, &rec.objset, txg)?
            } else {
                ObjectSet::open(store.cache.clone(), props, &rec.objset, txg)?
            };
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

    pub(super) fn start_thread(&self) {
        self.txg.lock().last_commit_ns = self.pool.env().now_ns();
        if self.pool.env().manual_txg() {
            // Commits run inline in the callers' thread (`Store::step`, `sync`).
            return;
        }
        let me = self.me.clone();
        let h = std::thread::Builder::new()
            .name(format!("txg-sync-{}", self.pool.name()))
            .spawn(move || sync_thread(me))
            .expect("spawn sync thread");
        *self.thread.lock() = Some(h);
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
        } else if self.pool.env().manual_txg() {
            // The final commit the sync thread makes when it stops.
            self.commit_if_work();
            let mut t = self.txg.lock();
            t.stopped = true;
            self.txg_cv.notify_all();
        }
        let err = self.txg.lock().error.clone();
        if let Some(e) = err {
            return Err(StoreError::Pool(cachalot_pool::PoolError::Suspended(e)));
        }
        self.pool.flush_all()?;
        Ok(())
    }

    /// Give up a suspended store without writing anything more: stop its sync
    /// thread (no final commit) and mark it exported. What was committed, and
    /// the intent log, are on disk for the import that follows (`pool clear`).
    pub fn abandon(&self) {
        if self.exported.swap(true, Ordering::AcqRel) {
            return;
        }
        self.pool.suspend("the pool is being re-imported".into());
        scrub::cancel(self);
        {
            let mut t = self.txg.lock();
            t.error
                .get_or_insert_with(|| "the pool is being re-imported".into());
            t.stop = true;
            self.txg_cv.notify_all();
        }
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
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
}
