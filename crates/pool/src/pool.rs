//! The storage pool: the `Pool` handle, its vdev tree, status and the addition of
//! vdevs. The work is cut along its seams, each in its own module:
//! - `vdev_spec`: the zpool-style vdev grammar and device creation;
//! - `import`: creating, discovering and importing pools;
//! - `allocator`: in-memory free/allocated/deferred space per vdev;
//! - `spacemap_sync`: persisting and loading the space maps;
//! - `blockio`: block writes and verified reads with self-healing;
//! - `commit`: labels, uberblocks and the atomic commit of a txg.
//!
//! Invariants:
//! - Allocation happens only in syncing context (one commit at a time per pool),
//!   except intent-log blocks, which are allocated in open context and recorded in
//!   the next commit's space map.
//! - A block freed in txg T stays unallocatable until T+1 has committed, so the tree
//!   of the previous uberblock is never overwritten while it may still be imported.
//! - `commit(T)` writes the space map segment of T, flushes every vdev, writes the
//!   uberblock of T to every label and flushes again. Only then is T durable.
//! - Metadata blocks get two copies (DVAs), on different top-level vdevs when there
//!   is more than one, far apart on the same vdev otherwise.
//! - A block is returned to callers only after its checksum matched.
//! - The space of each vdev is covered exactly by its free, allocated and deferred
//!   ranges (`Pool::verify`).

use crate::allocator::{SpaceState, VdevSpace, USABLE_CLASSES};
use crate::commit::write_labels;
use crate::error::{PoolError, Result};
use crate::label::*;
use crate::vdev::{ErrorCounters, Leaf, TopVdev};
use crate::vdev_spec::open_for_create;
use parking_lot::{Mutex, RwLock};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

pub use crate::allocator::SpaceInfo;
pub use crate::blockio::WriteOpts;
pub use crate::commit::read_label;
pub use crate::import::{Importable, Rewind};
pub use crate::vdev_spec::{parse_vdev_spec, CreateOpts, VdevSpec};

/// Per-device status row for `pool status`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceStatus {
    pub name: String,
    pub state: String,
    pub read: u64,
    pub write: u64,
    pub cksum: u64,
    pub repaired: u64,
    pub children: Vec<DeviceStatus>,
    /// A separate intent-log device (shown under "logs").
    #[serde(default)]
    pub log: bool,
    /// A hot spare not in use (shown under "spares").
    #[serde(default)]
    pub spare: bool,
    /// A cache device (shown under "cache"): its size, use and hits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::cache_vdev::CacheInfo>,
}

/// The pool.
pub struct Pool {
    pub(crate) config: RwLock<PoolConfig>,
    pub(crate) vdevs: RwLock<Vec<Arc<TopVdev>>>,
    pub(crate) space: Mutex<SpaceState>,
    pub(crate) last_ub: Mutex<Uberblock>,
    pub(crate) suspended: Mutex<Option<String>>,
    /// Free bytes usable by blocks of 2^(12+i) bytes (4K..1M), as of the last
    /// commit: in a fragmented pool not every free byte can hold a large block.
    pub(crate) usable: Mutex<[u64; USABLE_CLASSES]>,
    /// Events the operator should see in `pool status` (a lost log device...).
    pub(crate) notices: Mutex<Vec<String>>,
    /// While set (scrub running), freed space is not made allocatable again.
    pub(crate) hold_frees: std::sync::atomic::AtomicBool,
    /// Clock, guids and txg trigger: taken at create or import (`env` module).
    pub(crate) env: crate::env::Env,
    /// Live read holds: count by the txg each holds (`readhold`).
    pub(crate) readers: Mutex<std::collections::BTreeMap<u64, usize>>,
    /// Cache devices of the L2ARC (`cache_vdev`).
    pub(crate) cache: RwLock<Vec<Arc<crate::cache_vdev::CacheVdev>>>,
}

/// A fresh identity (pools, vdevs, intent-log chains, snapshots): never 0. From
/// the environment current in this thread (`Env::current`); code that has a pool
/// asks `Pool::env` instead, so identities follow the pool's environment.
pub fn new_guid() -> u64 {
    crate::env::Env::current().guid()
}

/// Address space of a top-level vdev whose smallest child has `smallest` data
/// bytes: one child's (disk, mirror) or all children's rows (raidz, parity included).
pub(crate) fn top_asize(kind: VdevKind, smallest: u64, sector: u64, children: usize) -> u64 {
    let child = smallest / sector * sector;
    if crate::raidz::nparity(kind) > 0 {
        child * children as u64
    } else {
        child
    }
}

