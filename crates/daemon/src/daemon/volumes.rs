//! The daemon's volume registry: one `Arc<Zvol>` per volume (or volume snapshot),
//! shared by every protocol that serves it (NBD and iSCSI).
//!
//! Invariants:
//! - At most one `Zvol` per name; protocol servers get it through `volume`.
//! - An entry is dropped (and the NBD connections and iSCSI sessions using it
//!   closed, see `nbd.rs` and `iscsi.rs`)
//!   before the dataset behind it is destroyed, its snapshot destroyed, rolled
//!   back past, or its pool exported: a cached handle never reads freed blocks.

use super::{se, Daemon};
use cachalot_datasets::DatasetKind;
use cachalot_zvol::Zvol;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct Volumes {
    map: Mutex<BTreeMap<String, Arc<Zvol>>>,
}

/// True if `name` is `root` or lies under it (a child dataset or a snapshot).
pub(super) fn is_under(name: &str, root: &str) -> bool {
    name == root
        || name
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/') || rest.starts_with('@'))
}

impl Daemon {
    /// The shared block device of volume (or volume snapshot) `name`.
    pub fn volume(&self, name: &str) -> Result<Arc<Zvol>, String> {
        if let Some(v) = self.volumes.map.lock().get(name) {
            return Ok(v.clone());
        }
        let store = self.ds_or_snap_store(name)?;
        let ds = if name.contains('@') {
            store.snapshot_dataset(name).map_err(se)?
        } else {
            store.dataset(name).map_err(se)?
        };
        if ds.kind() != DatasetKind::Volume {
            return Err(format!("'{name}' is not a volume"));
        }
        let vol = Arc::new(Zvol::open(store, ds).map_err(|e| e.to_string())?);
        Ok(self
            .volumes
            .map
            .lock()
            .entry(name.to_string())
            .or_insert(vol)
            .clone())
    }

    /// Drop the registry entries `gone` selects and close every connection that
    /// serves them (before a destroy, snapshot destroy, rollback or export).
    pub(super) fn stop_serving(&self, gone: impl Fn(&str) -> bool) {
        let mut dropped = Vec::new();
        self.volumes.map.lock().retain(|n, _| {
            let keep = !gone(n);
            if !keep {
                dropped.push(n.clone());
            }
            keep
        });
        self.iscsi_close(&dropped);
        if let Some(nbd) = self.nbd.get() {
            let n = nbd.disconnect_where(&gone);
            if n > 0 {
                super::log(format!("nbd: closed {n} connection(s) of a removed volume"));
            }
        }
    }
}
