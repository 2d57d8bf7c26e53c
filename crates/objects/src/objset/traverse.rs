//! A walk of every block pointer reachable from an object set root (scrub,
//! snapshot space, the fuzz corpus check).
//!
//! Invariants: it reads a committed root straight from the pool (no ARC, no lock
//! of an open object set), visits the root first, and descends below a pointer
//! only when the visitor returns true.

use crate::cache::BlockCache;
use crate::dnode::*;
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::{BlkPtr, BlockType, PoolError};

/// Visit every block pointer reachable from an object set root (root first),
/// reading indirect and dnode blocks to descend. The visitor returns false to
/// skip descending below a pointer.
pub fn traverse(
    cache: &BlockCache,
    root: &BlkPtr,
    visit: &mut dyn FnMut(&BlkPtr) -> bool,
) -> std::result::Result<(), PoolError> {
    fn tree(
        cache: &BlockCache,
        bp: &BlkPtr,
        level: u8,
        visit: &mut dyn FnMut(&BlkPtr) -> bool,
        on_l0: &mut dyn FnMut(&[u8]) -> std::result::Result<(), PoolError>,
    ) -> std::result::Result<(), PoolError> {
        if bp.is_hole() || !visit(bp) {
            return Ok(());
        }
        if level == 0 {
            if bp.block_type == BlockType::Dnode {
                let data = cache.pool.read_block(bp)?;
                on_l0(&data)?;
            }
            return Ok(());
        }
        let data = cache.pool.read_block(bp)?;
        for c in data.chunks(BLKPTR_SIZE) {
            if let Some(child) = BlkPtr::decode(c) {
                tree(cache, &child, level - 1, visit, on_l0)?;
            }
        }
        Ok(())
    }
    if root.is_hole() || !visit(root) {
        return Ok(());
    }
    let block = cache.pool.read_block(root)?;
    let Some(meta) = decode_objset(&block) else {
        return Err(PoolError::Corrupt {
            vdev: root.dvas[0].vdev,
            offset: root.dvas[0].offset,
            what: "malformed object set root".into(),
        });
    };
    let mut dnodes: Vec<DnodePhys> = Vec::new();
    tree(
        cache,
        &meta.root,
        meta.nlevels - 1,
        visit,
        &mut |data: &[u8]| {
            for c in data.chunks(DNODE_SIZE) {
                if let Some(d) = DnodePhys::decode(c) {
                    if !d.is_free() {
                        dnodes.push(d);
                    }
                }
            }
            Ok(())
        },
    )?;
    for d in dnodes {
        tree(cache, &d.root, d.nlevels - 1, visit, &mut |_| Ok(()))?;
    }
    Ok(())
}

/// What `changed_objects` found: the ids of the dnode slots that differ
/// between two roots (created, deleted or changed objects, ascending), and how
/// many blocks it read to find them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangedObjects {
    pub ids: Vec<u64>,
    pub blocks_read: u64,
}

/// One side of `changed_objects`' walk: a subtree's pointer and its level. A
/// node below the level being walked is the first child of that level: a
/// tree of fewer levels is the first subtree of a taller one.
#[derive(Clone, Copy)]
struct Side {
    bp: BlkPtr,
    level: u8,
}

/// The objects whose dnodes differ between the committed object-set roots
/// `from` and `to` (snapshot diff). Both meta-dnode trees are walked side by
/// side and a pointer equal on both sides (same address, birth and checksum)
/// is the same subtree, left unread: for `to` a later state of `from`'s
/// dataset, only the blocks born after `from` are read, so the cost follows
/// what changed, not the size of the object set. A slot is listed when its
/// 512 bytes differ (a changed bonus, size or data root), whichever side is free.
pub fn changed_objects(
    cache: &BlockCache,
    from: &BlkPtr,
    to: &BlkPtr,
) -> std::result::Result<ChangedObjects, PoolError> {
    let mut out = ChangedObjects::default();
    if from == to {
        return Ok(out);
    }
    let mut meta = |root: &BlkPtr| -> std::result::Result<Side, PoolError> {
        if root.is_hole() {
            return Ok(Side {
                bp: BlkPtr::HOLE,
                level: 0,
            });
        }
        out.blocks_read += 1;
        let block = cache.pool.read_block(root)?;
        let meta = decode_objset(&block).ok_or_else(|| corrupt(root, "object set root"))?;
        Ok(Side {
            bp: meta.root,
            level: meta.nlevels.saturating_sub(1),
        })
    };
    let (a, b) = (meta(from)?, meta(to)?);
    let top = a.level.max(b.level);
    pair(cache, a, b, top, 0, &mut out)?;
    out.ids.retain(|&id| id != 0);
    Ok(out)
}

