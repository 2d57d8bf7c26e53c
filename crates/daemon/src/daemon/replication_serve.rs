//! The replication listener (`serve --replication ADDR`): the target side of a
//! relationship, and the helpers both sides use on their own pool (state of a
//! filesystem, the hold of the newest common snapshot, retention).
//!
//! Requests a paired peer may make: `state {fs[, name][, sync: NAME]}`
//! (refused with a name broken off here; `sync` commits a txg first, only
//! for NAME's peer: `sync_for_peer`), `receive {fs}` (then the
//! stream), `abort {fs}`, `hold {fs, snap, name}` (holds it, releases the
//! relationship's tag everywhere else in the filesystem), `prune {fs, name,
//! keep[, now]}`, `mysql_record {fs, snap, props}` (the record of a MySQL set's
//! snapshot: `replication_mysql.rs`), `resume_here {name}` (resync of a relationship
//! broken off here by `mysql failover`), `rollback {fs, snap}` (resync: destroys the newer snapshots; only
//! to a snapshot a relationship holds), `failover_set {name}` and `adopt`
//! (`replication reverse`: `replication_reverse.rs`), `pull_reversed {name}`
//! (the puller reversed a pull served here: `replication_pull_failback.rs`). An unpaired
//! peer may only `pair {proof}`.
//!
//! Invariants:
//! - A peer's request is served only after its key was found pinned; a peer
//!   that is not, or that does not greet in our protocol, is answered with
//!   one ERROR line (if it speaks TLS) and the connection is closed; nothing
//!   is changed and the refusal is logged with the peer's address and key.
//! - Receives are always resumable (`receive -s`) and never forced: a
//!   diverged target refuses the stream instead of being rolled back.
//! - Retention destroys only snapshots named for the relationship
//!   (`repl-NAME-...`), never a held one or one a clone depends on, never
//!   the newest.

use super::replication::now;
use super::{guarded, log, se, Daemon};
use crate::proto::validate_dataset_name;
use cachalot_datasets::{ReceiveOpts, Store, StoreError};
use cachalot_replication::link::Link;
use cachalot_replication::relationship::{snapshot_prefix, Relationship};
use cachalot_replication::tls::{self, TlsStream};
use cachalot_replication::{pair, retention};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::Arc;

/// What a filesystem looks like to the other side of a relationship.
pub(super) fn fs_state(store: &Store, fs: &str) -> Result<Value, String> {
    let exists = store.dataset(fs).is_ok();
    let mut snaps = Vec::new();
    let mut written = 0u64;
    if exists {
        for n in store.snapshot_names(fs).map_err(se)? {
            let guid = store.snapshot_guid(&format!("{fs}@{n}")).map_err(se)?;
            snaps.push(json!({ "name": n, "guid": guid }));
        }
        written = store
            .get_props(fs, Some(&["written".to_string()]))
            .map_err(se)?
            .first()
            .and_then(|r| r.raw.parse().ok())
            .unwrap_or(0);
    }
    Ok(json!({
        "exists": exists,
        "snapshots": snaps,
        "token": store.resume_token(fs),
        "written": written,
    }))
}

/// What the source of a pull this side started may act on, as it drives the
/// cycle over the link this side opened: the target filesystems of the
/// relationship's legs (for a recursive pull, those under its target too),
/// with the requests a cycle makes (a MySQL set's record too).
pub(super) struct PullScope {
    targets: Vec<String>,
    recursive: bool,
    mysql: bool,
}

impl PullScope {
    pub(super) fn of(rel: &Relationship) -> PullScope {
        PullScope {
            targets: rel.pairs().into_iter().map(|(_, t)| t).collect(),
            recursive: rel.recursive,
            mysql: rel.mysql.is_some(),
        }
    }

