//! Pool operations of the daemon: `pool.create`, `pool.import`, `pool.export`,
//! `pool.destroy`, `pool.list`, `pool.status`, `pool.scrub`, `pool.add`,
//! `pool.replace`, `pool.sync`, `debug.inject`, and the checks that a device
//! named in a request belongs to no pool of this daemon.
//!
//! Invariants (with the core's, see [`super`]): a device is checked free, by its
//! canonical path, before any pool takes it; a change to the set of pools holds
//! the `admin` mutex and is followed by an atomic rewrite of `pools.json`.

use super::*;
use crate::proto::validate_pool_name;
use cachalot_pool::{parse_vdev_spec, CreateOpts, VdevSpec};

/// The devices of a create or add: vdev groups, spares, cache devices.
pub(super) struct VdevWords {
    specs: Vec<VdevSpec>,
    spares: Vec<PathBuf>,
    cache: Vec<PathBuf>,
}

/// Vdev type words accepted in a vdev specification (besides device paths).
const VDEV_TYPES: &[&str] = &[
    "mirror", "raidz", "raidz1", "raidz2", "log", "cache", "spare",
];

impl Daemon {
    /// Canonical paths of every device owned by a pool of this daemon.
    pub(super) fn devices_in_use(&self) -> Vec<(String, PathBuf)> {
        let pools = self.pools.read();
        let mut out = Vec::new();
        for (name, slot) in pools.iter() {
            let devs = match &slot.store {
                Some(s) => s.pool().device_paths(),
                None => slot.record.devices.clone(),
            };
            for d in devs {
                out.push((name.clone(), canon(&d)));
            }
        }
        out
    }

    /// `check_devices_free` for one new disk (a replacement, an attached mirror child).
    pub(super) fn check_device_free(&self, path: &Path) -> Result<(), String> {
        self.check_devices_free(&[VdevSpec {
            kind: cachalot_pool::VdevKind::Disk,
            paths: vec![path.to_path_buf()],
            log: false,
        }])
    }

    /// Options for a device joining an existing pool (add, replace, attach): the
    /// pool's own ashift, with `size` and `force` from the request.
    pub(super) fn joining_device_opts(store: &Store, a: &Args) -> Result<CreateOpts, String> {
        Ok(CreateOpts {
            ashift: store.pool().config().ashift,
            create_size: a.opt_size("size")?,
            force: a.bool("force")?,
        })
    }

    pub(super) fn check_devices_free(&self, specs: &[VdevSpec]) -> Result<(), String> {
        let used = self.devices_in_use();
        for p in specs.iter().flat_map(|s| s.paths.iter()) {
            if !p.is_absolute() {
                return Err(format!("{}: device paths must be absolute", p.display()));
            }
            let c = canon(p);
            if let Some((pool, _)) = used.iter().find(|(_, u)| *u == c) {
                return Err(format!(
                    "{}: device is in use by pool '{pool}'",
                    p.display()
                ));
            }
        }
        Ok(())
    }

    /// The vdev words of create and add: vdev groups, hot spares (`spare
    /// PATH...`) and cache devices (`cache PATH...`), none of them in use by
    /// any pool.
    pub(super) fn parse_vdevs(&self, a: &Args) -> Result<VdevWords, String> {
        let words = a.str_list("vdevs")?;
        if words.is_empty() {
            return Err("no devices given".into());
        }
        for w in &words {
            if !w.starts_with('/') && !VDEV_TYPES.contains(&w.as_str()) {
                return Err(format!(
                    "'{w}' is neither a vdev type ({}) nor an absolute device path",
                    VDEV_TYPES.join(", ")
                ));
            }
        }
        let (rest, spares) = cachalot_pool::split_spares(&words);
        let (rest, cache) = cachalot_pool::split_section(&rest, "cache");
        for (taken, word) in [(&spares, "spare"), (&cache, "cache")] {
            if taken.is_empty() && words.iter().any(|w| w == word) {
                return Err(format!("'{word}' must be followed by devices"));
            }
        }
        let specs = if rest.is_empty() && !(spares.is_empty() && cache.is_empty()) {
            vec![]
        } else {
            parse_vdev_spec(&rest).map_err(|e| e.to_string())?
        };
        let mut all = specs.clone();
        all.push(VdevSpec {
            kind: cachalot_pool::VdevKind::Disk,
            paths: spares.iter().chain(&cache).cloned().collect(),
            log: false,
        });
        self.check_devices_free(&all)?;
        let mut seen = std::collections::HashSet::new();
        for p in all.iter().flat_map(|s| s.paths.iter()) {
            if !seen.insert(canon(p)) {
                return Err(format!("{}: device given more than once", p.display()));
            }
        }
        Ok(VdevWords {
            specs,
            spares,
            cache,
        })
    }

