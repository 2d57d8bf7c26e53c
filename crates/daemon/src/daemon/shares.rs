//! `share list`: every protocol export with its clients. Each protocol contributes its
//! rows from its own function (`iscsi_share_rows`, ...), so protocols merge cleanly.
//!
//! Invariant: a row is listed only for a dataset whose share property is on now.

use super::iscsi::{chap_of, prop_values};
use super::Daemon;
use crate::daemon::OpResult;
use cachalot_datasets::{DatasetKind, Store};
use cachalot_iscsi::target_name;
use serde_json::Value;
use std::sync::Arc;

impl Daemon {
    pub(super) fn share_list(&self) -> OpResult {
        let mut rows = Vec::new();
        rows.extend(self.iscsi_share_rows());
        rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        Ok(Value::Array(rows))
    }

    /// Rows of `share list` for iSCSI: one per shared volume, with its initiators.
    pub fn iscsi_share_rows(&self) -> Vec<serde_json::Value> {
        let Some(svc) = self.iscsi.get() else {
            return Vec::new();
        };
        let sessions = svc.target.sessions();
        let stores: Vec<Arc<Store>> = self
            .pools
            .read()
            .values()
            .filter_map(|s| s.store.clone())
            .collect();
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
                    "clients": clients.join(","),
                    "state": state,
                }));
            }
        }
        rows
    }
}
