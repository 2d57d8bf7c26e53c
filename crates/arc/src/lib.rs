//! Adaptive Replacement Cache (ARC) over decompressed records.
//!
//! This is the cache algorithm of Megiddo & Modha ("ARC: A Self-Tuning, Low
//! Overhead Replacement Cache", FAST '03) as used by OpenZFS `arc.c`, but
//! measured in bytes instead of pages.
//!
//! # Why four lists
//!
//! A plain LRU is flushed by one long sequential scan: every block of the scan
//! is "recent", so the blocks that are reused all the time are pushed out by
//! blocks that will never be read again. ARC splits the cache in two:
//!
//! * **T1** (MRU) holds entries seen exactly once recently,
//! * **T2** (MFU) holds entries seen at least twice.
//!
//! A scan only ever fills T1, so it can only push out other once-seen entries
//! and the reused working set in T2 survives. How many bytes T1 may hold is
//! not fixed: ARC learns it. When an entry is evicted its key and size stay
//! behind in a *ghost* list (**B1** for entries evicted from T1, **B2** for T2).
//! A miss on a key that is still in B1 means "T1 was too small: had it been a
//! bit larger this would have been a hit", so the target `p` for T1 grows; a
//! miss that hits B2 means T2 was too small, so `p` shrinks. The step is
//! weighted by the entry's bytes and by the ratio of the ghost lists' sizes
//! (a hit in the smaller ghost list is stronger evidence), exactly as in the
//! paper.
//!
//! # Invariants (all in bytes, hold after every public call returns)
//!
//! * `|T1| + |T2| <= c`, where `c` is [`Arc::max_bytes`]: the byte limit is
//!   never exceeded; we evict *before* linking a new entry in. A value larger
//!   than `c` is simply not cached.
//! * `|T1| + |B1| <= c` and `|T1| + |T2| + |B1| + |B2| <= 2c`: the ghost lists
//!   remember at most one extra cache's worth of history, so the memory used
//!   by ghosts (keys only) is bounded too.
//! * `0 <= p <= c`: `p` is the number of bytes T1 "should" hold. Eviction
//!   takes from T1 when T1 is over `p`, otherwise from T2.
//!
//! Every entry is charged `max(len, 1)` bytes, so even empty values count and
//! the number of entries (and ghosts) is bounded by the byte limit.
//!
//! # Prefetch
//!
//! As in OpenZFS, a prefetch is not a "use": an entry inserted by a prefetch
//! stays in T1 on its first demand hit (that hit is the read the prefetch was
//! for), and prefetch hits never promote an entry from T1 to T2. Otherwise a
//! prefetched sequential scan would land in T2 and defeat scan resistance.
//!
//! # Complexity and locking
//!
//! Entries live in a slab with intrusive doubly-linked lists and a `HashMap`
//! from key to slot, so every operation is O(1) (amortised). All state sits
//! behind one `parking_lot::Mutex`; the cache is `Send + Sync` and is meant to
//! be shared (for example in a `std::sync::Arc`).

#![warn(missing_docs)]

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;

use parking_lot::Mutex;

/// A cached, decompressed record. Cloning is cheap (reference count).
pub type Value = std::sync::Arc<[u8]>;

/// What kind of block an access is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// File or volume contents.
    Data,
    /// Indirect blocks, dnodes, directories and other metadata.
    Metadata,
}

/// Why an access happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Demand {
    /// Someone is waiting for the block right now.
    Demand,
    /// Speculative read ahead; does not count as a use of the block.
    Prefetch,
}

/// The kind of an access: class and demand. Used for statistics and to tell
/// prefetches from real uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kind {
    /// Data or metadata.
    pub class: Class,
    /// Demand or prefetch.
    pub demand: Demand,
}

impl Kind {
    /// Demand read of data.
    pub const DATA: Kind = Kind::new(Class::Data, Demand::Demand);
    /// Demand read of metadata.
    pub const METADATA: Kind = Kind::new(Class::Metadata, Demand::Demand);
    /// Prefetch of data.
    pub const DATA_PREFETCH: Kind = Kind::new(Class::Data, Demand::Prefetch);
    /// Prefetch of metadata.
    pub const METADATA_PREFETCH: Kind = Kind::new(Class::Metadata, Demand::Prefetch);

