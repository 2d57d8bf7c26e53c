//! Space allocation: per top-level vdev, the free and allocated ranges, the
//! records of the open commit (the next space map segment) and the deferred frees.
//!
//! Invariants (checked by `Pool::verify_space`):
//! - For every vdev, free, allocated and deferred ranges are disjoint and exactly
//!   cover `0..asize`.
//! - A range freed in txg T is deferred until T+1 has committed (or longer while a
//!   scrub holds frees), then becomes free.
//! - Data blocks are allocated only in syncing context; intent-log blocks may be
//!   allocated in open context and are recorded in the next segment.
//! - A free of a range that is not allocated is a bug: it is refused (and asserted
//!   in debug builds) rather than corrupting the free set.

use crate::blkptr::{BlkPtr, Dva, MAX_DVAS};
use crate::error::{PoolError, Result};
use crate::pool::Pool;
use crate::rangeset::RangeSet;
use crate::spacemap::Record;
use crate::vdev::TopVdev;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;

/// Block size classes for `usable_free`: 4K, 8K, ... 1M.
pub(crate) const USABLE_CLASSES: usize = 9;

pub(crate) struct VdevSpace {
    pub(crate) free: RangeSet,
    /// Allocated in the persistent sense (what the space map says).
    pub(crate) allocated: RangeSet,
    pub(crate) cursor: u64,
}

impl VdevSpace {
    /// A vdev of `asize` bytes, all free.
    pub(crate) fn new(asize: u64) -> VdevSpace {
        let mut free = RangeSet::new();
        free.insert(0, asize);
        VdevSpace {
            free,
            allocated: RangeSet::new(),
            cursor: 0,
        }
    }
}

pub(crate) struct SpaceState {
    pub(crate) vdevs: Vec<VdevSpace>,
    pub(crate) txg_records: Vec<Record>,
    pub(crate) defer: VecDeque<(u64, Vec<Record>)>,
    pub(crate) sm_head: BlkPtr,
    pub(crate) sm_base: BlkPtr,
    pub(crate) log_blocks: u64,
    pub(crate) log_records: u64,
}

impl SpaceState {
    /// The state of vdevs of sizes `asizes`, all free, with no space map yet.
    pub(crate) fn new(asizes: impl Iterator<Item = u64>) -> SpaceState {
        SpaceState {
            vdevs: asizes.map(VdevSpace::new).collect(),
            txg_records: vec![],
            defer: VecDeque::new(),
            sm_head: BlkPtr::HOLE,
            sm_base: BlkPtr::HOLE,
            log_blocks: 0,
            log_records: 0,
        }
    }
}

/// Pool-wide space figures in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpaceInfo {
    pub size: u64,
    pub allocated: u64,
    pub free: u64,
    /// Fragmentation estimate in percent (share of free space in small extents).
    pub frag: u64,
    /// `size` and `free` after parity: what data can use (`list`), where `size`
    /// and `free` are raw device bytes (`pool list`), as in zfs.
    pub usable_size: u64,
    pub usable_free: u64,
}

/// Raw bytes of vdev `t` expressed as data bytes: raidz keeps (n-p)/n for data.
fn deflate(t: &TopVdev, raw: u64) -> u64 {
    let p = crate::raidz::nparity(t.kind) as u64;
    let n = t.leaves.len() as u64;
    if p == 0 {
        raw
    } else {
        (raw as u128 * (n - p) as u128 / n as u128) as u64
    }
}

impl Pool {
    /// Usable (after parity) size and free bytes of the data vdevs, without the
    /// fragmentation figure: cheap enough for every write's space check (`space`
    /// walks free extents).
    pub fn space_totals(&self) -> (u64, u64) {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        let mut size = 0;
        let mut free = 0;
        for (t, v) in tops.iter().zip(s.vdevs.iter()) {
            if !t.log {
                size += deflate(t, t.asize);
                free += deflate(t, v.free.total());
            }
        }
        (size, free)
    }

    /// Bytes allocated on every vdev, log devices included (`space` leaves
    /// them out): what the blocks reachable from the pool, intent-log blocks on
    /// a log device among them, plus the deferred frees must add up to.
    pub fn allocated_all_vdevs(&self) -> u64 {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        tops.iter()
            .zip(s.vdevs.iter())
            .map(|(t, v)| t.asize - v.free.total())
            .sum()
    }

