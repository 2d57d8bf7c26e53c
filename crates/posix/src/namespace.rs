//! Namespace operations: lookup, create (files, directories, symlinks, device
//! nodes), link, unlink, rmdir, rename, readdir.
//!
//! Invariants (besides the locking rules of `fs.rs`):
//! - Every check (existence, type, emptiness, loops) happens before the first
//!   change, so a refused operation changes nothing.
//! - A directory's link count is 2 plus its subdirectories; a directory records
//!   its parent, so ".." and the loop check of rename need no search.
//! - The inodes an operation changes are staged and written once, at the end, in
//!   the same transaction as the directory entries.

use crate::dir::{self, Entry};
use crate::error::{Errno, Result};
use crate::fs::{load, save, Attr, Caller, Fs, MAX_LINKS, NS_TX_BYTES};
use crate::inode::{FileKind, Inode, Timespec};
use crate::objio::{ObjRead, ObjWrite};
use cachalot_datasets::Tx;
use std::collections::BTreeMap;

/// Largest symlink target.
pub const MAX_SYMLINK: usize = 4095;

/// How a rename treats an existing target (renameat2 flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenameMode {
    /// Replace the target if it exists.
    Replace,
    /// Fail with EEXIST if the target exists.
    NoReplace,
    /// Swap source and target atomically (both must exist).
    Exchange,
}

/// One readdir entry; `cookie` is what to pass to continue after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub cookie: u64,
    pub ino: u64,
    pub kind: FileKind,
    pub name: Vec<u8>,
}

/// Inodes loaded for one change, written back together.
struct Staged<'t, 'a> {
    tx: &'t Tx<'a>,
    inodes: BTreeMap<u64, Inode>,
    deleted: Vec<u64>,
}

impl<'t, 'a> Staged<'t, 'a> {
    fn new(tx: &'t Tx<'a>) -> Self {
        Staged {
            tx,
            inodes: BTreeMap::new(),
            deleted: vec![],
        }
    }
    fn get(&mut self, obj: u64) -> Result<&mut Inode> {
        if !self.inodes.contains_key(&obj) {
            let (ino, _) = load(self.tx, obj)?;
            self.inodes.insert(obj, ino);
        }
        self.inodes.get_mut(&obj).ok_or(Errno::EIO)
    }
    fn dir(&mut self, obj: u64) -> Result<&mut Inode> {
        let ino = self.get(obj)?;
        if !ino.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        if ino.nlink == 0 {
            return Err(Errno::ENOENT);
        }
        Ok(ino)
    }
    /// Directory `obj` moved from `from` to `to`: its ".." and both parents'
    /// link counts (each subdirectory's ".." is a link to its parent).
    fn reparent(&mut self, obj: u64, from: u64, to: u64) -> Result<()> {
        self.get(obj)?.parent = to;
        self.get(from)?.nlink -= 1;
        self.get(to)?.nlink += 1;
        Ok(())
    }
    /// Refuse what POSIX refuses when the source (a directory if `s_dir`) of
    /// a rename into `dparent` (from another directory if `cross`) replaces
    /// `victim` (a directory if `victim_dir`).
    fn check_replace(
        &mut self,
        victim: u64,
        s_dir: bool,
        victim_dir: bool,
        dparent: u64,
        cross: bool,
    ) -> Result<()> {
        if s_dir && !victim_dir {
            return Err(Errno::ENOTDIR);
        }
        if !s_dir && victim_dir {
            return Err(Errno::EISDIR);
        }
        if victim_dir && dir::count(self.tx, victim)? > 0 {
            return Err(Errno::ENOTEMPTY);
        }
        if s_dir && self.get(dparent)?.nlink >= MAX_LINKS && cross {
            return Err(Errno::EMLINK);
        }
        Ok(())
    }
    fn forget(&mut self, obj: u64) {
        self.inodes.remove(&obj);
        self.deleted.push(obj);
    }
    fn commit(self) -> Result<()> {
        for (obj, ino) in &self.inodes {
            save(self.tx, *obj, ino)?;
        }
        Ok(())
    }
}

