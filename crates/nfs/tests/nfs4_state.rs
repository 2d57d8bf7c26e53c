//! NFSv4.1 opens, I/O and locks over real RPC: OPEN (create, exclusive4_1,
//! share deny), READ/WRITE/COMMIT with stateids, CLOSE, OPEN_DOWNGRADE,
//! SETATTR, CREATE, REMOVE, RENAME, LINK, TEST_STATEID, FREE_STATEID; byte-range
//! locks between two clients, lease expiry releasing a dead client's locks, and
//! the grace period after a restart.

mod common;

use cachalot_nfs::nfs4::attrs::*;
use cachalot_nfs::nfs4::client::{op_status, Ops, Reply, Session4};
use cachalot_nfs::nfs4::consts::*;
use cachalot_nfs::xdr::{Reader, Writer};
use cachalot_nfs::{FsProvider, NfsServer, ServerConfig};
use common::*;
use std::sync::Arc;
use std::time::Duration;

const SHARE: &str = "rw=127.0.0.1,no_root_squash";

type Sid = (u32, [u8; 12]);

fn sid(r: &mut Reader<'_>) -> Sid {
    let seq = r.u32().unwrap();
    let mut o = [0u8; 12];
    o.copy_from_slice(r.fixed(12).unwrap());
    (seq, o)
}

fn put_sid(w: &mut Writer, s: Sid) {
    w.u32(s.0).fixed(&s.1);
}

fn share_root(s: &mut Session4) -> Vec<u8> {
    let mut ops = Ops::new();
    ops.op(OP_PUTROOTFH);
    ops.op(OP_LOOKUP).opaque(b"tank");
    ops.op(OP_LOOKUP).opaque(b"fs");
    ops.op(OP_GETFH);
    let rep = s.call(&ops).unwrap();
    let mut r = rep.reader();
    for op in [OP_PUTROOTFH, OP_LOOKUP, OP_LOOKUP, OP_GETFH] {
        assert_eq!(op_status(&mut r, op).unwrap(), NFS4_OK);
    }
    r.opaque(128).unwrap().to_vec()
}

/// How OPEN creates: None (no create), Some(mode) unchecked with a mode.
fn open_args(
    w: &mut Writer,
    clientid: u64,
    owner: &[u8],
    name: &[u8],
    access: u32,
    deny: u32,
    create: Option<u32>,
) {
    w.u32(0).u32(access).u32(deny).u64(clientid).opaque(owner);
    match create {
        None => {
            w.u32(0);
        }
        Some(mode) => {
            w.u32(1).u32(0);
            write_bitmap(w, &bitmap_of([FATTR4_MODE]));
            w.opaque(&mode.to_be_bytes());
        }
    }
    w.u32(0).opaque(name);
}

/// OPEN `name` in `dir`: (status, stateid, file handle).
fn open(
    s: &mut Session4,
    dir: &[u8],
    owner: &[u8],
    name: &str,
    access: u32,
    deny: u32,
    create: Option<u32>,
) -> Result<(Sid, Vec<u8>), u32> {
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(dir);
    let cid = s.clientid;
    open_args(
        ops.op(OP_OPEN),
        cid,
        owner,
        name.as_bytes(),
        access,
        deny,
        create,
    );
    ops.op(OP_GETFH);
    let rep = s.call(&ops).unwrap();
    if rep.status != NFS4_OK {
        return Err(rep.status);
    }
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    op_status(&mut r, OP_OPEN).unwrap();
    let st = sid(&mut r);
    r.fixed(20).unwrap();
    assert_eq!(r.u32().unwrap() & 4, 4, "POSIX lock semantics");
    r.u32_array(8).unwrap();
    assert_eq!(r.u32().unwrap(), 0, "no delegation");
    op_status(&mut r, OP_GETFH).unwrap();
    Ok((st, r.opaque(128).unwrap().to_vec()))
}

fn on(s: &mut Session4, fh: &[u8], f: impl FnOnce(&mut Ops)) -> Reply {
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(fh);
    f(&mut ops);
    s.call(&ops).unwrap()
}