    /// Space of the data vdevs (log devices are not pool capacity, as in ZFS).
    pub fn space(&self) -> SpaceInfo {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        let data = || {
            tops.iter()
                .zip(s.vdevs.iter())
                .filter(|(t, _)| !t.log)
                .map(|(_, v)| v)
        };
        let size: u64 = tops.iter().filter(|t| !t.log).map(|t| t.asize).sum();
        let free: u64 = data().map(|v| v.free.total()).sum();
        let small: u64 = data()
            .flat_map(|v| v.free.iter())
            .filter(|(_, l)| *l < 1 << 20)
            .map(|(_, l)| l)
            .sum();
        let (usable_size, usable_free) = tops
            .iter()
            .zip(s.vdevs.iter())
            .filter(|(t, _)| !t.log)
            .fold((0, 0), |(a, b), (t, v)| {
                (a + deflate(t, t.asize), b + deflate(t, v.free.total()))
            });
        SpaceInfo {
            size,
            allocated: size - free,
            free,
            frag: (small * 100).checked_div(free).unwrap_or(0),
            usable_size,
            usable_free,
        }
    }

    /// Allocate `copies` extents for `len` bytes (syncing context only); each is
    /// as large as its vdev needs (raidz adds parity).
    pub(crate) fn allocate(&self, len: u64, copies: usize) -> Result<[Dva; MAX_DVAS]> {
        let (is_log, sizes): (Vec<bool>, Vec<u64>) = self
            .vdevs
            .read()
            .iter()
            .map(|t| (t.log || t.faulted.load(Relaxed), t.alloc_size(len)))
            .unzip();
        let mut s = self.space.lock();
        let sector = self.sector_size() as u64;
        let n = s.vdevs.len();
        let mut dvas = [Dva::default(); MAX_DVAS];
        // Rotate the starting vdev so data spreads over all top-level vdevs.
        let start = {
            let total: u64 = s.vdevs.iter().map(|v| v.cursor).sum();
            (total / (1 << 20)) as usize % n.max(1)
        };
        let mut got = 0;
        for attempt in 0..n * 2 {
            if got == copies {
                break;
            }
            let vi = (start + attempt) % n;
            if is_log[vi] {
                continue;
            }
            let asize = sizes[vi];
            // A second copy on the same vdev goes far from the first.
            let same_vdev = dvas[..got].iter().any(|d| d.vdev == vi as u32);
            if same_vdev && attempt < n {
                continue;
            }
            let vs = &mut s.vdevs[vi];
            let hint = if same_vdev {
                (vs.cursor + vs.free.total() / 2) % (vs.free.total().max(1) + vs.allocated.total())
            } else {
                vs.cursor
            };
            if let Some(off) = vs.free.find_fit(asize, hint, sector) {
                // A range both free and allocated would be handed out twice.
                let took = vs.free.remove(off, asize) && vs.allocated.insert(off, asize);
                assert!(
                    took,
                    "allocator: {off:#x}+{asize} was not free on vdev {vi}"
                );
                if !same_vdev {
                    vs.cursor = off + asize;
                }
                dvas[got] = Dva {
                    vdev: vi as u32,
                    asize: asize as u32,
                    offset: off,
                };
                s.txg_records.push(Record {
                    alloc: true,
                    vdev: vi as u32,
                    offset: off,
                    len: asize,
                });
                got += 1;
            }
        }
        if got == 0 {
            return Err(PoolError::NoSpace);
        }
        Ok(dvas)
    }

    /// Release a block (syncing context). Its space becomes allocatable after the
    /// next commit.
    pub fn free_block(&self, bp: &BlkPtr) {
        if bp.is_hole() {
            return;
        }
        let mut s = self.space.lock();
        for d in bp.dva_iter() {
            if let Some(vs) = s.vdevs.get_mut(d.vdev as usize) {
                if vs.allocated.remove(d.offset, d.asize as u64) {
                    s.txg_records.push(Record {
                        alloc: false,
                        vdev: d.vdev,
                        offset: d.offset,
                        len: d.asize as u64,
                    });
                } else {
                    debug_assert!(false, "double free at vdev {} {:#x}", d.vdev, d.offset);
                }
            }
        }
    }

