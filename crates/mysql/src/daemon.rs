//! The few cachalot daemon requests the MySQL integration makes, typed.
//!
//! Invariant: every request goes through the daemon's public API: the unix socket
//! the CLI uses, or (when the daemon itself runs a MySQL operation for its REST
//! routes) a direct call of the same request handler; nothing here touches pool
//! data directly.

use cachalot_api_types::client::Client;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Prefix of the user properties the integration writes.
pub const PROP_PREFIX: &str = "cachalot.mysql:";

/// Runs one request `(op, args)` inside the daemon: its result or error message.
pub type LocalHandler = Arc<dyn Fn(&str, Value) -> Result<Value, String> + Send + Sync>;

/// How requests reach the daemon.
enum Link {
    Socket { client: Client, path: PathBuf },
    Local(LocalHandler),
}

/// A connection to the daemon.
pub struct Daemon {
    link: Link,
}

impl Daemon {
    pub fn connect(socket: &Path) -> Result<Daemon, String> {
        Ok(Daemon {
            link: Link::Socket {
                client: Client::connect(socket)?,
                path: socket.to_path_buf(),
            },
        })
    }

    /// The daemon itself: each request is a call of `handler`.
    pub fn local(handler: LocalHandler) -> Daemon {
        Daemon {
            link: Link::Local(handler),
        }
    }

    /// A second, independent connection (for a request run on another thread).
    pub fn reconnect(&self) -> Result<Daemon, String> {
        match &self.link {
            Link::Socket { path, .. } => Daemon::connect(path),
            Link::Local(h) => Ok(Daemon::local(h.clone())),
        }
    }

    pub fn call(&mut self, op: &str, args: Value) -> Result<Value, String> {
        match &mut self.link {
            Link::Socket { client, .. } => client.call(op, args),
            Link::Local(h) => h(op, args),
        }
    }

    /// Raw values of `props` of dataset or snapshot `name` ("-" when unset).
    pub fn get(&mut self, name: &str, props: &[&str]) -> Result<BTreeMap<String, String>, String> {
        let rows = self.call("ds.get", json!({ "name": name, "props": props }))?;
        let mut out = BTreeMap::new();
        for r in rows.as_array().into_iter().flatten() {
            if let (Some(p), Some(v)) = (r["property"].as_str(), r["raw"].as_str()) {
                out.insert(p.to_string(), v.to_string());
            }
        }
        Ok(out)
    }

    /// Every property of `name` (with `all`), raw values.
    pub fn get_all(&mut self, name: &str) -> Result<BTreeMap<String, String>, String> {
        self.get(name, &["all"])
    }

    pub fn set(&mut self, name: &str, prop: &str, value: &str) -> Result<(), String> {
        self.call(
            "ds.set",
            json!({ "name": name, "prop": prop, "value": value }),
        )
        .map(drop)
    }

    /// `filesystem`, `volume` or `snapshot`; an error names a missing dataset.
    pub fn kind(&mut self, name: &str) -> Result<String, String> {
        let p = self.get(name, &["type"])?;
        Ok(p.get("type").cloned().unwrap_or_default())
    }

    /// Whether dataset or snapshot `name` exists.
    pub fn exists(&mut self, name: &str) -> Result<bool, String> {
        let (parent, leaf) = match name.split_once('@') {
            Some((fs, _)) => (fs.to_string(), name.to_string()),
            None => (name.to_string(), name.to_string()),
        };
        let t = if name.contains('@') {
            "snapshot"
        } else {
            "filesystem,volume"
        };
        let pool = parent.split('/').next().unwrap_or_default();
        let rows = match self.call(
            "ds.list",
            json!({ "name": pool, "recursive": true, "type": t, "props": ["name"] }),
        ) {
            Ok(r) => r,
            Err(_) => return Ok(false),
        };
        Ok(rows
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["name"].as_str() == Some(leaf.as_str())))
    }

    /// Snapshots of filesystem `fs`, oldest first.
    pub fn snapshots_of(&mut self, fs: &str) -> Result<Vec<String>, String> {
        let rows = self.call(
            "ds.list",
            json!({ "name": fs, "recursive": false, "type": "snapshot", "props": ["name"] }),
        )?;
        Ok(rows
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .filter(|n| n.split_once('@').map(|(f, _)| f) == Some(fs))
            .collect())
    }

    /// Mounted filesystems: dataset name -> mount path.
    pub fn mounts(&mut self) -> Result<BTreeMap<String, PathBuf>, String> {
        let list = self.call("fs.mounts", json!({}))?;
        Ok(list
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| {
                Some((
                    m["name"].as_str()?.to_string(),
                    PathBuf::from(m["path"].as_str()?),
                ))
            })
            .collect())
    }

    /// One atomic snapshot of every name (FS@SNAP).
    pub fn snapshot(&mut self, names: &[String]) -> Result<(), String> {
        self.call("snap.create", json!({ "names": names, "recursive": false }))
            .map(drop)
    }

    /// Commit a transaction group of `pool` now.
    pub fn sync_pool(&mut self, pool: &str) -> Result<(), String> {
        self.call("pool.sync", json!({ "name": pool })).map(drop)
    }

    pub fn destroy(&mut self, name: &str) -> Result<(), String> {
        self.call("ds.destroy", json!({ "name": name, "recursive": false }))
            .map(drop)
    }

    pub fn clone_snapshot(
        &mut self,
        snap: &str,
        target: &str,
        props: &[String],
    ) -> Result<(), String> {
        self.call(
            "snap.clone",
            json!({ "name": snap, "target": target, "props": props }),
        )
        .map(drop)
    }

    pub fn create_fs(&mut self, name: &str, props: &[String]) -> Result<(), String> {
        self.call(
            "ds.create",
            json!({ "name": name, "props": props, "parents": true }),
        )
        .map(drop)
    }

    pub fn mount(&mut self, name: &str, path: &Path) -> Result<(), String> {
        self.call(
            "fs.mount",
            json!({ "name": name, "path": path.to_string_lossy() }),
        )
        .map(drop)
    }

    pub fn unmount(&mut self, name: &str) -> Result<(), String> {
        self.call("fs.unmount", json!({ "name": name, "force": false }))
            .map(drop)
    }

    pub fn rollback(&mut self, snap: &str, recursive: bool) -> Result<(), String> {
        self.call(
            "snap.rollback",
            json!({ "name": snap, "recursive": recursive }),
        )
        .map(drop)
    }
}
