//! Device management beyond `replace`: `attach` (a single device becomes a
//! mirror, or a mirror gets wider), `detach` (a mirror child leaves), `offline`
//! and `online`.
//!
//! Invariants: every operation is checked in full before anything is written,
//! so a refused one changes nothing; none leaves a vdev without a readable copy
//! of its data (the last good child of a mirror, more than nparity unreadable
//! columns of a raidz); a device that joins or comes back (attach, online) is
//! marked resilvering, so it is written to but never read from until a scan has
//! rebuilt every block it may lack; the configuration in every label is
//! rewritten before the operation returns.
//!
//! What a device that was offline lacks is known by txg (a dirty time, as in
//! ZFS's DTL, in its simplest form): `offline` records the open txg in the
//! leaf's config (`offline_txg`), and the resilver after `online` rebuilds only
//! blocks born at or after it. Copy-on-write makes that enough: a block never
//! changes after its birth, and space freed while the device was away holds a
//! block born later if it is in use again. A device whose writes failed or that
//! was FAULTED lacks blocks from an unknown txg: it is rebuilt in full.

use crate::commit::{read_label, write_labels};
use crate::error::{PoolError, Result};
use crate::label::{leaf_data_size, LabelHeader, VdevKind, LABEL_HEADER_SIZE};
use crate::pool::{new_guid, top_config, Pool};
use crate::replace::{carry, rebuilt};
use crate::vdev::{ErrorCounters, Leaf, TopVdev};
use crate::vdev_spec::{open_for_create, CreateOpts};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

fn kind_name(k: VdevKind) -> &'static str {
    match k {
        VdevKind::Disk => "single-device",
        VdevKind::Mirror => "mirror",
        VdevKind::Raidz1 => "raidz1",
        VdevKind::Raidz2 => "raidz2",
    }
}

fn invalid(msg: String) -> PoolError {
    PoolError::InvalidSpec(msg)
}

/// Readable children of `top` other than child `li`.
fn other_readable(top: &TopVdev, li: usize) -> usize {
    top.leaves
        .iter()
        .enumerate()
        .filter(|(i, l)| *i != li && l.readable())
        .count()
}

/// Refuse to take child `li` out of service when the vdev could not do without it.
fn check_can_lose(top: &TopVdev, li: usize, dev: &str, what: &str) -> Result<()> {
    let p = crate::raidz::nparity(top.kind);
    let unreadable_others = top.leaves.len() - 1 - other_readable(top, li);
    match top.kind {
        VdevKind::Disk => Err(invalid(format!(
            "cannot {what} {dev}: it is a single-device vdev with no other copy of its data"
        ))),
        VdevKind::Mirror if other_readable(top, li) == 0 => Err(invalid(format!(
            "cannot {what} {dev}: it is the last good device of mirror-{}",
            top.id
        ))),
        VdevKind::Raidz1 | VdevKind::Raidz2 if unreadable_others + 1 > p => {
            Err(invalid(format!(
                "cannot {what} {dev}: raidz{p}-{} already has {unreadable_others} unreadable devices and survives at most {p}",
                top.id
            )))
        }
        _ => Ok(()),
    }
}

impl Pool {
    fn leaf_of(&self, dev: &str) -> Result<(usize, usize, Arc<TopVdev>)> {
        let (ti, li) = self
            .find_leaf(dev)
            .ok_or_else(|| invalid(format!("{dev}: no such device in pool '{}'", self.name())))?;
        let top = self.vdevs.read()[ti].clone();
        Ok((ti, li, top))
    }

    /// Swap top vdev `ti` for `new_top` and write the new configuration.
    fn install_top(&self, ti: usize, new_top: TopVdev, next_txg: u64) -> Result<()> {
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.next_config_txg(next_txg);
        cfg.vdevs[ti] = top_config(&new_top);
        // A device joining or leaving changes what the resilver must cover.
        cfg.resilver_from = None;
        self.vdevs.write()[ti] = Arc::new(new_top);
        *self.config.write() = cfg;
        self.rewrite_label_headers()
    }

    /// Write the configuration after a leaf's state changed in place.
    fn write_config(&self, next_txg: u64) -> Result<()> {
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.next_config_txg(next_txg);
        cfg.vdevs = self.vdevs.read().iter().map(|t| top_config(t)).collect();
        cfg.resilver_from = None;
        *self.config.write() = cfg;
        self.rewrite_label_headers()
    }

