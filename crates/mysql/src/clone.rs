//! `cachalot mysql clone FS@SNAP NEWFS`: clone every dataset of a snapshot set,
//! mount the clones, write a config for a new server, optionally start it and make
//! it a GTID replica of the source.
//!
//! Invariants:
//! - With one member the clone is NEWFS; with several, NEWFS is a new parent and
//!   each member's clone is NEWFS/<last name component of the member>.
//! - If cloning or mounting fails, what this command created is unmounted and
//!   destroyed again; a server that started stays running (its pid is reported and
//!   recorded) because the error may be worth inspecting there.
//! - The new server's pid, socket and config are recorded as user properties of
//!   the data clone (`cachalot.mysql:pid`, `:socket`, `:cnf`) so `restore` and
//!   people can tell what runs on it.
//! - Replication info copied from the source (master.info, relay logs, auto.cnf,
//!   pid and socket files) is removed from the clone before its server starts.

use crate::config::{derive_server_id, CloneConfig, RunPlaces};
use crate::daemon::{Daemon, PROP_PREFIX};
use crate::process;
use crate::record::SnapshotRecord;
use crate::replica;
use crate::server::{Credentials, Server};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct CloneRequest {
    /// FS@SNAP of any member of the set.
    pub snapshot: String,
    pub target: String,
    /// Mount the clone(s) here (several members: DIR/<name>); default: the
    /// mountpoint property.
    pub mountpoint: Option<PathBuf>,
    pub start: bool,
    pub port: Option<u16>,
    pub socket: Option<PathBuf>,
    pub run_dir: Option<PathBuf>,
    pub server_id: Option<u64>,
    pub replica_of: Option<PathBuf>,
    pub creds: Credentials,
    pub start_timeout: Duration,
}

/// A server this command started.
#[derive(Clone, Debug)]
pub struct Started {
    pub pid: u32,
    pub socket: PathBuf,
    pub error_log: PathBuf,
}

#[derive(Clone, Debug)]
pub struct CloneReport {
    /// (clone dataset, mount path)
    pub clones: Vec<(String, PathBuf)>,
    pub config: PathBuf,
    pub server: Option<Started>,
    /// GTID position replication started from.
    pub replica_from: Option<String>,
    pub elapsed: Duration,
    /// Parts of `elapsed`: clone + mount + config, server start until it answers,
    /// replication set-up until both threads run.
    pub prepare: Duration,
    pub start: Duration,
    pub replication: Duration,
}

/// A step of a clone and the fraction of the whole done when it begins (the
/// server start and the replica's catch-up take most of the time).
pub type Progress<'a> = &'a mut dyn FnMut(&str, f64);

pub fn run(daemon: &mut Daemon, req: &CloneRequest) -> Result<CloneReport, String> {
    run_with_progress(daemon, req, &mut |_, _| {})
}

/// `run`, telling `progress` each step as it begins.
pub fn run_with_progress(
    daemon: &mut Daemon,
    req: &CloneRequest,
    progress: Progress,
) -> Result<CloneReport, String> {
    let rt = crate::runtime()?;
    rt.block_on(clone(daemon, req, progress))
}

/// Every check `run` makes before it creates anything (the set, the free target
/// names, the `replica_of` source): an error here means `run` would change nothing.
pub fn check(daemon: &mut Daemon, req: &CloneRequest) -> Result<(), String> {
    let rt = crate::runtime()?;
    rt.block_on(async {
        if let Some((source, _)) = plan(daemon, req).await?.source {
            source.close().await;
        }
        Ok(())
    })
}

fn leaf(ds: &str) -> &str {
    ds.rsplit('/').next().unwrap_or(ds)
}

/// Names of the clones, member by member.
pub fn target_names(members: &[String], target: &str) -> Result<Vec<String>, String> {
    if members.len() == 1 {
        return Ok(vec![target.to_string()]);
    }
    let names: Vec<String> = members
        .iter()
        .map(|m| format!("{target}/{}", leaf(m)))
        .collect();
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(format!(
                "two members of the set end in '{}': cannot name their clones under {target}",
                leaf(n)
            ));
        }
    }
    Ok(names)
}

/// What was created so far, undone on failure.
struct Undo<'a> {
    daemon: &'a mut Daemon,
    mounted: Vec<String>,
    created: Vec<String>,
    armed: bool,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        for m in self.mounted.iter().rev() {
            let _ = self.daemon.unmount(m);
        }
        for c in self.created.iter().rev() {
            let _ = self.daemon.destroy(c);
        }
    }
}

/// What the checks found: the set, the names of the clones, and the source
/// server (connected) with its address when the clone is to replicate from it.
struct Plan {
    snap: String,
    rec: SnapshotRecord,
    targets: Vec<String>,
    source: Option<(Server, replica::SourceAddress)>,
}

