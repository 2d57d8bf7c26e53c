//! `replication reverse NAME --address ADDR [-f]`: failback after a break.
//!
//! Run on the old source A of a broken relationship R (A:FS -> B:TFS). B's
//! TFS has been used on its own since the break; reversing makes B the
//! source of a new relationship R (B:TFS -> A:FS) that starts from the newest
//! snapshot both sides have, so only what B wrote since is sent.
//!
//! A MySQL set is reversed after `mysql failover R` on B: what B serves is
//! then a clone of the replicated set (B recorded it with its server in the
//! failover mark). B promotes each clone, so it owns the set's snapshots up to
//! the one it was cloned from, which A also has: the reversed relationship
//! replicates the clones (quiesced through the failover server) to A's
//! members from that snapshot. A must not run its own server then: its
//! members are rolled back (only with -f) and must be unmounted.
//!
//! Invariants:
//! - only a broken relationship (a MySQL set: failed over on B) is reversed
//!   (two writers otherwise);
//! - what A loses (its snapshots newer than the common one, its writes since)
//!   is listed, and without `force` nothing is changed;
//! - A is rolled back before B adopts R, so a reverse that fails half-way is
//!   retried by running it again (the rollback is then a no-op);
//! - the reversed relationship keeps R's name, so its hold tag `repl:R`
//!   already holds the common snapshot on both sides (a promote moves the
//!   hold with the snapshot): no window in which retention could destroy the
//!   base of the first reversed cycle;
//! - adopting R clears B's failover mark (B is R's source from then on);
//! - B pins A's key for ADDR only from a request that arrived over A's
//!   authenticated link (the key B already paired with).

use super::replication::hold_tag;
use super::replication_serve::fs_state;
use super::{log, se, Daemon, OpResult};
use crate::proto::validate_dataset_name as validate_fs;
use cachalot_datasets::Store;
use cachalot_replication::link::Link;
use cachalot_replication::relationship::{self, MysqlSet, Relationship};
use cachalot_replication::retention;
use serde_json::{json, Value};
use std::sync::Arc;

/// What rolling `fs` back to a common snapshot destroys: the newest snapshot
/// of `fs` for which `is_common(guid)` holds, and the snapshots newer than it
/// plus the bytes written since, listed by name.
pub(super) fn rollback_plan(
    store: &Store,
    fs: &str,
    is_common: impl Fn(u64) -> bool,
) -> Result<(Option<String>, Vec<String>), String> {
    // Commit what is still dirty, so `written` counts every write that a
    // rollback would destroy (found in the test: an unsynced write was
    // not listed).
    store.sync().map_err(se)?;
    Ok(plan_rollback(fs, &fs_state(store, fs)?, is_common))
}

/// `rollback_plan` of `fs` as its state answer `ours` (`fs_state`, here or
/// on a peer) shows it.
pub(super) fn plan_rollback(
    fs: &str,
    ours: &Value,
    is_common: impl Fn(u64) -> bool,
) -> (Option<String>, Vec<String>) {
    let mut common = None;
    let mut lost = Vec::new();
    for s in ours["snapshots"].as_array().into_iter().flatten() {
        let n = s["name"].as_str().unwrap_or("?");
        if is_common(s["guid"].as_u64().unwrap_or(0)) {
            common = Some(n.to_string());
            lost.clear();
        } else {
            lost.push(format!("{fs}@{n}"));
        }
    }
    let written = ours["written"].as_u64().unwrap_or(0);
    if let (Some(c), true) = (&common, written > 0) {
        lost.push(format!("{written} bytes written to {fs} since '{fs}@{c}'"));
    }
    (common, lost)
}

/// A failover set `live` (clones on the appliance `on`: "here" or "on
/// HOST:PORT") replicated back to `first` must land on the set's members
/// `theirs`, in order (the reversed cycles send each member next to the
/// first, by name).
pub(super) fn check_set_lands(
    live: &[String],
    on: &str,
    first: &str,
    theirs: &[String],
) -> Result<(), String> {
    let back = relationship::member_targets(live, first)?;
    if back.iter().map(|(_, t)| t).ne(theirs.iter()) {
        let to: Vec<&str> = back.iter().map(|(_, t)| t.as_str()).collect();
        return Err(format!(
            "the failover set {} {on} would replicate back to {}, not to the set's members {}: create a relationship instead",
            live.join(","),
            to.join(","),
            theirs.join(",")
        ));
    }
    Ok(())
}

