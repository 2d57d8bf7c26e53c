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
    /// The whole COMPOUND4res.
    pub raw: Vec<u8>,
    /// Where the results not yet read start in `raw` (after the header, or
    /// after SEQUENCE's result for [`Session4::call`]).
    start: usize,
}

impl Reply {
    pub fn decode(b: &[u8]) -> XResult<Reply> {
        Self::decode_owned(b.to_vec())
    }
    /// Decode `b`, keeping it (a 1 MiB READ's reply is not copied).
    pub fn decode_owned(b: Vec<u8>) -> XResult<Reply> {
        let mut r = Reader::new(&b);
        let status = r.u32()?;
        r.string(1024)?;
        let n = r.u32()?;
        let start = b.len() - r.remaining();
        Ok(Reply {
            status,
            n,
            raw: b,
            start,
        })
    }
    /// The results (each: operation, status, result).
    pub fn body(&self) -> &[u8] {
        &self.raw[self.start..]
    }
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(self.body())
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
    // Requests and replies of a record: room for a 1 MiB READ or WRITE with
    // its COMPOUND around it, as Linux asks for rsize plus its overhead.
    let max = crate::rpc::MAX_RECORD as u32;
    for (ops, reqs, cached) in [(16, slots, cached), (2, 1, 0)] {
        w.u32(0)
            .u32(max)
            .u32(max)
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
        let body = c.call_with(PROG_NFS, 4, 1, ops.w.len() + 16, |w| {
            w.opaque(b"cachalot").u32(minor).u32(ops.n);
            w.buf.extend_from_slice(&ops.w.buf);
        })?;
        Ok(Reply::decode_owned(body)?)
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
        let mut seq_op = Ops::new();
        let seq = self.seq[0];
        self.sequence_op(&mut seq_op, 0, seq, ops.cache);
        // SEQUENCE and `ops` go straight into the message: one copy of a
        // 1 MiB WRITE's data, not four.
        let body = self.c.call_with(PROG_NFS, 4, 1, ops.w.len() + 96, |w| {
            w.opaque(b"cachalot").u32(1).u32(1 + ops.n);
            w.buf.extend_from_slice(&seq_op.w.buf);
            w.buf.extend_from_slice(&ops.w.buf);
        })?;
        let mut rep = Reply::decode_owned(body)?;
        self.seq[0] = seq.wrapping_add(1);
        let mut r = rep.reader();
        match op_status(&mut r, OP_SEQUENCE)? {
            NFS4_OK => {}
            s => return Err(Error::Status(s)),
        }
        r.fixed(16 + 20)?;
        rep.start = rep.raw.len() - r.remaining();
        Ok(rep)
    }
}

pub use super::ops::Stateid;
use super::{io::write_stateid, ops::stateid as read_stateid};

/// OPEN4_SHARE_ACCESS_WANT_NO_DELEG (RFC 8881 section 18.16.3): no
/// delegation, so a client of this module never has to answer a recall.
const WANT_NO_DELEG: u32 = 0x0400;
const SHARE_ACCESS_BOTH: u32 = 3;
const CLAIM_NULL: u32 = 0;
const OPEN_DELEGATE_NONE: u32 = 0;
const OPEN_DELEGATE_NONE_EXT: u32 = 3;
/// The largest file handle (FHSIZE).
const FHSIZE: usize = 128;

/// File operations for the load generator and tests: each a COMPOUND behind
/// SEQUENCE on slot 0, failing with the first non-OK status.
impl Session4 {
    /// `ops` behind SEQUENCE; the reply must be OK throughout.
    fn call_ok(&mut self, ops: &Ops) -> R<Reply> {
        let rep = self.call(ops)?;
        match rep.status {
            NFS4_OK => Ok(rep),
            s => Err(Error::Status(s)),
        }
    }

    /// RECLAIM_COMPLETE for the whole client: a new client sends it before
    /// its first OPEN (a server in grace refuses new opens until then).
    pub fn reclaim_complete(&mut self) -> R<()> {
        let mut ops = Ops::new();
        ops.op(OP_RECLAIM_COMPLETE).bool(false);
        match self.call(&ops)?.status {
            // Sent twice, or to a server that keeps no record: harmless.
            NFS4_OK | NFS4ERR_COMPLETE_ALREADY => Ok(()),
            s => Err(Error::Status(s)),
        }
    }

    /// The file handle of `path` ("/tank/fs") from the pseudo root.
    pub fn lookup_path(&mut self, path: &str) -> R<Vec<u8>> {
        let mut ops = Ops::new();
        ops.op(OP_PUTROOTFH);
        for name in path.split('/').filter(|n| !n.is_empty()) {
            ops.op(OP_LOOKUP).opaque(name.as_bytes());
        }
        ops.op(OP_GETFH);
        let rep = self.call_ok(&ops)?;
        let mut r = rep.reader();
        for _ in 1..ops.n {
            r.u32()?;
            r.u32()?;
        }
        op_status(&mut r, OP_GETFH)?;
        Ok(r.opaque(FHSIZE)?.to_vec())
    }

