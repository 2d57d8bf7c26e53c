//! `cachalot mysql snapshot`: quiesce the server, take one atomic snapshot of its
//! datasets, record the replication position, release.
//!
//! Invariants:
//! - Everything that can be checked is checked before writes are blocked: the
//!   datasets exist and are mounted, every file place of the server is on one of
//!   them and each of them holds one, the snapshot name is free.
//! - Writes are blocked for at most `max_block` plus the release time: if the
//!   daemon has not taken the snapshot by then, the lock is released anyway and the
//!   snapshot, should it still appear, is destroyed (it would not match the
//!   recorded position).
//! - The lock is released on every path out (see `quiesce`); if this process dies,
//!   the server drops the lock with the session.
//! - The position is recorded on every snapshot of the set; if that fails, the
//!   snapshots are destroyed, so no snapshot claims to be a MySQL snapshot set
//!   without the properties that make it one.

use crate::daemon::Daemon;
use crate::paths::{self, member_of, ServerPaths};
use crate::quiesce::{self, Method, Position};
use crate::record::{SnapshotRecord, KEPT_SETTINGS};
use crate::server::{Credentials, Server};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What to snapshot and how.
#[derive(Clone, Debug)]
pub struct SnapshotRequest {
    pub mysql_socket: PathBuf,
    pub creds: Credentials,
    /// Datasets, the one holding the datadir first.
    pub datasets: Vec<String>,
    /// Snapshot name (the part after '@').
    pub snap: String,
    /// Seconds the quiesce statement may wait for running statements.
    pub lock_wait_timeout: u64,
    /// Longest time writes may stay blocked waiting for the daemon.
    pub max_block: Duration,
    /// Rotate the binary log (FLUSH BINARY LOGS) before quiescing, so that a clone's
    /// crash recovery scans a short last binlog file instead of a long one.
    pub rotate_binlog: bool,
}

/// What was done.
#[derive(Clone, Debug)]
pub struct SnapshotReport {
    pub snapshots: Vec<String>,
    pub method: Method,
    pub blocked: Duration,
    /// Parts of `blocked`: the blocking statement (commits in flight finishing),
    /// the daemon's atomic snapshot, and the release.
    pub acquire: Duration,
    pub snapshot: Duration,
    pub release: Duration,
    pub position: Position,
}

/// Test hook: hold the lock this long before asking the daemon (to test the
/// `max_block` limit and a client killed while holding the lock).
const HOLD_ENV: &str = "CACHALOT_TEST_MYSQL_HOLD_MS";

pub fn run(daemon: &mut Daemon, req: &SnapshotRequest) -> Result<SnapshotReport, String> {
    let rt = crate::runtime()?;
    rt.block_on(take(daemon, req))
}

/// The server's file places, read from its variables.
pub(crate) async fn server_paths(s: &mut Server) -> Result<ServerPaths, String> {
    let datadir = s
        .var("datadir")
        .await?
        .ok_or("the server did not report its datadir")?;
    let datadir = paths::canonical(Path::new(&datadir));
    let redo = s.var("innodb_log_group_home_dir").await?;
    let undo = s.var("innodb_undo_directory").await?;
    let home = s.var("innodb_data_home_dir").await?;
    let log_bin = s.var("log_bin").await?.unwrap_or_default();
    let basename = s.var("log_bin_basename").await?;
    Ok(ServerPaths {
        redo_dir: paths::resolve(&datadir, redo.as_deref()),
        undo_dir: paths::resolve(&datadir, undo.as_deref()),
        data_home_dir: paths::resolve(&datadir, home.as_deref()),
        binlog_basename: match (log_bin.as_str(), basename) {
            ("ON" | "1", Some(b)) if !b.is_empty() => Some(paths::resolve(&datadir, Some(&b))),
            _ => None,
        },
        datadir,
    })
}

