//! Block reads through the ARC: blocks are verified by the pool, decompressed once,
//! and cached by their identity (first copy's address and birth txg).
//!
//! Invariant: a cached value is the verified, decompressed content of the block its
//! key names. Keys include the birth txg, and freed space is reused only in a later
//! txg, so a key can never name two different contents. This is also why read-ahead
//! can never serve stale data: it caches blocks by the identity of pointers it
//! copied, and a write or truncate makes new pointers (or in-memory records that
//! every read consults before the tree), never new contents under an old key.
//!
//! A prefetch registers its read as in flight; a demand read missing the ARC on a
//! block being prefetched waits for that read instead of issuing a second one.

use crate::l2arc::{FeedQueue, L2Arc};
use cachalot_arc::{Class, Demand, Kind};
use cachalot_pool::{BlkPtr, Pool};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::Arc;

/// A prefetch read in progress: `None` until it ends, then `Some(None)` if it failed.
#[derive(Default)]
struct InFlight {
    done: Mutex<Option<Option<Arc<[u8]>>>>,
    cv: Condvar,
}

impl InFlight {
    fn wait(&self) -> Option<Arc<[u8]>> {
        let mut d = self.done.lock();
        while d.is_none() {
            self.cv.wait(&mut d);
        }
        d.clone().flatten()
    }
}

/// Cache key: where the first copy lives and when it was born.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockKey {
    pub vdev: u32,
    pub offset: u64,
    pub birth: u64,
}

impl BlockKey {
    pub fn of(bp: &BlkPtr) -> Self {
        BlockKey {
            vdev: bp.dvas[0].vdev,
            offset: bp.dvas[0].offset,
            birth: bp.birth_txg,
        }
    }
}

/// What the caches keep of one dataset's blocks: its `primarycache` (the
/// ARC) and `secondarycache` (the L2ARC, fed from what the ARC evicts), as
/// zfs. A block kept out of the ARC never reaches the L2ARC either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachePolicy {
    /// primarycache=all: data blocks go into the ARC (metadata always does).
    pub arc_data: bool,
    /// secondarycache=all: evicted data blocks are offered to the L2ARC.
    pub l2_data: bool,
    /// secondarycache=all|metadata: evicted metadata blocks are offered.
    pub l2_metadata: bool,
}

impl CachePolicy {
    /// Everything in both caches (the defaults, and what pool-wide metadata
    /// such as the catalog uses).
    pub const ALL: CachePolicy = CachePolicy {
        arc_data: true,
        l2_data: true,
        l2_metadata: true,
    };

    /// From the property values (validated: anything else counts as `all`).
    pub fn from_props(primarycache: &str, secondarycache: &str) -> CachePolicy {
        CachePolicy {
            arc_data: primarycache == "all",
            l2_data: secondarycache == "all",
            l2_metadata: secondarycache != "none",
        }
    }

    fn in_arc(&self, class: Class) -> bool {
        self.arc_data || class == Class::Metadata
    }

    fn in_l2(&self, class: Class) -> bool {
        match class {
            Class::Data => self.l2_data,
            Class::Metadata => self.l2_metadata,
        }
    }
}

/// Bytes of one L2ARC batch (one sequential write on a cache device).
const L2_BATCH_BYTES: u64 = 4 << 20;

/// The pool plus its ARC, and the L2ARC on the pool's cache devices.
pub struct BlockCache {
    pub pool: Arc<Pool>,
    pub arc: cachalot_arc::Arc<BlockKey>,
    /// One L2ARC per cache device that was usable when attached.
    l2: parking_lot::RwLock<Vec<Arc<L2Arc>>>,
    /// What the ARC evicts, for the L2ARC's feeders.
    feed: Arc<FeedQueue>,
    accesses: cachalot_analytics::Stat,
    inflight: Mutex<HashMap<BlockKey, Arc<InFlight>>>,
}

fn class_of(bp: &BlkPtr) -> Class {
    if bp.block_type.is_metadata() {
        Class::Metadata
    } else {
        Class::Data
    }
}

fn class_name(c: Class) -> &'static str {
    match c {
        Class::Data => "data",
        Class::Metadata => "metadata",
    }
}

