//! Always-on, drill-down analytics for Cachalot.
//!
//! Every layer of the engine (disks, pool, ARC, datasets, protocols) counts
//! and times what it does through one small API: a named [`Stat`] such as
//! `"disk.ops"` with ordered breakdown dimensions such as `["device", "op"]`.
//! Each event is recorded against a breakdown key (one value per dimension),
//! so the UI can later ask "ops by device", then drill into one device and
//! ask "ops by op type" (see [`StatSnapshot::by`] and
//! [`StatSnapshot::filter`]).
//!
//! ```
//! use std::time::Duration;
//! let reg = cachalot_analytics::Registry::new();
//! let ops = reg.stat("disk.ops", &["device", "op"]);
//! ops.add(&["sda", "read"], 1, 4096);
//! ops.record(&["sda", "write"], 8192, Duration::from_micros(250));
//! let snap = ops.snapshot();
//! assert_eq!(snap.total(), (2, 12288));
//! assert_eq!(snap.by("op")[0].0, "read");
//! ```
//!
//! # Invariants
//!
//! * **Counts are monotonic.** Count, bytes, latency sum and histogram
//!   buckets only ever grow (wrapping at `u64::MAX`, which is centuries away
//!   at any realistic rate), so consumers can derive rates by differencing
//!   successive snapshots, Prometheus-counter style. Successive snapshots of
//!   the same stat never go backwards.
//! * **Snapshots are a consistent-enough merge.** A snapshot locks one shard
//!   at a time and merges them. Each cell (count, bytes, latency) is read
//!   atomically with respect to the updates made to it, but different shards
//!   are read at slightly different instants; no global stop-the-world.
//! * **Bounded cardinality.** Each stat admits at most
//!   [`Stat::max_keys`] distinct breakdown keys (default
//!   [`DEFAULT_MAX_KEYS`]). Events for further new keys are aggregated into
//!   one overflow key whose every component is [`OTHER`], so a dimension that
//!   explodes (e.g. `"file"`) cannot exhaust memory. Totals stay exact.
//! * **Panic-free recording.** Recording never panics: missing key
//!   components are `""`, extra components are ignored, and asking the
//!   registry for an existing name with different dimensions returns the
//!   existing stat.
//!
//! # Why sharded
//!
//! Hot paths call [`Stat::add`] / [`Stat::record`] per I/O from many
//! threads. A single lock (or even a single atomic counter per key) would
//! make every core bounce the same cache line. Instead each stat holds a
//! power-of-two number of cache-line-aligned shards, each a
//! `parking_lot::Mutex` around a small hash map; a thread always uses the
//! shard picked by its thread-local index, so the lock is nearly always
//! uncontended and stays in that core's cache. The key is hashed from the
//! borrowed `&[&str]` and looked up without allocating; allocation happens
//! only the first time a key is seen in a shard. Readers (snapshots) pay the
//! cost of merging instead.
//!
//! Looking a stat up by name takes the registry lock, so hot paths should
//! obtain their [`Stat`] once (at construction, or in a `static`
//! `OnceLock`) and keep the cheap clone around.

#![warn(missing_docs)]

pub mod catalog;
pub mod classify;
pub mod files;
pub mod query;
pub mod series;

use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

/// Number of latency histogram buckets; bucket `i` holds `[2^i, 2^(i+1))` ns.
pub const LATENCY_BUCKETS: usize = 41;

/// Number of size histogram buckets; bucket `i` holds `[2^i, 2^(i+1))` bytes.
pub const SIZE_BUCKETS: usize = 32;

/// Default cap on distinct breakdown keys per stat.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// Key component used for every dimension of the overflow key that absorbs
/// events once a stat has reached its distinct-key cap.
pub const OTHER: &str = "(other)";

/// Upper bound on the number of shards per stat.
const MAX_SHARDS: usize = 64;

// ---------------------------------------------------------------------------
// Latency buckets
// ---------------------------------------------------------------------------

/// Histogram bucket index for a latency: `floor(log2(nanoseconds))`.
///
/// Bucket `i` holds `[2^i, 2^(i+1))` ns. A zero latency is counted in bucket
/// 0 and anything at or above `2^40` ns (about 18 minutes) in bucket 40.
pub fn latency_bucket(d: Duration) -> usize {
    let ns = duration_ns(d);
    if ns == 0 {
        0
    } else {
        (63 - ns.leading_zeros() as usize).min(LATENCY_BUCKETS - 1)
    }
}

