//! Space accounting of an object set, persisted in its root block.
//!
//! Invariants:
//! - Accounting (`used`, logical and physical bytes) changes only with births and
//!   frees of blocks in sync, so it equals the sum over the tree at every commit.
//! - The root block records the accounting without itself (it cannot record its
//!   own allocation); `ObjectSet::open` adds the root back.

use cachalot_pool::{BlkPtr, BlockType};

/// Space accounting of an object set, persisted in its root block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Allocated bytes, all copies, including metadata.
    pub used: u64,
    /// Logical bytes of all blocks.
    pub logical: u64,
    /// Physical (compressed) bytes of all blocks, one copy.
    pub physical: u64,
    /// Logical and physical bytes of data blocks only (for compressratio).
    pub data_logical: u64,
    pub data_physical: u64,
}

pub(super) fn add_acct(a: &mut Accounting, bp: &BlkPtr) {
    if bp.is_hole() {
        return;
    }
    a.used += bp.asize_total();
    // Physical bytes as zfs counts them for compressratio: one copy of what the
    // block occupies (its compressed size rounded up to the allocation unit, as
    // zfs pads psize to the sector), never more than its logical size (a block
    // that does not shrink is stored as is). So compressratio = logical/physical
    // agrees with logicalused/used but for extra copies.
    let one_copy = bp.dva_iter().next().map_or(0, |d| d.asize as u64);
    let physical = (bp.psize as u64).max(one_copy).min(bp.lsize as u64);
    a.logical += bp.lsize as u64;
    a.physical += physical;
    if bp.block_type == BlockType::Data {
        a.data_logical += bp.lsize as u64;
        a.data_physical += physical;
    }
}

pub(super) fn add_accts(a: Accounting, b: Accounting) -> Accounting {
    Accounting {
        used: a.used + b.used,
        logical: a.logical + b.logical,
        physical: a.physical + b.physical,
        data_logical: a.data_logical + b.data_logical,
        data_physical: a.data_physical + b.data_physical,
    }
}

pub(super) fn sub_acct(a: Accounting, b: Accounting) -> Accounting {
    Accounting {
        used: a.used.saturating_sub(b.used),
        logical: a.logical.saturating_sub(b.logical),
        physical: a.physical.saturating_sub(b.physical),
        data_logical: a.data_logical.saturating_sub(b.data_logical),
        data_physical: a.data_physical.saturating_sub(b.data_physical),
    }
}

pub(super) fn encode_acct(block: &mut [u8], a: &Accounting) {
    for (i, v) in [
        a.used,
        a.logical,
        a.physical,
        a.data_logical,
        a.data_physical,
    ]
    .into_iter()
    .enumerate()
    {
        block[8 + i * 8..16 + i * 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// Accounting stored in a root block, plus the root block itself (which cannot
/// record its own allocation).
pub(super) fn decode_acct(block: &[u8]) -> Accounting {
    let v = |i: usize| u64::from_le_bytes(block[8 + i * 8..16 + i * 8].try_into().unwrap());
    Accounting {
        used: v(0),
        logical: v(1),
        physical: v(2),
        data_logical: v(3),
        data_physical: v(4),
    }
}