    fn allows(&self, op: &str, asked: &str) -> bool {
        let cycle_op = ["state", "receive", "abort", "hold", "prune"].contains(&op)
            || (self.mysql && op == "mysql_record");
        cycle_op
            && self
                .targets
                .iter()
                .any(|t| in_pull(t, self.recursive, asked))
    }
}

/// May the source of a pull into `fs` act on `asked`? Only on `fs`, or for
/// a recursive pull on a filesystem under it too (`tank/dst/a`, never
/// `tank/dst2`).
pub(super) fn in_pull(fs: &str, recursive: bool, asked: &str) -> bool {
    asked == fs || (recursive && asked.strip_prefix(fs).is_some_and(|r| r.starts_with('/')))
}

/// `repl-ANYNAME-YYYYMMDD-HHMMSS` -> unix seconds (a relayed snapshot's).
pub(super) fn snapshot_time_any(snap: &str) -> Option<u64> {
    let rel = snap.strip_prefix("repl-")?;
    let rel = rel.get(..rel.len().checked_sub(16)?)?;
    snapshot_time(rel, snap)
}

/// `repl-NAME-YYYYMMDD-HHMMSS` -> unix seconds.
pub(super) fn snapshot_time(rel: &str, snap: &str) -> Option<u64> {
    let ts = snap.strip_prefix(&snapshot_prefix(rel))?;
    let (d, t) = ts.split_once('-')?;
    if d.len() != 8 || t.len() != 6 {
        return None;
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}",
        &d[..4],
        &d[4..6],
        &d[6..],
        &t[..2],
        &t[2..4],
        &t[4..]
    );
    cachalot_analytics::query::parse_time(&iso).ok()
}

impl Daemon {
    /// Hold `fs@snap` with `tag` and release `tag` from every other snapshot
    /// of `fs` (the newest common snapshot moves forward).
    pub(super) fn move_hold(
        &self,
        store: &Store,
        fs: &str,
        snap: &str,
        tag: &str,
    ) -> Result<(), String> {
        self.hold_once(store, &format!("{fs}@{snap}"), tag)?;
        self.release_holds(store, fs, tag, Some(snap))
    }

    /// Hold snapshot `full` with `tag` unless it is held so already.
    pub(super) fn hold_once(&self, store: &Store, full: &str, tag: &str) -> Result<(), String> {
        if !store.holds(full).map_err(se)?.iter().any(|t| t == tag) {
            store.hold(full, tag).map_err(se)?;
        }
        Ok(())
    }

    /// Release `tag` from every snapshot of `fs` but `except`.
    pub(super) fn release_holds(
        &self,
        store: &Store,
        fs: &str,
        tag: &str,
        except: Option<&str>,
    ) -> Result<(), String> {
        for n in store.snapshot_names(fs).map_err(se)? {
            let full = format!("{fs}@{n}");
            if Some(n.as_str()) != except
                && store.holds(&full).map_err(se)?.iter().any(|t| t == tag)
            {
                store.release(&full, tag).map_err(se)?;
            }
        }
        Ok(())
    }

