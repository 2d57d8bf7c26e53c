//! NFS version 4.1 (RFC 8881) on the NFS port: program 100003 version 4, NULL
//! and COMPOUND. This module runs a COMPOUND: it checks the minor version,
//! decodes and runs its operations one at a time, and enforces the session
//! rules; `state` holds clients, sessions and slots; `ops` decodes arguments.
//!
//! Invariants:
//! - Only minor version 1 is served; any other COMPOUND is answered
//!   MINOR_VERS_MISMATCH with no results (RFC 8881 section 16.2.3).
//! - Processing stops at the first operation that fails; the reply holds the
//!   results up to and including it, and its status is the COMPOUND's.
//! - An operation number that does not exist is answered with OP_ILLEGAL and
//!   NFS4ERR_OP_ILLEGAL; arguments that do not decode with NFS4ERR_BADXDR.
//! - Outside a session only EXCHANGE_ID, CREATE_SESSION, DESTROY_SESSION,
//!   BIND_CONN_TO_SESSION and DESTROY_CLIENTID run, each as the only
//!   operation (NOT_ONLY_OP); anything else first is OP_NOT_IN_SESSION.
//!   SEQUENCE anywhere but first is SEQUENCE_POS.
//! - A COMPOUND that began with a new SEQUENCE stores its whole reply in its
//!   slot (when asked to cache it), so a retry gets the same bytes: no
//!   non-idempotent operation runs twice.

pub mod attrs;
pub mod budget;
pub mod client;
pub mod consts;
mod files;
mod io;
pub mod limits;
pub mod locks;
pub mod ops;
pub mod pseudo;
pub mod state;

use crate::nfs3::Ctx;
use crate::rpc::RpcError;
use crate::stats::Stats;
use crate::xdr::{Reader, Writer};
use cachalot_datasets::Payload;
use consts::*;
use ops::{Decoded, Op};
use state::{Principal, SeqOutcome, SlotGuard, State};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One COMPOUND being run.
pub struct Compound<'c, 'a> {
    pub ctx: &'c Ctx<'a>,
    pub st: &'c State,
    /// The session of the SEQUENCE that opened the COMPOUND.
    pub session: Option<Arc<state::Session>>,
    /// The current and saved file handles.
    pub cur: Option<pseudo::Fh>,
    pub saved: Option<pseudo::Fh>,
    /// The stateid the last operation produced (the "current stateid").
    pub cur_sid: Option<ops::Stateid>,
    /// What PUTFH resolved `cur` to, for the operation right after it only
    /// (PUTFH + READ/WRITE resolved the handle twice, a sixth of a small
    /// READ's CPU). Cleared after every other operation, so nothing that
    /// operation changed (a REMOVE, a SETATTR, RESTOREFH) is ever read from it.
    pub putfh_resolved: std::cell::RefCell<Option<pseudo::Resolved>>,
    /// The first WRITE's data when the connection's reader read it apart
    /// from the record (that WRITE's data there is empty); taken by the
    /// first WRITE run.
    pub apart: Option<Payload<'static>>,
}

/// A hash of a COMPOUND's arguments, kept with its slot to tell a retry from
/// a false retry. Only the first and last `SAMPLE` bytes and the length are
/// hashed. A false retry (the slot's sequence id again with other arguments)
/// is a client bug the server MAY detect (RFC 8881 section 2.10.6.1.3.1);
/// hashing every byte cost about 1 ms of CPU per 1 MiB WRITE, and 4 KiB
/// samples still a tenth of a 16 KiB WRITE's CPU (SipHash, perf). The head
/// holds SEQUENCE, PUTFH and a WRITE's arguments but its data (about 250
/// bytes), the tail what follows the data, so a retry of other operations,
/// offsets or files is still caught; a COMPOUND of up to 1 KiB, most that
/// carry no data, is hashed whole. A WRITE's data read apart (`apart`, not
/// in `b`) is sampled the same way, so a false retry with other data or
/// another length is caught as it was before the data was read apart.
fn args_hash(b: &[u8], apart: Option<&Payload<'_>>) -> u64 {
    const SAMPLE: usize = 512;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut sample = |b: &[u8]| {
        b.len().hash(&mut h);
        if b.len() <= 2 * SAMPLE {
            b.hash(&mut h);
        } else {
            b[..SAMPLE].hash(&mut h);
            b[b.len() - SAMPLE..].hash(&mut h);
        }
    };
    sample(b);
    if let Some(p) = apart {
        let n = p.len();
        let mut ends = vec![0u8; n.min(2 * SAMPLE)];
        let head = ends.len().min(SAMPLE);
        p.copy_to(0, &mut ends[..head]);
        p.copy_to(n - (ends.len() - head), &mut ends[head..]);
        sample(&ends);
        n.hash(&mut h);
    }
    h.finish()
}

