//! NFSv4.1 over real RPC against a real pool: COMPOUND decoding and the minor
//! version check, sessions (EXCHANGE_ID, CREATE_SESSION, SEQUENCE slots and
//! their reply cache, DESTROY_*), and the session rules' error codes.

mod common;

use cachalot_nfs::nfs4::client::{
    create_session_args, exchange_id_args, op_status, Ops, Reply, Session4,
};
use cachalot_nfs::nfs4::consts::*;
use cachalot_nfs::rpc::PROG_NFS;
use common::*;

const SHARE: &str = "rw=127.0.0.1,no_root_squash";

fn session(env: &Env, owner: &[u8]) -> Session4 {
    Session4::establish(env.client(), owner, 8).unwrap()
}

/// The statuses of a reply's results, in order, for operations `ops`.
fn statuses(rep: &Reply, ops: &[u32]) -> Vec<u32> {
    let mut r = rep.reader();
    let mut out = vec![];
    for (i, op) in ops.iter().enumerate() {
        let s = op_status(&mut r, *op).unwrap();
        out.push(s);
        if s != NFS4_OK || i + 1 == ops.len() {
            break;
        }
        if *op == OP_SEQUENCE {
            r.fixed(36).unwrap();
            continue;
        }
        // Results of the operations these tests chain have no body when OK.
        assert!(
            matches!(*op, OP_RECLAIM_COMPLETE | OP_DESTROY_SESSION | OP_PUTROOTFH),
            "no body expected for op {op}"
        );
    }
    out
}

#[test]
fn null_and_minor_versions() {
    let env = env(SHARE);
    let mut c = env.client();
    assert!(c.call(PROG_NFS, 4, 0, &[]).unwrap().is_empty());
    let mut ops = Ops::new();
    ops.op(OP_PUTROOTFH);
    for minor in [0, 2, 7] {
        let rep = Session4::raw(&mut c, &ops, minor).unwrap();
        assert_eq!(rep.status, NFS4ERR_MINOR_VERS_MISMATCH, "minor {minor}");
        assert_eq!(rep.n, 0, "no results");
        assert!(rep.raw.windows(8).any(|w| w == b"cachalot"), "tag echoed");
    }
    // Minor version 1 outside a session.
    let rep = Session4::raw(&mut c, &ops, 1).unwrap();
    assert_eq!(rep.status, NFS4ERR_OP_NOT_IN_SESSION);
    assert_eq!(rep.n, 1);
    // An empty COMPOUND is fine.
    let rep = Session4::raw(&mut c, &Ops::new(), 1).unwrap();
    assert_eq!((rep.status, rep.n), (NFS4_OK, 0));
    // A header that does not decode is GARBAGE_ARGS.
    assert!(matches!(
        c.call(PROG_NFS, 4, 1, &[0, 0, 0]),
        Err(cachalot_nfs::client::Error::Rpc(
            cachalot_nfs::rpc::RpcError::GarbageArgs
        ))
    ));
    assert!(c.call(PROG_NFS, 4, 2, &[]).is_err(), "no procedure 2");
}

