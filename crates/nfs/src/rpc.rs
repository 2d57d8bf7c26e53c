//! ONC RPC version 2 (RFC 5531) over TCP: record marking, call headers with
//! AUTH_NONE / AUTH_SYS credentials, and replies (accepted or denied).
//!
//! Invariants:
//! - A record is read fragment by fragment; each fragment length and the running
//!   total are checked against `MAX_RECORD` before any buffer grows, so a peer
//!   can never make the server allocate more than `MAX_RECORD` per connection.
//! - A call whose header cannot even yield an xid is dropped (the connection is
//!   closed by the caller); any call with an xid gets an answer: the procedure's
//!   result, or the RPC error the standard names (RPC_MISMATCH, AUTH_ERROR,
//!   PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR).

use crate::xdr::{Reader, Writer, XdrError};
use std::io::{self, Read, Write};

/// Largest record accepted: a 1 MiB WRITE with its RPC and NFS headers.
pub const MAX_RECORD: usize = (1 << 20) + (64 << 10);
/// Largest credential or verifier body (RFC 5531).
pub const MAX_AUTH: usize = 400;
/// Most supplementary groups in AUTH_SYS.
pub const MAX_GIDS: usize = 16;

pub const PROG_PORTMAP: u32 = 100000;
pub const PROG_NFS: u32 = 100003;
pub const PROG_MOUNT: u32 = 100005;

const CALL: u32 = 0;
const REPLY: u32 = 1;
const AUTH_NONE: u32 = 0;
const AUTH_SYS: u32 = 1;
pub const LAST_FRAGMENT: u32 = 1 << 31;

/// Who sent a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cred {
    None,
    Sys { uid: u32, gid: u32, gids: Vec<u32> },
}

/// A decoded call header; `args` are the procedure's arguments.
#[derive(Debug)]
pub struct Call<'a> {
    pub xid: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: Cred,
    pub args: &'a [u8],
}

/// Why a call gets no procedure result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcError {
    ProgUnavail,
    ProgMismatch {
        low: u32,
        high: u32,
    },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
    RpcMismatch,
    /// auth_stat: 1 BADCRED, 2 REJECTEDCRED, 5 TOOWEAK.
    Auth(u32),
}

pub const AUTH_BADCRED: u32 = 1;
pub const AUTH_TOOWEAK: u32 = 5;

impl From<XdrError> for RpcError {
    fn from(_: XdrError) -> Self {
        RpcError::GarbageArgs
    }
}

/// What to do with a message that is not a well-formed call.
#[derive(Debug, PartialEq, Eq)]
pub enum BadCall {
    /// No xid, or not a call at all: drop it.
    Drop,
    /// Answer `xid` with this error.
    Reply(u32, RpcError),
}

fn decode_cred(r: &mut Reader<'_>) -> Result<Cred, RpcError> {
    let flavor = r.u32()?;
    let body = r
        .opaque(MAX_AUTH)
        .map_err(|_| RpcError::Auth(AUTH_BADCRED))?;
    match flavor {
        AUTH_NONE => Ok(Cred::None),
        AUTH_SYS => {
            let mut b = Reader::new(body);
            let sys = (|| {
                let _stamp = b.u32()?;
                let _machine = b.string(255)?;
                let uid = b.u32()?;
                let gid = b.u32()?;
                let gids = b.u32_array(MAX_GIDS)?;
                Ok::<_, XdrError>(Cred::Sys { uid, gid, gids })
            })();
            sys.map_err(|_| RpcError::Auth(AUTH_BADCRED))
        }
        _ => Err(RpcError::Auth(AUTH_TOOWEAK)),
    }
}

/// Decode one RPC message as a call.
pub fn decode_call(msg: &[u8]) -> Result<Call<'_>, BadCall> {
    let mut r = Reader::new(msg);
    let xid = r.u32().map_err(|_| BadCall::Drop)?;
    match r.u32() {
        Ok(CALL) => {}
        Ok(REPLY) | Ok(_) | Err(_) => return Err(BadCall::Drop),
    }
    let bad = |e: RpcError| BadCall::Reply(xid, e);
    let rpcvers = r.u32().map_err(|_| bad(RpcError::GarbageArgs))?;
    if rpcvers != 2 {
        return Err(bad(RpcError::RpcMismatch));
    }
    let mut head = || -> Result<(u32, u32, u32), XdrError> { Ok((r.u32()?, r.u32()?, r.u32()?)) };
    let (prog, vers, proc_) = head().map_err(|_| bad(RpcError::GarbageArgs))?;
    let cred = decode_cred(&mut r).map_err(bad)?;
    let _verf_flavor = r.u32().map_err(|_| bad(RpcError::Auth(AUTH_BADCRED)))?;
    r.opaque(MAX_AUTH)
        .map_err(|_| bad(RpcError::Auth(AUTH_BADCRED)))?;
    let used = msg.len() - r.remaining();
    Ok(Call {
        xid,
        prog,
        vers,
        proc_,
        cred,
        args: &msg[used..],
    })
}