    /// OPEN `name` in directory `dir` for reading and writing, creating it
    /// (UNCHECKED4, `mode`) if it does not exist, for open-owner `owner`:
    /// the open stateid and the file's handle.
    pub fn open_create(
        &mut self,
        dir: &[u8],
        owner: &[u8],
        name: &str,
        mode: u32,
    ) -> R<(Stateid, Vec<u8>)> {
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(dir);
        let clientid = self.clientid;
        let w = ops.op(OP_OPEN);
        w.u32(0)
            .u32(SHARE_ACCESS_BOTH | WANT_NO_DELEG)
            .u32(0)
            .u64(clientid)
            .opaque(owner);
        // OPEN4_CREATE, UNCHECKED4, fattr4 { mode }.
        w.u32(1)
            .u32(0)
            .u32(2)
            .u32(0)
            .u32(1 << (super::attrs::FATTR4_MODE - 32));
        w.opaque(&mode.to_be_bytes());
        w.u32(CLAIM_NULL).opaque(name.as_bytes());
        ops.op(OP_GETFH);
        let rep = self.call_ok(&ops)?;
        let mut r = rep.reader();
        op_status(&mut r, OP_PUTFH)?;
        op_status(&mut r, OP_OPEN)?;
        let sid = read_stateid(&mut r)?;
        r.fixed(20)?; // change_info4
        r.u32()?; // rflags
        r.u32_array(8)?; // attrset
        match r.u32()? {
            OPEN_DELEGATE_NONE => {}
            OPEN_DELEGATE_NONE_EXT => {
                // why_no_deleg, and for CONTENTION/RESOURCE a bool.
                if matches!(r.u32()?, 1 | 2) {
                    r.bool()?;
                }
            }
            // Asked for none: a delegation would need recalls answered.
            _ => return Err(Error::Garbage),
        }
        op_status(&mut r, OP_GETFH)?;
        Ok((sid, r.opaque(FHSIZE)?.to_vec()))
    }

    /// WRITE `data` at `off` with `stable` (0 UNSTABLE4, 2 FILE_SYNC4): the
    /// count written.
    pub fn write(&mut self, fh: &[u8], sid: Stateid, off: u64, data: &[u8], stable: u32) -> R<u32> {
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(fh);
        write_stateid(ops.op(OP_WRITE), &sid);
        ops.w.u64(off).u32(stable).opaque(data);
        let rep = self.call_ok(&ops)?;
        let mut r = rep.reader();
        op_status(&mut r, OP_PUTFH)?;
        op_status(&mut r, OP_WRITE)?;
        Ok(r.u32()?)
    }

    /// READ `count` bytes at `off`: (data, eof).
    pub fn read(&mut self, fh: &[u8], sid: Stateid, off: u64, count: u32) -> R<(Vec<u8>, bool)> {
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(fh);
        write_stateid(ops.op(OP_READ), &sid);
        ops.w.u64(off).u32(count);
        let rep = self.call_ok(&ops)?;
        let mut r = rep.reader();
        op_status(&mut r, OP_PUTFH)?;
        op_status(&mut r, OP_READ)?;
        let eof = r.bool()?;
        Ok((r.opaque(count as usize)?.to_vec(), eof))
    }

    /// GETATTR of `fh` with the attributes the Linux client asks for after
    /// an open or a write (its nfs4_fattr_bitmap: type, change, size, fsid,
    /// fileid, mode, numlinks, owner, owner_group, rawdev, space_used, the
    /// times and mounted_on_fileid): the returned bitmap and the attribute
    /// bytes (attrlist4).
    pub fn getattr(&mut self, fh: &[u8]) -> R<(Vec<u32>, Vec<u8>)> {
        use super::attrs::*;
        let mask = bitmap_of([
            FATTR4_TYPE,
            FATTR4_CHANGE,
            FATTR4_SIZE,
            FATTR4_FSID,
            FATTR4_FILEID,
            FATTR4_MODE,
            FATTR4_NUMLINKS,
            FATTR4_OWNER,
            FATTR4_OWNER_GROUP,
            FATTR4_RAWDEV,
            FATTR4_SPACE_USED,
            FATTR4_TIME_ACCESS,
            FATTR4_TIME_METADATA,
            FATTR4_TIME_MODIFY,
            FATTR4_MOUNTED_ON_FILEID,
        ]);
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(fh);
        write_bitmap(ops.op(OP_GETATTR), &mask);
        let rep = self.call_ok(&ops)?;
        let mut r = rep.reader();
        op_status(&mut r, OP_PUTFH)?;
        op_status(&mut r, OP_GETATTR)?;
        let got = r.u32_array(8)?;
        Ok((got, r.opaque(crate::rpc::MAX_RECORD)?.to_vec()))
    }

    /// COMMIT the whole file: the write verifier.
    pub fn commit(&mut self, fh: &[u8]) -> R<[u8; 8]> {
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(fh);
        ops.op(OP_COMMIT).u64(0).u32(0);
        let rep = self.call_ok(&ops)?;
        let mut r = rep.reader();
        op_status(&mut r, OP_PUTFH)?;
        op_status(&mut r, OP_COMMIT)?;
        let mut verf = [0u8; 8];
        verf.copy_from_slice(r.fixed(8)?);
        Ok(verf)
    }

    /// CLOSE the open `sid` of `fh`.
    pub fn close(&mut self, fh: &[u8], sid: Stateid) -> R<()> {
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(fh);
        write_stateid(ops.op(OP_CLOSE).u32(0), &sid);
        self.call_ok(&ops).map(|_| ())
    }

    /// REMOVE `name` from directory `dir`.
    pub fn remove(&mut self, dir: &[u8], name: &str) -> R<()> {
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(dir);
        ops.op(OP_REMOVE).opaque(name.as_bytes());
        self.call_ok(&ops).map(|_| ())
    }
}
