//! Snapshot holds: a held snapshot survives destroy, destroy -r of its
//! filesystem, rollback -r and receive -F (each refused with the tag named,
//! nothing changed) until released or destroyed with force; a hold on the base
//! of an incremental stays on it after the receive.

mod common;
use cachalot_datasets::{DatasetKind, Store};
use common::*;
use std::sync::Arc;

fn pool(name: &str) -> Arc<Store> {
    Store::create_on_devices(
        name,
        as_dyn(&sim_devices(1, 64 << 20)),
        false,
        manual_opts(),
    )
    .unwrap()
}

fn snaps(s: &Store, fs: &str) -> Vec<String> {
    s.list_snapshots(Some(fs))
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect()
}

fn send(store: &Store, snap: &str, from: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    store.send(snap, from, &mut out, &mut |_| {}).unwrap();
    out
}

#[test]
fn held_snapshots_resist_every_destroying_path() {
    let s = pool("p");
    s.create_dataset("p/a", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    let ds = s.dataset("p/a").unwrap();
    let id = ds.create_object().unwrap();
    ds.write(id, 0, b"one").unwrap();
    s.snapshot(&["p/a@1".into()]).unwrap();
    ds.write(id, 0, b"two").unwrap();
    s.snapshot(&["p/a@2".into()]).unwrap();
    s.hold("p/a@2", "repl.r1").unwrap();
    assert!(s.hold("p/a@2", "repl.r1").is_err(), "the same tag twice");
    assert!(s.hold("p/a@2", "bad tag").is_err());
    assert_eq!(s.holds("p/a@2").unwrap(), vec!["repl.r1".to_string()]);
    let err = s.destroy_snapshot("p/a@2").unwrap_err().to_string();
    assert!(err.contains("p/a@2") && err.contains("repl.r1"), "{err}");
    assert!(s.destroy_dataset("p/a", true).is_err());
    assert!(s.rollback("p/a@1", true).is_err());
    // A full stream with -F would replace p/a and its held snapshot.
    let other = pool("q");
    other
        .create_dataset("q/x", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    other.snapshot(&["q/x@s".into()]).unwrap();
    let full = send(&other, "q/x@s", None);
    let err = s
        .receive("p/a", &mut &full[..], true, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("held"), "{err}");
    assert_eq!(snaps(&s, "p/a"), vec!["p/a@1", "p/a@2"], "nothing changed");
    assert!(s
        .list(None, true)
        .unwrap()
        .iter()
        .all(|d| !d.name.contains('%')));
    // The unheld one goes; the held one after release, or with force.
    s.destroy_snapshot("p/a@1").unwrap();
    s.release("p/a@2", "repl.r1").unwrap();
    assert!(s.release("p/a@2", "repl.r1").is_err(), "released twice");
    s.hold("p/a@2", "t1").unwrap();
    s.hold("p/a@2", "t2").unwrap();
    s.destroy_snapshot_forced("p/a@2").unwrap();
    assert!(snaps(&s, "p/a").is_empty());
}

#[test]
fn hold_on_the_base_stays_after_an_incremental_receive() {
    let src = pool("src");
    let dst = pool("dst");
    src.create_dataset("src/a", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    let ds = src.dataset("src/a").unwrap();
    let id = ds.create_object().unwrap();
    ds.write(id, 0, &Rng(1).bytes(100_000)).unwrap();
    src.snapshot(&["src/a@1".into()]).unwrap();
    dst.receive(
        "dst/c",
        &mut &send(&src, "src/a@1", None)[..],
        false,
        &mut |_| {},
    )
    .unwrap();
    dst.hold("dst/c@1", "common").unwrap();
    ds.write(id, 5000, b"changed").unwrap();
    src.snapshot(&["src/a@2".into()]).unwrap();
    let inc = send(&src, "src/a@2", Some("@1"));
    dst.receive("dst/c", &mut &inc[..], false, &mut |_| {})
        .unwrap();
    assert_eq!(dst.holds("dst/c@1").unwrap(), vec!["common".to_string()]);
    assert!(dst.destroy_snapshot("dst/c@1").is_err());
    assert!(snap_content(&dst, "dst/c@2") == snap_content(&src, "src/a@2"));
}