pub(crate) fn top_config(t: &TopVdev) -> TopVdevConfig {
    let rebuildable = t.rebuildable_without_unreadable();
    TopVdevConfig {
        id: t.id,
        guid: t.guid,
        kind: t.kind,
        asize: t.asize,
        log: t.log,
        children: t
            .leaves
            .iter()
            .map(|l| {
                // FAULTED by errors: it misses writes from an unknown txg on and
                // is rebuilt in full when it comes back (`faulted`), if the
                // vdev's readable leaves can rebuild it.
                let faulted = l.fault.faulted.load(Relaxed) && rebuildable;
                LeafConfig {
                    guid: l.guid,
                    path: l.path.clone(),
                    resilvering: l.resilvering.load(Relaxed) || faulted,
                    offline: l.is_offline(),
                    offline_txg: if faulted {
                        0
                    } else {
                        l.fault.offline_txg.load(Relaxed)
                    },
                }
            })
            .collect(),
    }
}

impl Pool {
    pub fn name(&self) -> String {
        self.config.read().name.clone()
    }

    pub fn guid(&self) -> u64 {
        self.config.read().guid
    }

    pub fn config(&self) -> PoolConfig {
        self.config.read().clone()
    }

    pub fn sector_size(&self) -> usize {
        1 << self.config.read().ashift
    }

    /// The uberblock of the last committed txg.
    pub fn uberblock(&self) -> Uberblock {
        *self.last_ub.lock()
    }

    /// The environment the pool runs in (clock, guids, txg trigger).
    pub fn env(&self) -> &crate::env::Env {
        &self.env
    }

    pub fn suspended(&self) -> Option<String> {
        self.suspended.lock().clone()
    }

    /// Paths of all leaf devices, spares and cache devices.
    pub fn device_paths(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self
            .vdevs
            .read()
            .iter()
            .flat_map(|t| t.leaves.iter().map(|l| l.path.clone()))
            .collect();
        v.extend(self.spare_paths());
        v.extend(self.cache_paths());
        v
    }

    /// Stop all writes: the pool is SUSPENDED with `why` (the first reason
    /// stays). Fail closed: a failed commit, a failed invariant or a panic in
    /// the engine ends here; only a re-import (`pool clear`) leaves the state.
    pub fn suspend(&self, why: String) {
        self.suspended.lock().get_or_insert(why);
    }

    pub(crate) fn check_suspended(&self) -> Result<()> {
        match &*self.suspended.lock() {
            Some(why) => Err(PoolError::Suspended(why.clone())),
            None => Ok(()),
        }
    }

    /// Add top-level vdevs to a live pool. New labels are written and every
    /// device's label is updated to the new configuration.
    pub fn add_vdevs(&self, specs: &[VdevSpec], opts: &CreateOpts, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        let existing = self.device_paths();
        for s in specs {
            for p in &s.paths {
                let c = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                if existing.contains(&c) {
                    return Err(PoolError::InvalidSpec(format!(
                        "{}: already part of this pool",
                        p.display()
                    )));
                }
            }
        }
        let new_tops = self.open_new_vdevs(specs, opts)?;
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.next_config_txg(next_txg);
        cfg.vdevs.extend(new_tops.iter().map(top_config));
        // New devices get full labels; then every old device gets the new header.
        for t in &new_tops {
            for l in &t.leaves {
                let h = LabelHeader {
                    config: cfg.clone(),
                    leaf_guid: l.guid,
                    top_id: t.id,
                };
                write_labels(l.dev.as_deref().unwrap(), &h, true)?;
            }
        }
        {
            let mut s = self.space.lock();
            for t in &new_tops {
                s.vdevs.push(VdevSpace::new(t.asize));
            }
        }
        self.vdevs
            .write()
            .extend(new_tops.into_iter().map(Arc::new));
        *self.config.write() = cfg.clone();
        self.rewrite_label_headers()?;
        Ok(())
    }

