//! Snapshot model tests: writes, snapshots, snapshot destroys, rollbacks and clones
//! interleaved at random, compared with a model that keeps full copies; space is
//! checked exactly after every step (allocated == every distinct block reachable
//! from heads, snapshots, the MOS and the space maps, plus deferred frees), and
//! export/import and crashes are interleaved.

mod common;
use cachalot_datasets::{DatasetKind, Store, StoreError};
use cachalot_pool::SimDevice;
use common::*;
use std::collections::BTreeMap;

/// Exact space: every allocated byte is reachable exactly once, or deferred, and
/// every dataset's referenced is its tree (`Store::verify_blocks`).
fn check_space(store: &Store, ctx: &str) {
    if let Err(e) = store.verify_blocks() {
        panic!("{ctx}: {e}");
    }
}

fn run(seed: u64, rounds: usize) {
    let mut rng = Rng(seed);
    let mut devs = sim_devices(1, 128 << 20);
    let mut store = Store::create_on_devices("tank", as_dyn(&devs), false, manual_opts()).unwrap();
    store
        .create_dataset(
            "tank/fs",
            DatasetKind::Filesystem,
            None,
            &[("recordsize".into(), "16K".into())],
            false,
        )
        .unwrap();
    let mut model: Model = BTreeMap::from([
        ("tank".to_string(), BTreeMap::new()),
        ("tank/fs".to_string(), BTreeMap::new()),
    ]);
    // Snapshot name -> content at the time it was taken.
    let mut snaps: BTreeMap<String, BTreeMap<u64, Vec<u8>>> = BTreeMap::new();
    let mut next_snap = 0;
    let mut committed = (model.clone(), snaps.clone());
    for round in 0..rounds {
        let ctx = format!("seed {seed} round {round}");
        for _ in 0..1 + rng.below(8) {
            random_op(&mut rng, &store, &mut model, 300_000);
        }
        let heads: Vec<String> = model.keys().cloned().collect();
        match rng.below(12) {
            0..=3 => {
                // Atomic snapshot of one or two datasets.
                let mut names = vec![];
                for h in heads.iter().filter(|_| rng.chance(60)) {
                    names.push(format!("{h}@s{next_snap}"));
                }
                if names.is_empty() {
                    names.push(format!("{}@s{next_snap}", heads[0]));
                }
                next_snap += 1;
                store.snapshot(&names).unwrap();
                for n in &names {
                    let fs = n.split('@').next().unwrap();
                    snaps.insert(n.clone(), model[fs].clone());
                }
            }
            4 | 5 if !snaps.is_empty() => {
                let victim = snaps
                    .keys()
                    .nth(rng.below(snaps.len() as u64) as usize)
                    .unwrap()
                    .clone();
                match store.destroy_snapshot(&victim) {
                    Ok(()) => {
                        snaps.remove(&victim);
                    }
                    Err(StoreError::Busy(_)) => {} // has clones
                    Err(e) => panic!("{ctx}: destroy {victim}: {e}"),
                }
            }
            6 if !snaps.is_empty() => {
                // Roll a dataset back to its newest snapshot (destroying none).
                let fs = heads[rng.below(heads.len() as u64) as usize].clone();
                let newest = snaps
                    .keys()
                    .filter(|k| k.starts_with(&format!("{fs}@")))
                    .max_by_key(|k| k[k.find('@').unwrap() + 2..].parse::<u64>().unwrap())
                    .cloned();
                if let Some(s) = newest {
                    store.rollback(&s, false).unwrap();
                    model.insert(fs.clone(), snaps[&s].clone());
                }
            }
            7 if !snaps.is_empty() && model.len() < 6 => {
                let src = snaps
                    .keys()
                    .nth(rng.below(snaps.len() as u64) as usize)
                    .unwrap()
                    .clone();
                let name = format!("tank/clone{round}");
                store.clone_snapshot(&src, &name, &[]).unwrap();
                model.insert(name, snaps[&src].clone());
            }
            8 => {
                store.export().unwrap();
                store = Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
            }
            9 => {
                devs = devs
                    .iter()
                    .map(|d| SimDevice::from_image("r", d.crash_image(|| false)))
                    .collect();
                drop(store);
                store = Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
                (model, snaps) = committed.clone();
            }
            _ => {}
        }
        store.sync().unwrap();
        committed = (model.clone(), snaps.clone());
        assert_matches(&store, &model, &ctx);
        for (name, content) in &snaps {
            assert!(
                snap_content(&store, name) == *content,
                "{ctx}: snapshot {name} changed"
            );
        }
        let listed: Vec<String> = store
            .list_snapshots(None)
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        let mut want: Vec<String> = snaps.keys().cloned().collect();
        let mut got = listed.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{ctx}: snapshot list");
        check_space(&store, &ctx);
    }
}

#[test]
fn snapshot_model_single_device() {
    for seed in 1..4 {
        run(seed, 40);
    }
}

