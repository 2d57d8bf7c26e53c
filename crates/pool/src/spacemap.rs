//! On-disk space maps: which byte ranges of each vdev are allocated in the
//! committed state, so import never has to scan every block.
//!
//! The map is a *base* (a condensed list of allocated ranges) plus a *log* (per txg,
//! the ranges allocated and freed in that txg). Both are chains of space map blocks,
//! newest first, each naming its predecessor with a checksummed block pointer. Every
//! commit appends one log segment; when the log grows past a bound the map is
//! condensed into a new base and the old chain is freed.
//!
//! Invariant: the blocks that hold a segment are allocated before the segment is
//! encoded, and their own allocation records are inside it, so the map always
//! describes itself.

use crate::blkptr::{BlkPtr, BLKPTR_SIZE};

/// Bytes of one record.
pub const RECORD_SIZE: usize = 16;
/// Bytes of a block's header.
pub const HEADER_SIZE: usize = 64 + BLKPTR_SIZE;
/// Largest space map block. Kept at 16 KiB, the size of the largest metadata
/// block, so a commit never needs a large contiguous extent in a fragmented pool.
pub const MAX_BLOCK: usize = 16 * 1024;
/// Records that fit in a full block.
pub const PER_BLOCK: usize = (MAX_BLOCK - HEADER_SIZE) / RECORD_SIZE;
const MAGIC: u32 = 0x5350_4d31; // "SPM1"

/// One allocation or free of a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub alloc: bool,
    pub vdev: u32,
    pub offset: u64,
    pub len: u64,
}

impl Record {
    fn encode(&self, out: &mut [u8]) {
        // The packed form keeps 15 bits of vdev and 48 bits of sector offset: a
        // record outside them would be written as a different range.
        assert!(
            self.vdev < 0x8000 && self.offset.is_multiple_of(512) && self.offset >> 57 == 0,
            "space map record out of range: {self:?}"
        );
        let w0 =
            ((self.alloc as u64) << 63) | ((self.vdev as u64 & 0x7fff) << 48) | (self.offset >> 9);
        out[0..8].copy_from_slice(&w0.to_le_bytes());
        out[8..16].copy_from_slice(&self.len.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Record {
        let w0 = u64::from_le_bytes(b[0..8].try_into().unwrap());
        Record {
            alloc: w0 >> 63 == 1,
            vdev: ((w0 >> 48) & 0x7fff) as u32,
            offset: (w0 & ((1 << 48) - 1)) << 9,
            len: u64::from_le_bytes(b[8..16].try_into().unwrap()),
        }
    }
}

/// Size of the block holding `n` records, rounded to `sector`.
pub fn block_size(n: usize, sector: usize) -> usize {
    (HEADER_SIZE + n * RECORD_SIZE).next_multiple_of(sector)
}

/// Encode a block: header (magic, txg, record count, predecessor) then records.
pub fn encode_block(txg: u64, prev: &BlkPtr, records: &[Record], size: usize) -> Vec<u8> {
    let mut b = vec![0u8; size];
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&(records.len() as u32).to_le_bytes());
    b[8..16].copy_from_slice(&txg.to_le_bytes());
    prev.encode(&mut b[64..64 + BLKPTR_SIZE]);
    for (i, r) in records.iter().enumerate() {
        let o = HEADER_SIZE + i * RECORD_SIZE;
        r.encode(&mut b[o..o + RECORD_SIZE]);
    }
    b
}

/// Decode a block into (predecessor, records); `None` if malformed.
pub fn decode_block(b: &[u8]) -> Option<(BlkPtr, Vec<Record>)> {
    if b.len() < HEADER_SIZE || u32::from_le_bytes(b[0..4].try_into().unwrap()) != MAGIC {
        return None;
    }
    let n = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
    if HEADER_SIZE + n * RECORD_SIZE > b.len() {
        return None;
    }
    let prev = BlkPtr::decode(&b[64..64 + BLKPTR_SIZE])?;
    let recs = (0..n)
        .map(|i| Record::decode(&b[HEADER_SIZE + i * RECORD_SIZE..]))
        .collect();
    Some((prev, recs))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn roundtrip() {
        let recs = vec![
            Record {
                alloc: true,
                vdev: 3,
                offset: 4096 * 1000,
                len: 8192,
            },
            Record {
                alloc: false,
                vdev: 0,
                offset: 512,
                len: 512,
            },
        ];
        let b = encode_block(5, &BlkPtr::HOLE, &recs, block_size(2, 4096));
        let (p, r) = decode_block(&b).unwrap();
        assert!(p.is_hole());
        assert_eq!(r, recs);
    }
}
