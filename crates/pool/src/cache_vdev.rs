//! Cache devices (`cache PATH` in create and add): the devices of the L2ARC,
//! the second-level read cache the object layer keeps (`cachalot_objects::l2arc`).
//!
//! A cache device is listed in the configuration (`cache`) and carries the
//! pool's labels (front and back, as every device) with `top_id` =
//! [`CACHE_TOP_ID`], so it is found at import and cannot be taken by another
//! pool. Between the labels lies the L2ARC's ring ([`CacheVdev::ring`]); the
//! pool itself never reads or writes there.
//!
//! Invariants: a cache device holds only copies of blocks the pool holds, so
//! losing it loses nothing: it is not in the guid sum, a missing one does not
//! stop an import (UNAVAIL with a notice), one that fails I/O is FAULTED (no
//! more I/O) and one whose path vanished is UNAVAIL; none of these changes the
//! pool's health.

use crate::commit::write_labels;
use crate::device::BlockDevice;
use crate::error::{PoolError, Result};
use crate::label::{
    leaf_data_size, LabelHeader, LeafConfig, PoolConfig, DATA_START, MIN_DEVICE_SIZE,
};
use crate::pool::{DeviceStatus, Pool};
use crate::spare_remove::erase_labels;
use crate::vdev_spec::CreateOpts;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// `top_id` in a cache device's label: it belongs to no top-level vdev.
pub const CACHE_TOP_ID: u32 = u32::MAX - 1;

/// I/O errors (read + write) after which a cache device is FAULTED.
pub const CACHE_FAULT_AFTER_IO_ERRORS: u64 = 8;

/// What the L2ARC counts on one cache device (shown by `pool status`).
#[derive(Default, Debug)]
pub struct CacheCounters {
    /// Lookups found on the device and verified.
    pub hits: AtomicU64,
    /// Lookups not found on the device.
    pub misses: AtomicU64,
    /// Reads whose bytes did not match the checksum the index holds.
    pub cksum: AtomicU64,
    pub read_errors: AtomicU64,
    pub write_errors: AtomicU64,
    /// Bytes of the blocks the index holds.
    pub used: AtomicU64,
}

/// Size, use and hits of a cache device, in its `pool status` row.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CacheInfo {
    /// Bytes of the ring.
    pub size: u64,
    pub used: u64,
    pub hits: u64,
    pub misses: u64,
}

/// One cache device: present or missing.
pub struct CacheVdev {
    pub guid: u64,
    pub path: PathBuf,
    dev: Option<Arc<dyn BlockDevice>>,
    faulted: AtomicBool,
    /// Its path vanished while the pool ran.
    removed: AtomicBool,
    pub counters: CacheCounters,
}

impl CacheVdev {
    pub fn new(guid: u64, path: PathBuf, dev: Option<Arc<dyn BlockDevice>>) -> CacheVdev {
        CacheVdev {
            guid,
            path,
            dev,
            faulted: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            counters: CacheCounters::default(),
        }
    }

    /// Present and not failed: the L2ARC may read and write it.
    pub fn usable(&self) -> bool {
        self.dev.is_some() && !self.faulted.load(Relaxed) && !self.removed.load(Relaxed)
    }

    /// ONLINE, FAULTED (too many I/O errors) or UNAVAIL (missing or removed).
    pub fn state(&self) -> &'static str {
        if self.dev.is_none() || self.removed.load(Relaxed) {
            "UNAVAIL"
        } else if self.faulted.load(Relaxed) {
            "FAULTED"
        } else {
            "ONLINE"
        }
    }

    /// The byte range `[start, end)` of the L2ARC's ring: between the front and
    /// the back labels (empty when the device is missing).
    pub fn ring(&self) -> (u64, u64) {
        match &self.dev {
            Some(d) => (DATA_START, DATA_START + leaf_data_size(d.size())),
            None => (0, 0),
        }
    }

    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.io(true, |d| d.read_at(buf, offset))
    }

    pub fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.io(false, |d| d.write_at(buf, offset))
    }

    /// One I/O on a usable device; an error is counted and enough of them
    /// fault the device (no more I/O: reads go to the pool).
    fn io(&self, read: bool, f: impl FnOnce(&dyn BlockDevice) -> Result<()>) -> Result<()> {
        let dev = match &self.dev {
            Some(d) if self.usable() => d,
            _ => {
                return Err(PoolError::Import(format!(
                    "cache device {}: {}",
                    self.path.display(),
                    self.state().to_lowercase()
                )))
            }
        };
        let r = f(dev.as_ref());
        if r.is_err() {
            let c = &self.counters;
            if read {
                &c.read_errors
            } else {
                &c.write_errors
            }
            .fetch_add(1, Relaxed);
            let n = c.read_errors.load(Relaxed) + c.write_errors.load(Relaxed);
            if n >= CACHE_FAULT_AFTER_IO_ERRORS {
                self.faulted.store(true, Relaxed);
            }
        }
        r
    }

    /// Mark the device FAULTED (the L2ARC gave up on it).
    pub fn fault(&self) {
        self.faulted.store(true, Relaxed);
    }

    /// Its row in `pool status` (under "cache").
    pub fn status(&self) -> DeviceStatus {
        let c = &self.counters;
        let (start, end) = self.ring();
        DeviceStatus {
            name: self.path.display().to_string(),
            state: self.state().into(),
            read: c.read_errors.load(Relaxed),
            write: c.write_errors.load(Relaxed),
            cksum: c.cksum.load(Relaxed),
            repaired: 0,
            children: vec![],
            log: false,
            spare: false,
            cache: Some(CacheInfo {
                size: end - start,
                used: c.used.load(Relaxed),
                hits: c.hits.load(Relaxed),
                misses: c.misses.load(Relaxed),
            }),
        }
    }
}