    /// Builds a kind from its parts.
    pub const fn new(class: Class, demand: Demand) -> Kind {
        Kind { class, demand }
    }

    /// `true` for prefetch accesses.
    pub const fn is_prefetch(self) -> bool {
        matches!(self.demand, Demand::Prefetch)
    }

    /// Indices into [`ArcStats::hits`] / [`ArcStats::misses`]: `[class][demand]`.
    const fn index(self) -> (usize, usize) {
        let c = match self.class {
            Class::Data => 0,
            Class::Metadata => 1,
        };
        let d = match self.demand {
            Demand::Demand => 0,
            Demand::Prefetch => 1,
        };
        (c, d)
    }
}

/// Which of the four ARC lists a key is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Residency {
    /// Cached, seen once recently (MRU).
    T1,
    /// Cached, seen at least twice (MFU).
    T2,
    /// Ghost of an entry evicted from T1 (key and size only).
    B1,
    /// Ghost of an entry evicted from T2 (key and size only).
    B2,
}

impl Residency {
    /// `true` for the ghost lists B1 and B2 (no value cached).
    pub const fn is_ghost(self) -> bool {
        matches!(self, Residency::B1 | Residency::B2)
    }

    const fn idx(self) -> usize {
        match self {
            Residency::T1 => 0,
            Residency::T2 => 1,
            Residency::B1 => 2,
            Residency::B2 => 3,
        }
    }
}

/// A snapshot of the cache's counters and sizes.
///
/// Counters are cumulative since creation (or [`Arc::reset_stats`]); sizes
/// are the current ones. All sizes are in charged bytes (see the crate docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArcStats {
    /// Hits, indexed `[class][demand]` (`Data = 0, Metadata = 1`;
    /// `Demand = 0, Prefetch = 1`). Prefer [`ArcStats::hit`].
    pub hits: [[u64; 2]; 2],
    /// Misses, indexed like `hits`. Prefer [`ArcStats::miss`].
    pub misses: [[u64; 2]; 2],
    /// Inserts of a key found in ghost list B1 (`p` grew).
    pub ghost_hits_b1: u64,
    /// Inserts of a key found in ghost list B2 (`p` shrank).
    pub ghost_hits_b2: u64,
    /// Cached entries evicted to make room (they became ghosts).
    pub evictions: u64,
    /// Bytes of the evicted entries.
    pub evicted_bytes: u64,
    /// Values linked into the cache by [`Arc::insert`].
    pub inserts: u64,
    /// Inserts refused because the value was larger than the cache.
    pub oversize_rejects: u64,
    /// Bytes currently cached in T1.
    pub t1_bytes: u64,
    /// Bytes currently cached in T2.
    pub t2_bytes: u64,
    /// Bytes remembered by ghost list B1.
    pub b1_bytes: u64,
    /// Bytes remembered by ghost list B2.
    pub b2_bytes: u64,
    /// Current target size of T1 in bytes (`0 <= p <= c`).
    pub p: u64,
    /// Cache size limit in bytes (the same as [`Arc::max_bytes`]).
    pub c: u64,
    /// Number of cached entries (T1 + T2; ghosts not counted).
    pub entries: u64,
    /// Number of ghost entries (B1 + B2).
    pub ghost_entries: u64,
}

impl ArcStats {
    /// Hits of all kinds.
    pub fn hits_total(&self) -> u64 {
        self.hits.iter().flatten().sum()
    }

    /// Misses of all kinds.
    pub fn misses_total(&self) -> u64 {
        self.misses.iter().flatten().sum()
    }

    /// Hits of one kind.
    pub fn hit(&self, kind: Kind) -> u64 {
        let (c, d) = kind.index();
        self.hits[c][d]
    }

    /// Misses of one kind.
    pub fn miss(&self, kind: Kind) -> u64 {
        let (c, d) = kind.index();
        self.misses[c][d]
    }

