//! `replication reverse NAME --address ADDR [-f]`: failback after a break.
//!
//! Run on the old source A of a broken relationship R (A:FS -> B:TFS). B's
//! TFS has been used on its own since the break; reversing makes B the
//! source of a new relationship R (B:TFS -> A:FS) that starts from the newest
//! snapshot both sides have, so only what B wrote since is sent.
//!
//! Invariants:
//! - only a broken relationship is reversed (two writers otherwise);
//! - what A loses (its snapshots newer than the common one, its writes since)
//!   is listed, and without `force` nothing is changed;
//! - A is rolled back before B adopts R, so a reverse that fails half-way is
//!   retried by running it again (the rollback is then a no-op);
//! - the reversed relationship keeps R's name, so its hold tag `repl:R`
//!   already holds the common snapshot on both sides: no window in which
//!   retention could destroy the base of the first reversed cycle;
//! - B pins A's key for ADDR only from a request that arrived over A's
//!   authenticated link (the key B already paired with).

use super::replication_serve::fs_state;
use super::{log, se, Daemon, OpResult};
use crate::proto::validate_dataset_name as validate_fs;
use cachalot_replication::relationship::{self, Relationship};
use cachalot_replication::retention;
use serde_json::{json, Value};

impl Daemon {
    pub(super) fn repl_reverse(&self, name: &str, address: &str, force: bool) -> OpResult {
        let r = &self.replication;
        let lock = r.cycle_lock(name);
        let _cycle = lock.lock();
        let rel = r.get(name)?;
        let ctx = |e: String| format!("replication {name}: {e}");
        if rel.mysql.is_some() {
            return Err(ctx(
                "reversing a MySQL set is not supported yet: create a relationship per dataset on the target instead".into(),
            ));
        }
        if !rel.broken {
            return Err(ctx(format!(
                "the relationship is live: break it first (cachalot replication break {name}) so that {} is the only writer",
                rel.target()
            )));
        }
        // ADDR is how B reaches this appliance's replication listener.
        relationship::parse_target(&format!("{address}/{}", rel.source)).map_err(|_| {
            ctx(format!(
                "invalid address '{address}': use HOST:PORT of this appliance's replication listener as {} reaches it",
                rel.target_addr
            ))
        })?;
        let store = self.ds_store(&rel.source).map_err(ctx)?;
        let mut link = self.connect_peer(&rel.target_addr).map_err(ctx)?;
        let theirs = link
            .request(&json!({ "op": "state", "fs": rel.target_fs }))
            .map_err(ctx)?;
        if !theirs["exists"].as_bool().unwrap_or(false) {
            return Err(ctx(format!(
                "target {} does not exist: nothing to reverse",
                rel.target()
            )));
        }
        let tguids: Vec<u64> = theirs["snapshots"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["guid"].as_u64())
            .collect();
        // Commit what is still dirty, so `written` counts every write that a
        // rollback would destroy (found in the test: an unsynced write was
        // not listed).
        store.sync().map_err(|e| ctx(se(e)))?;
        let ours = fs_state(&store, &rel.source).map_err(ctx)?;
        let mut common = None;
        let mut lost = Vec::new();
        for s in ours["snapshots"].as_array().into_iter().flatten() {
            let n = s["name"].as_str().unwrap_or("?");
            if tguids.contains(&s["guid"].as_u64().unwrap_or(0)) {
                common = Some(n.to_string());
                lost.clear();
            } else {
                lost.push(format!("{}@{n}", rel.source));
            }
        }
        let Some(c) = common else {
            return Err(ctx(format!(
                "'{}' has no snapshot in common with target {}: nothing to start the reversed relationship from",
                rel.source,
                rel.target()
            )));
        };
        let written = ours["written"].as_u64().unwrap_or(0);
        if written > 0 {
            lost.push(format!(
                "{written} bytes written to {} since '{}@{c}'",
                rel.source, rel.source
            ));
        }
        if !lost.is_empty() && !force {
            return Err(ctx(format!(
                "reverse would destroy here: {}; run `cachalot replication reverse -f --address {address} {name}` to roll '{}' back to '{c}'",
                lost.join(", "),
                rel.source
            )));
        }
        if !lost.is_empty() {
            store
                .rollback(&format!("{}@{c}", rel.source), true)
                .map_err(|e| ctx(se(e)))?;
            log(format!(
                "replication {name}: rolled '{}' back to '{c}' for reverse (lost: {})",
                rel.source,
                lost.join(", ")
            ));
        }
        link.request(&json!({
            "op": "adopt",
            "name": name,
            "fs": rel.target_fs,
            "target": format!("{address}/{}", rel.source),
            "schedule": rel.schedule,
            "keep": rel.keep,
            "bwlimit": rel.bwlimit,
            "common": c,
        }))
        .map_err(ctx)?;
        // The holds stay: the reversed relationship has the same name.
        r.remove(name)?;
        log(format!(
            "replication {name}: reversed: {} now replicates to {address}/{} from '{c}'",
            rel.target(),
            rel.source
        ));
        Ok(json!({
            "common": c,
            "destroyed": lost,
            "source": rel.target(),
            "target": format!("{address}/{}", rel.source),
        }))
    }

    /// The target side of `reverse`: take over relationship `name` as its
    /// source, toward the peer `peer_fp` that asked, at the address it gave.
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
        self.ds_store(fs)?.dataset(fs).map_err(se)?;
        let r = &self.replication;
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
            mysql: None,
        };
        rel.status.last_snapshot = req["common"].as_str().map(str::to_string);
        r.pin(peer_fp, Some(&target_addr))?;
        r.insert(rel)?;
        log(format!(
            "replication {name}: adopted (reversed): '{fs}' now replicates to {target}"
        ));
        Ok(Value::Null)
    }
}
