//! A private MariaDB server per target: its own option file, datadir (on the
//! target), socket, pid file and port; initialised with `mariadb-install-db`,
//! started as a child `mariadbd`, stopped by us.
//!
//! Invariants:
//! - The server reads only our option file (`--defaults-file`), listens on
//!   127.0.0.1 only, and keeps all its files in `base` (a fresh directory on the
//!   target: datadir, tmpdir) and in the run directory (socket, pid, option file).
//! - A started server is always stopped: [`Server::stop`] for a clean shutdown
//!   between variants, SIGKILL on drop (its data is thrown away with `base`).
//! - `base` is removed on drop, after the server is gone.
//! - Startup failures name the target and quote the server's own error line.

use crate::exec::{self, Mode};
use crate::signals;
use crate::tools::Tools;
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(600);
const STOP_TIMEOUT: Duration = Duration::from_secs(900);
const SQL_TIMEOUT: Duration = Duration::from_secs(300);

/// Server settings that a study varies or records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSettings {
    pub innodb_buffer_pool_size: u64,
    pub innodb_log_file_size: u64,
    pub innodb_flush_method: String,
    pub innodb_flush_log_at_trx_commit: u8,
    pub max_connections: u32,
    /// Extra `key=value` lines for the option file (`--mysqld`).
    pub extra: Vec<(String, String)>,
}

impl Default for ServerSettings {
    /// The settings of docs/baselines.md.
    fn default() -> Self {
        ServerSettings {
            innodb_buffer_pool_size: 256 << 20,
            innodb_log_file_size: 256 << 20,
            innodb_flush_method: "O_DIRECT".into(),
            innodb_flush_log_at_trx_commit: 1,
            max_connections: 200,
            extra: Vec::new(),
        }
    }
}

/// Where one server keeps its files.
#[derive(Debug, Clone)]
pub struct ServerPaths {
    pub datadir: PathBuf,
    pub tmpdir: PathBuf,
    pub socket: PathBuf,
    pub pid_file: PathBuf,
    pub cnf: PathBuf,
    pub error_log: PathBuf,
}

fn quoted(p: &Path) -> String {
    format!("\"{}\"", p.display())
}

/// The option file for a server. Pure, for testing.
pub fn option_file(paths: &ServerPaths, port: u16, as_root: bool, s: &ServerSettings) -> String {
    let mut lines = vec![
        "# written by cachalot bench".to_string(),
        "[mariadbd]".to_string(),
        format!("datadir={}", quoted(&paths.datadir)),
        format!("tmpdir={}", quoted(&paths.tmpdir)),
        format!("socket={}", quoted(&paths.socket)),
        format!("pid-file={}", quoted(&paths.pid_file)),
        format!("log-error={}", quoted(&paths.error_log)),
        format!("port={port}"),
        "bind-address=127.0.0.1".to_string(),
        "skip-name-resolve".to_string(),
        format!("innodb_buffer_pool_size={}", s.innodb_buffer_pool_size),
        format!("innodb_log_file_size={}", s.innodb_log_file_size),
        format!("innodb_flush_method={}", s.innodb_flush_method),
        format!(
            "innodb_flush_log_at_trx_commit={}",
            s.innodb_flush_log_at_trx_commit
        ),
        format!("max_connections={}", s.max_connections),
    ];
    if as_root {
        lines.push("user=root".to_string());
    }
    for (k, v) in &s.extra {
        lines.push(format!("{k}={v}"));
    }
    lines.join("\n") + "\n"
}

/// The line of a MariaDB error log text that explains a failure: the first
/// `[ERROR]` line that is not the generic "Aborting", else the last line.
pub fn last_error(log: &str) -> Option<String> {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let from_tag = |l: &&str| match l.find("[ERROR]") {
        Some(i) => l[i..].to_string(),
        None => l.to_string(),
    };
    lines
        .iter()
        .find(|l| l.contains("[ERROR]") && !l.ends_with("Aborting"))
        .or_else(|| lines.iter().rev().find(|l| l.contains("[ERROR]")))
        .map(from_tag)
        .or_else(|| lines.last().map(|l| l.to_string()))
}

/// One private server.
pub struct Server {
    pub target: String,
    pub port: u16,
    pub paths: ServerPaths,
    tools: Tools,
    user: String,
    as_root: bool,
    child: Option<Child>,
    /// The directory on the target holding datadir and tmpdir.
    base: Option<tempfile::TempDir>,
}

