//! Snapshots by birth time: dead lists, and the snapshot operations that run in
//! syncing context (create, destroy, rollback, destroy of a dataset with its
//! snapshots).
//!
//! Big picture (as in ZFS's dsl_deadlist.c). A snapshot is a kept object set root.
//! When a sync kills a block, the block's birth txg decides: born after the newest
//! snapshot (`prev_snap_txg`) it is referenced by nothing else and freed at once;
//! born at or before it, a snapshot still holds it and it goes to the head's dead
//! list. Taking a snapshot moves the head's dead list to the snapshot and starts an
//! empty one: O(1) whatever the data size.
//!
//! Invariants:
//! - Every block referenced by a snapshot but not by the head or a later snapshot is
//!   in exactly one dead list: the one of the first snapshot (or the head) after the
//!   last snapshot that references it. So the space held only by snapshots is the sum
//!   of the dead lists, and destroying snapshot S (previous P, next N) frees exactly
//!   the entries of N's dead list born after P, and merges S's dead list into N's:
//!   it walks only those two lists.
//! - A clone's `prev_snap_txg` is its origin's txg: it never frees a block it shares.

use crate::catalog::{DatasetRecord, SnapshotRecord};
use crate::error::{Result, StoreError};
use cachalot_objects::{traverse, BlockCache, ObjectSet};
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::BlkPtr;

/// MOS object type of a dead list: an array of block pointers.
pub const OTYPE_DEADLIST: u8 = 4;

/// A snapshot operation queued by open context, applied by the next commit.
#[derive(Clone, Debug)]
pub(crate) enum SnapOp {
    /// One atomic snapshot of several datasets: (dataset id, snapshot name, guid
    /// to keep — a received snapshot keeps its sender's).
    Create(Vec<(u64, String, Option<u64>)>),
    Destroy {
        id: u64,
        name: String,
    },
    Rollback {
        id: u64,
        name: String,
    },
}

pub(crate) fn read_deadlist(mos: &ObjectSet, obj: u64) -> Result<Vec<BlkPtr>> {
    if obj == 0 {
        return Ok(Vec::new());
    }
    let size = mos.info(obj)?.size;
    let bytes = mos.read(obj, 0, size as usize)?;
    bytes
        .chunks(BLKPTR_SIZE)
        .map(|c| {
            BlkPtr::decode(c).ok_or_else(|| StoreError::Invalid("malformed dead list entry".into()))
        })
        .collect()
}

/// Append entries to a dead list object (created on first use); returns its bytes.
pub(crate) fn append_deadlist(mos: &ObjectSet, obj: &mut u64, bps: &[BlkPtr]) -> Result<u64> {
    if bps.is_empty() {
        return Ok(0);
    }
    if *obj == 0 {
        *obj = mos.create_object(OTYPE_DEADLIST)?;
    }
    let size = mos.info(*obj)?.size;
    let mut bytes = Vec::with_capacity(bps.len() * BLKPTR_SIZE);
    for bp in bps {
        bytes.extend_from_slice(&bp.to_bytes());
    }
    mos.write(*obj, size, &bytes)?;
    Ok(bps.iter().map(|b| b.asize_total()).sum())
}

/// Replace a dead list's content; an empty list deletes the object.
fn rewrite_deadlist(mos: &ObjectSet, obj: &mut u64, bps: &[BlkPtr]) -> Result<u64> {
    if *obj != 0 {
        mos.delete_object(*obj)?;
        *obj = 0;
    }
    append_deadlist(mos, obj, bps)
}

fn delete_deadlist(mos: &ObjectSet, obj: &mut u64) -> Result<()> {
    if *obj != 0 {
        mos.delete_object(*obj)?;
        *obj = 0;
    }
    Ok(())
}

/// Txg below which blocks of snapshot `idx` are shared with its predecessor (the
/// previous snapshot, or a clone's origin).
fn prev_txg(rec: &DatasetRecord, idx: usize, origin_txg: u64) -> u64 {
    if idx > 0 {
        rec.snapshots[idx - 1].txg
    } else {
        origin_txg
    }
}

/// Everything the syncing-context operations need.
pub(crate) struct SyncCtx<'a> {
    pub mos: &'a ObjectSet,
    pub cache: &'a BlockCache,
    pub txg: u64,
    pub free: &'a mut dyn FnMut(&BlkPtr),
}

/// Take snapshot `name` of `rec`, whose head was just synced in `ctx.txg`.
pub(crate) fn create(
    rec: &mut DatasetRecord,
    name: &str,
    guid: Option<u64>,
    ctx: &SyncCtx,
    now: u64,
) {
    rec.snapshots.push(SnapshotRecord {
        name: name.to_string(),
        txg: ctx.txg,
        objset: rec.objset,
        deadlist: rec.deadlist,
        deadlist_bytes: rec.deadlist_bytes,
        creation: now,
        acct: rec.acct,
        props: Default::default(),
        guid: guid.unwrap_or_else(cachalot_pool::new_guid),
    });
    rec.deadlist = 0;
    rec.deadlist_bytes = 0;
    rec.prev_snap_txg = ctx.txg;
}