impl BlockCache {
    pub fn new(pool: Arc<Pool>, arc_max: u64) -> Self {
        let arc = cachalot_arc::Arc::new(arc_max);
        let feed = Arc::new(FeedQueue::new(L2_BATCH_BYTES));
        let f = feed.clone();
        arc.set_evict_hook(Box::new(move |k, v| f.push(k, v)));
        BlockCache {
            pool,
            arc,
            l2: Default::default(),
            feed,
            accesses: cachalot_analytics::global()
                .stat("arc.accesses", &["result", "kind", "demand", "level"]),
            inflight: Mutex::new(HashMap::new()),
        }
    }

    /// Start the L2ARC on every cache device of the pool not yet served, its
    /// index rebuilt from what the device holds (after import or `pool add`).
    pub fn attach_l2(&self) {
        let max_birth = self.pool.uberblock().txg;
        let mut l2 = self.l2.write();
        for dev in self.pool.cache_devices() {
            if dev.usable() && !l2.iter().any(|x| x.device().guid == dev.guid) {
                l2.push(L2Arc::open(dev, self.pool.guid(), max_birth, &self.feed));
            }
        }
    }

    /// Write what the ARC evicted so far to the first usable cache device,
    /// now, in this thread: what the feeder threads do, for a deterministic
    /// run, which starts none.
    pub fn feed_l2_now(&self) {
        let blocks = self.feed.take_now();
        let l2 = self.l2.read().iter().find(|x| x.device().usable()).cloned();
        if let (Some(l2), false) = (l2, blocks.is_empty()) {
            l2.write(blocks, L2_BATCH_BYTES);
        }
    }

    /// Stop the L2ARC of every cache device that left the pool (`pool
    /// remove`): its index is dropped, so no lookup goes to that device again
    /// (reads go to the pool), and its feeder ends. With none left, evicted
    /// blocks are no longer queued.
    pub fn detach_l2(&self) {
        let present = self.pool.cache_devices();
        let mut l2 = self.l2.write();
        l2.retain(|x| present.iter().any(|d| d.guid == x.device().guid));
        if l2.is_empty() {
            self.feed.set_active(false);
        }
    }

    /// The L2ARCs (one per attached cache device).
    pub fn l2(&self) -> Vec<Arc<L2Arc>> {
        self.l2.read().clone()
    }

    /// A block from the L2ARC, if a cache device holds it whole and verified.
    fn read_l2(&self, key: &BlockKey, lsize: usize) -> Option<Arc<[u8]>> {
        let l2 = self.l2.read();
        l2.iter()
            .filter_map(|x| x.get(key))
            .find(|v| v.len() == lsize)
    }

    /// Read a block's logical bytes, from the ARC when cached. `policy` says
    /// whether it goes into the ARC and, once evicted, to the L2ARC.
    ///
    /// Counted in `arc.accesses` by result: `hit`, `miss`, or `iohit` (the block
    /// was being prefetched: this read waited for that I/O); a demand hit or iohit
    /// served by read-ahead has demand `prefetched`.
    pub fn read(&self, bp: &BlkPtr, policy: CachePolicy) -> cachalot_pool::Result<Arc<[u8]>> {
        if bp.is_hole() {
            return Ok(vec![0u8; bp.lsize as usize].into());
        }
        let kind = Kind::new(class_of(bp), Demand::Demand);
        let kind_name = class_name(kind.class);
        let key = BlockKey::of(bp);
        // `level` is where the block came from: hits in the ARC or the L2ARC,
        // misses (and waits for a prefetch's read) from the pool's devices.
        if let Some(v) = self.arc_hit(self.arc.get_traced(&key, kind), kind_name) {
            return Ok(v);
        }
        let pending = self.inflight.lock().get(&key).cloned();
        if let Some(v) = pending.and_then(|p| p.wait()) {
            self.accesses.add(
                &["iohit", kind_name, "prefetched", "pool"],
                1,
                v.len() as u64,
            );
            return Ok(v);
        }
        if let Some(v) = self.read_l2(&key, bp.lsize as usize) {
            self.accesses
                .add(&["hit", kind_name, "demand", "l2arc"], 1, v.len() as u64);
            self.arc
                .insert_with_l2(key, v.clone(), kind, policy.in_l2(kind.class));
            return Ok(v);
        }
        self.accesses
            .add(&["miss", kind_name, "demand", "pool"], 1, bp.lsize as u64);
        let data: Arc<[u8]> = self.pool.read_block(bp)?.into();
        if policy.in_arc(kind.class) {
            self.arc
                .insert_with_l2(key, data.clone(), kind, policy.in_l2(kind.class));
        }
        Ok(data)
    }

