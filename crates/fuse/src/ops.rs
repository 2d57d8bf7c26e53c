//! The FUSE request handlers: each translates one request into a call on the POSIX
//! layer and replies.
//!
//! Invariants:
//! - Every handler runs its work under `catch_unwind` and replies exactly once: a
//!   panic becomes EIO for that request, never a dead event loop.
//! - Opens with O_DIRECT get FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES (the
//!   kernel then sends concurrent writes of one file in parallel); other opens use
//!   the page cache, which stays coherent because every change to this dataset
//!   goes through this mount (attributes and entries are cached for `TTL`).
//! - A write with O_DSYNC/O_SYNC in its file flags is durable before the reply;
//!   fsync and fdatasync make the dataset durable.
//! - POSIX record locks and flock are left to the kernel: we do not ask for
//!   FUSE_POSIX_LOCKS or FUSE_FLOCK_LOCKS, so the kernel keeps lock state for this
//!   mount itself (correct for a local mount; an NFS export of the same dataset
//!   will need the locks moved into the daemon).
//! - Permissions are checked by the kernel (`default_permissions` mount option).

use crate::convert::{attr, errno, kind, to_ino, to_obj};
use crate::stats::Stats;
use cachalot_posix::fs::MAX_FILE_SIZE;
use cachalot_posix::{Caller, Errno as PErrno, Fs, RenameMode, SetAttr, TimeSet, Timespec};
use fuser::{
    AccessFlags, Errno, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the kernel may cache attributes and entries.
pub const TTL: Duration = Duration::from_secs(1);
/// Largest read or write of one request.
pub const MAX_IO: u32 = 1 << 20;

/// A mounted filesystem: the POSIX layer plus request accounting.
pub struct FuseFs {
    fs: Arc<Fs>,
    root: u64,
    stats: Stats,
}

type R<T> = Result<T, Errno>;

fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
    }
}

fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(s) => TimeSet::At(Timespec::from_system(s)),
    }
}

fn open_flags(flags: OpenFlags) -> FopenFlags {
    if flags.0 & libc::O_DIRECT != 0 {
        FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
    } else {
        FopenFlags::empty()
    }
}

impl FuseFs {
    pub fn new(fs: Arc<Fs>, dataset: &str) -> FuseFs {
        let root = fs.root();
        FuseFs {
            root,
            fs,
            stats: Stats::new(dataset, root),
        }
    }

    fn obj(&self, ino: INodeNo) -> u64 {
        to_obj(ino, self.root)
    }

    /// Run one operation: time it, count it, turn a panic into EIO.
    fn run<T>(&self, op: &str, obj: u64, f: impl FnOnce() -> Result<T, PErrno>) -> R<T> {
        let t0 = Instant::now();
        let r = self.guarded(op, obj, f);
        self.stats.record(op, obj, 0, t0.elapsed());
        r
    }

    /// Run one operation, turning a panic into EIO (the caller counts it).
    fn guarded<T>(&self, op: &str, obj: u64, f: impl FnOnce() -> Result<T, PErrno>) -> R<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r.map_err(errno),
            Err(_) => {
                eprintln!("cachalot-fuse: internal error in {op} of object {obj}");
                Err(Errno::EIO)
            }
        }
    }

    /// Reply with a new or found entry `name` in `parent` (named for analytics).
    fn entry(&self, reply: ReplyEntry, r: R<cachalot_posix::Attr>, parent: u64, name: &OsStr) {
        match r {
            Ok(a) => {
                self.stats.name(a.ino, parent, name.as_bytes());
                reply.entry(&TTL, &attr(&a, self.root), Generation(a.generation))
            }
            Err(e) => reply.error(e),
        }
    }
}

