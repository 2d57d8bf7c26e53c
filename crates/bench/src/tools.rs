//! Finding the external programs a study needs, before anything is started.
//!
//! Invariants:
//! - Lookup is a PATH search (plus the sbin directories for system programs such as
//!   mariadbd and losetup, which a non-root PATH often lacks); nothing is executed
//!   to find a tool.
//! - [`require`] reports every missing program in one line, with the Debian
//!   package that provides it.

use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Programs that live in sbin directories on Debian.
const SBIN: &[&str] = &[
    "mariadbd",
    "losetup",
    "mkfs.ext4",
    "mkfs.xfs",
    "mkfs.btrfs",
    "mount",
    "umount",
];
const SBIN_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/local/sbin"];

/// The Debian package that provides a program.
pub fn package_of(prog: &str) -> &'static str {
    match prog {
        "sysbench" => "sysbench",
        "fio" => "fio",
        "mariadbd" | "mariadb-install-db" => "mariadb-server",
        "mariadb" | "mariadb-admin" => "mariadb-client",
        "losetup" => "util-linux",
        "mount" | "umount" => "mount",
        "mkfs.ext4" => "e2fsprogs",
        "mkfs.xfs" => "xfsprogs",
        "mkfs.btrfs" => "btrfs-progs",
        _ => "?",
    }
}

fn is_executable(p: &Path) -> bool {
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Find `prog` in `path_var` (a PATH value), then in the sbin directories if it is
/// a system program.
pub fn which_in(prog: &str, path_var: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::split_paths(path_var).collect();
    if SBIN.contains(&prog) {
        dirs.extend(SBIN_DIRS.iter().map(PathBuf::from));
    }
    dirs.into_iter()
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(prog))
        .find(|p| is_executable(p))
}

/// Resolved program paths.
#[derive(Debug, Clone, Default)]
pub struct Tools {
    paths: BTreeMap<String, PathBuf>,
}

impl Tools {
    /// A command for a program that [`require`] found.
    pub fn cmd(&self, prog: &str) -> Command {
        match self.paths.get(prog) {
            Some(p) => Command::new(p),
            None => Command::new(prog),
        }
    }

    /// First line of `PROG --version` (or "unknown").
    pub fn version(&self, prog: &str) -> String {
        let mut c = self.cmd(prog);
        c.arg("--version");
        crate::exec::run(
            &mut c,
            prog,
            Duration::from_secs(20),
            crate::exec::Mode::Cleanup,
        )
        .ok()
        .and_then(|o| {
            o.stdout
                .lines()
                .chain(o.stderr.lines())
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into())
    }
}

/// Find every program in `progs`; error listing all missing ones.
pub fn require(progs: &[&str]) -> Result<Tools> {
    let path_var = std::env::var("PATH").unwrap_or_default();
    let mut tools = Tools::default();
    let mut missing = Vec::new();
    for p in progs {
        match which_in(p, &path_var) {
            Some(found) => {
                tools.paths.insert(p.to_string(), found);
            }
            None => missing.push(*p),
        }
    }
    if !missing.is_empty() {
        let mut pkgs: Vec<&str> = missing.iter().map(|p| package_of(p)).collect();
        pkgs.dedup();
        bail!(
            "not installed (not found in PATH): {} (apt-get install {})",
            missing.join(", "),
            pkgs.join(" ")
        );
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_in_path_only() {
        assert!(which_in("sh", "/bin:/usr/bin").is_some());
        assert!(which_in("sh", "/nonexistent").is_none());
        assert!(which_in("no-such-program-xyz", "/bin:/usr/bin").is_none());
    }

    #[test]
    fn missing_programs_are_listed_with_packages() {
        let e = require(&["sh", "no-such-prog-1", "no-such-prog-2"]).unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("not installed (not found in PATH): no-such-prog-1, no-such-prog-2"),
            "{m}"
        );
        assert!(!m.contains('\n'));
    }

    #[test]
    fn packages_are_known_for_all_used_programs() {
        for p in [
            "sysbench",
            "fio",
            "mariadbd",
            "mariadb-install-db",
            "mariadb",
            "losetup",
            "mount",
            "umount",
            "mkfs.ext4",
            "mkfs.xfs",
            "mkfs.btrfs",
        ] {
            assert_ne!(package_of(p), "?", "{p}");
        }
    }
}
