//! Scrub: read every copy of every block reachable from the last committed txg,
//! verify it against its parent's checksum, and rewrite bad copies from good ones.
//!
//! Invariant: while a scrub runs, the pool holds freed space back from reuse, so a
//! block found through the scrub's (possibly older) tree is never overwritten by a
//! later txg underneath it: a checksum error seen by scrub is real corruption.

use crate::error::{Result, StoreError};
use crate::store::Store;
use cachalot_objects::BlockCache;
use cachalot_pool::vdev::ScrubOutcome;
use cachalot_pool::{BlkPtr, Pool, ScanPos};
use parking_lot::Mutex;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize)]
pub struct ScrubStatus {
    /// none, scanning, finished, canceled
    pub state: String,
    /// scrub, or resilver (a scan that rebuilds replacement devices).
    pub kind: String,
    /// Copies or raidz columns written to replacement devices.
    pub resilvered: u64,
    /// Bytes a resumed resilver skipped: rebuilt by the run a restart cut.
    pub resumed: u64,
    pub examined: u64,
    pub total: u64,
    /// Bad copies found.
    pub errors: u64,
    /// Copies rewritten from a good copy.
    pub repaired: u64,
    /// Blocks with no good copy left (data errors).
    pub unrecoverable: u64,
    /// A resilver after `pool online`: only blocks born at or after this txg
    /// (0: every allocated block).
    pub min_birth_txg: u64,
    pub started: u64,
    pub ended: u64,
    pub duration_ms: u64,
    /// While scanning: bytes examined per second by this run (a resumed
    /// resilver's skipped bytes do not count), and seconds left at that rate
    /// (0 until the rate is known). Computed when the status is read, so
    /// `pool status`, the web UI and /metrics show the same figures.
    pub rate: u64,
    pub eta_secs: u64,
    #[serde(skip)]
    pub(crate) cancel: Arc<AtomicBool>,
}

