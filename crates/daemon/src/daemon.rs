//! The daemon core: owns every imported pool (`Store`) and answers requests. Both
//! transports (unix socket, HTTP) call [`Daemon::handle`].
//!
//! Invariants:
//! - `handle` never panics and never blocks other clients for long: a panic in an op is
//!   caught and returned as an error; the pool map lock is held only to look a store up
//!   (ops run on a cloned `Arc<Store>`), and `pool.scrub` with `wait` polls without
//!   holding any lock.
//! - Changes to the set of pools (create, import, export, destroy, add) are serialized
//!   by the `admin` mutex, and each is followed by an atomic rewrite of `pools.json`,
//!   so the file always lists exactly the pools this daemon owns.
//! - A pool listed in `pools.json` that fails to import stays listed as UNAVAIL (with
//!   the error) until it is imported or exported; it is never dropped silently.
//! - All input is validated here before it reaches the engine (names, sizes, paths,
//!   argument types); dataset names map to a pool by their first component.

use crate::proto::{
    self, pool_of, validate_dataset_name, validate_pool_name, Args, Request, Response,
};
use crate::state::{self, PoolRecord, StateFile};
use cachalot_datasets::{Store, StoreError, StoreOpts};
use cachalot_pool::{parse_vdev_spec, CreateOpts, VdevSpec};
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub mod analytics;
mod datasets;
mod devices;
mod failclosed;
mod filesystems;
pub mod iscsi;
mod mounts;
pub mod nbd;
pub mod nfs;
mod objects;
pub mod replication;
mod replication_cycle;
mod replication_mysql;
mod replication_pull;
mod replication_reverse;
mod replication_serve;
pub mod replication_stats;
mod shares;
mod snapshots;
mod streams;
mod volumes;

pub use streams::{is_stream_op, STREAM_OPS};

/// Result of one op: a JSON value, or a one-line message.
pub type OpResult = Result<Value, String>;

/// Largest pattern write / read handled by one request.
pub const MAX_IO_LEN: u64 = 1 << 30;
/// Largest `data_hex` returned by `obj.read`.
pub const MAX_INLINE_READ: usize = 4096;

/// One pool slot: online with its store, or unavailable with the import error.
struct PoolSlot {
    record: PoolRecord,
    store: Option<Arc<Store>>,
    error: Option<String>,
}

/// The daemon: pools, state file, token.
pub struct Daemon {
    home: PathBuf,
    token: String,
    arc_max: u64,
    pools: RwLock<BTreeMap<String, PoolSlot>>,
    admin: Mutex<()>,
    shutting_down: AtomicBool,
    /// Mounted filesystems by dataset name (see `mounts.rs`).
    mounts: Mutex<BTreeMap<String, mounts::MountEntry>>,
    /// Time-series analytics, once started (see `analytics.rs`).
    analytics: std::sync::OnceLock<Arc<analytics::Analytics>>,
    /// One `Fs` per dataset, shared by FUSE and NFS (see `filesystems.rs`).
    filesystems: filesystems::Filesystems,
    /// The NFS server, once started (see `nfs.rs`).
    nfs: Mutex<Option<cachalot_nfs::NfsServer>>,
    /// One block device per served volume (see `volumes.rs`).
    volumes: volumes::Volumes,
    /// The NBD server, once started (see `nbd.rs`).
    nbd: std::sync::OnceLock<Arc<cachalot_nbd::NbdServer>>,
    /// The iSCSI target, once started (see `iscsi.rs`).
    iscsi: std::sync::OnceLock<Arc<iscsi::IscsiService>>,
    /// `serve --allow-fault-injection`: `debug.inject` works only then.
    fault_injection: AtomicBool,
    /// Replication: key, peers, relationships (see `replication.rs`).
    replication: replication::Replication,
    /// Named API tokens and jobs (see `crate::api`).
    pub(crate) api: crate::api::ApiState,
}

