//! Dataset properties: resolution along the ancestry (local, inherited, default),
//! get, set and inherit, and pushing resolved values into the layers that apply
//! them (object set record size and compression, sync policy).
//!
//! Invariants: every value stored in the catalog passed `props::validate`; a
//! handle's applied properties are those resolved from the current catalog.

use crate::catalog::*;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::props;
use crate::store::*;
use cachalot_objects::{CachePolicy, ObjsetProps};
use cachalot_pool::Compression;

/// Value of an inheritable property and where it came from.
pub(crate) fn resolve(cat: &Catalog, id: u64, p: &str) -> (String, String) {
    let chain = cat.ancestry(id);
    for (i, a) in chain.iter().enumerate() {
        let d = &cat.datasets[a];
        if let Some(v) = d.props.get(p) {
            if p == "mountpoint" && i > 0 {
                // Inherited mountpoints append the relative path, as in ZFS.
                let rel = &cat.datasets[&id].name[d.name.len()..];
                let v = if v == "none" || v == "legacy" {
                    v.clone()
                } else {
                    format!("{}{}", v.trim_end_matches('/'), rel)
                };
                return (v, format!("inherited from {}", d.name));
            }
            let src = if i == 0 {
                "local".to_string()
            } else {
                format!("inherited from {}", d.name)
            };
            return (v.clone(), src);
        }
    }
    if p == "mountpoint" {
        return (format!("/{}", cat.datasets[&id].name), "default".into());
    }
    match props::default_value(p) {
        Some(v) => (v.to_string(), "default".into()),
        None => (String::new(), "-".into()),
    }
}

pub(crate) fn resolve_objset_props(cat: &Catalog, id: u64) -> ObjsetProps {
    ObjsetProps {
        recordsize: resolve_recordsize(cat, id),
        compression: Compression::parse(&resolve(cat, id, "compression").0)
            .unwrap_or(Compression::Lz4),
        cache: CachePolicy::from_props(
            &resolve(cat, id, "primarycache").0,
            &resolve(cat, id, "secondarycache").0,
        ),
    }
}

/// The record size of dataset `id`: a volume's block size, else `recordsize`.
/// Alone (not through `resolve_objset_props`) for the space check every write
/// makes, which needs nothing else.
pub(crate) fn resolve_recordsize(cat: &Catalog, id: u64) -> u32 {
    match cat.datasets[&id].volblocksize {
        Some(b) => b,
        None => resolve(cat, id, "recordsize").0.parse().unwrap_or(131072),
    }
}

pub(super) fn refresh_props(st: &State) {
    for (id, h) in &st.handles {
        if st.catalog.datasets.contains_key(id) {
            apply_props(&st.catalog, *id, h);
        }
    }
}

/// Push a dataset's resolved properties into the layers that apply them.
pub(super) fn apply_props(cat: &Catalog, id: u64, h: &Dataset) {
    h.objset.set_props(resolve_objset_props(cat, id));
    h.set_policy(
        crate::dataset::SyncPolicy::parse(&resolve(cat, id, "sync").0),
        resolve(cat, id, "logbias").0 != "throughput",
    );
}

