//! The engine's environment: its clock, its random source (every guid comes from
//! it), who triggers transaction group commits and who runs background reads.
//! Production uses the real ones (`Env::real`): the wall clock, guids hashed from
//! time, pid and a counter, a sync thread per store, and the shared pool of I/O
//! threads. A test or the simulator passes its own: a clock it advances, a seeded
//! generator, `TxgTrigger::Manual`, under which no thread is started and a commit
//! happens only inside a call the test makes, and `SimIo`, which runs read-ahead
//! on the caller's thread at seeded points, so a whole run is one thread, step by
//! step, and replays exactly from its seed.
//!
//! How it is passed: a pool takes the environment current in the thread that
//! creates or imports it (`Env::current`: the one set by `Env::enter`, else the
//! real one) and keeps it; everything the pool and its store do later asks the
//! pool (`Pool::env`), from whatever thread. Callers that never enter an
//! environment get exactly the previous behaviour.
//!
//! Invariants: a guid is never 0; a pool's environment never changes after it is
//! assembled.

use crate::executor::{IoExecutor, SimIo, ThreadPoolIo};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Wall-clock time, as the engine records it (uberblocks, creation times).
pub trait Clock: Send + Sync {
    /// Nanoseconds since the Unix epoch.
    fn now_ns(&self) -> u64;
}

/// The source of identities (pools, vdevs, intent-log chains, snapshots).
pub trait Entropy: Send + Sync {
    /// Any 64-bit value; `Env::guid` maps 0 away.
    fn next_u64(&self) -> u64;
}

/// Who starts transaction group commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxgTrigger {
    /// A sync thread per store: on a timer, on dirty data, on request.
    Thread,
    /// No thread: a commit runs inline in the caller's thread, when it asks
    /// (`Store::sync`, an fsync, a throttled writer, `Store::step`).
    Manual,
}

/// The environment a pool runs in. Cheap to clone (three `Arc`s).
#[derive(Clone)]
pub struct Env {
    pub clock: Arc<dyn Clock>,
    pub entropy: Arc<dyn Entropy>,
    pub txg: TxgTrigger,
    /// Runs concurrent record reads and read-ahead (`executor`).
    pub io: Arc<dyn IoExecutor>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").field("txg", &self.txg).finish()
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::real()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Env>> = const { RefCell::new(None) };
}

/// Restores the previous environment of the thread when dropped.
pub struct EnvGuard {
    prev: Option<Env>,
}

impl Drop for EnvGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

impl Env {
    /// The production environment.
    pub fn real() -> Env {
        static REAL: OnceLock<Env> = OnceLock::new();
        REAL.get_or_init(|| Env {
            clock: Arc::new(RealClock),
            entropy: Arc::new(RealEntropy::default()),
            txg: TxgTrigger::Thread,
            io: Arc::new(ThreadPoolIo),
        })
        .clone()
    }

    /// A deterministic environment: a simulated clock starting at `start_ns`, a
    /// generator seeded with `seed`, manual commits, and background reads run by
    /// a `SimIo` seeded with `seed`. The clock and the executor are returned for
    /// the caller to drive.
    pub fn simulated(seed: u64, start_ns: u64) -> (Env, Arc<SimClock>, Arc<SimIo>) {
        let clock = Arc::new(SimClock::new(start_ns));
        let io = Arc::new(SimIo::new(seed));
        let env = Env {
            clock: clock.clone(),
            entropy: Arc::new(SeededEntropy::new(seed)),
            txg: TxgTrigger::Manual,
            io: io.clone(),
        };
        (env, clock, io)
    }

    /// The environment pools created or imported by this thread take.
    pub fn current() -> Env {
        CURRENT
            .with(|c| c.borrow().clone())
            .unwrap_or_else(Env::real)
    }

    /// Make `self` the current environment of this thread until the guard drops.
    pub fn enter(&self) -> EnvGuard {
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        EnvGuard { prev }
    }

    /// A fresh identity: never 0.
    pub fn guid(&self) -> u64 {
        self.entropy.next_u64().max(1)
    }

    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    pub fn now_secs(&self) -> u64 {
        self.clock.now_ns() / 1_000_000_000
    }

    pub fn manual_txg(&self) -> bool {
        self.txg == TxgTrigger::Manual
    }
}

/// The system's wall clock.
pub struct RealClock;

impl Clock for RealClock {
    fn now_ns(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64
    }
}

/// Unique enough identities: time, pid and a counter through BLAKE3.
#[derive(Default)]
pub struct RealEntropy {
    n: AtomicU64,
}

impl Entropy for RealEntropy {
    fn next_u64(&self) -> u64 {
        let mut h = blake3::Hasher::new();
        h.update(&RealClock.now_ns().to_le_bytes());
        h.update(&std::process::id().to_le_bytes());
        h.update(&self.n.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        u64::from_le_bytes(h.finalize().as_bytes()[0..8].try_into().unwrap())
    }
}

/// A clock that moves only when told to.
pub struct SimClock {
    ns: AtomicU64,
}

impl SimClock {
    pub fn new(start_ns: u64) -> SimClock {
        SimClock {
            ns: AtomicU64::new(start_ns),
        }
    }
    pub fn advance(&self, d: Duration) {
        self.ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

impl Clock for SimClock {
    fn now_ns(&self) -> u64 {
        self.ns.load(Ordering::Relaxed)
    }
}

/// SplitMix64 from a seed: the same seed gives the same guids in the same order.
pub struct SeededEntropy {
    state: Mutex<u64>,
}

impl SeededEntropy {
    pub fn new(seed: u64) -> SeededEntropy {
        SeededEntropy {
            state: Mutex::new(seed ^ 0x6a09_e667_f3bc_c908),
        }
    }
}

impl Entropy for SeededEntropy {
    fn next_u64(&self) -> u64 {
        let mut s = self.state.lock();
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entered_env_is_current_and_restored() {
        let (env, clock, _) = Env::simulated(7, 1_000_000_000_000);
        assert!(!Env::current().manual_txg());
        {
            let _g = env.enter();
            let cur = Env::current();
            assert!(cur.manual_txg());
            assert_eq!(cur.now_secs(), 1000);
            clock.advance(Duration::from_secs(5));
            assert_eq!(cur.now_secs(), 1005);
        }
        assert!(!Env::current().manual_txg());
        // Same seed, same guids.
        let a: Vec<u64> = (0..4).map(|_| env.guid()).collect();
        let (env2, _, _) = Env::simulated(7, 0);
        let b: Vec<u64> = (0..4).map(|_| env2.guid()).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|g| *g != 0));
    }
}
