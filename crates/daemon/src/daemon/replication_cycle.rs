//! Replication cycles on the source side, and the scheduler that starts them.
//!
//! One cycle of relationship R (source FS, target HOST:PORT/TFS):
//! 1. connect (TLS, the pinned key checked, greetings) and ask TFS's state;
//! 2. if the target holds a resume token: send the rest of that stream if the
//!    source can still honour it (`send -t`), else have the target discard it
//!    (`receive -A`) and say so in the status: a stale token never blocks R;
//! 3. find the newest common snapshot by guid; refuse a target that has
//!    snapshots newer than it, or changes since it (diverged), or none in
//!    common, with one line naming R, the target dataset and the snapshot;
//! 4. take snapshot `FS@repl-R-YYYYMMDD-HHMMSS`;
//! 5. send the increment from it (or everything, if TFS does not exist) into
//!    a resumable receive on the target, at most `bwlimit` bytes per second;
//! 6. hold the new snapshot with `repl:R` on both sides and release the old
//!    one (the newest common snapshot is always held on both sides);
//! 7. apply R's retention grid on both sides, as of the same second; the
//!    source also drops R's snapshots the target lacks (of failed cycles).
//!
//! A MySQL set (`replication_mysql.rs`) is replicated leg by leg, one leg per
//! member: steps 1-3 for every leg first, then one `mysql snapshot` of all
//! members (step 4), steps 5-6 for every leg, the set's record copied to the
//! target, and step 7 for every leg.
//!
//! Invariants: nothing on the target is destroyed or rolled back by a cycle
//! except R's own unheld snapshots by retention; a cycle that fails at any
//! step leaves both sides as consistent as before (at worst an extra source
//! snapshot, which retention removes, and a resume token, which the next
//! cycle uses or discards).

use super::replication::{hold_tag, now};
use super::replication_cascade::relayed_snapshot;
use super::replication_mysql::send_mysql_record;
use super::replication_reverse::plan_rollback;
use super::replication_tree::{gone_messages, member_error, record_members, Progress};
use super::{guarded, log, se, Daemon, OpResult};
use crate::proto::Args;
use cachalot_datasets::resume::ResumeToken;
use cachalot_datasets::{Store, StoreError, StreamStats};
use cachalot_replication::link::Link;
use cachalot_replication::pair;
use cachalot_replication::relationship::{snapshot_prefix, Relationship, Status};
use cachalot_replication::tls::TlsStream;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a completed cycle did.
pub(super) struct Report {
    pub(super) snapshot: String,
    pub(super) bytes: u64,
    pub(super) secs: f64,
    pub(super) messages: Vec<String>,
}

impl Report {
    /// Record this completed cycle of relationship `name`, started at
    /// `started` (unix seconds), in `s`.
    pub(super) fn record(&self, name: &str, s: &mut Status, started: u64) {
        // A relayed snapshot (a cascade) carries its upstream's name.
        let snap_time = super::replication_serve::snapshot_time(name, &self.snapshot)
            .or_else(|| super::replication_serve::snapshot_time_any(&self.snapshot));
        s.last_success = Some(now());
        s.last_snapshot = Some(self.snapshot.clone());
        s.last_snapshot_time = snap_time.or(Some(started));
        s.last_bytes = self.bytes;
        s.last_rate = (self.bytes as f64 / self.secs.max(1e-3)) as u64;
        s.total_bytes += self.bytes;
        s.cycles += 1;
        s.last_error = None;
        s.last_message = (!self.messages.is_empty()).then(|| self.messages.join("; "));
    }
}

fn short(fp: &str) -> &str {
    &fp[..fp.len().min(16)]
}

