//! `cachalot`: the command-line interface (zpool/zfs style) and `cachalot serve`.
//!
//! Invariants:
//! - The command forms are those of docs CLI.md (shared/CLI.md); options may be added,
//!   never removed or renamed.
//! - Every failure prints exactly one line `cachalot: <message>` on stderr and exits 1;
//!   usage errors exit 2 (also one line, except bare help requests).
//! - Paths given to the daemon (devices, import dirs) are made absolute here, because
//!   the daemon's working directory is not the caller's.

mod analytics;
mod commands;
mod completion;
mod debug;
mod http_addr;
mod mount;
mod mysql;
mod replication;
mod share;
mod snapshot;
mod status;
mod stream;
mod table;
mod token;

use cachalot_daemon::parse_size;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Size argument ("256M", "1.5G", "4096").
fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s)
}

#[derive(Parser, Debug)]
#[command(
    name = "cachalot",
    version,
    about = "Cachalot: copy-on-write storage for MySQL (zpool/zfs-style commands)",
    arg_required_else_help = true
)]
pub struct Cli {
    /// Daemon socket (default: $CACHALOT_SOCKET, else $CACHALOT_HOME/cachalot.sock,
    /// else /var/lib/cachalot/cachalot.sock)
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run the daemon in the foreground
    Serve(ServeArgs),
    /// Manage pools
    #[command(subcommand)]
    Pool(PoolCmd),
    /// Create a filesystem, or a volume with -V
    Create(CreateArgs),
    /// List datasets
    List(ListArgs),
    /// Show properties
    Get(GetArgs),
    /// Set properties: set PROP=VAL [PROP=VAL...] NAME
    Set(SetArgs),
    /// Reset a property to its inherited value
    Inherit(InheritArgs),
    /// Destroy a dataset
    Destroy(DestroyArgs),
    /// Hold a snapshot: it cannot be destroyed until released (or destroy -f)
    Hold { tag: String, snapshot: String },
    /// Release a hold of a snapshot
    Release { tag: String, snapshot: String },
    /// List the holds of a snapshot
    Holds {
        /// Scripted: no header
        #[arg(short = 'H')]
        scripted: bool,
        snapshot: String,
    },
    /// Take an atomic snapshot of one or more filesystems: snapshot [-r] FS@SNAP...
    Snapshot(snapshot::SnapshotArgs),
    /// Roll a filesystem back to a snapshot (-r destroys newer snapshots)
    Rollback(snapshot::RollbackArgs),
    /// Create a writable clone of a snapshot: clone [-o PROP=VAL] FS@SNAP NEWFS
    Clone(snapshot::CloneArgs),
    /// Make a clone independent of its origin snapshot
    Promote(snapshot::PromoteArgs),
    /// What changed since a snapshot: diff [-F] [-H] FS@SNAP [FS@SNAP2|FS]
    Diff(snapshot::DiffArgs),
    /// Write a snapshot (or, with -i, the changes since an older one) to stdout
    Send(stream::SendArgs),
    /// Create a filesystem (or its next snapshot) from a stream on stdin
    #[command(alias = "recv")]
    Receive(stream::ReceiveArgs),
    /// Mount a filesystem: mount FS [PATH] (default PATH: its mountpoint property)
    Mount(mount::MountArgs),
    /// Unmount a filesystem
    #[command(alias = "umount")]
    Unmount(mount::UnmountArgs),
    /// Protocol shares (NFS, iSCSI, NBD): share list [-H]
    #[command(subcommand)]
    Share(share::ShareCmd),
    /// Statistics: list, show (rates with breakdowns), heatmap
    #[command(subcommand)]
    Analytics(analytics::AnalyticsCmd),
    /// Replication between appliances: pair, create, list, run, pause, resume, destroy
    #[command(subcommand)]
    Replication(replication::ReplicationCmd),
    /// API tokens for HTTP clients: token create NAME | list | revoke NAME
    #[command(subcommand)]
    Token(token::TokenCmd),
    /// MySQL/MariaDB: consistent snapshots, clones into servers and replicas, restore, advice
    #[command(subcommand)]
    Mysql(mysql::MysqlCmd),
    /// Benchmarks: sysbench OLTP and fio against targets side by side
    Bench(cachalot_bench::cli::BenchArgs),
    /// Low-level debugging commands (objects, raw API calls)
    #[command(subcommand, hide = true)]
    Debug(debug::DebugCmd),
    /// Print a shell completion script: completion bash > /etc/bash_completion.d/cachalot
    Completion(completion::CompletionArgs),
    /// Print the man page (roff)
    #[command(hide = true)]
    Manpage,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// State directory (default: $CACHALOT_HOME, else /var/lib/cachalot)
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// HTTP listen address ("127.0.0.1:0" = any free port, "none" = off)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7470")]
    pub http: String,
    /// NFS (v3 and v4.1) listen address, or "off" (default 127.0.0.1:2049; a
    /// busy default port is logged and skipped)
    #[arg(long, value_name = "ADDR|off")]
    pub nfs: Option<String>,
    /// Portmapper listen address, or "off" (default 127.0.0.1:111 when free)
    #[arg(long, value_name = "ADDR|off")]
    pub portmap: Option<String>,
    /// NFSv4.1 lease time in seconds (default 90): how long a silent client
    /// keeps its opens and locks, and the grace period after a restart
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub nfs4_lease: Option<u64>,
    /// ARC (DRAM cache) size limit (default: 1/8 of RAM, at least 64M)
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub arc_max: Option<u64>,
    /// iSCSI portal address (default 127.0.0.1:3260; "off" disables; port 0 = any)
    #[arg(long, value_name = "ADDR")]
    pub iscsi: Option<String>,
    /// Always-on analytics: on (default) or off (nothing recorded or sampled)
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = ["on", "off"])]
    pub analytics: String,
    /// Seconds of per-second history kept (default one hour)
    #[arg(long, value_name = "N", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(60..=86_400))]
    pub analytics_seconds: u64,
    /// Minutes of per-minute history kept (default one week)
    #[arg(long, value_name = "N", default_value_t = 10_080, value_parser = clap::value_parser!(u64).range(60..=527_040))]
    pub analytics_minutes: u64,
    /// NBD listen address (default 127.0.0.1:10809, "off" = no NBD; also home/nbd.sock)
    #[arg(long, value_name = "ADDR")]
    pub nbd: Option<String>,
    /// Replication listener address (HOST:PORT; port 0 = any, written to
    /// HOME/replication.addr); paired peers replicate into this appliance there
    #[arg(long, value_name = "ADDR")]
    pub replication: Option<String>,
    /// TLS certificate (PEM) for HTTPS; default: HOME/tls/cert.pem, self-signed at
    /// the first start. HTTPS is on when --http names an address other hosts can reach.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM), with --tls-cert
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept `debug inject` (fault injection into pool devices: tests only)
    #[arg(long, hide = true)]
    pub allow_fault_injection: bool,
}

