//! Parsing of the command-line values of a study: targets (`NAME=PATH`), baselines
//! (`[NAME=]ext4|xfs|btrfs[:SIZE]`), sizes, thread lists and `KEY=VALUE` pairs.
//!
//! Invariants:
//! - Parsers are pure (no file system access) and their errors are one line that
//!   quotes the offending value.
//! - Target names are short identifiers (`[A-Za-z0-9_.-]`, at most 32 chars), so
//!   they can name files, processes and report columns.

use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use std::path::PathBuf;

/// A target given as `NAME=PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    pub name: String,
    pub path: PathBuf,
}

/// File systems that `--baseline` can create on a loop device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FsKind {
    Ext4,
    Xfs,
    Btrfs,
}

impl FsKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
        }
    }

    /// The mkfs program for this file system.
    pub fn mkfs(self) -> &'static str {
        match self {
            FsKind::Ext4 => "mkfs.ext4",
            FsKind::Xfs => "mkfs.xfs",
            FsKind::Btrfs => "mkfs.btrfs",
        }
    }

    /// mkfs arguments before the device: quiet, forced, and (ext4) initialised
    /// eagerly so no background lazy-init writes disturb the measurements.
    pub fn mkfs_args(self) -> &'static [&'static str] {
        match self {
            FsKind::Ext4 => &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
            FsKind::Xfs => &["-q", "-f"],
            FsKind::Btrfs => &["-q", "-f"],
        }
    }

    /// The smallest image we accept for this file system.
    pub fn min_size(self) -> u64 {
        match self {
            FsKind::Btrfs => 256 << 20,
            FsKind::Xfs => 512 << 20,
            FsKind::Ext4 => 64 << 20,
        }
    }
}

/// Default size of a baseline's sparse image file (as in docs/baselines.md).
pub const DEFAULT_BASELINE_SIZE: u64 = 8 << 30;

/// A baseline given as `[NAME=]FS[:SIZE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineSpec {
    pub name: String,
    pub fs: FsKind,
    pub size: u64,
}

/// Check a target name.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 32 {
        bail!("target name '{name}' must have 1 to 32 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        || name.starts_with('.')
    {
        bail!("target name '{name}' may only contain letters, digits, '_', '.' and '-'");
    }
    Ok(())
}

/// Parse `NAME=PATH`.
pub fn parse_target(s: &str) -> Result<TargetSpec> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("--target '{s}': expected NAME=PATH"))?;
    check_name(name).map_err(|e| anyhow!("--target '{s}': {e}"))?;
    if path.is_empty() {
        bail!("--target '{s}': empty path");
    }
    Ok(TargetSpec {
        name: name.to_string(),
        path: PathBuf::from(path),
    })
}

/// Parse `[NAME=]ext4|xfs|btrfs[:SIZE]`; the name defaults to the file system.
pub fn parse_baseline(s: &str) -> Result<BaselineSpec> {
    let (name, rest) = match s.split_once('=') {
        Some((n, r)) => (Some(n), r),
        None => (None, s),
    };
    let (fs, size) = match rest.split_once(':') {
        Some((f, sz)) => (f, Some(sz)),
        None => (rest, None),
    };
    let fs = match fs {
        "ext4" => FsKind::Ext4,
        "xfs" => FsKind::Xfs,
        "btrfs" => FsKind::Btrfs,
        _ => bail!("--baseline '{s}': file system must be ext4, xfs or btrfs"),
    };
    let size = match size {
        Some(sz) => parse_size(sz).map_err(|e| anyhow!("--baseline '{s}': {e}"))?,
        None => DEFAULT_BASELINE_SIZE,
    };
    if size < fs.min_size() {
        bail!(
            "--baseline '{s}': {} needs at least {}",
            fs.as_str(),
            format_size(fs.min_size())
        );
    }
    let name = name.unwrap_or(fs.as_str()).to_string();
    check_name(&name).map_err(|e| anyhow!("--baseline '{s}': {e}"))?;
    Ok(BaselineSpec { name, fs, size })
}

