//! Writes logged by reference (ZFS's WR_INDIRECT, `dmu_sync`): at an intent-log
//! commit, the full blocks a large write covers are written at their final place
//! and the log records their block pointers instead of the bytes; the sync of
//! their txg links those blocks into the tree instead of writing them again.
//!
//! Invariants:
//! - A block is prewritten only from the record of the *open* txg the write's
//!   itx belongs to, and carries that txg as its birth; the sync of that txg
//!   links it only if the layer it froze still holds the very same record
//!   (`Arc::ptr_eq`) at the block size it syncs, so a later change in the same
//!   txg makes the sync write the newer bytes.
//! - Every prewritten block is owned by exactly one of: the override table, the
//!   orphan list, the tree (once a sync linked it). A sync takes every override
//!   of its txg or older (and closes the table for them: a block registered late
//!   becomes an orphan) and frees what it does not link; orphans are freed by the
//!   next sync. Frees are deferred past the freeing commit, and a record of txg T
//!   is replayed only if T did not commit, so a logged block is intact whenever
//!   replay reads it.
//! - Replay claims a logged block, reads it (checksummed) and re-applies the bytes
//!   written as an ordinary write; the claimed block is then an orphan, freed by
//!   the commit that makes the replayed write part of the tree. The blocks of a
//!   group are all read before any of its records applies: a group whose block
//!   does not verify (its log flush never completed) is dropped whole and ends
//!   the log.

use super::ObjectSet;
use crate::zil::{Record, Resolved};
use cachalot_pool::blkptr::checksum;
use cachalot_pool::compress::decompress;
use cachalot_pool::{BlkPtr, BlockType, Compression, WriteOpts};
use std::collections::HashMap;
use std::sync::Arc;

/// A prewritten block: the record it was written from, and where it went.
type Early = HashMap<(u64, u64), (Arc<[u8]>, BlkPtr)>;

/// Blocks prewritten for the intent log, by (object, block id).
#[derive(Default)]
pub(super) struct Overrides {
    map: Early,
    /// Highest txg whose sync took the table: later registrations of that txg
    /// or older are orphans.
    closed: u64,
    orphans: Vec<BlkPtr>,
}

/// What a sync took from the table: blocks it may link, blocks to free.
pub(super) struct Taken {
    pub map: Early,
    pub free: Vec<BlkPtr>,
}

/// `Write` records of contiguous `pieces` from `off`.
fn writes(obj: u64, off: u64, pieces: Vec<Arc<[u8]>>) -> Vec<Record> {
    let mut pos = off;
    pieces
        .into_iter()
        .map(|data| {
            let at = pos;
            pos += data.len() as u64;
            Record::Write { obj, off: at, data }
        })
        .collect()
}

impl ObjectSet {
    /// The intent-log commit: lazy writes resolved, large writes by reference
    /// (see `Zil::commit`).
    pub fn zil_commit(
        &self,
        upto: (u64, u64),
    ) -> std::result::Result<crate::zil::CommitOutcome, cachalot_pool::PoolError> {
        self.zil.commit(upto, &|rec, txg, by_ref| {
            self.resolve_logged(rec, txg, by_ref)
        })
    }

    /// The records to log for a write (`Zil::commit`'s resolver). A write to
    /// be logged by reference whose txg closed is left to that txg's commit,
    /// never copied into log blocks (see `Zil`'s invariants).
    fn resolve_logged(&self, rec: &Record, txg: u64, by_ref: bool) -> Resolved {
        let logged = |recs: Option<Vec<Record>>| match recs {
            Some(recs) => Resolved::Log(recs),
            None if by_ref && txg < self.open_txg() => Resolved::InTxg,
            None => Resolved::AsIs,
        };
        match rec {
            Record::Write { obj, off, data } if by_ref => {
                let bytes = |a: u64, b: u64| {
                    if (a, b) == (*off, off + data.len() as u64) {
                        return Some(vec![data.clone()]);
                    }
                    Some(vec![data[(a - off) as usize..(b - off) as usize].into()])
                };
                logged(self.prewrite(*obj, *off, data.len() as u64, txg, &bytes))
            }
            // A small write: by reference only if its block is written already.
            Record::Write { obj, off, data } => {
                logged(self.written_behind(*obj, *off, data, txg).map(|bp| {
                    vec![Record::WriteRef {
                        obj: *obj,
                        off: *off,
                        len: data.len() as u64,
                        bp,
                    }]
                }))
            }
            Record::WriteLazy { obj, off, len } => {
                let read = |a: u64, b: u64| self.read_shared(*obj, a, b);
                if by_ref {
                    if let Some(v) = self.prewrite(*obj, *off, *len, txg, &read) {
                        return Resolved::Log(v);
                    }
                    if txg < self.open_txg() {
                        return Resolved::InTxg;
                    }
                }
                Resolved::Log(writes(
                    *obj,
                    *off,
                    read(*off, off + len).unwrap_or_default(),
                ))
            }
            _ => Resolved::AsIs,
        }
    }

