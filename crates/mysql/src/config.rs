//! The my.cnf of a server started from a clone: the source's file places moved to
//! the clone's mount points, its own identity (server_id, port, socket, pid file,
//! error log), and the settings the files depend on kept as they were.
//!
//! Invariants:
//! - Every file place of the source is moved to the matching clone; a place that
//!   cannot be moved is an error (the new server must never write into the
//!   source's datasets).
//! - The clone never listens beyond 127.0.0.1; without a port it does not listen
//!   on TCP at all.

use crate::paths::{relocate, ServerPaths};
use crate::record::SnapshotRecord;
use std::path::{Path, PathBuf};

/// Configuration of the new server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloneConfig {
    pub paths: ServerPaths,
    pub server_id: u64,
    pub port: Option<u16>,
    pub socket: PathBuf,
    pub pid_file: PathBuf,
    pub error_log: PathBuf,
    /// Unix user to run as (when started by root).
    pub user: Option<String>,
    pub settings: Vec<(String, String)>,
}

/// Where the new server's own files go (config, socket, pid, error log).
#[derive(Clone, Debug)]
pub struct RunPlaces {
    pub run_dir: PathBuf,
    pub socket: Option<PathBuf>,
    pub port: Option<u16>,
    pub server_id: u64,
    pub user: Option<String>,
}

impl CloneConfig {
    /// Move the recorded places from the snapshot's mount points to `new_mounts`.
    pub fn for_clone(
        rec: &SnapshotRecord,
        new_mounts: &[PathBuf],
        run: &RunPlaces,
    ) -> Result<CloneConfig, String> {
        let mv = |what: &str, p: &Path| -> Result<PathBuf, String> {
            relocate(p, &rec.mounts, new_mounts).ok_or_else(|| {
                format!(
                    "the source's {what} {} is on none of the snapshot's datasets",
                    p.display()
                )
            })
        };
        let src = &rec.paths;
        let paths = ServerPaths {
            datadir: mv("datadir", &src.datadir)?,
            redo_dir: mv("redo log directory", &src.redo_dir)?,
            undo_dir: mv("undo directory", &src.undo_dir)?,
            data_home_dir: mv("system tablespace directory", &src.data_home_dir)?,
            binlog_basename: match &src.binlog_basename {
                Some(b) => Some(mv("binary log", b)?),
                None => None,
            },
        };
        Ok(CloneConfig {
            paths,
            server_id: run.server_id,
            port: run.port,
            socket: run
                .socket
                .clone()
                .unwrap_or_else(|| run.run_dir.join("mysqld.sock")),
            pid_file: run.run_dir.join("mysqld.pid"),
            error_log: run.run_dir.join("error.log"),
            user: run.user.clone(),
            settings: rec.settings.clone(),
        })
    }

    /// The my.cnf text.
    pub fn render(&self, origin: &str) -> String {
        let p = &self.paths;
        let mut s = format!(
            "# Written by 'cachalot mysql clone' for a server on clones of {origin}.\n[mysqld]\n"
        );
        let mut kv = |k: &str, v: &dyn std::fmt::Display| s.push_str(&format!("{k} = {v}\n"));
        kv("datadir", &p.datadir.display());
        kv("innodb_log_group_home_dir", &p.redo_dir.display());
        kv("innodb_undo_directory", &p.undo_dir.display());
        kv("innodb_data_home_dir", &p.data_home_dir.display());
        if let Some(b) = &p.binlog_basename {
            kv("log_bin", &b.display());
            // Relay logs next to the binary logs (the log dataset when there is one).
            let dir = b.parent().unwrap_or(&p.datadir);
            kv("relay_log", &dir.join("relay-bin").display());
        }
        kv("server_id", &self.server_id);
        kv("socket", &self.socket.display());
        kv("pid_file", &self.pid_file.display());
        kv("log_error", &self.error_log.display());
        match self.port {
            Some(port) => {
                kv("port", &port);
                kv("bind_address", &"127.0.0.1");
            }
            None => s.push_str("skip_networking\n"),
        }
        if let Some(u) = &self.user {
            s.push_str(&format!("user = {u}\n"));
        }
        for (k, v) in &self.settings {
            s.push_str(&format!("{k} = {v}\n"));
        }
        s
    }
}

/// A server_id for a clone: stable for a clone name, different from the source's.
pub fn derive_server_id(clone_name: &str, source_id: u64) -> u64 {
    // FNV-1a: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in clone_name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let id = 1000 + h % 1_000_000_000;
    if id == source_id {
        id + 1
    } else {
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quiesce::Position;

    fn record() -> SnapshotRecord {
        SnapshotRecord {
            members: vec!["tank/db/data".into(), "tank/db/log".into()],
            mounts: vec!["/src/data".into(), "/src/log".into()],
            paths: ServerPaths {
                datadir: "/src/data".into(),
                redo_dir: "/src/log".into(),
                binlog_basename: Some("/src/log/binlog".into()),
                undo_dir: "/src/data".into(),
                data_home_dir: "/src/data".into(),
            },
            settings: vec![("innodb_page_size".into(), "16384".into())],
            position: Position::default(),
            ..Default::default()
        }
    }

    #[test]
    fn clone_config_points_only_at_the_clones() {
        let run = RunPlaces {
            run_dir: "/c/data.run".into(),
            socket: None,
            port: Some(3399),
            server_id: 7,
            user: Some("mysql".into()),
        };
        let c =
            CloneConfig::for_clone(&record(), &["/c/data".into(), "/c/log".into()], &run).unwrap();
        let text = c.render("tank/db/data@s");
        assert!(text.contains("datadir = /c/data\n"), "{text}");
        assert!(text.contains("innodb_log_group_home_dir = /c/log\n"));
        assert!(text.contains("log_bin = /c/log/binlog\n"));
        assert!(text.contains("relay_log = /c/log/relay-bin\n"));
        assert!(text.contains("server_id = 7\n"));
        assert!(text.contains("socket = /c/data.run/mysqld.sock\n"));
        assert!(text.contains("bind_address = 127.0.0.1\n"));
        assert!(text.contains("innodb_page_size = 16384\n"));
        assert!(!text.contains("/src/"), "{text}");
    }

    #[test]
    fn no_port_means_no_tcp() {
        let run = RunPlaces {
            run_dir: "/c/run".into(),
            socket: Some("/c/s.sock".into()),
            port: None,
            server_id: 7,
            user: None,
        };
        let c =
            CloneConfig::for_clone(&record(), &["/c/data".into(), "/c/log".into()], &run).unwrap();
        let text = c.render("x@s");
        assert!(text.contains("skip_networking\n"));
        assert!(text.contains("socket = /c/s.sock\n"));
    }

    #[test]
    fn server_id_differs_from_the_source() {
        let id = derive_server_id("tank/r1", 0);
        assert_eq!(derive_server_id("tank/r1", 0), id);
        assert_ne!(derive_server_id("tank/r1", id), id);
        assert_ne!(derive_server_id("tank/r2", 0), id);
    }
}
