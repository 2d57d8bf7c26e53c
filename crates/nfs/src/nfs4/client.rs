//! A small NFSv4.1 client for tests and benchmarks: builds COMPOUNDs, opens a
//! session (EXCHANGE_ID, CREATE_SESSION) and sends COMPOUNDs on slot 0 with
//! SEQUENCE in front. Results are read back with [`Reply::op`] in order.

use super::consts::*;
use crate::client::{Client, Error, R};
use crate::rpc::PROG_NFS;
use crate::xdr::{Reader, Writer, XResult, XdrError};

/// COMPOUND arguments under construction.
#[derive(Default)]
pub struct Ops {
    pub w: Writer,
    pub n: u32,
    /// Ask for the reply to be cached ([`Session4::call`]): set by operations
    /// that change state, as the Linux client does; READ, READDIR, WRITE and
    /// the lookups are not cached (their replies may be large, and a retry
    /// may simply run them again).
    pub cache: bool,
}

/// Operations whose COMPOUND the Linux client asks the server to cache.
fn cached_op(op: u32) -> bool {
    matches!(
        op,
        OP_OPEN
            | OP_CLOSE
            | OP_OPEN_DOWNGRADE
            | OP_LOCK
            | OP_LOCKU
            | OP_SETATTR
            | OP_CREATE
            | OP_REMOVE
            | OP_RENAME
            | OP_LINK
            | OP_RECLAIM_COMPLETE
            | OP_FREE_STATEID
    )
}

impl Ops {
    pub fn new() -> Ops {
        Ops::default()
    }
    /// Append operation `op`; its arguments go into the returned writer.
    pub fn op(&mut self, op: u32) -> &mut Writer {
        self.n += 1;
        self.cache |= cached_op(op);
        self.w.u32(op);
        &mut self.w
    }
    /// COMPOUND4args with `minor` as the minor version.
    pub fn encode(&self, minor: u32) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.w.len() + 16);
        w.opaque(b"cachalot").u32(minor).u32(self.n);
        w.buf.extend_from_slice(&self.w.buf);
        w.buf
    }
}

/// A decoded COMPOUND4res.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u32,
    pub n: u32,
    pub body: Vec<u8>,
    pub raw: Vec<u8>,
}

impl Reply {
    pub fn decode(b: &[u8]) -> XResult<Reply> {
        let mut r = Reader::new(b);
        let status = r.u32()?;
        r.string(1024)?;
        let n = r.u32()?;
        let used = b.len() - r.remaining();
        Ok(Reply {
            status,
            n,
            body: b[used..].to_vec(),
            raw: b.to_vec(),
        })
    }
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(&self.body)
    }
}

/// Read the head of the next result, which must be of operation `op`: its status.
pub fn op_status(r: &mut Reader<'_>, op: u32) -> XResult<u32> {
    if r.u32()? != op {
        return Err(XdrError);
    }
    r.u32()
}

/// Write EXCHANGE_ID arguments (SP4_NONE, no implementation id).
pub fn exchange_id_args(w: &mut Writer, owner: &[u8], verifier: [u8; 8], flags: u32) {
    w.fixed(&verifier)
        .opaque(owner)
        .u32(flags)
        .u32(SP4_NONE)
        .u32(0);
}

/// Write CREATE_SESSION arguments asking for `slots` slots.
pub fn create_session_args(w: &mut Writer, clientid: u64, seq: u32, slots: u32) {
    create_session_args_cached(w, clientid, seq, slots, 64 << 10)
}

/// [`create_session_args`] asking for `cached` bytes of reply cache per slot
/// on the fore channel (ca_maxresponsesize_cached).
pub fn create_session_args_cached(
    w: &mut Writer,
    clientid: u64,
    seq: u32,
    slots: u32,
    cached: u32,
) {
    w.u64(clientid).u32(seq).u32(0);
    for (ops, reqs, cached) in [(16, slots, cached), (2, 1, 0)] {
        w.u32(0)
            .u32(1 << 20)
            .u32(1 << 20)
            .u32(cached)
            .u32(ops)
            .u32(reqs)
            .u32(0);
    }
    w.u32(0x4000_0000).u32(1).u32(0);
}

/// A client with a session.
pub struct Session4 {
    pub c: Client,
    pub clientid: u64,
    pub sessionid: [u8; 16],
    /// The next sequence id of each slot (as many as the server gave).
    pub seq: Vec<u32>,
    /// The session's ca_maxresponsesize_cached.
    pub cached: u32,
}

