//! The export table: which filesystems are shared to whom, and the resolution of
//! mount paths and file handles to the one shared [`Fs`] of each dataset.
//!
//! Invariants:
//! - The share options are the dataset's (possibly inherited) `sharenfs`
//!   property as of every mount and every request, so a change takes effect at
//!   once: a request reuses the options parsed for the previous one only while
//!   the pool's catalog is unchanged ([`Store::catalog_changes`]), which every
//!   property change, create, destroy and rename bumps.
//! - The filesystem of a dataset comes from the [`FsProvider`] (the daemon's
//!   registry), which hands the FUSE mount and NFS the same `Arc<Fs>`; this
//!   table only caches that `Arc` by (pool guid, dataset id), and drops the entry
//!   when the dataset is gone, renamed away or its handle replaced (rollback).
//! - A handle whose pool is not online, whose dataset no longer exists or whose
//!   snapshot was destroyed is stale; a dataset not shared to the client is
//!   refused (ACCES), never served.

use cachalot_datasets::share::{parse_sharenfs, ShareNfs};
use cachalot_datasets::{DatasetKind, Store};
use cachalot_posix::Fs;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Where the server gets pools and filesystems from (the daemon, or a test).
pub trait FsProvider: Send + Sync {
    /// Every online pool.
    fn stores(&self) -> Vec<Arc<Store>>;
    /// The one shared filesystem of dataset `name` in `store` (opened on first use).
    fn filesystem(&self, store: &Arc<Store>, name: &str) -> Result<Arc<Fs>, String>;
}

/// A shared dataset as one request sees it.
#[derive(Clone)]
pub struct Export {
    pub name: String,
    pub pool_guid: u64,
    pub ds_id: u64,
    pub store: Arc<Store>,
    pub fs: Arc<Fs>,
    pub share: Option<ShareNfs>,
}

/// Why a lookup failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// No such dataset (any more).
    Gone,
    /// Not a filesystem, or not shared.
    NotShared,
    /// The filesystem could not be opened.
    Io,
}

/// The shared datasets of every online pool, as of the catalog generations
/// it was read at (see [`Exports::shared`]).
pub struct SharedList {
    /// Each online pool (by identity) with its [`Store::catalog_changes`]
    /// read before the list was: a `Weak` keeps the allocation, so a new
    /// `Store` (an import) never has an old one's address.
    gens: Vec<(Weak<Store>, u64)>,
    /// (dataset name, its `sharenfs` options), in pool and catalog order.
    pub list: Vec<(String, ShareNfs)>,
}

impl SharedList {
    /// Was this list read from exactly `stores` at their current generations?
    fn current(&self, stores: &[Arc<Store>]) -> bool {
        self.gens.len() == stores.len()
            && self.gens.iter().zip(stores).all(|((w, g), s)| {
                std::ptr::eq(w.as_ptr(), Arc::as_ptr(s)) && *g == s.catalog_changes()
            })
    }
}

type Key = (u64, u64);
/// (name, store, filesystem, catalog changes when `share` was read, share).
type Cached = (String, Arc<Store>, Arc<Fs>, u64, Option<ShareNfs>);
type SnapKey = (u64, u64, u64);
type SnapCached = (String, Arc<Fs>);

/// The export table (see the module comment).
pub struct Exports {
    provider: Arc<dyn FsProvider>,
    cache: Mutex<HashMap<Key, Cached>>,
    snaps: Mutex<HashMap<SnapKey, SnapCached>>,
    shared: Mutex<Option<Arc<SharedList>>>,
}

/// The filesystem datasets of `store` (partial receives, `FS%recv`, left out)
/// with their share options; `None` if its catalog cannot be listed.
fn filesystems(store: &Store) -> Option<Vec<(String, Option<ShareNfs>)>> {
    let infos = store.list(None, true).ok()?;
    Some(
        infos
            .into_iter()
            .filter(|i| i.kind == DatasetKind::Filesystem && !i.name.contains('%'))
            .map(|i| {
                let share = share_of(store, &i.name);
                (i.name, share)
            })
            .collect(),
    )
}

