//! st_blocks without a walk: each object keeps the correction that turns its
//! synced tree's allocation into what it holds now, updated as records are
//! dirtied, replaced, truncated, dropped and synced, so `allocated_bytes` (every
//! getattr, FUSE and NFS) costs O(1) once the blocks it names were looked up.
//!
//! ```text
//! allocated_bytes = phys.used        the synced tree: every copy, after
//!                                    compression, indirect blocks included
//!   - tree size of each dirty block below the pending truncation
//!   + charge of each dirty block's newest record (its logical size in
//!     sectors: compressed only when synced; a punched record 0)
//!   - tree size of every data block at or past the pending truncation
//! ```
//!
//! The *dirty view* of an object: every record of its open layer, and each
//! record of its syncing layer below the open layer's truncation that the open
//! layer does not replace. `free_from` is the lowest pending truncation (the
//! open layer's or the syncing one's).
//!
//! Invariants of `AllocDelta`, with the layers and `phys` of its object:
//! - `charged` = Σ `charge` of the newest record of each block of the view.
//! - `counted` and `pending` partition the view's blocks below `free_from`:
//!   `counted` holds the block's allocated size in `phys` (looked up once),
//!   `pending` the blocks not looked up yet; `counted_sum` = Σ `counted`.
//! - `truncated`, when known, = the allocated size of `phys`'s data blocks at
//!   or past `free_from`.
//!
//! Within one `phys`, `free_from` only goes down and a block below it leaves
//! the view only when the object's records are all dropped (delete), so each
//! block is looked up at most once per sync. A new `phys` (the end of a sync)
//! or a freeze over a syncing layer a failed sync left rebuilds the delta from
//! the layers: O(dirty records), next to the sync's own work. The walk it
//! replaced is kept as the tests' oracle (`allocated_bytes_by_walk`).

use super::{ObjState, ObjectSet, Result};
use crate::dnode::{DnodePhys, MIN_BLOCK};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The allocated-bytes correction of one object (see the module invariants).
#[derive(Default)]
pub(super) struct AllocDelta {
    charged: u64,
    counted: BTreeMap<u64, u64>,
    counted_sum: u64,
    pending: BTreeSet<u64>,
    truncated: Option<u64>,
}

/// What a dirty record of `len` bytes adds before it is synced.
fn charge(len: usize) -> u64 {
    (len as u64).next_multiple_of(MIN_BLOCK as u64)
}

impl AllocDelta {
    /// Block `b` was looked up in `phys`: count it if it is still waiting.
    fn resolve(&mut self, b: u64, asize: u64) {
        if self.pending.remove(&b) {
            self.counted.insert(b, asize);
            self.counted_sum += asize;
        }
    }

    /// Blocks at or past `from` stop counting the tree (a lower truncation).
    fn cut_at(&mut self, from: u64) {
        let gone = self.counted.split_off(&from);
        self.counted_sum -= gone.values().sum::<u64>();
        self.pending.split_off(&from);
        self.truncated = None;
    }
}

impl ObjState {
    fn open_free_from(&self) -> u64 {
        self.open.free_from.unwrap_or(u64::MAX)
    }

    /// The lowest pending truncation: tree blocks at or past it are gone.
    pub(super) fn pending_free_from(&self) -> u64 {
        let syncing = self.syncing.as_deref().and_then(|sy| sy.free_from);
        self.open_free_from().min(syncing.unwrap_or(u64::MAX))
    }

    /// The length of block `b`'s newest in-memory record, None if `b` is not in
    /// the dirty view.
    fn dirty_len(&self, b: u64) -> Option<usize> {
        if let Some(r) = self.open.records.get(&b) {
            return Some(r.len());
        }
        self.syncing
            .as_deref()
            .filter(|_| b < self.open_free_from())
            .and_then(|sy| sy.records.get(&b))
            .map(|r| r.len())
    }

