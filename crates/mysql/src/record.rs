//! What `mysql snapshot` records in the user properties of every snapshot of a set,
//! so that clone and restore can find the whole set and rebuild a server from it.
//!
//! Invariants:
//! - Every snapshot of a set carries the same properties, so any member names the
//!   set (`cachalot.mysql:members`, data dataset first).
//! - Property names are `cachalot.mysql:<key>`; values are single-line text.
//! - A snapshot without `cachalot.mysql:members` was not taken by `mysql snapshot`.

use crate::daemon::PROP_PREFIX;
use crate::paths::ServerPaths;
use crate::quiesce::Position;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Server settings a clone must keep as they were (files depend on them), or that
/// are worth keeping (sizes); copied into the clone's config.
pub const KEPT_SETTINGS: &[&str] = &[
    "innodb_page_size",
    "innodb_data_file_path",
    "innodb_log_file_size",
    "innodb_undo_tablespaces",
    "innodb_checksum_algorithm",
    "lower_case_table_names",
    "innodb_buffer_pool_size",
    "innodb_flush_log_at_trx_commit",
    "innodb_flush_method",
    "innodb_doublewrite",
    "sync_binlog",
    "binlog_format",
    "gtid_domain_id",
    "gtid_mode",
    "enforce_gtid_consistency",
];

/// Everything recorded about one snapshot set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// Datasets of the set; the first holds the datadir.
    pub members: Vec<String>,
    /// Where each member was mounted when the snapshot was taken.
    pub mounts: Vec<PathBuf>,
    /// "mariadb" or "mysql", and the full version string.
    pub flavor: String,
    pub version: String,
    pub server_id: u64,
    /// How writes were blocked and for how long.
    pub method: String,
    pub blocked_ms: u64,
    pub position: Position,
    pub paths: ServerPaths,
    /// KEPT_SETTINGS the server reported (name, value).
    pub settings: Vec<(String, String)>,
}

fn join_paths(p: &[PathBuf]) -> String {
    p.iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(",")
}

impl SnapshotRecord {
    /// (property, value) pairs; unset optional values are left out.
    pub fn to_props(&self) -> Vec<(String, String)> {
        let mut v: Vec<(&str, String)> = vec![
            ("members", self.members.join(",")),
            ("mounts", join_paths(&self.mounts)),
            ("flavor", self.flavor.clone()),
            ("version", self.version.clone()),
            ("server_id", self.server_id.to_string()),
            ("method", self.method.clone()),
            ("blocked_ms", self.blocked_ms.to_string()),
            ("gtid", self.position.gtid.clone()),
            ("datadir", self.paths.datadir.to_string_lossy().into_owned()),
            (
                "redo_dir",
                self.paths.redo_dir.to_string_lossy().into_owned(),
            ),
            (
                "undo_dir",
                self.paths.undo_dir.to_string_lossy().into_owned(),
            ),
            (
                "data_home_dir",
                self.paths.data_home_dir.to_string_lossy().into_owned(),
            ),
            (
                "settings",
                self.settings
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(";"),
            ),
        ];
        if let Some(f) = &self.position.binlog_file {
            v.push(("binlog_file", f.clone()));
        }
        if let Some(p) = self.position.binlog_pos {
            v.push(("binlog_pos", p.to_string()));
        }
        if let Some(g) = &self.position.gtid_current {
            v.push(("gtid_current", g.clone()));
        }
        if let Some(b) = &self.paths.binlog_basename {
            v.push(("binlog_basename", b.to_string_lossy().into_owned()));
        }
        v.into_iter()
            // An empty value would read back as "unset"; "-" is what get prints.
            .filter(|(_, val)| !val.is_empty())
            .map(|(k, val)| (format!("{PROP_PREFIX}{k}"), val))
            .collect()
    }

    /// Read back from a snapshot's properties (raw values, "-" = unset).
    pub fn from_props(snap: &str, props: &BTreeMap<String, String>) -> Result<Self, String> {
        let get = |k: &str| -> Option<String> {
            props
                .get(&format!("{PROP_PREFIX}{k}"))
                .filter(|v| !v.is_empty() && v.as_str() != "-")
                .cloned()
        };
        let members = get("members").ok_or_else(|| {
            format!(
                "'{snap}' was not taken by 'cachalot mysql snapshot' (it has no {PROP_PREFIX}members property)"
            )
        })?;
        let split = |s: Option<String>| -> Vec<String> {
            s.map(|s| s.split(',').map(str::to_string).collect())
                .unwrap_or_default()
        };
        let members = split(Some(members));
        let mounts: Vec<PathBuf> = split(get("mounts"))
            .into_iter()
            .map(PathBuf::from)
            .collect();
        if mounts.len() != members.len() {
            return Err(format!(
                "'{snap}': {PROP_PREFIX}mounts does not list one mount per member"
            ));
        }
        let path = |k: &str| get(k).map(PathBuf::from).unwrap_or_default();
        Ok(SnapshotRecord {
            members,
            mounts,
            flavor: get("flavor").unwrap_or_default(),
            version: get("version").unwrap_or_default(),
            server_id: get("server_id").and_then(|v| v.parse().ok()).unwrap_or(0),
            method: get("method").unwrap_or_default(),
            blocked_ms: get("blocked_ms").and_then(|v| v.parse().ok()).unwrap_or(0),
            position: Position {
                binlog_file: get("binlog_file"),
                binlog_pos: get("binlog_pos").and_then(|v| v.parse().ok()),
                gtid: get("gtid").unwrap_or_default(),
                gtid_current: get("gtid_current"),
            },
            paths: ServerPaths {
                datadir: path("datadir"),
                redo_dir: path("redo_dir"),
                binlog_basename: get("binlog_basename").map(PathBuf::from),
                undo_dir: path("undo_dir"),
                data_home_dir: path("data_home_dir"),
            },
            settings: get("settings")
                .unwrap_or_default()
                .split(';')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_through_properties() {
        let r = SnapshotRecord {
            members: vec!["tank/db/data".into(), "tank/db/log".into()],
            mounts: vec!["/m/data".into(), "/m/log".into()],
            flavor: "mariadb".into(),
            version: "10.11.19-MariaDB".into(),
            server_id: 1,
            method: "BACKUP STAGE BLOCK_COMMIT".into(),
            blocked_ms: 12,
            position: Position {
                binlog_file: Some("binlog.000002".into()),
                binlog_pos: Some(1234),
                gtid: "0-1-57".into(),
                gtid_current: Some("0-1-57".into()),
            },
            paths: ServerPaths {
                datadir: "/m/data".into(),
                redo_dir: "/m/log".into(),
                binlog_basename: Some("/m/log/binlog".into()),
                undo_dir: "/m/data".into(),
                data_home_dir: "/m/data".into(),
            },
            settings: vec![
                ("innodb_page_size".into(), "16384".into()),
                (
                    "innodb_data_file_path".into(),
                    "ibdata1:12M:autoextend".into(),
                ),
            ],
        };
        let props: BTreeMap<String, String> = r.to_props().into_iter().collect();
        assert_eq!(props["cachalot.mysql:members"], "tank/db/data,tank/db/log");
        assert_eq!(SnapshotRecord::from_props("x@s", &props).unwrap(), r);
    }

    #[test]
    fn foreign_snapshot_is_refused() {
        let e = SnapshotRecord::from_props("tank/x@s", &BTreeMap::new()).unwrap_err();
        assert!(e.contains("not taken by"), "{e}");
    }
}