#[test]
fn slots_give_exactly_once_replies() {
    let env = env(SHARE);
    let mut s = session(&env, b"client-a");
    // SEQUENCE + RECLAIM_COMPLETE: the second RECLAIM_COMPLETE of a client is
    // COMPLETE_ALREADY, so a retry that ran again would show it.
    let mut ops = Ops::new();
    s.sequence_op(&mut ops, 1, 1, true);
    ops.op(OP_RECLAIM_COMPLETE).bool(false);
    let first = Session4::raw(&mut s.c, &ops, 1).unwrap();
    assert_eq!(first.status, NFS4_OK);
    let again = Session4::raw(&mut s.c, &ops, 1).unwrap();
    assert_eq!(again.raw, first.raw, "a retry gets the cached reply");
    // The next sequence id runs the request again.
    let mut ops = Ops::new();
    s.sequence_op(&mut ops, 1, 2, true);
    ops.op(OP_RECLAIM_COMPLETE).bool(false);
    let rep = Session4::raw(&mut s.c, &ops, 1).unwrap();
    assert_eq!(
        statuses(&rep, &[OP_SEQUENCE, OP_RECLAIM_COMPLETE]),
        [NFS4_OK, NFS4ERR_COMPLETE_ALREADY]
    );
    // Same slot and sequence id with other arguments: a false retry.
    let mut other = Ops::new();
    s.sequence_op(&mut other, 1, 2, true);
    other.op(OP_PUTROOTFH);
    let rep = Session4::raw(&mut s.c, &other, 1).unwrap();
    assert_eq!(rep.status, NFS4ERR_SEQ_FALSE_RETRY);
    // Skipping a sequence id, or going back, is misordered.
    for seq in [4, 1, 0] {
        let mut o = Ops::new();
        s.sequence_op(&mut o, 1, seq, true);
        assert_eq!(
            Session4::raw(&mut s.c, &o, 1).unwrap().status,
            NFS4ERR_SEQ_MISORDERED,
            "seq {seq}"
        );
    }
    // A slot beyond the table.
    let mut o = Ops::new();
    s.sequence_op(&mut o, 8, 1, true);
    assert_eq!(
        Session4::raw(&mut s.c, &o, 1).unwrap().status,
        NFS4ERR_BADSLOT
    );
    // A reply not cached (sa_cachethis false) is RETRY_UNCACHED_REP on retry.
    let mut o = Ops::new();
    s.sequence_op(&mut o, 2, 1, false);
    o.op(OP_PUTROOTFH);
    let _ = Session4::raw(&mut s.c, &o, 1).unwrap();
    assert_eq!(
        Session4::raw(&mut s.c, &o, 1).unwrap().status,
        NFS4ERR_RETRY_UNCACHED_REP
    );
    // Slot 0 is untouched by all this.
    s.call(&Ops::new()).unwrap();
}

#[test]
fn session_rules_and_bad_compounds() {
    let env = env(SHARE);
    let mut s = session(&env, b"client-b");
    // SEQUENCE anywhere but first.
    let mut ops = Ops::new();
    s.sequence_op(&mut ops, 0, s.seq[0], true);
    s.sequence_op(&mut ops, 1, 1, true);
    let rep = Session4::raw(&mut s.c, &ops, 1).unwrap();
    s.seq[0] += 1;
    assert_eq!(rep.status, NFS4ERR_SEQUENCE_POS);
    assert_eq!(rep.n, 2);
    // EXCHANGE_ID with company outside a session.
    let mut ops = Ops::new();
    exchange_id_args(ops.op(OP_EXCHANGE_ID), b"x", [0; 8], 0);
    ops.op(OP_PUTROOTFH);
    let rep = Session4::raw(&mut s.c, &ops, 1).unwrap();
    assert_eq!((rep.status, rep.n), (NFS4ERR_NOT_ONLY_OP, 1));
    // Operation numbers that do not exist: OP_ILLEGAL.
    for bad in [0u32, 1, 2, 59, 10044, 9999, u32::MAX] {
        let mut ops = Ops::new();
        ops.op(bad);
        let rep = s.call(&ops).unwrap();
        let mut r = rep.reader();
        assert_eq!(r.u32().unwrap(), OP_ILLEGAL, "op {bad}");
        assert_eq!(r.u32().unwrap(), NFS4ERR_OP_ILLEGAL);
        assert_eq!(rep.status, NFS4ERR_OP_ILLEGAL);
    }
    // Arguments cut short: BADXDR; a 4 GiB name length too.
    let mut ops = Ops::new();
    ops.op(OP_LOOKUP).u32(u32::MAX);
    let rep = s.call(&ops).unwrap();
    assert_eq!(rep.status, NFS4ERR_BADXDR);
    let mut ops = Ops::new();
    ops.op(OP_SETATTR).u32(1);
    let rep = s.call(&ops).unwrap();
    assert_eq!(rep.status, NFS4ERR_BADXDR);
    // More operations than the session allows (16 asked), and hundreds of them.
    for n in [17, 500, 100_000] {
        let mut ops = Ops::new();
        for _ in 0..n {
            ops.op(OP_PUTROOTFH);
        }
        let mut all = Ops::new();
        s.sequence_op(&mut all, 0, s.seq[0], true);
        all.n += ops.n;
        all.w.buf.extend_from_slice(&ops.w.buf);
        let rep = Session4::raw(&mut s.c, &all, 1).unwrap();
        assert_eq!((rep.status, rep.n), (NFS4ERR_TOO_MANY_OPS, 1), "{n} ops");
    }
    // A count that promises more operations than the message holds.
    let mut all = Ops::new();
    s.sequence_op(&mut all, 0, s.seq[0], true);
    all.n = 3;
    let rep = Session4::raw(&mut s.c, &all, 1).unwrap();
    s.seq[0] += 1;
    assert_eq!((rep.status, rep.n), (NFS4ERR_BADXDR, 2));
    // v4.0-only, delegation and pNFS operations get their errors.
    for (op, want) in [
        (OP_RENEW, NFS4ERR_NOTSUPP),
        (OP_DELEGPURGE, NFS4ERR_NOTSUPP),
        (OP_GETDEVICELIST, NFS4ERR_NOTSUPP),
    ] {
        let mut ops = Ops::new();
        let w = ops.op(op);
        match op {
            OP_GETDEVICELIST => {
                w.u32(1).u32(1).u64(0).fixed(&[0; 8]);
            }
            _ => {
                w.u64(s.clientid);
            }
        }
        assert_eq!(s.call(&ops).unwrap().status, want, "op {op}");
    }
    // State protection we cannot give.
    let mut ops = Ops::new();
    ops.op(OP_EXCHANGE_ID)
        .fixed(&[1; 8])
        .opaque(b"mach")
        .u32(0)
        .u32(SP4_MACH_CRED)
        .u32(0)
        .u32(0)
        .u32(0);
    let rep = Session4::raw(&mut s.c, &ops, 1).unwrap();
    assert_eq!(rep.status, NFS4ERR_INVAL);
}

