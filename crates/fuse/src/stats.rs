//! FUSE analytics: `fuse.ops` (op, dataset, file; latency histogram) and
//! `fuse.bytes` (op, dataset, file) through the global registry.
//!
//! Invariant: the file dimension is the last name an inode was seen under (lookup
//! or create), else its inode number; the registry bounds its cardinality.

use cachalot_analytics::Stat;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const MAX_NAMES: usize = 100_000;

pub struct Stats {
    ops: Stat,
    bytes: Stat,
    dataset: String,
    names: RwLock<HashMap<u64, Arc<str>>>,
}

impl Stats {
    pub fn new(dataset: &str) -> Stats {
        let reg = cachalot_analytics::global();
        Stats {
            ops: reg.stat("fuse.ops", &["op", "dataset", "file"]),
            bytes: reg.stat("fuse.bytes", &["op", "dataset", "file"]),
            dataset: dataset.to_string(),
            names: RwLock::new(HashMap::new()),
        }
    }

    /// Remember the name of an inode for the file dimension.
    pub fn name(&self, obj: u64, name: &[u8]) {
        let mut m = self.names.write();
        if m.len() >= MAX_NAMES {
            m.clear();
        }
        m.insert(obj, Arc::from(String::from_utf8_lossy(name).as_ref()));
    }

    pub fn record(&self, op: &str, obj: u64, bytes: u64, latency: Duration) {
        let named = self.names.read().get(&obj).cloned();
        let unnamed;
        let file: &str = match &named {
            Some(n) => n,
            None => {
                unnamed = obj.to_string();
                &unnamed
            }
        };
        let key = [op, self.dataset.as_str(), file];
        self.ops.record(&key, bytes, latency);
        if bytes > 0 {
            self.bytes.add(&key, 1, bytes);
        }
    }
}
