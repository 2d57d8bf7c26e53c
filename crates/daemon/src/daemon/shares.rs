//! `share.list`: every dataset shared over a protocol, one row per share, with
//! NAME, PROTOCOL, PATH-OR-TARGET, CLIENTS and STATE. One function per protocol
//! builds its rows (NFS here; NBD in `nbd.rs`, iSCSI in `iscsi.rs`). CLIENTS is
//! what may connect for NFS (the allow-list) and who is connected for the block
//! protocols (a list of addresses or initiator names).
//!
//! Invariant: the rows come from the same property parsing the servers apply
//! (`cachalot_datasets::share`), so what the list says is what is served.

use super::iscsi::{chap_of, prop_values};
use super::{Daemon, OpResult};
use cachalot_datasets::share::parse_sharenfs;
use cachalot_datasets::{DatasetKind, Store};
use cachalot_iscsi::target_name;
use serde_json::{json, Value};
use std::sync::Arc;

impl Daemon {
    pub(super) fn share_list(&self) -> OpResult {
        let mut rows = self.nfs_share_rows();
        rows.extend(self.nbd_share_rows());
        rows.extend(self.iscsi_share_rows());
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
        let stores: Vec<_> = self.open_stores();
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

    /// Rows of `share list` for iSCSI: one per shared volume, with its initiators.
    pub fn iscsi_share_rows(&self) -> Vec<serde_json::Value> {
        let Some(svc) = self.iscsi.get() else {
            return Vec::new();
        };
        let sessions = svc.target.sessions();
        let stores: Vec<Arc<Store>> = self.open_stores();
        let mut rows = Vec::new();
        for s in stores {
            for info in s.list(None, true).unwrap_or_default() {
                if info.kind != DatasetKind::Volume
                    || prop_values(&s, &info.name, &["shareiscsi"])[0].as_deref() != Some("on")
                {
                    continue;
                }
                let t = target_name(&info.name);
                let clients: Vec<String> = sessions
                    .iter()
                    .filter(|x| !x.discovery && x.target == t)
                    .map(|x| format!("{}@{}", x.initiator, x.peer))
                    .collect();
                let state = match chap_of(&s, &info.name) {
                    Ok(Some(_)) => "online (chap)".to_string(),
                    Ok(None) => "online".to_string(),
                    Err(e) => format!("error: {e}"),
                };
                rows.push(serde_json::json!({
                    "name": info.name,
                    "protocol": "iscsi",
                    "path": format!("{t} lun 0 @ {}", svc.addr),
                    "clients": clients,
                    "state": state,
                }));
            }
        }
        rows
    }
}
