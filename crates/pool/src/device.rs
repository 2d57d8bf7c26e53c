//! Leaf devices: the only code that touches bytes on files or block devices.
//!
//! Invariant: a write is durable only after a later `flush` returned Ok. Nothing
//! above this layer may assume ordering between writes that are not separated by
//! a flush; the simulated device (`SimDevice`) enforces exactly that contract in
//! tests by dropping or tearing unflushed writes at a "power cut".

use crate::error::{PoolError, Result};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A byte-addressed device with an explicit durability barrier.
pub trait BlockDevice: Send + Sync {
    /// Where the device lives (for messages and the pool config).
    fn path(&self) -> &Path;
    /// Usable size in bytes.
    fn size(&self) -> u64;
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Make every write that completed before this call durable.
    fn flush(&self) -> Result<()>;
}

/// A regular file or a block device, accessed with pread/pwrite and fdatasync.
pub struct FileDevice {
    path: PathBuf,
    file: File,
    size: u64,
}

impl FileDevice {
    /// Open an existing file or block device read-write.
    pub fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| PoolError::io(path, e))?;
        let size = device_size(&file).map_err(|e| PoolError::io(path, e))?;
        Ok(FileDevice {
            path: path.to_path_buf(),
            file,
            size,
        })
    }

    /// Create a sparse file of `size` bytes (it must not exist yet).
    pub fn create_sparse(path: &Path, size: u64) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| PoolError::io(path, e))?;
        file.set_len(size).map_err(|e| PoolError::io(path, e))?;
        Ok(FileDevice {
            path: path.to_path_buf(),
            file,
            size,
        })
    }
}

fn device_size(file: &File) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let meta = file.metadata()?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    // Block devices report 0 as their length in metadata; seek to the end instead.
    let mut f = file;
    f.seek(SeekFrom::End(0))
}

impl BlockDevice for FileDevice {
    fn path(&self) -> &Path {
        &self.path
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| PoolError::io(&self.path, e))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| PoolError::io(&self.path, e))
    }
    fn flush(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| PoolError::io(&self.path, e))
    }
}

/// The power supply simulated devices share: one write counter for all of them,
/// so a cut hits every device at the same instant.
#[derive(Default)]
pub struct Power {
    /// Total writes issued so far (the "clock" crash points are chosen on).
    writes: std::sync::atomic::AtomicU64,
    /// The write with this number is torn; later writes and flushes are lost.
    cut_at: std::sync::atomic::AtomicU64,
}