/// Every op and the arguments it accepts.
pub const OPS: &[(&str, &[&str])] = &[
    (
        "pool.create",
        &["name", "vdevs", "size", "ashift", "force", "props"],
    ),
    ("pool.import", &["dirs", "name"]),
    ("pool.export", &["name"]),
    ("pool.destroy", &["name"]),
    ("pool.list", &["name"]),
    ("pool.status", &["name"]),
    ("pool.scrub", &["name", "wait"]),
    ("pool.add", &["name", "vdevs", "size", "force"]),
    ("pool.replace", &["name", "old", "new", "size", "force"]),
    ("pool.attach", &["name", "device", "new", "size", "force"]),
    ("pool.detach", &["name", "device"]),
    ("pool.offline", &["name", "device"]),
    ("pool.online", &["name", "device"]),
    ("pool.remove", &["name", "device"]),
    ("pool.sync", &["name"]),
    ("pool.clear", &["name"]),
    ("debug.panic", &["name", "at"]),
    (
        "debug.inject",
        &["name", "device", "ops", "kind", "rate", "clear"],
    ),
    (
        "ds.create",
        &[
            "name",
            "volume_size",
            "sparse",
            "blocksize",
            "props",
            "parents",
        ],
    ),
    ("ds.destroy", &["name", "recursive", "force"]),
    ("snap.create", &["names", "recursive"]),
    ("snap.destroy", &["name", "force"]),
    ("snap.hold", &["name", "tag"]),
    ("snap.release", &["name", "tag"]),
    ("snap.holds", &["name"]),
    ("snap.rollback", &["name", "recursive"]),
    ("snap.clone", &["name", "target", "props"]),
    ("snap.promote", &["name"]),
    ("ds.list", &["name", "recursive", "depth", "type", "props"]),
    ("ds.get", &["name", "props"]),
    ("ds.set", &["name", "prop", "value"]),
    ("ds.inherit", &["name", "prop"]),
    ("obj.create", &["ds"]),
    (
        "obj.write",
        &["ds", "obj", "off", "data_b64", "data_hex", "pattern"],
    ),
    ("obj.read", &["ds", "obj", "off", "len", "check_seed"]),
    ("obj.truncate", &["ds", "obj", "size"]),
    ("obj.delete", &["ds", "obj"]),
    ("obj.size", &["ds", "obj"]),
    ("obj.list", &["ds"]),
    ("obj.fsync", &["ds"]),
    ("fs.mount", &["name", "path"]),
    ("fs.unmount", &["name", "force"]),
    ("fs.mounts", &[]),
    ("share.list", &[]),
    ("analytics.list", &[]),
    ("analytics.usage", &[]),
    ("analytics.show", ANALYTICS_ARGS),
    ("analytics.series", ANALYTICS_ARGS),
    ("analytics.heatmap", ANALYTICS_ARGS),
    ("token.create", &["name"]),
    ("token.list", &[]),
    ("token.revoke", &["name"]),
];

const ANALYTICS_ARGS: &[&str] = &["stat", "by", "filters", "last", "from", "to", "top"];

/// The devices of a create or add: vdev groups, spares, cache devices.
struct VdevWords {
    specs: Vec<VdevSpec>,
    spares: Vec<PathBuf>,
    cache: Vec<PathBuf>,
}

/// Vdev type words accepted in a vdev specification (besides device paths).
const VDEV_TYPES: &[&str] = &[
    "mirror", "raidz", "raidz1", "raidz2", "log", "cache", "spare",
];

/// Ops that change nothing (allowed over HTTP without a token).
pub const READ_ONLY_OPS: &[&str] = &[
    "pool.list",
    "pool.status",
    "ds.list",
    "ds.get",
    "fs.mounts",
    "share.list",
    "analytics.list",
    "analytics.usage",
    "analytics.show",
    "analytics.series",
    "analytics.heatmap",
];

/// True if `op` only reads.
pub fn is_read_only(op: &str) -> bool {
    READ_ONLY_OPS.contains(&op)
}

fn se(e: StoreError) -> String {
    crate::error_kind::tag(e.kind(), proto::one_line(&e.to_string()))
}

/// "pool 'NAME' does not exist", as an error of kind not-found.
fn no_such_pool(name: &str) -> String {
    crate::error_kind::tag(
        cachalot_datasets::ErrorKind::NotFound,
        format!("pool '{name}' does not exist"),
    )
}

fn log(msg: impl std::fmt::Display) {
    eprintln!("cachalot: {msg}");
}

/// Column aliases of `list -o` / `get`, as zfs has them.
pub fn canonical_prop(p: &str) -> &str {
    match p {
        "avail" => "available",
        "refer" => "referenced",
        "ratio" => "compressratio",
        "lused" => "logicalused",
        "recsize" => "recordsize",
        "compress" => "compression",
        other => other,
    }
}

