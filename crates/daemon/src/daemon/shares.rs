//! `share list`: every protocol export with its clients. Each protocol contributes its
//! rows from its own function (`iscsi_share_rows`, ...), so protocols merge cleanly.
//!
//! Invariant: a row is listed only for a dataset whose share property is on now.

use super::Daemon;
use crate::daemon::OpResult;
use serde_json::Value;

impl Daemon {
    pub(super) fn share_list(&self) -> OpResult {
        let mut rows = Vec::new();
        rows.extend(self.iscsi_share_rows());
        rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        Ok(Value::Array(rows))
    }
}
