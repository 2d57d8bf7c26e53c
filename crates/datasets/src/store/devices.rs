//! Device changes on a live pool (attach, detach, offline, online), and the
//! watcher that puts a hot spare in place of a FAULTED device.
//!
//! Invariants: a change runs with commits held off and the scan stopped, and is
//! followed by a commit; a scan that was running starts again, and a device
//! that needs a resilver gets one, whether or not the change was refused.

use super::Store;
use crate::error::Result;
use cachalot_pool::{BlockDevice, CreateOpts, Pool, Replacement};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Store {
    /// Run `f` (a device change of the pool layer, given the open txg) as
    /// described above.
    pub fn change_devices<T>(
        &self,
        f: impl FnOnce(&Pool, u64) -> cachalot_pool::Result<T>,
    ) -> Result<T> {
        self.check_live()?;
        let was_scanning = self.scrub_status().state == "scanning";
        crate::scrub::cancel(self);
        let one = self.commit_lock.lock();
        let next = self.open_txg();
        let r = f(&self.pool, next);
        drop(one);
        if r.is_ok() {
            self.sync()?;
        }
        if was_scanning || self.pool.resilver_pending() {
            self.scrub_start()?;
        }
        Ok(r?)
    }

    /// Replace device `old` by `new` (a path) and start its resilver.
    pub fn replace_device(&self, old: &str, new: &Path, copts: &CreateOpts) -> Result<()> {
        self.replace_with(old, Replacement::Path(new), copts)
    }

    /// Replace device `old` by `new` (a path or an open device) and start its
    /// resilver (a running scan is stopped first and started again, so it
    /// covers every replacement).
    pub fn replace_with(&self, old: &str, new: Replacement<'_>, copts: &CreateOpts) -> Result<()> {
        self.change_devices(|p, next| p.replace_with(old, new, copts, next))
    }

    /// Add cache devices (`cache PATH...`); the L2ARC starts using them.
    pub fn add_cache(&self, paths: &[PathBuf], opts: &CreateOpts) -> Result<()> {
        self.change_devices(|p, next| p.add_cache(paths, opts, next))?;
        self.cache.attach_l2();
        Ok(())
    }

    /// Add cache devices the caller opened (the simulator's).
    pub fn add_cache_devices(&self, devs: Vec<Arc<dyn BlockDevice>>) -> Result<()> {
        self.change_devices(|p, next| p.add_cache_devices(devs, next))?;
        self.cache.attach_l2();
        Ok(())
    }

    /// `pool remove`: a cache device or an available spare leaves the pool;
    /// for a cache device the L2ARC drops what it knew of it (reads go to the
    /// pool). Returns what it was ("cache device" or "spare").
    pub fn remove_device(&self, dev: &str) -> Result<&'static str> {
        let what = self.change_devices(|p, next| p.remove_device(dev, next))?;
        self.cache.detach_l2();
        Ok(what)
    }
}

/// Start the device watcher of `store`: about once a second it marks REMOVED a
/// device whose path vanished, and if a device is FAULTED or REMOVED and a
/// spare is free, the spare replaces it (and is resilvered), no command needed.
/// It ends when the pool is exported or dropped.
pub(crate) fn start_spare_watcher(store: &Arc<Store>) {
    let weak = Arc::downgrade(store);
    let _ = std::thread::Builder::new()
        .name("spares".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            let Some(store) = weak.upgrade() else { return };
            if store.exported.load(Ordering::Acquire) {
                return;
            }
            if store.pool.suspended().is_some() {
                continue;
            }
            for p in store.pool.probe_removed() {
                eprintln!("cachalot: pool '{}': {p} was removed", store.name());
            }
            if !store.pool.spare_needed() {
                continue;
            }
            match store.change_devices(|p, next| p.activate_spare(next)) {
                Ok(Some(msg)) => eprintln!("cachalot: pool '{}': {msg}", store.name()),
                Ok(None) => {}
                Err(e) => {
                    // No spare fits: say so once, then look again much later.
                    store
                        .pool
                        .add_notice(format!("hot spare could not take over: {e}"));
                    drop(store);
                    std::thread::sleep(Duration::from_secs(60));
                }
            }
        });
}