pub(super) fn num_prop(d: &DatasetRecord, p: &str) -> u64 {
    d.props.get(p).and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl Store {
    pub fn get_props(&self, name: &str, which: Option<&[String]>) -> Result<Vec<PropRow>> {
        self.check_live()?;
        if name.contains('@') {
            return self.snapshot_props(name, which);
        }
        // A resume token shows only once durable (see `resume_checkpoint`).
        let wants_token = which.is_none_or(|w| w.iter().any(|p| p == "receive_resume_token"));
        let _durable = wants_token.then(|| self.resume_checkpoint.lock());
        let st = self.state.lock();
        // A full receive cut off before it created `name` keeps its token on
        // the hidden `name%recv`: `get receive_resume_token name` finds it.
        let token_only = which.is_some_and(|w| w == ["receive_resume_token"]);
        let rec = match st.catalog.by_name(name) {
            Some(r) => r,
            None if token_only => {
                let token = st
                    .catalog
                    .by_name(&format!("{name}%recv"))
                    .and_then(|d| d.props.get(crate::resume::RESUME_PROP))
                    .ok_or_else(|| StoreError::NotFound(name.into()))?;
                return Ok(vec![PropRow {
                    property: "receive_resume_token".into(),
                    value: token.clone(),
                    raw: token.clone(),
                    source: "-".into(),
                }]);
            }
            None => return Err(StoreError::NotFound(name.into())),
        };
        let all: Vec<String> = {
            let mut v: Vec<String> = [
                "type",
                "creation",
                "used",
                "available",
                "referenced",
                "compressratio",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            for p in props::SETTABLE {
                if (*p == "volsize" || *p == "volblocksize") && rec.kind != DatasetKind::Volume {
                    continue;
                }
                if (*p == "recordsize" || *p == "mountpoint") && rec.kind == DatasetKind::Volume {
                    continue;
                }
                v.push(p.to_string());
            }
            if rec.kind == DatasetKind::Volume {
                v.push("volblocksize".into());
            }
            v.extend(
                ["logicalused", "written", "origin"]
                    .iter()
                    .map(|s| s.to_string()),
            );
            // User properties set here or inherited.
            let mut user: Vec<String> = Vec::new();
            for a in st.catalog.ancestry(rec.id) {
                for k in st.catalog.datasets[&a].props.keys() {
                    if props::is_user_prop(k) && !user.contains(k) {
                        user.push(k.clone());
                    }
                }
            }
            user.sort();
            v.extend(user);
            v
        };
        let list: Vec<String> = match which {
            None => all,
            Some(w) if w.iter().any(|p| p == "all") => all,
            Some(w) => w.to_vec(),
        };
        let mut out = Vec::new();
        for p in list {
            let (raw, source) = self.prop_value(&st.catalog, rec.id, &p)?;
            out.push(PropRow {
                value: props::humanize(&p, &raw),
                property: p,
                raw,
                source,
            });
        }
        Ok(out)
    }

    pub(super) fn prop_value(&self, cat: &Catalog, id: u64, p: &str) -> Result<(String, String)> {
        let rec = &cat.datasets[&id];
        let ro = |v: String| Ok((v, "-".to_string()));
        match p {
            "name" => ro(rec.name.clone()),
            "type" => ro(match rec.kind {
                DatasetKind::Filesystem => "filesystem".into(),
                DatasetKind::Volume => "volume".into(),
            }),
            "creation" => ro(rec.creation.to_string()),
            "used" => ro(self.used_reported(cat, id).to_string()),
            "available" | "avail" => ro(self.available_shown(cat, id).to_string()),
            "referenced" | "refer" => ro(rec.acct.used.to_string()),
            "written" => {
                ro(
                    crate::snapshot::written_bytes(&self.cache, &rec.objset, rec.prev_snap_txg)
                        .unwrap_or(rec.acct.used)
                        .to_string(),
                )
            }
            p if p.starts_with("written@") => {
                let txg = written_since_txg(rec, p, u64::MAX)?;
                ro(crate::snapshot::written_bytes(&self.cache, &rec.objset, txg)?.to_string())
            }
            "logicalused" => ro(cat
                .subtree(id)
                .iter()
                .map(|i| cat.datasets[i].acct.logical)
                .sum::<u64>()
                .to_string()),
            // Logical over physical bytes of the data blocks of the datasets
            // logicalused sums, physical being one copy's allocation, never more
            // than the logical size (see objects::add_acct), as zfs pads psize to
            // the sector. Metadata is left out so that compression=off reads 1.00.
            "compressratio" => {
                let (l, p) = cat.subtree(id).iter().fold((0u64, 0u64), |(l, p), i| {
                    let a = &cat.datasets[i].acct;
                    (l + a.data_logical, p + a.data_physical)
                });
                let r = if p == 0 { 1.0 } else { l as f64 / p as f64 };
                ro(format!("{r:.2}"))
            }
            "receive_resume_token" => ro(cat
                .by_name(&format!("{}%recv", rec.name))
                .and_then(|d| d.props.get(crate::resume::RESUME_PROP))
                .cloned()
                .unwrap_or_else(|| "-".into())),
            "origin" => ro(match &rec.origin {
                Some((o, n)) => cat
                    .datasets
                    .get(o)
                    .map_or("-".into(), |d| format!("{}@{n}", d.name)),
                None => "-".into(),
            }),
            // Properties that do not apply to this kind of dataset read as "-", as in zfs.
            "volblocksize" => ro(rec.volblocksize.map_or("-".into(), |b| b.to_string())),
            "volsize" if rec.kind != DatasetKind::Volume => ro("-".into()),
            "recordsize" | "mountpoint" if rec.kind == DatasetKind::Volume => ro("-".into()),
            "quota" | "reservation" | "volsize" => match rec.props.get(p) {
                Some(v) => Ok((v.clone(), "local".into())),
                None => Ok((
                    props::default_value(p).unwrap_or("none").into(),
                    "default".into(),
                )),
            },
            p if props::is_inheritable(p) => {
                let (v, src) = resolve(cat, id, p);
                if v.is_empty() && props::is_user_prop(p) {
                    return Ok(("-".into(), "-".into()));
                }
                Ok((v, src))
            }
            p => Err(StoreError::Invalid(format!("invalid property '{p}'"))),
        }
    }

    pub fn set_prop(&self, name: &str, prop: &str, value: &str) -> Result<()> {
        self.check_live()?;
        if name.contains('@') {
            return self.set_snapshot_prop(name, prop, value);
        }
        let mut st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?
            .clone();
        let canon = props::validate(prop, value, rec.kind == DatasetKind::Volume)?;
        if prop == "volsize" {
            let bs = rec.volblocksize.unwrap_or(16384) as u64;
            let n: u64 = canon.parse().unwrap_or(0);
            if !n.is_multiple_of(bs) {
                return Err(StoreError::Invalid(format!(
                    "volume size must be a multiple of the volume block size ({})",
                    props::format_size(bs)
                )));
            }
            if let Some(r) = self.volsize_change(&st.catalog, &rec, n)? {
                let d = st.catalog.datasets.get_mut(&rec.id).unwrap();
                d.props.insert("reservation".into(), r.to_string());
            }
        }
        if prop == "quota" && canon != "none" {
            let q: u64 = canon.parse().unwrap_or(0);
            if q < used_of(&st.catalog, rec.id) {
                return Err(StoreError::Invalid(format!(
                    "cannot set quota below what '{name}' already uses ({})",
                    props::format_size(used_of(&st.catalog, rec.id))
                )));
            }
        }
        if prop == "reservation" && canon != "none" {
            let r: u64 = canon.parse().unwrap_or(0);
            let old = num_prop(&rec, "reservation");
            let avail = self.available_in(&st.catalog, rec.id)
                + old.saturating_sub(used_of(&st.catalog, rec.id));
            if r > avail + used_of(&st.catalog, rec.id) {
                return Err(StoreError::NoSpace(self.pool.name()));
            }
        }
        st.catalog
            .datasets
            .get_mut(&rec.id)
            .unwrap()
            .props
            .insert(prop.to_string(), canon.clone());
        st.mark_catalog_dirty();
        if prop == "volsize" {
            let h = st.handles[&rec.id].clone();
            drop(st);
            let objs = h.objset.list_objects()?;
            if let Some(o) = objs.first() {
                h.objset.truncate(*o, canon.parse().unwrap_or(0))?;
            }
            st = self.state.lock();
        }
        refresh_props(&st);
        drop(st);
        // A property change is durable when `set` returns, as in zfs: what the
        // appliance reports must be what it does after a crash too (sync=always
        // set and then lost to a kill -9 made an iSCSI LUN report a write cache
        // again). For volsize it matters twice: clients see the new size at once
        // and may write past the old end through the intent log.
        self.sync()?;
        Ok(())
    }

    pub fn inherit_prop(&self, name: &str, prop: &str) -> Result<()> {
        self.check_live()?;
        let mut st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?
            .clone();
        if !props::is_inheritable(prop) && !["quota", "reservation"].contains(&prop) {
            if props::READONLY.contains(&prop) || props::SETTABLE.contains(&prop) {
                return Err(StoreError::Invalid(format!(
                    "property '{prop}' cannot be inherited"
                )));
            }
            return Err(StoreError::Invalid(format!("invalid property '{prop}'")));
        }
        st.catalog
            .datasets
            .get_mut(&rec.id)
            .unwrap()
            .props
            .remove(prop);
        st.mark_catalog_dirty();
        refresh_props(&st);
        drop(st);
        // Durable when it returns, as `set_prop`.
        self.sync()?;
        Ok(())
    }
}
