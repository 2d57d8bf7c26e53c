//! Virtual devices: top-level vdevs made of leaves (one disk, an N-way mirror, or a
//! raidz group, whose stripes are in `raidz`).
//!
//! Invariants:
//! - A DVA offset is relative to the top-level vdev's allocatable space; on each leaf
//!   it lives at `DATA_START + offset`. Mirror children hold identical bytes there.
//! - A read returns only bytes that pass the caller's verifier (the checksum in the
//!   parent pointer). A child that returned bad bytes is counted (READ or CKSUM) and,
//!   when another child had good bytes, rewritten with them (self-healing).
//! - A write succeeds if at least one child took it; failed children are counted.

use crate::device::BlockDevice;
use crate::error::{PoolError, Result};
use crate::label::{VdevKind, DATA_START};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Per-device error counters, as `pool status` shows them.
#[derive(Default, Debug)]
pub struct ErrorCounters {
    pub read: AtomicU64,
    pub write: AtomicU64,
    pub cksum: AtomicU64,
    /// Copies rewritten from a good mirror child or ditto copy.
    pub repaired: AtomicU64,
}

/// One leaf device: present or missing.
pub struct Leaf {
    pub guid: u64,
    pub path: std::path::PathBuf,
    pub dev: Option<Arc<dyn BlockDevice>>,
    pub errors: ErrorCounters,
    /// A replacement being filled by a resilver: written to, never read from,
    /// until the resilver has rebuilt every block on it.
    pub resilvering: std::sync::atomic::AtomicBool,
    /// Injected faults and the FAULTED mark (see `fault`).
    pub fault: crate::fault::LeafFault,
}

/// `disk.ops` and `disk.bytes` (device, op): every leaf read and write with its
/// latency and bytes.
fn record_disk(device: &str, op: &str, bytes: u64, latency: std::time::Duration) {
    use cachalot_analytics::Stat;
    static S: std::sync::OnceLock<(Stat, Stat)> = std::sync::OnceLock::new();
    let (ops, by) = S.get_or_init(|| {
        let reg = cachalot_analytics::global();
        (
            reg.stat("disk.ops", &["device", "op"]),
            reg.stat("disk.bytes", &["device", "op"]),
        )
    });
    ops.record(&[device, op], bytes, latency);
    by.add(&[device, op], 1, bytes);
}

impl Leaf {
    /// Name in analytics: the device's file name.
    fn stat_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }

    /// Present and holding every block (not a replacement still resilvering).
    pub fn readable(&self) -> bool {
        self.dev.is_some() && !self.resilvering.load(Relaxed) && !self.is_faulted()
    }

    /// FAULTED, REMOVED or OFFLINE: the leaf gets no I/O.
    pub fn is_faulted(&self) -> bool {
        self.fault.faulted.load(Relaxed) || self.is_offline() || self.fault.removed.load(Relaxed)
    }

    pub fn is_offline(&self) -> bool {
        self.fault.offline.load(Relaxed)
    }

    /// Count an I/O error; enough of them fault the leaf (no more I/O to it).
    pub(crate) fn io_error(&self, write: bool) {
        let c = if write {
            &self.errors.write
        } else {
            &self.errors.read
        };
        c.fetch_add(1, Relaxed);
        let n = self.errors.read.load(Relaxed) + self.errors.write.load(Relaxed);
        if n >= crate::fault::FAULT_AFTER_IO_ERRORS {
            self.fault.faulted.store(true, Relaxed);
        }
    }

    /// ONLINE, DEGRADED (many checksum errors), FAULTED, OFFLINE, REMOVED,
    /// UNAVAIL, RESILVERING.
    pub fn state(&self) -> &'static str {
        if self.is_offline() {
            "OFFLINE"
        } else if self.fault.removed.load(Relaxed) {
            "REMOVED"
        } else if self.dev.is_none() {
            "UNAVAIL"
        } else if self.is_faulted() {
            "FAULTED"
        } else if self.resilvering.load(Relaxed) {
            "RESILVERING"
        } else if self.errors.cksum.load(Relaxed) >= crate::fault::DEGRADED_AFTER_CKSUM_ERRORS {
            "DEGRADED"
        } else {
            "ONLINE"
        }
    }

    pub(crate) fn read_raw(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if self.resilvering.load(Relaxed) || self.is_faulted() {
            return Err(PoolError::Import(format!(
                "{}: {}",
                self.path.display(),
                self.state().to_lowercase()
            )));
        }
        let injected = self.fault.hits(false);
        if injected == Some(crate::fault::FaultKind::Eio) {
            return Err(PoolError::Import(format!(
                "{}: injected read error",
                self.path.display()
            )));
        }
        match &self.dev {
            Some(d) => {
                let t0 = std::time::Instant::now();
                let r = d.read_at(buf, DATA_START + offset);
                record_disk(&self.stat_name(), "read", buf.len() as u64, t0.elapsed());
                if injected.is_some() {
                    crate::fault::scramble(buf);
                }
                r
            }
            None => Err(PoolError::Import(format!(
                "{}: device unavailable",
                self.path.display()
            ))),
        }
    }
    pub(crate) fn write_raw(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.is_faulted() {
            return Err(PoolError::Import(format!(
                "{}: faulted",
                self.path.display()
            )));
        }
        let injected = self.fault.hits(true);
        if injected == Some(crate::fault::FaultKind::Eio) {
            return Err(PoolError::Import(format!(
                "{}: injected write error",
                self.path.display()
            )));
        }
        let noise;
        let buf = if injected.is_some() {
            noise = {
                let mut n = buf.to_vec();
                crate::fault::scramble(&mut n);
                n
            };
            &noise[..]
        } else {
            buf
        };
        match &self.dev {
            Some(d) => {
                let t0 = std::time::Instant::now();
                let r = d.write_at(buf, DATA_START + offset);
                record_disk(&self.stat_name(), "write", buf.len() as u64, t0.elapsed());
                r
            }
            None => Err(PoolError::Import(format!(
                "{}: device unavailable",
                self.path.display()
            ))),
        }
    }
}

