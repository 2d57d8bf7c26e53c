//! A logical unit: one volume served as LUN 0 of one target, with the state SCSI keeps
//! per LU across connections (reservations, the COMPARE AND WRITE lock).
//!
//! Invariants:
//! - One `Lun` per target name lives in the [`crate::target::Target`] registry, so every
//!   session sees the same reservations.
//! - Writes hold `atomic` shared; COMPARE AND WRITE holds it exclusive across its read,
//!   compare and write, so no write lands between its compare and its write.
//! - Persistent reservation state is written to `pr_path` (when set) before a PR OUT
//!   returns GOOD, so registrations survive a daemon restart.

use crate::dev::BlockDev;
use crate::scsi::pr::PrState;
use crate::scsi::LBS;
use parking_lot::{Mutex, RwLock};
use std::path::PathBuf;
use std::sync::Arc;

/// An I_T nexus: initiator port name (initiator name + ISID).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Nexus(pub String);

impl Nexus {
    pub fn new(initiator: &str, isid: [u8; 6]) -> Nexus {
        let hex: String = isid.iter().map(|b| format!("{b:02x}")).collect();
        Nexus(format!("{initiator},i,0x{hex}"))
    }
}

pub struct Lun {
    pub dev: Arc<dyn BlockDev>,
    /// Target name (iqn.2026-11.org.cachalot:POOL.VOL).
    pub target: String,
    pub pr: Mutex<PrState>,
    pub pr_path: Option<PathBuf>,
    pub atomic: RwLock<()>,
}

fn fnv64(s: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Lun {
    pub fn new(dev: Arc<dyn BlockDev>, target: &str, pr_path: Option<PathBuf>) -> Lun {
        let pr = pr_path.as_deref().map(PrState::load).unwrap_or_default();
        Lun {
            dev,
            target: target.to_string(),
            pr: Mutex::new(pr),
            pr_path,
            atomic: RwLock::new(()),
        }
    }

    /// Capacity in 512-byte logical blocks.
    pub fn blocks(&self) -> u64 {
        self.dev.size() / LBS
    }

    /// Unit serial number: stable for the target name.
    pub fn serial(&self) -> String {
        format!("{:016x}", fnv64(&self.target))
    }

    /// NAA locally assigned identifier (type 3) derived from the target name.
    pub fn naa(&self) -> u64 {
        (3u64 << 60) | (fnv64(&self.target) & 0x0fff_ffff_ffff_ffff)
    }

    /// Save the reservation state; an error is reported to the initiator.
    pub fn save_pr(&self, st: &PrState) -> std::io::Result<()> {
        match &self.pr_path {
            Some(p) => st.save(p),
            None => Ok(()),
        }
    }

    /// An I_T nexus ended (logout, connection loss): SPC-2 reservations go with it.
    pub fn nexus_lost(&self, n: &Nexus) {
        let mut pr = self.pr.lock();
        if pr.legacy.as_ref() == Some(n) {
            pr.legacy = None;
        }
    }

    /// LUN RESET / target reset: SPC-2 reservations are released, PR state kept.
    pub fn reset(&self) {
        self.pr.lock().legacy = None;
    }
}
