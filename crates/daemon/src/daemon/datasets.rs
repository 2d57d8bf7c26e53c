//! Dataset operations of the daemon: `ds.create`, `ds.destroy`, `ds.list` (the
//! filesystem and volume rows; snapshot rows come from [`super::snapshots`]),
//! `ds.get`, `ds.set`, `ds.inherit`.
//!
//! Invariant: names and property values are validated here or by the store before
//! anything changes; a refused request changes nothing.

use super::{canonical_prop, se, volumes, Daemon, OpResult};
use crate::proto::{self, pool_of, validate_dataset_name, Args};
use crate::size::format_size;
use cachalot_datasets::{DatasetInfo, DatasetKind, Store};
use serde_json::{json, Map, Value};
use std::sync::Arc;

impl Daemon {
    pub(super) fn ds_create(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        validate_dataset_name(&name)?;
        if !name.contains('/') {
            return Err(format!(
                "'{name}' is a pool's root dataset: use 'pool create' to create it"
            ));
        }
        let store = self.ds_store(&name)?;
        let mut props = a.props("props")?;
        for (k, _) in props.iter_mut() {
            *k = canonical_prop(k).to_string();
        }
        let volsize = a.opt_size("volume_size")?;
        let sparse = a.bool("sparse")?;
        let blocksize = a.opt_size("blocksize")?;
        let kind = match volsize {
            Some(0) => return Err("volume size must be greater than zero".into()),
            Some(_) => {
                if let Some(bs) = blocksize {
                    props.push(("volblocksize".into(), bs.to_string()));
                }
                // A thick volume gets reservation=volsize from the engine; the
                // "sparse" marker asks for a thin one.
                if sparse {
                    props.push(("sparse".into(), "on".into()));
                }
                DatasetKind::Volume
            }
            None => {
                if sparse || blocksize.is_some() {
                    return Err("-s and -b apply only to volumes (-V SIZE)".into());
                }
                DatasetKind::Filesystem
            }
        };
        store
            .create_dataset(&name, kind, volsize, &props, a.bool("parents")?)
            .map_err(se)?;
        Ok(json!({ "name": name }))
    }

    pub(super) fn ds_destroy(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        if name.contains('@') {
            return self.snap_op("snap.destroy", a);
        }
        let store = self.ds_store(&name)?;
        if !name.contains('/') {
            return Err(format!(
                "'{name}' is a pool's root dataset: use 'pool destroy' to destroy it"
            ));
        }
        let recursive = a.bool("recursive")?;
        // A served volume stops being served first (its clients are
        // disconnected: they make it busy), but only once every other reason
        // to refuse is ruled out, so a refused destroy leaves them connected.
        store
            .check_destroy(&name, recursive)
            .map_err(|e| super::replication::explain_repl_hold(se(e)))?;
        if a.bool("force")? {
            // `force`: unmount the dataset (and with `recursive` its
            // children) first; a busy mount still refuses, changing nothing.
            self.unmount_all_or_none(&name)?;
        }
        self.stop_serving(|n| volumes::is_under(n, &name));
        store
            .destroy_dataset(&name, recursive)
            .map_err(|e| super::replication::explain_repl_hold(se(e)))?;
        self.release_fs(&name);
        Ok(json!({ "name": name }))
    }

    pub(super) fn ds_list(&self, a: &Args) -> OpResult {
        let name = a.opt_str("name")?;
        let recursive = a.bool("recursive")?;
        let depth = a.opt_u64("depth")?;
        let types = parse_types(a.opt_str("type")?.as_deref())?;
        let props: Vec<String> = a
            .str_list("props")?
            .iter()
            .map(|p| canonical_prop(p).to_string())
            .collect();
        for p in &props {
            proto::validate_prop_name(p)?;
        }
        let mut infos: Vec<DatasetInfo> = Vec::new();
        let mut stores: Vec<Arc<Store>> = Vec::new();
        match &name {
            Some(n) => {
                let store = self.ds_store(n)?;
                infos = store
                    .list(Some(n), recursive || depth.is_some())
                    .map_err(se)?;
                stores.push(store);
            }
            None => {
                let all: Vec<Arc<Store>> = self
                    .pools
                    .read()
                    .values()
                    .filter_map(|s| s.store.clone())
                    .collect();
                for s in all {
                    infos.extend(s.list(None, true).map_err(se)?);
                    stores.push(s);
                }
            }
        }
        if let (Some(n), Some(d)) = (&name, depth) {
            let base = n.split('/').count() as u64;
            infos.retain(|i| (i.name.split('/').count() as u64).saturating_sub(base) <= d);
        }
        infos.retain(|i| types.contains(&kind_str(&i.kind)));
        infos.sort_by_key(|a| tree_key(&a.name));
        let mut rows = Vec::with_capacity(infos.len());
        for info in infos {
            let store = stores
                .iter()
                .find(|s| s.name() == pool_of(&info.name))
                .ok_or_else(|| format!("dataset '{}' has no pool", info.name))?;
            rows.push(list_row(store, &info, &props)?);
        }
        if types.contains(&"snapshot") {
            let cols: Vec<String> = if props.is_empty() {
                ["name", "used", "available", "referenced", "mountpoint"]
                    .map(String::from)
                    .to_vec()
            } else {
                props.clone()
            };
            rows.extend(self.snapshot_rows(
                name.as_deref(),
                recursive || depth.is_some(),
                &cols,
            )?);
            // As zfs lists them: each dataset's snapshots right after it, oldest
            // first (the sort is stable and snapshot rows come oldest first).
            rows.sort_by_cached_key(|r| {
                let name = r["name"].as_str().unwrap_or_default();
                let (fs, snap) = name.split_once('@').unwrap_or((name, ""));
                (tree_key(fs), !snap.is_empty())
            });
        }
        Ok(Value::Array(rows))
    }

