//! Quiescing a server for a consistent snapshot: block commits, read the binlog and
//! GTID position, release.
//!
//! Invariants:
//! - The lock lives in the session of the `holder` connection only: if this process
//!   dies, the server ends the session and the lock with it.
//! - Acquiring waits at most `lock_wait_timeout` seconds (a long query or DDL in
//!   flight makes FLUSH TABLES WITH READ LOCK / BACKUP STAGE wait, and while they
//!   wait they block other writers too).
//! - [`Lock::release`] always ends the lock: if the release statement fails or does
//!   not answer within [`RELEASE_TIMEOUT`], the `control` connection kills the
//!   holder's session, which drops every lock it held.

use crate::server::{col, Flavor, Server};
use std::time::{Duration, Instant};

/// How long the release statement may take before the holder's session is killed.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// How writes are blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// MariaDB 10.4+: BACKUP STAGE START .. BLOCK_COMMIT; DML runs until
    /// BLOCK_COMMIT, which only holds commits (and binlog writes).
    BackupStage,
    /// FLUSH TABLES WITH READ LOCK: every write waits.
    ReadLock,
}

impl Method {
    pub fn for_server(flavor: Flavor, version: (u16, u16, u16)) -> Method {
        if flavor == Flavor::MariaDb && (version.0, version.1) >= (10, 4) {
            Method::BackupStage
        } else {
            Method::ReadLock
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::BackupStage => "BACKUP STAGE BLOCK_COMMIT",
            Method::ReadLock => "FLUSH TABLES WITH READ LOCK",
        }
    }

    fn release_sql(self) -> &'static str {
        match self {
            Method::BackupStage => "BACKUP STAGE END",
            Method::ReadLock => "UNLOCK TABLES",
        }
    }
}

/// Replication coordinates of a quiesced server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Current binary log file and offset (None: binary logging is off).
    pub binlog_file: Option<String>,
    pub binlog_pos: Option<u64>,
    /// GTID set of everything in the data: MariaDB gtid_binlog_pos (gtid_current_pos
    /// when binary logging is off), MySQL gtid_executed. Empty if none.
    pub gtid: String,
    /// MariaDB only: gtid_current_pos (includes transactions applied as a replica
    /// without log_slave_updates).
    pub gtid_current: Option<String>,
}

/// A held lock.
pub struct Lock {
    holder: Server,
    control: Server,
    method: Method,
    /// When writes started to be blocked (just before the blocking statement).
    blocked_since: Instant,
    /// How long the blocking statement took (waiting for commits in flight).
    pub acquire_time: Duration,
}

/// Block writes on `holder`'s server. On failure the lock is released again.
pub async fn acquire(
    mut holder: Server,
    control: Server,
    method: Method,
    lock_wait_timeout: u64,
) -> Result<Lock, String> {
    holder
        .exec(&format!(
            "SET SESSION lock_wait_timeout = {}",
            lock_wait_timeout.max(1)
        ))
        .await?;
    let steps: &[&str] = match method {
        Method::BackupStage => &[
            "BACKUP STAGE START",
            "BACKUP STAGE FLUSH",
            "BACKUP STAGE BLOCK_DDL",
            "BACKUP STAGE BLOCK_COMMIT",
        ],
        Method::ReadLock => &["FLUSH TABLES WITH READ LOCK"],
    };
    let mut blocked_since = Instant::now();
    for (i, sql) in steps.iter().enumerate() {
        if i + 1 == steps.len() {
            blocked_since = Instant::now();
        }
        if let Err(e) = holder.exec(sql).await {
            let lock = Lock {
                holder,
                control,
                method,
                blocked_since,
                acquire_time: blocked_since.elapsed(),
            };
            let _ = lock.release().await;
            return Err(format!("cannot quiesce ({sql}): {e}"));
        }
    }
    Ok(Lock {
        holder,
        control,
        method,
        blocked_since,
        acquire_time: blocked_since.elapsed(),
    })
}

impl Lock {
    pub fn method(&self) -> Method {
        self.method
    }

    /// The binlog file/position and GTID set, read while commits are blocked.
    pub async fn position(&mut self) -> Result<Position, String> {
        let flavor = self.holder.flavor;
        let s = &mut self.holder;
        let mut p = Position::default();
        let status = match s.rows("SHOW MASTER STATUS").await {
            Ok(r) => r,
            // MySQL 8.4 renamed it.
            Err(_) => s.rows("SHOW BINARY LOG STATUS").await?,
        };
        if let Some(row) = status.first() {
            p.binlog_file = col(row, "File");
            p.binlog_pos = col(row, "Position").and_then(|v| v.parse().ok());
        }
        match flavor {
            Flavor::MariaDb => {
                let binlog = s.var("gtid_binlog_pos").await?.unwrap_or_default();
                let current = s.var("gtid_current_pos").await?.unwrap_or_default();
                p.gtid = if p.binlog_file.is_some() {
                    binlog
                } else {
                    current.clone()
                };
                p.gtid_current = Some(current);
            }
            Flavor::MySql => {
                p.gtid = s.var("gtid_executed").await?.unwrap_or_default();
            }
        }
        p.gtid = p.gtid.split_whitespace().collect::<Vec<_>>().join("");
        Ok(p)
    }

    /// End the lock; returns how long writes were blocked. Never leaves the lock
    /// held: a failed or hung release kills the holder's session.
    pub async fn release(self) -> Result<Duration, String> {
        let Lock {
            mut holder,
            mut control,
            method,
            blocked_since,
            ..
        } = self;
        let id = holder.connection_id();
        let outcome =
            tokio::time::timeout(RELEASE_TIMEOUT, holder.exec(method.release_sql())).await;
        let blocked = blocked_since.elapsed();
        match outcome {
            Ok(Ok(())) => {
                holder.close().await;
                control.close().await;
                Ok(blocked)
            }
            other => {
                let why = match other {
                    Ok(Err(e)) => e,
                    _ => format!("no answer within {} s", RELEASE_TIMEOUT.as_secs()),
                };
                drop(holder);
                let killed = control.exec(&format!("KILL CONNECTION {id}")).await;
                let blocked = blocked_since.elapsed();
                control.close().await;
                match killed {
                    Ok(()) => Ok(blocked),
                    Err(e) => Err(format!(
                        "{} failed ({why}) and killing the session failed too: {e}",
                        method.release_sql()
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_follows_server() {
        assert_eq!(
            Method::for_server(Flavor::MariaDb, (10, 11, 6)),
            Method::BackupStage
        );
        assert_eq!(
            Method::for_server(Flavor::MariaDb, (10, 3, 9)),
            Method::ReadLock
        );
        assert_eq!(
            Method::for_server(Flavor::MySql, (8, 0, 36)),
            Method::ReadLock
        );
    }
}
