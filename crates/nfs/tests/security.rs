//! Shares, credentials and hostile input: client lists, squashing, read-only
//! shares, permissions, stale and foreign handles, malformed RPC.

mod common;

use cachalot_nfs::client::{Client, Error};
use cachalot_nfs::nfs3::*;
use cachalot_nfs::rpc::{self, Cred, RpcError, PROG_MOUNT, PROG_NFS};
use cachalot_nfs::xdr::Writer;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn st<T: std::fmt::Debug>(r: Result<T, Error>) -> u32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.status().unwrap_or_else(|| panic!("not a status: {e:?}")),
    }
}

fn rpc_err<T: std::fmt::Debug>(r: Result<T, Error>) -> RpcError {
    match r {
        Err(Error::Rpc(e)) => e,
        other => panic!("expected an RPC error, got {other:?}"),
    }
}

#[test]
fn root_is_squashed_by_default() {
    let env = env("on");
    let (mut c, root) = env.mounted();
    // Root (squashed to nobody) may not create in the root-owned 0755 root.
    assert_eq!(st(c.create_file(&root, "f", 0o644)), NFS3ERR_ACCES);
    let a = c.getattr(&root).unwrap();
    assert_eq!((a.uid, a.mode & 0o777), (0, 0o755));
    // Open the directory up through the POSIX layer, then root's files belong
    // to nobody.
    let fs = env.provider.stores.lock()[0].clone();
    let _ = fs;
    env.store
        .set_prop("tank/fs", "sharenfs", "rw=127.0.0.1,no_root_squash")
        .unwrap();
    c.setattr(
        &root,
        &cachalot_nfs::nfs3::args::Sattr {
            mode: Some(0o777),
            ..Default::default()
        },
    )
    .unwrap();
    env.store.set_prop("tank/fs", "sharenfs", "on").unwrap();
    let (_, a) = c.create_file(&root, "f", 0o644).unwrap();
    assert_eq!((a.uid, a.gid), (65534, 65534));
    // all_squash with anonuid/anongid maps everyone.
    env.store
        .set_prop("tank/fs", "sharenfs", "all_squash,anonuid=321,anongid=654")
        .unwrap();
    c.as_user(1000, 1000);
    let (_, a) = c.create_file(&root, "g", 0o644).unwrap();
    assert_eq!((a.uid, a.gid), (321, 654));
}

#[test]
fn other_users_private_file_is_unreadable() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    let (f, _) = c.create_file(&root, "secret", 0o600).unwrap();
    c.write(&f, 0, b"top secret", 2).unwrap();
    c.setattr(
        &f,
        &cachalot_nfs::nfs3::args::Sattr {
            uid: Some(1001),
            gid: Some(1001),
            ..Default::default()
        },
    )
    .unwrap();
    c.as_user(1000, 1000);
    assert_eq!(st(c.read(&f, 0, 100)), NFS3ERR_ACCES);
    assert_eq!(st(c.write(&f, 0, b"x", 0)), NFS3ERR_ACCES);
    assert_eq!(
        c.access(&f, 0x3f).unwrap() & (ACCESS_READ | ACCESS_MODIFY),
        0
    );
    c.as_user(1001, 1001);
    assert_eq!(c.read(&f, 0, 100).unwrap().0, b"top secret");
    // The owner may write a file it made read-only (knfsd's owner override).
    c.as_user(0, 0);
    let (ro, _) = c.create_file(&root, "ro", 0o444).unwrap();
    c.write(&ro, 0, b"ok", 2).unwrap();
}