/// Outcome of checking every copy of one extent.
#[derive(Default, Debug, Clone, Copy)]
pub struct ScrubOutcome {
    pub bad_copies: u64,
    pub repaired: u64,
    /// True if no child had good bytes.
    pub unrecoverable: bool,
    /// Copies written to a replacement device being resilvered.
    pub resilvered: u64,
}

/// A top-level vdev.
pub struct TopVdev {
    pub id: u32,
    pub guid: u64,
    pub kind: VdevKind,
    pub asize: u64,
    pub leaves: Vec<Leaf>,
    /// A separate log device: only intent log blocks are allocated on it.
    pub log: bool,
    /// Set when a write or flush failed: allocation avoids this vdev from then on.
    pub faulted: std::sync::atomic::AtomicBool,
    /// log2 of the sector size (raidz stripes are laid out in sectors).
    pub ashift: u8,
}

impl TopVdev {
    /// Whether the leaves that read now can rebuild every leaf that does not
    /// (a mirror: one readable child; a raidz: no more unreadable than its
    /// parity; a single disk: never). Only then is a FAULTED leaf recorded as
    /// resilvering (`faulted.rs`): beyond that the vdev's writes fail and the
    /// pool suspends, and an import must read every device, as none can be
    /// rebuilt from the others.
    pub(crate) fn rebuildable_without_unreadable(&self) -> bool {
        let unreadable = self.leaves.iter().filter(|l| !l.readable()).count();
        let tolerated = match self.kind {
            VdevKind::Mirror => self.leaves.len().saturating_sub(1),
            kind => crate::raidz::nparity(kind),
        };
        unreadable <= tolerated
    }
}

impl TopVdev {
    /// Write `buf` at `offset` on every child (raidz: as one stripe with parity).
    pub fn write(&self, buf: &[u8], offset: u64) -> Result<()> {
        // Past `asize` lie the back labels: a write there would destroy them.
        assert!(
            offset + self.alloc_size(buf.len() as u64) <= self.asize,
            "write of {} bytes at {offset:#x} past the end of vdev {} ({})",
            buf.len(),
            self.id,
            self.asize
        );
        if self.is_raidz() {
            return self.raidz_write(buf, offset);
        }
        let mut ok = 0;
        let mut last_err = None;
        for leaf in &self.leaves {
            match leaf.write_raw(buf, offset) {
                Ok(()) => ok += 1,
                Err(e) => {
                    if leaf.dev.is_some() && !leaf.is_faulted() {
                        leaf.io_error(true);
                    }
                    last_err = Some(e);
                }
            }
        }
        if ok == 0 {
            return Err(last_err.unwrap_or(PoolError::NoSpace));
        }
        Ok(())
    }