/// Operations that may run outside a session.
fn sessionless(op: u32) -> bool {
    matches!(
        op,
        OP_EXCHANGE_ID
            | OP_CREATE_SESSION
            | OP_DESTROY_SESSION
            | OP_BIND_CONN_TO_SESSION
            | OP_DESTROY_CLIENTID
    )
}

/// Run a COMPOUND (`args` is COMPOUND4args); the result is COMPOUND4res.
/// Only a header that does not decode is an RPC error (GARBAGE_ARGS).
/// `apart`: the data of the first WRITE, read apart from `args` (where that
/// WRITE's data is empty; see `ops::first_write`). The reply cache's hash is
/// of `args` as they are, so a retry, read apart the same way, matches.
pub fn compound(
    ctx: &Ctx<'_>,
    st: &State,
    stats: &Stats,
    args: &[u8],
    apart: Option<Payload<'static>>,
) -> Result<Vec<u8>, RpcError> {
    let mut r = Reader::new(args);
    let (tag, minor, nops) = ops::header(&mut r)?;
    // The reply is written in place, header first; its status and result
    // count are filled in at the end (no copy of a READ's data per layer).
    let mut res = Writer::with_capacity(512);
    res.u32(NFS4_OK).opaque(tag).u32(0);
    let head = res.len();
    if minor != 1 {
        put_u32(&mut res, 0, NFS4ERR_MINOR_VERS_MISMATCH);
        return Ok(res.buf);
    }
    let mut c = Compound {
        ctx,
        st,
        session: None,
        cur: None,
        saved: None,
        cur_sid: None,
        putfh_resolved: Default::default(),
        apart,
    };
    let start = Instant::now();
    st.expire(start);
    // The COMPOUND's operations, for its one `nfs.ops` record.
    let mut name = OpsName::default();
    let mut guard: Option<SlotGuard> = None;
    // The size limit of a reply to be cached, once SEQUENCE asked for it.
    let mut limit: Option<limits::Limit> = None;
    let client = ctx.client_name;
    let (mut n, mut status) = (0u32, NFS4_OK);
    for i in 0..nops {
        let (opnum, op) = match ops::decode(&mut r) {
            Decoded::Op(num, op) => (num, op),
            Decoded::Illegal => {
                res.u32(OP_ILLEGAL).u32(NFS4ERR_OP_ILLEGAL);
                (n, status) = (n + 1, NFS4ERR_OP_ILLEGAL);
                break;
            }
            Decoded::BadXdr(num) => {
                res.u32(num).u32(NFS4ERR_BADXDR);
                if num == OP_SETATTR {
                    res.u32(0);
                }
                (n, status) = (n + 1, NFS4ERR_BADXDR);
                break;
            }
        };
        res.u32(opnum);
        // Where the operation's status goes; its result follows.
        let at = res.len();
        res.u32(NFS4_OK);
        let st_op = if i > 0 {
            c.later(opnum, op, limit, &mut res, at)
        } else if let Op::Sequence(a) = op {
            match st.sequence(&a, nops, args_hash(args, c.apart.as_ref()), start) {
                SeqOutcome::Replay(reply) => return Ok(reply.to_vec()),
                SeqOutcome::Err(e) => e,
                SeqOutcome::New(g, sr) => {
                    res.fixed(&a.sessionid)
                        .u32(a.sequenceid)
                        .u32(a.slotid)
                        .u32(sr.highest_slotid)
                        .u32(sr.target_highest_slotid)
                        .u32(sr.status_flags);
                    c.session = Some(g.session.clone());
                    limit = limits::Limit::of(&g.session, a.cachethis);
                    guard = Some(g);
                    NFS4_OK
                }
            }
        } else if !sessionless(opnum) {
            NFS4ERR_OP_NOT_IN_SESSION
        } else if nops > 1 {
            NFS4ERR_NOT_ONLY_OP
        } else {
            c.run(opnum, op, &mut res)
        };
        if opnum != OP_PUTFH {
            c.putfh_resolved.borrow_mut().take();
        }
        // A failed SETATTR still has its (empty) attrsset bitmap.
        if st_op != NFS4_OK && opnum == OP_SETATTR {
            res.u32(0);
        }
        put_u32(&mut res, at, st_op);
        n += 1;
        name.push(opnum);
        remember_name(ctx, stats);
        if st_op != NFS4_OK {
            status = st_op;
            break;
        }
    }
    put_u32(&mut res, 0, status);
    put_u32(&mut res, head - 4, n);
    if let Some(g) = guard {
        g.finish(&res.buf);
    }
    account(ctx, stats, client, name.done(), start.elapsed());
    Ok(res.buf)
}

