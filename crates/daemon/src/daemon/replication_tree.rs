//! The legs of a replication cycle: one per replicated dataset. A plain
//! relationship has one; a MySQL set one per member; a recursive one
//! (`create -r`) one per dataset of the tree under its source, as the tree
//! is at the start of the cycle, parent first.
//!
//! Invariants of a recursive relationship:
//! - the members' record (`Status::members`) only grows: a member destroyed
//!   on the source is marked gone and its copy on the target is left alone
//!   (with its hold), never destroyed by a cycle;
//! - a member new on the source has no copy on the target yet, so its first
//!   leg is a full send (the parent's leg, earlier in the same cycle, has
//!   made the parent it is received under);
//! - a member's record moves to the cycle's snapshot only when its own leg
//!   has completed, so a cut cycle shows which members are behind.

use super::{se, Daemon};
use cachalot_datasets::Store;
use cachalot_replication::relationship::{tree_target, MemberStatus, Relationship, Status};
use serde_json::{json, Value};
use std::sync::Arc;

/// What a cycle got through, kept whether it completes or not.
#[derive(Default)]
pub(super) struct Progress {
    /// (source, target filesystem) of each leg, in order.
    pub legs: Vec<(String, String)>,
    /// How many legs (from the first) have their snapshot on the target.
    pub done: usize,
    /// The cycle's snapshot, once taken.
    pub snapshot: Option<String>,
}

impl Progress {
    /// As a pull's source tells it to the puller in `pull_done`.
    pub(super) fn to_json(&self) -> Value {
        json!({ "legs": self.legs, "done": self.done, "snapshot": self.snapshot })
    }

    /// What a pull's source told in `pull_done` (nothing, from an older one).
    pub(super) fn from_json(v: &Value) -> Progress {
        Progress {
            legs: serde_json::from_value(v["legs"].clone()).unwrap_or_default(),
            done: v["done"].as_u64().unwrap_or(0) as usize,
            snapshot: v["snapshot"].as_str().map(str::to_string),
        }
    }
}

impl Daemon {
    /// The legs of one cycle of `rel`, each a copy of it with its own source
    /// and target filesystem, with the store of its source (which must exist).
    pub(super) fn legs(
        &self,
        rel: &Relationship,
    ) -> Result<Vec<(Relationship, Arc<Store>)>, String> {
        let pairs = if rel.recursive {
            let store = self.ds_store(&rel.source)?;
            let mut members: Vec<String> = store
                .list(Some(&rel.source), true)
                .map_err(se)?
                .into_iter()
                .map(|d| d.name)
                .collect();
            // A parent's name is a prefix of its children's: sorted, every
            // parent comes before its children.
            members.sort();
            members
                .into_iter()
                .filter_map(|m| Some((tree_target(&rel.source, &m, &rel.target_fs)?, m)))
                .map(|(t, m)| (m, t))
                .collect()
        } else {
            rel.pairs()
        };
        let mut legs = Vec::new();
        for (source, target_fs) in pairs {
            let store = self.ds_store(&source)?;
            store.dataset(&source).map_err(se)?;
            let leg = Relationship {
                source,
                target_fs,
                ..rel.clone()
            };
            legs.push((leg, store));
        }
        Ok(legs)
    }
}

/// (source, target filesystem) of every leg of `rel` known without listing
/// the source: each member of a MySQL set, each member of a recursive
/// relationship seen by a cycle and still on the source.
pub(super) fn known_pairs(rel: &Relationship) -> Vec<(String, String)> {
    let mut pairs = rel.pairs();
    if rel.recursive {
        let members = rel.status.members.iter().filter(|m| !m.gone);
        pairs.extend(members.map(|m| (m.source.clone(), m.target.clone())));
        pairs.sort();
        pairs.dedup();
    }
    pairs
}

/// The datasets of `rel` on one side (the sources with `source_side`, else
/// the targets), where its holds are.
pub(super) fn local_datasets(rel: &Relationship, source_side: bool) -> Vec<String> {
    let pairs = known_pairs(rel).into_iter();
    pairs
        .map(|(s, t)| if source_side { s } else { t })
        .collect()
}

/// "member 'FS': E" for a member of a recursive relationship (errors name
/// the dataset they are about); other relationships' errors already do.
pub(super) fn member_error(rel: &Relationship, member: &str, e: String) -> String {
    if rel.recursive {
        format!("member '{member}': {e}")
    } else {
        e
    }
}

