//! Pull relationships (`replication create --pull`, kept on the target): the
//! target starts each cycle. It connects to the source's listener and sends
//! `pull {name, fs, target_fs, keep, bwlimit}`; the source checks it and
//! answers go (or refuses with one line), and from then on the roles of the
//! connection swap: the source runs the very cycle of a push
//! (`replication_cycle.rs`: resume or discard the target's token, newest
//! common snapshot, divergence refusals, snapshot, increment, holds,
//! retention on both sides) as the client of this connection, and the target
//! answers its requests as its listener does, limited to what a cycle needs
//! on the pulled filesystem. The source ends with `pull_done {report}` or
//! `pull_done {error}`, which becomes the target's cycle status.
//!
//! Invariants: the source serves a pull only to a paired peer (the
//! listener's rule) and only for a name it has no push relationship of (a
//! relationship is pulled or pushed, not both); the same name's cycles never
//! run at once on the source (its cycle lock is held for the pull).

use super::replication_cycle::Report;
use super::{guarded, log, se, Daemon};
use cachalot_replication::link::Link;
use cachalot_replication::relationship::{self, Relationship};
use cachalot_replication::retention;
use serde_json::{json, Value};

/// `resync` and `reverse` of a pull relationship are not there yet: they
/// would act on the wrong side (they drive the peer as the target).
pub(super) fn refuse_pull(rel: &Relationship, what: &str) -> Result<(), String> {
    if rel.pull {
        return Err(format!(
            "{what} of a pull relationship is not supported yet: destroy it and the target filesystem to start over, or create a push relationship on the source"
        ));
    }
    Ok(())
}

impl Daemon {
    /// The target's side of one pull cycle of `rel`.
    pub(super) fn pull_cycle(&self, rel: &Relationship) -> Result<Report, String> {
        let mut link = self.connect_peer(&rel.target_addr)?;
        let fp = link.tls().peer_fingerprint().to_string();
        link.request(&json!({
            "op": "pull",
            "name": rel.name,
            "fs": rel.source,
            "target_fs": rel.target_fs,
            "keep": rel.keep,
            "bwlimit": rel.bwlimit,
        }))?;
        let done =
            self.serve_requests(&mut link, &rel.target_addr, &fp, true, Some(&rel.target_fs))?;
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

    /// The source's side of a pull from the paired peer at `from`: refuse
    /// it, or drive the cycle over `link` and tell the target how it ended.
    pub(super) fn serve_pull(&self, req: &Value, link: &mut Link, from: &str) {
        let rel = match self.pull_request(req, from) {
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
        if link.reply(&Value::Null).is_err() {
            return;
        }
        let mut progress = Default::default();
        let done = match guarded("replication", || {
            self.cycle(&rel, Some(link), &mut progress)
        }) {
            Ok(rep) => {
                log(format!(
                    "replication {name}: pulled by {from}: '{}@{}' ({} bytes in {:.1}s)",
                    rel.source, rep.snapshot, rep.bytes, rep.secs
                ));
                json!({ "op": "pull_done", "report": {
                    "snapshot": rep.snapshot,
                    "bytes": rep.bytes,
                    "seconds": rep.secs,
                    "messages": rep.messages,
                }})
            }
            Err(e) => {
                log(format!("replication {name}: pull by {from} failed: {e}"));
                json!({ "op": "pull_done", "error": e })
            }
        };
        let _ = link.request(&done);
    }

    /// Check a `pull` request; the relationship the source's cycle runs.
    fn pull_request(&self, req: &Value, from: &str) -> Result<Relationship, String> {
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
        self.ds_store(&fs)?
            .dataset(&fs)
            .map_err(|e| format!("source {}", se(e)))?;
        Ok(Relationship {
            name: name.to_string(),
            source: fs,
            // The peer's address in messages ("target HOST/FS"), without
            // its connection's port, which is not its listener's.
            target_addr: from.rsplit_once(':').map_or(from, |(h, _)| h).to_string(),
            target_fs,
            schedule: relationship::MIN_SCHEDULE,
            keep: keep.to_string(),
            bwlimit: req["bwlimit"].as_u64().filter(|&b| b > 0),
            paused: false,
            broken: false,
            status: Default::default(),
            mysql: None,
            pull: false,
            recursive: false,
        })
    }
}
