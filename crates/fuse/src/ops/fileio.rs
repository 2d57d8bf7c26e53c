//! File I/O handlers: open, read, write, release, fsync, lseek (SEEK_DATA and
//! SEEK_HOLE) and fallocate.
//!
//! Invariants:
//! - Opens with O_DIRECT get FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES (the
//!   kernel then sends concurrent writes of one file in parallel); other opens use
//!   the page cache, which stays coherent because every change to this dataset
//!   goes through this mount (attributes and entries are cached for `TTL`).
//! - A write with O_DSYNC/O_SYNC in its file flags is durable before the reply;
//!   fsync and fdatasync make the dataset durable, one commit for every such
//!   request waiting (`syncgroup`: only the committing request holds its thread).
//! - A write that dropped suid/sgid or capabilities (KILLPRIV_V2) invalidates the
//!   kernel's cached attributes of that inode, never its pages.
//! - Snapshot files can be opened for reading only (EROFS for a write or O_TRUNC
//!   open); their reads are not counted as the dataset's traffic.

use super::common::open_flags;
use super::{FuseFs, MAX_IO};
use crate::snapdir::Node;
use cachalot_posix::fs::MAX_FILE_SIZE;
use cachalot_posix::Errno as PErrno;
use fuser::{
    Errno, FileHandle, INodeNo, OpenFlags, ReplyData, ReplyEmpty, ReplyLseek, ReplyOpen,
    ReplyWrite, WriteFlags,
};
use std::time::Instant;

impl FuseFs {
    pub(super) fn handle_open(&self, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
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

    pub(super) fn handle_read(&self, ino: INodeNo, offset: u64, size: u32, reply: ReplyData) {
        let t0 = Instant::now();
        let len = size.min(MAX_IO) as usize;
        let (fs, slot, o) = match self.node(ino) {
            Ok(Node::Object { fs, slot, obj }) => (fs, slot, obj),
            Ok(_) => return reply.error(Errno::EISDIR),
            Err(e) => return reply.error(e),
        };
        let r = self.guarded("read", o, || fs.read_payload(o, offset, len));
        // Reads in snapshots are not the live dataset's traffic.
        if slot == 0 {
            let n = r.as_ref().map_or(0, |d| d.len() as u64);
            self.stats.record("read", o, n, t0.elapsed());
        }
        match r {
            // One piece (a read within one record, InnoDB's page reads): the
            // reply goes out from it with no further copy. (Only a read of a
            // whole record shares the record itself; a part of one was
            // copied once by `read_payload`.)
            Ok(d) => {
                let mut pieces = d.slices();
                match (pieces.next(), pieces.next()) {
                    (Some(one), None) => reply.data(one),
                    (None, _) => reply.data(&[]),
                    _ => reply.data(&d.to_vec()),
                }
            }
            Err(e) => reply.error(e),
        }
    }

    pub(super) fn handle_write(
        &self,
        ino: INodeNo,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
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

    pub(super) fn handle_release(&self, ino: INodeNo, reply: ReplyEmpty) {
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

    pub(super) fn handle_fsync(&self, ino: INodeNo, reply: ReplyEmpty) {
        match self.node(ino) {
            Ok(Node::Object { slot: 0, obj, .. }) => self.sync("fsync", obj, reply),
            Ok(_) => reply.ok(), // nothing under .cachalot changes
            Err(e) => reply.error(e),
        }
    }

    /// fsync/fsyncdir (`op`) of live object `obj`: make the dataset durable and
    /// reply, through the mount's group commit (this thread may return before the
    /// reply is sent; see `syncgroup`). Each request is counted with its own wait.
    pub(super) fn sync(&self, op: &'static str, obj: u64, reply: ReplyEmpty) {
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
    pub(super) fn handle_lseek(&self, ino: INodeNo, offset: i64, whence: i32, reply: ReplyLseek) {
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

    pub(super) fn handle_fallocate(
        &self,
        ino: INodeNo,
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
