//! Device labels and uberblocks.
//!
//! Every leaf device carries four 256 KiB labels, two at the start and two at the end,
//! so a device overwritten at either end still identifies itself. A label holds a
//! header with the pool configuration (JSON, self-describing so later versions can add
//! fields) and a ring of 32 uberblock slots.
//!
//! Invariants:
//! - The uberblock of txg T goes to slot T % 32 of every label of every device, and
//!   only after every block it references has been flushed. Slot T % 32 never holds
//!   the uberblock of T-1, so a torn uberblock write leaves the previous one intact.
//! - Import takes the valid uberblock (magic, checksum, pool guid) with the highest txg.

use crate::blkptr::{BlkPtr, BLKPTR_SIZE};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const LABEL_SIZE: u64 = 256 * 1024;
pub const LABEL_HEADER_SIZE: usize = 16 * 1024;
pub const UBER_RING_OFFSET: u64 = 16 * 1024;
pub const UBER_SLOTS: u64 = 32;
pub const UBER_SLOT_SIZE: u64 = 4096;
pub const UBER_SIZE: usize = 512;
/// Smallest device accepted: labels plus room for a useful pool.
pub const MIN_DEVICE_SIZE: u64 = 32 * 1024 * 1024;
/// Allocatable space starts after the two front labels.
pub const DATA_START: u64 = 2 * LABEL_SIZE;

const LABEL_MAGIC: &[u8; 8] = b"CACHALOT";
pub const LABEL_VERSION: u32 = 1;
const UBER_MAGIC: u64 = 0x0CAC_4A10_7B10_C5ED;
pub const UBER_VERSION: u32 = 1;

/// Device size usable for labels (rounded down to whole labels).
pub fn aligned_size(dev_size: u64) -> u64 {
    dev_size & !(LABEL_SIZE - 1)
}

/// Byte offsets of the four labels of a device of `dev_size` bytes.
pub fn label_offsets(dev_size: u64) -> [u64; 4] {
    let s = aligned_size(dev_size);
    [0, LABEL_SIZE, s - 2 * LABEL_SIZE, s - LABEL_SIZE]
}

/// Allocatable bytes of a leaf (between the front and back labels).
pub fn leaf_data_size(dev_size: u64) -> u64 {
    aligned_size(dev_size) - 4 * LABEL_SIZE
}

/// Kind of a top-level vdev. Raidz is reserved in the format for a later version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VdevKind {
    Disk,
    Mirror,
    Raidz1,
    Raidz2,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafConfig {
    pub guid: u64,
    pub path: PathBuf,
    /// A replacement whose resilver has not finished: import keeps it unread
    /// and the resilver starts again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resilvering: bool,
    /// Taken offline by the operator (`pool offline`): no I/O until `pool online`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offline: bool,
    /// First txg whose blocks this device may lack (its dirty time, a DTL in
    /// its simplest form): the txg that was open when it went offline. Kept
    /// while it resilvers after `pool online`, which then rebuilds only blocks
    /// born at or after it. 0 (absent): nothing recorded, so a resilvering
    /// device needs every block (a replacement, or one back from a fault).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offline_txg: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopVdevConfig {
    pub id: u32,
    pub guid: u64,
    pub kind: VdevKind,
    /// Allocatable bytes of this vdev's address space.
    pub asize: u64,
    pub children: Vec<LeafConfig>,
    /// A separate intent-log device (SLOG): holds only intent log blocks.
    #[serde(default)]
    pub log: bool,
}

/// The pool configuration, stored in every label.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolConfig {
    pub version: u32,
    pub name: String,
    pub guid: u64,
    pub ashift: u8,
    /// Txg at which this configuration was written; the newest wins at import.
    pub config_txg: u64,
    pub vdevs: Vec<TopVdevConfig>,
    /// Where an interrupted resilver continues (absent when none runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resilver_from: Option<ScanPos>,
    /// The `RESILVER_WALK` that saved `resilver_from`. A position saved by a
    /// walk that listed fewer blocks (absent: 0) does not say that the blocks
    /// before it are rebuilt, so the resilver starts again from the first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resilver_walk: u64,
    /// Hot spares not in use (see `spares`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spares: Vec<LeafConfig>,
    /// Cache devices (L2ARC, see `cache_vdev`): outside the data vdevs and the
    /// guid sum, so a missing one never stops an import.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache: Vec<LeafConfig>,
    /// Commits whose uberblock a leaf took into some of its rings but not all
    /// (a failed write): that leaf's rings do not show those txgs cut (see
    /// `import::torn_commit`). Entries older than the ring are dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ring_misses: Vec<RingMiss>,
}