    /// Add the spares and cache devices of `w` to the pool of `store`.
    pub(super) fn add_extra_devices(store: &Store, w: &VdevWords, copts: &CreateOpts) -> OpResult {
        if !w.spares.is_empty() {
            store
                .change_devices(|p, next| p.add_spares(&w.spares, copts, next))
                .map_err(se)?;
        }
        if !w.cache.is_empty() {
            store.add_cache(&w.cache, copts).map_err(se)?;
        }
        Ok(json!({}))
    }

    pub(super) fn pool_create(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        validate_pool_name(&name)?;
        let ashift = a.opt_u64("ashift")?.unwrap_or(12);
        if !(9..=16).contains(&ashift) {
            return Err(format!("invalid ashift {ashift}: must be 9 to 16"));
        }
        let copts = CreateOpts {
            ashift: ashift as u8,
            create_size: a.opt_size("size")?,
            force: a.bool("force")?,
        };
        let props = a.props("props")?;
        let _g = self.admin.lock();
        if self.pools.read().contains_key(&name) {
            return Err(format!("pool '{name}' already exists"));
        }
        let w = self.parse_vdevs(a)?;
        if w.specs.is_empty() {
            return Err("no vdevs given: spares or cache devices alone make no pool".into());
        }
        let store =
            Store::create(&name, &w.specs, &copts, &props, self.store_opts()).map_err(se)?;
        if let Err(e) = Self::add_extra_devices(&store, &w, &copts) {
            // Refused spares or cache devices: no pool either.
            let _ = store.destroy_pool();
            return Err(e);
        }
        let record = PoolRecord {
            name: name.clone(),
            devices: store.pool().device_paths(),
            mounts: vec![],
        };
        self.pools.write().insert(
            name.clone(),
            PoolSlot {
                record,
                store: Some(store),
                error: None,
            },
        );
        log(format!("created pool '{name}'"));
        self.save_state_after("pool create")?;
        Ok(json!({ "name": name }))
    }

    pub(super) fn online_guids(&self) -> Vec<u64> {
        self.pools
            .read()
            .values()
            .filter_map(|s| s.store.as_ref().map(|s| s.pool().guid()))
            .collect()
    }

    pub(super) fn pool_import(&self, a: &Args) -> OpResult {
        let dirs: Vec<PathBuf> = a.str_list("dirs")?.into_iter().map(PathBuf::from).collect();
        for d in &dirs {
            if !d.is_absolute() {
                return Err(format!("{}: search paths must be absolute", d.display()));
            }
            if !d.exists() {
                return Err(format!("{}: no such file or directory", d.display()));
            }
        }
        let name = a.opt_str("name")?;
        let _g = self.admin.lock();
        let Some(name) = name else {
            if dirs.is_empty() {
                return Err("no search directory given: use -d DIR".into());
            }
            let guids = self.online_guids();
            let found: Vec<Value> = Store::discover(&dirs)
                .into_iter()
                .filter(|p| !guids.contains(&p.guid))
                .map(|p| {
                    json!({
                        "name": p.name,
                        "guid": p.guid,
                        "state": if p.missing.is_empty() { "ONLINE" } else { "UNAVAIL" },
                        "devices": p.devices,
                        "missing": p.missing,
                    })
                })
                .collect();
            if found.is_empty() {
                return Err("no pools available to import".into());
            }
            return Ok(Value::Array(found));
        };
        if name.is_empty() || name.len() > 255 {
            return Err(format!("invalid pool name '{name}'"));
        }
        let known = {
            let pools = self.pools.read();
            match pools.get(&name) {
                Some(PoolSlot { store: Some(_), .. }) => {
                    return Err(format!("pool '{name}' is already imported"))
                }
                Some(slot) => Some(slot.record.clone()),
                None => None,
            }
        };
        let search: Vec<PathBuf> = match (&known, dirs.is_empty()) {
            (_, false) => dirs.clone(),
            (Some(rec), true) => rec.devices.clone(),
            (None, true) => return Err("no search directory given: use -d DIR".into()),
        };
        let guids = self.online_guids();
        let found = Store::discover(&search);
        let named: Vec<_> = found
            .iter()
            .filter(|p| p.name == name || p.guid.to_string() == name)
            .collect();
        if named.iter().any(|p| guids.contains(&p.guid)) {
            return Err(format!("pool '{name}' is already imported"));
        }
        if named.is_empty() {
            // A name that is nowhere: not found (the engine's own refusal is an
            // import failure, as it is for a damaged pool).
            return Err(crate::error_kind::tag(
                cachalot_datasets::ErrorKind::NotFound,
                format!("no pool named '{name}' found on the given devices"),
            ));
        }
        let rewind = match a.bool("rewind")? {
            true => cachalot_pool::Rewind::Allow,
            false => cachalot_pool::Rewind::Refuse,
        };
        let store =
            Store::import_with(&search, Some(&name), rewind, self.store_opts()).map_err(se)?;
        let real = store.name();
        {
            let pools = self.pools.read();
            if real != name && pools.contains_key(&real) {
                drop(pools);
                let _ = store.export();
                return Err(format!("a pool named '{real}' already exists"));
            }
        }
        let mounts = known.map(|r| r.mounts).unwrap_or_default();
        let record = PoolRecord {
            name: real.clone(),
            devices: store.pool().device_paths(),
            mounts,
        };
        self.pools.write().insert(
            real.clone(),
            PoolSlot {
                record,
                store: Some(store),
                error: None,
            },
        );
        log(format!("imported pool '{real}'"));
        self.save_state_after("pool import")?;
        self.restore_pool_mounts(&real);
        Ok(json!({ "name": real }))
    }

