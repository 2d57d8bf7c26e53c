//! A replication relationship as stored by the source appliance: what goes
//! where, how often, what is kept, and what happened last.
//!
//! Invariants: names, targets, schedules and retention rules are validated
//! here before anything is stored; a relationship's snapshots are named
//! `repl-NAME-YYYYMMDD-HHMMSS` (UTC), the same on both sides, so both sides
//! apply the same retention from the names alone.

use serde::{Deserialize, Serialize};

/// The retention grid used when `--keep` is not given.
pub const DEFAULT_KEEP: &str = "1h:every 5m, 1d:every 1h, 30d:every 1d";

/// Schedules below this are refused (a cycle needs at least that long).
pub const MIN_SCHEDULE: u64 = 1;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Relationship {
    pub name: String,
    /// Source filesystem on this appliance.
    pub source: String,
    /// The target appliance's replication address (HOST:PORT).
    pub target_addr: String,
    /// Filesystem on the target appliance.
    pub target_fs: String,
    /// Seconds between cycles.
    pub schedule: u64,
    /// Retention grid (see `retention`).
    pub keep: String,
    /// Bytes per second, if limited.
    #[serde(default)]
    pub bwlimit: Option<u64>,
    #[serde(default)]
    pub paused: bool,
    /// Broken off (`replication break`): no more cycles until `resync`.
    #[serde(default)]
    pub broken: bool,
    #[serde(default)]
    pub status: Status,
    /// Set when the source is a MySQL snapshot set: each cycle takes a
    /// `mysql snapshot` of all its members at once and replicates each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mysql: Option<MysqlSet>,
    /// Kept on the target, which starts each cycle: `source` is the FS on the
    /// source appliance at `target_addr` (then the peer's address, whichever
    /// side it is), `target_fs` is the FS here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pull: bool,
    /// The whole tree under `source` (`create -r`): each cycle takes one
    /// snapshot of every member at once and replicates each member, parent
    /// first, to the same place under `target_fs` (see `tree_target`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recursive: bool,
}

/// The MySQL side of a relationship whose source is a MySQL snapshot set.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MysqlSet {
    /// Every dataset of the set, the one with the datadir first (it is the
    /// relationship's `source`).
    pub members: Vec<String>,
    /// The server's unix socket, to quiesce it for each cycle's snapshot.
    pub socket: String,
    /// The MySQL user that quiesces it (password: the daemon's $MYSQL_PWD).
    pub user: String,
}

/// What the cycles did (kept with the relationship, so it survives restarts).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Unix seconds of the last cycle's start.
    pub last_attempt: Option<u64>,
    /// Unix seconds of the last cycle that completed.
    pub last_success: Option<u64>,
    /// The newest snapshot both sides have (the snapshot part of the name).
    pub last_snapshot: Option<String>,
    /// Creation time of `last_snapshot` (the recovery point).
    pub last_snapshot_time: Option<u64>,
    /// Stream bytes of the last completed cycle, and their rate (bytes/s).
    pub last_bytes: u64,
    pub last_rate: u64,
    /// Stream bytes over every cycle.
    pub total_bytes: u64,
    pub cycles: u64,
    /// Why the last cycle failed, if it did (one line).
    pub last_error: Option<String>,
    /// Something worth knowing from the last cycle (a discarded token).
    pub last_message: Option<String>,
    /// Of a recursive relationship: every member seen so far, in tree order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberStatus>,
}

/// One member of a recursive relationship: where it goes and how far it got.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberStatus {
    pub source: String,
    pub target: String,
    /// The newest snapshot replicated for this member, and its creation time.
    pub last_snapshot: Option<String>,
    pub last_snapshot_time: Option<u64>,
    /// Destroyed on the source: its copy stays on the target (never
    /// destroyed by a cycle) and no more cycles touch it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
}

/// Where member `member` of the tree under `source` goes under `target_fs`
/// (`tank/a/b/c` of `tank/a` to `t/x` gives `t/x/b/c`), or `None` if it is
/// not in that tree.
pub fn tree_target(source: &str, member: &str, target_fs: &str) -> Option<String> {
    if member == source {
        return Some(target_fs.to_string());
    }
    let rest = member.strip_prefix(source)?.strip_prefix('/')?;
    Some(format!("{target_fs}/{rest}"))
}

/// Check a relationship name: 1 to 64 letters, digits, `_ - .`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid relationship name '{name}': use 1 to 64 letters, digits, _ - ."
        ))
    }
}

/// Split `HOST:PORT/FS` (HOST may be `[v6]`) into the address and the filesystem.
pub fn parse_target(s: &str) -> Result<(String, String), String> {
    let bad = || format!("invalid target '{s}': use HOST:PORT/FS (e.g. 10.0.0.2:7480/tank/copy)");
    let after_host = if s.starts_with('[') {
        s.find(']').ok_or_else(bad)? + 1
    } else {
        0
    };
    let slash = s[after_host..].find('/').ok_or_else(bad)? + after_host;
    let (addr, fs) = (&s[..slash], &s[slash + 1..]);
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) || fs.is_empty() {
        return Err(bad());
    }
    Ok((addr.to_string(), fs.to_string()))
}

/// The prefix of a relationship's snapshot names.
pub fn snapshot_prefix(name: &str) -> String {
    format!("repl-{name}-")
}

/// The last component of a dataset name.
fn leaf(ds: &str) -> &str {
    ds.rsplit('/').next().unwrap_or(ds)
}

