//! The typed MySQL requests of cachalot-api-types ([`cachalot_api_types::mysql`]),
//! run: the one path from a request to the work for `cachalot mysql ...` (in the
//! CLI's process) and for the daemon's REST routes (in the daemon, over a local
//! [`Daemon`]). Each request is first turned into the operation's own (checking
//! what typing cannot: absolute paths, names, ranges), then run; the `*_json`
//! functions give the report as the REST API answers it.
//!
//! Invariants:
//! - A request refused by its conversion changed nothing (nothing ran yet).
//! - The MySQL password is the process's `$MYSQL_PWD` ([`Credentials::new`]).

use crate::advice::{self, Advice, Facts, Kind};
use crate::clone::{CloneReport, CloneRequest, Progress};
use crate::daemon::{Daemon, PROP_PREFIX};
use crate::policy::{self, Pruned};
use crate::record::SnapshotRecord;
use crate::restore::{self, RestoreReport};
use crate::server::Credentials;
use crate::snapshot::{SnapshotReport, SnapshotRequest};
use cachalot_api_types::mysql::{MysqlAdvise, MysqlClone, MysqlList, MysqlRestore, MysqlSnapshot};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn creds(user: &Option<String>) -> Credentials {
    Credentials::new(user.as_deref().unwrap_or("root"))
}

/// `p` as an absolute path, or an error naming `field`.
fn abs_path(field: &str, p: &str) -> Result<PathBuf, String> {
    let path = Path::new(p);
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Err(format!("{field} must be an absolute path, not '{p}'"))
    }
}

fn opt_abs(field: &str, p: &Option<String>) -> Result<Option<PathBuf>, String> {
    p.as_deref().map(|p| abs_path(field, p)).transpose()
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The snapshot operation's request (with `keep`, the timestamped name).
pub fn snapshot_request(r: &MysqlSnapshot) -> Result<SnapshotRequest, String> {
    let datasets: Vec<String> = r
        .datasets
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if datasets.is_empty() {
        return Err("no dataset given (DATAFS[,LOGFS])".into());
    }
    if let Some(d) = datasets.iter().find(|d| d.contains('@')) {
        return Err(format!(
            "'{d}': give dataset names and the snapshot name separately (DATAFS[,LOGFS] SNAPNAME)"
        ));
    }
    if r.snapshot.is_empty() || r.snapshot.contains('@') || r.snapshot.contains('/') {
        return Err(format!(
            "invalid snapshot name '{}' (the part after '@')",
            r.snapshot
        ));
    }
    Ok(SnapshotRequest {
        mysql_socket: abs_path("the MySQL socket", &r.socket)?,
        creds: creds(&r.user),
        datasets,
        snap: match r.keep {
            Some(0) => return Err("keep must be at least 1".into()),
            Some(_) => policy::timestamped(&r.snapshot),
            None => r.snapshot.clone(),
        },
        lock_wait_timeout: r.lock_wait_timeout.unwrap_or(10),
        max_block: Duration::from_millis(r.max_block_ms.unwrap_or(10_000).max(1)),
        rotate_binlog: !r.no_binlog_rotate,
    })
}

/// Take the set; with `keep`, prune the older timestamped sets afterwards.
pub fn snapshot(
    d: &mut Daemon,
    r: &MysqlSnapshot,
) -> Result<(SnapshotReport, Option<Pruned>), String> {
    let req = snapshot_request(r)?;
    let report = crate::snapshot::run(d, &req)?;
    let pruned = match r.keep {
        Some(keep) => Some(policy::prune(d, &req.datasets, &r.snapshot, keep)?),
        None => None,
    };
    Ok((report, pruned))
}

pub fn snapshot_json(d: &mut Daemon, r: &MysqlSnapshot) -> Result<Value, String> {
    let (s, pruned) = snapshot(d, r)?;
    let p = &s.position;
    let pruned = pruned.unwrap_or_default();
    Ok(json!({
        "snapshots": s.snapshots,
        "binlog_file": p.binlog_file,
        "binlog_pos": p.binlog_pos,
        "gtid": p.gtid,
        "method": s.method.name(),
        "blocked_ms": ms(s.blocked),
        "acquire_ms": ms(s.acquire),
        "snapshot_ms": ms(s.snapshot),
        "release_ms": ms(s.release),
        "pruned": pruned.destroyed,
        "kept": pruned.kept.iter().map(|(n, why)| json!({"name": n, "reason": why})).collect::<Vec<_>>(),
    }))
}

/// The clone operation's request.
pub fn clone_request(r: &MysqlClone) -> Result<CloneRequest, String> {
    if (r.port.is_some() || r.socket.is_some()) && !r.start && r.replica_of.is_none() {
        return Err("port and socket describe the new server: add start (--start)".into());
    }
    Ok(CloneRequest {
        snapshot: r.snapshot.clone(),
        target: r.target.clone(),
        mountpoint: opt_abs("mountpoint", &r.mountpoint)?,
        start: r.start,
        port: r.port,
        socket: opt_abs("socket", &r.socket)?,
        run_dir: opt_abs("run_dir", &r.run_dir)?,
        server_id: r.server_id,
        replica_of: opt_abs("replica_of", &r.replica_of)?,
        creds: creds(&r.user),
        start_timeout: Duration::from_secs(r.start_timeout.unwrap_or(120).max(1)),
    })
}

/// Everything a clone checks before it creates anything (see [`crate::clone::check`]).
pub fn clone_check(d: &mut Daemon, r: &MysqlClone) -> Result<(), String> {
    crate::clone::check(d, &clone_request(r)?)
}

pub fn clone(d: &mut Daemon, r: &MysqlClone, progress: Progress) -> Result<CloneReport, String> {
    crate::clone::run_with_progress(d, &clone_request(r)?, progress)
}

pub fn clone_json(d: &mut Daemon, r: &MysqlClone, progress: Progress) -> Result<Value, String> {
    let c = clone(d, r, progress)?;
    Ok(json!({
        "clones": c.clones.iter().map(|(ds, mp)| json!({"dataset": ds, "mountpoint": mp})).collect::<Vec<_>>(),
        "config": c.config,
        "server": c.server.as_ref().map(|s| json!({"pid": s.pid, "socket": s.socket, "error_log": s.error_log})),
        "replica_from": c.replica_from,
        "elapsed_s": c.elapsed.as_secs_f64(),
        "prepare_s": c.prepare.as_secs_f64(),
        "start_s": c.start.as_secs_f64(),
        "replication_s": c.replication.as_secs_f64(),
    }))
}

pub fn restore(d: &mut Daemon, r: &MysqlRestore) -> Result<RestoreReport, String> {
    restore::run(d, &r.snapshot, r.recursive)
}

pub fn restore_json(d: &mut Daemon, r: &MysqlRestore) -> Result<Value, String> {
    let x = restore(d, r)?;
    Ok(json!({
        "rolled_back": x.rolled_back,
        "remounted": x.remounted.iter().map(|(ds, mp)| json!({"dataset": ds, "mountpoint": mp})).collect::<Vec<_>>(),
    }))
}

/// The facts and the advice, every rule in order.
pub fn advise(d: &mut Daemon, r: &MysqlAdvise) -> Result<(Facts, Vec<Advice>), String> {
    let sock = abs_path("the MySQL socket", &r.socket)?;
    let facts = advice::gather(d, &sock, &creds(&r.user), r.fs.as_deref(), r.arc_size)?;
    let all = advice::rules(&facts);
    Ok((facts, all))
}

/// The name of an advice kind in the API.
pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::MyCnf => "mycnf",
        Kind::Dataset => "dataset",
        Kind::Measure => "measure",
        Kind::Ok => "ok",
    }
}

