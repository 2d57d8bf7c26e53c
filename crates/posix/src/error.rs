//! Errors of the POSIX layer: every failure is an errno, the currency of every
//! frontend (FUSE now, NFS later).
//!
//! Invariant: engine errors keep their meaning (ENOSPC, EDQUOT, ENOENT...) and
//! anything unexpected becomes EIO, never a panic.

use cachalot_datasets::StoreError;

/// A POSIX error number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

pub type Result<T> = std::result::Result<T, Errno>;

impl Errno {
    pub const EPERM: Errno = Errno(libc::EPERM);
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    pub const EIO: Errno = Errno(libc::EIO);
    pub const E2BIG: Errno = Errno(libc::E2BIG);
    pub const EEXIST: Errno = Errno(libc::EEXIST);
    pub const EXDEV: Errno = Errno(libc::EXDEV);
    pub const ENOTDIR: Errno = Errno(libc::ENOTDIR);
    pub const EISDIR: Errno = Errno(libc::EISDIR);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const EFBIG: Errno = Errno(libc::EFBIG);
    pub const ENOSPC: Errno = Errno(libc::ENOSPC);
    pub const EMLINK: Errno = Errno(libc::EMLINK);
    pub const ERANGE: Errno = Errno(libc::ERANGE);
    pub const ENAMETOOLONG: Errno = Errno(libc::ENAMETOOLONG);
    pub const ENOTEMPTY: Errno = Errno(libc::ENOTEMPTY);
    pub const ENODATA: Errno = Errno(libc::ENODATA);
    pub const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    pub const ENOSYS: Errno = Errno(libc::ENOSYS);
    pub const ENODEV: Errno = Errno(libc::ENODEV);
    pub const ELOOP: Errno = Errno(libc::ELOOP);
    pub const EROFS: Errno = Errno(libc::EROFS);
    pub const ESTALE: Errno = Errno(libc::ESTALE);
    pub const EMFILE: Errno = Errno(libc::EMFILE);
    pub const EBUSY: Errno = Errno(libc::EBUSY);
    pub const ENXIO: Errno = Errno(libc::ENXIO);
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for Errno {}

impl From<StoreError> for Errno {
    fn from(e: StoreError) -> Self {
        let n = e.errno();
        if n == libc::EIO {
            eprintln!("cachalot-posix: I/O error: {e}");
        }
        Errno(n)
    }
}
