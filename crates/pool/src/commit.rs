//! Labels, uberblocks and the commit of a transaction group.
//!
//! Invariants:
//! - Label headers are written even copies first, flushed, then odd copies: a
//!   crash leaves at least one pair intact.
//! - `commit(T)`: the space map segment of T, flush every vdev, the uberblock of T
//!   into slot T mod UBER_SLOTS of every label, flush again. T is durable only then;
//!   frees of T-1 and older become allocatable only then.
//! - A failed commit suspends the pool: nothing more is written.

use crate::blkptr::BlkPtr;
use crate::device::BlockDevice;
use crate::error::{PoolError, Result};
use crate::label::*;
use crate::pool::Pool;
use crate::spacemap::Record;
use crate::vdev::{Leaf, TopVdev};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Time of a pool being created (no pool yet: the thread's environment).
pub(crate) fn now_ns() -> u64 {
    crate::env::Env::current().now_ns()
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

pub(crate) fn write_labels(
    dev: &dyn BlockDevice,
    header: &LabelHeader,
    init_ring: bool,
) -> Result<()> {
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

/// One uberblock ring (one label copy) of a device, as an import reads it.
pub(crate) struct Ring {
    /// The valid uberblocks of this pool in their own slots.
    pub ubs: Vec<Uberblock>,
    /// Slots whose bytes are neither blank nor a valid uberblock: damage, never
    /// a cut. An uberblock fits in the first 512-byte sector of its slot, and a
    /// cut write lands whole sectors or nothing, so a cut leaves a slot's older
    /// content (a valid older uberblock, or zeros), never a failed checksum.
    pub rotted: Vec<u64>,
}

/// The uberblock rings of each label copy of a device that reads, in label
/// order: an import tells a commit cut before its final flush by a txg present
/// in some rings of a device and absent from others (`import::torn_commit`).
pub(crate) fn read_uberblock_rings(dev: &dyn BlockDevice, pool_guid: u64) -> Vec<Ring> {
    let mut rings = Vec::new();
    let ring = (UBER_SLOTS * UBER_SLOT_SIZE) as usize;
    let mut buf = vec![0u8; ring];
    for off in label_offsets(dev.size()) {
        if dev.read_at(&mut buf, off + UBER_RING_OFFSET).is_err() {
            continue;
        }
        let mut out = Ring {
            ubs: Vec::new(),
            rotted: Vec::new(),
        };
        for slot in 0..UBER_SLOTS {
            let s = (slot * UBER_SLOT_SIZE) as usize;
            let bytes = &buf[s..s + UBER_SIZE];
            match Uberblock::decode(bytes) {
                Some(ub) if ub.pool_guid == pool_guid && ub.txg % UBER_SLOTS == slot => {
                    out.ubs.push(ub)
                }
                Some(_) => {}
                None if bytes.iter().all(|&b| b == 0) => {}
                None => out.rotted.push(slot),
            }
        }
        rings.push(out);
    }
    rings
}

impl Pool {
    /// Commit transaction group `txg` whose meta object set root is `mos`.
    /// On failure the pool is suspended: nothing more is written, the last
    /// committed state stays intact on disk.
    pub fn commit(&self, txg: u64, mos: BlkPtr) -> Result<()> {
        self.check_suspended()?;
        let mut r = self.commit_inner(txg, mos);
        // Debug builds (and the `ci` profile every test runs with) check the
        // pool's invariants after every commit; a violation suspends the pool.
        if r.is_ok() && verify_after_commit() {
            if let Err(e) = self.verify() {
                r = Err(PoolError::Suspended(format!(
                    "invariant violated after the commit of txg {txg}: {e}"
                )));
            }
        }
        if let Err(e) = &r {
            *self.suspended.lock() = Some(e.to_string());
        }
        r
    }

    /// Check every invariant of the pool layer that can be checked from memory
    /// and the committed space map: see `verify_space` and `verify_spacemap`.
    pub fn verify(&self) -> std::result::Result<(), String> {
        self.verify_space()?;
        self.verify_spacemap()
    }

    fn commit_inner(&self, txg: u64, mos: BlkPtr) -> Result<()> {
        let t0 = Instant::now();
        // The uberblock of `txg` takes slot txg % UBER_SLOTS: an older txg would
        // overwrite a newer uberblock with an older tree.
        let last = self.last_ub.lock().txg;
        assert!(txg > last, "commit of txg {txg} after txg {last}");
        // A leaf faulted since the labels were written misses this txg: the
        // labels say so before its uberblock lands (`faulted`).
        self.record_faulted_leaves(txg)?;
        let n_records = self.space.lock().txg_records.len() as u64;
        // The frees of this txg go to the defer queue, so they become allocatable
        // only after the next commit: those the log segment recorded, and those
        // still pending after a condense (which records none of them).
        let (sm_head, sm_base, txg_frees) = self.sync_spacemap(txg)?;
        let tops: Vec<Arc<TopVdev>> = self.vdevs.read().clone();
        if !crate::plant::active(crate::plant::Bug::NoFlushBeforeUberblock) {
            for t in &tops {
                t.flush()?;
            }
        }
        let cfg = self.config.read().clone();
        let ub = Uberblock {
            txg,
            pool_guid: cfg.guid,
            guid_sum: cfg.guid_sum(),
            timestamp_ns: self.env.now_ns(),
            config_txg: cfg.config_txg,
            mos,
            sm_head,
            sm_base,
        };
        let enc = ub.encode();
        let slot = (txg % UBER_SLOTS) * UBER_SLOT_SIZE;
        let mut written = 0;
        // Leaves that took the uberblock into some of their rings but not all.
        let mut partial = Vec::new();
        for t in &tops {
            for leaf in &t.leaves {
                if let Some(d) = &leaf.dev {
                    let offs = label_offsets(d.size());
                    let took = offs
                        .iter()
                        .filter(|&&off| d.write_at(&enc, off + UBER_RING_OFFSET + slot).is_ok())
                        .count();
                    written += took;
                    if took > 0 && took < offs.len() {
                        partial.push(leaf.guid);
                    }
                }
            }
        }
        if written == 0 {
            return Err(PoolError::Suspended("no device took the uberblock".into()));
        }
        if !partial.is_empty() {
            self.record_ring_misses(txg, &partial)?;
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
        // Frees of txg-1 (and older) become allocatable now that txg is durable,
        // unless a reader that started before them is still reading (`readhold`).
        let reusable = txg.saturating_sub(1).min(self.reusable_through());
        while !self.hold_frees.load(Relaxed) && s.defer.front().is_some_and(|(t, _)| *t <= reusable)
        {
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

    pub(crate) fn rewrite_label_headers(&self) -> Result<()> {
        let cfg = self.config.read().clone();
        self.write_label_headers(&cfg)?;
        self.refresh_spare_labels(&cfg);
        self.refresh_cache_labels(&cfg);
        Ok(())
    }

    /// Write `cfg` into the label headers of every present device.
    pub(crate) fn write_label_headers(&self, cfg: &PoolConfig) -> Result<()> {
        self.write_label_headers_where(cfg, |_| true)
    }

    /// Write `cfg` into the label headers of the present devices `to` accepts.
    pub(crate) fn write_label_headers_where(
        &self,
        cfg: &PoolConfig,
        to: impl Fn(&Leaf) -> bool,
    ) -> Result<()> {
        for t in self.vdevs.read().iter() {
            for l in t.leaves.iter().filter(|l| to(l)) {
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
        // Spares and cache devices too, so they can serve another pool without
        // -f (best effort).
        for p in self.spare_paths().into_iter().chain(self.cache_paths()) {
            if let Ok(d) = crate::device::FileDevice::open(&p) {
                for off in label_offsets(d.size()) {
                    let _ = d.write_at(&zeros, off);
                }
                let _ = d.flush();
            }
        }
        Ok(())
    }
}

/// Debug builds verify the pool after every commit; `CACHALOT_VERIFY=0` turns
/// that off (to measure its cost). Release builds never do.
pub fn verify_after_commit() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    cfg!(debug_assertions)
        && *ON.get_or_init(|| std::env::var("CACHALOT_VERIFY").map_or(true, |v| v != "0"))
}
