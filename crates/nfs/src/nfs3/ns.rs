//! NFSv3 procedures that change the namespace: CREATE (unchecked, guarded,
//! exclusive), MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK.
//!
//! Invariants:
//! - The caller needs write and search permission on every directory it
//!   changes; in a sticky directory only root, the directory's owner or the
//!   entry's owner may remove or rename an entry.
//! - New nodes are owned by the (squashed) caller with the requested mode;
//!   other attributes of the request are applied after the create, under the
//!   same rules as SETATTR.
//! - Exclusive CREATE stores the client's verifier in the new file's atime and
//!   mtime seconds (as Linux servers do): a retry with the same verifier finds it
//!   and succeeds, any other create of that name gets EXIST.
//! - `.cachalot` in the root of a filesystem is reserved for the snapshot
//!   directory: it cannot be created, removed or renamed.

use super::args::{CreateHow, DirOp, MknodWhat, Sattr};
use super::procs::{check_setattr, to_setattr};
use super::{
    may, post_attr, post_fh, status, wcc, Ctx, Node, Target, MAY_EXEC, MAY_WRITE, NFS3ERR_ACCES,
    NFS3ERR_BADTYPE, NFS3ERR_EXIST, NFS3ERR_NOTDIR, NFS3ERR_PERM, NFS3ERR_XDEV, NFS3_OK,
};
use crate::xdr::Writer;
use cachalot_posix::{Attr, Errno, FileKind, Fs, RenameMode, TimeSet, Timespec};
use std::sync::Arc;

/// The reserved name of the virtual directory in a filesystem's root.
pub const CTL_NAME: &[u8] = b".cachalot";

/// Why a directory cannot be changed: the status and the node, if resolved.
pub(crate) type OpenError = (u32, Option<Box<Node>>);

/// A directory the caller may change: its filesystem and attributes (shared
/// with NFSv4, whose operations call the `*_in` functions below).
pub(crate) struct DirCtx {
    pub node: Node,
    pub fs: Arc<Fs>,
    pub pre: Attr,
}

impl DirCtx {
    pub(crate) fn open(ctx: &Ctx<'_>, fh: &[u8]) -> Result<DirCtx, OpenError> {
        let node = ctx.resolve(fh).map_err(|s| (s, None))?;
        if let Err(s) = node.writable() {
            return Err((s, Some(Box::new(node))));
        }
        let (fs, a) = match &node.target {
            Target::Obj(fs, a) => (fs.clone(), a.clone()),
            _ => return Err((NFS3ERR_ACCES, Some(Box::new(node)))),
        };
        if a.kind != FileKind::Directory {
            return Err((NFS3ERR_NOTDIR, Some(Box::new(node))));
        }
        if !may(&a, &node.user, MAY_WRITE | MAY_EXEC) {
            return Err((NFS3ERR_ACCES, Some(Box::new(node))));
        }
        Ok(DirCtx { node, fs, pre: a })
    }

    /// Make the change durable before the reply (RFC 1813: a server commits
    /// the metadata of CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME,
    /// LINK and SETATTR to stable storage before it answers).
    pub(crate) fn durable(&self) -> Result<(), u32> {
        if self.node.export.share.as_ref().is_some_and(|s| !s.sync) {
            return Ok(());
        }
        self.fs.fsync().map_err(status)
    }

    fn reserved(&self, name: &[u8]) -> bool {
        self.pre.ino == self.fs.root() && name == CTL_NAME
    }

    fn wcc(&self, w: &mut Writer) {
        let post = self.fs.getattr(self.pre.ino).ok();
        wcc(w, Some(&self.pre), post.as_ref(), self.node.fsid());
    }

    /// May the caller remove or rename away `victim` from this directory?
    fn may_delete(&self, victim: &Attr) -> bool {
        let u = &self.node.user;
        self.pre.mode & libc::S_ISVTX == 0
            || u.uid == 0
            || u.uid == self.pre.uid
            || u.uid == victim.uid
    }
}

/// A failure before the directory was resolved or checked.
fn fail_open(w: &mut Writer, (s, node): OpenError) {
    w.u32(s);
    let a = node.as_ref().and_then(|n| n.attr());
    let fsid = node.as_ref().map_or(0, |n| n.fsid());
    wcc(w, a.as_ref(), a.as_ref(), fsid);
}