    /// Each block of the dirty view once.
    fn dirty_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        let open = &self.open;
        let from_syncing = self
            .syncing
            .as_deref()
            .into_iter()
            .flat_map(|sy| sy.records.range(..self.open_free_from()))
            .map(|(b, _)| *b)
            .filter(move |b| !open.records.contains_key(b));
        open.records.keys().copied().chain(from_syncing)
    }

    /// Make `rec` block `b`'s record in the open layer. Returns the length of
    /// the open record it replaced.
    pub(super) fn put_open(&mut self, b: u64, rec: Arc<[u8]>) -> Option<usize> {
        let before = self.dirty_len(b);
        let free_from = self.pending_free_from();
        let len = rec.len();
        let replaced = self.open.records.insert(b, rec).map(|r| r.len());
        let a = &mut self.alloc;
        match before {
            Some(l) => a.charged -= charge(l),
            None if b < free_from => {
                a.pending.insert(b);
            }
            None => {}
        }
        a.charged += charge(len);
        replaced
    }

    /// Drop the open records from block `first_gone` on and truncate there.
    /// Returns the bytes dropped from the open layer.
    pub(super) fn truncate_records(&mut self, first_gone: u64) -> u64 {
        let (old_open_ff, old_free_from) = (self.open_free_from(), self.pending_free_from());
        let a = &mut self.alloc;
        // Syncing records the lower truncation hides leave the view, but for
        // those an open record replaces (dropped below).
        if let Some(sy) = self.syncing.as_deref().filter(|_| first_gone < old_open_ff) {
            for (b, r) in sy.records.range(first_gone..old_open_ff) {
                if !self.open.records.contains_key(b) {
                    a.charged -= charge(r.len());
                }
            }
        }
        let gone = self.open.records.split_off(&first_gone);
        let mut dropped = 0;
        for r in gone.values() {
            a.charged -= charge(r.len());
            dropped += r.len() as u64;
        }
        self.open.free_from = Some(old_open_ff.min(first_gone));
        let free_from = self.pending_free_from();
        if free_from < old_free_from {
            self.alloc.cut_at(free_from);
        }
        dropped
    }

    /// Drop every record (a delete, a replayed creation, a block size change by
    /// receive): the object reads as holes until written. Returns the bytes
    /// dropped from the open layer.
    pub(super) fn drop_records(&mut self) -> u64 {
        let dropped = self.open.records.values().map(|r| r.len() as u64).sum();
        self.open = super::Layer {
            records: BTreeMap::new(),
            free_from: Some(0),
        };
        // Nothing is in the view and nothing is below free_from.
        self.alloc = AllocDelta::default();
        dropped
    }

    /// Recompute the delta from the layers, every lookup to be done again (the
    /// tree changed, or the syncing layer was replaced).
    pub(super) fn rebuild_alloc(&mut self) {
        let free_from = self.pending_free_from();
        let mut a = AllocDelta::default();
        for b in self.dirty_blocks() {
            a.charged += charge(self.dirty_len(b).unwrap_or(0));
            if b < free_from {
                a.pending.insert(b);
            }
        }
        self.alloc = a;
    }

    /// `allocated_bytes` from the delta; every lookup must be done.
    fn allocated_now(&self) -> u64 {
        let a = &self.alloc;
        let used = self.phys.used as i128 - a.counted_sum as i128 + a.charged as i128
            - a.truncated.unwrap_or(0) as i128;
        used.max(0) as u64
    }

    /// The truncated size when no walk is needed: no pending truncation inside
    /// the tree.
    fn settle_truncated(&mut self) {
        if self.alloc.truncated.is_none()
            && (self.phys.root.is_hole() || self.pending_free_from() >= self.phys.capacity())
        {
            self.alloc.truncated = Some(0);
        }
    }
}