impl Pool {
    /// The cache devices, present or not.
    pub fn cache_devices(&self) -> Vec<Arc<CacheVdev>> {
        self.cache.read().clone()
    }

    pub(crate) fn cache_paths(&self) -> Vec<PathBuf> {
        self.cache.read().iter().map(|c| c.path.clone()).collect()
    }

    /// Add cache devices; each is checked (size, label) before any is written.
    pub fn add_cache(&self, paths: &[PathBuf], opts: &CreateOpts, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        if paths.is_empty() {
            return Err(PoolError::InvalidSpec("'cache' needs devices".into()));
        }
        let new = self.open_extra_devices(paths, opts)?;
        self.install_cache(new, next_txg)
    }

    /// Add cache devices the caller opened (the simulator's, which have no
    /// path to open); each is known by its `path()` and must be new to the
    /// pool and big enough (its label is overwritten).
    pub fn add_cache_devices(&self, devs: Vec<Arc<dyn BlockDevice>>, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        let used = self.device_paths();
        let mut new = Vec::new();
        for d in devs {
            let path = d.path().to_path_buf();
            if used.contains(&path) {
                return Err(PoolError::InvalidSpec(format!(
                    "{}: already part of this pool",
                    path.display()
                )));
            }
            if d.size() < MIN_DEVICE_SIZE {
                return Err(PoolError::TooSmall {
                    path,
                    size: d.size(),
                    min: MIN_DEVICE_SIZE,
                });
            }
            let leaf = LeafConfig {
                guid: self.env.guid(),
                path,
                resilvering: false,
                offline: false,
                offline_txg: 0,
            };
            new.push((leaf, d));
        }
        self.install_cache(new, next_txg)
    }

    /// Label the checked cache devices and start listing them.
    fn install_cache(
        &self,
        new: Vec<(LeafConfig, Arc<dyn BlockDevice>)>,
        next_txg: u64,
    ) -> Result<()> {
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.next_config_txg(next_txg);
        cfg.cache.extend(new.iter().map(|(l, _)| l.clone()));
        for (l, dev) in &new {
            let h = LabelHeader {
                config: cfg.clone(),
                leaf_guid: l.guid,
                top_id: CACHE_TOP_ID,
            };
            write_labels(dev.as_ref(), &h, true)?;
        }
        self.cache.write().extend(
            new.into_iter()
                .map(|(l, d)| Arc::new(CacheVdev::new(l.guid, l.path, Some(d)))),
        );
        *self.config.write() = cfg;
        self.rewrite_label_headers()
    }

    /// Take cache device `i` (of `cache_devices`) out of the pool: it is
    /// marked gone first, so the L2ARC stops reading and writing it at once
    /// (reads go to the pool), then it leaves the configuration (the other
    /// devices' labels rewritten) and its own labels are erased, so the
    /// device is free for another use.
    pub(crate) fn remove_cache(&self, i: usize, next_txg: u64) -> Result<()> {
        let gone = self.cache.read()[i].clone();
        gone.removed.store(true, Relaxed);
        let mut cfg = self.config.read().clone();
        cfg.cache.retain(|c| c.guid != gone.guid);
        cfg.config_txg = cfg.next_config_txg(next_txg);
        self.cache.write().retain(|c| c.guid != gone.guid);
        *self.config.write() = cfg;
        self.rewrite_label_headers()?;
        if let Some(d) = &gone.dev {
            erase_labels(d.as_ref());
        }
        self.add_notice(format!("cache device {} removed", gone.path.display()));
        Ok(())
    }

    /// Write `cfg` into every present cache device's label (best effort: the
    /// configuration that counts is the data devices').
    pub(crate) fn refresh_cache_labels(&self, cfg: &PoolConfig) {
        for c in self.cache.read().iter() {
            if let Some(d) = c.dev.as_ref().filter(|_| c.usable()) {
                let h = LabelHeader {
                    config: cfg.clone(),
                    leaf_guid: c.guid,
                    top_id: CACHE_TOP_ID,
                };
                let _ = write_labels(d.as_ref(), &h, false);
            }
        }
    }

    /// Mark UNAVAIL the cache devices whose path vanished; their paths.
    pub(crate) fn probe_removed_cache(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in self.cache.read().iter() {
            if c.dev.is_none() || c.removed.load(Relaxed) || !c.path.is_absolute() {
                continue;
            }
            if matches!(std::fs::symlink_metadata(&c.path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
            {
                c.removed.store(true, Relaxed);
                out.push(c.path.display().to_string());
            }
        }
        for p in &out {
            self.add_notice(format!(
                "cache device {p} was removed: reads go to the pool devices"
            ));
        }
        out
    }
}

/// The cache devices of `config` among the opened `devs` (leaf guid, device,
/// path); a missing one is UNAVAIL and explained by a notice.
pub(crate) fn open_cache(
    config: &PoolConfig,
    devs: &[(u64, Arc<dyn BlockDevice>, PathBuf)],
    notices: &mut Vec<String>,
) -> Vec<Arc<CacheVdev>> {
    config
        .cache
        .iter()
        .map(|c: &LeafConfig| {
            let found = devs.iter().find(|(g, _, _)| *g == c.guid);
            if found.is_none() {
                notices.push(format!(
                    "cache device {} is missing: reads go to the pool devices",
                    c.path.display()
                ));
            }
            Arc::new(CacheVdev::new(
                c.guid,
                found.map(|f| f.2.clone()).unwrap_or_else(|| c.path.clone()),
                found.map(|f| f.1.clone()),
            ))
        })
        .collect()
}