impl Daemon {
    /// Connect to a paired peer: TLS, its key checked against the pin for
    /// `addr`, greetings. Nothing is sent before the key is checked.
    pub(super) fn connect_peer(&self, addr: &str) -> Result<Link, String> {
        let r = &self.replication;
        let pinned = r.pinned_for(addr).ok_or_else(|| {
            format!(
                "this appliance is not paired with {addr}: pair first (cachalot replication pair {addr} TOKEN, with a token from `cachalot replication pair` there)"
            )
        })?;
        let id = r.identity()?;
        let tls = TlsStream::connect(addr, &id, r.timeout)?;
        if tls.peer_fingerprint() != pinned {
            return Err(format!(
                "{addr} presented key {}, not the key paired for it ({}): refusing (pair again if the peer was reinstalled)",
                short(tls.peer_fingerprint()),
                short(&pinned)
            ));
        }
        let mut link = Link::new(tls);
        link.greet(&id.fingerprint())?;
        Ok(link)
    }

    /// `replication pair ADDR TOKEN`: exchange keys with the listener at ADDR.
    pub(super) fn repl_pair(&self, addr: &str, token: &str) -> OpResult {
        let r = &self.replication;
        let id = r.identity()?;
        let ours = id.fingerprint();
        let tls = TlsStream::connect(addr, &id, r.timeout)?;
        let theirs = tls.peer_fingerprint().to_string();
        let mut link = Link::new(tls);
        link.greet(&ours)?;
        let reply =
            link.request(&json!({ "op": "pair", "proof": pair::proof(token, &ours, &theirs) }))?;
        if !pair::check_proof(reply["proof"].as_str().unwrap_or(""), token, &theirs, &ours) {
            return Err(format!(
                "pairing with {addr} failed: the peer could not prove it knows the token; nothing was pinned"
            ));
        }
        r.pin(&theirs, Some(addr))?;
        log(format!("replication: paired with {addr} (key {theirs})"));
        Ok(json!({ "address": addr, "fingerprint": theirs }))
    }

    /// `replication run NAME`: one cycle now (after the one running, if any).
    pub(super) fn repl_run(&self, name: &str) -> OpResult {
        let lock = self.replication.cycle_lock(name);
        let _cycle = lock.lock();
        self.cycle_locked(name)
    }

    /// One cycle of `name`, its cycle lock held; the status is stored either way.
    fn cycle_locked(&self, name: &str) -> OpResult {
        let r = &self.replication;
        let rel = r.get(name)?;
        if rel.broken {
            return Err(format!(
                "replication {name}: the relationship is broken off: resync it first"
            ));
        }
        let started = now();
        let t0 = Instant::now();
        r.update(name, |x| {
            x.status.last_attempt = Some(started);
            Ok(())
        })?;
        let mut progress = Progress::default();
        let res = guarded("replication", || {
            if rel.pull {
                self.pull_cycle(&rel, &mut progress)
            } else {
                self.cycle(&rel, None, &mut progress)
            }
        });
        let sent = res.as_ref().map_or(0, |rep| rep.bytes);
        super::replication_stats::cycle_done(name, res.is_ok(), sent, t0.elapsed());
        if rel.recursive {
            let snap_time = progress
                .snapshot
                .as_ref()
                .and_then(|s| super::replication_serve::snapshot_time(name, s));
            r.update(name, |x| {
                record_members(&mut x.status, &progress, snap_time.or(Some(started)));
                Ok(())
            })?;
        }
        match res {
            Ok(rep) => {
                r.update(name, |x| {
                    rep.record(name, &mut x.status, started);
                    Ok(())
                })?;
                log(format!(
                    "replication {name}: {} '{}@{}' ({} bytes in {:.1}s)",
                    if rel.pull { "pulled" } else { "sent" },
                    rel.source,
                    rep.snapshot,
                    rep.bytes,
                    rep.secs
                ));
                Ok(json!({
                    "snapshot": format!("{}@{}", rel.source, rep.snapshot),
                    "bytes": rep.bytes,
                    "seconds": rep.secs,
                    "messages": rep.messages,
                }))
            }
            Err(e) => {
                let e = format!("replication {name}: {e}");
                log(&e);
                r.update(name, |x| {
                    x.status.last_error = Some(e.clone());
                    Ok(())
                })?;
                Err(e)
            }
        }
    }

