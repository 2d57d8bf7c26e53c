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