/// Nominal bounds `(lo_ns, hi_ns)` of histogram bucket `i`: `[2^i, 2^(i+1))`.
///
/// Indices above 40 are clamped to 40. Note that bucket 0 also absorbs zero
/// latencies and bucket 40 everything longer than its nominal upper bound
/// (treat it as `+Inf` when exporting cumulative histograms).
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    let i = i.min(LATENCY_BUCKETS - 1);
    (1u64 << i, 1u64 << (i + 1))
}

/// Size histogram bucket index: `floor(log2(bytes))`, capped at
/// `SIZE_BUCKETS - 1` (4 GiB and above). Zero-byte events have no size bucket.
pub fn size_bucket(bytes: u64) -> usize {
    if bytes == 0 {
        0
    } else {
        (63 - bytes.leading_zeros() as usize).min(SIZE_BUCKETS - 1)
    }
}

// ---------------------------------------------------------------------------
// On/off switch
// ---------------------------------------------------------------------------

static ENABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turn recording on or off process-wide (`cachalot serve --analytics off`).
/// While off, [`Stat::add`] and [`Stat::record`] return after one relaxed load,
/// so the cost of always-on analytics can be measured against this.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether recording is on (see [`set_enabled`]).
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------
// Internal storage
// ---------------------------------------------------------------------------

/// An owned, normalized breakdown key: exactly one component per dimension.
/// Shared (one allocation) between all shards and the admitted-key set.
type Key = Arc<[Box<str>]>;

/// Hasher for maps keyed by an already-computed 64-bit hash.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used in practice; stay correct regardless.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Accumulated values for one key in one shard.
#[derive(Default)]
struct Cell {
    count: u64,
    bytes: u64,
    latency_sum_ns: u64,
    /// Allocated on the first timed event only.
    buckets: Option<Box<[u64; LATENCY_BUCKETS]>>,
    /// Allocated on the first timed event with a non-zero byte count.
    sizes: Option<Box<[u64; SIZE_BUCKETS]>>,
}

/// A [`Cell`] copied out of a shard for merging (no allocation).
struct CellCopy {
    count: u64,
    bytes: u64,
    latency_sum_ns: u64,
    buckets: Option<[u64; LATENCY_BUCKETS]>,
    sizes: Option<[u64; SIZE_BUCKETS]>,
}

struct Entry {
    key: Key,
    cell: Cell,
}

/// hash -> entries with that hash (almost always exactly one).
type ShardMap = IdMap<Vec<Entry>>;

/// One shard, padded to its own cache lines so that shards used by
/// different cores never share a line.
#[repr(align(128))]
struct Shard {
    map: Mutex<ShardMap>,
}

/// The set of distinct keys a stat has admitted (shared by all shards).
/// Touched only when a key is seen for the first time in a shard.
#[derive(Default)]
struct KeySet {
    map: IdMap<Vec<Key>>,
    len: usize,
}

impl KeySet {
    fn find(&self, hash: u64, width: usize, keys: &[&str]) -> Option<&Key> {
        self.map.get(&hash)?.iter().find(|k| key_eq(k, width, keys))
    }
}

struct Inner {
    name: String,
    dims: Vec<String>,
    max_keys: usize,
    hasher: RandomState,
    shards: Box<[Shard]>,
    shard_mask: usize,
    admitted: RwLock<KeySet>,
    other_key: Key,
    other_hash: u64,
}

/// Does the stored key equal `keys` normalized to `width` components?
fn key_eq(stored: &[Box<str>], width: usize, keys: &[&str]) -> bool {
    stored.len() == width
        && stored
            .iter()
            .enumerate()
            .all(|(i, s)| **s == *keys.get(i).copied().unwrap_or(""))
}

fn hash_key(hasher: &RandomState, width: usize, keys: &[&str]) -> u64 {
    let mut h = hasher.build_hasher();
    for i in 0..width {
        keys.get(i).copied().unwrap_or("").hash(&mut h);
    }
    h.finish()
}

fn shard_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        (cpus * 2).next_power_of_two().clamp(4, MAX_SHARDS)
    })
}

/// This thread's shard index (round-robin assigned on first use).
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    // `try_with` fails only during thread-local destruction; any shard works.
    INDEX.try_with(|i| *i).unwrap_or(0)
}

