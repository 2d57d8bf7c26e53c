//! NFSv3 LOOKUP, READDIR and READDIRPLUS, over real directories and over the
//! two virtual directories that show snapshots: `.cachalot` (in the root of a
//! live filesystem, not listed by READDIR, as zfs's hidden snapdir) and
//! `.cachalot/snapshot`, whose entries are the roots of the dataset's
//! snapshots (read-only filesystems with their own fsid).
//!
//! Invariants:
//! - Cookies are the directory layer's stable entry keys (1 and 2 for "." and
//!   ".."), so a listing continues correctly across concurrent changes and the
//!   cookie verifier is constant (zero); virtual directories use indexes.
//! - A reply never exceeds the client's count (READDIR) or maxcount and
//!   dircount (READDIRPLUS); a count too small for one entry is TOOSMALL.

use super::args::DirOp;
use super::ns::CTL_NAME;
use super::{
    may, post_attr, post_fh, status, Ctx, Node, Target, MAY_EXEC, MAY_READ, NFS3ERR_ACCES,
    NFS3ERR_NOENT, NFS3ERR_NOTDIR, NFS3ERR_TOOSMALL, NFS3_OK,
};
use crate::handle::{Handle, NodeKind};
use crate::xdr::Writer;
use cachalot_posix::{Attr, FileKind, Fs};
use std::sync::Arc;

const CTL_INO: u64 = u64::MAX - 1;
const SNAPS_INO: u64 = u64::MAX - 2;
/// Most entries read from the filesystem for one reply.
const MAX_BATCH: usize = 4096;

fn virtual_handle(n: &Node, kind: NodeKind) -> Handle {
    Handle {
        kind,
        snap_guid: 0,
        obj: 0,
        gen: 0,
        ..n.handle
    }
}

/// Attributes of a virtual directory (read-only, times of the live root).
pub fn virtual_attr(n: &Node) -> Attr {
    let root = n.export.fs.getattr(n.export.fs.root()).ok();
    let t = root.as_ref().map(|a| a.mtime).unwrap_or_default();
    let ino = if matches!(n.target, Target::Snaps) {
        SNAPS_INO
    } else {
        CTL_INO
    };
    read_only_dir(ino, t)
}

/// Attributes of a directory that exists only in the server (the snapshot
/// directories, the NFSv4 pseudo file system): mode 0555, owned by root.
pub(crate) fn read_only_dir(ino: u64, t: cachalot_posix::Timespec) -> Attr {
    Attr {
        ino,
        kind: FileKind::Directory,
        mode: libc::S_IFDIR | 0o555,
        nlink: 2,
        uid: 0,
        gid: 0,
        rdev: 0,
        size: 0,
        blocks: 0,
        blksize: 4096,
        atime: t,
        mtime: t,
        ctime: t,
        crtime: t,
        flags: 0,
        generation: 0,
    }
}

/// A node as LOOKUP and READDIRPLUS return it.
pub(crate) struct Found {
    pub handle: Handle,
    pub attr: Attr,
}

fn object(n: &Node, fs: &Arc<Fs>, a: Attr, snap_guid: u64) -> Found {
    let _ = fs;
    Found {
        handle: Handle {
            kind: NodeKind::Object,
            snap_guid,
            obj: a.ino,
            gen: a.generation,
            ..n.handle
        },
        attr: a,
    }
}

fn virtual_node(n: &Node, kind: NodeKind) -> Found {
    let h = virtual_handle(n, kind);
    let target = if kind == NodeKind::SnapDir {
        Target::Snaps
    } else {
        Target::Ctl
    };
    let v = Node {
        handle: h,
        target,
        ..n.clone()
    };
    Found {
        handle: h,
        attr: virtual_attr(&v),
    }
}

fn live_root(n: &Node) -> Result<Found, u32> {
    let fs = &n.export.fs;
    let a = fs.getattr(fs.root()).map_err(status)?;
    Ok(object(n, fs, a, 0))
}