/// One dataset of this side to roll back (reverse, or a pull's resync).
pub(super) struct Rollback {
    pub store: Arc<Store>,
    pub fs: String,
    pub common: String,
    pub lost: Vec<String>,
}

impl Daemon {
    pub(super) fn repl_reverse(&self, name: &str, address: Option<&str>, force: bool) -> OpResult {
        let r = &self.replication;
        let lock = r.cycle_lock(name);
        let _cycle = lock.lock();
        let rel = r.get(name)?;
        let ctx = |e: String| format!("replication {name}: {e}");
        if rel.recursive {
            return Err(ctx("reverse of a recursive relationship is not supported yet: create a recursive relationship on this side's target toward this appliance".into()));
        }
        if rel.pull {
            return self.reverse_pull(&rel, address, force);
        }
        let address = address.ok_or_else(|| {
            ctx("reverse needs --address HOST:PORT: this appliance's replication listener as the target reaches it".into())
        })?;
        // ADDR is how B reaches this appliance's replication listener.
        relationship::parse_target(&format!("{address}/{}", rel.source)).map_err(|_| {
            ctx(format!(
                "invalid address '{address}': use HOST:PORT of this appliance's replication listener as {} reaches it",
                rel.target_addr
            ))
        })?;
        let mut link = self.connect_peer(&rel.target_addr).map_err(ctx)?;
        let plan = match &rel.mysql {
            Some(m) => self.plan_set_reverse(&rel, m, &mut link),
            None => self.plan_reverse(&rel, &mut link),
        }
        .map_err(ctx)?;
        let lost: Vec<String> = plan.iter().flat_map(|p| p.lost.clone()).collect();
        let c = plan[0].common.clone();
        if !lost.is_empty() && !force {
            let what: Vec<&str> = plan.iter().map(|p| p.fs.as_str()).collect();
            return Err(ctx(format!(
                "reverse would destroy here: {}; run `cachalot replication reverse -f --address {address} {name}` to roll '{}' back to '{c}'",
                lost.join(", "),
                what.join("', '")
            )));
        }
        for p in plan.iter().filter(|p| !p.lost.is_empty()) {
            p.store
                .rollback(&format!("{}@{}", p.fs, p.common), true)
                .map_err(|e| ctx(se(e)))?;
            log(format!(
                "replication {name}: rolled '{}' back to '{}' for reverse (lost: {})",
                p.fs,
                p.common,
                p.lost.join(", ")
            ));
        }
        let source = match &rel.mysql {
            Some(_) => self.failover_members(&mut link, name).map_err(ctx)?.0[0].clone(),
            None => rel.target_fs.clone(),
        };
        link.request(&json!({
            "op": "adopt",
            "name": name,
            "fs": source,
            "target": format!("{address}/{}", rel.source),
            "schedule": rel.schedule,
            "keep": rel.keep,
            "bwlimit": rel.bwlimit,
            "common": c,
            "failover_set": rel.mysql.is_some(),
        }))
        .map_err(ctx)?;
        // The holds stay: the reversed relationship has the same name.
        r.remove(name)?;
        let source = format!("{}/{source}", rel.target_addr);
        log(format!(
            "replication {name}: reversed: {source} now replicates to {address}/{} from '{c}'",
            rel.source
        ));
        Ok(json!({
            "common": c,
            "destroyed": lost,
            "source": source,
            "target": format!("{address}/{}", rel.source),
        }))
    }

