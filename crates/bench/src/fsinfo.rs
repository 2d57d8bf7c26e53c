//! Facts about the file system under a path: its type (from statfs) and free
//! space (from statvfs). Used to describe targets and to refuse a run that cannot
//! fit before anything is started.
//!
//! Invariants: read-only; never modifies the path.

use anyhow::{Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).context("path contains a NUL byte")
}

/// The file system type's name ("ext4", "xfs", "tmpfs", "fuse", ...).
pub fn fs_type(p: &Path) -> String {
    let Ok(c) = cpath(p) else {
        return "unknown".into();
    };
    // SAFETY: statfs fills a zeroed struct for a valid C string path.
    let magic = unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut s) != 0 {
            return "unknown".into();
        }
        s.f_type as u64
    };
    match magic {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x6573_5546 => "fuse",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x2FC1_2FC1 => "zfs",
        0x5346_544E => "ntfs",
        0x4d44 => "vfat",
        _ => return format!("0x{magic:x}"),
    }
    .to_string()
}

/// Bytes available to an unprivileged user under `p`.
pub fn free_bytes(p: &Path) -> Result<u64> {
    let c = cpath(p)?;
    // SAFETY: statvfs fills a zeroed struct for a valid C string path.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("statvfs {}", p.display()));
        }
        Ok(s.f_bavail as u64 * s.f_frsize as u64)
    }
}

/// True if the effective user may write into directory `p`.
pub fn writable(p: &Path) -> bool {
    let Ok(c) = cpath(p) else { return false };
    // SAFETY: access(2) with a valid C string.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_a_temp_dir() {
        let d = tempfile::tempdir().unwrap();
        assert_ne!(fs_type(d.path()), "unknown");
        assert!(free_bytes(d.path()).unwrap() > 0);
        assert!(writable(d.path()));
        assert_eq!(fs_type(Path::new("/proc")), "0x9fa0");
        assert!(free_bytes(Path::new("/nonexistent/x")).is_err());
    }
}
