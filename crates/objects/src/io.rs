//! A small shared pool of I/O threads: the block reads of one request spanning
//! several records run concurrently (`parallel_map`), and read-ahead runs in the
//! background (`submit_prefetch`).
//!
//! Why a pool and not a thread per read: a block read is tens of microseconds to
//! a few milliseconds, about what spawning a thread costs at the short end. The
//! threads are started once per process and never exit.
//!
//! Invariants: demand work is always taken before prefetch work, so read-ahead
//! never delays a waiting reader by more than the one record a thread may be
//! reading; the prefetch queue is bounded (`PREFETCH_QUEUE_MAX`, further jobs are
//! dropped), and the data in flight is bounded by `THREADS` records. A caller of
//! `parallel_map` also does the work itself, so it never waits on a busy pool for
//! work nobody started: it is never slower than reading serially, and a pool
//! thread blocked in a slow read cannot hold it up beyond that read.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Threads in the pool: enough to keep a device queue busy for one or two
/// streams, few enough to cost little when idle.
const THREADS: usize = 8;
/// Prefetch jobs waiting at most; more are dropped (read-ahead is best effort).
pub const PREFETCH_QUEUE_MAX: usize = 256;

type Job = Box<dyn FnOnce() + Send>;

/// Background I/O (concurrent record reads and read-ahead) is off unless the
/// environment says `CACHALOT_READAHEAD=1`, or a test turns it on. Why: with it
/// on, the deterministic simulator (crates/sim) no longer replays a seed to the
/// same bytes, and its seed 2 found a dataset, after a power cut, in a state it
/// never acknowledged. Until the simulator drives this pool itself (an injected
/// executor, as the txg sync thread is) and that seed is understood, the engine
/// reads one record after another as before, and nothing runs in the background.
static BACKGROUND: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// True when background I/O is on (see `BACKGROUND`).
pub fn background_io() -> bool {
    match BACKGROUND.load(Ordering::Relaxed) {
        UNSET => {
            let on = std::env::var("CACHALOT_READAHEAD").is_ok_and(|v| v == "1");
            BACKGROUND.store(if on { ON } else { OFF }, Ordering::Relaxed);
            on
        }
        v => v == ON,
    }
}

/// Turn background I/O on or off for the whole process (tests, benchmarks).
pub fn set_background_io(on: bool) {
    BACKGROUND.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

#[derive(Default)]
struct Queues {
    demand: VecDeque<Job>,
    prefetch: VecDeque<Job>,
}

struct Pool {
    queues: Mutex<Queues>,
    ready: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let p: &'static Pool = Box::leak(Box::new(Pool {
            queues: Mutex::new(Queues::default()),
            ready: Condvar::new(),
        }));
        for i in 0..THREADS {
            std::thread::Builder::new()
                .name(format!("cachalot-io-{i}"))
                .spawn(move || p.serve())
                .expect("spawn an I/O thread");
        }
        p
    })
}

impl Pool {
    fn serve(&self) {
        loop {
            let job = {
                let mut q = self.queues.lock();
                loop {
                    if let Some(j) = q.demand.pop_front().or_else(|| q.prefetch.pop_front()) {
                        break j;
                    }
                    self.ready.wait(&mut q);
                }
            };
            // A panicking job must not take the thread with it (jobs report their
            // own panics where someone waits for them, see `parallel_map`).
            let _ = catch_unwind(AssertUnwindSafe(job));
        }
    }

    fn push(&self, job: Job, prefetch: bool) -> bool {
        let mut q = self.queues.lock();
        if prefetch {
            if q.prefetch.len() >= PREFETCH_QUEUE_MAX {
                return false;
            }
            q.prefetch.push_back(job);
        } else {
            q.demand.push_back(job);
        }
        drop(q);
        self.ready.notify_one();
        true
    }
}

/// Queue background read-ahead work. False if the queue is full (it was dropped).
pub fn submit_prefetch(job: impl FnOnce() + Send + 'static) -> bool {
    if !background_io() {
        return false;
    }
    pool().push(Box::new(job), true)
}

/// Prefetch jobs waiting (for tests and statistics).
pub fn prefetch_backlog() -> usize {
    pool().queues.lock().prefetch.len()
}

struct Batch<T, F> {
    f: F,
    n: usize,
    next: AtomicUsize,
    results: Mutex<(Vec<Option<std::thread::Result<T>>>, usize)>,
    all_done: Condvar,
}

impl<T, F: Fn(usize) -> T> Batch<T, F> {
    /// Take items until none is left; the last one to finish wakes the caller.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            let r = catch_unwind(AssertUnwindSafe(|| (self.f)(i)));
            let mut g = self.results.lock();
            g.0[i] = Some(r);
            g.1 += 1;
            if g.1 == self.n {
                self.all_done.notify_all();
            }
        }
    }
}

/// `f(0..n)`, in order, computed by the caller and up to `n - 1` pool threads at
/// once. A panic in `f` is raised again in the caller.
pub fn parallel_map<T, F>(n: usize, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> T + Send + Sync + 'static,
{
    if n <= 1 || !background_io() {
        return (0..n).map(f).collect();
    }
    let batch = Arc::new(Batch {
        f,
        n,
        next: AtomicUsize::new(0),
        results: Mutex::new(((0..n).map(|_| None).collect(), 0)),
        all_done: Condvar::new(),
    });
    let p = pool();
    for _ in 1..n.min(THREADS + 1) {
        let b = batch.clone();
        p.push(Box::new(move || b.work()), false);
    }
    batch.work();
    let mut g = batch.results.lock();
    while g.1 < n {
        batch.all_done.wait(&mut g);
    }
    std::mem::take(&mut g.0)
        .into_iter()
        .map(|r| match r.expect("every item done") {
            Ok(v) => v,
            Err(panic) => resume_unwind(panic),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn parallel_map_keeps_order_and_overlaps_slow_items() {
        set_background_io(true);
        let t = Instant::now();
        let out = parallel_map(8, |i| {
            std::thread::sleep(Duration::from_millis(50));
            i * 10
        });
        assert_eq!(out, (0..8).map(|i| i * 10).collect::<Vec<_>>());
        // Serially this is 400 ms; concurrently about 50.
        assert!(
            t.elapsed() < Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn parallel_map_raises_a_panic_in_the_caller() {
        let r = std::panic::catch_unwind(|| parallel_map(4, |i| assert_ne!(i, 2)));
        assert!(r.is_err());
        // The pool still works afterwards.
        assert_eq!(parallel_map(3, |i| i), vec![0, 1, 2]);
    }
}