/// The members of recursive `rel` that were replicated before and are not
/// in this cycle's `legs` any more (destroyed on the source), as messages.
pub(super) fn gone_messages(rel: &Relationship, legs: &[(String, String)]) -> Vec<String> {
    rel.status
        .members
        .iter()
        .filter(|m| !m.gone && !legs.iter().any(|(s, _)| *s == m.source))
        .map(|m| {
            format!(
                "member '{}' was destroyed on the source; its copy '{}' is kept on the target",
                m.source, m.target
            )
        })
        .collect()
}

/// Record what a cycle of a recursive relationship got through in its
/// status: completed legs move to the cycle's snapshot (taken at `time`),
/// members seen for the first time are added, missing ones marked gone.
pub(super) fn record_members(status: &mut Status, p: &Progress, time: Option<u64>) {
    if p.legs.is_empty() {
        // The cycle stopped before it listed the tree: nothing is known.
        return;
    }
    for m in &mut status.members {
        m.gone = !p.legs.iter().any(|(s, _)| *s == m.source);
    }
    for (i, (source, target)) in p.legs.iter().enumerate() {
        let pos = match status.members.iter().position(|m| m.source == *source) {
            Some(pos) => pos,
            None => {
                status.members.push(MemberStatus {
                    source: source.clone(),
                    target: target.clone(),
                    ..Default::default()
                });
                status.members.len() - 1
            }
        };
        let m = &mut status.members[pos];
        if i < p.done {
            m.last_snapshot = p.snapshot.clone();
            m.last_snapshot_time = time;
        }
    }
    status.members.sort_by(|a, b| a.source.cmp(&b.source));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(legs: &[&str], done: usize) -> Progress {
        Progress {
            legs: legs
                .iter()
                .map(|s| (s.to_string(), s.replace("src", "dst")))
                .collect(),
            done,
            snapshot: Some(format!("s{done}")),
        }
    }

    #[test]
    fn members_move_when_their_leg_completes_and_gone_ones_stay() {
        let mut st = Status::default();
        record_members(&mut st, &progress(&["t/src", "t/src/a"], 2), Some(10));
        assert_eq!(st.members.len(), 2);
        assert!(st.members.iter().all(|m| m.last_snapshot_time == Some(10)));
        // A cut cycle: the new child is seen, only the parent completed.
        record_members(
            &mut st,
            &progress(&["t/src", "t/src/a", "t/src/b"], 1),
            Some(20),
        );
        let times: Vec<_> = st.members.iter().map(|m| m.last_snapshot_time).collect();
        assert_eq!(times, [Some(20), Some(10), None]);
        // `a` destroyed on the source: kept in the record, marked gone.
        record_members(&mut st, &progress(&["t/src", "t/src/b"], 2), Some(30));
        let a = &st.members[1];
        assert!(a.source == "t/src/a" && a.gone && a.last_snapshot_time == Some(10));
        assert!(!st.members[2].gone);
        // Nothing listed (the cycle failed before): nothing changes.
        let before = st.clone();
        record_members(&mut st, &Progress::default(), Some(40));
        assert_eq!(st, before);
    }

    #[test]
    fn a_pulls_progress_crosses_the_link_whole() {
        let p = progress(&["t/src", "t/src/a"], 1);
        let back = Progress::from_json(&serde_json::from_str(&p.to_json().to_string()).unwrap());
        assert_eq!(
            (back.legs, back.done, back.snapshot),
            (p.legs, 1, p.snapshot)
        );
        // An older source tells nothing: nothing is known.
        let none = Progress::from_json(&Value::Null);
        assert!(none.legs.is_empty() && none.done == 0 && none.snapshot.is_none());
    }

    #[test]
    fn a_pull_reaches_only_its_tree() {
        use super::super::replication_serve::in_pull;
        assert!(in_pull("t/dst", false, "t/dst"));
        assert!(!in_pull("t/dst", false, "t/dst/a"));
        assert!(in_pull("t/dst", true, "t/dst/a/g"));
        for other in ["t/dst2", "t/ds", "t", "t/other", ""] {
            assert!(!in_pull("t/dst", true, other), "{other}");
        }
    }
}