impl Daemon {
    /// Open the daemon state in `home` (which must exist) and re-import every pool
    /// listed in `pools.json`. Import failures are logged and kept as UNAVAIL.
    pub fn open(home: &Path, arc_max: u64) -> anyhow::Result<Daemon> {
        let token = state::load_or_create_token(home)?;
        let st = state::load(home)?;
        let api = crate::api::ApiState::open(home, token.clone())?;
        let d = Daemon {
            home: home.to_path_buf(),
            token,
            arc_max,
            pools: RwLock::new(BTreeMap::new()),
            admin: Mutex::new(()),
            shutting_down: AtomicBool::new(false),
            mounts: Mutex::new(BTreeMap::new()),
            analytics: std::sync::OnceLock::new(),
            filesystems: Default::default(),
            nfs: Mutex::new(None),
            volumes: volumes::Volumes::default(),
            nbd: std::sync::OnceLock::new(),
            iscsi: std::sync::OnceLock::new(),
            fault_injection: AtomicBool::new(false),
            replication: replication::Replication::open(home)?,
            api,
        };
        for rec in st.pools {
            if validate_pool_name(&rec.name).is_err() || rec.devices.is_empty() {
                log(format!("state: skipping invalid pool entry '{}'", rec.name));
                continue;
            }
            let name = rec.name.clone();
            let res = catch_unwind(AssertUnwindSafe(|| {
                Store::import(&rec.devices, Some(&rec.name), d.store_opts())
            }));
            let slot = match res {
                Ok(Ok(store)) => {
                    log(format!("imported pool '{name}'"));
                    PoolSlot {
                        record: PoolRecord {
                            devices: store.pool().device_paths(),
                            ..rec
                        },
                        store: Some(store),
                        error: None,
                    }
                }
                Ok(Err(e)) => {
                    log(format!("cannot import pool '{name}': {e}"));
                    PoolSlot {
                        record: rec,
                        store: None,
                        error: Some(se(e)),
                    }
                }
                Err(p) => {
                    let msg = panic_message(&p);
                    log(format!(
                        "cannot import pool '{name}': internal error: {msg}"
                    ));
                    PoolSlot {
                        record: rec,
                        store: None,
                        error: Some(format!("internal error: {msg}")),
                    }
                }
            };
            d.pools.write().insert(name, slot);
        }
        // Device paths may have moved; record what was actually opened.
        if let Err(e) = d.save_state() {
            log(format!("cannot write state file: {e}"));
        }
        d.restore_mounts();
        Ok(d)
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The API token (HTTP `Authorization: Bearer`).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The ARC size limit of every pool (`serve --arc-max`).
    pub(crate) fn arc_max(&self) -> u64 {
        self.arc_max
    }

    fn store_opts(&self) -> StoreOpts {
        StoreOpts {
            arc_max: self.arc_max,
            ..StoreOpts::default()
        }
    }

    /// True once `shutdown` has begun (requests are then refused).
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Answer one request. Never panics.
    pub fn handle(&self, req: &Request) -> Response {
        if self.is_shutting_down() {
            return Response::err("the daemon is shutting down");
        }
        crate::error_kind::reset();
        match guarded(&req.op, || self.dispatch(req)) {
            Ok(v) => Response::ok(v),
            Err(e) => {
                // A caught panic (see `guarded`): fail closed.
                if e.starts_with("internal error in ") {
                    self.fail_closed(req, &e);
                }
                let kind = crate::error_kind::take(&e);
                let mut r = Response::err(e);
                r.code = kind.map(|k| crate::error_kind::code(k).to_string());
                r
            }
        }
    }

    fn dispatch(&self, req: &Request) -> OpResult {
        if is_stream_op(&req.op) {
            return Err(format!(
                "'{}' carries a byte stream: it is served on the unix socket only (cachalot send / receive)",
                req.op
            ));
        }
        let Some((_, allowed)) = OPS
            .iter()
            .chain(replication::REPL_OPS)
            .find(|(n, _)| *n == req.op)
        else {
            return Err(format!("unknown operation '{}'", req.op));
        };
        let a = Args::new(&req.op, &req.args, allowed)?;
        match req.op.as_str() {
            "pool.create" => self.pool_create(&a),
            "pool.import" => self.pool_import(&a),
            "pool.export" => self.pool_export(&a),
            "pool.destroy" => self.pool_destroy(&a),
            "pool.list" => self.pool_list(&a),
            "pool.status" => self.pool_status(&a),
            "pool.scrub" => self.pool_scrub(&a),
            "pool.add" => self.pool_add(&a),
            "pool.replace" => self.pool_replace(&a),
            "pool.attach" => self.pool_attach(&a),
            "pool.detach" => self.pool_detach(&a),
            "pool.offline" => self.pool_offline(&a, false),
            "pool.online" => self.pool_offline(&a, true),
            "pool.remove" => self.pool_remove(&a),
            "debug.inject" => self.debug_inject(&a),
            "pool.sync" => self.pool_sync(&a),
            "pool.clear" => self.pool_clear(&a),
            "debug.panic" => self.debug_panic(&a),
            "ds.create" => self.ds_create(&a),
            "ds.destroy" => self.ds_destroy(&a),
            "ds.list" => self.ds_list(&a),
            "ds.get" => self.ds_get(&a),
            "ds.set" => self.ds_set(&a),
            "ds.inherit" => self.ds_inherit(&a),
            "share.list" => self.share_list(),
            op if op.starts_with("obj.") => self.obj_op(op, &a),
            op if op.starts_with("fs.") => self.fs_op(op, &a),
            op if op.starts_with("snap.") => self.snap_op(op, &a),
            op if op.starts_with("analytics.") => self.analytics_op(op, &a),
            op if op.starts_with("repl.") => self.repl_op(op, &a),
            op if op.starts_with("token.") => self.token_op(op, &a),
            op => Err(format!("unknown operation '{op}'")),
        }
    }

    /// Export every pool cleanly; later requests are refused. Idempotent.
    pub fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        if let Some(a) = self.analytics.get() {
            a.stop();
        }
        self.stop_nfs();
        self.stop_nbd();
        if let Some(i) = self.iscsi.get() {
            i.stop();
        }
        let _g = self.admin.lock();
        // Mounts go first (forced: the daemon is leaving); pools.json keeps them so
        // the next start re-mounts them.
        let _ = self.unmount_pool(None, true);
        let slots = std::mem::take(&mut *self.pools.write());
        for (name, slot) in slots {
            if let Some(store) = slot.store {
                match catch_unwind(AssertUnwindSafe(|| store.export())) {
                    Ok(Ok(())) => log(format!("exported pool '{name}'")),
                    Ok(Err(e)) => log(format!("export of pool '{name}' failed: {e}")),
                    Err(p) => log(format!(
                        "export of pool '{name}' failed: internal error: {}",
                        panic_message(&p)
                    )),
                }
            }
        }
        // pools.json is left as it was: the pools are re-imported at the next start.
    }

