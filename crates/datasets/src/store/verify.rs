//! Executable invariants of the dataset layer. Debug builds (and every test, which
//! runs with the `ci` profile) check them after each commit.
//!
//! The catalog: ids are the keys and below `next_id`; names are unique; exactly
//! one root, named after the pool; every other dataset's parent exists and its
//! name is the parent's plus one component; snapshots are uniquely named, in txg
//! order, and the head's `prev_snap_txg` is the newest snapshot's txg (a clone
//! without snapshots: its origin's); a clone's origin snapshot exists. The handles:
//! one per catalog dataset, under its name.
//!
//! `verify_blocks` (tests, at quiet points) walks every tree: each head's
//! `referenced` is the size of its tree, and the pool's allocated bytes are the
//! distinct blocks reachable from the meta object set, every head and snapshot,
//! the intent logs and the space maps, plus the frees still deferred.

use crate::catalog::Catalog;
use crate::store::Store;
use cachalot_pool::BlkPtr;
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

impl Store {
    /// Commit, then check the object-set accounting against the trees on disk
    /// and that every allocated byte is reachable exactly once or deferred. Walks
    /// every block: for tests, with no writer or fsync running.
    pub fn verify_blocks(&self) -> std::result::Result<(), String> {
        self.sync().map_err(|e| e.to_string())?;
        let _one = self.commit_lock.lock();
        let mut heads: Vec<(String, u64, BlkPtr)> = Vec::new();
        let mut roots = vec![self.pool.uberblock().mos];
        let mut seen: HashSet<(u32, u64)> = HashSet::new();
        let mut reachable = 0u64;
        {
            let st = self.state.lock();
            for (id, rec) in &st.catalog.datasets {
                let h = &st.handles[id];
                heads.push((rec.name.clone(), rec.acct.used, h.objset.root_bp()));
                roots.push(h.objset.root_bp());
                roots.extend(rec.snapshots.iter().map(|s| s.objset));
                for z in h.objset.zil().blocks() {
                    if seen.insert((z.vdev, z.offset)) {
                        reachable += z.asize as u64;
                    }
                }
            }
        }
        let walk_err = |e: cachalot_pool::PoolError| format!("walking the trees: {e}");
        for (name, referenced, root) in &heads {
            let mut sum = 0u64;
            cachalot_objects::traverse(&self.cache, root, &mut |bp| {
                sum += bp.asize_total();
                true
            })
            .map_err(walk_err)?;
            if sum != *referenced {
                return Err(format!(
                    "'{name}': referenced is {referenced} but its tree holds {sum} bytes"
                ));
            }
        }
        for root in &roots {
            // A block already seen roots a subtree already counted (snapshots
            // and clones share subtrees).
            cachalot_objects::traverse(&self.cache, root, &mut |bp| {
                let new = seen.insert((bp.dvas[0].vdev, bp.dvas[0].offset));
                if new {
                    reachable += bp.asize_total();
                }
                new
            })
            .map_err(walk_err)?;
        }
        let sm = self.pool.spacemap_blocks().map_err(walk_err)?;
        reachable += sm.iter().map(|bp| bp.asize_total()).sum::<u64>();
        // Intent-log blocks on a log device are reachable and deferred like
        // any other: count that device's allocations too.
        let allocated = self.pool.allocated_all_vdevs();
        let deferred = self.pool.deferred_bytes();
        if allocated != reachable + deferred {
            return Err(format!(
                "allocated {allocated} bytes, but {reachable} are reachable and {deferred} deferred"
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