    /// Fraction of lookups that hit, in `[0, 1]`; `0` when there were none.
    pub fn hit_ratio(&self) -> f64 {
        let h = self.hits_total();
        let total = h + self.misses_total();
        if total == 0 {
            0.0
        } else {
            h as f64 / total as f64
        }
    }

    /// Bytes currently cached (T1 + T2).
    pub fn size_bytes(&self) -> u64 {
        self.t1_bytes + self.t2_bytes
    }
}

/// Bytes charged for a value: its length, but at least 1 so that empty values
/// (and their ghosts) are still bounded by the byte limit.
fn charge(len: usize) -> u64 {
    (len as u64).max(1)
}

const NIL: usize = usize::MAX;

struct Node<K> {
    key: K,
    /// `Some` on T1/T2, `None` on the ghost lists.
    value: Option<Value>,
    size: u64,
    list: Residency,
    /// Inserted by a prefetch and not yet used by a demand read.
    prefetched: bool,
    /// Its eviction is told to the evict hook (the second level may keep
    /// it: ZFS's L2CACHE flag, from `secondarycache`).
    l2cache: bool,
    /// Neighbour towards the MRU end.
    prev: usize,
    /// Neighbour towards the LRU end.
    next: usize,
}

#[derive(Clone, Copy)]
struct List {
    /// MRU end.
    head: usize,
    /// LRU end.
    tail: usize,
    bytes: u64,
    len: u64,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        bytes: 0,
        len: 0,
    };
}

#[derive(Clone, Copy, Default)]
struct Counters {
    hits: [[u64; 2]; 2],
    misses: [[u64; 2]; 2],
    ghost_hits_b1: u64,
    ghost_hits_b2: u64,
    evictions: u64,
    evicted_bytes: u64,
    inserts: u64,
    oversize_rejects: u64,
}

/// Called with each entry the cache evicts (`evict_one`, REPLACE; see
/// [`Arc::set_evict_hook`]).
pub type EvictHook<K> = Box<dyn Fn(&K, &Value) + Send + Sync>;

struct Inner<K> {
    /// Told of every evicted value (the L2ARC's feed), under the cache lock.
    evict_hook: Option<EvictHook<K>>,
    map: HashMap<K, usize>,
    /// Slab of nodes; `None` slots are listed in `free`.
    nodes: Vec<Option<Node<K>>>,
    free: Vec<usize>,
    /// Indexed by [`Residency::idx`].
    lists: [List; 4],
    c: u64,
    p: u64,
    counters: Counters,
}

impl<K: Hash + Eq + Clone> Inner<K> {
    fn new(c: u64) -> Self {
        Inner {
            evict_hook: None,
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            lists: [List::EMPTY; 4],
            c,
            // The paper starts with p = 0: until a B1 ghost hit proves that
            // once-seen entries deserve room, T1 is evicted first.
            p: 0,
            counters: Counters::default(),
        }
    }

    fn node(&self, i: usize) -> &Node<K> {
        self.nodes[i].as_ref().expect("live slab slot")
    }

    fn node_mut(&mut self, i: usize) -> &mut Node<K> {
        self.nodes[i].as_mut().expect("live slab slot")
    }

    fn list(&self, r: Residency) -> &List {
        &self.lists[r.idx()]
    }

