//! Creating a pool on devices, discovering pools on devices, and importing one at
//! its newest uberblock whose tree and space maps read back.
//!
//! Invariants: creation checks every device before writing any label; import
//! picks devices by the leaf guids of their labels (paths may have changed) and
//! uses the newest configuration among the labels.
//!
//! Import never drops a committed txg without being asked (as zfs, `import -F`):
//! - A commit flushes its tree before it writes its uberblock (`commit`), so a
//!   valid uberblock whose tree does not read means damage (beyond redundancy,
//!   or a device that lied about a flush), not a torn write.
//! - A commit writes its uberblock into every ring (one per label copy) of every
//!   device and only then flushes: a commit whose final flush returned (the one
//!   a caller may have been told about) left its txg in every ring of each
//!   device that took it. A txg present in some rings of a device and absent
//!   from another readable ring of the same device is a commit cut before its
//!   final flush: never acknowledged. Only such an uberblock may be skipped
//!   silently when its tree does not read. Absent means the slot holds older
//!   content (a valid older uberblock, or zeros): a slot failing its checksum
//!   is rot, which a cut cannot leave (the uberblock is one sector); and a ring
//!   write that failed while the commit went on is recorded in the labels
//!   (`RingMiss`) before the final flush, so that leaf's rings are no evidence.
//! - Any other uberblock whose tree does not read stops a normal import with an
//!   error naming the txg, the read error and the devices' error counts.
//!   `Rewind::Allow` goes back to the newest older uberblock whose tree reads
//!   and says so in `pool status` (a notice naming the txgs dropped). The
//!   previous txg's tree stays intact for this: frees of txg T become
//!   allocatable only once T+1 has committed.

use crate::allocator::{SpaceState, USABLE_CLASSES};
use crate::blkptr::BlkPtr;
use crate::commit::{now_ns, read_label, read_uberblock_rings, write_labels, Ring};
use crate::device::{BlockDevice, FileDevice};
use crate::error::{PoolError, Result};
use crate::label::*;
use crate::pool::{new_guid, top_asize, top_config, Pool};
use crate::vdev::{ErrorCounters, Leaf, TopVdev};
use crate::vdev_spec::{expand_paths, open_for_create, CreateOpts, VdevSpec};
use parking_lot::{Mutex, RwLock};
use std::path::PathBuf;
use std::sync::Arc;

/// Opened devices of one top-level vdev, with the paths they were opened from.
type DeviceGroup = Vec<(PathBuf, Arc<dyn BlockDevice>)>;

/// A pool found by scanning devices.
#[derive(Clone, Debug)]
pub struct Importable {
    pub name: String,
    pub guid: u64,
    pub config: PoolConfig,
    pub devices: Vec<PathBuf>,
    pub missing: Vec<PathBuf>,
}

impl Pool {
    /// Create a pool on the given vdevs and write its labels. The caller commits the
    /// first transaction group (txg 1) with the initial meta object set.
    pub fn create(name: &str, specs: &[VdevSpec], opts: &CreateOpts) -> Result<Pool> {
        if !(9..=16).contains(&opts.ashift) {
            return Err(PoolError::InvalidSpec(format!(
                "invalid ashift {}: expected 9..16",
                opts.ashift
            )));
        }
        // Open and check everything before writing anything.
        let mut opened: Vec<DeviceGroup> = Vec::new();
        let mut created: Vec<PathBuf> = Vec::new();
        let cleanup = |created: &Vec<PathBuf>| {
            for p in created {
                let _ = std::fs::remove_file(p);
            }
        };
        for spec in specs {
            let mut group = Vec::new();
            for p in &spec.paths {
                let existed = p.exists();
                let dev = match open_for_create(p, opts) {
                    Ok(d) => d,
                    Err(e) => {
                        cleanup(&created);
                        return Err(e);
                    }
                };
                if !existed {
                    created.push(p.clone());
                }
                if dev.size() < MIN_DEVICE_SIZE {
                    cleanup(&created);
                    return Err(PoolError::TooSmall {
                        path: p.clone(),
                        size: dev.size(),
                        min: MIN_DEVICE_SIZE,
                    });
                }
                if !opts.force {
                    if let Some(h) = read_label(dev.as_ref()) {
                        cleanup(&created);
                        return Err(PoolError::InvalidSpec(format!(
                            "{}: device is part of pool '{}' (use -f to overwrite)",
                            p.display(),
                            h.config.name
                        )));
                    }
                }
                group.push((p.clone(), dev));
            }
            opened.push(group);
        }
        if specs.iter().all(|s| s.log) {
            return Err(PoolError::InvalidSpec(
                "a pool needs at least one data vdev besides log devices".into(),
            ));
        }
        let groups = specs.iter().map(|s| (s.kind, s.log)).zip(opened).collect();
        Pool::create_from(name, groups, opts.ashift)
    }

