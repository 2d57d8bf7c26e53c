//! Power cuts inside the catalog sequence that puts a received increment in
//! place (snapshot of `FS%recv`, promote it, hand `FS`'s children to it,
//! destroy the old `FS`, rename `FS%recv` to `FS`), as a recursive
//! replication's parent receives it: a filesystem with a child and a held
//! snapshot. At each step a commit starts (as the sync thread may start one
//! at any moment) and the power is cut after N of its writes. After import,
//! the target is its old state or its new one, never missing, half-renamed,
//! without its snapshots or without its child; its hold survives; and a
//! retry of the same receive succeeds.

mod common;
use cachalot_datasets::{DatasetKind, ReceiveOpts, Store};
use cachalot_pool::{BlockDevice, SimDevice};
use common::*;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const RESUMABLE: ReceiveOpts = ReceiveOpts {
    force: false,
    resumable: true,
};

/// The source: `src/db` with one object, content `A` at `@a` and `B` at `@b`;
/// returns the full stream of `@a`, the increment `@a -> @b`, the object id
/// and both contents.
fn source() -> (Vec<u8>, Vec<u8>, u64, Vec<u8>, Vec<u8>) {
    let src = Store::create_on_devices(
        "src",
        as_dyn(&sim_devices(1, 64 << 20)),
        false,
        manual_opts(),
    )
    .unwrap();
    src.create_dataset("src/db", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    let ds = src.dataset("src/db").unwrap();
    let obj = ds.create_object().unwrap();
    let mut rng = Rng(11);
    let a = rng.bytes(300_000);
    ds.write(obj, 0, &a).unwrap();
    src.snapshot(&["src/db@a".into()]).unwrap();
    let mut b = a.clone();
    let more = rng.bytes(200_000);
    b[50_000..250_000].copy_from_slice(&more);
    ds.write(obj, 50_000, &more).unwrap();
    src.snapshot(&["src/db@b".into()]).unwrap();
    let send = |snap: &str, from: Option<&str>| {
        let mut out = Vec::new();
        src.send(snap, from, &mut out, &mut |_| {}).unwrap();
        out
    };
    (
        send("src/db@a", None),
        send("src/db@b", Some("src/db@a")),
        obj,
        a,
        b,
    )
}

fn recv(store: &Store, stream: &[u8]) -> cachalot_datasets::Result<String> {
    store
        .receive_with("tank/dst", &mut &stream[..], &RESUMABLE, &mut |_| {})
        .map(|o| o.snapshot)
}

fn read_all(store: &Store, fs: &str, obj: u64) -> Vec<u8> {
    let ds = store.dataset(fs).unwrap();
    ds.read(obj, 0, ds.object_size(obj).unwrap() as usize)
        .unwrap()
}

/// Pool `tank` on `dev`, with nothing received yet.
fn empty_pool(dev: &SimDevice) -> Arc<Store> {
    Store::create_on_devices(
        "tank",
        vec![Arc::new(dev.clone()) as Arc<dyn BlockDevice>],
        false,
        manual_opts(),
    )
    .unwrap()
}

/// The target after the first cycle: `tank/dst` = `@a` (held by the
/// relationship), with a child `tank/dst/c` holding `CHILD` in object `obj`.
fn target(dev: &SimDevice, full: &[u8]) -> (Arc<Store>, u64) {
    let store = empty_pool(dev);
    recv(&store, full).unwrap();
    store.hold("tank/dst@a", "repl:r").unwrap();
    store
        .create_dataset("tank/dst/c", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    let child = store.dataset("tank/dst/c").unwrap();
    let obj = child.create_object().unwrap();
    child.write(obj, 0, CHILD).unwrap();
    store.sync().unwrap();
    (store, obj)
}

const CHILD: &[u8] = b"the child's own data";

/// One run: receive the increment with a commit started after `step`, the
/// power cut `writes` writes into it; import what survived and check it.
fn cut_at(step: &'static str, writes: u64, keep_unflushed: bool) {
    let ctx = format!("step {step}, {writes} writes into its commit");
    let (full, inc, obj, a, b) = source();
    let dev = SimDevice::new("d", 64 << 20);
    let (store, child_obj) = target(&dev, &full);
    let fired = Arc::new(AtomicBool::new(false));
    let committer = Arc::new(Mutex::new(None));
    let (weak, d2, f2, c2) = (
        Arc::downgrade(&store),
        dev.clone(),
        fired.clone(),
        committer.clone(),
    );
    store.set_receive_step_hook(Some(Arc::new(move |s: &str| {
        if s != step || f2.swap(true, Ordering::SeqCst) {
            return;
        }
        d2.cut_power_at_write(d2.writes_issued() + writes);
        let st = weak.upgrade().expect("store alive");
        let (tx, rx) = std::sync::mpsc::channel();
        // The sync thread's commit, started now; the receive goes on when it
        // ended, or after a while if it waits for the receive.
        *c2.lock() = Some(std::thread::spawn(move || {
            let _ = st.sync();
            let _ = tx.send(());
        }));
        let _ = rx.recv_timeout(Duration::from_millis(300));
    })));
    let res = recv(&store, &inc);
    assert!(fired.load(Ordering::SeqCst), "{ctx}: step never reached");
    if let Some(t) = committer.lock().take() {
        t.join().unwrap();
    }
    store.set_receive_step_hook(None);
    dev.power().cut_now();
    drop(store);
    let mut rng = Rng(writes ^ 0x5eed);
    let img = SimDevice::from_image("i", dev.crash_image(|| keep_unflushed && rng.chance(50)));
    let store = Store::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>], manual_opts())
        .unwrap_or_else(|e| panic!("{ctx}: import: {e} (receive said {res:?})"));
    let names: Vec<String> = store
        .list(Some("tank/dst"), true)
        .unwrap_or_else(|e| panic!("{ctx}: tank/dst after import: {e}"))
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, ["tank/dst", "tank/dst/c"], "{ctx}: datasets");
    let snaps = store.snapshot_names("tank/dst").unwrap();
    let new = match snaps.as_slice() {
        [x] if x == "a" => false,
        [x, y] if x == "a" && y == "b" => true,
        other => panic!("{ctx}: snapshots of tank/dst: {other:?}"),
    };
    let want = if new { &b } else { &a };
    assert!(read_all(&store, "tank/dst", obj) == *want, "{ctx}: content");
    assert_eq!(read_all(&store, "tank/dst/c", child_obj), CHILD, "{ctx}");
    assert_eq!(
        store.holds("tank/dst@a").unwrap(),
        ["repl:r"],
        "{ctx}: hold"
    );
    if !new {
        recv(&store, &inc).unwrap_or_else(|e| panic!("{ctx}: retry: {e}"));
        assert_eq!(store.snapshot_names("tank/dst").unwrap(), ["a", "b"]);
        assert!(read_all(&store, "tank/dst", obj) == b, "{ctx}: retried");
        assert_eq!(read_all(&store, "tank/dst/c", child_obj), CHILD, "{ctx}");
    }
    store.scrub_start().unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.errors, s.unrecoverable), (0, 0), "{ctx}: scrub {s:?}");
    store.export().unwrap();
}

