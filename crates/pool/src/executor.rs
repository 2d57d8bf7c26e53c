//! Who runs the engine's background I/O: the records of one read spanning
//! several are fetched concurrently (`map`), and read-ahead runs behind the
//! reader (`submit`). The engine never starts a thread for this itself: it asks
//! its pool's environment (`Env::io`), so production runs the work on a shared
//! pool of I/O threads (`ThreadPoolIo`) and the simulator on its own thread, at
//! points its seeded generator chooses (`SimIo`), which keeps a run a function of
//! its seed while read-ahead is on.
//!
//! Invariants:
//! - Demand work is never lost: `run_all` calls every item once and returns only
//!   when all have returned, whoever ran them. Background work is best effort: a
//!   full queue (`PREFETCH_QUEUE_MAX`) drops it, and so does a simulated power cut
//!   (as a real one would).
//! - Thread pool: demand work is taken before queued background work, so
//!   read-ahead never delays a waiting reader by more than the one record a
//!   thread may be reading; the data in flight is bounded by `THREADS` records; a
//!   caller of `run_all` also takes items itself, so it is never slower than
//!   reading serially, and a pool thread stuck in a slow read cannot hold it up
//!   beyond that read. The threads start once per process and never exit.
//! - Simulated: nothing runs on another thread, and which queued job runs when is
//!   a function of the seed only.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Background work (read-ahead of one record).
pub type IoJob = Box<dyn FnOnce() + Send>;

/// Background jobs waiting at most; more are dropped (read-ahead is best effort).
pub const PREFETCH_QUEUE_MAX: usize = 256;

/// Runs the engine's concurrent and background reads (see the module).
pub trait IoExecutor: Send + Sync {
    /// Whether background I/O is on. Off, a read fetches its records one after
    /// another and nothing is queued (the engine asks before it plans read-ahead).
    fn enabled(&self) -> bool;
    /// Queue background work; false if it was dropped.
    fn submit(&self, job: IoJob) -> bool;
    /// Call `item(i)` exactly once for each `i` in `0..n`, in any order and
    /// possibly concurrently; return when every call has returned. `item` does
    /// not panic (`map` catches its panics).
    fn run_all(&self, n: usize, item: Arc<dyn Fn(usize) + Send + Sync>);
    /// A point in the engine where background work may run now. Threads may run
    /// it anywhere, so this does nothing for them; the simulator runs queued
    /// work here too, which puts read-ahead inside commits: after a commit's
    /// blocks are written and its frees queued, before and after its uberblock.
    /// The caller holds no lock a read takes.
    fn yield_point(&self) {}
}

impl dyn IoExecutor {
    /// `f(0..n)`, in order, computed through `run_all` (serially when background
    /// I/O is off). A panic in `f` is raised again in the caller.
    pub fn map<T, F>(&self, n: usize, f: F) -> Vec<T>
    where
        T: Send + 'static,
        F: Fn(usize) -> T + Send + Sync + 'static,
    {
        if n <= 1 || !self.enabled() {
            return (0..n).map(f).collect();
        }
        type Slots<T> = Mutex<Vec<Option<std::thread::Result<T>>>>;
        let slots: Arc<Slots<T>> = Arc::new(Mutex::new((0..n).map(|_| None).collect()));
        let out = slots.clone();
        self.run_all(
            n,
            Arc::new(move |i| {
                let r = catch_unwind(AssertUnwindSafe(|| f(i)));
                out.lock()[i] = Some(r);
            }),
        );
        let results = std::mem::take(&mut *slots.lock());
        results
            .into_iter()
            .map(|r| match r.expect("run_all calls every item") {
                Ok(v) => v,
                Err(panic) => resume_unwind(panic),
            })
            .collect()
    }
}

// ------------------------------------------------------------------ production

/// Background I/O in production is on unless the environment says
/// `CACHALOT_READAHEAD=0` (or a test or benchmark turns it off).
static BACKGROUND: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// What the process environment asks for: on unless `CACHALOT_READAHEAD=0`.
pub fn background_io_wanted() -> bool {
    std::env::var("CACHALOT_READAHEAD").map_or(true, |v| v != "0")
}

