//! The L2ARC: a second-level read cache on a cache device (`cache PATH`),
//! between the ARC and the pool's devices, as OpenZFS's `l2arc.c`.
//!
//! It is fed from what the ARC evicts: the ARC's eviction hook only pushes the
//! block onto a bounded [`FeedQueue`] (dropped when full: eviction never waits
//! for device I/O); a feeder thread per cache device takes the queue and writes
//! it as large sequential batches on the device's ring (format in `ring`). An
//! in-memory index maps each block's key to where its bytes are and their
//! BLAKE3 checksum. At import the index is rebuilt from the batches' log
//! blocks (persistent L2ARC).
//!
//! Invariants:
//! - A block is returned only if its bytes match the checksum the index holds;
//!   a mismatch or an I/O error counts an error and drops the entry, and the
//!   caller reads the pool instead. Bad data is never returned.
//! - Before a batch is written over a part of the ring, every entry whose bytes
//!   lie there leaves the index, so a lookup never trusts overwritten bytes (a
//!   read that raced with the overwrite fails its checksum, finds its entry
//!   gone, and is a miss, not an error).
//! - A key names one content (see `cache`); entries born after the pool's
//!   current txg (a rewound import) are not taken from the device.

mod ring;

/// For the `l2arc_header` fuzz target (crates/fuzzing): decode any bytes as a
/// cache device's batch header; never panics.
#[doc(hidden)]
pub fn fuzz_batch_header(data: &[u8]) {
    ring::fuzz_batch_header(data)
}

use crate::cache::BlockKey;
use cachalot_arc::Value;
use cachalot_pool::CacheVdev;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Largest block the L2ARC keeps (the largest record).
const MAX_BLOCK: usize = 1 << 20;
/// A feeder writes what it has after this long even if the batch is not full.
const FEED_INTERVAL: Duration = Duration::from_millis(200);

/// Blocks evicted from the ARC, waiting to be written to a cache device.
pub struct FeedQueue {
    q: Mutex<(Vec<(BlockKey, Value)>, u64)>,
    ready: Condvar,
    /// Bytes queued at most; more is dropped (the feed is best effort).
    cap: u64,
    /// Bytes that make a batch worth writing at once.
    batch: u64,
    /// Some cache device takes from the queue: until then nothing is queued.
    active: std::sync::atomic::AtomicBool,
}

impl FeedQueue {
    pub fn new(batch: u64) -> FeedQueue {
        FeedQueue {
            q: Mutex::new((Vec::new(), 0)),
            ready: Condvar::new(),
            cap: batch * 4,
            batch,
            active: Default::default(),
        }
    }

    /// Queue an evicted block (called under the ARC's lock: quick, no I/O).
    pub fn push(&self, key: &BlockKey, v: &Value) {
        if !self.active.load(Relaxed) || v.is_empty() || v.len() > MAX_BLOCK {
            return;
        }
        let mut q = self.q.lock();
        if q.1 + v.len() as u64 > self.cap {
            return;
        }
        q.0.push((*key, v.clone()));
        q.1 += v.len() as u64;
        if q.1 >= self.batch {
            self.ready.notify_one();
        }
    }

    /// Whether evicted blocks are queued at all (some cache device takes them);
    /// switched off, what is queued is dropped.
    pub fn set_active(&self, on: bool) {
        self.active.store(on, Relaxed);
        if !on {
            let mut q = self.q.lock();
            q.0.clear();
            q.1 = 0;
        }
    }

    /// What is queued now, without waiting.
    pub(crate) fn take_now(&self) -> Vec<(BlockKey, Value)> {
        let mut q = self.q.lock();
        q.1 = 0;
        std::mem::take(&mut q.0)
    }

    /// What is queued, once a batch is full or `FEED_INTERVAL` passed.
    fn take(&self) -> Vec<(BlockKey, Value)> {
        let mut q = self.q.lock();
        if q.1 < self.batch {
            self.ready.wait_for(&mut q, FEED_INTERVAL);
        }
        q.1 = 0;
        std::mem::take(&mut q.0)
    }
}

/// Where a block's bytes are on the ring.
#[derive(Clone, Copy, Debug)]
struct Entry {
    off: u64,
    len: u32,
    cksum: [u8; 32],
    /// The batch it was written in.
    seq: u64,
}

