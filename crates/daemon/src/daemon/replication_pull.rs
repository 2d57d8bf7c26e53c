//! Pull relationships (`replication create --pull`, kept on the target): the
//! target starts each cycle. It connects to the source's listener and sends
//! `pull {name, fs, target_fs, keep, bwlimit, schedule, recursive}`; the
//! source checks it and answers go (or refuses with one line), and from then on the roles of the
//! connection swap: the source runs the very cycle of a push
//! (`replication_cycle.rs`: resume or discard the target's token, newest
//! common snapshot, divergence refusals, snapshot, increment, holds,
//! retention on both sides) as the client of this connection, and the target
//! answers its requests as its listener does, limited to what a cycle needs
//! on the pulled filesystem (and the members under it, for a recursive
//! pull). The source ends with `pull_done {progress, report}` or
//! `pull_done {progress, error}`, which becomes the target's cycle status
//! (`progress`: each leg's source and target, how many completed: the
//! members' status on both sides).
//!
//! The source keeps each pull it serves (`pulled_by.json`) with its last
//! status: `replication list` there shows it as "pulled-by PEER" with the
//! snapshot it holds, so the source's admin knows why that snapshot is held.
//! `replication destroy NAME` on the source forgets it and releases the hold
//! (the puller's next cycle then records it again).
//!
//! Invariants: the source serves a pull only to a paired peer (the
//! listener's rule) and only for a name it has no push relationship of (a
//! relationship is pulled or pushed, not both); one name is pulled from one
//! filesystem into one target by one peer key (another needs the first
//! forgotten: its hold would be orphaned); the same name's cycles never run
//! at once on the source (its cycle lock is held for the pull).

use super::replication::{hold_tag, list_row, now};
use super::replication_cycle::Report;
use super::replication_serve::{snapshot_time, PullScope};
use super::replication_tree::{local_datasets, record_members, Progress};
use super::{guarded, log, se, Daemon, OpResult};
use cachalot_replication::link::Link;
use cachalot_replication::relationship::{self, MysqlSet, Relationship, Status};
use cachalot_replication::retention;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A pull served by this appliance as the source: the relationship as its
/// cycles here run it (`target_addr` is the puller's host, `schedule` the
/// one it told, 0 if it did not), and the puller's key.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(super) struct PulledBy {
    #[serde(flatten)]
    pub rel: Relationship,
    pub peer_key: String,
}

impl PulledBy {
    /// A pull of `name` served here is one relationship: refused if this
    /// request (`rel`) comes from another filesystem or MySQL set, into
    /// another target or with another peer's key.
    fn check_same(&self, rel: &Relationship, fp: &str) -> Result<(), String> {
        let name = &rel.name;
        let members = |r: &Relationship| r.mysql.as_ref().map(|m| m.members.clone());
        if self.rel.source != rel.source
            || self.rel.target_fs != rel.target_fs
            || members(&self.rel) != members(rel)
            || self.peer_key != fp
        {
            return Err(format!(
                "this appliance serves a pull of that name already ('{}' to {}/{}): `cachalot replication destroy {name}` on the source forgets it and releases its hold",
                self.rel.source, self.rel.target_addr, self.rel.target_fs
            ));
        }
        Ok(())
    }
}