#[test]
fn power_cut_at_each_step_of_putting_a_received_increment_in_place() {
    for step in ["snapshot", "promote", "adopt", "destroy"] {
        for writes in [0, 1, 2, 4, 7, 12, 30, 1_000] {
            cut_at(step, writes, writes % 2 == 1);
        }
    }
}

/// A full receive into a name that did not exist when it started does not
/// destroy a dataset someone created under that name while the stream ran:
/// the receive is refused at the end and that dataset keeps its data.
#[test]
fn a_full_receive_never_destroys_a_dataset_created_while_it_ran() {
    let (full, _, _, _, _) = source();
    let store = empty_pool(&SimDevice::new("t", 64 << 20));
    let weak = Arc::downgrade(&store);
    let made = Arc::new(Mutex::new(None));
    let m2 = made.clone();
    store.set_receive_step_hook(Some(Arc::new(move |s: &str| {
        if s != "snapshot" || m2.lock().is_some() {
            return;
        }
        let st = weak.upgrade().expect("store alive");
        // Another caller, on its own thread (the hook may not call the store).
        let obj = std::thread::spawn(move || {
            st.create_dataset("tank/dst", DatasetKind::Filesystem, None, &[], false)
                .unwrap();
            let ds = st.dataset("tank/dst").unwrap();
            let obj = ds.create_object().unwrap();
            ds.write(obj, 0, b"made while the stream ran").unwrap();
            obj
        })
        .join()
        .unwrap();
        *m2.lock() = Some(obj);
    })));
    let res = recv(&store, &full);
    store.set_receive_step_hook(None);
    let obj = made.lock().expect("the hook ran");
    assert!(
        res.is_err(),
        "the receive replaced a dataset it was not given: {res:?}"
    );
    assert_eq!(
        read_all(&store, "tank/dst", obj),
        b"made while the stream ran"
    );
}
