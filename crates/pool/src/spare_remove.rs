//! `pool remove POOL DEV` (an available spare or a cache device), and keeping
//! spares' labels current.
//!
//! Invariants: only an available spare (one in the configuration's `spares`
//! list) or a cache device is removed; a spare that took over a device is a
//! member of its vdev, no longer in the list, and is refused with an error
//! that says so, as is any data device (the last data vdev's, with its own
//! message), nothing changed. A removed device's labels are erased, so it can
//! serve another pool without -f. Every configuration change rewrites the spares' labels with
//! the new configuration (best effort: a spare that cannot be written is still
//! listed in the members' labels, which are what import trusts).

use crate::commit::write_labels;
use crate::device::{BlockDevice, FileDevice};
use crate::error::{PoolError, Result};
use crate::label::{label_offsets, LabelHeader, PoolConfig, LABEL_HEADER_SIZE};
use crate::pool::Pool;
use crate::spares::SPARE_TOP_ID;

/// The name `dev` is given by, as `pool status` shows paths.
fn canonical(dev: &str) -> String {
    std::fs::canonicalize(dev)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| dev.to_string())
}

/// Zero a removed device's labels (best effort): it belongs to no pool now.
pub(crate) fn erase_labels(d: &dyn BlockDevice) {
    let zeros = vec![0u8; LABEL_HEADER_SIZE];
    for off in label_offsets(d.size()) {
        let _ = d.write_at(&zeros, off);
    }
    let _ = d.flush();
}

impl Pool {
    /// `pool remove`: the cache device or available spare `dev` (its path, as
    /// `pool status` shows it, or its guid) leaves the pool. Returns what it
    /// was: "cache device" or "spare".
    pub fn remove_device(&self, dev: &str, next_txg: u64) -> Result<&'static str> {
        self.check_suspended()?;
        let canon = canonical(dev);
        let cache = self
            .cache
            .read()
            .iter()
            .position(|c| c.path.display().to_string() == canon || c.guid.to_string() == dev);
        match cache {
            Some(i) => self.remove_cache(i, next_txg).map(|()| "cache device"),
            None => self.remove_spare(dev, next_txg).map(|()| "spare"),
        }
    }

    /// Remove the available spare `dev` (its path, as `pool status` shows it,
    /// or its guid) from the pool.
    pub fn remove_spare(&self, dev: &str, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        let canon = canonical(dev);
        let mut cfg = self.config.read().clone();
        let Some(i) = cfg
            .spares
            .iter()
            .position(|s| s.path.display().to_string() == canon || s.guid.to_string() == dev)
        else {
            if let Some((t, _)) = self.find_leaf(dev).or_else(|| self.find_leaf(&canon)) {
                let tops = self.vdevs.read();
                let last = !tops[t].log && tops.iter().filter(|t| !t.log).count() == 1;
                let which = if last {
                    "its last data vdev, which cannot be removed"
                } else {
                    "a data vdev"
                };
                return Err(PoolError::InvalidSpec(format!(
                    "{dev}: in use in the pool, in {which} (a data device, or a hot spare \
                     that took over one); only available spares and cache devices can be removed"
                )));
            }
            return Err(PoolError::InvalidSpec(format!(
                "{dev}: no such spare or cache device in pool '{}'",
                cfg.name
            )));
        };
        let gone = cfg.spares.remove(i);
        cfg.config_txg = cfg.next_config_txg(next_txg);
        *self.config.write() = cfg;
        self.rewrite_label_headers()?;
        // Members no longer list it: now free it (best effort).
        if let Ok(d) = FileDevice::open(&gone.path) {
            erase_labels(&d);
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
