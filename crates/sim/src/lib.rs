//! A deterministic simulator of the storage engine, in the spirit of
//! TigerBeetle's VOPR: one thread drives a whole store (pool, datasets, intent
//! log, snapshots, send and receive) step by step on simulated devices, with a
//! simulated clock, seeded guids and background reads (read-ahead, concurrent
//! record reads) run on its own thread at seeded points (`cachalot_pool::Env::simulated`,
//! `SimIo`), and checks every result against a simple in-memory model. A run is a function of its seed:
//! on a failure the seed and step count replay it exactly.
//!
//! Each step is one operation drawn from the seed: object writes, truncates,
//! creates and deletes, reads, fsyncs, commits (asked for, or due on the clock),
//! snapshots, snapshot destroys, clones, rollbacks, full and incremental
//! send/receive (some streams cut short, which must change nothing), export and
//! import, scrubs, injected device errors and silent corruption on the devices
//! the layout survives losing, read damage beyond that, and power cuts at a
//! random device write (every unflushed write kept or lost at random, the cut
//! write torn; the separate log device sometimes lost with it).
//!
//! The seed also draws the pool layout (`layout`): one device, a mirror, raidz1
//! or raidz2 of several widths, with or without a separate log device.
//!
//! This file is the runner (the seed's draws, the step loop, the model's
//! types); the steps and checks live beside it: `steps` (data operations,
//! commits, the model's record of what is durable), `snapshots` (snapshots,
//! clones, rollbacks, send and receive), `checks` (export and import, power
//! cuts and recovery, the store against the model), `faults`, `resilver` and
//! `cache`.
//!
//! What must hold:
//! - every operation succeeds (faults and corruption hit only as many devices
//!   as the layout survives losing, so they must be invisible) and every read
//!   returns the model's bytes;
//! - with every read of one device more than that scrambled, a read returns
//!   the model's bytes or fails: never other bytes;
//! - after a power cut the pool imports, its datasets and snapshots are those of
//!   the last acknowledged commit or of the interrupted one, each dataset holds a
//!   state it passed through no older than its last acknowledged fsync or commit
//!   (its last acknowledged commit if the log device was lost: the records of
//!   fsyncs since went with it), and each snapshot holds exactly what it held
//!   when taken;
//! - the store's own invariants (`Store::verify`, `Store::verify_blocks`) hold at
//!   every full check, and a scrub finds nothing unrecoverable.

use cachalot_datasets::{DatasetKind, Store};
use cachalot_pool::env::SimClock;
use cachalot_pool::executor::SimIo;
use cachalot_pool::{Env, Power, SimDevice};
use layout::as_dyn;
pub use layout::Layout;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

mod cache;
mod checks;
mod faults;
mod layout;
mod resilver;
mod snapshots;
mod steps;

/// Largest object offset written.
const MAX_OFF: u64 = 160 << 10;
/// Objects per dataset at most.
const MAX_OBJECTS: usize = 6;
/// Snapshots per dataset before the simulator destroys the oldest.
const MAX_SNAPS: usize = 4;
/// Datasets at most (clones and received ones included).
const MAX_DATASETS: usize = 8;

/// The operations and their weights (an operation listed N times is drawn N
/// times as often).
const OPS: &[&str] = &[
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "write",
    "truncate",
    "truncate",
    "create_object",
    "create_object",
    "delete_object",
    "read",
    "read",
    "read",
    "read",
    "fsync",
    "fsync",
    "fsync",
    "fsync",
    "fsync",
    "fsync",
    "tick",
    "tick",
    "sync",
    "snapshot",
    "snapshot",
    "destroy_snapshot",
    "clone",
    "rollback",
    "send_receive",
    "send_receive",
    "export_import",
    "power_cut",
    "power_cut",
    "power_cut",
    "fault",
    "corrupt",
    "overload",
    "scrub",
    "replace",
];

/// SplitMix64: small, fast, reproducible from a printed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize].clone()
    }
    /// Bytes that are either compressible (repeated text) or noise.
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        if self.chance(50) {
            let word = format!("row-{:08x};", self.next_u64() as u32);
            word.bytes().cycle().take(len).collect()
        } else {
            (0..len).map(|_| self.next_u64() as u8).collect()
        }
    }
}

type Objs = BTreeMap<u64, Vec<u8>>;

/// A dataset of the model: its objects and its snapshots, oldest first.
#[derive(Clone, Default, PartialEq)]
struct Fs {
    objs: Objs,
    snaps: Vec<(String, Objs)>,
}

/// What the store must hold.
#[derive(Clone, Default)]
struct Model {
    fs: BTreeMap<String, Fs>,
}

