//! The resilver after `pool online`: only blocks born while the device was
//! offline are rebuilt (its dirty time, `offline_txg`), on mirrors and raidz,
//! and the bound survives an export in the middle; the device then holds every
//! block, which a read with another device missing proves.

mod common;
use cachalot_datasets::Store;
use cachalot_pool::{BlockDevice, SimDevice, VdevKind};
use common::*;
use std::sync::Arc;

/// 8 MiB written before the offline, 2 MiB (1 MiB new object, 1 MiB
/// overwritten) while it lasts.
const OLD: usize = 8 << 20;
const NEW: usize = 1 << 20;

fn setup(kind: VdevKind, n: usize) -> (Vec<SimDevice>, Arc<Store>, u64) {
    let devs = sim_devices(n, 64 << 20);
    let store = Store::create_on_group("tank", as_dyn(&devs), kind, manual_opts()).unwrap();
    create_uncompressed_fs(&store, "tank/d");
    let ds = store.dataset("tank/d").unwrap();
    let id = ds.create_object().unwrap();
    ds.write(id, 0, &Rng(1).bytes(OLD)).unwrap();
    store.sync().unwrap();
    (devs, store, id)
}

/// Take sim:d0 offline, write the new data, and return the whole model.
fn offline_and_write(store: &Store, id: u64) -> Vec<(u64, Vec<u8>)> {
    store
        .change_devices(|p, next| p.offline_device("sim:d0", next))
        .unwrap();
    let ds = store.dataset("tank/d").unwrap();
    let mut old = ds.read(id, 0, OLD).unwrap();
    let over = Rng(2).bytes(NEW);
    ds.write(id, 2 << 20, &over).unwrap();
    model_write(&mut old, 2 << 20, &over);
    let id2 = ds.create_object().unwrap();
    let fresh = Rng(3).bytes(NEW);
    ds.write(id2, 0, &fresh).unwrap();
    store.sync().unwrap();
    vec![(id, old), (id2, fresh)]
}

/// Scrub clean, then read everything back with sim:d1 missing, so every
/// block needs what the resilver put on sim:d0.
fn check_without_d1(devs: &[SimDevice], store: Arc<Store>, model: &[(u64, Vec<u8>)]) {
    store.scrub_start().unwrap();
    let s = store.scrub_wait();
    assert_eq!(
        (s.kind.as_str(), s.errors, s.unrecoverable),
        ("scrub", 0, 0),
        "{s:?}"
    );
    store.export().unwrap();
    let rest: Vec<Arc<dyn BlockDevice>> = devs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, d)| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
        .collect();
    let store = Store::import_devices(rest, manual_opts()).unwrap();
    let ds = store.dataset("tank/d").unwrap();
    for (id, data) in model {
        let got = ds.read(*id, 0, data.len()).unwrap();
        assert!(got == *data, "object {id} differs without sim:d1");
    }
}

fn resilvers_only_new_blocks(kind: VdevKind, n: usize) {
    let (devs, store, id) = setup(kind, n);
    let model = offline_and_write(&store, id);
    let allocated = store.pool().space().allocated;
    // Online: the resilver runs inline (manual txgs).
    store
        .change_devices(|p, next| p.online_device("sim:d0", next))
        .unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.kind.as_str(), s.unrecoverable), ("resilver", 0), "{s:?}");
    assert!(s.min_birth_txg > 1, "{s:?}");
    // 2 MiB of 128K records was written while offline, out of 10 MiB
    // allocated: about a fifth, plus the metadata above the new records.
    assert!(
        s.total < allocated / 3,
        "examined too much: {s:?} of {allocated}"
    );
    assert_eq!(s.examined, s.total, "{s:?}");
    assert!(s.resilvered >= 16, "{s:?}");
    assert!(!store.pool().resilver_pending());
    check_without_d1(&devs, store, &model);
}

#[test]
fn mirror_online_resilvers_only_new_blocks() {
    resilvers_only_new_blocks(VdevKind::Mirror, 2);
}

#[test]
fn raidz1_online_resilvers_only_new_blocks() {
    resilvers_only_new_blocks(VdevKind::Raidz1, 3);
}

/// The bound is in the labels: onlined and exported before its resilver ran,
/// the pool resilvers the same blocks at import.
#[test]
fn txg_bound_survives_export() {
    let (devs, store, id) = setup(VdevKind::Raidz1, 3);
    let model = offline_and_write(&store, id);
    let txg = store.open_txg();
    assert!(store.pool().online_device("sim:d0", txg).unwrap());
    let bound = store.pool().resilver_min_birth();
    assert!(bound > 1);
    store.export().unwrap();
    let store = Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
    let s = store.scrub_wait();
    assert_eq!(
        (s.kind.as_str(), s.min_birth_txg, s.unrecoverable),
        ("resilver", bound, 0),
        "{s:?}"
    );
    assert!(s.resilvered >= 16, "{s:?}");
    check_without_d1(&devs, store, &model);
}

/// A replacement (here: a device back from a fault, whose first lost write
/// is not known) still gets every allocated block.
#[test]
fn faulted_device_resilvers_in_full() {
    let (_devs, store, _id) = setup(VdevKind::Mirror, 2);
    store
        .pool()
        .inject_fault(
            "sim:d0",
            Some(cachalot_pool::fault::Fault::parse("all", "eio", 100).unwrap()),
        )
        .unwrap();
    let ds = store.dataset("tank/d").unwrap();
    let id2 = ds.create_object().unwrap();
    for i in 0..32u64 {
        ds.write(id2, i << 17, &Rng(i).bytes(1 << 17)).unwrap();
        store.sync().unwrap();
    }
    store.pool().inject_fault("sim:d0", None).unwrap();
    store
        .change_devices(|p, next| p.online_device("sim:d0", next))
        .unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.kind.as_str(), s.min_birth_txg), ("resilver", 0), "{s:?}");
    assert!(s.total >= OLD as u64, "{s:?}");
}

/// A replacement gets the blocks only snapshots hold too (the resilver once
/// walked the datasets' heads only, so a snapshot's old data was missing on
/// the new device, and lost with the other one). The replacement is an open
/// device (`Replacement::Device`), as the simulator supplies.
#[test]
fn replacement_gets_snapshot_only_blocks() {
    let (devs, store, id) = setup(VdevKind::Mirror, 2);
    let ds = store.dataset("tank/d").unwrap();
    let old = ds.read(id, 0, OLD).unwrap();
    store.snapshot(&["tank/d@s1".to_string()]).unwrap();
    let new = Rng(9).bytes(OLD);
    ds.write(id, 0, &new).unwrap();
    store.sync().unwrap();
    let fresh = SimDevice::new("d0", 64 << 20);
    store
        .replace_with(
            "sim:d0",
            cachalot_pool::Replacement::Device(Arc::new(fresh.clone())),
            &Default::default(),
        )
        .unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.kind.as_str(), s.unrecoverable), ("resilver", 0), "{s:?}");
    store.export().unwrap();
    let store = Store::import_devices(vec![Arc::new(fresh)], manual_opts()).unwrap();
    drop(devs);
    let head = store.dataset("tank/d").unwrap();
    assert!(head.read(id, 0, OLD).unwrap() == new, "head differs");
    let snap = store.snapshot_dataset("tank/d@s1").unwrap();
    assert!(
        snap.read(id, 0, OLD).unwrap() == old,
        "snapshot differs with only the replacement"
    );
}
