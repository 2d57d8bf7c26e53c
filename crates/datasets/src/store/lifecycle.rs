//! Dataset lifecycle: create (with missing parents, volumes with their size and
//! block size), destroy (recursively, refusing busy datasets and ones with
//! dependent clones), rename of a leaf, and listing.
//!
//! Invariants: names are unique in the catalog; a parent exists before its child;
//! a destroyed dataset's handle is marked destroyed at once and its blocks are
//! freed by the commit that removes it from the catalog.

use crate::catalog::*;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::props;
use crate::store::*;
use cachalot_objects::ObjectSet;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Store {
    /// Handle of a dataset.
    /// How many times the catalog (datasets, snapshots, properties) changed
    /// since this store was opened: anything derived from it stays valid while
    /// this number does (the NFS server caches parsed `sharenfs` options so).
    pub fn catalog_changes(&self) -> u64 {
        self.state.lock().catalog_changes
    }

    pub fn dataset(&self, name: &str) -> Result<Arc<Dataset>> {
        self.check_live()?;
        let st = self.state.lock();
        let rec = st
            .catalog
            .by_name(name)
            .ok_or_else(|| StoreError::NotFound(name.into()))?;
        Ok(st.handles[&rec.id].clone())
    }

    pub fn create_dataset(
        &self,
        name: &str,
        kind: DatasetKind,
        volsize: Option<u64>,
        props_in: &[(String, String)],
        parents: bool,
    ) -> Result<()> {
        check_name(name)?;
        self.create_dataset_unchecked(name, kind, volsize, props_in, parents)
    }

    /// `create_dataset` without the name check: receive creates `FS%recv`, a name
    /// users cannot type, so a half-received dataset can never collide with theirs.
    pub(crate) fn create_dataset_unchecked(
        &self,
        name: &str,
        kind: DatasetKind,
        volsize: Option<u64>,
        props_in: &[(String, String)],
        parents: bool,
    ) -> Result<()> {
        self.check_live()?;
        let Some((parent_name, _)) = name.rsplit_once('/') else {
            return Err(StoreError::Invalid(format!(
                "'{name}' is a pool name: datasets are created as POOL/NAME"
            )));
        };
        let mut st = self.state.lock();
        if st.catalog.by_name(name).is_some() {
            return Err(StoreError::Exists(name.into()));
        }
        if !name.starts_with(&format!("{}/", self.pool.name())) {
            return Err(StoreError::NotFound(parent_name.into()));
        }
        let is_volume = kind == DatasetKind::Volume;
        let (mut local, volblocksize) = create_props(kind, volsize, props_in)?;
        let (mut to_create, cur) = missing_parents(&st, parent_name, parents)?;
        // Refuse a thick volume that does not fit before changing anything.
        if is_volume && !local.contains_key("reservation") {
            let size = volsize.unwrap();
            if !props_in.iter().any(|(k, _)| k == "sparse") {
                let avail = self.available_in(&st.catalog, st.catalog.by_name(&cur).unwrap().id);
                if size > avail {
                    return Err(StoreError::NoSpace(self.pool.name()));
                }
            }
        }
        to_create.reverse();
        let txg = self.open_txg();
        for p in &to_create {
            self.insert_dataset(
                &mut st,
                p,
                DatasetKind::Filesystem,
                BTreeMap::new(),
                None,
                txg,
            );
        }
        let sparse = props_in.iter().any(|(k, _)| k == "sparse");
        if is_volume && !sparse && !local.contains_key("reservation") {
            local.insert("reservation".into(), volsize.unwrap().to_string());
        }
        let id = self.insert_dataset(&mut st, name, kind, local, volblocksize, txg);
        let volume = is_volume.then(|| st.handles[&id].clone());
        drop(st);
        if let Some(ds) = volume {
            // Records of volblocksize from the start: a volume never grows from
            // one small block the way a file does.
            let obj = ds
                .objset
                .create_object_sized(crate::dataset::OTYPE_VOLUME, volblocksize.unwrap_or(16384))?;
            ds.objset.truncate(obj, volsize.unwrap())?;
        }
        // `create` is durable when it returns, as in zfs (a dataset created and
        // mounted just before a kill -9 was gone after the restart).
        self.sync()?;
        Ok(())
    }

    /// Add dataset `n` (its parent exists) to the catalog with a new empty
    /// object set born in `txg`, and open its handle. Returns its id.
    fn insert_dataset(
        &self,
        st: &mut State,
        n: &str,
        kind: DatasetKind,
        local: BTreeMap<String, String>,
        vbs: Option<u32>,
        txg: u64,
    ) -> u64 {
        let parent = st
            .catalog
            .by_name(n.rsplit_once('/').unwrap().0)
            .map(|r| r.id);
        let id = st.catalog.next_id;
        st.catalog.next_id += 1;
        let mut rec = DatasetRecord::new(id, n, parent, kind, local, self.now_s());
        rec.volblocksize = vbs;
        st.catalog.datasets.insert(id, rec);
        // resolve_objset_props applies a volume's block size as its record size.
        let p = resolve_objset_props(&st.catalog, id);
        let os = ObjectSet::create(self.cache.clone(), p, txg);
        let ds = Arc::new(Dataset::new(id, n.to_string(), kind, os, self.me.clone()));
        apply_props(&st.catalog, id, &ds);
        st.handles.insert(id, ds);
        st.mark_catalog_dirty();
        id
    }

    pub fn destroy_dataset(&self, name: &str, recursive: bool) -> Result<()> {
        self.check_live()?;
        if name.contains('@') {
            return self.destroy_snapshot(name);
        }
        // No commit in flight: the record taken here is the one on disk.
        let _c = self.commit_lock.lock();
        destroy_in(&mut self.state.lock(), name, recursive)
    }

    /// Whether `destroy_dataset(name, recursive)` would be refused for a
    /// reason other than a user of the dataset (children without
    /// `recursive`, held snapshots, dependent clones, the root): the daemon
    /// asks before it disconnects a served volume's clients, so a refused
    /// destroy does not cut them off. Changes nothing.
    pub fn check_destroy(&self, name: &str, recursive: bool) -> Result<()> {
        self.check_live()?;
        destroy_refusal(&self.state.lock(), name, recursive, false).map(|_| ())
    }

    /// Put the received `tmp` (`FS%recv`, its new snapshot taken) in the
    /// place of `fs` in one catalog change, made with no commit in flight and
    /// none able to start until it is whole, so a commit (and a crash after
    /// it) holds the old `fs` or the new one, never a step between: of an
    /// increment, `tmp` takes over `fs`'s older snapshots (promote) and its
    /// children; then the old `fs` (and, for a full stream, its descendants)
    /// is destroyed and `tmp` renamed to `fs`. On an error nothing changed.
    ///
    /// A full stream replaces `fs` only if `replace` (it existed when the
    /// receive started, and -F allowed replacing it): a dataset of that name
    /// created while the stream ran is someone else's, and the rename is then
    /// refused rather than that dataset destroyed.
    pub(crate) fn put_received_in_place(
        &self,
        tmp: &str,
        fs: &str,
        incremental: bool,
        replace: bool,
    ) -> Result<()> {
        let _c = self.commit_lock.lock();
        let mut st = self.state.lock();
        let before = st.catalog.clone();
        let r = (|| {
            if incremental {
                super::snapshots::promote_in(&mut st, tmp)?;
                self.receive_step("promote");
                adopt_in(&mut st, fs, tmp)?;
                self.receive_step("adopt");
            }
            if (incremental || replace) && st.catalog.by_name(fs).is_some() {
                destroy_in(&mut st, fs, !incremental)?;
                self.receive_step("destroy");
            }
            rename_in(&mut st, tmp, fs)
        })();
        if r.is_err() {
            // Only `destroy_in` changes more than the catalog, after its
            // checks, and `rename_in` cannot fail after it (`fs` is gone, and
            // `tmp`'s children are named under it): the old catalog undoes
            // every step.
            st.catalog = before;
        }
        r
    }
}

