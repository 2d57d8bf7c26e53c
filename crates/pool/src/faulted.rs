//! What a device FAULTED by I/O errors misses, kept in the labels.
//!
//! A leaf FAULTED by errors gets no I/O until an import or `pool online`, so it
//! misses every block written meanwhile. `pool offline` writes that into the
//! configuration (`offline_txg`); a fault happens inside I/O, so the commit
//! that follows it does: before the first commit whose writes the leaf misses
//! becomes durable (its uberblock), the configuration in the labels of the
//! leaves still in service says the leaf is resilvering from txg 0 (the txg of
//! its first lost write is not known: every block is rebuilt, as after
//! `online`). An import then brings the device back resilvering, written to
//! but never read until a scan rebuilt it, instead of ONLINE with holes (a
//! dirty time range, as ZFS's DTL, in its simplest form). Only while the
//! vdev's readable leaves can rebuild it (`TopVdev::rebuildable_without_unreadable`):
//! a single disk, or a raidz faulted beyond its parity, keeps its labels as they
//! were, since its writes fail, the pool suspends, and an import must then read
//! every device.
//!
//! A leaf whose write of a commit's uberblock failed on some of its four rings
//! (not all: a leaf holding it in none is no evidence either way) is recorded
//! too (`RingMiss`), in the same commit before its final flush: otherwise its
//! rings would show that finished commit as one cut before its final flush,
//! which an import may skip silently (`import::torn_commit`).

use crate::error::Result;
use crate::label::{RingMiss, UBER_SLOTS};
use crate::pool::{top_config, Pool};
use crate::vdev::Leaf;
use std::sync::atomic::Ordering::Relaxed;

impl Pool {
    /// Record in the labels every leaf FAULTED by errors that the configuration
    /// does not yet show as resilvering; called by the commit of `txg` before
    /// it writes anything.
    pub(crate) fn record_faulted_leaves(&self, txg: u64) -> Result<()> {
        let unrecorded = {
            let cfg = self.config.read();
            let recorded = |guid: u64| {
                cfg.vdevs
                    .iter()
                    .flat_map(|v| v.children.iter())
                    .any(|c| c.guid == guid && c.resilvering && c.offline_txg == 0)
            };
            self.vdevs.read().iter().any(|t| {
                t.rebuildable_without_unreadable()
                    && t.leaves
                        .iter()
                        .any(|l| l.fault.faulted.load(Relaxed) && !recorded(l.guid))
            })
        };
        if !unrecorded {
            return Ok(());
        }
        // Changed and written under the configuration lock (held for reading
        // while the labels are written, as `save_resilver_pos` does), so a
        // concurrent configuration write never puts an older copy over it.
        let mut w = self.config.write();
        w.config_txg = w.next_config_txg(txg);
        w.vdevs = self.vdevs.read().iter().map(|t| top_config(t)).collect();
        // The resilver's bound changed: a saved position no longer applies.
        w.resilver_from = None;
        let cfg = parking_lot::RwLockWriteGuard::downgrade(w);
        // The faulted leaves get no I/O (a dead disk would fail the commit).
        self.write_label_headers_where(&cfg, |l| !l.is_faulted())
    }