    /// Open (or create) the devices of vdevs to add, checking each: big enough, no
    /// other pool's label unless forced. On failure, files it created are removed.
    fn open_new_vdevs(&self, specs: &[VdevSpec], opts: &CreateOpts) -> Result<Vec<TopVdev>> {
        let sector = self.sector_size() as u64;
        let mut new_tops = Vec::new();
        let mut created: Vec<PathBuf> = Vec::new();
        let remove_created = |created: &[PathBuf]| {
            for c in created {
                let _ = std::fs::remove_file(c);
            }
        };
        let base_id = self.vdevs.read().len() as u32;
        for (i, spec) in specs.iter().enumerate() {
            let mut leaves = Vec::new();
            for p in &spec.paths {
                let existed = p.exists();
                let dev = match open_for_create(p, opts) {
                    Ok(d) => d,
                    Err(e) => {
                        remove_created(&created);
                        return Err(e);
                    }
                };
                if !existed {
                    created.push(p.clone());
                }
                let bad = if dev.size() < MIN_DEVICE_SIZE {
                    Some(PoolError::TooSmall {
                        path: p.clone(),
                        size: dev.size(),
                        min: MIN_DEVICE_SIZE,
                    })
                } else if !opts.force {
                    read_label(dev.as_ref()).map(|h| {
                        PoolError::InvalidSpec(format!(
                            "{}: device is part of pool '{}' (use -f to overwrite)",
                            p.display(),
                            h.config.name
                        ))
                    })
                } else {
                    None
                };
                if let Some(e) = bad {
                    remove_created(&created);
                    return Err(e);
                }
                leaves.push(Leaf {
                    guid: self.env.guid(),
                    path: std::fs::canonicalize(p).unwrap_or(p.clone()),
                    dev: Some(dev),
                    errors: ErrorCounters::default(),
                    resilvering: Default::default(),
                    fault: Default::default(),
                });
            }
            let smallest = leaves
                .iter()
                .map(|l| leaf_data_size(l.dev.as_ref().unwrap().size()))
                .min()
                .unwrap();
            let asize = top_asize(spec.kind, smallest, sector, leaves.len());
            new_tops.push(TopVdev {
                id: base_id + i as u32,
                guid: self.env.guid(),
                kind: spec.kind,
                asize,
                leaves,
                log: spec.log,
                faulted: Default::default(),
                ashift: self.config.read().ashift,
            });
        }
        Ok(new_tops)
    }

    /// Vdev tree with error counters.
    pub fn device_status(&self) -> Vec<DeviceStatus> {
        let leaf_status = |l: &Leaf| DeviceStatus {
            name: l.path.display().to_string(),
            state: l.state().into(),
            read: l.errors.read.load(Relaxed),
            write: l.errors.write.load(Relaxed),
            cksum: l.errors.cksum.load(Relaxed),
            repaired: l.errors.repaired.load(Relaxed),
            children: vec![],
            log: false,
            spare: false,
            cache: None,
        };
        self.vdevs
            .read()
            .iter()
            .map(|t| match t.kind {
                VdevKind::Disk => {
                    let mut d = leaf_status(&t.leaves[0]);
                    if t.faulted.load(Relaxed) {
                        d.state = "FAULTED".into();
                    }
                    d.log = t.log;
                    d
                }
                _ => {
                    let children: Vec<DeviceStatus> = t.leaves.iter().map(leaf_status).collect();
                    DeviceStatus {
                        name: match t.kind {
                            VdevKind::Raidz1 => format!("raidz1-{}", t.id),
                            VdevKind::Raidz2 => format!("raidz2-{}", t.id),
                            _ => format!("mirror-{}", t.id),
                        },
                        state: t.health().into(),
                        read: children.iter().map(|c| c.read).sum(),
                        write: children.iter().map(|c| c.write).sum(),
                        cksum: children.iter().map(|c| c.cksum).sum(),
                        repaired: children.iter().map(|c| c.repaired).sum(),
                        children,
                        log: t.log,
                        spare: false,
                        cache: None,
                    }
                }
            })
            .chain(self.spare_paths().into_iter().map(|p| DeviceStatus {
                name: p.display().to_string(),
                state: "AVAIL".into(),
                read: 0,
                write: 0,
                cksum: 0,
                repaired: 0,
                children: vec![],
                log: false,
                spare: true,
                cache: None,
            }))
            .chain(self.cache.read().iter().map(|c| c.status()))
            .collect()
    }

    /// ONLINE, DEGRADED, SUSPENDED.
    pub fn health(&self) -> &'static str {
        if self.suspended.lock().is_some() {
            return "SUSPENDED";
        }
        if self.vdevs.read().iter().any(|t| t.health() != "ONLINE") {
            "DEGRADED"
        } else {
            "ONLINE"
        }
    }

    /// Messages for `pool status`.
    pub fn notices(&self) -> Vec<String> {
        self.notices.lock().clone()
    }

    /// Add a message for `pool status`.
    pub fn add_notice(&self, msg: String) {
        self.notices.lock().push(msg);
    }
}
