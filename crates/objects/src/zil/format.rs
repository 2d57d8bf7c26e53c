//! The intent log's on-disk format: log blocks, the records they carry, and the
//! header the object set root keeps about the chain.
//!
//! On disk, log blocks form a chain. Each block is allocated before it is written
//! and names the pre-allocated location of the next one; its header carries the
//! chain's guid and a sequence number, and a BLAKE3 checksum over the block, so a
//! stale or torn block ends the chain. The object set root records the *header*:
//! the first block of the live chain (or the block the next write will use).
//!
//! Invariants:
//! - Sequence numbers of one chain increase by one per block; replay stops at the
//!   first block that is unreadable, fails its checksum, or has the wrong guid/seq.
//! - Every length decoded from a block is bounded before use: a write's by
//!   `MAX_BLOCK`, a bonus's by `BONUS_SIZE`, a created object's block size by the
//!   object layer's limits; anything else ends the chain.
//! - What is encoded decodes to itself (`decode_records(encode_records(r)) == r`);
//!   a `WriteLazy` is resolved by the leader before blocks are packed.

use super::Itx;
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::{BlkPtr, Dva};
use std::sync::Arc;

const MAGIC: u64 = 0x0031_435a_4843_4143; // "CACHZ1" read as little-endian bytes
pub const BLOCK_HEADER: usize = 96;
pub(super) const RECORD_HEADER: usize = 40;
pub(super) const MIN_BLOCK: u64 = 8 * 1024;
pub(super) const MAX_BLOCK: u64 = 128 * 1024;
const REC_WRITE: u8 = 1;
const REC_TRUNCATE: u8 = 2;
const REC_CREATE: u8 = 3;
const REC_DELETE: u8 = 4;
const REC_BONUS: u8 = 5;
const REC_PUNCH: u8 = 6;
const REC_WRITE_REF: u8 = 7;
/// Record flag: more records of the same atomic group follow.
const FLAG_MORE: u8 = 1;

/// What the object set root records about the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZilHeader {
    /// First block of the chain (asize 0: no log).
    pub head: Dva,
    pub seq: u64,
    pub guid: u64,
    /// The head block was written before this header was committed, so if it does
    /// not read back valid the log is damaged (not merely unused).
    pub head_written: bool,
}

impl ZilHeader {
    pub const SIZE: usize = 40;
    pub fn is_empty(&self) -> bool {
        self.head.asize == 0
    }
    pub fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.head.vdev.to_le_bytes());
        out[4..8].copy_from_slice(&self.head.asize.to_le_bytes());
        out[8..16].copy_from_slice(&self.head.offset.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.guid.to_le_bytes());
        out[32..40].copy_from_slice(&(self.head_written as u64).to_le_bytes());
    }
    pub fn decode(b: &[u8]) -> Self {
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        ZilHeader {
            head: Dva {
                vdev: u32at(0),
                asize: u32at(4),
                offset: u64at(8),
            },
            seq: u64at(16),
            guid: u64at(24),
            head_written: u64at(32) & 1 == 1,
        }
    }
}

/// A logged change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Write {
        obj: u64,
        off: u64,
        data: Arc<[u8]>,
    },
    Truncate {
        obj: u64,
        size: u64,
    },
    /// Object `obj` comes into existence, empty (replacing whatever had the id).
    Create {
        obj: u64,
        otype: u8,
        blksz: u32,
        gen: u64,
    },
    Delete {
        obj: u64,
    },
    /// The object's bonus becomes `data`, zero-padded to its full size.
    Bonus {
        obj: u64,
        data: Arc<[u8]>,
    },
    Punch {
        obj: u64,
        off: u64,
        len: u64,
    },
    /// `len` bytes were written at `off`; the log takes them from the object
    /// when it writes the record (copied, or by reference). In memory only: the
    /// leader always resolves it (`Zil::commit`), it is never encoded. Saves
    /// copying every large write into its itx, as ZFS's WR_NEED_COPY does: the
    /// bytes logged may include later writes of the range, which replay applies
    /// anyway or which were simply not fsynced yet.
    WriteLazy {
        obj: u64,
        off: u64,
        len: u64,
    },
    /// The first `len` bytes of the data block `bp` (already on disk) were
    /// written at `off`: a write logged by reference.
    WriteRef {
        obj: u64,
        off: u64,
        len: u64,
        bp: BlkPtr,
    },
}

impl Record {
    pub(super) fn encoded_len(&self) -> usize {
        RECORD_HEADER
            + match self {
                Record::Write { data, .. } | Record::Bonus { data, .. } => {
                    data.len().next_multiple_of(8)
                }
                Record::WriteRef { .. } => BLKPTR_SIZE,
                _ => 0,
            }
    }
}

