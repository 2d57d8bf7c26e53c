//! A block device over one volume dataset (ZFS's zvol): what the NBD and iSCSI
//! servers serve. One `Zvol` per volume is shared by every connection.
//!
//! Invariants:
//! - Every request is bounds-checked against the current volsize before any work:
//!   `off + len` past the end is `OutOfRange`, and nothing is read, written or
//!   allocated for it. The device never grows by a write.
//! - Writes go through the dataset's intent-logged write path; `fua` writes are
//!   durable when they return (one log commit), and `flush` makes everything
//!   acknowledged before it durable (one log commit, or one txg commit after a
//!   discard, see `Dataset::punch`).
//! - Discard and write_zeroes leave the range reading as zeros: whole blocks become
//!   holes (freed in the pool at the next commit), partial blocks are rewritten
//!   with zeros.
//! - `extents` reports the block tree as it reads now, including writes and
//!   punches not yet committed, so a hole is reported only where reads give zeros.
//! - A snapshot's device is read-only: every change is refused with `ReadOnly`.
//! - A rollback replaces the dataset's handle: the device follows the new handle
//!   (as a ZFS zvol shows the rolled-back contents), so served clients see it.

use cachalot_datasets::dataset::OTYPE_VOLUME;
use cachalot_datasets::{Dataset, DatasetKind, Store, StoreError, SyncPolicy};
pub use cachalot_datasets::{Payload, ReadFrom};
use parking_lot::RwLock;
use std::sync::Arc;

/// Whether a run of the device holds data or reads as zeros without storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtentKind {
    Data,
    Hole,
}

/// A run of bytes of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub off: u64,
    pub len: u64,
    pub kind: ExtentKind,
}

/// One-line errors with context. `OutOfRange` is checked before any work.
#[derive(Debug, thiserror::Error)]
pub enum ZvolError {
    #[error("range {off}+{len} is past the end of the volume ({size} bytes)")]
    OutOfRange { off: u64, len: u64, size: u64 },
    #[error("{0}")]
    ReadOnly(String),
    #[error("{0}")]
    NoSpace(String),
    #[error("{0}")]
    Io(String),
}

pub type Result<T> = std::result::Result<T, ZvolError>;

impl From<StoreError> for ZvolError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::ReadOnly(m) => ZvolError::ReadOnly(m),
            e @ (StoreError::NoSpace(_) | StoreError::Quota(_)) => {
                ZvolError::NoSpace(e.to_string())
            }
            StoreError::Pool(cachalot_pool::PoolError::NoSpace) => {
                ZvolError::NoSpace("out of space in the pool".into())
            }
            e => ZvolError::Io(e.to_string()),
        }
    }
}

/// A block device over a volume dataset. Send + Sync.
pub struct Zvol {
    store: Arc<Store>,
    ds: RwLock<Arc<Dataset>>,
    /// The volume's data object.
    obj: u64,
    block_size: u32,
    readonly: bool,
}

impl Zvol {
    /// Open a volume dataset, or a volume snapshot (read-only).
    pub fn open(store: Arc<Store>, ds: Arc<Dataset>) -> Result<Zvol> {
        let name = ds.name();
        if ds.kind() != DatasetKind::Volume {
            return Err(ZvolError::Io(format!("'{name}' is not a volume")));
        }
        let obj = volume_object(&ds)?;
        let block_size = ds.object_info(obj)?.blksz;
        Ok(Zvol {
            store,
            readonly: ds.is_readonly(),
            ds: RwLock::new(ds),
            obj,
            block_size,
        })
    }

    /// The dataset handle in force: after a rollback, the new one.
    fn dataset(&self) -> Arc<Dataset> {
        let cur = self.ds.read().clone();
        if !cur.is_destroyed() || self.readonly {
            return cur;
        }
        let Ok(new) = self.store.dataset(&cur.name()) else {
            return cur; // destroyed for good: operations report it
        };
        if new.kind() != DatasetKind::Volume || volume_object(&new).ok() != Some(self.obj) {
            return cur;
        }
        *self.ds.write() = new.clone();
        new
    }

    pub fn name(&self) -> String {
        self.ds.read().name()
    }

    /// Current volsize in bytes; follows an online grow (`set volsize=`).
    pub fn size(&self) -> u64 {
        self.dataset().object_size(self.obj).unwrap_or(0)
    }