impl Inner {
    fn new(name: &str, dims: &[&str], max_keys: usize) -> Self {
        let hasher = RandomState::new();
        let width = dims.len();
        let other: Vec<&str> = vec![OTHER; width];
        let other_hash = hash_key(&hasher, width, &other);
        let other_key: Key = other.iter().map(|s| Box::<str>::from(*s)).collect();
        let n = shard_count();
        let shards = (0..n)
            .map(|_| Shard {
                map: Mutex::new(ShardMap::default()),
            })
            .collect();
        Inner {
            name: name.to_owned(),
            dims: dims.iter().map(|d| (*d).to_owned()).collect(),
            max_keys,
            hasher,
            shards,
            shard_mask: n - 1,
            admitted: RwLock::new(KeySet::default()),
            other_key,
            other_hash,
        }
    }

    /// Run `f` on this thread's cell for `keys` (the hot path).
    #[inline]
    fn with_cell(&self, keys: &[&str], f: impl FnOnce(&mut Cell)) {
        if !enabled() {
            return;
        }
        let width = self.dims.len();
        let hash = hash_key(&self.hasher, width, keys);
        let shard = &self.shards[thread_index() & self.shard_mask];
        let mut map = shard.map.lock();
        if let Some(bucket) = map.get_mut(&hash) {
            if let Some(e) = bucket.iter_mut().find(|e| key_eq(&e.key, width, keys)) {
                f(&mut e.cell);
                return;
            }
        }
        // First time this key is seen in this shard (or an over-cap key).
        let (hash, key) = self.admit(hash, keys);
        let bucket = map.entry(hash).or_default();
        let pos = match bucket.iter().position(|e| Arc::ptr_eq(&e.key, &key)) {
            Some(pos) => pos,
            None => {
                bucket.push(Entry {
                    key,
                    cell: Cell::default(),
                });
                bucket.len() - 1
            }
        };
        f(&mut bucket[pos].cell);
    }

    /// Return the canonical key for `keys`, admitting it if the stat is
    /// below its cap, or the overflow key otherwise.
    #[cold]
    fn admit(&self, hash: u64, keys: &[&str]) -> (u64, Key) {
        let width = self.dims.len();
        if key_eq(&self.other_key, width, keys) {
            return (self.other_hash, self.other_key.clone());
        }
        {
            let set = self.admitted.read();
            if let Some(k) = set.find(hash, width, keys) {
                return (hash, k.clone());
            }
            if set.len >= self.max_keys {
                return (self.other_hash, self.other_key.clone());
            }
        }
        let mut set = self.admitted.write();
        if let Some(k) = set.find(hash, width, keys) {
            return (hash, k.clone());
        }
        if set.len >= self.max_keys {
            return (self.other_hash, self.other_key.clone());
        }
        let key: Key = (0..width)
            .map(|i| Box::<str>::from(keys.get(i).copied().unwrap_or("")))
            .collect();
        set.map.entry(hash).or_default().push(key.clone());
        set.len += 1;
        (hash, key)
    }
}

// ---------------------------------------------------------------------------
// Stat
// ---------------------------------------------------------------------------

/// A named statistic, e.g. `"disk.ops"`, with ordered breakdown dimensions,
/// e.g. `["device", "op"]`.
///
/// Cheap to clone (an `Arc` inside); all clones record into the same data.
/// Recording is thread-safe, lock-sharded and allocation-free for keys that
/// have been seen before on the calling thread's shard.
#[derive(Clone)]
pub struct Stat {
    inner: Arc<Inner>,
}

impl fmt::Debug for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stat")
            .field("name", &self.inner.name)
            .field("dims", &self.inner.dims)
            .finish_non_exhaustive()
    }
}

impl Stat {
    /// A standalone stat not registered anywhere (registries use this too).
    pub fn new(name: &str, dims: &[&str]) -> Self {
        Self::with_max_keys(name, dims, DEFAULT_MAX_KEYS)
    }

    /// A standalone stat admitting at most `max_keys` distinct breakdown
    /// keys (further keys aggregate into the all-[`OTHER`] key).
    pub fn with_max_keys(name: &str, dims: &[&str], max_keys: usize) -> Self {
        Stat {
            inner: Arc::new(Inner::new(name, dims, max_keys)),
        }
    }

    /// The stat's name, e.g. `"disk.ops"`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The breakdown dimensions, in key order, e.g. `["device", "op"]`.
    pub fn dims(&self) -> &[String] {
        &self.inner.dims
    }

    /// Maximum number of distinct keys (not counting the overflow key).
    pub fn max_keys(&self) -> usize {
        self.inner.max_keys
    }

    /// Number of distinct keys admitted so far (not counting the overflow
    /// key). Never exceeds [`Stat::max_keys`].
    pub fn distinct_keys(&self) -> usize {
        self.inner.admitted.read().len
    }