    /// One cycle of `rel` as its source: over `link` (a pull: the target
    /// connected and asked for it) or over a new connection to the target.
    /// `progress` keeps how far it got, whether it completes or not.
    pub(super) fn cycle(
        &self,
        rel: &Relationship,
        link: Option<&mut Link>,
        progress: &mut Progress,
    ) -> Result<Report, String> {
        let t0 = Instant::now();
        // One leg per replicated dataset (several for a MySQL set or a tree).
        let (legs, stores): (Vec<Relationship>, Vec<Arc<Store>>) =
            self.legs(rel)?.into_iter().unzip();
        let mut own;
        let link = match link {
            Some(l) => l,
            None => {
                own = self.connect_peer(&rel.target_addr)?;
                &mut own
            }
        };
        let mut bytes = 0;
        let mut messages = Vec::new();
        // Refusals come before the snapshot: a refused cycle changes nothing.
        let mut bases = Vec::new();
        for (leg, store) in legs.iter().zip(&stores) {
            let (sent, base) = prepare_leg(self, link, store, leg, &mut messages)
                .map_err(|e| member_error(rel, &leg.source, e))?;
            bytes += sent;
            bases.push(base);
        }
        // A filesystem received from upstream is relayed: no snapshot here.
        let upstream = self.relayed(rel, &legs, &stores)?;
        let snap = self.cycle_snapshot(rel, &legs, &stores, upstream.as_deref())?;
        progress.legs = legs
            .iter()
            .map(|l| (l.source.clone(), l.target_fs.clone()))
            .collect();
        progress.snapshot = Some(snap.clone());
        if rel.recursive {
            messages.extend(gone_messages(rel, &progress.legs));
        }
        for ((leg, store), from) in legs.iter().zip(&stores).zip(&bases) {
            let full = format!("{}@{snap}", leg.source);
            let from_full = from.as_ref().map(|f| format!("{}@{f}", leg.source));
            let mut sent_leg = || -> Result<u64, String> {
                if from.as_deref() == Some(snap.as_str()) {
                    // Relayed, and nothing new from upstream since the last cycle.
                    messages.push(format!("nothing new from upstream since '{full}'"));
                    return Ok(0);
                }
                if upstream.is_some() {
                    // Held before the send: upstream's retention may not
                    // destroy it under the transfer.
                    self.hold_once(store, &full, &hold_tag(&rel.name))?;
                }
                let n = self.transfer(link, leg, |w| {
                    store.send(&full, from_full.as_deref(), w, &mut |_| {})
                })?;
                link.request(
                    &json!({ "op": "hold", "fs": leg.target_fs, "snap": snap, "name": rel.name }),
                )?;
                self.move_hold(store, &leg.source, &snap, &hold_tag(&rel.name))?;
                Ok(n)
            };
            bytes += sent_leg().map_err(|e| member_error(rel, &leg.source, e))?;
            progress.done += 1;
        }
        if rel.mysql.is_some() {
            // Last: a set on the target carries its record only once every
            // member has arrived, so a record there names a complete set.
            send_mysql_record(link, &stores[0], &legs, &snap)?;
        }
        let at = now();
        for (leg, store) in legs.iter().zip(&stores) {
            let mut prune = || -> Result<(), String> {
                // A relayed filesystem's snapshots carry upstream's names: the
                // target keeps of them what this relationship's grid says, and
                // this side's are upstream's to prune.
                let mut req = json!({
                    "op": "prune", "fs": leg.target_fs, "name": rel.name, "keep": rel.keep, "now": at,
                });
                if let Some(up) = &upstream {
                    req["upstream"] = json!(up);
                    return link.request(&req).map(drop);
                }
                link.request(&req)?;
                let st = link.request(&json!({ "op": "state", "fs": leg.target_fs }))?;
                let theirs = snapshot_guids(&st);
                self.prune(store, &leg.source, &rel.name, &rel.keep, at, Some(&theirs))
                    .map(drop)
            };
            prune().map_err(|e| member_error(rel, &leg.source, e))?;
        }
        Ok(Report {
            snapshot: snap,
            bytes,
            secs: t0.elapsed().as_secs_f64(),
            messages,
        })
    }