    /// volblocksize in bytes.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    pub fn is_readonly(&self) -> bool {
        self.readonly
    }

    /// True unless sync=always: what SCSI's WCE bit and NBD's SEND_FLUSH report.
    pub fn write_cache(&self) -> bool {
        self.dataset().sync_policy() != SyncPolicy::Always
    }

    /// The error for `[off, off + len)` past the end, checked before any work.
    fn check_range(&self, off: u64, len: u64) -> Result<()> {
        let size = self.size();
        match off.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(ZvolError::OutOfRange { off, len, size }),
        }
    }

    fn check_writable(&self) -> Result<()> {
        if self.readonly {
            return Err(ZvolError::ReadOnly(format!(
                "'{}' is a snapshot: it is read-only",
                self.name()
            )));
        }
        Ok(())
    }

    pub fn read(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        self.check_range(off, len as u64)?;
        let data = self.dataset().read(self.obj, off, len)?;
        self.check_read_len(off, len, data.len())?;
        Ok(data)
    }

    /// `read` with whole blocks shared from the cache rather than copied (a
    /// reply is sent from them). None when `from` is `Memory` and a block is
    /// not in memory: the caller reads again, with `Anywhere`, where it may wait.
    pub fn read_payload(
        &self,
        off: u64,
        len: usize,
        from: ReadFrom,
    ) -> Result<Option<Payload<'static>>> {
        self.check_range(off, len as u64)?;
        let data = self.dataset().read_payload(self.obj, off, len, from)?;
        if let Some(d) = &data {
            self.check_read_len(off, len, d.len())?;
        }
        Ok(data)
    }

    /// Only a shrink racing a read makes it short: never return short data.
    fn check_read_len(&self, off: u64, len: usize, got: usize) -> Result<()> {
        if got != len {
            return Err(ZvolError::OutOfRange {
                off,
                len: len as u64,
                size: self.size(),
            });
        }
        Ok(())
    }

    /// fua: durable before it returns (one intent-log commit). Owned pieces
    /// of `data` that are whole blocks (`Payload::read_from` with
    /// `block_size`) become the blocks without a copy.
    pub fn write<'a>(&self, off: u64, data: impl Into<Payload<'a>>, fua: bool) -> Result<()> {
        let data = data.into();
        self.check_range(off, data.len() as u64)?;
        self.check_writable()?;
        if data.is_empty() {
            return Ok(());
        }
        // Write-behind: a flush follows most volume writes soon, and the blocks
        // are then written by the connections' workers in parallel rather than
        // by the one thread committing the log.
        self.dataset().write_behind(self.obj, off, data, fua)?;
        Ok(())
    }

    /// Everything acknowledged before it is durable.
    pub fn flush(&self) -> Result<()> {
        if self.readonly {
            return Ok(());
        }
        Ok(self.dataset().fsync()?)
    }

    /// The range reads as zeros afterwards and its whole blocks are freed in the pool.
    pub fn discard(&self, off: u64, len: u64, fua: bool) -> Result<()> {
        self.check_range(off, len)?;
        self.check_writable()?;
        if len == 0 {
            return Ok(());
        }
        let ds = self.dataset();
        ds.punch(self.obj, off, len)?;
        if fua {
            ds.fsync()?;
        }
        Ok(())
    }

    /// The range reads as zeros afterwards (whole blocks become holes). On
    /// copy-on-write storage an allocated block does not promise that a later
    /// write finds space (every write allocates anew); that promise is a thick
    /// volume's reservation. So zeroing always punches.
    pub fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<()> {
        self.discard(off, len, fua)
    }

    /// Data and hole runs covering [off, off+len), from the block tree including
    /// not-yet-committed writes; adjacent runs of one kind are merged.
    pub fn extents(&self, off: u64, len: u64) -> Result<Vec<Extent>> {
        self.check_range(off, len)?;
        if len == 0 {
            return Ok(Vec::new());
        }
        let ds = self.dataset();
        let bs = self.block_size as u64;
        let end = off + len;
        let runs = ds
            .objset()
            .allocation_runs(self.obj, off / bs, (end - 1) / bs)
            .map_err(|e| ZvolError::from(StoreError::from(e)))?;
        let mut out: Vec<Extent> = Vec::with_capacity(runs.len());
        for (first, n, data) in runs {
            let a = (first * bs).max(off);
            let z = first.saturating_add(n).saturating_mul(bs).min(end);
            if z <= a {
                continue;
            }
            let kind = if data {
                ExtentKind::Data
            } else {
                ExtentKind::Hole
            };
            match out.last_mut() {
                Some(l) if l.kind == kind && l.off + l.len == a => l.len += z - a,
                _ => out.push(Extent {
                    off: a,
                    len: z - a,
                    kind,
                }),
            }
        }
        debug_assert_eq!(out.iter().map(|e| e.len).sum::<u64>(), len);
        Ok(out)
    }
}

/// The data object of a volume dataset.
fn volume_object(ds: &Dataset) -> Result<u64> {
    for id in ds.list_objects()? {
        if ds.object_info(id)?.otype == OTYPE_VOLUME {
            return Ok(id);
        }
    }
    Err(ZvolError::Io(format!(
        "volume '{}' has no data object",
        ds.name()
    )))
}
