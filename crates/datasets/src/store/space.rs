//! Space accounting: used (head, dead lists, children at least their
//! reservation), available under quotas and reservations, and the check every
//! write makes before it dirties anything.
//!
//! Invariants: a dataset's used is the sum of what only it holds plus what its
//! children charge; a write is refused (never half-applied) when it could not be
//! committed; the slop reserve keeps room for commits on a full pool.

use crate::catalog::*;
use crate::error::{Result, StoreError};
use crate::store::*;
use std::sync::atomic::Ordering;

/// Space other datasets' unused reservations hold back from dataset `id` (its own
/// and its ancestors' reservations are space it may use).
pub(super) fn reserved_elsewhere(cat: &Catalog, id: u64) -> u64 {
    let mine = cat.ancestry(id);
    // Only datasets with a reservation hold anything back; `used_of` walks a
    // subtree, so skip it for the (usual) ones without one.
    cat.datasets
        .values()
        .filter(|d| !mine.contains(&d.id))
        .map(|d| match num_prop(d, "reservation") {
            0 => 0,
            r => r.saturating_sub(used_of(cat, d.id)),
        })
        .sum()
}

/// used = referenced + what each child charges (at least its reservation).
pub(crate) fn used_of(cat: &Catalog, id: u64) -> u64 {
    used_with(cat, id, &own_used)
}

/// Head, plus what only snapshots hold (the sum of the dead lists).
pub(super) fn own_used(d: &DatasetRecord) -> u64 {
    d.acct.used + d.deadlist_bytes + d.snapshots.iter().map(|s| s.deadlist_bytes).sum::<u64>()
}

/// `own(dataset)` plus, for each child, the larger of its used and its reservation.
pub(super) fn used_with(cat: &Catalog, id: u64, own: &dyn Fn(&DatasetRecord) -> u64) -> u64 {
    own(&cat.datasets[&id])
        + cat
            .children(id)
            .map(|c| used_with(cat, c.id, own).max(num_prop(c, "reservation")))
            .sum::<u64>()
}

/// Space held back so commits (which need new metadata even to free) always fit.
pub fn slop_space(size: u64) -> u64 {
    (size / 32).max(4 << 20).min(size / 4)
}

impl Store {
    /// Space a dataset may still use: the pool's unreserved free space (plus its own
    /// unused reservation), capped by the quotas of it and its ancestors. What
    /// admissions count on (a reservation, a thick volume): frees still
    /// deferred are left out, as they may stay deferred while a scrub or a
    /// send holds frees.
    pub(crate) fn available_in(&self, cat: &Catalog, id: u64) -> u64 {
        self.available_with(cat, id, self.unreserved_free())
    }

    /// `available_in` as `avail` shows it: frees still deferred count. A
    /// write that needs them commits to release them (`Dataset::reserve`),
    /// and an idle pool commits nothing, so without them `avail` stayed near
    /// zero after a big delete until the next write.
    pub(crate) fn available_shown(&self, cat: &Catalog, id: u64) -> u64 {
        self.available_with(cat, id, self.unreserved_free_shown())
    }

    fn available_with(&self, cat: &Catalog, id: u64, free: u64) -> u64 {
        let mut avail = free.saturating_sub(reserved_elsewhere(cat, id));
        for a in cat.ancestry(id) {
            let d = &cat.datasets[&a];
            let q = num_prop(d, "quota");
            if q > 0 {
                avail = avail.min(q.saturating_sub(used_of(cat, a)));
            }
        }
        avail
    }

    /// The pool's free space for datasets, before reservations: usable free
    /// space less slop and dirty data.
    fn unreserved_free(&self) -> u64 {
        let space = self.pool.space();
        let dirty = self.dirty.load(Ordering::Relaxed);
        space
            .usable_free
            .saturating_sub(slop_space(space.size) + dirty)
    }

    /// `unreserved_free` plus frees still deferred (see `available_shown`).
    pub(super) fn unreserved_free_shown(&self) -> u64 {
        self.unreserved_free() + self.pool.deferred_bytes()
    }

    /// Check that `bytes` more may be written to dataset `id`.
    pub(crate) fn check_space(&self, id: u64, bytes: u64) -> Result<()> {
        let st = self.state.lock();
        let cat = &st.catalog;
        let Some(rec) = cat.datasets.get(&id) else {
            return Err(StoreError::NotFound(format!("dataset {id}")));
        };
        // Pending writes cost about their size plus metadata (two copies of indirects).
        let est = bytes + bytes / 8 + 4096;
        let (size, free) = self.pool.space_totals();
        let dirty = self.dirty.load(Ordering::Relaxed);
        let reserved_elsewhere = reserved_elsewhere(cat, id);
        let need = slop_space(size) + reserved_elsewhere + dirty + dirty / 4 + est;
        // Only free space in extents that can hold this dataset's records counts
        // (no gang blocks: a record must be contiguous); metadata needs 16K pieces.
        let blksz = (resolve_recordsize(cat, id) as u64).max(16384);
        let usable = self.pool.usable_free(blksz).min(free);
        if usable < need {
            return Err(StoreError::NoSpace(self.pool.name()));
        }
        for a in cat.ancestry(id) {
            let d = &cat.datasets[&a];
            let q = num_prop(d, "quota");
            if q > 0 {
                let sub_dirty: u64 = cat
                    .subtree(a)
                    .iter()
                    .filter_map(|i| st.handles.get(i))
                    .map(|h| h.objset.dirty_bytes())
                    .sum();
                if used_of(cat, a) + sub_dirty + est > q {
                    return Err(StoreError::Quota(d.name.clone()));
                }
            }
        }
        let _ = rec;
        Ok(())
    }

    /// `used` as users see it (zfs's meaning): what destroying the dataset and
    /// its snapshots and children would free. For a clone that excludes the
    /// blocks it still shares with its origin (born at or before the origin's
    /// txg), found by walking only what was born since (the head's new blocks
    /// and the dead-list entries born after the origin). Space checks keep the
    /// cheaper, conservative `used_of`.
    pub(super) fn used_reported(&self, cat: &Catalog, id: u64) -> u64 {
        used_with(cat, id, &|d| match d.origin_txg {
            0 => own_used(d),
            origin => self
                .clone_own_bytes(d, origin)
                .unwrap_or_else(|_| own_used(d)),
        })
    }

    /// Bytes of clone `d` born after its origin `origin_txg`: in its head and in
    /// its dead lists.
    pub(super) fn clone_own_bytes(&self, d: &DatasetRecord, origin_txg: u64) -> Result<u64> {
        let mut own = crate::snapshot::written_bytes(&self.cache, &d.objset, origin_txg)?;
        for list in std::iter::once(d.deadlist).chain(d.snapshots.iter().map(|s| s.deadlist)) {
            own += crate::snapshot::deadlist_bytes_born_after(&self.mos, list, origin_txg)?;
        }
        Ok(own)
    }
}
