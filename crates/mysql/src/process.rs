//! Starting a server for a clone: it runs in its own session, outlives the CLI,
//! and is ready when it answers on its socket.
//!
//! Invariants:
//! - The server is started detached (new session, stdin closed, output to a file
//!   in its run directory), so ending the CLI or its terminal does not end it.
//! - Waiting for readiness ends as soon as the process exits (its error log's last
//!   lines are the message) or after the timeout.

use crate::server::{Credentials, Server};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The server binary: `mariadbd` or `mysqld` from PATH, /usr/sbin or /usr/local/sbin.
pub fn find_server_binary(flavor: &str) -> Result<PathBuf, String> {
    let names: &[&str] = if flavor == "mariadb" {
        &["mariadbd", "mysqld"]
    } else {
        &["mysqld"]
    };
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push("/usr/sbin".into());
    dirs.push("/usr/local/sbin".into());
    for n in names {
        for d in &dirs {
            let p = d.join(n);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(format!(
        "no {} server binary found in PATH, /usr/sbin or /usr/local/sbin",
        names.join(" or ")
    ))
}

/// Start `binary --defaults-file=cnf` detached; its pid.
pub fn start_detached(binary: &Path, cnf: &Path, output: &Path) -> Result<u32, String> {
    let out = std::fs::File::create(output).map_err(|e| format!("{}: {e}", output.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", output.display()))?;
    let mut cmd = Command::new(binary);
    cmd.arg(format!("--defaults-file={}", cnf.display()))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: setsid is async-signal-safe; it only detaches the child from our
    // session and process group.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    // The server must outlive us (it is re-parented when we exit); until then a
    // thread reaps it when it ends, so a long-lived caller (the daemon, for its
    // REST routes) keeps no zombie.
    let pid = child.id();
    let mut child = child;
    let _ = std::thread::Builder::new()
        .name(format!("reap-{pid}"))
        .spawn(move || child.wait());
    Ok(pid)
}

/// True if `pid` runs (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => match stat.rfind(')') {
            Some(i) => !stat[i + 1..].trim_start().starts_with('Z'),
            None => false,
        },
        Err(_) => false,
    }
}

/// The last `n` non-empty lines of a log file, joined with " | ".
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Wait until the server `pid` answers on `socket`.
pub async fn wait_ready(
    pid: u32,
    socket: &Path,
    creds: &Credentials,
    timeout: Duration,
    error_log: &Path,
) -> Result<Server, String> {
    let start = Instant::now();
    loop {
        if !alive(pid) {
            return Err(format!(
                "the new server (pid {pid}) exited during startup: {}",
                log_tail(error_log, 3)
            ));
        }
        if socket.exists() {
            if let Ok(s) = Server::connect(socket, creds).await {
                return Ok(s);
            }
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "the new server (pid {pid}) did not answer on {} within {} s (still running; see {})",
                socket.display(),
                timeout.as_secs(),
                error_log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Name of the owner of `path` (to run the server as, when we are root).
pub fn owner_name(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(path).ok()?.uid();
    // SAFETY: getpwuid returns a pointer into static storage or NULL; we copy the
    // name out at once and use it from this thread only.
    unsafe {
        let pw = libc::getpwuid(uid);
        if pw.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr((*pw).pw_name);
        Some(name.to_string_lossy().into_owned())
    }
}

/// Give `path` to the owner of `like` (root only; otherwise a no-op).
pub fn chown_like(path: &Path, like: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let m = std::fs::metadata(like).map_err(|e| format!("{}: {e}", like.display()))?;
    std::os::unix::fs::chown(path, Some(m.uid()), Some(m.gid()))
        .map_err(|e| format!("{}: {e}", path.display()))
}