#[test]
fn client_outside_the_list_is_refused() {
    let env = env("rw=10.0.0.0/8");
    let mut c = env.client();
    assert_eq!(st(c.mount("/tank/fs")), 13, "MNT3ERR_ACCES");
    env.store
        .set_prop("tank/fs", "sharenfs", "rw=127.0.0.0/8")
        .unwrap();
    let root = c.mount("/tank/fs").unwrap();
    c.getattr(&root).unwrap();
    // The change applies at once to handles already given out.
    env.store
        .set_prop("tank/fs", "sharenfs", "rw=10.0.0.0/8")
        .unwrap();
    assert_eq!(st(c.getattr(&root)), NFS3ERR_ACCES);
    env.store.set_prop("tank/fs", "sharenfs", "off").unwrap();
    assert_eq!(st(c.getattr(&root)), NFS3ERR_ACCES);
    assert_eq!(st(c.mount("/tank/fs")), 13);
    // Read-only clients read but never change.
    env.store
        .set_prop("tank/fs", "sharenfs", "rw=10.0.0.0/8,ro=127.0.0.1")
        .unwrap();
    let root = c.mount("/tank/fs").unwrap();
    c.getattr(&root).unwrap();
    assert_eq!(st(c.create_file(&root, "f", 0o644)), NFS3ERR_ROFS);
    assert_eq!(st(c.mkdir(&root, "d", 0o755)), NFS3ERR_ROFS);
    assert_eq!(c.access(&root, 0x3f).unwrap() & ACCESS_MODIFY, 0);
    // Inherited: sharing the parent shares the child unless it says otherwise.
    env.store.inherit_prop("tank/fs", "sharenfs").unwrap();
    assert_eq!(st(c.mount("/tank/fs")), 13);
    env.store
        .set_prop("tank", "sharenfs", "rw=127.0.0.1")
        .unwrap();
    let root = c.mount("/tank/fs").unwrap();
    c.mount("/tank").unwrap();
    // A change on the parent reaches requests on the child's handles at once
    // (the server reuses parsed options only while the catalog is unchanged).
    c.getattr(&root).unwrap();
    env.store
        .set_prop("tank", "sharenfs", "rw=10.0.0.0/8")
        .unwrap();
    assert_eq!(st(c.getattr(&root)), NFS3ERR_ACCES);
}

#[test]
fn stale_and_foreign_handles() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    let (f, a) = c.create_file(&root, "f", 0o644).unwrap();
    c.remove(&root, "f").unwrap();
    assert_eq!(st(c.getattr(&f)), NFS3ERR_STALE);
    env.store.sync().unwrap();
    let (f2, a2) = c.create_file(&root, "f", 0o644).unwrap();
    assert_ne!(f, f2);
    assert_eq!(
        st(c.getattr(&f)),
        NFS3ERR_STALE,
        "old handle after {a:?} -> {a2:?}"
    );
    // Not ours at all.
    assert_eq!(st(c.getattr(b"short")), NFS3ERR_BADHANDLE);
    assert_eq!(st(c.getattr(&[0u8; 44])), NFS3ERR_BADHANDLE);
    // A handle from another pool.
    let other = env_named("other", "rw=127.0.0.1");
    let (mut oc, oroot) = other.mounted();
    oc.getattr(&oroot).unwrap();
    assert_eq!(st(c.getattr(&oroot)), NFS3ERR_STALE);
    // A destroyed dataset.
    env.store
        .create_dataset(
            "tank/gone",
            cachalot_datasets::DatasetKind::Filesystem,
            None,
            &[("sharenfs".into(), "on".into())],
            false,
        )
        .unwrap();
    let groot = c.mount("/tank/gone").unwrap();
    c.getattr(&groot).unwrap();
    env.server.as_ref().unwrap().exports().forget("tank/gone");
    env.provider.clear();
    env.store.destroy_dataset("tank/gone", false).unwrap();
    assert_eq!(st(c.getattr(&groot)), NFS3ERR_STALE);
    // The handle of a dataset that is not shared.
    env.store
        .create_dataset(
            "tank/private",
            cachalot_datasets::DatasetKind::Filesystem,
            None,
            &[],
            false,
        )
        .unwrap();
    let h = c.mount("/tank/fs").unwrap();
    let mut forged = h.clone();
    let ds = env.store.dataset("tank/private").unwrap();
    forged[12..20].copy_from_slice(&ds.id().to_be_bytes());
    assert_eq!(st(c.getattr(&forged)), NFS3ERR_ACCES);
}

#[test]
fn handles_survive_restart_and_export_import() {
    let mut env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    let (f, _) = c.create_file(&root, "keep", 0o644).unwrap();
    let (_, _, verf1) = c.write(&f, 0, b"durable data", 0).unwrap();
    c.commit(&f).unwrap();
    drop(c);
    env.server.take().unwrap().stop();
    env.provider.clear();
    env.provider.stores.lock().clear();
    env.store.export().unwrap();
    std::thread::sleep(Duration::from_millis(10));
    let store = cachalot_datasets::Store::import(&[env.dev.clone()], Some("tank"), opts()).unwrap();
    env.provider.stores.lock().push(store.clone());
    env.store = store;
    env.server = Some(start(&env.provider));
    let mut c = env.client();
    assert_eq!(c.read(&f, 0, 100).unwrap().0, b"durable data");
    assert_eq!(c.getattr(&root).unwrap().ftype, 2);
    let (_, _, verf2) = c.write(&f, 0, b"D", 0).unwrap();
    assert_ne!(verf1, verf2, "a restart changes the write verifier");
}