    fn save_state(&self) -> std::io::Result<()> {
        let st = StateFile {
            version: 1,
            pools: self
                .pools
                .read()
                .values()
                .map(|s| s.record.clone())
                .collect(),
        };
        state::save(&self.home, &st)
    }

    fn save_state_after(&self, what: &str) -> Result<(), String> {
        self.save_state().map_err(|e| {
            log(format!("cannot write state file after {what}: {e}"));
            format!("{what} succeeded, but the state file could not be written: {e}")
        })
    }

    /// The online store of pool `name`, or a clear error.
    /// The stores of every imported (online) pool, in pool-name order: what the
    /// protocol servers and `share list` walk.
    pub(crate) fn open_stores(&self) -> Vec<Arc<Store>> {
        self.pools
            .read()
            .values()
            .filter_map(|s| s.store.clone())
            .collect()
    }

    fn store(&self, name: &str) -> Result<Arc<Store>, String> {
        match self.pools.read().get(name) {
            None => Err(no_such_pool(name)),
            Some(PoolSlot { store: Some(s), .. }) => Ok(s.clone()),
            Some(slot) => Err(format!(
                "pool '{name}' is unavailable: {}",
                slot.error.as_deref().unwrap_or("not imported")
            )),
        }
    }

    /// The store of a dataset or of a snapshot (`FS@SNAP`).
    fn ds_or_snap_store(&self, name: &str) -> Result<Arc<Store>, String> {
        match name.split_once('@') {
            Some(_) => {
                let (fs, _) = snapshots::split_snapshot_name(name)?;
                self.store(pool_of(fs))
            }
            None => self.ds_store(name),
        }
    }

    fn ds_store(&self, ds: &str) -> Result<Arc<Store>, String> {
        validate_dataset_name(ds)?;
        self.store(pool_of(ds))
    }