    /// Create a pool on already-open devices (simulated devices in tests).
    pub fn create_on_devices(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        mirror: bool,
        ashift: u8,
    ) -> Result<Pool> {
        Pool::create_on_devices_with_log(name, devices, mirror, vec![], ashift)
    }

    /// Like `create_on_devices`, with separate log devices (one vdev each).
    pub fn create_on_devices_with_log(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        mirror: bool,
        log: Vec<Arc<dyn BlockDevice>>,
        ashift: u8,
    ) -> Result<Pool> {
        let with_paths: DeviceGroup = devices
            .into_iter()
            .map(|d| (d.path().to_path_buf(), d))
            .collect();
        for (p, d) in &with_paths {
            if d.size() < MIN_DEVICE_SIZE {
                return Err(PoolError::TooSmall {
                    path: p.clone(),
                    size: d.size(),
                    min: MIN_DEVICE_SIZE,
                });
            }
        }
        let mut groups: Vec<((VdevKind, bool), DeviceGroup)> = if mirror {
            vec![((VdevKind::Mirror, false), with_paths)]
        } else {
            with_paths
                .into_iter()
                .map(|d| ((VdevKind::Disk, false), vec![d]))
                .collect()
        };
        for d in log {
            groups.push(((VdevKind::Disk, true), vec![(d.path().to_path_buf(), d)]));
        }
        Pool::create_from(name, groups, ashift)
    }

    /// Create on already-opened devices forming one top-level vdev of `kind`
    /// (crash tests build raidz pools of simulated devices with it).
    pub fn create_on_group(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        kind: VdevKind,
        ashift: u8,
    ) -> Result<Pool> {
        Pool::create_on_group_with_log(name, devices, kind, vec![], ashift)
    }

    /// Like `create_on_group`, with separate log devices (one vdev each): the
    /// simulator's layouts.
    pub fn create_on_group_with_log(
        name: &str,
        devices: Vec<Arc<dyn BlockDevice>>,
        kind: VdevKind,
        log: Vec<Arc<dyn BlockDevice>>,
        ashift: u8,
    ) -> Result<Pool> {
        let with_path = |d: Arc<dyn BlockDevice>| (d.path().to_path_buf(), d);
        let mut groups = vec![((kind, false), devices.into_iter().map(with_path).collect())];
        for d in log {
            groups.push(((VdevKind::Disk, true), vec![with_path(d)]));
        }
        Pool::create_from(name, groups, ashift)
    }

    /// Create from opened device groups: ((kind, is_log), devices).
    fn create_from(
        name: &str,
        groups: Vec<((VdevKind, bool), DeviceGroup)>,
        ashift: u8,
    ) -> Result<Pool> {
        let sector = 1u64 << ashift;
        let mut config = PoolConfig {
            version: LABEL_VERSION,
            name: name.to_string(),
            guid: new_guid(),
            ashift,
            config_txg: 1,
            vdevs: vec![],
            resilver_from: None,
            resilver_walk: 0,
            spares: vec![],
            cache: vec![],
            ring_misses: vec![],
        };
        let mut tops = Vec::new();
        for (id, ((kind, log), group)) in groups.into_iter().enumerate() {
            let smallest = group
                .iter()
                .map(|(_, d)| leaf_data_size(d.size()))
                .min()
                .unwrap();
            let asize = top_asize(kind, smallest, sector, group.len());
            let leaves: Vec<Leaf> = group
                .into_iter()
                .map(|(path, dev)| Leaf {
                    guid: new_guid(),
                    path: std::fs::canonicalize(&path).unwrap_or(path),
                    dev: Some(dev),
                    errors: ErrorCounters::default(),
                    resilvering: Default::default(),
                    fault: Default::default(),
                })
                .collect();
            let top = TopVdev {
                id: id as u32,
                guid: new_guid(),
                kind,
                asize,
                leaves,
                log,
                faulted: Default::default(),
                ashift,
            };
            config.vdevs.push(top_config(&top));
            tops.push(Arc::new(top));
        }
        for top in &tops {
            for leaf in &top.leaves {
                let h = LabelHeader {
                    config: config.clone(),
                    leaf_guid: leaf.guid,
                    top_id: top.id,
                };
                write_labels(leaf.dev.as_deref().unwrap(), &h, true)?;
            }
        }
        let space = SpaceState::new(tops.iter().map(|t| t.asize));
        let ub = Uberblock {
            txg: 0,
            pool_guid: config.guid,
            guid_sum: config.guid_sum(),
            timestamp_ns: now_ns(),
            config_txg: 1,
            mos: BlkPtr::HOLE,
            sm_head: BlkPtr::HOLE,
            sm_base: BlkPtr::HOLE,
        };
        Ok(Pool::assemble(config, tops, space, ub))
    }

