//! `cachalot mysql snapshot|clone|restore|advise|failover`: argument parsing and output; the
//! work is in the cachalot-mysql crate.
//!
//! Invariant: inside `mysql` subcommands `--socket` is the MySQL server's socket
//! (CLI.md). The argument keeps the id `socket` so clap does not add the global
//! daemon `--socket` there; these commands find the daemon through
//! `--daemon-socket`, a global `--socket` given before `mysql` (clap would
//! overwrite it with the subcommand's value, so it is read from the raw arguments),
//! `$CACHALOT_SOCKET` or `$CACHALOT_HOME`.

use crate::commands::{absolute, CmdResult};
use crate::table::Table;
use cachalot_api_types::mysql::{MysqlAdvise, MysqlClone, MysqlList, MysqlRestore, MysqlSnapshot};
use cachalot_daemon::client::default_socket;
use cachalot_mysql::advice::Kind;
use cachalot_mysql::daemon::Daemon;
use cachalot_mysql::failover::FailoverRequest;
use cachalot_mysql::server::Credentials;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum MysqlCmd {
    /// Consistent snapshot of a server's datasets: DATAFS[,LOGFS] SNAPNAME
    Snapshot(SnapshotArgs),
    /// Clone a snapshot set, mount it, write a config; --start / --replica-of start a server
    Clone(CloneArgs),
    /// Roll every dataset of a snapshot set back (refused while anything uses them)
    Restore(RestoreArgs),
    /// my.cnf and dataset advice for a server on cachalot datasets
    Advise(AdviseArgs),
    /// The snapshot sets taken by 'cachalot mysql snapshot' (one line per set)
    List(ListArgs),
    /// On the target of a replicated MySQL set: break the relationship off here,
    /// start a server on a clone of the newest replicated set, print its GTID position
    Failover(FailoverArgs),
}

#[derive(Args, Debug)]
pub struct Conn {
    /// MySQL user (password: $MYSQL_PWD)
    #[arg(long, value_name = "USER", default_value = "root")]
    pub user: String,
    /// The cachalot daemon's socket (default: $CACHALOT_SOCKET, else $CACHALOT_HOME/cachalot.sock)
    #[arg(long, value_name = "PATH")]
    pub daemon_socket: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// The MySQL server's unix socket
    #[arg(long = "socket", id = "socket", value_name = "SOCK", required = true)]
    pub mysql_socket: Option<PathBuf>,
    #[command(flatten)]
    pub conn: Conn,
    /// Seconds to wait for running statements before giving up on the lock
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub lock_wait_timeout: u64,
    /// Longest time writes may stay blocked waiting for the snapshot (ms)
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub max_block_ms: u64,
    /// Do not rotate the binary log before the snapshot (by default it is rotated,
    /// so a clone's crash recovery scans a short last binlog file)
    #[arg(long)]
    pub no_binlog_rotate: bool,
    /// Scheduled use: SNAPNAME is a prefix, the snapshot is named
    /// SNAPNAME-YYYYMMDD-HHMMSS (UTC), and only the N newest such sets are kept
    #[arg(long, value_name = "N")]
    pub keep: Option<usize>,
    /// Datasets, the one with the datadir first: DATAFS[,LOGFS...]
    pub datasets: String,
    /// Snapshot name (the part after '@'); with --keep, its prefix
    pub snapname: String,
}

/// How `mysql clone --start` and `mysql failover` run the server they start on
/// the clone: one definition, so both take the same options.
#[derive(Args, Debug)]
pub struct NewServerArgs {
    /// TCP port of the new server (127.0.0.1 only; default: no TCP)
    #[arg(long, value_name = "P")]
    pub port: Option<u16>,
    /// Unix socket of the new server (default: RUNDIR/mysqld.sock)
    #[arg(long = "socket", id = "socket", value_name = "S")]
    pub new_socket: Option<PathBuf>,
    /// Mount the clone here (several datasets: DIR/<name> each); default: mountpoint property
    #[arg(long, value_name = "DIR")]
    pub mountpoint: Option<PathBuf>,
    /// Directory for the new server's my.cnf, pid file and error log (default: DATAMOUNT.run)
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// server_id of the new server (default: derived from the clone's name)
    #[arg(long, value_name = "N")]
    pub server_id: Option<u64>,
    /// Seconds to wait for the server to answer (and, for a replica, for replication to run)
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub start_timeout: u64,
}