    /// Allocate one intent-log block outside syncing context. With `use_slog` the
    /// separate log devices are preferred; a faulted or full log device falls back
    /// to the data vdevs. The allocation lands in the next commit's space map; if
    /// the system crashes first, replay claims the block again.
    pub fn alloc_log_block(&self, size: u64, use_slog: bool) -> Result<Dva> {
        self.check_suspended()?;
        let sector = self.sector_size() as u64;
        let size = size.next_multiple_of(sector);
        let order: Vec<(usize, u64)> = {
            let tops = self.vdevs.read();
            let ok = |t: &TopVdev| !t.faulted.load(Relaxed) && t.health() != "UNAVAIL";
            let logs = tops.iter().filter(|t| t.log && ok(t) && use_slog);
            let data = tops.iter().filter(|t| !t.log && ok(t));
            logs.chain(data)
                .map(|t| (t.id as usize, t.alloc_size(size)))
                .collect()
        };
        let mut s = self.space.lock();
        for (vi, size) in order {
            let vs = &mut s.vdevs[vi];
            if let Some(off) = vs.free.find_fit(size, vs.cursor, sector) {
                // A range both free and allocated would be handed out twice.
                let took = vs.free.remove(off, size) && vs.allocated.insert(off, size);
                assert!(took, "allocator: {off:#x}+{size} was not free on vdev {vi}");
                s.txg_records.push(Record {
                    alloc: true,
                    vdev: vi as u32,
                    offset: off,
                    len: size,
                });
                return Ok(Dva {
                    vdev: vi as u32,
                    asize: size as u32,
                    offset: off,
                });
            }
        }
        Err(PoolError::NoSpace)
    }

    /// Mark an intent-log block found at replay as allocated (it may already be,
    /// if a commit recorded it before the crash). False if the range is partly
    /// allocated to something else (the block is not a live log block).
    pub fn claim_log_block(&self, dva: &Dva) -> bool {
        let mut s = self.space.lock();
        let Some(vs) = s.vdevs.get_mut(dva.vdev as usize) else {
            return false;
        };
        let (off, len) = (dva.offset, dva.asize as u64);
        if vs.allocated.contains(off, len) {
            return true;
        }
        if !vs.free.contains(off, len) {
            return false;
        }
        vs.free.remove(off, len);
        vs.allocated.insert(off, len);
        s.txg_records.push(Record {
            alloc: true,
            vdev: dva.vdev,
            offset: off,
            len,
        });
        true
    }

    /// Free an intent-log block (syncing context), like `free_block`.
    pub fn free_log_block(&self, dva: &Dva) {
        let bp = BlkPtr {
            dvas: [*dva, Dva::default(), Dva::default()],
            birth_txg: 1,
            ..BlkPtr::HOLE
        };
        self.free_block(&bp);
    }

    /// Bytes freed but not yet allocatable (waiting for a later commit).
    pub fn deferred_bytes(&self) -> u64 {
        self.space
            .lock()
            .defer
            .iter()
            .flat_map(|(_, r)| r.iter())
            .map(|r| r.len)
            .sum()
    }

    pub(crate) fn refresh_usable(&self) {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        let mut u = [0u64; USABLE_CLASSES];
        let data = tops
            .iter()
            .zip(s.vdevs.iter())
            .filter(|(t, _)| !t.log)
            .map(|(_, v)| v);
        for (_, len) in data.flat_map(|v| v.free.iter()) {
            for (i, slot) in u.iter_mut().enumerate() {
                let bs = 4096u64 << i;
                *slot += len / bs * bs;
            }
        }
        drop(tops);
        drop(s);
        *self.usable.lock() = u;
    }

    /// Free bytes usable by blocks of up to `blksz` bytes, as of the last commit.
    pub fn usable_free(&self, blksz: u64) -> u64 {
        let class =
            (blksz.max(4096).next_power_of_two().trailing_zeros() as usize).saturating_sub(12);
        self.usable.lock()[class.min(USABLE_CLASSES - 1)]
    }

    /// Hold freed space back from reuse (while a scrub walks an older tree).
    pub fn hold_frees(&self, hold: bool) {
        self.hold_frees.store(hold, Relaxed);
    }
}