#[test]
fn create_and_destroy_sessions_and_clients() {
    let env = env(SHARE);
    let mut c = env.client();
    let (id, seq, flags) = Session4::exchange_id(&mut c, b"client-c", *b"boot0001").unwrap();
    assert_eq!(flags & EXCHGID4_FLAG_CONFIRMED_R, 0, "a new record");
    assert_eq!(
        flags & EXCHGID4_FLAG_USE_NON_PNFS,
        EXCHGID4_FLAG_USE_NON_PNFS
    );
    // CREATE_SESSION: a wrong sequence, then the right one, then a retry.
    let cs = |c: &mut cachalot_nfs::client::Client, id: u64, seq: u32| {
        let mut ops = Ops::new();
        create_session_args(ops.op(OP_CREATE_SESSION), id, seq, 4);
        Session4::raw(c, &ops, 1).unwrap()
    };
    assert_eq!(cs(&mut c, id, seq + 1).status, NFS4ERR_SEQ_MISORDERED);
    assert_eq!(cs(&mut c, id ^ 1, seq).status, NFS4ERR_STALE_CLIENTID);
    let first = cs(&mut c, id, seq);
    assert_eq!(first.status, NFS4_OK);
    let retry = cs(&mut c, id, seq);
    assert_eq!(
        retry.raw, first.raw,
        "a retried CREATE_SESSION gets its reply"
    );
    let mut sid = [0u8; 16];
    sid.copy_from_slice(&first.body()[8..24]);
    // The same client asking again learns its record is confirmed.
    let (id2, _, flags) = Session4::exchange_id(&mut c, b"client-c", *b"boot0001").unwrap();
    assert_eq!(id2, id);
    assert_ne!(flags & EXCHGID4_FLAG_CONFIRMED_R, 0);
    // Another principal cannot take the owner over while it holds a session.
    let mut other = env.client();
    other.as_user(1000, 1000);
    assert_eq!(
        Session4::exchange_id(&mut other, b"client-c", *b"boot0002")
            .unwrap_err()
            .status(),
        Some(NFS4ERR_CLID_INUSE)
    );
    // DESTROY_CLIENTID while a session exists: busy.
    let mut ops = Ops::new();
    ops.op(OP_DESTROY_CLIENTID).u64(id);
    assert_eq!(
        Session4::raw(&mut c, &ops, 1).unwrap().status,
        NFS4ERR_CLIENTID_BUSY
    );
    let mut d = Ops::new();
    d.op(OP_DESTROY_SESSION).fixed(&sid);
    assert_eq!(Session4::raw(&mut c, &d, 1).unwrap().status, NFS4_OK);
    assert_eq!(
        Session4::raw(&mut c, &d, 1).unwrap().status,
        NFS4ERR_BADSESSION
    );
    // A SEQUENCE for the destroyed session.
    let mut o = Ops::new();
    o.op(OP_SEQUENCE)
        .fixed(&sid)
        .u32(1)
        .u32(0)
        .u32(0)
        .bool(true);
    assert_eq!(
        Session4::raw(&mut c, &o, 1).unwrap().status,
        NFS4ERR_BADSESSION
    );
    // BIND_CONN_TO_SESSION to it, too.
    let mut o = Ops::new();
    o.op(OP_BIND_CONN_TO_SESSION).fixed(&sid).u32(3).bool(false);
    assert_eq!(
        Session4::raw(&mut c, &o, 1).unwrap().status,
        NFS4ERR_BADSESSION
    );
    assert_eq!(Session4::raw(&mut c, &ops, 1).unwrap().status, NFS4_OK);
    assert_eq!(
        Session4::raw(&mut c, &ops, 1).unwrap().status,
        NFS4ERR_STALE_CLIENTID
    );
}