impl Session4 {
    /// Send COMPOUND `ops` (no SEQUENCE added) as minor version `minor`.
    pub fn raw(c: &mut Client, ops: &Ops, minor: u32) -> R<Reply> {
        let body = c.call(PROG_NFS, 4, 1, &ops.encode(minor))?;
        Ok(Reply::decode(&body)?)
    }

    /// EXCHANGE_ID: (clientid, sequenceid, flags).
    pub fn exchange_id(c: &mut Client, owner: &[u8], verifier: [u8; 8]) -> R<(u64, u32, u32)> {
        let mut ops = Ops::new();
        exchange_id_args(ops.op(OP_EXCHANGE_ID), owner, verifier, 0);
        let rep = Self::raw(c, &ops, 1)?;
        let mut r = rep.reader();
        match op_status(&mut r, OP_EXCHANGE_ID)? {
            NFS4_OK => Ok((r.u64()?, r.u32()?, r.u32()?)),
            s => Err(Error::Status(s)),
        }
    }

    /// CREATE_SESSION for `clientid` (csa_sequence `seq`) asking for `slots`
    /// slots caching `cached` bytes each: the session id and the fore
    /// channel's attributes as the server set them (headerpadsize,
    /// maxrequestsize, maxresponsesize, maxresponsesize_cached, maxoperations,
    /// maxrequests).
    pub fn create_session(
        c: &mut Client,
        clientid: u64,
        seq: u32,
        slots: u32,
        cached: u32,
    ) -> R<([u8; 16], [u32; 6])> {
        let mut ops = Ops::new();
        create_session_args_cached(ops.op(OP_CREATE_SESSION), clientid, seq, slots, cached);
        let rep = Self::raw(c, &ops, 1)?;
        let mut r = rep.reader();
        match op_status(&mut r, OP_CREATE_SESSION)? {
            NFS4_OK => {}
            s => return Err(Error::Status(s)),
        }
        let mut sessionid = [0u8; 16];
        sessionid.copy_from_slice(r.fixed(16)?);
        r.u32()?; // csr_sequence
        r.u32()?; // csr_flags
        let mut fore = [0u32; 6];
        for f in &mut fore {
            *f = r.u32()?;
        }
        Ok((sessionid, fore))
    }

    /// EXCHANGE_ID and CREATE_SESSION with `slots` slots.
    pub fn establish(c: Client, owner: &[u8], slots: u32) -> R<Session4> {
        Self::establish_cached(c, owner, slots, 64 << 10)
    }

    /// [`Session4::establish`] asking for `cached` bytes of reply cache per slot.
    pub fn establish_cached(mut c: Client, owner: &[u8], slots: u32, cached: u32) -> R<Session4> {
        let (clientid, seq, _) = Self::exchange_id(&mut c, owner, *b"verifier")?;
        let (sessionid, fore) = Self::create_session(&mut c, clientid, seq, slots, cached)?;
        Ok(Session4 {
            c,
            clientid,
            sessionid,
            seq: vec![1; fore[5].max(1) as usize],
            cached: fore[3],
        })
    }

    /// SEQUENCE arguments for `slot` with sequence id `seq`.
    pub fn sequence_op(&self, ops: &mut Ops, slot: u32, seq: u32, cachethis: bool) {
        let hi = self.seq.len() as u32 - 1;
        ops.op(OP_SEQUENCE)
            .fixed(&self.sessionid)
            .u32(seq)
            .u32(slot)
            .u32(hi)
            .bool(cachethis);
    }

    /// Send `ops` behind a SEQUENCE on slot 0 (cached if `ops.cache`); the
    /// reply's reader is left after the SEQUENCE result, which must be OK.
    pub fn call(&mut self, ops: &Ops) -> R<Reply> {
        let mut all = Ops::new();
        let seq = self.seq[0];
        self.sequence_op(&mut all, 0, seq, ops.cache);
        all.n += ops.n;
        all.w.buf.extend_from_slice(&ops.w.buf);
        let rep = Self::raw(&mut self.c, &all, 1)?;
        self.seq[0] = seq.wrapping_add(1);
        let mut r = rep.reader();
        match op_status(&mut r, OP_SEQUENCE)? {
            NFS4_OK => {}
            s => return Err(Error::Status(s)),
        }
        r.fixed(16 + 20)?;
        let used = rep.body.len() - r.remaining();
        Ok(Reply {
            body: rep.body[used..].to_vec(),
            ..rep
        })
    }
}