/// The uberblock of `txg` did not reach every ring of leaf `leaf`: its write
/// failed on some label copies while the commit went on (`commit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingMiss {
    pub leaf: u64,
    pub txg: u64,
}

/// Which blocks a resilver's walk lists, stored with each saved position:
/// 0 (absent), the datasets' heads only; 1, snapshots' blocks too. Raised
/// whenever the walk comes to list blocks it did not, since such blocks may lie
/// before an older saved position without having been rebuilt.
pub const RESILVER_WALK: u64 = 1;

/// A position in a resilver's scan, which visits blocks in the order of their
/// first DVA `(vdev, offset)`: every block before it has been rebuilt on the
/// replacements and flushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ScanPos {
    pub vdev: u32,
    pub offset: u64,
}

impl PoolConfig {
    /// Where an interrupted resilver continues: the saved position, if the
    /// walk that saved it listed every block today's lists (else none: from
    /// the first block again).
    pub fn resilver_resume(&self) -> Option<ScanPos> {
        self.resilver_from
            .filter(|_| self.resilver_walk >= RESILVER_WALK)
    }

    /// The `config_txg` of a change made while txg `next_txg` is open: that
    /// txg, or one past the current one if that is newer (the end of a
    /// resilver records itself one past the last commit, which may be the
    /// open txg): each change must be newer than the last, or an import that
    /// finds only some labels rewritten may take the older configuration.
    pub fn next_config_txg(&self, next_txg: u64) -> u64 {
        next_txg.max(self.config_txg + 1)
    }

    /// Sum of leaf guids: an uberblock only belongs to a config with the same sum.
    pub fn guid_sum(&self) -> u64 {
        self.vdevs
            .iter()
            .flat_map(|v| v.children.iter())
            .fold(self.guid, |a, l| a.wrapping_add(l.guid))
    }
}

/// What a label header says about its device.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LabelHeader {
    pub config: PoolConfig,
    pub leaf_guid: u64,
    pub top_id: u32,
}

pub fn encode_header(h: &LabelHeader) -> Vec<u8> {
    let json = serde_json::to_vec(h).expect("label header serializes");
    assert!(
        json.len() + 48 <= LABEL_HEADER_SIZE,
        "pool config too large"
    );
    let mut out = vec![0u8; LABEL_HEADER_SIZE];
    out[0..8].copy_from_slice(LABEL_MAGIC);
    out[8..12].copy_from_slice(&LABEL_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
    out[16..48].copy_from_slice(blake3::hash(&json).as_bytes());
    out[48..48 + json.len()].copy_from_slice(&json);
    out
}

/// Decode a label header; `None` if it is not a valid cachalot label.
pub fn decode_header(b: &[u8]) -> Option<LabelHeader> {
    if b.len() < LABEL_HEADER_SIZE || &b[0..8] != LABEL_MAGIC {
        return None;
    }
    let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
    let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    if version != LABEL_VERSION || len + 48 > LABEL_HEADER_SIZE {
        return None;
    }
    let json = &b[48..48 + len];
    if blake3::hash(json).as_bytes() != &b[16..48] {
        return None;
    }
    serde_json::from_slice(json).ok()
}

/// The root of everything: written last in each transaction group commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Uberblock {
    pub txg: u64,
    pub pool_guid: u64,
    pub guid_sum: u64,
    pub timestamp_ns: u64,
    pub config_txg: u64,
    /// Root of the meta object set (catalog of datasets).
    pub mos: BlkPtr,
    /// Newest block of the space map log chain.
    pub sm_head: BlkPtr,
    /// Condensed space map the log chain applies to.
    pub sm_base: BlkPtr,
}