#[derive(Args, Debug)]
pub struct CloneArgs {
    /// Start a server on the clone
    #[arg(long)]
    pub start: bool,
    /// Make the new server a GTID replica of the server at this socket (implies --start)
    #[arg(long, value_name = "SOCK")]
    pub replica_of: Option<PathBuf>,
    #[command(flatten)]
    pub server: NewServerArgs,
    #[command(flatten)]
    pub conn: Conn,
    /// FS@SNAP taken by 'cachalot mysql snapshot'
    pub snapshot: String,
    pub newfs: String,
}

#[derive(Args, Debug)]
pub struct FailoverArgs {
    /// Name of the clone the server runs on (default: failover-RELATIONSHIP next
    /// to the set's first dataset)
    #[arg(long, value_name = "NEWFS")]
    pub clone: Option<String>,
    #[command(flatten)]
    pub server: NewServerArgs,
    /// The result as JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
    /// The replication relationship (its name on the source)
    pub relationship: String,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// Destroy newer snapshots of the set's datasets first
    #[arg(short = 'r')]
    pub recursive: bool,
    /// The cachalot daemon's socket (default: $CACHALOT_SOCKET, else $CACHALOT_HOME/cachalot.sock)
    #[arg(long, value_name = "PATH")]
    pub daemon_socket: Option<PathBuf>,
    /// FS@SNAP taken by 'cachalot mysql snapshot'
    pub snapshot: String,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Scripted: no header, tab-separated
    #[arg(short = 'H')]
    pub scripted: bool,
    /// The cachalot daemon's socket (default: $CACHALOT_SOCKET, else $CACHALOT_HOME/cachalot.sock)
    #[arg(long, value_name = "PATH")]
    pub daemon_socket: Option<PathBuf>,
    /// Only the sets of this pool
    pub pool: Option<String>,
}

#[derive(Args, Debug)]
pub struct AdviseArgs {
    /// The MySQL server's unix socket
    #[arg(long = "socket", id = "socket", value_name = "SOCK", required = true)]
    pub mysql_socket: Option<PathBuf>,
    #[command(flatten)]
    pub conn: Conn,
    /// The daemon's ARC size limit (its --arc-max), if not the default
    #[arg(long, value_name = "SIZE", value_parser = crate::size_arg)]
    pub arc_size: Option<u64>,
    /// Dataset with the datadir (default: found from the mounts)
    pub fs: Option<String>,
}

fn daemon(sock: &Option<PathBuf>) -> Result<Daemon, String> {
    let before = socket_before_subcommand(std::env::args_os().skip(1));
    let path = match sock.as_ref().or(before.as_ref()) {
        Some(p) => absolute(p)?,
        None => default_socket(),
    };
    Daemon::connect(&path)
}

/// The value of a global `--socket` given before the subcommand (`cachalot
/// --socket D mysql ...`), read from the raw arguments.
pub fn socket_before_subcommand<I: IntoIterator<Item = std::ffi::OsString>>(
    args: I,
) -> Option<PathBuf> {
    let mut it = args.into_iter();
    let mut found = None;
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--socket" {
            found = it.next().map(PathBuf::from);
        } else if let Some(v) = s.strip_prefix("--socket=") {
            found = Some(PathBuf::from(v));
        } else if !s.starts_with('-') {
            break;
        }
    }
    found
}

fn mysql_socket(s: &Option<PathBuf>) -> Result<PathBuf, String> {
    match s {
        Some(p) => absolute(p),
        None => Err("--socket SOCK is required".into()),
    }
}