/// Destroy snapshot `idx` of `rec`: free what only it held, merge its dead list
/// into its successor's. Walks only the two dead lists.
pub(crate) fn destroy(
    rec: &mut DatasetRecord,
    idx: usize,
    origin_txg: u64,
    ctx: &mut SyncCtx,
) -> Result<()> {
    let p_txg = prev_txg(rec, idx, origin_txg);
    let newest = idx + 1 == rec.snapshots.len();
    let next_list = if newest {
        rec.deadlist
    } else {
        rec.snapshots[idx + 1].deadlist
    };
    let mut kept = Vec::new();
    for bp in read_deadlist(ctx.mos, next_list)? {
        if bp.birth_txg > p_txg {
            ctx.cache.forget(&bp);
            (ctx.free)(&bp);
        } else {
            kept.push(bp);
        }
    }
    let mut s = rec.snapshots.remove(idx);
    kept.extend(read_deadlist(ctx.mos, s.deadlist)?);
    delete_deadlist(ctx.mos, &mut s.deadlist)?;
    if newest {
        rec.deadlist_bytes = rewrite_deadlist(ctx.mos, &mut rec.deadlist, &kept)?;
        rec.prev_snap_txg = p_txg;
    } else {
        let n = &mut rec.snapshots[idx];
        n.deadlist_bytes = rewrite_deadlist(ctx.mos, &mut n.deadlist, &kept)?;
    }
    Ok(())
}

/// Free the blocks of a tree born after `after_txg` (older subtrees are shared).
pub(crate) fn free_born_after(root: &BlkPtr, after_txg: u64, ctx: &mut SyncCtx) -> Result<()> {
    let mut blocks = Vec::new();
    traverse(ctx.cache, root, &mut |bp| {
        if bp.birth_txg > after_txg {
            blocks.push(*bp);
            true
        } else {
            false
        }
    })?;
    for bp in blocks {
        ctx.cache.forget(&bp);
        (ctx.free)(&bp);
    }
    Ok(())
}

/// Roll the head back to its newest snapshot `idx`: blocks born since are freed,
/// the head's dead list is dropped (the snapshot holds those blocks again).
pub(crate) fn rollback(rec: &mut DatasetRecord, idx: usize, ctx: &mut SyncCtx) -> Result<()> {
    let s = rec.snapshots[idx].clone();
    free_born_after(&rec.objset, s.txg, ctx)?;
    delete_deadlist(ctx.mos, &mut rec.deadlist)?;
    rec.deadlist_bytes = 0;
    rec.objset = s.objset;
    // That root's intent log header is the snapshot's, not the head's.
    rec.root_from_snapshot = true;
    rec.acct = s.acct;
    rec.prev_snap_txg = s.txg;
    Ok(())
}

/// Free everything a destroyed dataset held alone: its snapshots newest first,
/// then its head (blocks born after its origin), then its dead list.
pub(crate) fn destroy_all(
    rec: &mut DatasetRecord,
    origin_txg: u64,
    ctx: &mut SyncCtx,
) -> Result<()> {
    while !rec.snapshots.is_empty() {
        let idx = rec.snapshots.len() - 1;
        destroy(rec, idx, origin_txg, ctx)?;
    }
    free_born_after(&rec.objset, rec.prev_snap_txg, ctx)?;
    // What is left on the dead list was born before the origin: the origin holds it.
    delete_deadlist(ctx.mos, &mut rec.deadlist)?;
    rec.deadlist_bytes = 0;
    Ok(())
}

/// Bytes only snapshot `idx` holds: entries of the next dead list born after the
/// previous snapshot (walks that one list).
pub(crate) fn unique_bytes(
    mos: &ObjectSet,
    rec: &DatasetRecord,
    idx: usize,
    origin_txg: u64,
) -> Result<u64> {
    let p_txg = prev_txg(rec, idx, origin_txg);
    let next_list = match rec.snapshots.get(idx + 1) {
        Some(n) => n.deadlist,
        None => rec.deadlist,
    };
    deadlist_bytes_born_after(mos, next_list, p_txg)
}

/// Bytes of the entries of dead list `obj` born after `txg`.
pub(crate) fn deadlist_bytes_born_after(mos: &ObjectSet, obj: u64, txg: u64) -> Result<u64> {
    Ok(read_deadlist(mos, obj)?
        .iter()
        .filter(|bp| bp.birth_txg > txg)
        .map(|bp| bp.asize_total())
        .sum())
}

