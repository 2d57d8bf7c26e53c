//! The NFSv4.1 reply cache's memory is bounded, over real RPC against a real
//! pool: CREATE_SESSION negotiates ca_maxresponsesize_cached into
//! [MIN_CACHED, MAX_CACHED] and at most MAX_SLOTS slots; a COMPOUND that asks
//! to be cached and would not fit its slot is cut short with
//! REP_TOO_BIG_TO_CACHE (and that short reply is what a retry gets); a client
//! holds at most MAX_SESSIONS_PER_CLIENT sessions; and all sessions together
//! reserve no more than the server's reply cache budget, later ones getting
//! fewer slots, then DELAY until a session goes.

mod common;

use cachalot_nfs::nfs4::attrs::FATTR4_TYPE;
use cachalot_nfs::nfs4::client::{op_status, Ops, Reply, Session4};
use cachalot_nfs::nfs4::consts::*;
use cachalot_nfs::nfs4::state::{MAX_CACHED, MAX_SESSIONS_PER_CLIENT, MAX_SLOTS, MIN_CACHED};
use cachalot_nfs::{FsProvider, NfsServer, ServerConfig};
use common::*;
use std::sync::Arc;

const SHARE: &str = "rw=127.0.0.1,no_root_squash";

fn server_with_budget(env: &Env, budget: usize) -> NfsServer {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.reply_cache = budget;
    NfsServer::start(env.provider.clone() as Arc<dyn FsProvider>, cfg).unwrap()
}

/// SEQUENCE on slot 0 of `s` with its next sequence id, then `ops`; the
/// sequence id is used up.
fn on_slot0(s: &mut Session4, ops: &Ops, cachethis: bool) -> (Ops, Reply) {
    let mut all = Ops::new();
    s.sequence_op(&mut all, 0, s.seq[0], cachethis);
    s.seq[0] += 1;
    all.n += ops.n;
    all.w.buf.extend_from_slice(&ops.w.buf);
    let rep = Session4::raw(&mut s.c, &all, 1).unwrap();
    (all, rep)
}

/// The status of every result in `rep` (a COMPOUND of SEQUENCE, PUTROOTFH,
/// then GETATTRs or one READDIR), skipping each result's body.
fn statuses(rep: &Reply) -> Vec<u32> {
    let mut r = rep.reader();
    let mut out = vec![];
    for _ in 0..rep.n {
        let op = r.u32().unwrap();
        let st = r.u32().unwrap();
        out.push(st);
        if st != NFS4_OK {
            break;
        }
        match op {
            OP_SEQUENCE => {
                r.fixed(36).unwrap();
            }
            OP_PUTROOTFH => {}
            OP_GETATTR => {
                let words = r.u32().unwrap();
                r.fixed(4 * words as usize).unwrap();
                r.opaque(1 << 20).unwrap();
            }
            // A READDIR that ran is the last result these tests read.
            _ => break,
        }
    }
    out
}

/// GETATTR of every attribute (the server answers those it supports).
fn getattr_all(ops: &mut Ops) {
    ops.op(OP_GETATTR).u32(3).u32(!0).u32(!0).u32(!0);
}

#[test]
fn cache_size_and_slots_are_negotiated_within_bounds() {
    let env = env(SHARE);
    for (ask, got) in [
        (1 << 20, MAX_CACHED),
        (0, MIN_CACHED), // what the Linux client asks
        (MIN_CACHED + 100, MIN_CACHED + 100),
    ] {
        let s = Session4::establish_cached(env.client(), format!("c{ask}").as_bytes(), 1000, ask)
            .unwrap();
        assert_eq!(s.cached, got, "asked {ask}");
        assert_eq!(s.seq.len() as u32, MAX_SLOTS, "1000 slots asked");
    }
    const { assert!(MAX_CACHED <= 16 << 10) };
}