    fn alloc(&mut self, node: Node<K>) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        }
    }

    /// Takes node `i` off its list (it stays in the slab and the map).
    fn unlink(&mut self, i: usize) {
        let (list, prev, next, size) = {
            let n = self.node(i);
            (n.list, n.prev, n.next, n.size)
        };
        if prev == NIL {
            self.lists[list.idx()].head = next;
        } else {
            self.node_mut(prev).next = next;
        }
        if next == NIL {
            self.lists[list.idx()].tail = prev;
        } else {
            self.node_mut(next).prev = prev;
        }
        let l = &mut self.lists[list.idx()];
        l.bytes -= size;
        l.len -= 1;
        let n = self.node_mut(i);
        n.prev = NIL;
        n.next = NIL;
    }

    /// Links an unlinked node `i` at the MRU end of `list`.
    fn push_mru(&mut self, i: usize, list: Residency) {
        let old_head = self.lists[list.idx()].head;
        let size = {
            let n = self.node_mut(i);
            n.list = list;
            n.prev = NIL;
            n.next = old_head;
            n.size
        };
        if old_head == NIL {
            self.lists[list.idx()].tail = i;
        } else {
            self.node_mut(old_head).prev = i;
        }
        let l = &mut self.lists[list.idx()];
        l.head = i;
        l.bytes += size;
        l.len += 1;
    }

    fn move_to_mru(&mut self, i: usize, list: Residency) {
        self.unlink(i);
        self.push_mru(i, list);
    }

    /// Forgets node `i` completely (list, slab and map).
    fn drop_node(&mut self, i: usize) {
        self.unlink(i);
        let node = self.nodes[i].take().expect("live slab slot");
        self.free.push(i);
        self.map.remove(&node.key);
    }

    /// REPLACE from the paper: evicts one cached entry into its ghost list.
    /// T1 gives way if it is over its target `p` (or at it, when the miss
    /// being served hit B2: T2 just proved it needs the room). Returns
    /// `false` if nothing is cached.
    fn evict_one(&mut self, hit_in_b2: bool) -> bool {
        let t1 = *self.list(Residency::T1);
        let t2 = *self.list(Residency::T2);
        let from_t1 =
            t1.len > 0 && (t1.bytes > self.p || (hit_in_b2 && t1.bytes >= self.p) || t2.len == 0);
        let (victim, ghost) = if from_t1 {
            (t1.tail, Residency::B1)
        } else if t2.len > 0 {
            (t2.tail, Residency::B2)
        } else {
            return false;
        };
        self.unlink(victim);
        let n = self.nodes[victim].as_mut().expect("live slab slot");
        if let (Some(hook), Some(v), true) = (&self.evict_hook, &n.value, n.l2cache) {
            hook(&n.key, v);
        }
        n.value = None;
        n.prefetched = false;
        let size = n.size;
        self.push_mru(victim, ghost);
        self.counters.evictions += 1;
        self.counters.evicted_bytes += size;
        true
    }

    /// Evicts until `need` more bytes fit under `c` (or nothing is left).
    fn make_room(&mut self, need: u64, hit_in_b2: bool) {
        while self.cached_bytes() + need > self.c {
            if !self.evict_one(hit_in_b2) {
                break;
            }
        }
    }

    fn cached_bytes(&self) -> u64 {
        self.list(Residency::T1).bytes + self.list(Residency::T2).bytes
    }

    fn total_bytes(&self) -> u64 {
        self.lists.iter().map(|l| l.bytes).sum()
    }

    /// Restores the ghost bounds `|T1|+|B1| <= c` and total `<= 2c` by
    /// forgetting the oldest ghosts. Requires `|T1|+|T2| <= c` already, which
    /// guarantees both bounds are reachable (in the worst case with no ghosts).
    fn trim_ghosts(&mut self) {
        let c = self.c;
        while self.list(Residency::T1).bytes + self.list(Residency::B1).bytes > c {
            let tail = self.list(Residency::B1).tail;
            if tail == NIL {
                break;
            }
            self.drop_node(tail);
        }
        // Prefer forgetting B2 history here, as the paper does (case IV.B).
        while self.total_bytes() > c.saturating_mul(2) {
            let tail = match (self.list(Residency::B2).tail, self.list(Residency::B1).tail) {
                (NIL, NIL) => break,
                (NIL, b1) => b1,
                (b2, _) => b2,
            };
            self.drop_node(tail);
        }
    }

    /// Moves `p` after a ghost hit of `size` bytes. Must be called while the
    /// ghost is still on its list (the paper's ratios include it).
    fn adapt(&mut self, ghost: Residency, size: u64) {
        let b1 = self.list(Residency::B1).bytes;
        let b2 = self.list(Residency::B2).bytes;
        match ghost {
            Residency::B1 => {
                // b1 >= size >= 1 here, so the division is safe.
                let mult = if b1 >= b2 { 1 } else { b2 / b1 };
                self.p = self.p.saturating_add(size.saturating_mul(mult)).min(self.c);
            }
            Residency::B2 => {
                let mult = if b2 >= b1 { 1 } else { b1 / b2 };
                self.p = self.p.saturating_sub(size.saturating_mul(mult));
            }
            Residency::T1 | Residency::T2 => unreachable!("adapt on a cached list"),
        }
    }

    /// `count_miss`: a miss is counted (false: the caller reads on, and that
    /// read counts it).
    fn get(&mut self, key: &K, kind: Kind, count_miss: bool) -> Option<(Value, bool)> {
        let (c, d) = kind.index();
        let i = match self.map.get(key) {
            Some(&i) if !self.node(i).list.is_ghost() => i,
            _ => {
                if count_miss {
                    self.counters.misses[c][d] += 1;
                }
                return None;
            }
        };
        self.counters.hits[c][d] += 1;
        let (list, prefetched, value) = {
            let n = self.node(i);
            (n.list, n.prefetched, n.value.clone()?)
        };
        let first_use_of_prefetch = prefetched && !kind.is_prefetch();
        match list {
            // A prefetch hit is not a use: leave the entry where it is.
            Residency::T1 if kind.is_prefetch() => {}
            // First demand use of a prefetched block: this is its first real
            // reference, so it stays in T1.
            Residency::T1 if prefetched => {
                self.node_mut(i).prefetched = false;
                self.move_to_mru(i, Residency::T1);
            }
            // Second reference: promote to the frequent list.
            Residency::T1 | Residency::T2 => self.move_to_mru(i, Residency::T2),
            Residency::B1 | Residency::B2 => unreachable!("ghosts handled above"),
        }
        Some((value, first_use_of_prefetch))
    }

    fn insert(&mut self, key: K, value: Value, kind: Kind, l2cache: bool) {
        let size = charge(value.len());
        let prefetch = kind.is_prefetch();
        let existing = self.map.get(&key).copied();

        if size > self.c {
            // Not cacheable. Drop whatever we had for the key: a cached value
            // would now be stale, and a ghost of something this big is useless.
            if let Some(i) = existing {
                self.drop_node(i);
            }
            self.counters.oversize_rejects += 1;
            return;
        }

        // New entries start in T1; a demand ghost hit below moves this to T2.
        let mut target = Residency::T1;
        let mut prefetched = prefetch;
        let mut hit_in_b2 = false;
        if let Some(i) = existing {
            let (list, old_prefetched, ghost_size) = {
                let n = self.node(i);
                (n.list, n.prefetched, n.size)
            };
            match list {
                // Replacing a cached value (e.g. two readers raced on a miss):
                // keep its place in the ARC, but it does not count as a use.
                Residency::T1 | Residency::T2 => {
                    target = list;
                    prefetched = old_prefetched && prefetch;
                }
                // Ghost hit: the list the entry was evicted from was too
                // small. Adapt p, and (for a demand read) this is the second
                // reference, so the entry goes to T2.
                Residency::B1 | Residency::B2 => {
                    self.adapt(list, ghost_size);
                    if list == Residency::B1 {
                        self.counters.ghost_hits_b1 += 1;
                    } else {
                        self.counters.ghost_hits_b2 += 1;
                        hit_in_b2 = true;
                    }
                    if !prefetch {
                        target = Residency::T2;
                    }
                }
            }
            self.drop_node(i);
        }

        self.make_room(size, hit_in_b2);
        let i = self.alloc(Node {
            key: key.clone(),
            value: Some(value),
            size,
            list: target,
            prefetched,
            l2cache,
            prev: NIL,
            next: NIL,
        });
        self.push_mru(i, target);
        self.map.insert(key, i);
        self.counters.inserts += 1;
        self.trim_ghosts();
    }

    fn set_c(&mut self, c: u64) {
        self.c = c;
        self.p = self.p.min(c);
        self.make_room(0, false);
        self.trim_ghosts();
    }

    fn clear(&mut self) {
        self.map.clear();
        self.nodes.clear();
        self.free.clear();
        self.lists = [List::EMPTY; 4];
        self.p = 0;
    }

    fn stats(&self) -> ArcStats {
        let k = self.counters;
        let t1 = self.list(Residency::T1);
        let t2 = self.list(Residency::T2);
        let b1 = self.list(Residency::B1);
        let b2 = self.list(Residency::B2);
        ArcStats {
            hits: k.hits,
            misses: k.misses,
            ghost_hits_b1: k.ghost_hits_b1,
            ghost_hits_b2: k.ghost_hits_b2,
            evictions: k.evictions,
            evicted_bytes: k.evicted_bytes,
            inserts: k.inserts,
            oversize_rejects: k.oversize_rejects,
            t1_bytes: t1.bytes,
            t2_bytes: t2.bytes,
            b1_bytes: b1.bytes,
            b2_bytes: b2.bytes,
            p: self.p,
            c: self.c,
            entries: t1.len + t2.len,
            ghost_entries: b1.len + b2.len,
        }
    }

    /// Full consistency check, O(n). Panics on any violation.
    #[cfg(test)]
    fn check(&self) {
        let mut seen = 0usize;
        for r in [Residency::T1, Residency::T2, Residency::B1, Residency::B2] {
            let l = self.list(r);
            let (mut bytes, mut len, mut prev, mut i) = (0u64, 0u64, NIL, l.head);
            while i != NIL {
                let n = self.node(i);
                assert_eq!(n.list, r, "node on wrong list");
                assert_eq!(n.prev, prev, "broken prev link");
                assert_eq!(n.value.is_none(), r.is_ghost(), "value/ghost mismatch");
                if let Some(v) = &n.value {
                    assert_eq!(n.size, charge(v.len()), "size does not match value");
                }
                assert_eq!(self.map.get(&n.key), Some(&i), "map does not point to node");
                bytes += n.size;
                len += 1;
                prev = i;
                i = n.next;
            }
            assert_eq!(l.tail, prev, "tail mismatch");
            assert_eq!(l.bytes, bytes, "byte count mismatch on {r:?}");
            assert_eq!(l.len, len, "length mismatch on {r:?}");
            seen += len as usize;
        }
        assert_eq!(self.map.len(), seen, "map has entries not on any list");
        assert_eq!(self.nodes.len(), seen + self.free.len(), "slab leak");
        let t1 = self.list(Residency::T1).bytes;
        let b1 = self.list(Residency::B1).bytes;
        assert!(self.cached_bytes() <= self.c, "byte limit exceeded");
        assert!(t1 + b1 <= self.c, "|T1|+|B1| > c");
        assert!(self.total_bytes() <= self.c.saturating_mul(2), "total > 2c");
        assert!(self.p <= self.c, "p > c");
    }
}

