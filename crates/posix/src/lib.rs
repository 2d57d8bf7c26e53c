//! The POSIX filesystem layer (like ZFS's ZPL): inodes, hashed directories,
//! symlinks, hard links, atomic rename, orphans, extended attributes, sparse files
//! and fallocate, as a library over one dataset's objects. Frontends (FUSE, later
//! NFS) translate their protocol into calls on [`Fs`]; nothing here knows FUSE.
//!
//! Invariants of the whole layer:
//! - Every change that touches more than one object runs in one `Tx`, so a crash
//!   leaves either all of it or none of it: in the tree (one txg) and in the
//!   intent log (one group, replayed whole or not at all).
//! - Permission checks are the frontend's job (the FUSE mount uses the kernel's
//!   `default_permissions`); this layer trusts its caller.
//! - Nothing a client sends can panic this layer: names, offsets and sizes are
//!   checked and malformed on-disk structures are EIO.
//!
//! The on-disk layout is documented in docs/on-disk-format.md ("POSIX layer").

pub mod diff;
pub mod dir;
pub mod error;
pub mod fs;
pub mod inode;
pub mod master;
pub mod namespace;
pub mod objio;
pub mod orphan;
pub mod xattr;

pub use error::{Errno, Result};
pub use fs::{Attr, Caller, Fs, SetAttr, StatFs, TimeSet};
pub use inode::{FileKind, Timespec};
pub use namespace::{DirEntry, RenameMode};
