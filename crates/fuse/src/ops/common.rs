//! What every handler shares: resolving an inode to a live or snapshot object,
//! the names `.cachalot` protects, FUSE attributes, and running one operation
//! guarded and counted.
//!
//! Invariants:
//! - `guarded` is the only place a handler's work runs: a panic becomes EIO for
//!   that request (logged with the op and object), never a dead event loop.
//! - Only operations on the live filesystem (slot 0) are counted in analytics;
//!   snapshot object ids would be named after the live files.
//! - `live*` refuse every change outside the live filesystem (EROFS) and to the
//!   name `.cachalot` in the root (EEXIST to create it, EBUSY to remove/rename).

use super::{FuseFs, R, TTL};
use crate::convert::{attr, errno};
use crate::snapdir::{encode, Node, CTL_NAME};
use cachalot_posix::{Attr, Caller, Errno as PErrno, TimeSet, Timespec};
use fuser::{
    Errno, FileAttr, FileType, FopenFlags, Generation, INodeNo, OpenFlags, ReplyEntry, Request,
    TimeOrNow,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

pub(super) fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
    }
}

pub(super) fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(s) => TimeSet::At(Timespec::from_system(s)),
    }
}

pub(super) fn open_flags(flags: OpenFlags) -> FopenFlags {
    if flags.0 & libc::O_DIRECT != 0 {
        FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
    } else {
        FopenFlags::empty()
    }
}

impl FuseFs {
    pub(super) fn node(&self, ino: INodeNo) -> R<Node> {
        self.snaps.resolve(ino.0).map_err(errno)
    }

    /// The live object for a request that changes something: EROFS for
    /// anything under `.cachalot`.
    pub(super) fn live(&self, ino: INodeNo) -> R<u64> {
        match self.node(ino)? {
            Node::Object { slot: 0, obj, .. } => Ok(obj),
            _ => Err(Errno::EROFS),
        }
    }

    /// The live directory `parent` in which `name` is to be created: EROFS
    /// under `.cachalot`, EEXIST for `.cachalot` itself in the root.
    pub(super) fn live_new_name(&self, parent: INodeNo, name: &OsStr) -> R<u64> {
        let p = self.live(parent)?;
        if p == self.root && name.as_bytes() == CTL_NAME {
            return Err(Errno::EEXIST);
        }
        Ok(p)
    }

    /// The live directory `parent` from which `name` is to be removed or
    /// renamed: EBUSY for `.cachalot` in the root.
    pub(super) fn live_old_name(&self, parent: INodeNo, name: &OsStr) -> R<u64> {
        let p = self.live(parent)?;
        if p == self.root && name.as_bytes() == CTL_NAME {
            return Err(Errno::EBUSY);
        }
        Ok(p)
    }

    /// FUSE attributes of `a`, an inode of the filesystem in `slot`.
    pub(super) fn fattr(&self, slot: u16, a: &Attr) -> R<FileAttr> {
        let mut fa = attr(a, self.root);
        fa.ino = INodeNo(encode(slot, a.ino, self.root).map_err(errno)?);
        Ok(fa)
    }

    /// Attributes of a virtual directory: read-only for everyone, owned by root.
    pub(super) fn virtual_attr(&self, ino: u64) -> FileAttr {
        FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: self.mounted_at,
            mtime: self.mounted_at,
            ctime: self.mounted_at,
            crtime: self.mounted_at,
            kind: FileType::Directory,
            perm: 0o555,
            nlink: 2,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Run one operation: time it, count it, turn a panic into EIO.
    pub(super) fn run<T>(&self, op: &str, obj: u64, f: impl FnOnce() -> Result<T, PErrno>) -> R<T> {
        let t0 = Instant::now();
        let r = self.guarded(op, obj, f);
        self.stats.record(op, obj, 0, t0.elapsed());
        r
    }

    /// `run` for an object of the filesystem in `slot`: operations inside
    /// snapshots are not the dataset's traffic (and their object ids would be
    /// named after the live files), so they are guarded but not counted.
    pub(super) fn run_at<T>(
        &self,
        slot: u16,
        op: &str,
        obj: u64,
        f: impl FnOnce() -> Result<T, PErrno>,
    ) -> R<T> {
        if slot == 0 {
            self.run(op, obj, f)
        } else {
            self.guarded(op, obj, f)
        }
    }

    /// Run one operation, turning a panic into EIO (the caller counts it).
    pub(super) fn guarded<T>(
        &self,
        op: &str,
        obj: u64,
        f: impl FnOnce() -> Result<T, PErrno>,
    ) -> R<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r.map_err(errno),
            Err(_) => {
                eprintln!("cachalot-fuse: internal error in {op} of object {obj}");
                Err(Errno::EIO)
            }
        }
    }

    /// Reply with a new or found entry `name` in the live directory `parent`
    /// (named for analytics).
    pub(super) fn entry(&self, reply: ReplyEntry, r: R<Attr>, parent: u64, name: &OsStr) {
        match r.and_then(|a| Ok((self.fattr(0, &a)?, a))) {
            Ok((fa, a)) => {
                self.stats.name(a.ino, parent, name.as_bytes());
                reply.entry(&TTL, &fa, Generation(a.generation))
            }
            Err(e) => reply.error(e),
        }
    }
}