async fn plan(daemon: &mut Daemon, req: &CloneRequest) -> Result<Plan, String> {
    let (fs, snap) = req
        .snapshot
        .split_once('@')
        .ok_or_else(|| format!("'{}' is not a snapshot name (FS@SNAP)", req.snapshot))?;
    let props = daemon.get_all(&req.snapshot)?;
    let rec = SnapshotRecord::from_props(&req.snapshot, &props)?;
    if !rec.members.iter().any(|m| m == fs) {
        return Err(format!(
            "'{fs}' is not a member of its own snapshot set ({})",
            rec.members.join(",")
        ));
    }
    let targets = target_names(&rec.members, &req.target)?;
    for t in std::iter::once(&req.target).chain(targets.iter()) {
        if daemon.exists(t)? {
            return Err(format!("'{t}' already exists"));
        }
    }
    for m in &rec.members {
        if !daemon.exists(&format!("{m}@{snap}"))? {
            return Err(format!("snapshot '{m}@{snap}' of the set is missing"));
        }
    }
    // Check the source before creating anything, so a bad --replica-of costs
    // no clone.
    let source = match &req.replica_of {
        Some(sock) => {
            let mut s = Server::connect(sock, &req.creds).await?;
            let id: u64 = s
                .var("server_id")
                .await?
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if id != rec.server_id {
                return Err(format!(
                    "the server at {} has server_id {id}, but '{}' was taken from server_id {}: replicate from the server the snapshot came from",
                    sock.display(),
                    req.snapshot,
                    rec.server_id
                ));
            }
            let addr = replica::source_address(&mut s).await?;
            Some((s, addr))
        }
        None => None,
    };
    Ok(Plan {
        snap: snap.to_string(),
        rec,
        targets,
        source,
    })
}

pub(crate) async fn clone(
    daemon: &mut Daemon,
    req: &CloneRequest,
    progress: Progress<'_>,
) -> Result<CloneReport, String> {
    let t0 = Instant::now();
    progress("checking the snapshot set", 0.0);
    let Plan {
        snap,
        rec,
        targets,
        mut source,
    } = plan(daemon, req).await?;
    let snap = snap.as_str();
    let mp_prop = |dir: &Path| format!("mountpoint={}", dir.display());
    let mut undo = Undo {
        daemon,
        mounted: Vec::new(),
        created: Vec::new(),
        armed: true,
    };
    if targets.len() > 1 {
        let props: Vec<String> = req.mountpoint.iter().map(|d| mp_prop(d)).collect();
        undo.daemon.create_fs(&req.target, &props)?;
        undo.created.push(req.target.clone());
    }
    let mut clones = Vec::new();
    for (i, (m, t)) in rec.members.iter().zip(&targets).enumerate() {
        progress(
            &format!("cloning and mounting {m}@{snap}"),
            0.05 + 0.15 * i as f64 / targets.len() as f64,
        );
        let props: Vec<String> = match (&req.mountpoint, targets.len()) {
            (Some(d), 1) => vec![mp_prop(d)],
            _ => Vec::new(),
        };
        undo.daemon
            .clone_snapshot(&format!("{m}@{snap}"), t, &props)?;
        undo.created.push(t.clone());
        let mp = undo
            .daemon
            .get(t, &["mountpoint"])?
            .remove("mountpoint")
            .unwrap_or_default();
        if !mp.starts_with('/') {
            return Err(format!("'{t}' has mountpoint={mp}: give --mountpoint DIR"));
        }
        let mp = PathBuf::from(mp);
        std::fs::create_dir_all(&mp).map_err(|e| format!("{}: {e}", mp.display()))?;
        undo.daemon.mount(t, &mp)?;
        undo.mounted.push(t.clone());
        clones.push((t.clone(), mp));
    }
    progress("writing the server's config", 0.2);
    let new_mounts: Vec<PathBuf> = clones.iter().map(|(_, p)| p.clone()).collect();
    let datadir_mount = new_mounts[0].clone();
    let run_dir = req.run_dir.clone().unwrap_or_else(|| {
        let mut s = datadir_mount.clone().into_os_string();
        s.push(".run");
        PathBuf::from(s)
    });
    std::fs::create_dir_all(&run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    let run = RunPlaces {
        run_dir: run_dir.clone(),
        socket: req.socket.clone(),
        port: req.port,
        server_id: req
            .server_id
            .unwrap_or_else(|| derive_server_id(&req.target, rec.server_id)),
        // SAFETY: geteuid has no preconditions.
        user: if unsafe { libc::geteuid() } == 0 {
            process::owner_name(&datadir_mount)
        } else {
            None
        },
    };
    let cfg = CloneConfig::for_clone(&rec, &new_mounts, &run)?;
    let cnf = run_dir.join("my.cnf");
    std::fs::write(&cnf, cfg.render(&req.snapshot))
        .map_err(|e| format!("{}: {e}", cnf.display()))?;
    process::chown_like(&run_dir, &datadir_mount)?;
    remove_source_identity(&cfg)?;
    rewrite_index_files(&cfg, &rec.mounts, &new_mounts)?;
    // The clones are complete: from here on they stay, whatever happens.
    undo.armed = false;
    drop(undo);

    let mut report = CloneReport {
        clones,
        config: cnf.clone(),
        server: None,
        replica_from: None,
        elapsed: Duration::ZERO,
        prepare: t0.elapsed(),
        start: Duration::ZERO,
        replication: Duration::ZERO,
    };
    if req.start || req.replica_of.is_some() {
        let t_start = Instant::now();
        progress("starting the server (crash recovery)", 0.25);
        let binary = process::find_server_binary(&rec.flavor)?;
        let pid = process::start_detached(&binary, &cnf, &run_dir.join("mysqld.out"))?;
        let data_clone = report.clones[0].0.clone();
        for (k, v) in [
            ("pid", pid.to_string()),
            ("socket", cfg.socket.display().to_string()),
            ("cnf", cnf.display().to_string()),
        ] {
            daemon.set(&data_clone, &format!("{PROP_PREFIX}{k}"), &v)?;
        }
        report.server = Some(Started {
            pid,
            socket: cfg.socket.clone(),
            error_log: cfg.error_log.clone(),
        });
        let mut replica_conn = process::wait_ready(
            pid,
            &cfg.socket,
            &req.creds,
            req.start_timeout,
            &cfg.error_log,
        )
        .await?;
        report.start = t_start.elapsed();
        let t_repl = Instant::now();
        if let Some((src, addr)) = source.as_mut() {
            progress("starting replication", 0.8);
            let user = format!("cachalot_repl_{}", cfg.server_id);
            let password = replica::random_secret()?;
            replica::create_account(src, &user, &password).await?;
            replica::start(
                &mut replica_conn,
                addr,
                &user,
                &password,
                &rec.position.gtid,
            )
            .await?;
            replica::wait_running(&mut replica_conn, req.start_timeout).await?;
            report.replica_from = Some(rec.position.gtid.clone());
            report.replication = t_repl.elapsed();
        }
        replica_conn.close().await;
    }
    report.elapsed = t0.elapsed();
    Ok(report)
}

/// Binary log index files list the log files by the path the source used: point
/// them at the clone's files, or the new server would open (and append to) the
/// source's binary log.
fn rewrite_index_files(cfg: &CloneConfig, old: &[PathBuf], new: &[PathBuf]) -> Result<(), String> {
    let mut dirs = vec![cfg.paths.datadir.clone()];
    if let Some(d) = cfg.paths.binlog_basename.as_ref().and_then(|b| b.parent()) {
        dirs.push(d.to_path_buf());
    }
    dirs.dedup();
    for dir in dirs {
        let rd = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) != Some("index") || !p.is_file() {
                continue;
            }
            let text =
                std::fs::read_to_string(&p).map_err(|err| format!("{}: {err}", p.display()))?;
            let moved = relocate_lines(&text, old, new);
            if moved != text {
                std::fs::write(&p, moved).map_err(|err| format!("{}: {err}", p.display()))?;
            }
        }
    }
    Ok(())
}