/// The root of snapshot `name` of the node's dataset.
fn snapshot_root(ctx: &Ctx<'_>, n: &Node, name: &[u8]) -> Result<Found, u32> {
    let name = std::str::from_utf8(name).map_err(|_| NFS3ERR_NOENT)?;
    if name.is_empty() || name.contains('@') || name.contains('/') {
        return Err(NFS3ERR_NOENT);
    }
    let (guid, fs) = ctx
        .exports
        .snapshot_named(&n.export, name)
        .map_err(|_| NFS3ERR_NOENT)?;
    let a = fs.getattr(fs.root()).map_err(status)?;
    Ok(object(n, &fs, a, guid))
}

/// Find `name` in directory node `n`.
pub(crate) fn find(ctx: &Ctx<'_>, n: &Node, name: &[u8]) -> Result<Found, u32> {
    match &n.target {
        Target::Obj(fs, a) => {
            if a.kind != FileKind::Directory {
                return Err(NFS3ERR_NOTDIR);
            }
            if !may(a, &n.user, MAY_EXEC) {
                return Err(NFS3ERR_ACCES);
            }
            let at_root = a.ino == fs.root();
            if at_root && n.handle.snap_guid == 0 && name == CTL_NAME {
                return Ok(virtual_node(n, NodeKind::CtlDir));
            }
            if at_root && n.handle.snap_guid != 0 && name == b".." {
                return Ok(virtual_node(n, NodeKind::SnapDir));
            }
            let c = fs.lookup(a.ino, name).map_err(status)?;
            Ok(object(n, fs, c, n.handle.snap_guid))
        }
        Target::Ctl => match name {
            b"." => Ok(virtual_node(n, NodeKind::CtlDir)),
            b".." => live_root(n),
            b"snapshot" => Ok(virtual_node(n, NodeKind::SnapDir)),
            _ => Err(NFS3ERR_NOENT),
        },
        Target::Snaps => match name {
            b"." => Ok(virtual_node(n, NodeKind::SnapDir)),
            b".." => Ok(virtual_node(n, NodeKind::CtlDir)),
            _ => snapshot_root(ctx, n, name),
        },
    }
}

pub fn lookup(ctx: &Ctx<'_>, op: DirOp<'_>) -> Writer {
    let mut w = Writer::new();
    let n = match ctx.resolve(op.dir) {
        Ok(n) => n,
        Err(s) => {
            w.u32(s).bool(false);
            return w;
        }
    };
    match find(ctx, &n, op.name) {
        Ok(f) => {
            if let Target::Obj(_, a) = &n.target {
                ctx.named(f.attr.ino, a.ino, op.name);
            }
            w.u32(NFS3_OK).opaque(&f.handle.encode());
            let fsid = Node {
                handle: f.handle,
                ..n.clone()
            }
            .fsid();
            post_attr(&mut w, Some(&f.attr), fsid);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
        }
        Err(s) => {
            w.u32(s);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
        }
    }
    w
}

/// One directory entry to return.
pub(crate) struct Ent {
    pub cookie: u64,
    pub fileid: u64,
    pub name: Vec<u8>,
}

