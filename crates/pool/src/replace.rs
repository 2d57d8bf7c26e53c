//! Replacing a device of a mirror or raidz vdev, and the end of its resilver.
//!
//! `replace_device` swaps the leaf for the new device marked *resilvering*: from
//! then on every write reaches it, no read trusts it, and a scan of every
//! allocated block (the dataset layer's scrub traversal) writes its copy or
//! column, rebuilt from the other children. `finish_resilver` clears the mark
//! once a scan has completed without unrecoverable blocks. The mark is in the
//! labels, so after a restart the device is still not trusted and the scan runs
//! again, from the position the last run saved in the labels (`ScanPos`, see
//! `save_resilver_pos`): a resilver visits blocks in DVA order, so every block
//! before that position was rebuilt, and every block written since the
//! replacement reached the new device directly.
//!
//! Invariants: a replacement is refused, with nothing changed, when the new
//! device is smaller than the vdev needs, is already in the pool or carries another
//! pool's label (unless forced), or when taking the old device out would leave
//! the vdev unable to rebuild it (the last good copy of a mirror; more than
//! nparity columns of a raidz unreadable).

use crate::commit::{read_label, write_labels};
use crate::device::BlockDevice;
use crate::error::{PoolError, Result};
use crate::label::{leaf_data_size, LabelHeader, ScanPos, VdevKind, RESILVER_WALK};
use crate::pool::{top_config, Pool};
use crate::vdev::{ErrorCounters, Leaf, TopVdev};
use crate::vdev_spec::{open_for_create, CreateOpts};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// A leaf carried over into a rebuilt vdev: same device, counters kept.
pub(crate) fn carry(l: &Leaf) -> Leaf {
    let e = &l.errors;
    let fault = crate::fault::LeafFault::default();
    fault.faulted.store(l.fault.faulted.load(Relaxed), Relaxed);
    fault.offline.store(l.is_offline(), Relaxed);
    fault
        .offline_txg
        .store(l.fault.offline_txg.load(Relaxed), Relaxed);
    fault.removed.store(l.fault.removed.load(Relaxed), Relaxed);
    Leaf {
        guid: l.guid,
        path: l.path.clone(),
        dev: l.dev.clone(),
        errors: ErrorCounters {
            read: e.read.load(Relaxed).into(),
            write: e.write.load(Relaxed).into(),
            cksum: e.cksum.load(Relaxed).into(),
            repaired: e.repaired.load(Relaxed).into(),
        },
        resilvering: l.resilvering.load(Relaxed).into(),
        fault,
    }
}

pub(crate) fn rebuilt(t: &TopVdev, leaves: Vec<Leaf>) -> TopVdev {
    TopVdev {
        id: t.id,
        guid: t.guid,
        kind: t.kind,
        asize: t.asize,
        leaves,
        log: t.log,
        faulted: AtomicBool::new(t.faulted.load(Relaxed)),
        ashift: t.ashift,
    }
}

/// The device that takes a replaced one's place.
pub enum Replacement<'a> {
    /// A path the pool opens, creating a sparse file of
    /// `CreateOpts::create_size` bytes if nothing is there.
    Path(&'a Path),
    /// A device the caller opened (the simulator's devices have no path to
    /// open); known to the pool by its `path()`.
    Device(Arc<dyn BlockDevice>),
}

impl Pool {
    /// (top index, leaf index) of the device named by path, file name or guid.
    pub(crate) fn find_leaf(&self, name: &str) -> Option<(usize, usize)> {
        let canon = std::fs::canonicalize(name).ok();
        let tops = self.vdevs.read();
        for (ti, t) in tops.iter().enumerate() {
            for (li, l) in t.leaves.iter().enumerate() {
                let hit = Some(&l.path) == canon.as_ref()
                    || l.path.as_os_str() == name
                    || l.guid.to_string() == name;
                if hit {
                    return Some((ti, li));
                }
            }
        }
        None
    }

    /// The path of the device named by path, file name or guid.
    pub fn leaf_path(&self, name: &str) -> Option<std::path::PathBuf> {
        let (ti, li) = self.find_leaf(name)?;
        Some(self.vdevs.read()[ti].leaves[li].path.clone())
    }

    /// Replace device `old` with `new` (which may be `old`'s own path: a new
    /// disk in its place) and mark it for resilvering. The caller
    /// holds off commits while this runs and then scans every block.
    pub fn replace_device(
        &self,
        old: &str,
        new: &Path,
        opts: &CreateOpts,
        next_txg: u64,
    ) -> Result<()> {
        self.replace_with(old, Replacement::Path(new), opts, next_txg)
    }

