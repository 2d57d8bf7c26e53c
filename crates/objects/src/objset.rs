//! Object sets: numbered objects made of records, stored as copy-on-write trees of
//! block pointers, changed in memory and written out once per transaction group.
//!
//! Big picture. Writers change records in the *open* layer of an object (whole
//! records, read-modify-write for partial ones). When a transaction group syncs,
//! every open layer becomes the *syncing* layer and a fresh open layer starts, so
//! writers continue while the sync writes blocks. Readers look in the open layer,
//! then the syncing layer, then the last synced tree. A truncate marks `free_from`
//! in its layer: blocks at or past it in lower layers read as holes.
//!
//! The object set is cut along that path: `write` (writes, punches, truncates
//! into the open layer), `read` (the read path and tree queries), `sync` (a txg's
//! layers written into the tree), `lifecycle` (objects created, deleted,
//! received), `accounting` (space), `alloc` (allocated bytes per object),
//! `prewrite` (blocks written early for the intent log), `compression`,
//! `traverse`; the intent log's replay is beside the log (`zil::replay`).
//!
//! Invariants:
//! - An object's `phys` is its tree as of the last sync; its `open` layer holds
//!   the changes of the open txg, its `syncing` layer those of the txg a sync is
//!   writing. A record in a higher layer hides the lower ones, and a layer's
//!   `free_from` hides lower blocks at or past it (`ObjState::in_memory`).
//! - Only `sync` changes a tree and the meta-dnode (see `sync`); everything
//!   else changes the open layer and the object's attributes under `inner`.

use crate::cache::{BlockCache, CachePolicy};
use crate::dnode::*;
use crate::readahead::ReadAhead;
use crate::zil::{Zil, ZilHeader};

mod accounting;
mod alloc;
mod compression;
mod lifecycle;
mod prewrite;
mod read;
mod sync;
mod traverse;
mod write;
pub use crate::zil::ReplayReport;
pub use accounting::Accounting;
use accounting::{add_acct, decode_acct};
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::{BlkPtr, Compression, PoolError};
use compression::CompressionProbe;
use parking_lot::{Mutex, RwLock};
pub use read::ReadFrom;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
pub use sync::FreeFn;
pub use traverse::{changed_objects, traverse, ChangedObjects};

/// Errors of the object layer.
#[derive(Debug, thiserror::Error)]
pub enum ObjError {
    #[error("no such object {0}")]
    NoSuchObject(u64),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Pool(#[from] PoolError),
}

pub type Result<T> = std::result::Result<T, ObjError>;

/// Properties the object layer honours.
#[derive(Clone, Copy, Debug)]
pub struct ObjsetProps {
    pub recordsize: u32,
    pub compression: Compression,
    /// primarycache and secondarycache.
    pub cache: CachePolicy,
}

impl Default for ObjsetProps {
    fn default() -> Self {
        ObjsetProps {
            recordsize: 128 * 1024,
            compression: Compression::Lz4,
            cache: CachePolicy::ALL,
        }
    }
}

/// Attributes of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    pub id: u64,
    pub otype: u8,
    pub blksz: u32,
    pub size: u64,
    pub gen: u64,
    pub bonus: [u8; BONUS_SIZE],
}

/// A record found in the in-memory layers: Some(rec), Some(None) = hole by truncate,
/// None = not in memory (read the tree).
type LayerHit = Option<Option<Arc<[u8]>>>;

#[derive(Default)]
struct Layer {
    records: BTreeMap<u64, Arc<[u8]>>,
    free_from: Option<u64>,
}

impl Layer {
    /// Some(Some(rec)) found, Some(None) hole by truncate, None: look lower.
    fn lookup(&self, blkid: u64) -> Option<Option<&Arc<[u8]>>> {
        if let Some(r) = self.records.get(&blkid) {
            return Some(Some(r));
        }
        if self.free_from.is_some_and(|f| blkid >= f) {
            return Some(None);
        }
        None
    }
}

