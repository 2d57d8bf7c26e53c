//! NFSv3 procedures on files and file systems: GETATTR, SETATTR, ACCESS,
//! READLINK, READ, WRITE, COMMIT, FSSTAT, FSINFO, PATHCONF; and the dispatch of
//! every procedure (namespace changes are in `ns.rs`, directories in `dirs.rs`).
//!
//! Invariants: UNSTABLE writes are applied (in the open transaction group)
//! before the reply; DATA_SYNC and FILE_SYNC writes, and COMMIT, return only
//! after the dataset's intent log is durable (one group commit serves every
//! file of the dataset). The write verifier is the server's start instant.

use super::args::{Args, Sattr, MAX_IO};
use super::{
    dirs, fattr, may, may_io, ns, post_attr, resolve_or_reply, status, status_wcc, Ctx, Node,
    Target, User, ACCESS_DELETE, ACCESS_EXECUTE, ACCESS_EXTEND, ACCESS_LOOKUP, ACCESS_MODIFY,
    ACCESS_READ, MAY_EXEC, MAY_READ, MAY_WRITE, NFS3ERR_ACCES, NFS3ERR_INVAL, NFS3ERR_ISDIR,
    NFS3ERR_NOT_SYNC, NFS3ERR_PERM, NFS3_OK,
};
use crate::xdr::Writer;
use cachalot_datasets::Payload;
use cachalot_posix::fs::{MAX_FILE_SIZE, MAX_LINKS};
use cachalot_posix::{Attr, FileKind, SetAttr, TimeSet};

/// Run procedure `args` and return its result body (status first).
pub fn dispatch(ctx: &Ctx<'_>, args: Args<'_>) -> Writer {
    match args {
        Args::Null => Writer::new(),
        Args::Getattr(fh) => getattr(ctx, fh),
        Args::Setattr(fh, s, guard) => setattr(ctx, fh, &s, guard),
        Args::Lookup(d) => dirs::lookup(ctx, d),
        Args::Access(fh, mask) => access(ctx, fh, mask),
        Args::Readlink(fh) => readlink(ctx, fh),
        Args::Read(fh, off, count) => read(ctx, fh, off, count),
        Args::Write {
            fh,
            off,
            count,
            stable,
            data,
        } => write(ctx, fh, off, count, stable, data.into()),
        Args::Create(d, how) => ns::create(ctx, d, how),
        Args::Mkdir(d, s) => ns::mkdir(ctx, d, &s),
        Args::Symlink(d, s, target) => ns::symlink(ctx, d, &s, target),
        Args::Mknod(d, what) => ns::mknod(ctx, d, what),
        Args::Remove(d) => ns::remove(ctx, d, false),
        Args::Rmdir(d) => ns::remove(ctx, d, true),
        Args::Rename(from, to) => ns::rename(ctx, from, to),
        Args::Link(fh, d) => ns::link(ctx, fh, d),
        Args::Readdir { fh, cookie, count } => dirs::readdir(ctx, fh, cookie, count, None),
        Args::Readdirplus {
            fh,
            cookie,
            dircount,
            maxcount,
        } => dirs::readdir(ctx, fh, cookie, maxcount, Some(dircount)),
        Args::Fsstat(fh) => fsstat(ctx, fh),
        Args::Fsinfo(fh) => fsinfo(ctx, fh),
        Args::Pathconf(fh) => pathconf(ctx, fh),
        Args::Commit(fh, _, _) => commit(ctx, fh),
    }
}

fn getattr(ctx: &Ctx<'_>, fh: &[u8]) -> Writer {
    let mut w = Writer::new();
    match ctx.resolve(fh) {
        Err(s) => {
            w.u32(s);
        }
        Ok(n) => {
            w.u32(NFS3_OK);
            fattr(
                &mut w,
                &n.attr().unwrap_or_else(|| dirs::virtual_attr(&n)),
                n.fsid(),
            );
        }
    }
    w
}