/// A thread-safe, byte-limited Adaptive Replacement Cache.
///
/// The name deliberately matches the algorithm; write `cachalot_arc::Arc` to
/// tell it from `std::sync::Arc`. See the crate docs for the invariants.
pub struct Arc<K> {
    inner: Mutex<Inner<K>>,
}

impl<K: Hash + Eq + Clone + Send> Arc<K> {
    /// Creates an empty cache holding at most `max_bytes` bytes of values.
    pub fn new(max_bytes: u64) -> Self {
        Arc {
            inner: Mutex::new(Inner::new(max_bytes)),
        }
    }

    /// Looks `key` up. Counts a hit or a miss for `kind`.
    ///
    /// A demand hit in T1 promotes the entry to the MRU end of T2, a hit in
    /// T2 moves it to the MRU end of T2. Prefetch hits do not promote, and
    /// the first demand hit of a prefetched entry keeps it in T1 (see the
    /// crate docs). A key that is only a ghost is a miss; the ghost is
    /// noticed (and `p` adapted) by the [`Arc::insert`] that follows.
    pub fn get(&self, key: &K, kind: Kind) -> Option<Value> {
        self.inner.lock().get(key, kind, true).map(|(v, _)| v)
    }

    /// [`Arc::get`], also saying whether the hit is the first demand use of
    /// an entry a prefetch brought in (the read the prefetch was for: what
    /// makes read-ahead's effect visible in statistics).
    pub fn get_traced(&self, key: &K, kind: Kind) -> Option<(Value, bool)> {
        self.inner.lock().get(key, kind, true)
    }