/// (source, target filesystem) of every member of a MySQL set replicated to
/// `target_fs`: the first member goes to `target_fs`, each other one to the
/// sibling of `target_fs` named like the member (`tank/db/data,tank/db/log`
/// to `tank/dr/data` gives `tank/dr/data`, `tank/dr/log`). Refuses a target
/// without a parent and two members that would land on one target.
pub fn member_targets(
    members: &[String],
    target_fs: &str,
) -> Result<Vec<(String, String)>, String> {
    let Some((first, rest)) = members.split_first() else {
        return Err("a MySQL set needs at least one dataset".into());
    };
    let mut out = vec![(first.clone(), target_fs.to_string())];
    if !rest.is_empty() {
        let Some((parent, _)) = target_fs.rsplit_once('/') else {
            return Err(format!(
                "target '{target_fs}' of a MySQL set must have a parent: the other members go next to it"
            ));
        };
        for m in rest {
            out.push((m.clone(), format!("{parent}/{}", leaf(m))));
        }
    }
    for (i, (s, t)) in out.iter().enumerate() {
        if let Some((s0, _)) = out[..i].iter().find(|(s0, t0)| t0 == t || s0 == s) {
            return Err(format!(
                "members '{s0}' and '{s}' of the MySQL set would both replicate to '{t}'"
            ));
        }
    }
    Ok(out)
}

impl Relationship {
    /// (source, target filesystem) of every dataset the relationship
    /// replicates: one pair, or one per member of a MySQL set.
    pub fn pairs(&self) -> Vec<(String, String)> {
        match &self.mysql {
            Some(m) => member_targets(&m.members, &self.target_fs)
                .unwrap_or_else(|_| vec![(self.source.clone(), self.target_fs.clone())]),
            None => vec![(self.source.clone(), self.target_fs.clone())],
        }
    }

    /// `HOST:PORT/FS`.
    pub fn target(&self) -> String {
        format!("{}/{}", self.target_addr, self.target_fs)
    }

    /// Seconds since the recovery point, if there is one.
    pub fn lag(&self, now: u64) -> Option<u64> {
        self.status
            .last_snapshot_time
            .map(|t| now.saturating_sub(t))
    }

    /// Alert-worthy: the recovery point is older than twice the schedule
    /// (a cycle was missed, or one takes longer than two periods). Paused and
    /// broken relationships are not lagging: somebody stopped them.
    pub fn lagging(&self, now: u64) -> bool {
        !self.paused
            && !self.broken
            && self
                .lag(now)
                .is_some_and(|l| l > self.schedule.saturating_mul(2))
    }

    /// "idle", "running", "paused", "broken" or "error" (`running` is known
    /// to the scheduler only, so the caller passes it).
    pub fn state(&self, running: bool) -> &'static str {
        if self.broken {
            "broken"
        } else if running {
            "running"
        } else if self.paused {
            "paused"
        } else if self.status.last_error.is_some() {
            "error"
        } else {
            "idle"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_bad_ones_are_refused() {
        assert_eq!(
            parse_target("10.0.0.2:7480/tank/copy").unwrap(),
            ("10.0.0.2:7480".into(), "tank/copy".into())
        );
        assert_eq!(
            parse_target("[fd00::2]:7480/tank/c").unwrap(),
            ("[fd00::2]:7480".into(), "tank/c".into())
        );
        for bad in [
            "host/tank",
            "host:0/tank",
            "host:99999/tank",
            ":7480/t",
            "h:7480/",
            "h:7480",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
        assert!(check_name("db-1.a_b").is_ok());
        assert!(check_name("a/b").is_err());
        assert!(check_name("").is_err());
    }

    #[test]
    fn tree_members_go_under_the_target() {
        assert_eq!(tree_target("t/a", "t/a", "u/x").as_deref(), Some("u/x"));
        assert_eq!(
            tree_target("t/a", "t/a/b/c", "u/x").as_deref(),
            Some("u/x/b/c")
        );
        assert_eq!(tree_target("t/a", "t/ab", "u/x"), None);
        assert_eq!(tree_target("t/a", "t", "u/x"), None);
    }

    #[test]
    fn mysql_members_go_next_to_the_target() {
        let m = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            member_targets(&m(&["tank/db/data", "tank/db/log"]), "tank/dr/data").unwrap(),
            vec![
                ("tank/db/data".into(), "tank/dr/data".into()),
                ("tank/db/log".into(), "tank/dr/log".into())
            ]
        );
        assert_eq!(
            member_targets(&m(&["tank/db"]), "tank").unwrap(),
            vec![("tank/db".into(), "tank".into())]
        );
        assert!(member_targets(&m(&["tank/db/data", "tank/db/log"]), "tank").is_err());
        assert!(member_targets(&m(&["a/x/data", "b/y/data"]), "t/dr/data").is_err());
        assert!(member_targets(&m(&["a/data", "a/data"]), "t/dr/x").is_err());
        assert!(member_targets(&m(&[]), "t/dr").is_err());
    }

    #[test]
    fn lagging_past_twice_the_schedule_unless_stopped() {
        let mut r = Relationship {
            name: "r".into(),
            source: "tank/a".into(),
            target_addr: "h:1".into(),
            target_fs: "t/a".into(),
            schedule: 60,
            keep: DEFAULT_KEEP.into(),
            bwlimit: None,
            paused: false,
            broken: false,
            status: Status::default(),
            mysql: None,
            pull: false,
            recursive: false,
        };
        assert!(
            !r.lagging(1_000),
            "no recovery point yet: nothing to compare"
        );
        r.status.last_snapshot_time = Some(1_000);
        assert!(!r.lagging(1_120), "exactly two schedules");
        assert!(r.lagging(1_121));
        r.paused = true;
        assert!(!r.lagging(5_000));
        r.paused = false;
        r.broken = true;
        assert!(!r.lagging(5_000));
    }
}
