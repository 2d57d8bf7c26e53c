//! Snapshots, rollback, clones and promote, as seen by the catalog. The block
//! rules (birth times, dead lists) are in `crate::snapshot`; operations here are
//! validated in open context and queued for the next commit, which applies them
//! atomically.
//!
//! Invariants: a snapshot with dependent clones is never destroyed; names given
//! together are one atomic snapshot; a rolled-back head gets a new handle.

use crate::catalog::*;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::props;
use crate::store::*;
use cachalot_objects::ObjectSet;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Refuse to remove snapshot `snap` of dataset `id` while a clone depends on it.
pub(super) fn check_no_clones(cat: &Catalog, id: u64, snap: &str) -> Result<()> {
    let origin = Some((id, snap.to_string()));
    match cat.datasets.values().find(|d| d.origin == origin) {
        Some(c) if c.name.ends_with("%recv") => Err(StoreError::Busy(format!(
            "snapshot '{}@{snap}' is the base of a partial receive into '{}': finish it (send -t) or abort it (receive -A {})",
            cat.datasets[&id].name,
            c.name.trim_end_matches("%recv"),
            c.name.trim_end_matches("%recv")
        ))),
        Some(c) => Err(StoreError::Busy(format!(
            "snapshot '{}@{snap}' has dependent clones (e.g. '{}')",
            cat.datasets[&id].name, c.name
        ))),
        None => Ok(()),
    }
}

/// The txg of snapshot SNAP named by property `written@SNAP` (SNAP or FS@SNAP) of
/// dataset `rec`; it must be older than `before` (a snapshot's own txg).
pub(super) fn written_since_txg(rec: &DatasetRecord, prop: &str, before: u64) -> Result<u64> {
    let name = &prop["written@".len()..];
    let short = match name.split_once('@') {
        Some((fs, s)) if fs == rec.name => s,
        Some(_) => {
            return Err(StoreError::Invalid(format!(
                "{prop}: '{name}' is not a snapshot of '{}'",
                rec.name
            )))
        }
        None => name,
    };
    let snap = rec
        .snapshots
        .iter()
        .find(|s| s.name == short)
        .ok_or_else(|| {
            StoreError::Invalid(format!("{prop}: '{}@{short}' does not exist", rec.name))
        })?;
    if snap.txg >= before {
        return Err(StoreError::Invalid(format!(
            "{prop}: '{}@{short}' is not older",
            rec.name
        )));
    }
    Ok(snap.txg)
}

impl Store {
    /// Take one atomic snapshot of every `FS@SNAP` given (they commit in the same
    /// txg). O(1) per dataset. Returns the txg.
    pub fn snapshot(&self, names: &[String]) -> Result<u64> {
        self.snapshot_with_guid(names, None)
    }

    /// `snapshot`, keeping a given guid (receive).
    pub(crate) fn snapshot_with_guid(&self, names: &[String], guid: Option<u64>) -> Result<u64> {
        self.check_live()?;
        if names.is_empty() {
            return Err(StoreError::Invalid("no snapshot names given".into()));
        }
        {
            let mut st = self.state.lock();
            let mut list: Vec<(u64, String, Option<u64>)> = Vec::new();
            for full in names {
                let (fs, snap) = split_snapshot(full)?;
                let rec = st
                    .catalog
                    .by_name(fs)
                    .ok_or_else(|| StoreError::NotFound(fs.into()))?;
                let queued = st.snap_ops.iter().any(|op| {
                    matches!(op, crate::snapshot::SnapOp::Create(l) if l.iter().any(|(i, n, _)| *i == rec.id && n == snap))
                });
                if rec.snapshots.iter().any(|s| s.name == snap)
                    || queued
                    || list.iter().any(|(i, n, _)| *i == rec.id && n == snap)
                {
                    return Err(StoreError::Exists(full.clone()));
                }
                list.push((rec.id, snap.to_string(), guid));
            }
            st.snap_ops.push(crate::snapshot::SnapOp::Create(list));
            st.mark_catalog_dirty();
        }
        self.sync()
    }

    pub(crate) fn find_snapshot(&self, st: &State, full: &str) -> Result<(u64, usize)> {
        let (fs, snap) = split_snapshot(full)?;
        let rec = st
            .catalog
            .by_name(fs)
            .ok_or_else(|| StoreError::NotFound(fs.into()))?;
        let idx = rec
            .snapshots
            .iter()
            .position(|s| s.name == snap)
            .ok_or_else(|| StoreError::NotFound(full.into()))?;
        Ok((rec.id, idx))
    }

