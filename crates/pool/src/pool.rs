//! The storage pool: vdevs, block allocation, block I/O with checksums and
//! compression, and the atomic commit of a transaction group.
//!
//! Invariants:
//! - Allocation happens only in syncing context (one commit at a time per pool).
//! - A block freed in txg T stays unallocatable until T+1 has committed, so the tree
//!   of the previous uberblock is never overwritten while it may still be imported.
//! - `commit(T)` writes the space map segment of T, flushes every vdev, writes the
//!   uberblock of T to every label and flushes again. Only then is T durable.
//! - Metadata blocks get two copies (DVAs), on different top-level vdevs when there
//!   is more than one, far apart on the same vdev otherwise.
//! - A block is returned to callers only after its checksum matched.

use crate::blkptr::{checksum, BlkPtr, BlockType, ChecksumType, Dva, MAX_DVAS};
use crate::compress::{compress, decompress, Compression};
use crate::device::{BlockDevice, FileDevice};
use crate::error::{PoolError, Result};
use crate::label::*;
use crate::rangeset::RangeSet;
use crate::spacemap::{self, Record};
use crate::vdev::{ErrorCounters, Leaf, ScrubOutcome, TopVdev};
use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// How a block should be written.
#[derive(Clone, Copy, Debug)]
pub struct WriteOpts {
    pub compression: Compression,
    pub block_type: BlockType,
    pub level: u8,
    pub fill: u64,
}

/// One group of devices in a create/add specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VdevSpec {
    pub kind: VdevKind,
    pub paths: Vec<PathBuf>,
    /// A separate intent-log device (`log` in the specification).
    pub log: bool,
}

/// Options of pool creation.
#[derive(Clone, Debug)]
pub struct CreateOpts {
    pub ashift: u8,
    /// Create missing files as sparse files of this size.
    pub create_size: Option<u64>,
    /// Use devices that carry another pool's label.
    pub force: bool,
}

impl Default for CreateOpts {
    fn default() -> Self {
        CreateOpts {
            ashift: 12,
            create_size: None,
            force: false,
        }
    }
}

/// Parse zpool-style vdev words: `a b mirror c d raidz1 e f g`.
pub fn parse_vdev_spec(words: &[String]) -> Result<Vec<VdevSpec>> {
    let mut out: Vec<VdevSpec> = Vec::new();
    let mut group: Option<VdevSpec> = None;
    // After the word `log`, devices (and mirrors) are separate intent-log devices.
    let mut log = false;
    for w in words {
        if w == "log" {
            if log {
                return Err(PoolError::InvalidSpec("'log' given twice".into()));
            }
            if let Some(g) = group.take() {
                out.push(g);
            }
            log = true;
            continue;
        }
        let kind = match w.as_str() {
            "mirror" => Some(VdevKind::Mirror),
            "raidz" | "raidz1" => Some(VdevKind::Raidz1),
            "raidz2" => Some(VdevKind::Raidz2),
            "cache" | "spare" | "special" | "dedup" => {
                return Err(PoolError::InvalidSpec(format!(
                    "'{w}' vdevs are not supported yet"
                )))
            }
            _ => None,
        };
        match kind {
            Some(k) => {
                if let Some(g) = group.take() {
                    out.push(g);
                }
                group = Some(VdevSpec {
                    kind: k,
                    paths: vec![],
                    log,
                });
            }
            None => match &mut group {
                Some(g) => g.paths.push(PathBuf::from(w)),
                None => out.push(VdevSpec {
                    kind: VdevKind::Disk,
                    paths: vec![PathBuf::from(w)],
                    log,
                }),
            },
        }
    }
    if let Some(g) = group.take() {
        out.push(g);
    }
    if out.is_empty() {
        return Err(PoolError::InvalidSpec("no devices given".into()));
    }
    if log && out.iter().all(|g| !g.log) {
        return Err(PoolError::InvalidSpec(
            "'log' must be followed by devices".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for g in &out {
        match g.kind {
            VdevKind::Mirror if g.paths.len() < 2 => {
                return Err(PoolError::InvalidSpec(
                    "a mirror needs at least two devices".into(),
                ))
            }
            _ if g.paths.is_empty() => {
                return Err(PoolError::InvalidSpec("a vdev group has no devices".into()))
            }
            VdevKind::Raidz1 | VdevKind::Raidz2 => {
                return Err(PoolError::InvalidSpec(
                    "raidz vdevs are not supported yet (the format reserves them)".into(),
                ))
            }
            _ => {}
        }
        for p in &g.paths {
            let key = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            if !seen.insert(key) {
                return Err(PoolError::InvalidSpec(format!(
                    "{}: device given more than once",
                    p.display()
                )));
            }
        }
    }
    Ok(out)
}

/// Block size classes for `usable_free`: 4K, 8K, ... 1M.
const USABLE_CLASSES: usize = 9;

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

struct VdevSpace {
    free: RangeSet,
    /// Allocated in the persistent sense (what the space map says).
    allocated: RangeSet,
    cursor: u64,
}

struct SpaceState {
    vdevs: Vec<VdevSpace>,
    txg_records: Vec<Record>,
    defer: VecDeque<(u64, Vec<Record>)>,
    sm_head: BlkPtr,
    sm_base: BlkPtr,
    log_blocks: u64,
    log_records: u64,
}

/// Pool-wide space figures in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpaceInfo {
    pub size: u64,
    pub allocated: u64,
    pub free: u64,
    /// Fragmentation estimate in percent (share of free space in small extents).
    pub frag: u64,
}

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
}

/// The pool.
pub struct Pool {
    config: RwLock<PoolConfig>,
    vdevs: RwLock<Vec<Arc<TopVdev>>>,
    space: Mutex<SpaceState>,
    last_ub: Mutex<Uberblock>,
    suspended: Mutex<Option<String>>,
    /// Free bytes usable by blocks of 2^(12+i) bytes (4K..1M), as of the last
    /// commit: in a fragmented pool not every free byte can hold a large block.
    usable: Mutex<[u64; USABLE_CLASSES]>,
    /// Events the operator should see in `pool status` (a lost log device...).
    notices: Mutex<Vec<String>>,
    /// While set (scrub running), freed space is not made allocatable again.
    hold_frees: std::sync::atomic::AtomicBool,
}

/// A fresh identity (pools, vdevs, intent-log chains, snapshots): never 0.
pub fn new_guid() -> u64 {
    // Unique enough: time, pid and a counter through BLAKE3.
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = blake3::Hasher::new();
    h.update(
        &std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
            .to_le_bytes(),
    );
    h.update(&std::process::id().to_le_bytes());
    h.update(&N.fetch_add(1, Relaxed).to_le_bytes());
    let g = u64::from_le_bytes(h.finalize().as_bytes()[0..8].try_into().unwrap());
    g.max(1)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64
}

/// Open a device path for a new pool, creating a sparse file if asked.
fn open_for_create(path: &Path, opts: &CreateOpts) -> Result<Arc<dyn BlockDevice>> {
    if !path.exists() {
        let Some(size) = opts.create_size else {
            return Err(PoolError::InvalidSpec(format!(
                "{}: no such file (use -s SIZE to create it)",
                path.display()
            )));
        };
        if size < MIN_DEVICE_SIZE {
            return Err(PoolError::TooSmall {
                path: path.into(),
                size,
                min: MIN_DEVICE_SIZE,
            });
        }
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !parent.is_dir() {
                return Err(PoolError::InvalidSpec(format!(
                    "{}: directory {} does not exist",
                    path.display(),
                    parent.display()
                )));
            }
        }
        return Ok(Arc::new(FileDevice::create_sparse(path, size)?));
    }
    Ok(Arc::new(FileDevice::open(path)?))
}