impl ObjectSet {
    /// Bytes allocated for object `id` as it reads now (st_blocks): the synced
    /// tree's allocation (`used`: every copy, after compression, indirect blocks
    /// included, as zfs counts it) corrected for what is not synced yet: a dirty
    /// record replaces the tree's block at its place and counts its logical size
    /// (it is compressed only when synced), a dirty hole counts nothing, and a
    /// pending truncation drops the tree's blocks past it. Exact after a sync; an
    /// estimate between syncs, as in zfs. O(1) but for the tree lookups of blocks
    /// dirtied since the last call (once per block per sync) and one walk of the
    /// tree past a new pending truncation (see the module invariants).
    pub fn allocated_bytes(&self, id: u64) -> Result<u64> {
        let (phys, free_from, pending, walk_truncated) = {
            let mut inner = self.inner.lock();
            let st = self.load(&mut inner, id)?;
            st.settle_truncated();
            if st.alloc.pending.is_empty() && st.alloc.truncated.is_some() {
                return Ok(st.allocated_now());
            }
            let pending: Vec<u64> = st.alloc.pending.iter().copied().collect();
            let walk = st.alloc.truncated.is_none();
            (st.phys.clone(), st.pending_free_from(), pending, walk)
        };
        // The tree is read without the lock; what a concurrent sync or
        // truncation made stale meanwhile is read again under it.
        let mut found = Vec::with_capacity(pending.len());
        for b in pending {
            found.push((b, self.lookup(&phys, b)?.asize_total()));
        }
        let truncated = match walk_truncated {
            true => Some(self.asize_from(&phys, free_from)?),
            false => None,
        };
        let mut inner = self.inner.lock();
        let st = self.load(&mut inner, id)?;
        if st.phys == phys {
            for (b, asize) in found {
                st.alloc.resolve(b, asize);
            }
            if st.pending_free_from() == free_from && st.alloc.truncated.is_none() {
                st.alloc.truncated = truncated;
            }
        }
        while let Some(b) = st.alloc.pending.first().copied() {
            let asize = self.lookup(&st.phys, b)?.asize_total();
            st.alloc.resolve(b, asize);
        }
        st.settle_truncated();
        if st.alloc.truncated.is_none() {
            st.alloc.truncated = Some(self.asize_from(&st.phys, st.pending_free_from())?);
        }
        Ok(st.allocated_now())
    }

    /// Allocated size of the committed data blocks of `phys` from block `from` on
    /// (holes skipped a subtree at a time).
    fn asize_from(&self, phys: &DnodePhys, from: u64) -> Result<u64> {
        let cap = phys.capacity();
        let mut total = 0u64;
        let mut b = from;
        while b < cap && !phys.root.is_hole() {
            let (bp, run) = self.lookup_run(phys, b)?;
            total += bp.asize_total();
            b = b.saturating_add(run.max(1));
        }
        Ok(total)
    }