/// The `sharenfs` options of dataset `name` (`None`: not shared).
pub fn share_of(store: &Store, name: &str) -> Option<ShareNfs> {
    let rows = store
        .get_props(name, Some(&["sharenfs".to_string()]))
        .ok()?;
    let raw = rows.into_iter().next()?.raw;
    parse_sharenfs(&raw).ok().flatten()
}

impl Exports {
    pub fn new(provider: Arc<dyn FsProvider>) -> Exports {
        Exports {
            provider,
            cache: Mutex::new(HashMap::new()),
            snaps: Mutex::new(HashMap::new()),
            shared: Mutex::new(None),
        }
    }

    /// Forget the filesystems of datasets whose name is `name` or below it (the
    /// daemon calls this before it destroys, renames or exports them).
    pub fn forget(&self, name: &str) {
        let under = |n: &str| n == name || n.starts_with(&format!("{name}/"));
        self.cache.lock().retain(|_, (n, ..)| !under(n));
        self.snaps.lock().retain(|_, (n, _)| {
            let base = n.split('@').next().unwrap_or("");
            !under(base)
        });
    }

    /// Every filesystem dataset with its share options (shared or not).
    pub fn list(&self) -> Vec<(String, Option<ShareNfs>)> {
        self.provider
            .stores()
            .iter()
            .filter_map(|store| filesystems(store))
            .flatten()
            .collect()
    }

    /// The shared datasets of every online pool, from a cache that is read
    /// again only when a pool came or went or a pool's catalog changed (every
    /// `sharenfs` change, create, destroy and rename bumps its generation), so
    /// a share switched off is gone from the next request's list, and a
    /// request of the pseudo file system reads no property otherwise.
    pub fn shared(&self) -> Arc<SharedList> {
        let stores = self.provider.stores();
        if let Some(c) = &*self.shared.lock() {
            if c.current(&stores) {
                return c.clone();
            }
        }
        // Generations before the list: a change while it is read leaves an
        // older generation behind, so the next call reads it again.
        let gens = stores
            .iter()
            .map(|s| (Arc::downgrade(s), s.catalog_changes()))
            .collect();
        let (mut list, mut complete) = (vec![], true);
        for store in &stores {
            let Some(fss) = filesystems(store) else {
                complete = false;
                continue;
            };
            list.extend(fss.into_iter().filter_map(|(n, s)| Some((n, s?))));
        }
        let fresh = Arc::new(SharedList { gens, list });
        // A pool that could not be listed is not remembered as having no shares.
        if complete {
            *self.shared.lock() = Some(fresh.clone());
        }
        fresh
    }

    fn store_named(&self, pool: &str) -> Option<Arc<Store>> {
        self.provider
            .stores()
            .into_iter()
            .find(|s| s.name() == pool)
    }

    fn export_of(&self, store: Arc<Store>, name: &str, fs: Arc<Fs>, id: u64) -> Export {
        Export {
            name: name.to_string(),
            pool_guid: store.pool().guid(),
            ds_id: id,
            share: share_of(&store, name),
            store,
            fs,
        }
    }

    /// The export named by a mount path (`/tank/db`).
    pub fn by_path(&self, path: &str) -> Result<Export, LookupError> {
        let name = path.trim_start_matches('/').trim_end_matches('/');
        let pool = name.split('/').next().unwrap_or("");
        let store = self.store_named(pool).ok_or(LookupError::Gone)?;
        let ds = store.dataset(name).map_err(|_| LookupError::Gone)?;
        if ds.kind() != DatasetKind::Filesystem || name.contains('%') {
            return Err(LookupError::NotShared);
        }
        if share_of(&store, name).is_none() {
            return Err(LookupError::NotShared);
        }
        let fs = self.open(&store, name, ds.id())?;
        Ok(self.export_of(store, name, fs, ds.id()))
    }

    fn open(&self, store: &Arc<Store>, name: &str, id: u64) -> Result<Arc<Fs>, LookupError> {
        let fs = self
            .provider
            .filesystem(store, name)
            .map_err(|_| LookupError::Io)?;
        self.cache.lock().insert(
            (store.pool().guid(), id),
            // No share options read yet: the first request reads them.
            (name.to_string(), store.clone(), fs.clone(), u64::MAX, None),
        );
        Ok(fs)
    }

