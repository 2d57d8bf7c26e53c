//! The block device a LUN serves. The daemon implements [`BlockDev`] for
//! `cachalot_zvol::Zvol` (a few lines); [`MemDev`] is an in-memory device for tests
//! and fuzzing of the command layer.
//!
//! Invariants (what the SCSI layer relies on):
//! - Offsets and lengths are bytes; `OutOfRange` is returned before any work.
//! - `write(.., fua=true)`, `flush`, `discard(.., true)` return only once durable.
//! - After `discard` or `write_zeroes` the range reads as zeros.

use parking_lot::Mutex;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DevError {
    #[error("range {off}+{len} is past the end ({size} bytes)")]
    OutOfRange { off: u64, len: u64, size: u64 },
    #[error("read-only: {0}")]
    ReadOnly(String),
    #[error("no space: {0}")]
    NoSpace(String),
    #[error("I/O error: {0}")]
    Io(String),
}

pub type DevResult<T> = Result<T, DevError>;

/// A run of blocks that hold data (`mapped`) or are holes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub off: u64,
    pub len: u64,
    pub mapped: bool,
}

pub trait BlockDev: Send + Sync {
    fn name(&self) -> String;
    fn size(&self) -> u64;
    /// Allocation unit in bytes (volblocksize), a power of two >= 512.
    fn block_size(&self) -> u32;
    fn is_readonly(&self) -> bool;
    /// True if acknowledged writes may be lost before a flush (SCSI WCE).
    fn write_cache(&self) -> bool;
    fn read(&self, off: u64, len: usize) -> DevResult<Vec<u8>>;
    fn write(&self, off: u64, data: &[u8], fua: bool) -> DevResult<()>;
    fn flush(&self) -> DevResult<()>;
    fn discard(&self, off: u64, len: u64, fua: bool) -> DevResult<()>;
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> DevResult<()>;
    fn extents(&self, off: u64, len: u64) -> DevResult<Vec<Run>>;
}

/// In-memory device: blocks of `block_size`, absent blocks are holes.
pub struct MemDev {
    name: String,
    size: u64,
    block: u32,
    readonly: bool,
    blocks: Mutex<std::collections::BTreeMap<u64, Vec<u8>>>,
    pub flushes: std::sync::atomic::AtomicU64,
}

impl MemDev {
    pub fn new(name: &str, size: u64, block: u32, readonly: bool) -> MemDev {
        assert!(block.is_power_of_two() && block >= 512);
        MemDev {
            name: name.into(),
            size,
            block,
            readonly,
            blocks: Mutex::new(Default::default()),
            flushes: Default::default(),
        }
    }

    fn check(&self, off: u64, len: u64, write: bool) -> DevResult<()> {
        if off.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(DevError::OutOfRange {
                off,
                len,
                size: self.size,
            });
        }
        if write && self.readonly {
            return Err(DevError::ReadOnly(self.name.clone()));
        }
        Ok(())
    }

    /// Apply `f(block_index, start_in_block, end_in_block, pos_in_range)` per block.
    fn each_block(&self, off: u64, len: u64, mut f: impl FnMut(u64, usize, usize, usize)) {
        let bs = self.block as u64;
        let mut pos = off;
        while pos < off + len {
            let b = pos / bs;
            let s = (pos % bs) as usize;
            let e = ((off + len - b * bs).min(bs)) as usize;
            f(b, s, e, (pos - off) as usize);
            pos = b * bs + e as u64;
        }
    }

    fn zero_range(&self, off: u64, len: u64) {
        let mut m = self.blocks.lock();
        self.each_block(off, len, |b, s, e, _| {
            if s == 0 && e == self.block as usize {
                m.remove(&b);
            } else if let Some(blk) = m.get_mut(&b) {
                blk[s..e].fill(0);
            }
        });
    }
}

impl BlockDev for MemDev {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn block_size(&self) -> u32 {
        self.block
    }
    fn is_readonly(&self) -> bool {
        self.readonly
    }
    fn write_cache(&self) -> bool {
        true
    }
    fn read(&self, off: u64, len: usize) -> DevResult<Vec<u8>> {
        self.check(off, len as u64, false)?;
        let mut out = vec![0u8; len];
        let m = self.blocks.lock();
        self.each_block(off, len as u64, |b, s, e, p| {
            if let Some(blk) = m.get(&b) {
                out[p..p + e - s].copy_from_slice(&blk[s..e]);
            }
        });
        Ok(out)
    }
    fn write(&self, off: u64, data: &[u8], fua: bool) -> DevResult<()> {
        self.check(off, data.len() as u64, true)?;
        let mut m = self.blocks.lock();
        let bs = self.block as usize;
        self.each_block(off, data.len() as u64, |b, s, e, p| {
            let blk = m.entry(b).or_insert_with(|| vec![0u8; bs]);
            blk[s..e].copy_from_slice(&data[p..p + e - s]);
        });
        if fua {
            self.flushes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
    fn flush(&self) -> DevResult<()> {
        self.flushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    fn discard(&self, off: u64, len: u64, _fua: bool) -> DevResult<()> {
        self.check(off, len, true)?;
        self.zero_range(off, len);
        Ok(())
    }
    fn write_zeroes(&self, off: u64, len: u64, _fua: bool) -> DevResult<()> {
        self.check(off, len, true)?;
        self.zero_range(off, len);
        Ok(())
    }
    fn extents(&self, off: u64, len: u64) -> DevResult<Vec<Run>> {
        self.check(off, len, false)?;
        let m = self.blocks.lock();
        let mut runs: Vec<Run> = Vec::new();
        self.each_block(off, len, |b, s, e, p| {
            let mapped = m.contains_key(&b);
            let l = (e - s) as u64;
            match runs.last_mut() {
                Some(r) if r.mapped == mapped => r.len += l,
                _ => runs.push(Run {
                    off: off + p as u64,
                    len: l,
                    mapped,
                }),
            }
        });
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memdev_basics() {
        let d = MemDev::new("t", 1 << 20, 4096, false);
        d.write(4000, &[1u8; 200], false).unwrap();
        assert_eq!(d.read(4000, 200).unwrap(), vec![1u8; 200]);
        assert_eq!(d.read(0, 10).unwrap(), vec![0u8; 10]);
        let e = d.extents(0, 16384).unwrap();
        assert_eq!(
            e,
            vec![
                Run {
                    off: 0,
                    len: 8192,
                    mapped: true
                },
                Run {
                    off: 8192,
                    len: 8192,
                    mapped: false
                }
            ]
        );
        d.discard(0, 8192, false).unwrap();
        assert!(!d.extents(0, 8192).unwrap()[0].mapped);
        assert!(matches!(
            d.read(1 << 20, 1),
            Err(DevError::OutOfRange { .. })
        ));
    }
}
