//! Namespace handlers: lookup, and every request that creates, removes or
//! renames a name (mknod, mkdir, create, symlink, link, unlink, rmdir, rename).
//!
//! Invariants:
//! - Changes happen only in live directories (`live_new_name`/`live_old_name`):
//!   EROFS under `.cachalot`, and `.cachalot` in the root cannot be created,
//!   removed or renamed.
//! - Every name handed to the kernel is also given to analytics (`stats.name`),
//!   so a file's requests are counted under its path.
//! - Snapshot names (entries of `.cachalot/snapshot`) are replied with a zero
//!   TTL: snapshots come and go by commands the kernel does not see.

use super::common::{caller, open_flags};
use super::{FuseFs, R, TTL};
use crate::convert::errno;
use crate::snapdir::{Node, CTL_INO, CTL_NAME, SNAPDIR_INO, SNAPDIR_NAME};
use cachalot_posix::RenameMode;
use fuser::{
    Errno, FileAttr, FileHandle, Generation, INodeNo, OpenFlags, RenameFlags, ReplyCreate,
    ReplyEmpty, ReplyEntry, Request,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

impl FuseFs {
    /// Look `name` up in `parent`, wherever it is.
    pub(super) fn lookup_node(&self, parent: INodeNo, name: &OsStr) -> R<(FileAttr, u64)> {
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

    pub(super) fn handle_lookup(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
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

    pub(super) fn handle_mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
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

    pub(super) fn handle_mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
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

    pub(super) fn handle_unlink(&self, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.live_old_name(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.run("unlink", p, || self.fs.unlink(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    pub(super) fn handle_rmdir(&self, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.live_old_name(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match self.run("rmdir", p, || self.fs.rmdir(p, name.as_bytes())) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    pub(super) fn handle_symlink(
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

    pub(super) fn handle_rename(
        &self,
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

    pub(super) fn handle_link(
        &self,
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

    pub(super) fn handle_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
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
}