/// A batch on the ring: its place and the keys it holds.
struct Batch {
    off: u64,
    len: u64,
    seq: u64,
    keys: Vec<BlockKey>,
}

struct RingState {
    index: HashMap<BlockKey, Entry>,
    /// Batches in the order they were written (oldest first).
    batches: VecDeque<Batch>,
    /// Where the next batch goes.
    head: u64,
    next_seq: u64,
    /// Offset of the last batch written (`NO_PREV` before the first).
    prev: u64,
}

/// The L2ARC on one cache device.
pub struct L2Arc {
    dev: Arc<CacheVdev>,
    pool_guid: u64,
    /// The ring's byte range on the device.
    start: u64,
    end: u64,
    state: Mutex<RingState>,
}

impl L2Arc {
    /// Open the L2ARC of `dev`: rebuild its index from the ring (entries born
    /// after `max_birth` are left out), then start its feeder on `feed`.
    pub fn open(
        dev: Arc<CacheVdev>,
        pool_guid: u64,
        max_birth: u64,
        feed: &Arc<FeedQueue>,
    ) -> Arc<L2Arc> {
        let (start, end) = dev.ring();
        let l2 = Arc::new(L2Arc {
            dev,
            pool_guid,
            start,
            end,
            state: Mutex::new(RingState {
                index: HashMap::new(),
                batches: VecDeque::new(),
                head: start,
                // A fresh ring starts at a seq no old batch on it can follow.
                next_seq: cachalot_pool::new_guid(),
                prev: ring::NO_PREV,
            }),
        });
        l2.rebuild(max_birth);
        feed.set_active(true);
        // A deterministic run has no feeder thread: it calls `feed_now`.
        if cachalot_pool::Env::current().manual_txg() {
            return l2;
        }
        let weak = Arc::downgrade(&l2);
        let feed = feed.clone();
        let _ = std::thread::Builder::new()
            .name("l2arc-feed".into())
            .spawn(move || feeder(weak, feed));
        l2
    }

    pub fn device(&self) -> &Arc<CacheVdev> {
        &self.dev
    }

    /// Rebuild the index from the log blocks on the ring.
    fn rebuild(&self, max_birth: u64) {
        if !self.dev.usable() {
            return;
        }
        let batches = ring::scan(&self.dev, self.pool_guid, self.start, self.end);
        let mut st = self.state.lock();
        for (off, h) in batches {
            let mut keys = Vec::with_capacity(h.entries.len());
            for e in h.entries.iter().filter(|e| e.key.birth <= max_birth) {
                let entry = Entry {
                    off: off + e.data_off as u64,
                    len: e.len,
                    cksum: e.cksum,
                    seq: h.seq,
                };
                self.index_insert(&mut st, e.key, entry);
                keys.push(e.key);
            }
            st.head = off + h.len;
            st.prev = off;
            st.next_seq = h.seq.wrapping_add(1);
            st.batches.push_back(Batch {
                off,
                len: h.len,
                seq: h.seq,
                keys,
            });
        }
    }

    fn index_insert(&self, st: &mut RingState, key: BlockKey, e: Entry) {
        let used = &self.dev.counters.used;
        if let Some(old) = st.index.insert(key, e) {
            used.fetch_sub(old.len as u64, Relaxed);
        }
        used.fetch_add(e.len as u64, Relaxed);
    }

    /// Drop `key` if its entry is the one written in batch `seq` (any, if None).
    fn index_remove(&self, st: &mut RingState, key: &BlockKey, seq: Option<u64>) {
        if let Some(e) = st.index.get(key) {
            if seq.is_none_or(|s| s == e.seq) {
                self.dev.counters.used.fetch_sub(e.len as u64, Relaxed);
                st.index.remove(key);
            }
        }
    }