/// Every absolute path line under an old mount, moved to the new mount.
pub fn relocate_lines(text: &str, old: &[PathBuf], new: &[PathBuf]) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        match crate::paths::relocate(Path::new(body), old, new) {
            Some(p) if body.starts_with('/') => {
                out.push_str(&p.to_string_lossy());
                out.push_str(nl);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Files that belong to the source's identity or its replication state.
fn remove_source_identity(cfg: &CloneConfig) -> Result<(), String> {
    let mut dirs = vec![cfg.paths.datadir.clone()];
    if let Some(b) = &cfg.paths.binlog_basename {
        if let Some(d) = b.parent() {
            dirs.push(d.to_path_buf());
        }
    }
    for dir in dirs {
        let rd = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let doomed = matches!(
                name.as_str(),
                "auto.cnf" | "master.info" | "relay-log.info" | "multi-master.info"
            ) || name.ends_with(".pid")
                || name.ends_with(".sock")
                || name.contains("-relay-bin.")
                || name.starts_with("relay-bin.")
                || (name.starts_with("relay-log-") && name.ends_with(".info"))
                || (name.starts_with("master-") && name.ends_with(".info"));
            if doomed && e.file_type().is_ok_and(|t| !t.is_dir()) {
                std::fs::remove_file(e.path())
                    .map_err(|err| format!("{}: {err}", e.path().display()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lines_move_to_the_clone() {
        let old = vec![PathBuf::from("/src/data"), PathBuf::from("/src/log")];
        let new = vec![PathBuf::from("/c/data"), PathBuf::from("/c/log")];
        let text = "/src/log/binlog.000001\n/src/log/binlog.000002\n./binlog.000003\n";
        assert_eq!(
            relocate_lines(text, &old, &new),
            "/c/log/binlog.000001\n/c/log/binlog.000002\n./binlog.000003\n"
        );
    }

    #[test]
    fn targets_are_named_by_member_leaf() {
        let one = vec!["tank/db/data".to_string()];
        assert_eq!(target_names(&one, "tank/c").unwrap(), vec!["tank/c"]);
        let two = vec!["tank/db/data".to_string(), "tank/db/log".to_string()];
        assert_eq!(
            target_names(&two, "tank/c").unwrap(),
            vec!["tank/c/data", "tank/c/log"]
        );
        let clash = vec!["tank/a/data".to_string(), "tank/b/data".to_string()];
        assert!(target_names(&clash, "tank/c").is_err());
    }
}