/// Up to `max` entries of directory `n` after `cookie`; the flag says whether
/// the directory has no more.
pub(crate) fn entries(
    ctx: &Ctx<'_>,
    n: &Node,
    cookie: u64,
    max: usize,
) -> Result<(Vec<Ent>, bool), u32> {
    let mut all: Vec<Ent> = match &n.target {
        Target::Obj(fs, a) => {
            if a.kind != FileKind::Directory {
                return Err(NFS3ERR_NOTDIR);
            }
            if !may(a, &n.user, MAY_READ) {
                return Err(NFS3ERR_ACCES);
            }
            let got = fs.readdir(a.ino, cookie, max).map_err(status)?;
            let done = got.len() < max;
            let at_snap_root = n.handle.snap_guid != 0 && a.ino == fs.root();
            let ents = got
                .into_iter()
                .map(|e| Ent {
                    cookie: e.cookie,
                    fileid: if at_snap_root && e.name == b".." {
                        SNAPS_INO
                    } else {
                        e.ino
                    },
                    name: e.name,
                })
                .collect();
            return Ok((ents, done));
        }
        Target::Ctl => vec![
            (CTL_INO, b".".to_vec()),
            (n.export.fs.root(), b"..".to_vec()),
            (SNAPS_INO, b"snapshot".to_vec()),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (fileid, name))| Ent {
            cookie: i as u64 + 1,
            fileid,
            name,
        })
        .collect(),
        Target::Snaps => {
            let names = n
                .export
                .store
                .snapshot_names(&n.export.name)
                .unwrap_or_default();
            let mut v = vec![(SNAPS_INO, b".".to_vec()), (CTL_INO, b"..".to_vec())];
            for s in names {
                let guid = n
                    .export
                    .store
                    .snapshot_guid(&format!("{}@{s}", n.export.name))
                    .unwrap_or(0);
                v.push((guid, s.into_bytes()));
            }
            v.into_iter()
                .enumerate()
                .map(|(i, (fileid, name))| Ent {
                    cookie: i as u64 + 1,
                    fileid,
                    name,
                })
                .collect()
        }
    };
    let _ = ctx;
    all.retain(|e| e.cookie > cookie);
    let done = all.len() <= max;
    all.truncate(max);
    Ok((all, done))
}

fn pad4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// READDIR (`dircount` None) and READDIRPLUS: `count` is the reply's byte limit.
pub fn readdir(ctx: &Ctx<'_>, fh: &[u8], cookie: u64, count: u32, dircount: Option<u32>) -> Writer {
    let mut w = Writer::new();
    let n = match ctx.resolve(fh) {
        Ok(n) => n,
        Err(s) => {
            w.u32(s).bool(false);
            return w;
        }
    };
    let plus = dircount.is_some();
    let count = (count as usize).min(super::args::MAX_IO as usize);
    let dircount = dircount.map_or(count, |d| (d as usize).clamp(512, count.max(512)));
    // status, attributes, verifier, list end and eof.
    let overhead = 4 + 88 + 8 + 8;
    let per_entry = if plus { 24 + 88 + 56 } else { 24 };
    let want = ((count.saturating_sub(overhead)) / (per_entry + 4) + 2).min(MAX_BATCH);
    let (ents, done) = match entries(ctx, &n, cookie, want) {
        Ok(x) => x,
        Err(s) => {
            w.u32(s);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
            return w;
        }
    };
    let mut body = Writer::new();
    let (mut size, mut dsize, mut fitted) = (overhead, 0usize, 0usize);
    for e in &ents {
        let base = 20 + pad4(e.name.len());
        let extra = if plus { plus_entry(ctx, &n, e) } else { None };
        let esize = base + 4 + extra.as_ref().map_or(if plus { 8 } else { 0 }, |x| x.len());
        if size + esize > count || (plus && dsize + base > dircount) {
            break;
        }
        size += esize;
        dsize += base;
        fitted += 1;
        body.bool(true).u64(e.fileid).opaque(&e.name).u64(e.cookie);
        if plus {
            match extra {
                Some(x) => body.buf.extend_from_slice(&x.buf),
                None => {
                    body.bool(false).bool(false);
                }
            }
        }
    }
    if fitted == 0 && !ents.is_empty() {
        w.u32(NFS3ERR_TOOSMALL);
        post_attr(&mut w, n.attr().as_ref(), n.fsid());
        return w;
    }
    let eof = done && fitted == ents.len();
    w.u32(NFS3_OK);
    post_attr(&mut w, n.attr().as_ref(), n.fsid());
    w.fixed(&[0u8; 8]);
    w.buf.extend_from_slice(&body.buf);
    w.bool(false).bool(eof);
    w
}

/// The attributes and handle of a READDIRPLUS entry (None if it vanished).
fn plus_entry(ctx: &Ctx<'_>, n: &Node, e: &Ent) -> Option<Writer> {
    let f = find(ctx, n, &e.name).ok()?;
    let fsid = Node {
        handle: f.handle,
        ..n.clone()
    }
    .fsid();
    let mut x = Writer::new();
    post_attr(&mut x, Some(&f.attr), fsid);
    post_fh(&mut x, Some(&f.handle));
    Some(x)
}
