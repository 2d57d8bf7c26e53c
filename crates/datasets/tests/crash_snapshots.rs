//! Crash cuts (simulated power loss) during snapshot, snapshot destroy, clone,
//! promote, rollback and receive: the pool imports, its visible state (datasets,
//! objects, snapshots and their contents) equals a committed txg no older than the
//! last acknowledged one, a half-done receive leaves nothing visible, scrub is clean.

mod common;
use cachalot_datasets::{DatasetKind, Store};
use cachalot_pool::{BlockDevice, SimDevice};
use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;

type Snaps = BTreeMap<String, BTreeMap<u64, Vec<u8>>>;

#[derive(Clone, PartialEq, Debug)]
struct State {
    model: Model,
    snaps: Snaps,
}

struct Run {
    /// The states a txg may hold (two while an operation was in flight).
    by_txg: BTreeMap<u64, Vec<State>>,
    acked: u64,
    /// Device writes of the operations (not the setup before them): the range
    /// cut points are drawn from.
    writes: u64,
    /// The cut landed inside the operations (not a clean power-off after them).
    cut_reached: bool,
}

/// Apply `f` (an operation that commits one or more txgs): while it runs, the
/// txgs it may commit may hold the state before or after it (a receive hides its
/// half-done part); once it returned, its last txg holds the state after. False
/// once the power is cut.
fn committing(
    store: &Store,
    run: &mut Run,
    before: &State,
    after: &State,
    f: impl FnOnce() -> bool,
    dev: &SimDevice,
) -> bool {
    let start = store.open_txg();
    for t in start..start + 4 {
        run.by_txg.insert(t, vec![before.clone(), after.clone()]);
    }
    let ok = f();
    if !ok || dev.is_cut() {
        return false;
    }
    let end = store.synced_txg();
    run.by_txg.retain(|k, _| *k < end);
    run.by_txg.insert(end, vec![after.clone()]);
    run.acked = end;
    true
}

