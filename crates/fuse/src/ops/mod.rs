//! The FUSE request handlers: each translates one request into a call on the POSIX
//! layer and replies. This file holds the mount's state and the `Filesystem`
//! trait, which hands each request to its handler: `namespace` (lookup and name
//! changes), `fileio` (open, read, write, sync), `attrs` (attributes, xattrs,
//! statfs), `dirs` (listings), with `common` for what they share.
//!
//! Invariants:
//! - Every handler runs its work under `catch_unwind` and replies exactly once: a
//!   panic becomes EIO for that request, never a dead event loop.
//! - POSIX record locks and flock are left to the kernel: we do not ask for
//!   FUSE_POSIX_LOCKS or FUSE_FLOCK_LOCKS, so the kernel keeps lock state for this
//!   mount itself (correct for a local mount; an NFS export of the same dataset
//!   will need the locks moved into the daemon).
//! - Permissions are checked by the kernel (`default_permissions` mount option).
//! - Inode numbers are resolved by [`SnapDir`]: the live filesystem, a snapshot
//!   under `.cachalot/snapshot/NAME`, or one of the two virtual directories. Every
//!   change to anything but the live filesystem fails with EROFS, and the name
//!   `.cachalot` in the root cannot be created, removed or renamed.
//! - Attributes and entries are cached by the kernel for `TTL`.

mod attrs;
mod common;
mod dirs;
mod fileio;
mod namespace;

use crate::snapdir::SnapDir;
use crate::stats::Stats;
use crate::syncgroup::SyncGroup;
use cachalot_posix::{Fs, SetAttr};
use common::time_set;
use fuser::{
    AccessFlags, Errno, FileHandle, Filesystem, INodeNo, InitFlags, KernelConfig, LockOwner,
    Notifier, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// How long the kernel may cache attributes and entries.
pub const TTL: Duration = Duration::from_secs(1);
/// Largest read or write of one request.
pub const MAX_IO: u32 = 1 << 20;

/// A mounted filesystem: the POSIX layer, its snapshots, and request accounting.
pub struct FuseFs {
    fs: Arc<Fs>,
    root: u64,
    snaps: SnapDir,
    stats: Stats,
    /// Times shown on the virtual directories.
    mounted_at: SystemTime,
    /// Set once the session runs: tells the kernel to drop cached attributes
    /// that changed behind its back (a write that dropped suid/sgid).
    notifier: Arc<OnceLock<Notifier>>,
    /// fsync and fsyncdir requests waiting for one intent-log commit.
    syncs: SyncGroup<(&'static str, u64, ReplyEmpty, Instant)>,
}

type R<T> = Result<T, Errno>;

impl FuseFs {
    pub fn new(fs: Arc<Fs>, dataset: &str) -> FuseFs {
        let root = fs.root();
        FuseFs {
            root,
            snaps: SnapDir::new(fs.clone()),
            fs,
            stats: Stats::new(dataset, root),
            mounted_at: SystemTime::now(),
            notifier: Arc::new(OnceLock::new()),
            syncs: SyncGroup::default(),
        }
    }

    /// Where the mount puts the session's notifier once it runs.
    pub fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.notifier.clone()
    }
}

impl Filesystem for FuseFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_IO);
        let _ = config.set_max_readahead(MAX_IO);
        let _ = config.set_max_background(64);
        // KILLPRIV_V2: the kernel stops asking getxattr(security.capability)
        // before every write; we drop suid/sgid (write flag FUSE_WRITE_KILL_SUIDGID,
        // truncate by non-root) and file capabilities ourselves (posix::Fs).
        // DIRECT_IO_ALLOW_MMAP: an O_DIRECT file (FOPEN_DIRECT_IO) can be mapped
        // MAP_SHARED; the kernel keeps the page cache coherent with direct I/O.
        // READDIRPLUS without READDIRPLUS_AUTO: every listing carries the
        // entries' attributes. With AUTO the kernel used plain readdir after the
        // first batch, so `find -ls` sent one lookup per entry.
        // PARALLEL_DIROPS: without it the kernel runs one lookup or readdir at a
        // time per directory (a per-inode mutex), so `find`, `ls` and InnoDB's
        // opens queue behind each other in one directory. Safe with us because
        // the POSIX layer does its own namespace locking (posix/src/fs.rs): every
        // change to any directory holds `ns` exclusively; lookup and readdir hold
        // it shared and only read; readdirplus' per-entry getattr runs outside it
        // and leaves out an entry that vanished meanwhile. Creates, unlinks and
        // renames stay serialized by the kernel's directory lock as before.
        // Each is asked separately: a kernel without one still mounts.
        for flag in [
            InitFlags::FUSE_HANDLE_KILLPRIV_V2,
            InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_PARALLEL_DIROPS,
        ] {
            let _ = config.add_capabilities(flag);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.handle_lookup(parent, name, reply)
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.handle_getattr(ino, reply)
    }

    fn setattr(
        &self,
        req: &Request,
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
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
        };
        self.handle_setattr(req, ino, set, reply)
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.handle_readlink(ino, reply)
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
        self.handle_mknod(req, parent, name, mode, rdev, reply)
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
        self.handle_mkdir(req, parent, name, mode, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.handle_unlink(parent, name, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.handle_rmdir(parent, name, reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.handle_symlink(req, parent, link_name, target, reply)
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
        self.handle_rename(parent, name, newparent, newname, flags, reply)
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.handle_link(ino, newparent, newname, reply)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.handle_open(ino, flags, reply)
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
        self.handle_read(ino, offset, size, reply)
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
        self.handle_write(ino, offset, data, write_flags, flags, reply)
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
        self.handle_release(ino, reply)
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.handle_fsync(ino, reply)
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.handle_opendir(ino, reply)
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.handle_readdir(ino, offset, reply)
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        self.handle_readdirplus(ino, offset, reply)
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.handle_fsyncdir(ino, reply)
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.handle_statfs(ino, reply)
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
        self.handle_setxattr(ino, name, value, flags, position, reply)
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.handle_getxattr(ino, name, size, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.handle_listxattr(ino, size, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.handle_removexattr(ino, name, reply)
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        self.handle_access(ino, reply)
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
        self.handle_create(req, parent, name, mode, flags, reply)
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        self.handle_lseek(ino, offset, whence, reply)
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
        self.handle_fallocate(ino, offset, length, mode, reply)
    }
}