impl Uberblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; UBER_SLOT_SIZE as usize];
        b[0..8].copy_from_slice(&UBER_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&UBER_VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.txg.to_le_bytes());
        b[24..32].copy_from_slice(&self.pool_guid.to_le_bytes());
        b[32..40].copy_from_slice(&self.guid_sum.to_le_bytes());
        b[40..48].copy_from_slice(&self.timestamp_ns.to_le_bytes());
        b[48..56].copy_from_slice(&self.config_txg.to_le_bytes());
        self.mos.encode(&mut b[64..64 + BLKPTR_SIZE]);
        self.sm_head.encode(&mut b[192..192 + BLKPTR_SIZE]);
        self.sm_base.encode(&mut b[320..320 + BLKPTR_SIZE]);
        let sum = *blake3::hash(&b[0..480]).as_bytes();
        b[480..512].copy_from_slice(&sum);
        b
    }

    pub fn decode(b: &[u8]) -> Option<Uberblock> {
        if b.len() < UBER_SIZE {
            return None;
        }
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if u64at(0) != UBER_MAGIC
            || u32::from_le_bytes(b[8..12].try_into().unwrap()) != UBER_VERSION
            || blake3::hash(&b[0..480]).as_bytes() != &b[480..512]
        {
            return None;
        }
        Some(Uberblock {
            txg: u64at(16),
            pool_guid: u64at(24),
            guid_sum: u64at(32),
            timestamp_ns: u64at(40),
            config_txg: u64at(48),
            mos: BlkPtr::decode(&b[64..192])?,
            sm_head: BlkPtr::decode(&b[192..320])?,
            sm_base: BlkPtr::decode(&b[320..448])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_uberblock_roundtrip() {
        let h = LabelHeader {
            config: PoolConfig {
                version: 1,
                name: "tank".into(),
                guid: 42,
                ashift: 12,
                config_txg: 3,
                vdevs: vec![TopVdevConfig {
                    id: 0,
                    guid: 7,
                    kind: VdevKind::Mirror,
                    asize: 1 << 30,
                    children: vec![LeafConfig {
                        guid: 8,
                        path: "/tmp/a".into(),
                        resilvering: true,
                        offline: false,
                        offline_txg: 17,
                    }],
                    log: false,
                }],
                resilver_from: Some(ScanPos {
                    vdev: 0,
                    offset: 1 << 20,
                }),
                resilver_walk: RESILVER_WALK,
                spares: vec![],
                cache: vec![],
                ring_misses: vec![RingMiss { leaf: 8, txg: 9 }],
            },
            leaf_guid: 8,
            top_id: 0,
        };
        let enc = encode_header(&h);
        let d = decode_header(&enc).unwrap();
        assert_eq!(d.config, h.config);
        assert_eq!(d.config.resilver_resume(), h.config.resilver_from);
        // A position an older walk saved (no `resilver_walk` in its label)
        // is not resumed from: that walk skipped snapshots' blocks.
        let mut old = h.config.clone();
        old.resilver_walk = 0;
        let old_json = String::from_utf8(serde_json::to_vec(&old).unwrap()).unwrap();
        assert!(!old_json.contains("resilver_walk"), "{old_json}");
        let old: PoolConfig = serde_json::from_str(&old_json).unwrap();
        assert_eq!(old.resilver_resume(), None);
        let mut bad = enc.clone();
        bad[60] ^= 1;
        assert!(decode_header(&bad).is_none());

        let ub = Uberblock {
            txg: 9,
            pool_guid: 42,
            guid_sum: 57,
            timestamp_ns: 1,
            config_txg: 3,
            mos: BlkPtr::HOLE,
            sm_head: BlkPtr::HOLE,
            sm_base: BlkPtr::HOLE,
        };
        let mut e = ub.encode();
        assert_eq!(Uberblock::decode(&e), Some(ub));
        e[20] ^= 1;
        assert_eq!(Uberblock::decode(&e), None);
    }
}