    /// [`Arc::get_traced`] for a probe that reads on when it misses (a read
    /// that must not wait for a device tries the cache first): a hit counts
    /// and is a use; a miss is not counted, so the read that follows it
    /// counts the one miss.
    pub fn get_if_cached(&self, key: &K, kind: Kind) -> Option<(Value, bool)> {
        self.inner.lock().get(key, kind, false)
    }

    /// Caches `value` under `key`, normally after a [`Arc::get`] miss.
    ///
    /// If `key` is a ghost in B1 or B2, `p` adapts and a demand insert goes to
    /// T2 (a prefetch goes to T1). Otherwise the entry goes to T1. An
    /// existing cached value for `key` is replaced in place (same list). Room
    /// is made by evicting *before* the value is linked, so the byte limit
    /// is never exceeded. A value larger than [`Arc::max_bytes`] is not cached
    /// and any previous entry for `key` is dropped.
    pub fn insert(&self, key: K, value: Value, kind: Kind) {
        self.insert_with_l2(key, value, kind, true)
    }

    /// [`Arc::insert`], saying whether the entry's eviction is told to the
    /// evict hook (`false`: it is not offered to the second level). A value
    /// inserted again for a cached key takes the flag of the last insert.
    pub fn insert_with_l2(&self, key: K, value: Value, kind: Kind, l2cache: bool) {
        self.inner.lock().insert(key, value, kind, l2cache)
    }