/// Destroy dataset `name` (with `recursive`, its descendants) in `st`:
/// refused, changing nothing, if it is the root, busy, has children (without
/// `recursive`), held snapshots or dependent clones. The caller holds the
/// commit lock.
fn destroy_in(st: &mut State, name: &str, recursive: bool) -> Result<()> {
    let ids = destroy_refusal(st, name, recursive, true)?;
    for id in ids.iter().rev() {
        let rec = st.catalog.datasets.remove(id).expect("listed dataset");
        if let Some(h) = st.handles.remove(id) {
            h.mark_destroyed();
            st.pending_destroy.push((*id, h, rec));
        }
    }
    st.mark_catalog_dirty();
    Ok(())
}

/// The checks of `destroy_in` (`busy`: a dataset in use refuses too), or the
/// ids of `name`'s subtree, `name` first, that it would destroy.
fn destroy_refusal(st: &State, name: &str, recursive: bool, busy: bool) -> Result<Vec<u64>> {
    let rec = st
        .catalog
        .by_name(name)
        .ok_or_else(|| StoreError::NotFound(name.into()))?
        .clone();
    if rec.parent.is_none() {
        return Err(StoreError::Invalid(format!(
            "'{name}' is the pool's root dataset: use 'pool destroy'"
        )));
    }
    let ids = st.catalog.subtree(rec.id);
    if ids.len() > 1 && !recursive {
        return Err(StoreError::Busy(format!(
            "'{name}' has children: use -r to destroy them too"
        )));
    }
    for id in ids.iter().rev().filter(|_| busy) {
        if let Some(h) = st.handles.get(id) {
            if h.busy() {
                return Err(StoreError::Busy(format!(
                    "dataset '{}' is busy (mounted or in use)",
                    h.name()
                )));
            }
        }
    }
    for id in ids.iter() {
        for s in &st.catalog.datasets[id].snapshots {
            crate::holds::check_not_held(&st.catalog, *id, &s.name)?;
        }
        if let Some(c) = st
            .catalog
            .datasets
            .values()
            .find(|d| d.origin.as_ref().is_some_and(|(o, _)| *o == *id) && !ids.contains(&d.id))
        {
            return Err(StoreError::Busy(format!(
                "'{}' has dependent clones (e.g. '{}'): destroy or promote them first",
                st.catalog.datasets[id].name, c.name
            )));
        }
    }
    Ok(ids)
}

