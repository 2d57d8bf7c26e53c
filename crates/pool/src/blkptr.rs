//! Block pointers: the 128-byte record that names a block and vouches for it.
//!
//! Invariants:
//! - A pointer is written only inside its parent, after the block it names is on disk,
//!   and it carries the block's checksum: the tree verifies itself from the root down.
//! - The all-zero pointer is a hole (no block; reads as zeros). `birth_txg == 0` iff hole.
//! - Every DVA of a pointer holds the same physical bytes (`psize` of them).

use crate::compress::Compression;

/// Size of an encoded block pointer.
pub const BLKPTR_SIZE: usize = 128;
/// Maximum copies of one block (ditto blocks).
pub const MAX_DVAS: usize = 3;

/// Data virtual address: one copy of a block on one top-level vdev.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dva {
    /// Index of the top-level vdev.
    pub vdev: u32,
    /// Allocated bytes (a multiple of the vdev's sector size); 0 = unused slot.
    pub asize: u32,
    /// Byte offset within the top-level vdev's allocatable space.
    pub offset: u64,
}

impl Dva {
    pub fn is_empty(&self) -> bool {
        self.asize == 0
    }
}

/// What a block holds; decides the copies kept and the cache class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BlockType {
    None = 0,
    /// User data (level-0 blocks of ordinary objects).
    Data = 1,
    /// Indirect block: an array of block pointers.
    Indirect = 2,
    /// Level-0 block of a meta-dnode: an array of dnodes.
    Dnode = 3,
    /// Object set root (holds the meta-dnode).
    Objset = 4,
    /// Level-0 block of a metadata object (catalogs).
    Meta = 5,
    /// Space map log block.
    SpaceMapLog = 6,
    /// Space map base (condensed map) block.
    SpaceMapBase = 7,
}

impl BlockType {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => BlockType::None,
            1 => BlockType::Data,
            2 => BlockType::Indirect,
            3 => BlockType::Dnode,
            4 => BlockType::Objset,
            5 => BlockType::Meta,
            6 => BlockType::SpaceMapLog,
            7 => BlockType::SpaceMapBase,
            _ => return None,
        })
    }
    /// Metadata gets extra copies and is cached as metadata.
    pub fn is_metadata(self) -> bool {
        self != BlockType::Data
    }
}

/// Checksum algorithm of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ChecksumType {
    /// BLAKE3-256 over the physical (stored) bytes.
    Blake3 = 1,
}

/// A block pointer. See docs/on-disk-format.md for the byte layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlkPtr {
    pub dvas: [Dva; MAX_DVAS],
    /// Logical (uncompressed) size in bytes.
    pub lsize: u32,
    /// Physical (stored, possibly compressed) size in bytes.
    pub psize: u32,
    pub compression: Compression,
    pub checksum_type: ChecksumType,
    pub block_type: BlockType,
    /// Level in its object's tree: 0 = data, n = indirect above n-1.
    pub level: u8,
    /// Transaction group that wrote this block.
    pub birth_txg: u64,
    /// Number of non-hole level-0 blocks under this pointer (1 for a level-0 block).
    pub fill: u64,
    pub checksum: [u8; 32],
}

impl BlkPtr {
    pub const HOLE: BlkPtr = BlkPtr {
        dvas: [Dva {
            vdev: 0,
            asize: 0,
            offset: 0,
        }; MAX_DVAS],
        lsize: 0,
        psize: 0,
        compression: Compression::Off,
        checksum_type: ChecksumType::Blake3,
        block_type: BlockType::None,
        level: 0,
        birth_txg: 0,
        fill: 0,
        checksum: [0; 32],
    };

    pub fn is_hole(&self) -> bool {
        self.birth_txg == 0
    }

    /// Copies actually stored.
    pub fn dva_iter(&self) -> impl Iterator<Item = &Dva> {
        self.dvas.iter().filter(|d| !d.is_empty())
    }

    /// Allocated bytes over all copies (what the block costs the pool).
    pub fn asize_total(&self) -> u64 {
        self.dva_iter().map(|d| d.asize as u64).sum()
    }

