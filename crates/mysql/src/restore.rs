//! `cachalot mysql restore FS@SNAP`: roll every dataset of a snapshot set back to
//! the snapshot, if nothing uses them.
//!
//! Invariants:
//! - Stops nothing: if any process has a file, cwd or root under a member's mount
//!   point, or a live pid file sits in the datadir, nothing is changed and the
//!   error names the process.
//! - Every check (set complete, snapshots newest unless -r, no users) is done for
//!   all members before the first one is unmounted.
//! - Members that were mounted are mounted again at the same place, also when a
//!   rollback fails.

use crate::daemon::{Daemon, PROP_PREFIX};
use crate::record::SnapshotRecord;
use crate::usage;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct RestoreReport {
    pub rolled_back: Vec<String>,
    pub remounted: Vec<(String, PathBuf)>,
}

pub fn run(daemon: &mut Daemon, snapshot: &str, recursive: bool) -> Result<RestoreReport, String> {
    let (_, snap) = snapshot
        .split_once('@')
        .ok_or_else(|| format!("'{snapshot}' is not a snapshot name (FS@SNAP)"))?;
    let props = daemon.get_all(snapshot)?;
    let rec = SnapshotRecord::from_props(snapshot, &props)?;
    let names: Vec<String> = rec.members.iter().map(|m| format!("{m}@{snap}")).collect();
    for n in &names {
        if !daemon.exists(n)? {
            return Err(format!("snapshot '{n}' of the set is missing"));
        }
    }
    if !recursive {
        for (m, n) in rec.members.iter().zip(&names) {
            let snaps = daemon.snapshots_of(m)?;
            if let Some(newest) = snaps.last().filter(|s| *s != n) {
                return Err(format!(
                    "'{n}' is not the newest snapshot of '{m}' ('{newest}' is newer): use -r to destroy the newer ones"
                ));
            }
        }
    }
    let mounts = daemon.mounts()?;
    let mounted: Vec<(String, PathBuf)> = rec
        .members
        .iter()
        .filter_map(|m| mounts.get(m).map(|p| (m.clone(), p.clone())))
        .collect();
    let roots: Vec<PathBuf> = mounted.iter().map(|(_, p)| p.clone()).collect();
    let mut users = usage::users_of(&roots);
    for r in &roots {
        users.extend(usage::live_pid_files(r));
    }
    if let Some(u) = users.first() {
        let (ds, _) = mounted
            .iter()
            .find(|(_, p)| u.path.starts_with(p))
            .cloned()
            .unwrap_or_default();
        let started = daemon
            .get(&rec.members[0], &[&format!("{PROP_PREFIX}pid")])
            .ok()
            .and_then(|p| p.into_values().next())
            .filter(|p| *p == u.pid.to_string())
            .map(|_| " (started by 'cachalot mysql clone')")
            .unwrap_or("");
        return Err(format!(
            "refusing to restore: '{ds}' is in use by pid {} ({}){started} via {}; stop the server first",
            u.pid,
            u.command,
            u.path.display()
        ));
    }
    for (ds, _) in &mounted {
        daemon.unmount(ds)?;
    }
    let mut result = Ok(());
    let mut rolled = Vec::new();
    for n in &names {
        if let Err(e) = daemon.rollback(n, recursive) {
            result = Err(format!("rollback of '{n}' failed: {e}"));
            break;
        }
        rolled.push(n.clone());
    }
    let mut remounted = Vec::new();
    for (ds, p) in &mounted {
        match daemon.mount(ds, p) {
            Ok(()) => remounted.push((ds.clone(), p.clone())),
            Err(e) if result.is_ok() => result = Err(format!("re-mount of '{ds}' failed: {e}")),
            Err(_) => {}
        }
    }
    result.map(|()| RestoreReport {
        rolled_back: rolled,
        remounted,
    })
}
