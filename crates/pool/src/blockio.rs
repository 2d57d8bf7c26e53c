//! Block I/O: compress, checksum, allocate and write a block; read a block back
//! from the first copy whose checksum matches, rewriting the copies that failed;
//! scrub every copy; intent-log blocks, which carry their own checksum.
//!
//! Invariants: a block is returned only after its checksum matched; a pointer
//! naming a vdev or range outside the pool is an error, never an out-of-range
//! device access; a repair writes only good bytes over the copy that failed, and
//! only while that copy's space is still allocated (see `readhold`).

use crate::blkptr::{checksum, BlkPtr, BlockType, ChecksumType, Dva};
use crate::compress::{compress, decompress, Compression};
use crate::error::{PoolError, Result};
use crate::pool::Pool;
use crate::vdev::{ScrubOutcome, TopVdev};
use std::sync::atomic::Ordering::Relaxed;

/// How a block should be written.
#[derive(Clone, Copy, Debug)]
pub struct WriteOpts {
    pub compression: Compression,
    pub block_type: BlockType,
    pub level: u8,
    pub fill: u64,
}

impl WriteOpts {
    /// One uncompressed level-0 data block: what the pool's own tests write.
    pub const RAW_DATA: WriteOpts = WriteOpts {
        compression: Compression::Off,
        block_type: BlockType::Data,
        level: 0,
        fill: 1,
    };
}

/// Bytes to read for the copy `d` of a block of `psize` stored bytes on `top`,
/// or None if the pointer does not fit its vdev (a damaged pointer must never
/// become a device access out of range).
pub(crate) fn extent_len(top: &TopVdev, d: &Dva, psize: usize) -> Option<usize> {
    let len = if top.is_raidz() {
        (psize as u64).next_multiple_of(1 << top.ashift)
    } else {
        d.asize as u64
    };
    let fits = d.offset + d.asize as u64 <= top.asize
        && top.alloc_size(len) <= d.asize as u64
        && len >= psize as u64;
    fits.then_some(len as usize)
}

impl Pool {
    /// Compress, checksum, allocate and write one block (syncing context).
    pub fn write_block(&self, txg: u64, data: &[u8], opts: WriteOpts) -> Result<BlkPtr> {
        self.check_suspended()?;
        let sector = self.sector_size();
        let compressed = compress(opts.compression, data, sector);
        let (payload, comp): (&[u8], Compression) = match &compressed {
            Some(c) => (c, opts.compression),
            None => (data, Compression::Off),
        };
        let psize = payload.len();
        let asize = psize.next_multiple_of(sector);
        let checksum = checksum(payload);
        // The stored bytes, padded to whole sectors: the compressor's output is
        // padded in place, data that already ends on a sector is written as it
        // is (no copy of every uncompressed block).
        let buf: std::borrow::Cow<[u8]> = match compressed {
            Some(mut c) => {
                c.resize(asize, 0);
                c.into()
            }
            None if psize == asize => data.into(),
            None => {
                let mut v = data.to_vec();
                v.resize(asize, 0);
                v.into()
            }
        };
        let copies = if opts.block_type.is_metadata() { 2 } else { 1 };
        let dvas = self.allocate(asize as u64, copies)?;
        let tops = self.vdevs.read();
        for d in dvas.iter().filter(|d| !d.is_empty()) {
            tops[d.vdev as usize].write(&buf, d.offset)?;
        }
        Ok(BlkPtr {
            dvas,
            lsize: data.len() as u32,
            psize: psize as u32,
            compression: comp,
            checksum_type: ChecksumType::Blake3,
            block_type: opts.block_type,
            level: opts.level,
            birth_txg: txg,
            fill: opts.fill,
            checksum,
        })
    }

