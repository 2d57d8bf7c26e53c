//! `share.list`: every dataset shared over a protocol, one row per share, with
//! NAME, PROTOCOL, PATH-OR-TARGET, CLIENTS and STATE. One function per protocol
//! builds its rows (NFS here; NBD in `nbd.rs`, iSCSI in `iscsi.rs`). CLIENTS is
//! what may connect for NFS (the allow-list) and who is connected for the block
//! protocols (a list of addresses or initiator names).
//!
//! Invariant: the rows come from the same property parsing the servers apply
//! (`cachalot_datasets::share`), so what the list says is what is served.

use super::{Daemon, OpResult};
use cachalot_datasets::share::parse_sharenfs;
use cachalot_datasets::DatasetKind;
use serde_json::{json, Value};

impl Daemon {
    pub(super) fn share_list(&self) -> OpResult {
        let mut rows = self.nfs_share_rows();
        rows.extend(self.nbd_share_rows());
        rows.sort_by(|a, b| {
            let k = |v: &Value| {
                (
                    v["name"].as_str().unwrap_or("").to_string(),
                    v["protocol"].as_str().unwrap_or("").to_string(),
                )
            };
            k(a).cmp(&k(b))
        });
        Ok(Value::Array(rows))
    }

    /// One row per filesystem whose `sharenfs` is not off.
    fn nfs_share_rows(&self) -> Vec<Value> {
        let serving = self.nfs_addr();
        let stores: Vec<_> = self
            .pools
            .read()
            .values()
            .filter_map(|s| s.store.clone())
            .collect();
        let mut rows = vec![];
        for store in stores {
            let Ok(infos) = store.list(None, true) else {
                continue;
            };
            for i in infos {
                if i.kind != DatasetKind::Filesystem || i.name.contains('%') {
                    continue;
                }
                let raw = store
                    .get_props(&i.name, Some(&["sharenfs".to_string()]))
                    .ok()
                    .and_then(|r| r.into_iter().next())
                    .map(|r| r.raw)
                    .unwrap_or_default();
                let Ok(Some(share)) = parse_sharenfs(&raw) else {
                    continue;
                };
                let state = match serving {
                    Some(a) => format!("online ({a})"),
                    None => "offline (nfs not serving)".to_string(),
                };
                rows.push(json!({
                    "name": i.name,
                    "protocol": "nfs",
                    "path": format!("/{}", i.name),
                    "clients": share.clients(),
                    "options": share.canonical(),
                    "state": state,
                }));
            }
        }
        rows
    }
}
