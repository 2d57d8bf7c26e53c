//! Which processes use a directory tree: open files, working directory or root
//! under it (from /proc), and live pid files in it.
//!
//! Invariants:
//! - Read-only: nothing is signalled or stopped here.
//! - Processes we cannot inspect (gone, or not permitted) are skipped; run as root
//!   to see every process.

use std::path::{Path, PathBuf};

/// One process using a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub pid: u32,
    pub command: String,
    /// One path it uses (an open file, its cwd, or a pid file naming it).
    pub path: PathBuf,
}

fn command_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Processes with an open file, cwd or root under any of `roots`.
pub fn users_of(roots: &[PathBuf]) -> Vec<User> {
    let me = std::process::id();
    let under = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let base = e.path();
        let mut found = None;
        for link in ["cwd", "root"] {
            if let Ok(t) = std::fs::read_link(base.join(link)) {
                if under(&t) {
                    found = Some(t);
                }
            }
        }
        if found.is_none() {
            if let Ok(fds) = std::fs::read_dir(base.join("fd")) {
                for fd in fds.flatten() {
                    if let Ok(t) = std::fs::read_link(fd.path()) {
                        if under(&t) {
                            found = Some(t);
                            break;
                        }
                    }
                }
            }
        }
        if let Some(path) = found {
            out.push(User {
                pid,
                command: command_of(pid),
                path,
            });
        }
    }
    out
}

/// Live processes named by `*.pid` files directly in `dir`.
pub fn live_pid_files(dir: &Path) -> Vec<User> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("pid") {
            continue;
        }
        let Some(pid) = std::fs::read_to_string(&p)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        else {
            continue;
        };
        if crate::process::alive(pid) {
            out.push(User {
                pid,
                command: command_of(pid),
                path: p,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_process_with_an_open_file() {
        let dir = std::env::temp_dir().join(format!("cachalot-usage-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("held");
        std::fs::write(&f, b"x").unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::fs::File::open(&f).unwrap())
            .spawn()
            .unwrap();
        // The child's fd 0 is the file; allow it a moment to exec.
        let mut users = Vec::new();
        for _ in 0..50 {
            users = users_of(std::slice::from_ref(&dir));
            if !users.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(users.iter().any(|u| u.pid == child.id()), "{users:?}");
        assert!(users_of(&[dir.join("nothing-here")]).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pid_files_of_dead_processes_do_not_count() {
        let dir = std::env::temp_dir().join(format!("cachalot-pidf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("live.pid"), format!("{}\n", std::process::id())).unwrap();
        std::fs::write(dir.join("dead.pid"), "999999999\n").unwrap();
        let users = live_pid_files(&dir);
        assert_eq!(users.len(), 1, "{users:?}");
        assert_eq!(users[0].pid, std::process::id());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
