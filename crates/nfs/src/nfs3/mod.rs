//! NFS version 3 (RFC 1813): status codes, attribute encoding, the resolution
//! of a file handle to a node with the caller's identity, and permission checks.
//! The procedures are in `procs.rs` (files) and `dirs.rs` (directories and the
//! virtual snapshot directories).
//!
//! Invariants:
//! - Every request resolves its handles through [`Ctx::resolve`], which applies
//!   the share's client list (ACCES), read-only access, squashing, and staleness
//!   (missing dataset, object or generation mismatch: STALE; not ours: BADHANDLE).
//! - The POSIX layer trusts its caller, so every permission check happens here,
//!   as a Linux server does it: owner/group/other bits with the caller's AUTH_SYS
//!   groups, root allowed everything but executing a file without any x bit, and
//!   the owner allowed to read and write a file it may not by mode (knfsd's
//!   owner override, which lets `open(O_CREAT, 0444)` then write work).
//! - Every defined procedure answers with its own result type; errors carry the
//!   attributes or WCC data RFC 1813 lists for the failure case.

pub mod args;
pub(crate) mod dirs;
pub(crate) mod ns;
pub(crate) mod procs;

use crate::exports::{Export, Exports, LookupError};
use crate::handle::{Handle, NodeKind};
use crate::rpc::Cred;
use crate::xdr::Writer;
use cachalot_datasets::share::Access;
use cachalot_posix::{Attr, Errno, FileKind, Fs};
use std::net::IpAddr;
use std::sync::Arc;

pub use procs::dispatch;

pub const NFS3_OK: u32 = 0;
pub const NFS3ERR_PERM: u32 = 1;
pub const NFS3ERR_NOENT: u32 = 2;
pub const NFS3ERR_IO: u32 = 5;
pub const NFS3ERR_ACCES: u32 = 13;
pub const NFS3ERR_EXIST: u32 = 17;
pub const NFS3ERR_XDEV: u32 = 18;
pub const NFS3ERR_NODEV: u32 = 19;
pub const NFS3ERR_NOTDIR: u32 = 20;
pub const NFS3ERR_ISDIR: u32 = 21;
pub const NFS3ERR_INVAL: u32 = 22;
pub const NFS3ERR_FBIG: u32 = 27;
pub const NFS3ERR_NOSPC: u32 = 28;
pub const NFS3ERR_ROFS: u32 = 30;
pub const NFS3ERR_MLINK: u32 = 31;
pub const NFS3ERR_NAMETOOLONG: u32 = 63;
pub const NFS3ERR_NOTEMPTY: u32 = 66;
pub const NFS3ERR_DQUOT: u32 = 69;
pub const NFS3ERR_STALE: u32 = 70;
pub const NFS3ERR_BADHANDLE: u32 = 10001;
pub const NFS3ERR_NOT_SYNC: u32 = 10002;
pub const NFS3ERR_BAD_COOKIE: u32 = 10003;
pub const NFS3ERR_NOTSUPP: u32 = 10004;
pub const NFS3ERR_TOOSMALL: u32 = 10005;
pub const NFS3ERR_SERVERFAULT: u32 = 10006;
pub const NFS3ERR_BADTYPE: u32 = 10007;

pub const ACCESS_READ: u32 = 0x01;
pub const ACCESS_LOOKUP: u32 = 0x02;
pub const ACCESS_MODIFY: u32 = 0x04;
pub const ACCESS_EXTEND: u32 = 0x08;
pub const ACCESS_DELETE: u32 = 0x10;
pub const ACCESS_EXECUTE: u32 = 0x20;

