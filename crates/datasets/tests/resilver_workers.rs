//! The resilver with its several workers, interrupted mid-way and continued:
//! one worker's batch is held (its read of a surviving device blocks) while the
//! others finish later batches out of order; then the power is cut (or the pool
//! exported). The position the labels keep must not pass the held batch: after
//! the import the resilver continues from it, completes, a scrub finds nothing
//! to repair, and every block reads back with a surviving device missing (so
//! from what the resilver put on the new one).

mod common;
use cachalot_datasets::Store;
use cachalot_pool::{BlockDevice, Power, SimDevice, VdevKind};
use common::*;
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// 16 MiB of 4K records written while sim:d0 is offline: 4096 blocks, 64
/// batches of the resilver, far more than its workers run ahead.
const NEW: usize = 16 << 20;
/// Simulated read speed of a surviving device while the resilver runs, so it
/// lasts a few seconds: long enough for a periodic position save (every
/// second) to fall after the hold.
const READ_BYTES_PER_SEC: u64 = 4 << 20;

/// What the test steers and sees across all the devices.
#[derive(Default)]
struct Ctl {
    /// Reads of surviving devices take time (`READ_BYTES_PER_SEC`).
    paced: AtomicBool,
    /// The next read of a surviving device blocks until `release`.
    armed: AtomicBool,
    /// Set while that read waits: (device, offset).
    held: Mutex<Option<(String, u64)>>,
    released: Mutex<bool>,
    wake: Condvar,
    /// Writes to sim:d0 (the resilvering device) beyond the held offset,
    /// issued while the hold lasted: later batches finished out of order.
    writes_past_hold: AtomicU64,
    /// Writes to sim:d0 so far (to see when the workers went idle).
    target_writes: AtomicU64,
}

impl Ctl {
    fn release(&self) {
        *self.released.lock() = true;
        self.wake.notify_all();
    }
}

/// A simulated device the test can slow down and hold.
struct Watched {
    dev: SimDevice,
    ctl: Arc<Ctl>,
    /// Serialises paced reads: one request at a time, as a disk arm does.
    arm: Mutex<()>,
}

impl Watched {
    fn is_target(&self) -> bool {
        self.dev.path() == Path::new("sim:d0")
    }
}