/// One record of a decoded log block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRecord {
    pub txg: u64,
    /// More records of the same group follow (apply none until the last).
    pub more: bool,
    pub rec: Record,
}

/// Encode a log block: header, records, checksum. `size` is the allocation.
pub(super) fn encode_block(
    guid: u64,
    seq: u64,
    next: &Dva,
    recs: &[&Itx],
    sector: usize,
) -> Vec<u8> {
    let used: usize = BLOCK_HEADER + recs.iter().map(|i| i.rec.encoded_len()).sum::<usize>();
    let mut b = vec![0u8; used.next_multiple_of(sector)];
    b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&guid.to_le_bytes());
    b[16..24].copy_from_slice(&seq.to_le_bytes());
    b[24..28].copy_from_slice(&(used as u32).to_le_bytes());
    b[28..32].copy_from_slice(&(recs.len() as u32).to_le_bytes());
    b[32..36].copy_from_slice(&next.vdev.to_le_bytes());
    b[36..40].copy_from_slice(&next.asize.to_le_bytes());
    b[40..48].copy_from_slice(&next.offset.to_le_bytes());
    let mut o = BLOCK_HEADER;
    for itx in recs {
        encode_record(&mut b[o..], itx.txg, itx.more, &itx.rec);
        o += itx.rec.encoded_len();
    }
    let sum = checksum_of(&b[..used]);
    b[64..96].copy_from_slice(&sum);
    b
}

/// Encode one record at the start of `b` (which holds at least its encoded length).
fn encode_record(b: &mut [u8], txg: u64, more: bool, rec: &Record) {
    let (mut otype, mut blksz) = (0u8, 0u32);
    let (ty, obj, off, len, data): (u8, u64, u64, u64, &[u8]) = match rec {
        Record::Write { obj, off, data } => (REC_WRITE, *obj, *off, data.len() as u64, data),
        Record::Truncate { obj, size } => (REC_TRUNCATE, *obj, 0, *size, &[]),
        Record::Create {
            obj,
            otype: t,
            blksz: bs,
            gen,
        } => {
            (otype, blksz) = (*t, *bs);
            (REC_CREATE, *obj, *gen, 0, &[])
        }
        Record::Delete { obj } => (REC_DELETE, *obj, 0, 0, &[]),
        Record::Bonus { obj, data } => (REC_BONUS, *obj, 0, data.len() as u64, data),
        Record::Punch { obj, off, len } => (REC_PUNCH, *obj, *off, *len, &[]),
        Record::WriteRef { obj, off, len, bp } => {
            bp.encode(&mut b[RECORD_HEADER..RECORD_HEADER + BLKPTR_SIZE]);
            (REC_WRITE_REF, *obj, *off, *len, &[])
        }
        // Resolved before any block is packed (`by_reference`); an empty write,
        // should one ever get here, replays as nothing rather than as wrong bytes.
        Record::WriteLazy { obj, off, .. } => (REC_WRITE, *obj, *off, 0, &[]),
    };
    b[0] = ty;
    b[1] = if more { FLAG_MORE } else { 0 };
    b[2] = otype;
    b[3] = 0;
    b[4..8].copy_from_slice(&blksz.to_le_bytes());
    b[8..16].copy_from_slice(&txg.to_le_bytes());
    b[16..24].copy_from_slice(&obj.to_le_bytes());
    b[24..32].copy_from_slice(&off.to_le_bytes());
    b[32..40].copy_from_slice(&len.to_le_bytes());
    b[RECORD_HEADER..RECORD_HEADER + data.len()].copy_from_slice(data);
}

/// The records of a block as they would be encoded (for the fuzz target's
/// re-encoding check): `decode_records(&encode_records(r)) == r`.
pub fn encode_records(recs: &[LoggedRecord]) -> Vec<u8> {
    let len: usize = recs.iter().map(|r| r.rec.encoded_len()).sum();
    let mut b = vec![0u8; len];
    let mut o = 0;
    for r in recs {
        encode_record(&mut b[o..], r.txg, r.more, &r.rec);
        o += r.rec.encoded_len();
    }
    b
}

fn checksum_of(block: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(&block[0..64]);
    h.update(&block[96..]);
    *h.finalize().as_bytes()
}

/// A decoded block: its records, and the next block's location.
pub struct DecodedBlock {
    pub next: Dva,
    pub records: Vec<LoggedRecord>,
}