#[test]
fn snapshot_is_instant_and_clone_costs_nothing() {
    let devs = sim_devices(1, 128 << 20);
    let store = Store::create_on_devices("tank", as_dyn(&devs), false, manual_opts()).unwrap();
    create_uncompressed_fs(&store, "tank/db");
    let ds = store.dataset("tank/db").unwrap();
    let id = ds.create_object().unwrap();
    ds.write(id, 0, &Rng(1).bytes(32 << 20)).unwrap();
    store.sync().unwrap();
    let before = store.pool().space().allocated;
    store.snapshot(&["tank/db@a".into()]).unwrap();
    store.clone_snapshot("tank/db@a", "tank/copy", &[]).unwrap();
    store.sync().unwrap();
    let after = store.pool().space().allocated;
    assert!(
        after - before < 1 << 20,
        "snapshot + clone cost {} bytes",
        after - before
    );
    // Overwriting half the data: the snapshot keeps the old half, used says so.
    ds.write(id, 0, &Rng(2).bytes(16 << 20)).unwrap();
    store.sync().unwrap();
    let s = &store.list_snapshots(Some("tank/db")).unwrap()[0];
    assert!(
        (16 << 20..17 << 20).contains(&s.used),
        "snapshot unique bytes {}",
        s.used
    );
    assert!(s.referenced >= 32 << 20);
    // Destroy refuses while the clone exists, then frees exactly the unique part.
    assert!(matches!(
        store.destroy_snapshot("tank/db@a"),
        Err(StoreError::Busy(_))
    ));
    store.destroy_dataset("tank/copy", false).unwrap();
    let held = store.pool().space().allocated;
    store.destroy_snapshot("tank/db@a").unwrap();
    store.sync().unwrap();
    store.sync().unwrap();
    let freed = held - store.pool().space().allocated;
    assert!(
        (16 << 20..17 << 20).contains(&freed),
        "destroy freed {freed}"
    );
    // Bad input changes nothing.
    assert!(store.snapshot(&["tank/nosuch@x".into()]).is_err());
    assert!(store.snapshot(&["tank/db@bad name".into()]).is_err());
    assert!(store.clone_snapshot("tank/db", "tank/x", &[]).is_err());
    assert!(store.rollback("tank/db@nosuch", false).is_err());
    store.snapshot(&["tank/db@b".into()]).unwrap();
    assert!(matches!(
        store.snapshot(&["tank/db@b".into()]),
        Err(StoreError::Exists(_))
    ));
    store.snapshot(&["tank/db@c".into()]).unwrap();
    assert!(
        store.rollback("tank/db@b", false).is_err(),
        "newer snapshot exists"
    );
    store.rollback("tank/db@b", true).unwrap();
    assert_eq!(store.list_snapshots(Some("tank/db")).unwrap().len(), 1);
    let snap = store.snapshot_dataset("tank/db@b").unwrap();
    assert!(snap.write(id, 0, b"x").is_err(), "snapshots are read-only");
}

#[test]
fn promote_swaps_origin_and_clone() {
    let devs = sim_devices(1, 128 << 20);
    let store = Store::create_on_devices("tank", as_dyn(&devs), false, manual_opts()).unwrap();
    store
        .create_dataset("tank/a", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    let a = store.dataset("tank/a").unwrap();
    let id = a.create_object().unwrap();
    a.write(id, 0, b"generation one").unwrap();
    store.snapshot(&["tank/a@s1".into()]).unwrap();
    a.write(id, 0, b"generation two").unwrap();
    store.snapshot(&["tank/a@s2".into()]).unwrap();
    store.clone_snapshot("tank/a@s1", "tank/b", &[]).unwrap();
    let b = store.dataset("tank/b").unwrap();
    b.write(id, 0, b"the clone's own").unwrap();
    store.sync().unwrap();
    assert!(store.promote("tank/a").is_err(), "not a clone");
    store.promote("tank/b").unwrap();
    let names: Vec<String> = store
        .list_snapshots(None)
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert!(
        names.contains(&"tank/b@s1".to_string()) && names.contains(&"tank/a@s2".to_string()),
        "{names:?}"
    );
    assert_eq!(
        store.get_props("tank/a", Some(&["origin".into()])).unwrap()[0].raw,
        "tank/b@s1"
    );
    // The old origin can now be destroyed; the promoted clone keeps its data and s1.
    store.destroy_dataset("tank/a", true).unwrap();
    store.sync().unwrap();
    store.export().unwrap();
    let store = Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
    assert_eq!(
        store.dataset("tank/b").unwrap().read(id, 0, 15).unwrap(),
        b"the clone's own"
    );
    assert_eq!(
        store
            .snapshot_dataset("tank/b@s1")
            .unwrap()
            .read(id, 0, 14)
            .unwrap(),
        b"generation one"
    );
    check_space(&store, "after promote and destroy");
    store.destroy_snapshot("tank/b@s1").unwrap();
    check_space(&store, "after destroying the moved snapshot");
}