    /// This cycle's snapshot of every leg: a `mysql snapshot` of a set, one
    /// atomic snapshot of the legs (as `snapshot -r`), or, relaying from
    /// `upstream`, the newest one received (`replication_cascade.rs`).
    fn cycle_snapshot(
        &self,
        rel: &Relationship,
        legs: &[Relationship],
        stores: &[Arc<Store>],
        upstream: Option<&str>,
    ) -> Result<String, String> {
        let sources: Vec<String> = legs.iter().map(|l| l.source.clone()).collect();
        if let Some(up) = upstream {
            return relayed_snapshot(&stores[0], &sources[0], up);
        }
        if let Some(m) = &rel.mysql {
            return self.mysql_cycle_snapshot(rel, m, stores);
        }
        let name = cycle_snapshot_name(stores, &rel.name, &sources)?;
        let all: Vec<String> = sources.iter().map(|s| format!("{s}@{name}")).collect();
        stores[0].snapshot(&all).map_err(se)?;
        Ok(name)
    }

    /// `replication break NAME`: no more cycles; the target stays as it is,
    /// usable on its own, and the holds stay so `resync` finds the common
    /// snapshot.
    pub(super) fn repl_break(&self, name: &str) -> OpResult {
        let lock = self.replication.cycle_lock(name);
        let _cycle = lock.lock();
        let rel = self.replication.update(name, |x| {
            x.broken = true;
            Ok(x.clone())
        })?;
        log(format!("replication {name}: broken off"));
        // A pull's target is here.
        let target = if rel.pull {
            rel.target_fs.clone()
        } else {
            rel.target()
        };
        Ok(json!({ "target": target, "last_snapshot": rel.status.last_snapshot }))
    }

    /// `replication resync NAME [-f]`: roll the target back to the newest
    /// common snapshot and resume cycles (every member of a MySQL set). What
    /// that would destroy (the target's newer snapshots, its changes since)
    /// is listed, and without `force` nothing is destroyed.
    pub(super) fn repl_resync(&self, name: &str, force: bool) -> OpResult {
        let lock = self.replication.cycle_lock(name);
        let _cycle = lock.lock();
        let rel = self.replication.get(name)?;
        if rel.pull {
            return self.resync_pull(&rel, force);
        }
        let ctx = |e: String| format!("replication {name}: {e}");
        let mut link = self.connect_peer(&rel.target_addr).map_err(ctx)?;
        // Every leg is checked before any is rolled back.
        let mut plans = Vec::new();
        for (leg, store) in self.legs(&rel).map_err(ctx)? {
            let plan = resync_plan(&mut link, &store, &leg)
                .map_err(|e| ctx(member_error(&rel, &leg.source, e)))?;
            plans.push(plan);
        }
        let lost: Vec<String> = plans.iter().flat_map(|p| p.2.clone()).collect();
        if !lost.is_empty() && !force {
            return Err(ctx(format!(
                "resync would destroy on {}: {}; run `cachalot replication resync -f {name}` to roll it back",
                rel.target_addr,
                lost.join(", ")
            )));
        }
        for (fs, common, leg_lost) in &plans {
            if let (Some(c), false) = (common, leg_lost.is_empty()) {
                link.request(&json!({ "op": "rollback", "name": name, "fs": fs, "snap": c }))
                    .map_err(ctx)?;
            }
        }
        link.request(&json!({ "op": "resume_here", "name": name }))
            .map_err(ctx)?;
        self.replication.update(name, |x| {
            x.broken = false;
            x.status.last_error = None;
            Ok(())
        })?;
        let common = plans[0].1.clone();
        log(format!(
            "replication {name}: resynced (rolled back to {common:?}, lost: {})",
            lost.join(", ")
        ));
        Ok(json!({ "common": common, "destroyed": lost }))
    }