    /// Canonical paths of every device owned by a pool of this daemon.
    fn devices_in_use(&self) -> Vec<(String, PathBuf)> {
        let pools = self.pools.read();
        let mut out = Vec::new();
        for (name, slot) in pools.iter() {
            let devs = match &slot.store {
                Some(s) => s.pool().device_paths(),
                None => slot.record.devices.clone(),
            };
            for d in devs {
                out.push((name.clone(), canon(&d)));
            }
        }
        out
    }

    /// `check_devices_free` for one new disk (a replacement, an attached mirror child).
    fn check_device_free(&self, path: &Path) -> Result<(), String> {
        self.check_devices_free(&[VdevSpec {
            kind: cachalot_pool::VdevKind::Disk,
            paths: vec![path.to_path_buf()],
            log: false,
        }])
    }

    /// Options for a device joining an existing pool (add, replace, attach): the
    /// pool's own ashift, with `size` and `force` from the request.
    fn joining_device_opts(store: &Store, a: &Args) -> Result<CreateOpts, String> {
        Ok(CreateOpts {
            ashift: store.pool().config().ashift,
            create_size: a.opt_size("size")?,
            force: a.bool("force")?,
        })
    }

    fn check_devices_free(&self, specs: &[VdevSpec]) -> Result<(), String> {
        let used = self.devices_in_use();
        for p in specs.iter().flat_map(|s| s.paths.iter()) {
            if !p.is_absolute() {
                return Err(format!("{}: device paths must be absolute", p.display()));
            }
            let c = canon(p);
            if let Some((pool, _)) = used.iter().find(|(_, u)| *u == c) {
                return Err(format!(
                    "{}: device is in use by pool '{pool}'",
                    p.display()
                ));
            }
        }
        Ok(())
    }

    /// The vdev words of create and add: vdev groups, hot spares (`spare
    /// PATH...`) and cache devices (`cache PATH...`), none of them in use by
    /// any pool.
    fn parse_vdevs(&self, a: &Args) -> Result<VdevWords, String> {
        let words = a.str_list("vdevs")?;
        if words.is_empty() {
            return Err("no devices given".into());
        }
        for w in &words {
            if !w.starts_with('/') && !VDEV_TYPES.contains(&w.as_str()) {
                return Err(format!(
                    "'{w}' is neither a vdev type ({}) nor an absolute device path",
                    VDEV_TYPES.join(", ")
                ));
            }
        }
        let (rest, spares) = cachalot_pool::split_spares(&words);
        let (rest, cache) = cachalot_pool::split_section(&rest, "cache");
        for (taken, word) in [(&spares, "spare"), (&cache, "cache")] {
            if taken.is_empty() && words.iter().any(|w| w == word) {
                return Err(format!("'{word}' must be followed by devices"));
            }
        }
        let specs = if rest.is_empty() && !(spares.is_empty() && cache.is_empty()) {
            vec![]
        } else {
            parse_vdev_spec(&rest).map_err(|e| e.to_string())?
        };
        let mut all = specs.clone();
        all.push(VdevSpec {
            kind: cachalot_pool::VdevKind::Disk,
            paths: spares.iter().chain(&cache).cloned().collect(),
            log: false,
        });
        self.check_devices_free(&all)?;
        let mut seen = std::collections::HashSet::new();
        for p in all.iter().flat_map(|s| s.paths.iter()) {
            if !seen.insert(canon(p)) {
                return Err(format!("{}: device given more than once", p.display()));
            }
        }
        Ok(VdevWords {
            specs,
            spares,
            cache,
        })
    }

    /// Add the spares and cache devices of `w` to the pool of `store`.
    fn add_extra_devices(store: &Store, w: &VdevWords, copts: &CreateOpts) -> OpResult {
        if !w.spares.is_empty() {
            store
                .change_devices(|p, next| p.add_spares(&w.spares, copts, next))
                .map_err(se)?;
        }
        if !w.cache.is_empty() {
            store.add_cache(&w.cache, copts).map_err(se)?;
        }
        Ok(json!({}))
    }

    // ---- pools ----