#[derive(Subcommand, Debug)]
pub enum PoolCmd {
    /// Create a pool: pool create [-f] [-s SIZE] [-o ashift=N] POOL VDEVSPEC...
    Create {
        /// Use devices even if they carry another pool's label
        #[arg(short = 'f')]
        force: bool,
        /// Create missing device files as sparse files of SIZE
        #[arg(short = 's', value_name = "SIZE", value_parser = size_arg)]
        size: Option<u64>,
        /// Pool property (ashift=N)
        #[arg(short = 'o', value_name = "PROP=VAL")]
        pool_props: Vec<String>,
        /// Property of the root dataset
        #[arg(short = 'O', value_name = "PROP=VAL")]
        fs_props: Vec<String>,
        pool: String,
        /// PATH..., mirror PATH PATH..., raidz1|raidz2 PATH..., log PATH..., cache PATH...
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        vdevs: Vec<String>,
    },
    /// Import a pool (without POOL: list importable pools)
    Import {
        /// Directory or device file to search (repeatable)
        #[arg(short = 'd', value_name = "DIR|PATH")]
        dirs: Vec<PathBuf>,
        /// Rewind to an older txg when the newest committed one's tree does not
        /// read (damage beyond redundancy); changes committed since are lost
        #[arg(short = 'F')]
        rewind: bool,
        pool: Option<String>,
    },
    /// Export a pool (it can be imported again)
    Export { pool: String },
    /// Destroy a pool (erases its labels)
    Destroy {
        /// Accepted for zpool compatibility
        #[arg(short = 'f')]
        force: bool,
        pool: String,
    },
    /// List pools
    List {
        /// Scripted: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
        /// Exact numbers
        #[arg(short = 'p')]
        parsable: bool,
        pool: Option<String>,
    },
    /// Show the vdev tree, error counters and scrub state
    Status { pool: Option<String> },
    /// Start a scrub
    Scrub {
        /// Wait until the scrub has finished
        #[arg(short = 'w')]
        wait: bool,
        pool: String,
    },
    /// Add vdevs to a pool
    Add {
        #[arg(short = 'f')]
        force: bool,
        /// Create missing device files as sparse files of SIZE
        #[arg(short = 's', value_name = "SIZE", value_parser = size_arg)]
        size: Option<u64>,
        pool: String,
        #[arg(required = true, num_args = 1..)]
        vdevs: Vec<String>,
    },
    /// Replace a device of a mirror or raidz and resilver onto the new one
    Replace {
        #[arg(short = 'f')]
        force: bool,
        /// Create the new device file as a sparse file of SIZE
        #[arg(short = 's', value_name = "SIZE", value_parser = size_arg)]
        size: Option<u64>,
        pool: String,
        /// The device to replace: its path (as `pool status` shows it) or guid
        old: String,
        /// The new device; without it, a new disk at OLD's own path (the old
        /// file was deleted or recreated)
        new: Option<String>,
    },
    /// Mirror a device onto a new one (a single device becomes a mirror, or a
    /// mirror gets wider) and resilver it
    Attach {
        #[arg(short = 'f')]
        force: bool,
        /// Create the new device file as a sparse file of SIZE
        #[arg(short = 's', value_name = "SIZE", value_parser = size_arg)]
        size: Option<u64>,
        pool: String,
        /// A single device or a mirror child: its path or guid
        device: String,
        new: String,
    },
    /// Take a device out of its mirror
    Detach { pool: String, device: String },
    /// Stop all I/O to a device (kept across restarts) until `pool online`
    Offline { pool: String, device: String },
    /// Bring an offline or faulted device back (it is resilvered)
    Online { pool: String, device: String },
    /// Remove a cache device or an available hot spare (refused for a data
    /// device, and for a spare while it stands in for one)
    Remove { pool: String, device: String },
    /// Commit a transaction group now
    #[command(hide = true)]
    Sync { pool: String },
    /// Bring a SUSPENDED pool back: re-import it from its last committed state
    /// and intent log, and restore its mounts (once the cause is fixed)
    Clear { pool: String },
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Create missing parent datasets
    #[arg(short = 'p')]
    pub parents: bool,
    /// Property (repeatable)
    #[arg(short = 'o', value_name = "PROP=VAL")]
    pub props: Vec<String>,
    /// Create a volume of SIZE
    #[arg(short = 'V', value_name = "SIZE", value_parser = size_arg)]
    pub volsize: Option<u64>,
    /// Sparse (thin) volume: no reservation
    #[arg(short = 's')]
    pub sparse: bool,
    /// Volume block size
    #[arg(short = 'b', value_name = "BLOCKSIZE", value_parser = size_arg)]
    pub blocksize: Option<u64>,
    pub name: String,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Scripted: no header, tab-separated
    #[arg(short = 'H')]
    pub scripted: bool,
    /// Exact numbers
    #[arg(short = 'p')]
    pub parsable: bool,
    /// Include descendants (the default when NAME is given; see -d)
    #[arg(short = 'r')]
    pub recursive: bool,
    /// Descend at most DEPTH levels below NAME (0: NAME only)
    #[arg(short = 'd', value_name = "DEPTH")]
    pub depth: Option<u64>,
    /// filesystem, volume, snapshot or all (comma-separated)
    #[arg(short = 't', value_name = "TYPE")]
    pub types: Option<String>,
    /// Columns (comma-separated property names)
    #[arg(short = 'o', value_name = "COLS")]
    pub cols: Option<String>,
    pub name: Option<String>,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// Scripted: no header, tab-separated
    #[arg(short = 'H')]
    pub scripted: bool,
    /// Exact numbers
    #[arg(short = 'p')]
    pub parsable: bool,
    /// Fields to print: name,property,value,source
    #[arg(short = 'o', value_name = "FIELDS")]
    pub fields: Option<String>,
    /// PROP[,PROP...] or all
    pub props: String,
    #[arg(required = true, num_args = 1..)]
    pub names: Vec<String>,
}

