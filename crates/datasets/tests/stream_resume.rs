//! Resumable receive (`receive -s`, `send -t`, `receive -A`): a stream cut at
//! many points continues from the target's token and arrives bit-identical; a
//! corrupt record keeps only what was verified before it; a token that can no
//! longer be honoured is refused on the source and its state is replaced by a
//! whole stream with one message; errors name the snapshot and the target.

mod common;
use cachalot_datasets::resume::ResumeToken;
use cachalot_datasets::{DatasetKind, ReceiveOpts, Store};
use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;

fn pool(name: &str) -> Arc<Store> {
    Store::create_on_devices(
        name,
        as_dyn(&sim_devices(1, 128 << 20)),
        false,
        manual_opts(),
    )
    .unwrap()
}

fn send(store: &Store, snap: &str, from: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    store.send(snap, from, &mut out, &mut |_| {}).unwrap();
    out
}

fn send_t(store: &Store, token: &str) -> cachalot_datasets::Result<Vec<u8>> {
    let mut out = Vec::new();
    store.send_resume(token, &mut out, &mut |_| {})?;
    Ok(out)
}

const RESUMABLE: ReceiveOpts = ReceiveOpts {
    force: false,
    resumable: true,
};

fn recv_s(store: &Store, fs: &str, stream: &[u8]) -> cachalot_datasets::Result<String> {
    store
        .receive_with(fs, &mut &stream[..], &RESUMABLE, &mut |_| {})
        .map(|o| o.snapshot)
}

/// A source filesystem with a few objects of several blocks each.
fn source(seed: u64) -> (Arc<Store>, Model) {
    let src = pool("src");
    src.create_dataset(
        "src/db",
        DatasetKind::Filesystem,
        None,
        &[("recordsize".into(), "16K".into())],
        false,
    )
    .unwrap();
    let mut model: Model = BTreeMap::from([("src/db".to_string(), BTreeMap::new())]);
    let mut rng = Rng(seed);
    for _ in 0..30 {
        random_op(&mut rng, &src, &mut model, 300_000);
    }
    (src, model)
}

fn token(dst: &Store, fs: &str) -> String {
    let t = dst.resume_token(fs).expect("a resume token");
    let rows = dst
        .get_props(fs, Some(&["receive_resume_token".to_string()]))
        .unwrap();
    assert_eq!(rows[0].value, t, "get receive_resume_token");
    t
}

#[test]
fn cut_full_stream_resumes_to_identical_copy() {
    let (src, _) = source(11);
    src.snapshot(&["src/db@a".into()]).unwrap();
    let full = send(&src, "src/db@a", None);
    let want = snap_content(&src, "src/db@a");
    for (i, frac) in [5u64, 33, 50, 90, 99].into_iter().enumerate() {
        let dst = pool("dst");
        let cut = full.len() * frac as usize / 100;
        let err = recv_s(&dst, "dst/copy", &full[..cut])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'src/db@a'") && err.contains("'dst/copy'"),
            "{err}"
        );
        assert!(err.contains("receive_resume_token"), "{err}");
        assert!(dst.dataset("dst/copy").is_err(), "cut {i}: target visible");
        let t1 = token(&dst, "dst/copy");
        let rest = send_t(&src, &t1).unwrap();
        assert!(
            rest.len() < full.len() - cut / 2,
            "cut at {frac}%: resumed stream {} of {} bytes re-sends too much",
            rest.len(),
            full.len()
        );
        // Cut the resumed stream too, then finish.
        let err = recv_s(&dst, "dst/copy", &rest[..rest.len() / 2]).unwrap_err();
        assert!(err.to_string().contains("dst/copy"), "{err}");
        let t2 = token(&dst, "dst/copy");
        let pos = |t: &str| ResumeToken::decode(t).unwrap().pos;
        if pos(&t2) != pos(&t1) {
            // The older token's stream no longer continues the state.
            let err = recv_s(&dst, "dst/copy", &rest).unwrap_err().to_string();
            assert!(err.contains("does not continue"), "{err}");
        }
        let rest2 = send_t(&src, &t2).unwrap();
        assert_eq!(recv_s(&dst, "dst/copy", &rest2).unwrap(), "dst/copy@a");
        assert!(snap_content(&dst, "dst/copy@a") == want, "cut at {frac}%");
        assert!(dst.resume_token("dst/copy").is_none());
        let names: Vec<String> = dst
            .list(None, true)
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert!(names.iter().all(|n| !n.contains('%')), "{names:?}");
        // The received copy takes an incremental as usual.
        if i == 0 {
            let ds = src.dataset("src/db").unwrap();
            let id = ds.create_object().unwrap();
            ds.write(id, 0, b"after").unwrap();
            src.snapshot(&["src/db@b".into()]).unwrap();
            let inc = send(&src, "src/db@b", Some("@a"));
            assert_eq!(recv_s(&dst, "dst/copy", &inc).unwrap(), "dst/copy@b");
            assert!(snap_content(&dst, "dst/copy@b") == snap_content(&src, "src/db@b"));
        }
    }
}

