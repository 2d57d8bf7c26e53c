//! Inodes: the POSIX attributes of an object, kept in its 320-byte bonus.
//!
//! Layout (version 1, little-endian; see docs/on-disk-format.md "POSIX layer"):
//!
//! | off | size | field |
//! |---|---|---|
//! | 0 | 4 | magic "CPIN" |
//! | 4 | 2 | version = 1 |
//! | 8 | 4 | mode (file type and permission bits, as st_mode) |
//! | 12 | 4 | uid |
//! | 16 | 4 | gid |
//! | 20 | 4 | nlink |
//! | 24 | 8 | rdev |
//! | 32 | 8 | flags (reserved for chattr-style flags) |
//! | 40 | 16 | atime: i64 seconds, u32 nanoseconds, u32 zero |
//! | 56 | 16 | mtime |
//! | 72 | 16 | ctime |
//! | 88 | 16 | crtime |
//! | 104 | 8 | parent directory (directories only; the root names itself) |
//! | 112 | 8 | xattr object id (0 = no extended attributes) |
//!
//! Invariants: `decode` accepts only a bonus with the magic and a known version, so
//! an object that is not an inode (the master object, an xattr object, a directory
//! of orphans) is never taken for one. The size is the object's size, never stored
//! twice; the generation is the object's generation (txg of creation).

use crate::error::{Errno, Result};
use cachalot_objects::dnode::BONUS_SIZE;
use std::time::{SystemTime, UNIX_EPOCH};

pub const INODE_MAGIC: [u8; 4] = *b"CPIN";
pub const INODE_VERSION: u16 = 1;

/// File types, as the S_IFMT bits of a mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl FileKind {
    pub fn from_mode(mode: u32) -> Option<FileKind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => FileKind::Regular,
            libc::S_IFDIR => FileKind::Directory,
            libc::S_IFLNK => FileKind::Symlink,
            libc::S_IFIFO => FileKind::Fifo,
            libc::S_IFSOCK => FileKind::Socket,
            libc::S_IFCHR => FileKind::CharDevice,
            libc::S_IFBLK => FileKind::BlockDevice,
            _ => return None,
        })
    }
    pub fn mode_bits(self) -> u32 {
        match self {
            FileKind::Regular => libc::S_IFREG,
            FileKind::Directory => libc::S_IFDIR,
            FileKind::Symlink => libc::S_IFLNK,
            FileKind::Fifo => libc::S_IFIFO,
            FileKind::Socket => libc::S_IFSOCK,
            FileKind::CharDevice => libc::S_IFCHR,
            FileKind::BlockDevice => libc::S_IFBLK,
        }
    }
    /// The d_type code stored in directory entries.
    pub fn dtype(self) -> u8 {
        match self {
            FileKind::Regular => libc::DT_REG,
            FileKind::Directory => libc::DT_DIR,
            FileKind::Symlink => libc::DT_LNK,
            FileKind::Fifo => libc::DT_FIFO,
            FileKind::Socket => libc::DT_SOCK,
            FileKind::CharDevice => libc::DT_CHR,
            FileKind::BlockDevice => libc::DT_BLK,
        }
    }
    pub fn from_dtype(t: u8) -> Option<FileKind> {
        Some(match t {
            libc::DT_REG => FileKind::Regular,
            libc::DT_DIR => FileKind::Directory,
            libc::DT_LNK => FileKind::Symlink,
            libc::DT_FIFO => FileKind::Fifo,
            libc::DT_SOCK => FileKind::Socket,
            libc::DT_CHR => FileKind::CharDevice,
            libc::DT_BLK => FileKind::BlockDevice,
            _ => return None,
        })
    }
}

/// A point in time with nanoseconds (seconds may be negative: before 1970).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

impl Timespec {
    pub fn now() -> Timespec {
        Timespec::from_system(SystemTime::now())
    }
    pub fn from_system(t: SystemTime) -> Timespec {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timespec {
                sec: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let mut sec = -(d.as_secs() as i64);
                let mut nsec = d.subsec_nanos();
                if nsec > 0 {
                    sec -= 1;
                    nsec = 1_000_000_000 - nsec;
                }
                Timespec { sec, nsec }
            }
        }
    }
    pub fn to_system(self) -> SystemTime {
        if self.sec >= 0 {
            UNIX_EPOCH + std::time::Duration::new(self.sec as u64, self.nsec)
        } else {
            UNIX_EPOCH - std::time::Duration::from_secs(self.sec.unsigned_abs())
                + std::time::Duration::from_nanos(self.nsec as u64)
        }
    }
}

/// The attributes of an inode as stored in its bonus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub rdev: u64,
    pub flags: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub crtime: Timespec,
    pub parent: u64,
    pub xattr_obj: u64,
}