struct ObjState {
    /// Tree state as of the last sync.
    phys: DnodePhys,
    otype: u8,
    blksz: u32,
    size: u64,
    gen: u64,
    bonus: [u8; BONUS_SIZE],
    open: Layer,
    syncing: Option<Arc<Layer>>,
    dirty: bool,
    deleted: bool,
    syncing_deleted: bool,
    /// The correction `allocated_bytes` applies to `phys.used` (see `alloc`).
    alloc: alloc::AllocDelta,
}

impl ObjState {
    fn from_phys(phys: DnodePhys) -> Self {
        ObjState {
            otype: phys.otype,
            blksz: phys.blksz,
            size: phys.size,
            gen: phys.gen,
            bonus: phys.bonus,
            phys,
            open: Layer::default(),
            syncing: None,
            dirty: false,
            deleted: false,
            syncing_deleted: false,
            alloc: alloc::AllocDelta::default(),
        }
    }
    /// Record `blkid` as the open or else the syncing txg holds it: `Some(None)`
    /// a hole made there, `None` when neither has it (the tree's copy counts).
    fn in_memory(&self, blkid: u64) -> Option<Option<&Arc<[u8]>>> {
        [Some(&self.open), self.syncing.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|layer| layer.lookup(blkid))
    }

    fn info(&self, id: u64) -> ObjectInfo {
        ObjectInfo {
            id,
            otype: self.otype,
            blksz: self.blksz,
            size: self.size,
            gen: self.gen,
            bonus: self.bonus,
        }
    }
}

pub(crate) struct Inner {
    meta: DnodePhys,
    root_bp: BlkPtr,
    acct: Accounting,
    objects: HashMap<u64, ObjState>,
    dirty_bytes: u64,
    syncing_bytes: u64,
    next_id_hint: u64,
    /// Txg of the open transaction group (object generations).
    open_txg: u64,
    /// Intent log header recorded in the last written root block.
    pub(crate) zil_header: ZilHeader,
    /// The root on disk carries a header that is not ours (a clone or rollback
    /// opened a snapshot's root): the next sync must write a root of our own.
    force_root: bool,
}

/// An object set.
pub struct ObjectSet {
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) inner: Mutex<Inner>,
    sync_lock: Mutex<()>,
    /// Held shared by multi-object operations (`ObjectSet::hold_txg`) and exclusively
    /// by the freeze of a sync, so an operation's changes all land in one txg.
    gate: RwLock<()>,
    props: RwLock<ObjsetProps>,
    pub(crate) zil: Zil,
    /// Data blocks in a row whose compression did not pay (see `CompressionProbe`).
    incompressible: CompressionProbe,
    /// Blocks written early for writes logged by reference (see `prewrite`).
    overrides: Mutex<prewrite::Overrides>,
    /// Sequential streams of readers, for read-ahead (see `read`).
    readahead: Mutex<ReadAhead>,
}

fn resized(r: &Arc<[u8]>, blksz: u32) -> Arc<[u8]> {
    if r.len() == blksz as usize {
        return r.clone();
    }
    let mut v = r.to_vec();
    v.resize(blksz as usize, 0);
    v.into()
}

fn corrupt(bp: &BlkPtr, what: &str) -> ObjError {
    ObjError::Pool(PoolError::Corrupt {
        vdev: bp.dvas[0].vdev,
        offset: bp.dvas[0].offset,
        what: what.into(),
    })
}

/// Decode an indirect block read from disk (fuzz target entry point).
pub fn decode_indirect(block: &[u8]) -> Result<Vec<BlkPtr>> {
    decode_ptrs(block, &BlkPtr::HOLE)
}

fn decode_ptrs(block: &[u8], bp: &BlkPtr) -> Result<Vec<BlkPtr>> {
    if block.len() != INDIRECT_SIZE {
        return Err(corrupt(bp, "indirect block has the wrong size"));
    }
    block
        .chunks(BLKPTR_SIZE)
        .map(|c| BlkPtr::decode(c).ok_or_else(|| corrupt(bp, "malformed block pointer")))
        .collect()
}

