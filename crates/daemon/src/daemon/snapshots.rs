//! Snapshot operations of the daemon: `snap.create` (several names, -r: one atomic
//! snapshot), `snap.destroy` (`force`: release holds first), `snap.hold`,
//! `snap.release`, `snap.holds`, `snap.rollback`, `snap.clone`, `snap.promote`,
//! `snap.diff` (the changed paths between two states, as zfs diff), and the
//! snapshot rows of `ds.list -t snapshot`.
//!
//! Invariant: every name is validated here before the store sees it; names of
//! several pools in one `snap.create` are refused (one pool commits atomically).

use super::{se, Daemon, OpResult};
use crate::proto::{pool_of, validate_dataset_name, Args};
use cachalot_datasets::Store;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Split and validate `FS@SNAP`.
pub(crate) fn split_snapshot_name(full: &str) -> Result<(&str, &str), String> {
    let (fs, snap) = full
        .split_once('@')
        .ok_or_else(|| format!("'{full}' is not a snapshot name (FS@SNAP)"))?;
    validate_dataset_name(fs)?;
    if snap.is_empty()
        || snap.len() > 255
        || !snap
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c))
    {
        return Err(format!(
            "invalid snapshot name '{snap}': use letters, digits, _ - . :"
        ));
    }
    Ok((fs, snap))
}

/// `snap.diff`: the changes from snapshot `from` to `to` (a later snapshot of
/// its filesystem, or the filesystem as of a commit made now), one row per
/// changed path: `change` (M + - R, as zfs diff), `type` (zfs diff -F's
/// letter), `path` from the filesystem's root and, for a rename, `new_path`.
fn snapshot_diff(store: &Store, from: &str, to: &str) -> OpResult {
    let (a, b) = store.diff_states(from, to).map_err(se)?;
    let d = cachalot_posix::diff::diff(&a, &b).map_err(|e| format!("diff of '{from}': {e}"))?;
    let rows: Vec<Value> = d
        .changes
        .iter()
        .map(|c| {
            let mut row = json!({
                "change": c.kind.code().to_string(),
                "type": type_letter(c.file_kind),
                "path": c.path,
            });
            if let Some(n) = &c.new_path {
                row["new_path"] = json!(n);
            }
            row
        })
        .collect();
    Ok(json!({ "from": from, "to": to, "changes": rows }))
}

/// The file type letter of `zfs diff -F`.
fn type_letter(k: cachalot_posix::FileKind) -> &'static str {
    use cachalot_posix::FileKind as K;
    match k {
        K::Regular => "F",
        K::Directory => "/",
        K::Symlink => "@",
        K::Fifo => "|",
        K::Socket => "=",
        K::BlockDevice => "B",
        K::CharDevice => "C",
    }
}

impl Daemon {
    fn snap_store(&self, full: &str) -> Result<Arc<Store>, String> {
        let (fs, _) = split_snapshot_name(full)?;
        self.store(pool_of(fs))
    }

