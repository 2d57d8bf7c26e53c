//! A small synchronous NFSv3 / MOUNT client over one TCP connection, for tests
//! and load generation. It speaks the same wire format as the server through
//! the same XDR code, so the tests also check the encodings against a real
//! client (libnfs, in the e2e tests).

use crate::nfs3::args::Sattr;
use crate::rpc::{self, Cred, RpcError, PROG_MOUNT, PROG_NFS};
use crate::xdr::{Reader, Writer, XResult, XdrError};
use cachalot_posix::TimeSet;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// What a call can end with besides success.
#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    Rpc(RpcError),
    /// A reply we could not decode.
    Garbage,
    /// An NFS or MOUNT status other than OK.
    Status(u32),
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}
impl From<XdrError> for Error {
    fn from(_: XdrError) -> Self {
        Error::Garbage
    }
}

impl Error {
    /// The NFS status, if that is what failed.
    pub fn status(&self) -> Option<u32> {
        match self {
            Error::Status(s) => Some(*s),
            _ => None,
        }
    }
}

pub type R<T> = Result<T, Error>;

/// Decoded fattr3.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fattr {
    pub ftype: u32,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub used: u64,
    pub rdev: (u32, u32),
    pub fsid: u64,
    pub fileid: u64,
    pub atime: (u32, u32),
    pub mtime: (u32, u32),
    pub ctime: (u32, u32),
}

pub fn fattr(r: &mut Reader<'_>) -> XResult<Fattr> {
    Ok(Fattr {
        ftype: r.u32()?,
        mode: r.u32()?,
        nlink: r.u32()?,
        uid: r.u32()?,
        gid: r.u32()?,
        size: r.u64()?,
        used: r.u64()?,
        rdev: (r.u32()?, r.u32()?),
        fsid: r.u64()?,
        fileid: r.u64()?,
        atime: (r.u32()?, r.u32()?),
        mtime: (r.u32()?, r.u32()?),
        ctime: (r.u32()?, r.u32()?),
    })
}

pub fn post_attr(r: &mut Reader<'_>) -> XResult<Option<Fattr>> {
    Ok(if r.bool()? { Some(fattr(r)?) } else { None })
}

/// Skip wcc_data, returning the post-operation attributes.
pub fn wcc(r: &mut Reader<'_>) -> XResult<Option<Fattr>> {
    if r.bool()? {
        r.u64()?;
        r.fixed(16)?;
    }
    post_attr(r)
}

/// Encode a sattr3.
pub fn sattr(w: &mut Writer, s: &Sattr) {
    for v in [s.mode, s.uid, s.gid] {
        match v {
            Some(v) => w.bool(true).u32(v),
            None => w.bool(false),
        };
    }
    match s.size {
        Some(v) => w.bool(true).u64(v),
        None => w.bool(false),
    };
    for t in [s.atime, s.mtime] {
        match t {
            None => w.u32(0),
            Some(TimeSet::Now) => w.u32(1),
            Some(TimeSet::At(t)) => w.u32(2).u32(t.sec as u32).u32(t.nsec),
        };
    }
}

/// One directory entry of READDIR / READDIRPLUS.
#[derive(Clone, Debug)]
pub struct Entry {
    pub fileid: u64,
    pub name: Vec<u8>,
    pub cookie: u64,
    pub attr: Option<Fattr>,
    pub handle: Option<Vec<u8>>,
}

/// A fresh starting xid per connection (time and a counter), as real clients
/// do: a server's duplicate request cache would answer a new connection that
/// reused an old xid with an old reply.
fn initial_xid() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as u64;
    ((t ^ (t >> 32)) as u32).wrapping_add((n as u32).wrapping_mul(0x9e37_79b9))
}

