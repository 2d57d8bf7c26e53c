//! The typed requests of the MySQL/MariaDB operations: the one definition used by
//! `cachalot mysql ...` (built from its arguments) and by the REST routes under
//! `/api/v1/mysql` (decoded from the body). Both hand it to the cachalot-mysql
//! crate, which runs it as a client of the daemon: in the CLI's process, or for the
//! REST routes inside the daemon. They are not daemon ops, so they have no op name.
//!
//! Invariants:
//! - Decoding is strict (`deny_unknown_fields`, typed fields), as for [`crate::requests`].
//! - No secret travels in them: the MySQL password is the running process's
//!   `$MYSQL_PWD` (the CLI's, or the daemon's), never a request field.
//! - Paths are given as strings; the mysql crate refuses relative ones with a
//!   message naming the field (the CLI makes its arguments absolute first).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

fn is_false(b: &bool) -> bool {
    !*b
}

/// Take a consistent snapshot set of a server's datasets (`cachalot mysql snapshot`):
/// quiesce, one atomic snapshot, the binlog/GTID position recorded on every member.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MysqlSnapshot {
    /// The MySQL server's unix socket (absolute path).
    pub socket: String,
    /// Datasets, the one with the datadir first.
    pub datasets: Vec<String>,
    /// Snapshot name (the part after '@'); with `keep`, its prefix.
    pub snapshot: String,
    /// MySQL user (default root; the password is the process's `$MYSQL_PWD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Seconds to wait for running statements before giving up on the lock (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_wait_timeout: Option<u64>,
    /// Longest time writes may stay blocked waiting for the snapshot, ms (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_block_ms: Option<u64>,
    /// Do not rotate the binary log before the snapshot.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_binlog_rotate: bool,
    /// Scheduled use: the set is named SNAPSHOT-YYYYMMDD-HHMMSS and only the `keep`
    /// newest such sets are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<usize>,
}

/// Clone a snapshot set, mount it, write a config; with `start` or `replica_of`
/// start a server on it (`cachalot mysql clone`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MysqlClone {
    /// FS@SNAP of any member of a set taken by a MySQL snapshot.
    pub snapshot: String,
    /// The new dataset (with several members: their new parent).
    pub target: String,
    /// Start a server on the clone.
    #[serde(default, skip_serializing_if = "is_false")]
    pub start: bool,
    /// Make the new server a GTID replica of the server at this socket (implies `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_of: Option<String>,
    /// TCP port of the new server (127.0.0.1 only; default: no TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Unix socket of the new server (default: RUNDIR/mysqld.sock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// Mount the clone here (several members: DIR/<name> each); default: mountpoint property.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mountpoint: Option<String>,
    /// Directory for the new server's my.cnf, pid file and error log (default: DATAMOUNT.run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
    /// server_id of the new server (default: derived from `target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_id: Option<u64>,
    /// Seconds to wait for the server to answer and for replication to run (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timeout: Option<u64>,
    /// MySQL user (default root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// Roll every dataset of a snapshot set back (`cachalot mysql restore`); refused
/// while anything uses them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MysqlRestore {
    /// FS@SNAP of any member of the set.
    pub snapshot: String,
    /// Destroy newer snapshots of the set's datasets first.
    #[serde(default, skip_serializing_if = "is_false")]
    pub recursive: bool,
}

/// my.cnf and dataset advice for a server on cachalot datasets (`cachalot mysql advise`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MysqlAdvise {
    /// The MySQL server's unix socket (absolute path).
    pub socket: String,
    /// Dataset with the datadir (default: found from the mounts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<String>,
    /// The daemon's ARC size limit in bytes (default: assumed, or the daemon's own
    /// when the daemon runs the request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arc_size: Option<u64>,
    /// MySQL user (default root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// The snapshot sets taken by a MySQL snapshot (`cachalot mysql list`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MysqlList {
    /// Only the sets of this pool (default: every pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_decoding() {
        let ok: MysqlClone = serde_json::from_value(
            json!({"snapshot": "t/d@s", "target": "t/r", "replica_of": "/run/m.sock"}),
        )
        .unwrap();
        assert_eq!(ok.replica_of.as_deref(), Some("/run/m.sock"));
        for bad in [
            json!({"snapshot": "t/d@s"}),
            json!({"snapshot": "t/d@s", "target": "t/r", "bogus": 1}),
            json!({"snapshot": "t/d@s", "target": "t/r", "port": 70000}),
            json!({"snapshot": "t/d@s", "target": "t/r", "start": "yes"}),
        ] {
            assert!(
                serde_json::from_value::<MysqlClone>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        assert!(serde_json::from_value::<MysqlSnapshot>(
            json!({"socket": "/s", "datasets": "t/d", "snapshot": "s1"})
        )
        .is_err());
        assert_eq!(
            serde_json::to_value(MysqlRestore {
                snapshot: "t/d@s".into(),
                recursive: false
            })
            .unwrap(),
            json!({"snapshot": "t/d@s"})
        );
    }
}
