//! The read path: a read's records come from the in-memory layers or the tree;
//! tree records of one read are fetched concurrently, and a read that continues a
//! sequential stream prefetches the records ahead of it into the ARC in the
//! background (`readahead`, `BlockCache::prefetch`). Both run on the pool's I/O
//! executor (`cachalot_pool::executor`, through `Env::io`): threads in
//! production, the simulator's own thread under the simulator.
//!
//! Invariants: records are copied in block order whatever order their reads end
//! in; tree reads happen without the object set's lock, under a read hold taken
//! before the pointers were copied (`readhold`), and prefetch jobs keep a clone
//! of that hold until they end. Read-ahead never skips the in-memory layers: it
//! only fills the ARC, by block identity, so a later read still finds newer
//! records in memory first (see `cache`).

use super::{corrupt, resized, LayerHit, ObjectSet, Result};
use crate::cache::{BlockCache, CachePolicy};
use crate::dnode::*;
use crate::payload::{zeroed, Payload};
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::executor::IoExecutor;
use cachalot_pool::{BlkPtr, SharedReadHold};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How a tree walk reads indirect blocks: for a waiting reader, ahead of one,
/// or from the ARC only (for a reader that must not wait).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    Demand,
    Prefetch,
    Cached,
}

/// Walk a tree to the pointer of level-0 block `blkid`, and say for how many
/// blocks from `blkid` on the answer holds: 1 for data, the rest of the hole's
/// subtree for a hole (so sparse ranges are skipped a subtree at a time).
/// 0 blocks: the walk stopped at an indirect block it could not have (a
/// failed prefetch; for `Cached`, one not in the ARC). `Demand` never stops.
pub(super) fn walk(
    cache: &BlockCache,
    phys: &DnodePhys,
    blkid: u64,
    want: Want,
    policy: CachePolicy,
) -> Result<(BlkPtr, u64)> {
    if phys.root.is_hole() || blkid >= phys.capacity() {
        return Ok((BlkPtr::HOLE, u64::MAX - blkid));
    }
    let mut bp = phys.root;
    let mut level = phys.nlevels - 1;
    while level > 0 {
        let block = match want {
            Want::Demand => cache.read(&bp, policy)?,
            // A failed prefetch of an indirect block ends the walk quietly: the
            // demand read will meet (and report) the error.
            Want::Prefetch => match cache.prefetch(&bp, policy) {
                Some(b) => b,
                None => return Ok((BlkPtr::HOLE, 0)),
            },
            Want::Cached => match cache.cached(&bp) {
                Some(b) => b,
                None => return Ok((BlkPtr::HOLE, 0)),
            },
        };
        if block.len() != INDIRECT_SIZE {
            return Err(corrupt(&bp, "indirect block has the wrong size"));
        }
        let idx = ((blkid / span(level - 1)) % PTRS_PER_INDIRECT) as usize;
        let child = BlkPtr::decode(&block[idx * BLKPTR_SIZE..(idx + 1) * BLKPTR_SIZE])
            .ok_or_else(|| corrupt(&bp, "malformed block pointer"))?;
        if child.is_hole() {
            let sp = span(level - 1);
            return Ok((BlkPtr::HOLE, (blkid / sp + 1) * sp - blkid));
        }
        bp = child;
        level -= 1;
    }
    Ok((bp, 1))
}

/// Record `blkid` of a tree as of `phys` (None = hole).
pub(super) fn tree_record(
    cache: &BlockCache,
    phys: &DnodePhys,
    blkid: u64,
    policy: CachePolicy,
) -> Result<Option<Arc<[u8]>>> {
    let bp = walk(cache, phys, blkid, Want::Demand, policy)?.0;
    if bp.is_hole() {
        return Ok(None);
    }
    Ok(Some(cache.read(&bp, policy)?))
}

/// `tree_record` from the ARC only: None when a block on the way (or the
/// record) is not cached, or is damaged (the demand read then reports it).
fn cached_tree_record(
    cache: &BlockCache,
    phys: &DnodePhys,
    blkid: u64,
    policy: CachePolicy,
) -> Option<Option<Arc<[u8]>>> {
    match walk(cache, phys, blkid, Want::Cached, policy).ok()? {
        (_, 0) => None,
        (bp, _) if bp.is_hole() => Some(None),
        (bp, _) => cache.cached(&bp).map(Some),
    }
}

