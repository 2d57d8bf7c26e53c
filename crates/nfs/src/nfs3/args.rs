//! Decoding of NFSv3 procedure arguments (RFC 1813 section 3.3).
//!
//! Invariant: every variable item is bounded (handles 64 bytes, names 1024,
//! paths 4096, data 1 MiB) before it is taken, and borrowed from the message.

use crate::handle::MAX_HANDLE;
use crate::xdr::{Reader, XResult, XdrError};
use cachalot_posix::{TimeSet, Timespec};

/// Largest READ or WRITE (rtmax, wtmax).
pub const MAX_IO: u32 = 1 << 20;
/// Longest file name accepted on the wire (the filesystem allows 255).
pub const MAX_NAME_WIRE: usize = 1024;
/// Longest path (symlink target, mount path) accepted on the wire.
pub const MAX_PATH_WIRE: usize = 4096;

/// A sattr3: attributes to set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sattr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
}

/// How CREATE treats an existing name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateHow {
    Unchecked(Sattr),
    Guarded(Sattr),
    Exclusive([u8; 8]),
}

/// What MKNOD makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MknodWhat {
    Char(Sattr, u32, u32),
    Block(Sattr, u32, u32),
    Socket(Sattr),
    Fifo(Sattr),
    /// A type MKNOD cannot make (regular, directory, symlink, unknown).
    Bad,
}

/// A directory handle and a name in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirOp<'a> {
    pub dir: &'a [u8],
    pub name: &'a [u8],
}