/// Check that the datasets are exactly the server's: every file place is on one of
/// them, the datadir on the first, and each of them holds a place.
pub(crate) fn check_placement(
    datasets: &[String],
    mounts: &[PathBuf],
    sp: &ServerPaths,
    socket: &Path,
) -> Result<(), String> {
    let list = datasets.join(",");
    if member_of(&sp.datadir, mounts) != Some(0) {
        return Err(format!(
            "the datadir {} of the server at {} is not on {} (mounted at {}): these datasets are not this server's",
            sp.datadir.display(),
            socket.display(),
            datasets[0],
            mounts[0].display()
        ));
    }
    let mut used = vec![false; datasets.len()];
    for (what, place) in sp.places() {
        match member_of(place, mounts) {
            Some(i) => used[i] = true,
            None => {
                return Err(format!(
                    "the {what} {} of the server at {} is on none of {list}: a snapshot of them would miss it (list its dataset too)",
                    place.display(),
                    socket.display()
                ))
            }
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(format!(
            "{} (mounted at {}) holds none of the server's files (datadir, redo, undo, binary log)",
            datasets[i],
            mounts[i].display()
        ));
    }
    Ok(())
}

/// The mount point of every dataset (each must be a mounted filesystem).
pub(crate) fn mount_points(
    daemon: &mut Daemon,
    datasets: &[String],
) -> Result<Vec<PathBuf>, String> {
    let mounted = daemon.mounts()?;
    let mut out = Vec::new();
    for ds in datasets {
        let kind = daemon.kind(ds)?;
        if kind != "filesystem" {
            return Err(format!("'{ds}' is a {kind}, not a filesystem"));
        }
        match mounted.get(ds) {
            Some(p) => out.push(paths::canonical(p)),
            None => {
                return Err(format!(
                    "'{ds}' is not mounted: a MySQL server cannot be using it"
                ))
            }
        }
    }
    Ok(out)
}

async fn take(daemon: &mut Daemon, req: &SnapshotRequest) -> Result<SnapshotReport, String> {
    if req.datasets.is_empty() {
        return Err("no dataset given".into());
    }
    for (i, d) in req.datasets.iter().enumerate() {
        if req.datasets[..i].contains(d) {
            return Err(format!("dataset '{d}' is listed twice"));
        }
    }
    let names: Vec<String> = req
        .datasets
        .iter()
        .map(|d| format!("{d}@{}", req.snap))
        .collect();
    let mounts = mount_points(daemon, &req.datasets)?;
    for n in &names {
        if daemon.exists(n)? {
            return Err(format!("snapshot '{n}' already exists"));
        }
    }
    let mut holder = Server::connect(&req.mysql_socket, &req.creds).await?;
    let control = Server::connect(&req.mysql_socket, &req.creds).await?;
    let sp = server_paths(&mut holder).await?;
    check_placement(&req.datasets, &mounts, &sp, &req.mysql_socket)?;
    let mut settings = Vec::new();
    for k in KEPT_SETTINGS {
        if let Some(v) = holder.var(k).await? {
            settings.push((k.to_string(), v));
        }
    }
    let server_id = holder
        .var("server_id")
        .await?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let (flavor, version) = (holder.flavor, holder.version_string.clone());
    let method = Method::for_server(flavor, holder.version);
    if req.rotate_binlog && sp.binlog_basename.is_some() {
        holder.exec("FLUSH BINARY LOGS").await?;
    }
    // Commit what is dirty now, so the snapshot inside the lock has little to write.
    let pool = req.datasets[0].split('/').next().unwrap_or_default();
    daemon.sync_pool(pool)?;

    // The daemon request runs on its own thread and connection, so the lock can be
    // released on time even if the daemon does not answer.
    let mut worker_daemon = daemon.reconnect()?;
    let mut lock = quiesce::acquire(holder, control, method, req.lock_wait_timeout).await?;
    let position = match lock.position().await {
        Ok(p) => p,
        Err(e) => {
            let _ = lock.release().await;
            return Err(format!("cannot read the binary log position: {e}"));
        }
    };
    let hold_ms: u64 = std::env::var(HOLD_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let snap_names = names.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(hold_ms));
        let _ = tx.send(worker_daemon.snapshot(&snap_names));
    });
    let acquire = lock.acquire_time;
    let asked = std::time::Instant::now();
    let outcome = tokio::time::timeout(req.max_block, &mut rx).await;
    let snapshot_time = asked.elapsed();
    let releasing = std::time::Instant::now();
    let released = lock.release().await;
    let release_time = releasing.elapsed();
    let snapshot_result = match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err("the snapshot thread ended without an answer".into()),
        Err(_) => {
            // Too slow: writes are released already; whatever the daemon still does
            // must not leave a snapshot that claims the recorded position. Wait for
            // its answer first: a snapshot seen before its commit cannot be
            // destroyed yet.
            let late = tokio::time::timeout(LATE_ANSWER_WAIT, rx).await;
            if !matches!(late, Ok(Ok(Err(_)))) {
                discard_late(daemon, &names);
            }
            return Err(format!(
                "the daemon did not take the snapshot within {} ms; writes were released and no snapshot was kept",
                req.max_block.as_millis()
            ));
        }
    };
    let blocked = released?;
    snapshot_result?;
    let record = SnapshotRecord {
        members: req.datasets.clone(),
        mounts,
        flavor: flavor.name().into(),
        version,
        server_id,
        method: method.name().into(),
        blocked_ms: blocked.as_millis() as u64,
        position: position.clone(),
        paths: sp,
        settings,
    };
    if let Err(e) = record_on_all(daemon, &names, &record) {
        for n in &names {
            let _ = daemon.destroy(n);
        }
        return Err(format!(
            "cannot record the position on the snapshots ({e}); they were destroyed"
        ));
    }
    Ok(SnapshotReport {
        snapshots: names,
        method,
        blocked,
        acquire,
        snapshot: snapshot_time,
        release: release_time,
        position,
    })
}

fn record_on_all(
    daemon: &mut Daemon,
    names: &[String],
    record: &SnapshotRecord,
) -> Result<(), String> {
    let props = record.to_props();
    for n in names {
        for (k, v) in &props {
            daemon.set(n, k, v)?;
        }
    }
    Ok(())
}

/// How long a timed-out snapshot request may still take to answer.
const LATE_ANSWER_WAIT: Duration = Duration::from_secs(60);

/// After a timed-out snapshot request has answered (or not within
/// `LATE_ANSWER_WAIT`): destroy every snapshot of the set, retrying until none is
/// left (bounded), since one may still be committing.
fn discard_late(daemon: &mut Daemon, names: &[String]) {
    for _ in 0..600 {
        let mut left = false;
        for n in names {
            if daemon.exists(n).unwrap_or(true) {
                left = true;
                let _ = daemon.destroy(n);
            }
        }
        if !left {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