    /// A block's logical bytes if the ARC holds them (a hit, counted as
    /// `read`'s); None without counting a miss: the caller then reads it
    /// with `read` (which counts the miss), on a thread that may wait.
    pub fn cached(&self, bp: &BlkPtr) -> Option<Arc<[u8]>> {
        if bp.is_hole() {
            return Some(vec![0u8; bp.lsize as usize].into());
        }
        let kind = Kind::new(class_of(bp), Demand::Demand);
        let hit = self.arc.get_if_cached(&BlockKey::of(bp), kind);
        self.arc_hit(hit, class_name(kind.class))
    }

    /// Count a demand hit in the ARC (`accesses`).
    fn arc_hit(&self, hit: Option<(Arc<[u8]>, bool)>, kind_name: &str) -> Option<Arc<[u8]>> {
        let (v, prefetched) = hit?;
        let demand = if prefetched { "prefetched" } else { "demand" };
        self.accesses
            .add(&["hit", kind_name, demand, "arc"], 1, v.len() as u64);
        Some(v)
    }

    /// Bring a block into the ARC ahead of its demand read, marked as a prefetch
    /// (it stays in the ARC's recent list, see cachalot-arc). Data blocks are not
    /// prefetched when `policy` keeps them out of the ARC: there would be
    /// nowhere to keep them.
    /// Returns the block when it was read or cached (or another prefetch read it),
    /// None when skipped or failed (a prefetch error is not reported: the demand
    /// read will meet it).
    pub fn prefetch(&self, bp: &BlkPtr, policy: CachePolicy) -> Option<Arc<[u8]>> {
        let class = class_of(bp);
        if bp.is_hole() || !policy.in_arc(class) {
            return None;
        }
        let kind = Kind::new(class, Demand::Prefetch);
        let kind_name = class_name(class);
        let key = BlockKey::of(bp);
        if let Some((v, _)) = self.arc.get_traced(&key, kind) {
            self.accesses
                .add(&["hit", kind_name, "prefetch", "arc"], 1, v.len() as u64);
            return Some(v);
        }
        let mine = Arc::new(InFlight::default());
        let theirs = {
            let mut inflight = self.inflight.lock();
            let theirs = inflight.get(&key).cloned();
            if theirs.is_none() {
                inflight.insert(key, mine.clone());
            }
            theirs
        };
        if let Some(t) = theirs {
            // Another prefetch reads it (two records under one indirect block).
            return t.wait();
        }
        // A prefetch is served by a cache device when it holds the block.
        let data: Option<Arc<[u8]>> = match self.read_l2(&key, bp.lsize as usize) {
            Some(v) => {
                self.accesses
                    .add(&["hit", kind_name, "prefetch", "l2arc"], 1, v.len() as u64);
                Some(v)
            }
            None => {
                self.accesses
                    .add(&["miss", kind_name, "prefetch", "pool"], 1, bp.lsize as u64);
                self.pool.read_block(bp).ok().map(Into::into)
            }
        };
        if let Some(d) = &data {
            self.arc
                .insert_with_l2(key, d.clone(), kind, policy.in_l2(class));
        }
        // Cached before it leaves the in-flight map: a demand read finds it in one
        // place or the other.
        self.inflight.lock().remove(&key);
        *mine.done.lock() = Some(data.clone());
        mine.cv.notify_all();
        data
    }

    /// Cache a data block just written with its contents, as ZFS keeps a written
    /// buffer in the ARC: the next read of a record that left the writer's own cache
    /// (a page InnoDB flushed, then evicted from its buffer pool) is a hit instead of
    /// a device read. Measured under sysbench before this: 28% of data reads missed.
    pub fn cache_written(&self, bp: &BlkPtr, data: Arc<[u8]>, policy: CachePolicy) {
        if !bp.is_hole() && data.len() == bp.lsize as usize && policy.in_arc(Class::Data) {
            let kind = Kind {
                class: Class::Data,
                demand: Demand::Demand,
            };
            let l2 = policy.in_l2(Class::Data);
            self.arc.insert_with_l2(BlockKey::of(bp), data, kind, l2);
        }
    }

    /// Forget a freed block.
    pub fn forget(&self, bp: &BlkPtr) {
        if !bp.is_hole() {
            let key = BlockKey::of(bp);
            self.arc.remove(&key);
            for l2 in self.l2.read().iter() {
                l2.remove(&key);
            }
        }
    }
}
