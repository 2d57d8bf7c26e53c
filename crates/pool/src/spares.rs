//! Hot spares: devices set aside (`spare PATH` in create and add) that take the
//! place of a FAULTED device of a mirror or raidz without a command.
//!
//! A spare is listed in the configuration (`spares`) and carries a label with
//! the pool's configuration and its own guid, so it is found at import and
//! cannot be taken by another pool. It holds no data and no uberblocks.
//! Activation is a `replace` of the FAULTED device by the spare (a resilver
//! follows), after which the spare is an ordinary member and leaves the list.
//!
//! Invariants: a spare is in at most one pool (refused, with nothing written,
//! when another pool's label is on it unless forced; the daemon refuses paths
//! any pool uses); a spare replaces only a leaf that is FAULTED (by diagnosis,
//! not offline) in a vdev that can rebuild it, and only one spare per leaf.

use crate::commit::{read_label, write_labels};
use crate::device::BlockDevice;
use crate::error::{PoolError, Result};
use crate::label::{LabelHeader, LeafConfig, MIN_DEVICE_SIZE};
use crate::pool::{new_guid, Pool};
use crate::vdev_spec::{open_for_create, CreateOpts};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Words of a vdev specification: `spare PATH...` taken out (until the next
/// keyword), the rest left for `parse_vdev_spec`.
pub fn split_spares(words: &[String]) -> (Vec<String>, Vec<PathBuf>) {
    split_section(words, "spare")
}

/// Words of a vdev specification: the devices after `keyword` (`spare`,
/// `cache`) taken out (until the next keyword), the rest left as they were.
pub fn split_section(words: &[String], keyword: &str) -> (Vec<String>, Vec<PathBuf>) {
    const KEYWORDS: &[&str] = &[
        "mirror", "raidz", "raidz1", "raidz2", "log", "cache", "spare", "special", "dedup",
    ];
    let mut rest = Vec::new();
    let mut taken = Vec::new();
    let mut in_section = false;
    for w in words {
        if w == keyword {
            in_section = true;
        } else if KEYWORDS.contains(&w.as_str()) {
            in_section = false;
            rest.push(w.clone());
        } else if in_section {
            taken.push(PathBuf::from(w));
        } else {
            rest.push(w.clone());
        }
    }
    (rest, taken)
}

impl Pool {
    /// Paths of the spares not in use.
    pub fn spare_paths(&self) -> Vec<PathBuf> {
        self.config
            .read()
            .spares
            .iter()
            .map(|s| s.path.clone())
            .collect()
    }

    /// Add spares; each is checked (size, label) before any is written.
    pub fn add_spares(&self, paths: &[PathBuf], opts: &CreateOpts, next_txg: u64) -> Result<()> {
        self.check_suspended()?;
        if paths.is_empty() {
            return Err(PoolError::InvalidSpec("'spare' needs devices".into()));
        }
        let new = self.open_extra_devices(paths, opts)?;
        let mut cfg = self.config.read().clone();
        cfg.config_txg = cfg.next_config_txg(next_txg);
        cfg.spares.extend(new.iter().map(|(l, _)| l.clone()));
        for (l, dev) in &new {
            let h = LabelHeader {
                config: cfg.clone(),
                leaf_guid: l.guid,
                top_id: SPARE_TOP_ID,
            };
            write_labels(dev.as_ref(), &h, true)?;
        }
        *self.config.write() = cfg;
        self.rewrite_label_headers()
    }

    /// Open (or create) spares or cache devices to add, each checked: not in
    /// this pool, big enough, no other pool's label unless forced. On failure,
    /// files it created are removed and nothing is written.
    pub(crate) fn open_extra_devices(
        &self,
        paths: &[PathBuf],
        opts: &CreateOpts,
    ) -> Result<Vec<(LeafConfig, Arc<dyn BlockDevice>)>> {
        let used = self.device_paths();
        let mut created = Vec::new();
        let mut new: Vec<(LeafConfig, Arc<dyn BlockDevice>)> = Vec::new();
        let refuse = |created: &[PathBuf], e: PoolError| {
            for c in created {
                let _ = std::fs::remove_file(c);
            }
            Err(e)
        };
        for p in paths {
            let canon = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            if used.contains(&canon) || new.iter().any(|(l, _)| l.path == canon) {
                return refuse(
                    &created,
                    PoolError::InvalidSpec(format!("{}: already part of this pool", p.display())),
                );
            }
            let existed = p.exists();
            let dev = match open_for_create(p, opts) {
                Ok(d) => d,
                Err(e) => return refuse(&created, e),
            };
            if !existed {
                created.push(p.clone());
            }
            if dev.size() < MIN_DEVICE_SIZE {
                return refuse(
                    &created,
                    PoolError::TooSmall {
                        path: p.clone(),
                        size: dev.size(),
                        min: MIN_DEVICE_SIZE,
                    },
                );
            }
            if !opts.force {
                if let Some(h) = read_label(dev.as_ref()) {
                    return refuse(
                        &created,
                        PoolError::InvalidSpec(format!(
                            "{}: device is part of pool '{}' (use -f to overwrite)",
                            p.display(),
                            h.config.name
                        )),
                    );
                }
            }
            let leaf = LeafConfig {
                guid: new_guid(),
                path: std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()),
                resilvering: false,
                offline: false,
                offline_txg: 0,
            };
            new.push((leaf, dev));
        }
        Ok(new)
    }

    /// Is `path` (canonical) one of this pool's spares?
    pub(crate) fn is_spare(&self, path: &Path) -> bool {
        self.config.read().spares.iter().any(|s| s.path == path)
    }

    /// Guids of FAULTED leaves a spare could replace (in a mirror or raidz).
    fn faulted_leaves(&self) -> Vec<String> {
        self.vdevs
            .read()
            .iter()
            .filter(|t| !t.log && t.kind != crate::label::VdevKind::Disk)
            .flat_map(|t| t.leaves.iter())
            .filter(|l| {
                (l.fault.faulted.load(Relaxed) || l.fault.removed.load(Relaxed))
                    && !l.is_offline()
                    && l.dev.is_some()
            })
            .map(|l| l.guid.to_string())
            .collect()
    }

    /// The state of the device named by path or guid ("" if there is none).
    fn device_state(&self, name: &str) -> &'static str {
        match self.find_leaf(name) {
            Some((ti, li)) => self.vdevs.read()[ti].leaves[li].state(),
            None => "",
        }
    }

    /// A spare is free and a leaf needs it (cheap: a check every second).
    pub fn spare_needed(&self) -> bool {
        !self.config.read().spares.is_empty() && !self.faulted_leaves().is_empty()
    }

    /// If a leaf is FAULTED and a spare is free, replace the leaf by the spare
    /// (the caller holds off commits, then starts the resilver). Returns what
    /// was done, for the log.
    pub fn activate_spare(&self, next_txg: u64) -> Result<Option<String>> {
        let spares = self.spare_paths();
        if spares.is_empty() {
            return Ok(None);
        }
        let faulted = self.faulted_leaves();
        let Some(old) = faulted.first() else {
            return Ok(None);
        };
        let old_path = self
            .leaf_path(old)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| old.clone());
        let state = self.device_state(old);
        let opts = CreateOpts {
            ashift: self.config.read().ashift,
            create_size: None,
            force: false,
        };
        let mut last = None;
        // The first spare that fits (a small one is refused by replace).
        for s in &spares {
            match self.replace_device(&old_path, s, &opts, next_txg) {
                Ok(()) => {
                    let msg = format!(
                        "{old_path} {state}: hot spare {} took its place (resilvering)",
                        s.display()
                    );
                    self.add_notice(msg.clone());
                    return Ok(Some(msg));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("spares is not empty"))
    }
}

/// `top_id` in a spare's label: it belongs to no top-level vdev.
pub const SPARE_TOP_ID: u32 = u32::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_are_split_off() {
        let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let (rest, spares) = split_spares(&w("raidz2 a b c d spare s1 s2 log l"));
        assert_eq!(rest, w("raidz2 a b c d log l"));
        assert_eq!(spares, vec![PathBuf::from("s1"), PathBuf::from("s2")]);
        let (rest, spares) = split_spares(&w("a b"));
        assert_eq!(rest, w("a b"));
        assert!(spares.is_empty());
        let (rest, cache) = split_section(&w("a b cache c0 c1 spare s"), "cache");
        assert_eq!(rest, w("a b spare s"));
        assert_eq!(cache, vec![PathBuf::from("c0"), PathBuf::from("c1")]);
    }
}