    /// Read the stored bytes of a block from the first copy that verifies; copies
    /// that failed are rewritten from the good one.
    fn read_physical(&self, bp: &BlkPtr) -> Result<Vec<u8>> {
        let tops = self.vdevs.read();
        let psize = bp.psize as usize;
        let verify = |b: &[u8]| b.len() >= psize && checksum(&b[..psize]) == bp.checksum;
        let mut failed: Vec<&Dva> = Vec::new();
        let mut last_err = None;
        for d in bp.dva_iter() {
            let Some(top) = tops.get(d.vdev as usize) else {
                last_err = Some(PoolError::Corrupt {
                    vdev: d.vdev,
                    offset: d.offset,
                    what: "pointer names a vdev that does not exist".into(),
                });
                continue;
            };
            let Some(len) = extent_len(top, d, psize) else {
                last_err = Some(PoolError::Corrupt {
                    vdev: d.vdev,
                    offset: d.offset,
                    what: "pointer outside its vdev".into(),
                });
                continue;
            };
            let r = top.read_verified(d.offset, len, &verify, true);
            match r {
                Ok(buf) => {
                    // A repair writes only where this pointer's space is still
                    // allocated (`readhold`): never onto space freed since.
                    for f in failed {
                        if self.still_allocated(f) {
                            tops[f.vdev as usize].repair(&buf, f.offset);
                        }
                    }
                    return Ok(buf);
                }
                Err(e) => {
                    failed.push(d);
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or(PoolError::Checksum {
            vdev: bp.dvas[0].vdev,
            offset: bp.dvas[0].offset,
        }))
    }

    /// Read and verify a block, returning its logical bytes. Holes read as zeros.
    pub fn read_block(&self, bp: &BlkPtr) -> Result<Vec<u8>> {
        if bp.is_hole() {
            return Ok(vec![0; bp.lsize as usize]);
        }
        let phys = self.read_physical(bp)?;
        decompress(
            bp.compression,
            &phys[..bp.psize as usize],
            bp.lsize as usize,
        )
        .map_err(|e| match e {
            PoolError::Corrupt { what, .. } => PoolError::Corrupt {
                vdev: bp.dvas[0].vdev,
                offset: bp.dvas[0].offset,
                what,
            },
            e => e,
        })
    }

    /// Verify every copy of a block on every device, repairing what can be repaired.
    pub fn scrub_block(&self, bp: &BlkPtr) -> ScrubOutcome {
        let tops = self.vdevs.read();
        let psize = bp.psize as usize;
        let verify = |b: &[u8]| b.len() >= psize && checksum(&b[..psize]) == bp.checksum;
        let mut total = ScrubOutcome::default();
        // Copies whose vdev scrubbed them good: a source for the others.
        let mut recoverable = Vec::new();
        let mut unrecoverable_dvas = Vec::new();
        for d in bp.dva_iter() {
            let Some((top, len)) = tops
                .get(d.vdev as usize)
                .and_then(|t| Some((t, extent_len(t, d, psize)?)))
            else {
                total.bad_copies += 1;
                continue;
            };
            let o = top.scrub_extent(d.offset, len, &verify);
            total.bad_copies += o.bad_copies;
            total.repaired += o.repaired;
            total.resilvered += o.resilvered;
            if o.unrecoverable {
                unrecoverable_dvas.push(*d);
            } else {
                recoverable.push((top, d.offset, len));
            }
        }
        if recoverable.is_empty() {
            total.unrecoverable = true;
            return total;
        }
        if unrecoverable_dvas.is_empty() {
            // Every copy verified (and was healed) in place: no second read.
            // Reading a good copy again here cost a resilver (one long run
            // of this function) a second read of every block.
            return total;
        }
        let good = recoverable
            .iter()
            .find_map(|(top, off, len)| top.read_verified(*off, *len, &verify, true).ok());
        match good {
            Some(buf) => {
                for d in unrecoverable_dvas {
                    if self.still_allocated(&d) {
                        tops[d.vdev as usize].repair(&buf, d.offset);
                        total.repaired += 1;
                    }
                }
            }
            None => total.unrecoverable = true,
        }
        total
    }

    /// Write an intent-log block's bytes (a prefix of its allocation). A failing
    /// log device is marked faulted so later log blocks go to the data vdevs.
    pub fn write_log_block(&self, dva: &Dva, data: &[u8]) -> Result<()> {
        let tops = self.vdevs.read();
        let top = tops
            .get(dva.vdev as usize)
            .ok_or_else(|| PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block on a vdev that does not exist".into(),
            })?;
        let cap = top.log_capacity(dva.asize as u64);
        if data.len() as u64 > cap || dva.offset + dva.asize as u64 > top.asize {
            return Err(PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block outside its allocation".into(),
            });
        }
        // A raidz stripe's shape depends on its length: write the whole capacity,
        // as the read will read it.
        let r = if top.is_raidz() {
            let mut full = data.to_vec();
            full.resize(cap as usize, 0);
            top.write(&full, dva.offset)
        } else {
            top.write(data, dva.offset)
        };
        if r.is_err() && top.log {
            self.fault_log_vdev(top);
        }
        r
    }

