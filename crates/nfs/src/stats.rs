//! NFS analytics: `nfs.ops` (latency and size histograms) and `nfs.bytes`, by
//! client address, share (dataset), operation and file.
//!
//! Invariants:
//! - The file dimension is the path within the share, resolved and cached per
//!   share by [`FileNames`] (shared with FUSE) from the names the server saw for
//!   each object (LOOKUP, CREATE, MKDIR, ... and READDIRPLUS replies), else
//!   `#<object>`; the maps are bounded, so a mislabel is possible, a miscount is not.
//! - A share is a MySQL share once a file only MySQL creates was named in it;
//!   from then on its reads, writes and commits are also counted in `innodb.ops`
//!   (kind, table, op, dataset, file), as over FUSE.
//! - Cardinality is bounded by the registry's per-stat key cap; the share map
//!   holds one entry per share that ever served a request.

use cachalot_analytics::files::FileNames;
use cachalot_analytics::Stat;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub struct Stats {
    ops: Stat,
    bytes: Stat,
    innodb: Stat,
    /// share -> names of its objects.
    shares: RwLock<HashMap<Arc<str>, Arc<FileNames>>>,
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
            shares: RwLock::new(HashMap::new()),
        }
    }

    /// The names of `share`, whose root directory is object `root`.
    fn share(&self, share: &str, root: u64) -> Arc<FileNames> {
        if let Some(f) = self.shares.read().get(share) {
            return f.clone();
        }
        self.shares
            .write()
            .entry(Arc::from(share))
            .or_insert_with(|| Arc::new(FileNames::new(root)))
            .clone()
    }

    /// Remember that `obj` is `name` in `parent` of `share` (root object `root`).
    pub fn name(&self, share: &str, root: u64, obj: u64, parent: u64, name: &[u8]) {
        self.share(share, root).name(obj, parent, name);
    }

    /// Count one request; `share` is (name, root object) when the request named one.
    pub fn record(
        &self,
        client: &str,
        share: Option<(&str, u64)>,
        op: &str,
        obj: Option<u64>,
        bytes: u64,
        latency: Duration,
    ) {
        if !cachalot_analytics::enabled() {
            return;
        }
        let Some((share, root)) = share else {
            let key = [client, "-", op, "-"];
            self.ops.record(&key, bytes, latency);
            if bytes > 0 {
                self.bytes.add(&key, 1, bytes);
            }
            return;
        };
        let names = self.share(share, root);
        let file = obj.map(|o| names.file(o));
        let path = file.as_ref().map_or("-", |f| &f.path);
        let key = [client, share, op, path];
        self.ops.record(&key, bytes, latency);
        if bytes > 0 {
            self.bytes.add(&key, 1, bytes);
        }
        let Some(f) = file.filter(|_| names.is_mysql()) else {
            return;
        };
        // An NFSv4 COMPOUND is named `v4.OP+OP...`: its READ, WRITE or COMMIT.
        let io = op
            .strip_prefix("v4.")
            .unwrap_or(op)
            .split('+')
            .find_map(|o| match o {
                "read" => Some("read"),
                "write" => Some("write"),
                "commit" => Some("fsync"),
                _ => None,
            });
        if let Some(io) = io {
            self.innodb
                .record(&[f.kind, &f.table, io, share, &f.path], bytes, latency);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_mysql_detection() {
        let s = Stats::new();
        s.name("t/db", 1, 5, 1, b"shop");
        s.name("t/db", 1, 6, 5, b"orders.ibd");
        let db = s.share("t/db", 1);
        assert_eq!(&*db.file(6).path, "/shop/orders.ibd");
        assert_eq!(&*db.file(99).path, "#99");
        assert!(db.is_mysql(), "an .ibd marks the share MySQL");
        s.name("t/plain", 1, 2, 1, b"notes.txt");
        assert!(!s.share("t/plain", 1).is_mysql());
    }

    #[test]
    fn a_v4_compound_with_a_write_counts_in_innodb_ops() {
        let s = Stats::new();
        s.name("t/v4db", 1, 5, 1, b"shop");
        s.name("t/v4db", 1, 6, 5, b"orders.ibd");
        let share = Some(("t/v4db", 1));
        let us = Duration::from_micros(1);
        s.record("c", share, "v4.putfh+write+getattr", Some(6), 16384, us);
        s.record("c", share, "v4.putfh+getattr", Some(6), 0, us);
        let rows = s.innodb.snapshot().rows;
        let mine: Vec<_> = rows.iter().filter(|r| r.keys[3] == "t/v4db").collect();
        assert_eq!(mine.len(), 1, "{mine:?}");
        assert_eq!((mine[0].keys[2].as_str(), mine[0].bytes), ("write", 16384));
    }
}