    /// Destroy a snapshot: frees exactly what only it held.
    pub fn destroy_snapshot(&self, full: &str) -> Result<()> {
        self.check_live()?;
        {
            let mut st = self.state.lock();
            let (id, idx) = self.find_snapshot(&st, full)?;
            let snap = st.catalog.datasets[&id].snapshots[idx].name.clone();
            check_no_clones(&st.catalog, id, &snap)?;
            crate::holds::check_not_held(&st.catalog, id, &snap)?;
            st.snap_ops
                .push(crate::snapshot::SnapOp::Destroy { id, name: snap });
            st.mark_catalog_dirty();
        }
        self.sync()?;
        Ok(())
    }

    /// Roll a filesystem back to a snapshot. Newer snapshots must be destroyed
    /// (`recursive`); the dataset must not be in use (mounted).
    pub fn rollback(&self, full: &str, recursive: bool) -> Result<()> {
        self.check_live()?;
        {
            let mut st = self.state.lock();
            let (id, snap, newer) = self.rollback_refusal(&st, full, recursive)?;
            for n in newer.into_iter().rev() {
                st.snap_ops
                    .push(crate::snapshot::SnapOp::Destroy { id, name: n });
            }
            st.snap_ops
                .push(crate::snapshot::SnapOp::Rollback { id, name: snap });
            st.mark_catalog_dirty();
        }
        self.sync()?;
        if let Some((fs, _)) = full.split_once('@') {
            if self.sync_volsize(fs)? {
                self.sync()?;
            }
        }
        Ok(())
    }

    /// Whether `rollback(full, recursive)` would be refused (and why); changes
    /// nothing. A forced incremental receive asks before it starts, and
    /// discards the target's newer state only once the whole stream arrived.
    pub(crate) fn check_rollback(&self, full: &str, recursive: bool) -> Result<()> {
        let st = self.state.lock();
        self.rollback_refusal(&st, full, recursive).map(|_| ())
    }

    /// The refusals of `rollback`: else the dataset's id, the snapshot's name
    /// and the newer snapshots it destroys (oldest first).
    fn rollback_refusal(
        &self,
        st: &State,
        full: &str,
        recursive: bool,
    ) -> Result<(u64, String, Vec<String>)> {
        let (id, idx) = self.find_snapshot(st, full)?;
        let rec = &st.catalog.datasets[&id];
        let newer: Vec<String> = rec.snapshots[idx + 1..]
            .iter()
            .map(|s| s.name.clone())
            .collect();
        if !newer.is_empty() && !recursive {
            return Err(StoreError::Busy(format!(
                "'{full}' is not the newest snapshot ({} newer, e.g. '{}@{}'): use -r to destroy them",
                newer.len(),
                rec.name,
                newer[newer.len() - 1]
            )));
        }
        for n in &newer {
            check_no_clones(&st.catalog, id, n)?;
            crate::holds::check_not_held(&st.catalog, id, n)?;
        }
        if st.handles.get(&id).is_some_and(|h| h.busy()) {
            return Err(StoreError::Busy(format!(
                "dataset '{}' is busy (mounted or in use): unmount it first",
                rec.name
            )));
        }
        Ok((id, rec.snapshots[idx].name.clone(), newer))
    }

    /// Create `new` as a writable clone of snapshot `full`: it shares every block
    /// with the snapshot until written.
    pub fn clone_snapshot(
        &self,
        full: &str,
        new: &str,
        props_in: &[(String, String)],
    ) -> Result<()> {
        check_name(new)?;
        self.clone_unchecked(full, new, props_in)?;
        // Durable when it returns, as `create` (and zfs): found by the simulator,
        // a clone acknowledged just before a power cut was gone after it.
        self.sync()?;
        Ok(())
    }