/// Check and decode a log block read from disk; `None` ends the chain.
pub fn decode_block(b: &[u8], guid: u64, seq: u64) -> Option<DecodedBlock> {
    if !valid_block(b, guid, seq) {
        return None;
    }
    let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let used = u32at(24) as usize;
    let n = u32at(28) as usize;
    let next = Dva {
        vdev: u32at(32),
        asize: u32at(36),
        offset: u64at(40),
    };
    let records = decode_records(&b[BLOCK_HEADER..used], n)?;
    Some(DecodedBlock { next, records })
}

/// Decode `n` records packed in `b`; `None` if they do not fit or one is
/// malformed.
pub fn decode_records(b: &[u8], n: usize) -> Option<Vec<LoggedRecord>> {
    // Each record takes at least its header: a count beyond that is corrupt (and
    // must not size an allocation; found by the intent_log_block fuzz target).
    if n > b.len() / RECORD_HEADER {
        return None;
    }
    let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let mut records = Vec::with_capacity(n);
    let mut o = 0;
    for _ in 0..n {
        if o + RECORD_HEADER > b.len() {
            return None;
        }
        let (ty, flags, txg, obj, off, len) = (
            b[o],
            b[o + 1],
            u64at(o + 8),
            u64at(o + 16),
            u64at(o + 24),
            u64at(o + 32),
        );
        if flags & !FLAG_MORE != 0 {
            return None;
        }
        // Bound a payload's length before using it (found by the intent_log_block
        // fuzz target: a huge length overflowed the end computation).
        let payload = |max: u64| -> Option<Arc<[u8]>> {
            if len > max {
                return None;
            }
            let end = o + RECORD_HEADER + len as usize;
            (end <= b.len()).then(|| b[o + RECORD_HEADER..end].into())
        };
        let rec = match ty {
            REC_WRITE => Record::Write {
                obj,
                off,
                data: payload(MAX_BLOCK)?,
            },
            REC_TRUNCATE => Record::Truncate { obj, size: len },
            REC_CREATE => {
                let (otype, blksz) = (b[o + 2], u32at(o + 4));
                if otype == 0
                    || !blksz.is_power_of_two()
                    || !(crate::dnode::MIN_BLOCK..=crate::dnode::MAX_BLOCK).contains(&blksz)
                {
                    return None;
                }
                Record::Create {
                    obj,
                    otype,
                    blksz,
                    gen: off,
                }
            }
            REC_DELETE => Record::Delete { obj },
            REC_BONUS => Record::Bonus {
                obj,
                data: payload(crate::dnode::BONUS_SIZE as u64)?,
            },
            REC_PUNCH => Record::Punch { obj, off, len },
            REC_WRITE_REF => {
                let end = o + RECORD_HEADER + BLKPTR_SIZE;
                let bp = BlkPtr::decode(b.get(o + RECORD_HEADER..end)?)?;
                // A level-0 data block no larger than an object's block, holding
                // at least the bytes written.
                if bp.is_hole()
                    || bp.level != 0
                    || bp.block_type != cachalot_pool::BlockType::Data
                    || bp.lsize > crate::dnode::MAX_BLOCK
                    || bp.psize > bp.lsize
                    || len == 0
                    || len > bp.lsize as u64
                {
                    return None;
                }
                Record::WriteRef { obj, off, len, bp }
            }
            _ => return None,
        };
        o += rec.encoded_len();
        records.push(LoggedRecord {
            txg,
            more: flags & FLAG_MORE != 0,
            rec,
        });
    }
    Some(records)
}

/// True if the bytes could be an unwritten log block on a dedicated log device:
/// zeros, or any (older) log block. Anything else there is damage.
pub fn looks_unwritten(b: &[u8]) -> bool {
    b.iter().all(|x| *x == 0)
        || (b.len() >= 8 && u64::from_le_bytes(b[0..8].try_into().unwrap()) == MAGIC)
}

