//! One connection to a MySQL or MariaDB server over its unix socket, with the few
//! typed queries the integration needs (variables, flavour, statements).
//!
//! Invariants:
//! - Every error is one line naming the server's socket; nothing here panics on
//!   what a server answers.
//! - Connecting gives up after [`CONNECT_TIMEOUT`], so a hung server cannot hang
//!   the CLI before it has taken any lock.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Row};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Who we connect as. The password comes from `MYSQL_PWD` (the convention of the
/// mysql/mariadb clients), never from the command line where `ps` would show it.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub user: String,
    pub password: Option<String>,
}

impl Credentials {
    pub fn new(user: &str) -> Credentials {
        Credentials {
            user: user.to_string(),
            password: std::env::var("MYSQL_PWD").ok().filter(|p| !p.is_empty()),
        }
    }
}

/// Which server family: they differ in quiesce statements, GTID variables and
/// replication syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    MariaDb,
    MySql,
}

impl Flavor {
    pub fn name(self) -> &'static str {
        match self {
            Flavor::MariaDb => "mariadb",
            Flavor::MySql => "mysql",
        }
    }
}

/// A connected server.
pub struct Server {
    conn: Conn,
    socket: PathBuf,
    pub flavor: Flavor,
    /// (major, minor, patch) of the server.
    pub version: (u16, u16, u16),
    /// `SELECT VERSION()`, e.g. "10.11.19-MariaDB-0+deb12u1".
    pub version_string: String,
}

fn sql_err(socket: &Path, e: mysql_async::Error) -> String {
    let msg = match e {
        mysql_async::Error::Server(s) => format!("ERROR {}: {}", s.code, s.message),
        mysql_async::Error::Io(io) => io.to_string().replace("Input/output error: ", ""),
        other => other.to_string(),
    };
    format!("MySQL server at {}: {}", socket.display(), one_line(&msg))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Server {
    /// Connect over the unix socket `socket`.
    pub async fn connect(socket: &Path, creds: &Credentials) -> Result<Server, String> {
        if !socket.exists() {
            return Err(format!(
                "cannot connect to a MySQL server at {}: no such socket",
                socket.display()
            ));
        }
        let opts = OptsBuilder::default()
            .socket(Some(socket.to_string_lossy().into_owned()))
            .user(Some(creds.user.clone()))
            .pass(creds.password.clone())
            .prefer_socket(true);
        let conn = match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts)).await {
            Err(_) => {
                return Err(format!(
                    "cannot connect to a MySQL server at {}: no answer within {} s",
                    socket.display(),
                    CONNECT_TIMEOUT.as_secs()
                ))
            }
            Ok(Err(e)) => {
                return Err(format!(
                    "cannot connect to a MySQL server at {} as '{}': {}",
                    socket.display(),
                    creds.user,
                    sql_err(socket, e)
                        .split_once(": ")
                        .map(|(_, m)| m.to_string())
                        .unwrap_or_default()
                ))
            }
            Ok(Ok(c)) => c,
        };
        let mut s = Server {
            conn,
            socket: socket.to_path_buf(),
            flavor: Flavor::MySql,
            version: (0, 0, 0),
            version_string: String::new(),
        };
        s.version_string = s.var("version").await?.unwrap_or_default();
        s.flavor = if s.version_string.to_ascii_lowercase().contains("mariadb") {
            Flavor::MariaDb
        } else {
            Flavor::MySql
        };
        s.version = parse_version(&s.version_string);
        Ok(s)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The server's id of this connection (for KILL CONNECTION).
    pub fn connection_id(&self) -> u32 {
        self.conn.id()
    }

    /// A global variable, `None` if the server does not know it or it is NULL.
    pub async fn var(&mut self, name: &str) -> Result<Option<String>, String> {
        debug_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match self
            .conn
            .query_first::<Option<String>, _>(format!("SELECT @@GLOBAL.{name}"))
            .await
        {
            Ok(v) => Ok(v.flatten()),
            // 1193: unknown system variable.
            Err(mysql_async::Error::Server(e)) if e.code == 1193 => Ok(None),
            Err(e) => Err(sql_err(&self.socket, e)),
        }
    }

    /// Run a statement that returns no rows.
    pub async fn exec(&mut self, sql: &str) -> Result<(), String> {
        self.conn
            .query_drop(sql)
            .await
            .map_err(|e| sql_err(&self.socket, e))
    }

    /// Run a query; every row.
    pub async fn rows(&mut self, sql: &str) -> Result<Vec<Row>, String> {
        self.conn
            .query::<Row, _>(sql)
            .await
            .map_err(|e| sql_err(&self.socket, e))
    }

    /// Close the connection politely (dropping it also ends the session).
    pub async fn close(self) {
        let _ = self.conn.disconnect().await;
    }
}

/// A column of a row as text (NULL and missing columns: None).
pub fn col(row: &Row, name: &str) -> Option<String> {
    let idx = row
        .columns_ref()
        .iter()
        .position(|c| c.name_str().eq_ignore_ascii_case(name))?;
    row.get_opt::<Option<String>, usize>(idx)
        .and_then(|r| r.ok())
        .flatten()
}

/// Quote a string as an SQL literal ('...' with quotes and backslashes escaped).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// "10.11.19-MariaDB-0+deb12u1" -> (10, 11, 19); unparsable parts are 0.
pub fn parse_version(v: &str) -> (u16, u16, u16) {
    let head: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut it = head.split('.').map(|p| p.parse::<u16>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("10.11.19-MariaDB-0+deb12u1"), (10, 11, 19));
        assert_eq!(parse_version("8.0.36"), (8, 0, 36));
        assert_eq!(parse_version("garbage"), (0, 0, 0));
    }

    #[test]
    fn quoting_escapes() {
        assert_eq!(quote("a'b\\c"), "'a''b\\\\c'");
    }
}
