//! Making a started clone a GTID replica of the server it was cloned from.
//!
//! Invariants:
//! - The replica starts from the GTID position recorded in the snapshot (MariaDB:
//!   gtid_slave_pos = the recorded set, MASTER_USE_GTID=slave_pos; MySQL: the
//!   clone's own gtid_executed, which the snapshot carries, with auto-position).
//! - Each replica gets its own replication account on the source (random password,
//!   REPLICATION SLAVE only, host 127.0.0.1), so replicas never share a secret.
//! - "Running" means both the IO and the SQL thread report Yes; an error either
//!   thread reports ends the wait with that error.

use crate::server::{col, quote, Flavor, Server};
use std::time::{Duration, Instant};

/// Where a replica reaches the source over TCP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceAddress {
    pub host: String,
    pub port: u16,
}

/// The source's TCP address; an error if it does not listen on TCP.
pub async fn source_address(source: &mut Server) -> Result<SourceAddress, String> {
    let skip = source.var("skip_networking").await?.unwrap_or_default();
    if skip == "ON" || skip == "1" {
        return Err(format!(
            "the source at {} runs with skip-networking: a replica cannot connect to it (give it port= and bind-address=127.0.0.1)",
            source.socket().display()
        ));
    }
    let port: u16 = source
        .var("port")
        .await?
        .and_then(|p| p.parse().ok())
        .filter(|p| *p != 0)
        .ok_or("the source reports no TCP port")?;
    let bind = source.var("bind_address").await?.unwrap_or_default();
    let host = match bind.as_str() {
        "" | "*" | "0.0.0.0" | "::" | "127.0.0.1" | "localhost" => "127.0.0.1".to_string(),
        other => other.to_string(),
    };
    Ok(SourceAddress { host, port })
}

/// 16 random bytes as hex, from the kernel.
pub fn random_secret() -> Result<String, String> {
    let mut buf = [0u8; 16];
    // SAFETY: getrandom writes at most buf.len() bytes into our buffer.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        return Err("cannot read random bytes for the replication password".into());
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Create (or reset) the replication account `user` on the source.
pub async fn create_account(source: &mut Server, user: &str, password: &str) -> Result<(), String> {
    let who = format!("{}@'127.0.0.1'", quote(user));
    source
        .exec(&format!(
            "CREATE USER IF NOT EXISTS {who} IDENTIFIED BY {}",
            quote(password)
        ))
        .await?;
    source
        .exec(&format!(
            "ALTER USER {who} IDENTIFIED BY {}",
            quote(password)
        ))
        .await?;
    source
        .exec(&format!("GRANT REPLICATION SLAVE ON *.* TO {who}"))
        .await
}

/// Point `replica` at the source and start replicating from `gtid`.
pub async fn start(
    replica: &mut Server,
    src: &SourceAddress,
    user: &str,
    password: &str,
    gtid: &str,
) -> Result<(), String> {
    match replica.flavor {
        Flavor::MariaDb => {
            let _ = replica.exec("STOP SLAVE").await;
            let _ = replica.exec("RESET SLAVE ALL").await;
            replica
                .exec(&format!("SET GLOBAL gtid_slave_pos = {}", quote(gtid)))
                .await?;
            replica
                .exec(&format!(
                    "CHANGE MASTER TO MASTER_HOST={}, MASTER_PORT={}, MASTER_USER={}, MASTER_PASSWORD={}, MASTER_USE_GTID=slave_pos",
                    quote(&src.host),
                    src.port,
                    quote(user),
                    quote(password)
                ))
                .await?;
            replica.exec("START SLAVE").await
        }
        Flavor::MySql => {
            let _ = replica.exec("STOP REPLICA").await;
            let _ = replica.exec("RESET REPLICA ALL").await;
            replica
                .exec(&format!(
                    "CHANGE REPLICATION SOURCE TO SOURCE_HOST={}, SOURCE_PORT={}, SOURCE_USER={}, SOURCE_PASSWORD={}, SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1",
                    quote(&src.host),
                    src.port,
                    quote(user),
                    quote(password)
                ))
                .await?;
            replica.exec("START REPLICA").await
        }
    }
}

/// Wait until the IO and SQL threads both run.
pub async fn wait_running(replica: &mut Server, timeout: Duration) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let rows = match replica.rows("SHOW SLAVE STATUS").await {
            Ok(r) => r,
            Err(_) => replica.rows("SHOW REPLICA STATUS").await?,
        };
        let row = rows
            .first()
            .ok_or("the replica has no replication configured")?;
        let get = |a: &str, b: &str| col(row, a).or_else(|| col(row, b)).unwrap_or_default();
        let io = get("Slave_IO_Running", "Replica_IO_Running");
        let sql = get("Slave_SQL_Running", "Replica_SQL_Running");
        if io == "Yes" && sql == "Yes" {
            return Ok(());
        }
        let io_err = get("Last_IO_Error", "Last_IO_Error");
        let sql_err = get("Last_SQL_Error", "Last_SQL_Error");
        if (io == "No" && !io_err.is_empty()) || (sql == "No" && !sql_err.is_empty()) {
            return Err(format!(
                "replication stopped: IO thread {io} ({io_err}), SQL thread {sql} ({sql_err})"
            ));
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "replication not running after {} s: IO thread {io} {io_err}, SQL thread {sql} {sql_err}",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
