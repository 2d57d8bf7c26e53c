//! Scrub: read every copy of every block reachable from the last committed txg,
//! verify it against its parent's checksum, and rewrite bad copies from good ones.
//!
//! Invariant: while a scrub runs, the pool holds freed space back from reuse, so a
//! block found through the scrub's (possibly older) tree is never overwritten by a
//! later txg underneath it: a checksum error seen by scrub is real corruption.

use crate::error::{Result, StoreError};
use crate::store::Store;
use cachalot_objects::BlockCache;
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
    pub started: u64,
    pub ended: u64,
    pub duration_ms: u64,
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
            started: 0,
            ended: 0,
            duration_ms: 0,
            cancel: Arc::new(AtomicBool::new(false)),
        }
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
        let mut visit = |bp: &cachalot_pool::BlkPtr| {
            if cancel.load(Ordering::Relaxed) {
                return false;
            }
            let o = pool.scrub_block(bp);
            let mut s = st.lock();
            s.examined += bp.asize_total();
            s.errors += o.bad_copies;
            s.repaired += o.repaired;
            s.resilvered += o.resilvered;
            if o.unrecoverable {
                s.unrecoverable += 1;
            }
            !o.unrecoverable
        };
        if st.lock().kind == "resilver" {
            resilver(&pool, &cache, &roots, &st, &cancel, &mut visit);
        } else {
            for root in roots {
                if cachalot_objects::traverse(&cache, &root, &mut visit).is_err() {
                    st.lock().unrecoverable += 1;
                }
            }
            for bp in pool.spacemap_blocks().unwrap_or_default() {
                visit(&bp);
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

/// A resilver: collect every block pointer of the committed tree, sort them by
/// DVA and rebuild them in that order, skipping those before the position an
/// interrupted run saved, and saving the position as it goes (every block
/// before it is rebuilt and flushed: see `Pool::save_resilver_pos`).
fn resilver(
    pool: &Pool,
    cache: &BlockCache,
    roots: &[BlkPtr],
    st: &Mutex<ScrubStatus>,
    cancel: &AtomicBool,
    visit: &mut dyn FnMut(&BlkPtr) -> bool,
) {
    let mut bps: Vec<BlkPtr> = Vec::new();
    for root in roots {
        let mut collect = |bp: &BlkPtr| {
            bps.push(*bp);
            !cancel.load(Ordering::Relaxed)
        };
        if cachalot_objects::traverse(cache, root, &mut collect).is_err() {
            st.lock().unrecoverable += 1;
        }
    }
    bps.extend(pool.spacemap_blocks().unwrap_or_default());
    // Stopped while collecting: the list may miss blocks, so no position may
    // be taken from it.
    if cancel.load(Ordering::Relaxed) {
        return;
    }
    bps.sort_by_key(scan_key);
    // Blocks shared by snapshots and clones are rebuilt once.
    bps.dedup();
    let resume = pool.resilver_resume_pos();
    let limit = scan_rate_limit();
    let t0 = Instant::now();
    let mut last_save = Instant::now();
    let mut done = 0u64;
    for bp in &bps {
        let key = scan_key(bp);
        if cancel.load(Ordering::Relaxed) {
            // Stopped (export, a device change): keep the place exactly. A
            // device change then drops it when the work to do changed.
            if resume.is_none_or(|r| key >= r) {
                let _ = pool.save_resilver_pos(key);
            }
            return;
        }
        if resume.is_some_and(|r| key < r) {
            let mut s = st.lock();
            s.examined += bp.asize_total();
            s.resumed += bp.asize_total();
            continue;
        }
        if last_save.elapsed() >= SAVE_POS_EVERY {
            // Best effort: a lost position only means work done again.
            let _ = pool.save_resilver_pos(key);
            last_save = Instant::now();
        }
        visit(bp);
        done += bp.asize_total();
        if let Some(rate) = limit {
            let due = Duration::from_secs_f64(done as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
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
