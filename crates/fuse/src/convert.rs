//! Conversions between the POSIX layer's types and fuser's: inode numbers (FUSE
//! calls the root 1; the POSIX layer calls it by its object id), attributes, file
//! types, errors.
//!
//! Invariant: object 1 of a filesystem dataset is its master object, never an
//! inode, so mapping the root to FUSE inode 1 and every other object to its own id
//! is a bijection.

use cachalot_posix::{Attr, Errno as PErrno, FileKind};
use fuser::{Errno, FileAttr, FileType, INodeNo};

pub fn to_obj(ino: INodeNo, root: u64) -> u64 {
    if ino.0 == 1 {
        root
    } else {
        ino.0
    }
}

pub fn to_ino(obj: u64, root: u64) -> INodeNo {
    if obj == root {
        INodeNo(1)
    } else {
        INodeNo(obj)
    }
}

pub fn kind(k: FileKind) -> FileType {
    match k {
        FileKind::Regular => FileType::RegularFile,
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
    }
}

pub fn attr(a: &Attr, root: u64) -> FileAttr {
    FileAttr {
        ino: to_ino(a.ino, root),
        size: a.size,
        blocks: a.blocks,
        atime: a.atime.to_system(),
        mtime: a.mtime.to_system(),
        ctime: a.ctime.to_system(),
        crtime: a.crtime.to_system(),
        kind: kind(a.kind),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev as u32,
        blksize: a.blksize,
        flags: 0,
    }
}

pub fn errno(e: PErrno) -> Errno {
    Errno::from_i32(e.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_round_trip() {
        let root = 2;
        assert_eq!(to_obj(INodeNo(1), root), 2);
        assert_eq!(to_ino(2, root), INodeNo(1));
        for obj in [3u64, 77, 1 << 40] {
            assert_eq!(to_obj(to_ino(obj, root), root), obj);
        }
    }
}
