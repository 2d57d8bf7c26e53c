//! The sync of a transaction group: every dirty object's open layer is frozen
//! into its syncing layer, its records are written, its tree rebuilt, and the
//! changed dnodes and a new root block written.
//!
//! Invariants:
//! - Only `sync` changes a tree (`phys.root`, `nlevels`, `used`) and the object set's
//!   meta-dnode; one sync runs at a time (`sync_lock`).
//! - Blocks replaced by a sync are handed to the free callback; the pool keeps them
//!   unallocated until the next commit, so a reader holding the old tree still reads
//!   valid bytes.

use super::accounting::{add_acct, add_accts, encode_acct, sub_acct};
use super::prewrite::Taken;
use super::{decode_ptrs, resized, Accounting, Layer, ObjectSet, Result, ZIL_HEADER_OFFSET};
use crate::cache::CachePolicy;
use crate::dnode::*;
use crate::zil::ZilHeader;
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::{BlkPtr, BlockType, Compression, WriteOpts};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The callback that receives every block a sync releases.
pub type FreeFn<'a> = &'a mut dyn FnMut(&BlkPtr);

struct SyncCtx<'a> {
    txg: u64,
    free: FreeFn<'a>,
    acct_add: Accounting,
    acct_sub: Accounting,
    compression: Compression,
}

impl SyncCtx<'_> {
    fn born(&mut self, bp: &BlkPtr) {
        add_acct(&mut self.acct_add, bp);
    }
    fn kill(&mut self, bp: &BlkPtr) {
        if bp.is_hole() {
            return;
        }
        add_acct(&mut self.acct_sub, bp);
        (self.free)(bp);
    }
}

/// An object's state as the freeze of a sync took it (phase 1).
struct Work {
    id: u64,
    layer: Arc<Layer>,
    phys: DnodePhys,
    otype: u8,
    blksz: u32,
    size: u64,
    gen: u64,
    bonus: [u8; BONUS_SIZE],
    deleted: bool,
}

/// What the freeze took: the objects to write, the meta-dnode and root they
/// change, and the log header the new root records.
struct Frozen {
    work: Vec<Work>,
    meta: DnodePhys,
    old_root: BlkPtr,
    zil_header: ZilHeader,
}

impl ObjectSet {
    /// Write out everything changed since the last sync as part of `txg`, handing
    /// every replaced block to `free`. Returns the new root pointer.
    pub fn sync(&self, txg: u64, free: FreeFn<'_>) -> Result<BlkPtr> {
        let _one = self.sync_lock.lock();
        let props = self.props();
        // Phase 1: freeze the open layers.
        let Some(Frozen {
            mut work,
            mut meta,
            old_root,
            zil_header,
        }) = self.freeze(txg)
        else {
            // Nothing to write: the root stays (only a sync changes it, and
            // this one holds `sync_lock`). Orphans are freed all the same: a
            // log commit may have made some since the last sync with work (a
            // prewrite that lost the race with the freeze, or that ran out of
            // space halfway), and when no sync with work follows (the writers
            // stopped on a full pool) they stayed allocated in no tree, for
            // good after an export.
            self.free_unlinked(self.take_overrides(txg));
            return Ok(self.root_bp());
        };
        work.sort_by_key(|w| w.id);
        // Blocks written early for the intent log: linked below where the frozen
        // record is the one written, freed otherwise (see `prewrite`).
        let mut taken = self.take_overrides(txg);
        let mut ctx = SyncCtx {
            txg,
            free,
            acct_add: Accounting::default(),
            acct_sub: Accounting::default(),
            compression: props.compression,
        };
        // Phase 2 and 3: write records, then rebuild each tree.
        let mut new_phys: Vec<(u64, DnodePhys)> = Vec::new();
        for w in &work {
            let phys = self.sync_object(w, &mut taken, &mut ctx, props.cache)?;
            new_phys.push((w.id, phys));
        }
        self.free_unlinked(taken);
        self.write_dnodes(&mut meta, &new_phys, &mut ctx)?;
        let (root, acct) = self.write_root(&meta, &old_root, &zil_header, &mut ctx)?;
        self.install(meta, root, zil_header, acct, new_phys);
        Ok(root)
    }

    /// Early blocks a sync did not link, and orphans: in no tree, freed directly.
    fn free_unlinked(&self, taken: Taken) {
        let early = taken.map.into_values().map(|(_, bp)| bp);
        for bp in early.chain(taken.free) {
            self.cache.pool.free_block(&bp);
        }
    }