/// True when the thread pool's background I/O is on (see `BACKGROUND`).
pub fn background_io() -> bool {
    match BACKGROUND.load(Ordering::Relaxed) {
        UNSET => {
            let on = background_io_wanted();
            BACKGROUND.store(if on { ON } else { OFF }, Ordering::Relaxed);
            on
        }
        v => v == ON,
    }
}

/// Turn the thread pool's background I/O on or off for the whole process.
pub fn set_background_io(on: bool) {
    BACKGROUND.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// Threads in the pool: enough to keep a device queue busy for one or two
/// streams, few enough to cost little when idle.
const THREADS: usize = 8;

/// The production executor: one shared pool of `THREADS` I/O threads per process.
pub struct ThreadPoolIo;

#[derive(Default)]
struct Queues {
    demand: VecDeque<IoJob>,
    prefetch: VecDeque<IoJob>,
}

struct Threads {
    queues: Mutex<Queues>,
    ready: Condvar,
}

fn threads() -> &'static Threads {
    static POOL: OnceLock<&'static Threads> = OnceLock::new();
    POOL.get_or_init(|| {
        let p: &'static Threads = Box::leak(Box::new(Threads {
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

impl Threads {
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
            // A panicking job must not take the thread with it (demand items
            // report their own panics, see `map`).
            let _ = catch_unwind(AssertUnwindSafe(job));
        }
    }

    fn push(&self, job: IoJob, prefetch: bool) -> bool {
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

/// One `run_all`: items are taken by index until none is left; the last one
/// to finish wakes the caller.
struct Batch {
    item: Arc<dyn Fn(usize) + Send + Sync>,
    n: usize,
    next: AtomicUsize,
    done: Mutex<usize>,
    all_done: Condvar,
}

impl Batch {
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            (self.item)(i);
            let mut d = self.done.lock();
            *d += 1;
            if *d == self.n {
                self.all_done.notify_all();
            }
        }
    }
}

impl IoExecutor for ThreadPoolIo {
    fn enabled(&self) -> bool {
        background_io()
    }

    fn submit(&self, job: IoJob) -> bool {
        self.enabled() && threads().push(job, true)
    }

    fn run_all(&self, n: usize, item: Arc<dyn Fn(usize) + Send + Sync>) {
        let batch = Arc::new(Batch {
            item,
            n,
            next: AtomicUsize::new(0),
            done: Mutex::new(0),
            all_done: Condvar::new(),
        });
        let p = threads();
        for _ in 1..n.min(THREADS + 1) {
            let b = batch.clone();
            p.push(Box::new(move || b.work()), false);
        }
        batch.work();
        let mut d = batch.done.lock();
        while *d < n {
            batch.all_done.wait(&mut d);
        }
    }
}

impl ThreadPoolIo {
    /// Background jobs waiting (for tests and statistics).
    pub fn backlog() -> usize {
        threads().queues.lock().prefetch.len()
    }
}

// ------------------------------------------------------------------- simulated

/// The simulator's executor: background jobs wait in a queue and run on the
/// caller's thread, at points its seeded generator chooses: when work is
/// submitted, between the items of a `run_all` (whose order it also chooses),
/// and when the simulator calls `step`. Which of the queued jobs runs is drawn
/// among the first `THREADS`, as the thread pool would have started those.
pub struct SimIo {
    state: Mutex<SimState>,
    /// On unless turned off (to tell whether a seed's finding needs read-ahead).
    on: std::sync::atomic::AtomicBool,
}

struct SimState {
    queue: VecDeque<IoJob>,
    rng: u64,
    /// Jobs run so far.
    ran: u64,
}

impl SimState {
    /// SplitMix64, as the simulator's own generator.
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

impl SimIo {
    pub fn new(seed: u64) -> SimIo {
        SimIo {
            state: Mutex::new(SimState {
                queue: VecDeque::new(),
                rng: seed ^ 0xbb67_ae85_84ca_a73b,
                ran: 0,
            }),
            on: true.into(),
        }
    }

    /// Run up to `max` queued jobs, each drawn as described on the type; the
    /// number run.
    pub fn run(&self, max: usize) -> usize {
        for ran in 0..max {
            // Taken out of the lock before it runs: a job may read, and reads
            // may submit.
            let job = {
                let mut s = self.state.lock();
                if s.queue.is_empty() {
                    return ran;
                }
                let window = s.queue.len().min(THREADS) as u64;
                let i = s.below(window) as usize;
                s.ran += 1;
                s.queue.remove(i).expect("index within the queue")
            };
            // As in the thread pool: a job's panic is its own (it reports nothing).
            let _ = catch_unwind(AssertUnwindSafe(job));
        }
        max
    }

    /// A point where background work may run: none, some or all of it.
    pub fn step(&self) {
        let n = {
            let mut s = self.state.lock();
            match s.below(4) {
                0 | 1 => 0,
                2 => 1 + s.below(4) as usize,
                _ => usize::MAX,
            }
        };
        self.run(n);
    }

    /// Drop every queued job unrun (the process died in a power cut).
    pub fn discard(&self) {
        let queue = std::mem::take(&mut self.state.lock().queue);
        drop(queue);
    }

    /// Jobs waiting.
    pub fn pending(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Turn background I/O off (reads one record after another, nothing queued)
    /// or back on.
    pub fn set_enabled(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// Jobs run so far.
    pub fn ran(&self) -> u64 {
        self.state.lock().ran
    }
}

impl IoExecutor for SimIo {
    fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn submit(&self, job: IoJob) -> bool {
        if !self.enabled() {
            return false;
        }
        {
            let mut s = self.state.lock();
            if s.queue.len() >= PREFETCH_QUEUE_MAX {
                return false;
            }
            s.queue.push_back(job);
        }
        self.step();
        true
    }

    fn run_all(&self, n: usize, item: Arc<dyn Fn(usize) + Send + Sync>) {
        let mut order: Vec<usize> = (0..n).collect();
        {
            // Fisher-Yates: the items end in an order drawn from the seed.
            let mut s = self.state.lock();
            for i in (1..n).rev() {
                let j = s.below(i as u64 + 1) as usize;
                order.swap(i, j);
            }
        }
        for i in order {
            self.step();
            item(i);
        }
    }

    fn yield_point(&self) {
        self.step();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn pool() -> Arc<dyn IoExecutor> {
        set_background_io(true);
        Arc::new(ThreadPoolIo)
    }

    #[test]
    fn map_keeps_order_and_overlaps_slow_items() {
        let io = pool();
        let t = Instant::now();
        let out = io.map(8, |i| {
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
    fn map_raises_a_panic_in_the_caller() {
        for io in [pool(), Arc::new(SimIo::new(1)) as Arc<dyn IoExecutor>] {
            let r = catch_unwind(AssertUnwindSafe(|| io.map(4, |i| assert_ne!(i, 2))));
            assert!(r.is_err());
            // The executor still works afterwards.
            assert_eq!(io.map(3, |i| i), vec![0, 1, 2]);
        }
    }

    /// The same seed runs the same jobs in the same order, all on the caller's
    /// thread; another seed orders them differently.
    #[test]
    fn simulated_runs_are_a_function_of_the_seed() {
        let trace = |seed: u64| {
            let io = SimIo::new(seed);
            let log = Arc::new(Mutex::new(Vec::new()));
            let me = std::thread::current().id();
            for j in 0..40 {
                let l = log.clone();
                assert!(io.submit(Box::new(move || {
                    assert_eq!(std::thread::current().id(), me);
                    l.lock().push(j);
                })));
            }
            let l = log.clone();
            let out = (&io as &dyn IoExecutor).map(6, move |i| {
                l.lock().push(100 + i);
                i
            });
            assert_eq!(out, (0..6).collect::<Vec<_>>());
            io.run(usize::MAX);
            assert_eq!(io.pending(), 0);
            let v = log.lock().clone();
            assert_eq!(v.len(), 46, "every job and item ran once");
            v
        };
        assert_eq!(trace(5), trace(5));
        assert_ne!(trace(5), trace(6));
    }

    #[test]
    fn simulated_queue_is_bounded_and_a_cut_drops_it() {
        let io = SimIo::new(3);
        let ran = Arc::new(AtomicUsize::new(0));
        let mut queued = 0;
        for _ in 0..PREFETCH_QUEUE_MAX * 4 {
            let r = ran.clone();
            queued += io.submit(Box::new(move || {
                r.fetch_add(1, Ordering::Relaxed);
            })) as usize;
        }
        assert!(io.pending() <= PREFETCH_QUEUE_MAX);
        assert_eq!(queued, ran.load(Ordering::Relaxed) + io.pending());
        io.discard();
        assert_eq!(io.pending(), 0);
    }
}