    /// Number of blocks the index holds.
    pub fn len(&self) -> usize {
        self.state.lock().index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `true` if the index holds `key` (no access counted).
    pub fn contains(&self, key: &BlockKey) -> bool {
        self.state.lock().index.contains_key(key)
    }

    /// The block's bytes if the device holds them and they verify (see the
    /// invariants); counts a hit, a miss or an error on the device.
    pub fn get(&self, key: &BlockKey) -> Option<Value> {
        if !self.dev.usable() {
            return None;
        }
        let c = &self.dev.counters;
        let Some(e) = self.state.lock().index.get(key).copied() else {
            c.misses.fetch_add(1, Relaxed);
            return None;
        };
        let mut buf = vec![0u8; e.len as usize];
        let read = self.dev.read_at(&mut buf, e.off);
        if read.is_ok() && blake3::hash(&buf).as_bytes() == &e.cksum {
            c.hits.fetch_add(1, Relaxed);
            return Some(buf.into());
        }
        let mut st = self.state.lock();
        let still = st.index.get(key).is_some_and(|now| now.seq == e.seq);
        if still {
            // An I/O error was counted by the device; bad bytes are counted here.
            if read.is_ok() {
                c.cksum.fetch_add(1, Relaxed);
            }
            self.index_remove(&mut st, key, Some(e.seq));
        }
        c.misses.fetch_add(1, Relaxed);
        None
    }

    /// Forget a freed block.
    pub fn remove(&self, key: &BlockKey) {
        let mut st = self.state.lock();
        self.index_remove(&mut st, key, None);
    }

    /// Write `blocks` (not yet on the device) as batches on the ring.
    pub(crate) fn write(&self, blocks: Vec<(BlockKey, Value)>, batch_bytes: u64) {
        let mut fresh: Vec<(BlockKey, Value)> = {
            let st = self.state.lock();
            blocks
                .into_iter()
                .filter(|(k, _)| !st.index.contains_key(k))
                .collect()
        };
        fresh.sort_by_key(|(k, _)| (k.vdev, k.offset, k.birth));
        fresh.dedup_by_key(|(k, _)| *k);
        let ring = self.end - self.start;
        let mut i = 0;
        while i < fresh.len() && self.dev.usable() {
            // As many blocks as fit in a batch (at least one).
            let mut n = 1;
            let mut bytes = fresh[i].1.len() as u64;
            while i + n < fresh.len()
                && n < ring::MAX_ENTRIES
                && bytes + fresh[i + n].1.len() as u64 <= batch_bytes
            {
                bytes += fresh[i + n].1.len() as u64;
                n += 1;
            }
            let chunk = &fresh[i..i + n];
            i += n;
            if ring::batch_size(chunk.iter().map(|(_, v)| v.len())) <= ring / 2 {
                self.write_batch(chunk);
            }
        }
    }

    /// Write one batch at the head (or the ring's start when it does not fit
    /// before the end), after dropping the entries it overwrites.
    fn write_batch(&self, chunk: &[(BlockKey, Value)]) {
        let size = ring::batch_size(chunk.iter().map(|(_, v)| v.len()));
        let (off, seq, prev) = {
            let mut st = self.state.lock();
            if st.head + size > self.end {
                st.head = self.start;
            }
            let (off, end) = (st.head, st.head + size);
            let gone: VecDeque<Batch> = {
                let (keep, gone) = std::mem::take(&mut st.batches)
                    .into_iter()
                    .partition(|b| b.off + b.len <= off || b.off >= end);
                st.batches = keep;
                gone
            };
            for b in gone {
                for k in &b.keys {
                    self.index_remove(&mut st, k, Some(b.seq));
                }
            }
            (off, st.next_seq, st.prev)
        };
        let (bytes, h) = ring::build_batch(self.pool_guid, self.dev.guid, seq, prev, chunk);
        if self.dev.write_at(&bytes, off).is_err() {
            return;
        }
        let mut st = self.state.lock();
        for e in &h.entries {
            let entry = Entry {
                off: off + e.data_off as u64,
                len: e.len,
                cksum: e.cksum,
                seq,
            };
            self.index_insert(&mut st, e.key, entry);
        }
        st.batches.push_back(Batch {
            off,
            len: h.len,
            seq,
            keys: h.entries.iter().map(|e| e.key).collect(),
        });
        st.head = off + h.len;
        st.prev = off;
        st.next_seq = seq.wrapping_add(1);
    }
}

/// The feeder of one cache device: takes evicted blocks from the queue and
/// writes them; ends when its L2ARC is dropped.
fn feeder(l2: Weak<L2Arc>, feed: Arc<FeedQueue>) {
    loop {
        let blocks = feed.take();
        let Some(l2) = l2.upgrade() else { return };
        if !blocks.is_empty() && l2.dev.usable() {
            l2.write(blocks, feed.batch);
        }
    }
}

#[cfg(test)]
mod tests;
