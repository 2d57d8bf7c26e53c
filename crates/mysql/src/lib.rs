//! MySQL/MariaDB integration: consistent snapshots of a server's datasets
//! (quiesce, one atomic snapshot, binlog/GTID position recorded in snapshot
//! properties), clones started as new servers or replicas, restore by rollback,
//! and my.cnf advice from the datasets' properties.
//!
//! Invariants:
//! - The daemon is reached only through its API ([`daemon::Daemon`]).
//! - A write lock taken on a server is released on every path out of this crate,
//!   and dies with the connection if the process dies ([`quiesce`]).
//! - Nothing here stops a server it did not start; restore refuses while anything
//!   uses the datasets ([`usage`]).
//! - Errors are one-line strings that name the thing that failed.

pub mod advice;
pub mod api;
pub mod clone;
pub mod config;
pub mod daemon;
pub mod failover;
pub mod paths;
pub mod policy;
pub mod process;
pub mod quiesce;
pub mod record;
pub mod replica;
pub mod restore;
pub mod server;
pub mod snapshot;
pub mod usage;

/// A small runtime for the async MySQL client (the CLI is otherwise synchronous).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}
