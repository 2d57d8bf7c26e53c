//! The Cachalot daemon: owns the pools, keeps their list in its home directory, and
//! serves the management API over a unix socket (JSON lines) and HTTP (same JSON, plus
//! a status page). The CLI's client side lives here too ([`client`]).
//!
//! Invariants:
//! - One daemon per home: an exclusive `flock` on `home/lock` and a live-socket check
//!   stop a second daemon before it touches any pool.
//! - SIGTERM/SIGINT export every pool cleanly, remove the socket and exit 0.
//! - Signals are blocked in every thread and taken by one `sigwait` thread, so no
//!   handler ever runs inside engine code.

pub mod api;
pub mod client;
pub mod daemon;
pub mod error_kind;
pub mod frames;
pub mod http;
pub mod pattern;
pub mod proto;
pub mod size;
pub mod state;
pub mod unix;

pub use daemon::Daemon;
pub use proto::{Request, Response};
pub use size::{format_size, parse_size};

use std::os::unix::fs::DirBuilderExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;

/// Options of `cachalot serve`.
#[derive(Clone, Debug)]
pub struct ServeOpts {
    pub home: PathBuf,
    pub socket: PathBuf,
    /// HTTP listen address; "127.0.0.1:0" picks a free port; "" or "none" disables.
    pub http: String,
    pub arc_max: u64,
    /// iSCSI portal: `None` = the default 127.0.0.1:3260 (a busy port is only logged),
    /// `Some("off")` = none, `Some(ADDR)` = that address (a failure to bind is fatal).
    pub iscsi: Option<String>,
    /// Analytics on/off and retention.
    pub analytics: daemon::analytics::AnalyticsOpts,
    /// NFS and portmapper addresses.
    pub nfs: daemon::nfs::NfsOpts,
    /// NBD listen address: None = the default (127.0.0.1:10809, a busy port is
    /// logged, not fatal), "off" disables NBD (TCP and the unix socket
    /// `home/nbd.sock`), an address given explicitly must bind.
    pub nbd: Option<String>,
    /// Accept `debug inject` (fault injection, for tests).
    pub allow_fault_injection: bool,
    /// Replication listener address (`serve --replication ADDR`); None = none
    /// (cycles of this appliance's own relationships run either way).
    pub replication: Option<String>,
    /// Serve HTTPS (see [`api::tls`]); the CLI turns it on for an address other
    /// hosts can reach.
    pub tls: Option<api::tls::TlsOpts>,
}

impl Default for ServeOpts {
    fn default() -> Self {
        let home = client::default_home();
        ServeOpts {
            socket: home.join("cachalot.sock"),
            home,
            http: "127.0.0.1:7470".into(),
            arc_max: state::default_arc_max(),
            iscsi: None,
            analytics: daemon::analytics::AnalyticsOpts::default(),
            nfs: daemon::nfs::NfsOpts::default(),
            nbd: None,
            allow_fault_injection: false,
            replication: None,
            tls: None,
        }
    }
}

fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc signal-set manipulation on a zeroed, then initialised set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_signal(set: &libc::sigset_t) -> i32 {
    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: `set` is a valid initialised signal set; `sig` is a valid out pointer.
        let r = unsafe { libc::sigwait(set, &mut sig) };
        if r == 0 {
            return sig;
        }
    }
}

/// Default iSCSI portal.
pub const ISCSI_DEFAULT: &str = "127.0.0.1:3260";