    /// Where `data`, written at `off` of `obj` in txg `txg`, was written behind
    /// as one whole block: the override of its block holds that very record
    /// (`Arc::ptr_eq`: a later write in the txg replaced it otherwise), born in
    /// `txg`. A record that is one block is exactly `data` when the write was
    /// one whole block (`Payload::shared`), so its length is the block size.
    fn written_behind(&self, obj: u64, off: u64, data: &Arc<[u8]>, txg: u64) -> Option<BlkPtr> {
        let bs = data.len() as u64;
        if bs == 0 || !off.is_multiple_of(bs) {
            return None;
        }
        let o = self.overrides.lock();
        match o.map.get(&(obj, off / bs)) {
            Some((rec, bp)) if Arc::ptr_eq(rec, data) && bp.birth_txg == txg => Some(*bp),
            _ => None,
        }
    }

    /// Write in place the full blocks of a write of `[off, off + len)` to `obj`
    /// (txg `txg`) that the open txg still holds, and return the records to log
    /// for the write: a `WriteRef` per such block, `Write`s with `bytes` of the
    /// rest. `None`: log the write as it is (its txg is no longer open, no full
    /// block, or a block write failed; the bytes in the log are then the durable
    /// copy).
    pub fn prewrite(
        &self,
        obj: u64,
        off: u64,
        len: u64,
        txg: u64,
        bytes: &dyn Fn(u64, u64) -> Option<Vec<Arc<[u8]>>>,
    ) -> Option<Vec<Record>> {
        let end = off + len;
        let (bs, written) = self.prewrite_blocks(obj, off, len, txg)?;
        let mut out = Vec::with_capacity(written.len() + 2);
        let mut pos = off;
        for (b, bp) in written {
            let start = b * bs;
            if start > pos {
                out.extend(writes(obj, pos, bytes(pos, start)?));
            }
            out.push(Record::WriteRef {
                obj,
                off: start,
                len: bs,
                bp,
            });
            pos = start + bs;
        }
        if pos < end {
            out.extend(writes(obj, pos, bytes(pos, end)?));
        }
        Some(out)
    }

    /// Bytes `[a, b)` of `obj` as they read now (zeros past its end), in
    /// contiguous pieces: a whole record held in memory (the open or syncing
    /// txg's, which a streaming write's commit finds) is shared as it is, not
    /// copied; the rest is read. None if the object is gone.
    fn read_shared(&self, obj: u64, a: u64, b: u64) -> Option<Vec<Arc<[u8]>>> {
        let (bs, shared) = {
            let mut inner = self.inner.lock();
            let st = self.load(&mut inner, obj).ok()?;
            let bs = st.blksz as u64;
            let in_memory = |blk: u64| {
                // Within the object's size only: bytes past it read as zeros.
                let inside = (blk + 1) * bs <= st.size;
                st.in_memory(blk)
                    .flatten()
                    .filter(|r| inside && r.len() as u64 == bs)
                    .cloned()
            };
            let shared: Vec<(u64, Arc<[u8]>)> = (a.div_ceil(bs)..b / bs)
                .filter_map(|blk| Some((blk, in_memory(blk)?)))
                .collect();
            (bs, shared)
        };
        let read = |x: u64, y: u64| -> Option<Arc<[u8]>> {
            let mut v = self.read(obj, x, (y - x) as usize).ok()?;
            v.resize((y - x) as usize, 0);
            Some(v.into())
        };
        let mut out = Vec::with_capacity(shared.len() + 2);
        let mut pos = a;
        for (blk, rec) in shared {
            if blk * bs > pos {
                out.push(read(pos, blk * bs)?);
            }
            out.push(rec);
            pos = (blk + 1) * bs;
        }
        if pos < b {
            out.push(read(pos, b)?);
        }
        Some(out)
    }

