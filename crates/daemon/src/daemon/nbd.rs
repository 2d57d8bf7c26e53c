//! The daemon's NBD exports: volumes with `sharenbd=on` (inherited), by name
//! (`tank/vol`), and their snapshots read-only (`tank/vol@snap`, served when the
//! volume is shared). Rows for `share list`.
//!
//! Invariants:
//! - What is served is what the property says, at once: every property change
//!   revalidates the open connections (`nbd_revalidate`), and a new connection
//!   checks the property when it chooses its export.
//! - The server holds the daemon weakly: it never keeps a shut-down daemon alive.

use super::Daemon;
use cachalot_datasets::DatasetKind;
use cachalot_nbd::{Device, Exports, NbdServer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Weak};

/// The default NBD address (IANA port 10809).
pub const DEFAULT_NBD_ADDR: &str = "127.0.0.1:10809";

struct DaemonExports {
    daemon: Weak<Daemon>,
}

impl Exports for DaemonExports {
    fn list(&self) -> Vec<String> {
        self.daemon
            .upgrade()
            .map(|d| d.nbd_export_names())
            .unwrap_or_default()
    }
    fn open(&self, name: &str) -> Result<Arc<dyn Device>, String> {
        let d = self.daemon.upgrade().ok_or("the daemon is shutting down")?;
        if d.is_shutting_down() {
            return Err("the daemon is shutting down".into());
        }
        let volume = name.split_once('@').map_or(name, |(v, _)| v);
        if !d.nbd_shared(volume) {
            return Err(format!(
                "'{volume}' is not shared over NBD (sharenbd=off or not a volume)"
            ));
        }
        Ok(d.volume(name)? as Arc<dyn Device>)
    }
}

impl Daemon {
    /// Start the NBD server on `tcp` (if any) and the unix socket `unix` (if
    /// any); returns the bound TCP address.
    pub fn start_nbd(
        self: &Arc<Self>,
        tcp: Option<&str>,
        unix: Option<&Path>,
    ) -> std::io::Result<Option<SocketAddr>> {
        let server = NbdServer::new(Arc::new(DaemonExports {
            daemon: Arc::downgrade(self),
        }));
        let addr = match tcp {
            Some(a) => Some(server.listen_tcp(a)?),
            None => None,
        };
        if let Some(p) = unix {
            server.listen_unix(p)?;
        }
        let _ = self.nbd.set(server);
        Ok(addr)
    }

    /// Whether volume `name` is exported (sharenbd resolves to on).
    fn nbd_shared(&self, name: &str) -> bool {
        let Ok(store) = self.ds_store(name) else {
            return false;
        };
        let Ok(ds) = store.dataset(name) else {
            return false;
        };
        ds.kind() == DatasetKind::Volume
            && store
                .get_props(name, Some(&["sharenbd".to_string()]))
                .is_ok_and(|r| r.first().is_some_and(|p| p.raw == "on"))
    }

    /// Every shared volume of every online pool.
    fn nbd_export_names(&self) -> Vec<String> {
        let stores: Vec<_> = self.open_stores();
        let mut out = Vec::new();
        for s in stores {
            for d in s.list(None, true).unwrap_or_default() {
                if d.kind == DatasetKind::Volume && self.nbd_shared(&d.name) {
                    out.push(d.name);
                }
            }
        }
        out
    }

    /// Close connections whose export is no longer shared (after a property
    /// change: sharenbd switched off or inherited off).
    pub(super) fn nbd_revalidate(&self) {
        if let Some(nbd) = self.nbd.get() {
            let n = nbd.revalidate();
            if n > 0 {
                super::log(format!(
                    "nbd: closed {n} connection(s) of an unshared volume"
                ));
            }
        }
    }

    /// `share list` rows for NBD: every shared volume, plus snapshots that have
    /// clients, with the clients' addresses.
    pub(super) fn nbd_share_rows(&self) -> Vec<Value> {
        let conns = self.nbd.get().map(|s| s.connections()).unwrap_or_default();
        let state = if self.nbd.get().is_some() {
            "online"
        } else {
            "offline"
        };
        let mut names = self.nbd_export_names();
        for c in &conns {
            if !c.export.is_empty() && !names.contains(&c.export) {
                names.push(c.export.clone());
            }
        }
        names.sort();
        names
            .into_iter()
            .map(|n| {
                let mut clients: Vec<&str> = conns
                    .iter()
                    .filter(|c| c.export == n)
                    .map(|c| c.client.as_str())
                    .collect();
                clients.sort_unstable();
                json!({
                    "name": n.split_once('@').map_or(n.as_str(), |(v, _)| v),
                    "protocol": "nbd",
                    "path": n,
                    "clients": clients,
                    "state": state,
                })
            })
            .collect()
    }

    /// Stop the NBD server (daemon shutdown).
    pub(super) fn stop_nbd(&self) {
        if let Some(nbd) = self.nbd.get() {
            nbd.shutdown();
        }
    }
}
