//! Model tests: random writes, truncates, deletes and creates over many objects in
//! several datasets, compared with an in-memory model after every commit, with
//! clean export/import and crashes (the machine stops; only flushed writes survive)
//! interleaved.

mod common;
use cachalot_datasets::{DatasetKind, Store};
use cachalot_pool::SimDevice;
use common::*;
use std::collections::BTreeMap;

fn run_model(seed: u64, mirror: bool, rounds: usize) {
    let mut rng = Rng(seed);
    let mut devs = sim_devices(if mirror { 2 } else { 1 }, 96 << 20);
    let mut store = Store::create_on_devices("tank", as_dyn(&devs), mirror, manual_opts()).unwrap();
    let mut model: Model = BTreeMap::from([("tank".to_string(), BTreeMap::new())]);
    for (name, rs) in [
        ("tank/data", "16K"),
        ("tank/logs", "128K"),
        ("tank/tiny", "512"),
    ] {
        store
            .create_dataset(
                name,
                DatasetKind::Filesystem,
                None,
                &[("recordsize".into(), rs.into())],
                false,
            )
            .unwrap();
        model.insert(name.into(), BTreeMap::new());
    }
    let mut committed = model.clone();
    for round in 0..rounds {
        let ctx = format!("seed {seed} round {round}");
        for _ in 0..rng.below(25) {
            random_op(&mut rng, &store, &mut model, 600_000);
        }
        match rng.below(10) {
            0 => {
                // Clean export and import: everything, including unsynced changes, survives.
                store.export().unwrap();
                store = Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
                committed = model.clone();
                assert_matches(&store, &model, &format!("{ctx} after export/import"));
            }
            1 => {
                // Crash: the machine stops; unsynced changes are lost.
                devs = devs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        SimDevice::from_image(&format!("r{round}d{i}"), d.crash_image(|| false))
                    })
                    .collect();
                drop(store);
                store = Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
                model = committed.clone();
                assert_matches(&store, &model, &format!("{ctx} after crash"));
            }
            _ => {
                store.sync().unwrap();
                committed = model.clone();
                assert_matches(&store, &model, &ctx);
            }
        }
    }
    store.scrub_start().unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.errors, s.unrecoverable), (0, 0), "seed {seed}: {s:?}");
    check_accounting(&store, seed);
}

/// Exact accounting: each dataset's `referenced` equals the bytes of the blocks its
/// tree reaches, and the pool's allocated space equals every reachable block plus
/// frees still deferred (no leak, no double count): `Store::verify_blocks`.
fn check_accounting(store: &Store, seed: u64) {
    if let Err(e) = store.verify_blocks() {
        panic!("seed {seed}: {e}");
    }
}

#[test]
fn model_single_device() {
    for seed in 10..14 {
        run_model(seed, false, 40);
    }
}

#[test]
fn model_mirror() {
    for seed in 20..22 {
        run_model(seed, true, 30);
    }
}
