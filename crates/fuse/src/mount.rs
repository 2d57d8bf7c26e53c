//! Mounting and unmounting: a FUSE session with several event-loop threads, each
//! on its own cloned /dev/fuse descriptor, serving one dataset at one path.
//!
//! Invariants:
//! - The mount options are fixed: default_permissions (the kernel checks modes),
//!   allow_other (database servers run as their own user), fsname = dataset name,
//!   subtype = cachalot.
//! - `unmount` never leaves the daemon with a session it cannot stop: a busy
//!   mount is reported and kept, unless forced, in which case it is detached and its
//!   FUSE connection aborted so every thread ends.
//! - `clear_stale` only touches a FUSE mount whose server is gone (stat fails with
//!   ENOTCONN), the leftover of a killed daemon.

use crate::ops::FuseFs;
use cachalot_posix::Fs;
use fuser::{BackgroundSession, Config, MountOption, SessionACL};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Event-loop threads of one mount (requests block on the engine, e.g. fsync).
pub const THREADS: usize = 8;

/// How long an unmount waits for the session's threads (a request may be stuck
/// in the engine, e.g. an fsync of a pool that is failing).
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(15);

/// Wait for a session to end, at most `timeout`; a session still running then is
/// left behind (its threads end with the process) and reported.
fn join_bounded(session: BackgroundSession, timeout: Duration) -> io::Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("fuse-join".into())
        .spawn(move || {
            let _ = tx.send(session.join());
        })?;
    match rx.recv_timeout(timeout) {
        Ok(r) => r.map_err(|e| io::Error::other(format!("FUSE session ended badly: {e}"))),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "FUSE session threads did not end (a request is stuck); left behind",
        )),
    }
}

/// A live mount.
pub struct Mount {
    session: Option<BackgroundSession>,
    path: PathBuf,
    /// Minor number of the mount's device: its connection in /sys/fs/fuse/connections.
    conn: Option<u64>,
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

fn umount2(p: &Path, flags: i32) -> io::Result<()> {
    let c = c_path(p)?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// True if `path` is a mount point (listed in /proc/self/mountinfo).
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.as_os_str().as_bytes();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .is_some_and(|m| unescape(m).as_slice() == want)
    })
}

/// Undo the octal escapes (\040 for space...) of mountinfo paths.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + (c - b'0') as u32);
            out.push(v as u8);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Detach a dead FUSE mount left at `path` by a killed daemon. Returns true if
/// one was removed.
///
/// The test is statfs, not stat: the kernel answers stat of the mount's root from
/// its attribute cache for up to `ops::TTL` after the last access, even once the
/// connection is dead, so a daemon restarted right after a kill -9 would see a
/// live-looking mount and refuse to re-mount; statfs always asks the server.
pub fn clear_stale(path: &Path) -> bool {
    let Ok(c) = c_path(path) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated path; buf is a valid out pointer.
    let dead = unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut buf) != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ENOTCONN)
    };
    dead && umount2(path, libc::MNT_DETACH).is_ok()
}

/// The session settings every mount uses.
fn session_config(dataset: &str) -> Config {
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName(dataset.to_string()),
        MountOption::Subtype("cachalot".into()),
        MountOption::DefaultPermissions,
        MountOption::Dev,
        MountOption::Suid,
        MountOption::RW,
    ];
    cfg.acl = SessionACL::All;
    cfg.n_threads = Some(THREADS);
    cfg.clone_fd = true;
    cfg
}

/// Where the kernel's fusectl file system lists FUSE connections.
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// Mount fusectl at `FUSECTL` if it is not mounted (systemd mounts it at boot,
/// a minimal VM or container may not). Without it a forced unmount of a busy
/// mount cannot abort the connection: the session's threads stay blocked on
/// /dev/fuse until the last process leaves the detached mount, and the
/// unmount waited its whole JOIN_TIMEOUT for nothing. Best effort: without
/// the privilege the old wait remains.
fn mount_fusectl() {
    if is_mount_point(Path::new(FUSECTL)) {
        return;
    }
    let (Ok(src), Ok(target)) = (CString::new("fusectl"), c_path(Path::new(FUSECTL))) else {
        return;
    };
    // SAFETY: valid NUL-terminated strings that outlive the call; no data.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        eprintln!(
            "cachalot-fuse: cannot mount fusectl at {FUSECTL} ({}): a forced unmount of a busy \
             mount waits for its threads",
            io::Error::last_os_error()
        );
    }
}