impl Server {
    /// Plan a server for `target` with its data in a fresh directory under
    /// `target_dir`, runtime files in `run_dir`, and its error log in `log_dir`.
    pub fn new(
        target: &str,
        target_dir: &Path,
        run_dir: &Path,
        log_dir: &Path,
        socket: PathBuf,
        port: u16,
        tools: &Tools,
    ) -> Result<Server> {
        let base = tempfile::Builder::new()
            .prefix(&format!("cachalot-bench-{target}."))
            .tempdir_in(target_dir)
            .with_context(|| format!("cannot create a directory in {}", target_dir.display()))?;
        let paths = ServerPaths {
            datadir: base.path().join("data"),
            tmpdir: base.path().join("tmp"),
            socket,
            pid_file: run_dir.join(format!("mariadb-{target}.pid")),
            cnf: run_dir.join(format!("mariadb-{target}.cnf")),
            error_log: log_dir.join(format!("mariadb-{target}.err")),
        };
        Ok(Server {
            target: target.to_string(),
            port,
            paths,
            tools: tools.clone(),
            user: crate::machine::user_name(),
            as_root: crate::machine::is_root(),
            child: None,
            base: Some(base),
        })
    }

    fn ctx(&self, what: &str) -> String {
        format!("mariadbd for target '{}': {what}", self.target)
    }

    fn write_cnf(&self, s: &ServerSettings) -> Result<()> {
        std::fs::write(
            &self.paths.cnf,
            option_file(&self.paths, self.port, self.as_root, s),
        )
        .with_context(|| format!("cannot write {}", self.paths.cnf.display()))
    }

