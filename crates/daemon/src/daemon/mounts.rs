//! Filesystem mounts owned by the daemon: `fs.mount`, `fs.unmount`, `fs.mounts`,
//! re-mounting after a restart, and unmounting before a pool goes away.
//!
//! Invariants:
//! - A mounted dataset is held (`Dataset::hold`), so destroying it fails as busy;
//!   the hold is released when its mount ends.
//! - `pools.json` lists exactly the mounts that are up (or that were up when the
//!   daemon stopped), so a restart re-mounts them; a failed re-mount is logged and
//!   dropped from the list.
//! - A mount point must be an empty directory that nothing is mounted on; a dead
//!   FUSE mount left there by a killed daemon is detached first. A missing one is
//!   made, with its missing parents, mode 0755 and owned by the daemon's user
//!   (root on an appliance), as zfs does; a path that exists but is not a
//!   directory is refused. If the mount then fails, the directories it made are
//!   removed again, so a refusal leaves nothing behind.
//! - Every pool change that removes datasets (export, destroy) unmounts them first
//!   and fails at the first busy one; what it unmounted before that one is
//!   mounted again at the same path, so the refusal changes nothing.

use super::{se, Daemon, OpResult};
use crate::proto::{pool_of, validate_dataset_name, Args};
use cachalot_datasets::{Dataset, DatasetKind, Store};
use cachalot_fuse::Mount;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One live mount.
pub(crate) struct MountEntry {
    mount: Mount,
    ds: Arc<Dataset>,
    path: PathBuf,
}

impl Drop for MountEntry {
    fn drop(&mut self) {
        let _ = self.mount.unmount(true);
        self.ds.release();
    }
}

/// The directories a mount made for its mount point (leaf first), removed on
/// drop unless the mount succeeded ([`MadeDirs::keep`]).
#[derive(Default)]
struct MadeDirs(Vec<PathBuf>);

impl MadeDirs {
    fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for MadeDirs {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Make the missing directories of `path` (absolute), mode 0755.
fn make_mount_point(path: &Path) -> Result<MadeDirs, String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let mut made = MadeDirs::default();
    let mut missing: Vec<&Path> = path
        .ancestors()
        .take_while(|p| {
            matches!(std::fs::symlink_metadata(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        })
        .collect();
    missing.reverse();
    for dir in missing {
        // The explicit chmod: 0755 whatever the daemon's umask.
        let res = std::fs::DirBuilder::new()
            .mode(0o755)
            .create(dir)
            .and_then(|()| {
                made.0.insert(0, dir.to_path_buf());
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            });
        match res {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(format!(
                    "mount point {}: cannot create {}: {e}",
                    path.display(),
                    dir.display()
                ))
            }
        }
    }
    Ok(made)
}

fn check_mount_point(path: &Path) -> Result<(PathBuf, MadeDirs), String> {
    if !path.is_absolute() {
        return Err(format!(
            "{}: mount point must be an absolute path",
            path.display()
        ));
    }
    let made = make_mount_point(path)?;
    if cachalot_fuse::clear_stale(path) {
        super::log(format!("{}: detached a dead mount", path.display()));
    }
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("mount point {} does not exist", path.display()),
        _ => format!("mount point {}: {e}", path.display()),
    })?;
    if !meta.is_dir() {
        return Err(format!("mount point {} is not a directory", path.display()));
    }
    let canon = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if cachalot_fuse::is_mount_point(&canon) {
        return Err(format!(
            "mount point {} is busy: something is already mounted there",
            path.display()
        ));
    }
    let mut rd = std::fs::read_dir(&canon).map_err(|e| format!("{}: {e}", path.display()))?;
    if rd.next().is_some() {
        return Err(format!("mount point {} is not empty", path.display()));
    }
    Ok((canon, made))
}