impl Model {
    /// Names of datasets and snapshots (`FS@SNAP`), sorted.
    fn catalog(&self) -> Vec<String> {
        let mut v: Vec<String> = self.fs.keys().cloned().collect();
        for (name, fs) in &self.fs {
            v.extend(fs.snaps.iter().map(|(s, _)| format!("{name}@{s}")));
        }
        v.sort();
        v
    }
}

/// What a run did, by operation.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub steps: u64,
    pub writes: u64,
    pub reads: u64,
    pub fsyncs: u64,
    pub commits: u64,
    pub snapshots: u64,
    pub clones: u64,
    pub rollbacks: u64,
    pub sends: u64,
    pub cut_streams: u64,
    pub exports: u64,
    pub power_cuts: u64,
    pub faults: u64,
    pub corruptions: u64,
    pub scrubs: u64,
    pub full_checks: u64,
    /// Reads made with more devices damaged than the layout survives, and
    /// how many of them failed (as they may).
    pub overload_reads: u64,
    pub overload_errors: u64,
    /// Power cuts that took the separate log device with them.
    pub log_losses: u64,
    /// Reads the cache device served verified, and its blocks that failed
    /// their checksum (corrupted on it: read from the pool instead).
    pub l2_hits: u64,
    /// Overloads whose read errors faulted a device (export and import
    /// followed).
    pub faulted_devices: u64,
    pub l2_cksum_errors: u64,
    pub cache_corruptions: u64,
    /// Devices replaced by blank ones; resilvers checked complete (the new
    /// device alone standing in for every device the layout survives
    /// losing); of those, resilvers an import continued from a saved position.
    pub replacements: u64,
    pub resilvers_checked: u64,
    pub resilver_resumes: u64,
    /// The pool layout the seed drew.
    pub layout: String,
    /// Background reads (read-ahead jobs) the executor ran.
    pub background_reads: u64,
    /// BLAKE3 of the devices at the end: equal for equal seeds.
    pub fingerprint: String,
}

/// A run that found a problem.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub step: u64,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} failed at step {}: {}",
            self.seed, self.step, self.message
        )
    }
}

/// Run `steps` steps from `seed`. A panic inside the engine is a failure too.
pub fn run(seed: u64, steps: u64) -> Result<Stats, Failure> {
    let mut step = 0u64;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut sim = Sim::new(seed).map_err(|e| (0, e))?;
        let r = sim.run(steps);
        step = sim.step;
        r.map_err(|e| (sim.step, e))
    }));
    match r {
        Ok(Ok(stats)) => Ok(stats),
        Ok(Err((step, message))) => Err(Failure {
            seed,
            step,
            message,
        }),
        Err(p) => Err(Failure {
            seed,
            step,
            message: format!(
                "panic: {}",
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            ),
        }),
    }
}

type R<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

struct Sim {
    rng: Rng,
    env: Env,
    clock: Arc<SimClock>,
    /// Runs the engine's background reads (read-ahead) on this thread.
    io: Arc<SimIo>,
    layout: Layout,
    /// The devices present: the data devices, then the log device unless lost.
    devs: Vec<SimDevice>,
    /// The cache device, if the layout has one.
    cache_dev: Option<SimDevice>,
    store: Arc<Store>,
    model: Model,
    /// The model as of the last acknowledged commit.
    durable: Model,
    /// Per dataset: its states since the last acknowledged commit (first: the
    /// committed one) and the index of the last acknowledged fsync.
    hist: BTreeMap<String, (Vec<Objs>, usize)>,
    /// A power cut is set to happen at a coming device write.
    cut_armed: u32,
    /// Snapshots that must stay (clone origins, receive bases).
    pinned: BTreeSet<String>,
    /// The data device slot whose replacement waits for its resilver check.
    resilvering: Option<usize>,
    /// Received datasets: their source dataset.
    recv_src: BTreeMap<String, String>,
    /// Received datasets changed since their last receive: the engine sees
    /// them as changed even when the change brought back the snapshot's bytes.
    touched: BTreeSet<String>,
    next_name: u64,
    step: u64,
    stats: Stats,
    /// `CACHALOT_SIM_TRACE=1`: print each step's operation.
    trace: bool,
}

