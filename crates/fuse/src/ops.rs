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
//!   fsync and fdatasync make the dataset durable, one commit for every such
//!   request waiting (`syncgroup`: only the committing request holds its thread).
//! - POSIX record locks and flock are left to the kernel: we do not ask for
//!   FUSE_POSIX_LOCKS or FUSE_FLOCK_LOCKS, so the kernel keeps lock state for this
//!   mount itself (correct for a local mount; an NFS export of the same dataset
//!   will need the locks moved into the daemon).
//! - Permissions are checked by the kernel (`default_permissions` mount option).
//! - Inode numbers are resolved by [`SnapDir`]: the live filesystem, a snapshot
//!   under `.cachalot/snapshot/NAME`, or one of the two virtual directories. Every
//!   change to anything but the live filesystem fails with EROFS, and the name
//!   `.cachalot` in the root cannot be created, removed or renamed.

use crate::convert::{attr, errno, kind};
use crate::snapdir::{encode, Node, SnapDir, CTL_INO, CTL_NAME, SNAPDIR_INO, SNAPDIR_NAME};
use crate::stats::Stats;
use crate::syncgroup::SyncGroup;
use crate::xattrs::{unsupported_xattr, without_unsupported_xattrs};
use cachalot_posix::fs::MAX_FILE_SIZE;
use cachalot_posix::{Attr, Caller, Errno as PErrno, Fs, RenameMode, SetAttr, TimeSet, Timespec};
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, Notifier, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
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

    fn node(&self, ino: INodeNo) -> R<Node> {
        self.snaps.resolve(ino.0).map_err(errno)
    }

    /// The live object for a request that changes something: EROFS for
    /// anything under `.cachalot`.
    fn live(&self, ino: INodeNo) -> R<u64> {
        match self.node(ino)? {
            Node::Object { slot: 0, obj, .. } => Ok(obj),
            _ => Err(Errno::EROFS),
        }
    }

    /// The live directory `parent` in which `name` is to be created: EROFS
    /// under `.cachalot`, EEXIST for `.cachalot` itself in the root.
    fn live_new_name(&self, parent: INodeNo, name: &OsStr) -> R<u64> {
        let p = self.live(parent)?;
        if p == self.root && name.as_bytes() == CTL_NAME {
            return Err(Errno::EEXIST);
        }
        Ok(p)
    }

    /// The live directory `parent` from which `name` is to be removed or
    /// renamed: EBUSY for `.cachalot` in the root.
    fn live_old_name(&self, parent: INodeNo, name: &OsStr) -> R<u64> {
        let p = self.live(parent)?;
        if p == self.root && name.as_bytes() == CTL_NAME {
            return Err(Errno::EBUSY);
        }
        Ok(p)
    }

    /// FUSE attributes of `a`, an inode of the filesystem in `slot`.
    fn fattr(&self, slot: u16, a: &Attr) -> R<FileAttr> {
        let mut fa = attr(a, self.root);
        fa.ino = INodeNo(encode(slot, a.ino, self.root).map_err(errno)?);
        Ok(fa)
    }

    /// Attributes of a virtual directory: read-only for everyone, owned by root.
    fn virtual_attr(&self, ino: u64) -> FileAttr {
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

    /// Look `name` up in `parent`, wherever it is.
    fn lookup_node(&self, parent: INodeNo, name: &OsStr) -> R<(FileAttr, u64)> {
        let name = name.as_bytes();
        match self.node(parent)? {
            Node::Object { slot: 0, obj, .. } if obj == self.root && name == CTL_NAME => {
                Ok((self.virtual_attr(CTL_INO), 0))
            }
            Node::Object { fs, slot, obj } => {
                let a = self.run_at(slot, "lookup", obj, || fs.lookup(obj, name))?;
                if slot == 0 {
                    self.stats.name(a.ino, obj, name);
                }
                Ok((self.fattr(slot, &a)?, a.generation))
            }
            Node::Ctl if name == SNAPDIR_NAME => Ok((self.virtual_attr(SNAPDIR_INO), 0)),
            Node::Ctl => Err(Errno::ENOENT),
            Node::SnapDir => {
                let (slot, fs) = self.snaps.lookup(name).map_err(errno)?;
                let a = fs.getattr(fs.root()).map_err(errno)?;
                Ok((self.fattr(slot, &a)?, a.generation))
            }
        }
    }

    /// readdirplus of a virtual directory: each entry's attributes as its
    /// lookup gives them (snapshot names are never cached, as in `lookup`).
    fn virtual_readdirplus(
        &self,
        ino: INodeNo,
        node: &Node,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let entries = match self.virtual_entries(node) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        let ttl = match ino.0 {
            SNAPDIR_INO => Duration::ZERO,
            _ => TTL,
        };
        let dir_fa = self.virtual_attr(ino.0);
        for (i, (eino, _, name)) in entries.iter().enumerate().skip(offset as usize) {
            let name = OsStr::from_bytes(name);
            let cookie = i as u64 + 1;
            let full = if i < 2 {
                reply.add(INodeNo(*eino), cookie, name, &ttl, &dir_fa, Generation(0))
            } else {
                let Ok((fa, gen)) = self.lookup_node(ino, name) else {
                    continue;
                };
                reply.add(INodeNo(fa.ino.0), cookie, name, &ttl, &fa, Generation(gen))
            };
            if full {
                break;
            }
        }
        reply.ok()
    }

    /// The entries of a virtual directory (after `.` and `..`).
    fn virtual_entries(&self, node: &Node) -> R<Vec<(u64, FileType, Vec<u8>)>> {
        let mut v = vec![
            (0, FileType::Directory, b".".to_vec()),
            (0, FileType::Directory, b"..".to_vec()),
        ];
        match node {
            Node::Ctl => {
                v[0].0 = CTL_INO;
                v[1].0 = 1;
                v.push((SNAPDIR_INO, FileType::Directory, SNAPDIR_NAME.to_vec()));
            }
            _ => {
                v[0].0 = SNAPDIR_INO;
                v[1].0 = CTL_INO;
                for n in self.snaps.names().map_err(errno)? {
                    // Each snapshot's root inode, so `ls -i` and find agree with stat.
                    let ino = match self.snaps.lookup(n.as_bytes()) {
                        Ok((slot, fs)) => encode(slot, fs.root(), self.root).map_err(errno)?,
                        Err(_) => continue, // destroyed meanwhile
                    };
                    v.push((ino, FileType::Directory, n.into_bytes()));
                }
            }
        }
        Ok(v)
    }

    /// Run one operation: time it, count it, turn a panic into EIO.
    fn run<T>(&self, op: &str, obj: u64, f: impl FnOnce() -> Result<T, PErrno>) -> R<T> {
        let t0 = Instant::now();
        let r = self.guarded(op, obj, f);
        self.stats.record(op, obj, 0, t0.elapsed());
        r
    }

    /// `run` for an object of the filesystem in `slot`: operations inside
    /// snapshots are not the dataset's traffic (and their object ids would be
    /// named after the live files), so they are guarded but not counted.
    fn run_at<T>(
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
    fn guarded<T>(&self, op: &str, obj: u64, f: impl FnOnce() -> Result<T, PErrno>) -> R<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r.map_err(errno),
            Err(_) => {
                eprintln!("cachalot-fuse: internal error in {op} of object {obj}");
                Err(Errno::EIO)
            }
        }
    }

    /// fsync/fsyncdir (`op`) of live object `obj`: make the dataset durable and
    /// reply, through the mount's group commit (this thread may return before the
    /// reply is sent; see `syncgroup`). Each request is counted with its own wait.
    fn sync(&self, op: &'static str, obj: u64, reply: ReplyEmpty) {
        self.syncs.sync(
            (op, obj, reply, Instant::now()),
            || self.guarded(op, obj, || self.fs.fsync()),
            |(op, obj, reply, t0), r| {
                self.stats.record(op, obj, 0, t0.elapsed());
                match r {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(e),
                }
            },
        )
    }

    /// Reply with a new or found entry `name` in the live directory `parent`
    /// (named for analytics).
    fn entry(&self, reply: ReplyEntry, r: R<Attr>, parent: u64, name: &OsStr) {
        match r.and_then(|a| Ok((self.fattr(0, &a)?, a))) {
            Ok((fa, a)) => {
                self.stats.name(a.ino, parent, name.as_bytes());
                reply.entry(&TTL, &fa, Generation(a.generation))
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
        // KILLPRIV_V2: the kernel stops asking getxattr(security.capability)
        // before every write; we drop suid/sgid (write flag FUSE_WRITE_KILL_SUIDGID,
        // truncate by non-root) and file capabilities ourselves (posix::Fs).
        // DIRECT_IO_ALLOW_MMAP: an O_DIRECT file (FOPEN_DIRECT_IO) can be mapped
        // MAP_SHARED; the kernel keeps the page cache coherent with direct I/O.
        // READDIRPLUS without READDIRPLUS_AUTO: every listing carries the
        // entries' attributes. With AUTO the kernel used plain readdir after the
        // first batch, so `find -ls` sent one lookup per entry.
        // Each is asked separately: a kernel without one still mounts.
        for flag in [
            InitFlags::FUSE_HANDLE_KILLPRIV_V2,
            InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP,
            InitFlags::FUSE_DO_READDIRPLUS,
        ] {
            let _ = config.add_capabilities(flag);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        // Snapshots come and go by commands the kernel does not see: their names
        // are never cached, so a destroyed one disappears at once.
        let ttl = match parent.0 {
            SNAPDIR_INO => Duration::ZERO,
            _ => TTL,
        };
        match self.lookup_node(parent, name) {
            Ok((fa, gen)) => reply.entry(&ttl, &fa, Generation(gen)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => self
                .run_at(slot, "getattr", obj, || fs.getattr(obj))
                .and_then(|a| self.fattr(slot, &a)),
            Ok(_) => Ok(self.virtual_attr(ino.0)),
            Err(e) => Err(e),
        };
        match r {
            Ok(fa) => reply.attr(&TTL, &fa),
            Err(e) => reply.error(e),
        }
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
        let o = match self.live(ino) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        // fuser 0.18 does not pass FATTR_KILL_SUIDGID on to us; the kernel sets
        // it on a truncate exactly when the caller lacks CAP_FSETID, which outside
        // user namespaces means a caller other than root.
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
        };
        let kill_suid = size.is_some() && req.uid() != 0;
        match self
            .run("setattr", o, || {
                self.fs.setattr_killing_suid(o, &set, kill_suid)
            })
            .and_then(|a| self.fattr(0, &a))
        {
            Ok(fa) => reply.attr(&TTL, &fa),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => {
                self.run_at(slot, "readlink", obj, || fs.readlink(obj))
            }
            Ok(_) => Err(Errno::EINVAL),
            Err(e) => Err(e),
        };
        match r {
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
        let p = match self.live_new_name(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
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
        let p = match self.live_new_name(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let r = self.run("mkdir", p, || {
            self.fs.mkdir(p, name.as_bytes(), mode, caller(req))
        });
        self.entry(reply, r, p, name);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.live_old_name(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.run("unlink", p, || self.fs.unlink(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.live_old_name(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
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
        let p = match self.live_new_name(parent, link_name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
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
        let names = self
            .live_old_name(parent, name)
            .and_then(|sp| Ok((sp, self.live_new_name(newparent, newname)?)));
        let (sp, dp) = match names {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
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
        let (o, p) = match self
            .live(ino)
            .and_then(|o| Ok((o, self.live_new_name(newparent, newname)?)))
        {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        let r = self.run("link", o, || self.fs.link(o, p, newname.as_bytes()));
        self.entry(reply, r, p, newname);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let writes = flags.0 & libc::O_ACCMODE != libc::O_RDONLY || flags.0 & libc::O_TRUNC != 0;
        let r = match self.node(ino) {
            Ok(Node::Object { slot, .. }) if slot != 0 && writes => Err(Errno::EROFS),
            Ok(Node::Object { fs, slot, obj }) => self.run_at(slot, "open", obj, || fs.open(obj)),
            Ok(_) => Err(Errno::EISDIR),
            Err(e) => Err(e),
        };
        match r {
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
        let t0 = Instant::now();
        let len = size.min(MAX_IO) as usize;
        let (fs, slot, o) = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => (fs, slot, obj),
            Ok(_) => return reply.error(Errno::EISDIR),
            Err(e) => return reply.error(e),
        };
        let r = self.guarded("read", o, || fs.read(o, offset, len));
        // Reads in snapshots are not the live dataset's traffic.
        if slot == 0 {
            let n = r.as_ref().map_or(0, |d| d.len() as u64);
            self.stats.record("read", o, n, t0.elapsed());
        }
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
        let o = match self.live(ino) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        let t0 = Instant::now();
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        let sync = flags.0 & (libc::O_DSYNC | libc::O_SYNC) != 0;
        let op = if sync { "write.sync" } else { "write" };
        let r = self.guarded(op, o, || {
            let (n, dropped) = self.fs.write_dropping_privs(o, offset, data, kill)?;
            if sync {
                self.fs.fsync()?;
            }
            if dropped {
                // The kernel keeps the old mode cached for TTL after a write:
                // invalidate its attributes only (offset -1: no page cache work,
                // so this cannot wait on the write the kernel has in flight).
                if let Some(n) = self.notifier.get() {
                    let _ = n.inval_inode(ino, -1, 0);
                }
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
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => {
                self.run_at(slot, "release", obj, || fs.release(obj))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        match r {
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
        match self.node(ino) {
            Ok(Node::Object { slot: 0, obj, .. }) => self.sync("fsync", obj, reply),
            Ok(_) => reply.ok(), // nothing under .cachalot changes
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => self
                .run_at(slot, "opendir", obj, || fs.getattr(obj))
                .map(|a| a.kind == cachalot_posix::FileKind::Directory),
            Ok(_) => Ok(true),
            Err(e) => Err(e),
        };
        match r {
            Ok(true) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Ok(false) => reply.error(Errno::ENOTDIR),
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
        let (fs, slot, o) = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => (fs, slot, obj),
            Ok(node) => {
                // Virtual directories: the cookie of entry i is i + 1.
                return match self.virtual_entries(&node) {
                    Ok(entries) => {
                        for (i, (ino, k, name)) in entries.iter().enumerate().skip(offset as usize)
                        {
                            if reply.add(INodeNo(*ino), i as u64 + 1, *k, OsStr::from_bytes(name)) {
                                break;
                            }
                        }
                        reply.ok()
                    }
                    Err(e) => reply.error(e),
                };
            }
            Err(e) => return reply.error(e),
        };
        match self.run_at(slot, "readdir", o, || fs.readdir(o, offset, 256)) {
            Ok(entries) => {
                for e in entries {
                    let name = OsStr::from_bytes(&e.name);
                    let Ok(ino) = encode(slot, e.ino, self.root) else {
                        continue;
                    };
                    if reply.add(INodeNo(ino), e.cookie, kind(e.kind), name) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    /// readdir with each entry's attributes, so `ls -la` costs no lookup per
    /// entry. Attributes are read as getattr would at this moment; an entry that
    /// vanished between the listing and its getattr is left out.
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let (fs, slot, o) = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => (fs, slot, obj),
            Ok(node) => return self.virtual_readdirplus(ino, &node, offset, reply),
            Err(e) => return reply.error(e),
        };
        let dir_attr = match fs.getattr(o).map_err(errno) {
            Ok(a) => a,
            Err(e) => return reply.error(e),
        };
        let dir_fa = match self.fattr(slot, &dir_attr) {
            Ok(fa) => fa,
            Err(e) => return reply.error(e),
        };
        match self.run_at(slot, "readdir", o, || fs.readdir(o, offset, 256)) {
            Ok(entries) => {
                for e in entries {
                    let name = OsStr::from_bytes(&e.name);
                    let Ok(eino) = encode(slot, e.ino, self.root) else {
                        continue;
                    };
                    let full = if e.name == b"." || e.name == b".." {
                        // The kernel links no inode for these: any attributes do.
                        reply.add(INodeNo(eino), e.cookie, name, &TTL, &dir_fa, Generation(0))
                    } else {
                        let Ok((fa, gen)) = fs
                            .getattr(e.ino)
                            .map_err(errno)
                            .and_then(|a| Ok((self.fattr(slot, &a)?, a.generation)))
                        else {
                            continue;
                        };
                        if slot == 0 {
                            self.stats.name(e.ino, o, &e.name);
                        }
                        reply.add(INodeNo(eino), e.cookie, name, &TTL, &fa, Generation(gen))
                    };
                    if full {
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
        match self.node(ino) {
            Ok(Node::Object { slot: 0, obj, .. }) => self.sync("fsyncdir", obj, reply),
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        // The space is the live filesystem's wherever the question is asked.
        match self.run("statfs", ino.0, || self.fs.statfs()) {
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
        if unsupported_xattr(name.as_bytes()) {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let o = match self.live(ino) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        match self.run("setxattr", o, || {
            self.fs.setxattr(o, name.as_bytes(), value, flags)
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if unsupported_xattr(name.as_bytes()) {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => {
                self.run_at(slot, "getxattr", obj, || fs.getxattr(obj, name.as_bytes()))
            }
            Ok(_) => Err(Errno::NO_XATTR),
            Err(e) => Err(e),
        };
        match r {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => self
                .run_at(slot, "listxattr", obj, || fs.listxattr(obj))
                .map(|names| without_unsupported_xattrs(&names)),
            Ok(_) => Ok(Vec::new()),
            Err(e) => Err(e),
        };
        match r {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if unsupported_xattr(name.as_bytes()) {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let o = match self.live(ino) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        match self.run("removexattr", o, || self.fs.removexattr(o, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // default_permissions: the kernel has checked already; only existence here.
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => self
                .run_at(slot, "access", obj, || fs.getattr(obj))
                .map(drop),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => reply.ok(),
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
        let p = match self.live_new_name(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
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
                let fa = match self.fattr(0, &a) {
                    Ok(fa) => fa,
                    Err(e) => return reply.error(e),
                };
                reply.created(
                    &TTL,
                    &fa,
                    Generation(a.generation),
                    FileHandle(0),
                    open_flags(OpenFlags(flags)),
                )
            }
            Err(e) => reply.error(e),
        }
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
        // The kernel answers SEEK_SET/CUR/END itself; SEEK_DATA/SEEK_HOLE come here.
        let r = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => self.run_at(slot, "lseek", obj, || {
                let off = u64::try_from(offset).map_err(|_| PErrno::ENXIO)?;
                fs.seek_data_hole(obj, off, whence)
            }),
            Ok(_) => Err(Errno::EINVAL),
            Err(e) => Err(e),
        };
        match r {
            Ok(o) => reply.offset(o as i64),
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
        let o = match self.live(ino) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
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
