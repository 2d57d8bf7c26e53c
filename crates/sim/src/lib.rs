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
use cachalot_pool::{BlockDevice, Env, Power, SimDevice};
use layout::as_dyn;
pub use layout::Layout;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

mod cache;
mod faults;
mod layout;
mod resilver;

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

    // ---------------------------------------------------------------- model state

    /// Everything in the model is committed: the durable state and each
    /// dataset's history restart here.
    fn mark_durable(&mut self) {
        if self.trace {
            eprintln!(
                "  durable: {:?}",
                self.model
                    .fs
                    .iter()
                    .map(|(n, f)| format!("{n} {}", shape(&f.objs)))
                    .collect::<Vec<_>>()
            );
        }
        self.durable = self.model.clone();
        self.hist = self
            .model
            .fs
            .iter()
            .map(|(n, f)| (n.clone(), (vec![f.objs.clone()], 0)))
            .collect();
    }

    /// A data operation on `name` changed it from `pre`; `committed` says a
    /// commit happened inside the operation (before its change).
    fn note_change(&mut self, name: &str, pre: Objs, committed: bool) {
        if self.recv_src.contains_key(name) {
            self.touched.insert(name.to_string());
        }
        let now = self.model.fs[name].objs.clone();
        if self.trace {
            eprintln!(
                "  {name}: {} -> {}{}",
                shape(&pre),
                shape(&now),
                if committed {
                    " (a commit before it)"
                } else {
                    ""
                }
            );
        }
        if committed && !self.devs[0].is_cut() {
            // The commit holds everything before this operation.
            let post = self.model.clone();
            self.model.fs.get_mut(name).unwrap().objs = pre.clone();
            self.mark_durable();
            self.model = post;
            let h = self.hist.get_mut(name).unwrap();
            h.0 = vec![pre, now];
            return;
        }
        self.hist
            .entry(name.to_string())
            .or_insert_with(|| (vec![pre], 0))
            .0
            .push(now);
    }

    /// The result of an engine call: after a power cut the engine runs on with
    /// devices that drop its writes, so later reads may fail; such an error is
    /// no finding (`None`: the operation may or may not have happened; the
    /// caller updates the model as if it had, and recovery sorts it out).
    fn check<T>(&self, what: &str, r: cachalot_datasets::Result<T>) -> R<Option<T>> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(_) if self.devs[0].is_cut() => Ok(None),
            Err(e) => Err(format!("{what}: {e}")),
        }
    }

    fn heads(&self) -> Vec<String> {
        self.model.fs.keys().cloned().collect()
    }

    fn new_name(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    // ------------------------------------------------------------ data operations

    fn write(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ids: Vec<u64> = self.model.fs[&name].objs.keys().copied().collect();
        if ids.is_empty() {
            return self.create_object_in(&name);
        }
        let id = self.rng.pick(&ids);
        let off = self.rng.below(MAX_OFF);
        let max = if self.rng.chance(20) {
            64 << 10
        } else {
            8 << 10
        };
        let len = 1 + self.rng.below(max) as usize;
        let data = self.rng.bytes(len);
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let pre = self.model.fs[&name].objs.clone();
        let synced = self.store.synced_txg();
        self.check(&format!("write {name} obj {id}"), ds.write(id, off, &data))?;
        let obj = self
            .model
            .fs
            .get_mut(&name)
            .unwrap()
            .objs
            .get_mut(&id)
            .unwrap();
        let end = off as usize + data.len();
        if obj.len() < end {
            obj.resize(end, 0);
        }
        obj[off as usize..end].copy_from_slice(&data);
        self.stats.writes += 1;
        self.note_change(&name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    fn truncate(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ids: Vec<u64> = self.model.fs[&name].objs.keys().copied().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let id = self.rng.pick(&ids);
        let size = self.rng.below(MAX_OFF + (32 << 10));
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let pre = self.model.fs[&name].objs.clone();
        let synced = self.store.synced_txg();
        self.check(&format!("truncate {name} obj {id}"), ds.truncate(id, size))?;
        let obj = self
            .model
            .fs
            .get_mut(&name)
            .unwrap()
            .objs
            .get_mut(&id)
            .unwrap();
        obj.resize(size as usize, 0);
        self.note_change(&name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    fn create_object(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        self.create_object_in(&name)
    }

    fn create_object_in(&mut self, name: &str) -> R<()> {
        if self.model.fs[name].objs.len() >= MAX_OBJECTS {
            return Ok(());
        }
        let ds = self.store.dataset(name).map_err(err("dataset"))?;
        let pre = self.model.fs[name].objs.clone();
        let synced = self.store.synced_txg();
        let what = format!("create object in {name}");
        let Some(id) = self.check(&what, ds.create_object())? else {
            return Ok(());
        };
        let objs = &mut self.model.fs.get_mut(name).unwrap().objs;
        if objs.contains_key(&id) {
            return Err(format!("{name}: object id {id} handed out while live"));
        }
        objs.insert(id, Vec::new());
        self.note_change(name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    fn delete_object(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ids: Vec<u64> = self.model.fs[&name].objs.keys().copied().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let id = self.rng.pick(&ids);
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let pre = self.model.fs[&name].objs.clone();
        let synced = self.store.synced_txg();
        self.check(&format!("delete {name} obj {id}"), ds.delete_object(id))?;
        self.model.fs.get_mut(&name).unwrap().objs.remove(&id);
        self.note_change(&name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    /// Read a random range of a head or a snapshot and compare it with the model.
    fn read_check(&mut self) -> R<()> {
        if self.read_random(false)? == Some(true) {
            self.stats.reads += 1;
        }
        Ok(())
    }

    /// Read a random range of a head or a snapshot: `Some(true)` if it returned
    /// the model's bytes, `Some(false)` if it failed (only allowed with
    /// `damaged`, or after a power cut), `None` if there was nothing to read.
    /// Other bytes than the model's are always a finding.
    fn read_random(&mut self, damaged: bool) -> R<Option<bool>> {
        let name = self.rng.pick(&self.heads());
        let fs = &self.model.fs[&name];
        let (label, objs) = if !fs.snaps.is_empty() && self.rng.chance(30) {
            let (s, o) = self.rng.pick(&fs.snaps);
            (format!("{name}@{s}"), o)
        } else {
            (name.clone(), fs.objs.clone())
        };
        let ids: Vec<u64> = objs.keys().copied().collect();
        if ids.is_empty() {
            return Ok(None);
        }
        let id = self.rng.pick(&ids);
        let want = &objs[&id];
        let off = self.rng.below(want.len() as u64 + 4096);
        let len = 1 + self.rng.below(96 << 10) as usize;
        let got = if label.contains('@') {
            self.store.snapshot_dataset(&label)
        } else {
            self.store.dataset(&label)
        }
        .and_then(|ds| ds.read(id, off, len));
        let got = match got {
            Ok(g) => g,
            Err(_) if damaged => return Ok(Some(false)),
            Err(e) => {
                self.check::<()>(&format!("read {label} obj {id}"), Err(e))?;
                return Ok(Some(false));
            }
        };
        let s = (off as usize).min(want.len());
        let e = (off as usize + len).min(want.len());
        if got != want[s..e] {
            return Err(format!(
                "read {label} obj {id} [{off}+{len}]{}: {} bytes differ from the model ({} expected)",
                if damaged { " on overloaded devices" } else { "" },
                got.len(),
                e - s
            ));
        }
        Ok(Some(true))
    }

    fn fsync(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let synced = self.store.synced_txg();
        if self.trace {
            eprintln!("  fsync {name}");
        }
        self.check(&format!("fsync {name}"), ds.fsync())?;
        self.stats.fsyncs += 1;
        if self.devs[0].is_cut() {
            return Ok(());
        }
        if self.store.synced_txg() > synced {
            self.mark_durable();
        } else {
            let h = self.hist.get_mut(&name).unwrap();
            h.1 = h.0.len() - 1;
        }
        Ok(())
    }

    // ------------------------------------------------------------------- commits

    /// Time passes; the engine commits if a commit is due (what its sync thread
    /// would do).
    fn tick(&mut self) -> R<()> {
        self.clock
            .advance(Duration::from_millis(self.rng.below(3000)));
        let r = self.check("step", self.store.step())?;
        if r.flatten().is_some() && !self.devs[0].is_cut() {
            self.stats.commits += 1;
            self.mark_durable();
        }
        Ok(())
    }

    fn sync(&mut self) -> R<()> {
        self.check("sync", self.store.sync())?;
        self.committed();
        Ok(())
    }

    /// A failed operation returned: durable only if it committed (a receive
    /// cut inside its BEGIN record fails before it creates anything, so it
    /// commits nothing; one cut later syncs as it discards its partial state).
    /// Marking an uncommitted state durable would let the model reject the
    /// older acknowledged states a later power cut legitimately brings back.
    fn committed_since(&mut self, synced: u64) {
        if self.store.synced_txg() > synced {
            self.committed();
        }
    }

    /// A catalog operation or sync returned: durable unless the power is cut.
    fn committed(&mut self) {
        if !self.devs[0].is_cut() {
            self.stats.commits += 1;
            self.mark_durable();
        }
    }

    // ----------------------------------------------------------------- snapshots

    fn snapshot(&mut self) -> R<()> {
        let cands: Vec<String> = self
            .heads()
            .into_iter()
            .filter(|n| !self.recv_src.contains_key(n))
            .collect();
        let name = self.rng.pick(&cands);
        if self.model.fs[&name].snaps.len() >= MAX_SNAPS {
            return self.destroy_snapshot_of(&name);
        }
        let snap = self.new_name("s");
        let full = format!("{name}@{snap}");
        if self.trace {
            eprintln!("  snapshot {full}");
        }
        self.check(&full, self.store.snapshot(std::slice::from_ref(&full)))?;
        let fs = self.model.fs.get_mut(&name).unwrap();
        let objs = fs.objs.clone();
        fs.snaps.push((snap, objs));
        self.stats.snapshots += 1;
        self.committed();
        Ok(())
    }

    fn destroy_snapshot(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        self.destroy_snapshot_of(&name)
    }

    /// Destroy the oldest snapshot of `name` that nothing depends on.
    fn destroy_snapshot_of(&mut self, name: &str) -> R<()> {
        if self.recv_src.contains_key(name) {
            return Ok(());
        }
        let Some(idx) = self.model.fs[name]
            .snaps
            .iter()
            .position(|(s, _)| !self.pinned.contains(&format!("{name}@{s}")))
        else {
            return Ok(());
        };
        let snap = self.model.fs[name].snaps[idx].0.clone();
        let full = format!("{name}@{snap}");
        self.check(
            &format!("destroy {full}"),
            self.store.destroy_snapshot(&full),
        )?;
        self.model.fs.get_mut(name).unwrap().snaps.remove(idx);
        self.committed();
        Ok(())
    }

    fn clone_snapshot(&mut self) -> R<()> {
        if self.model.fs.len() >= MAX_DATASETS {
            return Ok(());
        }
        let Some((name, snap, objs)) = self.pick_snapshot() else {
            return Ok(());
        };
        let full = format!("{name}@{snap}");
        let new = format!("tank/{}", self.new_name("c"));
        let r = self.store.clone_snapshot(&full, &new, &[]);
        self.check(&format!("clone {full} {new}"), r)?;
        self.pinned.insert(full);
        self.model.fs.insert(
            new,
            Fs {
                objs,
                snaps: vec![],
            },
        );
        self.stats.clones += 1;
        self.committed();
        Ok(())
    }

    /// A random snapshot of a dataset that is not a receive target.
    fn pick_snapshot(&mut self) -> Option<(String, String, Objs)> {
        let all: Vec<(String, String, Objs)> = self
            .model
            .fs
            .iter()
            .filter(|(n, _)| !self.recv_src.contains_key(*n))
            .flat_map(|(n, f)| {
                f.snaps
                    .iter()
                    .map(move |(s, o)| (n.clone(), s.clone(), o.clone()))
            })
            .collect();
        (!all.is_empty()).then(|| self.rng.pick(&all))
    }

    /// Roll a dataset back to its newest snapshot.
    fn rollback(&mut self) -> R<()> {
        let cands: Vec<String> = self
            .model
            .fs
            .iter()
            .filter(|(n, f)| !f.snaps.is_empty() && !self.recv_src.contains_key(*n))
            .map(|(n, _)| n.clone())
            .collect();
        if cands.is_empty() {
            return Ok(());
        }
        let name = self.rng.pick(&cands);
        let (snap, objs) = self.model.fs[&name].snaps.last().unwrap().clone();
        let full = format!("{name}@{snap}");
        self.check(
            &format!("rollback {full}"),
            self.store.rollback(&full, false),
        )?;
        let pre = self.model.fs[&name].objs.clone();
        self.model.fs.get_mut(&name).unwrap().objs = objs;
        // Interrupted, the rollback may or may not have landed.
        self.note_change(&name, pre, false);
        self.stats.rollbacks += 1;
        self.committed();
        Ok(())
    }

    // ---------------------------------------------------------- send and receive

    /// Send a snapshot into a new dataset, or the next snapshot of a source into
    /// a dataset that received an older one; sometimes the stream is cut short,
    /// which must fail and change nothing.
    fn send_receive(&mut self) -> R<()> {
        let incr: Vec<(String, String, String, String)> = self
            .recv_src
            .iter()
            .filter_map(|(r, src)| {
                let base = self.model.fs.get(r)?.snaps.last()?.0.clone();
                let sf = self.model.fs.get(src)?;
                let bi = sf.snaps.iter().position(|(s, _)| *s == base)?;
                let next = sf.snaps.get(bi + 1)?.0.clone();
                Some((r.clone(), src.clone(), base, next))
            })
            .collect();
        if !incr.is_empty() && self.rng.chance(50) {
            let (r, src, base, next) = self.rng.pick(&incr);
            return self.receive_incremental(&r, &src, &base, &next);
        }
        if self.model.fs.len() >= MAX_DATASETS {
            return Ok(());
        }
        let Some((name, snap, objs)) = self.pick_snapshot() else {
            return Ok(());
        };
        let full = format!("{name}@{snap}");
        let mut buf = Vec::new();
        let r = self.store.send(&full, None, &mut buf, &mut |_| {});
        if self.check(&format!("send {full}"), r)?.is_none() {
            return Ok(());
        }
        self.stats.sends += 1;
        let target = format!("tank/{}", self.new_name("r"));
        if self.rng.chance(20) {
            let cut = self.rng.below(buf.len() as u64) as usize;
            let synced = self.store.synced_txg();
            if self
                .store
                .receive(&target, &mut &buf[..cut], false, &mut |_| {})
                .is_ok()
            {
                return Err(format!(
                    "receive of {full} cut at {cut} of {} bytes succeeded",
                    buf.len()
                ));
            }
            self.stats.cut_streams += 1;
            if self.trace {
                eprintln!(
                    "  receive {full} into {target} cut at {cut} of {}",
                    buf.len()
                );
            }
            if self.devs[0].is_cut() {
                return Ok(());
            }
            // Nothing may be left.
            self.committed_since(synced);
            return self.check_catalog("after a cut stream");
        }
        let r = self
            .store
            .receive(&target, &mut &buf[..], false, &mut |_| {});
        self.check(&format!("receive {full} into {target}"), r)?;
        self.pinned.insert(full);
        self.recv_src.insert(target.clone(), name);
        self.model.fs.insert(
            target,
            Fs {
                objs: objs.clone(),
                snaps: vec![(snap, objs)],
            },
        );
        self.committed();
        Ok(())
    }

    fn receive_incremental(&mut self, r: &str, src: &str, base: &str, next: &str) -> R<()> {
        let full = format!("{src}@{next}");
        let mut buf = Vec::new();
        let sent = self
            .store
            .send(&full, Some(&format!("@{base}")), &mut buf, &mut |_| {});
        if self
            .check(&format!("send -i @{base} {full}"), sent)?
            .is_none()
        {
            return Ok(());
        }
        self.stats.sends += 1;
        let fs = &self.model.fs[r];
        let changed = fs.snaps.last().map(|(_, o)| o) != Some(&fs.objs) || self.touched.contains(r);
        if !changed && self.rng.chance(25) {
            // A cut incremental stream onto an existing dataset leaves it as it was.
            let cut = self.rng.below(buf.len() as u64) as usize;
            let synced = self.store.synced_txg();
            if self
                .store
                .receive(r, &mut &buf[..cut], false, &mut |_| {})
                .is_ok()
            {
                return Err(format!(
                    "incremental receive into {r} cut at {cut} succeeded"
                ));
            }
            self.stats.cut_streams += 1;
            if self.devs[0].is_cut() {
                return Ok(());
            }
            self.committed_since(synced);
            return self.check_fs(r, "after a cut incremental stream");
        }
        let objs = self.model.fs[src]
            .snaps
            .iter()
            .find(|(s, _)| s == next)
            .unwrap()
            .1
            .clone();
        let mut pre = self.model.fs[r].objs.clone();
        if changed {
            // A forced receive first rolls the target back to the base (a
            // state a power cut may leave).
            let base_objs = self.model.fs[r].snaps.last().unwrap().1.clone();
            self.model.fs.get_mut(r).unwrap().objs = base_objs.clone();
            self.note_change(r, pre, false);
            pre = base_objs;
        }
        let res = self.store.receive(r, &mut &buf[..], changed, &mut |_| {});
        self.check(&format!("receive -i {full} into {r}"), res)?;
        let fs = self.model.fs.get_mut(r).unwrap();
        fs.objs = objs.clone();
        fs.snaps.push((next.to_string(), objs));
        self.pinned.insert(full);
        self.note_change(r, pre, false);
        self.touched.remove(r);
        self.committed();
        Ok(())
    }

    // ------------------------------------------------------ export, import, cuts

    fn export_import(&mut self) -> R<()> {
        self.check("export", self.store.export())?;
        if self.devs[0].is_cut() {
            return Ok(());
        }
        self.export_imported()
    }

    /// Import after a clean export: every device back, the model durable.
    fn export_imported(&mut self) -> R<()> {
        self.retire_store();
        self.store = Store::import_devices(self.with_cache(&self.devs), self.layout.opts())
            .map_err(err("import"))?;
        self.stats.exports += 1;
        self.mark_durable();
        self.full_check("after export and import")
    }

    /// Cut the power at one of the next device writes.
    fn arm_cut(&mut self) -> R<()> {
        if self.cut_armed == 0 {
            let n = self.devs[0].writes_issued() + self.rng.below(400);
            self.devs[0].cut_power_at_write(n);
            self.cut_armed = 1;
        }
        Ok(())
    }

    /// After a power cut: build the devices as they came back (each unflushed
    /// write kept or lost at random, the cut one torn; sometimes the log device
    /// does not come back), import, and check that the pool holds a state the
    /// model allows.
    fn recover(&mut self) -> R<()> {
        self.stats.power_cuts += 1;
        self.cut_armed = 0;
        // The process died: its queued background reads with it.
        self.io.discard();
        let power = Power::new();
        let mut devs = Vec::new();
        for d in &self.devs {
            let rng = &mut self.rng;
            let img = d.crash_image(|| rng.chance(50));
            let name = d.path().to_string_lossy();
            let name = name.strip_prefix("sim:").unwrap_or(&name);
            devs.push(SimDevice::on_power(name, img, power.clone()));
        }
        // The log device is the last one while present.
        let log_lost = self.devs.len() > self.layout.width && self.rng.chance(25);
        if log_lost {
            devs.pop();
            self.stats.log_losses += 1;
            if self.trace {
                eprintln!("  the log device is lost");
            }
        }
        self.devs = devs;
        // A replacement cut before its labels were durable left a blank
        // device: the pool does not know it (nor would an import scan take
        // it), so it stays out and is replaced again once imported.
        let unlabeled: Vec<usize> = (0..self.layout.width)
            .filter(|i| cachalot_pool::read_label(&self.devs[*i]).is_none())
            .collect();
        let present: Vec<SimDevice> = (0..self.devs.len())
            .filter(|i| !unlabeled.contains(i))
            .map(|i| self.devs[i].clone())
            .collect();
        self.retire_store();
        self.cache_dev = self.cache_dev.as_ref().map(|c| {
            let rng = &mut self.rng;
            SimDevice::on_power("cache", c.crash_image(|| rng.chance(50)), power.clone())
        });
        self.store = Store::import_devices(self.with_cache(&present), self.layout.opts())
            .map_err(err("import after a power cut"))?;
        let got = self.store_catalog()?;
        // The catalog is the committed one, or the one the interrupted
        // operation was committing; in the second case that commit landed and
        // holds every dataset exactly as the model has it.
        let landed = got != self.durable.catalog();
        let base = if got == self.model.catalog() {
            self.model.clone()
        } else if !landed {
            self.durable.clone()
        } else {
            return Err(format!(
                "after a power cut the catalog is {got:?}; expected the committed {:?} or the interrupted {:?}",
                self.durable.catalog(),
                self.model.catalog()
            ));
        };
        let mut recovered = base.clone();
        for (name, fs) in recovered.fs.iter_mut() {
            let ds = self.store.dataset(name).map_err(err("dataset"))?;
            let content = contents(&ds).map_err(err(&format!("read {name}")))?;
            // Any state since the last acknowledged fsync or commit (the intent
            // log replays a prefix of its records), or the latest one.
            let mut allowed: Vec<&Objs> = vec![];
            match self.hist.get(name) {
                // The fsyncs since the commit were acknowledged from the log.
                Some((h, _)) if !landed && log_lost => allowed.extend(h.iter()),
                Some((h, acked)) if !landed => allowed.extend(h[*acked..].iter()),
                _ => {}
            }
            if let Some(m) = self.model.fs.get(name) {
                allowed.push(&m.objs);
            }
            if !allowed.iter().any(|a| **a == content) {
                let snaps: Vec<String> = fs
                    .snaps
                    .iter()
                    .map(|(n, o)| format!("@{n} {}", shape(o)))
                    .collect();
                return Err(format!(
                    "after a power cut {name} holds {}, a state it never acknowledged passing through; allowed: {}; snapshots: {}",
                    shape(&content),
                    allowed.iter().map(|a| shape(a)).collect::<Vec<_>>().join(" | "),
                    snaps.join(" ")
                ));
            }
            fs.objs = content;
        }
        self.model = recovered;
        self.pinned.retain(|full| {
            let (fs, s) = full.split_once('@').unwrap();
            self.model
                .fs
                .get(fs)
                .is_some_and(|f| f.snaps.iter().any(|(n, _)| n == s))
        });
        self.recv_src.retain(|r, _| self.model.fs.contains_key(r));
        self.mark_durable();
        self.full_check("after a power cut")?;
        match unlabeled[..] {
            [] => self.check_resilvered(),
            [slot] if self.resilvering == Some(slot) => self.replace_again(slot),
            _ => Err(format!(
                "after a power cut devices {unlabeled:?} have no label (replacing {:?})",
                self.resilvering
            )),
        }
    }

    // ------------------------------------------------------------------- checks

    fn store_catalog(&self) -> R<Vec<String>> {
        let mut v: Vec<String> = self
            .store
            .list(None, true)
            .map_err(err("list"))?
            .into_iter()
            .map(|d| d.name)
            .collect();
        v.extend(
            self.store
                .list_snapshots(None)
                .map_err(err("list snapshots"))?
                .into_iter()
                .map(|s| s.name),
        );
        v.sort();
        Ok(v)
    }

    fn check_catalog(&self, ctx: &str) -> R<()> {
        let got = self.store_catalog()?;
        if got != self.model.catalog() {
            return Err(format!(
                "{ctx}: the store lists {got:?}, the model {:?}",
                self.model.catalog()
            ));
        }
        Ok(())
    }

    fn check_fs(&self, name: &str, ctx: &str) -> R<()> {
        let fs = &self.model.fs[name];
        let ds = self.store.dataset(name).map_err(err("dataset"))?;
        if contents(&ds).map_err(err(name))? != fs.objs {
            return Err(format!("{ctx}: {name} differs from the model"));
        }
        for (s, objs) in &fs.snaps {
            let full = format!("{name}@{s}");
            let ds = self.store.snapshot_dataset(&full).map_err(err(&full))?;
            if contents(&ds).map_err(err(&full))? != *objs {
                return Err(format!("{ctx}: {full} differs from the model"));
            }
        }
        Ok(())
    }

    /// Every dataset and snapshot against the model, and the store's invariants.
    fn full_check(&mut self, ctx: &str) -> R<()> {
        self.check_catalog(ctx)?;
        for name in self.heads() {
            self.check_fs(&name, ctx)?;
        }
        self.store.verify().map_err(err(ctx))?;
        self.stats.full_checks += 1;
        Ok(())
    }
}

/// Objects and sizes, with a digest of the bytes (for messages).
fn shape(o: &Objs) -> String {
    let mut h = blake3::Hasher::new();
    let mut v = Vec::new();
    for (id, d) in o {
        h.update(d);
        v.push(format!("{id}:{}", d.len()));
    }
    format!("{{{}}} {}", v.join(","), &h.finalize().to_hex()[..8])
}

/// Bytes per read when `contents` reads an object: not a multiple of either
/// record size, so the reads of one object form a sequential stream that
/// read-ahead follows, with reads inside, across and ending mid-record.
const CONTENTS_CHUNK: u64 = 24 << 10;

/// Every object of a dataset with its whole content, read front to back.
fn contents(ds: &cachalot_datasets::Dataset) -> cachalot_datasets::Result<Objs> {
    let mut m = Objs::new();
    for id in ds.list_objects()? {
        let size = ds.object_size(id)?;
        let mut data = Vec::with_capacity(size as usize);
        for off in (0..size).step_by(CONTENTS_CHUNK as usize) {
            data.extend(ds.read(id, off, CONTENTS_CHUNK as usize)?);
        }
        m.insert(id, data);
    }
    Ok(m)
}