    /// Phase 1, under the gate (no operation holds the txg): every dirty object's
    /// open layer becomes its syncing layer, and the open txg moves to `txg + 1`.
    /// `None` when nothing changed and the root need not be rewritten.
    fn freeze(&self, txg: u64) -> Option<Frozen> {
        let _frozen = self.gate.write();
        let mut inner = self.inner.lock();
        let mut work = Vec::new();
        for (id, st) in inner.objects.iter_mut() {
            if !st.dirty {
                continue;
            }
            let layer = Arc::new(std::mem::take(&mut st.open));
            // The view is unchanged (the open records, now syncing) unless a
            // failed sync left a syncing layer, which this one replaces.
            if st.syncing.replace(layer.clone()).is_some() {
                st.rebuild_alloc();
            }
            st.dirty = false;
            if st.deleted {
                st.syncing_deleted = true;
            }
            work.push(Work {
                id: *id,
                layer,
                phys: st.phys.clone(),
                otype: st.otype,
                blksz: st.blksz,
                size: st.size,
                gen: st.gen,
                bonus: st.bonus,
                deleted: st.deleted,
            });
        }
        inner.syncing_bytes = inner.dirty_bytes;
        inner.dirty_bytes = 0;
        inner.open_txg = txg + 1;
        let pool = self.cache.pool.clone();
        let zil_header = self.zil.sync_header(txg, &mut |d| pool.free_log_block(d));
        if work.is_empty()
            && !inner.root_bp.is_hole()
            && zil_header == inner.zil_header
            && !inner.force_root
        {
            inner.syncing_bytes = 0;
            return None;
        }
        Some(Frozen {
            work,
            meta: inner.meta.clone(),
            old_root: inner.root_bp,
            zil_header,
        })
    }

    /// Phases 2 and 3 for one object: write its frozen records, then rebuild its
    /// tree (freeing what a truncation or a block size change dropped). Returns
    /// its new dnode.
    fn sync_object(
        &self,
        w: &Work,
        taken: &mut Taken,
        ctx: &mut SyncCtx,
        policy: CachePolicy,
    ) -> Result<DnodePhys> {
        let mut phys = w.phys.clone();
        let before = ctx.acct_add.used as i64 - ctx.acct_sub.used as i64;
        if w.deleted {
            self.free_subtree(&phys.root, phys.nlevels - 1, ctx)?;
            return Ok(DnodePhys::empty());
        }
        let mut changes = Vec::with_capacity(w.layer.records.len());
        for (blkid, rec) in &w.layer.records {
            let bp = self.sync_record(w, *blkid, rec, taken, ctx, policy)?;
            changes.push((*blkid, bp));
        }
        // A block size change rewrites block 0; blocks of the old size must go.
        let free_from = match (
            w.layer.free_from,
            phys.blksz != w.blksz && !phys.root.is_hole(),
        ) {
            (f, true) => Some(f.unwrap_or(0).min(1)),
            (f, false) => f,
        };
        if let Some(from) = free_from {
            phys.root = self.free_range(&phys.root, phys.nlevels - 1, 0, from, ctx)?;
            if phys.root.is_hole() {
                phys.nlevels = 1;
            }
        }
        self.apply_changes(&mut phys, &changes, ctx)?;
        let after = ctx.acct_add.used as i64 - ctx.acct_sub.used as i64;
        phys.used = (phys.used as i64 + after - before).max(0) as u64;
        phys.otype = w.otype;
        phys.blksz = w.blksz;
        phys.size = w.size;
        phys.gen = w.gen;
        phys.bonus = w.bonus;
        Ok(phys)
    }

    /// Phase 2 for one record: the block pointer it syncs to. The block written
    /// early for the log when that was this very record, a hole for a punched or
    /// (compression on) all-zero record, else a new block.
    fn sync_record(
        &self,
        w: &Work,
        blkid: u64,
        rec: &Arc<[u8]>,
        taken: &mut Taken,
        ctx: &mut SyncCtx,
        policy: CachePolicy,
    ) -> Result<BlkPtr> {
        let txg = ctx.txg;
        let mut rec = rec.clone();
        // An empty record is a punched hole (see `punch`).
        let punched = rec.is_empty();
        if rec.len() != w.blksz as usize {
            rec = resized(&rec, w.blksz);
        }
        let early = taken.map.remove(&(w.id, blkid)).and_then(|(r, bp)| {
            let same = Arc::ptr_eq(&r, &rec) && bp.birth_txg == txg;
            if !same {
                taken.free.push(bp);
            }
            same.then_some(bp)
        });
        let bp = if let Some(bp) = early {
            ctx.born(&bp);
            self.cache.cache_written(&bp, rec, policy);
            bp
        } else if punched || (ctx.compression != Compression::Off && rec.iter().all(|b| *b == 0)) {
            BlkPtr::HOLE
        } else {
            let compression = self.incompressible.choose(ctx.compression);
            let bp = self.cache.pool.write_block(
                txg,
                &rec,
                WriteOpts {
                    compression,
                    block_type: BlockType::Data,
                    level: 0,
                    fill: 1,
                },
            )?;
            self.incompressible.outcome(compression, &bp);
            ctx.born(&bp);
            self.cache.cache_written(&bp, rec, policy);
            bp
        };
        Ok(bp)
    }