impl Sim {
    fn new(seed: u64) -> R<Sim> {
        let (env, clock, io) = Env::simulated(seed, 1_800_000_000 * 1_000_000_000);
        // `CACHALOT_READAHEAD=0`: without background reads, as in production
        // with the same setting (to tell whether a finding needs them).
        io.set_enabled(cachalot_pool::executor::background_io_wanted());
        let _g = env.enter();
        let layout = Layout::of_seed(seed);
        let trace = std::env::var_os("CACHALOT_SIM_TRACE").is_some();
        if trace {
            eprintln!("layout: {layout}");
        }
        let power = Power::new();
        let devs = layout.blank_devices(&power);
        let store = layout
            .create("tank", &devs, layout.opts())
            .map_err(err("create"))?;
        let cache_dev = layout.blank_cache(&power);
        if let Some(c) = &cache_dev {
            store
                .add_cache_devices(as_dyn(std::slice::from_ref(c)))
                .map_err(err("add cache"))?;
        }
        let mut model = Model::default();
        model.fs.insert("tank".into(), Fs::default());
        for (name, rs) in [("tank/a", "16K"), ("tank/b", "128K")] {
            store
                .create_dataset(
                    name,
                    DatasetKind::Filesystem,
                    None,
                    &[("recordsize".into(), rs.into())],
                    false,
                )
                .map_err(err("create dataset"))?;
            model.fs.insert(name.into(), Fs::default());
        }
        let mut sim = Sim {
            rng: Rng::new(seed),
            env,
            clock,
            io,
            layout,
            devs,
            cache_dev,
            store,
            durable: model.clone(),
            model,
            hist: BTreeMap::new(),
            cut_armed: 0,
            pinned: BTreeSet::new(),
            resilvering: None,
            recv_src: BTreeMap::new(),
            touched: BTreeSet::new(),
            next_name: 1,
            step: 0,
            stats: Stats::default(),
            trace,
        };
        sim.mark_durable();
        Ok(sim)
    }

    fn run(&mut self, steps: u64) -> R<Stats> {
        let env = self.env.clone();
        let _g = env.enter();
        for step in 0..steps {
            self.step = step;
            self.clock
                .advance(Duration::from_millis(self.rng.below(300)));
            // Background reads queued so far may run before this step, and
            // what the ARC evicted goes to the cache device.
            self.io.step();
            self.store.cache().feed_l2_now();
            let r = self.one_op();
            if self.devs[0].is_cut() {
                self.recover()?;
                continue;
            }
            r?;
            if self.cut_armed > 0 {
                self.cut_armed += 1;
                // Make sure an armed cut fires: commit.
                if self.cut_armed > 30 {
                    self.check("sync", self.store.sync())?;
                    if self.devs[0].is_cut() {
                        self.recover()?;
                    }
                }
            }
            if step % 64 == 63 {
                // A check's repairs write: an armed cut may fire in it.
                let r = self.full_check("periodic check");
                if self.devs[0].is_cut() {
                    self.recover()?;
                } else {
                    r?;
                }
            }
        }
        self.step = steps;
        // The final checks commit: a cut still armed must not fire in them.
        if self.cut_armed > 0 {
            self.devs[0].cut_power_at_write(u64::MAX);
            self.cut_armed = 0;
        }
        self.full_check("final check")?;
        self.store
            .verify_blocks()
            .map_err(err("final verify_blocks"))?;
        self.scrub()?;
        self.stats.steps = steps;
        self.stats.layout = self.layout.to_string();
        self.stats.background_reads = self.io.ran();
        self.retire_store();
        let mut h = blake3::Hasher::new();
        for d in &self.devs {
            h.update(&d.crash_image(|| true));
        }
        self.stats.fingerprint = h.finalize().to_hex()[..16].to_string();
        Ok(self.stats.clone())
    }

    /// One operation, drawn from the seed.
    fn one_op(&mut self) -> R<()> {
        let op = OPS[self.rng.below(OPS.len() as u64) as usize];
        if self.trace {
            eprintln!("step {}: {op}", self.step);
        }
        match op {
            "write" => self.write(),
            "truncate" => self.truncate(),
            "create_object" => self.create_object(),
            "delete_object" => self.delete_object(),
            "read" => self.read_check(),
            "fsync" => self.fsync(),
            "tick" => self.tick(),
            "sync" => self.sync(),
            "snapshot" => self.snapshot(),
            "destroy_snapshot" => self.destroy_snapshot(),
            "clone" => self.clone_snapshot(),
            "rollback" => self.rollback(),
            "send_receive" => self.send_receive(),
            "export_import" => self.export_import(),
            "power_cut" => self.arm_cut(),
            "fault" => self.inject_fault(),
            "corrupt" => self.corrupt(),
            "overload" => self.overload(),
            "scrub" => self.scrub(),
            "replace" => self.replace(),
            o => Err(format!("unknown op {o}")),
        }
    }
}