    /// Whether `self` and `other` are handles to the same statistic.
    pub fn ptr_eq(&self, other: &Stat) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Add `count` events and `bytes` (may be 0) for the breakdown key
    /// `keys` (values in [`dims`](Stat::dims) order; fewer keys than dims
    /// means the remaining dims are `""`, extra keys are ignored).
    #[inline]
    pub fn add(&self, keys: &[&str], count: u64, bytes: u64) {
        self.inner.with_cell(keys, |c| {
            c.count = c.count.wrapping_add(count);
            c.bytes = c.bytes.wrapping_add(bytes);
        });
    }

    /// Count one event for `keys` with no byte count; shorthand for
    /// `add(keys, 1, 0)`.
    #[inline]
    pub fn inc(&self, keys: &[&str]) {
        self.add(keys, 1, 0);
    }

    /// One event with its latency: counts 1, adds `bytes`, adds the latency
    /// to the log2-bucketed histogram (see [`latency_bucket`]) and to the
    /// latency sum.
    #[inline]
    pub fn record(&self, keys: &[&str], bytes: u64, latency: Duration) {
        let ns = duration_ns(latency);
        let bucket = latency_bucket(latency);
        self.inner.with_cell(keys, |c| {
            c.count = c.count.wrapping_add(1);
            c.bytes = c.bytes.wrapping_add(bytes);
            c.latency_sum_ns = c.latency_sum_ns.wrapping_add(ns);
            let buckets = c
                .buckets
                .get_or_insert_with(|| Box::new([0; LATENCY_BUCKETS]));
            buckets[bucket] = buckets[bucket].wrapping_add(1);
            if bytes > 0 {
                let sizes = c.sizes.get_or_insert_with(|| Box::new([0; SIZE_BUCKETS]));
                let i = size_bucket(bytes);
                sizes[i] = sizes[i].wrapping_add(1);
            }
        });
    }

    /// Start a timer for one event on `keys`. [`Timer::finish`] records it
    /// with the elapsed time; dropping an unfinished timer records it with
    /// `bytes = 0`.
    pub fn timer<'a>(&'a self, keys: &'a [&'a str]) -> Timer<'a> {
        Timer {
            stat: self,
            keys,
            start: Some(Instant::now()),
        }
    }

    /// Merge all shards into one snapshot; rows sorted by key.
    pub fn snapshot(&self) -> StatSnapshot {
        let mut merged: BTreeMap<Key, Row> = BTreeMap::new();
        let mut copied: Vec<(Key, CellCopy)> = Vec::new();
        for shard in self.inner.shards.iter() {
            // Copy out under the lock (cheap), merge outside it.
            copied.clear();
            {
                let map = shard.map.lock();
                copied.reserve(map.len());
                for e in map.values().flatten() {
                    let c = &e.cell;
                    let copy = CellCopy {
                        count: c.count,
                        bytes: c.bytes,
                        latency_sum_ns: c.latency_sum_ns,
                        buckets: c.buckets.as_deref().copied(),
                        sizes: c.sizes.as_deref().copied(),
                    };
                    copied.push((e.key.clone(), copy));
                }
            }
            for (key, c) in copied.drain(..) {
                let row = merged.entry(key).or_insert_with_key(|k| Row {
                    keys: k.iter().map(|s| s.to_string()).collect(),
                    ..Row::default()
                });
                row.count = row.count.wrapping_add(c.count);
                row.bytes = row.bytes.wrapping_add(c.bytes);
                row.latency_sum_ns = row.latency_sum_ns.wrapping_add(c.latency_sum_ns);
                if let Some(b) = c.buckets {
                    if row.latency_buckets.is_empty() {
                        row.latency_buckets = vec![0; LATENCY_BUCKETS];
                    }
                    for (dst, src) in row.latency_buckets.iter_mut().zip(b.iter()) {
                        *dst = dst.wrapping_add(*src);
                    }
                }
                if let Some(b) = c.sizes {
                    if row.size_buckets.is_empty() {
                        row.size_buckets = vec![0; SIZE_BUCKETS];
                    }
                    for (dst, src) in row.size_buckets.iter_mut().zip(b.iter()) {
                        *dst = dst.wrapping_add(*src);
                    }
                }
            }
        }
        StatSnapshot {
            name: self.inner.name.clone(),
            dims: self.inner.dims.clone(),
            rows: merged.into_values().collect(),
        }
    }

    /// Total `(count, bytes)` over all keys, without building rows.
    pub fn total(&self) -> (u64, u64) {
        let mut count = 0u64;
        let mut bytes = 0u64;
        for shard in self.inner.shards.iter() {
            let map = shard.map.lock();
            for e in map.values().flatten() {
                count = count.wrapping_add(e.cell.count);
                bytes = bytes.wrapping_add(e.cell.bytes);
            }
        }
        (count, bytes)
    }
}

