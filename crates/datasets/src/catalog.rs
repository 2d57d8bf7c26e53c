//! The dataset catalog: every dataset's name, parent, kind, local properties,
//! object set root and accounting. Stored as JSON (self-describing, so later
//! versions can add fields) in object 1 of the meta object set; rewritten in every
//! transaction group that changed it.
//!
//! Invariant: the catalog written in txg T names exactly the object set roots
//! written in txg T (or earlier, for datasets unchanged in T).

use cachalot_objects::Accounting;
use cachalot_pool::BlkPtr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const CATALOG_VERSION: u32 = 1;
/// Object id of the catalog in the meta object set.
pub const CATALOG_OBJECT: u64 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetKind {
    Filesystem,
    Volume,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctRecord {
    pub used: u64,
    pub logical: u64,
    pub physical: u64,
    pub data_logical: u64,
    pub data_physical: u64,
}

impl From<Accounting> for AcctRecord {
    fn from(a: Accounting) -> Self {
        AcctRecord {
            used: a.used,
            logical: a.logical,
            physical: a.physical,
            data_logical: a.data_logical,
            data_physical: a.data_physical,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DatasetRecord {
    pub id: u64,
    pub name: String,
    pub parent: Option<u64>,
    pub kind: DatasetKind,
    /// Locally set properties, canonical values.
    pub props: BTreeMap<String, String>,
    #[serde(with = "bp_hex")]
    pub objset: BlkPtr,
    /// Unix seconds.
    pub creation: u64,
    pub acct: AcctRecord,
    /// Volumes: block size of the volume object.
    #[serde(default)]
    pub volblocksize: Option<u32>,
    /// Txg of the newest snapshot (or of the origin, for a clone): blocks born at
    /// or before it are held by a snapshot and go to the dead list when killed.
    #[serde(default)]
    pub prev_snap_txg: u64,
    /// MOS object holding the head's dead list (0: none yet).
    #[serde(default)]
    pub deadlist: u64,
    #[serde(default)]
    pub deadlist_bytes: u64,
    /// Snapshots, oldest first.
    #[serde(default)]
    pub snapshots: Vec<SnapshotRecord>,
    /// A clone's origin: dataset id and snapshot name.
    #[serde(default)]
    pub origin: Option<(u64, String)>,
    /// The origin snapshot's txg (0 for a dataset that is not a clone).
    #[serde(default)]
    pub origin_txg: u64,
    /// The head's root is still its snapshot's, as a rollback left it, until the
    /// head writes a root of its own. The intent log header in that root is the
    /// one the head had when the snapshot was taken: its blocks were freed since
    /// and may hold other data, so an import must neither claim nor replay them
    /// (it opens the head with a fresh log).
    #[serde(default, skip_serializing_if = "is_false")]
    pub root_from_snapshot: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl DatasetRecord {
    /// A new, empty dataset (no object set yet, no snapshots, not a clone).
    pub fn new(
        id: u64,
        name: &str,
        parent: Option<u64>,
        kind: DatasetKind,
        props: BTreeMap<String, String>,
        creation: u64,
    ) -> Self {
        DatasetRecord {
            id,
            name: name.to_string(),
            parent,
            kind,
            props,
            objset: BlkPtr::HOLE,
            creation,
            acct: AcctRecord::default(),
            volblocksize: None,
            prev_snap_txg: 0,
            deadlist: 0,
            deadlist_bytes: 0,
            snapshots: vec![],
            origin: None,
            origin_txg: 0,
            root_from_snapshot: false,
        }
    }
}

/// A snapshot: a kept object set root plus the dead list of blocks the previous
/// snapshot referenced and this one does not.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub name: String,
    pub txg: u64,
    #[serde(with = "bp_hex")]
    pub objset: BlkPtr,
    pub deadlist: u64,
    pub deadlist_bytes: u64,
    pub creation: u64,
    pub acct: AcctRecord,
    /// User properties (binlog positions recorded by the MySQL integration...).
    #[serde(default)]
    pub props: BTreeMap<String, String>,
    /// Identity kept across send and receive: an incremental stream applies only on
    /// top of a snapshot with the guid it was made from.
    #[serde(default)]
    pub guid: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Catalog {
    pub version: u32,
    pub next_id: u64,
    pub datasets: BTreeMap<u64, DatasetRecord>,
}

impl Catalog {
    pub fn by_name(&self, name: &str) -> Option<&DatasetRecord> {
        self.datasets.values().find(|d| d.name == name)
    }
    pub fn children(&self, id: u64) -> impl Iterator<Item = &DatasetRecord> {
        self.datasets.values().filter(move |d| d.parent == Some(id))
    }
    /// The dataset and all its descendants, parents before children.
    pub fn subtree(&self, id: u64) -> Vec<u64> {
        let mut out = vec![id];
        let mut i = 0;
        while i < out.len() {
            let cur = out[i];
            out.extend(self.children(cur).map(|c| c.id));
            i += 1;
        }
        out
    }
    /// The dataset and its ancestors, nearest first.
    pub fn ancestry(&self, id: u64) -> Vec<u64> {
        let mut out = vec![id];
        let mut cur = id;
        while let Some(p) = self.datasets.get(&cur).and_then(|d| d.parent) {
            if out.contains(&p) {
                break;
            }
            out.push(p);
            cur = p;
        }
        out
    }
}

mod bp_hex {
    use cachalot_pool::BlkPtr;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bp: &BlkPtr, s: S) -> Result<S::Ok, S::Error> {
        let b = bp.to_bytes();
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        s.serialize_str(&hex)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BlkPtr, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() != 256 {
            return Err(serde::de::Error::custom(
                "block pointer must be 256 hex digits",
            ));
        }
        let bytes: Result<Vec<u8>, _> = (0..128)
            .map(|i| u8::from_str_radix(&s[i * 2..i * 2 + 2], 16))
            .collect();
        let bytes = bytes.map_err(serde::de::Error::custom)?;
        BlkPtr::decode(&bytes).ok_or_else(|| serde::de::Error::custom("malformed block pointer"))
    }
}
