//! `cachalot mysql failover RELATIONSHIP`, on the target appliance of a
//! replicated MySQL set: break the relationship off here, clone the newest
//! complete replicated snapshot set, start a server on the clone and report
//! the GTID position it holds.
//!
//! Invariants:
//! - The set used is the newest one whose snapshots carry a MySQL record: a
//!   cycle writes the record on the target after every member arrived
//!   (daemon `replication_mysql.rs`), so a record names a complete set.
//! - The replicated datasets are not changed: the server runs on clones of
//!   them (`clone`), so `replication resync` can later roll them back and
//!   resume, and the set stays available for another clone.
//! - The relationship is broken off here before anything starts: the source's
//!   cycles are refused from then on (no stream lands under a running server).
//!   Once the server runs, the mark also records its set (clones, socket,
//!   user): `replication reverse` on the old source makes it the new source.
//! - Errors are one line naming the relationship.

use crate::clone::{self, CloneReport, CloneRequest};
use crate::daemon::{Daemon, PROP_PREFIX};
use crate::server::{Credentials, Server};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct FailoverRequest {
    pub relationship: String,
    /// The clone's name (default: next to the set's first member,
    /// `failover-RELATIONSHIP`).
    pub target: Option<String>,
    pub mountpoint: Option<PathBuf>,
    pub port: Option<u16>,
    pub socket: Option<PathBuf>,
    pub run_dir: Option<PathBuf>,
    pub server_id: Option<u64>,
    pub creds: Credentials,
    pub start_timeout: Duration,
}

#[derive(Clone, Debug)]
pub struct FailoverReport {
    /// FS@SNAP of the set's first member (the datadir).
    pub snapshot: String,
    pub members: Vec<String>,
    /// The GTID position `mysql snapshot` recorded on the source.
    pub recorded_gtid: String,
    /// What the started server reports: @@gtid_binlog_pos, @@gtid_current_pos.
    pub gtid_binlog_pos: String,
    pub gtid_current_pos: String,
    pub clone: CloneReport,
}

pub fn run(daemon: &mut Daemon, req: &FailoverRequest) -> Result<FailoverReport, String> {
    let rel = &req.relationship;
    let rt = crate::runtime()?;
    rt.block_on(failover(daemon, req))
        .map_err(|e| format!("mysql failover {rel}: {e}"))
}

/// The relationship's snapshots on this appliance whose name is
/// `repl-REL-...`, newest first, each with its record's members ("-": none).
fn replicated_snapshots(daemon: &mut Daemon, rel: &str) -> Result<Vec<(String, String)>, String> {
    let members = format!("{PROP_PREFIX}members");
    // (Snapshot rows of a list carry no user properties: each is asked for.)
    let rows = daemon.call(
        "ds.list",
        json!({ "recursive": true, "type": "snapshot", "props": ["name"] }),
    )?;
    let prefix = format!("@repl-{rel}-");
    let mut names: Vec<String> = rows
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .filter(|n| n.contains(&prefix))
        .map(str::to_string)
        .collect();
    // The names end in YYYYMMDD-HHMMSS: by name is by time.
    names.sort_by(|a, b| snap_part(b).cmp(snap_part(a)));
    let mut out = Vec::new();
    for n in names {
        let m = daemon
            .get(&n, &[&members])?
            .remove(&members)
            .unwrap_or_else(|| "-".into());
        out.push((n, m));
    }
    Ok(out)
}

fn snap_part(name: &str) -> &str {
    name.split_once('@').map_or(name, |(_, s)| s)
}

/// The newest complete replicated set: (FS@SNAP of its first member, members).
fn newest_set(daemon: &mut Daemon, rel: &str) -> Result<(String, Vec<String>), String> {
    let snaps = replicated_snapshots(daemon, rel)?;
    let Some((newest, _)) = snaps.first() else {
        return Err(format!(
            "no replicated snapshot set of relationship '{rel}' on this appliance (is this its target, and has a cycle completed?)"
        ));
    };
    let Some((_, members)) = snaps.iter().find(|(_, m)| m != "-") else {
        return Err(format!(
            "relationship '{rel}' is not a MySQL set: its snapshots here (newest '{newest}') carry no MySQL record (create it with --mysql-socket)"
        ));
    };
    let snap = snaps
        .iter()
        .find(|(_, m)| m == members)
        .map(|(n, _)| snap_part(n).to_string())
        .unwrap_or_default();
    let members: Vec<String> = members.split(',').map(str::to_string).collect();
    Ok((format!("{}@{snap}", members[0]), members))
}

async fn failover(daemon: &mut Daemon, req: &FailoverRequest) -> Result<FailoverReport, String> {
    let rel = &req.relationship;
    let (snapshot, members) = newest_set(daemon, rel)?;
    let target = match &req.target {
        Some(t) => t.clone(),
        None => match members[0].rsplit_once('/') {
            Some((parent, _)) => format!("{parent}/failover-{rel}"),
            None => format!("{}/failover-{rel}", members[0]),
        },
    };
    daemon.call("repl.break_here", json!({ "name": rel }))?;
    let recorded_gtid = daemon
        .get(&snapshot, &[&format!("{PROP_PREFIX}gtid")])?
        .into_values()
        .next()
        .filter(|g| g != "-")
        .unwrap_or_default();
    let creq = CloneRequest {
        snapshot: snapshot.clone(),
        target,
        mountpoint: req.mountpoint.clone(),
        start: true,
        port: req.port,
        socket: req.socket.clone(),
        run_dir: req.run_dir.clone(),
        server_id: req.server_id,
        replica_of: None,
        creds: req.creds.clone(),
        start_timeout: req.start_timeout,
    };
    let report = clone::clone(daemon, &creq, &mut |_, _| {})
        .await
        .map_err(|e| format!("cannot start MariaDB on '{snapshot}': {e}"))?;
    let started = report
        .server
        .as_ref()
        .ok_or("the clone started no server")?;
    // The set now serving is what `replication reverse` replicates back.
    let live: Vec<&str> = report.clones.iter().map(|(c, _)| c.as_str()).collect();
    daemon.call(
        "repl.break_here",
        json!({
            "name": rel,
            "members": live,
            "mysql_socket": started.socket,
            "mysql_user": req.creds.user,
        }),
    )?;
    let mut s = Server::connect(&started.socket, &req.creds).await?;
    let binlog = s.var("gtid_binlog_pos").await?.unwrap_or_default();
    let current = s.var("gtid_current_pos").await?.unwrap_or_default();
    s.close().await;
    Ok(FailoverReport {
        snapshot,
        members,
        recorded_gtid,
        gtid_binlog_pos: binlog,
        gtid_current_pos: current,
        clone: report,
    })
}
