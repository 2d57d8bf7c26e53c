//! Dnodes: the fixed 512-byte descriptor of an object, stored in its object set's
//! meta-dnode (object 0), 32 per 16 KiB block.
//!
//! Invariants:
//! - `otype == 0` means the slot is free.
//! - `nlevels == 1`: `root` points at the only level-0 block (block 0).
//!   `nlevels == n`: `root` points at an indirect block of level n-1; each indirect
//!   block holds `PTRS_PER_INDIRECT` pointers, so the tree covers
//!   `PTRS_PER_INDIRECT^(n-1)` level-0 blocks.
//! - `blksz` (the record size of this object) only changes while the object has a
//!   single block; once it grows past it, it is fixed (as in ZFS).

use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::BlkPtr;

pub const DNODE_SIZE: usize = 512;
pub const BONUS_SIZE: usize = 320;
pub const INDIRECT_SIZE: usize = 16 * 1024;
pub const PTRS_PER_INDIRECT: u64 = (INDIRECT_SIZE / BLKPTR_SIZE) as u64;
pub const DNODE_BLOCK_SIZE: u32 = 16 * 1024;
pub const DNODES_PER_BLOCK: u64 = (DNODE_BLOCK_SIZE as usize / DNODE_SIZE) as u64;
pub const MIN_BLOCK: u32 = 512;
pub const MAX_BLOCK: u32 = 1024 * 1024;

/// The on-disk dnode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnodePhys {
    pub otype: u8,
    pub nlevels: u8,
    pub blksz: u32,
    /// Logical length of the object in bytes.
    pub size: u64,
    /// Bytes allocated for this object's blocks (all copies).
    pub used: u64,
    /// Txg in which the object was created (its generation).
    pub gen: u64,
    pub root: BlkPtr,
    pub bonus: [u8; BONUS_SIZE],
}

impl DnodePhys {
    pub fn empty() -> Self {
        DnodePhys {
            otype: 0,
            nlevels: 1,
            blksz: MIN_BLOCK,
            size: 0,
            used: 0,
            gen: 0,
            root: BlkPtr::HOLE,
            bonus: [0; BONUS_SIZE],
        }
    }

    pub fn is_free(&self) -> bool {
        self.otype == 0
    }

    /// Level-0 blocks addressable with the current number of levels.
    pub fn capacity(&self) -> u64 {
        capacity(self.nlevels)
    }

    pub fn encode(&self, out: &mut [u8]) {
        assert_eq!(out.len(), DNODE_SIZE);
        out.fill(0);
        if self.is_free() {
            return;
        }
        out[0] = self.otype;
        out[1] = self.nlevels;
        out[4..8].copy_from_slice(&self.blksz.to_le_bytes());
        out[8..16].copy_from_slice(&self.size.to_le_bytes());
        out[16..24].copy_from_slice(&self.used.to_le_bytes());
        out[24..32].copy_from_slice(&self.gen.to_le_bytes());
        self.root.encode(&mut out[64..64 + BLKPTR_SIZE]);
        out[192..512].copy_from_slice(&self.bonus);
    }

    /// Decode; a malformed dnode decodes as `None`.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < DNODE_SIZE {
            return None;
        }
        if b[0] == 0 {
            return Some(DnodePhys::empty());
        }
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let blksz = u32::from_le_bytes(b[4..8].try_into().unwrap());
        if !(MIN_BLOCK..=MAX_BLOCK).contains(&blksz) || b[1] == 0 || b[1] > 12 {
            return None;
        }
        let mut bonus = [0u8; BONUS_SIZE];
        bonus.copy_from_slice(&b[192..512]);
        Some(DnodePhys {
            otype: b[0],
            nlevels: b[1],
            blksz,
            size: u64at(8),
            used: u64at(16),
            gen: u64at(24),
            root: BlkPtr::decode(&b[64..64 + BLKPTR_SIZE])?,
            bonus,
        })
    }
}

/// Level-0 blocks covered by a tree of `nlevels` levels.
pub fn capacity(nlevels: u8) -> u64 {
    PTRS_PER_INDIRECT.saturating_pow(nlevels as u32 - 1)
}

/// Level-0 blocks covered by one pointer at `level`.
pub fn span(level: u8) -> u64 {
    PTRS_PER_INDIRECT.saturating_pow(level as u32)
}

/// Object-set root block layout: header then the meta-dnode.
pub const OBJSET_BLOCK_SIZE: usize = 1024;
const OBJSET_MAGIC: u32 = 0x4f42_5331; // "OBS1"

pub fn encode_objset(meta: &DnodePhys) -> Vec<u8> {
    let mut b = vec![0u8; OBJSET_BLOCK_SIZE];
    b[0..4].copy_from_slice(&OBJSET_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    meta.encode(&mut b[64..64 + DNODE_SIZE]);
    b
}

pub fn decode_objset(b: &[u8]) -> Option<DnodePhys> {
    if b.len() < OBJSET_BLOCK_SIZE
        || u32::from_le_bytes(b[0..4].try_into().unwrap()) != OBJSET_MAGIC
    {
        return None;
    }
    DnodePhys::decode(&b[64..64 + DNODE_SIZE])
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn roundtrip() {
        let mut d = DnodePhys::empty();
        d.otype = 3;
        d.nlevels = 2;
        d.blksz = 16384;
        d.size = 123456;
        d.bonus[5] = 7;
        let mut b = [0u8; DNODE_SIZE];
        d.encode(&mut b);
        assert_eq!(DnodePhys::decode(&b), Some(d.clone()));
        assert_eq!(decode_objset(&encode_objset(&d)), Some(d));
        assert_eq!(capacity(1), 1);
        assert_eq!(capacity(3), 128 * 128);
    }
}
