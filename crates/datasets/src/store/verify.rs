//! Executable invariants of the dataset layer. Debug builds (and every test, which
//! runs with the `ci` profile) check them after each commit.
//!
//! The catalog: ids are the keys and below `next_id`; names are unique; exactly
//! one root, named after the pool; every other dataset's parent exists and its
//! name is the parent's plus one component; snapshots are uniquely named, in txg
//! order, and the head's `prev_snap_txg` is the newest snapshot's txg (a clone
//! without snapshots: its origin's); a clone's origin snapshot exists. The handles:
//! one per catalog dataset, under its name.

use crate::catalog::Catalog;
use crate::store::Store;
use std::collections::HashSet;

impl Store {
    /// Check the invariants of the catalog, the open handles and the pool.
    pub fn verify(&self) -> std::result::Result<(), String> {
        self.verify_catalog()?;
        self.pool.verify()
    }

    /// The catalog and handle part of `verify` (the pool checks itself at commit).
    pub(crate) fn verify_catalog(&self) -> std::result::Result<(), String> {
        let st = self.state.lock();
        verify_catalog(&st.catalog, &self.pool.name())?;
        for (id, rec) in &st.catalog.datasets {
            match st.handles.get(id) {
                None => return Err(format!("dataset '{}' has no handle", rec.name)),
                Some(h) if h.name() != rec.name => {
                    return Err(format!(
                        "dataset {id} is '{}' in the catalog but its handle says '{}'",
                        rec.name,
                        h.name()
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some(id) = st
            .handles
            .keys()
            .find(|id| !st.catalog.datasets.contains_key(id))
        {
            return Err(format!(
                "a handle names dataset {id}, which the catalog lacks"
            ));
        }
        Ok(())
    }
}

/// Check a catalog's structure (see the module comment).
pub(crate) fn verify_catalog(cat: &Catalog, pool: &str) -> std::result::Result<(), String> {
    let mut names = HashSet::new();
    let mut roots = 0;
    for (id, d) in &cat.datasets {
        let name = &d.name;
        if d.id != *id || *id >= cat.next_id {
            return Err(format!(
                "'{name}': id {} under key {id}, next id {}",
                d.id, cat.next_id
            ));
        }
        if !names.insert(name.as_str()) {
            return Err(format!("'{name}' names two datasets"));
        }
        match d.parent {
            None => {
                roots += 1;
                if name != pool {
                    return Err(format!("root dataset '{name}' in pool '{pool}'"));
                }
            }
            Some(p) => {
                let Some(parent) = cat.datasets.get(&p) else {
                    return Err(format!("'{name}': parent {p} does not exist"));
                };
                let leaf = name.strip_prefix(&format!("{}/", parent.name));
                if leaf.is_none_or(|l| l.is_empty() || l.contains('/')) {
                    return Err(format!("'{name}' is not a child of '{}'", parent.name));
                }
            }
        }
        let mut snaps = HashSet::new();
        for (i, s) in d.snapshots.iter().enumerate() {
            if !snaps.insert(s.name.as_str()) {
                return Err(format!("'{name}@{}' names two snapshots", s.name));
            }
            if i > 0 && d.snapshots[i - 1].txg >= s.txg {
                return Err(format!("snapshots of '{name}' are not in txg order"));
            }
        }
        let newest = d.snapshots.last().map_or(d.origin_txg, |s| s.txg);
        if d.prev_snap_txg != newest {
            return Err(format!(
                "'{name}': prev_snap_txg {} but the newest snapshot is of txg {newest}",
                d.prev_snap_txg
            ));
        }
        if let Some((o, snap)) = &d.origin {
            let ok = cat
                .datasets
                .get(o)
                .is_some_and(|od| od.snapshots.iter().any(|s| &s.name == snap));
            if !ok {
                return Err(format!(
                    "clone '{name}': origin snapshot {o}@{snap} is gone"
                ));
            }
        }
    }
    if roots != 1 {
        return Err(format!("{roots} root datasets"));
    }
    Ok(())
}