#[test]
fn retransmitted_requests_get_the_first_reply() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    let mut a = Writer::new();
    a.opaque(&root).opaque(b"once").u32(1);
    cachalot_nfs::client::sattr(&mut a, &Default::default());
    let first = c.call_xid(777, PROG_NFS, 3, 8, &a.buf).unwrap();
    // After a reconnect (same client address, same xid).
    let mut c2 = env.client();
    let again = c2.call_xid(777, PROG_NFS, 3, 8, &a.buf).unwrap();
    assert_eq!(first, again);
    assert_eq!(&first[..4], &[0, 0, 0, 0], "OK, not EXIST");
    let mut r = Writer::new();
    r.opaque(&root).opaque(b"once");
    let gone = c.call_xid(778, PROG_NFS, 3, 12, &r.buf).unwrap();
    let gone2 = c2.call_xid(778, PROG_NFS, 3, 12, &r.buf).unwrap();
    assert_eq!(gone, gone2, "a retried REMOVE is not NOENT");
    // A new xid is a new request.
    let third = c.call_xid(779, PROG_NFS, 3, 12, &r.buf).unwrap();
    assert_eq!(&third[..4], &NFS3ERR_NOENT.to_be_bytes());
}

#[test]
fn snapshots_are_readable_and_read_only() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    let (f, _) = c.create_file(&root, "f", 0o644).unwrap();
    c.write(&f, 0, b"before", 2).unwrap();
    env.store.snapshot(&["tank/fs@s1".to_string()]).unwrap();
    c.write(&f, 0, b"AFTER!", 2).unwrap();
    let (ctl, _) = c.lookup(&root, ".cachalot").unwrap();
    let (snaps, _) = c.lookup(&ctl, "snapshot").unwrap();
    let names: Vec<Vec<u8>> = c
        .readdir_all(&snaps, 4096, true)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(names.contains(&b"s1".to_vec()), "{names:?}");
    let (s1, a) = c.lookup(&snaps, "s1").unwrap();
    assert_eq!(a.ftype, 2);
    let (sf, sa) = c.lookup(&s1, "f").unwrap();
    assert_ne!(sa.fsid, c.getattr(&f).unwrap().fsid);
    assert_eq!(c.read(&sf, 0, 100).unwrap().0, b"before");
    assert_eq!(c.read(&f, 0, 100).unwrap().0, b"AFTER!");
    assert_eq!(st(c.write(&sf, 0, b"x", 0)), NFS3ERR_ROFS);
    assert_eq!(st(c.create_file(&s1, "new", 0o644)), NFS3ERR_ROFS);
    assert_eq!(st(c.lookup(&snaps, "nope")), NFS3ERR_NOENT);
    assert_eq!(c.lookup(&s1, "..").unwrap().0, snaps);
    env.store.destroy_snapshot("tank/fs@s1").unwrap();
    assert_eq!(st(c.read(&sf, 0, 10)), NFS3ERR_STALE);
}

fn raw_call(c: &mut Client, msg: &[u8]) -> Option<Vec<u8>> {
    let mut rec = Vec::new();
    rpc::write_record(&mut rec, msg).unwrap();
    c.send_raw(&rec).unwrap();
    c.read_reply().unwrap()
}