/// A client connection.
pub struct Client {
    stream: TcpStream,
    xid: u32,
    pub cred: Cred,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Client {
            stream,
            xid: initial_xid(),
            cred: Cred::Sys {
                uid: 0,
                gid: 0,
                gids: vec![],
            },
        })
    }

    /// Act as `uid`/`gid` (AUTH_SYS).
    pub fn as_user(&mut self, uid: u32, gid: u32) {
        self.cred = Cred::Sys {
            uid,
            gid,
            gids: vec![],
        };
    }

    /// Send raw bytes (already record-marked or not) and read one record back.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        self.stream.write_all(bytes)
    }

    pub fn read_reply(&mut self) -> io::Result<Option<Vec<u8>>> {
        rpc::read_record(&mut self.stream, 4 << 20)
    }

    /// One call; the procedure's result body on success.
    pub fn call(&mut self, prog: u32, vers: u32, proc_: u32, args: &[u8]) -> R<Vec<u8>> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        self.call_xid(xid, prog, vers, proc_, args)
    }

    /// One call with a given xid (to test retransmissions).
    pub fn call_xid(
        &mut self,
        xid: u32,
        prog: u32,
        vers: u32,
        proc_: u32,
        args: &[u8],
    ) -> R<Vec<u8>> {
        self.call_built(xid, prog, vers, proc_, args.len(), |w| {
            w.buf.extend_from_slice(args)
        })
    }

    /// One call whose arguments `args` writes straight into the message
    /// (`len`: about how many bytes): a 1 MiB WRITE is copied once, not once
    /// per layer (arguments, RPC call, record), each copy a fresh buffer.
    pub fn call_with(
        &mut self,
        prog: u32,
        vers: u32,
        proc_: u32,
        len: usize,
        args: impl FnOnce(&mut Writer),
    ) -> R<Vec<u8>> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        self.call_built(xid, prog, vers, proc_, len, args)
    }

    fn call_built(
        &mut self,
        xid: u32,
        prog: u32,
        vers: u32,
        proc_: u32,
        len: usize,
        args: impl FnOnce(&mut Writer),
    ) -> R<Vec<u8>> {
        use std::io::Write;
        let mut w = Writer::with_capacity(len + 128);
        w.u32(0); // the record mark, set below
        rpc::call_header(&mut w, xid, prog, vers, proc_, &self.cred);
        args(&mut w);
        let mark = rpc::LAST_FRAGMENT | (w.len() - 4) as u32;
        w.buf[..4].copy_from_slice(&mark.to_be_bytes());
        self.stream.write_all(&w.buf)?;
        drop(w);
        let mut reply = self
            .read_reply()?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"))?;
        let at = reply_body_at(xid, &reply)?;
        // In place: no second buffer for a 1 MiB READ's reply.
        reply.drain(..at);
        Ok(reply)
    }

    /// An NFSv3 call whose result starts with a status: the body after it.
    pub fn nfs(&mut self, proc_: u32, args: &[u8]) -> R<(u32, Vec<u8>)> {
        let body = self.call(PROG_NFS, 3, proc_, args)?;
        let mut r = Reader::new(&body);
        let st = r.u32()?;
        Ok((st, body[4..].to_vec()))
    }

    /// MNT: the root handle of `path`.
    pub fn mount(&mut self, path: &str) -> R<Vec<u8>> {
        let mut a = Writer::new();
        a.opaque(path.as_bytes());
        let body = self.call(PROG_MOUNT, 3, 1, &a.buf)?;
        let mut r = Reader::new(&body);
        match r.u32()? {
            0 => Ok(r.opaque(64)?.to_vec()),
            s => Err(Error::Status(s)),
        }
    }

    fn ok(&mut self, proc_: u32, args: &[u8]) -> R<Vec<u8>> {
        match self.nfs(proc_, args)? {
            (0, rest) => Ok(rest),
            (s, _) => Err(Error::Status(s)),
        }
    }

    pub fn getattr(&mut self, fh: &[u8]) -> R<Fattr> {
        let mut a = Writer::new();
        a.opaque(fh);
        let rest = self.ok(1, &a.buf)?;
        Ok(fattr(&mut Reader::new(&rest))?)
    }

    pub fn setattr(&mut self, fh: &[u8], s: &Sattr) -> R<Option<Fattr>> {
        let mut a = Writer::new();
        a.opaque(fh);
        sattr(&mut a, s);
        a.bool(false);
        let rest = self.ok(2, &a.buf)?;
        Ok(wcc(&mut Reader::new(&rest))?)
    }

    pub fn lookup(&mut self, dir: &[u8], name: &str) -> R<(Vec<u8>, Fattr)> {
        let mut a = Writer::new();
        a.opaque(dir).opaque(name.as_bytes());
        let rest = self.ok(3, &a.buf)?;
        let mut r = Reader::new(&rest);
        let fh = r.opaque(64)?.to_vec();
        let at = post_attr(&mut r)?.ok_or(Error::Garbage)?;
        Ok((fh, at))
    }

    pub fn access(&mut self, fh: &[u8], mask: u32) -> R<u32> {
        let mut a = Writer::new();
        a.opaque(fh).u32(mask);
        let rest = self.ok(4, &a.buf)?;
        let mut r = Reader::new(&rest);
        post_attr(&mut r)?;
        Ok(r.u32()?)
    }

    pub fn readlink(&mut self, fh: &[u8]) -> R<Vec<u8>> {
        let mut a = Writer::new();
        a.opaque(fh);
        let rest = self.ok(5, &a.buf)?;
        let mut r = Reader::new(&rest);
        post_attr(&mut r)?;
        Ok(r.opaque(4096)?.to_vec())
    }

    /// READ: (data, eof).
    pub fn read(&mut self, fh: &[u8], off: u64, count: u32) -> R<(Vec<u8>, bool)> {
        let mut a = Writer::new();
        a.opaque(fh).u64(off).u32(count);
        let rest = self.ok(6, &a.buf)?;
        let mut r = Reader::new(&rest);
        post_attr(&mut r)?;
        let _n = r.u32()?;
        let eof = r.bool()?;
        Ok((r.opaque(4 << 20)?.to_vec(), eof))
    }

    /// WRITE: (count, committed, verifier).
    pub fn write(
        &mut self,
        fh: &[u8],
        off: u64,
        data: &[u8],
        stable: u32,
    ) -> R<(u32, u32, [u8; 8])> {
        let mut a = Writer::with_capacity(data.len() + 96);
        a.opaque(fh)
            .u64(off)
            .u32(data.len() as u32)
            .u32(stable)
            .opaque(data);
        let rest = self.ok(7, &a.buf)?;
        let mut r = Reader::new(&rest);
        wcc(&mut r)?;
        let n = r.u32()?;
        let c = r.u32()?;
        let mut v = [0u8; 8];
        v.copy_from_slice(r.fixed(8)?);
        Ok((n, c, v))
    }

    fn new_node(&mut self, proc_: u32, args: &[u8]) -> R<(Vec<u8>, Fattr)> {
        let rest = self.ok(proc_, args)?;
        let mut r = Reader::new(&rest);
        if !r.bool()? {
            return Err(Error::Garbage);
        }
        let fh = r.opaque(64)?.to_vec();
        let at = post_attr(&mut r)?.ok_or(Error::Garbage)?;
        Ok((fh, at))
    }

    /// CREATE; `how` 0 unchecked, 1 guarded (with `s`), 2 exclusive (with `verf`).
    pub fn create(
        &mut self,
        dir: &[u8],
        name: &str,
        how: u32,
        s: &Sattr,
        verf: [u8; 8],
    ) -> R<(Vec<u8>, Fattr)> {
        let mut a = Writer::new();
        a.opaque(dir).opaque(name.as_bytes()).u32(how);
        if how == 2 {
            a.fixed(&verf);
        } else {
            sattr(&mut a, s);
        }
        self.new_node(8, &a.buf)
    }

    /// A plain file with `mode` (guarded create).
    pub fn create_file(&mut self, dir: &[u8], name: &str, mode: u32) -> R<(Vec<u8>, Fattr)> {
        let s = Sattr {
            mode: Some(mode),
            ..Default::default()
        };
        self.create(dir, name, 1, &s, [0; 8])
    }

    pub fn mkdir(&mut self, dir: &[u8], name: &str, mode: u32) -> R<(Vec<u8>, Fattr)> {
        let mut a = Writer::new();
        a.opaque(dir).opaque(name.as_bytes());
        sattr(
            &mut a,
            &Sattr {
                mode: Some(mode),
                ..Default::default()
            },
        );
        self.new_node(9, &a.buf)
    }

    pub fn symlink(&mut self, dir: &[u8], name: &str, target: &str) -> R<(Vec<u8>, Fattr)> {
        let mut a = Writer::new();
        a.opaque(dir).opaque(name.as_bytes());
        sattr(&mut a, &Sattr::default());
        a.opaque(target.as_bytes());
        self.new_node(10, &a.buf)
    }

    /// MKNOD of `ftype` (3 block, 4 char, 6 socket, 7 fifo).
    pub fn mknod(
        &mut self,
        dir: &[u8],
        name: &str,
        ftype: u32,
        mode: u32,
        dev: (u32, u32),
    ) -> R<(Vec<u8>, Fattr)> {
        let mut a = Writer::new();
        a.opaque(dir).opaque(name.as_bytes()).u32(ftype);
        let s = Sattr {
            mode: Some(mode),
            ..Default::default()
        };
        match ftype {
            3 | 4 => {
                sattr(&mut a, &s);
                a.u32(dev.0).u32(dev.1);
            }
            6 | 7 => sattr(&mut a, &s),
            _ => {}
        }
        self.new_node(11, &a.buf)
    }

    fn dirop(&mut self, proc_: u32, dir: &[u8], name: &str) -> R<()> {
        let mut a = Writer::new();
        a.opaque(dir).opaque(name.as_bytes());
        self.ok(proc_, &a.buf).map(|_| ())
    }

    pub fn remove(&mut self, dir: &[u8], name: &str) -> R<()> {
        self.dirop(12, dir, name)
    }
    pub fn rmdir(&mut self, dir: &[u8], name: &str) -> R<()> {
        self.dirop(13, dir, name)
    }

    pub fn rename(&mut self, from: &[u8], fname: &str, to: &[u8], tname: &str) -> R<()> {
        let mut a = Writer::new();
        a.opaque(from)
            .opaque(fname.as_bytes())
            .opaque(to)
            .opaque(tname.as_bytes());
        self.ok(14, &a.buf).map(|_| ())
    }

    pub fn link(&mut self, fh: &[u8], dir: &[u8], name: &str) -> R<Option<Fattr>> {
        let mut a = Writer::new();
        a.opaque(fh).opaque(dir).opaque(name.as_bytes());
        let rest = self.ok(15, &a.buf)?;
        Ok(post_attr(&mut Reader::new(&rest))?)
    }

    /// One READDIR (`plus` false) or READDIRPLUS page: (entries, eof).
    pub fn readdir_page(
        &mut self,
        dir: &[u8],
        cookie: u64,
        count: u32,
        plus: bool,
    ) -> R<(Vec<Entry>, bool)> {
        let mut a = Writer::new();
        a.opaque(dir).u64(cookie).fixed(&[0; 8]);
        if plus {
            a.u32(count / 4).u32(count);
        } else {
            a.u32(count);
        }
        let rest = self.ok(if plus { 17 } else { 16 }, &a.buf)?;
        let mut r = Reader::new(&rest);
        post_attr(&mut r)?;
        r.fixed(8)?;
        let mut out = vec![];
        while r.bool()? {
            let fileid = r.u64()?;
            let name = r.string(1024)?.to_vec();
            let cookie = r.u64()?;
            let (attr, handle) = if plus {
                let at = post_attr(&mut r)?;
                let h = if r.bool()? {
                    Some(r.opaque(64)?.to_vec())
                } else {
                    None
                };
                (at, h)
            } else {
                (None, None)
            };
            out.push(Entry {
                fileid,
                name,
                cookie,
                attr,
                handle,
            });
        }
        Ok((out, r.bool()?))
    }

    /// Every entry of a directory, page by page.
    pub fn readdir_all(&mut self, dir: &[u8], count: u32, plus: bool) -> R<Vec<Entry>> {
        let mut all = vec![];
        let mut cookie = 0;
        loop {
            let (page, eof) = self.readdir_page(dir, cookie, count, plus)?;
            if let Some(last) = page.last() {
                cookie = last.cookie;
            }
            let empty = page.is_empty();
            all.extend(page);
            if eof {
                return Ok(all);
            }
            if empty {
                return Err(Error::Garbage);
            }
        }
    }

    /// FSSTAT: (tbytes, fbytes, abytes, tfiles, ffiles, afiles).
    pub fn fsstat(&mut self, fh: &[u8]) -> R<[u64; 6]> {
        let mut a = Writer::new();
        a.opaque(fh);
        let rest = self.ok(18, &a.buf)?;
        let mut r = Reader::new(&rest);
        post_attr(&mut r)?;
        let mut v = [0u64; 6];
        for x in v.iter_mut() {
            *x = r.u64()?;
        }
        Ok(v)
    }

    /// FSINFO: rtmax, rtpref, rtmult, wtmax, wtpref, wtmult, dtpref, then
    /// maxfilesize and properties.
    pub fn fsinfo(&mut self, fh: &[u8]) -> R<([u32; 7], u64, u32)> {
        let mut a = Writer::new();
        a.opaque(fh);
        let rest = self.ok(19, &a.buf)?;
        let mut r = Reader::new(&rest);
        post_attr(&mut r)?;
        let mut v = [0u32; 7];
        for x in v.iter_mut() {
            *x = r.u32()?;
        }
        let max = r.u64()?;
        r.fixed(8)?;
        Ok((v, max, r.u32()?))
    }

    /// PATHCONF: (linkmax, name_max).
    pub fn pathconf(&mut self, fh: &[u8]) -> R<(u32, u32)> {
        let mut a = Writer::new();
        a.opaque(fh);
        let rest = self.ok(20, &a.buf)?;
        let mut r = Reader::new(&rest);
        post_attr(&mut r)?;
        Ok((r.u32()?, r.u32()?))
    }

    pub fn commit(&mut self, fh: &[u8]) -> R<[u8; 8]> {
        let mut a = Writer::new();
        a.opaque(fh).u64(0).u32(0);
        let rest = self.ok(21, &a.buf)?;
        let mut r = Reader::new(&rest);
        wcc(&mut r)?;
        let mut v = [0u8; 8];
        v.copy_from_slice(r.fixed(8)?);
        Ok(v)
    }
}

/// Decode a reply to `xid`: the result body, or the RPC error.
pub fn decode_reply(xid: u32, reply: &[u8]) -> R<Vec<u8>> {
    Ok(reply[reply_body_at(xid, reply)?..].to_vec())
}

/// Where the result body of accepted reply `reply` to call `xid` starts.
fn reply_body_at(xid: u32, reply: &[u8]) -> R<usize> {
    let mut r = Reader::new(reply);
    if r.u32()? != xid || r.u32()? != 1 {
        return Err(Error::Garbage);
    }
    match r.u32()? {
        0 => {
            r.u32()?;
            r.opaque(400)?;
            let e = match r.u32()? {
                0 => return Ok(reply.len() - r.remaining()),
                1 => RpcError::ProgUnavail,
                2 => RpcError::ProgMismatch {
                    low: r.u32()?,
                    high: r.u32()?,
                },
                3 => RpcError::ProcUnavail,
                4 => RpcError::GarbageArgs,
                _ => RpcError::SystemErr,
            };
            Err(Error::Rpc(e))
        }
        _ => match r.u32()? {
            0 => Err(Error::Rpc(RpcError::RpcMismatch)),
            _ => Err(Error::Rpc(RpcError::Auth(r.u32()?))),
        },
    }
}