fn write(
    s: &mut Session4,
    fh: &[u8],
    st: Sid,
    off: u64,
    data: &[u8],
    stable: u32,
) -> Result<(u32, u32), u32> {
    let rep = on(s, fh, |o| {
        let w = o.op(OP_WRITE);
        put_sid(w, st);
        w.u64(off).u32(stable).opaque(data);
    });
    if rep.status != NFS4_OK {
        return Err(rep.status);
    }
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    op_status(&mut r, OP_WRITE).unwrap();
    Ok((r.u32().unwrap(), r.u32().unwrap()))
}

fn read(
    s: &mut Session4,
    fh: &[u8],
    st: Sid,
    off: u64,
    count: u32,
) -> Result<(bool, Vec<u8>), u32> {
    let rep = on(s, fh, |o| {
        let w = o.op(OP_READ);
        put_sid(w, st);
        w.u64(off).u32(count);
    });
    if rep.status != NFS4_OK {
        return Err(rep.status);
    }
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    op_status(&mut r, OP_READ).unwrap();
    Ok((r.bool().unwrap(), r.opaque(1 << 20).unwrap().to_vec()))
}

fn close(s: &mut Session4, fh: &[u8], st: Sid) -> u32 {
    on(s, fh, |o| {
        let w = o.op(OP_CLOSE).u32(0);
        put_sid(w, st);
    })
    .status
}

#[test]
fn open_write_read_close_and_stateid_errors() {
    let env = env(SHARE);
    let mut s = Session4::establish(env.client(), b"io", 4).unwrap();
    let root = share_root(&mut s);
    assert_eq!(
        open(&mut s, &root, b"o1", "f", 3, 0, None).unwrap_err(),
        NFS4ERR_NOENT
    );
    let (st, fh) = open(&mut s, &root, b"o1", "f", 3, 0, Some(0o600)).unwrap();
    let (n, committed) = write(&mut s, &fh, st, 0, b"hello world", 0).unwrap();
    assert_eq!((n, committed), (11, 0), "UNSTABLE");
    assert_eq!(
        write(&mut s, &fh, st, 11, b"!", 2).unwrap().1,
        2,
        "FILE_SYNC"
    );
    let rep = on(&mut s, &fh, |o| {
        o.op(OP_COMMIT).u64(0).u32(0);
    });
    assert_eq!(rep.status, NFS4_OK);
    assert_eq!(
        read(&mut s, &fh, st, 0, 100).unwrap(),
        (true, b"hello world!".to_vec())
    );
    assert_eq!(
        read(&mut s, &fh, st, 6, 3).unwrap(),
        (false, b"wor".to_vec())
    );
    // The data is there for NFSv3 too.
    let (mut c3, root3) = env.mounted();
    let (fh3, _) = c3.lookup(&root3, "f").unwrap();
    assert_eq!(fh3, fh);
    assert_eq!(c3.read(&fh3, 0, 100).unwrap().0, b"hello world!");
    // Stateid errors: forged, stale (another boot), future, old.
    let forged = (1, [9u8; 12]);
    let mut stale = st;
    stale.1[0] ^= 0xff;
    assert_eq!(
        read(&mut s, &fh, forged, 0, 1).unwrap_err(),
        NFS4ERR_STALE_STATEID
    );
    let mut bad = st;
    bad.1[11] ^= 0x55;
    assert_eq!(
        read(&mut s, &fh, bad, 0, 1).unwrap_err(),
        NFS4ERR_BAD_STATEID
    );
    assert_eq!(
        read(&mut s, &fh, stale, 0, 1).unwrap_err(),
        NFS4ERR_STALE_STATEID
    );
    assert_eq!(
        read(&mut s, &fh, (st.0 + 1, st.1), 0, 1).unwrap_err(),
        NFS4ERR_BAD_STATEID
    );
    // Opening again upgrades the stateid; the old seqid is then OLD_STATEID,
    // and seqid 0 means "current".
    let (st2, _) = open(&mut s, &root, b"o1", "f", 1, 0, None).unwrap();
    assert_eq!((st2.0, st2.1), (st.0 + 1, st.1));
    assert_eq!(
        read(&mut s, &fh, st, 0, 1).unwrap_err(),
        NFS4ERR_OLD_STATEID
    );
    assert!(read(&mut s, &fh, (0, st.1), 0, 1).is_ok());
    // The anonymous stateid reads and writes when no share deny forbids.
    assert!(read(&mut s, &fh, (0, [0; 12]), 0, 1).is_ok());
    // A read-only open cannot write: OPENMODE.
    let (ro, _) = open(&mut s, &root, b"o2", "f", 1, 0, None).unwrap();
    assert_eq!(
        write(&mut s, &fh, ro, 0, b"x", 0).unwrap_err(),
        NFS4ERR_OPENMODE
    );
    // OPEN_DOWNGRADE to a subset only.
    let rep = on(&mut s, &fh, |o| {
        let w = o.op(OP_OPEN_DOWNGRADE);
        put_sid(w, st2);
        w.u32(0).u32(3).u32(1);
    });
    assert_eq!(rep.status, NFS4ERR_INVAL, "a downgrade cannot add a deny");
    let rep = on(&mut s, &fh, |o| {
        let w = o.op(OP_OPEN_DOWNGRADE);
        put_sid(w, st2);
        w.u32(0).u32(1).u32(0);
    });
    assert_eq!(rep.status, NFS4_OK);
    // TEST_STATEID reports each; CLOSE, then the stateid is gone.
    let rep = on(&mut s, &fh, |o| {
        let w = o.op(OP_TEST_STATEID).u32(3);
        put_sid(w, (0, st.1));
        put_sid(w, forged);
        put_sid(w, bad);
    });
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    assert_eq!(op_status(&mut r, OP_TEST_STATEID).unwrap(), NFS4_OK);
    assert_eq!(
        r.u32_array(8).unwrap(),
        [NFS4_OK, NFS4ERR_STALE_STATEID, NFS4ERR_BAD_STATEID]
    );
    assert_eq!(close(&mut s, &fh, (0, st.1)), NFS4_OK);
    assert_eq!(close(&mut s, &fh, (0, st.1)), NFS4ERR_BAD_STATEID);
    assert_eq!(
        read(&mut s, &fh, st2, 0, 1).unwrap_err(),
        NFS4ERR_BAD_STATEID
    );
    assert_eq!(close(&mut s, &fh, ro), NFS4_OK);
    // OPEN of a directory, and GUARDED create of an existing name.
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(&root);
    ops.op(OP_CREATE).u32(2).opaque(b"d").u32(0).opaque(b"");
    assert_eq!(s.call(&ops).unwrap().status, NFS4_OK);
    assert_eq!(
        open(&mut s, &root, b"o1", "d", 1, 0, None).unwrap_err(),
        NFS4ERR_ISDIR
    );
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(&root);
    let w = ops.op(OP_OPEN);
    w.u32(0)
        .u32(3)
        .u32(0)
        .u64(s.clientid)
        .opaque(b"o1")
        .u32(1)
        .u32(1);
    w.u32(0).opaque(b"").u32(0).opaque(b"f");
    assert_eq!(s.call(&ops).unwrap().status, NFS4ERR_EXIST);
}