/// Bytes of a tree born after `after_txg` (`written` since the previous snapshot).
pub(crate) fn written_bytes(cache: &BlockCache, root: &BlkPtr, after_txg: u64) -> Result<u64> {
    let mut sum = 0;
    traverse(cache, root, &mut |bp| {
        if bp.birth_txg > after_txg {
            sum += bp.asize_total();
            true
        } else {
            false
        }
    })?;
    // A root born after with nothing new below it holds only a new intent log
    // header (a rolled-back head or a clone gets a fresh log at its next
    // commit): no data changed. Counting it made a rolled-back replication
    // target refuse its next increment as diverged.
    if root.birth_txg > after_txg && sum == root.asize_total() {
        return Ok(0);
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use crate::{Store, StoreOpts};
    use cachalot_pool::{BlockDevice, SimDevice};
    use std::sync::Arc;
    use std::time::Duration;

    fn opts() -> StoreOpts {
        StoreOpts {
            arc_max: 8 << 20,
            txg_timeout: Duration::from_secs(3600),
            dirty_max: 1 << 30,
        }
    }

    /// Found by the simulator (seeds 1 and 12). A rollback commits the head at its
    /// snapshot's root, whose intent log header names the log blocks the head had
    /// when the snapshot was taken; the rollback frees those blocks. Cut the power
    /// before the next commit writes the head's own root: the import must not
    /// claim those blocks for the head's log (they are free, and may already hold
    /// other data: the log later frees them under it, or they are counted twice).
    #[test]
    fn import_after_a_rollback_ignores_the_snapshots_log_header() {
        let dev = SimDevice::new("d0", 40 << 20);
        let devs = || vec![Arc::new(dev.clone()) as Arc<dyn BlockDevice>];
        let store = Store::create_on_devices("tank", devs(), false, opts()).unwrap();
        let ds = store.dataset("tank").unwrap();
        let obj = ds.create_object().unwrap();
        store.sync().unwrap();
        ds.write(obj, 0, &[1u8; 4096]).unwrap();
        // The first fsync commits a log header naming a pre-allocated block.
        ds.fsync().unwrap();
        store.snapshot(&["tank@s".to_string()]).unwrap();
        let snap_log = store.dataset("tank").unwrap().objset.zil().blocks();
        assert!(
            !snap_log.is_empty(),
            "the snapshot's root names a log block"
        );
        drop(ds);
        store.rollback("tank@s", false).unwrap();
        // The power goes now: every commit so far was flushed.
        let img = dev.crash_image(|| false);
        drop(store);
        let dev = SimDevice::from_image("d0", img);
        let store =
            Store::import_devices(vec![Arc::new(dev) as Arc<dyn BlockDevice>], opts()).unwrap();
        let log = store.dataset("tank").unwrap().objset.zil().blocks();
        assert!(
            log.iter().all(|d| !snap_log.contains(d)),
            "the rolled-back head adopted the snapshot's log blocks {log:?}"
        );
        store.verify_blocks().unwrap();
        let ds = store.dataset("tank").unwrap();
        assert_eq!(ds.read(obj, 0, 4096).unwrap(), vec![1u8; 4096]);
    }

    /// A rolled-back head's next commit writes a root with its own (empty)
    /// log header and nothing else: `written` stays 0, so an incremental
    /// receive is not refused as diverged.
    #[test]
    fn a_rolled_back_head_has_written_nothing_after_its_next_commit() {
        let dev = SimDevice::new("d0", 40 << 20);
        let devs = vec![Arc::new(dev) as Arc<dyn BlockDevice>];
        let store = Store::create_on_devices("tank", devs, false, opts()).unwrap();
        let ds = store.dataset("tank").unwrap();
        let obj = ds.create_object().unwrap();
        ds.write(obj, 0, &[1u8; 4096]).unwrap();
        ds.fsync().unwrap();
        store.snapshot(&["tank@s".to_string()]).unwrap();
        ds.write(obj, 4096, &[2u8; 4096]).unwrap();
        drop(ds);
        store.sync().unwrap();
        let written = || {
            let rows = store
                .get_props("tank", Some(&["written".to_string()]))
                .unwrap();
            rows[0].raw.parse::<u64>().unwrap()
        };
        assert!(written() > 0, "a write after the snapshot counts");
        store.rollback("tank@s", false).unwrap();
        store.sync().unwrap();
        let root = store.dataset("tank").unwrap().objset.root_bp();
        let snap_root = store.snapshot_dataset("tank@s").unwrap().objset.root_bp();
        assert_ne!(root, snap_root, "the head committed a root of its own");
        assert_eq!(written(), 0, "the new root alone is no change");
        let ds = store.dataset("tank").unwrap();
        ds.write(obj, 8192, &[3u8; 4096]).unwrap();
        drop(ds);
        store.sync().unwrap();
        assert!(written() > 0, "a write after the rollback counts");
    }
}