    /// Send one stream (what `produce` writes) into a resumable receive of the
    /// target; returns the stream bytes. A refusal by the target comes back as
    /// its own line.
    fn transfer(
        &self,
        link: &mut Link,
        rel: &Relationship,
        produce: impl FnOnce(&mut dyn Write) -> Result<StreamStats, StoreError>,
    ) -> Result<u64, String> {
        // `rel` names the relationship in the target's analytics (older targets
        // ignore it).
        link.request(&json!({ "op": "receive", "fs": rel.target_fs, "rel": rel.name }))?;
        let flip = self.replication.corrupt_next.lock().take();
        let mut w = link.data_writer(rel.bwlimit);
        let produced = guarded("replication send", || match flip {
            Some(at) => {
                log(format!(
                    "replication {}: fault injection: the stream's byte at {at} is inverted",
                    rel.name
                ));
                produce(&mut FlipAt {
                    inner: &mut w,
                    at,
                    pos: 0,
                })
                .map_err(se)
            }
            None => produce(&mut w).map_err(se),
        });
        let finished = match produced {
            Ok(_) => w
                .finish()
                .map_err(|e| format!("connection to {} lost: {e}", rel.target_addr)),
            Err(e) => {
                let _ = w.abort(&e);
                Err(e)
            }
        };
        match finished {
            Ok(n) => link.read_reply().map(|_| n),
            // The target may have refused the stream: its reason says more than a
            // broken pipe does.
            Err(e) => Err(link.read_refusal().unwrap_or(e)),
        }
    }

    /// `debug.repl_corrupt {offset}` (tests only: `serve
    /// --allow-fault-injection`): the next stream this appliance sends has its
    /// byte at `offset` inverted before it enters the link, so a test sees what
    /// the receiver does with a corrupt stream that TLS delivered intact.
    pub(super) fn debug_repl_corrupt(&self, a: &Args) -> OpResult {
        if !self
            .fault_injection
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(
                "fault injection is off: start the daemon with `serve --allow-fault-injection` (tests only)"
                    .into(),
            );
        }
        let at = a.u64("offset")?;
        *self.replication.corrupt_next.lock() = Some(at);
        log(format!(
            "replication: fault injection: the next stream sent gets its byte at {at} inverted"
        ));
        Ok(Value::Null)
    }

    /// Run due cycles in the background until the daemon shuts down.
    pub fn start_replication_scheduler(self: &Arc<Self>) -> std::io::Result<()> {
        let d = self.clone();
        std::thread::Builder::new()
            .name("cachalot-repl-sched".into())
            .spawn(move || {
                let mut sampled = Instant::now();
                loop {
                    std::thread::sleep(Duration::from_millis(250));
                    if d.is_shutting_down() {
                        return;
                    }
                    if sampled.elapsed() >= super::replication_stats::LAG_SAMPLE {
                        sampled = Instant::now();
                        d.sample_replication_lag();
                    }
                    for name in d.replication.names() {
                        let Ok(rel) = d.replication.get(&name) else {
                            continue;
                        };
                        let due = rel
                            .status
                            .last_attempt
                            .is_none_or(|t| now() >= t + rel.schedule);
                        if rel.paused || rel.broken || !due || d.replication.is_running(&name) {
                            continue;
                        }
                        let d2 = d.clone();
                        let _ = std::thread::Builder::new()
                            .name("cachalot-repl-cycle".into())
                            .spawn(move || {
                                let lock = d2.replication.cycle_lock(&name);
                                if let Some(_cycle) = lock.try_lock() {
                                    let _ = d2.cycle_locked(&name);
                                };
                            });
                    }
                }
            })?;
        Ok(())
    }
}

