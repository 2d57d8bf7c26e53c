//! NFS analytics: `nfs.ops` (latency and size histograms) and `nfs.bytes`, by
//! client address, share (dataset), operation and file.
//!
//! Invariants:
//! - The file dimension is the path within the share, built from the names the
//!   server saw for each object (LOOKUP, CREATE, MKDIR, ... and READDIRPLUS
//!   replies), else `#<object>`; the name map is bounded (`MAX_NAMES`, then it
//!   restarts), so a mislabel is possible, a miscount is not.
//! - Cardinality is bounded by the registry's per-stat key cap.

use cachalot_analytics::Stat;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const MAX_NAMES: usize = 100_000;
const MAX_DEPTH: usize = 64;

type Key = (Arc<str>, u64);

pub struct Stats {
    ops: Stat,
    bytes: Stat,
    /// (share, object) -> (parent object, name).
    names: RwLock<HashMap<Key, (u64, Arc<str>)>>,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        let reg = cachalot_analytics::global();
        let stat = |name: &str| {
            let info = cachalot_analytics::catalog::info(name);
            reg.stat(name, info.map_or(&[][..], |i| i.dims))
        };
        Stats {
            ops: stat("nfs.ops"),
            bytes: stat("nfs.bytes"),
            names: RwLock::new(HashMap::new()),
        }
    }

    /// Remember that `obj` is `name` in `parent` of `share`.
    pub fn name(&self, share: &str, obj: u64, parent: u64, name: &[u8]) {
        if name == b"." || name == b".." {
            return;
        }
        let mut m = self.names.write();
        if m.len() >= MAX_NAMES {
            m.clear();
        }
        m.insert(
            (Arc::from(share), obj),
            (parent, Arc::from(String::from_utf8_lossy(name).as_ref())),
        );
    }

    fn path(&self, share: &str, obj: u64) -> String {
        let names = self.names.read();
        let share: Arc<str> = Arc::from(share);
        let mut parts: Vec<Arc<str>> = vec![];
        let mut cur = obj;
        while let Some((parent, name)) = names.get(&(share.clone(), cur)) {
            parts.push(name.clone());
            cur = *parent;
            if parts.len() >= MAX_DEPTH {
                parts.push(Arc::from("..."));
                break;
            }
        }
        if parts.is_empty() {
            return format!("#{obj}");
        }
        let mut p = String::new();
        for s in parts.iter().rev() {
            p.push('/');
            p.push_str(s);
        }
        p
    }

    /// Count one request.
    pub fn record(
        &self,
        client: &str,
        share: Option<&str>,
        op: &str,
        obj: Option<u64>,
        bytes: u64,
        latency: Duration,
    ) {
        if !cachalot_analytics::enabled() {
            return;
        }
        let share = share.unwrap_or("-");
        let file = match obj {
            Some(o) if share != "-" => self.path(share, o),
            _ => "-".to_string(),
        };
        let key = [client, share, op, file.as_str()];
        self.ops.record(&key, bytes, latency);
        if bytes > 0 {
            self.bytes.add(&key, 1, bytes);
        }
    }
}