    pub(crate) fn assemble(
        config: PoolConfig,
        tops: Vec<Arc<TopVdev>>,
        space: SpaceState,
        ub: Uberblock,
    ) -> Pool {
        Pool {
            config: RwLock::new(config),
            vdevs: RwLock::new(tops),
            space: Mutex::new(space),
            last_ub: Mutex::new(ub),
            suspended: Mutex::new(None),
            hold_frees: std::sync::atomic::AtomicBool::new(false),
            usable: Mutex::new([0; USABLE_CLASSES]),
            notices: Mutex::new(Vec::new()),
            env: crate::env::Env::current(),
            readers: Mutex::new(Default::default()),
            cache: RwLock::new(Vec::new()),
        }
    }

    /// Scan devices for pools. Unreadable or foreign files are skipped.
    pub fn discover(paths: &[PathBuf]) -> Vec<Importable> {
        let mut found: Vec<(LabelHeader, PathBuf)> = Vec::new();
        for p in expand_paths(paths) {
            if let Ok(dev) = FileDevice::open(&p) {
                if let Some(h) = read_label(&dev) {
                    found.push((h, std::fs::canonicalize(&p).unwrap_or(p)));
                }
            }
        }
        let mut pools: Vec<Importable> = Vec::new();
        for (h, path) in &found {
            let newest = found
                .iter()
                .filter(|(o, _)| o.config.guid == h.config.guid)
                .max_by_key(|(o, _)| o.config.config_txg)
                .unwrap();
            if pools.iter().any(|p| p.guid == h.config.guid) {
                pools
                    .iter_mut()
                    .find(|p| p.guid == h.config.guid)
                    .unwrap()
                    .devices
                    .push(path.clone());
                continue;
            }
            pools.push(Importable {
                name: newest.0.config.name.clone(),
                guid: h.config.guid,
                config: newest.0.config.clone(),
                devices: vec![path.clone()],
                missing: vec![],
            });
        }
        for p in &mut pools {
            // Match leaves by guid against the labels found.
            let guids: Vec<u64> = found
                .iter()
                .filter(|(h, _)| h.config.guid == p.guid)
                .map(|(h, _)| h.leaf_guid)
                .collect();
            p.missing = p
                .config
                .vdevs
                .iter()
                .flat_map(|v| v.children.iter())
                .filter(|l| !guids.contains(&l.guid))
                .map(|l| l.path.clone())
                .collect();
        }
        pools
    }

    /// Import a pool from real devices. Devices are looked up by the label guids, so
    /// files may have moved. Returns the pool opened at its newest valid uberblock;
    /// refuses when that uberblock's tree does not read (see `import_with`).
    pub fn import(paths: &[PathBuf], name: Option<&str>) -> Result<Pool> {
        Pool::import_with(paths, name, Rewind::Refuse)
    }

    /// `import`, saying what to do when the newest committed uberblock's tree
    /// does not read: refuse, or rewind to an older txg (`pool import -F`).
    pub fn import_with(paths: &[PathBuf], name: Option<&str>, rewind: Rewind) -> Result<Pool> {
        let pools = Pool::discover(paths);
        let cand: Vec<&Importable> = pools
            .iter()
            .filter(|p| name.is_none_or(|n| n == p.name || n == p.guid.to_string()))
            .collect();
        let imp = match (cand.len(), name) {
            (0, Some(n)) => {
                return Err(PoolError::Import(format!(
                    "no pool named '{n}' found on the given devices"
                )))
            }
            (0, None) => {
                return Err(match paths {
                    [one] if one.is_file() => PoolError::NotAPool(one.clone()),
                    _ => PoolError::Import("no pools found on the given devices".into()),
                })
            }
            (1, _) => cand[0],
            _ => {
                return Err(PoolError::Import(
                    "several pools found: name the one to import".into(),
                ))
            }
        };
        let mut devs: Vec<(u64, Arc<dyn BlockDevice>, PathBuf)> = Vec::new();
        for p in &imp.devices {
            let d = FileDevice::open(p)?;
            if let Some(h) = read_label(&d) {
                devs.push((h.leaf_guid, Arc::new(d), p.clone()));
            }
        }
        Pool::open_devices(imp.config.clone(), devs, rewind)
    }