    /// Flush the vdevs that hold log blocks (`vdevs`: their ids).
    pub fn flush_vdevs(&self, vdevs: &[u32]) -> Result<()> {
        let tops = self.vdevs.read();
        for id in vdevs {
            if let Some(t) = tops.get(*id as usize) {
                if let Err(e) = t.flush() {
                    if t.log {
                        self.fault_log_vdev(t);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn fault_log_vdev(&self, top: &TopVdev) {
        if !top.faulted.swap(true, Relaxed) {
            self.notices.lock().push(format!(
                "log device {} failed: logging to the main vdevs",
                top.leaves
                    .first()
                    .map(|l| l.path.display().to_string())
                    .unwrap_or_default()
            ));
        }
    }

    /// Read an intent-log block: the first copy that `valid` accepts (the log
    /// block carries its own checksum, as its pointer cannot).
    pub fn read_log_block(&self, dva: &Dva, valid: &dyn Fn(&[u8]) -> bool) -> Result<Vec<u8>> {
        let tops = self.vdevs.read();
        let top = tops
            .get(dva.vdev as usize)
            .ok_or_else(|| PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block on a vdev that does not exist".into(),
            })?;
        if dva.offset + dva.asize as u64 > top.asize {
            return Err(PoolError::Corrupt {
                vdev: dva.vdev,
                offset: dva.offset,
                what: "log block outside its vdev".into(),
            });
        }
        let cap = top.log_capacity(dva.asize as u64) as usize;
        top.read_verified(dva.offset, cap, valid, false)
    }

    /// True if the pool has a separate log device (healthy or not).
    pub fn has_log_vdevs(&self) -> bool {
        self.vdevs.read().iter().any(|t| t.log)
    }

    /// True if vdev `id` is a separate log device.
    pub fn is_log_vdev(&self, id: u32) -> bool {
        self.vdevs.read().get(id as usize).is_some_and(|t| t.log)
    }

    /// The raw bytes at a log block's place (first readable copy, unverified):
    /// replay uses them to tell an unwritten block from a damaged one.
    pub fn read_log_block_raw(&self, dva: &Dva) -> Result<Vec<u8>> {
        self.read_log_block(dva, &|_| true)
    }

    /// Bytes an intent-log block of this allocation can hold (less than its
    /// allocation on raidz, where parity shares it).
    pub fn log_block_capacity(&self, dva: &Dva) -> u64 {
        self.vdevs
            .read()
            .get(dva.vdev as usize)
            .map_or(dva.asize as u64, |t| t.log_capacity(dva.asize as u64))
    }

    /// Flush every device (used before export).
    pub fn flush_all(&self) -> Result<()> {
        for t in self.vdevs.read().iter() {
            t.flush()?;
        }
        Ok(())
    }
}