    pub(super) fn ds_get(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let store = self.ds_or_snap_store(&name)?;
        let props: Vec<String> = a
            .str_list("props")?
            .iter()
            .map(|p| canonical_prop(p).to_string())
            .collect();
        let all = props.is_empty() || props.iter().any(|p| p == "all");
        if !all {
            for p in &props {
                proto::validate_prop_name(p)?;
            }
        }
        let rows = store
            .get_props(&name, if all { None } else { Some(&props) })
            .map_err(se)?;
        Ok(Value::Array(
            rows.into_iter()
                .map(|r| {
                    json!({
                        "name": name, "property": r.property, "value": r.value,
                        "raw": r.raw, "source": r.source,
                    })
                })
                .collect(),
        ))
    }

    pub(super) fn ds_set(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let prop = canonical_prop(&a.str("prop")?).to_string();
        proto::validate_prop_name(&prop)?;
        let value = a.str("value")?;
        if value.len() > 8192 || value.contains(['\n', '\0']) {
            return Err(format!("invalid value for property '{prop}'"));
        }
        let store = self.ds_or_snap_store(&name)?;
        store.set_prop(&name, &prop, &value).map_err(se)?;
        self.nbd_revalidate();
        Ok(json!({ "name": name, "property": prop, "value": value }))
    }

    pub(super) fn ds_inherit(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let prop = canonical_prop(&a.str("prop")?).to_string();
        proto::validate_prop_name(&prop)?;
        let store = self.ds_store(&name)?;
        store.inherit_prop(&name, &prop).map_err(se)?;
        self.nbd_revalidate();
        Ok(json!({ "name": name, "property": prop }))
    }
}

fn kind_str(k: &DatasetKind) -> &'static str {
    match k {
        DatasetKind::Filesystem => "filesystem",
        DatasetKind::Volume => "volume",
    }
}

/// Sort key placing each dataset right before its descendants.
pub(super) fn tree_key(name: &str) -> Vec<String> {
    name.split('/').map(str::to_string).collect()
}

/// `type` filter of `ds.list`: comma-separated kinds; default filesystem,volume.
pub(super) fn parse_types(t: Option<&str>) -> Result<Vec<&'static str>, String> {
    let Some(t) = t else {
        return Ok(vec!["filesystem", "volume"]);
    };
    let mut out = Vec::new();
    for w in t.split(',') {
        match w.trim() {
            "filesystem" | "fs" => out.push("filesystem"),
            "volume" | "vol" => out.push("volume"),
            "snapshot" | "snap" => out.push("snapshot"),
            "all" => out.extend(["filesystem", "volume", "snapshot"]),
            other => {
                return Err(format!(
                    "invalid type '{other}': use filesystem, volume, snapshot or all"
                ))
            }
        }
    }
    Ok(out)
}

/// One `ds.list` row: the fixed columns, plus `props` {prop: {value, raw, source}}.
fn list_row(store: &Store, info: &DatasetInfo, props: &[String]) -> OpResult {
    let mut pm = Map::new();
    let size = |n: u64| json!({ "value": format_size(n), "raw": n.to_string(), "source": "-" });
    let mut ask: Vec<String> = Vec::new();
    for p in props {
        let v = match p.as_str() {
            "name" => json!({ "value": info.name, "raw": info.name, "source": "-" }),
            "type" => {
                let k = kind_str(&info.kind);
                json!({ "value": k, "raw": k, "source": "-" })
            }
            "used" => size(info.used),
            "available" => size(info.available),
            "referenced" => size(info.referenced),
            "mountpoint" => {
                json!({ "value": info.mountpoint, "raw": info.mountpoint, "source": "-" })
            }
            _ => {
                if !ask.contains(p) {
                    ask.push(p.clone());
                }
                continue;
            }
        };
        pm.insert(p.clone(), v);
    }
    if !ask.is_empty() {
        // Properties that do not apply to this kind of dataset come back as "-".
        let rows = store.get_props(&info.name, Some(&ask)).map_err(se)?;
        for r in rows {
            pm.insert(
                r.property.clone(),
                json!({ "value": r.value, "raw": r.raw, "source": r.source }),
            );
        }
        for p in &ask {
            if !pm.contains_key(p) {
                pm.insert(
                    p.clone(),
                    json!({ "value": "-", "raw": "-", "source": "-" }),
                );
            }
        }
    }
    Ok(json!({
        "name": info.name,
        "type": kind_str(&info.kind),
        "used": info.used,
        "available": info.available,
        "referenced": info.referenced,
        "mountpoint": info.mountpoint,
        "props": pm,
    }))
}
