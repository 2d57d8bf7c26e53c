//! `share list`: every protocol export with its clients. Each protocol adds its
//! rows from its own module (NBD: `nbd_share_rows`).

use super::{Daemon, OpResult};
use crate::proto::Args;
use serde_json::Value;

impl Daemon {
    pub(super) fn share_list(&self, _a: &Args) -> OpResult {
        let mut rows = Vec::new();
        rows.extend(self.nbd_share_rows());
        Ok(Value::Array(rows))
    }
}
