//! `resync` and `reverse` of a pull relationship. A pull is kept on its
//! target B (`replication create --pull`), which starts every cycle, so both
//! are run on B, the only side that knows the relationship; the source A
//! (whose listener B pulls from) answers B's requests.
//!
//! - `replication resync [-f] NAME` on B: roll B's copies back to the newest
//!   snapshot they have in common with A's sources (listing what that
//!   destroys; nothing without -f), clear the break and the failover mark,
//!   and let the cycles resume. Nothing changes on A.
//! - `replication reverse [-f] NAME` on B, after `replication break NAME`
//!   (or `mysql failover NAME`) on B: A's sources are rolled back to the
//!   snapshot B's data started from (only with -f, listing what A loses), A
//!   forgets the pull it served, and B keeps NAME as a push of what it serves
//!   now (its filesystem, or the set the failover started, promoted) toward
//!   A's listener, the one it pulled from: the connection still goes from B
//!   to A, so no new listener, pairing or firewall rule is needed, and B
//!   starts the reversed cycles as it started the pulls.
//!
//! Invariants (as a push's `resync`/`reverse`, `replication_reverse.rs`):
//! - every dataset is planned before any is rolled back; what would be lost
//!   is listed, and without `force` nothing is changed;
//! - A is rolled back first, then forgets the pull, then B converts its
//!   relationship: a reverse that fails half-way is retried by running it
//!   again (each step is then a no-op);
//! - the relationship keeps its name, so `repl:NAME` holds the common
//!   snapshot on both sides throughout (a promote moves a hold with its
//!   snapshot).

use super::replication_cycle::snapshot_guids;
use super::replication_reverse::{check_set_lands, plan_rollback, rollback_plan, Rollback};
use super::replication_tree::{known_pairs, member_error};
use super::{log, se, Daemon, OpResult};
use cachalot_replication::link::Link;
use cachalot_replication::relationship::{self, Relationship, Status};
use serde_json::{json, Value};

/// One of A's datasets to roll back before a reverse: it, the snapshot to
/// roll back to, what that destroys.
struct RemoteRollback {
    fs: String,
    common: String,
    lost: Vec<String>,
}

impl Daemon {
    /// `replication resync [-f] NAME` of pull `rel` (here, on its target).
    pub(super) fn resync_pull(&self, rel: &Relationship, force: bool) -> OpResult {
        let name = &rel.name;
        let ctx = |e: String| format!("replication {name}: {e}");
        let mut link = self.connect_peer(&rel.target_addr).map_err(ctx)?;
        let mut plans = Vec::new();
        for (src, tfs) in known_pairs(rel) {
            let plan = self
                .resync_leg(&mut link, rel, &src, &tfs)
                .map_err(|e| ctx(member_error(rel, &src, e)))?;
            plans.extend(plan);
        }
        let lost: Vec<String> = plans.iter().flat_map(|p| p.lost.clone()).collect();
        if !lost.is_empty() && !force {
            return Err(ctx(format!(
                "resync would destroy here: {}; run `cachalot replication resync -f {name}` to roll it back",
                lost.join(", ")
            )));
        }
        for p in plans.iter().filter(|p| !p.lost.is_empty()) {
            p.store
                .rollback(&format!("{}@{}", p.fs, p.common), true)
                .map_err(|e| ctx(se(e)))?;
        }
        if self.replication.set_broken_here(name, None)? {
            log(format!(
                "replication {name}: failover mark cleared (resync)"
            ));
        }
        self.replication.update(name, |x| {
            x.broken = false;
            x.status.last_error = None;
            Ok(())
        })?;
        let common = plans.first().map(|p| p.common.clone());
        log(format!(
            "replication {name}: resynced (rolled back to {common:?}, lost: {})",
            lost.join(", ")
        ));
        Ok(json!({ "common": common, "destroyed": lost }))
    }

    /// What resync does to target `tfs` here (None: it does not exist,
    /// nothing to roll back): back to its newest snapshot that the source's
    /// `src` has too.
    fn resync_leg(
        &self,
        link: &mut Link,
        rel: &Relationship,
        src: &str,
        tfs: &str,
    ) -> Result<Option<Rollback>, String> {
        let store = self.ds_store(tfs)?;
        if store.dataset(tfs).is_err() {
            return Ok(None);
        }
        let theirs = snapshot_guids(&link.request(&json!({ "op": "state", "fs": src }))?);
        let (common, lost) = rollback_plan(&store, tfs, |g| theirs.contains(&g))?;
        let Some(common) = common else {
            return Err(format!(
                "'{tfs}' has no snapshot in common with the source {}/{src}: nothing to roll back to; destroy '{tfs}' to start over",
                rel.target_addr
            ));
        };
        Ok(Some(Rollback {
            store,
            fs: tfs.to_string(),
            common,
            lost,
        }))
    }