// ---------------------------------------------------------------------------
// Timer
// ---------------------------------------------------------------------------

/// Times one event for a [`Stat`]; see [`Stat::timer`].
///
/// Records exactly once: on [`Timer::finish`], or with `bytes = 0` when
/// dropped unfinished.
#[must_use = "a timer records when finished or dropped; dropping it immediately records ~0 latency"]
pub struct Timer<'a> {
    stat: &'a Stat,
    keys: &'a [&'a str],
    start: Option<Instant>,
}

impl Timer<'_> {
    /// Time elapsed since the timer started.
    pub fn elapsed(&self) -> Duration {
        self.start.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Record the event with `bytes` and the elapsed time.
    pub fn finish(mut self, bytes: u64) {
        self.complete(bytes);
    }

    fn complete(&mut self, bytes: u64) {
        if let Some(start) = self.start.take() {
            self.stat.record(self.keys, bytes, start.elapsed());
        }
    }
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.complete(0);
    }
}

impl fmt::Debug for Timer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("stat", &self.stat.name())
            .field("keys", &self.keys)
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------

/// Point-in-time copy of one stat, merged over all shards.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatSnapshot {
    /// Stat name, e.g. `"disk.ops"`.
    pub name: String,
    /// Breakdown dimensions, e.g. `["device", "op"]`.
    pub dims: Vec<String>,
    /// One row per distinct key, sorted by key.
    pub rows: Vec<Row>,
}

/// Accumulated values for one breakdown key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// Key values, one per dimension (in `dims` order).
    pub keys: Vec<String>,
    /// Number of events.
    pub count: u64,
    /// Bytes moved by those events.
    pub bytes: u64,
    /// Sum of recorded latencies, in nanoseconds (timed events only).
    pub latency_sum_ns: u64,
    /// Latency histogram: empty if never timed, else [`LATENCY_BUCKETS`]
    /// entries where entry `i` counts events in [`bucket_bounds`]`(i)`.
    pub latency_buckets: Vec<u64>,
    /// Size histogram of timed events with bytes: empty if none, else
    /// [`SIZE_BUCKETS`] entries where entry `i` counts events of
    /// `[2^i, 2^(i+1))` bytes.
    #[serde(default)]
    pub size_buckets: Vec<u64>,
}

impl StatSnapshot {
    /// Index of dimension `dim`, if the stat has it.
    pub fn dim_index(&self, dim: &str) -> Option<usize> {
        self.dims.iter().position(|d| d == dim)
    }

    /// Roll up by one dimension: `(value, count, bytes)` per distinct value
    /// of `dim`, largest count first (ties by value). Empty if the stat has
    /// no such dimension.
    pub fn by(&self, dim: &str) -> Vec<(String, u64, u64)> {
        let Some(i) = self.dim_index(dim) else {
            return Vec::new();
        };
        let mut acc: HashMap<&str, (u64, u64)> = HashMap::new();
        for row in &self.rows {
            let v = row.keys.get(i).map_or("", String::as_str);
            let e = acc.entry(v).or_default();
            e.0 = e.0.wrapping_add(row.count);
            e.1 = e.1.wrapping_add(row.bytes);
        }
        let mut out: Vec<(String, u64, u64)> = acc
            .into_iter()
            .map(|(k, (c, b))| (k.to_owned(), c, b))
            .collect();
        out.sort_by(|a, b| (Reverse(a.1), &a.0).cmp(&(Reverse(b.1), &b.0)));
        out
    }