/// The reply of CREATE, MKDIR, SYMLINK and MKNOD.
fn created(ctx: &Ctx<'_>, d: &DirCtx, name: &[u8], res: Result<Attr, u32>) -> Writer {
    let mut w = Writer::new();
    let res = res.and_then(|a| d.durable().map(|()| a));
    match res {
        Ok(a) => {
            ctx.named(a.ino, d.pre.ino, name);
            w.u32(NFS3_OK);
            post_fh(&mut w, Some(&d.node.child(&a)));
            post_attr(&mut w, Some(&a), d.node.fsid());
        }
        Err(s) => {
            w.u32(s);
        }
    }
    d.wcc(&mut w);
    w
}

/// Apply what a create request asks beyond the mode (owner by root, size, times).
fn apply_rest(d: &DirCtx, a: Attr, s: &Sattr) -> Result<Attr, u32> {
    let rest = Sattr {
        mode: None,
        uid: s.uid.filter(|u| *u != a.uid),
        gid: s.gid.filter(|g| *g != a.gid),
        ..s.clone()
    };
    if rest == Sattr::default() {
        return Ok(a);
    }
    check_setattr(&a, &d.node.user, &rest)?;
    d.fs.setattr(a.ino, &to_setattr(&rest)).map_err(status)
}

fn mode_of(s: &Sattr, default: u32) -> u32 {
    s.mode.unwrap_or(default) & 0o7777
}

pub fn create(ctx: &Ctx<'_>, op: DirOp<'_>, how: CreateHow) -> Writer {
    let d = match DirCtx::open(ctx, op.dir) {
        Ok(d) => d,
        Err(e) => {
            let mut w = Writer::new();
            fail_open(&mut w, e);
            return w;
        }
    };
    let res = create_in(&d, op.name, how);
    created(ctx, &d, op.name, res)
}

/// CREATE of a regular file `name` in `d` (NFSv3 CREATE, NFSv4 OPEN).
pub(crate) fn create_in(d: &DirCtx, name: &[u8], how: CreateHow) -> Result<Attr, u32> {
    if d.reserved(name) {
        return Err(NFS3ERR_EXIST);
    }
    let who = d.node.user.caller();
    let dir = d.pre.ino;
    match how {
        CreateHow::Unchecked(s) => {
            match d
                .fs
                .mknod(dir, name, libc::S_IFREG | mode_of(&s, 0o644), 0, who)
            {
                Ok(a) => apply_rest(d, a, &s),
                Err(Errno::EEXIST) => open_existing(d, name, &s),
                Err(e) => Err(status(e)),
            }
        }
        CreateHow::Guarded(s) => {
            d.fs.mknod(dir, name, libc::S_IFREG | mode_of(&s, 0o644), 0, who)
                .map_err(status)
                .and_then(|a| apply_rest(d, a, &s))
        }
        CreateHow::Exclusive(v) => create_exclusive(d, name, v),
    }
}

/// UNCHECKED create of an existing name: the file is opened (and truncated if
/// the request sets a size).
fn open_existing(d: &DirCtx, name: &[u8], s: &Sattr) -> Result<Attr, u32> {
    let a = d.fs.lookup(d.pre.ino, name).map_err(status)?;
    if a.kind != FileKind::Regular {
        return Err(NFS3ERR_EXIST);
    }
    match s.size {
        Some(size) => {
            let only_size = Sattr {
                size: Some(size),
                ..Sattr::default()
            };
            check_setattr(&a, &d.node.user, &only_size)?;
            d.fs.setattr(a.ino, &to_setattr(&only_size)).map_err(status)
        }
        None => Ok(a),
    }
}

fn verf_times(v: [u8; 8]) -> (Timespec, Timespec) {
    let half = |b: &[u8]| Timespec {
        sec: u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64,
        nsec: 0,
    };
    (half(&v[0..4]), half(&v[4..8]))
}