pub fn advise_json(d: &mut Daemon, r: &MysqlAdvise) -> Result<Value, String> {
    let (facts, all) = advise(d, r)?;
    Ok(json!({
        "version": facts.server.version,
        "datadir_dataset": facts.data.name,
        "advice": all.iter().map(|a| json!({"kind": kind_name(a.kind), "setting": a.setting, "reason": a.reason})).collect::<Vec<_>>(),
    }))
}

/// Every MySQL snapshot set, once each (named by its data member's snapshot),
/// oldest first within a dataset.
pub fn list(d: &mut Daemon, r: &MysqlList) -> Result<Vec<Value>, String> {
    let members_prop = format!("{PROP_PREFIX}members");
    // Snapshot rows of ds.list carry no user properties: each is asked for its
    // members with ds.get.
    let mut args = json!({ "recursive": true, "type": "snapshot", "props": ["name", "creation"] });
    if let Some(p) = &r.pool {
        args["name"] = json!(p);
    }
    let rows = d.call("ds.list", args)?;
    let mut out = Vec::new();
    for row in rows.as_array().into_iter().flatten() {
        let raw = |p: &str| row["props"][p]["raw"].as_str().unwrap_or("-").to_string();
        let name = row["name"].as_str().unwrap_or_default().to_string();
        let Some((fs, snap)) = name.split_once('@') else {
            continue;
        };
        let members = d
            .get(&name, &[members_prop.as_str()])?
            .remove(&members_prop)
            .unwrap_or_default();
        // A set is listed once: by the snapshot of its first (datadir) member.
        if members.split(',').next() != Some(fs) {
            continue;
        }
        let rec = SnapshotRecord::from_props(&name, &d.get_all(&name)?)?;
        out.push(json!({
            "name": name,
            "snapshot": snap,
            "members": rec.members,
            "created": raw("creation").parse::<u64>().ok(),
            "flavor": rec.flavor,
            "version": rec.version,
            "server_id": rec.server_id,
            "gtid": rec.position.gtid,
            "binlog_file": rec.position.binlog_file,
            "binlog_pos": rec.position.binlog_pos,
            "blocked_ms": rec.blocked_ms,
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_refuse_what_typing_cannot() {
        let good = MysqlSnapshot {
            socket: "/run/mysqld.sock".into(),
            datasets: vec!["tank/db/data".into(), " tank/db/log ".into()],
            snapshot: "s1".into(),
            ..Default::default()
        };
        let r = snapshot_request(&good).unwrap();
        assert_eq!(r.datasets, ["tank/db/data", "tank/db/log"]);
        assert_eq!((r.snap.as_str(), r.lock_wait_timeout), ("s1", 10));
        for bad in [
            MysqlSnapshot {
                socket: "rel.sock".into(),
                ..good.clone()
            },
            MysqlSnapshot {
                datasets: vec![],
                ..good.clone()
            },
            MysqlSnapshot {
                datasets: vec!["tank/db@x".into()],
                ..good.clone()
            },
            MysqlSnapshot {
                snapshot: "a@b".into(),
                ..good.clone()
            },
            MysqlSnapshot {
                keep: Some(0),
                ..good.clone()
            },
        ] {
            assert!(snapshot_request(&bad).is_err(), "{bad:?}");
        }
        let c = MysqlClone {
            snapshot: "t/d@s".into(),
            target: "t/r".into(),
            ..Default::default()
        };
        assert!(clone_request(&c).is_ok());
        for bad in [
            MysqlClone {
                replica_of: Some("m.sock".into()),
                ..c.clone()
            },
            MysqlClone {
                port: Some(3307),
                ..c.clone()
            },
        ] {
            assert!(clone_request(&bad).is_err(), "{bad:?}");
        }
    }
}
