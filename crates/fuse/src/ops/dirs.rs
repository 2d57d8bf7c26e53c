//! Directory handlers: opendir, readdir, readdirplus, fsyncdir, and the
//! listings of the two virtual directories (`.cachalot`, `.cachalot/snapshot`).
//!
//! Invariants:
//! - A live or snapshot directory's cookies are the POSIX layer's
//!   (`Fs::readdir`); a virtual directory's entry i has cookie i + 1.
//! - readdirplus gives each entry's attributes as getattr would at that moment;
//!   an entry that vanished between the listing and its getattr is left out.
//!   `.` and `..` carry the directory's own attributes (the kernel links no
//!   inode for them).
//! - Snapshot entries are replied with a zero TTL, as their lookups are.

use super::{FuseFs, R, TTL};
use crate::convert::{errno, kind};
use crate::snapdir::{encode, Node, CTL_INO, SNAPDIR_INO, SNAPDIR_NAME};
use fuser::{
    Errno, FileHandle, FileType, FopenFlags, Generation, INodeNo, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyOpen,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

impl FuseFs {
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

    pub(super) fn handle_opendir(&self, ino: INodeNo, reply: ReplyOpen) {
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

    pub(super) fn handle_readdir(&self, ino: INodeNo, offset: u64, mut reply: ReplyDirectory) {
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
    pub(super) fn handle_readdirplus(
        &self,
        ino: INodeNo,
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

    pub(super) fn handle_fsyncdir(&self, ino: INodeNo, reply: ReplyEmpty) {
        match self.node(ino) {
            Ok(Node::Object { slot: 0, obj, .. }) => self.sync("fsyncdir", obj, reply),
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