    pub(crate) fn clone_unchecked(
        &self,
        full: &str,
        new: &str,
        props_in: &[(String, String)],
    ) -> Result<()> {
        self.check_live()?;
        let _c = self.commit_lock.lock();
        let mut st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        if st.catalog.by_name(new).is_some() {
            return Err(StoreError::Exists(new.into()));
        }
        let parent_name = new.rsplit_once('/').map(|p| p.0).ok_or_else(|| {
            StoreError::Invalid(format!(
                "'{new}' is a pool name: clones are created as POOL/NAME"
            ))
        })?;
        let parent = st
            .catalog
            .by_name(parent_name)
            .ok_or_else(|| StoreError::NotFound(parent_name.into()))?
            .id;
        let src = st.catalog.datasets[&id].clone();
        let snap = src.snapshots[idx].clone();
        let mut local = BTreeMap::new();
        for (k, v) in props_in {
            local.insert(
                k.clone(),
                props::validate(k, v, src.kind == DatasetKind::Volume)?,
            );
        }
        let new_id = st.catalog.next_id;
        st.catalog.next_id += 1;
        let mut rec = DatasetRecord::new(new_id, new, Some(parent), src.kind, local, self.now_s());
        // The clone starts at the snapshot's root and shares every block born
        // before it: those are never freed by the clone.
        rec.objset = snap.objset;
        rec.acct = snap.acct;
        rec.volblocksize = src.volblocksize;
        rec.prev_snap_txg = snap.txg;
        rec.origin = Some((id, snap.name.clone()));
        rec.origin_txg = snap.txg;
        st.catalog.datasets.insert(new_id, rec);
        let txg = self.open_txg();
        let os = ObjectSet::open_fresh_log(
            self.cache.clone(),
            resolve_objset_props(&st.catalog, new_id),
            &snap.objset,
            txg,
        )?;
        let ds = Arc::new(Dataset::new(
            new_id,
            new.to_string(),
            src.kind,
            os,
            self.me.clone(),
        ));
        apply_props(&st.catalog, new_id, &ds);
        st.handles.insert(new_id, ds);
        st.mark_catalog_dirty();
        drop(st);
        self.sync_volsize(new).map(|_| ())
    }

    /// Promote a clone: it takes over its origin's snapshots up to and including
    /// the origin snapshot, and the old origin becomes a clone of it, so the old
    /// origin can then be destroyed. Only catalog records move: every dead list
    /// stays valid because it describes blocks between consecutive snapshots of
    /// the same lineage.
    pub fn promote(&self, clone: &str) -> Result<()> {
        self.check_live()?;
        let _c = self.commit_lock.lock();
        promote_in(&mut self.state.lock(), clone)
    }

    /// The catalog record of snapshot `full`, with its dataset's volume block size.
    pub(crate) fn snapshot_record(&self, full: &str) -> Result<SnapshotMeta> {
        let st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        let rec = &st.catalog.datasets[&id];
        let s = &rec.snapshots[idx];
        Ok(SnapshotMeta {
            name: s.name.clone(),
            txg: s.txg,
            guid: s.guid,
            volblocksize: rec.volblocksize,
        })
    }

    /// Snapshots of `fs`, oldest first.
    pub(crate) fn snapshot_records(&self, fs: &str) -> Result<Vec<SnapshotMeta>> {
        let st = self.state.lock();
        let rec = st
            .catalog
            .by_name(fs)
            .ok_or_else(|| StoreError::NotFound(fs.into()))?;
        Ok(rec
            .snapshots
            .iter()
            .map(|s| SnapshotMeta {
                name: s.name.clone(),
                txg: s.txg,
                guid: s.guid,
                volblocksize: rec.volblocksize,
            })
            .collect())
    }

    /// Snapshots carry only user properties (`com.example:key`): the MySQL
    /// integration records binlog and GTID positions there. Open context edits
    /// them; commits keep what open context set.
    pub(super) fn set_snapshot_prop(&self, full: &str, prop: &str, value: &str) -> Result<()> {
        if !props::is_user_prop(prop) {
            return Err(StoreError::Invalid(format!(
                "snapshots are read-only: only user properties (like com.example:key) can be set on '{full}'"
            )));
        }
        let canon = props::validate(prop, value, false)?;
        let mut st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        let rec = st.catalog.datasets.get_mut(&id).expect("found above");
        rec.snapshots[idx].props.insert(prop.to_string(), canon);
        st.mark_catalog_dirty();
        Ok(())
    }