fn corrupt(bp: &BlkPtr, what: &str) -> PoolError {
    PoolError::Corrupt {
        vdev: bp.dvas[0].vdev,
        offset: bp.dvas[0].offset,
        what: format!("malformed {what}"),
    }
}

/// Compare the subtrees `a` and `b` standing at `level`, whose first level-0
/// block is `first`.
fn pair(
    cache: &BlockCache,
    a: Side,
    b: Side,
    level: u8,
    first: u64,
    out: &mut ChangedObjects,
) -> std::result::Result<(), PoolError> {
    if a.bp == b.bp && (a.level == b.level || a.bp.is_hole()) {
        // The same subtree (or nothing on both sides).
        return Ok(());
    }
    if level == 0 {
        let (da, db) = (
            dnode_block(cache, &a.bp, out)?,
            dnode_block(cache, &b.bp, out)?,
        );
        for slot in 0..DNODES_PER_BLOCK as usize {
            let r = slot * DNODE_SIZE..(slot + 1) * DNODE_SIZE;
            if da[r.clone()] != db[r] {
                out.ids.push(first * DNODES_PER_BLOCK + slot as u64);
            }
        }
        return Ok(());
    }
    let (ca, cb) = (
        children(cache, a, level, out)?,
        children(cache, b, level, out)?,
    );
    for (i, (x, y)) in ca.into_iter().zip(cb).enumerate() {
        pair(
            cache,
            x,
            y,
            level - 1,
            first + i as u64 * span(level - 1),
            out,
        )?;
    }
    Ok(())
}

/// The children (at `level - 1`) of a node standing at `level`.
fn children(
    cache: &BlockCache,
    n: Side,
    level: u8,
    out: &mut ChangedObjects,
) -> std::result::Result<Vec<Side>, PoolError> {
    let hole = Side {
        bp: BlkPtr::HOLE,
        level: level - 1,
    };
    let mut kids = vec![hole; PTRS_PER_INDIRECT as usize];
    if n.bp.is_hole() {
        return Ok(kids);
    }
    if n.level < level {
        kids[0] = n;
        return Ok(kids);
    }
    out.blocks_read += 1;
    let block = cache.pool.read_block(&n.bp)?;
    if block.len() != INDIRECT_SIZE {
        return Err(corrupt(&n.bp, "indirect block"));
    }
    for (k, c) in kids.iter_mut().zip(block.chunks(BLKPTR_SIZE)) {
        k.bp = BlkPtr::decode(c).ok_or_else(|| corrupt(&n.bp, "block pointer"))?;
    }
    Ok(kids)
}

/// A dnode block's bytes (a hole: every slot free, all zeros).
fn dnode_block(
    cache: &BlockCache,
    bp: &BlkPtr,
    out: &mut ChangedObjects,
) -> std::result::Result<Vec<u8>, PoolError> {
    let size = DNODE_BLOCK_SIZE as usize;
    if bp.is_hole() {
        return Ok(vec![0; size]);
    }
    out.blocks_read += 1;
    let mut b = cache.pool.read_block(bp)?;
    if b.len() > size {
        return Err(corrupt(bp, "dnode block"));
    }
    // The meta object's last record may be stored short: the rest is free slots.
    b.resize(size, 0);
    Ok(b)
}