impl Pool {
    /// Check the allocator's invariant: on every vdev, the free, allocated and
    /// deferred ranges (frees waiting in the defer queue or in the open commit's
    /// records) are disjoint, lie inside the vdev and cover it exactly. Returns the
    /// first violation found.
    pub fn verify_space(&self) -> std::result::Result<(), String> {
        let s = self.space.lock();
        let tops = self.vdevs.read();
        if s.vdevs.len() != tops.len() {
            return Err(format!(
                "{} vdevs but space for {}",
                tops.len(),
                s.vdevs.len()
            ));
        }
        let mut deferred: Vec<RangeSet> = tops.iter().map(|_| RangeSet::new()).collect();
        let pending = s.txg_records.iter().filter(|r| !r.alloc);
        for r in s
            .defer
            .iter()
            .flat_map(|(_, recs)| recs.iter())
            .chain(pending)
        {
            let set = deferred
                .get_mut(r.vdev as usize)
                .ok_or_else(|| format!("a deferred free names vdev {}", r.vdev))?;
            if !set.insert(r.offset, r.len) {
                return Err(format!(
                    "vdev {}: {:#x}+{} freed twice before reuse",
                    r.vdev, r.offset, r.len
                ));
            }
        }
        for (vi, (t, v)) in tops.iter().zip(&s.vdevs).enumerate() {
            let mut cover = RangeSet::new();
            let classes = [
                ("free", &v.free),
                ("allocated", &v.allocated),
                ("deferred", &deferred[vi]),
            ];
            for (what, set) in classes {
                for (off, len) in set.iter() {
                    if off + len > t.asize {
                        return Err(format!(
                            "vdev {vi}: {what} range {off:#x}+{len} ends past the vdev ({})",
                            t.asize
                        ));
                    }
                    if !cover.insert(off, len) {
                        return Err(format!(
                            "vdev {vi}: {what} range {off:#x}+{len} is also in another class"
                        ));
                    }
                }
            }
            if cover.total() != t.asize {
                return Err(format!(
                    "vdev {vi}: free, allocated and deferred cover {} of its {} bytes",
                    cover.total(),
                    t.asize
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::device::{BlockDevice, SimDevice};
    use crate::pool::{Pool, WriteOpts};
    use std::sync::Arc;

    fn pool_with_blocks() -> Pool {
        let dev: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 64 << 20));
        let pool = Pool::create_on_devices("t", vec![dev], false, 12).unwrap();
        let opts = WriteOpts::RAW_DATA;
        let mut bps = Vec::new();
        for txg in 1..=3 {
            for i in 0..20u8 {
                bps.push(pool.write_block(txg, &[i; 8192], opts).unwrap());
            }
            // Free some of the previous txg's blocks: frees are deferred.
            for bp in bps.drain(..5) {
                pool.free_block(&bp);
            }
            pool.commit(txg, bps[0]).unwrap();
        }
        pool
    }

    #[test]
    fn verify_accepts_a_consistent_pool() {
        let pool = pool_with_blocks();
        pool.verify().unwrap();
    }

    #[test]
    fn verify_space_finds_a_range_both_free_and_allocated() {
        let pool = pool_with_blocks();
        let (off, len) = pool.space.lock().vdevs[0].allocated.iter().next().unwrap();
        pool.space.lock().vdevs[0].free.insert(off, len);
        let e = pool.verify_space().unwrap_err();
        assert!(e.contains("also in another class"), "{e}");
    }

    #[test]
    fn verify_space_finds_a_leak() {
        let pool = pool_with_blocks();
        let (off, _) = pool.space.lock().vdevs[0].free.iter().next().unwrap();
        pool.space.lock().vdevs[0].free.remove(off, 4096);
        let e = pool.verify_space().unwrap_err();
        assert!(e.contains("cover"), "{e}");
    }

    #[test]
    fn verify_spacemap_finds_memory_and_disk_apart() {
        let pool = pool_with_blocks();
        // An allocation the space map never recorded (as if a record were lost).
        let (off, _) = pool.space.lock().vdevs[0].free.iter().next().unwrap();
        let mut s = pool.space.lock();
        s.vdevs[0].free.remove(off, 4096);
        s.vdevs[0].allocated.insert(off, 4096);
        drop(s);
        pool.verify_space().unwrap();
        let e = pool.verify_spacemap().unwrap_err();
        assert!(e.contains("differs from the allocator"), "{e}");
    }
}