    /// Properties of a snapshot: its statistics and user properties.
    pub(super) fn snapshot_props(
        &self,
        full: &str,
        which: Option<&[String]>,
    ) -> Result<Vec<PropRow>> {
        let info = self
            .list_snapshots(Some(split_snapshot(full)?.0))?
            .into_iter()
            .find(|s| s.name == full)
            .ok_or_else(|| StoreError::NotFound(full.into()))?;
        let (user, written_since) = {
            let st = self.state.lock();
            let (id, idx) = self.find_snapshot(&st, full)?;
            let rec = &st.catalog.datasets[&id];
            let snap = &rec.snapshots[idx];
            // written@OLDER of a snapshot: what it holds that was born after OLDER.
            let mut since = BTreeMap::new();
            for p in which.unwrap_or_default() {
                if p.starts_with("written@") {
                    let txg = written_since_txg(rec, p, snap.txg)?;
                    let n = crate::snapshot::written_bytes(&self.cache, &snap.objset, txg)?;
                    since.insert(p.clone(), n);
                }
            }
            (snap.props.clone(), since)
        };
        let mut all: Vec<String> = ["type", "creation", "used", "referenced", "written"]
            .map(String::from)
            .to_vec();
        // Holds live among the snapshot's properties (`%hold:TAG`): not user
        // properties, so not listed (`get all` of a held snapshot failed on them).
        all.extend(user.keys().filter(|k| props::is_user_prop(k)).cloned());
        let list: Vec<String> = match which {
            Some(w) if !w.iter().any(|p| p == "all") => w.to_vec(),
            _ => all,
        };
        let mut out = Vec::new();
        for p in list {
            let (raw, source) = match p.as_str() {
                "type" => ("snapshot".to_string(), "-"),
                "creation" => (info.creation.to_string(), "-"),
                "used" => (info.used.to_string(), "-"),
                "referenced" | "refer" => (info.referenced.to_string(), "-"),
                "written" => (info.written.to_string(), "-"),
                p if written_since.contains_key(p) => (written_since[p].to_string(), "-"),
                p if props::is_user_prop(p) => match user.get(p) {
                    Some(v) => (v.clone(), "local"),
                    None => ("-".to_string(), "-"),
                },
                p if props::SETTABLE.contains(&p) || props::READONLY.contains(&p) => {
                    ("-".to_string(), "-")
                }
                p => return Err(StoreError::Invalid(format!("invalid property '{p}'"))),
            };
            out.push(PropRow {
                value: props::humanize(&p, &raw),
                property: p,
                raw,
                source: source.to_string(),
            });
        }
        Ok(out)
    }

    /// Snapshots of `fs` (or of every dataset), oldest first per dataset.
    pub fn list_snapshots(&self, fs: Option<&str>) -> Result<Vec<SnapshotInfo>> {
        self.check_live()?;
        let st = self.state.lock();
        let ids: Vec<u64> = match fs {
            Some(n) => vec![
                st.catalog
                    .by_name(n)
                    .ok_or_else(|| StoreError::NotFound(n.into()))?
                    .id,
            ],
            None => st.catalog.subtree(1),
        };
        let mut out = Vec::new();
        for id in ids {
            let rec = &st.catalog.datasets[&id];
            if rec.name.contains('%') {
                continue; // a receive in progress
            }
            for (i, s) in rec.snapshots.iter().enumerate() {
                let prev = if i > 0 {
                    rec.snapshots[i - 1].txg
                } else {
                    rec.origin_txg
                };
                out.push(SnapshotInfo {
                    name: format!("{}@{}", rec.name, s.name),
                    used: crate::snapshot::unique_bytes(&self.mos, rec, i, rec.origin_txg)?,
                    referenced: s.acct.used,
                    written: crate::snapshot::written_bytes(&self.cache, &s.objset, prev)?,
                    creation: s.creation,
                    txg: s.txg,
                });
            }
        }
        Ok(out)
    }

    /// The identity of snapshot `full` (FS@SNAP): a name can be destroyed and
    /// taken again, its guid cannot.
    pub fn snapshot_guid(&self, full: &str) -> Result<u64> {
        Ok(self.snapshot_record(full)?.guid)
    }

    /// The snapshot names (without `FS@`) of `fs`, oldest first.
    pub fn snapshot_names(&self, fs: &str) -> Result<Vec<String>> {
        Ok(self
            .snapshot_records(fs)?
            .into_iter()
            .map(|s| s.name)
            .collect())
    }

    /// A read-only handle on a snapshot's contents.
    pub fn snapshot_dataset(&self, full: &str) -> Result<Arc<Dataset>> {
        self.check_live()?;
        let st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        let root = st.catalog.datasets[&id].snapshots[idx].objset;
        self.readonly_dataset(&st, id, full, &root)
    }

