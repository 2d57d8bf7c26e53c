//! Fault injection for tests, in the spirit of OpenZFS's zinject: a leaf can be
//! told to fail reads, writes or both with an I/O error, or to return (or store)
//! garbage, on every I/O or on a share of them. And the diagnosis that follows
//! real or injected errors: a leaf with too many I/O errors is FAULTED and gets
//! no more I/O (a hot spare or `pool replace` takes over); one with too many
//! checksum errors is DEGRADED (still used).
//!
//! Invariants: injection changes only what a leaf returns or stores, never the
//! pool's own state directly, so every effect goes through the real error paths;
//! with no fault set, the I/O paths take no lock and do no extra work.

use crate::error::{PoolError, Result};
use crate::pool::Pool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// I/O errors (read + write) after which a leaf is FAULTED.
pub const FAULT_AFTER_IO_ERRORS: u64 = 16;
/// Checksum errors after which a leaf is DEGRADED.
pub const DEGRADED_AFTER_CKSUM_ERRORS: u64 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOps {
    Read,
    Write,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The I/O fails with an error.
    Eio,
    /// Reads return noise; writes store noise.
    Corrupt,
}

/// One injected fault on a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub ops: FaultOps,
    pub kind: FaultKind,
    /// Percent of matching I/Os affected (1..=100).
    pub rate: u8,
}

impl Fault {
    /// Parse `read|write|all` and `eio|corrupt`.
    pub fn parse(ops: &str, kind: &str, rate: u8) -> Result<Fault> {
        let ops = match ops {
            "read" => FaultOps::Read,
            "write" => FaultOps::Write,
            "all" => FaultOps::All,
            o => {
                return Err(PoolError::InvalidSpec(format!(
                    "'{o}': expected read, write or all"
                )))
            }
        };
        let kind = match kind {
            "eio" => FaultKind::Eio,
            "corrupt" => FaultKind::Corrupt,
            k => {
                return Err(PoolError::InvalidSpec(format!(
                    "'{k}': expected eio or corrupt"
                )))
            }
        };
        if !(1..=100).contains(&rate) {
            return Err(PoolError::InvalidSpec(format!(
                "rate {rate}: expected 1 to 100 (percent)"
            )));
        }
        Ok(Fault { ops, kind, rate })
    }
}

/// Per-leaf fault state: the injected fault and the FAULTED mark.
#[derive(Default, Debug)]
pub struct LeafFault {
    injected: parking_lot::Mutex<Option<Fault>>,
    armed: AtomicBool,
    /// Set by diagnosis: no more I/O goes to the leaf.
    pub faulted: AtomicBool,
    /// Set by `pool offline`: no I/O goes to the leaf until `pool online`.
    pub offline: AtomicBool,
    /// First txg whose blocks the leaf may lack (`LeafConfig::offline_txg`;
    /// 0: unknown, every block).
    pub offline_txg: AtomicU64,
    /// Set when the device's path vanished (REMOVED): no more I/O goes to it.
    pub removed: AtomicBool,
    counter: AtomicU64,
}

impl LeafFault {
    pub fn set(&self, f: Option<Fault>) {
        *self.injected.lock() = f;
        self.armed.store(f.is_some(), Relaxed);
    }

    /// The fault that hits this I/O, if any.
    pub fn hits(&self, write: bool) -> Option<FaultKind> {
        if !self.armed.load(Relaxed) {
            return None;
        }
        let f = (*self.injected.lock())?;
        let matches = match f.ops {
            FaultOps::All => true,
            FaultOps::Read => !write,
            FaultOps::Write => write,
        };
        // A deterministic spread: rate% of the I/Os, evenly.
        let n = self.counter.fetch_add(1, Relaxed);
        let hit = (n * f.rate as u64) / 100 != ((n + 1) * f.rate as u64) / 100;
        (matches && hit).then_some(f.kind)
    }
}

/// Noise for corrupt injections (cheap, not cryptographic).
pub fn scramble(buf: &mut [u8]) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ buf.len() as u64;
    for b in buf {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

impl Pool {
    /// Inject a fault on the device named by path, file name or guid (`None`
    /// clears it).
    pub fn inject_fault(&self, device: &str, fault: Option<Fault>) -> Result<()> {
        let tops = self.vdevs.read();
        let leaf = tops
            .iter()
            .flat_map(|t| t.leaves.iter())
            .find(|l| {
                l.path.as_os_str() == device
                    || l.path.file_name().is_some_and(|n| n == device)
                    || l.guid.to_string() == device
            })
            .ok_or_else(|| {
                PoolError::InvalidSpec(format!(
                    "{device}: no such device in pool '{}'",
                    self.name()
                ))
            })?;
        leaf.fault.set(fault);
        Ok(())
    }

    /// Mark REMOVED every device whose path no longer exists (a file deleted,
    /// a disk pulled): the open descriptor would go on working on a file no one
    /// can see, and the operator must learn the device is gone. Returns the
    /// paths newly marked.
    pub fn probe_removed(&self) -> Vec<String> {
        let mut out = Vec::new();
        for t in self.vdevs.read().iter() {
            for l in &t.leaves {
                // Only real paths (simulated devices have none).
                if l.dev.is_none() || l.fault.removed.load(Relaxed) || !l.path.is_absolute() {
                    continue;
                }
                if matches!(std::fs::symlink_metadata(&l.path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
                {
                    l.fault.removed.store(true, Relaxed);
                    out.push(l.path.display().to_string());
                }
            }
        }
        for p in &out {
            self.add_notice(format!(
                "{p} was removed: no more I/O goes to it (replace it)"
            ));
        }
        out.extend(self.probe_removed_cache());
        out
    }

    /// Clear every injected fault (FAULTED marks stay: `pool replace` or an
    /// export and import brings the device back).
    pub fn clear_faults(&self) {
        for t in self.vdevs.read().iter() {
            for l in &t.leaves {
                l.fault.set(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_spreads_evenly() {
        let f = LeafFault::default();
        f.set(Some(Fault::parse("read", "eio", 25).unwrap()));
        let hits = (0..400).filter(|_| f.hits(false).is_some()).count();
        assert_eq!(hits, 100);
        assert_eq!(f.hits(true), None);
        f.set(None);
        assert_eq!(f.hits(false), None);
        assert!(Fault::parse("read", "eio", 0).is_err());
        assert!(Fault::parse("both", "eio", 5).is_err());
    }
}