/// Make `to` the parent of `from`'s children (their names stay): an
/// incremental receive into a filesystem with children (a recursive
/// replication's parent) hands them to the received copy before the old
/// one goes.
fn adopt_in(st: &mut State, from: &str, to: &str) -> Result<()> {
    let id = |n: &str| st.catalog.by_name(n).map(|r| r.id);
    let (Some(from_id), Some(to_id)) = (id(from), id(to)) else {
        return Err(StoreError::NotFound(format!("{from} or {to}")));
    };
    let mut moved = false;
    for d in st.catalog.datasets.values_mut() {
        if d.parent == Some(from_id) {
            d.parent = Some(to_id);
            moved = true;
        }
    }
    if moved {
        st.mark_catalog_dirty();
    }
    Ok(())
}

/// The ancestors of a new dataset that do not exist, nearest first (refused
/// unless `parents`), and the nearest that does, which must not be a volume.
fn missing_parents(st: &State, parent_name: &str, parents: bool) -> Result<(Vec<String>, String)> {
    let mut missing: Vec<String> = Vec::new();
    let mut cur = parent_name.to_string();
    while st.catalog.by_name(&cur).is_none() {
        if !parents {
            return Err(StoreError::NotFound(cur));
        }
        missing.push(cur.clone());
        match cur.rsplit_once('/') {
            Some((p, _)) => cur = p.to_string(),
            None => return Err(StoreError::NotFound(cur)),
        }
    }
    if st
        .catalog
        .by_name(&cur)
        .is_some_and(|r| r.kind == DatasetKind::Volume)
    {
        return Err(StoreError::Invalid(format!(
            "'{cur}' is a volume: it cannot have children"
        )));
    }
    Ok((missing, cur))
}