#[test]
fn malformed_rpc_gets_rpc_errors() {
    let env = env("rw=127.0.0.1");
    let (mut c, root) = env.mounted();
    assert_eq!(rpc_err(c.call(424242, 1, 0, &[])), RpcError::ProgUnavail);
    assert_eq!(
        rpc_err(c.call(PROG_NFS, 2, 0, &[])),
        RpcError::ProgMismatch { low: 3, high: 4 }
    );
    assert_eq!(
        rpc_err(c.call(PROG_MOUNT, 1, 0, &[])),
        RpcError::ProgMismatch { low: 3, high: 3 }
    );
    assert_eq!(rpc_err(c.call(PROG_NFS, 3, 22, &[])), RpcError::ProcUnavail);
    assert_eq!(
        rpc_err(c.call(PROG_NFS, 3, 1, &[0, 0, 0])),
        RpcError::GarbageArgs
    );
    assert_eq!(
        rpc_err(c.call(PROG_NFS, 3, 1, &[0xff, 0xff, 0xff, 0xff])),
        RpcError::GarbageArgs,
        "a handle length of 4 GiB"
    );
    let mut a = Writer::new();
    a.opaque(&root).opaque(&[b'x'; 2000]);
    assert_eq!(
        rpc_err(c.call(PROG_NFS, 3, 3, &a.buf)),
        RpcError::GarbageArgs
    );
    // RPC version 3 and an unknown credential flavor.
    let mut m = rpc::encode_call(5, PROG_NFS, 3, 0, &Cred::None, &[]);
    m[8..12].copy_from_slice(&3u32.to_be_bytes());
    let reply = raw_call(&mut c, &m).unwrap();
    assert!(matches!(
        cachalot_nfs::client::decode_reply(5, &reply),
        Err(Error::Rpc(RpcError::RpcMismatch))
    ));
    let mut m = rpc::encode_call(6, PROG_NFS, 3, 0, &Cred::None, &[]);
    m[24..28].copy_from_slice(&6u32.to_be_bytes());
    let reply = raw_call(&mut c, &m).unwrap();
    assert!(matches!(
        cachalot_nfs::client::decode_reply(6, &reply),
        Err(Error::Rpc(RpcError::Auth(5)))
    ));
    // The connection still works after all of that.
    c.getattr(&root).unwrap();
}

#[test]
fn truncated_and_oversized_records_close_only_their_connection() {
    let env = env("rw=127.0.0.1");
    let (mut good, root) = env.mounted();
    // A record that promises more than it sends, left hanging.
    let mut hang = TcpStream::connect(env.addr()).unwrap();
    hang.write_all(&(0x8000_0000u32 | 100).to_be_bytes())
        .unwrap();
    hang.write_all(&[1, 2, 3]).unwrap();
    good.getattr(&root).unwrap();
    // An oversized record: the server closes that connection without reading it.
    let mut big = TcpStream::connect(env.addr()).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    big.write_all(&(0x8000_0000u32 | 0x7fff_0000).to_be_bytes())
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(big.read(&mut buf).unwrap_or(0), 0, "closed");
    // Fragments that add up past the limit.
    let mut frag = TcpStream::connect(env.addr()).unwrap();
    frag.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let chunk = vec![0u8; 1 << 20];
    let mut closed = false;
    for _ in 0..3 {
        if frag.write_all(&((1u32 << 20).to_be_bytes())).is_err() || frag.write_all(&chunk).is_err()
        {
            closed = true;
            break;
        }
    }
    if !closed {
        assert_eq!(frag.read(&mut buf).unwrap_or(0), 0, "closed");
    }
    // A message that is not a call is dropped, the connection stays.
    let mut c = env.client();
    let mut not_call = Writer::new();
    not_call.u32(9).u32(1).u32(0);
    let mut rec = Vec::new();
    rpc::write_record(&mut rec, &not_call.buf).unwrap();
    c.send_raw(&rec).unwrap();
    c.getattr(&root).unwrap();
    drop(hang);
    good.getattr(&root).unwrap();
}

#[test]
fn a_client_that_never_reads_replies_stalls_only_itself() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    let (f, _) = c.create_file(&root, "big", 0o644).unwrap();
    c.write(&f, 0, &vec![7u8; 1 << 20], 0).unwrap();
    // 200 one-MiB READs sent, no reply read: its writer blocks on a full socket.
    let mut greedy = TcpStream::connect(env.addr()).unwrap();
    greedy
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut a = Writer::new();
    a.opaque(&f).u64(0).u32(1 << 20);
    for xid in 0..200 {
        let msg = rpc::encode_call(xid, PROG_NFS, 3, 6, &Cred::None, &a.buf);
        let mut rec = Vec::new();
        rpc::write_record(&mut rec, &msg).unwrap();
        if greedy.write_all(&rec).is_err() {
            break; // the server stopped reading: its in-flight limit is reached
        }
    }
    // Everyone else is served (a stall would end in the client's read timeout),
    // more requests than the worker pool has threads.
    for _ in 0..64 {
        let (data, _) = c.read(&f, 0, 4096).unwrap();
        assert_eq!(data.len(), 4096);
    }
    let mut other = env.client();
    other.getattr(&root).unwrap();
    drop(greedy);
}