impl BlockDevice for Watched {
    fn path(&self) -> &Path {
        self.dev.path()
    }
    fn size(&self) -> u64 {
        self.dev.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> cachalot_pool::Result<()> {
        if !self.is_target() && self.ctl.paced.load(SeqCst) {
            let _arm = self.arm.lock();
            let secs = buf.len() as f64 / READ_BYTES_PER_SEC as f64;
            std::thread::sleep(Duration::from_secs_f64(secs));
        }
        if !self.is_target() && self.ctl.armed.swap(false, SeqCst) {
            let name = self.dev.path().display().to_string();
            *self.ctl.held.lock() = Some((name, offset));
            let mut released = self.ctl.released.lock();
            while !*released {
                self.ctl.wake.wait(&mut released);
            }
        }
        self.dev.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> cachalot_pool::Result<()> {
        if self.is_target() {
            self.ctl.target_writes.fetch_add(1, SeqCst);
            let held = self.ctl.held.lock().as_ref().map(|h| h.1);
            if held.is_some_and(|h| offset > h) && !*self.ctl.released.lock() {
                self.ctl.writes_past_hold.fetch_add(1, SeqCst);
            }
        }
        self.dev.write_at(buf, offset)
    }
    fn flush(&self) -> cachalot_pool::Result<()> {
        self.dev.flush()
    }
}

fn watched(devs: &[SimDevice], ctl: &Arc<Ctl>) -> Vec<Arc<dyn BlockDevice>> {
    devs.iter()
        .map(|d| {
            Arc::new(Watched {
                dev: d.clone(),
                ctl: ctl.clone(),
                arm: Mutex::new(()),
            }) as Arc<dyn BlockDevice>
        })
        .collect()
}

/// How the resilver is interrupted.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// The power goes while the batch is held: unflushed writes may be lost.
    PowerCut,
    /// `pool export` while it is held (the held batch is let go to let the
    /// scan end; those after it were never delivered).
    Export,
}

/// A pool of `n` devices of `kind` whose sim:d0 was offline while `NEW`
/// bytes were written; the model of the object.
fn degraded_pool(kind: VdevKind, n: usize, ctl: &Arc<Ctl>) -> (Vec<SimDevice>, Arc<Store>, u64) {
    let power = Power::new();
    let devs: Vec<SimDevice> = (0..n)
        .map(|i| SimDevice::on_power(&format!("d{i}"), vec![0; 64 << 20], power.clone()))
        .collect();
    let store = Store::create_on_group("tank", watched(&devs, ctl), kind, manual_opts()).unwrap();
    create_uncompressed_fs_with(&store, "tank/d", &[("recordsize", "4K")]);
    store.sync().unwrap();
    store
        .change_devices(|p, next| p.offline_device("sim:d0", next))
        .unwrap();
    let ds = store.dataset("tank/d").unwrap();
    let id = ds.create_object().unwrap();
    ds.write(id, 0, &Rng(7).bytes(NEW)).unwrap();
    store.sync().unwrap();
    (devs, store, id)
}

/// Wait (up to 30 s) for `cond`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// On a mirror a block's copy lies at its DVA offset past the labels: the
/// position the crash left in `dev`'s labels is saved (a periodic save fell
/// before the hold) and is not past the held block, which was never rebuilt.
fn saved_position_before(dev: &SimDevice, held: &(String, u64)) {
    let label = cachalot_pool::read_label(dev).expect("a label");
    let pos = label.config.resilver_from.expect("a saved position");
    let held_dva = held.1 - cachalot_pool::label::DATA_START;
    assert!(
        pos.offset <= held_dva,
        "the saved position {pos:?} passes the held block at DVA offset {held_dva}"
    );
}

fn interrupted_and_continued(kind: VdevKind, n: usize, stop: Stop) {
    let ctl = Arc::new(Ctl::default());
    let (devs, store, id) = degraded_pool(kind, n, &ctl);
    let model = Rng(7).bytes(NEW);
    ctl.paced.store(true, SeqCst);
    store
        .change_devices(|p, next| p.online_device("sim:d0", next))
        .unwrap();
    // Past the first periodic save, hold the batch that reads next.
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(
        store.scrub_status().state,
        "scanning",
        "resilver ended early"
    );
    ctl.armed.store(true, SeqCst);
    wait_for("a read held", || ctl.held.lock().is_some());
    // The other workers go on with later batches until they are as far ahead
    // as they may run: sim:d0 then sees no more writes.
    let mut last = u64::MAX;
    wait_for("the workers idle", || {
        std::thread::sleep(Duration::from_millis(400));
        let now = ctl.target_writes.load(SeqCst);
        std::mem::replace(&mut last, now) == now
    });
    let held = ctl.held.lock().clone().unwrap();
    let past = ctl.writes_past_hold.load(SeqCst);
    assert!(past > 0, "no batch after the held one finished: {held:?}");
    assert_eq!(store.scrub_status().state, "scanning");
    let devs = match stop {
        Stop::PowerCut => {
            devs[0].power().cut_now();
            let mut rng = Rng(11);
            let images: Vec<SimDevice> = devs
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    SimDevice::from_image(&format!("d{i}"), d.crash_image(|| rng.chance(50)))
                })
                .collect();
            if kind == VdevKind::Mirror {
                saved_position_before(&images[1], &held);
            }
            ctl.release();
            store.scrub_wait();
            let _ = store.export();
            images
        }
        Stop::Export => {
            let exporting = std::thread::spawn({
                let store = store.clone();
                move || store.export()
            });
            std::thread::sleep(Duration::from_millis(300));
            ctl.release();
            exporting.join().unwrap().unwrap();
            devs
        }
    };
    drop(store);
    // Continued at import, with every worker and no pacing.
    let ctl = Arc::new(Ctl::default());
    let store = Store::import_devices(watched(&devs, &ctl), manual_opts()).unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.kind.as_str(), s.unrecoverable), ("resilver", 0), "{s:?}");
    assert!(
        s.resumed > 0 && s.resumed < s.total,
        "not resumed mid-way ({stop:?}, held {held:?}): {s:?}"
    );
    assert!(!store.pool().resilver_pending(), "{s:?}");
    // Nothing left to repair: the resumed run rebuilt every block the
    // interrupted one had not vouched for.
    store.scrub_start().unwrap();
    let s = store.scrub_wait();
    assert_eq!(
        (s.kind.as_str(), s.errors, s.repaired, s.unrecoverable),
        ("scrub", 0, 0, 0),
        "{stop:?}, held {held:?}, {past} writes past it: {s:?}"
    );
    store.export().unwrap();
    drop(store);
    // Every block from sim:d0 and the devices but sim:d1.
    let rest: Vec<SimDevice> = devs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, d)| d.clone())
        .collect();
    let store = Store::import_devices(as_dyn(&rest), manual_opts()).unwrap();
    let got = store.dataset("tank/d").unwrap().read(id, 0, NEW).unwrap();
    assert!(got == model, "{stop:?}: the object differs without sim:d1");
}

#[test]
fn mirror_resilver_cut_mid_way_resumes_clean() {
    interrupted_and_continued(VdevKind::Mirror, 2, Stop::PowerCut);
}

#[test]
fn raidz1_resilver_cut_mid_way_resumes_clean() {
    interrupted_and_continued(VdevKind::Raidz1, 3, Stop::PowerCut);
}

#[test]
fn raidz1_resilver_exported_mid_way_resumes_clean() {
    interrupted_and_continued(VdevKind::Raidz1, 3, Stop::Export);
}
