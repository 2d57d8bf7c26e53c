//! Attribute handlers: getattr, setattr, readlink, access, statfs and the
//! extended attributes.
//!
//! Invariants:
//! - Permissions are checked by the kernel (`default_permissions`): `access`
//!   only answers whether the inode exists.
//! - A truncate by a caller other than root clears suid/sgid (KILLPRIV_V2 leaves
//!   that to us; fuser 0.18 does not pass FATTR_KILL_SUIDGID on).
//! - The extended attributes this mount refuses (`xattrs::unsupported_xattr`:
//!   POSIX ACLs, security.selinux) answer EOPNOTSUPP and are never listed;
//!   virtual directories have none.
//! - statfs always reports the live filesystem's space.

use super::{FuseFs, TTL};
use crate::snapdir::Node;
use crate::xattrs::{unsupported_xattr, without_unsupported_xattrs};
use cachalot_posix::SetAttr;
use fuser::{Errno, INodeNo, ReplyAttr, ReplyData, ReplyEmpty, ReplyStatfs, ReplyXattr, Request};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

impl FuseFs {
    pub(super) fn handle_getattr(&self, ino: INodeNo, reply: ReplyAttr) {
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

    /// setattr with fuser's arguments already gathered into `set`.
    pub(super) fn handle_setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        set: SetAttr,
        reply: ReplyAttr,
    ) {
        let o = match self.live(ino) {
            Ok(o) => o,
            Err(e) => return reply.error(e),
        };
        // fuser 0.18 does not pass FATTR_KILL_SUIDGID on to us; the kernel sets
        // it on a truncate exactly when the caller lacks CAP_FSETID, which outside
        // user namespaces means a caller other than root.
        let kill_suid = set.size.is_some() && req.uid() != 0;
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

    pub(super) fn handle_readlink(&self, ino: INodeNo, reply: ReplyData) {
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

    pub(super) fn handle_statfs(&self, ino: INodeNo, reply: ReplyStatfs) {
        // The space is the live filesystem's wherever the question is asked.
        match self.run("statfs", ino.0, || self.fs.statfs()) {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.bsize,
            ),
            Err(e) => reply.error(e),
        }
    }

    pub(super) fn handle_setxattr(
        &self,
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

    pub(super) fn handle_getxattr(&self, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
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

    pub(super) fn handle_listxattr(&self, ino: INodeNo, size: u32, reply: ReplyXattr) {
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

    pub(super) fn handle_removexattr(&self, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
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

    pub(super) fn handle_access(&self, ino: INodeNo, reply: ReplyEmpty) {
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
}