    pub fn encode(&self, out: &mut [u8]) {
        assert_eq!(out.len(), BLKPTR_SIZE);
        out.fill(0);
        if self.is_hole() {
            return;
        }
        for (i, d) in self.dvas.iter().enumerate() {
            let o = i * 16;
            out[o..o + 4].copy_from_slice(&d.vdev.to_le_bytes());
            out[o + 4..o + 8].copy_from_slice(&d.asize.to_le_bytes());
            out[o + 8..o + 16].copy_from_slice(&d.offset.to_le_bytes());
        }
        out[48..52].copy_from_slice(&self.lsize.to_le_bytes());
        out[52..56].copy_from_slice(&self.psize.to_le_bytes());
        out[56] = self.compression.to_byte();
        out[57] = self.checksum_type as u8;
        out[58] = self.block_type as u8;
        out[59] = self.level;
        out[64..72].copy_from_slice(&self.birth_txg.to_le_bytes());
        out[72..80].copy_from_slice(&self.fill.to_le_bytes());
        out[80..112].copy_from_slice(&self.checksum);
    }

    pub fn to_bytes(&self) -> [u8; BLKPTR_SIZE] {
        let mut b = [0u8; BLKPTR_SIZE];
        self.encode(&mut b);
        b
    }

    /// Decode; `None` if the bytes are not a valid pointer (a corrupt parent that
    /// nonetheless passed its checksum cannot happen, but stay panic-free anyway).
    pub fn decode(b: &[u8]) -> Option<BlkPtr> {
        if b.len() < BLKPTR_SIZE {
            return None;
        }
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let birth = u64at(64);
        if birth == 0 {
            return Some(BlkPtr::HOLE);
        }
        let mut dvas = [Dva::default(); MAX_DVAS];
        for (i, d) in dvas.iter_mut().enumerate() {
            let o = i * 16;
            *d = Dva {
                vdev: u32at(o),
                asize: u32at(o + 4),
                offset: u64at(o + 8),
            };
        }
        let mut checksum = [0u8; 32];
        checksum.copy_from_slice(&b[80..112]);
        Some(BlkPtr {
            dvas,
            lsize: u32at(48),
            psize: u32at(52),
            compression: Compression::from_byte(b[56])?,
            checksum_type: match b[57] {
                1 => ChecksumType::Blake3,
                _ => return None,
            },
            block_type: BlockType::from_u8(b[58])?,
            level: b[59],
            birth_txg: birth,
            fill: u64at(72),
            checksum,
        })
    }
}

/// The checksum kept in parents: BLAKE3-256 of the stored bytes.
///
/// Why BLAKE3 rather than xxh3-128: it is a cryptographic hash (collision resistant),
/// so dedup and send-stream verification can trust equal checksums without comparing
/// bytes, and it still runs at several GB/s per core with SIMD, far above what one
/// device delivers. xxh3 would be faster but is not safe against crafted collisions.
pub fn checksum(data: &[u8]) -> [u8; 32] {
    *blake3::hash(data).as_bytes()
}

/// `checksum` of the first `len` bytes of `parts` laid end to end, without
/// joining them (None if they hold fewer than `len` bytes).
pub fn checksum_parts<'a>(
    parts: impl IntoIterator<Item = &'a [u8]>,
    len: usize,
) -> Option<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    let mut left = len;
    for p in parts {
        let take = p.len().min(left);
        h.update(&p[..take]);
        left -= take;
    }
    (left == 0).then(|| *h.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let bp = BlkPtr {
            dvas: [
                Dva {
                    vdev: 1,
                    asize: 8192,
                    offset: 0x1234000,
                },
                Dva {
                    vdev: 0,
                    asize: 8192,
                    offset: 0x9000,
                },
                Dva::default(),
            ],
            lsize: 16384,
            psize: 5000,
            compression: Compression::Zstd(3),
            checksum_type: ChecksumType::Blake3,
            block_type: BlockType::Indirect,
            level: 2,
            birth_txg: 77,
            fill: 300,
            checksum: [9; 32],
        };
        let b = bp.to_bytes();
        assert_eq!(BlkPtr::decode(&b), Some(bp));
        assert!(BlkPtr::decode(&[0u8; 128]).unwrap().is_hole());
        assert_eq!(bp.asize_total(), 16384);
    }
}