/// Magic, guid, sequence and checksum all match.
pub fn valid_block(b: &[u8], guid: u64, seq: u64) -> bool {
    if b.len() < BLOCK_HEADER {
        return false;
    }
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let used = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    u64at(0) == MAGIC
        && u64at(8) == guid
        && u64at(16) == seq
        && (BLOCK_HEADER..=b.len()).contains(&used)
        && checksum_of(&b[..used]) == b[64..96]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn itx(txg: u64, more: bool, rec: Record) -> Itx {
        Itx {
            seq: 0,
            txg,
            more,
            rec,
        }
    }

    #[test]
    fn block_roundtrip_and_validation() {
        let itxs = [
            itx(
                5,
                false,
                Record::Write {
                    obj: 3,
                    off: 100,
                    data: vec![7u8; 1000].into(),
                },
            ),
            itx(6, false, Record::Truncate { obj: 3, size: 50 }),
        ];
        let refs: Vec<&Itx> = itxs.iter().collect();
        let next = Dva {
            vdev: 0,
            asize: 8192,
            offset: 4096,
        };
        let b = encode_block(42, 9, &next, &refs, 4096);
        let d = decode_block(&b, 42, 9).unwrap();
        assert_eq!(d.next, next);
        assert_eq!(d.records.len(), 2);
        assert_eq!(d.records[0].rec, itxs[0].rec);
        assert_eq!(
            d.records[1],
            LoggedRecord {
                txg: 6,
                more: false,
                rec: Record::Truncate { obj: 3, size: 50 }
            }
        );
        assert!(
            decode_block(&b, 42, 10).is_none(),
            "wrong sequence ends the chain"
        );
        assert!(
            decode_block(&b, 41, 9).is_none(),
            "wrong guid ends the chain"
        );
        let mut torn = b.clone();
        torn[200] ^= 1;
        assert!(
            decode_block(&torn, 42, 9).is_none(),
            "a torn block ends the chain"
        );
    }

    #[test]
    fn namespace_records_roundtrip_with_group_flags() {
        let recs = vec![
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Create {
                    obj: 77,
                    otype: 2,
                    blksz: 512,
                    gen: 8,
                },
            },
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Bonus {
                    obj: 77,
                    data: vec![1u8; 120].into(),
                },
            },
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Write {
                    obj: 4,
                    off: 1 << 32,
                    data: vec![2u8; 33].into(),
                },
            },
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Delete { obj: 12 },
            },
            LoggedRecord {
                txg: 9,
                more: false,
                rec: Record::Punch {
                    obj: 4,
                    off: 4096,
                    len: 1 << 40,
                },
            },
        ];
        let b = encode_records(&recs);
        assert_eq!(decode_records(&b, recs.len()).unwrap(), recs);
        // Bounds: a bonus longer than a bonus, a created object with an invalid
        // block size, an unknown flag: the chain ends there.
        let mut bad = b.clone();
        bad[RECORD_HEADER + 32..RECORD_HEADER + 40].copy_from_slice(&321u64.to_le_bytes());
        assert!(decode_records(&bad, recs.len()).is_none());
        let mut bad = b.clone();
        bad[4..8].copy_from_slice(&3000u32.to_le_bytes());
        assert!(decode_records(&bad, recs.len()).is_none());
        let mut bad = b.clone();
        bad[2] = 0;
        assert!(decode_records(&bad, recs.len()).is_none());
        let mut bad = b;
        bad[1] = 0x80;
        assert!(decode_records(&bad, recs.len()).is_none());
    }

    #[test]
    fn write_by_reference_roundtrips_and_is_bounded() {
        let bp = BlkPtr {
            dvas: [
                Dva {
                    vdev: 0,
                    asize: 16384,
                    offset: 1 << 20,
                },
                Dva::default(),
                Dva::default(),
            ],
            lsize: 16384,
            psize: 8192,
            compression: cachalot_pool::Compression::Lz4,
            block_type: cachalot_pool::BlockType::Data,
            birth_txg: 7,
            fill: 1,
            checksum: [3; 32],
            ..BlkPtr::HOLE
        };
        let recs = vec![LoggedRecord {
            txg: 7,
            more: false,
            rec: Record::WriteRef {
                obj: 5,
                off: 32768,
                len: 16384,
                bp,
            },
        }];
        let b = encode_records(&recs);
        assert_eq!(b.len(), RECORD_HEADER + BLKPTR_SIZE);
        assert_eq!(decode_records(&b, 1).unwrap(), recs);
        // Bytes written beyond the block, none, a hole, a metadata block, a
        // cut-off pointer: the chain ends there.
        let mut bad = b.clone();
        bad[32..40].copy_from_slice(&16385u64.to_le_bytes());
        assert!(decode_records(&bad, 1).is_none());
        let mut bad = b.clone();
        bad[32..40].copy_from_slice(&0u64.to_le_bytes());
        assert!(decode_records(&bad, 1).is_none());
        let mut bad = b.clone();
        bad[RECORD_HEADER + 64..RECORD_HEADER + 72].fill(0);
        assert!(decode_records(&bad, 1).is_none());
        let mut bad = b.clone();
        bad[RECORD_HEADER + 58] = cachalot_pool::BlockType::Dnode as u8;
        assert!(decode_records(&bad, 1).is_none());
        assert!(decode_records(&b[..b.len() - 8], 1).is_none());
    }
}