/// Start the iSCSI portal (see [`ServeOpts::iscsi`]); its address goes to
/// `HOME/iscsi.addr` (tests ask for port 0 and read it there).
fn start_iscsi(
    daemon: &Arc<Daemon>,
    home: &std::path::Path,
    want: Option<&str>,
) -> anyhow::Result<()> {
    let addr_file = home.join("iscsi.addr");
    let _ = std::fs::remove_file(&addr_file);
    let addr = match want.map(str::trim) {
        Some("off" | "none" | "") => return Ok(()),
        Some(a) => a,
        None => ISCSI_DEFAULT,
    };
    match daemon.start_iscsi(addr) {
        Ok(a) => {
            eprintln!("iscsi listening on {a}");
            state::write_atomic(&addr_file, format!("{a}\n").as_bytes(), 0o644)
                .map_err(|e| anyhow::anyhow!("{}: {e}", addr_file.display()))
        }
        Err(e) if want.is_none() => {
            eprintln!("cachalot: {e:#} (iSCSI disabled; use --iscsi ADDR)");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Run the daemon in the foreground until SIGTERM/SIGINT. Must be called before any
/// other thread is started (signals are blocked here and inherited by every thread).
pub fn serve(opts: ServeOpts) -> anyhow::Result<()> {
    let sigset = block_signals();
    let home = &opts.home;
    if !home.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(home)
            .map_err(|e| anyhow::anyhow!("{}: cannot create home: {e}", home.display()))?;
    }
    let home = std::fs::canonicalize(home)?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(home.join("lock"))
        .map_err(|e| anyhow::anyhow!("{}/lock: {e}", home.display()))?;
    // SAFETY: flock on a file descriptor we own for the whole process lifetime.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        anyhow::bail!(
            "{}: another cachalot daemon is using this home",
            home.display()
        );
    }
    let socket = opts.socket.clone();
    let listener = unix::bind_socket(&socket)?;
    let daemon = match Daemon::open(&home, opts.arc_max) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            let _ = std::fs::remove_file(&socket);
            return Err(e);
        }
    };
    if opts.allow_fault_injection {
        daemon.allow_fault_injection();
    }
    if let Err(e) = daemon.start_analytics(opts.analytics) {
        daemon.shutdown();
        let _ = std::fs::remove_file(&socket);
        return Err(e);
    }
    if let Err(e) = daemon.start_nfs(&opts.nfs) {
        daemon.shutdown();
        let _ = std::fs::remove_file(&socket);
        return Err(e);
    }
    let addr_file = home.join("http.addr");
    let http = opts.http.trim();
    if !http.is_empty() && http != "none" && http != "off" {
        let started = match &opts.tls {
            Some(t) => api::tls::server_config(&home, t)
                .and_then(|cfg| http::start_http(http, daemon.clone(), Some(cfg))),
            None => http::start_http(http, daemon.clone(), None),
        };
        match started {
            Ok(addr) => {
                let scheme = if opts.tls.is_some() { "https" } else { "http" };
                eprintln!("{scheme} listening on {addr}");
                if let Err(e) =
                    state::write_atomic(&addr_file, format!("{addr}\n").as_bytes(), 0o644)
                {
                    eprintln!("cachalot: {}: {e}", addr_file.display());
                }
            }
            Err(e) => {
                daemon.shutdown();
                let _ = std::fs::remove_file(&socket);
                return Err(e);
            }
        }
    } else {
        let _ = std::fs::remove_file(&addr_file);
    }
    if let Err(e) = start_iscsi(&daemon, &home, opts.iscsi.as_deref())
        .and_then(|()| start_nbd(&daemon, &opts, &home))
    {
        daemon.shutdown();
        let _ = std::fs::remove_file(&socket);
        return Err(e);
    }
    if let Err(e) = start_replication(&daemon, &opts, &home) {
        daemon.shutdown();
        let _ = std::fs::remove_file(&socket);
        return Err(e);
    }
    eprintln!("cachalot: serving on {}", socket.display());
    {
        let daemon = daemon.clone();
        let socket = socket.clone();
        std::thread::Builder::new()
            .name("cachalot-signals".into())
            .spawn(move || {
                let sig = wait_signal(&sigset);
                eprintln!("cachalot: signal {sig}: exporting pools and exiting");
                daemon.shutdown();
                let _ = std::fs::remove_file(&socket);
                let _ = std::fs::remove_file(&addr_file);
                drop(lock);
                std::process::exit(0);
            })?;
    }
    unix::serve_unix(listener, daemon);
    Ok(())
}

/// Start the replication scheduler, and the listener if `opts.replication`
/// names an address (written to `home/replication.addr`; port 0 = any).
fn start_replication(
    daemon: &Arc<Daemon>,
    opts: &ServeOpts,
    home: &std::path::Path,
) -> anyhow::Result<()> {
    let addr_file = home.join("replication.addr");
    let _ = std::fs::remove_file(&addr_file);
    let api_socket = std::path::absolute(&opts.socket)
        .map_err(|e| anyhow::anyhow!("{}: {e}", opts.socket.display()))?;
    daemon.set_replication_api_socket(&api_socket);
    if let Some(addr) = opts.replication.as_deref().map(str::trim) {
        let bound = daemon.start_replication(addr)?;
        state::write_atomic(&addr_file, format!("{bound}\n").as_bytes(), 0o644)
            .map_err(|e| anyhow::anyhow!("{}: {e}", addr_file.display()))?;
    }
    daemon.start_replication_scheduler()?;
    Ok(())
}

/// Start the NBD server as `opts.nbd` says; its address goes to `home/nbd.addr`.
fn start_nbd(daemon: &Arc<Daemon>, opts: &ServeOpts, home: &std::path::Path) -> anyhow::Result<()> {
    let addr_file = home.join("nbd.addr");
    let _ = std::fs::remove_file(&addr_file);
    let given = opts.nbd.as_deref().map(str::trim);
    if given == Some("off") || given == Some("none") {
        return Ok(());
    }
    let unix = home.join("nbd.sock");
    let tcp = given.unwrap_or(daemon::nbd::DEFAULT_NBD_ADDR);
    let res = match daemon.start_nbd(Some(tcp), Some(&unix)) {
        Err(e) if given.is_none() => {
            // The default port may be taken (another server, another daemon):
            // serve the unix socket only and say so.
            eprintln!("cachalot: {e}; NBD is served on {} only", unix.display());
            daemon.start_nbd(None, Some(&unix))
        }
        r => r,
    };
    match res.map_err(|e| anyhow::anyhow!("{e}"))? {
        Some(addr) => {
            eprintln!("nbd listening on {addr} and {}", unix.display());
            if let Err(e) = state::write_atomic(&addr_file, format!("{addr}\n").as_bytes(), 0o644) {
                eprintln!("cachalot: {}: {e}", addr_file.display());
            }
        }
        None => eprintln!("nbd listening on {}", unix.display()),
    }
    Ok(())
}