    /// A one-dataset reverse: this side goes back to the newest snapshot the
    /// target has too.
    fn plan_reverse(&self, rel: &Relationship, link: &mut Link) -> Result<Vec<Rollback>, String> {
        if !rel.broken {
            return Err(format!(
                "the relationship is live: break it first (cachalot replication break {}) so that {} is the only writer",
                rel.name,
                rel.target()
            ));
        }
        let theirs = link.request(&json!({ "op": "state", "fs": rel.target_fs }))?;
        if !theirs["exists"].as_bool().unwrap_or(false) {
            return Err(format!(
                "target {} does not exist: nothing to reverse",
                rel.target()
            ));
        }
        let tguids = super::replication_cycle::snapshot_guids(&theirs);
        let store = self.ds_store(&rel.source)?;
        let (common, lost) = rollback_plan(&store, &rel.source, |g| tguids.contains(&g))?;
        let Some(common) = common else {
            return Err(format!(
                "'{}' has no snapshot in common with target {}: nothing to start the reversed relationship from",
                rel.source,
                rel.target()
            ));
        };
        Ok(vec![Rollback {
            store,
            fs: rel.source.clone(),
            common,
            lost,
        }])
    }

    /// A MySQL set's reverse: each member goes back to the snapshot B's
    /// failover clone of it was made from.
    fn plan_set_reverse(
        &self,
        rel: &Relationship,
        m: &MysqlSet,
        link: &mut Link,
    ) -> Result<Vec<Rollback>, String> {
        let (live, guids) = self.failover_members(link, &rel.name)?;
        // The reversed relationship sends B's members next to this side's
        // first one, by name: they must land on this set's members.
        let on = format!("on {}", rel.target_addr);
        check_set_lands(&live, &on, &rel.source, &m.members)?;
        let mut plan = Vec::new();
        for ((fs, origin), clone) in m.members.iter().zip(&guids).zip(&live) {
            let store = self.ds_store(fs)?;
            let (common, lost) = rollback_plan(&store, fs, |g| g == *origin)?;
            let Some(common) = common else {
                return Err(format!(
                    "'{fs}' has no snapshot of the set '{clone}' on {} was cloned from: nothing to start the reversed relationship from",
                    rel.target_addr
                ));
            };
            plan.push(Rollback {
                store,
                fs: fs.clone(),
                common,
                lost,
            });
        }
        Ok(plan)
    }

    /// The set `mysql failover NAME` started on the peer: its members and,
    /// for each, the guid of the snapshot it was cloned from.
    fn failover_members(
        &self,
        link: &mut Link,
        name: &str,
    ) -> Result<(Vec<String>, Vec<u64>), String> {
        let fo = link.request(&json!({ "op": "failover_set", "name": name }))?;
        let rows = fo["members"].as_array().cloned().unwrap_or_default();
        let mut members = Vec::new();
        let mut guids = Vec::new();
        for row in &rows {
            let fs = row["fs"]
                .as_str()
                .ok_or("peer's failover set without 'fs'")?;
            validate_fs(fs)?;
            members.push(fs.to_string());
            guids.push(
                row["guid"]
                    .as_u64()
                    .ok_or("peer's failover set without 'guid'")?,
            );
        }
        if members.is_empty() {
            return Err("the peer's failover set has no members".into());
        }
        Ok((members, guids))
    }

    /// Peer request `failover_set {name}`: the set `mysql failover NAME`
    /// started here, each member with the guid of the snapshot it was cloned
    /// from (after a promote, by a reverse that did not finish: the one it
    /// holds for NAME).
    pub(super) fn serve_failover_set(&self, req: &Value) -> Result<Value, String> {
        let name = req["name"].as_str().ok_or("request without 'name'")?;
        relationship::check_name(name)?;
        let mark = self.replication.broken_here(name).ok_or_else(|| {
            format!("'{name}' was not failed over on this appliance (no `cachalot mysql failover {name}` here): nothing to reverse")
        })?;
        let live = mark.live.ok_or_else(|| {
            format!("the failover of '{name}' here started no server: nothing to reverse")
        })?;
        let mut rows = Vec::new();
        for fs in &live.members {
            let store = self.ds_store(fs)?;
            let origin = store
                .get_props(fs, Some(&["origin".to_string()]))
                .map_err(se)?
                .first()
                .map(|r| r.raw.clone())
                .filter(|o| o.contains('@'));
            let base = match origin {
                Some(o) => o,
                None => self.held_snapshot(&store, fs, name)?,
            };
            rows.push(json!({ "fs": fs, "guid": store.snapshot_guid(&base).map_err(se)? }));
        }
        Ok(json!({ "members": rows }))
    }