    pub(super) fn pool_export(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let _g = self.admin.lock();
        self.stop_pool_clients(&name)?;
        let store = {
            let pools = self.pools.read();
            match pools.get(&name) {
                None => return Err(no_such_pool(&name)),
                Some(slot) => slot.store.clone(),
            }
        };
        self.release_fs(&name);
        if let Some(store) = &store {
            store.export().map_err(se)?;
        }
        self.pools.write().remove(&name);
        log(format!("exported pool '{name}'"));
        self.save_state_after("pool export")?;
        Ok(json!({ "name": name }))
    }

    /// Before a pool leaves (export, destroy): unmount its filesystems, then stop
    /// serving its volumes. A busy mount refuses, and the filesystems unmounted
    /// before it are mounted again where they were, so a refusal leaves the pool,
    /// its mounts and its served volumes as they were.
    fn stop_pool_clients(&self, name: &str) -> Result<(), String> {
        self.unmount_all_or_none(name)?;
        self.stop_serving(|n| volumes::is_under(n, name));
        Ok(())
    }

    pub(super) fn pool_destroy(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let _g = self.admin.lock();
        self.stop_pool_clients(&name)?;
        let store = self.store(&name)?;
        self.release_fs(&name);
        store.destroy_pool().map_err(se)?;
        self.pools.write().remove(&name);
        log(format!("destroyed pool '{name}'"));
        self.save_state_after("pool destroy")?;
        Ok(json!({ "name": name }))
    }

    pub(super) fn selected_pools(&self, name: Option<&str>) -> Result<Vec<String>, String> {
        let pools = self.pools.read();
        match name {
            Some(n) if !pools.contains_key(n) => Err(no_such_pool(n)),
            Some(n) => Ok(vec![n.to_string()]),
            None => Ok(pools.keys().cloned().collect()),
        }
    }

    pub(super) fn pool_list(&self, a: &Args) -> OpResult {
        let name = a.opt_str("name")?;
        let mut rows = Vec::new();
        for n in self.selected_pools(name.as_deref())? {
            let store = self.pools.read().get(&n).map(|s| s.store.clone());
            let Some(store) = store else { continue };
            rows.push(match store {
                Some(s) => {
                    let st = s.status();
                    let sp = &st.space;
                    json!({
                        "name": n,
                        "size": sp.size,
                        "alloc": sp.allocated,
                        "free": sp.free,
                        "frag": sp.frag,
                        "cap": (sp.allocated.saturating_mul(100)).checked_div(sp.size).unwrap_or(0),
                        "health": st.health,
                    })
                }
                None => json!({
                    "name": n, "size": null, "alloc": null, "free": null,
                    "frag": null, "cap": null, "health": "UNAVAIL",
                }),
            });
        }
        Ok(Value::Array(rows))
    }

    pub(super) fn pool_status(&self, a: &Args) -> OpResult {
        let name = a.opt_str("name")?;
        let mut out = Vec::new();
        for n in self.selected_pools(name.as_deref())? {
            let slot = {
                let pools = self.pools.read();
                pools
                    .get(&n)
                    .map(|s| (s.store.clone(), s.record.clone(), s.error.clone()))
            };
            let Some((store, record, error)) = slot else {
                continue;
            };
            out.push(match store {
                Some(s) => serde_json::to_value(s.status()).map_err(|e| e.to_string())?,
                None => json!({
                    "name": n,
                    "health": "UNAVAIL",
                    "error": error,
                    "space": {"size": 0, "allocated": 0, "free": 0, "frag": 0},
                    "devices": record.devices.iter().map(|d| json!({
                        "name": d.display().to_string(), "state": "UNAVAIL",
                        "read": 0, "write": 0, "cksum": 0, "repaired": 0, "children": [],
                    })).collect::<Vec<_>>(),
                    "scrub": {"state": "none", "examined": 0, "total": 0, "errors": 0,
                              "repaired": 0, "unrecoverable": 0, "started": 0, "ended": 0,
                              "duration_ms": 0},
                    "txg": 0,
                    "suspended": null,
                }),
            });
        }
        Ok(Value::Array(out))
    }