#[test]
fn share_deny_and_namespace_changes() {
    let env = env(SHARE);
    let mut a = Session4::establish(env.client(), b"client-a", 4).unwrap();
    let mut b = Session4::establish(env.client(), b"client-b", 4).unwrap();
    let root = share_root(&mut a);
    // A denies writers: B cannot open for writing, but may read.
    let (sa, fh) = open(&mut a, &root, b"a", "db", 3, 2, Some(0o644)).unwrap();
    assert_eq!(
        open(&mut b, &root, b"b", "db", 2, 0, None).unwrap_err(),
        NFS4ERR_SHARE_DENIED
    );
    let (sb, _) = open(&mut b, &root, b"b", "db", 1, 0, None).unwrap();
    assert_eq!(
        write(&mut b, &fh, (0, [0; 12]), 0, b"x", 0).unwrap_err(),
        NFS4ERR_LOCKED,
        "anonymous write is denied too"
    );
    assert_eq!(
        open(&mut b, &root, b"b2", "db", 1, 1, None).unwrap_err(),
        NFS4ERR_SHARE_DENIED,
        "A reads"
    );
    assert_eq!(close(&mut a, &fh, sa), NFS4_OK);
    let (sb2, _) = open(&mut b, &root, b"b3", "db", 2, 0, None).unwrap();
    assert_eq!(close(&mut b, &fh, sb), NFS4_OK);
    assert_eq!(close(&mut b, &fh, sb2), NFS4_OK);
    // SETATTR: size needs a stateid allowing writes; mode and owners too.
    let (sa, _) = open(&mut a, &root, b"a", "db", 3, 0, None).unwrap();
    write(&mut a, &fh, sa, 0, &[7; 100], 2).unwrap();
    let setattr = |s: &mut Session4, st: Sid, mask: &[u32], vals: &[u8]| {
        on(s, &fh, |o| {
            let w = o.op(OP_SETATTR);
            put_sid(w, st);
            write_bitmap(w, &bitmap_of(mask.iter().copied()));
            w.opaque(vals);
        })
    };
    let rep = setattr(&mut a, sa, &[FATTR4_SIZE], &10u64.to_be_bytes());
    assert_eq!(rep.status, NFS4_OK);
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    op_status(&mut r, OP_SETATTR).unwrap();
    assert_eq!(r.u32_array(8).unwrap(), bitmap_of([FATTR4_SIZE]));
    let mut v = Writer::new();
    v.u32(0o640).opaque(b"1000").opaque(b"root@localdomain");
    let rep = setattr(
        &mut a,
        (0, [0; 12]),
        &[FATTR4_MODE, FATTR4_OWNER, FATTR4_OWNER_GROUP],
        &v.buf,
    );
    assert_eq!(rep.status, NFS4_OK);
    let (mut c3, root3) = env.mounted();
    let (_, at) = c3.lookup(&root3, "db").unwrap();
    assert_eq!((at.size, at.mode, at.uid, at.gid), (10, 0o640, 1000, 0));
    let mut v = Writer::new();
    v.opaque(b"nosuchuser@nowhere");
    assert_eq!(
        setattr(&mut a, sa, &[FATTR4_OWNER], &v.buf).status,
        NFS4ERR_BADOWNER
    );
    assert_eq!(
        setattr(&mut a, sa, &[FATTR4_TYPE], &1u32.to_be_bytes()).status,
        NFS4ERR_INVAL,
        "read-only attribute"
    );
    assert_eq!(
        setattr(&mut a, sa, &[FATTR4_SIZE], &[0; 3]).status,
        NFS4ERR_BADXDR
    );
    // CREATE a symlink and a fifo; LINK; RENAME; REMOVE.
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(&root);
    ops.op(OP_CREATE)
        .u32(5)
        .opaque(b"db")
        .opaque(b"sym")
        .u32(0)
        .opaque(b"");
    ops.op(OP_PUTFH).opaque(&root);
    ops.op(OP_CREATE).u32(7).opaque(b"fifo").u32(0).opaque(b"");
    ops.op(OP_PUTFH).opaque(&fh);
    ops.op(OP_SAVEFH);
    ops.op(OP_PUTFH).opaque(&root);
    ops.op(OP_LINK).opaque(b"hard");
    ops.op(OP_SAVEFH);
    ops.op(OP_RENAME).opaque(b"hard").opaque(b"moved");
    ops.op(OP_REMOVE).opaque(b"fifo");
    ops.op(OP_CREATE)
        .u32(1)
        .opaque(b"regular")
        .u32(0)
        .opaque(b"");
    let rep = a.call(&ops).unwrap();
    assert_eq!(
        rep.status, NFS4ERR_BADTYPE,
        "CREATE does not make regular files"
    );
    assert_eq!(rep.n, 13);
    assert_eq!(
        {
            let sym = c3.lookup(&root3, "sym").unwrap().0;
            c3.readlink(&sym).unwrap()
        },
        b"db"
    );
    assert_eq!(c3.lookup(&root3, "moved").unwrap().1.nlink, 2);
    assert!(c3.lookup(&root3, "hard").is_err());
    assert!(c3.lookup(&root3, "fifo").is_err());
}

