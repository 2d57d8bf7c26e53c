//! Where a server keeps its files, which dataset each place is on, and how those
//! places move when the datasets are cloned and mounted elsewhere.
//!
//! Invariants:
//! - Paths are absolute and canonical (symlinks resolved) before they are compared
//!   with mount points, so `/a/../b` or a symlinked datadir cannot dodge the check.
//! - A place maps to the member whose mount point is its longest prefix, compared
//!   by whole path components (`/m/data2` is not under `/m/data`).

use std::path::{Component, Path, PathBuf};

/// The server's file places that a consistent snapshot must cover.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerPaths {
    pub datadir: PathBuf,
    /// InnoDB redo log directory.
    pub redo_dir: PathBuf,
    /// Binary log base name (directory + prefix); None if binary logging is off.
    pub binlog_basename: Option<PathBuf>,
    /// InnoDB undo tablespace directory.
    pub undo_dir: PathBuf,
    /// InnoDB system tablespace directory (innodb_data_home_dir).
    pub data_home_dir: PathBuf,
}

/// Resolve a server path variable: empty or relative values are relative to the
/// datadir (as the server reads them); the result is canonical where it exists.
pub fn resolve(datadir: &Path, value: Option<&str>) -> PathBuf {
    let v = value.unwrap_or("").trim();
    let p = if v.is_empty() {
        datadir.to_path_buf()
    } else if Path::new(v).is_absolute() {
        PathBuf::from(v)
    } else {
        datadir.join(v)
    };
    // "./" (the usual redo directory) must compare equal to the datadir itself.
    let p: PathBuf = p
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    canonical(&p)
}

/// Canonical form of `p` (if it exists; otherwise of its parent plus the name).
pub fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| p.to_path_buf()),
        _ => p.to_path_buf(),
    }
}

impl ServerPaths {
    /// Every place with a label, for checks and messages.
    pub fn places(&self) -> Vec<(&'static str, &Path)> {
        let mut v: Vec<(&'static str, &Path)> = vec![
            ("datadir", &self.datadir),
            ("InnoDB redo log directory", &self.redo_dir),
            ("InnoDB undo directory", &self.undo_dir),
            ("InnoDB system tablespace directory", &self.data_home_dir),
        ];
        if let Some(b) = &self.binlog_basename {
            v.push(("binary log", b));
        }
        v
    }
}

/// Index of the mount (of `mounts`) that holds `path`, by longest prefix.
pub fn member_of(path: &Path, mounts: &[PathBuf]) -> Option<usize> {
    mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| path.starts_with(m))
        .max_by_key(|(_, m)| m.components().count())
        .map(|(i, _)| i)
}

/// `path` moved from under `old_mounts[i]` to under `new_mounts[i]`; None if it is
/// under none of the old mounts.
pub fn relocate(path: &Path, old_mounts: &[PathBuf], new_mounts: &[PathBuf]) -> Option<PathBuf> {
    let i = member_of(path, old_mounts)?;
    let rest = path.strip_prefix(&old_mounts[i]).ok()?;
    let new = new_mounts.get(i)?;
    Some(if rest.as_os_str().is_empty() {
        new.clone()
    } else {
        new.join(rest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pb(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn member_is_longest_whole_component_prefix() {
        let mounts = vec![pb("/m/data"), pb("/m/data/log"), pb("/m/x")];
        assert_eq!(member_of(&pb("/m/data/db/t.ibd"), &mounts), Some(0));
        assert_eq!(member_of(&pb("/m/data/log/binlog"), &mounts), Some(1));
        assert_eq!(member_of(&pb("/m/data2/t"), &mounts), None);
        assert_eq!(member_of(&pb("/m/data"), &mounts), Some(0));
    }

    #[test]
    fn relocation_keeps_the_rest_of_the_path() {
        let old = vec![pb("/src/data"), pb("/src/log")];
        let new = vec![pb("/c/data"), pb("/c/log")];
        assert_eq!(
            relocate(&pb("/src/log/binlog"), &old, &new),
            Some(pb("/c/log/binlog"))
        );
        assert_eq!(relocate(&pb("/src/data"), &old, &new), Some(pb("/c/data")));
        assert_eq!(relocate(&pb("/elsewhere/x"), &old, &new), None);
    }

    #[test]
    fn relative_values_are_under_the_datadir() {
        let d = pb("/nonexistent-cachalot/data");
        assert_eq!(resolve(&d, Some("./")), d);
        assert_eq!(resolve(&d, Some("")), d);
        assert_eq!(resolve(&d, None), d);
        assert_eq!(resolve(&d, Some("/abs/log")), pb("/abs/log"));
    }
}