    pub(super) fn pool_scrub(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let store = self.store(&name)?;
        store.scrub_start().map_err(se)?;
        if a.bool("wait")? {
            loop {
                let st = store.scrub_status();
                if st.state != "scanning" {
                    break;
                }
                if self.shutting_down.load(Ordering::SeqCst) {
                    return Err("the daemon is shutting down".into());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        serde_json::to_value(store.scrub_status()).map_err(|e| e.to_string())
    }

    pub(super) fn pool_add(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        let w = self.parse_vdevs(a)?;
        let copts = Self::joining_device_opts(&store, a)?;
        if !w.specs.is_empty() {
            store.add_vdevs(&w.specs, &copts).map_err(se)?;
        }
        Self::add_extra_devices(&store, &w, &copts)?;
        if let Some(slot) = self.pools.write().get_mut(&name) {
            slot.record.devices = store.pool().device_paths();
        }
        log(format!("added devices to pool '{name}'"));
        self.save_state_after("pool add")?;
        Ok(json!({ "name": name }))
    }

    /// `pool replace POOL OLD [NEW]`: swap a mirror or raidz child and resilver.
    /// Without NEW (or NEW = OLD's path) a new disk took OLD's place.
    pub(super) fn pool_replace(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let old = a.str("old")?;
        let new_arg = a.opt_str("new")?.unwrap_or_else(|| old.clone());
        let _g = self.admin.lock();
        let store = self.store(&name)?;
        // In place: OLD's own path is in use by this pool, by OLD; the pool
        // checks the label to tell a new disk from the old one.
        let in_place = store
            .pool()
            .leaf_path(&old)
            .filter(|p| new_arg == old || canon(Path::new(&new_arg)) == canon(p));
        let new = in_place.clone().unwrap_or_else(|| PathBuf::from(&new_arg));
        if !new.is_absolute() {
            return Err(format!("{}: not an absolute device path", new.display()));
        }
        // A spare of this pool may be named by hand, as zpool allows.
        let spare = store.pool().spare_paths().contains(&canon(&new));
        if in_place.is_none() && !spare {
            self.check_device_free(&new)?;
        }
        let copts = Self::joining_device_opts(&store, a)?;
        store.replace_device(&old, &new, &copts).map_err(se)?;
        if let Some(slot) = self.pools.write().get_mut(&name) {
            slot.record.devices = store.pool().device_paths();
        }
        log(format!(
            "pool '{name}': {old} replaced by {}",
            new.display()
        ));
        self.save_state_after("pool replace")?;
        Ok(json!({ "name": name }))
    }

    /// Let `debug.inject` work (tests only: `serve --allow-fault-injection`).
    pub fn allow_fault_injection(&self) {
        self.fault_injection.store(true, Ordering::SeqCst);
    }

    /// `debug inject POOL DEV read|write|all eio|corrupt [--rate N]`, or with
    /// `clear` stop every injected fault (of one pool or all).
    pub(super) fn debug_inject(&self, a: &Args) -> OpResult {
        if !self.fault_injection.load(Ordering::SeqCst) {
            return Err(
                "fault injection is off: start the daemon with `serve --allow-fault-injection` (tests only)"
                    .into(),
            );
        }
        let name = a.opt_str("name")?;
        if a.bool("clear")? {
            for n in self.selected_pools(name.as_deref())? {
                if let Ok(store) = self.store(&n) {
                    store.pool().clear_faults();
                }
            }
            return Ok(json!({}));
        }
        let name = name.ok_or("a pool name is needed")?;
        let store = self.store(&name)?;
        let rate = a.opt_u64("rate")?.unwrap_or(100);
        let fault = cachalot_pool::fault::Fault::parse(
            &a.str("ops")?,
            &a.str("kind")?,
            rate.min(255) as u8,
        )
        .map_err(|e| e.to_string())?;
        let device = a.str("device")?;
        store
            .pool()
            .inject_fault(&device, Some(fault))
            .map_err(|e| e.to_string())?;
        log(format!(
            "pool '{name}': fault injected on {device}: {fault:?}"
        ));
        Ok(json!({ "name": name }))
    }

    pub(super) fn pool_sync(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let store = self.store(&name)?;
        let txg = store.sync().map_err(se)?;
        Ok(json!({ "txg": txg }))
    }
}
