//! Which way an fsync makes data durable. Normally it writes the intent log
//! only (no txg commit); it commits a full txg instead in these cases, each
//! shown here (`Dataset::fsync` and `commit_log`):
//! - the dataset's first log write (its log chain's header must be committed
//!   first); not after an export and import, whose header is on disk already;
//! - changes made while `sync=disabled` (not logged) are not yet committed
//!   (`meta_txg`). Setting `sync` commits a txg itself, so this is reached
//!   only by a change that read the old policy and landed after that commit;
//!   the test shows the ordinary switch (the property's commit carries the
//!   unlogged changes, the fsync after it logs only);
//! - the pool could not hold the dirty data twice over (its log copy beside the
//!   space its txg needs), so logging it could leave the txg without space.
//!
//! And an acknowledged fsync that committed no txg comes back after a power cut
//! through log replay alone.

mod common;
use cachalot_datasets::{Dataset, Store, StoreError};
use cachalot_pool::{BlockDevice, Power, SimDevice};
use common::*;
use std::sync::Arc;

/// fsync `ds`; whether it committed a txg.
fn fsync_committed(store: &Store, ds: &Dataset) -> bool {
    let before = store.synced_txg();
    ds.fsync().unwrap();
    store.synced_txg() > before
}

#[test]
fn fsync_logs_only_but_in_its_fallbacks() {
    let data = sim_devices(1, 64 << 20);
    let store = Store::create_on_devices("tank", as_dyn(&data), false, manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    let obj = ds.create_object().unwrap();
    store.sync().unwrap();

    ds.write(obj, 0, &[1; 4096]).unwrap();
    assert!(
        fsync_committed(&store, &ds),
        "the first log write of a dataset commits a txg (the chain's header)"
    );
    ds.write(obj, 4096, &[2; 4096]).unwrap();
    assert!(
        !fsync_committed(&store, &ds),
        "later fsyncs write the log only"
    );
    assert!(
        !fsync_committed(&store, &ds),
        "an fsync with nothing new commits nothing"
    );

    store.set_prop("tank", "sync", "disabled").unwrap();
    ds.write(obj, 8192, &[3; 4096]).unwrap();
    let before = store.synced_txg();
    store.set_prop("tank", "sync", "standard").unwrap();
    assert!(
        store.synced_txg() > before,
        "setting sync commits a txg, which carries the unlogged changes"
    );
    ds.write(obj, 12288, &[4; 4096]).unwrap();
    assert!(
        !fsync_committed(&store, &ds),
        "after that commit, fsyncs log only"
    );

    // Exported and imported: the chain's header is on disk, the log goes on.
    store.export().unwrap();
    drop((ds, store));
    let store = Store::import_devices(as_dyn(&data), manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    ds.write(obj, 16384, &[5; 4096]).unwrap();
    assert!(
        !fsync_committed(&store, &ds),
        "after an import the log's header is on disk: fsync logs only"
    );
    store.export().unwrap();
}

/// A pool filled with committed data, then `tank/f` with dirty data in one
/// open txg: `chunks` writes of 64 KiB, or (`None`) until a write's admission
/// has to commit the txg first (the pool no longer holds the dirty data and the
/// write). Returns the store, the dataset and the number of writes admitted
/// without a commit. Deterministic: a second run with that number stops right
/// before the write that would have committed.
fn nearly_full(chunks: Option<usize>) -> (Arc<Store>, Arc<Dataset>, usize) {
    let data = sim_devices(1, 64 << 20);
    let store = Store::create_on_devices("tank", as_dyn(&data), false, manual_opts()).unwrap();
    create_uncompressed_fs_with(&store, "tank/f", &[("recordsize", "128K")]);
    let ds = store.dataset("tank/f").unwrap();
    let obj = ds.create_object().unwrap();
    ds.write(obj, 0, b"x").unwrap();
    ds.fsync().unwrap(); // the first log write (a txg), out of the way
    let big = Rng(5).bytes(1 << 20);
    let mut off = 1 << 20;
    while ds.write(obj, off, &big).is_ok() {
        off += big.len() as u64;
        assert!(off < 64 << 20, "the pool never filled");
    }
    store.sync().unwrap();
    let small = Rng(6).bytes(64 << 10);
    let txg = store.synced_txg();
    let mut n = 0;
    while chunks != Some(n) {
        match ds.write(obj, off, &small) {
            Ok(()) if store.synced_txg() == txg => {}
            Ok(()) | Err(StoreError::NoSpace(_)) if chunks.is_none() => break,
            r => panic!(
                "chunk {n} of {chunks:?}: {r:?}, txg {txg} -> {}",
                store.synced_txg()
            ),
        }
        off += small.len() as u64;
        n += 1;
    }
    (store, ds, n)
}

#[test]
fn fsync_on_a_nearly_full_pool_commits_a_txg() {
    let (store, _, most) = nearly_full(None);
    store.export().unwrap();
    assert!(most >= 4, "only {most} writes fitted in one txg");
    let (store, ds, n) = nearly_full(Some(most));
    assert_eq!(n, most);
    assert!(
        fsync_committed(&store, &ds),
        "an fsync whose log could take the space its txg needs commits the txg instead"
    );
    let st = store.status();
    assert!(st.suspended.is_none(), "pool suspended: {:?}", st.suspended);
    store.export().unwrap();
}

/// An acknowledged fsync that committed no txg survives a power cut right after
/// it: only the log holds the write, and the import's replay brings it back.
#[test]
fn acknowledged_fsync_comes_back_through_log_replay_alone() {
    let power = Power::new();
    let data = vec![SimDevice::on_power("d0", vec![0; 64 << 20], power.clone())];
    let store = Store::create_on_devices("tank", as_dyn(&data), false, manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    let obj = ds.create_object().unwrap();
    ds.write(obj, 0, b"committed").unwrap();
    ds.fsync().unwrap(); // the first log write commits a txg
    let committed = store.synced_txg();
    let logged = Rng(9).bytes(40_000);
    ds.write(obj, 65536, &logged).unwrap();
    ds.fsync().unwrap();
    assert_eq!(store.synced_txg(), committed, "the fsync committed a txg");
    power.cut_now();
    drop((ds, store));
    // Only what was flushed survives (every unflushed write dropped).
    let img = SimDevice::from_image("i", data[0].crash_image(|| false));
    let store =
        Store::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>], manual_opts()).unwrap();
    let notices = store.status().notices.join("\n");
    assert!(
        notices.contains("replayed 1 intent log records"),
        "the import did not replay the write from the log: {notices:?}"
    );
    let ds = store.dataset("tank").unwrap();
    assert_eq!(ds.read(obj, 0, 9).unwrap(), b"committed");
    assert_eq!(
        ds.read(obj, 65536, logged.len()).unwrap(),
        logged,
        "the acknowledged write is not back"
    );
    store.export().unwrap();
}