fn create_exclusive(d: &DirCtx, name: &[u8], v: [u8; 8]) -> Result<Attr, u32> {
    let (at, mt) = verf_times(v);
    let who = d.node.user.caller();
    match d.fs.mknod(d.pre.ino, name, libc::S_IFREG | 0o600, 0, who) {
        Ok(a) => {
            let set = cachalot_posix::SetAttr {
                atime: Some(TimeSet::At(at)),
                mtime: Some(TimeSet::At(mt)),
                ..Default::default()
            };
            d.fs.setattr(a.ino, &set).map_err(status)
        }
        Err(Errno::EEXIST) => {
            let a = d.fs.lookup(d.pre.ino, name).map_err(status)?;
            if a.kind == FileKind::Regular && a.atime.sec == at.sec && a.mtime.sec == mt.sec {
                Ok(a)
            } else {
                Err(NFS3ERR_EXIST)
            }
        }
        Err(e) => Err(status(e)),
    }
}

fn with_dir(ctx: &Ctx<'_>, op: DirOp<'_>, f: impl FnOnce(&DirCtx) -> Result<Attr, u32>) -> Writer {
    match DirCtx::open(ctx, op.dir) {
        Ok(d) => {
            let res = f(&d);
            created(ctx, &d, op.name, res)
        }
        Err(e) => {
            let mut w = Writer::new();
            fail_open(&mut w, e);
            w
        }
    }
}

pub fn mkdir(ctx: &Ctx<'_>, op: DirOp<'_>, s: &Sattr) -> Writer {
    with_dir(ctx, op, |d| mkdir_in(d, op.name, s))
}

pub(crate) fn mkdir_in(d: &DirCtx, name: &[u8], s: &Sattr) -> Result<Attr, u32> {
    if d.reserved(name) {
        return Err(NFS3ERR_EXIST);
    }
    let a =
        d.fs.mkdir(d.pre.ino, name, mode_of(s, 0o755), d.node.user.caller())
            .map_err(status)?;
    apply_rest(d, a, s)
}

pub fn symlink(ctx: &Ctx<'_>, op: DirOp<'_>, s: &Sattr, target: &[u8]) -> Writer {
    with_dir(ctx, op, |d| symlink_in(d, op.name, s, target))
}

pub(crate) fn symlink_in(d: &DirCtx, name: &[u8], s: &Sattr, target: &[u8]) -> Result<Attr, u32> {
    if d.reserved(name) {
        return Err(NFS3ERR_EXIST);
    }
    let a =
        d.fs.symlink(d.pre.ino, name, target, d.node.user.caller())
            .map_err(status)?;
    let s = Sattr {
        mode: None,
        ..s.clone()
    };
    apply_rest(d, a, &s)
}

pub fn mknod(ctx: &Ctx<'_>, op: DirOp<'_>, what: MknodWhat) -> Writer {
    with_dir(ctx, op, |d| mknod_in(d, op.name, what))
}

pub(crate) fn mknod_in(d: &DirCtx, name: &[u8], what: MknodWhat) -> Result<Attr, u32> {
    {
        if d.reserved(name) {
            return Err(NFS3ERR_EXIST);
        }
        let (kind, s, rdev) = match what {
            MknodWhat::Char(s, ma, mi) => (libc::S_IFCHR, s, libc::makedev(ma, mi)),
            MknodWhat::Block(s, ma, mi) => (libc::S_IFBLK, s, libc::makedev(ma, mi)),
            MknodWhat::Socket(s) => (libc::S_IFSOCK, s, 0),
            MknodWhat::Fifo(s) => (libc::S_IFIFO, s, 0),
            MknodWhat::Bad => return Err(NFS3ERR_BADTYPE),
        };
        if (kind == libc::S_IFCHR || kind == libc::S_IFBLK) && d.node.user.uid != 0 {
            return Err(NFS3ERR_PERM);
        }
        let a =
            d.fs.mknod(
                d.pre.ino,
                name,
                kind | mode_of(&s, 0o644),
                rdev,
                d.node.user.caller(),
            )
            .map_err(status)?;
        apply_rest(d, a, &s)
    }
}

/// REMOVE (`dir` false) and RMDIR (`dir` true).
pub fn remove(ctx: &Ctx<'_>, op: DirOp<'_>, rmdir: bool) -> Writer {
    let mut w = Writer::new();
    let d = match DirCtx::open(ctx, op.dir) {
        Ok(d) => d,
        Err(e) => {
            fail_open(&mut w, e);
            return w;
        }
    };
    let res = remove_in(&d, op.name, rmdir);
    w.u32(match res {
        Ok(()) => NFS3_OK,
        Err(s) => s,
    });
    d.wcc(&mut w);
    w
}