impl Filesystem for FuseFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_IO);
        let _ = config.set_max_readahead(MAX_IO);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let p = self.obj(parent);
        let r = self.run("lookup", p, || self.fs.lookup(p, name.as_bytes()));
        self.entry(reply, r, p, name);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let o = self.obj(ino);
        match self.run("getattr", o, || self.fs.getattr(o)) {
            Ok(a) => reply.attr(&TTL, &attr(&a, self.root)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let o = self.obj(ino);
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
        };
        match self.run("setattr", o, || self.fs.setattr(o, &set)) {
            Ok(a) => reply.attr(&TTL, &attr(&a, self.root)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let o = self.obj(ino);
        match self.run("readlink", o, || self.fs.readlink(o)) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let p = self.obj(parent);
        let r = self.run("mknod", p, || {
            self.fs
                .mknod(p, name.as_bytes(), mode, rdev as u64, caller(req))
        });
        self.entry(reply, r, p, name);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let p = self.obj(parent);
        let r = self.run("mkdir", p, || {
            self.fs.mkdir(p, name.as_bytes(), mode, caller(req))
        });
        self.entry(reply, r, p, name);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = self.obj(parent);
        match self.run("unlink", p, || self.fs.unlink(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = self.obj(parent);
        match self.run("rmdir", p, || self.fs.rmdir(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let p = self.obj(parent);
        let r = self.run("symlink", p, || {
            self.fs.symlink(
                p,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                caller(req),
            )
        });
        self.entry(reply, r, p, link_name);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (sp, dp) = (self.obj(parent), self.obj(newparent));
        let mode = if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        } else if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            RenameMode::Exchange
        } else if flags.contains(RenameFlags::RENAME_NOREPLACE) {
            RenameMode::NoReplace
        } else {
            RenameMode::Replace
        };
        match self.run("rename", sp, || {
            self.fs
                .rename(sp, name.as_bytes(), dp, newname.as_bytes(), mode)
        }) {
            Ok(()) => {
                // Open files keep their inode: name it for analytics now.
                if let Ok(a) = self.fs.lookup(dp, newname.as_bytes()) {
                    self.stats.name(a.ino, dp, newname.as_bytes());
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (o, p) = (self.obj(ino), self.obj(newparent));
        let r = self.run("link", o, || self.fs.link(o, p, newname.as_bytes()));
        self.entry(reply, r, p, newname);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let o = self.obj(ino);
        match self.run("open", o, || self.fs.open(o)) {
            Ok(_) => reply.opened(FileHandle(0), open_flags(flags)),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let o = self.obj(ino);
        let t0 = Instant::now();
        let len = size.min(MAX_IO) as usize;
        let r = self.guarded("read", o, || self.fs.read(o, offset, len));
        let n = r.as_ref().map_or(0, |d| d.len() as u64);
        self.stats.record("read", o, n, t0.elapsed());
        match r {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let o = self.obj(ino);
        let t0 = Instant::now();
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        let sync = flags.0 & (libc::O_DSYNC | libc::O_SYNC) != 0;
        let op = if sync { "write.sync" } else { "write" };
        let r = self.guarded(op, o, || {
            let n = self.fs.write(o, offset, data, kill)?;
            if sync {
                self.fs.fsync()?;
            }
            Ok(n)
        });
        let n = r.as_ref().map_or(0, |n| *n as u64);
        self.stats.record(op, o, n, t0.elapsed());
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let o = self.obj(ino);
        match self.run("release", o, || self.fs.release(o)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let o = self.obj(ino);
        match self.run("fsync", o, || self.fs.fsync()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let o = self.obj(ino);
        match self.run("opendir", o, || self.fs.getattr(o)) {
            Ok(a) if a.kind == cachalot_posix::FileKind::Directory => {
                reply.opened(FileHandle(0), FopenFlags::empty())
            }
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let o = self.obj(ino);
        match self.run("readdir", o, || self.fs.readdir(o, offset, 256)) {
            Ok(entries) => {
                for e in entries {
                    let name = OsStr::from_bytes(&e.name);
                    if reply.add(to_ino(e.ino, self.root), e.cookie, kind(e.kind), name) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let o = self.obj(ino);
        match self.run("fsyncdir", o, || self.fs.fsync()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let o = self.obj(ino);
        match self.run("statfs", o, || self.fs.statfs()) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if position != 0 {
            return reply.error(Errno::EINVAL);
        }
        let o = self.obj(ino);
        match self.run("setxattr", o, || {
            self.fs.setxattr(o, name.as_bytes(), value, flags)
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let o = self.obj(ino);
        match self.run("getxattr", o, || self.fs.getxattr(o, name.as_bytes())) {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let o = self.obj(ino);
        match self.run("listxattr", o, || self.fs.listxattr(o)) {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let o = self.obj(ino);
        match self.run("removexattr", o, || self.fs.removexattr(o, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // default_permissions: the kernel has checked already; only existence here.
        let o = self.obj(ino);
        match self.run("access", o, || self.fs.getattr(o)) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let p = self.obj(parent);
        let mode = if mode & libc::S_IFMT == 0 {
            mode | libc::S_IFREG
        } else {
            mode
        };
        let r = self.run("create", p, || {
            let a = self.fs.mknod(p, name.as_bytes(), mode, 0, caller(req))?;
            self.fs.open(a.ino)
        });
        match r {
            Ok(a) => {
                self.stats.name(a.ino, p, name.as_bytes());
                reply.created(
                    &TTL,
                    &attr(&a, self.root),
                    Generation(a.generation),
                    FileHandle(0),
                    open_flags(OpenFlags(flags)),
                )
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let o = self.obj(ino);
        match self.run("fallocate", o, || {
            if offset > MAX_FILE_SIZE {
                return Err(PErrno::EFBIG);
            }
            self.fs.fallocate(o, offset, length, mode)
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