    /// Put `dev` (at `path`) in the place of leaf `li` of top vdev `ti`,
    /// resilvering: its labels first (whole, with an empty ring), then the
    /// pool's configuration and every other label.
    fn install_replacement(
        &self,
        top: &TopVdev,
        ti: usize,
        li: usize,
        dev: Arc<dyn BlockDevice>,
        path: PathBuf,
        next_txg: u64,
    ) -> Result<()> {
        let mut leaves: Vec<Leaf> = top.leaves.iter().map(carry).collect();
        leaves[li] = Leaf {
            guid: self.env.guid(),
            path,
            dev: Some(dev),
            errors: ErrorCounters::default(),
            resilvering: true.into(),
            fault: Default::default(),
        };
        let new_top = rebuilt(top, leaves);
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.next_config_txg(next_txg);
        cfg.vdevs[ti] = top_config(&new_top);
        // A new replacement needs every block: a saved position no longer holds.
        cfg.resilver_from = None;
        // A spare taking over is a member from now on.
        cfg.spares.retain(|s| s.path != new_top.leaves[li].path);
        let l = &new_top.leaves[li];
        let h = LabelHeader {
            config: cfg.clone(),
            leaf_guid: l.guid,
            top_id: new_top.id,
        };
        write_labels(l.dev.as_deref().expect("just opened"), &h, true)?;
        self.vdevs.write()[ti] = Arc::new(new_top);
        *self.config.write() = cfg;
        self.rewrite_label_headers()?;
        Ok(())
    }

    /// Refuse (without -f) a replacement device whose label names a pool: the
    /// old device itself still in place (not a new disk there), or a device of
    /// another pool; only a spare of this pool may carry this pool's label.
    fn check_replacement_label(
        &self,
        dev: &dyn BlockDevice,
        new_path: &Path,
        in_place: bool,
        spare: bool,
        old_guid: u64,
    ) -> Result<()> {
        let pool = self.name();
        let Some(h) = read_label(dev) else {
            return Ok(());
        };
        // The label tells a new disk from the old one still in place.
        if in_place && h.config.guid == self.guid() && h.leaf_guid == old_guid {
            return Err(PoolError::InvalidSpec(format!(
                "{}: still the same device of pool '{pool}' (its label is intact): \
                 put a new disk there first, or use -f to rebuild it in place",
                new_path.display()
            )));
        }
        let ours = h.config.guid == self.guid();
        if !(spare && ours) {
            return Err(PoolError::InvalidSpec(format!(
                "{}: device is part of pool '{}' (use -f to overwrite)",
                new_path.display(),
                h.config.name
            )));
        }
        Ok(())
    }

    /// Replace device `old` with `new`, a path the pool opens (the daemon's
    /// `pool replace`) or a device the caller opened (the simulator's), and
    /// mark it for resilvering. Both take the same checks and the same steps;
    /// a refused path that did not exist before is removed again.
    pub fn replace_with(
        &self,
        old: &str,
        new: Replacement<'_>,
        opts: &CreateOpts,
        next_txg: u64,
    ) -> Result<()> {
        self.check_suspended()?;
        let pool = self.name();
        let Some((ti, li)) = self.find_leaf(old) else {
            return Err(PoolError::InvalidSpec(format!(
                "{old}: no such device in pool '{pool}'"
            )));
        };
        let top = self.vdevs.read()[ti].clone();
        check_replaceable(&top, li, old)?;
        let new_path = match &new {
            Replacement::Path(p) => p.to_path_buf(),
            Replacement::Device(d) => d.path().to_path_buf(),
        };
        let canon_new = std::fs::canonicalize(&new_path).unwrap_or(new_path.clone());
        // In place: a new disk at the old one's path (zpool replace POOL OLD).
        let old_leaf = &top.leaves[li];
        let in_place = canon_new == old_leaf.path
            || std::fs::canonicalize(&old_leaf.path).is_ok_and(|c| c == canon_new);
        let spare = self.is_spare(&canon_new);
        if !in_place && !spare && self.device_paths().contains(&canon_new) {
            return Err(PoolError::InvalidSpec(format!(
                "{}: already part of pool '{pool}'",
                new_path.display()
            )));
        }
        let (dev, created) = match new {
            Replacement::Path(p) => {
                let existed = p.exists();
                (open_for_create(p, opts)?, !existed)
            }
            Replacement::Device(d) => (d, false),
        };
        let child = if crate::raidz::nparity(top.kind) > 0 {
            top.asize / top.leaves.len() as u64
        } else {
            top.asize
        };
        let refuse = |e: PoolError| {
            if created {
                let _ = std::fs::remove_file(&new_path);
            }
            Err(e)
        };
        if leaf_data_size(dev.size()) < child {
            return refuse(PoolError::InvalidSpec(format!(
                "{}: too small to replace {old}: it holds {} data bytes, the vdev needs {child}",
                new_path.display(),
                leaf_data_size(dev.size())
            )));
        }
        if !opts.force {
            let label = self.check_replacement_label(
                dev.as_ref(),
                &new_path,
                in_place,
                spare,
                old_leaf.guid,
            );
            if let Err(e) = label {
                return refuse(e);
            }
        }
        self.install_replacement(&top, ti, li, dev, canon_new, next_txg)?;
        self.add_notice(if in_place {
            format!("{old} replaced by a new device in place: resilvering")
        } else {
            format!("{old} replaced by {}: resilvering", new_path.display())
        });
        Ok(())
    }

