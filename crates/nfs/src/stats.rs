//! NFS analytics: `nfs.ops` (latency and size histograms) and `nfs.bytes`, by
//! client address, share (dataset), operation and file.
//!
//! Invariants:
//! - The file dimension is the path within the share, built from the names the
//!   server saw for each object (LOOKUP, CREATE, MKDIR, ... and READDIRPLUS
//!   replies), else `#<object>`; the name map is bounded (`MAX_NAMES`, then it
//!   restarts), so a mislabel is possible, a miscount is not.
//! - A share is a MySQL share once a file only MySQL creates was named in it
//!   ([`is_mysql_marker`]); from then on its reads, writes and commits are also
//!   counted in `innodb.ops` (kind, table, op, dataset, file), as over FUSE.
//! - Cardinality is bounded by the registry's per-stat key cap.

use cachalot_analytics::classify::{classify, is_mysql_marker};
use cachalot_analytics::Stat;
use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

const MAX_NAMES: usize = 100_000;
const MAX_DEPTH: usize = 64;

type Key = (Arc<str>, u64);

pub struct Stats {
    ops: Stat,
    bytes: Stat,
    innodb: Stat,
    /// Shares seen holding MySQL files.
    mysql: RwLock<HashSet<Arc<str>>>,
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
            innodb: stat("innodb.ops"),
            mysql: RwLock::new(HashSet::new()),
            names: RwLock::new(HashMap::new()),
        }
    }

    /// Remember that `obj` is `name` in `parent` of `share`.
    pub fn name(&self, share: &str, obj: u64, parent: u64, name: &[u8]) {
        if name == b"." || name == b".." {
            return;
        }
        {
            let mut m = self.names.write();
            if m.len() >= MAX_NAMES {
                m.clear();
            }
            m.insert(
                (Arc::from(share), obj),
                (parent, Arc::from(String::from_utf8_lossy(name).as_ref())),
            );
        }
        if !self.mysql.read().contains(share) && is_mysql_marker(&self.path(share, obj)) {
            self.mysql.write().insert(Arc::from(share));
        }
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
        let io = match op {
            "read" => "read",
            "write" => "write",
            "commit" => "fsync",
            _ => return,
        };
        if self.mysql.read().contains(share) {
            let class = classify(&file);
            self.innodb.record(
                &[class.kind, &class.table, io, share, &file],
                bytes,
                latency,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_mysql_detection() {
        let s = Stats::new();
        s.name("t/db", 5, 1, b"shop");
        s.name("t/db", 6, 5, b"orders.ibd");
        assert_eq!(s.path("t/db", 6), "/shop/orders.ibd");
        assert_eq!(s.path("t/db", 99), "#99");
        assert!(
            s.mysql.read().contains("t/db"),
            "an .ibd marks the share MySQL"
        );
        s.name("t/plain", 2, 1, b"notes.txt");
        assert!(!s.mysql.read().contains("t/plain"));
    }
}
