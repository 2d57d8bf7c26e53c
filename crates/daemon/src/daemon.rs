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
pub mod pool_gauges;
mod pools;
pub mod replication;
mod replication_cascade;
mod replication_cycle;
mod replication_mysql;
mod replication_pull;
mod replication_pull_failback;
mod replication_reverse;
mod replication_serve;
pub mod replication_stats;
mod replication_tree;
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
    ("pool.import", &["dirs", "name", "rewind"]),
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
    ("debug.repl_corrupt", &["offset"]),
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
    ("snap.diff", &["name", "to"]),
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

/// Ops that change nothing (allowed over HTTP without a token).
pub const READ_ONLY_OPS: &[&str] = &[
    "pool.list",
    "pool.status",
    "ds.list",
    "ds.get",
    "snap.diff",
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
        let invalid = |m: String| crate::error_kind::tag(cachalot_datasets::ErrorKind::Invalid, m);
        if is_stream_op(&req.op) {
            return Err(invalid(format!(
                "'{}' carries a byte stream: it is served on the unix socket only (cachalot send / receive)",
                req.op
            )));
        }
        let Some((_, allowed)) = OPS
            .iter()
            .chain(replication::REPL_OPS)
            .find(|(n, _)| *n == req.op)
        else {
            return Err(invalid(format!("unknown operation '{}'", req.op)));
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
            "debug.repl_corrupt" => self.debug_repl_corrupt(&a),
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