/// Map a POSIX error to an NFSv3 status.
pub fn status(e: Errno) -> u32 {
    match e.0 {
        libc::EPERM => NFS3ERR_PERM,
        libc::ENOENT => NFS3ERR_NOENT,
        libc::EACCES => NFS3ERR_ACCES,
        libc::EEXIST => NFS3ERR_EXIST,
        libc::EXDEV => NFS3ERR_XDEV,
        libc::ENODEV => NFS3ERR_NODEV,
        libc::ENOTDIR => NFS3ERR_NOTDIR,
        libc::EISDIR => NFS3ERR_ISDIR,
        libc::EINVAL | libc::ERANGE | libc::ELOOP => NFS3ERR_INVAL,
        libc::EFBIG | libc::E2BIG => NFS3ERR_FBIG,
        libc::ENOSPC => NFS3ERR_NOSPC,
        libc::EROFS => NFS3ERR_ROFS,
        libc::EMLINK => NFS3ERR_MLINK,
        libc::ENAMETOOLONG => NFS3ERR_NAMETOOLONG,
        libc::ENOTEMPTY => NFS3ERR_NOTEMPTY,
        libc::EDQUOT => NFS3ERR_DQUOT,
        libc::ESTALE => NFS3ERR_STALE,
        libc::EOPNOTSUPP | libc::ENOSYS => NFS3ERR_NOTSUPP,
        _ => NFS3ERR_IO,
    }
}

/// The identity a request acts as (after squashing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    pub gids: Vec<u32>,
}

impl User {
    fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.gids.contains(&gid)
    }
    pub fn caller(&self) -> cachalot_posix::Caller {
        cachalot_posix::Caller {
            uid: self.uid,
            gid: self.gid,
        }
    }
}

pub const MAY_READ: u32 = 4;
pub const MAY_WRITE: u32 = 2;
pub const MAY_EXEC: u32 = 1;

/// True if `user` may do `want` (MAY_* bits) to a node with attributes `a`.
pub fn may(a: &Attr, user: &User, want: u32) -> bool {
    if user.uid == 0 {
        let exec_denied =
            want & MAY_EXEC != 0 && a.kind != FileKind::Directory && a.mode & 0o111 == 0;
        return !exec_denied;
    }
    let bits = if a.uid == user.uid {
        (a.mode >> 6) & 7
    } else if user.in_group(a.gid) {
        (a.mode >> 3) & 7
    } else {
        a.mode & 7
    };
    bits & want == want
}

/// `may`, with the owner of a regular file allowed to read and write it.
pub fn may_io(a: &Attr, user: &User, want: u32) -> bool {
    (a.kind == FileKind::Regular && a.uid == user.uid) || may(a, user, want)
}

/// What a resolved handle points at.
#[derive(Clone)]
pub enum Target {
    /// An object of a filesystem (live or snapshot) and its attributes now.
    Obj(Arc<Fs>, Attr),
    /// `.cachalot` in the root.
    Ctl,
    /// `.cachalot/snapshot`.
    Snaps,
}

/// A resolved handle: the export, the node and who asks.
#[derive(Clone)]
pub struct Node {
    pub export: Export,
    pub handle: Handle,
    pub target: Target,
    pub readonly: bool,
    pub user: User,
}

impl Node {
    /// The filesystem identity reported in attributes: one per dataset and
    /// snapshot.
    pub fn fsid(&self) -> u64 {
        self.export.pool_guid.rotate_left(17) ^ self.export.ds_id ^ self.handle.snap_guid
    }

    /// The handle of object `a` in the same filesystem.
    pub fn child(&self, a: &Attr) -> Handle {
        Handle {
            kind: NodeKind::Object,
            obj: a.ino,
            gen: a.generation,
            ..self.handle
        }
    }

    pub fn obj(&self) -> Result<(&Arc<Fs>, &Attr), u32> {
        match &self.target {
            Target::Obj(fs, a) => Ok((fs, a)),
            _ => Err(NFS3ERR_ACCES),
        }
    }

    pub fn attr(&self) -> Option<Attr> {
        match &self.target {
            Target::Obj(_, a) => Some(a.clone()),
            Target::Ctl | Target::Snaps => Some(dirs::virtual_attr(self)),
        }
    }

    /// Fresh attributes (after a change).
    pub fn reload(&self) -> Option<Attr> {
        match &self.target {
            Target::Obj(fs, a) => fs.getattr(a.ino).ok(),
            _ => self.attr(),
        }
    }