    /// Calls `hook` with the key and value of every entry evicted from now on
    /// (the one eviction point, REPLACE) that was not inserted with
    /// `l2cache` false: the L2ARC is fed from it. The hook
    /// runs under the cache lock, so it must be quick, must not block on I/O
    /// and must not call back into this cache.
    pub fn set_evict_hook(&self, hook: EvictHook<K>) {
        self.inner.lock().evict_hook = Some(hook);
    }

    /// Forgets `key`, cached or ghost (e.g. when its block is freed).
    pub fn remove(&self, key: &K) {
        let mut g = self.inner.lock();
        if let Some(&i) = g.map.get(key) {
            g.drop_node(i);
        }
    }

    /// `true` if a value for `key` is cached. Does not count as an access.
    pub fn contains(&self, key: &K) -> bool {
        let g = self.inner.lock();
        g.map.get(key).is_some_and(|&i| !g.node(i).list.is_ghost())
    }

    /// Which list `key` is on, if any. Does not count as an access.
    pub fn residency(&self, key: &K) -> Option<Residency> {
        let g = self.inner.lock();
        g.map.get(key).map(|&i| g.node(i).list)
    }

    /// Changes the byte limit `c`. Shrinking evicts at once; `p` is clamped
    /// to the new limit.
    pub fn set_max_bytes(&self, max_bytes: u64) {
        self.inner.lock().set_c(max_bytes)
    }

    /// The byte limit `c`.
    pub fn max_bytes(&self) -> u64 {
        self.inner.lock().c
    }

    /// Bytes currently cached in T1 + T2 (always `<= max_bytes()`).
    pub fn size_bytes(&self) -> u64 {
        self.inner.lock().cached_bytes()
    }

    /// Number of cached entries (ghosts not counted).
    pub fn len(&self) -> usize {
        let g = self.inner.lock();
        (g.list(Residency::T1).len + g.list(Residency::T2).len) as usize
    }

    /// `true` if nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of counters and sizes.
    pub fn stats(&self) -> ArcStats {
        self.inner.lock().stats()
    }

    /// Zeroes the cumulative counters (sizes, `p` and `c` are untouched).
    pub fn reset_stats(&self) {
        self.inner.lock().counters = Counters::default();
    }

    /// Drops every entry and ghost and resets `p` to 0. Keeps the limit and
    /// the cumulative counters.
    pub fn clear(&self) {
        self.inner.lock().clear()
    }

    #[cfg(test)]
    fn check(&self) {
        self.inner.lock().check()
    }
}

impl<K: Hash + Eq + Clone + Send> fmt::Debug for Arc<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arc").field("stats", &self.stats()).finish()
    }
}

#[cfg(test)]
mod tests;

mod sizing;
pub use sizing::default_arc_max;