    /// Write the changed dnodes into the meta-dnode.
    fn write_dnodes(
        &self,
        meta: &mut DnodePhys,
        new_phys: &[(u64, DnodePhys)],
        ctx: &mut SyncCtx,
    ) -> Result<()> {
        let txg = ctx.txg;
        let mut by_block: BTreeMap<u64, Vec<(u64, &DnodePhys)>> = BTreeMap::new();
        for (id, p) in new_phys {
            by_block
                .entry(id / DNODES_PER_BLOCK)
                .or_default()
                .push((*id, p));
        }
        let mut meta_changes = Vec::new();
        for (blkid, items) in by_block {
            let mut block = match self.read_tree_record(meta, blkid, self.dnode_policy())? {
                Some(b) => b.to_vec(),
                None => vec![0u8; DNODE_BLOCK_SIZE as usize],
            };
            block.resize(DNODE_BLOCK_SIZE as usize, 0);
            for (id, p) in items {
                let slot = (id % DNODES_PER_BLOCK) as usize * DNODE_SIZE;
                p.encode(&mut block[slot..slot + DNODE_SIZE]);
            }
            let bp = if block.iter().all(|b| *b == 0) {
                BlkPtr::HOLE
            } else {
                let bp = self.cache.pool.write_block(
                    txg,
                    &block,
                    WriteOpts {
                        compression: Compression::Lz4,
                        block_type: BlockType::Dnode,
                        level: 0,
                        fill: 1,
                    },
                )?;
                ctx.born(&bp);
                bp
            };
            meta_changes.push((blkid, bp));
            meta.size = meta.size.max((blkid + 1) * DNODE_BLOCK_SIZE as u64);
        }
        self.apply_changes(meta, &meta_changes, ctx)
    }

    /// The root block: header with accounting, then the meta-dnode. Returns it
    /// and the object set's accounting with this sync's births and frees.
    fn write_root(
        &self,
        meta: &DnodePhys,
        old_root: &BlkPtr,
        zil_header: &ZilHeader,
        ctx: &mut SyncCtx,
    ) -> Result<(BlkPtr, Accounting)> {
        let txg = ctx.txg;
        let mut acct = self.inner.lock().acct;
        ctx.kill(old_root);
        // The root block's own cost is counted after it is written.
        let mut block = encode_objset(meta);
        let pending = sub_acct(add_accts(acct, ctx.acct_add), ctx.acct_sub);
        encode_acct(&mut block, &pending);
        zil_header.encode(&mut block[ZIL_HEADER_OFFSET..ZIL_HEADER_OFFSET + ZilHeader::SIZE]);
        let root = self.cache.pool.write_block(
            txg,
            &block,
            WriteOpts {
                compression: Compression::Lz4,
                block_type: BlockType::Objset,
                level: 0,
                fill: 1,
            },
        )?;
        ctx.born(&root);
        acct = sub_acct(add_accts(acct, ctx.acct_add), ctx.acct_sub);
        Ok((root, acct))
    }

    /// The sync is written: its trees become the objects' synced state, their
    /// syncing layers go, and objects deleted by it (and not since) are forgotten.
    fn install(
        &self,
        meta: DnodePhys,
        root: BlkPtr,
        zil_header: ZilHeader,
        acct: Accounting,
        new_phys: Vec<(u64, DnodePhys)>,
    ) {
        // The root block records accounting without itself; add it back on open.
        let mut inner = self.inner.lock();
        inner.meta = meta;
        inner.root_bp = root;
        inner.zil_header = zil_header;
        inner.force_root = false;
        inner.acct = acct;
        inner.syncing_bytes = 0;
        for (id, p) in new_phys {
            let remove = {
                let st = inner.objects.get_mut(&id).unwrap();
                st.phys = p;
                st.syncing = None;
                st.rebuild_alloc();
                let gone = st.syncing_deleted && st.deleted && !st.dirty;
                st.syncing_deleted = false;
                gone
            };
            if remove {
                inner.objects.remove(&id);
            }
        }
    }

