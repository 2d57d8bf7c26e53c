//! A placeholder block device for a mount, so the kernel mounts it as `fuseblk`.
//!
//! Why: a plain FUSE mount has an anonymous device number (major 0), which has no
//! `/sys/dev/block/MAJ:MIN/queue/physical_block_size`. MariaDB (10.8 and later)
//! reads exactly that file to decide whether its redo log may use O_DIRECT; without
//! it the log falls back to buffered writes, and InnoDB's buffered-log path stalls
//! every user thread for one to three seconds whenever the buffer pool runs out of
//! clean pages (measured on ext4 too, with `innodb_log_file_buffering=ON`). A
//! `fuseblk` mount takes its device number from a block device: a loop device on a
//! tiny in-memory file gives MariaDB a real sector size, and the log goes direct.
//!
//! Invariants:
//! - The loop device carries no data: the kernel's FUSE code only holds it open as
//!   the superblock's device. Its backing file is an unlinked memfd.
//! - The device is created with LO_FLAGS_AUTOCLEAR: it detaches itself when the
//!   last holder (the mounted superblock, or this module before the mount) closes
//!   it, so a killed daemon leaves no loop device behind once its mount is gone.
//! - Any failure here is not fatal to a mount: the caller falls back to `fuse`.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
/// Sector size the device reports (`queue/physical_block_size`): 512, as a disk or
/// a loop device with default settings; MariaDB then writes its log in 512-byte
/// blocks, the same as on ext4 over a loop device.
const SECTOR: u32 = 512;
/// Size of the backing memfd: the device must have a size, its bytes are never used.
const BACKING_BYTES: i64 = 1 << 20;

#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

// The kernel copies exactly sizeof(struct loop_config) from the pointer we pass.
const _: () = assert!(std::mem::size_of::<LoopInfo64>() == 232);
const _: () = assert!(std::mem::size_of::<LoopConfig>() == 304);

/// An attached loop device, open. Dropping it closes the descriptor; the device
/// then detaches itself unless a mount holds it.
pub struct LoopDevice {
    pub path: PathBuf,
    _file: File,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn backing_file() -> io::Result<OwnedFd> {
    let name = CString::new("cachalot-blockdev").expect("no NUL");
    // SAFETY: name is a valid C string; the returned descriptor is owned below.
    let fd = cvt(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fd is a valid memfd.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), BACKING_BYTES) })?;
    Ok(fd)
}

/// Attach a free loop device to a fresh memfd (retrying when another process
/// takes the number first).
pub fn attach() -> io::Result<LoopDevice> {
    let ctl = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")?;
    let backing = backing_file()?;
    for _ in 0..16 {
        // SAFETY: a plain ioctl on the loop-control device, no argument.
        let n = cvt(unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE as _) })?;
        let path = PathBuf::from(format!("/dev/loop{n}"));
        let dev = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        // SAFETY: LoopConfig is plain data; all-zero is a valid value.
        let mut cfg: LoopConfig = unsafe { std::mem::zeroed() };
        cfg.fd = backing.as_raw_fd() as u32;
        cfg.block_size = SECTOR;
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        let name = b"cachalot";
        cfg.info.lo_file_name[..name.len()].copy_from_slice(name);
        // SAFETY: cfg is a valid struct loop_config that outlives the call.
        let r = unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CONFIGURE as _, &cfg) };
        match cvt(r) {
            Ok(_) => return Ok(LoopDevice { path, _file: dev }),
            // Taken by someone else between GET_FREE and CONFIGURE.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        "no free loop device after 16 tries",
    ))
}