impl Daemon {
    pub(super) fn fs_op(&self, op: &str, a: &Args) -> OpResult {
        match op {
            "fs.mount" => {
                let name = a.str("name")?;
                let path = a.opt_str("path")?;
                let _g = self.admin.lock();
                let path = self.mount_dataset(&name, path.as_deref())?;
                self.record_mounts(pool_of(&name))?;
                Ok(json!({ "name": name, "path": path }))
            }
            "fs.unmount" => {
                let name = a.str("name")?;
                validate_dataset_name(&name)?;
                let _g = self.admin.lock();
                self.unmount_dataset(&name, a.bool("force")?)?;
                self.record_mounts(pool_of(&name))?;
                Ok(json!({ "name": name }))
            }
            "fs.mounts" => {
                let m = self.mounts.lock();
                Ok(Value::Array(
                    m.iter()
                        .map(|(n, e)| json!({ "name": n, "path": e.path.display().to_string() }))
                        .collect(),
                ))
            }
            other => Err(format!("unknown operation '{other}'")),
        }
    }

    /// Mount `name` at `path` (default: its mountpoint property).
    pub(super) fn mount_dataset(&self, name: &str, path: Option<&str>) -> Result<String, String> {
        let store: Arc<Store> = self.ds_store(name)?;
        let ds = store.dataset(name).map_err(se)?;
        if ds.kind() == DatasetKind::Volume {
            return Err(format!(
                "'{name}' is a volume: only filesystems can be mounted"
            ));
        }
        if let Some(e) = self.mounts.lock().get(name) {
            return Err(format!(
                "'{name}' is already mounted at {}",
                e.path.display()
            ));
        }
        let path = match path {
            Some(p) => p.to_string(),
            None => {
                let info = store.list(Some(name), false).map_err(se)?;
                let mp = info
                    .first()
                    .map(|i| i.mountpoint.clone())
                    .unwrap_or_default();
                if mp == "none" || mp == "legacy" || mp.is_empty() || mp == "-" {
                    return Err(format!(
                        "'{name}' has mountpoint={mp}: give a path (cachalot mount {name} PATH)"
                    ));
                }
                mp
            }
        };
        let (canon, made) = check_mount_point(Path::new(&path))?;
        if let Some((other, _)) = self.mounts.lock().iter().find(|(_, e)| e.path == canon) {
            return Err(format!(
                "mount point {path} is busy: '{other}' is mounted there"
            ));
        }
        let fs = self
            .filesystems
            .get(&store, name)
            .map_err(|e| format!("cannot mount '{name}': {e}"))?;
        ds.hold();
        let mount = match cachalot_fuse::mount(fs, name, &canon) {
            Ok(m) => m,
            Err(e) => {
                ds.release();
                return Err(format!("cannot mount '{name}' at {path}: {e}"));
            }
        };
        made.keep();
        super::log(format!("mounted '{name}' at {}", canon.display()));
        self.mounts.lock().insert(
            name.to_string(),
            MountEntry {
                mount,
                ds,
                path: canon.clone(),
            },
        );
        Ok(canon.display().to_string())
    }