/// Before a cycle's snapshot, for one leg: finish or discard the target's
/// interrupted transfer, then find the newest common snapshot (the base of
/// the increment; `None`: a full send). Returns the bytes resumed and the base.
fn prepare_leg(
    d: &Daemon,
    link: &mut Link,
    store: &Store,
    leg: &Relationship,
    messages: &mut Vec<String>,
) -> Result<(u64, Option<String>), String> {
    // With the relationship's name, a target that broke it off refuses here,
    // before the cycle's snapshot.
    let state_req = json!({ "op": "state", "fs": leg.target_fs, "name": leg.name });
    let mut st = link.request(&state_req)?;
    let mut bytes = 0;
    if let Some(tok) = st["token"].as_str().map(str::to_string) {
        match honourable(store, leg, &tok) {
            Ok(snap) => {
                bytes += d.transfer(link, leg, |w| store.send_resume(&tok, w, &mut |_| {}))?;
                messages.push(format!("resumed the interrupted transfer of '{snap}'"));
            }
            Err(why) => {
                link.request(&json!({ "op": "abort", "fs": leg.target_fs }))?;
                let m = format!("discarded the target's resume token: {why}");
                log(format!("replication {}: {m}", leg.name));
                messages.push(m);
            }
        }
        st = link.request(&state_req)?;
    }
    Ok((bytes, common_base(store, leg, &st)?))
}

/// Check that the source can continue the stream of a target's resume
/// token; returns the snapshot it resumes, or why it cannot.
fn honourable(store: &Store, rel: &Relationship, token: &str) -> Result<String, String> {
    let t = ResumeToken::decode(token).map_err(se)?;
    let fs = t.snapshot.split_once('@').map(|(f, _)| f).unwrap_or("");
    if fs != rel.source {
        return Err(format!(
            "it continues '{}', which is not a snapshot of '{}'",
            t.snapshot, rel.source
        ));
    }
    if store.snapshot_guid(&t.snapshot).ok() != Some(t.guid) {
        return Err(format!(
            "its snapshot '{}' no longer exists on the source",
            t.snapshot
        ));
    }
    if t.from_guid != 0 {
        let names = store.snapshot_names(fs).map_err(se)?;
        let base = names
            .iter()
            .any(|n| store.snapshot_guid(&format!("{fs}@{n}")).ok() == Some(t.from_guid));
        if !base {
            return Err(format!(
                "the base of its increment to '{}' no longer exists on the source",
                t.snapshot
            ));
        }
    }
    Ok(t.snapshot)
}

/// The name of this cycle's snapshot, `repl-NAME-YYYYMMDD-HHMMSS`, free on
/// every dataset of `sources` (waiting for the next second if this one's
/// is taken).
pub(super) fn cycle_snapshot_name(
    stores: &[Arc<Store>],
    rel_name: &str,
    sources: &[String],
) -> Result<String, String> {
    for _ in 0..8 {
        let name = format!(
            "{}{}",
            snapshot_prefix(rel_name),
            cachalot_analytics::query::compact_utc(now())
        );
        let taken = sources
            .iter()
            .zip(stores)
            .any(|(src, store)| store.snapshot_guid(&format!("{src}@{name}")).is_ok());
        if !taken {
            return Ok(name);
        }
        std::thread::sleep(Duration::from_millis(400));
    }
    Err("cannot name the cycle's snapshot (the clock does not move?)".into())
}