impl ObjectSet {
    /// A new, empty object set (not yet on disk).
    pub fn create(cache: Arc<BlockCache>, props: ObjsetProps, txg: u64) -> Self {
        let mut meta = DnodePhys::empty();
        meta.otype = 1;
        meta.blksz = DNODE_BLOCK_SIZE;
        ObjectSet::assemble(
            cache,
            props,
            meta,
            BlkPtr::HOLE,
            Accounting::default(),
            ZilHeader::default(),
            txg,
        )
    }

    /// Open a snapshot's root as a new head (clone, rollback) or for reading: the
    /// intent log header in that root belongs to the dataset the snapshot was taken
    /// from, so it is ignored and the next sync writes a root with our own.
    pub fn open_fresh_log(
        cache: Arc<BlockCache>,
        props: ObjsetProps,
        root: &BlkPtr,
        txg: u64,
    ) -> Result<Self> {
        let fresh = ObjectSet::open_ignoring_log(cache, props, root, txg)?;
        fresh.inner.lock().force_root = true;
        Ok(fresh)
    }

    /// Open a root whose intent log header is not this object set's (a head a
    /// rollback left at its snapshot's root): the header is neither replayed nor
    /// claimed, and the log starts afresh. Unlike `open_fresh_log` the root is not
    /// rewritten for that alone: it is when the object set changes or its new log
    /// records a header.
    pub fn open_ignoring_log(
        cache: Arc<BlockCache>,
        props: ObjsetProps,
        root: &BlkPtr,
        txg: u64,
    ) -> Result<Self> {
        let os = ObjectSet::open(cache.clone(), props, root, txg)?;
        let fresh = ObjectSet {
            zil: Zil::new(cache.pool.clone(), ZilHeader::default()),
            incompressible: CompressionProbe::default(),
            ..os
        };
        fresh.inner.lock().zil_header = ZilHeader::default();
        Ok(fresh)
    }

    /// Open an object set from its root block pointer.
    pub fn open(
        cache: Arc<BlockCache>,
        props: ObjsetProps,
        root: &BlkPtr,
        txg: u64,
    ) -> Result<Self> {
        if root.is_hole() {
            return Ok(ObjectSet::create(cache, props, txg));
        }
        let block = cache.read(root, props.cache)?;
        let meta =
            decode_objset(&block).ok_or_else(|| corrupt(root, "malformed object set root"))?;
        let mut acct = decode_acct(&block);
        add_acct(&mut acct, root);
        let zh = ZilHeader::decode(&block[ZIL_HEADER_OFFSET..ZIL_HEADER_OFFSET + ZilHeader::SIZE]);
        Ok(ObjectSet::assemble(
            cache, props, meta, *root, acct, zh, txg,
        ))
    }

    fn assemble(
        cache: Arc<BlockCache>,
        props: ObjsetProps,
        meta: DnodePhys,
        root_bp: BlkPtr,
        acct: Accounting,
        zil_header: ZilHeader,
        txg: u64,
    ) -> Self {
        ObjectSet {
            zil: Zil::new(cache.pool.clone(), zil_header),
            incompressible: CompressionProbe::default(),
            overrides: Mutex::default(),
            readahead: Mutex::default(),
            cache,
            inner: Mutex::new(Inner {
                meta,
                root_bp,
                acct,
                objects: HashMap::new(),
                dirty_bytes: 0,
                syncing_bytes: 0,
                next_id_hint: 1,
                open_txg: txg,
                zil_header,
                force_root: false,
            }),
            sync_lock: Mutex::new(()),
            gate: RwLock::new(()),
            props: RwLock::new(props),
        }
    }

