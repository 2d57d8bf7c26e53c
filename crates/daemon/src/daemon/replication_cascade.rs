//! Cascade A -> B -> C: B relays to C a filesystem it receives from A, as zfs
//! does. B takes no snapshot of its own on it: one would be newer than the
//! snapshot B has in common with A, and A's next cycle would refuse B as
//! diverged. Instead each cycle of B's relationship sends the newest snapshot
//! that A's relationship delivered, as an increment from the newest one C has
//! (nothing, if C has it already), held on B with B's `repl:NAME` before the
//! send so that A's retention cannot destroy it under the transfer. C's
//! retention applies B's grid to A's snapshots (their names carry their time:
//! `prune {.., upstream}`); B's copies are pruned by A's relationship only.
//!
//! A filesystem is relayed when a snapshot of it is held by a relationship
//! this appliance does not send it for (`upstream_of`): the hold A's cycles
//! put on the newest common snapshot. Relaying a MySQL set or a tree is
//! refused with one line (each member would need its own upstream, and a set's
//! snapshot is one `mysql snapshot` taken on the first appliance).

use super::replication::hold_tag;
use super::replication_tree::local_datasets;
use super::{se, Daemon};
use cachalot_datasets::Store;
use cachalot_replication::relationship::Relationship;
use std::sync::Arc;

impl Daemon {
    /// The relationship that delivers `fs` here, if any: a `repl:X` hold on
    /// one of its snapshots for an X that is not `rel`, not a push of `fs`
    /// run here and not a pull of `fs` served here (those send from it).
    pub(super) fn upstream_of(
        &self,
        store: &Store,
        fs: &str,
        rel: &str,
    ) -> Result<Option<String>, String> {
        let r = &self.replication;
        for n in store.snapshot_names(fs).map_err(se)? {
            for tag in store.holds(&format!("{fs}@{n}")).map_err(se)? {
                let Some(x) = tag.strip_prefix("repl:") else {
                    continue;
                };
                let sends = |o: &Relationship| local_datasets(o, true).iter().any(|d| d == fs);
                let sends_here = x == rel
                    || r.get(x).is_ok_and(|o| !o.pull && sends(&o))
                    || r.pulled_by.lock().get(x).is_some_and(|p| sends(&p.rel));
                if !sends_here {
                    return Ok(Some(x.to_string()));
                }
            }
        }
        Ok(None)
    }

    /// The upstream relationship if `rel`'s cycle relays (see the module),
    /// refusing what cannot be relayed.
    pub(super) fn relayed(
        &self,
        rel: &Relationship,
        legs: &[Relationship],
        stores: &[Arc<Store>],
    ) -> Result<Option<String>, String> {
        let mut found = None;
        for (leg, store) in legs.iter().zip(stores) {
            if found.is_some() {
                break;
            }
            found = self
                .upstream_of(store, &leg.source, &rel.name)?
                .map(|up| (leg.source.clone(), up));
        }
        let Some((fs, up)) = found else {
            return Ok(None);
        };
        if rel.mysql.is_some() || rel.recursive {
            return Err(format!(
                "'{fs}' is itself the target of relationship '{up}' (hold {}): a cascade relays one filesystem, not a MySQL set or a tree; replicate each filesystem with a relationship of its own, or the set from its first appliance",
                hold_tag(&up)
            ));
        }
        Ok(Some(up))
    }
}

/// The snapshot a relaying cycle sends: the newest of `fs` (all of them
/// came from upstream), refused if there is none yet.
pub(super) fn relayed_snapshot(store: &Store, fs: &str, up: &str) -> Result<String, String> {
    store.snapshot_names(fs).map_err(se)?.pop().ok_or_else(|| {
        format!("'{fs}' has no snapshot from relationship '{up}' yet: nothing to relay")
    })
}