    /// Drill down: only the rows whose `dim` equals `value` (no rows if the
    /// stat has no such dimension). Combine with [`StatSnapshot::by`], e.g.
    /// `snap.filter("device", "sda").by("op")`.
    pub fn filter(&self, dim: &str, value: &str) -> StatSnapshot {
        let rows = match self.dim_index(dim) {
            Some(i) => self
                .rows
                .iter()
                .filter(|r| r.keys.get(i).map_or("", String::as_str) == value)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        StatSnapshot {
            name: self.name.clone(),
            dims: self.dims.clone(),
            rows,
        }
    }

    /// Total `(count, bytes)` over all rows.
    pub fn total(&self) -> (u64, u64) {
        self.rows.iter().fold((0, 0), |(c, b), r| {
            (c.wrapping_add(r.count), b.wrapping_add(r.bytes))
        })
    }

    /// Latency histogram summed over all rows: empty if nothing was timed,
    /// else [`LATENCY_BUCKETS`] entries.
    pub fn latency_buckets(&self) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::new();
        for row in self.rows.iter().filter(|r| !r.latency_buckets.is_empty()) {
            if out.is_empty() {
                out = vec![0; LATENCY_BUCKETS];
            }
            for (dst, src) in out.iter_mut().zip(&row.latency_buckets) {
                *dst = dst.wrapping_add(*src);
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------

/// A set of named stats. Most code uses the process-wide [`global`] one;
/// tests create their own with [`Registry::new`].
#[derive(Default)]
pub struct Registry {
    stats: RwLock<BTreeMap<String, Stat>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("stats", &self.stats.read().keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The process-wide registry.
pub fn global() -> &'static Registry {
    static GLOBAL: OnceLock<Registry> = OnceLock::new();
    GLOBAL.get_or_init(Registry::new)
}

impl Registry {
    /// An empty registry, separate from [`global`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Get or create the stat `name` with dimensions `dims` and the default
    /// key cap. The same name always returns the same stat; if it already
    /// exists with different dims, the existing stat is returned unchanged.
    pub fn stat(&self, name: &str, dims: &[&str]) -> Stat {
        self.stat_with_max_keys(name, dims, DEFAULT_MAX_KEYS)
    }

    /// Like [`Registry::stat`], with a cap of `max_keys` distinct keys when
    /// the stat is created (ignored if it already exists).
    pub fn stat_with_max_keys(&self, name: &str, dims: &[&str], max_keys: usize) -> Stat {
        if let Some(s) = self.stats.read().get(name) {
            return s.clone();
        }
        self.stats
            .write()
            .entry(name.to_owned())
            .or_insert_with(|| Stat::with_max_keys(name, dims, max_keys))
            .clone()
    }

    /// The stat called `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<Stat> {
        self.stats.read().get(name).cloned()
    }

    /// `(name, dims)` of every stat, sorted by name.
    pub fn names(&self) -> Vec<(String, Vec<String>)> {
        self.stats
            .read()
            .values()
            .map(|s| (s.name().to_owned(), s.dims().to_vec()))
            .collect()
    }

    /// Snapshot every stat, sorted by name.
    pub fn snapshot(&self) -> Vec<StatSnapshot> {
        // Clone the handles first so the registry lock is not held while
        // merging shards.
        let stats: Vec<Stat> = self.stats.read().values().cloned().collect();
        stats.iter().map(Stat::snapshot).collect()
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn threads_sum_correctly() {
        let reg = Registry::new();
        let s = reg.stat("disk.ops", &["device", "op"]);
        const THREADS: u64 = 4;
        const N: u64 = 100_000;
        thread::scope(|sc| {
            for t in 0..THREADS {
                let s = s.clone();
                sc.spawn(move || {
                    let dev = if t % 2 == 0 { "sda" } else { "sdb" };
                    for i in 0..N {
                        let op = if i % 4 == 0 { "write" } else { "read" };
                        s.add(&[dev, op], 1, 512);
                    }
                });
            }
        });
        assert_eq!(s.total(), (THREADS * N, THREADS * N * 512));
        let snap = s.snapshot();
        assert_eq!(snap.total(), (THREADS * N, THREADS * N * 512));
        assert_eq!(snap.rows.len(), 4);
        // Rows sorted by key.
        let keys: Vec<_> = snap.rows.iter().map(|r| r.keys.join("/")).collect();
        assert_eq!(keys, ["sda/read", "sda/write", "sdb/read", "sdb/write"]);
        let sda_write = &snap.rows[1];
        assert_eq!(sda_write.count, 2 * N / 4);
        assert!(sda_write.latency_buckets.is_empty());
        assert_eq!(s.distinct_keys(), 4);
    }

    #[test]
    fn rollups_and_drilldown() {
        let s = Stat::new("disk.ops", &["device", "op"]);
        s.add(&["sda", "read"], 10, 100);
        s.add(&["sda", "write"], 5, 50);
        s.add(&["sdb", "read"], 30, 300);
        s.add(&["sdc"], 1, 1); // op = ""
        s.add(&["sdc", "", "ignored"], 1, 1); // extra key ignored
        let snap = s.snapshot();
        assert_eq!(
            snap.by("device"),
            vec![
                ("sdb".to_string(), 30, 300),
                ("sda".to_string(), 15, 150),
                ("sdc".to_string(), 2, 2)
            ]
        );
        assert_eq!(
            snap.by("op"),
            vec![
                ("read".to_string(), 40, 400),
                ("write".to_string(), 5, 50),
                (String::new(), 2, 2)
            ]
        );
        assert!(snap.by("nope").is_empty());
        assert_eq!(snap.total(), (47, 452));
        let sda = snap.filter("device", "sda");
        assert_eq!(sda.total(), (15, 150));
        assert_eq!(sda.by("op")[0], ("read".to_string(), 10, 100));
        assert_eq!(snap.rows.len(), 4);
    }

    #[test]
    fn latency_buckets_and_bounds() {
        assert_eq!(bucket_bounds(0), (1, 2));
        assert_eq!(bucket_bounds(10), (1024, 2048));
        assert_eq!(bucket_bounds(40), (1 << 40, 1 << 41));
        assert_eq!(bucket_bounds(99), bucket_bounds(40));
        for i in 0..LATENCY_BUCKETS {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(latency_bucket(Duration::from_nanos(lo)), i);
            assert_eq!(latency_bucket(Duration::from_nanos(hi - 1)), i);
            if i + 1 < LATENCY_BUCKETS {
                assert_eq!(bucket_bounds(i + 1).0, hi);
            }
        }
        assert_eq!(latency_bucket(Duration::ZERO), 0);
        assert_eq!(latency_bucket(Duration::from_secs(1 << 40)), 40);
        assert_eq!(latency_bucket(Duration::MAX), 40);

        // 1 ms = 1_000_000 ns lies in [2^19, 2^20).
        let ms = Duration::from_millis(1);
        assert_eq!(latency_bucket(ms), 19);
        let (lo, hi) = bucket_bounds(19);
        assert!(lo <= 1_000_000 && 1_000_000 < hi);

        let s = Stat::new("zio.latency", &["op"]);
        s.record(&["read"], 4096, ms);
        s.add(&["write"], 1, 0);
        let snap = s.snapshot();
        let read = &snap.rows[0];
        assert_eq!(read.keys, ["read"]);
        assert_eq!((read.count, read.bytes), (1, 4096));
        assert_eq!(read.latency_sum_ns, 1_000_000);
        assert_eq!(read.latency_buckets.len(), LATENCY_BUCKETS);
        assert_eq!(read.latency_buckets[19], 1);
        assert_eq!(read.latency_buckets.iter().sum::<u64>(), 1);
        assert!(snap.rows[1].latency_buckets.is_empty());
        assert_eq!(snap.latency_buckets()[19], 1);
    }

    #[test]
    fn timer_records() {
        let s = Stat::new("arc.lookup", &["result"]);
        {
            let t = s.timer(&["hit"]);
            thread::sleep(Duration::from_millis(2));
            t.finish(8192);
        }
        {
            let _t = s.timer(&["miss"]); // dropped unfinished: bytes = 0
        }
        let snap = s.snapshot();
        let hit = &snap.rows[0];
        assert_eq!(hit.keys, ["hit"]);
        assert_eq!((hit.count, hit.bytes), (1, 8192));
        assert!(hit.latency_sum_ns >= 2_000_000);
        assert_eq!(hit.latency_buckets.iter().sum::<u64>(), 1);
        let b = hit.latency_buckets.iter().position(|&n| n == 1).unwrap();
        assert!(bucket_bounds(b).1 > 2_000_000);
        let miss = &snap.rows[1];
        assert_eq!(miss.keys, ["miss"]);
        assert_eq!((miss.count, miss.bytes), (1, 0));
        assert_eq!(miss.latency_buckets.iter().sum::<u64>(), 1);
    }

    #[test]
    fn cardinality_cap() {
        let reg = Registry::new();
        let s = reg.stat_with_max_keys("fs.ops", &["file", "op"], 100);
        thread::scope(|sc| {
            for t in 0..2 {
                let s = &s;
                sc.spawn(move || {
                    for i in 0..1000 {
                        let f = format!("file{i}");
                        s.add(&[&f, "read"], 1, 10);
                        let _ = t;
                    }
                });
            }
        });
        assert_eq!(s.distinct_keys(), 100);
        let snap = s.snapshot();
        assert_eq!(snap.rows.len(), 101);
        assert_eq!(snap.total(), (2000, 20000));
        let other = snap
            .rows
            .iter()
            .find(|r| r.keys == [OTHER, OTHER])
            .expect("overflow row");
        assert_eq!(other.count, 2000 - 2 * 100);
        // Admitted keys keep counting exactly.
        s.add(&["file0", "read"], 1, 0);
        let row = s
            .snapshot()
            .rows
            .into_iter()
            .find(|r| r.keys == ["file0", "read"])
            .expect("admitted row");
        assert_eq!(row.count, 3);
        // Default cap.
        assert_eq!(reg.stat("x", &[]).max_keys(), DEFAULT_MAX_KEYS);
    }

    #[test]
    fn same_name_same_stat() {
        let reg = Registry::new();
        let a = reg.stat("disk.ops", &["device", "op"]);
        let b = reg.stat("disk.ops", &["device", "op"]);
        let c = reg.stat("disk.ops", &["other"]); // dims differ: existing wins
        assert!(a.ptr_eq(&b) && a.ptr_eq(&c));
        assert_eq!(c.dims(), ["device", "op"]);
        a.add(&["sda", "read"], 2, 0);
        assert_eq!(b.total(), (2, 0));
        assert!(reg.get("disk.ops").unwrap().ptr_eq(&a));
        assert!(reg.get("missing").is_none());

        reg.stat("arc.hits", &["kind"]);
        assert_eq!(
            reg.names(),
            vec![
                ("arc.hits".to_string(), vec!["kind".to_string()]),
                (
                    "disk.ops".to_string(),
                    vec!["device".to_string(), "op".to_string()]
                ),
            ]
        );
        let snaps = reg.snapshot();
        assert_eq!(snaps.len(), 2);
        assert_eq!(snaps[0].name, "arc.hits");
        assert_eq!(snaps[1].total(), (2, 0));
        assert!(global()
            .stat("test.global", &[])
            .ptr_eq(&global().get("test.global").unwrap()));
    }

    #[test]
    fn no_dims_and_serialization_shape() {
        let s = Stat::new("txg.syncs", &[]);
        s.add(&[], 3, 0);
        s.add(&["ignored"], 1, 0);
        let snap = s.snapshot();
        assert_eq!(snap.rows.len(), 1);
        assert_eq!(snap.rows[0].keys, Vec::<String>::new());
        assert_eq!(snap.total(), (4, 0));
        // A literal all-"(other)" key does not consume the cap.
        let t = Stat::with_max_keys("t", &["k"], 1);
        t.inc(&[OTHER]);
        t.inc(&["a"]);
        t.inc(&["b"]);
        assert_eq!(t.distinct_keys(), 1);
        assert_eq!(t.snapshot().by("k")[0], (OTHER.to_string(), 2, 0));
    }

    /// Micro-benchmark; run with
    /// `cargo test -p cachalot-analytics --release -- --ignored --nocapture bench`.
    #[test]
    #[ignore]
    fn bench_add() {
        const N: u64 = 2_000_000;
        let s = Stat::new("bench.ops", &["device", "op"]);
        let devs = ["sda", "sdb", "sdc", "sdd"];
        let ops = ["read", "write"];
        let run = |s: &Stat| {
            let start = Instant::now();
            for i in 0..N as usize {
                s.add(&[devs[i & 3], ops[(i >> 2) & 1]], 1, 4096);
            }
            start.elapsed()
        };
        // Baseline for context: one uncontended lock/unlock plus an add.
        let m = Mutex::new(0u64);
        let start = Instant::now();
        for i in 0..N {
            *std::hint::black_box(&m).lock() += i;
        }
        println!(
            "baseline Mutex lock+add+unlock: {:.1} ns/op",
            start.elapsed().as_nanos() as f64 / N as f64
        );
        run(&s); // warm up
        let t1 = run(&s);
        println!(
            "add, 1 thread:  {:.1} ns/op",
            t1.as_nanos() as f64 / N as f64
        );
        let t2: Vec<Duration> = thread::scope(|sc| {
            let hs: Vec<_> = (0..2).map(|_| sc.spawn(|| run(&s))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, t) in t2.iter().enumerate() {
            println!(
                "add, 2 threads (thread {i}): {:.1} ns/op",
                t.as_nanos() as f64 / N as f64
            );
        }
        let start = Instant::now();
        for i in 0..N as usize {
            s.record(&[devs[i & 3], "read"], 4096, Duration::from_nanos(i as u64));
        }
        println!(
            "record, 1 thread: {:.1} ns/op",
            start.elapsed().as_nanos() as f64 / N as f64
        );
        let start = Instant::now();
        for _ in 0..N {
            let _t = s.timer(&["sda", "read"]);
        }
        println!(
            "timer (start+drop), 1 thread: {:.1} ns/op",
            start.elapsed().as_nanos() as f64 / N as f64
        );
        // warm-up + 1 thread + 2 threads + record + timer
        assert_eq!(s.total().0, 6 * N);
    }
}