fn put_time(b: &mut [u8], off: usize, t: Timespec) {
    b[off..off + 8].copy_from_slice(&t.sec.to_le_bytes());
    b[off + 8..off + 12].copy_from_slice(&t.nsec.to_le_bytes());
    b[off + 12..off + 16].fill(0);
}

fn get_time(b: &[u8], off: usize) -> Timespec {
    Timespec {
        sec: i64::from_le_bytes(b[off..off + 8].try_into().unwrap_or_default()),
        nsec: u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap_or_default())
            .min(999_999_999),
    }
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap_or_default())
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap_or_default())
}

impl Inode {
    /// A new inode of `mode`, owned by uid/gid, all times now.
    pub fn new(mode: u32, uid: u32, gid: u32, now: Timespec) -> Inode {
        Inode {
            mode,
            uid,
            gid,
            nlink: 1,
            rdev: 0,
            flags: 0,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            parent: 0,
            xattr_obj: 0,
        }
    }

    pub fn kind(&self) -> Option<FileKind> {
        FileKind::from_mode(self.mode)
    }
    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }

    pub fn encode(&self) -> [u8; BONUS_SIZE] {
        let mut b = [0u8; BONUS_SIZE];
        b[0..4].copy_from_slice(&INODE_MAGIC);
        b[4..6].copy_from_slice(&INODE_VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&self.mode.to_le_bytes());
        b[12..16].copy_from_slice(&self.uid.to_le_bytes());
        b[16..20].copy_from_slice(&self.gid.to_le_bytes());
        b[20..24].copy_from_slice(&self.nlink.to_le_bytes());
        b[24..32].copy_from_slice(&self.rdev.to_le_bytes());
        b[32..40].copy_from_slice(&self.flags.to_le_bytes());
        put_time(&mut b, 40, self.atime);
        put_time(&mut b, 56, self.mtime);
        put_time(&mut b, 72, self.ctime);
        put_time(&mut b, 88, self.crtime);
        b[104..112].copy_from_slice(&self.parent.to_le_bytes());
        b[112..120].copy_from_slice(&self.xattr_obj.to_le_bytes());
        b
    }

    /// Decode a bonus; EIO if it is not an inode of a known version.
    pub fn decode(b: &[u8; BONUS_SIZE]) -> Result<Inode> {
        if b[0..4] != INODE_MAGIC {
            return Err(Errno::ENOENT);
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != INODE_VERSION {
            eprintln!("cachalot-posix: inode of unknown version {version}");
            return Err(Errno::EIO);
        }
        Ok(Inode {
            mode: u32_at(b, 8),
            uid: u32_at(b, 12),
            gid: u32_at(b, 16),
            nlink: u32_at(b, 20),
            rdev: u64_at(b, 24),
            flags: u64_at(b, 32),
            atime: get_time(b, 40),
            mtime: get_time(b, 56),
            ctime: get_time(b, 72),
            crtime: get_time(b, 88),
            parent: u64_at(b, 104),
            xattr_obj: u64_at(b, 112),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let mut i = Inode::new(libc::S_IFREG | 0o644, 7, 8, Timespec { sec: -5, nsec: 9 });
        i.nlink = 3;
        i.rdev = 0x0102;
        i.parent = 77;
        i.xattr_obj = 99;
        i.mtime = Timespec {
            sec: 1 << 40,
            nsec: 999_999_999,
        };
        let b = i.encode();
        assert_eq!(Inode::decode(&b).unwrap(), i);
        assert_eq!(Inode::decode(&[0u8; BONUS_SIZE]), Err(Errno::ENOENT));
        let mut bad = b;
        bad[4] = 9;
        assert_eq!(Inode::decode(&bad), Err(Errno::EIO));
    }

    #[test]
    fn times_before_epoch() {
        let t = Timespec { sec: -2, nsec: 500 };
        assert_eq!(Timespec::from_system(t.to_system()), t);
        let t = Timespec {
            sec: 1_700_000_000,
            nsec: 123,
        };
        assert_eq!(Timespec::from_system(t.to_system()), t);
    }

    #[test]
    fn kinds() {
        for k in [
            FileKind::Regular,
            FileKind::Directory,
            FileKind::Symlink,
            FileKind::Fifo,
            FileKind::Socket,
            FileKind::CharDevice,
            FileKind::BlockDevice,
        ] {
            assert_eq!(FileKind::from_mode(k.mode_bits() | 0o755), Some(k));
            assert_eq!(FileKind::from_dtype(k.dtype()), Some(k));
        }
        assert_eq!(FileKind::from_mode(0), None);
    }
}
