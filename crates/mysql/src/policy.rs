//! Snapshot retention for scheduled snapshots (`mysql snapshot --keep N PREFIX`,
//! run from cron or a systemd timer): names carry a UTC timestamp, and only the N
//! newest sets with the prefix are kept.
//!
//! Invariants:
//! - Only snapshot sets named `PREFIX-<timestamp>` on the set's data dataset are
//!   considered; other snapshots are never touched.
//! - A set is destroyed member by member; a member that cannot go (it has clones)
//!   is reported and the rest of the pruning goes on.

use crate::daemon::Daemon;
use cachalot_analytics::query::compact_utc;
use std::time::{SystemTime, UNIX_EPOCH};

/// `PREFIX-YYYYMMDD-HHMMSS` for the current UTC time.
pub fn timestamped(prefix: &str) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{prefix}-{}", compact_utc(secs))
}

/// What pruning did.
#[derive(Clone, Debug, Default)]
pub struct Pruned {
    pub destroyed: Vec<String>,
    /// Snapshots that could not be destroyed, with the reason.
    pub kept: Vec<(String, String)>,
}

/// Destroy all but the `keep` newest `PREFIX-*` snapshot sets of `members`.
pub fn prune(
    daemon: &mut Daemon,
    members: &[String],
    prefix: &str,
    keep: usize,
) -> Result<Pruned, String> {
    let Some(data) = members.first() else {
        return Ok(Pruned::default());
    };
    let want = format!("{prefix}-");
    let sets: Vec<String> = daemon
        .snapshots_of(data)?
        .into_iter()
        .filter_map(|n| n.split_once('@').map(|(_, s)| s.to_string()))
        .filter(|s| s.starts_with(&want))
        .collect();
    let mut out = Pruned::default();
    let excess = sets.len().saturating_sub(keep);
    for snap in &sets[..excess] {
        for m in members {
            let name = format!("{m}@{snap}");
            if !daemon.exists(&name)? {
                continue;
            }
            match daemon.destroy(&name) {
                Ok(()) => out.destroyed.push(name),
                Err(e) => out.kept.push((name, e)),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc_civil_time() {
        assert_eq!(compact_utc(0), "19700101-000000");
        // 2026-11-22 04:27:06 UTC
        assert_eq!(compact_utc(1_795_321_626), "20261122-042706");
        // Leap day.
        assert_eq!(compact_utc(951_782_400), "20000229-000000");
    }
}