    /// Create an empty datadir (removing an old one) and initialise it.
    pub fn initialize(&mut self, s: &ServerSettings) -> Result<()> {
        if self.child.is_some() {
            bail!(self.ctx("initialize while running"));
        }
        for d in [&self.paths.datadir, &self.paths.tmpdir] {
            if d.exists() {
                std::fs::remove_dir_all(d)
                    .with_context(|| format!("cannot remove {}", d.display()))?;
            }
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        self.write_cnf(s)?;
        let mut c = self.tools.cmd("mariadb-install-db");
        c.arg(format!("--defaults-file={}", self.paths.cnf.display()))
            .args(["--auth-root-authentication-method=socket", "--skip-test-db"]);
        let what = self.ctx("mariadb-install-db");
        match exec::run(&mut c, &what, START_TIMEOUT, Mode::Interruptible) {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => {
                let log = std::fs::read_to_string(&self.paths.error_log).unwrap_or_default();
                let line = last_error(&log).unwrap_or_else(|| o.summary());
                Err(anyhow!(
                    "{what} failed ({}): {line}",
                    exec::status_text(&o.status)
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// Start the server with settings `s` and wait until it accepts connections.
    pub fn start(&mut self, s: &ServerSettings) -> Result<()> {
        if self.child.is_some() {
            bail!(self.ctx("already running"));
        }
        self.write_cnf(s)?;
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.paths.error_log)
            .with_context(|| format!("cannot open {}", self.paths.error_log.display()))?;
        let log_offset = log.metadata().map(|m| m.len()).unwrap_or(0);
        let mut c = self.tools.cmd("mariadbd");
        c.arg(format!("--defaults-file={}", self.paths.cnf.display()))
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        self.child = Some(exec::spawn(&mut c).with_context(|| self.ctx("start"))?);
        let r = self.wait_ready(log_offset);
        if r.is_err() {
            self.kill();
        }
        r
    }

    fn log_since(&self, offset: u64) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.paths.error_log) {
            if f.seek(SeekFrom::Start(offset)).is_ok() {
                let _ = f.read_to_string(&mut s);
            }
        }
        s
    }

    fn wait_ready(&mut self, log_offset: u64) -> Result<()> {
        let t0 = Instant::now();
        loop {
            signals::check()?;
            let child = self.child.as_mut().expect("started");
            if let Some(st) = child.try_wait()? {
                self.child = None;
                let why = last_error(&self.log_since(log_offset))
                    .unwrap_or_else(|| "no log output".into());
                bail!(
                    "{} ({}): {why} (log: {})",
                    self.ctx("exited during startup"),
                    exec::status_text(&st),
                    self.paths.error_log.display()
                );
            }
            if UnixStream::connect(&self.paths.socket).is_ok() && self.sql("SELECT 1").is_ok() {
                return Ok(());
            }
            if t0.elapsed() > START_TIMEOUT {
                bail!(self.ctx(&format!("not ready after {} s", START_TIMEOUT.as_secs())));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// True while the server process runs.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Run SQL as the administrative user; returns the tab-separated output.
    pub fn sql(&self, sql: &str) -> Result<String> {
        let mut c = self.tools.cmd("mariadb");
        c.arg("--no-defaults")
            .arg("--protocol=socket")
            .arg(format!("--socket={}", self.paths.socket.display()))
            .arg(format!("--user={}", self.user))
            .args(["--batch", "--skip-column-names", "-e", sql]);
        let what = self.ctx("SQL");
        Ok(exec::run_ok(&mut c, &what, SQL_TIMEOUT, Mode::Interruptible)?.stdout)
    }

    /// Global variables as the server reports them (to check settings applied).
    pub fn variables(&self, names: &[&str]) -> Result<BTreeMap<String, String>> {
        let list = names
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(",");
        let out = self.sql(&format!(
            "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE LOWER(VARIABLE_NAME) IN ({list})"
        ))?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// Clean shutdown (SIGTERM, wait). Interruptible: on Ctrl-C the server is
    /// killed instead.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let what = self.ctx("shutdown");
        let st = exec::wait(&mut child, &what, STOP_TIMEOUT, Mode::Interruptible)?;
        if !st.success() {
            bail!("{what}: {}", exec::status_text(&st));
        }
        Ok(())
    }

    /// SIGKILL and reap (the data is about to be discarded).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            exec::kill(&mut c);
        }
    }

    /// Bytes used by the datadir (for the report).
    pub fn data_bytes(&self) -> u64 {
        dir_bytes(&self.paths.datadir)
    }
}

fn dir_bytes(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.paths.cnf);
        let _ = std::fs::remove_file(&self.paths.pid_file);
        let _ = std::fs::remove_file(&self.paths.socket);
        if let Some(b) = self.base.take() {
            let p = b.path().to_path_buf();
            if let Err(e) = b.close() {
                eprintln!("cachalot: warning: cannot remove {}: {e}", p.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ServerPaths {
        ServerPaths {
            datadir: "/t/x/data".into(),
            tmpdir: "/t/x/tmp".into(),
            socket: "/run/a.sock".into(),
            pid_file: "/run/a.pid".into(),
            cnf: "/run/a.cnf".into(),
            error_log: "/out/logs/a.err".into(),
        }
    }

    #[test]
    fn option_file_is_private_and_complete() {
        let mut s = ServerSettings {
            innodb_flush_method: "fsync".into(),
            ..ServerSettings::default()
        };
        s.extra.push(("innodb_io_capacity".into(), "1000".into()));
        let f = option_file(&paths(), 13306, true, &s);
        for want in [
            "[mariadbd]\n",
            "datadir=\"/t/x/data\"\n",
            "socket=\"/run/a.sock\"\n",
            "port=13306\n",
            "bind-address=127.0.0.1\n",
            "innodb_buffer_pool_size=268435456\n",
            "innodb_flush_method=fsync\n",
            "innodb_flush_log_at_trx_commit=1\n",
            "user=root\n",
            "innodb_io_capacity=1000\n",
        ] {
            assert!(f.contains(want), "missing {want:?} in\n{f}");
        }
        assert!(!option_file(&paths(), 1, false, &s).contains("user=root"));
    }

    #[test]
    fn last_error_picks_the_error_line() {
        let log = "2026-11-22 0 [Note] Starting\n2026-11-22 0 [ERROR] unknown variable 'x=1'\n2026-11-22 0 [ERROR] Aborting\n";
        assert_eq!(last_error(log).unwrap(), "[ERROR] unknown variable 'x=1'");
        assert_eq!(
            last_error("x [ERROR] Aborting\n").unwrap(),
            "[ERROR] Aborting"
        );
        assert_eq!(last_error("a\nb\n").unwrap(), "b");
        assert!(last_error("").is_none());
    }
}