    /// `pool attach POOL DEV NEW`: mirror DEV (a single device or a mirror
    /// child) onto NEW, which is then resilvered.
    pub fn attach_device(
        &self,
        existing: &str,
        new: &Path,
        opts: &CreateOpts,
        next_txg: u64,
    ) -> Result<()> {
        self.check_suspended()?;
        let pool = self.name();
        let (ti, li, top) = self.leaf_of(existing)?;
        match top.kind {
            VdevKind::Disk | VdevKind::Mirror => {}
            k => {
                return Err(invalid(format!(
                    "cannot attach to {existing}: it is in a {} vdev (attach makes mirrors; use replace)",
                    kind_name(k)
                )))
            }
        }
        if !top.leaves[li].readable() {
            return Err(invalid(format!(
                "cannot attach to {existing}: it is {} and has nothing to copy",
                top.leaves[li].state()
            )));
        }
        let canon_new = std::fs::canonicalize(new).unwrap_or(new.to_path_buf());
        if self.device_paths().contains(&canon_new) {
            return Err(invalid(format!(
                "{}: already part of pool '{pool}'",
                new.display()
            )));
        }
        let existed = new.exists();
        let dev = open_for_create(new, opts)?;
        let refuse = |e: PoolError| {
            if !existed {
                let _ = std::fs::remove_file(new);
            }
            Err(e)
        };
        if leaf_data_size(dev.size()) < top.asize {
            return refuse(invalid(format!(
                "{}: too small to attach to {existing}: it holds {} data bytes, the vdev needs {}",
                new.display(),
                leaf_data_size(dev.size()),
                top.asize
            )));
        }
        if !opts.force {
            if let Some(h) = read_label(dev.as_ref()) {
                return refuse(invalid(format!(
                    "{}: device is part of pool '{}' (use -f to overwrite)",
                    new.display(),
                    h.config.name
                )));
            }
        }
        let mut leaves: Vec<Leaf> = top.leaves.iter().map(carry).collect();
        leaves.push(Leaf {
            guid: new_guid(),
            path: canon_new,
            dev: Some(dev),
            errors: ErrorCounters::default(),
            resilvering: true.into(),
            fault: Default::default(),
        });
        let mut new_top = rebuilt(&top, leaves);
        new_top.kind = VdevKind::Mirror;
        let l = new_top.leaves.last().expect("just pushed");
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.next_config_txg(next_txg);
        cfg.vdevs[ti] = top_config(&new_top);
        let h = LabelHeader {
            config: cfg,
            leaf_guid: l.guid,
            top_id: new_top.id,
        };
        write_labels(l.dev.as_deref().expect("just opened"), &h, true)?;
        self.install_top(ti, new_top, next_txg)?;
        self.add_notice(format!(
            "{} attached to {existing}: resilvering",
            new.display()
        ));
        Ok(())
    }

    /// `pool detach POOL DEV`: take a child out of its mirror (a mirror of two
    /// becomes a single device). The detached device's labels are erased.
    pub fn detach_device(&self, dev: &str, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        let (ti, li, top) = self.leaf_of(dev)?;
        if top.kind != VdevKind::Mirror {
            return Err(invalid(format!(
                "cannot detach {dev}: only a mirror's devices can be detached (this is a {} vdev; use replace)",
                kind_name(top.kind)
            )));
        }
        check_can_lose(&top, li, dev, "detach")?;
        let gone = top.leaves[li].dev.clone();
        let leaves: Vec<Leaf> = top
            .leaves
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != li)
            .map(|(_, l)| carry(l))
            .collect();
        let mut new_top = rebuilt(&top, leaves);
        if new_top.leaves.len() == 1 {
            new_top.kind = VdevKind::Disk;
        }
        self.install_top(ti, new_top, next_txg)?;
        // No longer a member: a later import must not find it (best effort, as
        // zpool does; the new configuration is already on the other devices).
        if let Some(d) = gone {
            let zeros = vec![0u8; LABEL_HEADER_SIZE];
            for off in crate::label::label_offsets(d.size()) {
                let _ = d.write_at(&zeros, off);
            }
            let _ = d.flush();
        }
        self.add_notice(format!("{dev} detached"));
        Ok(())
    }

    /// `pool offline POOL DEV`: stop all I/O to DEV (kept across restarts).
    pub fn offline_device(&self, dev: &str, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        let (_, li, top) = self.leaf_of(dev)?;
        let leaf = &top.leaves[li];
        if leaf.is_offline() {
            return Ok(());
        }
        check_can_lose(&top, li, dev, "offline")?;
        // Every txg before the open one reached the device (commits are held
        // off, see `Store::change_devices`), unless a write to it failed, it is
        // already out (faulted) or it still resilvers: then it lacks blocks
        // from an earlier txg (the one its resilver started from; unknown
        // after an error).
        let was_txg = leaf.fault.offline_txg.load(Relaxed);
        let from = if leaf.is_faulted() || leaf.errors.write.load(Relaxed) > 0 {
            0
        } else if leaf.resilvering.load(Relaxed) {
            was_txg
        } else {
            next_txg.min(self.uberblock().txg + 1)
        };
        leaf.fault.offline.store(true, Relaxed);
        leaf.fault.offline_txg.store(from, Relaxed);
        if let Err(e) = self.write_config(next_txg) {
            leaf.fault.offline.store(false, Relaxed);
            leaf.fault.offline_txg.store(was_txg, Relaxed);
            return Err(e);
        }
        self.add_notice(format!("{dev} taken offline"));
        Ok(())
    }

    /// `pool online POOL DEV`: bring an OFFLINE or FAULTED device back; it is
    /// resilvered before it is read again: only the blocks born since it went
    /// offline (`offline_txg`), or every block when that is not known (a
    /// FAULTED device). Returns false if it was already online.
    pub fn online_device(&self, dev: &str, next_txg: u64) -> Result<bool> {
        self.check_suspended()?;
        let (_, li, top) = self.leaf_of(dev)?;
        let leaf = &top.leaves[li];
        if leaf.dev.is_none() || leaf.fault.removed.load(Relaxed) {
            return Err(invalid(format!(
                "cannot online {dev}: the device is missing (use replace)"
            )));
        }
        if !leaf.is_faulted() {
            return Ok(false);
        }
        if !leaf.is_offline() || leaf.fault.faulted.load(Relaxed) {
            // Faulted by errors: the txg of its first lost write is not known.
            leaf.fault.offline_txg.store(0, Relaxed);
        }
        leaf.resilvering.store(true, Relaxed);
        // A fresh start: old I/O errors would fault it again at the next one.
        leaf.errors.read.store(0, Relaxed);
        leaf.errors.write.store(0, Relaxed);
        leaf.fault.offline.store(false, Relaxed);
        leaf.fault.faulted.store(false, Relaxed);
        leaf.fault.set(None);
        self.write_config(next_txg)?;
        self.add_notice(format!("{dev} brought online: resilvering"));
        Ok(true)
    }
}
