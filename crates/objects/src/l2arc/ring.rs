//! The L2ARC's on-device format: a ring of batches between the cache device's
//! front and back labels. A batch is one sequential write: a log block (the
//! header below, naming every block the batch holds, with each block's BLAKE3
//! checksum and the pool guid) followed by the blocks' bytes, padded to 4 KiB.
//!
//! ```text
//! header: magic "CACHL2LB" u64 | version u32 | entries u32 | pool guid u64 |
//!         device guid u64 | seq u64 | prev u64 | batch length u64 |
//!         entries × (vdev u32 | offset u64 | birth u64 | length u32 |
//!                    data offset in batch u32 | BLAKE3 of the data [32]) |
//!         BLAKE3 of all of the header before it [32] | zeros to 4 KiB
//! ```
//!
//! Invariants: batches are written at increasing offsets with consecutive
//! `seq`, each naming the offset of the one before it (`prev`); one that does
//! not fit before the ring's end goes to its start (a wrap). So the batches of
//! the current lap are a forward chain from the ring's start, and those of the
//! previous lap still intact are a backward chain from the first batch's
//! `prev`, down to where the current lap has overwritten (`scan`).

use crate::cache::BlockKey;
use cachalot_pool::CacheVdev;

const MAGIC: u64 = u64::from_le_bytes(*b"CACHL2LB");
const VERSION: u32 = 1;
const FIXED: usize = 56;
const ENTRY: usize = 60;
const SECTOR: usize = 4096;
/// Entries of one batch at most (its header then fits in 64 KiB).
pub(crate) const MAX_ENTRIES: usize = 1024;
/// `prev` of a batch that has no predecessor.
pub(crate) const NO_PREV: u64 = u64::MAX;

/// One block in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryRec {
    pub key: BlockKey,
    pub len: u32,
    /// Offset of the block's bytes from the start of the batch.
    pub data_off: u32,
    pub cksum: [u8; 32],
}

/// A batch's log block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    pub pool_guid: u64,
    pub dev_guid: u64,
    pub seq: u64,
    pub prev: u64,
    /// Bytes of the whole batch (header and data, padded).
    pub len: u64,
    pub entries: Vec<EntryRec>,
}

fn round_up(n: usize) -> usize {
    n.div_ceil(SECTOR) * SECTOR
}

fn header_size(entries: usize) -> usize {
    round_up(FIXED + ENTRY * entries + 32)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl BatchHeader {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(header_size(self.entries.len()));
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for v in [self.pool_guid, self.dev_guid, self.seq, self.prev, self.len] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for e in &self.entries {
            b.extend_from_slice(&e.key.vdev.to_le_bytes());
            b.extend_from_slice(&e.key.offset.to_le_bytes());
            b.extend_from_slice(&e.key.birth.to_le_bytes());
            b.extend_from_slice(&e.len.to_le_bytes());
            b.extend_from_slice(&e.data_off.to_le_bytes());
            b.extend_from_slice(&e.cksum);
        }
        let sum = *blake3::hash(&b).as_bytes();
        b.extend_from_slice(&sum);
        b.resize(header_size(self.entries.len()), 0);
        b
    }

    /// Bytes of the header that starts with `first` (its first sector), if it
    /// looks like one.
    fn size_from_first_sector(first: &[u8]) -> Option<usize> {
        if first.len() < FIXED {
            return None;
        }
        if u64_at(first, 0) != MAGIC || u32_at(first, 8) != VERSION {
            return None;
        }
        let n = u32_at(first, 12) as usize;
        (n <= MAX_ENTRIES).then(|| header_size(n))
    }

    /// A whole header, checked (magic, version, checksum, entries inside the batch).
    fn decode(b: &[u8]) -> Option<BatchHeader> {
        let size = Self::size_from_first_sector(b)?;
        if b.len() < size {
            return None;
        }
        let n = u32_at(b, 12) as usize;
        let end = FIXED + ENTRY * n;
        if blake3::hash(&b[..end]).as_bytes() != &b[end..end + 32] {
            return None;
        }
        let len = u64_at(b, 48);
        let entries: Vec<EntryRec> = (0..n)
            .map(|i| {
                let e = &b[FIXED + ENTRY * i..FIXED + ENTRY * (i + 1)];
                EntryRec {
                    key: BlockKey {
                        vdev: u32_at(e, 0),
                        offset: u64_at(e, 4),
                        birth: u64_at(e, 12),
                    },
                    len: u32_at(e, 20),
                    data_off: u32_at(e, 24),
                    cksum: e[28..60].try_into().expect("32 bytes"),
                }
            })
            .collect();
        let inside = entries
            .iter()
            .all(|e| e.data_off as usize >= size && e.data_off as u64 + e.len as u64 <= len);
        inside.then_some(BatchHeader {
            pool_guid: u64_at(b, 16),
            dev_guid: u64_at(b, 24),
            seq: u64_at(b, 32),
            prev: u64_at(b, 40),
            len,
            entries,
        })
    }
}

