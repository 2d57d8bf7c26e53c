//! Snapshot holds, as `zfs hold`: a named tag on a snapshot that keeps it from
//! being destroyed (by `destroy`, `destroy -r` of its filesystem, `rollback -r`,
//! or a forced receive) until every tag is released, or the destroy is forced
//! (`destroy -f`). Replication holds the newest snapshot common to both ends of
//! a relationship so no pruning or user destroy can break its chain.
//!
//! Invariants: a hold is the snapshot property `%hold:TAG` (not a user
//! property: never listed or sent), changed durably (committed before the call
//! returns); every path that destroys snapshots checks holds first, before it
//! changes anything.

use crate::catalog::Catalog;
use crate::error::{Result, StoreError};
use crate::store::Store;

const HOLD_PREFIX: &str = "%hold:";

fn check_tag(tag: &str) -> Result<()> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "invalid hold tag '{tag}': use 1 to 128 letters, digits, _ - . :"
        )))
    }
}

/// Refuse if snapshot `snap` of dataset `id` is held; the error names the tags.
pub(crate) fn check_not_held(cat: &Catalog, id: u64, snap: &str) -> Result<()> {
    let rec = &cat.datasets[&id];
    let Some(s) = rec.snapshots.iter().find(|s| s.name == snap) else {
        return Ok(());
    };
    let tags: Vec<&str> = s
        .props
        .keys()
        .filter_map(|k| k.strip_prefix(HOLD_PREFIX))
        .collect();
    if tags.is_empty() {
        return Ok(());
    }
    // The commands with the real tags: a destroy of the dataset (or a
    // receive -F) cannot force a hold away, only these can.
    let full = format!("{}@{snap}", rec.name);
    let release: Vec<String> = tags
        .iter()
        .map(|t| format!("`cachalot release {t} {full}`"))
        .collect();
    Err(StoreError::Busy(format!(
        "snapshot '{full}' is held by {}: release it first ({}), or destroy that snapshot with `cachalot destroy -f {full}`",
        tags.join(", "),
        release.join(", ")
    )))
}

impl Store {
    /// Put hold `tag` on snapshot `full` (FS@SNAP).
    pub fn hold(&self, full: &str, tag: &str) -> Result<()> {
        self.set_hold(full, tag, true)
    }

    /// Remove hold `tag` from snapshot `full`.
    pub fn release(&self, full: &str, tag: &str) -> Result<()> {
        self.set_hold(full, tag, false)
    }

    fn set_hold(&self, full: &str, tag: &str, on: bool) -> Result<()> {
        self.check_live()?;
        check_tag(tag)?;
        {
            let mut st = self.state.lock();
            let (id, idx) = self.find_snapshot(&st, full)?;
            let props = &mut st.catalog.datasets.get_mut(&id).expect("found").snapshots[idx].props;
            let key = format!("{HOLD_PREFIX}{tag}");
            match (on, props.contains_key(&key)) {
                (true, true) => {
                    return Err(StoreError::Invalid(format!(
                        "'{full}' already has a hold named '{tag}'"
                    )))
                }
                (false, false) => {
                    return Err(StoreError::Invalid(format!(
                        "'{full}' has no hold named '{tag}'"
                    )))
                }
                (true, false) => {
                    props.insert(key, "1".into());
                }
                (false, true) => {
                    props.remove(&key);
                }
            }
            st.mark_catalog_dirty();
        }
        self.sync()?;
        Ok(())
    }

    /// The hold tags of snapshot `full`, sorted.
    pub fn holds(&self, full: &str) -> Result<Vec<String>> {
        let st = self.state.lock();
        let (id, idx) = self.find_snapshot(&st, full)?;
        Ok(st.catalog.datasets[&id].snapshots[idx]
            .props
            .keys()
            .filter_map(|k| k.strip_prefix(HOLD_PREFIX))
            .map(String::from)
            .collect())
    }

    /// `destroy -f FS@SNAP`: release every hold, then destroy.
    pub fn destroy_snapshot_forced(&self, full: &str) -> Result<()> {
        for tag in self.holds(full)? {
            self.release(full, &tag)?;
        }
        self.destroy_snapshot(full)
    }

    /// Refuse unless no snapshot of `fs` is held (before replacing it whole).
    pub(crate) fn check_no_holds(&self, fs: &str) -> Result<()> {
        let st = self.state.lock();
        let Some(rec) = st.catalog.by_name(fs) else {
            return Ok(());
        };
        for s in &rec.snapshots {
            check_not_held(&st.catalog, rec.id, &s.name)?;
        }
        Ok(())
    }
}