#[test]
fn a_rebooted_client_replaces_its_old_state() {
    let env = env(SHARE);
    let mut old = session(&env, b"client-d");
    old.call(&Ops::new()).unwrap();
    // BIND_CONN_TO_SESSION on a new connection: fore channel only.
    let mut c = env.client();
    let mut o = Ops::new();
    o.op(OP_BIND_CONN_TO_SESSION)
        .fixed(&old.sessionid)
        .u32(CDFC4_FORE_OR_BOTH)
        .bool(false);
    let rep = Session4::raw(&mut c, &o, 1).unwrap();
    assert_eq!(rep.status, NFS4_OK);
    assert_eq!(&rep.body()[8..24], &old.sessionid);
    assert_eq!(&rep.body()[24..28], &CDFS4_FORE.to_be_bytes());
    // The same owner with a new verifier: a new client id, and once its
    // session is created the old one is gone.
    let (id, seq, _) = Session4::exchange_id(&mut c, b"client-d", *b"rebooted").unwrap();
    assert_ne!(id, old.clientid);
    old.call(&Ops::new()).unwrap();
    let mut ops = Ops::new();
    create_session_args(ops.op(OP_CREATE_SESSION), id, seq, 2);
    assert_eq!(Session4::raw(&mut c, &ops, 1).unwrap().status, NFS4_OK);
    assert_eq!(
        old.call(&Ops::new()).unwrap_err().status(),
        Some(NFS4ERR_BADSESSION)
    );
}

/// `nfs.ops` counts a COMPOUND once, named by its operations after SEQUENCE,
/// with the share, the file (named by the OPEN that created it) and the
/// bytes of its WRITE; not one record per operation (a WRITE after PUTFH
/// used to be counted with no share or file at all).
#[test]
fn a_compound_is_one_nfs_ops_record_with_its_share_and_file() {
    let env = env_named("anl", SHARE);
    let mut s = session(&env, b"analytics");
    s.reclaim_complete().unwrap();
    let root = s.lookup_path("/anl/fs").unwrap();
    let (sid, fh) = s.open_create(&root, b"o", "data.bin", 0o644).unwrap();
    for i in 0..3 {
        s.write(&fh, sid, i * 4096, &[7u8; 4096], 0).unwrap();
    }
    let ops = cachalot_analytics::global().get("nfs.ops").unwrap();
    let rows: Vec<_> = ops
        .snapshot()
        .rows
        .into_iter()
        .filter(|r| r.keys[1] == "anl/fs")
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r.keys[2].as_str()).collect();
    let write = rows
        .iter()
        .find(|r| r.keys[2] == "v4.putfh+write")
        .unwrap_or_else(|| panic!("no COMPOUND record of the writes: {names:?}"));
    assert_eq!(
        (write.keys[3].as_str(), write.count, write.bytes),
        ("/data.bin", 3, 3 * 4096)
    );
    assert!(
        names
            .iter()
            .all(|n| !["v4.putfh", "v4.write", "v4.sequence"].contains(n)),
        "one record per COMPOUND, not per operation: {names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("v4.putfh+open+")),
        "{names:?}"
    );
}