    fn pool_create(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        validate_pool_name(&name)?;
        let ashift = a.opt_u64("ashift")?.unwrap_or(12);
        if !(9..=16).contains(&ashift) {
            return Err(format!("invalid ashift {ashift}: must be 9 to 16"));
        }
        let copts = CreateOpts {
            ashift: ashift as u8,
            create_size: a.opt_size("size")?,
            force: a.bool("force")?,
        };
        let props = a.props("props")?;
        let _g = self.admin.lock();
        if self.pools.read().contains_key(&name) {
            return Err(format!("pool '{name}' already exists"));
        }
        let w = self.parse_vdevs(a)?;
        if w.specs.is_empty() {
            return Err("no vdevs given: spares or cache devices alone make no pool".into());
        }
        let store =
            Store::create(&name, &w.specs, &copts, &props, self.store_opts()).map_err(se)?;
        if let Err(e) = Self::add_extra_devices(&store, &w, &copts) {
            // Refused spares or cache devices: no pool either.
            let _ = store.destroy_pool();
            return Err(e);
        }
        let record = PoolRecord {
            name: name.clone(),
            devices: store.pool().device_paths(),
            mounts: vec![],
        };
        self.pools.write().insert(
            name.clone(),
            PoolSlot {
                record,
                store: Some(store),
                error: None,
            },
        );
        log(format!("created pool '{name}'"));
        self.save_state_after("pool create")?;
        Ok(json!({ "name": name }))
    }

    fn online_guids(&self) -> Vec<u64> {
        self.pools
            .read()
            .values()
            .filter_map(|s| s.store.as_ref().map(|s| s.pool().guid()))
            .collect()
    }

    fn pool_import(&self, a: &Args) -> OpResult {
        let dirs: Vec<PathBuf> = a.str_list("dirs")?.into_iter().map(PathBuf::from).collect();
        for d in &dirs {
            if !d.is_absolute() {
                return Err(format!("{}: search paths must be absolute", d.display()));
            }
            if !d.exists() {
                return Err(format!("{}: no such file or directory", d.display()));
            }
        }
        let name = a.opt_str("name")?;
        let _g = self.admin.lock();
        let Some(name) = name else {
            if dirs.is_empty() {
                return Err("no search directory given: use -d DIR".into());
            }
            let guids = self.online_guids();
            let found: Vec<Value> = Store::discover(&dirs)
                .into_iter()
                .filter(|p| !guids.contains(&p.guid))
                .map(|p| {
                    json!({
                        "name": p.name,
                        "guid": p.guid,
                        "state": if p.missing.is_empty() { "ONLINE" } else { "UNAVAIL" },
                        "devices": p.devices,
                        "missing": p.missing,
                    })
                })
                .collect();
            if found.is_empty() {
                return Err("no pools available to import".into());
            }
            return Ok(Value::Array(found));
        };
        if name.is_empty() || name.len() > 255 {
            return Err(format!("invalid pool name '{name}'"));
        }
        let known = {
            let pools = self.pools.read();
            match pools.get(&name) {
                Some(PoolSlot { store: Some(_), .. }) => {
                    return Err(format!("pool '{name}' is already imported"))
                }
                Some(slot) => Some(slot.record.clone()),
                None => None,
            }
        };
        let search: Vec<PathBuf> = match (&known, dirs.is_empty()) {
            (_, false) => dirs.clone(),
            (Some(rec), true) => rec.devices.clone(),
            (None, true) => return Err("no search directory given: use -d DIR".into()),
        };
        let guids = self.online_guids();
        if Store::discover(&search)
            .iter()
            .any(|p| guids.contains(&p.guid) && (p.name == name || p.guid.to_string() == name))
        {
            return Err(format!("pool '{name}' is already imported"));
        }
        let store = Store::import(&search, Some(&name), self.store_opts()).map_err(se)?;
        let real = store.name();
        {
            let pools = self.pools.read();
            if real != name && pools.contains_key(&real) {
                drop(pools);
                let _ = store.export();
                return Err(format!("a pool named '{real}' already exists"));
            }
        }
        let mounts = known.map(|r| r.mounts).unwrap_or_default();
        let record = PoolRecord {
            name: real.clone(),
            devices: store.pool().device_paths(),
            mounts,
        };
        self.pools.write().insert(
            real.clone(),
            PoolSlot {
                record,
                store: Some(store),
                error: None,
            },
        );
        log(format!("imported pool '{real}'"));
        self.save_state_after("pool import")?;
        self.restore_pool_mounts(&real);
        Ok(json!({ "name": real }))
    }