    /// Write-behind of a large write (a volume's): its full blocks are written
    /// at their final place now, by the writer, instead of by the next log commit
    /// or txg sync, which find them in the override table and only link them
    /// (see `prewrite_blocks`). A block rewritten in the same txg is written
    /// again and the earlier copy freed by the sync, as with any prewrite.
    pub fn write_behind(&self, obj: u64, off: u64, len: u64, txg: u64) {
        self.prewrite_blocks(obj, off, len, txg);
    }

    /// The full blocks of `[off, off + len)` that the open txg `txg` holds,
    /// written at their final place and registered as overrides: `(block size,
    /// [(block id, pointer)])` in block order, `None` if there is none or a write
    /// failed. A block whose override already holds the very same record (a
    /// write-behind, or an earlier commit) is not written again.
    fn prewrite_blocks(
        &self,
        obj: u64,
        off: u64,
        len: u64,
        txg: u64,
    ) -> Option<(u64, Vec<(u64, BlkPtr)>)> {
        let end = off + len;
        let props = self.props();
        type Blocks = Vec<(u64, Arc<[u8]>)>;
        let (bs, blocks): (u64, Blocks) = {
            let inner = self.inner.lock();
            if inner.open_txg != txg {
                return None;
            }
            let st = inner.objects.get(&obj)?;
            let bs = st.blksz as u64;
            let zeros_are_holes = props.compression != Compression::Off;
            let blocks = (off.div_ceil(bs)..end / bs)
                .filter_map(|b| {
                    let r = st.open.records.get(&b)?;
                    // A punched record (empty) or a block the sync would store as
                    // a hole is cheaper logged as bytes.
                    let usable =
                        r.len() as u64 == bs && !(zeros_are_holes && r.iter().all(|x| *x == 0));
                    usable.then(|| (b, r.clone()))
                })
                .collect();
            (bs, blocks)
        };
        if blocks.is_empty() {
            return None;
        }
        // Blocks already written from these very records in this txg.
        let mut done: Vec<Option<BlkPtr>> = {
            let o = self.overrides.lock();
            blocks
                .iter()
                .map(|(b, r)| match o.map.get(&(obj, *b)) {
                    Some((old, bp)) if Arc::ptr_eq(old, r) && bp.birth_txg == txg => Some(*bp),
                    _ => None,
                })
                .collect()
        };
        let todo: Blocks = blocks
            .iter()
            .zip(&done)
            .filter(|(_, d)| d.is_none())
            .map(|(b, _)| b.clone())
            .collect();
        let written = self.write_blocks(txg, &todo, props.compression)?;
        {
            let mut o = self.overrides.lock();
            for ((b, r), bp) in todo.iter().zip(&written) {
                if txg > o.closed {
                    if let Some((_, old)) = o.map.insert((obj, *b), (r.clone(), *bp)) {
                        o.orphans.push(old);
                    }
                } else {
                    o.orphans.push(*bp);
                }
            }
        }
        let mut written = written.into_iter();
        for d in done.iter_mut().filter(|d| d.is_none()) {
            *d = written.next();
        }
        let out = blocks
            .iter()
            .zip(done)
            .map(|((b, _), bp)| Some((*b, bp?)))
            .collect::<Option<Vec<_>>>()?;
        Some((bs, out))
    }

    /// Checksum, compress and write `blocks` (born in `txg`). On an error the
    /// blocks already written become orphans and `None` is returned.
    fn write_blocks(
        &self,
        txg: u64,
        blocks: &[(u64, Arc<[u8]>)],
        compression: Compression,
    ) -> Option<Vec<BlkPtr>> {
        let mut out = Vec::with_capacity(blocks.len());
        for (_, r) in blocks {
            let c = self.incompressible.choose(compression);
            let opts = WriteOpts {
                compression: c,
                block_type: BlockType::Data,
                level: 0,
                fill: 1,
            };
            match self.cache.pool.write_block(txg, r, opts) {
                Ok(bp) => {
                    self.incompressible.outcome(c, &bp);
                    out.push(bp);
                }
                Err(_) => {
                    self.overrides.lock().orphans.extend(out);
                    return None;
                }
            }
        }
        Some(out)
    }