    /// Commit a metadata change before the reply, unless the share is `async`.
    pub fn commit_metadata(&self, fs: &Fs) -> Result<(), Errno> {
        if self.export.share.as_ref().is_some_and(|s| !s.sync) {
            return Ok(());
        }
        fs.fsync()
    }

    pub fn writable(&self) -> Result<(), u32> {
        if self.readonly || self.handle.snap_guid != 0 || !matches!(self.target, Target::Obj(..)) {
            return Err(NFS3ERR_ROFS);
        }
        Ok(())
    }
}

/// One request's context: the export table, the client and its credentials.
pub struct Ctx<'a> {
    pub exports: &'a Exports,
    pub client: IpAddr,
    /// `client` as analytics and client records name it, formatted once per
    /// connection (formatting it per call was ~5% of a small call's CPU).
    pub client_name: &'a str,
    pub cred: &'a Cred,
    pub write_verf: [u8; 8],
    /// Filled by the procedure for analytics: share name, object and bytes moved.
    pub note: std::cell::RefCell<Note>,
}

/// What a procedure tells the analytics.
#[derive(Clone, Debug, Default)]
pub struct Note {
    pub share: Option<String>,
    /// The share's root directory object.
    pub root: u64,
    pub obj: Option<u64>,
    pub bytes: u64,
    /// A name seen in the share: (object, parent, name).
    pub named: Option<(u64, u64, Vec<u8>)>,
}

impl Ctx<'_> {
    /// Tell the analytics that `obj` is `name` in `parent` of the request's share.
    pub fn named(&self, obj: u64, parent: u64, name: &[u8]) {
        let mut n = self.note.borrow_mut();
        if n.share.is_some() {
            n.named = Some((obj, parent, name.to_vec()));
            n.obj = Some(obj);
        }
    }
}

impl Ctx<'_> {
    fn user_for(&self, export: &Export) -> User {
        let share = export.share.clone().unwrap_or_default();
        match self.cred {
            Cred::None => User {
                uid: share.anonuid,
                gid: share.anongid,
                gids: vec![],
            },
            Cred::Sys { uid, gid, gids } => {
                let (u, g) = share.squash_ids(*uid, *gid);
                let squashed = (u, g) != (*uid, *gid);
                User {
                    uid: u,
                    gid: g,
                    gids: if squashed { vec![] } else { gids.clone() },
                }
            }
        }
    }

    /// Resolve a file handle (see the module invariants).
    pub fn resolve(&self, fh: &[u8]) -> Result<Node, u32> {
        let h = Handle::decode(fh).ok_or(NFS3ERR_BADHANDLE)?;
        self.resolve_handle(h)
    }

    /// [`Ctx::resolve`] of a handle already decoded (NFSv4's PUTFH decodes
    /// it once, not again from its encoding).
    pub fn resolve_handle(&self, h: Handle) -> Result<Node, u32> {
        let export = self
            .exports
            .by_id(h.pool_guid, h.ds_id)
            .map_err(|e| match e {
                LookupError::Gone => NFS3ERR_STALE,
                LookupError::NotShared => NFS3ERR_ACCES,
                LookupError::Io => NFS3ERR_IO,
            })?;
        let share = export.share.as_ref().ok_or(NFS3ERR_ACCES)?;
        let readonly = match share.access(self.client) {
            Access::Denied => return Err(NFS3ERR_ACCES),
            Access::ReadOnly => true,
            Access::ReadWrite => false,
        };
        {
            let mut n = self.note.borrow_mut();
            n.share = Some(export.name.clone());
            n.root = export.fs.root();
            n.obj = Some(h.obj);
        }
        let target = match h.kind {
            NodeKind::Object => {
                let fs = if h.snap_guid == 0 {
                    export.fs.clone()
                } else {
                    self.exports
                        .snapshot(&export, h.snap_guid)
                        .map_err(|_| NFS3ERR_STALE)?
                        .1
                };
                let a = fs.getattr(h.obj).map_err(|_| NFS3ERR_STALE)?;
                if a.generation != h.gen {
                    return Err(NFS3ERR_STALE);
                }
                Target::Obj(fs, a)
            }
            NodeKind::CtlDir if h.snap_guid == 0 => Target::Ctl,
            NodeKind::SnapDir if h.snap_guid == 0 => Target::Snaps,
            _ => return Err(NFS3ERR_BADHANDLE),
        };
        let user = self.user_for(&export);
        Ok(Node {
            export,
            handle: h,
            target,
            readonly,
            user,
        })
    }

    /// The root handle of an export (MOUNT).
    pub fn root_handle(export: &Export) -> Result<Handle, Errno> {
        let a = export.fs.getattr(export.fs.root())?;
        Ok(Handle {
            kind: NodeKind::Object,
            pool_guid: export.pool_guid,
            ds_id: export.ds_id,
            snap_guid: 0,
            obj: a.ino,
            gen: a.generation,
        })
    }
}