    fn pool_export(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let _g = self.admin.lock();
        self.stop_serving(|n| volumes::is_under(n, &name));
        if let Err(e) = self.unmount_pool(Some(&name), false) {
            let _ = self.record_mounts(&name);
            return Err(e);
        }
        let store = {
            let pools = self.pools.read();
            match pools.get(&name) {
                None => return Err(no_such_pool(&name)),
                Some(slot) => slot.store.clone(),
            }
        };
        self.release_fs(&name);
        if let Some(store) = &store {
            store.export().map_err(se)?;
        }
        self.pools.write().remove(&name);
        log(format!("exported pool '{name}'"));
        self.save_state_after("pool export")?;
        Ok(json!({ "name": name }))
    }

    fn pool_destroy(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let _g = self.admin.lock();
        self.stop_serving(|n| volumes::is_under(n, &name));
        if let Err(e) = self.unmount_pool(Some(&name), false) {
            let _ = self.record_mounts(&name);
            return Err(e);
        }
        let store = self.store(&name)?;
        self.release_fs(&name);
        store.destroy_pool().map_err(se)?;
        self.pools.write().remove(&name);
        log(format!("destroyed pool '{name}'"));
        self.save_state_after("pool destroy")?;
        Ok(json!({ "name": name }))
    }

    fn selected_pools(&self, name: Option<&str>) -> Result<Vec<String>, String> {
        let pools = self.pools.read();
        match name {
            Some(n) if !pools.contains_key(n) => Err(no_such_pool(n)),
            Some(n) => Ok(vec![n.to_string()]),
            None => Ok(pools.keys().cloned().collect()),
        }
    }

    fn pool_list(&self, a: &Args) -> OpResult {
        let name = a.opt_str("name")?;
        let mut rows = Vec::new();
        for n in self.selected_pools(name.as_deref())? {
            let store = self.pools.read().get(&n).map(|s| s.store.clone());
            let Some(store) = store else { continue };
            rows.push(match store {
                Some(s) => {
                    let st = s.status();
                    let sp = &st.space;
                    json!({
                        "name": n,
                        "size": sp.size,
                        "alloc": sp.allocated,
                        "free": sp.free,
                        "frag": sp.frag,
                        "cap": (sp.allocated.saturating_mul(100)).checked_div(sp.size).unwrap_or(0),
                        "health": st.health,
                    })
                }
                None => json!({
                    "name": n, "size": null, "alloc": null, "free": null,
                    "frag": null, "cap": null, "health": "UNAVAIL",
                }),
            });
        }
        Ok(Value::Array(rows))
    }

    fn pool_status(&self, a: &Args) -> OpResult {
        let name = a.opt_str("name")?;
        let mut out = Vec::new();
        for n in self.selected_pools(name.as_deref())? {
            let slot = {
                let pools = self.pools.read();
                pools
                    .get(&n)
                    .map(|s| (s.store.clone(), s.record.clone(), s.error.clone()))
            };
            let Some((store, record, error)) = slot else {
                continue;
            };
            out.push(match store {
                Some(s) => serde_json::to_value(s.status()).map_err(|e| e.to_string())?,
                None => json!({
                    "name": n,
                    "health": "UNAVAIL",
                    "error": error,
                    "space": {"size": 0, "allocated": 0, "free": 0, "frag": 0},
                    "devices": record.devices.iter().map(|d| json!({
                        "name": d.display().to_string(), "state": "UNAVAIL",
                        "read": 0, "write": 0, "cksum": 0, "repaired": 0, "children": [],
                    })).collect::<Vec<_>>(),
                    "scrub": {"state": "none", "examined": 0, "total": 0, "errors": 0,
                              "repaired": 0, "unrecoverable": 0, "started": 0, "ended": 0,
                              "duration_ms": 0},
                    "txg": 0,
                    "suspended": null,
                }),
            });
        }
        Ok(Value::Array(out))
    }