    /// Open a pool from already-opened devices (also used by crash tests).
    pub fn import_devices(devices: Vec<Arc<dyn BlockDevice>>) -> Result<Pool> {
        Pool::import_devices_with(devices, Rewind::Refuse)
    }

    /// `import_devices` with the choice of `import_with`.
    pub fn import_devices_with(devices: Vec<Arc<dyn BlockDevice>>, rewind: Rewind) -> Result<Pool> {
        let mut best: Option<LabelHeader> = None;
        let mut devs = Vec::new();
        for d in devices {
            let Some(h) = read_label(d.as_ref()) else {
                return Err(PoolError::NotAPool(d.path().to_path_buf()));
            };
            if best
                .as_ref()
                .is_none_or(|b| h.config.config_txg > b.config.config_txg)
            {
                best = Some(h.clone());
            }
            devs.push((h.leaf_guid, d.clone(), d.path().to_path_buf()));
        }
        let Some(best) = best else {
            return Err(PoolError::Import("no devices given".into()));
        };
        Pool::open_devices(best.config, devs, rewind)
    }

    fn open_devices(
        config: PoolConfig,
        devs: Vec<(u64, Arc<dyn BlockDevice>, PathBuf)>,
        rewind: Rewind,
    ) -> Result<Pool> {
        let mut tops = Vec::new();
        let mut notices = Vec::new();
        for v in &config.vdevs {
            let leaves: Vec<Leaf> = v
                .children
                .iter()
                .map(|c| {
                    let found = devs.iter().find(|(g, _, _)| *g == c.guid);
                    let fault = crate::fault::LeafFault::default();
                    fault
                        .offline
                        .store(c.offline, std::sync::atomic::Ordering::Relaxed);
                    fault
                        .offline_txg
                        .store(c.offline_txg, std::sync::atomic::Ordering::Relaxed);
                    Leaf {
                        guid: c.guid,
                        path: found.map(|f| f.2.clone()).unwrap_or_else(|| c.path.clone()),
                        dev: found.map(|f| f.1.clone()),
                        errors: ErrorCounters::default(),
                        resilvering: c.resilvering.into(),
                        fault,
                    }
                })
                .collect();
            // A missing log device does not stop the import: the pool runs on what
            // the main vdevs committed and logs to them (the log's tail is lost).
            if leaves.iter().all(|l| l.dev.is_none()) && !v.log {
                return Err(PoolError::Import(format!(
                    "pool '{}': missing device {} (vdev {} has no usable device)",
                    config.name,
                    v.children[0].path.display(),
                    v.id
                )));
            }
            check_raidz_survives(&config.name, v, &leaves)?;
            let missing_log = v.log && leaves.iter().all(|l| l.dev.is_none());
            if missing_log {
                notices.push(format!(
                    "log device {} is missing: intent log records on it were lost; logging to the main vdevs",
                    v.children[0].path.display()
                ));
            }
            tops.push(Arc::new(TopVdev {
                id: v.id,
                guid: v.guid,
                kind: v.kind,
                asize: v.asize,
                leaves,
                log: v.log,
                faulted: std::sync::atomic::AtomicBool::new(missing_log),
                ashift: config.ashift,
            }));
        }
        // Per device, each ring that reads.
        let rings: Vec<DeviceRings> = tops
            .iter()
            .flat_map(|t| t.leaves.iter())
            .filter_map(|l| {
                let d = l.dev.as_ref()?;
                Some(DeviceRings {
                    leaf: l.guid,
                    rings: read_uberblock_rings(d.as_ref(), config.guid),
                })
            })
            .collect();
        let mut ubs: Vec<Uberblock> = rings
            .iter()
            .flat_map(|d| d.rings.iter())
            .flat_map(|r| r.ubs.iter())
            .copied()
            .collect();
        ubs.sort_by_key(|u| std::cmp::Reverse(u.txg));
        ubs.dedup_by_key(|u| u.txg);
        if ubs.is_empty() {
            return Err(PoolError::Import(format!(
                "pool '{}': no valid uberblock (creation never completed?)",
                config.name
            )));
        }
        let cache = crate::cache_vdev::open_cache(&config, &devs, &mut notices);
        let pool = Pool::assemble(config, tops, SpaceState::new(std::iter::empty()), ubs[0]);
        *pool.cache.write() = cache;
        pool.notices.lock().extend(notices);
        pool.open_at_uberblock(ubs, &rings, rewind)?;
        Ok(pool)
    }