/// The start of a successful reply; the procedure appends its results.
pub fn success(xid: u32) -> Writer {
    let mut w = Writer::with_capacity(256);
    w.u32(xid).u32(REPLY).u32(0).u32(AUTH_NONE).u32(0).u32(0);
    w
}

/// A complete reply carrying an RPC error.
pub fn error_reply(xid: u32, e: RpcError) -> Vec<u8> {
    let mut w = Writer::with_capacity(40);
    w.u32(xid).u32(REPLY);
    match e {
        RpcError::RpcMismatch => {
            w.u32(1).u32(0).u32(2).u32(2);
        }
        RpcError::Auth(stat) => {
            w.u32(1).u32(1).u32(stat);
        }
        other => {
            w.u32(0).u32(AUTH_NONE).u32(0);
            match other {
                RpcError::ProgUnavail => w.u32(1),
                RpcError::ProgMismatch { low, high } => w.u32(2).u32(low).u32(high),
                RpcError::ProcUnavail => w.u32(3),
                RpcError::GarbageArgs => w.u32(4),
                _ => w.u32(5),
            };
        }
    }
    w.buf
}

/// Read one record (all its fragments). `Ok(None)` at a clean end of stream;
/// `InvalidData` for a record larger than `max`.
pub fn read_record<R: Read>(r: &mut R, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    Ok(read_record_into(r, &mut out, max)?.then_some(out))
}

/// Read one record into `out` (its old contents replaced), reusing its
/// capacity: a server reading 1 MiB WRITEs into one buffer per connection
/// neither allocates (fresh pages, page faults) nor zero-fills each record
/// (`read_to_end` reads into the spare capacity as it is). `Ok(false)` at a
/// clean end of stream; `InvalidData` for a record larger than `max`, checked
/// before `out` grows.
pub fn read_record_into<R: Read>(r: &mut R, out: &mut Vec<u8>, max: usize) -> io::Result<bool> {
    out.clear();
    let Some(first) = read_mark(r)? else {
        return Ok(false);
    };
    read_record_from(r, out, first, max)?;
    Ok(true)
}

/// Read a record mark: (fragment length, last fragment?); `None` at a clean
/// end of stream.
pub fn read_mark<R: Read>(r: &mut R) -> io::Result<Option<(usize, bool)>> {
    let mut hdr = [0u8; 4];
    match r.read_exact(&mut hdr) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let h = u32::from_be_bytes(hdr);
    Ok(Some((
        (h & !LAST_FRAGMENT) as usize,
        h & LAST_FRAGMENT != 0,
    )))
}

/// Append to `out` the record whose first fragment's mark, `mark`, was just
/// read (see [`read_record_into`] for the bounds).
pub fn read_record_from<R: Read>(
    r: &mut R,
    out: &mut Vec<u8>,
    mut mark: (usize, bool),
    max: usize,
) -> io::Result<()> {
    loop {
        let (len, last) = mark;
        if len > max || out.len() + len > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("RPC record larger than {max} bytes"),
            ));
        }
        read_exact_into(r, out, len)?;
        if last {
            return Ok(());
        }
        mark = read_mark(r)?.ok_or(io::ErrorKind::UnexpectedEof)?;
    }
}