    /// Replace level-0 pointers (sorted by blkid) in a tree, growing it as needed.
    fn apply_changes(
        &self,
        phys: &mut DnodePhys,
        changes: &[(u64, BlkPtr)],
        ctx: &mut SyncCtx,
    ) -> Result<()> {
        let Some(&(max_blkid, _)) = changes.last() else {
            return Ok(());
        };
        while max_blkid >= phys.capacity() {
            if !phys.root.is_hole() {
                let mut ptrs = vec![BlkPtr::HOLE; PTRS_PER_INDIRECT as usize];
                ptrs[0] = phys.root;
                phys.root = self.write_indirect(&ptrs, phys.nlevels, ctx)?;
            }
            phys.nlevels += 1;
        }
        phys.root = self.rewrite(&phys.root, phys.nlevels - 1, 0, changes, ctx)?;
        Ok(())
    }

    fn write_indirect(&self, ptrs: &[BlkPtr], level: u8, ctx: &mut SyncCtx) -> Result<BlkPtr> {
        let fill: u64 = ptrs.iter().map(|p| p.fill).sum();
        if fill == 0 && ptrs.iter().all(|p| p.is_hole()) {
            return Ok(BlkPtr::HOLE);
        }
        let mut block = vec![0u8; INDIRECT_SIZE];
        for (i, p) in ptrs.iter().enumerate() {
            p.encode(&mut block[i * BLKPTR_SIZE..(i + 1) * BLKPTR_SIZE]);
        }
        let bp = self.cache.pool.write_block(
            ctx.txg,
            &block,
            WriteOpts {
                compression: Compression::Lz4,
                block_type: BlockType::Indirect,
                level,
                fill,
            },
        )?;
        ctx.born(&bp);
        Ok(bp)
    }

    fn read_ptrs(&self, bp: &BlkPtr) -> Result<Vec<BlkPtr>> {
        if bp.is_hole() {
            return Ok(vec![BlkPtr::HOLE; PTRS_PER_INDIRECT as usize]);
        }
        let block = self.cache.read(bp, self.props().cache)?;
        decode_ptrs(&block, bp)
    }

    fn rewrite(
        &self,
        bp: &BlkPtr,
        level: u8,
        first: u64,
        changes: &[(u64, BlkPtr)],
        ctx: &mut SyncCtx,
    ) -> Result<BlkPtr> {
        if level == 0 {
            ctx.kill(bp);
            self.cache.forget(bp);
            return Ok(changes[changes.len() - 1].1);
        }
        let mut ptrs = self.read_ptrs(bp)?;
        let child_span = span(level - 1);
        let mut i = 0;
        while i < changes.len() {
            let idx = (changes[i].0 - first) / child_span;
            let mut j = i;
            while j < changes.len() && (changes[j].0 - first) / child_span == idx {
                j += 1;
            }
            let child_first = first + idx * child_span;
            ptrs[idx as usize] = self.rewrite(
                &ptrs[idx as usize],
                level - 1,
                child_first,
                &changes[i..j],
                ctx,
            )?;
            i = j;
        }
        ctx.kill(bp);
        self.cache.forget(bp);
        self.write_indirect(&ptrs, level, ctx)
    }

    /// Free every block at or past level-0 index `from` under `bp`.
    fn free_range(
        &self,
        bp: &BlkPtr,
        level: u8,
        first: u64,
        from: u64,
        ctx: &mut SyncCtx,
    ) -> Result<BlkPtr> {
        if bp.is_hole() || first + span(level) <= from {
            return Ok(*bp);
        }
        if first >= from {
            self.free_subtree(bp, level, ctx)?;
            return Ok(BlkPtr::HOLE);
        }
        let mut ptrs = self.read_ptrs(bp)?;
        let child_span = span(level - 1);
        for (i, p) in ptrs.iter_mut().enumerate() {
            *p = self.free_range(p, level - 1, first + i as u64 * child_span, from, ctx)?;
        }
        ctx.kill(bp);
        self.cache.forget(bp);
        self.write_indirect(&ptrs, level, ctx)
    }

    fn free_subtree(&self, bp: &BlkPtr, level: u8, ctx: &mut SyncCtx) -> Result<()> {
        if bp.is_hole() {
            return Ok(());
        }
        if level > 0 {
            for p in self.read_ptrs(bp)? {
                self.free_subtree(&p, level - 1, ctx)?;
            }
        }
        ctx.kill(bp);
        self.cache.forget(bp);
        Ok(())
    }
}