/// Remove `name` from `d` (a directory if `rmdir`) and make it durable.
pub(crate) fn remove_in(d: &DirCtx, name: &[u8], rmdir: bool) -> Result<(), u32> {
    if d.reserved(name) {
        return Err(NFS3ERR_ACCES);
    }
    if name != b"." && name != b".." {
        let victim = d.fs.lookup(d.pre.ino, name).map_err(status)?;
        if !d.may_delete(&victim) {
            return Err(NFS3ERR_ACCES);
        }
    }
    let r = if rmdir {
        d.fs.rmdir(d.pre.ino, name)
    } else {
        d.fs.unlink(d.pre.ino, name)
    };
    r.map_err(status)?;
    d.durable()
}

fn same_fs(a: &Node, b: &Node) -> bool {
    a.export.pool_guid == b.export.pool_guid
        && a.export.ds_id == b.export.ds_id
        && a.handle.snap_guid == b.handle.snap_guid
}

pub fn rename(ctx: &Ctx<'_>, from: DirOp<'_>, to: DirOp<'_>) -> Writer {
    let mut w = Writer::new();
    let (f, t) = match (DirCtx::open(ctx, from.dir), DirCtx::open(ctx, to.dir)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => {
            fail_open(&mut w, e);
            wcc(&mut w, None, None, 0);
            return w;
        }
    };
    let res = rename_in(&f, from.name, &t, to.name);
    w.u32(match res {
        Ok(()) => NFS3_OK,
        Err(s) => s,
    });
    f.wcc(&mut w);
    t.wcc(&mut w);
    w
}

/// Rename `fname` in `f` to `tname` in `t`, replacing it, durably.
pub(crate) fn rename_in(f: &DirCtx, fname: &[u8], t: &DirCtx, tname: &[u8]) -> Result<(), u32> {
    if !same_fs(&f.node, &t.node) {
        return Err(super::NFS3ERR_XDEV);
    }
    if f.reserved(fname) || t.reserved(tname) {
        return Err(NFS3ERR_ACCES);
    }
    let victim = f.fs.lookup(f.pre.ino, fname).map_err(status)?;
    if !f.may_delete(&victim) {
        return Err(NFS3ERR_ACCES);
    }
    if let Ok(old) = t.fs.lookup(t.pre.ino, tname) {
        if !t.may_delete(&old) {
            return Err(NFS3ERR_ACCES);
        }
    }
    f.fs.rename(f.pre.ino, fname, t.pre.ino, tname, RenameMode::Replace)
        .map_err(status)?;
    f.durable()
}

/// Link `file` as `name` in `d`, durably.
pub(crate) fn link_in(file: &Node, d: &DirCtx, name: &[u8]) -> Result<Attr, u32> {
    if !same_fs(file, &d.node) {
        return Err(NFS3ERR_XDEV);
    }
    if d.reserved(name) {
        return Err(NFS3ERR_EXIST);
    }
    let (_, a) = file.obj()?;
    let a = d.fs.link(a.ino, d.pre.ino, name).map_err(status)?;
    d.durable().map(|()| a)
}

pub fn link(ctx: &Ctx<'_>, fh: &[u8], op: DirOp<'_>) -> Writer {
    let mut w = Writer::new();
    let file = match ctx.resolve(fh) {
        Ok(n) => n,
        Err(s) => {
            w.u32(s).bool(false);
            wcc(&mut w, None, None, 0);
            return w;
        }
    };
    let d = match DirCtx::open(ctx, op.dir) {
        Ok(d) => d,
        Err(e) => {
            let mut w = Writer::new();
            w.u32(e.0);
            post_attr(&mut w, file.attr().as_ref(), file.fsid());
            wcc(&mut w, None, None, 0);
            return w;
        }
    };
    let res = link_in(&file, &d, op.name);
    match res {
        Ok(a) => {
            w.u32(NFS3_OK);
            post_attr(&mut w, Some(&a), file.fsid());
        }
        Err(s) => {
            w.u32(s);
            post_attr(&mut w, file.reload().as_ref(), file.fsid());
        }
    }
    d.wcc(&mut w);
    w
}