/// Append exactly `len` bytes of `r` to `out` (into its spare capacity as
/// it is: no zero-filling).
pub fn read_exact_into<R: Read>(r: &mut R, out: &mut Vec<u8>, len: usize) -> io::Result<()> {
    let start = out.len();
    out.reserve_exact(len);
    r.by_ref().take(len as u64).read_to_end(out)?;
    if out.len() - start < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Write one record as a single fragment.
pub fn write_record<W: Write>(w: &mut W, body: &[u8]) -> io::Result<()> {
    write_record_parts(w, &[body])
}

/// Write one record, a single fragment holding `parts` in order, with vectored
/// writes: a large part (a 1 MiB READ's data) goes to the socket from where it
/// was encoded instead of being copied behind the record mark.
pub fn write_record_parts<W: Write>(w: &mut W, parts: &[&[u8]]) -> io::Result<()> {
    let len = parts.iter().map(|p| p.len()).sum::<usize>();
    let len = u32::try_from(len)
        .ok()
        .filter(|l| l & LAST_FRAGMENT == 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "RPC record too large"))?;
    let mark = (LAST_FRAGMENT | len).to_be_bytes();
    let mut slices: Vec<io::IoSlice<'_>> = std::iter::once(&mark[..])
        .chain(parts.iter().copied())
        .map(io::IoSlice::new)
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match w.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Encode a call (for clients and tests).
pub fn encode_call(
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: &Cred,
    args: &[u8],
) -> Vec<u8> {
    let mut w = Writer::with_capacity(args.len() + 96);
    call_header(&mut w, xid, prog, vers, proc_, cred);
    w.buf.extend_from_slice(args);
    w.buf
}

/// Append a call's header (everything before its arguments) to `w`.
pub fn call_header(w: &mut Writer, xid: u32, prog: u32, vers: u32, proc_: u32, cred: &Cred) {
    w.u32(xid).u32(CALL).u32(2).u32(prog).u32(vers).u32(proc_);
    match cred {
        Cred::None => {
            w.u32(AUTH_NONE).u32(0);
        }
        Cred::Sys { uid, gid, gids } => {
            let mut b = Writer::new();
            b.u32(0)
                .opaque(b"cachalot")
                .u32(*uid)
                .u32(*gid)
                .u32(gids.len() as u32);
            for g in gids {
                b.u32(*g);
            }
            w.u32(AUTH_SYS).opaque(&b.buf);
        }
    }
    w.u32(AUTH_NONE).u32(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trip() {
        let cred = Cred::Sys {
            uid: 1000,
            gid: 100,
            gids: vec![4, 5],
        };
        let msg = encode_call(9, PROG_NFS, 3, 1, &cred, &[1, 2, 3, 4]);
        let c = decode_call(&msg).unwrap();
        assert_eq!((c.xid, c.prog, c.vers, c.proc_), (9, PROG_NFS, 3, 1));
        assert_eq!(c.cred, cred);
        assert_eq!(c.args, &[1, 2, 3, 4]);
        let mut bad = msg.clone();
        bad[8..12].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(
            decode_call(&bad).unwrap_err(),
            BadCall::Reply(9, RpcError::RpcMismatch)
        );
        assert_eq!(decode_call(&msg[..6]).unwrap_err(), BadCall::Drop);
        assert!(matches!(
            decode_call(&msg[..30]).unwrap_err(),
            BadCall::Reply(9, _)
        ));
    }

    #[test]
    fn records_are_bounded() {
        let mut big = Vec::new();
        big.extend_from_slice(&(LAST_FRAGMENT | 0x7fff_ffff).to_be_bytes());
        let e = read_record(&mut &big[..], MAX_RECORD).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // Many small fragments adding up past the bound fail too.
        let mut frags = Vec::new();
        for _ in 0..5 {
            frags.extend_from_slice(&1000u32.to_be_bytes());
            frags.extend_from_slice(&[0u8; 1000]);
        }
        assert!(read_record(&mut &frags[..], 4000).is_err());
        let mut ok = Vec::new();
        write_record(&mut ok, b"abcd").unwrap();
        assert_eq!(read_record(&mut &ok[..], 8).unwrap().unwrap(), b"abcd");
        assert_eq!(read_record(&mut &[][..], 8).unwrap(), None);
        // A record cut short is an error, not a shorter record.
        assert_eq!(
            read_record(&mut &ok[..6], 8).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn a_reused_buffer_holds_exactly_the_record_read() {
        let mut stream = Vec::new();
        write_record(&mut stream, &[7u8; 3000]).unwrap();
        // Two fragments: the second appends to the first.
        stream.extend_from_slice(&2u32.to_be_bytes());
        stream.extend_from_slice(b"ab");
        stream.extend_from_slice(&(LAST_FRAGMENT | 1).to_be_bytes());
        stream.extend_from_slice(b"c");
        let mut r = &stream[..];
        let mut buf = Vec::new();
        assert!(read_record_into(&mut r, &mut buf, 4000).unwrap());
        assert_eq!(buf, vec![7u8; 3000]);
        let cap = buf.capacity();
        assert!(read_record_into(&mut r, &mut buf, 4000).unwrap());
        assert_eq!(buf, b"abc");
        assert_eq!(buf.capacity(), cap, "the buffer is reused, not reallocated");
        assert!(!read_record_into(&mut r, &mut buf, 4000).unwrap());
    }
}
