//! Volume rules that go beyond plain properties: what a `volsize` change means.
//!
//! Invariants:
//! - volsize stays a multiple of volblocksize (checked by `set_prop`).
//! - A volume never shrinks through `set volsize`: the bytes past the new end
//!   hold a file system's data that a client still has mapped, and ZFS's own
//!   shrink has cost users their file systems. Shrinking is a deliberate
//!   copy to a smaller volume (or destroy and create).
//! - A thick volume (reservation equal to its volsize) stays thick across a grow:
//!   the reservation grows with it, and a grow the pool cannot reserve is refused
//!   before anything changes. A sparse volume, or one whose reservation was set
//!   to something else by hand, keeps its reservation.
//! - The `volsize` property equals the size of the volume's data object: a
//!   clone, a rollback and a receive take the size the snapshot had
//!   (`sync_volsize` after each).

use crate::catalog::{Catalog, DatasetKind, DatasetRecord};
use crate::dataset::OTYPE_VOLUME;
use crate::error::{Result, StoreError};
use crate::props;
use crate::store::{used_of, Store};

impl Store {
    /// Check a volsize change of `rec` to `new` bytes; returns the reservation
    /// to set with it (thick volumes), if any.
    pub(crate) fn volsize_change(
        &self,
        cat: &Catalog,
        rec: &DatasetRecord,
        new: u64,
    ) -> Result<Option<u64>> {
        let num = |p: &str| rec.props.get(p).and_then(|v| v.parse::<u64>().ok());
        let old = num("volsize").unwrap_or(0);
        if new < old {
            return Err(StoreError::Invalid(format!(
                "cannot shrink volume '{}' from {} to {}: the data past the new end would be lost (copy it to a smaller volume instead)",
                rec.name,
                props::format_size(old),
                props::format_size(new)
            )));
        }
        let Some(res) = num("reservation").filter(|r| *r == old && new > old) else {
            return Ok(None);
        };
        // Available to this dataset counts what its own reservation holds unused.
        let used = used_of(cat, rec.id);
        let avail = self.available_in(cat, rec.id) + res.saturating_sub(used);
        if new > avail + used {
            return Err(StoreError::NoSpace(self.name()));
        }
        Ok(Some(new))
    }

    /// Set volume `name`'s volsize property to the size of its data object (the
    /// truth after a clone, rollback or receive). Not a volume: nothing to do.
    /// Returns whether the property changed (the catalog then needs a commit).
    pub(crate) fn sync_volsize(&self, name: &str) -> Result<bool> {
        let ds = self.dataset(name)?;
        if ds.kind() != DatasetKind::Volume {
            return Ok(false);
        }
        let mut size = None;
        for id in ds.objset().list_objects()? {
            let info = ds.objset().info(id)?;
            if info.otype == OTYPE_VOLUME {
                size = Some(info.size);
                break;
            }
        }
        let Some(size) = size else {
            return Ok(false);
        };
        let mut st = self.state.lock();
        let id = ds.id;
        if let Some(rec) = st.catalog.datasets.get_mut(&id) {
            if rec.props.get("volsize").map(String::as_str) != Some(&size.to_string()) {
                rec.props.insert("volsize".into(), size.to_string());
                st.mark_catalog_dirty();
                return Ok(true);
            }
        }
        Ok(false)
    }
}