fn workload(seed: u64, dev: &SimDevice, steps: usize, cut: Option<u64>) -> Run {
    let mut rng = Rng(seed);
    let store = Store::create_on_devices(
        "tank",
        vec![Arc::new(dev.clone()) as Arc<dyn BlockDevice>],
        false,
        manual_opts(),
    )
    .unwrap();
    store
        .create_dataset("tank/a", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    store.sync().unwrap();
    let base = dev.writes_issued();
    if let Some(c) = cut {
        dev.cut_power_at_write(base + c);
    }
    let mut st = State {
        model: BTreeMap::from([
            ("tank".to_string(), BTreeMap::new()),
            ("tank/a".to_string(), BTreeMap::new()),
        ]),
        snaps: BTreeMap::new(),
    };
    let mut run = Run {
        by_txg: BTreeMap::from([(store.synced_txg(), vec![st.clone()])]),
        acked: store.synced_txg(),
        writes: 0,
        cut_reached: false,
    };
    let mut n = 0;
    for t in 0..steps {
        for _ in 0..1 + rng.below(4) {
            random_op(&mut rng, &store, &mut st.model, 200_000);
        }
        let before = st.clone();
        let heads: Vec<String> = st
            .model
            .keys()
            .filter(|k| k.contains('/'))
            .cloned()
            .collect();
        let fs = heads[rng.below(heads.len() as u64) as usize].clone();
        let newest = st
            .snaps
            .keys()
            .filter(|k| k.starts_with(&format!("{fs}@")))
            .max_by_key(|k| k[k.find('@').unwrap() + 2..].parse::<u64>().unwrap())
            .cloned();
        let mut after = st.clone();
        let ok = match t % 6 {
            0 | 3 => {
                n += 1;
                let name = format!("{fs}@s{n}");
                after.snaps.insert(name.clone(), st.model[&fs].clone());
                committing(
                    &store,
                    &mut run,
                    &before,
                    &after,
                    || store.snapshot(std::slice::from_ref(&name)).is_ok(),
                    dev,
                )
            }
            1 => match st.snaps.keys().next().cloned() {
                // Skip snapshots with clones (destroy refuses them).
                Some(victim) if !st.model.keys().any(|k| k.starts_with("tank/c")) => {
                    after.snaps.remove(&victim);
                    committing(
                        &store,
                        &mut run,
                        &before,
                        &after,
                        || store.destroy_snapshot(&victim).is_ok(),
                        dev,
                    )
                }
                _ => true,
            },
            2 => match newest.clone() {
                Some(src) => {
                    let name = format!("tank/c{t}");
                    after.model.insert(name.clone(), st.snaps[&src].clone());
                    // A clone is durable when it returns: its own commit.
                    let cloned = after.clone();
                    let ok = committing(
                        &store,
                        &mut run,
                        &before,
                        &cloned,
                        || store.clone_snapshot(&src, &name, &[]).is_ok(),
                        dev,
                    );
                    if ok && t % 4 == 2 {
                        store.promote(&name).unwrap();
                        // Snapshots up to the origin move to the clone.
                        let (ofs, _) = src.split_once('@').unwrap();
                        let moved: Vec<String> = after
                            .snaps
                            .keys()
                            .filter(|k| k.starts_with(&format!("{ofs}@")))
                            .filter(|k| snap_order(k) <= snap_order(&src))
                            .cloned()
                            .collect();
                        for m in moved {
                            let c = after.snaps.remove(&m).unwrap();
                            after
                                .snaps
                                .insert(format!("{name}@{}", m.split_once('@').unwrap().1), c);
                        }
                        committing(
                            &store,
                            &mut run,
                            &cloned,
                            &after,
                            || store.sync().is_ok(),
                            dev,
                        )
                    } else {
                        ok
                    }
                }
                None => true,
            },
            4 => match newest {
                Some(s) => {
                    after.model.insert(fs.clone(), st.snaps[&s].clone());
                    committing(
                        &store,
                        &mut run,
                        &before,
                        &after,
                        || store.rollback(&s, false).is_ok(),
                        dev,
                    )
                }
                None => true,
            },
            _ => match newest {
                Some(s) => {
                    let mut stream = Vec::new();
                    store.send(&s, None, &mut stream, &mut |_| {}).unwrap();
                    let name = format!("tank/r{t}");
                    after.model.insert(name.clone(), st.snaps[&s].clone());
                    after.snaps.insert(
                        format!("{name}@{}", s.split_once('@').unwrap().1),
                        st.snaps[&s].clone(),
                    );
                    committing(
                        &store,
                        &mut run,
                        &before,
                        &after,
                        || {
                            store
                                .receive(&name, &mut &stream[..], false, &mut |_| {})
                                .is_ok()
                        },
                        dev,
                    )
                }
                None => true,
            },
        };
        if std::env::var("TRACE").is_ok() {
            eprintln!(
                "step {t} op {} ok {ok} open {} synced {} cut {}",
                t % 6,
                store.open_txg(),
                store.synced_txg(),
                dev.is_cut()
            );
        }
        if !ok {
            break;
        }
        st = after;
        let target = store.open_txg();
        run.by_txg.retain(|k, _| *k < target);
        run.by_txg.insert(target, vec![st.clone()]);
        if store.sync().is_err() || dev.is_cut() {
            break;
        }
        run.acked = target;
    }
    run.writes = dev.writes_issued() - base;
    run.cut_reached = dev.is_cut();
    dev.power().cut_now();
    drop(store);
    run
}

/// The visible state: datasets with their objects, snapshots with their contents.
fn observe(store: &Store) -> State {
    let mut model = Model::new();
    for d in store.list(None, true).unwrap() {
        let ds = store.dataset(&d.name).unwrap();
        let objs = ds
            .list_objects()
            .unwrap()
            .into_iter()
            .map(|id| {
                (
                    id,
                    ds.read(id, 0, ds.object_size(id).unwrap() as usize)
                        .unwrap(),
                )
            })
            .collect();
        model.insert(d.name, objs);
    }
    let snaps = store
        .list_snapshots(None)
        .unwrap()
        .into_iter()
        .map(|s| {
            let c = snap_content(store, &s.name);
            (s.name, c)
        })
        .collect();
    State { model, snaps }
}

fn snap_order(full: &str) -> u64 {
    full[full.find('@').unwrap() + 2..].parse().unwrap_or(0)
}

fn check(seed: u64, cut: u64) {
    let dev = SimDevice::new("d", 96 << 20);
    let run = workload(seed, &dev, 14, Some(cut));
    let ctx = format!("seed {seed} cut {cut}");
    // A cut past the operations' end would test only a clean power-off.
    assert!(
        run.cut_reached,
        "{ctx}: the cut is not within the workload's {} writes",
        run.writes
    );
    let mut rng = Rng(seed ^ cut);
    let img = SimDevice::from_image("i", dev.crash_image(|| rng.chance(50)));
    let store = Store::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>], manual_opts())
        .unwrap_or_else(|e| panic!("{ctx}: import: {e}"));
    let txg = store.synced_txg();
    if std::env::var("TRACE").is_ok() {
        eprintln!(
            "imported txg {txg} acked {} recorded {:?}",
            run.acked,
            run.by_txg.keys().collect::<Vec<_>>()
        );
    }
    assert!(
        txg >= run.acked,
        "{ctx}: imported txg {txg} older than acknowledged {}",
        run.acked
    );
    // Import may commit one cleanup txg (interrupted receive): look up the states at
    // or before it, and accept any of them.
    let (_, candidates) = run
        .by_txg
        .range(..=txg)
        .next_back()
        .unwrap_or_else(|| panic!("{ctx}: no state for txg {txg}"));
    let seen = observe(&store);
    assert!(
        candidates.contains(&seen),
        "{ctx}: imported state (txg {txg}) is none of the committed states"
    );
    store.scrub_start().unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.errors, s.unrecoverable), (0, 0), "{ctx}: scrub {s:?}");
    store.export().unwrap();
}

#[test]
fn power_loss_during_snapshot_operations_90_cuts() {
    let dev = SimDevice::new("calib", 96 << 20);
    let total = workload(7, &dev, 14, None).writes;
    let mut rng = Rng(99);
    if let Ok(c) = std::env::var("CUT") {
        check(7, c.parse().unwrap());
        return;
    }
    for k in 0..90 {
        check(7, rng.below(total));
        let _ = k;
    }
}

#[test]
fn workload_without_cut_matches_model() {
    let dev = SimDevice::new("nocut", 96 << 20);
    let run = workload(7, &dev, 14, None);
    let (&txg, st) = run.by_txg.iter().next_back().unwrap();
    let img = SimDevice::from_image("i", dev.crash_image(|| false));
    let store =
        Store::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>], manual_opts()).unwrap();
    assert_eq!(store.synced_txg(), txg);
    assert!(st.contains(&observe(&store)), "no cut: final state differs");
}
