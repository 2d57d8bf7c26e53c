//! FUSE analytics: `fuse.ops` (op, dataset, file; latency and size histograms),
//! `fuse.bytes` (op, dataset, file) and, for MySQL datasets, `innodb.ops` (kind,
//! table, op, dataset, file) through the global registry.
//!
//! Invariants:
//! - The file dimension is the inode's path within the dataset (`/db/t1.ibd`),
//!   resolved and cached by [`FileNames`] (shared with the NFS server).
//! - A dataset is a MySQL dataset once a file only MySQL creates has been seen in
//!   it ([`cachalot_analytics::classify::is_mysql_marker`]: ibdata*, ib_logfile*,
//!   *.ibd, undo*, ...). From then on its reads, writes and syncs are also counted
//!   in `innodb.ops`, classified by file name.
//! - Cardinality is bounded by the registry's per-stat key cap.

use cachalot_analytics::files::FileNames;
use cachalot_analytics::Stat;
use std::time::Duration;

pub struct Stats {
    ops: Stat,
    bytes: Stat,
    innodb: Stat,
    dataset: String,
    files: FileNames,
}

impl Stats {
    pub fn new(dataset: &str, root: u64) -> Stats {
        let reg = cachalot_analytics::global();
        let stat = |name: &str| {
            let info = cachalot_analytics::catalog::info(name);
            reg.stat(name, info.map_or(&[][..], |i| i.dims))
        };
        Stats {
            ops: stat("fuse.ops"),
            bytes: stat("fuse.bytes"),
            innodb: stat("innodb.ops"),
            dataset: dataset.to_string(),
            files: FileNames::new(root),
        }
    }

    /// Remember that `obj` is called `name` in directory `parent`.
    pub fn name(&self, obj: u64, parent: u64, name: &[u8]) {
        self.files.name(obj, parent, name);
    }

    /// Count one request on `obj` (`bytes` moved, 0 for metadata requests).
    pub fn record(&self, op: &str, obj: u64, bytes: u64, latency: Duration) {
        if !cachalot_analytics::enabled() {
            return;
        }
        let f = self.files.file(obj);
        let key = [op, self.dataset.as_str(), &f.path];
        self.ops.record(&key, bytes, latency);
        if bytes > 0 {
            self.bytes.add(&key, 1, bytes);
        }
        if self.files.is_mysql() {
            let io = match op {
                "read" => "read",
                "write" | "write.sync" => "write",
                "fsync" => "fsync",
                _ => return,
            };
            self.innodb.record(
                &[f.kind, &f.table, io, self.dataset.as_str(), &f.path],
                bytes,
                latency,
            );
        }
    }
}