/// The FUSE connection of the mount at `path`: its number in
/// /sys/fs/fuse/connections is the kernel's dev_t of the superblock (major << 20 |
/// minor), which for a plain mount is just the anonymous minor.
fn connection(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| {
        let dev = m.dev() as libc::dev_t;
        ((libc::major(dev) as u64) << 20) | libc::minor(dev) as u64
    })
}

/// Mount `fs` (the dataset `dataset`) at `path`: as `fuseblk` on a placeholder
/// loop device when one can be had (see `blockdev` for why), else as plain `fuse`.
pub fn mount(fs: Arc<Fs>, dataset: &str, path: &Path) -> io::Result<Mount> {
    let path = std::fs::canonicalize(path)?;
    let cfg = session_config(dataset);
    let session = match mount_fuseblk(fs.clone(), dataset, &path, &cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "cachalot-fuse: {dataset}: no block-device mount ({e}); mounting as plain fuse, \
                 where MariaDB buffers its redo log"
            );
            let ffs = FuseFs::new(fs, dataset);
            let slot = ffs.notifier_slot();
            let s = fuser::spawn_mount(ffs, &path, &cfg)?;
            let _ = slot.set(s.notifier());
            s
        }
    };
    Ok(Mount {
        session: Some(session),
        conn: connection(&path),
        path,
    })
}

/// Mount type `fuseblk.cachalot` on a fresh loop device, then start the session on
/// the /dev/fuse descriptor given to the kernel (fuser can only mount `fuse`).
fn mount_fuseblk(
    fs: Arc<Fs>,
    dataset: &str,
    path: &Path,
    cfg: &Config,
) -> io::Result<BackgroundSession> {
    use std::os::unix::fs::OpenOptionsExt;
    let dev = crate::blockdev::attach()?;
    let fuse = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/fuse")?;
    let mode = std::fs::metadata(path)?.mode();
    let data = format!(
        "fd={},rootmode={:o},user_id=0,group_id=0,default_permissions,allow_other,blksize=4096",
        std::os::fd::AsRawFd::as_raw_fd(&fuse),
        mode
    );
    let (src, target) = (c_path(&dev.path)?, c_path(path)?);
    let (fstype, data) = (
        CString::new("fuseblk.cachalot").expect("no NUL"),
        CString::new(data).expect("no NUL"),
    );
    // SAFETY: all four are valid NUL-terminated strings that outlive the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            data.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // The mounted superblock now holds the loop device; our descriptor can go.
    drop(dev);
    let ffs = FuseFs::new(fs, dataset);
    let slot = ffs.notifier_slot();
    let started = fuser::Session::from_fd(
        ffs,
        std::os::fd::OwnedFd::from(fuse),
        SessionACL::All,
        cfg.clone(),
    )
    .and_then(|s| s.spawn());
    if let Ok(s) = &started {
        let _ = slot.set(s.notifier());
    }
    if started.is_err() {
        let _ = umount2(path, libc::MNT_DETACH);
    }
    started
}

impl Mount {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unmount. Busy (files open, a process inside): EBUSY and the mount stays,
    /// unless `force`: then it is detached and its connection aborted.
    pub fn unmount(&mut self, force: bool) -> io::Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        match umount2(&self.path, 0) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && !force => {
                self.session = Some(session);
                return Err(e);
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {} // already gone
            Err(_) => {
                let _ = umount2(&self.path, libc::MNT_DETACH);
                self.abort();
            }
        }
        join_bounded(session, JOIN_TIMEOUT)
    }

    /// Abort the FUSE connection so the session threads end.
    fn abort(&self) {
        if let Some(c) = self.conn {
            let abort = PathBuf::from(format!("{FUSECTL}/{c}/abort"));
            if !abort.exists() {
                mount_fusectl();
            }
            let _ = std::fs::write(abort, b"1");
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.session.is_some() {
            let _ = self.unmount(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape(r"/a\040b"), b"/a b");
        assert_eq!(unescape("/plain"), b"/plain");
        assert_eq!(unescape(r"/x\"), b"/x\\");
        assert!(is_mount_point(Path::new("/")) || !Path::new("/proc/self/mountinfo").exists());
    }
}
