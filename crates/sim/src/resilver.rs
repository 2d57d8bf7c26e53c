//! Replacing a device and its resilver: one of the layout's victim devices
//! (faulted first, sometimes) is replaced by a blank one in its slot, as a new
//! disk put where the old one was, and resilvered; a power cut may hit in the
//! middle, and the import that follows continues the resilver from the
//! position it saved. Then the new device must hold everything: with every
//! other device the layout survives losing scrambled on read, every dataset
//! and snapshot reads back as the model holds it.

use crate::{Layout, Sim, R};
use cachalot_pool::fault::{FaultKind, FaultOps};
use cachalot_pool::{BlockDevice, CreateOpts, Replacement, SimDevice};
use std::sync::Arc;

/// Device writes within which a power cut armed by a replacement fires: about
/// the writes of a resilver of the simulator's data, so most such cuts land
/// inside it.
const RESILVER_CUT_SPAN: u64 = 1500;

/// Reads made while the device to be replaced fails every I/O.
const FAILING_READS: usize = 4;

impl Sim {
    /// Replace a victim device by a blank one and check the resilver.
    pub(crate) fn replace(&mut self) -> R<()> {
        if self.layout.victims.is_empty() {
            return Ok(());
        }
        let slot = self.rng.pick(&self.layout.victims);
        if self.rng.chance(30) {
            self.fail_device(slot)?;
            if self.devs[0].is_cut() {
                return Ok(());
            }
        }
        if self.cut_armed == 0 && self.rng.chance(40) {
            let n = self.devs[0].writes_issued() + self.rng.below(RESILVER_CUT_SPAN);
            self.devs[0].cut_power_at_write(n);
            self.cut_armed = 1;
        }
        self.install_blank(slot)?;
        if self.devs[0].is_cut() {
            // The import after the cut continues the resilver (`recover`).
            return Ok(());
        }
        self.committed();
        self.check_resilvered()
    }

    /// Put a blank device in `slot` and replace the pool's device there by it
    /// (the pool resilvers it before this returns: a deterministic run scans
    /// inline).
    fn install_blank(&mut self, slot: usize) -> R<()> {
        let name = Layout::dev_name(slot);
        let img = vec![0; self.layout.dev_size() as usize];
        let fresh = SimDevice::on_power(&name, img, self.devs[0].power().clone());
        self.devs[slot] = fresh.clone();
        self.resilvering = Some(slot);
        if self.trace {
            eprintln!("  replace {name} by a blank device");
        }
        let new = Replacement::Device(Arc::new(fresh) as Arc<dyn BlockDevice>);
        let r = self
            .store
            .replace_with(&format!("sim:{name}"), new, &CreateOpts::default());
        self.check(&format!("replace {name}"), r)?;
        self.stats.replacements += 1;
        Ok(())
    }

    /// Make every I/O of `slot` fail and read: the reads succeed (the layout
    /// survives this device's loss) and enough errors fault the device.
    fn fail_device(&mut self, slot: usize) -> R<()> {
        self.fault_devices(&[slot], FaultOps::All, FaultKind::Eio)?;
        for _ in 0..FAILING_READS {
            self.read_random(false)?;
        }
        Ok(())
    }

    /// After a resilver (the replacement step's, or the one an import
    /// continued): it finished with nothing unrecoverable, and the new device
    /// holds every block. Checked by scrambling every read of the other
    /// devices the layout survives losing (the other victims first: they may
    /// hold corruption) and reading every dataset and snapshot.
    pub(crate) fn check_resilvered(&mut self) -> R<()> {
        let Some(slot) = self.resilvering.take() else {
            return Ok(());
        };
        let s = self.store.scrub_status();
        // No scan since the import: the resilver ended before a power cut
        // (the check below tells whether its end was recorded too early).
        let ended_before = s.state == "none";
        if self.store.pool().resilver_pending()
            || !ended_before
                && (s.kind != "resilver" || s.state != "finished" || s.unrecoverable > 0)
        {
            return Err(format!(
                "resilver of {}: pending {}, {s:?}",
                Layout::dev_name(slot),
                self.store.pool().resilver_pending()
            ));
        }
        if s.resumed > 0 {
            self.stats.resilver_resumes += 1;
        }
        if self.trace {
            eprintln!(
                "  resilvered {}: {} copies written, {} bytes resumed, {} of {} bytes examined (from txg {})",
                Layout::dev_name(slot),
                s.resilvered,
                s.resumed,
                s.examined,
                s.total,
                s.min_birth_txg
            );
        }
        let mut lost: Vec<usize> = self
            .layout
            .victims
            .iter()
            .copied()
            .filter(|d| *d != slot)
            .collect();
        let mut healthy: Vec<usize> = (0..self.layout.width)
            .filter(|d| *d != slot && !lost.contains(d))
            .collect();
        while lost.len() < self.layout.survives() && !healthy.is_empty() {
            let i = self.rng.below(healthy.len() as u64) as usize;
            lost.push(healthy.swap_remove(i));
        }
        let pool = self.store.pool().clone();
        pool.clear_faults();
        self.fault_devices(&lost, FaultOps::Read, FaultKind::Corrupt)?;
        self.spoil_cache();
        let ctx = format!(
            "after the resilver of {}, with {:?} scrambled",
            Layout::dev_name(slot),
            lost.iter()
                .map(|d| Layout::dev_name(*d))
                .collect::<Vec<_>>()
        );
        let r = self
            .heads()
            .iter()
            .try_for_each(|name| self.check_fs(name, &ctx));
        pool.clear_faults();
        self.store.cache().arc.clear();
        self.stats.resilvers_checked += 1;
        r
    }

    /// After a power cut: a replacement whose labels never became durable left
    /// a blank device (it took no part in the import): replace again, as an
    /// operator would.
    pub(crate) fn replace_again(&mut self, slot: usize) -> R<()> {
        if self.trace {
            eprintln!(
                "  the replacement of {} never landed",
                Layout::dev_name(slot)
            );
        }
        self.install_blank(slot)?;
        self.committed();
        self.check_resilvered()
    }
}