    /// The test oracle: `allocated_bytes` by walking every dirty block and the
    /// tree past the pending truncation, as it was computed before the delta.
    #[cfg(test)]
    pub(super) fn allocated_bytes_by_walk(&self, id: u64) -> Result<u64> {
        let mut inner = self.inner.lock();
        let st = self.load(&mut inner, id)?;
        let free_from = st.pending_free_from();
        let mut used = st.phys.used as i128;
        for b in st.dirty_blocks() {
            if b < free_from {
                used -= self.lookup(&st.phys, b)?.asize_total() as i128;
            }
            used += charge(st.dirty_len(b).unwrap_or(0)) as i128;
        }
        used -= self.asize_from(&st.phys, free_from)? as i128;
        Ok(used.max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::BlockCache;
    use crate::objset::ObjsetProps;
    use cachalot_pool::{BlockDevice, Compression, Pool, SimDevice};

    const REC: u64 = 4096;
    /// Objects span up to this many records, so writes, truncations and punches
    /// keep meeting each other's blocks.
    const SPAN: u64 = 40;

    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    /// Incompressible, all zeros (a hole once synced with compression on), or
    /// compressible bytes.
    fn bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
        match rng.below(3) {
            0 => (0..len).map(|_| rng.below(256) as u8).collect(),
            1 => vec![0; len],
            _ => (0..len).map(|i| (i / 64) as u8).collect(),
        }
    }

    /// An object and the bytes it must read.
    type Obj = (u64, Vec<u8>);

    /// One random change to one of `objs`, applied to its model too; says what
    /// it did.
    fn change(os: &ObjectSet, objs: &mut [Obj], rng: &mut Rng) -> String {
        let slot = rng.below(objs.len() as u64) as usize;
        let (id, model) = &mut objs[slot];
        let id = *id;
        let at = |rng: &mut Rng| match rng.below(2) {
            0 => rng.below(SPAN) * REC,
            _ => rng.below(SPAN * REC),
        };
        match rng.below(100) {
            0..55 => {
                let (off, len) = (at(rng), 1 + rng.below(3 * REC) as usize);
                let data = bytes(rng, len);
                os.write(id, off, &data).unwrap();
                let off = off as usize;
                model.resize(model.len().max(off + len), 0);
                model[off..off + len].copy_from_slice(&data);
                format!("write {id} {off}+{len}")
            }
            55..75 => {
                let size = at(rng);
                os.truncate(id, size).unwrap();
                model.resize(size as usize, 0);
                format!("truncate {id} to {size}")
            }
            75..92 => {
                let (off, len) = (at(rng), rng.below(8 * REC));
                os.punch(id, off, len).unwrap();
                let end = ((off + len) as usize).min(model.len());
                if let Some(r) = model.get_mut(off as usize..end) {
                    r.fill(0);
                }
                format!("punch {id} {off}+{len}")
            }
            92..96 => {
                os.delete_object(id).unwrap();
                objs[slot] = (os.create_object(19).unwrap(), Vec::new());
                format!("delete {id}, create {}", objs[slot].0)
            }
            _ => {
                let mut p = os.props();
                p.compression = match p.compression {
                    Compression::Off => Compression::Lz4,
                    _ => Compression::Off,
                };
                os.set_props(p);
                format!("compression {:?}", p.compression)
            }
        }
    }

    /// Each object reads as its model, and its kept allocated bytes equal the
    /// walk's, on the first call (which looks up the blocks dirtied since) and
    /// on the next (the O(1) path).
    fn check(os: &ObjectSet, objs: &[Obj], what: &str) {
        for (id, model) in objs {
            assert_eq!(os.info(*id).unwrap().size, model.len() as u64, "{what}");
            let data = os.read(*id, 0, model.len()).unwrap();
            assert!(
                data == *model,
                "after {what}: object {id} reads other bytes"
            );
            let kept = os.allocated_bytes(*id).unwrap();
            let walked = os.allocated_bytes_by_walk(*id).unwrap();
            assert_eq!(kept, walked, "after {what}: object {id}");
            assert_eq!(
                os.allocated_bytes(*id).unwrap(),
                walked,
                "again after {what}"
            );
        }
    }

    /// An object set and its live objects; snapshots are opened as new heads
    /// (as a clone or rollback does), so a head may start from a synced tree.
    struct Head {
        os: ObjectSet,
        objs: Vec<Obj>,
    }

    /// Random writes (whole and partial records, the latter changed in place
    /// when nothing else holds them), truncations, punches, deletions and
    /// compression changes on several objects, with syncs (and changes made
    /// while a sync runs, from its free callback, so over a syncing layer) and
    /// snapshots opened as heads: after every step each object reads as its
    /// model and its kept allocated bytes equal the walk's.
    #[test]
    fn kept_allocated_bytes_equal_the_walk_after_every_step() {
        let dev: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 512 << 20));
        let pool = Arc::new(Pool::create_on_devices("t", vec![dev], false, 12).unwrap());
        let cache = Arc::new(BlockCache::new(pool, 64 << 20));
        let props = ObjsetProps {
            recordsize: REC as u32,
            ..ObjsetProps::default()
        };
        let mut rng = Rng(0x5eed_0fa1_10c0);
        let mut txg = 1;
        let os = ObjectSet::create(cache.clone(), props, txg);
        let objs = (0..3)
            .map(|_| (os.create_object(19).unwrap(), Vec::new()))
            .collect();
        let mut heads = vec![Head { os, objs }];
        let mut syncs_with_changes = 0;
        for step in 0..4000 {
            let h = rng.below(heads.len() as u64) as usize;
            let Head { os, objs } = &mut heads[h];
            match rng.below(100) {
                0..88 => {
                    let what = change(os, objs, &mut rng);
                    check(os, objs, &format!("step {step}: {what}"));
                }
                r => {
                    // What the synced tree must hold: the objects as frozen,
                    // whatever changes during the sync.
                    let frozen = objs.clone();
                    txg += 1;
                    let mut during = 0;
                    let root = os
                        .sync(txg, &mut |_| {
                            if during < 4 && rng.below(3) == 0 {
                                during += 1;
                                let what = change(os, objs, &mut rng);
                                check(os, objs, &format!("step {step}: during sync: {what}"));
                            }
                        })
                        .unwrap();
                    syncs_with_changes += (during > 0) as u32;
                    check(os, objs, &format!("step {step}: sync"));
                    if r < 97 {
                        continue;
                    }
                    let snap = ObjectSet::open_fresh_log(cache.clone(), os.props(), &root, txg + 1);
                    let (os, objs) = (snap.unwrap(), frozen);
                    check(&os, &objs, &format!("step {step}: snapshot opened"));
                    if heads.len() < 4 {
                        heads.push(Head { os, objs });
                    } else {
                        heads[h] = Head { os, objs };
                    }
                }
            }
        }
        assert!(
            syncs_with_changes > 20,
            "{syncs_with_changes} syncs saw changes"
        );
    }
}
