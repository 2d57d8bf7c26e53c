//! `pool remove POOL SPARE`, and keeping spares' labels current.
//!
//! Invariants: only an available spare (one in the configuration's `spares`
//! list) is removed; a spare that took over a device is a member of its vdev,
//! no longer in the list, and is refused with an error that says so, nothing
//! changed. A removed spare's labels are erased, so it can serve another pool
//! without -f. Every configuration change rewrites the spares' labels with
//! the new configuration (best effort: a spare that cannot be written is still
//! listed in the members' labels, which are what import trusts).

use crate::commit::write_labels;
use crate::device::{BlockDevice, FileDevice};
use crate::error::{PoolError, Result};
use crate::label::{label_offsets, LabelHeader, PoolConfig, LABEL_HEADER_SIZE};
use crate::pool::Pool;
use crate::spares::SPARE_TOP_ID;

impl Pool {
    /// Remove the available spare `dev` (its path, as `pool status` shows it,
    /// or its guid) from the pool.
    pub fn remove_spare(&self, dev: &str, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        let canon = std::fs::canonicalize(dev)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| dev.to_string());
        let mut cfg = self.config.read().clone();
        let Some(i) = cfg
            .spares
            .iter()
            .position(|s| s.path.display().to_string() == canon || s.guid.to_string() == dev)
        else {
            if self.find_leaf(dev).is_some() || self.find_leaf(&canon).is_some() {
                return Err(PoolError::InvalidSpec(format!(
                    "{dev}: in use in the pool (a member, or a hot spare that took over a \
                     device); only an available spare can be removed"
                )));
            }
            return Err(PoolError::InvalidSpec(format!(
                "{dev}: no such spare in pool '{}'",
                cfg.name
            )));
        };
        let gone = cfg.spares.remove(i);
        cfg.config_txg = next_txg;
        *self.config.write() = cfg;
        self.rewrite_label_headers()?;
        // Members no longer list it: now free it (best effort).
        if let Ok(d) = FileDevice::open(&gone.path) {
            let zeros = vec![0u8; LABEL_HEADER_SIZE];
            for off in label_offsets(d.size()) {
                let _ = d.write_at(&zeros, off);
            }
            let _ = d.flush();
        }
        self.add_notice(format!("spare {} removed", gone.path.display()));
        Ok(())
    }

    /// Write `cfg` into every available spare's label (see the invariants).
    pub(crate) fn refresh_spare_labels(&self, cfg: &PoolConfig) {
        for s in &cfg.spares {
            if let Ok(d) = FileDevice::open(&s.path) {
                let h = LabelHeader {
                    config: cfg.clone(),
                    leaf_guid: s.guid,
                    top_id: SPARE_TOP_ID,
                };
                let _ = write_labels(&d, &h, false);
            }
        }
    }
}