/// A batch of `blocks` ready to write: its bytes and its header.
pub(crate) fn build_batch(
    pool_guid: u64,
    dev_guid: u64,
    seq: u64,
    prev: u64,
    blocks: &[(BlockKey, cachalot_arc::Value)],
) -> (Vec<u8>, BatchHeader) {
    let hsize = header_size(blocks.len());
    let mut off = hsize;
    let entries: Vec<EntryRec> = blocks
        .iter()
        .map(|(k, v)| {
            let e = EntryRec {
                key: *k,
                len: v.len() as u32,
                data_off: off as u32,
                cksum: *blake3::hash(v).as_bytes(),
            };
            off += v.len();
            e
        })
        .collect();
    let len = round_up(off);
    let h = BatchHeader {
        pool_guid,
        dev_guid,
        seq,
        prev,
        len: len as u64,
        entries,
    };
    let mut bytes = h.encode();
    for (_, v) in blocks {
        bytes.extend_from_slice(v);
    }
    bytes.resize(len, 0);
    (bytes, h)
}

/// Bytes a batch of blocks of these lengths takes on the device.
pub(crate) fn batch_size(lens: impl Iterator<Item = usize>) -> u64 {
    let (n, data) = lens.fold((0, 0), |(n, d), l| (n + 1, d + l));
    round_up(header_size(n) + data) as u64
}

/// The header of the batch at `off` if one of this pool and device is there
/// and the batch ends before `end`.
fn read_header(dev: &CacheVdev, pool_guid: u64, off: u64, end: u64) -> Option<BatchHeader> {
    let mut first = vec![0u8; SECTOR];
    if off + SECTOR as u64 > end || dev.read_at(&mut first, off).is_err() {
        return None;
    }
    let size = BatchHeader::size_from_first_sector(&first)?;
    let mut buf = first;
    if size > SECTOR {
        buf.resize(size, 0);
        if off + size as u64 > end
            || dev
                .read_at(&mut buf[SECTOR..], off + SECTOR as u64)
                .is_err()
        {
            return None;
        }
    }
    let h = BatchHeader::decode(&buf)?;
    (h.pool_guid == pool_guid && h.dev_guid == dev.guid && h.len > 0 && off + h.len <= end)
        .then_some(h)
}

/// The batches on the ring `[start, end)` that can be trusted to be whole
/// (their log blocks are; each block is still checked on read), oldest first,
/// with their offsets. See the module invariants for the two chains.
pub(crate) fn scan(
    dev: &CacheVdev,
    pool_guid: u64,
    start: u64,
    end: u64,
) -> Vec<(u64, BatchHeader)> {
    let mut lap: Vec<(u64, BatchHeader)> = Vec::new();
    let mut off = start;
    while let Some(h) = read_header(dev, pool_guid, off, end) {
        if let Some((poff, p)) = lap.last() {
            if h.seq != p.seq.wrapping_add(1) || h.prev != *poff {
                break;
            }
        }
        let next = off + h.len;
        lap.push((off, h));
        off = next;
    }
    let Some((_, first)) = lap.first() else {
        return lap;
    };
    // The previous lap, from its newest batch back to where this lap wrote.
    let head = off;
    let mut older: Vec<(u64, BatchHeader)> = Vec::new();
    let (mut p, mut want) = (first.prev, first.seq.wrapping_sub(1));
    while p != NO_PREV && p >= head {
        match read_header(dev, pool_guid, p, end) {
            Some(h) if h.seq == want => {
                let prev = h.prev;
                older.push((p, h));
                if prev != NO_PREV && prev >= p {
                    break;
                }
                p = prev;
                want = want.wrapping_sub(1);
            }
            _ => break,
        }
    }
    older.reverse();
    older.extend(lap);
    older
}

/// The fuzz target's entry (crates/fuzzing, `l2arc_header`): decodes any bytes as
/// they are, then with magic, version, a bounded entry count and the checksum made
/// valid, so the entry parser behind the checksum runs on the fuzzer's bytes.
/// Must never panic.
pub(crate) fn fuzz_batch_header(data: &[u8]) {
    let _ = BatchHeader::decode(data);
    let mut b = data.to_vec();
    if b.len() < 16 {
        return;
    }
    b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    let n = u32_at(&b, 12) as usize % (MAX_ENTRIES + 1);
    b[12..16].copy_from_slice(&(n as u32).to_le_bytes());
    let end = FIXED + ENTRY * n;
    if b.len() >= end + 32 {
        let sum = *blake3::hash(&b[..end]).as_bytes();
        b[end..end + 32].copy_from_slice(&sum);
    }
    let _ = BatchHeader::decode(&b);
}
