//! Errors of the dataset layer, with the errno a filesystem frontend should return.

use cachalot_objects::ObjError;
use cachalot_pool::PoolError;

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("dataset '{0}' does not exist")]
    NotFound(String),
    #[error("dataset '{0}' already exists")]
    Exists(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Busy(String),
    #[error("{0}")]
    ReadOnly(String),
    #[error("disk quota exceeded on '{0}'")]
    Quota(String),
    #[error("out of space in pool '{0}'")]
    NoSpace(String),
    #[error("pool '{0}' is exported")]
    Exported(String),
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error(transparent)]
    Obj(ObjError),
}

impl From<ObjError> for StoreError {
    fn from(e: ObjError) -> Self {
        match e {
            ObjError::Pool(p) => StoreError::Pool(p),
            e => StoreError::Obj(e),
        }
    }
}

/// What kind of failure an error is, for callers that answer with a code rather
/// than a message (the REST API): chosen from the error's variant, never from
/// its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    NotFound,
    Exists,
    Invalid,
    Busy,
    NoSpace,
    /// The pool cannot serve now (exported).
    Unavailable,
    /// Anything else: the operation was valid and failed (I/O, read-only...).
    Failed,
}

impl StoreError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::NotFound(_) | StoreError::Obj(ObjError::NoSuchObject(_)) => {
                ErrorKind::NotFound
            }
            StoreError::Exists(_) => ErrorKind::Exists,
            StoreError::Invalid(_) | StoreError::Obj(ObjError::Invalid(_)) => ErrorKind::Invalid,
            StoreError::Busy(_) => ErrorKind::Busy,
            StoreError::Quota(_)
            | StoreError::NoSpace(_)
            | StoreError::Pool(PoolError::NoSpace) => ErrorKind::NoSpace,
            StoreError::Exported(_) => ErrorKind::Unavailable,
            StoreError::ReadOnly(_) | StoreError::Pool(_) | StoreError::Obj(ObjError::Pool(_)) => {
                ErrorKind::Failed
            }
        }
    }

    /// The errno a POSIX frontend reports for this error.
    pub fn errno(&self) -> i32 {
        match self {
            StoreError::NotFound(_) => libc_errno::ENOENT,
            StoreError::Exists(_) => libc_errno::EEXIST,
            StoreError::Invalid(_) => libc_errno::EINVAL,
            StoreError::Busy(_) => libc_errno::EBUSY,
            StoreError::ReadOnly(_) => libc_errno::EROFS,
            StoreError::Quota(_) => libc_errno::EDQUOT,
            StoreError::NoSpace(_) => libc_errno::ENOSPC,
            StoreError::Exported(_) => libc_errno::EIO,
            StoreError::Pool(PoolError::NoSpace) => libc_errno::ENOSPC,
            StoreError::Pool(_) => libc_errno::EIO,
            StoreError::Obj(ObjError::NoSuchObject(_)) => libc_errno::ENOENT,
            StoreError::Obj(ObjError::Invalid(_)) => libc_errno::EINVAL,
            StoreError::Obj(ObjError::Pool(_)) => libc_errno::EIO,
        }
    }
}

/// Linux errno values (kept here to avoid a libc dependency in this layer).
pub mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const EINVAL: i32 = 22;
    pub const ENOSPC: i32 = 28;
    pub const EROFS: i32 = 30;
    pub const EDQUOT: i32 = 122;
}