    fn pool_scrub(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let store = self.store(&name)?;
        store.scrub_start().map_err(se)?;
        if a.bool("wait")? {
            loop {
                let st = store.scrub_status();
                if st.state != "scanning" {
                    break;
                }
                if self.shutting_down.load(Ordering::SeqCst) {
                    return Err("the daemon is shutting down".into());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        serde_json::to_value(store.scrub_status()).map_err(|e| e.to_string())
    }

    fn pool_add(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        let w = self.parse_vdevs(a)?;
        let copts = Self::joining_device_opts(&store, a)?;
        if !w.specs.is_empty() {
            store.add_vdevs(&w.specs, &copts).map_err(se)?;
        }
        Self::add_extra_devices(&store, &w, &copts)?;
        if let Some(slot) = self.pools.write().get_mut(&name) {
            slot.record.devices = store.pool().device_paths();
        }
        log(format!("added devices to pool '{name}'"));
        self.save_state_after("pool add")?;
        Ok(json!({ "name": name }))
    }

    /// `pool replace POOL OLD [NEW]`: swap a mirror or raidz child and resilver.
    /// Without NEW (or NEW = OLD's path) a new disk took OLD's place.
    fn pool_replace(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let old = a.str("old")?;
        let new_arg = a.opt_str("new")?.unwrap_or_else(|| old.clone());
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        // In place: OLD's own path is in use by this pool, by OLD; the pool
        // checks the label to tell a new disk from the old one.
        let in_place = store
            .pool()
            .leaf_path(&old)
            .filter(|p| new_arg == old || canon(Path::new(&new_arg)) == canon(p));
        let new = in_place.clone().unwrap_or_else(|| PathBuf::from(&new_arg));
        if !new.is_absolute() {
            return Err(format!("{}: not an absolute device path", new.display()));
        }
        // A spare of this pool may be named by hand, as zpool allows.
        let spare = store.pool().spare_paths().contains(&canon(&new));
        if in_place.is_none() && !spare {
            self.check_device_free(&new)?;
        }
        let copts = Self::joining_device_opts(&store, a)?;
        store.replace_device(&old, &new, &copts).map_err(se)?;
        if let Some(slot) = self.pools.write().get_mut(&name) {
            slot.record.devices = store.pool().device_paths();
        }
        log(format!(
            "pool '{name}': {old} replaced by {}",
            new.display()
        ));
        self.save_state_after("pool replace")?;
        Ok(json!({ "name": name }))
    }

    /// Let `debug.inject` work (tests only: `serve --allow-fault-injection`).
    pub fn allow_fault_injection(&self) {
        self.fault_injection.store(true, Ordering::SeqCst);
    }

    /// `debug inject POOL DEV read|write|all eio|corrupt [--rate N]`, or with
    /// `clear` stop every injected fault (of one pool or all).
    fn debug_inject(&self, a: &Args) -> OpResult {
        if !self.fault_injection.load(Ordering::SeqCst) {
            return Err(
                "fault injection is off: start the daemon with `serve --allow-fault-injection` (tests only)"
                    .into(),
            );
        }
        let name = a.opt_str("name")?;
        if a.bool("clear")? {
            for n in self.selected_pools(name.as_deref())? {
                if let Ok(store) = self.store(&n) {
                    store.pool().clear_faults();
                }
            }
            return Ok(json!({}));
        }
        let name = name.ok_or("a pool name is needed")?;
        let store = self.store(&name)?;
        let rate = a.opt_u64("rate")?.unwrap_or(100);
        let fault = cachalot_pool::fault::Fault::parse(
            &a.str("ops")?,
            &a.str("kind")?,
            rate.min(255) as u8,
        )
        .map_err(|e| e.to_string())?;
        let device = a.str("device")?;
        store
            .pool()
            .inject_fault(&device, Some(fault))
            .map_err(|e| e.to_string())?;
        log(format!(
            "pool '{name}': fault injected on {device}: {fault:?}"
        ));
        Ok(json!({ "name": name }))
    }

    fn pool_sync(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let store = self.store(&name)?;
        let txg = store.sync().map_err(se)?;
        Ok(json!({ "txg": txg }))
    }

    /// Small JSON summary for the status page: pools and their datasets.
    pub fn overview(&self) -> Value {
        let pools = self
            .handle(&Request::new("pool.list", json!({})))
            .into_result()
            .unwrap_or(Value::Array(vec![]));
        let datasets = self
            .handle(&Request::new("ds.list", json!({})))
            .into_result()
            .unwrap_or(Value::Array(vec![]));
        json!({ "pools": pools, "datasets": datasets })
    }
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Run `f`, turning a panic inside it into an error "internal error in WHAT"
/// (logged), so no request can take a connection thread down.
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = panic_message(&p);
            log(format!("internal error in {what}: {msg}"));
            Err(format!("internal error in {what}: {msg}"))
        }
    }
}

pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

#[cfg(test)]
mod tests;