/// Overwrite the XDR word at byte `at` of `w` (a status or count written
/// before it was known).
fn put_u32(w: &mut Writer, at: usize, v: u32) {
    w.buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// The name a COMPOUND is counted under in `nfs.ops`: `v4.` and its
/// operations joined by `+` (`v4.putfh+write+getattr`), the leading SEQUENCE
/// left out (every COMPOUND in a session has it), at most `MAX_NAMED` of them
/// (then `+...`), so a COMPOUND of hundreds of operations makes a short key.
/// Built in place, with no allocation per COMPOUND (the `String` it was
/// cost a few percent of a 1-byte READ's CPU).
struct OpsName {
    buf: [u8; OpsName::CAP],
    len: usize,
    /// Operations named so far.
    named: usize,
}

impl Default for OpsName {
    fn default() -> Self {
        OpsName {
            buf: [0; OpsName::CAP],
            len: 0,
            named: 0,
        }
    }
}

impl OpsName {
    const MAX_NAMED: usize = 8;
    /// The longest operation name without `v4.` (`bind_conn_to_session`).
    const MAX_OP: usize = 20;
    /// `v4.`, `MAX_NAMED` names joined by `+`, then `+...`.
    const CAP: usize = 3 + Self::MAX_NAMED * (Self::MAX_OP + 1) + 4;

    fn append(&mut self, s: &str) {
        // Never cut short: CAP holds the longest name (a test checks MAX_OP).
        let end = (self.len + s.len()).min(Self::CAP);
        self.buf[self.len..end].copy_from_slice(&s.as_bytes()[..end - self.len]);
        self.len = end;
    }

    fn push(&mut self, opnum: u32) {
        if self.len == 0 {
            self.append("v4.");
            if opnum == OP_SEQUENCE {
                return;
            }
        }
        self.named += 1;
        // Every name is `v4.NAME` (a test checks).
        let op = stat_name(opnum).get(3..).unwrap_or_default();
        match self.named {
            1 => self.append(op),
            k if k <= Self::MAX_NAMED => {
                self.append("+");
                self.append(op);
            }
            k if k == Self::MAX_NAMED + 1 => self.append("+..."),
            _ => {}
        }
    }

    /// The name ("" for a COMPOUND of no operation; a lone SEQUENCE, a
    /// lease renewal, is `v4.sequence`).
    fn done(&mut self) -> &str {
        if self.named == 0 && self.len > 0 {
            self.append("sequence");
            self.named = 1;
        }
        // Only ASCII names are ever appended.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

/// Hand a name an operation saw (LOOKUP, OPEN, CREATE...) to the analytics'
/// file names at once: a COMPOUND may see several, its note keeps one.
fn remember_name(ctx: &Ctx<'_>, stats: &Stats) {
    let mut note = ctx.note.borrow_mut();
    let Some((obj, parent, name)) = note.named.take() else {
        return;
    };
    if let Some(share) = note.share.as_deref() {
        stats.name(share, note.root, obj, parent, &name);
    }
}

/// Record a COMPOUND in `nfs.ops` as one request (`ops`: its [`OpsName`]),
/// with the share and file of the note its operations left (the last file
/// handle resolved or named) and the bytes its READ or WRITE moved.
fn account(ctx: &Ctx<'_>, stats: &Stats, client: &str, ops: &str, took: Duration) {
    if ops.is_empty() {
        return;
    }
    let note = ctx.note.borrow();
    let share = note.share.as_deref().map(|s| (s, note.root));
    stats.record(client, share, ops, note.obj, note.bytes, took);
}

impl Compound<'_, '_> {
    /// An operation after the first: SEQUENCE and BIND_CONN_TO_SESSION may
    /// not be there, and a COMPOUND to be cached must fit its slot (`at`:
    /// where the operation's status is in `res`, its result after it).
    fn later(
        &mut self,
        opnum: u32,
        op: Op<'_>,
        limit: Option<limits::Limit>,
        res: &mut Writer,
        at: usize,
    ) -> u32 {
        match op {
            Op::Sequence(_) => NFS4ERR_SEQUENCE_POS,
            Op::BindConnToSession { .. } => NFS4ERR_NOT_ONLY_OP,
            op => {
                if let Some(Err(e)) = limit.map(|l| l.before(at, &op)) {
                    return e;
                }
                let st_op = self.run(opnum, op, res);
                match limit.map(|l| l.after(at, res.len() - at - 4)) {
                    Some(Err(e)) => {
                        res.buf.truncate(at + 4);
                        e
                    }
                    _ => st_op,
                }
            }
        }
    }

    /// Run one operation, appending its result to `w`: its status. A result
    /// is kept only with OK, or DENIED (LOCK and LOCKT describe the
    /// conflicting lock); a failed operation's partial result is dropped.
    fn run(&mut self, opnum: u32, op: Op<'_>, w: &mut Writer) -> u32 {
        let mark = w.len();
        let r = match op {
            Op::ExchangeId(a) => self.exchange_id(&a, w),
            Op::CreateSession(a) => self
                .st
                .create_session(&a, Principal::from(self.ctx.cred))
                .map(|b| w.buf.extend_from_slice(&b)),
            Op::DestroySession(id) => self.st.destroy_session(&id),
            Op::DestroyClientid(id) => self.st.destroy_clientid(id),
            Op::BindConnToSession {
                sessionid,
                dir,
                rdma,
            } => self.bind_conn(&sessionid, dir, rdma, w),
            Op::ReclaimComplete(_one_fs) => match &self.session {
                Some(s) => self.st.reclaim_complete(s.clientid),
                None => Err(NFS4ERR_OP_NOT_IN_SESSION),
            },
            Op::Putrootfh | Op::Putpubfh => {
                self.cur = Some(pseudo::Fh::Pseudo(String::new()));
                Ok(())
            }
            Op::Putfh(fh) => self.putfh(fh),
            Op::Getfh => self.getfh(w),
            Op::Savefh => self.savefh(),
            Op::Restorefh => self.restorefh(),
            Op::Lookup(name) => self.lookup(name),
            Op::Lookupp => self.lookupp(),
            Op::Access(mask) => self.access(mask, w),
            Op::Getattr(mask) => self.getattr(&mask, w),
            Op::Readlink => self.readlink(w),
            Op::Readdir {
                cookie,
                maxcount,
                mask,
                ..
            } => self.readdir(cookie, maxcount, &mask, w),
            Op::SecinfoNoName(style) => self.secinfo(None, style, w),
            Op::Secinfo(name) => self.secinfo(Some(name), 0, w),
            Op::Open(a) => self.open(&a, w),
            Op::Close { stateid, .. } => self.close(&stateid, w),
            Op::OpenDowngrade {
                stateid,
                share_access,
                share_deny,
                ..
            } => self.open_downgrade(&stateid, share_access, share_deny, w),
            Op::Read {
                stateid,
                offset,
                count,
            } => self.read(&stateid, offset, count, w),
            Op::Write {
                stateid,
                offset,
                stable,
                data,
            } => {
                let data = self.apart.take().unwrap_or(data.into());
                self.write(&stateid, offset, stable, data, w)
            }
            Op::Commit { .. } => self.commit(w),
            Op::Setattr { stateid, attrs } => self.setattr(&stateid, &attrs, w),
            Op::Create { kind, name, attrs } => self.create(&kind, name, &attrs, w),
            Op::Remove(name) => self.remove(name, w),
            Op::Rename { old, new } => self.rename(old, new, w),
            Op::Link(name) => self.link(name, w),
            Op::TestStateid(sids) => self.test_stateid(&sids, w),
            Op::FreeStateid(sid) => self.free_stateid(&sid),
            Op::Lock {
                locktype,
                reclaim,
                offset,
                length,
                locker,
            } => self.lock(locktype, reclaim, offset, length, &locker, w),
            Op::Lockt {
                locktype,
                offset,
                length,
                owner,
                ..
            } => self.lockt(locktype, offset, length, owner, w),
            Op::Locku {
                locktype,
                stateid,
                offset,
                length,
                ..
            } => self.locku(locktype, &stateid, offset, length, w),
            Op::Verify(a) => self.verify(&a, false),
            Op::Nverify(a) => self.verify(&a, true),
            Op::Unsupported(op) => Err(unsupported(op)),
            _ => Err(unsupported(opnum)),
        };
        match r {
            Ok(()) => NFS4_OK,
            Err(NFS4ERR_DENIED) => NFS4ERR_DENIED,
            Err(e) => {
                w.buf.truncate(mark);
                e
            }
        }
    }

    fn exchange_id(&self, a: &ops::ExchangeIdArgs<'_>, w: &mut Writer) -> Result<(), u32> {
        let addr = self.ctx.client_name;
        let (id, seq, flags) = self
            .st
            .exchange_id(a, Principal::from(self.ctx.cred), addr)?;
        w.u64(id).u32(seq).u32(flags).u32(SP4_NONE);
        // server_owner4 {so_minor_id, so_major_id}, server scope, impl id.
        w.u64(0).opaque(&self.st.owner).opaque(&self.st.owner);
        w.u32(1)
            .opaque(b"cachalot.dev")
            .opaque(b"cachalot nfs4.1")
            .u64(0)
            .u32(0);
        Ok(())
    }

    fn bind_conn(&self, id: &[u8; 16], dir: u32, rdma: bool, w: &mut Writer) -> Result<(), u32> {
        self.st.session(id).ok_or(NFS4ERR_BADSESSION)?;
        if rdma {
            return Err(NFS4ERR_INVAL);
        }
        // There is no back channel (no delegations): only the fore channel binds.
        match dir {
            CDFC4_FORE | CDFC4_FORE_OR_BOTH => {
                w.fixed(id).u32(CDFS4_FORE).bool(false);
                Ok(())
            }
            CDFC4_BACK | CDFC4_BACK_OR_BOTH => Err(NFS4ERR_INVAL),
            _ => Err(NFS4ERR_INVAL),
        }
    }
}

/// The status of an operation the server does not implement.
fn unsupported(op: u32) -> u32 {
    match op {
        // Delegations are never granted.
        OP_DELEGPURGE | OP_DELEGRETURN | OP_WANT_DELEGATION => NFS4ERR_NOTSUPP,
        OP_GET_DIR_DELEGATION => NFS4ERR_DIRDELEG_UNAVAIL,
        // pNFS: not a metadata server.
        OP_GETDEVICEINFO | OP_GETDEVICELIST | OP_LAYOUTCOMMIT | OP_LAYOUTRETURN => NFS4ERR_NOTSUPP,
        OP_LAYOUTGET => NFS4ERR_LAYOUTUNAVAILABLE,
        // NFSv4.0 operations a 4.1 client must not send (RFC 8881 section 18.51).
        _ => NFS4ERR_NOTSUPP,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ops: &[u32]) -> String {
        let mut n = OpsName::default();
        for op in ops {
            n.push(*op);
        }
        n.done().to_string()
    }

    #[test]
    fn a_compound_is_named_by_its_operations_after_sequence() {
        assert_eq!(
            name(&[OP_SEQUENCE, OP_PUTFH, OP_WRITE, OP_GETATTR]),
            "v4.putfh+write+getattr"
        );
        assert_eq!(name(&[OP_SEQUENCE]), "v4.sequence");
        assert_eq!(name(&[OP_EXCHANGE_ID]), "v4.exchange_id");
        assert_eq!(name(&[OP_PUTFH, OP_SEQUENCE]), "v4.putfh+sequence");
        assert_eq!(name(&[]), "");
        // Hundreds of operations make a short key.
        let long = name(&[OP_LOOKUP; 300]);
        assert_eq!(long, format!("v4.lookup{}+...", "+lookup".repeat(7)));
        // The longest names fit whole: the buffer holds MAX_NAMED of the longest.
        assert!((0..=OP_ILLEGAL).all(|op| stat_name(op).starts_with("v4.")));
        let longest = (0..=OP_RECLAIM_COMPLETE)
            .map(|op| stat_name(op).len() - "v4.".len())
            .max();
        assert_eq!(longest, Some(OpsName::MAX_OP));
        let widest = name(&[OP_BIND_CONN_TO_SESSION; 9]);
        let want = format!(
            "v4.bind_conn_to_session{}+...",
            "+bind_conn_to_session".repeat(7)
        );
        assert_eq!(widest, want);
    }
}