    /// True while a replacement device still waits for its resilver.
    pub fn resilver_pending(&self) -> bool {
        self.vdevs
            .read()
            .iter()
            .flat_map(|t| t.leaves.iter())
            .any(|l| l.dev.is_some() && l.resilvering.load(Relaxed))
    }

    /// The oldest birth txg a pending resilver must rebuild: the least
    /// `offline_txg` of the resilvering devices (0, every block, if one of them
    /// lacks blocks since an unknown txg, such as a replacement). Kept in the
    /// labels with the devices, so a resilver resumed after a restart has the
    /// same bound, and with it the same order of blocks as its saved position.
    pub fn resilver_min_birth(&self) -> u64 {
        self.vdevs
            .read()
            .iter()
            .flat_map(|t| t.leaves.iter())
            .filter(|l| l.dev.is_some() && l.resilvering.load(Relaxed))
            .map(|l| l.fault.offline_txg.load(Relaxed))
            .min()
            .unwrap_or(0)
    }

    /// Where a resilver interrupted by a restart continues, if one is pending.
    pub fn resilver_resume_pos(&self) -> Option<ScanPos> {
        if !self.resilver_pending() {
            return None;
        }
        self.config.read().resilver_resume()
    }

    /// Record that every block before `pos` (in the resilver's order) is
    /// rebuilt: flush the replacements first, so the labels never claim more
    /// than is durable. A crash while the labels are rewritten leaves the old
    /// or the new position (labels go in pairs), both true.
    pub fn save_resilver_pos(&self, pos: ScanPos) -> Result<()> {
        for t in self.vdevs.read().iter() {
            t.flush()?;
        }
        let mut w = self.config.write();
        w.resilver_from = Some(pos);
        w.resilver_walk = RESILVER_WALK;
        // Held (read) while the labels are written: a concurrent configuration
        // change waits, so it is never overwritten by this older copy.
        let cfg = parking_lot::RwLockWriteGuard::downgrade(w);
        self.write_label_headers(&cfg)
    }

    /// A scan over every block completed: replacements hold every block now.
    /// Flush them first (as [`Pool::save_resilver_pos`] does), so the labels never
    /// say a resilver ended while its last repairs are still in a device's cache:
    /// after a power cut the old device may be gone and the DTL cleared.
    pub fn finish_resilver(&self) -> Result<()> {
        if !self.resilver_pending() {
            return Ok(());
        }
        self.flush_all()?;
        let mut done = Vec::new();
        for t in self.vdevs.read().iter() {
            for l in &t.leaves {
                if l.dev.is_some() && l.resilvering.swap(false, Relaxed) {
                    l.fault.offline_txg.store(0, Relaxed);
                    done.push(l.path.display().to_string());
                }
            }
        }
        if done.is_empty() {
            return Ok(());
        }
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.config_txg.max(self.uberblock().txg) + 1;
        cfg.vdevs = self.vdevs.read().iter().map(|t| top_config(t)).collect();
        cfg.resilver_from = None;
        *self.config.write() = cfg;
        self.rewrite_label_headers()?;
        self.add_notice(format!("resilver finished: {}", done.join(", ")));
        Ok(())
    }
}

/// Refuse a replacement that would lose data or that this version cannot do.
fn check_replaceable(top: &TopVdev, li: usize, old: &str) -> Result<()> {
    let others_unreadable = top
        .leaves
        .iter()
        .enumerate()
        .filter(|(i, l)| *i != li && !l.readable())
        .count();
    match top.kind {
        VdevKind::Disk => Err(PoolError::InvalidSpec(format!(
            "{old}: a single-device vdev has no other copy to resilver from (attach a mirror first)"
        ))),
        VdevKind::Mirror if others_unreadable + 1 >= top.leaves.len() => {
            Err(PoolError::InvalidSpec(format!(
                "{old}: the last good device of its mirror cannot be replaced"
            )))
        }
        VdevKind::Raidz1 | VdevKind::Raidz2
            if others_unreadable + 1 > crate::raidz::nparity(top.kind) =>
        {
            Err(PoolError::InvalidSpec(format!(
                "{old}: raidz{} vdev {} already has {others_unreadable} unreadable devices; replacing this one too would lose data",
                crate::raidz::nparity(top.kind),
                top.id
            )))
        }
        _ => Ok(()),
    }
}