    /// Apply relationship `rel`'s retention grid `keep` to `fs` as of unix
    /// time `at` (both sides of a cycle prune as of the same second, so they
    /// agree at the rules' boundaries); returns the snapshots destroyed. Held
    /// snapshots are skipped. With `peer` (the guids of the other side's
    /// snapshots after its prune), also the relationship's snapshots it does
    /// not have, but the newest: those of cycles that failed after their
    /// snapshot, which no increment will carry (each goes from the newest
    /// common snapshot). Kept, they would take their interval's place here
    /// while the peer keeps another snapshot, and the two sides' sets drift.
    pub(super) fn prune(
        &self,
        store: &Store,
        fs: &str,
        rel: &str,
        keep: &str,
        at: u64,
        peer: Option<&[u64]>,
    ) -> Result<Vec<String>, String> {
        let rules = retention::parse_keep(keep)?;
        let snaps: Vec<(String, u64)> = store
            .snapshot_names(fs)
            .map_err(se)?
            .into_iter()
            .filter_map(|n| snapshot_time(rel, &n).map(|t| (n, t)))
            .collect();
        let mut doomed = retention::prune(&snaps, at, &rules);
        if let Some(peer) = peer {
            let mut with_guid = Vec::with_capacity(snaps.len());
            for (n, t) in &snaps {
                let guid = store.snapshot_guid(&format!("{fs}@{n}")).map_err(se)?;
                with_guid.push((n.clone(), *t, peer.contains(&guid)));
            }
            for n in failed_cycle_leftovers(with_guid) {
                if !doomed.contains(&n) {
                    doomed.push(n);
                }
            }
        }
        let mut gone = Vec::new();
        for n in doomed {
            let full = format!("{fs}@{n}");
            if !store.holds(&full).map_err(se)?.is_empty() {
                continue;
            }
            match store.destroy_snapshot(&full) {
                // A clone depends on it (a failover's, or a user's), or a
                // partial receive does: it stays until that is gone, as a
                // held one does, instead of failing every cycle.
                Err(StoreError::Busy(_)) => continue,
                r => r.map_err(se)?,
            }
            gone.push(full);
        }
        Ok(gone)
    }