    pub(super) fn snap_op(&self, op: &str, a: &Args) -> OpResult {
        match op {
            "snap.create" => {
                let names = a.str_list("names")?;
                if names.is_empty() {
                    return Err("snapshot: no names given".into());
                }
                let store = self.snap_store(&names[0])?;
                let mut all = Vec::new();
                for n in &names {
                    let (fs, snap) = split_snapshot_name(n)?;
                    if pool_of(fs) != store.name() {
                        return Err(
                            "snapshot: all names must be in one pool (one atomic snapshot)".into(),
                        );
                    }
                    if a.bool("recursive")? {
                        for d in store.list(Some(fs), true).map_err(se)? {
                            all.push(format!("{}@{snap}", d.name));
                        }
                    } else {
                        all.push(n.clone());
                    }
                }
                let txg = store.snapshot(&all).map_err(se)?;
                Ok(json!({ "snapshots": all, "txg": txg }))
            }
            "snap.destroy" => {
                let name = a.str("name")?;
                let store = self.snap_store(&name)?;
                let force = a.bool("force")?;
                if !force && !store.holds(&name).map_err(se)?.is_empty() {
                    // Refused with the tags named; serving goes on.
                    store.destroy_snapshot(&name).map_err(se)?;
                }
                self.stop_serving(|n| n == name);
                if force {
                    store.destroy_snapshot_forced(&name).map_err(se)?;
                } else {
                    store.destroy_snapshot(&name).map_err(se)?;
                }
                Ok(json!({ "name": name }))
            }
            "snap.hold" | "snap.release" => {
                let name = a.str("name")?;
                let tag = a.str("tag")?;
                let store = self.snap_store(&name)?;
                if op == "snap.hold" {
                    store.hold(&name, &tag).map_err(se)?;
                } else {
                    store.release(&name, &tag).map_err(se)?;
                }
                Ok(json!({ "name": name, "tag": tag }))
            }
            "snap.holds" => {
                let name = a.str("name")?;
                let tags = self.snap_store(&name)?.holds(&name).map_err(se)?;
                Ok(json!({ "name": name, "holds": tags }))
            }
            "snap.rollback" => {
                let name = a.str("name")?;
                // Newer snapshots may go (-r): stop serving the volume's snapshots.
                let (fs, _) = split_snapshot_name(&name)?;
                let fs = fs.to_string();
                self.stop_serving(|n| {
                    n.strip_prefix(fs.as_str())
                        .is_some_and(|r| r.starts_with('@'))
                });
                self.snap_store(&name)?
                    .rollback(&name, a.bool("recursive")?)
                    .map_err(se)?;
                // The head was reopened: drop filesystems of the old handle.
                self.release_fs(name.split('@').next().unwrap_or(""));
                Ok(json!({ "name": name }))
            }
            "snap.clone" => {
                let name = a.str("name")?;
                let target = a.str("target")?;
                validate_dataset_name(&target)?;
                let store = self.snap_store(&name)?;
                if pool_of(&target) != store.name() {
                    return Err(format!(
                        "clone: '{target}' must be in pool '{}'",
                        store.name()
                    ));
                }
                store
                    .clone_snapshot(&name, &target, &a.props("props")?)
                    .map_err(se)?;
                Ok(json!({ "name": target }))
            }
            "snap.promote" => {
                let name = a.str("name")?;
                validate_dataset_name(&name)?;
                self.store(pool_of(&name))?.promote(&name).map_err(se)?;
                Ok(json!({ "name": name }))
            }
            "snap.diff" => {
                let name = a.str("name")?;
                let (fs, _) = split_snapshot_name(&name)?;
                let to = a.opt_str("to")?.unwrap_or_else(|| fs.to_string());
                match to.split_once('@') {
                    Some(_) => split_snapshot_name(&to).map(|_| ())?,
                    None => validate_dataset_name(&to)?,
                }
                let store = self.snap_store(&name)?;
                snapshot_diff(&store, &name, &to)
            }
            op => Err(format!("unknown operation '{op}'")),
        }
    }

    /// `list -t snapshot` rows (same shape as dataset rows) for `name` (and its
    /// descendants if `recursive`) or for every pool.
    pub(super) fn snapshot_rows(
        &self,
        name: Option<&str>,
        recursive: bool,
        props: &[String],
    ) -> Result<Vec<Value>, String> {
        let stores: Vec<Arc<Store>> = match name {
            Some(n) => vec![self.store(pool_of(n))?],
            None => self
                .pools
                .read()
                .values()
                .filter_map(|s| s.store.clone())
                .collect(),
        };
        let mut rows = Vec::new();
        for store in stores {
            let fss: Vec<Option<String>> = match name {
                Some(n) if recursive => store
                    .list(Some(n), true)
                    .map_err(se)?
                    .into_iter()
                    .map(|d| Some(d.name))
                    .collect(),
                Some(n) => vec![Some(n.to_string())],
                None => vec![None],
            };
            for fs in fss {
                for s in store.list_snapshots(fs.as_deref()).map_err(se)? {
                    let size = |n: u64| json!({ "value": crate::format_size(n), "raw": n.to_string(), "source": "-" });
                    let mut pm = Map::new();
                    for p in props {
                        let v = match p.as_str() {
                            "name" => json!({ "value": s.name, "raw": s.name, "source": "-" }),
                            "type" => {
                                json!({ "value": "snapshot", "raw": "snapshot", "source": "-" })
                            }
                            "used" => size(s.used),
                            "referenced" => size(s.referenced),
                            "written" => size(s.written),
                            "creation" => {
                                json!({ "value": s.creation.to_string(), "raw": s.creation.to_string(), "source": "-" })
                            }
                            _ => json!({ "value": "-", "raw": "-", "source": "-" }),
                        };
                        pm.insert(p.clone(), v);
                    }
                    rows.push(json!({
                        "name": s.name,
                        "type": "snapshot",
                        "used": s.used,
                        "available": 0,
                        "referenced": s.referenced,
                        "mountpoint": "-",
                        "props": pm,
                    }));
                }
            }
        }
        Ok(rows)
    }
}
