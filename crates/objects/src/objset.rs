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
//! Invariants:
//! - Only `sync` changes a tree (`phys.root`, `nlevels`, `used`) and the object set's
//!   meta-dnode; one sync runs at a time (`sync_lock`).
//! - Blocks replaced by a sync are handed to the free callback; the pool keeps them
//!   unallocated until the next commit, so a reader holding the old tree still reads
//!   valid bytes.
//! - An object id is reused only after the sync that freed its dnode.
//! - Accounting (`used`, logical and physical bytes) changes only with births and
//!   frees of blocks in sync, so it equals the sum over the tree at every commit.

use crate::cache::{BlockCache, CachePolicy};
use crate::dnode::*;
use crate::payload::{zeroed, Payload};
use crate::readahead::ReadAhead;
use crate::zil::{Record, Zil, ZilHeader};

mod alloc;
mod prewrite;
mod read;
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::{BlkPtr, BlockType, Compression, PoolError, WriteOpts};
use parking_lot::{Mutex, RwLock};
pub use read::ReadFrom;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

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

struct Inner {
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
    zil_header: ZilHeader,
    /// The root on disk carries a header that is not ours (a clone or rollback
    /// opened a snapshot's root): the next sync must write a root of our own.
    force_root: bool,
}

/// An object set.
pub struct ObjectSet {
    cache: Arc<BlockCache>,
    inner: Mutex<Inner>,
    sync_lock: Mutex<()>,
    /// Held shared by multi-object operations (`ObjectSet::hold_txg`) and exclusively
    /// by the freeze of a sync, so an operation's changes all land in one txg.
    gate: RwLock<()>,
    props: RwLock<ObjsetProps>,
    zil: Zil,
    /// Data blocks in a row whose compression did not pay (see `CompressionProbe`).
    incompressible: CompressionProbe,
    /// Blocks written early for writes logged by reference (see `prewrite`).
    overrides: Mutex<prewrite::Overrides>,
    /// Sequential streams of readers, for read-ahead (see `read`).
    readahead: Mutex<ReadAhead>,
}

/// Skips compressing data that keeps not compressing, as btrfs's heuristics do:
/// after `STREAK` data blocks in a row that compression could not shrink by 1/8,
/// only one block in `PROBE_EVERY` is tried, until one compresses again. On
/// incompressible data (random InnoDB rows measured 1.03x) this saves most of the
/// lz4 time of a commit (13% of the daemon's CPU under sysbench); when the data
/// turns compressible again, it is noticed within `PROBE_EVERY` blocks.
#[derive(Default)]
struct CompressionProbe {
    streak: std::sync::atomic::AtomicU64,
    skipped: std::sync::atomic::AtomicU64,
}

impl CompressionProbe {
    const STREAK: u64 = 64;
    const PROBE_EVERY: u64 = 16;

    /// The compression to try for the next data block.
    fn choose(&self, configured: Compression) -> Compression {
        use std::sync::atomic::Ordering::Relaxed;
        if configured == Compression::Off || self.streak.load(Relaxed) < Self::STREAK {
            return configured;
        }
        if self.skipped.fetch_add(1, Relaxed) % Self::PROBE_EVERY == Self::PROBE_EVERY - 1 {
            configured
        } else {
            Compression::Off
        }
    }

    /// Record the outcome of a block written with `tried`.
    fn outcome(&self, tried: Compression, bp: &BlkPtr) {
        use std::sync::atomic::Ordering::Relaxed;
        if tried == Compression::Off {
            return;
        }
        if bp.compression == Compression::Off {
            self.streak.fetch_add(1, Relaxed);
        } else {
            self.streak.store(0, Relaxed);
            self.skipped.store(0, Relaxed);
        }
    }
}

/// The callback that receives every block a sync releases.
pub type FreeFn<'a> = &'a mut dyn FnMut(&BlkPtr);

struct SyncCtx<'a> {
    txg: u64,
    free: FreeFn<'a>,
    acct_add: Accounting,
    acct_sub: Accounting,
    compression: Compression,
}

impl SyncCtx<'_> {
    fn born(&mut self, bp: &BlkPtr) {
        add_acct(&mut self.acct_add, bp);
    }
    fn kill(&mut self, bp: &BlkPtr) {
        if bp.is_hole() {
            return;
        }
        add_acct(&mut self.acct_sub, bp);
        (self.free)(bp);
    }
}