/// LOCK arguments for a new lock owner of open `open`.
#[allow(clippy::too_many_arguments)]
fn lock_new(
    w: &mut Writer,
    reclaim: bool,
    write: bool,
    off: u64,
    len: u64,
    open: Sid,
    clientid: u64,
    owner: &[u8],
) {
    w.u32(if write { 2 } else { 1 })
        .bool(reclaim)
        .u64(off)
        .u64(len)
        .bool(true)
        .u32(0);
    put_sid(w, open);
    w.u32(0).u64(clientid).opaque(owner);
}

/// LOCK: Ok(lock stateid) or Err((status, conflicting owner)).
fn lock(s: &mut Session4, fh: &[u8], f: impl FnOnce(&mut Writer)) -> Result<Sid, (u32, Vec<u8>)> {
    let rep = on(s, fh, |o| f(o.op(OP_LOCK)));
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    match op_status(&mut r, OP_LOCK).unwrap() {
        NFS4_OK => Ok(sid(&mut r)),
        NFS4ERR_DENIED => {
            r.fixed(20).unwrap();
            r.u64().unwrap();
            Err((NFS4ERR_DENIED, r.opaque(1024).unwrap().to_vec()))
        }
        e => Err((e, vec![])),
    }
}

fn server(
    provider: &Arc<Provider>,
    lease: Duration,
    dir: Option<std::path::PathBuf>,
    addr: &str,
) -> NfsServer {
    let mut cfg = ServerConfig::new(addr.parse().unwrap());
    cfg.lease = lease;
    cfg.state_dir = dir;
    NfsServer::start(provider.clone() as Arc<dyn FsProvider>, cfg).unwrap()
}

