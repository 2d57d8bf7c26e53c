//! The daemon's one filesystem object per dataset.
//!
//! Invariants:
//! - At most one `Fs` exists per live dataset handle: the FUSE mount and the NFS
//!   server get the same `Arc<Fs>` from here, so they share its namespace lock,
//!   inode locks and open counts (two `Fs` over one dataset would corrupt each
//!   other's directories).
//! - An entry is kept while the dataset lives and is dropped before the dataset
//!   or its pool goes away (destroy, export, rollback, receive): callers use
//!   [`Filesystems::forget`] first. An entry whose dataset handle was replaced is
//!   never handed out: it is reopened on the new handle.

use cachalot_datasets::Store;
use cachalot_posix::Fs;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct Filesystems {
    map: Mutex<BTreeMap<String, Arc<Fs>>>,
}

impl Filesystems {
    /// The filesystem of dataset `name` of `store`, opened on first use.
    pub(crate) fn get(&self, store: &Arc<Store>, name: &str) -> Result<Arc<Fs>, String> {
        let ds = store.dataset(name).map_err(|e| e.to_string())?;
        let mut map = self.map.lock();
        if let Some(fs) = map.get(name) {
            if Arc::ptr_eq(fs.dataset(), &ds) {
                return Ok(fs.clone());
            }
        }
        let fs = Arc::new(
            Fs::mount(store.clone(), ds).map_err(|e| format!("cannot open '{name}': {e}"))?,
        );
        map.insert(name.to_string(), fs.clone());
        Ok(fs)
    }

    /// Drop the entries of `name` and of every dataset below it (a pool name
    /// drops the whole pool), except those named in `keep`.
    pub(crate) fn forget(&self, name: &str, keep: &[String]) {
        let prefix = format!("{name}/");
        self.map
            .lock()
            .retain(|n, _| keep.contains(n) || (n != name && !n.starts_with(&prefix)));
    }
}
