//! Crash harness: writer workloads cut by simulated power loss at random device
//! writes (unflushed writes kept or dropped at random, the cut write torn). After
//! each cut the pool must import, equal a committed txg no older than the last
//! acknowledged commit, and scrub clean.

mod common;
use cachalot_datasets::{DatasetKind, Store};
use cachalot_pool::{BlockDevice, SimDevice};
use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const DEV_SIZE: u64 = 64 << 20;

struct Run {
    /// Model after each committed txg.
    by_txg: BTreeMap<u64, Model>,
    /// Last txg whose commit returned while the power was still on.
    acked: u64,
}

/// Run a deterministic workload of `txgs` commits; the devices are cut at `cut`
/// (a device write number) if it is reached.
fn workload(seed: u64, devs: &[SimDevice], txgs: usize, cut: Option<u64>) -> Run {
    let mut rng = Rng(seed);
    let mirror = devs.len() > 1;
    let store = Store::create_on_devices("tank", as_dyn(devs), mirror, manual_opts()).unwrap();
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
    // Power off now if the cut was not reached, so nothing later lands.
    for d in devs {
        if !d.is_cut() {
            d.cut_power_at_write(d.writes_issued());
        }
    }
    drop(store);
    run
}

fn check_cut(seed: u64, mirror: bool, cut: u64, txgs: usize) {
    let n = if mirror { 2 } else { 1 };
    let devs = sim_devices(n, DEV_SIZE);
    let run = workload(seed, &devs, txgs, Some(cut));
    let mut rng = Rng(seed ^ cut);
    let images: Vec<SimDevice> = devs
        .iter()
        .enumerate()
        .map(|(i, d)| SimDevice::from_image(&format!("img{i}"), d.crash_image(|| rng.chance(50))))
        .collect();
    let ctx = format!("seed {seed} mirror {mirror} cut {cut}");
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

fn total_writes(seed: u64, mirror: bool, txgs: usize) -> u64 {
    let devs = sim_devices(if mirror { 2 } else { 1 }, DEV_SIZE);
    let probe = SimDevice::new("probe", 1);
    drop(probe);
    let store_devs = devs.clone();
    let _ = workload(seed, &store_devs, txgs, None);
    devs[0].writes_issued()
}

fn cut_points(seed: u64, mirror: bool, cuts: u64, txgs: usize) {
    let total = total_writes(seed, mirror, txgs);
    assert!(total > 50, "workload too small: {total} writes");
    let mut rng = Rng(seed * 31 + 7);
    for _ in 0..cuts {
        // Skip the writes of pool creation (txg 1) which precede the workload.
        let cut = rng.below(total);
        check_cut(seed, mirror, cut, txgs);
    }
}

#[test]
fn power_loss_single_device_150_cuts() {
    cut_points(1, false, 75, 12);
    cut_points(2, false, 75, 12);
}

#[test]
fn power_loss_mirror_60_cuts() {
    cut_points(3, true, 60, 10);
}
