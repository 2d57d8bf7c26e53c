//! `pool attach`, `detach`, `offline` and `online`: device changes of a live
//! pool (the checks are the pool layer's; see cachalot_pool's `devices`).
//!
//! Invariants: each holds the admin lock; a new device must be an absolute path
//! not in use by any pool; the daemon's record of the pool's devices and its
//! saved state follow every change that succeeded.

use super::{log, se, Daemon, OpResult};
use crate::proto::Args;
use serde_json::json;
use std::path::PathBuf;

impl Daemon {
    /// After a successful change: the recorded devices and the saved state.
    fn devices_changed(&self, name: &str, what: &str) -> Result<(), String> {
        if let Ok(store) = self.store(name) {
            if let Some(slot) = self.pools.write().get_mut(name) {
                slot.record.devices = store.pool().device_paths();
            }
        }
        self.save_state_after(what)
    }

    /// `pool attach POOL DEV NEW`.
    pub(super) fn pool_attach(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let dev = a.str("device")?;
        let new = PathBuf::from(a.str("new")?);
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        self.check_device_free(&new)?;
        let copts = Daemon::joining_device_opts(&store, a)?;
        store
            .change_devices(|p, next| p.attach_device(&dev, &new, &copts, next))
            .map_err(se)?;
        log(format!(
            "pool '{name}': {} attached to {dev}",
            new.display()
        ));
        self.devices_changed(&name, "pool attach")?;
        Ok(json!({ "name": name }))
    }

    /// `pool detach POOL DEV`.
    pub(super) fn pool_detach(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let dev = a.str("device")?;
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        store
            .change_devices(|p, next| p.detach_device(&dev, next))
            .map_err(se)?;
        log(format!("pool '{name}': {dev} detached"));
        self.devices_changed(&name, "pool detach")?;
        Ok(json!({ "name": name }))
    }

    /// `pool offline POOL DEV` and `pool online POOL DEV`.
    pub(super) fn pool_offline(&self, a: &Args, online: bool) -> OpResult {
        let name = a.str("name")?;
        let dev = a.str("device")?;
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        if online {
            store
                .change_devices(|p, next| p.online_device(&dev, next))
                .map_err(se)?;
        } else {
            store
                .change_devices(|p, next| p.offline_device(&dev, next))
                .map_err(se)?;
        }
        let what = if online { "online" } else { "offline" };
        log(format!("pool '{name}': {dev} {what}"));
        self.devices_changed(&name, &format!("pool {what}"))?;
        Ok(json!({ "name": name }))
    }

    /// `pool remove POOL DEV`: a cache device or an available spare leaves
    /// the pool.
    pub(super) fn pool_remove(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let dev = a.str("device")?;
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        let what = store.remove_device(&dev).map_err(se)?;
        log(format!("pool '{name}': {what} {dev} removed"));
        self.devices_changed(&name, "pool remove")?;
        Ok(json!({ "name": name }))
    }
}