    /// Start the listener on `addr`; returns the address bound.
    pub fn start_replication(self: &Arc<Self>, addr: &str) -> anyhow::Result<std::net::SocketAddr> {
        let id = self
            .replication
            .identity()
            .map_err(|e| anyhow::anyhow!("replication: {e}"))?;
        let config = tls::server_config(&id).map_err(|e| anyhow::anyhow!("replication: {e}"))?;
        let listener = TcpListener::bind(addr)
            .map_err(|e| anyhow::anyhow!("replication: cannot listen on {addr}: {e}"))?;
        let bound = listener.local_addr()?;
        log(format!(
            "replication listening on {bound} (key {})",
            id.fingerprint()
        ));
        let d = self.clone();
        std::thread::Builder::new()
            .name("cachalot-repl-listen".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let Ok(tcp) = conn else { continue };
                    if d.is_shutting_down() {
                        break;
                    }
                    let (d, config) = (d.clone(), config.clone());
                    let _ = std::thread::Builder::new()
                        .name("cachalot-repl-peer".into())
                        .spawn(move || d.serve_peer(tcp, config));
                }
            })?;
        Ok(bound)
    }

    fn serve_peer(&self, tcp: std::net::TcpStream, config: Arc<tls::ServerConfig>) {
        let from = tcp
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        let tls = match TlsStream::accept(tcp, config, self.replication.timeout) {
            Ok(t) => t,
            Err(e) => {
                log(format!(
                    "replication: refused a connection: {e} (not a cachalot replication peer)"
                ));
                return;
            }
        };
        let fp = tls.peer_fingerprint().to_string();
        let mut link = Link::new(tls);
        let Ok(id) = self.replication.identity() else {
            return;
        };
        if let Err(e) = link.greet(&id.fingerprint()) {
            log(format!("replication: refused {from}: {e}"));
            let _ = link.error(&format!("refused: {e}"));
            return;
        }
        let paired = self.replication.is_pinned(&fp);
        let _ = self.serve_requests(&mut link, &from, &fp, paired, None);
    }

    /// Answer the peer's requests on `link` until it hangs up or a request
    /// ends the conversation. `pulling`: what the source of a pull cycle this
    /// side started may act on: it drives the cycle over this link, may only
    /// use what a cycle needs there, and ends with `pull_done`, which is
    /// returned whether it tells a success or an error (Err: the link failed).
    pub(super) fn serve_requests(
        &self,
        link: &mut Link,
        from: &str,
        fp: &str,
        mut paired: bool,
        pulling: Option<&PullScope>,
    ) -> Result<Value, String> {
        let ended = || format!("{from} ended the conversation");
        let Ok(id) = self.replication.identity() else {
            return Err(ended());
        };
        loop {
            let req = match link.read_request() {
                Ok(Some(r)) => r,
                Ok(None) => return Err(format!("{from} closed the connection")),
                Err(e) => {
                    log(format!("replication: {from}: {e}"));
                    return Err(e);
                }
            };
            let op = req["op"].as_str().unwrap_or("").to_string();
            if let Some(scope) = pulling {
                if op == "pull_done" {
                    let _ = link.reply(&Value::Null);
                    return Ok(req);
                }
                if !scope.allows(&op, req["fs"].as_str().unwrap_or("")) {
                    let e = format!(
                        "{from} asked for '{op:.40}' on {:.200} during a pull into '{}': refused",
                        req["fs"],
                        scope.targets.join(",")
                    );
                    let _ = link.error(&e);
                    return Err(e);
                }
            } else if op == "pull" {
                if paired {
                    self.serve_pull(&req, link, from, fp);
                    return Err(ended());
                }
            } else if op == "pair" {
                let res = self.answer_pair(&req, fp, &id.fingerprint());
                paired = res.is_ok();
                let sent = match res {
                    Ok(v) => link.reply(&v),
                    Err(e) => {
                        log(format!("replication: pairing from {from} refused: {e}"));
                        link.error(&e)
                    }
                };
                if sent.is_err() || !paired {
                    return Err(ended());
                }
                continue;
            }
            if !paired {
                let msg = format!(
                    "this appliance is not paired with key {}: refused (pair first: cachalot replication pair ADDR TOKEN)",
                    &fp[..16]
                );
                log(format!(
                    "replication: refused {from}: not paired (key {fp})"
                ));
                let _ = link.error(&msg);
                return Err(msg);
            }
            let res = if op == "receive" {
                match self.serve_receive(&req, link) {
                    Ok(v) => Ok(v),
                    Err(e) => {
                        log(format!("replication: receive from {from}: {e}"));
                        let _ = link.error(&e);
                        return Err(e); // the rest of a refused stream is not read
                    }
                }
            } else if op == "adopt" {
                // `reverse` from the peer: it needs the peer's key.
                guarded("replication", || self.answer_adopt(&req, fp))
            } else if op == "pull_reversed" {
                guarded("replication", || self.answer_pull_reversed(&req, fp))
            } else if op == "rollback" {
                guarded("replication", || self.answer_rollback(&req, fp))
            } else {
                guarded("replication", || self.serve_request(&op, &req, fp))
            };
            let sent = match res {
                Ok(v) => link.reply(&v),
                Err(e) => link.error(&e),
            };
            sent?;
        }
    }

    fn answer_pair(&self, req: &Value, peer_fp: &str, our_fp: &str) -> Result<Value, String> {
        let proof = req["proof"].as_str().unwrap_or("");
        let mut used = None;
        let ok = self.replication.take_token(|tok| {
            let good = pair::check_proof(proof, tok, peer_fp, our_fp);
            if good {
                used = Some(tok.to_string());
            }
            good
        });
        let Some(tok) = used.filter(|_| ok) else {
            return Err(
                "pairing refused: the token is wrong, used or expired (make a new one with `cachalot replication pair` on this appliance)"
                    .into(),
            );
        };
        self.replication.pin(peer_fp, None)?;
        log(format!("replication: paired with key {peer_fp}"));
        Ok(json!({ "proof": pair::proof(&tok, our_fp, peer_fp) }))
    }

    pub(super) fn fs_arg(req: &Value, key: &str) -> Result<String, String> {
        let fs = req[key]
            .as_str()
            .ok_or_else(|| format!("request without '{key}'"))?;
        validate_dataset_name(fs)?;
        Ok(fs.to_string())
    }

    /// `rollback {name, fs, snap}` from a peer's resync or reverse: roll `fs`
    /// back to `snap`, destroying what is newer. Only for relationship
    /// `name`, whose common snapshot `snap` must be (its hold `repl:NAME`),
    /// and only from the peer that relationship belongs to: a pull served
    /// here names the puller's key; a relationship kept here is run from here,
    /// so a peer never rolls back its datasets. (A push target keeps no record
    /// of its source's key: there the hold is what scopes the request, and
    /// what it can lose is a replica the source can send again.) Without
    /// these checks any paired peer could roll back any held snapshot.
    fn answer_rollback(&self, req: &Value, peer_fp: &str) -> Result<Value, String> {
        let name = req["name"].as_str().ok_or("request without 'name'")?;
        cachalot_replication::relationship::check_name(name)?;
        let fs = Self::fs_arg(req, "fs")?;
        let snap = req["snap"].as_str().ok_or("request without 'snap'")?;
        let full = format!("{fs}@{snap}");
        super::snapshots::split_snapshot_name(&full)?;
        let refuse = |why: String| {
            format!("rollback of '{fs}' to '{full}' for relationship '{name}' refused: {why}")
        };
        self.peers_relationship(name, peer_fp).map_err(refuse)?;
        let store = self.ds_store(&fs)?;
        let tag = super::replication::hold_tag(name);
        if !store.holds(&full).map_err(se)?.contains(&tag) {
            return Err(refuse(format!(
                "'{full}' is not its common snapshot (no hold {tag})"
            )));
        }
        store.rollback(&full, true).map_err(se)?;
        log(format!(
            "replication {name}: rolled '{fs}' back to '{full}' for the peer's resync or reverse"
        ));
        Ok(Value::Null)
    }

    /// May the peer with key `peer_fp` act for relationship `name` here? A
    /// pull served here belongs to its puller's key; a relationship kept here
    /// is run from here, never by a peer; else it is one the peer pushes here
    /// (a push target keeps no record of its source's key: the caller then
    /// scopes the request by the relationship's hold).
    fn peers_relationship(&self, name: &str, peer_fp: &str) -> Result<(), String> {
        if let Some(p) = self.replication.pulled_by.lock().get(name) {
            if p.peer_key != peer_fp {
                return Err("the pull is another peer's".into());
            }
        } else if self.replication.get(name).is_ok() {
            return Err("the relationship runs here, not on the peer".into());
        }
        Ok(())
    }

    /// `state {fs, sync: NAME}` (resync and reverse plan a rollback, and what
    /// it would destroy must count the latest writes): commit the pool's
    /// open txg, only for the peer of relationship NAME and only if `fs`
    /// holds its common snapshot (hold `repl:NAME`). Without this check any
    /// paired peer could force txg syncs on any pool here at will.
    fn sync_for_peer(
        &self,
        store: &Store,
        fs: &str,
        req: &Value,
        peer_fp: &str,
    ) -> Result<(), String> {
        let name = match &req["sync"] {
            Value::Null | Value::Bool(false) => return Ok(()),
            Value::String(n) => n.as_str(),
            _ => {
                return Err(
                    "state: 'sync' must name the relationship whose rollback is planned (a peer of an older version sends true: upgrade it)"
                        .into(),
                )
            }
        };
        cachalot_replication::relationship::check_name(name)?;
        if store.dataset(fs).is_err() {
            return Ok(()); // nothing to count: the answer says it does not exist
        }
        let refuse =
            |why: String| format!("sync of '{fs}' for relationship '{name}' refused: {why}");
        self.peers_relationship(name, peer_fp).map_err(refuse)?;
        let tag = super::replication::hold_tag(name);
        let mut held = false;
        for n in store.snapshot_names(fs).map_err(se)? {
            held |= store
                .holds(&format!("{fs}@{n}"))
                .map_err(se)?
                .contains(&tag);
        }
        if !held {
            return Err(refuse(format!(
                "'{fs}' holds none of its snapshots (no hold {tag})"
            )));
        }
        store.sync().map_err(se).map(drop)
    }

    fn serve_request(&self, op: &str, req: &Value, peer_fp: &str) -> Result<Value, String> {
        match op {
            "state" => {
                let fs = Self::fs_arg(req, "fs")?;
                // A cycle names its relationship (resync and reverse do not).
                if let Some(rel) = req["name"].as_str() {
                    self.replication.check_not_broken_here(rel)?;
                }
                let store = self.ds_store(&fs)?;
                self.sync_for_peer(&store, &fs, req, peer_fp)?;
                fs_state(&store, &fs)
            }
            "abort" => {
                let fs = Self::fs_arg(req, "fs")?;
                let msg = self.ds_store(&fs)?.abort_receive(&fs).map_err(se)?;
                log(format!("replication: {msg}"));
                Ok(json!({ "message": msg }))
            }
            "hold" => {
                let fs = Self::fs_arg(req, "fs")?;
                let snap = req["snap"].as_str().ok_or("request without 'snap'")?;
                let rel = req["name"].as_str().ok_or("request without 'name'")?;
                self.replication.check_not_broken_here(rel)?;
                let store = self.ds_store(&fs)?;
                self.move_hold(&store, &fs, snap, &super::replication::hold_tag(rel))?;
                Ok(Value::Null)
            }
            "prune" => {
                let fs = Self::fs_arg(req, "fs")?;
                let rel = req["name"].as_str().ok_or("request without 'name'")?;
                cachalot_replication::relationship::check_name(rel)?;
                self.replication.check_not_broken_here(rel)?;
                let keep = req["keep"].as_str().ok_or("request without 'keep'")?;
                // The source's clock (older sources do not send it).
                let at = req["now"].as_u64().unwrap_or_else(now);
                // A cascade's target keeps upstream's snapshots, by their names.
                let named = match req["upstream"].as_str() {
                    Some(up) => {
                        cachalot_replication::relationship::check_name(up)?;
                        up
                    }
                    None => rel,
                };
                let gone = self.prune(&*self.ds_store(&fs)?, &fs, named, keep, at, None)?;
                Ok(json!({ "destroyed": gone }))
            }
            "resume_here" => {
                // The source resynced a relationship broken off here.
                let rel = req["name"].as_str().ok_or("request without 'name'")?;
                if self.replication.set_broken_here(rel, None)? {
                    log(format!("replication {rel}: resumed here by a resync"));
                }
                Ok(Value::Null)
            }
            "failover_set" => self.serve_failover_set(req),
            "mysql_record" => {
                let fs = Self::fs_arg(req, "fs")?;
                let rel = req["name"].as_str().ok_or("request without 'name'")?;
                self.replication.check_not_broken_here(rel)?;
                self.serve_mysql_record(&fs, req)
            }
            _ => Err(format!("unknown replication request '{op:.40}'")),
        }
    }

    /// `receive {fs}`: answer go, take the stream (resumably), answer the outcome.
    fn serve_receive(&self, req: &Value, link: &mut Link) -> Result<Value, String> {
        let fs = Self::fs_arg(req, "fs")?;
        if let Some(rel) = req["rel"].as_str() {
            self.replication.check_not_broken_here(rel)?;
        }
        let store = self.ds_store(&fs)?;
        if fs == store.name() {
            return Err(format!(
                "'{fs}' is a pool's root dataset: replicate into a child"
            ));
        }
        link.reply(&Value::Null)?;
        let mut data = link.data_reader();
        let opts = ReceiveOpts {
            force: false,
            resumable: true,
        };
        let out = guarded("replication receive", || {
            store
                .receive_with(&fs, &mut data, &opts, &mut |_| {})
                .map_err(se)
        })
        // The receive says the stream is short; the link says why.
        .map_err(|e| match data.failure() {
            Some(why) => format!("{e}; the stream stopped: {why}"),
            None => e,
        })?;
        let _ = data.drain();
        let bytes = data.total();
        let rel = req["rel"].as_str().unwrap_or(&fs);
        super::replication_stats::received(rel, bytes);
        log(format!(
            "replication: received '{}': {bytes} bytes",
            out.snapshot
        ));
        Ok(json!({ "snapshot": out.snapshot, "bytes": bytes, "discarded": out.discarded }))
    }
}