    /// Record that the uberblock of `txg` reached only some rings of `leaves`;
    /// called by its commit after the ring writes, before the final flush. The
    /// record goes to the leaves that took every ring write, or, when there is
    /// none (a single disk), to the leaves themselves; a failed record fails the
    /// commit (not acknowledged, the pool suspends).
    pub(crate) fn record_ring_misses(&self, txg: u64, leaves: &[u64]) -> Result<()> {
        let mut w = self.config.write();
        w.config_txg = w.next_config_txg(txg);
        // Older txgs' slots have been written again since.
        w.ring_misses.retain(|m| m.txg + UBER_SLOTS > txg);
        w.ring_misses
            .extend(leaves.iter().map(|&leaf| RingMiss { leaf, txg }));
        let cfg = parking_lot::RwLockWriteGuard::downgrade(w);
        let whole = |l: &Leaf| !l.is_faulted() && !leaves.contains(&l.guid);
        let any_whole = self
            .vdevs
            .read()
            .iter()
            .flat_map(|t| t.leaves.iter())
            .any(|l| l.dev.is_some() && whole(l));
        if any_whole {
            self.write_label_headers_where(&cfg, whole)
        } else {
            self.write_label_headers_where(&cfg, |l| !l.is_faulted())
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::device::{BlockDevice, SimDevice};
    use crate::label::VdevKind;
    use crate::pool::{Pool, WriteOpts};
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Arc;

    const OPTS: WriteOpts = WriteOpts::RAW_DATA;

    fn sim_devices(n: usize) -> Vec<SimDevice> {
        (0..n)
            .map(|i| SimDevice::new(&format!("d{i}"), 40 << 20))
            .collect()
    }

    /// The same devices again, as a pool opens them (a reopen after a drop).
    fn shared(devs: &[SimDevice]) -> Vec<Arc<dyn BlockDevice>> {
        devs.iter()
            .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
            .collect()
    }

    /// A mirror child FAULTED by read errors misses the next commits; after an
    /// import it is resilvering (never read before rebuilt), not ONLINE.
    #[test]
    fn a_device_faulted_by_errors_comes_back_resilvering() {
        let devs = sim_devices(2);
        let dyns = || shared(&devs);
        let pool = Pool::create_on_devices("t", dyns(), true, 12).unwrap();
        let a = pool.write_block(1, &[7u8; 8192], OPTS).unwrap();
        pool.commit(1, a).unwrap();
        // Read errors fault d1 (`Leaf::io_error`): no more I/O goes to it.
        let leaf = |p: &Pool| -> bool {
            let v = p.vdevs.read();
            v[0].leaves[1].fault.faulted.load(Relaxed)
        };
        for _ in 0..crate::fault::FAULT_AFTER_IO_ERRORS {
            pool.vdevs.read()[0].leaves[1].io_error(false);
        }
        assert!(leaf(&pool));
        let b = pool.write_block(2, &[8u8; 8192], OPTS).unwrap();
        pool.commit(2, b).unwrap();
        drop(pool);
        let pool = Pool::import_devices(dyns()).unwrap();
        assert_eq!(pool.uberblock().txg, 2);
        let states: Vec<String> = pool.device_status()[0]
            .children
            .iter()
            .map(|c| c.state.clone())
            .collect();
        assert_eq!(states, ["ONLINE", "RESILVERING"], "d1 lacks txg 2's block");
        assert!(pool.resilver_pending());
        assert_eq!(pool.resilver_min_birth(), 0);
        // Until rebuilt, reads come from d0 only: d1 lacks b.
        assert_eq!(pool.read_block(&b).unwrap(), vec![8u8; 8192]);
    }

    /// Two of a raidz1's leaves FAULTED by a burst of read errors: neither can
    /// be rebuilt from the rest, so neither is recorded as resilvering, and an
    /// import reads all of them again (recording both made the pool refuse to
    /// import, "missing 2 of its 3", with every device whole).
    #[test]
    fn faults_beyond_parity_are_not_recorded() {
        let devs = sim_devices(3);
        let dyns = || shared(&devs);
        let pool = Pool::create_on_group("t", dyns(), VdevKind::Raidz1, 12).unwrap();
        let a = pool.write_block(1, &[7u8; 65536], OPTS).unwrap();
        pool.commit(1, a).unwrap();
        for li in [1, 2] {
            for _ in 0..crate::fault::FAULT_AFTER_IO_ERRORS {
                pool.vdevs.read()[0].leaves[li].io_error(false);
            }
        }
        pool.record_faulted_leaves(2).unwrap();
        assert!(
            pool.config().vdevs[0]
                .children
                .iter()
                .all(|c| !c.resilvering),
            "a fault beyond parity was recorded: {:?}",
            pool.config().vdevs[0].children
        );
        drop(pool);
        let pool = Pool::import_devices(dyns()).unwrap();
        assert_eq!(pool.uberblock().txg, 1);
        assert_eq!(pool.read_block(&a).unwrap(), vec![7u8; 65536]);
    }
}
