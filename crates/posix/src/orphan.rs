//! The orphan list: inodes with no links that were still open. It is a hashed
//! directory (same format as any directory) whose entry names are the inode's
//! object id in lower-case hex and whose entries point at that object.
//!
//! Invariants: an inode is in the list exactly while its link count is 0 and it
//! still exists; adding it and dropping its last link happen in one transaction,
//! so after a crash the next mount finds every such inode and deletes it.

use crate::dir;
use crate::error::{Errno, Result};
use crate::fs::{load, Fs};
use crate::objio::ObjWrite;

fn name_of(obj: u64) -> Vec<u8> {
    format!("{obj:x}").into_bytes()
}

pub(crate) fn add<W: ObjWrite + ?Sized>(w: &W, orphans: u64, obj: u64) -> Result<()> {
    match dir::insert(w, orphans, &name_of(obj), obj, libc::DT_REG) {
        Ok(_) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

pub(crate) fn remove<W: ObjWrite + ?Sized>(w: &W, orphans: u64, obj: u64) -> Result<()> {
    dir::remove(w, orphans, &name_of(obj)).map(|_| ())
}

impl Fs {
    /// Delete every inode in the orphan list (at mount: nothing is open yet).
    pub(crate) fn reclaim_orphans(&self) -> Result<()> {
        let _ns = self.ns.write();
        loop {
            let batch = dir::readdir(&*self.ds, self.orphans, 0, 1000)?;
            if batch.is_empty() {
                return Ok(());
            }
            let tx = self.begin(0)?;
            for e in batch {
                match load(&tx, e.obj) {
                    Ok((ino, _)) if ino.nlink == 0 => self.destroy_inode(&tx, e.obj, &ino)?,
                    Ok(_) | Err(Errno::ENOENT) => {}
                    Err(err) => return Err(err),
                }
                dir::remove(&tx, self.orphans, &e.name)?;
            }
        }
    }

    /// The object id of the orphan list.
    pub fn orphan_dir(&self) -> u64 {
        self.orphans
    }

    /// Number of inodes waiting in the orphan list.
    pub fn orphan_count(&self) -> Result<u64> {
        dir::count(&*self.ds, self.orphans)
    }
}
