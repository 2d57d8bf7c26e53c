//! Device damage: faults and corruption within what the layout survives (they
//! must be invisible), read damage beyond it (reads may fail, never return
//! other bytes), and scrubs.

use crate::{err, Layout, Sim, R};
use cachalot_pool::fault::{Fault, FaultKind, FaultOps};

/// Reads made while more devices are damaged than the layout survives.
const OVERLOAD_READS: usize = 8;

/// Some data device is FAULTED.
fn faulted(pool: &cachalot_pool::Pool) -> bool {
    fn any(d: &cachalot_pool::DeviceStatus) -> bool {
        d.state == "FAULTED" || d.children.iter().any(any)
    }
    pool.device_status().iter().any(any)
}

impl Sim {
    /// Fail every `ops` I/O of the devices in slots `devs` with `kind`; the
    /// ARC is emptied so that reads reach them.
    pub(crate) fn fault_devices(
        &mut self,
        devs: &[usize],
        ops: FaultOps,
        kind: FaultKind,
    ) -> R<()> {
        let pool = self.store.pool().clone();
        let fault = Fault {
            ops,
            kind,
            rate: 100,
        };
        for d in devs {
            let dev = format!("sim:{}", Layout::dev_name(*d));
            pool.inject_fault(&dev, Some(fault))
                .map_err(err("inject"))?;
        }
        self.store.cache().arc.clear();
        Ok(())
    }

    /// Make one of the layout's victim devices fail or lie for a while (or stop
    /// all faults).
    pub(crate) fn inject_fault(&mut self) -> R<()> {
        if self.layout.victims.is_empty() {
            return Ok(());
        }
        let pool = self.store.pool().clone();
        if self.rng.chance(40) {
            pool.clear_faults();
            return Ok(());
        }
        let victim = self.rng.pick(&self.layout.victims);
        let ops = self
            .rng
            .pick(&[FaultOps::Read, FaultOps::Write, FaultOps::All]);
        let kind = self.rng.pick(&[FaultKind::Eio, FaultKind::Corrupt]);
        let rate = 5 + self.rng.below(45) as u8;
        let dev = format!("sim:{}", Layout::dev_name(victim));
        pool.inject_fault(&dev, Some(Fault { ops, kind, rate }))
            .map_err(err("inject"))?;
        self.stats.faults += 1;
        Ok(())
    }

    /// Overwrite bytes on one of the layout's victim devices, away from the
    /// labels (or on the cache device).
    pub(crate) fn corrupt(&mut self) -> R<()> {
        if self.layout.cache && self.rng.chance(30) {
            return self.corrupt_cache();
        }
        if self.layout.victims.is_empty() {
            return Ok(());
        }
        let victim = self.rng.pick(&self.layout.victims);
        let span = self.layout.dev_size() - (8 << 20);
        let off = (4 << 20) + self.rng.below(span) / 512 * 512;
        let len = 512 * (1 + self.rng.below(16)) as usize;
        let noise: Vec<u8> = (0..len).map(|_| self.rng.next_u64() as u8).collect();
        self.devs[victim].corrupt(off, &noise);
        self.stats.corruptions += 1;
        Ok(())
    }

    /// Scramble every read of one data device more than the layout survives
    /// losing (with the ARC emptied, so reads reach the devices), and read: each
    /// read returns the model's bytes or fails. Read faults only: nothing on
    /// the devices changes but repairs, which write bytes that verified.
    pub(crate) fn overload(&mut self) -> R<()> {
        let mut devs: Vec<usize> = (0..self.layout.width).collect();
        for i in (1..devs.len()).rev() {
            devs.swap(i, self.rng.below(i as u64 + 1) as usize);
        }
        devs.truncate(self.layout.survives() + 1);
        let pool = self.store.pool().clone();
        pool.clear_faults();
        // Scrambled, or failing: enough read errors fault a device (no more
        // I/O until an import), which must leave the pool importable.
        let kind = self.rng.pick(&[FaultKind::Corrupt, FaultKind::Eio]);
        self.fault_devices(&devs, FaultOps::Read, kind)?;
        if self.trace {
            eprintln!("  reads with {devs:?} scrambled");
        }
        let mut r = Ok(());
        for _ in 0..OVERLOAD_READS {
            match self.read_random(true) {
                Ok(Some(ok)) => {
                    self.stats.overload_reads += 1;
                    self.stats.overload_errors += u64::from(!ok);
                }
                Ok(None) => {}
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        pool.clear_faults();
        // What the damaged reads left in the cache was verified; drop it
        // anyway so later reads do not depend on which of them failed.
        self.store.cache().arc.clear();
        r?;
        if faulted(&pool) {
            self.stats.faulted_devices += 1;
            return self.reimport_faulted();
        }
        Ok(())
    }

    /// Devices FAULTED by read errors get no I/O until an import: export
    /// (which may fail, with more devices faulted than the layout survives:
    /// then the process gives up, as at a power cut) and import; the pool
    /// must come back with every device and hold what the model allows.
    fn reimport_faulted(&mut self) -> R<()> {
        if self.trace {
            eprintln!("  devices faulted: export and import");
        }
        if let Err(e) = self.store.export() {
            if self.trace {
                eprintln!("  export failed ({e}): as a power cut");
            }
            self.store.abandon();
            // The devices come back as after a power cut (unflushed writes
            // kept or lost), with every device present again.
            return self.recover();
        }
        // A power cut armed earlier may have fired in the export: its commit
        // was never acknowledged (the devices took nothing after the cut), so
        // the run's recovery imports what survived, not this.
        if self.devs[0].is_cut() {
            return Ok(());
        }
        self.export_imported()
    }

    pub(crate) fn scrub(&mut self) -> R<()> {
        if self.check("scrub", self.store.scrub_start())?.is_none() {
            return Ok(());
        }
        let s = self.store.scrub_status();
        if s.state != "finished" || s.unrecoverable > 0 {
            return Err(format!("scrub: {s:?}"));
        }
        self.stats.scrubs += 1;
        Ok(())
    }
}
