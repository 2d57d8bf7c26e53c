//! Replication of a MySQL snapshot set (a relationship created with
//! `--mysql-socket`): the source side's snapshot and record, the target
//! side's copy of the record.
//!
//! A cycle of such a relationship takes a `mysql snapshot` of every member
//! at once (the server quiesced, one atomic snapshot, the binlog/GTID
//! position recorded as `cachalot.mysql:*` properties: crates/mysql), sends
//! each member to its target, then copies the record onto the target's
//! snapshots with the member names translated to the target's, so that
//! `mysql clone` and `mysql failover` there find the whole set.
//!
//! Invariants:
//! - The snapshot goes through the daemon's API socket like the CLI's `mysql
//!   snapshot` (same checks, same lock release on every path), on a thread of
//!   its own (the MySQL client runs its own async runtime).
//! - The record is sent after every member arrived: on the target, a snapshot
//!   with `cachalot.mysql:members` belongs to a complete set.
//! - A peer may set only `cachalot.mysql:` properties, only on snapshots.

use super::replication_cycle::cycle_snapshot_name;
use super::{se, Daemon};
use cachalot_datasets::Store;
use cachalot_mysql::daemon::PROP_PREFIX;
use cachalot_mysql::server::Credentials;
use cachalot_mysql::snapshot::SnapshotRequest;
use cachalot_replication::link::Link;
use cachalot_replication::relationship::{MysqlSet, Relationship};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// Seconds the quiesce statement may wait for running statements, and the
/// longest time writes stay blocked: `mysql snapshot`'s defaults.
const LOCK_WAIT_SECS: u64 = 10;
const MAX_BLOCK: Duration = Duration::from_secs(10);

/// The record property naming the set's members.
const MEMBERS: &str = "members";

impl Daemon {
    /// Take the cycle's snapshot of a MySQL set with `mysql snapshot`;
    /// returns its name (the part after '@').
    pub(super) fn mysql_cycle_snapshot(
        &self,
        rel: &Relationship,
        m: &MysqlSet,
        stores: &[Arc<Store>],
    ) -> Result<String, String> {
        let api = self.replication.api_socket()?;
        let name = cycle_snapshot_name(stores, &rel.name, &m.members)?;
        let req = SnapshotRequest {
            mysql_socket: m.socket.clone().into(),
            creds: Credentials::new(&m.user),
            datasets: m.members.clone(),
            snap: name.clone(),
            lock_wait_timeout: LOCK_WAIT_SECS,
            max_block: MAX_BLOCK,
            // As `mysql snapshot` does by default: a failover's crash
            // recovery then scans a short last binlog file.
            rotate_binlog: true,
        };
        let worker = std::thread::Builder::new()
            .name("cachalot-repl-mysql".into())
            .spawn(move || {
                let mut d = cachalot_mysql::daemon::Daemon::connect(&api)?;
                cachalot_mysql::snapshot::run(&mut d, &req)
            })
            .map_err(|e| format!("cannot start the MySQL snapshot thread: {e}"))?;
        let report = worker
            .join()
            .map_err(|_| "the MySQL snapshot thread panicked".to_string())?
            .map_err(|e| format!("mysql snapshot of {}: {e}", m.members.join(",")))?;
        super::log(format!(
            "replication {}: mysql snapshot {} (gtid {}, writes blocked {} ms)",
            rel.name,
            report.snapshots.join(" "),
            report.position.gtid,
            report.blocked.as_millis()
        ));
        Ok(name)
    }

    /// Target side, `mysql_record {fs, snap, props}`: set the record of a
    /// MySQL set on `fs@snap`.
    pub(super) fn serve_mysql_record(&self, fs: &str, req: &Value) -> Result<Value, String> {
        let snap = req["snap"].as_str().ok_or("request without 'snap'")?;
        let full = format!("{fs}@{snap}");
        super::snapshots::split_snapshot_name(&full)?;
        let props = req["props"].as_object().ok_or("request without 'props'")?;
        let store = self.ds_store(fs)?;
        store.snapshot_guid(&full).map_err(se)?;
        for k in props.keys() {
            if !k.starts_with(PROP_PREFIX) {
                return Err(format!(
                    "property '{k:.60}' is not part of a MySQL record: refusing to set it on '{full}'"
                ));
            }
        }
        for (k, v) in props {
            let v = v
                .as_str()
                .ok_or_else(|| format!("property '{k}' is not text"))?;
            store.set_prop(&full, k, v).map_err(se)?;
        }
        Ok(Value::Null)
    }
}

/// Copy the record of the set's snapshot `snap` (read on the first leg's
/// source) onto every leg's target snapshot, members renamed to the targets.
pub(super) fn send_mysql_record(
    link: &mut Link,
    store: &Store,
    legs: &[Relationship],
    snap: &str,
) -> Result<(), String> {
    let first = format!("{}@{snap}", legs[0].source);
    let mut props = Map::new();
    for row in store.get_props(&first, None).map_err(se)? {
        if row.property.starts_with(PROP_PREFIX) && row.raw != "-" {
            props.insert(row.property, json!(row.raw));
        }
    }
    if !props.contains_key(&format!("{PROP_PREFIX}{MEMBERS}")) {
        return Err(format!(
            "'{first}' carries no MySQL record: it was not taken by mysql snapshot"
        ));
    }
    let targets: Vec<&str> = legs.iter().map(|l| l.target_fs.as_str()).collect();
    props.insert(format!("{PROP_PREFIX}{MEMBERS}"), json!(targets.join(",")));
    for leg in legs {
        link.request(&json!({
            "op": "mysql_record", "fs": leg.target_fs, "snap": snap, "props": props,
            "name": leg.name,
        }))?;
    }
    Ok(())
}
