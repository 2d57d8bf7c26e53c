//! Crash consistency of namespace changes: a random workload of creates, renames,
//! links, unlinks and writes, cut by simulated power loss at random device
//! writes. After each cut the filesystem must mount, pass fsck (every rename and
//! create is all-or-nothing), and equal the tree of a committed txg no older than
//! the last acknowledged one.

mod common;
use cachalot_datasets::Store;
use cachalot_pool::SimDevice;
use cachalot_posix::{Fs, RenameMode};
use common::*;
use std::collections::BTreeMap;

const DEV_SIZE: u64 = 128 << 20;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Directories and files known to exist (paths are re-resolved; ops may fail).
fn random_op(rng: &mut Rng, fs: &Fs) {
    let dirs = ["", "a", "a/b", "c"];
    let dir = resolve(fs, dirs[rng.below(4) as usize]).unwrap_or(fs.root());
    let other = resolve(fs, dirs[rng.below(4) as usize]).unwrap_or(fs.root());
    let n1 = format!("n{}", rng.below(12));
    let n2 = format!("n{}", rng.below(12));
    match rng.below(10) {
        0 | 1 => {
            if let Ok(a) = fs.mknod(dir, n1.as_bytes(), libc::S_IFREG | 0o644, 0, ROOT) {
                let len = rng.below(40_000) as usize;
                let data: Vec<u8> = (0..len).map(|i| (i as u64 * 7 + a.ino) as u8).collect();
                fs.write(a.ino, 0, &data, false).unwrap();
            }
        }
        2 => {
            let _ = fs.mkdir(dir, n1.as_bytes(), 0o755, ROOT);
        }
        3 | 4 => {
            let mode = [
                RenameMode::Replace,
                RenameMode::NoReplace,
                RenameMode::Exchange,
            ][rng.below(3) as usize];
            let _ = fs.rename(dir, n1.as_bytes(), other, n2.as_bytes(), mode);
        }
        5 => {
            if let Ok(a) = fs.lookup(dir, n1.as_bytes()) {
                let _ = fs.link(a.ino, other, n2.as_bytes());
            }
        }
        6 => {
            let _ = fs.unlink(dir, n1.as_bytes());
        }
        7 => {
            let _ = fs.rmdir(dir, n1.as_bytes());
        }
        _ => {
            if let Ok(a) = fs.lookup(dir, n1.as_bytes()) {
                let off = rng.below(100_000);
                let _ = fs.write(a.ino, off, b"overwritten", false);
            }
        }
    }
}

struct Run {
    by_txg: BTreeMap<u64, BTreeMap<String, String>>,
    acked: u64,
    /// Device writes of the measured namespace changes (not the setup before
    /// them): the range cut points are drawn from.
    writes: u64,
    /// The cut landed inside the changes (not a clean power-off after them).
    cut_reached: bool,
}

fn workload(seed: u64, dev: &SimDevice, txgs: usize, cut: Option<u64>) -> Run {
    let mut rng = Rng(seed);
    let store = Store::create_on_devices(
        "tank",
        as_dyn(std::slice::from_ref(dev)),
        false,
        manual_opts(),
    )
    .unwrap();
    store
        .create_dataset(
            "tank/fs",
            cachalot_datasets::DatasetKind::Filesystem,
            None,
            &[("recordsize".into(), "16K".into())],
            false,
        )
        .unwrap();
    let fs = mount(&store);
    for d in ["a", "c"] {
        fs.mkdir(fs.root(), d.as_bytes(), 0o755, ROOT).unwrap();
    }
    fs.mkdir(resolve(&fs, "a").unwrap(), b"b", 0o755, ROOT)
        .unwrap();
    store.sync().unwrap();
    let mut run = Run {
        by_txg: BTreeMap::new(),
        acked: store.synced_txg(),
        writes: 0,
        cut_reached: false,
    };
    run.by_txg.insert(store.synced_txg(), walk(&fs));
    let base = dev.writes_issued();
    if let Some(c) = cut {
        dev.cut_power_at_write(base + c);
    }
    for _ in 0..txgs {
        for _ in 0..1 + rng.below(8) {
            random_op(&mut rng, &fs);
        }
        let target = store.open_txg();
        run.by_txg.insert(target, walk(&fs));
        match store.sync() {
            Ok(_) => {}
            Err(_) if dev.is_cut() => break,
            Err(e) => panic!("seed {seed}: sync failed without a cut: {e}"),
        }
        if dev.is_cut() {
            break;
        }
        run.acked = target;
    }
    run.writes = dev.writes_issued() - base;
    run.cut_reached = dev.is_cut();
    if !dev.is_cut() {
        dev.cut_power_at_write(dev.writes_issued());
    }
    run
}

fn check(seed: u64, cut: u64, txgs: usize) {
    let dev = SimDevice::new("d0", DEV_SIZE);
    let run = workload(seed, &dev, txgs, Some(cut));
    let ctx = format!("seed {seed} cut {cut}");
    // A cut past the changes' end would test only a clean power-off.
    assert!(
        run.cut_reached,
        "{ctx}: the cut is not within the workload's {} writes",
        run.writes
    );
    let mut rng = Rng(seed ^ cut);
    let img = SimDevice::from_image("img", dev.crash_image(|| rng.below(2) == 0));
    let store = Store::import_devices(as_dyn(&[img]), manual_opts())
        .unwrap_or_else(|e| panic!("{ctx}: import: {e}"));
    let txg = store.synced_txg();
    assert!(
        txg >= run.acked,
        "{ctx}: txg {txg} older than acked {}",
        run.acked
    );
    let fs = mount(&store);
    fsck(&fs);
    let want = run
        .by_txg
        .get(&txg)
        .unwrap_or_else(|| panic!("{ctx}: txg {txg} never committed"));
    assert_eq!(&walk(&fs), want, "{ctx}: tree differs from txg {txg}");
}

/// Two seeds: 100 cuts in all.
const CUTS_PER_SEED: usize = 50;

#[test]
fn namespace_changes_are_atomic_across_power_loss() {
    for seed in [11u64, 12] {
        let probe = SimDevice::new("probe", DEV_SIZE);
        let total = workload(seed, &probe, 25, None).writes;
        let mut rng = Rng(seed * 7);
        for _ in 0..CUTS_PER_SEED {
            check(seed, rng.below(total), 25);
        }
    }
}