    /// Keep the open txg from being frozen while the guard lives: every change made
    /// under it belongs to the same transaction group. Never block on a commit
    /// (throttling, fsync) and never take a second hold while holding it: a waiting
    /// freeze would deadlock them.
    pub fn hold_txg(&self) -> parking_lot::RwLockReadGuard<'_, ()> {
        self.gate.read()
    }

    /// The object set's intent log.
    pub fn zil(&self) -> &Zil {
        &self.zil
    }

    /// The txg changes made now belong to (stable while `hold_txg` is held).
    pub fn open_txg(&self) -> u64 {
        self.inner.lock().open_txg
    }

    /// Tell the log that `txg` committed (with the header this object set wrote).
    pub fn txg_committed(&self, txg: u64) {
        let zh = self.inner.lock().zil_header;
        self.zil.txg_committed(txg, &zh);
    }

    pub fn props(&self) -> ObjsetProps {
        *self.props.read()
    }
    pub fn set_props(&self, p: ObjsetProps) {
        *self.props.write() = p;
    }
    /// Root block pointer as of the last sync.
    pub fn root_bp(&self) -> BlkPtr {
        self.inner.lock().root_bp
    }
    /// Accounting as of the last sync.
    pub fn accounting(&self) -> Accounting {
        self.inner.lock().acct
    }
    /// Bytes changed in the open transaction group and in the one syncing.
    pub fn dirty_bytes(&self) -> u64 {
        let i = self.inner.lock();
        i.dirty_bytes + i.syncing_bytes
    }
    pub fn is_dirty(&self) -> bool {
        self.inner.lock().objects.values().any(|o| o.dirty)
    }
    pub fn cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }

    /// Walk a tree to the pointer of level-0 block `blkid`.
    fn lookup(&self, phys: &DnodePhys, blkid: u64) -> Result<BlkPtr> {
        Ok(self.lookup_run(phys, blkid)?.0)
    }

    /// Walk a tree to the pointer of level-0 block `blkid`, and say for how many
    /// blocks from `blkid` on the answer holds: 1 for data, the rest of the
    /// hole's subtree for a hole (so sparse ranges are skipped a subtree at a time).
    fn lookup_run(&self, phys: &DnodePhys, blkid: u64) -> Result<(BlkPtr, u64)> {
        read::walk(
            &self.cache,
            phys,
            blkid,
            read::Want::Demand,
            self.props().cache,
        )
    }

    fn read_tree_record(
        &self,
        phys: &DnodePhys,
        blkid: u64,
        policy: CachePolicy,
    ) -> Result<Option<Arc<[u8]>>> {
        read::tree_record(&self.cache, phys, blkid, policy)
    }

    /// How dnode blocks are cached: always in the ARC (whatever
    /// primarycache says of data), offered to the L2ARC as secondarycache says.
    fn dnode_policy(&self) -> CachePolicy {
        CachePolicy {
            arc_data: true,
            ..self.props().cache
        }
    }

    /// The dnode of `id` as of the last sync.
    fn read_dnode(&self, meta: &DnodePhys, id: u64) -> Result<DnodePhys> {
        let blkid = id / DNODES_PER_BLOCK;
        let Some(block) = self.read_tree_record(meta, blkid, self.dnode_policy())? else {
            return Ok(DnodePhys::empty());
        };
        let slot = (id % DNODES_PER_BLOCK) as usize * DNODE_SIZE;
        if block.len() < slot + DNODE_SIZE {
            return Ok(DnodePhys::empty());
        }
        DnodePhys::decode(&block[slot..slot + DNODE_SIZE])
            .ok_or_else(|| ObjError::Invalid(format!("object {id}: malformed dnode")))
    }

    /// Load an object's state into memory if needed.
    fn load<'a>(&self, inner: &'a mut Inner, id: u64) -> Result<&'a mut ObjState> {
        if id == 0 {
            return Err(ObjError::NoSuchObject(0));
        }
        if !inner.objects.contains_key(&id) {
            let phys = self.read_dnode(&inner.meta, id)?;
            if phys.is_free() {
                return Err(ObjError::NoSuchObject(id));
            }
            inner.objects.insert(id, ObjState::from_phys(phys));
        }
        let st = inner.objects.get_mut(&id).unwrap();
        if st.deleted {
            return Err(ObjError::NoSuchObject(id));
        }
        Ok(st)
    }
}

/// Where the intent log header sits in the object set root block.
pub const ZIL_HEADER_OFFSET: usize = 64 + DNODE_SIZE;