impl Power {
    pub fn new() -> Arc<Power> {
        Arc::new(Power {
            writes: Default::default(),
            cut_at: std::sync::atomic::AtomicU64::new(u64::MAX),
        })
    }
    /// Cut the power at write number `n` (counted over all devices on this supply).
    pub fn cut_at_write(&self, n: u64) {
        self.cut_at.store(n, std::sync::atomic::Ordering::SeqCst);
    }
    /// Cut the power now.
    pub fn cut_now(&self) {
        self.cut_at
            .store(self.writes_issued(), std::sync::atomic::Ordering::SeqCst);
    }
    pub fn writes_issued(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::SeqCst)
    }
    /// True once the power is off.
    pub fn is_cut(&self) -> bool {
        self.writes_issued() > self.cut_at.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// State of a simulated device: what survived the last flush, and what did not yet.
struct SimState {
    durable: Vec<u8>,
    /// Writes since the last flush, in issue order.
    pending: Vec<(u64, Vec<u8>)>,
    torn: Option<(u64, Vec<u8>)>,
    /// Number of flushes that really completed before the cut.
    flushes: u64,
}

/// An in-memory device for crash tests: models a disk with a volatile write cache.
/// Clones share the same state.
#[derive(Clone)]
pub struct SimDevice {
    path: PathBuf,
    state: Arc<Mutex<SimState>>,
    power: Arc<Power>,
}

impl SimDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(name: &str, size: u64) -> Self {
        Self::from_image(name, vec![0; size as usize])
    }

    /// A device whose durable content is `image`, on its own power supply.
    pub fn from_image(name: &str, image: Vec<u8>) -> Self {
        Self::on_power(name, image, Power::new())
    }

    /// A device on a shared power supply.
    pub fn on_power(name: &str, image: Vec<u8>, power: Arc<Power>) -> Self {
        SimDevice {
            path: PathBuf::from(format!("sim:{name}")),
            state: Arc::new(Mutex::new(SimState {
                durable: image,
                pending: Vec::new(),
                torn: None,
                flushes: 0,
            })),
            power,
        }
    }

    /// The device's power supply.
    pub fn power(&self) -> &Arc<Power> {
        &self.power
    }

    /// Cut the power when write number `n` (counted over the power supply's life)
    /// is issued: that write is torn, everything after it is lost.
    pub fn cut_power_at_write(&self, n: u64) {
        self.power.cut_at_write(n);
    }

    /// Writes issued so far on this device's power supply.
    pub fn writes_issued(&self) -> u64 {
        self.power.writes_issued()
    }

    /// Flushes that completed while the power was on.
    pub fn flushes_completed(&self) -> u64 {
        self.state.lock().flushes
    }

    /// True once the power is cut.
    pub fn is_cut(&self) -> bool {
        self.power.is_cut()
    }

    /// The content after the power loss: the durable image, plus each unflushed write
    /// kept or dropped by `keep` (a disk may reorder its cache), plus the torn write.
    pub fn crash_image(&self, mut keep: impl FnMut() -> bool) -> Vec<u8> {
        let s = self.state.lock();
        let mut img = s.durable.clone();
        for (off, data) in &s.pending {
            if keep() {
                img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
        }
        if let Some((off, data)) = &s.torn {
            img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
        }
        img
    }

    /// Overwrite bytes of the durable image directly (corruption tests).
    pub fn corrupt(&self, offset: u64, bytes: &[u8]) {
        let mut s = self.state.lock();
        s.durable[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
    }
}

impl BlockDevice for SimDevice {
    fn path(&self) -> &Path {
        &self.path
    }
    fn size(&self) -> u64 {
        self.state.lock().durable.len() as u64
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let s = self.state.lock();
        let end = offset as usize + buf.len();
        if end > s.durable.len() {
            return Err(PoolError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past end"),
            ));
        }
        buf.copy_from_slice(&s.durable[offset as usize..end]);
        // Reads see the device's cache: overlay pending writes in issue order.
        for (off, data) in &s.pending {
            let (ws, we) = (*off as usize, *off as usize + data.len());
            let (rs, re) = (offset as usize, end);
            let (s0, e0) = (ws.max(rs), we.min(re));
            if s0 < e0 {
                buf[s0 - rs..e0 - rs].copy_from_slice(&data[s0 - ws..e0 - ws]);
            }
        }
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut s = self.state.lock();
        if offset as usize + buf.len() > s.durable.len() {
            return Err(PoolError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "write past end"),
            ));
        }
        let n = self
            .power
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let cut = self.power.cut_at.load(std::sync::atomic::Ordering::SeqCst);
        match Some(cut) {
            Some(c) if n == c => {
                // The torn write: only a prefix of whole 512-byte sectors reached the disk.
                let sectors = buf.len() / 512;
                let keep = if sectors > 1 {
                    (n as usize * 7919) % sectors
                } else {
                    0
                };
                s.torn = Some((offset, buf[..keep * 512].to_vec()));
            }
            Some(c) if n > c => {}
            _ => s.pending.push((offset, buf.to_vec())),
        }
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        let mut s = self.state.lock();
        if self.power.is_cut() {
            return Ok(());
        }
        let pending = std::mem::take(&mut s.pending);
        for (off, data) in pending {
            s.durable[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        s.flushes += 1;
        Ok(())
    }
}