    pub(super) fn unmount_dataset(&self, name: &str, force: bool) -> Result<(), String> {
        let removed = self.mounts.lock().remove(name);
        let Some(mut entry) = removed else {
            // A name that does not exist is that (not found), not "not mounted".
            self.ds_store(name)?.dataset(name).map_err(se)?;
            return Err(format!("'{name}' is not mounted"));
        };
        match entry.mount.unmount(force) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let path = entry.path.display().to_string();
                self.mounts.lock().insert(name.to_string(), entry);
                return Err(format!(
                    "cannot unmount '{name}': {path} is busy (files open or a process inside)"
                ));
            }
            // The mount is gone (detached); only its threads may linger.
            Err(e) => super::log(format!("unmount of '{name}': {e}")),
        }
        super::log(format!("unmounted '{name}'"));
        drop(entry);
        Ok(())
    }

    /// Unmount every dataset of `pool` (or of all pools); fails at the first busy one
    /// unless `force`.
    pub(super) fn unmount_pool(&self, pool: Option<&str>, force: bool) -> Result<(), String> {
        let names: Vec<String> = self
            .mounts
            .lock()
            .keys()
            .filter(|n| match pool {
                None => true,
                Some(p) => pool_of(n) == p,
            })
            .cloned()
            .collect();
        for n in names.iter().rev() {
            self.unmount_dataset(n, force)?;
        }
        Ok(())
    }

    /// Unmount every mounted dataset at or under `root` (a pool or a
    /// dataset), children first; at the first busy one, mount again where
    /// they were the ones already unmounted and refuse, so a refusal changes
    /// nothing. The pool's record in pools.json follows.
    pub(super) fn unmount_all_or_none(&self, root: &str) -> Result<(), String> {
        let under = |n: &str| super::volumes::is_under(n, root);
        let pool = pool_of(root).to_string();
        let before: Vec<(String, PathBuf)> = self
            .pool_mounts(&pool)
            .into_iter()
            .filter(|(n, _)| under(n))
            .collect();
        let mut names: Vec<&String> = before.iter().map(|(n, _)| n).collect();
        names.sort();
        let mut result = Ok(());
        for n in names.iter().rev() {
            if let Err(e) = self.unmount_dataset(n, false) {
                result = Err(e);
                break;
            }
        }
        if result.is_err() {
            let still: Vec<String> = self
                .pool_mounts(&pool)
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            for (ds, path) in before.iter().filter(|(n, _)| !still.contains(n)) {
                let p = path.display().to_string();
                if let Err(m) = self.mount_dataset(ds, Some(&p)) {
                    super::log(format!("cannot mount '{ds}' at {p} again: {m}"));
                }
            }
        }
        let _ = self.record_mounts(&pool);
        result
    }

    /// The mounts of `pool` that are up: (dataset, path).
    pub(super) fn pool_mounts(&self, pool: &str) -> Vec<(String, PathBuf)> {
        self.mounts
            .lock()
            .iter()
            .filter(|(n, _)| pool_of(n) == pool)
            .map(|(n, e)| (n.clone(), e.path.clone()))
            .collect()
    }

    /// Write the mounts of `pool` into its record in pools.json.
    pub(super) fn record_mounts(&self, pool: &str) -> Result<(), String> {
        let list = self.pool_mounts(pool);
        if let Some(slot) = self.pools.write().get_mut(pool) {
            slot.record.mounts = list;
        }
        self.save_state_after("mount change")
    }

    /// Re-mount what pools.json lists (after the pools were imported).
    pub(super) fn restore_mounts(&self) {
        let pools: Vec<String> = self.pools.read().keys().cloned().collect();
        for pool in pools {
            self.restore_pool_mounts(&pool);
        }
    }

    /// Re-mount the recorded mounts of one online pool; failures are logged and
    /// dropped from the record.
    pub(super) fn restore_pool_mounts(&self, pool: &str) {
        let mounts = match self.pools.read().get(pool) {
            Some(s) if s.store.is_some() => s.record.mounts.clone(),
            _ => return,
        };
        if mounts.is_empty() {
            return;
        }
        for (name, path) in mounts {
            let p = path.display().to_string();
            if let Err(e) = self.mount_dataset(&name, Some(&p)) {
                super::log(format!("cannot re-mount '{name}' at {p}: {e}"));
            }
        }
        if let Err(e) = self.record_mounts(pool) {
            super::log(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn missing_mount_points_are_made_and_removed_on_failure() {
        let t = std::env::temp_dir().join(format!("cachalot-mkmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(&t).unwrap();
        let deep = t.join("a/b/c");
        let made = make_mount_point(&deep).unwrap();
        for d in ["a", "a/b", "a/b/c"] {
            let m = std::fs::metadata(t.join(d)).unwrap();
            assert!(
                m.is_dir() && m.permissions().mode() & 0o7777 == 0o755,
                "{d}"
            );
        }
        drop(made); // a failed mount: what it made goes again
        assert!(!t.join("a").exists());
        make_mount_point(&deep).unwrap().keep();
        assert!(deep.is_dir());
        // An existing directory: nothing made, nothing removed.
        drop(make_mount_point(&deep).unwrap());
        assert!(deep.is_dir());
        // A file on the way: refused by the checks, nothing made.
        std::fs::write(t.join("f"), b"x").unwrap();
        let err = check_mount_point(&t.join("f/sub")).err().unwrap();
        assert!(err.contains("Not a directory"), "{err}");
        std::fs::remove_dir_all(&t).unwrap();
    }
}
