//! Volumes through their life: clone, send/receive (full and incremental),
//! rollback, online grow of thick and sparse volumes, and the refused shrink.

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{CreateOpts, VdevKind, VdevSpec};
use cachalot_zvol::{ExtentKind, Zvol};
use std::sync::Arc;
use std::time::Duration;

fn pool(dir: &tempfile::TempDir, name: &str, size: u64) -> Arc<Store> {
    let spec = VdevSpec {
        kind: VdevKind::Disk,
        paths: vec![dir.path().join(name)],
        log: false,
    };
    let copts = CreateOpts {
        create_size: Some(size),
        ..CreateOpts::default()
    };
    let opts = StoreOpts {
        arc_max: 16 << 20,
        txg_timeout: Duration::from_secs(3600),
        dirty_max: 1 << 30,
    };
    Store::create(name, &[spec], &copts, &[], opts).unwrap()
}

fn open(store: &Arc<Store>, name: &str) -> Zvol {
    let ds = if name.contains('@') {
        store.snapshot_dataset(name).unwrap()
    } else {
        store.dataset(name).unwrap()
    };
    Zvol::open(store.clone(), ds).unwrap()
}

fn raw(store: &Store, name: &str, p: &str) -> String {
    store.get_props(name, Some(&[p.to_string()])).unwrap()[0]
        .raw
        .clone()
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed | 1)
        .collect()
}

#[test]
fn clone_send_receive_and_rollback_of_a_volume() {
    let dir = tempfile::tempdir().unwrap();
    let store = pool(&dir, "tank", 256 << 20);
    let props = [("volblocksize".to_string(), "8K".to_string())];
    store
        .create_dataset(
            "tank/vol",
            DatasetKind::Volume,
            Some(16 << 20),
            &props,
            false,
        )
        .unwrap();
    let vol = open(&store, "tank/vol");
    assert_eq!(vol.block_size(), 8192);
    vol.write(0, &pattern(1, 1 << 20), false).unwrap();
    vol.write(8 << 20, &pattern(2, 64 << 10), true).unwrap();
    store.snapshot(&["tank/vol@a".to_string()]).unwrap();
    vol.write(0, &pattern(3, 8192), false).unwrap();
    vol.discard(8 << 20, 64 << 10, false).unwrap();
    store.snapshot(&["tank/vol@b".to_string()]).unwrap();

    // A clone is a writable volume with the snapshot's contents and block size.
    store
        .clone_snapshot("tank/vol@a", "tank/copy", &[])
        .unwrap();
    let copy = open(&store, "tank/copy");
    assert!(!copy.is_readonly());
    assert_eq!(copy.size(), 16 << 20);
    assert_eq!(copy.block_size(), 8192);
    assert_eq!(copy.read(0, 1 << 20).unwrap(), pattern(1, 1 << 20));
    copy.write(0, &[9; 512], true).unwrap();
    assert_eq!(
        open(&store, "tank/vol@a").read(0, 512).unwrap(),
        pattern(1, 512)
    );

    // Full then incremental send into a second pool.
    let other = pool(&dir, "dr", 256 << 20);
    let mut full = Vec::new();
    store
        .send("tank/vol@a", None, &mut full, &mut |_| {})
        .unwrap();
    other
        .receive("dr/vol", &mut full.as_slice(), false, &mut |_| {})
        .unwrap();
    let mut incr = Vec::new();
    store
        .send("tank/vol@b", Some("@a"), &mut incr, &mut |_| {})
        .unwrap();
    other
        .receive("dr/vol", &mut incr.as_slice(), false, &mut |_| {})
        .unwrap();
    let recv = open(&other, "dr/vol");
    assert_eq!(raw(&other, "dr/vol", "volsize"), (16u64 << 20).to_string());
    assert_eq!(recv.block_size(), 8192);
    assert_eq!(recv.read(0, 8192).unwrap(), pattern(3, 8192));
    assert_eq!(
        recv.read(8192, 1 << 19).unwrap(),
        pattern(1, 1 << 20)[8192..8192 + (1 << 19)]
    );
    let ext = recv.extents(8 << 20, 64 << 10).unwrap();
    assert_eq!(ext.len(), 1);
    assert_eq!(
        ext[0].kind,
        ExtentKind::Hole,
        "the discard travelled as a hole"
    );

    // Rollback of the served head: the open device shows the snapshot.
    store.destroy_dataset("tank/copy", false).unwrap();
    store.rollback("tank/vol@a", true).unwrap();
    assert_eq!(vol.read(0, 8192).unwrap(), pattern(1, 8192));
    assert_eq!(vol.read(8 << 20, 64 << 10).unwrap(), pattern(2, 64 << 10));
}

#[test]
fn grow_online_keeps_thick_reserved_and_shrink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = pool(&dir, "tank", 256 << 20);
    store
        .create_dataset("tank/thick", DatasetKind::Volume, Some(8 << 20), &[], false)
        .unwrap();
    let props = [("sparse".to_string(), "on".to_string())];
    store
        .create_dataset(
            "tank/thin",
            DatasetKind::Volume,
            Some(8 << 20),
            &props,
            false,
        )
        .unwrap();
    let thick = open(&store, "tank/thick");
    thick.write((8 << 20) - 16384, &[7; 16384], false).unwrap();
    store.set_prop("tank/thick", "volsize", "32M").unwrap();
    assert_eq!(thick.size(), 32 << 20);
    assert_eq!(
        raw(&store, "tank/thick", "reservation"),
        (32u64 << 20).to_string()
    );
    assert_eq!(
        thick.read((8 << 20) - 16384, 16384).unwrap(),
        vec![7; 16384]
    );
    assert_eq!(
        thick.read(8 << 20, 16384).unwrap(),
        vec![0; 16384],
        "grown part reads zeros"
    );
    store.set_prop("tank/thin", "volsize", "1G").unwrap();
    assert_eq!(raw(&store, "tank/thin", "reservation"), "none");
    // A thick grow past what the pool holds is refused and changes nothing.
    let e = store.set_prop("tank/thick", "volsize", "1G").unwrap_err();
    assert!(e.to_string().contains("space"), "{e}");
    assert_eq!(thick.size(), 32 << 20);
    assert_eq!(
        raw(&store, "tank/thick", "reservation"),
        (32u64 << 20).to_string()
    );
    let e = store.set_prop("tank/thick", "volsize", "16M").unwrap_err();
    assert!(e.to_string().contains("shrink"), "{e}");
    assert_eq!(thick.size(), 32 << 20);
    // Commit and re-import: the grown size is on disk.
    store.sync().unwrap();
    store.export().unwrap();
    drop((thick, store));
    let opts = StoreOpts {
        arc_max: 16 << 20,
        txg_timeout: Duration::from_secs(3600),
        dirty_max: 1 << 30,
    };
    let store = Store::import(&[dir.path().join("tank")], Some("tank"), opts).unwrap();
    assert_eq!(open(&store, "tank/thick").size(), 32 << 20);
    assert_eq!(open(&store, "tank/thin").size(), 1 << 30);
}