    /// Take the newest uberblock whose root and space maps read back with good
    /// checksums; skip a newer one only if its commit never finished
    /// (`torn_commit`) or `rewind` allows it (module comment).
    fn open_at_uberblock(
        &self,
        ubs: Vec<Uberblock>,
        rings: &[DeviceRings],
        rewind: Rewind,
    ) -> Result<()> {
        let misses = self.config.read().ring_misses.clone();
        // Txgs whose tree did not read though their commit finished.
        let mut dropped: Vec<(u64, PoolError)> = Vec::new();
        let mut last_err = None;
        for ub in ubs {
            let loaded = self.load_space(&ub).and_then(|s| {
                if !ub.mos.is_hole() {
                    self.read_block(&ub.mos)?;
                }
                Ok(s)
            });
            match loaded {
                Ok(space) => {
                    *self.space.lock() = space;
                    *self.last_ub.lock() = ub;
                    self.refresh_usable();
                    if let Some((newest, e)) = dropped.first() {
                        self.add_notice(format!(
                            "import rewound to txg {}: the tree of txg {newest} did not read ({e}); changes committed after txg {} are lost",
                            ub.txg, ub.txg
                        ));
                    }
                    return Ok(());
                }
                Err(e) if torn_commit(rings, &misses, ub.txg) => last_err = Some(e),
                Err(e) if rewind == Rewind::Allow => dropped.push((ub.txg, e)),
                Err(e) => {
                    return Err(PoolError::Import(format!(
                        "pool '{}': the tree of txg {}, its newest committed uberblock, does not read: {e}{}; a rewind to an older txg would drop committed changes: import with -F to rewind",
                        self.name(),
                        ub.txg,
                        self.device_errors()
                    )))
                }
            }
        }
        let e = dropped.pop().map(|(_, e)| e).or(last_err);
        Err(PoolError::Import(format!(
            "pool '{}': no uberblock with a readable tree: {}{}",
            self.name(),
            e.map(|e| e.to_string()).unwrap_or_default(),
            self.device_errors()
        )))
    }

    /// The devices with read or checksum errors so far, for an import's error.
    fn device_errors(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let rows: Vec<String> = self
            .vdevs
            .read()
            .iter()
            .flat_map(|t| t.leaves.iter())
            .filter_map(|l| {
                let (r, c) = (l.errors.read.load(Relaxed), l.errors.cksum.load(Relaxed));
                (r + c > 0).then(|| format!("{}: {r} read, {c} checksum", l.path.display()))
            })
            .collect();
        if rows.is_empty() {
            String::new()
        } else {
            format!(" (device errors: {})", rows.join("; "))
        }
    }
}

/// What an import does when the newest committed uberblock's tree does not
/// read: refuse (the default), or go back to an older txg (`pool import -F`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rewind {
    #[default]
    Refuse,
    Allow,
}

/// The uberblock rings of one leaf device.
struct DeviceRings {
    leaf: u64,
    rings: Vec<Ring>,
}

/// The commit of `txg` was cut before its final flush: some device holds it in
/// one of its uberblock rings and not in another that reads (module comment).
/// Not absent: a slot that fails its checksum (rot; a cut never leaves one,
/// see `Ring::rotted`), nor the rings of a leaf whose write of that uberblock
/// failed while the commit went on (`RingMiss`, recorded before the commit's
/// final flush). Either would otherwise pass a finished, acknowledged commit
/// off as cut and let a damaged newest tree be skipped without the refusal.
fn torn_commit(devs: &[DeviceRings], misses: &[RingMiss], txg: u64) -> bool {
    let slot = txg % UBER_SLOTS;
    let has = |r: &Ring| r.ubs.iter().any(|u| u.txg == txg);
    devs.iter()
        .filter(|d| !misses.contains(&RingMiss { leaf: d.leaf, txg }))
        .any(|d| {
            d.rings.iter().any(has) && d.rings.iter().any(|r| !has(r) && !r.rotted.contains(&slot))
        })
}

/// A raidz vdev with more missing children than parity columns cannot be read:
/// refuse the import and name what is missing.
fn check_raidz_survives(pool: &str, v: &TopVdevConfig, leaves: &[Leaf]) -> Result<()> {
    let p = crate::raidz::nparity(v.kind);
    let missing: Vec<String> = leaves
        .iter()
        .filter(|l| !l.readable())
        .map(|l| l.path.display().to_string())
        .collect();
    if p > 0 && missing.len() > p {
        return Err(PoolError::Import(format!(
            "pool '{pool}': raidz{p} vdev {} is missing {} of its {} devices and survives at most {p}: {}",
            v.id,
            missing.len(),
            leaves.len(),
            missing.join(", ")
        )));
    }
    Ok(())
}