/// The arguments of one NFSv3 procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Args<'a> {
    Null,
    Getattr(&'a [u8]),
    Setattr(&'a [u8], Sattr, Option<Timespec>),
    Lookup(DirOp<'a>),
    Access(&'a [u8], u32),
    Readlink(&'a [u8]),
    Read(&'a [u8], u64, u32),
    Write {
        fh: &'a [u8],
        off: u64,
        count: u32,
        stable: u32,
        data: &'a [u8],
    },
    Create(DirOp<'a>, CreateHow),
    Mkdir(DirOp<'a>, Sattr),
    Symlink(DirOp<'a>, Sattr, &'a [u8]),
    Mknod(DirOp<'a>, MknodWhat),
    Remove(DirOp<'a>),
    Rmdir(DirOp<'a>),
    Rename(DirOp<'a>, DirOp<'a>),
    Link(&'a [u8], DirOp<'a>),
    Readdir {
        fh: &'a [u8],
        cookie: u64,
        count: u32,
    },
    Readdirplus {
        fh: &'a [u8],
        cookie: u64,
        dircount: u32,
        maxcount: u32,
    },
    Fsstat(&'a [u8]),
    Fsinfo(&'a [u8]),
    Pathconf(&'a [u8]),
    Commit(&'a [u8], u64, u32),
}

/// Names of the procedures, by number (analytics and logs).
pub const PROC_NAMES: [&str; 22] = [
    "null",
    "getattr",
    "setattr",
    "lookup",
    "access",
    "readlink",
    "read",
    "write",
    "create",
    "mkdir",
    "symlink",
    "mknod",
    "remove",
    "rmdir",
    "rename",
    "link",
    "readdir",
    "readdirplus",
    "fsstat",
    "fsinfo",
    "pathconf",
    "commit",
];

fn fh<'a>(r: &mut Reader<'a>) -> XResult<&'a [u8]> {
    r.opaque(MAX_HANDLE)
}

fn dirop<'a>(r: &mut Reader<'a>) -> XResult<DirOp<'a>> {
    Ok(DirOp {
        dir: fh(r)?,
        name: r.string(MAX_NAME_WIRE)?,
    })
}

fn time(r: &mut Reader<'_>) -> XResult<Timespec> {
    let sec = r.u32()?;
    let nsec = r.u32()?;
    if nsec >= 1_000_000_000 {
        return Err(XdrError);
    }
    Ok(Timespec {
        sec: sec as i64,
        nsec,
    })
}

fn set_time(r: &mut Reader<'_>) -> XResult<Option<TimeSet>> {
    Ok(match r.u32()? {
        0 => None,
        1 => Some(TimeSet::Now),
        2 => Some(TimeSet::At(time(r)?)),
        _ => return Err(XdrError),
    })
}

fn opt_u32(r: &mut Reader<'_>) -> XResult<Option<u32>> {
    Ok(if r.bool()? { Some(r.u32()?) } else { None })
}

pub fn sattr(r: &mut Reader<'_>) -> XResult<Sattr> {
    Ok(Sattr {
        mode: opt_u32(r)?,
        uid: opt_u32(r)?,
        gid: opt_u32(r)?,
        size: if r.bool()? { Some(r.u64()?) } else { None },
        atime: set_time(r)?,
        mtime: set_time(r)?,
    })
}

fn mknod_what(r: &mut Reader<'_>) -> XResult<MknodWhat> {
    Ok(match r.u32()? {
        3 => {
            let s = sattr(r)?;
            MknodWhat::Block(s, r.u32()?, r.u32()?)
        }
        4 => {
            let s = sattr(r)?;
            MknodWhat::Char(s, r.u32()?, r.u32()?)
        }
        6 => MknodWhat::Socket(sattr(r)?),
        7 => MknodWhat::Fifo(sattr(r)?),
        _ => MknodWhat::Bad,
    })
}

/// WRITE's arguments before its data: (file handle, offset, count, stable).
pub fn write_head<'a>(r: &mut Reader<'a>) -> XResult<(&'a [u8], u64, u32, u32)> {
    Ok((fh(r)?, r.u64()?, r.u32()?, r.u32()?))
}

/// Decode the arguments of procedure `proc_` (`None`: no such procedure).
pub fn decode(proc_: u32, buf: &[u8]) -> Option<XResult<Args<'_>>> {
    if proc_ > 21 {
        return None;
    }
    Some(decode_known(proc_, &mut Reader::new(buf)))
}

fn decode_known<'a>(proc_: u32, r: &mut Reader<'a>) -> XResult<Args<'a>> {
    Ok(match proc_ {
        0 => Args::Null,
        1 => Args::Getattr(fh(r)?),
        2 => {
            let f = fh(r)?;
            let s = sattr(r)?;
            let guard = if r.bool()? { Some(time(r)?) } else { None };
            Args::Setattr(f, s, guard)
        }
        3 => Args::Lookup(dirop(r)?),
        4 => Args::Access(fh(r)?, r.u32()?),
        5 => Args::Readlink(fh(r)?),
        6 => Args::Read(fh(r)?, r.u64()?, r.u32()?),
        7 => {
            let (fh, off, count, stable) = write_head(r)?;
            Args::Write {
                fh,
                off,
                count,
                stable,
                data: r.opaque(MAX_IO as usize)?,
            }
        }
        8 => {
            let d = dirop(r)?;
            let how = match r.u32()? {
                0 => CreateHow::Unchecked(sattr(r)?),
                1 => CreateHow::Guarded(sattr(r)?),
                2 => {
                    let mut v = [0u8; 8];
                    v.copy_from_slice(r.fixed(8)?);
                    CreateHow::Exclusive(v)
                }
                _ => return Err(XdrError),
            };
            Args::Create(d, how)
        }
        9 => Args::Mkdir(dirop(r)?, sattr(r)?),
        10 => Args::Symlink(dirop(r)?, sattr(r)?, r.string(MAX_PATH_WIRE)?),
        11 => Args::Mknod(dirop(r)?, mknod_what(r)?),
        12 => Args::Remove(dirop(r)?),
        13 => Args::Rmdir(dirop(r)?),
        14 => Args::Rename(dirop(r)?, dirop(r)?),
        15 => Args::Link(fh(r)?, dirop(r)?),
        16 => {
            let f = fh(r)?;
            let cookie = r.u64()?;
            r.fixed(8)?;
            Args::Readdir {
                fh: f,
                cookie,
                count: r.u32()?,
            }
        }
        17 => {
            let f = fh(r)?;
            let cookie = r.u64()?;
            r.fixed(8)?;
            Args::Readdirplus {
                fh: f,
                cookie,
                dircount: r.u32()?,
                maxcount: r.u32()?,
            }
        }
        18 => Args::Fsstat(fh(r)?),
        19 => Args::Fsinfo(fh(r)?),
        20 => Args::Pathconf(fh(r)?),
        21 => Args::Commit(fh(r)?, r.u64()?, r.u32()?),
        _ => return Err(XdrError),
    })
}
