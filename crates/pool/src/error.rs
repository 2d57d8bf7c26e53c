//! Errors of the pool layer: values with context (which pool, device, offset).

use std::path::PathBuf;

/// Result of pool operations.
pub type Result<T> = std::result::Result<T, PoolError>;

/// Every way the pool layer can fail. Messages are one line and name what failed.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    InvalidSpec(String),
    #[error("{path}: device is too small ({size} bytes; at least {min} needed)")]
    TooSmall { path: PathBuf, size: u64, min: u64 },
    #[error("{0}: not a cachalot pool device (no valid label)")]
    NotAPool(PathBuf),
    #[error("{0}")]
    Import(String),
    #[error("pool is out of space")]
    NoSpace,
    #[error("checksum error: block at vdev {vdev} offset {offset:#x} is corrupt in every copy")]
    Checksum { vdev: u32, offset: u64 },
    #[error("corrupt block at vdev {vdev} offset {offset:#x}: {what}")]
    Corrupt {
        vdev: u32,
        offset: u64,
        what: String,
    },
    #[error("pool is suspended after a failed commit: {0}")]
    Suspended(String),
}

impl PoolError {
    /// Wrap an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        PoolError::Io {
            path: path.into(),
            source,
        }
    }

    /// True when the error means data could not be trusted (checksum or structure).
    pub fn is_corruption(&self) -> bool {
        matches!(self, PoolError::Checksum { .. } | PoolError::Corrupt { .. })
    }
}