    /// The snapshot of `fs` held for relationship `name` (FS@SNAP).
    fn held_snapshot(&self, store: &Store, fs: &str, name: &str) -> Result<String, String> {
        let tag = hold_tag(name);
        for n in store.snapshot_names(fs).map_err(se)? {
            let full = format!("{fs}@{n}");
            if store.holds(&full).map_err(se)?.contains(&tag) {
                return Ok(full);
            }
        }
        Err(format!(
            "'{fs}' is neither a clone nor holds a snapshot of relationship '{name}'"
        ))
    }

    /// The target side of `reverse`: take over relationship `name` as its
    /// source, toward the peer `peer_fp` that asked, at the address it gave.
    /// With `failover_set`, the source is the MySQL set `mysql failover`
    /// started here, its clones promoted so that they own the common snapshot.
    pub(super) fn answer_adopt(&self, req: &Value, peer_fp: &str) -> Result<Value, String> {
        let name = req["name"].as_str().ok_or("request without 'name'")?;
        relationship::check_name(name)?;
        let fs = req["fs"].as_str().ok_or("request without 'fs'")?;
        validate_fs(fs)?;
        let target = req["target"].as_str().ok_or("request without 'target'")?;
        let (target_addr, target_fs) = relationship::parse_target(target)?;
        validate_fs(&target_fs)?;
        let keep = req["keep"].as_str().ok_or("request without 'keep'")?;
        retention::parse_keep(keep)?;
        let schedule = req["schedule"]
            .as_u64()
            .filter(|&s| s >= relationship::MIN_SCHEDULE)
            .ok_or("request without a valid 'schedule'")?;
        let common = req["common"].as_str().ok_or("request without 'common'")?;
        let r = &self.replication;
        let mysql = if req["failover_set"].as_bool().unwrap_or(false) {
            let live = r
                .broken_here(name)
                .and_then(|b| b.live)
                .filter(|l| l.members[0] == fs)
                .ok_or_else(|| {
                    format!("'{fs}' is not the set `mysql failover {name}` started here")
                })?;
            for m in &live.members {
                self.promote_for_reverse(m, common)?;
            }
            Some(live)
        } else {
            self.ds_store(fs)?.dataset(fs).map_err(se)?;
            None
        };
        let mut rel = Relationship {
            name: name.to_string(),
            source: fs.to_string(),
            target_addr: target_addr.clone(),
            target_fs,
            schedule,
            keep: keep.to_string(),
            bwlimit: req["bwlimit"].as_u64().filter(|&b| b > 0),
            paused: false,
            broken: false,
            status: Default::default(),
            mysql,
            pull: false,
            recursive: false,
        };
        rel.status.last_snapshot = Some(common.to_string());
        r.pin(peer_fp, Some(&target_addr))?;
        r.insert(rel)?;
        if r.set_broken_here(name, None)? {
            log(format!(
                "replication {name}: failover mark cleared (reversed)"
            ));
        }
        log(format!(
            "replication {name}: adopted (reversed): '{fs}' now replicates to {target}"
        ));
        Ok(Value::Null)
    }

    /// Promote failover clone `fs` (unless a retried reverse already did), so
    /// that it owns snapshot `common`, the base of the reversed cycles.
    pub(super) fn promote_for_reverse(&self, fs: &str, common: &str) -> Result<(), String> {
        let store = self.ds_store(fs)?;
        let full = format!("{fs}@{common}");
        if store.snapshot_guid(&full).is_err() {
            store.promote(fs).map_err(se)?;
            log(format!(
                "replication: promoted failover clone '{fs}' for reverse"
            ));
        }
        store.snapshot_guid(&full).map(|_| ()).map_err(|_| {
            format!("'{fs}' has no snapshot '{common}' after its promote: cannot reverse from it")
        })
    }
}
