//! The vdev grammar of `pool create` and `pool add` (`a b mirror c d log e`), the
//! options of creation, and opening (or creating) the devices named.
//!
//! Invariants: a parsed specification names every device once, has no empty
//! group, no mirror of one device, no raidz of too few or too many devices;
//! nothing is written while a specification is checked.

use crate::device::{BlockDevice, FileDevice};
use crate::error::{PoolError, Result};
use crate::label::{VdevKind, MIN_DEVICE_SIZE};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One group of devices in a create/add specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VdevSpec {
    pub kind: VdevKind,
    pub paths: Vec<PathBuf>,
    /// A separate intent-log device (`log` in the specification).
    pub log: bool,
}

/// Options of pool creation.
#[derive(Clone, Debug)]
pub struct CreateOpts {
    pub ashift: u8,
    /// Create missing files as sparse files of this size.
    pub create_size: Option<u64>,
    /// Use devices that carry another pool's label.
    pub force: bool,
}

impl Default for CreateOpts {
    fn default() -> Self {
        CreateOpts {
            ashift: 12,
            create_size: None,
            force: false,
        }
    }
}

/// Parse zpool-style vdev words: `a b mirror c d raidz1 e f g`.
pub fn parse_vdev_spec(words: &[String]) -> Result<Vec<VdevSpec>> {
    let mut out: Vec<VdevSpec> = Vec::new();
    let mut group: Option<VdevSpec> = None;
    // After the word `log`, devices (and mirrors) are separate intent-log devices.
    let mut log = false;
    for w in words {
        if w == "log" {
            if log {
                return Err(PoolError::InvalidSpec("'log' given twice".into()));
            }
            if let Some(g) = group.take() {
                out.push(g);
            }
            log = true;
            continue;
        }
        let kind = match w.as_str() {
            "mirror" => Some(VdevKind::Mirror),
            "raidz" | "raidz1" => Some(VdevKind::Raidz1),
            "raidz2" => Some(VdevKind::Raidz2),
            "cache" | "spare" | "special" | "dedup" => {
                return Err(PoolError::InvalidSpec(format!(
                    "'{w}' vdevs are not supported yet"
                )))
            }
            _ => None,
        };
        match kind {
            Some(k) => {
                if let Some(g) = group.take() {
                    out.push(g);
                }
                group = Some(VdevSpec {
                    kind: k,
                    paths: vec![],
                    log,
                });
            }
            None => match &mut group {
                Some(g) => g.paths.push(PathBuf::from(w)),
                None => out.push(VdevSpec {
                    kind: VdevKind::Disk,
                    paths: vec![PathBuf::from(w)],
                    log,
                }),
            },
        }
    }
    if let Some(g) = group.take() {
        out.push(g);
    }
    if out.is_empty() {
        return Err(PoolError::InvalidSpec("no devices given".into()));
    }
    if log && out.iter().all(|g| !g.log) {
        return Err(PoolError::InvalidSpec(
            "'log' must be followed by devices".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for g in &out {
        match g.kind {
            VdevKind::Mirror if g.paths.len() < 2 => {
                return Err(PoolError::InvalidSpec(
                    "a mirror needs at least two devices".into(),
                ))
            }
            _ if g.paths.is_empty() => {
                return Err(PoolError::InvalidSpec("a vdev group has no devices".into()))
            }
            VdevKind::Raidz1 | VdevKind::Raidz2 => check_raidz_group(g)?,
            _ => {}
        }
        for p in &g.paths {
            let key = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            if !seen.insert(key) {
                return Err(PoolError::InvalidSpec(format!(
                    "{}: device given more than once",
                    p.display()
                )));
            }
        }
    }
    Ok(out)
}

/// A raidz group needs more devices than parity columns (raidz1: 2, raidz2: 3),
/// at most `MAX_RAIDZ_CHILDREN`, and cannot be a log device.
fn check_raidz_group(g: &VdevSpec) -> Result<()> {
    let p = crate::raidz::nparity(g.kind);
    let name = if p == 1 { "raidz1" } else { "raidz2" };
    if g.log {
        return Err(PoolError::InvalidSpec(format!(
            "a log device cannot be {name}: use a disk or a mirror"
        )));
    }
    if g.paths.len() <= p {
        return Err(PoolError::InvalidSpec(format!(
            "{name} needs at least {} devices, got {}",
            p + 1,
            g.paths.len()
        )));
    }
    if g.paths.len() > crate::raidz::MAX_RAIDZ_CHILDREN {
        return Err(PoolError::InvalidSpec(format!(
            "{name} takes at most {} devices, got {}",
            crate::raidz::MAX_RAIDZ_CHILDREN,
            g.paths.len()
        )));
    }
    Ok(())
}

/// Open a device path for a new pool, creating a sparse file if asked.
pub(crate) fn open_for_create(path: &Path, opts: &CreateOpts) -> Result<Arc<dyn BlockDevice>> {
    if !path.exists() {
        let Some(size) = opts.create_size else {
            return Err(PoolError::InvalidSpec(format!(
                "{}: no such file (use -s SIZE to create it)",
                path.display()
            )));
        };
        if size < MIN_DEVICE_SIZE {
            return Err(PoolError::TooSmall {
                path: path.into(),
                size,
                min: MIN_DEVICE_SIZE,
            });
        }
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !parent.is_dir() {
                return Err(PoolError::InvalidSpec(format!(
                    "{}: directory {} does not exist",
                    path.display(),
                    parent.display()
                )));
            }
        }
        return Ok(Arc::new(FileDevice::create_sparse(path, size)?));
    }
    Ok(Arc::new(FileDevice::open(path)?))
}

/// Directories expand to the files they contain.
pub(crate) fn expand_paths(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(p) {
                let mut v: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect();
                v.sort();
                out.extend(v);
            }
        } else {
            out.push(p.clone());
        }
    }
    out
}