/// Where a read may take records that no in-memory layer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// The ARC, else the devices: the caller may wait for I/O.
    Anywhere,
    /// The ARC only: a read that would need a device is not done. For a
    /// thread that must not wait (NBD's request reader serves such reads
    /// itself and hands the rest to its workers).
    Memory,
}

/// Bytes `[a, b)` of one record of a read (`None`: a hole, zeros).
struct Part {
    rec: Option<Arc<[u8]>>,
    a: usize,
    b: usize,
}

impl ObjectSet {
    /// Read up to `len` bytes at `offset` (short at the end of the object).
    pub fn read(&self, id: u64, offset: u64, len: usize) -> Result<Vec<u8>> {
        let parts = self
            .read_parts(id, offset, len, ReadFrom::Anywhere)?
            .unwrap_or_default();
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.b - p.a).sum());
        for p in parts {
            match p.rec {
                Some(r) => out.extend_from_slice(&r[p.a..p.b]),
                None => out.resize(out.len() + p.b - p.a, 0),
            }
        }
        Ok(out)
    }

    /// `read` without copying whole records: each record the range covers
    /// whole is a piece of the payload as the cache holds it (shared, so a
    /// reply can be sent from it); parts of records are copied, holes are
    /// zero-filled. None when `from` is `Memory` and a record is not in memory.
    pub fn read_payload(
        &self,
        id: u64,
        offset: u64,
        len: usize,
        from: ReadFrom,
    ) -> Result<Option<Payload<'static>>> {
        let Some(parts) = self.read_parts(id, offset, len, from)? else {
            return Ok(None);
        };
        let pieces: Vec<Arc<[u8]>> = parts
            .into_iter()
            .map(|p| match p.rec {
                Some(r) if p.a == 0 && p.b == r.len() => r,
                Some(r) => r[p.a..p.b].into(),
                None => zeroed(p.b - p.a),
            })
            .collect();
        Ok(Some(pieces.into()))
    }

    /// The records of a read, in order. A `Memory` read also walks the tree
    /// through the ARC only, and gives None at the first block it lacks; its
    /// read-ahead bookkeeping stays done (the `Anywhere` read that follows
    /// then finds its stream already advanced and queues nothing twice).
    fn read_parts(
        &self,
        id: u64,
        offset: u64,
        len: usize,
        from: ReadFrom,
    ) -> Result<Option<Vec<Part>>> {
        // The pointers copied below are read without the lock, across commits:
        // hold their space from reuse until the read is done (pool `readhold`).
        let hold = self.cache.pool.hold_reads_shared();
        let io = self.cache.pool.env().io.clone();
        let policy = self.props().cache;
        let (bs, size, phys, mut pieces, ahead) = {
            let mut inner = self.inner.lock();
            let st = self.load(&mut inner, id)?;
            let size = st.size;
            if offset >= size || len == 0 {
                return Ok(Some(Vec::new()));
            }
            let end = (offset + len as u64).min(size);
            let bs = st.blksz as u64;
            let in_memory = |blkid: u64| -> LayerHit {
                st.in_memory(blkid)
                    .map(|hit| hit.map(|r| resized(r, st.blksz)))
            };
            let (first, last) = (offset / bs, end.div_ceil(bs));
            let pieces: Vec<(u64, LayerHit)> = (first..last).map(|b| (b, in_memory(b))).collect();
            let ahead: Vec<u64> = if io.enabled() {
                self.readahead
                    .lock()
                    .access(id, bs, first, last, size.div_ceil(bs))
                    .filter(|b| in_memory(*b).is_none())
                    .collect()
            } else {
                Vec::new()
            };
            (bs, end, Arc::new(st.phys.clone()), pieces, ahead)
        };
        self.prefetch_records(&*io, &phys, ahead, policy, &hold);
        // Tree reads happen without the lock (see the module invariants).
        let from_tree: Vec<u64> = pieces
            .iter()
            .filter(|(_, found)| found.is_none())
            .map(|(b, _)| *b)
            .collect();
        let fetched: Vec<Result<Option<Arc<[u8]>>>> = match from {
            ReadFrom::Anywhere => {
                let (cache, phys, blkids) = (self.cache.clone(), phys.clone(), from_tree.clone());
                io.map(from_tree.len(), move |i| {
                    tree_record(&cache, &phys, blkids[i], policy)
                })
            }
            ReadFrom::Memory => {
                let mut v = Vec::with_capacity(from_tree.len());
                for b in from_tree {
                    match cached_tree_record(&self.cache, &phys, b, policy) {
                        Some(r) => v.push(Ok(r)),
                        None => return Ok(None),
                    }
                }
                v
            }
        };
        let mut fetched = fetched.into_iter();
        let mut out = Vec::with_capacity(pieces.len());
        for (blkid, found) in pieces.iter_mut() {
            let rec = match found.take() {
                Some(r) => r,
                None => fetched
                    .next()
                    .expect("one tree read per piece not in memory")?
                    .map(|r| resized(&r, bs as u32)),
            };
            let rstart = *blkid * bs;
            let a = offset.max(rstart) - rstart;
            let b = size.min(rstart + bs) - rstart;
            out.push(Part {
                rec,
                a: a as usize,
                b: b as usize,
            });
        }
        drop(hold);
        Ok(Some(out))
    }

    /// Queue background reads of records `blkids` of the tree `phys` into the
    /// ARC, one job per record so they proceed in parallel. Best effort: when the
    /// queue is full the rest are dropped (the stream asks again further on).
    fn prefetch_records(
        &self,
        io: &dyn IoExecutor,
        phys: &Arc<DnodePhys>,
        blkids: Vec<u64>,
        policy: CachePolicy,
        hold: &SharedReadHold,
    ) {
        for blkid in blkids {
            let (cache, phys, hold) = (self.cache.clone(), phys.clone(), hold.clone());
            let queued = io.submit(Box::new(move || {
                if let Ok((bp, _)) = walk(&cache, &phys, blkid, Want::Prefetch, policy) {
                    cache.prefetch(&bp, policy);
                }
                drop(hold);
            }));
            if !queued {
                break;
            }
        }
    }
}