/// The relationship's snapshots (name, time, whether the peer has it) that
/// cycles which failed after taking them left behind: those the peer lacks,
/// strictly between the two newest snapshots both sides hold. Only there: the
/// newest common one is this cycle's (if the peer lacks the newest snapshot,
/// nothing is a leftover), and what is older than the one before it is
/// history the peer dropped or never had (a target re-seeded by a full
/// stream, a destroy on the target), which stays on the source.
fn failed_cycle_leftovers(mut snaps: Vec<(String, u64, bool)>) -> Vec<String> {
    snaps.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    let common: Vec<usize> = (0..snaps.len()).filter(|&i| snaps[i].2).collect();
    match common[..] {
        [.., before, newest] if newest == snaps.len() - 1 => {
            snaps.drain(before + 1..newest).map(|(n, _, _)| n).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::failed_cycle_leftovers;
    use crate::daemon::replication_pull::PulledBy;
    use crate::daemon::Daemon;
    use crate::proto::Request;
    use cachalot_replication::relationship::Relationship;
    use serde_json::{json, Value};

    fn call(d: &Daemon, op: &str, args: Value) -> Value {
        d.handle(&Request::new(op, args)).into_result().unwrap()
    }

    fn rel(name: &str) -> Relationship {
        serde_json::from_value(json!({"name": name, "source": "tank/fs",
            "target_addr": "10.0.0.2:7878", "target_fs": "tank/copy",
            "schedule": 60, "keep": ""}))
        .unwrap()
    }

    /// A daemon in a fresh home (removed by the test) with pool tank and
    /// filesystem tank/fs.
    fn daemon_with_fs(tag: &str) -> (std::path::PathBuf, Daemon) {
        let home = std::env::temp_dir().join(format!("cachalot-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        let d = Daemon::open(&home, 64 << 20).unwrap();
        let img = home.join("d0.img").to_string_lossy().to_string();
        call(
            &d,
            "pool.create",
            json!({"name": "tank", "vdevs": [img], "size": "64M"}),
        );
        call(&d, "ds.create", json!({"name": "tank/fs"}));
        (home, d)
    }

    /// A peer's rollback reaches only relationship NAME's common snapshot
    /// (hold repl:NAME), only from the peer of a pull served here, and never
    /// a relationship run here; a refusal destroys nothing.
    #[test]
    fn a_peer_rolls_back_only_its_own_relationships_common_snapshot() {
        let (home, d) = daemon_with_fs("rollback");
        let store = d.ds_store("tank/fs").unwrap();
        let snap = |n: &str| {
            store.snapshot(&[format!("tank/fs@{n}")]).unwrap();
        };
        snap("a");
        store.hold("tank/fs@a", "repl:r1").unwrap();
        let names = || store.snapshot_names("tank/fs").unwrap().len();
        let ask = |name: Option<&str>, fp: &str| {
            let mut req = json!({"op": "rollback", "fs": "tank/fs", "snap": "a"});
            if let Some(n) = name {
                req["name"] = json!(n);
            }
            d.answer_rollback(&req, fp)
        };
        snap("b");
        for (name, why) in [(None, "without 'name'"), (Some("r2"), "no hold repl:r2")] {
            let e = ask(name, "K1").unwrap_err();
            assert!(e.contains(why), "{e}");
            assert_eq!(names(), 2, "a refused rollback destroyed a snapshot");
        }
        // A pull served here: only its puller's key.
        d.replication.pulled_by.lock().insert(
            "r1".into(),
            PulledBy {
                rel: rel("r1"),
                peer_key: "K1".into(),
            },
        );
        let e = ask(Some("r1"), "K2").unwrap_err();
        assert!(e.contains("another peer's"), "{e}");
        assert_eq!(names(), 2);
        ask(Some("r1"), "K1").unwrap();
        assert_eq!(names(), 1, "the puller's rollback did not roll back");
        d.replication.pulled_by.lock().clear();
        // A relationship run here: never from a peer.
        snap("c");
        d.replication.insert(rel("r1")).unwrap();
        let e = ask(Some("r1"), "K1").unwrap_err();
        assert!(e.contains("runs here"), "{e}");
        assert_eq!(names(), 2);
        let _ = std::fs::remove_dir_all(&home);
    }

    /// `state {sync: NAME}` commits a txg only for the peer of relationship
    /// NAME on a filesystem holding its snapshot (review: any paired peer
    /// could force txg syncs); the plain state is anyone's.
    #[test]
    fn only_a_relationships_peer_may_sync_its_filesystem() {
        let (home, d) = daemon_with_fs("statesync");
        let store = d.ds_store("tank/fs").unwrap();
        store.snapshot(&["tank/fs@a".to_string()]).unwrap();
        let state = |fs: &str, sync: Value, fp: &str| {
            d.serve_request("state", &json!({"op": "state", "fs": fs, "sync": sync}), fp)
        };
        assert!(state("tank/fs", Value::Null, "K9").is_ok());
        assert!(state("tank/fs", json!(false), "K9").is_ok());
        let e = state("tank/fs", json!(true), "K1").unwrap_err();
        assert!(e.contains("must name the relationship"), "{e}");
        let e = state("tank/fs", json!("r1"), "K1").unwrap_err();
        assert!(e.contains("no hold repl:r1"), "{e}");
        // A push target: the relationship's hold scopes it.
        store.hold("tank/fs@a", "repl:r1").unwrap();
        assert_eq!(state("tank/fs", json!("r1"), "K1").unwrap()["exists"], true);
        // A pull served here: only its puller's key.
        d.replication.pulled_by.lock().insert(
            "r1".into(),
            PulledBy {
                rel: rel("r1"),
                peer_key: "K1".into(),
            },
        );
        let e = state("tank/fs", json!("r1"), "K2").unwrap_err();
        assert!(e.contains("another peer's"), "{e}");
        assert!(state("tank/fs", json!("r1"), "K1").is_ok());
        d.replication.pulled_by.lock().clear();
        // A relationship run here: never for a peer.
        d.replication.insert(rel("r1")).unwrap();
        let e = state("tank/fs", json!("r1"), "K1").unwrap_err();
        assert!(e.contains("runs here"), "{e}");
        // A filesystem that does not exist has nothing to sync.
        assert_eq!(
            state("tank/nope", json!("r2"), "K1").unwrap()["exists"],
            false
        );
        let _ = std::fs::remove_dir_all(&home);
    }

    fn snaps(peer_has: &str) -> Vec<(String, u64, bool)> {
        peer_has
            .chars()
            .enumerate()
            .map(|(i, c)| (format!("s{i}"), i as u64, c == 'y'))
            .collect()
    }

    #[test]
    fn only_snapshots_between_the_two_newest_common_ones_are_leftovers() {
        // s2, s3: failed cycles between the last common s1 and this cycle's s4.
        assert_eq!(failed_cycle_leftovers(snaps("yynny")), ["s2", "s3"]);
        // s0 is history the target dropped: it stays.
        assert_eq!(failed_cycle_leftovers(snaps("nyny")), ["s2"]);
        // A target re-seeded by a full stream holds only the newest.
        assert!(failed_cycle_leftovers(snaps("nnny")).is_empty());
        // The peer lacks the newest: this cycle did not land, nothing is known.
        assert!(failed_cycle_leftovers(snaps("yyyn")).is_empty());
        assert!(failed_cycle_leftovers(Vec::new()).is_empty());
    }
}