#[test]
fn locks_conflict_across_clients_and_expire_with_the_lease() {
    let mut env = env(SHARE);
    env.server = Some(server(
        &env.provider,
        Duration::from_secs(3),
        None,
        "127.0.0.1:0",
    ));
    let mut a = Session4::establish(env.client(), b"client-a", 4).unwrap();
    let mut b = Session4::establish(env.client(), b"client-b", 4).unwrap();
    let root = share_root(&mut a);
    let (oa, fh) = open(&mut a, &root, b"a", "ibdata1", 3, 0, Some(0o644)).unwrap();
    let (ob, _) = open(&mut b, &root, b"b", "ibdata1", 3, 0, None).unwrap();
    let (aid, bid) = (a.clientid, b.clientid);
    let la = lock(&mut a, &fh, |w| {
        lock_new(w, false, true, 0, 100, oa, aid, b"lock-a")
    })
    .unwrap();
    // B's write lock over it is denied and names A's owner; a read lock too.
    let e = lock(&mut b, &fh, |w| {
        lock_new(w, false, true, 50, 10, ob, bid, b"lock-b")
    })
    .unwrap_err();
    assert_eq!(e, (NFS4ERR_DENIED, b"lock-a".to_vec()));
    let e = lock(&mut b, &fh, |w| {
        lock_new(w, false, false, 99, u64::MAX, ob, bid, b"lock-b")
    })
    .unwrap_err();
    assert_eq!(e.0, NFS4ERR_DENIED);
    // Beyond A's range B gets its lock; LOCKT sees both.
    let lb = lock(&mut b, &fh, |w| {
        lock_new(w, false, true, 100, 10, ob, bid, b"lock-b")
    })
    .unwrap();
    let lockt = |s: &mut Session4, off: u64, cid: u64| {
        on(s, &fh, |o| {
            o.op(OP_LOCKT)
                .u32(2)
                .u64(off)
                .u64(1)
                .u64(cid)
                .opaque(b"tester");
        })
        .status
    };
    assert_eq!(lockt(&mut a, 5, aid), NFS4ERR_DENIED);
    assert_eq!(lockt(&mut a, 105, aid), NFS4ERR_DENIED);
    assert_eq!(lockt(&mut a, 200, aid), NFS4_OK);
    // CLOSE with locks held; LOCKU, then FREE_STATEID of the lock stateid.
    assert_eq!(close(&mut b, &fh, ob), NFS4ERR_LOCKS_HELD);
    let rep = on(&mut b, &fh, |o| {
        let w = o.op(OP_LOCKU).u32(2).u32(0);
        put_sid(w, lb);
        w.u64(100).u64(10);
    });
    assert_eq!(rep.status, NFS4_OK);
    let rep = on(&mut b, &fh, |o| {
        put_sid(o.op(OP_FREE_STATEID), (0, lb.1));
    });
    assert_eq!(rep.status, NFS4_OK);
    // An existing lock owner extends its lock (bad range first).
    let e = lock(&mut a, &fh, |w| {
        w.u32(2).bool(false).u64(0).u64(0).bool(false);
        put_sid(w, la);
        w.u32(0);
    })
    .unwrap_err();
    assert_eq!(e.0, NFS4ERR_INVAL, "zero length");
    // A stops renewing its lease (it "dies"); B keeps its own alive. After the
    // lease, A's lock is gone and B gets it.
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(1000));
        b.call(&Ops::new()).unwrap();
    }
    let e = lock(&mut b, &fh, |w| {
        lock_new(w, false, true, 0, 100, ob, bid, b"lock-b2")
    });
    assert!(e.is_ok(), "{e:?}");
    assert_eq!(
        a.call(&Ops::new()).unwrap_err().status(),
        Some(NFS4ERR_BADSESSION)
    );
}