/// The file type number (ftype3 and nfs_ftype4 agree).
pub(crate) fn ftype(k: FileKind) -> u32 {
    match k {
        FileKind::Regular => 1,
        FileKind::Directory => 2,
        FileKind::BlockDevice => 3,
        FileKind::CharDevice => 4,
        FileKind::Symlink => 5,
        FileKind::Socket => 6,
        FileKind::Fifo => 7,
    }
}

fn time(w: &mut Writer, t: cachalot_posix::Timespec) {
    w.u32(t.sec.clamp(0, u32::MAX as i64) as u32).u32(t.nsec);
}

/// fattr3.
pub fn fattr(w: &mut Writer, a: &Attr, fsid: u64) {
    w.u32(ftype(a.kind))
        .u32(a.mode & 0o7777)
        .u32(a.nlink)
        .u32(a.uid)
        .u32(a.gid)
        .u64(a.size)
        .u64(a.blocks * 512)
        .u32(libc::major(a.rdev as libc::dev_t))
        .u32(libc::minor(a.rdev as libc::dev_t))
        .u64(fsid)
        .u64(a.ino);
    time(w, a.atime);
    time(w, a.mtime);
    time(w, a.ctime);
}

/// post_op_attr.
pub fn post_attr(w: &mut Writer, a: Option<&Attr>, fsid: u64) {
    match a {
        Some(a) => {
            w.bool(true);
            fattr(w, a, fsid);
        }
        None => {
            w.bool(false);
        }
    }
}

/// `status, wcc_data`: how every reply of a changing procedure begins.
pub fn status_wcc(w: &mut Writer, st: u32, pre: Option<&Attr>, post: Option<&Attr>, fsid: u64) {
    w.u32(st);
    wcc(w, pre, post, fsid);
}

/// Resolve `fh` for a procedure whose reply begins `status, wcc_data`; when it
/// does not resolve, `w` is that reply (the status, no attributes).
pub fn resolve_or_reply(ctx: &Ctx<'_>, fh: &[u8], w: &mut Writer) -> Option<Node> {
    match ctx.resolve(fh) {
        Ok(n) => Some(n),
        Err(st) => {
            status_wcc(w, st, None, None, 0);
            None
        }
    }
}

/// wcc_data: the attributes before (size, mtime, ctime) and after a change.
pub fn wcc(w: &mut Writer, pre: Option<&Attr>, post: Option<&Attr>, fsid: u64) {
    match pre {
        Some(a) => {
            w.bool(true).u64(a.size);
            time(w, a.mtime);
            time(w, a.ctime);
        }
        None => {
            w.bool(false);
        }
    }
    post_attr(w, post, fsid);
}

/// post_op_fh3.
pub fn post_fh(w: &mut Writer, h: Option<&Handle>) {
    match h {
        Some(h) => {
            w.bool(true).opaque(&h.encode());
        }
        None => {
            w.bool(false);
        }
    }
}