impl Fs {
    fn entry(&self, parent: u64, name: &[u8]) -> Result<Entry> {
        dir::lookup(&*self.ds, parent, name)?.ok_or(Errno::ENOENT)
    }

    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        let _ns = self.ns.read();
        if name == b"." {
            return self.getattr(parent);
        }
        if name == b".." {
            let (ino, _) = load(&*self.ds, parent)?;
            return self.getattr(if ino.parent == 0 {
                self.root
            } else {
                ino.parent
            });
        }
        if name.len() > dir::MAX_NAME {
            return Err(Errno::ENAMETOOLONG);
        }
        let e = self.entry(parent, name)?;
        self.getattr(e.obj)
    }

    /// Create a regular file, device node, fifo or socket (`mode` has the type).
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u64,
        who: Caller,
    ) -> Result<Attr> {
        let kind = FileKind::from_mode(mode).ok_or(Errno::EINVAL)?;
        if matches!(kind, FileKind::Directory | FileKind::Symlink) {
            return Err(Errno::EINVAL);
        }
        self.create_node(parent, name, mode, rdev, who, None)
    }

    pub fn mkdir(&self, parent: u64, name: &[u8], mode: u32, who: Caller) -> Result<Attr> {
        self.create_node(parent, name, libc::S_IFDIR | (mode & 0o7777), 0, who, None)
    }

    pub fn symlink(&self, parent: u64, name: &[u8], target: &[u8], who: Caller) -> Result<Attr> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        if target.len() > MAX_SYMLINK {
            return Err(Errno::ENAMETOOLONG);
        }
        self.create_node(parent, name, libc::S_IFLNK | 0o777, 0, who, Some(target))
    }

    fn create_node(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u64,
        who: Caller,
        target: Option<&[u8]>,
    ) -> Result<Attr> {
        dir::check_name(name)?;
        let kind = FileKind::from_mode(mode).ok_or(Errno::EINVAL)?;
        let _ns = self.ns.write();
        let _g = self.lock_inodes(&[parent]);
        let tx = self.begin(NS_TX_BYTES)?;
        let mut st = Staged::new(&tx);
        let pino = st.dir(parent)?.clone();
        if dir::lookup(&tx, parent, name)?.is_some() {
            return Err(Errno::EEXIST);
        }
        if kind == FileKind::Directory && pino.nlink >= MAX_LINKS {
            return Err(Errno::EMLINK);
        }
        let now = Timespec::now();
        let mut ino = Inode::new(mode, who.uid, who.gid, now);
        ino.rdev = rdev;
        // A file's parent is a hint for snapshot diff's paths (see diff.rs).
        ino.parent = parent;
        if pino.mode & libc::S_ISGID != 0 {
            ino.gid = pino.gid;
            if kind == FileKind::Directory {
                ino.mode |= libc::S_ISGID;
            }
        }
        let obj = ObjWrite::create_object(&tx)?;
        let made = (|| {
            match kind {
                FileKind::Directory => {
                    ino.nlink = 2;
                    dir::init(&tx, obj)?;
                    st.get(parent)?.nlink += 1;
                }
                FileKind::Symlink => ObjWrite::write(&tx, obj, 0, target.unwrap_or_default())?,
                _ => {}
            }
            save(&tx, obj, &ino)?;
            dir::insert(&tx, parent, name, obj, kind.dtype())?;
            let p = st.get(parent)?;
            p.mtime = now;
            p.ctime = now;
            Ok(())
        })();
        if let Err(e) = made {
            let _ = ObjWrite::delete_object(&tx, obj);
            return Err(e);
        }
        st.commit()?;
        let info = tx.info(obj)?;
        drop(tx);
        self.attr_of(obj, &ino, &info)
    }

    /// A new name for an existing non-directory.
    pub fn link(&self, obj: u64, parent: u64, name: &[u8]) -> Result<Attr> {
        dir::check_name(name)?;
        let _ns = self.ns.write();
        let _g = self.lock_inodes(&[obj, parent]);
        let tx = self.begin(NS_TX_BYTES)?;
        let mut st = Staged::new(&tx);
        st.dir(parent)?;
        let ino = st.get(obj)?;
        if ino.is_dir() {
            return Err(Errno::EPERM);
        }
        if ino.nlink == 0 {
            return Err(Errno::ENOENT);
        }
        if ino.nlink >= MAX_LINKS {
            return Err(Errno::EMLINK);
        }
        let kind = ino.kind().ok_or(Errno::EIO)?;
        if dir::lookup(&tx, parent, name)?.is_some() {
            return Err(Errno::EEXIST);
        }
        dir::insert(&tx, parent, name, obj, kind.dtype())?;
        let now = Timespec::now();
        let ino = st.get(obj)?;
        ino.nlink += 1;
        ino.ctime = now;
        let p = st.get(parent)?;
        p.mtime = now;
        p.ctime = now;
        let ino = st.get(obj)?.clone();
        st.commit()?;
        let info = tx.info(obj)?;
        drop(tx);
        self.attr_of(obj, &ino, &info)
    }

    /// Drop one link of a non-directory inode (deleting or orphaning it at 0).
    fn drop_link(&self, st: &mut Staged<'_, '_>, obj: u64, now: Timespec) -> Result<()> {
        let ino = st.get(obj)?;
        ino.nlink = ino.nlink.saturating_sub(1);
        ino.ctime = now;
        if ino.nlink > 0 {
            return Ok(());
        }
        let ino = ino.clone();
        if self.is_open(obj) {
            crate::orphan::add(st.tx, self.orphans, obj)
        } else {
            self.destroy_inode(st.tx, obj, &ino)?;
            st.forget(obj);
            Ok(())
        }
    }

    /// Delete an empty directory that is being unlinked from `parent`.
    fn drop_dir(&self, st: &mut Staged<'_, '_>, obj: u64, parent: u64) -> Result<()> {
        let ino = st.get(obj)?.clone();
        self.destroy_inode(st.tx, obj, &ino)?;
        st.forget(obj);
        let p = st.get(parent)?;
        p.nlink = p.nlink.saturating_sub(1).max(2);
        Ok(())
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        let _ns = self.ns.write();
        let e = self.entry(parent, name)?;
        let _g = self.lock_inodes(&[parent, e.obj]);
        let tx = self.begin(0)?;
        let mut st = Staged::new(&tx);
        st.dir(parent)?;
        if st.get(e.obj)?.is_dir() {
            return Err(Errno::EISDIR);
        }
        dir::remove(&tx, parent, name)?;
        let now = Timespec::now();
        self.drop_link(&mut st, e.obj, now)?;
        let p = st.get(parent)?;
        p.mtime = now;
        p.ctime = now;
        st.commit()
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<()> {
        if name == b"." {
            return Err(Errno::EINVAL);
        }
        if name == b".." {
            return Err(Errno::ENOTEMPTY);
        }
        let _ns = self.ns.write();
        let e = self.entry(parent, name)?;
        let _g = self.lock_inodes(&[parent, e.obj]);
        let tx = self.begin(0)?;
        let mut st = Staged::new(&tx);
        st.dir(parent)?;
        if !st.get(e.obj)?.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        if dir::count(&tx, e.obj)? > 0 {
            return Err(Errno::ENOTEMPTY);
        }
        dir::remove(&tx, parent, name)?;
        self.drop_dir(&mut st, e.obj, parent)?;
        let now = Timespec::now();
        let p = st.get(parent)?;
        p.mtime = now;
        p.ctime = now;
        st.commit()
    }

    /// True if `obj` is `dir` or one of its ancestors (walks parent pointers).
    fn is_ancestor<R: ObjRead + ?Sized>(&self, r: &R, obj: u64, mut dir: u64) -> Result<bool> {
        for _ in 0..100_000 {
            if dir == obj {
                return Ok(true);
            }
            if dir == self.root {
                return Ok(false);
            }
            let (ino, _) = load(r, dir)?;
            if ino.parent == 0 || ino.parent == dir {
                return Ok(false);
            }
            dir = ino.parent;
        }
        Err(Errno::ELOOP)
    }

    /// Rename (within or across directories), atomically.
    pub fn rename(
        &self,
        sparent: u64,
        sname: &[u8],
        dparent: u64,
        dname: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        if matches!(sname, b"." | b"..") || matches!(dname, b"." | b"..") {
            return Err(Errno::EINVAL);
        }
        dir::check_name(dname)?;
        let _ns = self.ns.write();
        let src = self.entry(sparent, sname)?;
        let dst = dir::lookup(&*self.ds, dparent, dname)?;
        match (&dst, mode) {
            (Some(_), RenameMode::NoReplace) => return Err(Errno::EEXIST),
            (None, RenameMode::Exchange) => return Err(Errno::ENOENT),
            _ => {}
        }
        if let Some(d) = &dst {
            if d.obj == src.obj {
                // The same file under both names: nothing to do (POSIX).
                return Ok(());
            }
        }
        let mut objs = vec![sparent, dparent, src.obj];
        if let Some(d) = &dst {
            objs.push(d.obj);
        }
        let _g = self.lock_inodes(&objs);
        let tx = self.begin(NS_TX_BYTES)?;
        let mut st = Staged::new(&tx);
        st.dir(sparent)?;
        st.dir(dparent)?;
        let s_dir = st.get(src.obj)?.is_dir();
        let d_dir = match &dst {
            Some(d) => Some(st.get(d.obj)?.is_dir()),
            None => None,
        };
        // No directory into its own subtree.
        if sparent != dparent {
            if s_dir && self.is_ancestor(&tx, src.obj, dparent)? {
                return Err(Errno::EINVAL);
            }
            if mode == RenameMode::Exchange
                && d_dir == Some(true)
                && self.is_ancestor(&tx, dst.as_ref().map_or(0, |d| d.obj), sparent)?
            {
                return Err(Errno::EINVAL);
            }
        }
        let now = Timespec::now();
        if mode == RenameMode::Exchange {
            let d = dst.ok_or(Errno::ENOENT)?;
            dir::replace(&tx, sparent, sname, d.obj, d.dtype)?;
            dir::replace(&tx, dparent, dname, src.obj, src.dtype)?;
            if sparent != dparent {
                if s_dir {
                    st.reparent(src.obj, sparent, dparent)?;
                }
                if d_dir == Some(true) {
                    st.reparent(d.obj, dparent, sparent)?;
                }
                if !s_dir {
                    st.get(src.obj)?.parent = dparent;
                }
                if d_dir == Some(false) {
                    st.get(d.obj)?.parent = sparent;
                }
            }
            st.get(d.obj)?.ctime = now;
        } else {
            if let (Some(d), Some(victim_dir)) = (&dst, d_dir) {
                st.check_replace(d.obj, s_dir, victim_dir, dparent, sparent != dparent)?;
                dir::replace(&tx, dparent, dname, src.obj, src.dtype)?;
                if victim_dir {
                    self.drop_dir(&mut st, d.obj, dparent)?;
                } else {
                    self.drop_link(&mut st, d.obj, now)?;
                }
            } else {
                if s_dir && sparent != dparent && st.get(dparent)?.nlink >= MAX_LINKS {
                    return Err(Errno::EMLINK);
                }
                dir::insert(&tx, dparent, dname, src.obj, src.dtype)?;
            }
            dir::remove(&tx, sparent, sname)?;
            if s_dir && sparent != dparent {
                st.reparent(src.obj, sparent, dparent)?;
            } else if !s_dir {
                st.get(src.obj)?.parent = dparent;
            }
        }
        st.get(src.obj)?.ctime = now;
        for p in [sparent, dparent] {
            let p = st.get(p)?;
            p.mtime = now;
            p.ctime = now;
        }
        st.commit()
    }

    /// Up to `max` entries after `cookie` (0 = from the start; "." and ".." come
    /// first with cookies 1 and 2).
    pub fn readdir(&self, obj: u64, cookie: u64, max: usize) -> Result<Vec<DirEntry>> {
        let _ns = self.ns.read();
        let (ino, _) = load(&*self.ds, obj)?;
        if !ino.is_dir() {
            return Err(Errno::ENOTDIR);
        }
        let mut out = Vec::new();
        if cookie < 1 {
            out.push(DirEntry {
                cookie: 1,
                ino: obj,
                kind: FileKind::Directory,
                name: b".".to_vec(),
            });
        }
        if cookie < 2 {
            out.push(DirEntry {
                cookie: 2,
                ino: if ino.parent == 0 { obj } else { ino.parent },
                kind: FileKind::Directory,
                name: b"..".to_vec(),
            });
        }
        let want = max.saturating_sub(out.len());
        if want == 0 {
            return Ok(out);
        }
        for e in dir::readdir(&*self.ds, obj, cookie.max(2), want)? {
            out.push(DirEntry {
                cookie: e.key,
                ino: e.obj,
                kind: FileKind::from_dtype(e.dtype).unwrap_or(FileKind::Regular),
                name: e.name,
            });
        }
        Ok(out)
    }
}