#[test]
fn cut_incremental_resumes_and_corruption_keeps_only_verified_records() {
    let (src, mut model) = source(12);
    src.snapshot(&["src/db@a".into()]).unwrap();
    let dst = pool("dst");
    recv_s(&dst, "dst/copy", &send(&src, "src/db@a", None)).unwrap();
    let mut rng = Rng(99);
    for _ in 0..15 {
        random_op(&mut rng, &src, &mut model, 300_000);
    }
    src.snapshot(&["src/db@b".into()]).unwrap();
    let inc = send(&src, "src/db@b", Some("@a"));
    // Flip a byte in the second half: the records before it are kept.
    let mut bad = inc.clone();
    let at = inc.len() * 2 / 3;
    bad[at] ^= 0xff;
    let err = recv_s(&dst, "dst/copy", &bad).unwrap_err().to_string();
    assert!(
        err.contains("'src/db@b'") && err.contains("'dst/copy'"),
        "{err}"
    );
    // The visible copy is untouched while a partial state waits.
    assert!(snap_content(&dst, "dst/copy@a") == snap_content(&src, "src/db@a"));
    assert_eq!(dst.list_snapshots(Some("dst/copy")).unwrap().len(), 1);
    // Its base cannot go while the partial receive depends on it.
    let err = dst.destroy_snapshot("dst/copy@a").unwrap_err().to_string();
    assert!(
        err.contains("partial receive") && err.contains("receive -A dst/copy"),
        "{err}"
    );
    let rest = send_t(&src, &token(&dst, "dst/copy")).unwrap();
    assert!(
        rest.len() < inc.len(),
        "nothing was kept of the corrupt stream"
    );
    assert_eq!(recv_s(&dst, "dst/copy", &rest).unwrap(), "dst/copy@b");
    assert!(snap_content(&dst, "dst/copy@b") == snap_content(&src, "src/db@b"));
    assert!(snap_content(&dst, "dst/copy@a") == snap_content(&src, "src/db@a"));
}

#[test]
fn stale_tokens_abort_and_plain_receive() {
    let (src, _) = source(13);
    src.snapshot(&["src/db@a".into()]).unwrap();
    let full = send(&src, "src/db@a", None);
    let dst = pool("dst");
    // Without -s a cut stream leaves nothing.
    assert!(dst
        .receive("dst/copy", &mut &full[..full.len() / 2], false, &mut |_| {})
        .is_err());
    assert!(dst.resume_token("dst/copy").is_none());
    assert!(
        dst.abort_receive("dst/copy").is_err(),
        "abort with nothing to abort"
    );
    // With -s it keeps a state; -A discards it.
    recv_s(&dst, "dst/copy", &full[..full.len() / 2]).unwrap_err();
    let t = token(&dst, "dst/copy");
    let msg = dst.abort_receive("dst/copy").unwrap();
    assert!(
        msg.contains("src/db@a") && msg.contains("dst/copy"),
        "{msg}"
    );
    assert!(dst.resume_token("dst/copy").is_none());
    // The old token's stream no longer continues anything on the target.
    let rest = send_t(&src, &t).unwrap();
    let err = recv_s(&dst, "dst/copy", &rest).unwrap_err().to_string();
    assert!(err.contains("no partially received state"), "{err}");
    // A token whose snapshot is gone on the source cannot be honoured.
    recv_s(&dst, "dst/copy", &full[..full.len() / 3]).unwrap_err();
    let t = token(&dst, "dst/copy");
    src.destroy_dataset("src/db@a", false).unwrap();
    let err = send_t(&src, &t).unwrap_err().to_string();
    assert!(
        err.contains("cannot be honoured") && err.contains("receive -A"),
        "{err}"
    );
    assert!(send_t(&src, "1-garbage").is_err());
    // A whole stream of another snapshot replaces the stale state, and says so.
    src.snapshot(&["src/db@c".into()]).unwrap();
    let c = send(&src, "src/db@c", None);
    let out = dst
        .receive_with("dst/copy", &mut &c[..], &RESUMABLE, &mut |_| {})
        .unwrap();
    assert_eq!(out.snapshot, "dst/copy@c");
    let note = out.discarded.expect("the stale state is reported");
    assert!(
        note.contains("src/db@a") && note.contains("dst/copy"),
        "{note}"
    );
    assert!(snap_content(&dst, "dst/copy@c") == snap_content(&src, "src/db@c"));
}