    /// Read `len` bytes at `offset` that satisfy `verify`, trying each child in turn
    /// and healing children that returned bad bytes.
    ///
    /// A copy that fails `verify` counts as a CKSUM error when another copy passed,
    /// or when none did and `unverified_is_error`. Intent-log reads pass false: a
    /// log chain ends at a block that was never written, so "no copy verifies" is
    /// the normal end of every replay, and replay itself reports real damage.
    pub fn read_verified(
        &self,
        offset: u64,
        len: usize,
        verify: &dyn Fn(&[u8]) -> bool,
        unverified_is_error: bool,
    ) -> Result<Vec<u8>> {
        if self.is_raidz() {
            return self.raidz_read_verified(offset, len, verify);
        }
        let mut buf = vec![0u8; len];
        let mut unverified: Vec<&Leaf> = Vec::new();
        let mut unreadable: Vec<&Leaf> = Vec::new();
        for leaf in &self.leaves {
            if !leaf.readable() {
                continue;
            }
            match leaf.read_raw(&mut buf, offset) {
                Ok(()) if verify(&buf) => {
                    for b in unverified.iter().chain(&unreadable) {
                        if b.write_raw(&buf, offset).is_ok() {
                            b.errors.repaired.fetch_add(1, Relaxed);
                        }
                    }
                    for b in unverified {
                        b.errors.cksum.fetch_add(1, Relaxed);
                    }
                    return Ok(buf);
                }
                Ok(()) => unverified.push(leaf),
                Err(_) => {
                    leaf.io_error(false);
                    unreadable.push(leaf);
                }
            }
        }
        if unverified_is_error {
            for b in unverified {
                b.errors.cksum.fetch_add(1, Relaxed);
            }
        }
        Err(PoolError::Checksum {
            vdev: self.id,
            offset,
        })
    }

    /// Read every child's copy; count and repair bad ones from a good one.
    pub fn scrub_extent(
        &self,
        offset: u64,
        len: usize,
        verify: &dyn Fn(&[u8]) -> bool,
    ) -> ScrubOutcome {
        if self.is_raidz() {
            return self.raidz_scrub(offset, len, verify);
        }
        let mut out = ScrubOutcome::default();
        let mut good: Option<Vec<u8>> = None;
        let mut bad: Vec<&Leaf> = Vec::new();
        let mut resilver: Vec<&Leaf> = Vec::new();
        for leaf in &self.leaves {
            if leaf.dev.is_none() {
                continue;
            }
            if !leaf.readable() {
                resilver.push(leaf);
                continue;
            }
            let mut buf = vec![0u8; len];
            match leaf.read_raw(&mut buf, offset) {
                Ok(()) if verify(&buf) => {
                    good.get_or_insert(buf);
                }
                Ok(()) => {
                    leaf.errors.cksum.fetch_add(1, Relaxed);
                    bad.push(leaf);
                }
                Err(_) => {
                    leaf.io_error(false);
                    bad.push(leaf);
                }
            }
        }
        out.bad_copies = bad.len() as u64;
        match good {
            Some(g) => {
                for b in bad {
                    if b.write_raw(&g, offset).is_ok() {
                        b.errors.repaired.fetch_add(1, Relaxed);
                        out.repaired += 1;
                    }
                }
                // A replacement gets the good copy: that is the resilver.
                for r in resilver {
                    if r.write_raw(&g, offset).is_ok() {
                        out.resilvered += 1;
                    }
                }
            }
            None => out.unrecoverable = true,
        }
        out
    }

    /// Rewrite an extent on every child with known-good bytes (ditto-copy repair).
    pub fn repair(&self, buf: &[u8], offset: u64) {
        if self.is_raidz() {
            if self.raidz_write(buf, offset).is_ok() {
                for leaf in self.leaves.iter().filter(|l| l.dev.is_some()) {
                    leaf.errors.repaired.fetch_add(1, Relaxed);
                }
            }
            return;
        }
        for leaf in &self.leaves {
            if leaf.write_raw(buf, offset).is_ok() {
                leaf.errors.repaired.fetch_add(1, Relaxed);
            }
        }
    }

    /// Make all children's writes durable. Fails only if no child could flush.
    pub fn flush(&self) -> Result<()> {
        let mut ok = 0;
        let mut last_err = None;
        for leaf in self.leaves.iter().filter(|l| !l.is_faulted()) {
            if let Some(d) = &leaf.dev {
                match d.flush() {
                    Ok(()) => ok += 1,
                    Err(e) => {
                        leaf.io_error(true);
                        last_err = Some(e);
                    }
                }
            }
        }
        match (ok, last_err) {
            (0, Some(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Health of this vdev: ONLINE, DEGRADED (a mirror lost children), UNAVAIL.
    pub fn health(&self) -> &'static str {
        if self.faulted.load(Relaxed) {
            return "FAULTED";
        }
        if self.is_raidz() {
            return self.raidz_health();
        }
        let present = self.leaves.iter().filter(|l| l.readable()).count();
        if present == self.leaves.len() {
            "ONLINE"
        } else if present > 0 {
            "DEGRADED"
        } else {
            "UNAVAIL"
        }
    }
}