/// May `user` make the changes of `s` to a node with attributes `a`?
pub(crate) fn check_setattr(a: &Attr, user: &User, s: &Sattr) -> Result<(), u32> {
    let root = user.uid == 0;
    let owner = root || a.uid == user.uid;
    if s.uid.is_some_and(|u| u != a.uid) && !root {
        return Err(NFS3ERR_PERM);
    }
    if s.gid.is_some_and(|g| g != a.gid) && !(root || (owner && user.in_group(s.gid.unwrap_or(0))))
    {
        return Err(NFS3ERR_PERM);
    }
    if s.mode.is_some() && !owner {
        return Err(NFS3ERR_PERM);
    }
    if s.size.is_some() && !may_io(a, user, MAY_WRITE) {
        return Err(NFS3ERR_ACCES);
    }
    for t in [s.atime, s.mtime].into_iter().flatten() {
        match t {
            TimeSet::At(_) if !owner => return Err(NFS3ERR_PERM),
            TimeSet::Now if !owner && !may(a, user, MAY_WRITE) => return Err(NFS3ERR_ACCES),
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn to_setattr(s: &Sattr) -> SetAttr {
    SetAttr {
        mode: s.mode.map(|m| m & 0o7777),
        uid: s.uid,
        gid: s.gid,
        size: s.size,
        atime: s.atime,
        mtime: s.mtime,
    }
}

fn setattr(ctx: &Ctx<'_>, fh: &[u8], s: &Sattr, guard: Option<cachalot_posix::Timespec>) -> Writer {
    let mut w = Writer::new();
    let Some(n) = resolve_or_reply(ctx, fh, &mut w) else {
        return w;
    };
    let pre = n.attr();
    let fail = |mut w: Writer, st: u32| {
        status_wcc(&mut w, st, pre.as_ref(), pre.as_ref(), n.fsid());
        w
    };
    if let Err(st) = n.writable() {
        return fail(w, st);
    }
    let Ok((fs, a)) = n.obj() else {
        return fail(w, NFS3ERR_ACCES);
    };
    if guard.is_some_and(|g| g != a.ctime) {
        return fail(w, NFS3ERR_NOT_SYNC);
    }
    if let Err(st) = check_setattr(a, &n.user, s) {
        return fail(w, st);
    }
    match fs
        .setattr(a.ino, &to_setattr(s))
        .and_then(|post| n.commit_metadata(fs).map(|()| post))
    {
        Ok(post) => status_wcc(&mut w, NFS3_OK, pre.as_ref(), Some(&post), n.fsid()),
        Err(e) => status_wcc(
            &mut w,
            status(e),
            pre.as_ref(),
            n.reload().as_ref(),
            n.fsid(),
        ),
    }
    w
}

/// The ACCESS bits `user` has on `a` (before masking).
pub(crate) fn access_bits(a: &Attr, user: &User, readonly: bool) -> u32 {
    let mut r = 0;
    if may_io(a, user, MAY_READ) {
        r |= ACCESS_READ;
    }
    let write = !readonly && may_io(a, user, MAY_WRITE);
    if a.kind == FileKind::Directory {
        if may(a, user, MAY_EXEC) {
            r |= ACCESS_LOOKUP;
        }
        if write {
            r |= ACCESS_MODIFY | ACCESS_EXTEND | ACCESS_DELETE;
        }
    } else {
        if write {
            r |= ACCESS_MODIFY | ACCESS_EXTEND;
        }
        if !readonly {
            r |= ACCESS_DELETE;
        }
        if may(a, user, MAY_EXEC) {
            r |= ACCESS_EXECUTE;
        }
    }
    r
}

fn access(ctx: &Ctx<'_>, fh: &[u8], mask: u32) -> Writer {
    let mut w = Writer::new();
    match ctx.resolve(fh) {
        Err(s) => {
            w.u32(s).bool(false);
        }
        Ok(n) => {
            let a = n.attr().unwrap_or_else(|| dirs::virtual_attr(&n));
            let ro = n.writable().is_err();
            w.u32(NFS3_OK);
            post_attr(&mut w, Some(&a), n.fsid());
            w.u32(access_bits(&a, &n.user, ro) & mask);
        }
    }
    w
}

fn readlink(ctx: &Ctx<'_>, fh: &[u8]) -> Writer {
    let mut w = Writer::new();
    let n = match ctx.resolve(fh) {
        Ok(n) => n,
        Err(s) => {
            w.u32(s).bool(false);
            return w;
        }
    };
    let res = match n.obj() {
        Ok((fs, a)) if a.kind == FileKind::Symlink => fs.readlink(a.ino).map_err(status),
        _ => Err(NFS3ERR_INVAL),
    };
    match res {
        Ok(target) => {
            w.u32(NFS3_OK);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
            w.opaque(&target);
        }
        Err(s) => {
            w.u32(s);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
        }
    }
    w
}

/// Check that `n` is a regular file `user` may access with `want`.
pub(crate) fn regular(n: &Node, want: u32) -> Result<(), u32> {
    match &n.target {
        Target::Obj(_, a) if a.kind == FileKind::Regular => {
            if may_io(a, &n.user, want) {
                Ok(())
            } else {
                Err(NFS3ERR_ACCES)
            }
        }
        Target::Obj(_, a) if a.kind != FileKind::Directory => Err(NFS3ERR_INVAL),
        _ => Err(NFS3ERR_ISDIR),
    }
}

fn read(ctx: &Ctx<'_>, fh: &[u8], off: u64, count: u32) -> Writer {
    // Sized for the data and its attributes up front: growing a Vec to 1 MiB
    // copies the data again on every doubling.
    let mut w = Writer::with_capacity(count.min(MAX_IO) as usize + 128);
    let n = match ctx.resolve(fh) {
        Ok(n) => n,
        Err(s) => {
            w.u32(s).bool(false);
            return w;
        }
    };
    let res = read_in(&n, off, count);
    match res {
        Ok(data) => {
            let a = n.attr();
            let size = a.as_ref().map_or(0, |a| a.size);
            ctx.note.borrow_mut().bytes = data.len() as u64;
            w.u32(NFS3_OK);
            post_attr(&mut w, a.as_ref(), n.fsid());
            w.u32(data.len() as u32)
                .bool(off.saturating_add(data.len() as u64) >= size)
                .opaque(&data);
        }
        Err(s) => {
            w.u32(s);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
        }
    }
    w
}

/// Read up to `count` bytes (at most MAX_IO) of regular file `n` at `off`
/// (NFSv3 READ and NFSv4 READ).
pub(crate) fn read_in(n: &Node, off: u64, count: u32) -> Result<Vec<u8>, u32> {
    regular(n, MAY_READ)?;
    let (fs, a) = n.obj()?;
    let count = count.min(MAX_IO) as u64;
    if off >= a.size {
        return Ok(Vec::new());
    }
    let len = count.min(a.size - off) as usize;
    fs.read(a.ino, off, len).map_err(status)
}

/// Write `data` to regular file `n` at `off`; any `stable` but UNSTABLE
/// returns after the dataset's intent log is durable (NFSv3 and NFSv4 WRITE).
pub(crate) fn write_in(n: &Node, off: u64, stable: u32, data: Payload<'_>) -> Result<usize, u32> {
    n.writable()?;
    regular(n, MAY_WRITE)?;
    if stable > FILE_SYNC {
        return Err(NFS3ERR_INVAL);
    }
    let (fs, a) = n.obj()?;
    // A write by anyone but root drops set-user/group-id bits (as the
    // kernel asks over FUSE); asked only when there are some, because it
    // rewrites the inode on every write.
    let kill_suid = n.user.uid != 0 && a.mode & (libc::S_ISUID | libc::S_ISGID) != 0;
    let len = data.len();
    fs.write(a.ino, off, data, kill_suid).map_err(status)?;
    if stable != UNSTABLE {
        fs.fsync().map_err(status)?;
    }
    Ok(len)
}

/// COMMIT: the dataset's intent log made durable (nothing to do read-only).
pub(crate) fn commit_in(n: &Node) -> Result<(), u32> {
    match n.obj() {
        Ok((fs, _)) if n.writable().is_ok() => fs.fsync().map_err(status),
        _ => Ok(()),
    }
}

pub(crate) const UNSTABLE: u32 = 0;
const FILE_SYNC: u32 = 2;

/// WRITE; `data` may be owned record-sized pieces the connection's reader
/// read apart from the call (see `server::read_request`).
pub(crate) fn write(
    ctx: &Ctx<'_>,
    fh: &[u8],
    off: u64,
    count: u32,
    stable: u32,
    data: Payload<'_>,
) -> Writer {
    let mut w = Writer::new();
    let Some(n) = resolve_or_reply(ctx, fh, &mut w) else {
        return w;
    };
    let pre = n.attr();
    let res = n
        .writable()
        .and_then(|()| regular(&n, MAY_WRITE))
        .and_then(|()| {
            if stable > FILE_SYNC || (count as usize) > data.len() {
                return Err(NFS3ERR_INVAL);
            }
            if (count as usize) < data.len() {
                // Fewer bytes than sent are to be written (no client does this).
                let mut some = data.to_vec();
                some.truncate(count as usize);
                return write_in(&n, off, stable, some[..].into());
            }
            write_in(&n, off, stable, data)
        });
    let post = n.reload();
    let st = res.as_ref().map_or_else(|s| *s, |_| NFS3_OK);
    status_wcc(&mut w, st, pre.as_ref(), post.as_ref(), n.fsid());
    if let Ok(len) = res {
        ctx.note.borrow_mut().bytes = len as u64;
        let committed = if stable == UNSTABLE {
            UNSTABLE
        } else {
            FILE_SYNC
        };
        w.u32(len as u32).u32(committed).fixed(&ctx.write_verf);
    }
    w
}

fn commit(ctx: &Ctx<'_>, fh: &[u8]) -> Writer {
    let mut w = Writer::new();
    let Some(n) = resolve_or_reply(ctx, fh, &mut w) else {
        return w;
    };
    let pre = n.attr();
    let res = commit_in(&n);
    let st = res.map_or_else(|s| s, |()| NFS3_OK);
    status_wcc(&mut w, st, pre.as_ref(), pre.as_ref(), n.fsid());
    if st == NFS3_OK {
        w.fixed(&ctx.write_verf);
    }
    w
}

fn fsstat(ctx: &Ctx<'_>, fh: &[u8]) -> Writer {
    let mut w = Writer::new();
    let n = match ctx.resolve(fh) {
        Ok(n) => n,
        Err(s) => {
            w.u32(s).bool(false);
            return w;
        }
    };
    let fs = match &n.target {
        Target::Obj(fs, _) => fs.clone(),
        _ => n.export.fs.clone(),
    };
    match fs.statfs() {
        Ok(s) => {
            let b = s.bsize as u64;
            w.u32(NFS3_OK);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
            w.u64(s.blocks * b)
                .u64(s.bfree * b)
                .u64(s.bavail * b)
                .u64(s.files)
                .u64(s.ffree)
                .u64(s.ffree)
                .u32(0);
        }
        Err(e) => {
            w.u32(status(e));
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
        }
    }
    w
}

/// FSINFO properties: hard links, symlinks, homogeneous, settable times.
const FSF3_ALL: u32 = 0x0001 | 0x0002 | 0x0008 | 0x0010;

fn fsinfo(ctx: &Ctx<'_>, fh: &[u8]) -> Writer {
    let mut w = Writer::new();
    match ctx.resolve(fh) {
        Err(s) => {
            w.u32(s).bool(false);
        }
        Ok(n) => {
            w.u32(NFS3_OK);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
            w.u32(MAX_IO) // rtmax
                .u32(MAX_IO) // rtpref
                .u32(4096) // rtmult
                .u32(MAX_IO) // wtmax
                .u32(MAX_IO) // wtpref
                .u32(4096) // wtmult
                .u32(64 << 10) // dtpref
                .u64(MAX_FILE_SIZE)
                .u32(0)
                .u32(1) // time_delta: nanoseconds
                .u32(FSF3_ALL);
        }
    }
    w
}

fn pathconf(ctx: &Ctx<'_>, fh: &[u8]) -> Writer {
    let mut w = Writer::new();
    match ctx.resolve(fh) {
        Err(s) => {
            w.u32(s).bool(false);
        }
        Ok(n) => {
            w.u32(NFS3_OK);
            post_attr(&mut w, n.attr().as_ref(), n.fsid());
            w.u32(MAX_LINKS)
                .u32(cachalot_posix::dir::MAX_NAME as u32)
                .bool(true) // no_trunc
                .bool(true) // chown_restricted
                .bool(false) // case_insensitive
                .bool(true); // case_preserving
        }
    }
    w
}