impl Default for ScrubStatus {
    fn default() -> Self {
        ScrubStatus {
            state: "none".into(),
            kind: "scrub".into(),
            resilvered: 0,
            resumed: 0,
            examined: 0,
            total: 0,
            errors: 0,
            repaired: 0,
            unrecoverable: 0,
            min_birth_txg: 0,
            started: 0,
            ended: 0,
            duration_ms: 0,
            rate: 0,
            eta_secs: 0,
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl ScrubStatus {
    /// Fill `rate` and `eta_secs` of a running scan as of `now` (seconds).
    pub(crate) fn fill_progress(&mut self, now: u64) {
        if self.state != "scanning" {
            return;
        }
        let secs = now.saturating_sub(self.started).max(1);
        self.rate = self.examined.saturating_sub(self.resumed) / secs;
        self.eta_secs = self
            .total
            .saturating_sub(self.examined)
            .checked_div(self.rate)
            .unwrap_or(0);
    }
}

pub(crate) fn start(store: Arc<Store>) -> Result<()> {
    let cancel = {
        let mut s = store.scrub.lock();
        if s.state == "scanning" {
            return Err(StoreError::Busy(format!(
                "a scrub is already running on '{}'",
                store.name()
            )));
        }
        *s = ScrubStatus {
            state: "scanning".into(),
            kind: if store.pool().resilver_pending() {
                "resilver"
            } else {
                "scrub"
            }
            .into(),
            started: store.pool().env().now_secs(),
            total: store.pool().space().allocated,
            ..ScrubStatus::default()
        };
        s.cancel.clone()
    };
    store.pool().hold_frees(true);
    let roots = match store.committed_roots() {
        Ok(r) => r,
        Err(e) => {
            store.pool().hold_frees(false);
            store.scrub.lock().state = "none".into();
            return Err(e);
        }
    };
    let st = store.scrub.clone();
    let weak = Arc::downgrade(&store);
    let manual = store.pool().env().manual_txg();
    let job = move || {
        let t0 = Instant::now();
        let Some(store) = weak.upgrade() else { return };
        let pool = store.pool().clone();
        let cache = store.cache().clone();
        drop(store);
        let visit = |bp: &cachalot_pool::BlkPtr, floor: u64| {
            if cancel.load(Ordering::Relaxed) || bp.birth_txg < floor {
                return false;
            }
            let o = pool.scrub_block(bp);
            account(&st, bp, &o);
            !o.unrecoverable
        };
        if st.lock().kind == "resilver" {
            let workers = if manual { 1 } else { RESILVER_WORKERS };
            resilver(&pool, &cache, &roots, &st, &cancel, workers);
        } else {
            for (root, floor) in roots {
                let mut v = |bp: &BlkPtr| visit(bp, floor);
                if cachalot_objects::traverse(&cache, &root, &mut v).is_err() {
                    st.lock().unrecoverable += 1;
                }
            }
            for bp in pool.spacemap_blocks().unwrap_or_default() {
                visit(&bp, 0);
            }
        }
        pool.hold_frees(false);
        let mut s = st.lock();
        // A complete scan without data errors has rebuilt every replacement.
        let complete = !cancel.load(Ordering::Relaxed) && s.unrecoverable == 0;
        if s.kind == "resilver" && complete {
            if let Err(e) = pool.finish_resilver() {
                pool.add_notice(format!("resilver: cannot record its end: {e}"));
            }
        }
        s.state = if cancel.load(Ordering::Relaxed) {
            "canceled"
        } else {
            "finished"
        }
        .into();
        s.ended = pool.env().now_secs();
        s.duration_ms = t0.elapsed().as_millis() as u64;
    };
    // A deterministic run (manual txg trigger) scrubs inline, in the caller's thread.
    if manual {
        job();
        return Ok(());
    }
    std::thread::Builder::new()
        .name("scrub".into())
        .spawn(job)
        .map_err(|e| StoreError::Invalid(format!("cannot start scrub: {e}")))?;
    Ok(())
}

/// Count one scanned block in the status.
fn account(st: &Mutex<ScrubStatus>, bp: &BlkPtr, o: &ScrubOutcome) {
    let mut s = st.lock();
    s.examined += bp.asize_total();
    s.errors += o.bad_copies;
    s.repaired += o.repaired;
    s.resilvered += o.resilvered;
    if o.unrecoverable {
        s.unrecoverable += 1;
    }
}

/// How often a resilver records its position in the labels.
const SAVE_POS_EVERY: Duration = Duration::from_secs(1);

/// Order of a resilver: by first DVA, so the replacement is written sequentially;
/// a block without one (embedded) comes last.
fn scan_key(bp: &BlkPtr) -> ScanPos {
    bp.dva_iter().next().map_or(
        ScanPos {
            vdev: u32::MAX,
            offset: u64::MAX,
        },
        |d| ScanPos {
            vdev: d.vdev,
            offset: d.offset,
        },
    )
}

/// `CACHALOT_SCAN_RATE` (bytes per second): caps a resilver's pace, so it
/// leaves the disks to the workload (and tests can catch one mid-way).
fn scan_rate_limit() -> Option<u64> {
    std::env::var("CACHALOT_SCAN_RATE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&r| r > 0)
}

/// Blocks a resilver worker takes at a time (8 MiB of 128K records). When a
/// batch is delivered every block before the next one is rebuilt, so that is
/// where the position is saved.
const RESILVER_BATCH: usize = 64;

/// Threads that rebuild batches (`Pool::resilver_blocks`): while one reads or
/// writes, another computes parity and checksums, so the devices do not wait
/// for the CPU nor the CPU for the devices.
const RESILVER_WORKERS: usize = 4;

/// The blocks a resilver rebuilds, sorted by DVA (`scan_key`), each once:
/// those of the committed trees under `roots` (each above its floor) and the
/// space maps, born at or after `min_birth`. None when stopped while listing.
fn resilver_list(
    pool: &Pool,
    cache: &BlockCache,
    roots: &[(BlkPtr, u64)],
    min_birth: u64,
    st: &Mutex<ScrubStatus>,
    cancel: &AtomicBool,
) -> Option<Vec<BlkPtr>> {
    // Blocks born before this are on every resilvering device already. A
    // parent is born with or after each of its children (copy-on-write), so
    // the traversal skips the subtree of a block born earlier.
    let mut bps: Vec<BlkPtr> = Vec::new();
    for (root, floor) in roots {
        let mut collect = |bp: &BlkPtr| {
            if bp.birth_txg < min_birth.max(*floor) {
                return false;
            }
            bps.push(*bp);
            !cancel.load(Ordering::Relaxed)
        };
        if cachalot_objects::traverse(cache, root, &mut collect).is_err() {
            st.lock().unrecoverable += 1;
        }
    }
    let spacemaps = pool.spacemap_blocks().unwrap_or_default();
    bps.extend(spacemaps.into_iter().filter(|bp| bp.birth_txg >= min_birth));
    // Stopped while collecting: the list may miss blocks, so no position may
    // be taken from it.
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    bps.sort_by_key(scan_key);
    // Blocks shared by snapshots and clones are rebuilt once.
    bps.dedup();
    if cachalot_pool::plant::active(cachalot_pool::plant::Bug::ResilverSkipBlock) && !bps.is_empty()
    {
        bps.remove(bps.len() / 2);
    }
    Some(bps)
}

/// A resilver: collect every block pointer of the committed tree, sort them by
/// DVA and rebuild them in that order, skipping those before the position an
/// interrupted run saved, and saving the position as it goes (every block
/// before it is rebuilt and flushed: see `Pool::save_resilver_pos`).
///
/// Blocks go in batches of consecutive keys, each rebuilt as a whole by
/// `Pool::resilver_batch` (merged reads, only the missing columns written,
/// in order on the new device). The position is only saved between batches,
/// when every block before it is done.
fn resilver(
    pool: &Pool,
    cache: &BlockCache,
    roots: &[(BlkPtr, u64)],
    st: &Mutex<ScrubStatus>,
    cancel: &AtomicBool,
    workers: usize,
) {
    let min_birth = pool.resilver_min_birth();
    let Some(bps) = resilver_list(pool, cache, roots, min_birth, st, cancel) else {
        return;
    };
    {
        // What this resilver covers: all allocated blocks, or those born since
        // `min_birth`.
        let mut s = st.lock();
        s.total = bps.iter().map(|bp| bp.asize_total()).sum();
        s.min_birth_txg = min_birth;
    }
    let resume = pool.resilver_resume_pos();
    // Blocks an interrupted run rebuilt: counted, not visited.
    let first = bps.partition_point(|bp| resume.is_some_and(|r| scan_key(bp) < r));
    {
        let skipped: u64 = bps[..first].iter().map(|bp| bp.asize_total()).sum();
        let mut s = st.lock();
        s.examined += skipped;
        s.resumed += skipped;
    }
    let limit = scan_rate_limit();
    let t0 = Instant::now();
    let manual = pool.env().manual_txg();
    let mut last_save = Instant::now();
    let mut done = 0u64;
    let todo = &bps[first..];
    let delivered = pool.resilver_blocks(todo, RESILVER_BATCH, workers, |i, outcomes| {
        let start = i * RESILVER_BATCH;
        let batch = &todo[start..(start + RESILVER_BATCH).min(todo.len())];
        for (bp, o) in batch.iter().zip(outcomes) {
            account(st, bp, &o);
        }
        if cancel.load(Ordering::Relaxed) {
            return false;
        }
        // Every block before the next batch is rebuilt: its start is a valid
        // place to resume. Saved as soon as due, before any pacing sleep, so
        // a kill during the sleep loses nothing.
        if let Some(next) = todo.get((i + 1) * RESILVER_BATCH) {
            // A deterministic run saves after every batch: the wall clock
            // must not decide what a seed does (and its power cuts then find
            // positions to resume from).
            if manual || last_save.elapsed() >= SAVE_POS_EVERY {
                // Best effort: a lost position only means work done again.
                let _ = pool.save_resilver_pos(scan_key(next));
                last_save = Instant::now();
            }
        }
        done += batch.iter().map(|bp| bp.asize_total()).sum::<u64>();
        if let Some(rate) = limit {
            let due = Duration::from_secs_f64(done as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        true
    });
    if cancel.load(Ordering::Relaxed) {
        // Stopped (export, a device change): keep the place exactly, the
        // first batch not delivered (batches after it may be done too, but
        // are not vouched for). A device change then drops it when the work
        // to do changed.
        if let Some(next) = todo.get(delivered * RESILVER_BATCH) {
            let _ = pool.save_resilver_pos(scan_key(next));
        }
    }
}

/// Stop a running scrub and wait for it.
pub(crate) fn cancel(store: &Store) {
    let flag = store.scrub.lock().cancel.clone();
    flag.store(true, Ordering::Relaxed);
    while store.scrub.lock().state == "scanning" {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::ScrubStatus;

    #[test]
    fn progress_counts_only_this_runs_bytes() {
        let mut s = ScrubStatus {
            state: "scanning".into(),
            kind: "resilver".into(),
            started: 100,
            total: 1000 << 20,
            examined: 600 << 20,
            resumed: 400 << 20,
            ..ScrubStatus::default()
        };
        s.fill_progress(110);
        // 200 MiB in 10 s; 400 MiB left.
        assert_eq!((s.rate, s.eta_secs), (20 << 20, 20));
        // The first second: no division by zero, a rate all the same.
        s.fill_progress(100);
        assert_eq!((s.rate, s.eta_secs), (200 << 20, 2));
        // Nothing done yet: no rate, no ETA (not infinity).
        s.examined = s.resumed;
        s.fill_progress(105);
        assert_eq!((s.rate, s.eta_secs), (0, 0));
        let mut done = ScrubStatus::default();
        done.fill_progress(105);
        assert_eq!((done.rate, done.eta_secs), (0, 0));
    }
}
