//! Crash harness: writer workloads cut by simulated power loss at random device
//! writes (unflushed writes kept or dropped at random, the cut write torn). After
//! each cut the pool must import, equal a committed txg no older than the last
//! acknowledged commit, and scrub clean. Single devices, mirrors and raidz2
//! (whose devices share one power supply, so a cut hits them at the same moment,
//! in the middle of a stripe's columns or its parity).

mod common;
use cachalot_datasets::{DatasetKind, Store};
use cachalot_pool::{BlockDevice, Power, SimDevice, VdevKind};
use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const DEV_SIZE: u64 = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    Single,
    Mirror,
    Raidz2,
}

impl Layout {
    fn devices(self) -> Vec<SimDevice> {
        match self {
            Layout::Single => sim_devices(1, DEV_SIZE),
            Layout::Mirror => sim_devices(2, DEV_SIZE),
            Layout::Raidz2 => {
                let power = Power::new();
                (0..5)
                    .map(|i| {
                        let img = vec![0; DEV_SIZE as usize];
                        SimDevice::on_power(&format!("r{i}"), img, power.clone())
                    })
                    .collect()
            }
        }
    }

    fn create(self, devs: &[SimDevice]) -> std::sync::Arc<Store> {
        match self {
            Layout::Single | Layout::Mirror => Store::create_on_devices(
                "tank",
                as_dyn(devs),
                self == Layout::Mirror,
                manual_opts(),
            ),
            Layout::Raidz2 => {
                Store::create_on_group("tank", as_dyn(devs), VdevKind::Raidz2, manual_opts())
            }
        }
        .unwrap()
    }
}

struct Run {
    /// Model after each committed txg.
    by_txg: BTreeMap<u64, Model>,
    /// Last txg whose commit returned while the power was still on.
    acked: u64,
    /// Device writes of the workload itself (after the pool's creation): the
    /// range cut points are drawn from.
    writes: u64,
    /// The cut landed inside the workload (not a clean power-off after it).
    cut_reached: bool,
}

/// Run a deterministic workload of `txgs` commits; the devices are cut at `cut`
/// (a device write number) if it is reached.
fn workload(seed: u64, layout: Layout, devs: &[SimDevice], txgs: usize, cut: Option<u64>) -> Run {
    let mut rng = Rng(seed);
    let store = layout.create(devs);
    let base = devs[0].writes_issued();
    if let Some(c) = cut {
        for d in devs {
            d.cut_power_at_write(base + c);
        }
    }
    let mut model: Model = BTreeMap::from([("tank".to_string(), BTreeMap::new())]);
    let mut run = Run {
        by_txg: BTreeMap::new(),
        acked: 0,
        writes: 0,
        cut_reached: false,
    };
    run.by_txg.insert(store.synced_txg(), model.clone());
    run.acked = store.synced_txg();
    for t in 0..txgs {
        if t % 3 == 1 {
            let name = format!("tank/d{t}");
            // `create` commits its own txg before it returns: the model of that
            // txg is the one with the new dataset, and a cut may land in it.
            let mut with_new = model.clone();
            with_new.insert(name.clone(), BTreeMap::new());
            let target = store.open_txg();
            run.by_txg.insert(target, with_new.clone());
            match store.create_dataset(
                &name,
                DatasetKind::Filesystem,
                None,
                &[("recordsize".into(), "16K".into())],
                false,
            ) {
                Ok(()) => {}
                Err(_) if devs[0].is_cut() => break,
                Err(e) => panic!("seed {seed}: create failed without a power cut: {e}"),
            }
            if devs[0].is_cut() {
                break;
            }
            model = with_new;
            run.acked = store.synced_txg();
        }
        if t % 5 == 4 && model.len() > 2 {
            let victim = model.keys().nth(1).unwrap().clone();
            store.destroy_dataset(&victim, false).unwrap();
            model.remove(&victim);
        }
        for _ in 0..1 + rng.below(6) {
            random_op(&mut rng, &store, &mut model, 300_000);
        }
        let target = store.open_txg();
        run.by_txg.insert(target, model.clone());
        match store.sync() {
            Ok(txg) => assert_eq!(txg, target),
            // The machine died during this commit: nothing after it runs.
            Err(_) if devs[0].is_cut() => break,
            Err(e) => panic!("seed {seed}: sync failed without a power cut: {e}"),
        }
        if devs[0].is_cut() {
            break;
        }
        run.acked = target;
    }
    run.writes = devs[0].writes_issued() - base;
    run.cut_reached = devs[0].is_cut();
    // Power off now if the cut was not reached, so nothing later lands.
    for d in devs {
        if !d.is_cut() {
            d.cut_power_at_write(d.writes_issued());
        }
    }
    drop(store);
    run
}

fn check_cut(seed: u64, layout: Layout, cut: u64, txgs: usize) {
    let devs = layout.devices();
    let run = workload(seed, layout, &devs, txgs, Some(cut));
    let ctx = format!("seed {seed} {layout:?} cut {cut}");
    // A cut past the workload's end would test only a clean power-off.
    assert!(
        run.cut_reached,
        "{ctx}: the cut is not within the workload's {} writes",
        run.writes
    );
    let mut rng = Rng(seed ^ cut);
    let images: Vec<SimDevice> = devs
        .iter()
        .enumerate()
        .map(|(i, d)| SimDevice::from_image(&format!("img{i}"), d.crash_image(|| rng.chance(50))))
        .collect();
    let store = Store::import_devices(
        images
            .iter()
            .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
            .collect(),
        manual_opts(),
    )
    .unwrap_or_else(|e| panic!("{ctx}: import failed: {e}"));
    let txg = store.synced_txg();
    assert!(
        txg >= run.acked,
        "{ctx}: imported txg {txg} older than acknowledged {}",
        run.acked
    );
    let model = run
        .by_txg
        .get(&txg)
        .unwrap_or_else(|| panic!("{ctx}: imported txg {txg} was never committed"));
    assert_matches(&store, model, &ctx);
    store.scrub_start().unwrap();
    let s = store.scrub_wait();
    assert_eq!(
        (s.errors, s.unrecoverable),
        (0, 0),
        "{ctx}: scrub found errors: {s:?}"
    );
    // The imported pool keeps working: one more commit, then export.
    let ds = store.dataset("tank").unwrap();
    let id = ds.create_object().unwrap();
    ds.write(id, 0, b"after the crash").unwrap();
    store.sync().unwrap();
    store.export().unwrap();
}

/// Device writes of the workload alone (not the pool's creation before it).
fn total_writes(seed: u64, layout: Layout, txgs: usize) -> u64 {
    workload(seed, layout, &layout.devices(), txgs, None).writes
}

fn cut_points(seed: u64, layout: Layout, cuts: u64, txgs: usize) {
    let total = total_writes(seed, layout, txgs);
    assert!(total > 50, "workload too small: {total} writes");
    let mut rng = Rng(seed * 31 + 7);
    for _ in 0..cuts {
        // Counted from the workload's first write (see `workload`).
        let cut = rng.below(total);
        check_cut(seed, layout, cut, txgs);
    }
}

#[test]
fn power_loss_single_device_150_cuts() {
    cut_points(1, Layout::Single, 75, 12);
    cut_points(2, Layout::Single, 75, 12);
}

#[test]
fn power_loss_mirror_60_cuts() {
    cut_points(3, Layout::Mirror, 60, 10);
}

#[test]
fn power_loss_raidz2_40_cuts() {
    cut_points(4, Layout::Raidz2, 40, 8);
}