#[derive(Args, Debug)]
pub struct SetArgs {
    /// One or more PROP=VAL, then the dataset NAME
    #[arg(required = true, num_args = 2.., value_name = "PROP=VAL|NAME")]
    pub args: Vec<String>,
}

#[derive(Args, Debug)]
pub struct InheritArgs {
    pub prop: String,
    #[arg(required = true, num_args = 1..)]
    pub names: Vec<String>,
}

#[derive(Args, Debug)]
pub struct DestroyArgs {
    /// Destroy descendants too
    #[arg(short = 'r')]
    pub recursive: bool,
    /// Destroy a held snapshot (its holds are released first)
    #[arg(short = 'f')]
    pub force: bool,
    pub name: String,
}

/// Turn clap's multi-line error into one line.
fn one_line_usage_error(rendered: &str) -> String {
    let mut parts = Vec::new();
    for l in rendered.lines() {
        let l = l.trim();
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        if !l.is_empty() {
            parts.push(l.strip_prefix("error: ").unwrap_or(l).to_string());
        }
    }
    if parts.is_empty() {
        "invalid usage (see --help)".to_string()
    } else {
        format!("{} (see --help)", parts.join(" "))
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
                _ => {
                    eprintln!("cachalot: {}", one_line_usage_error(&e.to_string()));
                    std::process::exit(2);
                }
            }
        }
    };
    if let Err(e) = commands::run(cli) {
        eprintln!("cachalot: {}", cachalot_daemon::proto::one_line(&e));
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("cachalot").chain(args.iter().copied()))
    }

    #[test]
    fn contract_forms_parse() {
        for a in [
            &[
                "serve",
                "--home",
                "/h",
                "--socket",
                "/s",
                "--http",
                "127.0.0.1:0",
                "--arc-max",
                "1G",
            ][..],
            &[
                "pool",
                "create",
                "-f",
                "-s",
                "256M",
                "-o",
                "ashift=12",
                "tank",
                "/a",
                "mirror",
                "/b",
                "/c",
            ],
            &["pool", "import", "-d", "/x", "-d", "/y", "tank"],
            &["pool", "import", "-d", "/x"],
            &["pool", "import", "-F", "-d", "/x", "tank"],
            &["pool", "export", "tank"],
            &["pool", "destroy", "tank"],
            &["pool", "list", "-H", "-p", "tank"],
            &["pool", "list"],
            &["pool", "status"],
            &["pool", "status", "tank"],
            &["pool", "scrub", "-w", "tank"],
            &["pool", "add", "tank", "mirror", "/d", "/e"],
            &[
                "create",
                "-p",
                "-o",
                "recordsize=16K",
                "-o",
                "compression=lz4",
                "tank/db",
            ],
            &["create", "-V", "1G", "-s", "-b", "16K", "tank/vol"],
            &[
                "list",
                "-H",
                "-p",
                "-r",
                "-t",
                "all",
                "-o",
                "name,used",
                "tank",
            ],
            &["get", "-H", "-p", "recordsize,compression", "tank/db"],
            &["get", "all", "tank/db"],
            &["set", "recordsize=16K", "tank/db"],
            &["inherit", "recordsize", "tank/db"],
            &["destroy", "-r", "tank/db"],
            &[
                "debug", "write", "tank/db", "1", "--seed", "7", "--len", "1M",
            ],
            &["pool", "sync", "tank"],
            &["mount", "tank/db"],
            &["mount", "tank/db", "/mnt/db"],
            &["unmount", "-f", "tank/db"],
            &["umount", "tank/db"],
            &["analytics", "list"],
            &[
                "analytics",
                "show",
                "fuse.ops",
                "--by",
                "file",
                "--filter",
                "dataset=tank/db",
                "--filter",
                "op=write",
                "--last",
                "60s",
                "-H",
                "-p",
            ],
            &[
                "analytics",
                "show",
                "disk.ops",
                "--from",
                "1700000000",
                "--to",
                "1700000060",
            ],
            &[
                "analytics",
                "heatmap",
                "fuse.ops",
                "--by",
                "latency",
                "--last",
                "60s",
                "--json",
            ],
            &["serve", "--analytics", "off", "--analytics-seconds", "600"],
            &[
                "mysql",
                "snapshot",
                "--socket",
                "/run/m.sock",
                "--user",
                "root",
                "tank/db/data,tank/db/log",
                "s1",
            ],
            &[
                "mysql",
                "clone",
                "tank/db/data@s1",
                "tank/c",
                "--start",
                "--port",
                "3399",
                "--socket",
                "/run/c.sock",
                "--replica-of",
                "/run/m.sock",
            ],
            &["mysql", "restore", "tank/db/data@s1"],
            &["mysql", "advise", "--socket", "/run/m.sock", "tank/db/data"],
            &["mysql", "advise", "--socket", "/run/m.sock"],
        ] {
            parse(a).unwrap_or_else(|e| panic!("{a:?}: {e}"));
        }
        for bad in [
            &["pool", "create", "tank"][..],
            &["set", "recordsize=16K"],
            &["bogus"],
            &[
                "analytics",
                "show",
                "fuse.ops",
                "--last",
                "1m",
                "--from",
                "1",
            ],
            &["analytics", "heatmap", "fuse.ops"],
            &["serve", "--analytics", "maybe"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn usage_errors_are_one_line() {
        let e = parse(&["set", "x=1"]).unwrap_err();
        let m = one_line_usage_error(&e.to_string());
        assert!(!m.contains('\n'), "{m}");
        assert!(m.contains("required"), "{m}");
    }
}