fn add_acct(a: &mut Accounting, bp: &BlkPtr) {
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

    /// Create an object of type `otype` (non-zero). Returns its id.
    pub fn create_object(&self, otype: u8) -> Result<u64> {
        if otype == 0 {
            return Err(ObjError::Invalid("object type 0 is reserved".into()));
        }
        let mut inner = self.inner.lock();
        let mut id = inner.next_id_hint.max(1);
        loop {
            if !inner.objects.contains_key(&id) && self.read_dnode(&inner.meta, id)?.is_free() {
                break;
            }
            id += 1;
        }
        inner.next_id_hint = id + 1;
        let gen = inner.open_txg;
        let mut st = ObjState::from_phys(DnodePhys::empty());
        st.otype = otype;
        st.gen = gen;
        st.blksz = MIN_BLOCK;
        st.dirty = true;
        inner.objects.insert(id, st);
        Ok(id)
    }

    /// Delete an object and free its blocks at the next sync.
    pub fn delete_object(&self, id: u64) -> Result<()> {
        let mut inner = self.inner.lock();
        let st = self.load(&mut inner, id)?;
        let dropped = st.drop_records();
        st.deleted = true;
        st.dirty = true;
        st.size = 0;
        inner.dirty_bytes -= dropped;
        self.readahead.lock().forget(id);
        if id < inner.next_id_hint {
            // The id becomes reusable after the sync; scanning from it is cheap.
            inner.next_id_hint = id;
        }
        Ok(())
    }

    pub fn info(&self, id: u64) -> Result<ObjectInfo> {
        let mut inner = self.inner.lock();
        Ok(self.load(&mut inner, id)?.info(id))
    }

    pub fn exists(&self, id: u64) -> bool {
        self.info(id).is_ok()
    }

    /// The last synced pointer of level-0 block `blkid` of object `id` (for a
    /// snapshot: its tree). Send compares these to skip unchanged blocks.
    pub fn block_pointer(&self, id: u64, blkid: u64) -> Result<BlkPtr> {
        Ok(self.block_pointer_run(id, blkid)?.0)
    }

    /// The synced pointer of block `blkid` of object `id` and how many blocks from
    /// `blkid` on it stands for (see `lookup_run`).
    pub fn block_pointer_run(&self, id: u64, blkid: u64) -> Result<(BlkPtr, u64)> {
        let phys = {
            let mut inner = self.inner.lock();
            self.load(&mut inner, id)?.phys.clone()
        };
        self.lookup_run(&phys, blkid)
    }

    /// Make `[off, off + len)` of object `id` read as zeros, whole records becoming
    /// holes. The work is bounded by the records that hold data in the range, not
    /// by its length (a received stream may name 2^60 bytes), because the synced
    /// tree is walked a hole subtree at a time.
    pub fn punch(&self, id: u64, off: u64, len: u64) -> Result<()> {
        let policy = self.props().cache;
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        self.load(inner, id)?;
        let st = inner.objects.get_mut(&id).unwrap();
        let end = off.saturating_add(len).min(st.size);
        if off >= end {
            return Ok(());
        }
        let bs = st.blksz as u64;
        let (first, last) = (off / bs, (end - 1) / bs);
        let mut targets: BTreeSet<u64> = BTreeSet::new();
        for layer in [Some(&st.open), st.syncing.as_deref()]
            .into_iter()
            .flatten()
        {
            targets.extend(layer.records.range(first..=last).map(|(k, _)| *k));
        }
        let mut b = first;
        while b <= last {
            let (bp, run) = self.lookup_run(&st.phys, b)?;
            if !bp.is_hole() {
                targets.insert(b);
            }
            b = b.saturating_add(run.max(1));
        }
        // Tree reads above happen under the lock: punch is rare (receive), and
        // each read is of an indirect block the walk needs anyway.
        for blkid in targets {
            let (a, z) = (blkid * bs, (blkid + 1) * bs);
            let rec: Arc<[u8]> = if off <= a && end >= z {
                Arc::from(Vec::new())
            } else {
                let Some(r) = self.get_record(st, blkid, policy)? else {
                    continue;
                };
                let range = (off.max(a) - a) as usize..(end.min(z) - a) as usize;
                if r[range.clone()].iter().all(|b| *b == 0) {
                    // Already zeros (a punched record reads so): leave a hole a hole.
                    continue;
                }
                let mut v = r.to_vec();
                v[range].fill(0);
                v.into()
            };
            Self::put_record(&mut inner.dirty_bytes, st, blkid, rec);
        }
        Ok(())
    }

    /// Data and hole runs of blocks `first..=last` of object `id` as the object
    /// reads now: the open layer first, then the syncing layer, then the synced
    /// tree (so writes and punches not yet committed are seen). Each run is
    /// `(first block, block count, holds data)`; adjacent runs of one kind are
    /// merged. A dirty record of zeros counts as data until a sync turns it into a
    /// hole. Work is bounded by the dirty records and data blocks in the range:
    /// holes in the tree are skipped a subtree at a time.
    pub fn allocation_runs(&self, id: u64, first: u64, last: u64) -> Result<Vec<(u64, u64, bool)>> {
        if last < first {
            return Ok(Vec::new());
        }
        // What the layers say, taken under the lock; the tree is walked without it.
        let (phys, overrides, free_from) = {
            let mut inner = self.inner.lock();
            let st = self.load(&mut inner, id)?;
            let open_ff = st.open.free_from.unwrap_or(u64::MAX);
            let mut overrides: BTreeMap<u64, bool> = BTreeMap::new();
            let mut free_from = open_ff;
            if let Some(sy) = st.syncing.as_deref() {
                for (b, r) in sy.records.range(first..=last) {
                    if *b < open_ff {
                        overrides.insert(*b, !r.is_empty());
                    }
                }
                free_from = free_from.min(sy.free_from.unwrap_or(u64::MAX));
            }
            for (b, r) in st.open.records.range(first..=last) {
                overrides.insert(*b, !r.is_empty());
            }
            (st.phys.clone(), overrides, free_from)
        };
        let mut runs: Vec<(u64, u64, bool)> = Vec::new();
        let mut push = |start: u64, n: u64, data: bool| {
            if n == 0 {
                return;
            }
            match runs.last_mut() {
                Some(l) if l.2 == data && l.0 + l.1 == start => l.1 += n,
                _ => runs.push((start, n, data)),
            }
        };
        let mut b = first;
        while b <= last {
            // The tree's answer for a run starting at b, cut at the layers' free_from.
            let (data, mut n) = if b >= free_from {
                (false, last - b + 1)
            } else {
                let (bp, run) = self.lookup_run(&phys, b)?;
                (!bp.is_hole(), run.max(1).min(free_from - b))
            };
            n = n.min(last - b + 1);
            let end = b + n;
            let mut pos = b;
            for (ob, odata) in overrides.range(b..end) {
                push(pos, ob - pos, data);
                push(*ob, 1, *odata);
                pos = ob + 1;
            }
            push(pos, end - pos, data);
            b = end;
        }
        Ok(runs)
    }

    /// Create an object of type `otype` whose records are `blksz` bytes from the
    /// start (a volume: its volblocksize), instead of growing from the minimum.
    pub fn create_object_sized(&self, otype: u8, blksz: u32) -> Result<u64> {
        if !(MIN_BLOCK..=MAX_BLOCK).contains(&blksz) || !blksz.is_power_of_two() {
            return Err(ObjError::Invalid(format!("invalid block size {blksz}")));
        }
        let id = self.create_object(otype)?;
        let mut inner = self.inner.lock();
        inner.objects.get_mut(&id).unwrap().blksz = blksz;
        Ok(id)
    }

    /// The last synced tree root of object `id`: equal roots mean equal content.
    pub fn object_root(&self, id: u64) -> Result<BlkPtr> {
        let mut inner = self.inner.lock();
        Ok(self.load(&mut inner, id)?.phys.root)
    }

    /// Make object `id` exist with exactly these attributes (receive keeps object
    /// ids, which the layers above use as identities). A block size change drops
    /// the object's data first; a smaller size truncates.
    pub fn recv_object(
        &self,
        id: u64,
        otype: u8,
        blksz: u32,
        size: u64,
        bonus: &[u8],
    ) -> Result<()> {
        if id == 0
            || otype == 0
            || !(MIN_BLOCK..=MAX_BLOCK).contains(&blksz)
            || !blksz.is_power_of_two()
            || bonus.len() > BONUS_SIZE
        {
            return Err(ObjError::Invalid(format!(
                "object {id}: invalid attributes in stream"
            )));
        }
        let exists = self.info(id).is_ok();
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if !exists {
            if inner.objects.get(&id).is_some_and(|o| o.deleted) {
                return Err(ObjError::Invalid(format!(
                    "object {id} is deleted and recreated in one stream"
                )));
            }
            let mut st = ObjState::from_phys(DnodePhys::empty());
            st.gen = inner.open_txg;
            inner.objects.insert(id, st);
        }
        let st = inner.objects.get_mut(&id).unwrap();
        if st.blksz != blksz {
            inner.dirty_bytes -= st.drop_records();
            st.size = 0;
            st.blksz = blksz;
        }
        st.otype = otype;
        st.bonus = [0; BONUS_SIZE];
        st.bonus[..bonus.len()].copy_from_slice(bonus);
        st.dirty = true;
        drop(guard);
        self.truncate(id, size)
    }

    pub fn set_bonus(&self, id: u64, bonus: &[u8]) -> Result<()> {
        if bonus.len() > BONUS_SIZE {
            return Err(ObjError::Invalid("bonus too large".into()));
        }
        let mut inner = self.inner.lock();
        let st = self.load(&mut inner, id)?;
        st.bonus = [0; BONUS_SIZE];
        st.bonus[..bonus.len()].copy_from_slice(bonus);
        st.dirty = true;
        Ok(())
    }

    /// The current record `blkid` of an object (None = hole), sized to its blksz.
    fn get_record(
        &self,
        st: &ObjState,
        blkid: u64,
        policy: CachePolicy,
    ) -> Result<Option<Arc<[u8]>>> {
        if let Some(hit) = st.in_memory(blkid) {
            return Ok(hit.map(|r| resized(r, st.blksz)));
        }
        Ok(self
            .read_tree_record(&st.phys, blkid, policy)?
            .map(|r| resized(&r, st.blksz)))
    }

    fn put_record(inner_dirty: &mut u64, st: &mut ObjState, blkid: u64, rec: Arc<[u8]>) {
        let len = rec.len() as u64;
        if let Some(old) = st.put_open(blkid, rec) {
            *inner_dirty -= old as u64;
        }
        *inner_dirty += len;
        st.dirty = true;
    }

    /// Write `data` at `offset`, growing the object as needed.
    pub fn write(&self, id: u64, offset: u64, data: &[u8]) -> Result<()> {
        self.write_payload(id, offset, &data.into())
    }

    /// Write `data` at `offset`, growing the object as needed. An owned piece
    /// of `data` that is exactly one whole aligned record becomes that record
    /// without a copy (see `Payload`); other bytes are copied, and a partial
    /// record is read, modified and written.
    pub fn write_payload(&self, id: u64, offset: u64, data: &Payload<'_>) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= 1 << 60)
            .ok_or_else(|| ObjError::Invalid("write beyond the maximum object size".into()))?;
        let props = self.props();
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        self.load(inner, id)?;
        let st = inner.objects.get_mut(&id).unwrap();
        // Grow the block size while the object has a single block.
        if end > st.blksz as u64 && st.blksz < props.recordsize && st.size <= st.blksz as u64 {
            let new = (end.next_power_of_two().max(MIN_BLOCK as u64) as u32).min(props.recordsize);
            if new > st.blksz {
                let rec0 = self.get_record(st, 0, props.cache)?;
                st.blksz = new;
                if let Some(r) = rec0 {
                    Self::put_record(&mut inner.dirty_bytes, st, 0, resized(&r, new));
                }
            }
        }
        let bs = st.blksz as u64;
        let mut pos = offset;
        while pos < end {
            let blkid = pos / bs;
            let rstart = blkid * bs;
            let a = (pos - rstart) as usize;
            let b = ((end - rstart).min(bs)) as usize;
            let from = (pos - offset) as usize;
            pos = rstart + b as u64;
            if a == 0 && b == bs as usize {
                let rec = data.shared(from, b);
                Self::put_record(&mut inner.dirty_bytes, st, blkid, rec);
                continue;
            }
            // A partial write into an open record nothing else holds (no reader,
            // syncing layer, log commit or early write has a clone, which
            // `Arc::get_mut` guarantees) changes it in place: nobody can tell
            // from putting a new record, and a 16 KiB write into a 128 KiB
            // record then copies 16 KiB instead of the record twice.
            let own = st.open.records.get_mut(&blkid).and_then(Arc::get_mut);
            if let Some(r) = own.filter(|r| r.len() == bs as usize) {
                data.copy_to(from, &mut r[a..b]);
                st.dirty = true;
                continue;
            }
            let mut rec: Arc<[u8]> = match self.get_record(st, blkid, props.cache)? {
                Some(r) => Arc::from(&r[..]),
                None => zeroed(bs as usize),
            };
            data.copy_to(
                from,
                &mut Arc::get_mut(&mut rec).expect("a new record is unique")[a..b],
            );
            Self::put_record(&mut inner.dirty_bytes, st, blkid, rec);
        }
        st.size = st.size.max(end);
        Ok(())
    }

    /// Set the object's length; bytes past it are gone, growing reads zeros.
    pub fn truncate(&self, id: u64, size: u64) -> Result<()> {
        let policy = self.props().cache;
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        self.load(inner, id)?;
        let st = inner.objects.get_mut(&id).unwrap();
        if size >= st.size {
            st.size = size;
            st.dirty = true;
            return Ok(());
        }
        let bs = st.blksz as u64;
        let first_gone = size.div_ceil(bs);
        // Zero the tail of the partial last record.
        if !size.is_multiple_of(bs) {
            let blkid = size / bs;
            if let Some(r) = self.get_record(st, blkid, policy)? {
                let mut v = r.to_vec();
                v[(size % bs) as usize..].fill(0);
                Self::put_record(&mut inner.dirty_bytes, st, blkid, v.into());
            }
        }
        inner.dirty_bytes -= st.truncate_records(first_gone);
        st.size = size;
        st.dirty = true;
        Ok(())
    }

    /// Ids of all live objects (synced or created since).
    pub fn list_objects(&self) -> Result<Vec<u64>> {
        let inner = self.inner.lock();
        let max_synced = inner.meta.size / DNODE_SIZE as u64;
        let mut ids: Vec<u64> = Vec::new();
        for id in 1..max_synced {
            if let Some(st) = inner.objects.get(&id) {
                if !st.deleted {
                    ids.push(id);
                }
            } else if !self.read_dnode(&inner.meta, id)?.is_free() {
                ids.push(id);
            }
        }
        for (id, st) in &inner.objects {
            if *id >= max_synced.max(1) && !st.deleted {
                ids.push(*id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Write out everything changed since the last sync as part of `txg`, handing
    /// every replaced block to `free`. Returns the new root pointer.
    pub fn sync(&self, txg: u64, free: FreeFn<'_>) -> Result<BlkPtr> {
        let _one = self.sync_lock.lock();
        let props = self.props();
        // Phase 1: freeze the open layers.
        struct Work {
            id: u64,
            layer: Arc<Layer>,
            phys: DnodePhys,
            otype: u8,
            blksz: u32,
            size: u64,
            gen: u64,
            bonus: [u8; BONUS_SIZE],
            deleted: bool,
        }
        let zil_header;
        let (mut work, mut meta, old_root) = {
            let _frozen = self.gate.write();
            let mut inner = self.inner.lock();
            let mut work = Vec::new();
            for (id, st) in inner.objects.iter_mut() {
                if !st.dirty {
                    continue;
                }
                let layer = Arc::new(std::mem::take(&mut st.open));
                // The view is unchanged (the open records, now syncing) unless a
                // failed sync left a syncing layer, which this one replaces.
                if st.syncing.replace(layer.clone()).is_some() {
                    st.rebuild_alloc();
                }
                st.dirty = false;
                if st.deleted {
                    st.syncing_deleted = true;
                }
                work.push(Work {
                    id: *id,
                    layer,
                    phys: st.phys.clone(),
                    otype: st.otype,
                    blksz: st.blksz,
                    size: st.size,
                    gen: st.gen,
                    bonus: st.bonus,
                    deleted: st.deleted,
                });
            }
            inner.syncing_bytes = inner.dirty_bytes;
            inner.dirty_bytes = 0;
            inner.open_txg = txg + 1;
            let pool = self.cache.pool.clone();
            zil_header = self.zil.sync_header(txg, &mut |d| pool.free_log_block(d));
            if work.is_empty()
                && !inner.root_bp.is_hole()
                && zil_header == inner.zil_header
                && !inner.force_root
            {
                inner.syncing_bytes = 0;
                return Ok(inner.root_bp);
            }
            (work, inner.meta.clone(), inner.root_bp)
        };
        work.sort_by_key(|w| w.id);
        // Blocks written early for the intent log: linked below where the frozen
        // record is the one written, freed otherwise (see `prewrite`).
        let mut taken = self.take_overrides(txg);
        let mut ctx = SyncCtx {
            txg,
            free,
            acct_add: Accounting::default(),
            acct_sub: Accounting::default(),
            compression: props.compression,
        };
        // Phase 2 and 3: write records, then rebuild each tree.
        let mut new_phys: Vec<(u64, DnodePhys)> = Vec::new();
        for w in &work {
            let mut phys = w.phys.clone();
            let before = ctx.acct_add.used as i64 - ctx.acct_sub.used as i64;
            if w.deleted {
                self.free_subtree(&phys.root, phys.nlevels - 1, &mut ctx)?;
                new_phys.push((w.id, DnodePhys::empty()));
                continue;
            }
            let mut changes = Vec::with_capacity(w.layer.records.len());
            for (blkid, rec) in &w.layer.records {
                let mut rec = rec.clone();
                // An empty record is a punched hole (see `punch`).
                let punched = rec.is_empty();
                if rec.len() != w.blksz as usize {
                    rec = resized(&rec, w.blksz);
                }
                let early = taken.map.remove(&(w.id, *blkid)).and_then(|(r, bp)| {
                    let same = Arc::ptr_eq(&r, &rec) && bp.birth_txg == txg;
                    if !same {
                        taken.free.push(bp);
                    }
                    same.then_some(bp)
                });
                let bp = if let Some(bp) = early {
                    ctx.born(&bp);
                    self.cache.cache_written(&bp, rec, props.cache);
                    bp
                } else if punched
                    || (ctx.compression != Compression::Off && rec.iter().all(|b| *b == 0))
                {
                    BlkPtr::HOLE
                } else {
                    let compression = self.incompressible.choose(ctx.compression);
                    let bp = self.cache.pool.write_block(
                        txg,
                        &rec,
                        WriteOpts {
                            compression,
                            block_type: BlockType::Data,
                            level: 0,
                            fill: 1,
                        },
                    )?;
                    self.incompressible.outcome(compression, &bp);
                    ctx.born(&bp);
                    self.cache.cache_written(&bp, rec, props.cache);
                    bp
                };
                changes.push((*blkid, bp));
            }
            // A block size change rewrites block 0; blocks of the old size must go.
            let free_from = match (
                w.layer.free_from,
                phys.blksz != w.blksz && !phys.root.is_hole(),
            ) {
                (f, true) => Some(f.unwrap_or(0).min(1)),
                (f, false) => f,
            };
            if let Some(from) = free_from {
                phys.root = self.free_range(&phys.root, phys.nlevels - 1, 0, from, &mut ctx)?;
                if phys.root.is_hole() {
                    phys.nlevels = 1;
                }
            }
            self.apply_changes(&mut phys, &changes, &mut ctx)?;
            let after = ctx.acct_add.used as i64 - ctx.acct_sub.used as i64;
            phys.used = (phys.used as i64 + after - before).max(0) as u64;
            phys.otype = w.otype;
            phys.blksz = w.blksz;
            phys.size = w.size;
            phys.gen = w.gen;
            phys.bonus = w.bonus;
            new_phys.push((w.id, phys));
        }
        // Early blocks not linked, and orphans: in no tree, freed directly.
        for (_, (_, bp)) in taken.map.drain() {
            self.cache.pool.free_block(&bp);
        }
        for bp in taken.free.drain(..) {
            self.cache.pool.free_block(&bp);
        }
        // Write the changed dnodes into the meta-dnode.
        let mut by_block: BTreeMap<u64, Vec<(u64, &DnodePhys)>> = BTreeMap::new();
        for (id, p) in &new_phys {
            by_block
                .entry(id / DNODES_PER_BLOCK)
                .or_default()
                .push((*id, p));
        }
        let mut meta_changes = Vec::new();
        for (blkid, items) in by_block {
            let mut block = match self.read_tree_record(&meta, blkid, self.dnode_policy())? {
                Some(b) => b.to_vec(),
                None => vec![0u8; DNODE_BLOCK_SIZE as usize],
            };
            block.resize(DNODE_BLOCK_SIZE as usize, 0);
            for (id, p) in items {
                let slot = (id % DNODES_PER_BLOCK) as usize * DNODE_SIZE;
                p.encode(&mut block[slot..slot + DNODE_SIZE]);
            }
            let bp = if block.iter().all(|b| *b == 0) {
                BlkPtr::HOLE
            } else {
                let bp = self.cache.pool.write_block(
                    txg,
                    &block,
                    WriteOpts {
                        compression: Compression::Lz4,
                        block_type: BlockType::Dnode,
                        level: 0,
                        fill: 1,
                    },
                )?;
                ctx.born(&bp);
                bp
            };
            meta_changes.push((blkid, bp));
            meta.size = meta.size.max((blkid + 1) * DNODE_BLOCK_SIZE as u64);
        }
        self.apply_changes(&mut meta, &meta_changes, &mut ctx)?;
        // The root block: header with accounting, then the meta-dnode.
        let mut acct = self.inner.lock().acct;
        ctx.kill(&old_root);
        // The root block's own cost is counted after it is written.
        let mut block = encode_objset(&meta);
        let pending = sub_acct(add_accts(acct, ctx.acct_add), ctx.acct_sub);
        encode_acct(&mut block, &pending);
        zil_header.encode(&mut block[ZIL_HEADER_OFFSET..ZIL_HEADER_OFFSET + ZilHeader::SIZE]);
        let root = self.cache.pool.write_block(
            txg,
            &block,
            WriteOpts {
                compression: Compression::Lz4,
                block_type: BlockType::Objset,
                level: 0,
                fill: 1,
            },
        )?;
        ctx.born(&root);
        acct = sub_acct(add_accts(acct, ctx.acct_add), ctx.acct_sub);
        // The root block records accounting without itself; add it back on open.
        let mut inner = self.inner.lock();
        inner.meta = meta;
        inner.root_bp = root;
        inner.zil_header = zil_header;
        inner.force_root = false;
        inner.acct = acct;
        inner.syncing_bytes = 0;
        for (id, p) in new_phys {
            let remove = {
                let st = inner.objects.get_mut(&id).unwrap();
                st.phys = p;
                st.syncing = None;
                st.rebuild_alloc();
                let gone = st.syncing_deleted && st.deleted && !st.dirty;
                st.syncing_deleted = false;
                gone
            };
            if remove {
                inner.objects.remove(&id);
            }
        }
        Ok(root)
    }

    /// Replace level-0 pointers (sorted by blkid) in a tree, growing it as needed.
    fn apply_changes(
        &self,
        phys: &mut DnodePhys,
        changes: &[(u64, BlkPtr)],
        ctx: &mut SyncCtx,
    ) -> Result<()> {
        let Some(&(max_blkid, _)) = changes.last() else {
            return Ok(());
        };
        while max_blkid >= phys.capacity() {
            if !phys.root.is_hole() {
                let mut ptrs = vec![BlkPtr::HOLE; PTRS_PER_INDIRECT as usize];
                ptrs[0] = phys.root;
                phys.root = self.write_indirect(&ptrs, phys.nlevels, ctx)?;
            }
            phys.nlevels += 1;
        }
        phys.root = self.rewrite(&phys.root, phys.nlevels - 1, 0, changes, ctx)?;
        Ok(())
    }

    fn write_indirect(&self, ptrs: &[BlkPtr], level: u8, ctx: &mut SyncCtx) -> Result<BlkPtr> {
        let fill: u64 = ptrs.iter().map(|p| p.fill).sum();
        if fill == 0 && ptrs.iter().all(|p| p.is_hole()) {
            return Ok(BlkPtr::HOLE);
        }
        let mut block = vec![0u8; INDIRECT_SIZE];
        for (i, p) in ptrs.iter().enumerate() {
            p.encode(&mut block[i * BLKPTR_SIZE..(i + 1) * BLKPTR_SIZE]);
        }
        let bp = self.cache.pool.write_block(
            ctx.txg,
            &block,
            WriteOpts {
                compression: Compression::Lz4,
                block_type: BlockType::Indirect,
                level,
                fill,
            },
        )?;
        ctx.born(&bp);
        Ok(bp)
    }

    fn read_ptrs(&self, bp: &BlkPtr) -> Result<Vec<BlkPtr>> {
        if bp.is_hole() {
            return Ok(vec![BlkPtr::HOLE; PTRS_PER_INDIRECT as usize]);
        }
        let block = self.cache.read(bp, self.props().cache)?;
        decode_ptrs(&block, bp)
    }

    fn rewrite(
        &self,
        bp: &BlkPtr,
        level: u8,
        first: u64,
        changes: &[(u64, BlkPtr)],
        ctx: &mut SyncCtx,
    ) -> Result<BlkPtr> {
        if level == 0 {
            ctx.kill(bp);
            self.cache.forget(bp);
            return Ok(changes[changes.len() - 1].1);
        }
        let mut ptrs = self.read_ptrs(bp)?;
        let child_span = span(level - 1);
        let mut i = 0;
        while i < changes.len() {
            let idx = (changes[i].0 - first) / child_span;
            let mut j = i;
            while j < changes.len() && (changes[j].0 - first) / child_span == idx {
                j += 1;
            }
            let child_first = first + idx * child_span;
            ptrs[idx as usize] = self.rewrite(
                &ptrs[idx as usize],
                level - 1,
                child_first,
                &changes[i..j],
                ctx,
            )?;
            i = j;
        }
        ctx.kill(bp);
        self.cache.forget(bp);
        self.write_indirect(&ptrs, level, ctx)
    }

    /// Free every block at or past level-0 index `from` under `bp`.
    fn free_range(
        &self,
        bp: &BlkPtr,
        level: u8,
        first: u64,
        from: u64,
        ctx: &mut SyncCtx,
    ) -> Result<BlkPtr> {
        if bp.is_hole() || first + span(level) <= from {
            return Ok(*bp);
        }
        if first >= from {
            self.free_subtree(bp, level, ctx)?;
            return Ok(BlkPtr::HOLE);
        }
        let mut ptrs = self.read_ptrs(bp)?;
        let child_span = span(level - 1);
        for (i, p) in ptrs.iter_mut().enumerate() {
            *p = self.free_range(p, level - 1, first + i as u64 * child_span, from, ctx)?;
        }
        ctx.kill(bp);
        self.cache.forget(bp);
        self.write_indirect(&ptrs, level, ctx)
    }

    fn free_subtree(&self, bp: &BlkPtr, level: u8, ctx: &mut SyncCtx) -> Result<()> {
        if bp.is_hole() {
            return Ok(());
        }
        if level > 0 {
            for p in self.read_ptrs(bp)? {
                self.free_subtree(&p, level - 1, ctx)?;
            }
        }
        ctx.kill(bp);
        self.cache.forget(bp);
        Ok(())
    }
}

/// Where the intent log header sits in the object set root block.
pub const ZIL_HEADER_OFFSET: usize = 64 + DNODE_SIZE;

/// What replay found in an intent log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub blocks: usize,
    pub records_applied: usize,
    pub records_skipped: usize,
    /// Why the chain ended early, if it did not end at an unwritten block.
    pub problem: Option<String>,
}

impl ObjectSet {
    /// Re-apply the intent log after an import: every record of a txg later than
    /// `committed_txg` (the imported one), in order. The chain's blocks are claimed
    /// and handed to the log, which frees them in the next sync (the commit that
    /// makes the replayed changes part of the tree).
    pub fn replay_log(&self, committed_txg: u64) -> Result<ReplayReport> {
        let zh = self.inner.lock().zil_header;
        let mut report = ReplayReport::default();
        if zh.is_empty() {
            return Ok(report);
        }
        let pool = self.cache.pool.clone();
        let mut blocks = Vec::new();
        // Records of the group being read: applied when its last record is read;
        // dropped if the chain ends first (the operation never became durable).
        let mut group: Vec<Record> = Vec::new();
        let (mut dva, mut seq) = (zh.head, zh.seq);
        let next = 'chain: loop {
            if !pool.claim_log_block(&dva) {
                report.problem = Some(format!(
                    "intent log block at vdev {} offset {:#x} overlaps live data: log ends there",
                    dva.vdev, dva.offset
                ));
                break None;
            }
            let valid = |b: &[u8]| crate::zil::valid_block(b, zh.guid, seq);
            let data = match pool.read_log_block(&dva, &valid) {
                Ok(d) => d,
                Err(e) => {
                    // Unwritten (the usual end of a chain) or unreadable: either
                    // way the chain ends; keep the block as the next one to write.
                    if !matches!(e, PoolError::Checksum { .. }) {
                        report.problem = Some(format!("intent log unreadable: {e}; records after txg {committed_txg} are lost"));
                    } else if pool.is_log_vdev(dva.vdev)
                        && pool
                            .read_log_block_raw(&dva)
                            .is_ok_and(|raw| !crate::zil::looks_unwritten(&raw))
                    {
                        // A dedicated log device only ever holds log blocks: other
                        // bytes where the chain continues mean the device is damaged.
                        report.problem = Some(format!(
                            "intent log device is corrupt at vdev {} offset {:#x}; records after txg {committed_txg} may be lost",
                            dva.vdev, dva.offset
                        ));
                    } else if blocks.is_empty() && zh.head_written {
                        report.problem = Some(format!(
                            "intent log is corrupt (first block at vdev {} offset {:#x}); records after txg {committed_txg} are lost",
                            dva.vdev, dva.offset
                        ));
                    }
                    break Some((dva, seq));
                }
            };
            let Some(decoded) = crate::zil::decode_block(&data, zh.guid, seq) else {
                break Some((dva, seq));
            };
            blocks.push(dva);
            report.blocks += 1;
            let after = decoded.next;
            for lr in decoded.records {
                // Records covered by the committed tree are skipped one by one: a
                // group's records share a txg, so a group is skipped whole (even
                // one whose first records were in a block already freed).
                if lr.txg <= committed_txg {
                    report.records_skipped += 1;
                    continue;
                }
                group.push(lr.rec);
                if lr.more {
                    continue;
                }
                // Blocks written by reference: all read before any record of
                // the group applies (see `prewrite`).
                let mut fetched = Vec::new();
                for rec in &group {
                    if let Record::WriteRef { bp, .. } = rec {
                        match self.fetch_write_ref(bp) {
                            Ok(Some(d)) => fetched.push(d),
                            r => {
                                // The chain ends at this group for good (a
                                // later replay must stop here too), so the log
                                // starts a new chain; the block this one names
                                // next is freed with the replayed ones.
                                report.problem = r.err();
                                report.records_skipped += group.len();
                                group.clear();
                                if after.asize != 0 && pool.claim_log_block(&after) {
                                    blocks.push(after);
                                }
                                break 'chain None;
                            }
                        }
                    }
                }
                let mut fetched = fetched.into_iter();
                for rec in group.drain(..) {
                    let r = match &rec {
                        Record::WriteRef { obj, off, len, .. } => {
                            let d = fetched.next().unwrap_or_default();
                            let n = (*len as usize).min(d.len());
                            self.write(*obj, *off, &d[..n])
                        }
                        _ => self.apply_logged(&rec),
                    };
                    match r {
                        Ok(()) => report.records_applied += 1,
                        // The object was created in a txg that never committed
                        // and its creation was not logged (a change made while
                        // sync=disabled), so no fsync covering this record
                        // returned: skip it.
                        Err(ObjError::NoSuchObject(_)) => report.records_skipped += 1,
                        Err(e) => return Err(e),
                    }
                }
            }
            if decoded.next.asize == 0 {
                break None;
            }
            dva = decoded.next;
            seq += 1;
        };
        // The next block was allocated by a commit only if the chain was started in
        // a committed txg; claim it so it is not handed out twice.
        let next = next.filter(|(d, _)| pool.claim_log_block(d));
        report.records_skipped += group.len();
        self.zil.adopt_replayed(&blocks, next);
        Ok(report)
    }

    /// Apply one intent-log record to the open state.
    fn apply_logged(&self, rec: &Record) -> Result<()> {
        match rec {
            Record::Write { obj, off, data } => self.write(*obj, *off, data),
            Record::Truncate { obj, size } => self.truncate(*obj, *size),
            Record::Create {
                obj,
                otype,
                blksz,
                gen,
            } => self.create_object_at(*obj, *otype, *blksz, *gen),
            Record::Delete { obj } => self.delete_object(*obj),
            Record::Bonus { obj, data } => self.set_bonus(*obj, data),
            Record::Punch { obj, off, len } => self.punch(*obj, *off, *len),
            // Replay reads the block first (`replay_log`); never reached.
            Record::WriteRef { .. } => Err(ObjError::Invalid(
                "write by reference outside replay".into(),
            )),
            // In memory only: never decoded from a log block.
            Record::WriteLazy { .. } => Err(ObjError::Invalid("unresolved lazy write".into())),
        }
    }

    /// Replay of a logged creation: object `id` exists from now on, empty, with
    /// these attributes, whatever had the id before (a live object of the
    /// committed tree, or one deleted earlier in the replay, whose blocks the next
    /// sync frees as it frees a truncated object's). Never used outside replay:
    /// the normal path picks free ids (`create_object`).
    pub fn create_object_at(&self, id: u64, otype: u8, blksz: u32, gen: u64) -> Result<()> {
        if id == 0
            || otype == 0
            || !(MIN_BLOCK..=MAX_BLOCK).contains(&blksz)
            || !blksz.is_power_of_two()
        {
            return Err(ObjError::Invalid(format!(
                "object {id}: invalid attributes in the intent log"
            )));
        }
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if !inner.objects.contains_key(&id) {
            let phys = self.read_dnode(&inner.meta, id)?;
            let fresh = phys.is_free();
            inner.objects.insert(id, ObjState::from_phys(phys));
            if fresh {
                let st = inner.objects.get_mut(&id).unwrap();
                st.otype = otype;
                st.blksz = blksz;
                st.gen = gen;
                st.dirty = true;
                return Ok(());
            }
        }
        let st = inner.objects.get_mut(&id).unwrap();
        // Everything of the old object goes: its records (free_from 0) and,
        // through the block-size rule of `sync`, any tree of another block size.
        inner.dirty_bytes -= st.drop_records();
        st.deleted = false;
        st.otype = otype;
        st.blksz = blksz;
        st.gen = gen;
        st.size = 0;
        st.bonus = [0; BONUS_SIZE];
        st.dirty = true;
        Ok(())
    }
}

fn add_accts(a: Accounting, b: Accounting) -> Accounting {
    Accounting {
        used: a.used + b.used,
        logical: a.logical + b.logical,
        physical: a.physical + b.physical,
        data_logical: a.data_logical + b.data_logical,
        data_physical: a.data_physical + b.data_physical,
    }
}

fn sub_acct(a: Accounting, b: Accounting) -> Accounting {
    Accounting {
        used: a.used.saturating_sub(b.used),
        logical: a.logical.saturating_sub(b.logical),
        physical: a.physical.saturating_sub(b.physical),
        data_logical: a.data_logical.saturating_sub(b.data_logical),
        data_physical: a.data_physical.saturating_sub(b.data_physical),
    }
}

fn encode_acct(block: &mut [u8], a: &Accounting) {
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
fn decode_acct(block: &[u8]) -> Accounting {
    let v = |i: usize| u64::from_le_bytes(block[8 + i * 8..16 + i * 8].try_into().unwrap());
    Accounting {
        used: v(0),
        logical: v(1),
        physical: v(2),
        data_logical: v(3),
        data_physical: v(4),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn bp_with(c: Compression) -> BlkPtr {
        let mut bp = BlkPtr::HOLE;
        bp.compression = c;
        bp
    }

    #[test]
    fn compression_probe_backs_off_and_recovers() {
        let p = CompressionProbe::default();
        let lz4 = Compression::Lz4;
        // Below the streak everything is tried.
        for _ in 0..CompressionProbe::STREAK {
            let c = p.choose(lz4);
            assert_eq!(c, lz4);
            p.outcome(c, &bp_with(Compression::Off));
        }
        // Then only one block in PROBE_EVERY is tried.
        let tried = (0..160)
            .map(|_| {
                let c = p.choose(lz4);
                p.outcome(c, &bp_with(Compression::Off));
                c
            })
            .filter(|c| *c == lz4)
            .count();
        assert_eq!(tried, 160 / CompressionProbe::PROBE_EVERY as usize);
        // A probe that compresses brings compression back for every block.
        let mut c = p.choose(lz4);
        while c != lz4 {
            c = p.choose(lz4);
        }
        p.outcome(c, &bp_with(lz4));
        assert!((0..32).all(|_| p.choose(lz4) == lz4));
        // Compression off stays off and is never counted.
        assert_eq!(p.choose(Compression::Off), Compression::Off);
    }
}