    /// The export holding dataset `ds_id` of pool `pool_guid`.
    pub fn by_id(&self, pool_guid: u64, ds_id: u64) -> Result<Export, LookupError> {
        let cached = self.cache.lock().get(&(pool_guid, ds_id)).cloned();
        if let Some((name, store, fs, changes, share)) = cached {
            // Still the same dataset under the same name, with the same handle?
            match store.dataset(&name) {
                Ok(ds) if ds.id() == ds_id && Arc::ptr_eq(&ds, fs.dataset()) => {
                    let now = store.catalog_changes();
                    if now == changes {
                        return Ok(Export {
                            name,
                            pool_guid,
                            ds_id,
                            store,
                            fs,
                            share,
                        });
                    }
                    let e = self.export_of(store, &name, fs, ds_id);
                    if let Some(c) = self.cache.lock().get_mut(&(pool_guid, ds_id)) {
                        (c.3, c.4) = (now, e.share.clone());
                    }
                    return Ok(e);
                }
                _ => {
                    self.cache.lock().remove(&(pool_guid, ds_id));
                }
            }
        }
        let store = self
            .provider
            .stores()
            .into_iter()
            .find(|s| s.pool().guid() == pool_guid)
            .ok_or(LookupError::Gone)?;
        let infos = store.list(None, true).map_err(|_| LookupError::Gone)?;
        for i in infos {
            if i.kind != DatasetKind::Filesystem {
                continue;
            }
            let Ok(ds) = store.dataset(&i.name) else {
                continue;
            };
            if ds.id() == ds_id {
                let fs = self.open(&store, &i.name, ds_id)?;
                return Ok(self.export_of(store, &i.name, fs, ds_id));
            }
        }
        Err(LookupError::Gone)
    }

    /// The read-only filesystem of the snapshot with guid `snap_guid` of `export`.
    pub fn snapshot(
        &self,
        export: &Export,
        snap_guid: u64,
    ) -> Result<(String, Arc<Fs>), LookupError> {
        let key = (export.pool_guid, export.ds_id, snap_guid);
        let cached = self.snaps.lock().get(&key).cloned();
        if let Some((full, fs)) = cached {
            if export.store.snapshot_guid(&full).ok() == Some(snap_guid) {
                return Ok((full, fs));
            }
            self.snaps.lock().remove(&key);
        }
        let names = export
            .store
            .snapshot_names(&export.name)
            .map_err(|_| LookupError::Gone)?;
        for n in names {
            let full = format!("{}@{n}", export.name);
            if export.store.snapshot_guid(&full).ok() == Some(snap_guid) {
                return self.open_snapshot(export, &full, snap_guid);
            }
        }
        Err(LookupError::Gone)
    }

    /// The read-only filesystem of snapshot `snap` (a name) of `export`.
    pub fn snapshot_named(
        &self,
        export: &Export,
        snap: &str,
    ) -> Result<(u64, Arc<Fs>), LookupError> {
        let full = format!("{}@{snap}", export.name);
        let guid = export
            .store
            .snapshot_guid(&full)
            .map_err(|_| LookupError::Gone)?;
        let (_, fs) = self.snapshot(export, guid)?;
        Ok((guid, fs))
    }

    fn open_snapshot(
        &self,
        export: &Export,
        full: &str,
        guid: u64,
    ) -> Result<(String, Arc<Fs>), LookupError> {
        let ds = export
            .store
            .snapshot_dataset(full)
            .map_err(|_| LookupError::Gone)?;
        let fs = Fs::mount_snapshot(export.store.clone(), ds).map_err(|_| LookupError::Io)?;
        let fs = Arc::new(fs);
        let mut snaps = self.snaps.lock();
        if snaps.len() > 256 {
            snaps.clear();
        }
        snaps.insert(
            (export.pool_guid, export.ds_id, guid),
            (full.to_string(), fs.clone()),
        );
        Ok((full.to_string(), fs))
    }
}