    /// Sync of `txg`: take the overrides it may link, and what must be freed.
    pub(super) fn take_overrides(&self, txg: u64) -> Taken {
        let mut o = self.overrides.lock();
        o.closed = o.closed.max(txg);
        let (mine, later): (HashMap<_, _>, HashMap<_, _>) = std::mem::take(&mut o.map)
            .into_iter()
            .partition(|(_, (_, bp))| bp.birth_txg <= txg);
        o.map = later;
        Taken {
            map: mine,
            free: std::mem::take(&mut o.orphans),
        }
    }

    /// Replay of a write by reference: claim the block (freed by the next sync,
    /// after the replayed write is in the tree) and read it. `Ok(None)`: it does
    /// not verify, so the log flush that would have made its record durable never
    /// completed (the block and the log block are flushed together): the log ends
    /// there, as at an unwritten log block, and no checksum error is counted.
    /// `Err`: the block overlaps live data (damage, reported).
    pub(crate) fn fetch_write_ref(
        &self,
        bp: &BlkPtr,
    ) -> std::result::Result<Option<Vec<u8>>, String> {
        let pool = &self.cache.pool;
        for d in bp.dva_iter() {
            if !pool.claim_log_block(d) {
                return Err(format!(
                    "intent log write by reference at vdev {} offset {:#x} overlaps live data: log ends there",
                    d.vdev, d.offset
                ));
            }
        }
        self.overrides.lock().orphans.push(*bp);
        let psize = bp.psize as usize;
        let verify = |b: &[u8]| b.len() >= psize && checksum(&b[..psize]) == bp.checksum;
        let Some(phys) = bp
            .dva_iter()
            .find_map(|d| pool.read_log_block(d, &verify).ok())
        else {
            return Ok(None);
        };
        Ok(decompress(bp.compression, &phys[..psize], bp.lsize as usize).ok())
    }
}

#[cfg(test)]
mod tests {
    use crate::objset::{ObjectSet, ObjsetProps};
    use crate::zil::{CommitOutcome, Record};
    use crate::BlockCache;
    use cachalot_pool::{BlkPtr, BlockDevice, Pool, SimDevice};
    use std::sync::Arc;

    /// A 1 MiB write logged lazily (by reference) in txg 2, whose txg closed
    /// (its sync wrote the MiB) before the log commit: the commit allocates
    /// nothing and asks for the txg's commit, which makes the write durable.
    /// (It copied the MiB into log blocks, beside the txg's own copy: on a
    /// nearly full pool the next txg ran out of space.)
    #[test]
    fn a_write_whose_txg_closed_is_left_to_that_txg_not_copied_into_the_log() {
        let dev: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 64 << 20));
        let pool = Arc::new(Pool::create_on_devices("t", vec![dev], false, 12).unwrap());
        let cache = Arc::new(BlockCache::new(pool.clone(), 64 << 20));
        let os = ObjectSet::create(cache, ObjsetProps::default(), 1);
        let sync = |txg| {
            os.sync(txg, &mut |bp: &BlkPtr| pool.free_block(bp))
                .unwrap()
        };
        let commit = |txg, root| {
            pool.commit(txg, root).unwrap();
            os.txg_committed(txg);
        };
        let obj = os.create_object(19).unwrap();
        os.zil().log(1, Record::Truncate { obj, size: 0 });
        let first = os.zil_commit(os.zil().tail()).unwrap();
        assert_eq!(first, CommitOutcome::NeedTxgCommit, "the chain's header");
        commit(1, sync(1));
        let len = 1u64 << 20;
        let data: Vec<u8> = (0..len).map(|i| ((i * 7919) >> 3) as u8).collect();
        os.write(obj, 0, &data).unwrap();
        os.zil().log(2, Record::WriteLazy { obj, off: 0, len });
        let root = sync(2);
        let free = pool.space_totals().1;
        let late = os.zil_commit(os.zil().tail()).unwrap();
        assert_eq!(
            (late, pool.space_totals().1),
            (CommitOutcome::NeedTxgCommit, free),
            "a log commit after its txg closed: wait for the txg, allocate nothing"
        );
        commit(2, root);
        assert_eq!(
            os.zil_commit(os.zil().tail()).unwrap(),
            CommitOutcome::Durable
        );
        assert_eq!(os.read(obj, 0, len as usize).unwrap(), data);
    }
}