/// Reports print sizes as the rest of cachalot does ("256M", "1.50G").
pub use cachalot_size::format_size;

/// A size option of the lab ("256M", "1.5G", "8GiB"): the workspace's size syntax,
/// and never 0 (no file, table or device of the lab can be empty).
pub fn parse_size(s: &str) -> Result<u64> {
    match cachalot_size::parse_size(s) {
        Ok(0) => bail!("invalid size '{s}': must be positive"),
        Ok(n) => Ok(n),
        Err(e) => bail!("{e} (use e.g. 512M, 8G)"),
    }
}

/// Parse "1,4,8" into thread counts (each 1..=1024, no duplicates), ascending.
pub fn parse_threads(s: &str) -> Result<Vec<u32>> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim) {
        let n: u32 = part
            .parse()
            .map_err(|_| anyhow!("--threads '{s}': '{part}' is not a number"))?;
        if n == 0 || n > 1024 {
            bail!("--threads '{s}': thread counts must be 1 to 1024");
        }
        if v.contains(&n) {
            bail!("--threads '{s}': {n} given twice");
        }
        v.push(n);
    }
    v.sort_unstable();
    Ok(v)
}

/// Parse `KEY=VALUE` (key non-empty, no whitespace or newline anywhere).
pub fn parse_key_value(opt: &str, s: &str) -> Result<(String, String)> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("{opt} '{s}': expected KEY=VALUE"))?;
    if k.is_empty() || k.chars().any(char::is_whitespace) || s.contains('\n') {
        bail!("{opt} '{s}': expected KEY=VALUE without spaces in KEY");
    }
    Ok((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = parse_target("ext4=/mnt/a=b").unwrap();
        assert_eq!(t.name, "ext4");
        assert_eq!(t.path, PathBuf::from("/mnt/a=b"));
        assert!(parse_target("/mnt/x").is_err());
        assert!(parse_target("=/mnt/x").is_err());
        assert!(parse_target("a b=/x").is_err());
        assert!(parse_target("a=").is_err());
        assert!(parse_target(".x=/y").is_err());
    }

    #[test]
    fn baselines() {
        assert_eq!(
            parse_baseline("ext4").unwrap(),
            BaselineSpec {
                name: "ext4".into(),
                fs: FsKind::Ext4,
                size: 8 << 30
            }
        );
        assert_eq!(
            parse_baseline("x2=xfs:4G").unwrap(),
            BaselineSpec {
                name: "x2".into(),
                fs: FsKind::Xfs,
                size: 4 << 30
            }
        );
        assert_eq!(parse_baseline("btrfs:1G").unwrap().size, 1 << 30);
        assert!(parse_baseline("zfs").is_err());
        assert!(parse_baseline("ext4:huge").is_err());
        assert!(parse_baseline("xfs:16M").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert!(parse_size("0").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("12Q").is_err());
        assert_eq!(format_size(256 << 20), "256M");
        assert_eq!(format_size(3 << 29), "1.50G");
        assert_eq!(format_size(100), "100B");
    }

    #[test]
    fn threads() {
        assert_eq!(parse_threads("16,1,4").unwrap(), vec![1, 4, 16]);
        assert!(parse_threads("1,1").is_err());
        assert!(parse_threads("0").is_err());
        assert!(parse_threads("a").is_err());
        assert!(parse_threads("").is_err());
    }

    #[test]
    fn key_values() {
        assert_eq!(
            parse_key_value("--mysqld", "innodb_io_capacity=2000").unwrap(),
            ("innodb_io_capacity".into(), "2000".into())
        );
        assert!(parse_key_value("--mysqld", "novalue").is_err());
        assert!(parse_key_value("--mysqld", "a b=1").is_err());
    }
}