/// PUTFH and OPEN with CLAIM_PREVIOUS (a reclaim) for owner "a" of `clientid`.
fn reclaim_open(fh: &[u8], clientid: u64) -> Ops {
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(fh);
    let w = ops.op(OP_OPEN);
    w.u32(0).u32(3).u32(0).u64(clientid).opaque(b"a");
    w.u32(0).u32(1).u32(0); // no create; CLAIM_PREVIOUS, no delegation
    ops
}

#[test]
fn grace_after_restart_lets_old_clients_reclaim_first() {
    let mut env = env(SHARE);
    let state = env.dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let lease = Duration::from_secs(3);
    env.server = Some(server(
        &env.provider,
        lease,
        Some(state.clone()),
        "127.0.0.1:0",
    ));
    let addr = env.addr();
    let mut a = Session4::establish(env.client(), b"client-a", 4).unwrap();
    let root = share_root(&mut a);
    let (oa, fh) = open(&mut a, &root, b"a", "f", 3, 0, Some(0o644)).unwrap();
    let aid = a.clientid;
    lock(&mut a, &fh, |w| {
        lock_new(w, false, true, 0, 10, oa, aid, b"la")
    })
    .unwrap();
    // Reclaiming outside a grace period is NO_GRACE.
    let ops = reclaim_open(&fh, aid);
    assert_eq!(a.call(&ops).unwrap().status, NFS4ERR_NO_GRACE);
    // The server restarts on the same port.
    env.server.take().unwrap().stop();
    env.server = Some(server(
        &env.provider,
        lease,
        Some(state.clone()),
        &addr.to_string(),
    ));
    a.c = env.client();
    assert_eq!(
        a.call(&Ops::new()).unwrap_err().status(),
        Some(NFS4ERR_BADSESSION),
        "sessions do not survive a restart"
    );
    let mut a = Session4::establish(env.client(), b"client-a", 4).unwrap();
    let mut n = Session4::establish(env.client(), b"newcomer", 4).unwrap();
    // In grace: the newcomer may not open; A reclaims its open and lock.
    assert_eq!(
        open(&mut n, &root, b"n", "f", 1, 0, None).unwrap_err(),
        NFS4ERR_GRACE
    );
    let aid = a.clientid;
    let ops = reclaim_open(&fh, aid);
    let rep = a.call(&ops).unwrap();
    assert_eq!(rep.status, NFS4_OK);
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    op_status(&mut r, OP_OPEN).unwrap();
    let oa = sid(&mut r);
    let nid0 = n.clientid;
    let e = lock(&mut n, &fh, |w| {
        lock_new(w, false, true, 0, 10, oa, nid0, b"ln")
    });
    assert_eq!(e.unwrap_err().0, NFS4ERR_GRACE);
    let reclaimed = lock(&mut a, &fh, |w| {
        lock_new(w, true, true, 0, 10, oa, aid, b"la");
    });
    assert!(reclaimed.is_ok(), "{reclaimed:?}");
    let mut ops = Ops::new();
    ops.op(OP_RECLAIM_COMPLETE).bool(false);
    assert_eq!(a.call(&ops).unwrap().status, NFS4_OK);
    // Every recorded client reclaimed: grace is over; the lock is A's again.
    let (on_, _) = open(&mut n, &root, b"n", "f", 3, 0, None).unwrap();
    let nid = n.clientid;
    let e = lock(&mut n, &fh, |w| {
        lock_new(w, false, true, 5, 1, on_, nid, b"ln")
    })
    .unwrap_err();
    assert_eq!(e, (NFS4ERR_DENIED, b"la".to_vec()));
}