    /// `replication reverse [-f] NAME` of pull `rel` (here, on its target);
    /// `address`, a push's option, may only name the source's listener.
    pub(super) fn reverse_pull(
        &self,
        rel: &Relationship,
        address: Option<&str>,
        force: bool,
    ) -> OpResult {
        let name = &rel.name;
        let ctx = |e: String| format!("replication {name}: {e}");
        if let Some(a) = address.filter(|a| *a != rel.target_addr) {
            return Err(ctx(format!(
                "a pull is reversed toward the listener it pulls from ({}), not {a}: leave --address out",
                rel.target_addr
            )));
        }
        let mut link = self.connect_peer(&rel.target_addr).map_err(ctx)?;
        // What this side serves now, and each of A's datasets to roll back.
        let (sources, mysql, plans) = match &rel.mysql {
            Some(m) => {
                let live = self
                    .replication
                    .broken_here(name)
                    .and_then(|b| b.live)
                    .ok_or_else(|| ctx(format!(
                        "a MySQL set is reversed after `cachalot mysql failover {name}` here, from the set it started"
                    )))?;
                let origins = self
                    .serve_failover_set(&json!({ "name": name }))
                    .map_err(ctx)?;
                check_set_lands(&live.members, "here", &rel.source, &m.members).map_err(ctx)?;
                let mut plans = Vec::new();
                for (member, row) in m
                    .members
                    .iter()
                    .zip(origins["members"].as_array().into_iter().flatten())
                {
                    let origin = row["guid"].as_u64().unwrap_or(0);
                    plans.push(remote_plan(&mut link, rel, member, |g| g == origin).map_err(ctx)?);
                }
                (live.members.clone(), Some(live), plans)
            }
            None => {
                if !rel.broken {
                    return Err(ctx(format!(
                        "the relationship is live: break it first (cachalot replication break {name}) so that '{}' here is the only writer",
                        rel.target_fs
                    )));
                }
                let store = self.ds_store(&rel.target_fs).map_err(ctx)?;
                let st = super::replication_serve::fs_state(&store, &rel.target_fs).map_err(ctx)?;
                let ours = snapshot_guids(&st);
                let plan =
                    remote_plan(&mut link, rel, &rel.source, |g| ours.contains(&g)).map_err(ctx)?;
                (vec![rel.target_fs.clone()], None, vec![plan])
            }
        };
        let lost: Vec<String> = plans.iter().flat_map(|p| p.lost.clone()).collect();
        let common = plans[0].common.clone();
        if !lost.is_empty() && !force {
            return Err(ctx(format!(
                "reverse would destroy on {}: {}; run `cachalot replication reverse -f {name}` to roll it back to '{common}'",
                rel.target_addr,
                lost.join(", ")
            )));
        }
        for p in plans.iter().filter(|p| !p.lost.is_empty()) {
            link.request(&json!({ "op": "rollback", "name": name, "fs": p.fs, "snap": p.common }))
                .map_err(ctx)?;
            log(format!(
                "replication {name}: rolled {}/{} back to '{}' for reverse (lost: {})",
                rel.target_addr,
                p.fs,
                p.common,
                p.lost.join(", ")
            ));
        }
        for (fs, p) in sources.iter().zip(&plans).filter(|_| mysql.is_some()) {
            self.promote_for_reverse(fs, &p.common).map_err(ctx)?;
        }
        link.request(&json!({ "op": "pull_reversed", "name": name }))
            .map_err(ctx)?;
        let reversed = Relationship {
            source: sources[0].clone(),
            target_fs: rel.source.clone(),
            mysql,
            pull: false,
            broken: false,
            paused: false,
            status: Status {
                last_snapshot: Some(common.clone()),
                ..Default::default()
            },
            ..rel.clone()
        };
        let target = reversed.target();
        self.replication.update(name, |x| {
            *x = reversed.clone();
            Ok(())
        })?;
        if self.replication.set_broken_here(name, None)? {
            log(format!(
                "replication {name}: failover mark cleared (reversed)"
            ));
        }
        log(format!(
            "replication {name}: reversed here: '{}' now replicates to {target} from '{common}'",
            sources[0]
        ));
        Ok(json!({
            "common": common,
            "destroyed": lost,
            "source": sources[0],
            "target": target,
            "here": true,
        }))
    }

    /// Peer request `pull_reversed {name}`, on the source of a pull: its
    /// puller (key `peer_fp`) reversed it and now pushes NAME here, so the
    /// pull served here is forgotten; its holds stay (the reversed cycles
    /// start from the snapshot they hold).
    pub(super) fn answer_pull_reversed(&self, req: &Value, peer_fp: &str) -> Result<Value, String> {
        let name = req["name"].as_str().ok_or("request without 'name'")?;
        relationship::check_name(name)?;
        let mut list = self.replication.pulled_by.lock();
        let Some(p) = list.get(name) else {
            // Forgotten already (a reverse retried), or by `destroy` here.
            return Ok(Value::Null);
        };
        if p.peer_key != peer_fp {
            return Err(format!(
                "'{name}' is pulled from here by another appliance ({}): refusing to forget it",
                p.rel.target_addr
            ));
        }
        let mut next = list.clone();
        next.remove(name);
        let rows: Vec<_> = next.values().collect();
        self.replication
            .store_json("pulled_by.json", &rows, "the pulls served here")?;
        *list = next;
        log(format!(
            "replication {name}: the pull served here was reversed by its target, which pushes it here now (holds kept)"
        ));
        Ok(Value::Null)
    }
}

/// What rolling the peer's `fs` back to its newest snapshot for which
/// `is_common(guid)` holds destroys there (its state read after a sync, so
/// its latest writes are counted).
fn remote_plan(
    link: &mut Link,
    rel: &Relationship,
    fs: &str,
    is_common: impl Fn(u64) -> bool,
) -> Result<RemoteRollback, String> {
    let st = link.request(&json!({ "op": "state", "fs": fs, "sync": rel.name }))?;
    if !st["exists"].as_bool().unwrap_or(false) {
        return Err(format!(
            "{}/{fs} does not exist: nothing to reverse into",
            rel.target_addr
        ));
    }
    let (common, lost) = plan_rollback(fs, &st, is_common);
    let common = common.ok_or_else(|| {
        format!(
            "{}/{fs} has no snapshot in common with this side: nothing to start the reversed relationship from",
            rel.target_addr
        )
    })?;
    Ok(RemoteRollback {
        fs: fs.to_string(),
        common,
        lost,
    })
}