/// Rename a dataset whose children (if any, see `adopt_in`) are already
/// named under `new` (receive moves `FS%recv` into place).
fn rename_in(st: &mut State, old: &str, new: &str) -> Result<()> {
    if st.catalog.by_name(new).is_some() {
        return Err(StoreError::Exists(new.into()));
    }
    let id = st
        .catalog
        .by_name(old)
        .ok_or_else(|| StoreError::NotFound(old.into()))?
        .id;
    let under = format!("{new}/");
    if st.catalog.children(id).any(|c| !c.name.starts_with(&under)) {
        return Err(StoreError::Busy(format!("'{old}' has children")));
    }
    st.catalog.datasets.get_mut(&id).unwrap().name = new.to_string();
    if let Some(h) = st.handles.get(&id) {
        h.set_name(new);
    }
    st.mark_catalog_dirty();
    refresh_props(st);
    Ok(())
}

impl Store {
    pub fn list(&self, root: Option<&str>, recursive: bool) -> Result<Vec<DatasetInfo>> {
        self.check_live()?;
        let st = self.state.lock();
        // One pass computes every dataset's space figures (see listing.rs).
        let index = super::listing::SpaceIndex::build(self, &st.catalog);
        let ids: Vec<u64> = match root {
            None => index.subtree(1),
            Some(n) => {
                let r = st
                    .catalog
                    .by_name(n)
                    .ok_or_else(|| StoreError::NotFound(n.into()))?;
                if recursive {
                    index.subtree(r.id)
                } else {
                    vec![r.id]
                }
            }
        };
        let mut out: Vec<DatasetInfo> = ids
            .iter()
            // A receive in progress (FS%recv) is not a dataset yet.
            .filter(|id| !st.catalog.datasets[id].name.contains('%'))
            .map(|id| {
                let r = &st.catalog.datasets[id];
                DatasetInfo {
                    name: r.name.clone(),
                    kind: r.kind,
                    used: index.used_reported(*id),
                    available: index.available(&st.catalog, *id),
                    referenced: r.acct.used,
                    mountpoint: match r.kind {
                        DatasetKind::Volume => "-".into(),
                        DatasetKind::Filesystem => resolve(&st.catalog, *id, "mountpoint").0,
                    },
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// The local properties of a dataset to create, validated, and a volume's block
/// size (its `volsize` becomes a property).
fn create_props(
    kind: DatasetKind,
    volsize: Option<u64>,
    props_in: &[(String, String)],
) -> Result<(BTreeMap<String, String>, Option<u32>)> {
    let is_volume = kind == DatasetKind::Volume;
    let mut local = BTreeMap::new();
    let mut volblocksize = None;
    for (k, v) in props_in {
        if k == "sparse" {
            continue;
        }
        if k == "volblocksize" {
            if !is_volume {
                return Err(StoreError::Invalid(
                    "property 'volblocksize' applies only to volumes".into(),
                ));
            }
            let n = props::parse_size(v)
                .filter(|n| n.is_power_of_two() && (512..=1 << 20).contains(n))
                .ok_or_else(|| StoreError::Invalid(format!("invalid value '{v}' for property 'volblocksize': must be a power of two from 512 to 1M")))?;
            volblocksize = Some(n as u32);
            continue;
        }
        local.insert(k.clone(), props::validate(k, v, is_volume)?);
    }
    if is_volume {
        let size =
            volsize.ok_or_else(|| StoreError::Invalid("a volume needs a size (-V)".into()))?;
        if size == 0 {
            return Err(StoreError::Invalid(
                "volume size must be greater than 0".into(),
            ));
        }
        let bs = volblocksize.unwrap_or(16384) as u64;
        if !size.is_multiple_of(bs) {
            return Err(StoreError::Invalid(format!(
                "volume size must be a multiple of the volume block size ({})",
                props::format_size(bs)
            )));
        }
        volblocksize = Some(bs as u32);
        local.insert("volsize".into(), size.to_string());
    }
    Ok((local, volblocksize))
}