impl ObjectSet {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::BlockKey;
    use crate::objset::ObjsetProps;
    use cachalot_arc::Kind;
    use cachalot_pool::{BlockDevice, Pool, SimDevice};
    use std::time::{Duration, Instant};

    const BS: u64 = 16 * 1024;
    const RECORDS: u64 = 64;

    fn record(r: u64) -> Vec<u8> {
        let mut x = r.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..BS)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// `arc_data`: primarycache=all (else metadata).
    fn props(arc_data: bool) -> ObjsetProps {
        ObjsetProps {
            recordsize: BS as u32,
            cache: CachePolicy {
                arc_data,
                ..CachePolicy::ALL
            },
            ..ObjsetProps::default()
        }
    }

    /// An object of `RECORDS` records, committed, opened again with an empty ARC.
    fn cold_object(arc_data: bool) -> (ObjectSet, u64) {
        cachalot_pool::executor::set_background_io(true);
        let dev: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 64 << 20));
        let pool = Arc::new(Pool::create_on_devices("t", vec![dev], false, 12).unwrap());
        let warm = Arc::new(BlockCache::new(pool.clone(), 64 << 20));
        let os = ObjectSet::create(warm, props(true), 1);
        let id = os.create_object(19).unwrap();
        for r in 0..RECORDS {
            os.write(id, r * BS, &record(r)).unwrap();
        }
        let root = os.sync(1, &mut |_| {}).unwrap();
        pool.commit(1, root).unwrap();
        let cold = Arc::new(BlockCache::new(pool, 64 << 20));
        (
            ObjectSet::open(cold, props(arc_data), &root, 2).unwrap(),
            id,
        )
    }

    fn cached(os: &ObjectSet, id: u64, blkid: u64) -> bool {
        let bp = os.block_pointer(id, blkid).unwrap();
        os.cache().arc.contains(&BlockKey::of(&bp))
    }

    fn eventually(what: &str, f: impl Fn() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn read_record(os: &ObjectSet, id: u64, r: u64) -> Vec<u8> {
        os.read(id, r * BS, BS as usize).unwrap()
    }

    /// Each record of a sequential reader is prefetched before the reader asks
    /// for it, and served from the ARC. The test waits for each record to arrive
    /// before reading it, as a reader slower than the device would: a reader at
    /// memory speed (this one reads a record in microseconds) can outrun the I/O
    /// threads whenever they are not scheduled, and then reads the record
    /// itself. That race made this test flaky when it counted misses right after
    /// reading on: under load (the fuzzers, other tests) 8 runs of 30 failed with
    /// up to 56 of 59 records read by demand before their prefetch job ran.
    #[test]
    fn sequential_reads_prefetch_the_next_records() {
        let (os, id) = cold_object(true);
        for r in 0..4 {
            assert_eq!(read_record(&os, id, r), record(r));
        }
        // The window after four one-record reads: records 4..12 (`readahead`).
        eventually("records 4..12 prefetched", || {
            (4..12).all(|b| cached(&os, id, b))
        });
        assert!(!cached(&os, id, 12), "not past the window");
        let before = os.cache().arc.stats();
        assert!(before.miss(Kind::DATA_PREFETCH) >= 8, "{before:?}");
        assert_eq!(read_record(&os, id, 4), record(4));
        let after = os.cache().arc.stats();
        assert_eq!(after.hit(Kind::DATA), before.hit(Kind::DATA) + 1);
        assert_eq!(after.miss(Kind::DATA), before.miss(Kind::DATA));
        // Reading on keeps the stream ahead, to the end of the object: every
        // record was queued by an earlier read, and none is read on demand.
        for r in 5..RECORDS {
            eventually(&format!("record {r} prefetched"), || cached(&os, id, r));
            assert_eq!(read_record(&os, id, r), record(r));
        }
        let end = os.cache().arc.stats();
        assert_eq!(
            end.miss(Kind::DATA),
            before.miss(Kind::DATA),
            "the whole stream was served by read-ahead: {end:?}"
        );
        assert_eq!(end.hit(Kind::DATA), before.hit(Kind::DATA) + RECORDS - 4);
    }

    #[test]
    fn random_reads_do_not_prefetch() {
        let (os, id) = cold_object(true);
        for r in [0, 17, 5, 40, 11, 29, 2, 55, 33, 8, 61, 20] {
            assert_eq!(read_record(&os, id, r), record(r));
        }
        std::thread::sleep(Duration::from_millis(100));
        let s = os.cache().arc.stats();
        assert_eq!(s.miss(Kind::DATA_PREFETCH) + s.hit(Kind::DATA_PREFETCH), 0);
        assert_eq!(s.miss(Kind::DATA), 12);
    }

    #[test]
    fn primarycache_metadata_prefetches_no_data() {
        let (os, id) = cold_object(false);
        for r in 0..8 {
            assert_eq!(read_record(&os, id, r), record(r));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert!((0..RECORDS).all(|b| !cached(&os, id, b)));
        assert_eq!(os.cache().arc.stats().miss(Kind::DATA_PREFETCH), 0);
    }

    #[test]
    fn read_ahead_never_serves_data_replaced_since() {
        let (os, id) = cold_object(true);
        for r in 0..4 {
            read_record(&os, id, r);
        }
        eventually("records 4..12 prefetched", || {
            (4..12).all(|b| cached(&os, id, b))
        });
        // Overwrite a prefetched record and truncate inside the window.
        let new5 = vec![0xA5u8; BS as usize];
        os.write(id, 5 * BS, &new5).unwrap();
        os.truncate(id, 8 * BS + 100).unwrap();
        let check = |os: &ObjectSet| {
            assert_eq!(read_record(os, id, 4), record(4));
            assert_eq!(read_record(os, id, 5), new5);
            assert_eq!(read_record(os, id, 8), record(8)[..100].to_vec());
            assert!(read_record(os, id, 9).is_empty());
        };
        check(&os);
        // And once the change is on disk, read through the tree again.
        os.sync(2, &mut |_| {}).unwrap();
        os.txg_committed(2);
        check(&os);
    }

    /// A `Memory` read of a cold record does no I/O and counts no miss; once
    /// the record is cached it is served, whole records shared as the ARC
    /// holds them, parts and holes as copies.
    #[test]
    fn a_memory_read_serves_only_what_the_arc_holds() {
        let (os, id) = cold_object(true);
        let memory = |off: u64, len: usize| os.read_payload(id, off, len, ReadFrom::Memory);
        assert!(memory(3 * BS, BS as usize).unwrap().is_none());
        assert!(!cached(&os, id, 3), "no device read");
        assert_eq!(
            os.cache().arc.stats().miss(Kind::DATA),
            0,
            "no miss counted"
        );
        assert_eq!(read_record(&os, id, 3), record(3));
        assert_eq!(os.cache().arc.stats().miss(Kind::DATA), 1);
        let p = memory(3 * BS, BS as usize).unwrap().expect("cached now");
        assert_eq!(p.to_vec(), record(3));
        let bp = os.block_pointer(id, 3).unwrap();
        let arc = os.cache().arc.get(&BlockKey::of(&bp), Kind::DATA).unwrap();
        assert!(std::ptr::eq(p.slices().next().unwrap(), &arc[..]), "shared");
        let part = memory(3 * BS + 100, 1000).unwrap().expect("cached");
        assert_eq!(part.to_vec(), record(3)[100..1100]);
        // At the end of the object: nothing to read, so nothing missing.
        assert!(memory(RECORDS * BS, 100).unwrap().unwrap().is_empty());
    }

    #[test]
    fn a_read_spanning_records_assembles_them_in_order() {
        let (os, id) = cold_object(true);
        let off = 3 * BS + 1000;
        let got = os.read(id, off, (40 * BS) as usize).unwrap();
        let want: Vec<u8> = (0..RECORDS).flat_map(record).collect();
        assert_eq!(got, want[off as usize..(off + 40 * BS) as usize]);
        let s = os.cache().arc.stats();
        assert_eq!(s.miss(Kind::DATA), 41, "each record read once");
    }

    /// Cold 1 MiB sequential reads of a 128 MiB object on a file, 128K and 16K
    /// records, through `read` against the one-record-at-a-time path it replaced
    /// (the same walk and ARC read per record, serially). A measurement, not a check:
    /// `cargo test --profile ci -p cachalot-objects cold_sequential -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn cold_sequential_read_throughput() {
        cold_sequential(128 * 1024);
        cold_sequential(16 * 1024);
    }

    fn cold_sequential(recordsize: u64) {
        cachalot_pool::executor::set_background_io(true);
        use cachalot_pool::{Compression, FileDevice};
        const MIB: u64 = 1 << 20;
        const TOTAL: u64 = 128 * MIB;
        let dir = std::env::temp_dir().join(format!("cachalot-ra-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dev: Arc<dyn BlockDevice> =
            Arc::new(FileDevice::create_sparse(&dir.join("d0"), 512 * MIB).unwrap());
        let pool = Arc::new(Pool::create_on_devices("t", vec![dev], false, 12).unwrap());
        let props = ObjsetProps {
            compression: Compression::Off,
            recordsize: recordsize as u32,
            ..ObjsetProps::default()
        };
        let os = ObjectSet::create(Arc::new(BlockCache::new(pool.clone(), 1 << 30)), props, 1);
        let id = os.create_object(19).unwrap();
        for m in 0..TOTAL / MIB {
            let chunk: Vec<u8> = (0..MIB / BS).flat_map(|r| record(m * 64 + r)).collect();
            os.write(id, m * MIB, &chunk).unwrap();
        }
        let root = os.sync(1, &mut |_| {}).unwrap();
        pool.commit(1, root).unwrap();
        let cold = || {
            let cache = Arc::new(BlockCache::new(pool.clone(), 1 << 30));
            ObjectSet::open(cache, props, &root, 2).unwrap()
        };
        for round in 0..3 {
            let os = cold();
            let t = std::time::Instant::now();
            for m in 0..TOTAL / MIB {
                let mut out = Vec::with_capacity(MIB as usize);
                let per = MIB / recordsize;
                for r in m * per..(m + 1) * per {
                    let bp = os.block_pointer(id, r).unwrap();
                    out.extend_from_slice(&os.cache().read(&bp, CachePolicy::ALL).unwrap());
                }
                assert_eq!(out.len() as u64, MIB);
            }
            let serial = TOTAL as f64 / MIB as f64 / t.elapsed().as_secs_f64();
            let os = cold();
            let t = std::time::Instant::now();
            for m in 0..TOTAL / MIB {
                assert_eq!(
                    os.read(id, m * MIB, MIB as usize).unwrap().len() as u64,
                    MIB
                );
            }
            let ours = TOTAL as f64 / MIB as f64 / t.elapsed().as_secs_f64();
            println!(
                "{}K records, round {round}: serial {serial:.0} MiB/s, \
                 read with read-ahead {ours:.0} MiB/s ({:.2}x)",
                recordsize / 1024,
                ours / serial
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