impl Daemon {
    /// The target's side of one pull cycle of `rel`; `progress` gets how far
    /// the source's cycle got (its legs name this side's filesystems).
    pub(super) fn pull_cycle(
        &self,
        rel: &Relationship,
        progress: &mut Progress,
    ) -> Result<Report, String> {
        let mut link = self.connect_peer(&rel.target_addr)?;
        let fp = link.tls().peer_fingerprint().to_string();
        link.request(&json!({
            "op": "pull",
            "name": rel.name,
            "fs": rel.source,
            "target_fs": rel.target_fs,
            "keep": rel.keep,
            "bwlimit": rel.bwlimit,
            "schedule": rel.schedule,
            "recursive": rel.recursive,
            // A MySQL set: its members and server on the source.
            "mysql": rel.mysql,
        }))?;
        let scope = PullScope::of(rel);
        let done = self.serve_requests(&mut link, &rel.target_addr, &fp, true, Some(&scope))?;
        *progress = Progress::from_json(&done["progress"]);
        if let Some(e) = done["error"].as_str() {
            return Err(e.to_string());
        }
        let r = &done["report"];
        Ok(Report {
            snapshot: r["snapshot"].as_str().unwrap_or("?").to_string(),
            bytes: r["bytes"].as_u64().unwrap_or(0),
            secs: r["seconds"].as_f64().unwrap_or(0.0),
            messages: r["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect(),
        })
    }

    /// The source's side of a pull from the paired peer at `from` (key
    /// `fp`): refuse it, or drive the cycle over `link` and tell the target
    /// how it ended; the outcome is recorded for `list`.
    pub(super) fn serve_pull(&self, req: &Value, link: &mut Link, from: &str, fp: &str) {
        let rel = match self.pull_request(req, from, fp) {
            Ok(rel) => rel,
            Err(e) => {
                log(format!("replication: refused a pull from {from}: {e}"));
                let _ = link.error(&e);
                return;
            }
        };
        let name = rel.name.clone();
        let lock = self.replication.cycle_lock(&name);
        let _cycle = lock.lock();
        let started = now();
        let recorded = self.record_pull(&rel, fp, |s| s.last_attempt = Some(started));
        if let Err(e) = recorded {
            let _ = link.error(&e);
            return;
        }
        if link.reply(&Value::Null).is_err() {
            return;
        }
        let mut progress = Progress::default();
        let res = guarded("replication", || {
            self.cycle(&rel, Some(link), &mut progress)
        });
        let done = match &res {
            Ok(rep) => {
                log(format!(
                    "replication {name}: pulled by {from}: '{}@{}' ({} bytes in {:.1}s)",
                    rel.source, rep.snapshot, rep.bytes, rep.secs
                ));
                json!({ "op": "pull_done", "progress": progress.to_json(), "report": {
                    "snapshot": rep.snapshot,
                    "bytes": rep.bytes,
                    "seconds": rep.secs,
                    "messages": rep.messages,
                }})
            }
            Err(e) => {
                log(format!("replication {name}: pull by {from} failed: {e}"));
                json!({ "op": "pull_done", "progress": progress.to_json(), "error": e })
            }
        };
        let snap_time = progress
            .snapshot
            .as_ref()
            .and_then(|s| snapshot_time(&name, s));
        let recorded = self.record_pull(&rel, fp, |s| {
            if rel.recursive {
                record_members(s, &progress, snap_time.or(Some(started)));
            }
            match &res {
                Ok(rep) => rep.record(&name, s, started),
                Err(e) => s.last_error = Some(format!("replication {name}: {e}")),
            }
        });
        if let Err(e) = recorded {
            log(format!("replication {name}: {e}"));
        }
        let _ = link.request(&done);
    }

    /// Store pull `rel` served to key `fp` (added, or its description
    /// refreshed), its status changed by `f`.
    fn record_pull(
        &self,
        rel: &Relationship,
        fp: &str,
        f: impl FnOnce(&mut Status),
    ) -> Result<(), String> {
        let mut list = self.replication.pulled_by.lock();
        // Checked again under the lock: two first pulls of one name from
        // different peers both pass `pull_request`'s check before either is
        // recorded, and the second must not take over the first's entry.
        if let Some(p) = list.get(&rel.name) {
            p.check_same(rel, fp)?;
        }
        let mut next = list.clone();
        let status = next
            .get(&rel.name)
            .map(|p| p.rel.status.clone())
            .unwrap_or_default();
        let entry = next.entry(rel.name.clone()).or_insert(PulledBy {
            rel: rel.clone(),
            peer_key: fp.to_string(),
        });
        entry.rel = Relationship {
            status,
            ..rel.clone()
        };
        f(&mut entry.rel.status);
        let rows: Vec<&PulledBy> = next.values().collect();
        self.replication
            .store_json("pulled_by.json", &rows, "the pulls served here")?;
        *list = next;
        Ok(())
    }

    /// `list`'s rows of the pulls served here (only `name`'s, if given).
    pub(super) fn pulled_by_rows(&self, name: Option<&str>, t: u64) -> Vec<Value> {
        let r = &self.replication;
        let list = r.pulled_by.lock().clone();
        list.values()
            .filter(|p| name.is_none_or(|n| n == p.rel.name))
            .map(|p| {
                let role = format!("pulled-by {}", p.rel.target_addr);
                list_row(&p.rel, &role, r.is_running(&p.rel.name), t)
            })
            .collect()
    }

    /// `replication destroy NAME` of a pull served here (None: there is
    /// none): release its hold on the source and forget it.
    pub(super) fn forget_pulled_by(&self, name: &str) -> Option<OpResult> {
        let p = self.replication.pulled_by.lock().get(name).cloned()?;
        let fs = &p.rel.source;
        let release = || -> Result<(), String> {
            // A MySQL set, or a recursive pull, holds a snapshot of each
            // member still there.
            for local in &local_datasets(&p.rel, true) {
                let store = self.ds_store(local)?;
                if store.dataset(local).is_ok() {
                    self.release_holds(&store, local, &hold_tag(name), None)?;
                }
            }
            let mut list = self.replication.pulled_by.lock();
            let mut next = list.clone();
            next.remove(name);
            let rows: Vec<&PulledBy> = next.values().collect();
            self.replication
                .store_json("pulled_by.json", &rows, "the pulls served here")?;
            *list = next;
            Ok(())
        };
        Some(release().map(|()| {
            log(format!(
                "replication: forgot the pull '{name}' of '{fs}' by {} (its hold released)",
                p.rel.target_addr
            ));
            Value::Null
        }))
    }

    /// A push relationship may not take the name of a pull served here.
    pub(super) fn refuse_pulled_name(&self, name: &str) -> Result<(), String> {
        match self.replication.pulled_by.lock().get(name) {
            Some(p) => Err(format!(
                "'{name}' is the name of a pull of '{}' by {} served here: a relationship is pulled or pushed, not both (`cachalot replication destroy {name}` forgets the pull)",
                p.rel.source, p.rel.target_addr
            )),
            None => Ok(()),
        }
    }

    /// The cycles of a pull served here are started and managed by the
    /// puller: `run`, `pause`... of its name here are refused with that.
    pub(super) fn refuse_pulled_op(&self, name: &str) -> Result<(), String> {
        if self.replication.get(name).is_ok() {
            return Ok(());
        }
        match self.replication.pulled_by.lock().get(name) {
            Some(p) => Err(format!(
                "replication {name}: pulled by {}, which starts and manages its cycles; `cachalot replication destroy {name}` here forgets it and releases its hold",
                p.rel.target_addr
            )),
            None => Ok(()),
        }
    }

    /// Check a `pull` request; the relationship the source's cycle runs.
    fn pull_request(&self, req: &Value, from: &str, fp: &str) -> Result<Relationship, String> {
        let name = req["name"].as_str().ok_or("request without 'name'")?;
        relationship::check_name(name)?;
        let fs = Self::fs_arg(req, "fs")?;
        let target_fs = Self::fs_arg(req, "target_fs")?;
        let keep = req["keep"].as_str().ok_or("request without 'keep'")?;
        retention::parse_keep(keep)?;
        if let Ok(push) = self.replication.get(name) {
            return Err(format!(
                "this appliance has a push relationship of that name ({} -> {}): a relationship is pulled or pushed, not both; destroy one of them",
                push.source,
                push.target()
            ));
        }
        let recursive = req["recursive"].as_bool().unwrap_or(false);
        let mysql = pulled_set(req, &fs, &target_fs)?;
        if recursive && mysql.is_some() {
            return Err("-r cannot be combined with a MySQL set".into());
        }
        for member in mysql.as_ref().map_or(&vec![fs.clone()], |m| &m.members) {
            self.ds_store(member)?
                .dataset(member)
                .map_err(|e| format!("source {}", se(e)))?;
        }
        let mut rel = Relationship {
            name: name.to_string(),
            source: fs,
            // The peer's address in messages ("target HOST/FS"), without
            // its connection's port, which is not its listener's.
            target_addr: from.rsplit_once(':').map_or(from, |(h, _)| h).to_string(),
            target_fs,
            // The puller's schedule, for `list`'s lag alert (0: not told).
            schedule: req["schedule"].as_u64().unwrap_or(0),
            keep: keep.to_string(),
            bwlimit: req["bwlimit"].as_u64().filter(|&b| b > 0),
            paused: false,
            broken: false,
            status: Status::default(),
            mysql,
            pull: false,
            recursive,
        };
        // The members recorded so far (a recursive pull's gone ones are told).
        if let Some(p) = self.replication.pulled_by.lock().get(name) {
            p.check_same(&rel, fp)?;
            rel.status = p.rel.status.clone();
        }
        Ok(rel)
    }
}

/// The MySQL set of a `pull` request, if it pulls one: its members on this
/// side (the first is `fs`), each going next to `target_fs`, and the socket
/// of their server here (its `mysql snapshot` then checks that the server's
/// files are on those members: a peer cannot quiesce another server).
fn pulled_set(req: &Value, fs: &str, target_fs: &str) -> Result<Option<MysqlSet>, String> {
    if req["mysql"].is_null() {
        return Ok(None);
    }
    let m: MysqlSet = serde_json::from_value(req["mysql"].clone())
        .map_err(|e| format!("request with a bad 'mysql': {e}"))?;
    for member in &m.members {
        crate::proto::validate_dataset_name(member)?;
    }
    if m.members.first().map(String::as_str) != Some(fs) {
        return Err(format!(
            "the MySQL set {} does not start with the pulled filesystem '{fs}'",
            m.members.join(",")
        ));
    }
    if !m.socket.starts_with('/') || m.user.is_empty() {
        return Err(format!(
            "MySQL socket '{:.200}' must be an absolute path, with a user",
            m.socket
        ));
    }
    relationship::member_targets(&m.members, target_fs)?;
    Ok(Some(m))
}