/// Read the first valid label header of a device.
pub fn read_label(dev: &dyn BlockDevice) -> Option<LabelHeader> {
    if dev.size() < MIN_DEVICE_SIZE {
        return None;
    }
    let mut buf = vec![0u8; LABEL_HEADER_SIZE];
    for off in label_offsets(dev.size()) {
        if dev.read_at(&mut buf, off).is_ok() {
            if let Some(h) = decode_header(&buf) {
                return Some(h);
            }
        }
    }
    None
}

fn write_labels(dev: &dyn BlockDevice, header: &LabelHeader, init_ring: bool) -> Result<()> {
    let enc = encode_header(header);
    let offs = label_offsets(dev.size());
    // Even labels first, flush, then odd: a crash leaves at least one pair intact.
    for pass in [[0usize, 2], [1, 3]] {
        for i in pass {
            dev.write_at(&enc, offs[i])?;
            if init_ring {
                let zeros = vec![0u8; (UBER_SLOTS * UBER_SLOT_SIZE) as usize];
                dev.write_at(&zeros, offs[i] + UBER_RING_OFFSET)?;
            }
        }
        dev.flush()?;
    }
    Ok(())
}

/// All valid uberblocks on a device, any order.
fn read_uberblocks(dev: &dyn BlockDevice, pool_guid: u64) -> Vec<Uberblock> {
    let mut out = Vec::new();
    let ring = (UBER_SLOTS * UBER_SLOT_SIZE) as usize;
    let mut buf = vec![0u8; ring];
    for off in label_offsets(dev.size()) {
        if dev.read_at(&mut buf, off + UBER_RING_OFFSET).is_err() {
            continue;
        }
        for slot in 0..UBER_SLOTS as usize {
            let s = slot * UBER_SLOT_SIZE as usize;
            if let Some(ub) = Uberblock::decode(&buf[s..s + UBER_SIZE]) {
                if ub.pool_guid == pool_guid && ub.txg % UBER_SLOTS == slot as u64 {
                    out.push(ub);
                }
            }
        }
    }
    out
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
        };
        let mut tops = Vec::new();
        for (id, ((kind, log), group)) in groups.into_iter().enumerate() {
            let asize = group
                .iter()
                .map(|(_, d)| leaf_data_size(d.size()))
                .min()
                .unwrap()
                / sector
                * sector;
            let leaves: Vec<Leaf> = group
                .into_iter()
                .map(|(path, dev)| Leaf {
                    guid: new_guid(),
                    path: std::fs::canonicalize(&path).unwrap_or(path),
                    dev: Some(dev),
                    errors: ErrorCounters::default(),
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
        let space = SpaceState {
            vdevs: tops
                .iter()
                .map(|t| {
                    let mut free = RangeSet::new();
                    free.insert(0, t.asize);
                    VdevSpace {
                        free,
                        allocated: RangeSet::new(),
                        cursor: 0,
                    }
                })
                .collect(),
            txg_records: vec![],
            defer: VecDeque::new(),
            sm_head: BlkPtr::HOLE,
            sm_base: BlkPtr::HOLE,
            log_blocks: 0,
            log_records: 0,
        };
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

    fn assemble(
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
    /// files may have moved. Returns the pool opened at its newest valid uberblock.
    pub fn import(paths: &[PathBuf], name: Option<&str>) -> Result<Pool> {
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
        Pool::open_devices(imp.config.clone(), devs)
    }

    /// Open a pool from already-opened devices (also used by crash tests).
    pub fn import_devices(devices: Vec<Arc<dyn BlockDevice>>) -> Result<Pool> {
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
        Pool::open_devices(best.config, devs)
    }

    fn open_devices(
        config: PoolConfig,
        devs: Vec<(u64, Arc<dyn BlockDevice>, PathBuf)>,
    ) -> Result<Pool> {
        let mut tops = Vec::new();
        let mut notices = Vec::new();
        for v in &config.vdevs {
            let leaves: Vec<Leaf> = v
                .children
                .iter()
                .map(|c| {
                    let found = devs.iter().find(|(g, _, _)| *g == c.guid);
                    Leaf {
                        guid: c.guid,
                        path: found.map(|f| f.2.clone()).unwrap_or_else(|| c.path.clone()),
                        dev: found.map(|f| f.1.clone()),
                        errors: ErrorCounters::default(),
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
            }));
        }
        let mut ubs: Vec<Uberblock> = tops
            .iter()
            .flat_map(|t| t.leaves.iter())
            .filter_map(|l| l.dev.as_ref())
            .flat_map(|d| read_uberblocks(d.as_ref(), config.guid))
            .collect();
        ubs.sort_by_key(|u| std::cmp::Reverse(u.txg));
        ubs.dedup_by_key(|u| u.txg);
        if ubs.is_empty() {
            return Err(PoolError::Import(format!(
                "pool '{}': no valid uberblock (creation never completed?)",
                config.name
            )));
        }
        let empty_space = || SpaceState {
            vdevs: vec![],
            txg_records: vec![],
            defer: VecDeque::new(),
            sm_head: BlkPtr::HOLE,
            sm_base: BlkPtr::HOLE,
            log_blocks: 0,
            log_records: 0,
        };
        let pool = Pool::assemble(config, tops, empty_space(), ubs[0]);
        pool.notices.lock().extend(notices);
        let mut last_err = None;
        // Newest valid uberblock whose root and space maps read back with good checksums.
        for ub in ubs {
            match pool.load_space(&ub).and_then(|s| {
                if !ub.mos.is_hole() {
                    pool.read_block(&ub.mos)?;
                }
                Ok(s)
            }) {
                Ok(space) => {
                    *pool.space.lock() = space;
                    *pool.last_ub.lock() = ub;
                    pool.refresh_usable();
                    return Ok(pool);
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(PoolError::Import(format!(
            "pool '{}': no uberblock with a readable tree: {}",
            pool.name(),
            last_err.map(|e| e.to_string()).unwrap_or_default()
        )))
    }

    /// Rebuild the in-memory space state from the space map of `ub`.
    fn load_space(&self, ub: &Uberblock) -> Result<SpaceState> {
        let tops = self.vdevs.read();
        let mut allocated: Vec<RangeSet> = tops.iter().map(|_| RangeSet::new()).collect();
        let mut log_blocks = 0;
        let mut log_records = 0;
        let mut apply_chain =
            |head: &BlkPtr, allocated: &mut Vec<RangeSet>, count: bool| -> Result<()> {
                let mut chain = Vec::new();
                let mut bp = *head;
                while !bp.is_hole() {
                    let data = self.read_block(&bp)?;
                    let (prev, recs) =
                        spacemap::decode_block(&data).ok_or_else(|| PoolError::Corrupt {
                            vdev: bp.dvas[0].vdev,
                            offset: bp.dvas[0].offset,
                            what: "malformed space map block".into(),
                        })?;
                    chain.push(recs);
                    bp = prev;
                    if chain.len() > 1_000_000 {
                        return Err(PoolError::Import("space map chain loops".into()));
                    }
                }
                for recs in chain.into_iter().rev() {
                    if count {
                        log_blocks += 1;
                        log_records += recs.len() as u64;
                    }
                    for r in recs {
                        let set = allocated.get_mut(r.vdev as usize).ok_or_else(|| {
                            PoolError::Import(format!("space map names unknown vdev {}", r.vdev))
                        })?;
                        let ok = if r.alloc {
                            set.insert(r.offset, r.len)
                        } else {
                            set.remove(r.offset, r.len)
                        };
                        if !ok {
                            return Err(PoolError::Import(format!(
                                "space map is inconsistent at vdev {} offset {:#x}",
                                r.vdev, r.offset
                            )));
                        }
                    }
                }
                Ok(())
            };
        apply_chain(&ub.sm_base, &mut allocated, false)?;
        apply_chain(&ub.sm_head, &mut allocated, true)?;
        let vdevs = tops
            .iter()
            .zip(allocated)
            .map(|(t, a)| {
                let mut free = RangeSet::new();
                free.insert(0, t.asize);
                for (s, l) in a.iter() {
                    free.remove(s, l);
                }
                VdevSpace {
                    free,
                    allocated: a,
                    cursor: 0,
                }
            })
            .collect();
        Ok(SpaceState {
            vdevs,
            txg_records: vec![],
            defer: VecDeque::new(),
            sm_head: ub.sm_head,
            sm_base: ub.sm_base,
            log_blocks,
            log_records,
        })
    }

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
    pub fn suspended(&self) -> Option<String> {
        self.suspended.lock().clone()
    }
    /// Paths of all leaf devices.
    pub fn device_paths(&self) -> Vec<PathBuf> {
        self.vdevs
            .read()
            .iter()
            .flat_map(|t| t.leaves.iter().map(|l| l.path.clone()))
            .collect()
    }

    /// Size and free bytes of the data vdevs, without the fragmentation figure:
    /// cheap enough for every write's space check (`space` walks free extents).
    pub fn space_totals(&self) -> (u64, u64) {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        let mut size = 0;
        let mut free = 0;
        for (t, v) in tops.iter().zip(s.vdevs.iter()) {
            if !t.log {
                size += t.asize;
                free += v.free.total();
            }
        }
        (size, free)
    }

    /// Space of the data vdevs (log devices are not pool capacity, as in ZFS).
    pub fn space(&self) -> SpaceInfo {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        let data = || {
            tops.iter()
                .zip(s.vdevs.iter())
                .filter(|(t, _)| !t.log)
                .map(|(_, v)| v)
        };
        let size: u64 = tops.iter().filter(|t| !t.log).map(|t| t.asize).sum();
        let free: u64 = data().map(|v| v.free.total()).sum();
        let small: u64 = data()
            .flat_map(|v| v.free.iter())
            .filter(|(_, l)| *l < 1 << 20)
            .map(|(_, l)| l)
            .sum();
        SpaceInfo {
            size,
            allocated: size - free,
            free,
            frag: (small * 100).checked_div(free).unwrap_or(0),
        }
    }

    fn check_suspended(&self) -> Result<()> {
        match &*self.suspended.lock() {
            Some(why) => Err(PoolError::Suspended(why.clone())),
            None => Ok(()),
        }
    }

    /// Allocate `copies` extents of `asize` bytes (syncing context only).
    fn allocate(&self, asize: u64, copies: usize) -> Result<[Dva; MAX_DVAS]> {
        let is_log: Vec<bool> = self
            .vdevs
            .read()
            .iter()
            .map(|t| t.log || t.faulted.load(Relaxed))
            .collect();
        let mut s = self.space.lock();
        let sector = self.sector_size() as u64;
        let n = s.vdevs.len();
        let mut dvas = [Dva::default(); MAX_DVAS];
        // Rotate the starting vdev so data spreads over all top-level vdevs.
        let start = {
            let total: u64 = s.vdevs.iter().map(|v| v.cursor).sum();
            (total / (1 << 20)) as usize % n.max(1)
        };
        let mut got = 0;
        for attempt in 0..n * 2 {
            if got == copies {
                break;
            }
            let vi = (start + attempt) % n;
            if is_log[vi] {
                continue;
            }
            // A second copy on the same vdev goes far from the first.
            let same_vdev = dvas[..got].iter().any(|d| d.vdev == vi as u32);
            if same_vdev && attempt < n {
                continue;
            }
            let vs = &mut s.vdevs[vi];
            let hint = if same_vdev {
                (vs.cursor + vs.free.total() / 2) % (vs.free.total().max(1) + vs.allocated.total())
            } else {
                vs.cursor
            };
            if let Some(off) = vs.free.find_fit(asize, hint, sector) {
                vs.free.remove(off, asize);
                vs.allocated.insert(off, asize);
                if !same_vdev {
                    vs.cursor = off + asize;
                }
                dvas[got] = Dva {
                    vdev: vi as u32,
                    asize: asize as u32,
                    offset: off,
                };
                s.txg_records.push(Record {
                    alloc: true,
                    vdev: vi as u32,
                    offset: off,
                    len: asize,
                });
                got += 1;
            }
        }
        if got == 0 {
            return Err(PoolError::NoSpace);
        }
        Ok(dvas)
    }

    /// Compress, checksum, allocate and write one block (syncing context).
    pub fn write_block(&self, txg: u64, data: &[u8], opts: WriteOpts) -> Result<BlkPtr> {
        self.check_suspended()?;
        let sector = self.sector_size();
        let compressed = compress(opts.compression, data, sector);
        let (payload, comp): (&[u8], Compression) = match &compressed {
            Some(c) => (c, opts.compression),
            None => (data, Compression::Off),
        };
        let psize = payload.len();
        let asize = psize.next_multiple_of(sector);
        let mut buf = payload.to_vec();
        buf.resize(asize, 0);
        let copies = if opts.block_type.is_metadata() { 2 } else { 1 };
        let dvas = self.allocate(asize as u64, copies)?;
        let tops = self.vdevs.read();
        for d in dvas.iter().filter(|d| !d.is_empty()) {
            tops[d.vdev as usize].write(&buf, d.offset)?;
        }
        Ok(BlkPtr {
            dvas,
            lsize: data.len() as u32,
            psize: psize as u32,
            compression: comp,
            checksum_type: ChecksumType::Blake3,
            block_type: opts.block_type,
            level: opts.level,
            birth_txg: txg,
            fill: opts.fill,
            checksum: checksum(payload),
        })
    }

    /// Read the stored bytes of a block from the first copy that verifies; copies
    /// that failed are rewritten from the good one.
    fn read_physical(&self, bp: &BlkPtr) -> Result<Vec<u8>> {
        let tops = self.vdevs.read();
        let psize = bp.psize as usize;
        let verify = |b: &[u8]| b.len() >= psize && checksum(&b[..psize]) == bp.checksum;
        let mut failed: Vec<&Dva> = Vec::new();
        let mut last_err = None;
        for d in bp.dva_iter() {
            let Some(top) = tops.get(d.vdev as usize) else {
                last_err = Some(PoolError::Corrupt {
                    vdev: d.vdev,
                    offset: d.offset,
                    what: "pointer names a vdev that does not exist".into(),
                });
                continue;
            };
            if d.offset + d.asize as u64 > top.asize || (d.asize as usize) < psize {
                last_err = Some(PoolError::Corrupt {
                    vdev: d.vdev,
                    offset: d.offset,
                    what: "pointer outside its vdev".into(),
                });
                continue;
            }
            let r = top.read_verified(d.offset, d.asize as usize, &verify, true);
            match r {
                Ok(buf) => {
                    for f in failed {
                        tops[f.vdev as usize].repair(&buf, f.offset);
                    }
                    return Ok(buf);
                }
                Err(e) => {
                    failed.push(d);
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or(PoolError::Checksum {
            vdev: bp.dvas[0].vdev,
            offset: bp.dvas[0].offset,
        }))
    }

    /// Read and verify a block, returning its logical bytes. Holes read as zeros.
    pub fn read_block(&self, bp: &BlkPtr) -> Result<Vec<u8>> {
        if bp.is_hole() {
            return Ok(vec![0; bp.lsize as usize]);
        }
        let phys = self.read_physical(bp)?;
        decompress(
            bp.compression,
            &phys[..bp.psize as usize],
            bp.lsize as usize,
        )
        .map_err(|e| match e {
            PoolError::Corrupt { what, .. } => PoolError::Corrupt {
                vdev: bp.dvas[0].vdev,
                offset: bp.dvas[0].offset,
                what,
            },
            e => e,
        })
    }

    /// Verify every copy of a block on every device, repairing what can be repaired.
    pub fn scrub_block(&self, bp: &BlkPtr) -> ScrubOutcome {
        let tops = self.vdevs.read();
        let psize = bp.psize as usize;
        let verify = |b: &[u8]| b.len() >= psize && checksum(&b[..psize]) == bp.checksum;
        let mut total = ScrubOutcome::default();
        let mut good: Option<Vec<u8>> = None;
        let mut unrecoverable_dvas = Vec::new();
        for d in bp.dva_iter() {
            let Some(top) = tops.get(d.vdev as usize) else {
                total.bad_copies += 1;
                continue;
            };
            let o = top.scrub_extent(d.offset, d.asize as usize, &verify);
            total.bad_copies += o.bad_copies;
            total.repaired += o.repaired;
            if o.unrecoverable {
                unrecoverable_dvas.push(*d);
            } else if good.is_none() {
                good = top
                    .read_verified(d.offset, d.asize as usize, &verify, true)
                    .ok();
            }
        }
        match good {
            Some(buf) => {
                for d in unrecoverable_dvas {
                    tops[d.vdev as usize].repair(&buf, d.offset);
                    total.repaired += 1;
                }
            }
            None => total.unrecoverable = true,
        }
        total
    }

    /// Release a block (syncing context). Its space becomes allocatable after the
    /// next commit.
    pub fn free_block(&self, bp: &BlkPtr) {
        if bp.is_hole() {
            return;
        }
        let mut s = self.space.lock();
        for d in bp.dva_iter() {
            if let Some(vs) = s.vdevs.get_mut(d.vdev as usize) {
                if vs.allocated.remove(d.offset, d.asize as u64) {
                    s.txg_records.push(Record {
                        alloc: false,
                        vdev: d.vdev,
                        offset: d.offset,
                        len: d.asize as u64,
                    });
                } else {
                    debug_assert!(false, "double free at vdev {} {:#x}", d.vdev, d.offset);
                }
            }
        }
    }

    /// Write a chain of space map blocks holding `records` (plus the allocation
    /// records of the chain's own blocks), linked to `prev`. Returns the new head.
    fn write_spacemap_chain(
        &self,
        txg: u64,
        prev: BlkPtr,
        mut records: Vec<Record>,
        block_type: BlockType,
    ) -> Result<BlkPtr> {
        let sector = self.sector_size();
        // Each block costs up to two allocation records (two copies); find how many
        // blocks are needed including those records.
        let mut nblocks = 1usize;
        while records.len() + 2 * nblocks > nblocks * spacemap::PER_BLOCK {
            nblocks += 1;
        }
        let total = records.len() + 2 * nblocks;
        let mut sizes = vec![spacemap::MAX_BLOCK; nblocks];
        sizes[nblocks - 1] =
            spacemap::block_size(total - (nblocks - 1) * spacemap::PER_BLOCK, sector);
        let mut dvas_list = Vec::new();
        for sz in &sizes {
            let before = self.space.lock().txg_records.len();
            let dvas = self.allocate(*sz as u64, 2)?;
            let mut s = self.space.lock();
            records.extend(s.txg_records.drain(before..));
            dvas_list.push(dvas);
        }
        let mut head = prev;
        let mut chunks = records.chunks(spacemap::PER_BLOCK);
        let tops = self.vdevs.read();
        for (sz, dvas) in sizes.iter().zip(dvas_list) {
            let recs = chunks.next().unwrap_or(&[]);
            let data = spacemap::encode_block(txg, &head, recs, *sz);
            for d in dvas.iter().filter(|d| !d.is_empty()) {
                tops[d.vdev as usize].write(&data, d.offset)?;
            }
            head = BlkPtr {
                dvas,
                lsize: *sz as u32,
                psize: *sz as u32,
                compression: Compression::Off,
                checksum_type: ChecksumType::Blake3,
                block_type,
                level: 0,
                birth_txg: txg,
                fill: 1,
                checksum: checksum(&data),
            };
        }
        Ok(head)
    }

    /// Blocks of a space map chain (to free them when condensing).
    fn chain_blocks(&self, head: &BlkPtr) -> Result<Vec<BlkPtr>> {
        let mut out = Vec::new();
        let mut bp = *head;
        while !bp.is_hole() {
            let data = self.read_block(&bp)?;
            let (prev, _) = spacemap::decode_block(&data).ok_or(PoolError::Corrupt {
                vdev: bp.dvas[0].vdev,
                offset: bp.dvas[0].offset,
                what: "malformed space map block".into(),
            })?;
            out.push(bp);
            bp = prev;
        }
        Ok(out)
    }

    /// Persist the space map for `txg`: append a log segment, or condense.
    fn sync_spacemap(&self, txg: u64) -> Result<(BlkPtr, BlkPtr)> {
        let (head, base, log_blocks, log_records, live) = {
            let s = self.space.lock();
            let live: usize = s.vdevs.iter().map(|v| v.allocated.len()).sum();
            (s.sm_head, s.sm_base, s.log_blocks, s.log_records, live)
        };
        let condense = log_blocks >= 64 || log_records > 2 * live as u64 + 4096;
        if !condense {
            let records = std::mem::take(&mut self.space.lock().txg_records);
            let new_head = self.write_spacemap_chain(txg, head, records, BlockType::SpaceMapLog)?;
            // Records that arrived meanwhile (intent log blocks allocated in open
            // context) stay for the next txg's segment.
            let mut s = self.space.lock();
            debug_assert!(
                s.txg_records.iter().all(|r| r.alloc),
                "frees outside syncing context"
            );
            s.log_blocks += 1;
            return Ok((new_head, base));
        }
        // Condense: free the old chains, then write every allocated range as a new base.
        for bp in self
            .chain_blocks(&head)?
            .into_iter()
            .chain(self.chain_blocks(&base)?)
        {
            self.free_block(&bp);
        }
        // Reserve the base's blocks first so the dump includes them: an upper bound
        // on the records is the current count plus two per block.
        let n_now: usize = self
            .space
            .lock()
            .vdevs
            .iter()
            .map(|v| v.allocated.len())
            .sum();
        let mut nblocks = 1usize;
        while n_now + 2 * nblocks > nblocks * spacemap::PER_BLOCK {
            nblocks += 1;
        }
        let sector = self.sector_size();
        let mut sizes = vec![spacemap::MAX_BLOCK; nblocks];
        sizes[nblocks - 1] = spacemap::block_size(
            n_now + 2 * nblocks - (nblocks - 1) * spacemap::PER_BLOCK,
            sector,
        );
        let mut dvas_list = Vec::new();
        for sz in &sizes {
            dvas_list.push(self.allocate(*sz as u64, 2)?);
        }
        let records: Vec<Record> = {
            let mut s = self.space.lock();
            // The dump covers the allocations; frees stay for the defer queue.
            s.txg_records.retain(|r| !r.alloc);
            s.vdevs
                .iter()
                .enumerate()
                .flat_map(|(vi, v)| {
                    v.allocated.iter().map(move |(o, l)| Record {
                        alloc: true,
                        vdev: vi as u32,
                        offset: o,
                        len: l,
                    })
                })
                .collect()
        };
        let mut new_base = BlkPtr::HOLE;
        let mut chunks = records.chunks(spacemap::PER_BLOCK);
        let tops = self.vdevs.read();
        for (sz, dvas) in sizes.iter().zip(dvas_list) {
            let recs = chunks.next().unwrap_or(&[]);
            let data = spacemap::encode_block(txg, &new_base, recs, *sz);
            for d in dvas.iter().filter(|d| !d.is_empty()) {
                tops[d.vdev as usize].write(&data, d.offset)?;
            }
            new_base = BlkPtr {
                dvas,
                lsize: *sz as u32,
                psize: *sz as u32,
                compression: Compression::Off,
                checksum_type: ChecksumType::Blake3,
                block_type: BlockType::SpaceMapBase,
                level: 0,
                birth_txg: txg,
                fill: 1,
                checksum: checksum(&data),
            };
        }
        debug_assert!(
            chunks.next().is_none(),
            "space map base overflowed its blocks"
        );
        let mut s = self.space.lock();
        s.log_blocks = 0;
        s.log_records = 0;
        Ok((BlkPtr::HOLE, new_base))
    }

    /// Commit transaction group `txg` whose meta object set root is `mos`.
    /// On failure the pool is suspended: nothing more is written, the last
    /// committed state stays intact on disk.
    pub fn commit(&self, txg: u64, mos: BlkPtr) -> Result<()> {
        self.check_suspended()?;
        let r = self.commit_inner(txg, mos);
        if let Err(e) = &r {
            *self.suspended.lock() = Some(e.to_string());
        }
        r
    }

    fn commit_inner(&self, txg: u64, mos: BlkPtr) -> Result<()> {
        let t0 = Instant::now();
        // Records of this txg (before the space map's own) go to the defer queue
        // so their frees become allocatable only after the next commit.
        let txg_frees: Vec<Record> = self
            .space
            .lock()
            .txg_records
            .iter()
            .filter(|r| !r.alloc)
            .copied()
            .collect();
        let n_records = self.space.lock().txg_records.len() as u64;
        let (sm_head, sm_base) = self.sync_spacemap(txg)?;
        let tops: Vec<Arc<TopVdev>> = self.vdevs.read().clone();
        for t in &tops {
            t.flush()?;
        }
        let cfg = self.config.read().clone();
        let ub = Uberblock {
            txg,
            pool_guid: cfg.guid,
            guid_sum: cfg.guid_sum(),
            timestamp_ns: now_ns(),
            config_txg: cfg.config_txg,
            mos,
            sm_head,
            sm_base,
        };
        let enc = ub.encode();
        let slot = (txg % UBER_SLOTS) * UBER_SLOT_SIZE;
        let mut written = 0;
        for t in &tops {
            for leaf in &t.leaves {
                if let Some(d) = &leaf.dev {
                    for off in label_offsets(d.size()) {
                        if d.write_at(&enc, off + UBER_RING_OFFSET + slot).is_ok() {
                            written += 1;
                        }
                    }
                }
            }
        }
        if written == 0 {
            return Err(PoolError::Suspended("no device took the uberblock".into()));
        }
        for t in &tops {
            t.flush()?;
        }
        let mut s = self.space.lock();
        s.sm_head = sm_head;
        s.sm_base = sm_base;
        if !sm_head.is_hole() {
            s.log_records += n_records;
        }
        // Frees of txg-1 (and older) become allocatable now that txg is durable.
        while !self.hold_frees.load(Relaxed) && s.defer.front().is_some_and(|(t, _)| *t < txg) {
            let (_, recs) = s.defer.pop_front().unwrap();
            for r in recs {
                if let Some(v) = s.vdevs.get_mut(r.vdev as usize) {
                    v.free.insert(r.offset, r.len);
                }
            }
        }
        s.defer.push_back((txg, txg_frees));
        // Frees recorded while writing the space map (condense) are deferred too;
        // allocations made meanwhile in open context (intent log) stay recorded
        // for the next txg.
        let (extra, later): (Vec<Record>, Vec<Record>) =
            s.txg_records.drain(..).partition(|r| !r.alloc);
        s.txg_records = later;
        s.defer.back_mut().unwrap().1.extend(extra);
        drop(s);
        *self.last_ub.lock() = ub;
        self.refresh_usable();
        cachalot_analytics::global()
            .stat("txg.commits", &["pool"])
            .record(&[&cfg.name], 0, t0.elapsed());
        Ok(())
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
        let sector = self.sector_size() as u64;
        let mut new_tops = Vec::new();
        let mut created = Vec::new();
        let base_id = self.vdevs.read().len() as u32;
        for (i, spec) in specs.iter().enumerate() {
            let mut leaves = Vec::new();
            for p in &spec.paths {
                let existed = p.exists();
                let dev = match open_for_create(p, opts) {
                    Ok(d) => d,
                    Err(e) => {
                        created.iter().for_each(|c| {
                            let _ = std::fs::remove_file(c);
                        });
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
                    created.iter().for_each(|c| {
                        let _ = std::fs::remove_file(c);
                    });
                    return Err(e);
                }
                leaves.push(Leaf {
                    guid: new_guid(),
                    path: std::fs::canonicalize(p).unwrap_or(p.clone()),
                    dev: Some(dev),
                    errors: ErrorCounters::default(),
                });
            }
            let asize = leaves
                .iter()
                .map(|l| leaf_data_size(l.dev.as_ref().unwrap().size()))
                .min()
                .unwrap()
                / sector
                * sector;
            new_tops.push(TopVdev {
                id: base_id + i as u32,
                guid: new_guid(),
                kind: spec.kind,
                asize,
                leaves,
                log: spec.log,
                faulted: Default::default(),
            });
        }
        let mut cfg = self.config.read().clone();
        cfg.config_txg = next_txg;
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
                let mut free = RangeSet::new();
                free.insert(0, t.asize);
                s.vdevs.push(VdevSpace {
                    free,
                    allocated: RangeSet::new(),
                    cursor: 0,
                });
            }
        }
        self.vdevs
            .write()
            .extend(new_tops.into_iter().map(Arc::new));
        *self.config.write() = cfg.clone();
        self.rewrite_label_headers()?;
        Ok(())
    }

    fn rewrite_label_headers(&self) -> Result<()> {
        let cfg = self.config.read().clone();
        for t in self.vdevs.read().iter() {
            for l in &t.leaves {
                if let Some(d) = &l.dev {
                    let h = LabelHeader {
                        config: cfg.clone(),
                        leaf_guid: l.guid,
                        top_id: t.id,
                    };
                    write_labels(d.as_ref(), &h, false)?;
                }
            }
        }
        Ok(())
    }

    /// Erase the labels so the devices no longer belong to any pool.
    pub fn destroy_labels(&self) -> Result<()> {
        let zeros = vec![0u8; LABEL_HEADER_SIZE];
        for t in self.vdevs.read().iter() {
            for l in &t.leaves {
                if let Some(d) = &l.dev {
                    for off in label_offsets(d.size()) {
                        d.write_at(&zeros, off)?;
                    }
                    d.flush()?;
                }
            }
        }
        Ok(())
    }

    /// Vdev tree with error counters.
    pub fn device_status(&self) -> Vec<DeviceStatus> {
        let leaf_status = |l: &Leaf| DeviceStatus {
            name: l.path.display().to_string(),
            state: if l.dev.is_some() { "ONLINE" } else { "UNAVAIL" }.into(),
            read: l.errors.read.load(Relaxed),
            write: l.errors.write.load(Relaxed),
            cksum: l.errors.cksum.load(Relaxed),
            repaired: l.errors.repaired.load(Relaxed),
            children: vec![],
            log: false,
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
                        name: format!("mirror-{}", t.id),
                        state: t.health().into(),
                        read: children.iter().map(|c| c.read).sum(),
                        write: children.iter().map(|c| c.write).sum(),
                        cksum: children.iter().map(|c| c.cksum).sum(),
                        repaired: children.iter().map(|c| c.repaired).sum(),
                        children,
                        log: t.log,
                    }
                }
            })
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

    /// Allocate one intent-log block outside syncing context. With `use_slog` the
    /// separate log devices are preferred; a faulted or full log device falls back
    /// to the data vdevs. The allocation lands in the next commit's space map; if
    /// the system crashes first, replay claims the block again.
    pub fn alloc_log_block(&self, size: u64, use_slog: bool) -> Result<Dva> {
        self.check_suspended()?;
        let sector = self.sector_size() as u64;
        let size = size.next_multiple_of(sector);
        let order: Vec<usize> = {
            let tops = self.vdevs.read();
            let ok = |t: &TopVdev| !t.faulted.load(Relaxed) && t.health() != "UNAVAIL";
            let logs = tops.iter().filter(|t| t.log && ok(t) && use_slog);
            let data = tops.iter().filter(|t| !t.log && ok(t));
            logs.chain(data).map(|t| t.id as usize).collect()
        };
        let mut s = self.space.lock();
        for vi in order {
            let vs = &mut s.vdevs[vi];
            if let Some(off) = vs.free.find_fit(size, vs.cursor, sector) {
                vs.free.remove(off, size);
                vs.allocated.insert(off, size);
                s.txg_records.push(Record {
                    alloc: true,
                    vdev: vi as u32,
                    offset: off,
                    len: size,
                });
                return Ok(Dva {
                    vdev: vi as u32,
                    asize: size as u32,
                    offset: off,
                });
            }
        }
        Err(PoolError::NoSpace)
    }

    /// Mark an intent-log block found at replay as allocated (it may already be,
    /// if a commit recorded it before the crash). False if the range is partly
    /// allocated to something else (the block is not a live log block).
    pub fn claim_log_block(&self, dva: &Dva) -> bool {
        let mut s = self.space.lock();
        let Some(vs) = s.vdevs.get_mut(dva.vdev as usize) else {
            return false;
        };
        let (off, len) = (dva.offset, dva.asize as u64);
        if vs.allocated.contains(off, len) {
            return true;
        }
        if !vs.free.contains(off, len) {
            return false;
        }
        vs.free.remove(off, len);
        vs.allocated.insert(off, len);
        s.txg_records.push(Record {
            alloc: true,
            vdev: dva.vdev,
            offset: off,
            len,
        });
        true
    }

    /// Free an intent-log block (syncing context), like `free_block`.
    pub fn free_log_block(&self, dva: &Dva) {
        let bp = BlkPtr {
            dvas: [*dva, Dva::default(), Dva::default()],
            birth_txg: 1,
            ..BlkPtr::HOLE
        };
        self.free_block(&bp);
    }

    /// Write an intent-log block's bytes (a prefix of its allocation). A failing
    /// log device is marked faulted so later log blocks go to the data vdevs.
    pub fn write_log_block(&self, dva: &Dva, data: &[u8]) -> Result<()> {
        let tops = self.vdevs.read();
        let top = tops
            .get(dva.vdev as usize)
            .ok_or_else(|| PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block on a vdev that does not exist".into(),
            })?;
        if data.len() as u64 > dva.asize as u64 || dva.offset + dva.asize as u64 > top.asize {
            return Err(PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block outside its allocation".into(),
            });
        }
        let r = top.write(data, dva.offset);
        if r.is_err() && top.log {
            self.fault_log_vdev(top);
        }
        r
    }

    /// Flush the vdevs that hold log blocks (`vdevs`: their ids).
    pub fn flush_vdevs(&self, vdevs: &[u32]) -> Result<()> {
        let tops = self.vdevs.read();
        for id in vdevs {
            if let Some(t) = tops.get(*id as usize) {
                if let Err(e) = t.flush() {
                    if t.log {
                        self.fault_log_vdev(t);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn fault_log_vdev(&self, top: &TopVdev) {
        if !top.faulted.swap(true, Relaxed) {
            self.notices.lock().push(format!(
                "log device {} failed: logging to the main vdevs",
                top.leaves
                    .first()
                    .map(|l| l.path.display().to_string())
                    .unwrap_or_default()
            ));
        }
    }

    /// Read an intent-log block: the first copy that `valid` accepts (the log
    /// block carries its own checksum, as its pointer cannot).
    pub fn read_log_block(&self, dva: &Dva, valid: &dyn Fn(&[u8]) -> bool) -> Result<Vec<u8>> {
        let tops = self.vdevs.read();
        let top = tops
            .get(dva.vdev as usize)
            .ok_or_else(|| PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block on a vdev that does not exist".into(),
            })?;
        if dva.offset + dva.asize as u64 > top.asize {
            return Err(PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block outside its vdev".into(),
            });
        }
        top.read_verified(dva.offset, dva.asize as usize, valid, false)
    }

    /// True if vdev `id` is a separate log device.
    pub fn is_log_vdev(&self, id: u32) -> bool {
        self.vdevs.read().get(id as usize).is_some_and(|t| t.log)
    }

    /// The raw bytes at a log block's place (first readable copy, unverified):
    /// replay uses them to tell an unwritten block from a damaged one.
    pub fn read_log_block_raw(&self, dva: &Dva) -> Result<Vec<u8>> {
        self.read_log_block(dva, &|_| true)
    }

    /// Messages for `pool status`.
    pub fn notices(&self) -> Vec<String> {
        self.notices.lock().clone()
    }

    /// Add a message for `pool status`.
    pub fn add_notice(&self, msg: String) {
        self.notices.lock().push(msg);
    }

    /// Bytes freed but not yet allocatable (waiting for a later commit).
    pub fn deferred_bytes(&self) -> u64 {
        self.space
            .lock()
            .defer
            .iter()
            .flat_map(|(_, r)| r.iter())
            .map(|r| r.len)
            .sum()
    }

    fn refresh_usable(&self) {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        let mut u = [0u64; USABLE_CLASSES];
        let data = tops
            .iter()
            .zip(s.vdevs.iter())
            .filter(|(t, _)| !t.log)
            .map(|(_, v)| v);
        for (_, len) in data.flat_map(|v| v.free.iter()) {
            for (i, slot) in u.iter_mut().enumerate() {
                let bs = 4096u64 << i;
                *slot += len / bs * bs;
            }
        }
        drop(tops);
        drop(s);
        *self.usable.lock() = u;
    }

    /// Free bytes usable by blocks of up to `blksz` bytes, as of the last commit.
    pub fn usable_free(&self, blksz: u64) -> u64 {
        let class =
            (blksz.max(4096).next_power_of_two().trailing_zeros() as usize).saturating_sub(12);
        self.usable.lock()[class.min(USABLE_CLASSES - 1)]
    }

    /// Hold freed space back from reuse (while a scrub walks an older tree).
    pub fn hold_frees(&self, hold: bool) {
        self.hold_frees.store(hold, Relaxed);
    }

    /// Blocks of the committed space map (base and log chains), for scrub.
    pub fn spacemap_blocks(&self) -> Result<Vec<BlkPtr>> {
        let ub = self.uberblock();
        let mut v = self.chain_blocks(&ub.sm_head)?;
        v.extend(self.chain_blocks(&ub.sm_base)?);
        Ok(v)
    }

    /// Flush every device (used before export).
    pub fn flush_all(&self) -> Result<()> {
        for t in self.vdevs.read().iter() {
            t.flush()?;
        }
        Ok(())
    }
}

fn top_config(t: &TopVdev) -> TopVdevConfig {
    TopVdevConfig {
        id: t.id,
        guid: t.guid,
        kind: t.kind,
        asize: t.asize,
        log: t.log,
        children: t
            .leaves
            .iter()
            .map(|l| LeafConfig {
                guid: l.guid,
                path: l.path.clone(),
            })
            .collect(),
    }
}

/// Directories expand to the files they contain.
fn expand_paths(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(p) {
                let mut v: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect();
                v.sort();
                out.extend(v);
            }
        } else {
            out.push(p.clone());
        }
    }
    out
}