/// A path as the typed requests carry it.
fn path_text(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// `global_socket`: the global `--socket`; trustworthy only for `restore` and
/// `list`, the subcommands without a `--socket` of their own.
pub fn run(cmd: MysqlCmd, global_socket: Option<PathBuf>) -> CmdResult {
    match cmd {
        MysqlCmd::Snapshot(a) => snapshot(a),
        MysqlCmd::Clone(a) => clone(a),
        MysqlCmd::Restore(mut a) => {
            a.daemon_socket = a.daemon_socket.or(global_socket);
            restore(a)
        }
        MysqlCmd::Advise(a) => advise(a),
        MysqlCmd::List(mut a) => {
            a.daemon_socket = a.daemon_socket.or(global_socket);
            list(a)
        }
        MysqlCmd::Failover(a) => failover(a),
    }
}

fn snapshot(a: SnapshotArgs) -> CmdResult {
    let req = MysqlSnapshot {
        socket: path_text(&mysql_socket(&a.mysql_socket)?),
        datasets: a.datasets.split(',').map(str::to_string).collect(),
        snapshot: a.snapname,
        user: Some(a.conn.user),
        lock_wait_timeout: Some(a.lock_wait_timeout),
        max_block_ms: Some(a.max_block_ms),
        no_binlog_rotate: a.no_binlog_rotate,
        keep: a.keep,
    };
    // Refused before the daemon is asked anything.
    cachalot_mysql::api::snapshot_request(&req)?;
    let mut d = daemon(&a.conn.daemon_socket)?;
    let (r, pruned) = cachalot_mysql::api::snapshot(&mut d, &req)?;
    println!("snapshot {}", r.snapshots.join(" "));
    let p = &r.position;
    println!(
        "binlog {}:{}  gtid {}",
        p.binlog_file.as_deref().unwrap_or("-"),
        p.binlog_pos.map(|x| x.to_string()).unwrap_or("-".into()),
        if p.gtid.is_empty() { "-" } else { &p.gtid }
    );
    println!(
        "writes blocked {} ({}: lock {}, snapshot {}, release {})",
        ms(r.blocked),
        r.method.name(),
        ms(r.acquire),
        ms(r.snapshot),
        ms(r.release)
    );
    if let Some(p) = pruned {
        for n in &p.destroyed {
            println!("pruned {n}");
        }
        for (n, why) in &p.kept {
            println!("kept {n}: {why}");
        }
    }
    Ok(())
}

fn clone(a: CloneArgs) -> CmdResult {
    let text = |p: &Option<PathBuf>| -> Result<Option<String>, String> {
        p.as_ref()
            .map(|p| absolute(p).map(|p| path_text(&p)))
            .transpose()
    };
    let req = MysqlClone {
        snapshot: a.snapshot,
        target: a.newfs,
        start: a.start,
        replica_of: text(&a.replica_of)?,
        port: a.server.port,
        socket: text(&a.server.new_socket)?,
        mountpoint: text(&a.server.mountpoint)?,
        run_dir: text(&a.server.run_dir)?,
        server_id: a.server.server_id,
        start_timeout: Some(a.server.start_timeout),
        user: Some(a.conn.user),
    };
    cachalot_mysql::api::clone_request(&req)?;
    let mut d = daemon(&a.conn.daemon_socket)?;
    let r = cachalot_mysql::api::clone(&mut d, &req, &mut |_, _| {})?;
    for (ds, mp) in &r.clones {
        println!("clone {ds} mounted at {}", mp.display());
    }
    println!("config {}", r.config.display());
    if let Some(s) = &r.server {
        println!(
            "server pid {} socket {} log {}",
            s.pid,
            s.socket.display(),
            s.error_log.display()
        );
    }
    if let Some(g) = &r.replica_from {
        println!(
            "replica running (IO and SQL threads) from gtid {}",
            if g.is_empty() { "-" } else { g }
        );
    }
    println!(
        "done in {:.2} s (clone and mount {:.2} s, server start {:.2} s, replication {:.2} s)",
        r.elapsed.as_secs_f64(),
        r.prepare.as_secs_f64(),
        r.start.as_secs_f64(),
        r.replication.as_secs_f64()
    );
    Ok(())
}

fn failover(a: FailoverArgs) -> CmdResult {
    let abs = |p: &Option<PathBuf>| -> Result<Option<PathBuf>, String> {
        p.as_ref().map(|p| absolute(p)).transpose()
    };
    let req = FailoverRequest {
        relationship: a.relationship,
        target: a.clone,
        mountpoint: abs(&a.server.mountpoint)?,
        port: a.server.port,
        socket: abs(&a.server.new_socket)?,
        run_dir: abs(&a.server.run_dir)?,
        server_id: a.server.server_id,
        creds: Credentials::new(&a.conn.user),
        start_timeout: Duration::from_secs(a.server.start_timeout.max(1)),
    };
    let mut d = daemon(&a.conn.daemon_socket)?;
    let r = cachalot_mysql::failover::run(&mut d, &req)?;
    let server = r.clone.server.as_ref();
    if a.json {
        let out = serde_json::json!({
            "relationship": req.relationship,
            "snapshot": r.snapshot,
            "members": r.members,
            "clones": r.clone.clones.iter().map(|(ds, mp)| serde_json::json!({
                "name": ds, "mountpoint": mp,
            })).collect::<Vec<_>>(),
            "config": r.clone.config,
            "pid": server.map(|s| s.pid),
            "socket": server.map(|s| &s.socket),
            "error_log": server.map(|s| &s.error_log),
            "recorded_gtid": r.recorded_gtid,
            "gtid_binlog_pos": r.gtid_binlog_pos,
            "gtid_current_pos": r.gtid_current_pos,
            "seconds": r.clone.elapsed.as_secs_f64(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "replication {} broken off here; set {} ({})",
        req.relationship,
        r.snapshot,
        r.members.join(",")
    );
    for (ds, mp) in &r.clone.clones {
        println!("clone {ds} mounted at {}", mp.display());
    }
    if let Some(s) = server {
        println!(
            "server pid {} socket {} log {}",
            s.pid,
            s.socket.display(),
            s.error_log.display()
        );
    }
    let dash = |g: &str| {
        if g.is_empty() {
            "-".to_string()
        } else {
            g.to_string()
        }
    };
    println!(
        "gtid_binlog_pos {}  gtid_current_pos {}  (recorded at the snapshot: {})",
        dash(&r.gtid_binlog_pos),
        dash(&r.gtid_current_pos),
        dash(&r.recorded_gtid)
    );
    Ok(())
}

fn restore(a: RestoreArgs) -> CmdResult {
    let mut d = daemon(&a.daemon_socket)?;
    let req = MysqlRestore {
        snapshot: a.snapshot,
        recursive: a.recursive,
    };
    let r = cachalot_mysql::api::restore(&mut d, &req)?;
    for n in &r.rolled_back {
        println!("rolled back to {n}");
    }
    for (ds, p) in &r.remounted {
        println!("mounted {ds} at {}", p.display());
    }
    Ok(())
}

fn list(a: ListArgs) -> CmdResult {
    let mut d = daemon(&a.daemon_socket)?;
    let sets = cachalot_mysql::api::list(&mut d, &MysqlList { pool: a.pool })?;
    let mut t = Table::new(
        ["NAME", "MEMBERS", "CREATED", "GTID", "BINLOG"]
            .map(String::from)
            .to_vec(),
        vec![false; 5],
    );
    for s in &sets {
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) if !s.is_empty() => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            _ => "-".to_string(),
        };
        let members: Vec<String> = s["members"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        t.rows.push(vec![
            text(&s["name"]),
            members.join(","),
            s["created"]
                .as_u64()
                .map_or("-".into(), crate::table::format_date),
            text(&s["gtid"]),
            match (s["binlog_file"].as_str(), s["binlog_pos"].as_u64()) {
                (Some(f), Some(p)) => format!("{f}:{p}"),
                _ => "-".into(),
            },
        ]);
    }
    print!("{}", t.render(a.scripted));
    Ok(())
}

fn advise(a: AdviseArgs) -> CmdResult {
    let req = MysqlAdvise {
        socket: path_text(&mysql_socket(&a.mysql_socket)?),
        fs: a.fs,
        arc_size: a.arc_size,
        user: Some(a.conn.user),
    };
    let mut d = daemon(&a.conn.daemon_socket)?;
    let (facts, all) = cachalot_mysql::api::advise(&mut d, &req)?;
    println!(
        "# cachalot mysql advise: {} (datadir on {})",
        facts.server.version, facts.data.name
    );
    for (kind, title) in [
        (Kind::MyCnf, "my.cnf [mysqld] changes"),
        (Kind::Dataset, "dataset changes"),
        (Kind::Measure, "measure before choosing"),
        (Kind::Ok, "already right"),
    ] {
        let items: Vec<_> = all.iter().filter(|x| x.kind == kind).collect();
        if items.is_empty() {
            continue;
        }
        println!("\n## {title}");
        for x in items {
            println!("{}\n    # {}", x.setting, x.reason);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(|s| s.into()).collect()
    }

    #[test]
    fn global_socket_is_read_before_the_subcommand_only() {
        let got = |a: &[&str]| socket_before_subcommand(args(a));
        assert_eq!(
            got(&["--socket", "/d", "mysql", "snapshot", "--socket", "/m", "a", "b"]),
            Some(PathBuf::from("/d"))
        );
        assert_eq!(
            got(&["--socket=/d", "mysql", "advise"]),
            Some(PathBuf::from("/d"))
        );
        assert_eq!(
            got(&["mysql", "snapshot", "--socket", "/m", "a", "b"]),
            None
        );
    }
}