/// The newest snapshot the target has in common with the source (its name on
/// the source), or `None` when the target does not exist (a full send).
fn common_base(store: &Store, rel: &Relationship, st: &Value) -> Result<Option<String>, String> {
    if !st["exists"].as_bool().unwrap_or(false) {
        return Ok(None);
    }
    let target = rel.target();
    let tfs = &rel.target_fs;
    let src: Vec<(String, u64)> = store
        .snapshot_names(&rel.source)
        .map_err(se)?
        .into_iter()
        .filter_map(|n| {
            let g = store.snapshot_guid(&format!("{}@{n}", rel.source)).ok()?;
            Some((n, g))
        })
        .collect();
    let tsnaps: Vec<(String, u64)> = st["snapshots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s["name"].as_str()?.to_string(), s["guid"].as_u64()?)))
        .collect();
    let common = tsnaps
        .iter()
        .rposition(|(_, g)| src.iter().any(|(_, sg)| sg == g));
    let Some(ci) = common else {
        return Err(match tsnaps.last() {
            Some((n, _)) => format!(
                "target {target} has no snapshot in common with '{}' (its newest is '{tfs}@{n}'): refusing; nothing was changed",
                rel.source
            ),
            None => format!(
                "target {target} exists and has no snapshots: refusing to overwrite it; nothing was changed"
            ),
        });
    };
    let (cname, cguid) = &tsnaps[ci];
    if let Some((n, _)) = tsnaps.get(ci + 1) {
        return Err(format!(
            "target {target} has diverged: its snapshot '{tfs}@{n}' is newer than the newest common snapshot '{cname}' and is not on the source; refusing, nothing was changed"
        ));
    }
    if st["written"].as_u64().unwrap_or(0) > 0 {
        return Err(format!(
            "target {target} has diverged: it was changed since snapshot '{tfs}@{cname}'; refusing, nothing was changed"
        ));
    }
    let on_source = src.iter().find(|(_, g)| g == cguid).expect("found above");
    Ok(Some(on_source.0.clone()))
}

/// What `resync` does to one leg's target filesystem: (it, the newest
/// snapshot in common with the source, what rolling back to it destroys).
/// A target that does not exist has nothing to roll back.
fn resync_plan(
    link: &mut Link,
    store: &Store,
    leg: &Relationship,
) -> Result<(String, Option<String>, Vec<String>), String> {
    let tfs = &leg.target_fs;
    // Synced there first, so that its latest writes are counted.
    let st = link.request(&json!({ "op": "state", "fs": tfs, "sync": leg.name }))?;
    if !st["exists"].as_bool().unwrap_or(false) {
        return Ok((tfs.clone(), None, Vec::new()));
    }
    let src: Vec<u64> = store
        .snapshot_names(&leg.source)
        .map_err(se)?
        .iter()
        .filter_map(|n| store.snapshot_guid(&format!("{}@{n}", leg.source)).ok())
        .collect();
    let (common, lost) = plan_rollback(tfs, &st, |g| src.contains(&g));
    if common.is_none() {
        return Err(format!(
            "target {} has no snapshot in common with '{}': nothing to roll back to; destroy the target filesystem to start over",
            leg.target(),
            leg.source
        ));
    }
    Ok((tfs.clone(), common, lost))
}

/// The guids of the snapshots a peer's `state` answer lists.
pub(super) fn snapshot_guids(state: &Value) -> Vec<u64> {
    state["snapshots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["guid"].as_u64())
        .collect()
}

/// A writer that inverts the byte at stream offset `at` on its way to `inner`
/// (`debug.repl_corrupt`). A byte `inner` did not take is inverted again in
/// the next write, which starts with it.
struct FlipAt<'a> {
    inner: &'a mut dyn Write,
    at: u64,
    pos: u64,
}

impl Write for FlipAt<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match self.at.checked_sub(self.pos) {
            Some(i) if (i as usize) < buf.len() => {
                let mut copy = buf.to_vec();
                copy[i as usize] ^= 0xff;
                self.inner.write(&copy)?
            }
            _ => self.inner.write(buf)?,
        };
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