    /// A read-only handle named `name` on object-set root `root` of dataset `id`.
    fn readonly_dataset(
        &self,
        st: &State,
        id: u64,
        name: &str,
        root: &cachalot_pool::BlkPtr,
    ) -> Result<Arc<Dataset>> {
        let os = ObjectSet::open_fresh_log(
            self.cache.clone(),
            resolve_objset_props(&st.catalog, id),
            root,
            self.open_txg(),
        )?;
        Ok(Arc::new(Dataset::new_readonly(
            id,
            name.to_string(),
            st.catalog.datasets[&id].kind,
            os,
            self.me.clone(),
        )))
    }

    /// The two read-only states a snapshot diff compares: filesystem snapshot
    /// `from` (FS@SNAP) and `to`, a later snapshot of FS or FS itself as of a
    /// commit made now (what was written before the call is in it). Refused,
    /// reading nothing, when `to` is another filesystem's or not later.
    pub fn diff_states(&self, from: &str, to: &str) -> Result<(Arc<Dataset>, Arc<Dataset>)> {
        let (fs, _) = split_snapshot(from)?;
        let a = self.snapshot_record(from)?;
        let to_fs = to.split_once('@').map_or(to, |(f, _)| f);
        if to_fs != fs {
            return Err(StoreError::Invalid(format!(
                "'{to}' is neither '{fs}' nor one of its snapshots"
            )));
        }
        if to != fs && self.snapshot_record(to)?.txg <= a.txg {
            return Err(StoreError::Invalid(format!(
                "'{to}' is not later than '{from}'"
            )));
        }
        if to == fs {
            self.sync()?;
        }
        let st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, from)?;
        let rec = &st.catalog.datasets[&id];
        if rec.kind != DatasetKind::Filesystem {
            return Err(StoreError::Invalid(format!(
                "'{fs}' is a volume: diff compares filesystems"
            )));
        }
        let a_root = rec.snapshots[idx].objset;
        let b_root = match to.split_once('@') {
            Some(_) => {
                let (_, j) = self.find_snapshot(&st, to)?;
                rec.snapshots[j].objset
            }
            None => rec.objset,
        };
        Ok((
            self.readonly_dataset(&st, id, from, &a_root)?,
            self.readonly_dataset(&st, id, to, &b_root)?,
        ))
    }
}

/// `Store::promote` in `st`, the commit lock held by the caller; refused,
/// changing nothing, if `clone` is not a clone or has snapshots of the names
/// it would take over.
pub(super) fn promote_in(st: &mut State, clone: &str) -> Result<()> {
    let cid = st
        .catalog
        .by_name(clone)
        .ok_or_else(|| StoreError::NotFound(clone.into()))?
        .id;
    let Some((oid, sname)) = st.catalog.datasets[&cid].origin.clone() else {
        return Err(StoreError::Invalid(format!("'{clone}' is not a clone")));
    };
    let origin = st.catalog.datasets[&oid].clone();
    let idx = origin
        .snapshots
        .iter()
        .position(|s| s.name == sname)
        .ok_or_else(|| StoreError::Invalid(format!("origin snapshot of '{clone}' is missing")))?;
    let moving: Vec<String> = origin.snapshots[..=idx]
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let own: Vec<String> = st.catalog.datasets[&cid]
        .snapshots
        .iter()
        .map(|s| s.name.clone())
        .collect();
    if let Some(dup) = moving.iter().find(|m| own.contains(m)) {
        return Err(StoreError::Exists(format!("{clone}@{dup}")));
    }
    let moved: Vec<_> = origin.snapshots[..=idx].to_vec();
    let cat = &mut st.catalog;
    {
        let o = cat.datasets.get_mut(&oid).unwrap();
        o.snapshots.drain(..=idx);
        o.origin = Some((cid, sname.clone()));
        o.origin_txg = moved[idx].txg;
    }
    {
        let c = cat.datasets.get_mut(&cid).unwrap();
        let mut snaps = moved;
        snaps.append(&mut c.snapshots);
        c.snapshots = snaps;
        c.origin = origin.origin.clone();
        c.origin_txg = origin.origin_txg;
    }
    // Other clones of the moved snapshots now depend on the promoted dataset.
    for d in cat.datasets.values_mut() {
        if let Some((o, n)) = &d.origin {
            if *o == oid && moving.contains(n) && d.id != oid {
                d.origin = Some((cid, n.clone()));
            }
        }
    }
    st.mark_catalog_dirty();
    Ok(())
}