#[test]
fn a_reply_too_big_for_the_slot_cache_is_cut_short_and_replayed() {
    let env = env(SHARE);
    let mut s = Session4::establish_cached(env.client(), b"small-cache", 2, 0).unwrap();
    let limit = s.cached as usize;
    assert_eq!(limit, MIN_CACHED as usize);

    // Checked after running: GETATTRs whose results together pass the limit.
    let mut ops = Ops::new();
    ops.op(OP_PUTROOTFH);
    for _ in 0..14 {
        getattr_all(&mut ops);
    }
    let (_, whole) = on_slot0(&mut s, &ops, false);
    assert_eq!(whole.status, NFS4_OK);
    assert!(
        whole.raw.len() > limit,
        "the uncached reply ({} bytes) must exceed the slot's {limit} for this test",
        whole.raw.len()
    );
    let (sent, cut) = on_slot0(&mut s, &ops, true);
    assert_eq!(cut.status, NFS4ERR_REP_TOO_BIG_TO_CACHE);
    assert!(cut.raw.len() <= limit, "{} bytes cached", cut.raw.len());
    let st = statuses(&cut);
    assert!(st.len() > 2 && st.len() < 16, "{st:?}");
    assert_eq!(st.last(), Some(&NFS4ERR_REP_TOO_BIG_TO_CACHE));
    assert!(st[..st.len() - 1].iter().all(|x| *x == NFS4_OK), "{st:?}");
    // A retry gets the very same reply: it was cached, not RETRY_UNCACHED_REP.
    let again = Session4::raw(&mut s.c, &sent, 1).unwrap();
    assert_eq!(again.raw, cut.raw);

    // Checked before running: a READDIR whose maxcount cannot fit.
    let mut ops = Ops::new();
    ops.op(OP_PUTROOTFH);
    ops.op(OP_READDIR)
        .u64(0)
        .fixed(&[0; 8])
        .u32(1 << 16)
        .u32(1 << 16)
        .u32(1)
        .u32(1 << FATTR4_TYPE);
    let (sent, rep) = on_slot0(&mut s, &ops, true);
    assert_eq!(
        statuses(&rep),
        [NFS4_OK, NFS4_OK, NFS4ERR_REP_TOO_BIG_TO_CACHE]
    );
    assert_eq!(Session4::raw(&mut s.c, &sent, 1).unwrap().raw, rep.raw);
    // Not asked to be cached, it runs.
    let (_, rep) = on_slot0(&mut s, &ops, false);
    assert_eq!(statuses(&rep), [NFS4_OK, NFS4_OK, NFS4_OK]);
}

fn destroy_session(c: &mut cachalot_nfs::client::Client, id: &[u8; 16]) -> u32 {
    let mut ops = Ops::new();
    ops.op(OP_DESTROY_SESSION).fixed(id);
    let rep = Session4::raw(c, &ops, 1).unwrap();
    let mut r = rep.reader();
    op_status(&mut r, OP_DESTROY_SESSION).unwrap()
}

fn status_of<T>(r: cachalot_nfs::client::R<T>) -> Option<u32> {
    r.err().and_then(|e| e.status())
}

#[test]
fn sessions_per_client_are_capped() {
    let env = env(SHARE);
    let mut c = env.client();
    let (id, mut seq, _) = Session4::exchange_id(&mut c, b"many-sessions", *b"verifier").unwrap();
    let mut ids = vec![];
    for _ in 0..MAX_SESSIONS_PER_CLIENT {
        let (sid, _) = Session4::create_session(&mut c, id, seq, 4, 0).unwrap();
        ids.push(sid);
        seq += 1;
    }
    assert_eq!(
        status_of(Session4::create_session(&mut c, id, seq, 4, 0)),
        Some(NFS4ERR_NOSPC)
    );
    assert_eq!(destroy_session(&mut c, &ids[0]), NFS4_OK);
    // The refused CREATE_SESSION left the client's sequence where it was.
    Session4::create_session(&mut c, id, seq, 4, 0).unwrap();
}

#[test]
fn all_sessions_fit_the_reply_cache_budget() {
    let mut env = env(SHARE);
    let per_slot = MAX_CACHED as usize;
    env.server = Some(server_with_budget(&env, 10 * per_slot));
    let a = Session4::establish_cached(env.client(), b"a", 8, 1 << 20).unwrap();
    assert_eq!(a.seq.len(), 8);
    let b = Session4::establish_cached(env.client(), b"b", 8, 1 << 20).unwrap();
    assert_eq!(b.seq.len(), 2, "fewer slots once the budget runs low");
    let mut c = env.client();
    let (cid, cseq, _) = Session4::exchange_id(&mut c, b"c", *b"verifier").unwrap();
    assert_eq!(
        status_of(Session4::create_session(&mut c, cid, cseq, 8, 1 << 20)),
        Some(NFS4ERR_DELAY),
        "no slot left"
    );
    // Destroying A's session gives its slots back; C's retry (same
    // csa_sequence: the refusal changed nothing) gets them.
    let mut a = a;
    assert_eq!(destroy_session(&mut a.c, &a.sessionid), NFS4_OK);
    let (_, fore) = Session4::create_session(&mut c, cid, cseq, 8, 1 << 20).unwrap();
    assert_eq!(fore[5], 8, "A's slots came back to the budget");
    // The sessions that were made work.
    let mut b = b;
    b.call(&Ops::new()).unwrap();
}
