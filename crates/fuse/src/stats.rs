//! FUSE analytics: `fuse.ops` (op, dataset, file; latency and size histograms),
//! `fuse.bytes` (op, dataset, file) and, for MySQL datasets, `innodb.ops` (kind,
//! table, op, dataset, file) through the global registry.
//!
//! Invariants:
//! - The file dimension is the inode's path within the dataset (`/db/t1.ibd`),
//!   built from the last (parent, name) each inode was seen under (lookup, create,
//!   mkdir, rename...) and cached per inode; an inode never named is `#<ino>`. A
//!   cached path is dropped when its inode is renamed; descendants of a renamed
//!   directory keep their old path until the cache is cleared (bounded, see
//!   `MAX_NAMES`), which only mislabels, never miscounts.
//! - A dataset is a MySQL dataset once a file only MySQL creates has been seen in
//!   it ([`cachalot_analytics::classify::is_mysql_marker`]: ibdata*, ib_logfile*,
//!   *.ibd, undo*, ...). From then on its reads, writes and syncs are also counted
//!   in `innodb.ops`, classified by file name.
//! - Cardinality is bounded by the registry's per-stat key cap.

use cachalot_analytics::classify::{classify, is_mysql_marker};
use cachalot_analytics::Stat;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Most inodes whose name or resolved path is remembered (then the maps restart).
const MAX_NAMES: usize = 100_000;
/// Deepest path resolved (deeper paths are cut at the top with `...`).
const MAX_DEPTH: usize = 64;

/// What the analytics know about one file.
struct FileInfo {
    path: Arc<str>,
    kind: &'static str,
    table: Arc<str>,
}

pub struct Stats {
    ops: Stat,
    bytes: Stat,
    innodb: Stat,
    dataset: String,
    root: u64,
    /// inode -> (parent inode, name).
    names: RwLock<HashMap<u64, (u64, Arc<str>)>>,
    files: RwLock<HashMap<u64, Arc<FileInfo>>>,
    mysql: AtomicBool,
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
            root,
            names: RwLock::new(HashMap::new()),
            files: RwLock::new(HashMap::new()),
            mysql: AtomicBool::new(false),
        }
    }

    /// Remember that `obj` is called `name` in directory `parent`.
    pub fn name(&self, obj: u64, parent: u64, name: &[u8]) {
        let name: Arc<str> = Arc::from(String::from_utf8_lossy(name).as_ref());
        {
            let mut m = self.names.write();
            if m.get(&obj).is_some_and(|(p, n)| *p == parent && *n == name) {
                return;
            }
            if m.len() >= MAX_NAMES {
                m.clear();
            }
            m.insert(obj, (parent, name));
        }
        self.files.write().remove(&obj);
        if !self.mysql.load(Ordering::Relaxed) {
            let info = self.file(obj);
            if is_mysql_marker(&info.path) {
                self.mysql.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Path of `obj` within the dataset.
    fn resolve(&self, obj: u64) -> String {
        if obj == self.root {
            return "/".into();
        }
        let names = self.names.read();
        let mut parts: Vec<&str> = Vec::new();
        let mut cur = obj;
        while cur != self.root {
            let Some((parent, name)) = names.get(&cur) else {
                if parts.is_empty() {
                    return format!("#{obj}");
                }
                parts.push("...");
                break;
            };
            parts.push(name);
            if parts.len() >= MAX_DEPTH {
                parts.push("...");
                break;
            }
            cur = *parent;
        }
        let mut path = String::new();
        for p in parts.iter().rev() {
            path.push('/');
            path.push_str(p);
        }
        path
    }

    fn file(&self, obj: u64) -> Arc<FileInfo> {
        if let Some(f) = self.files.read().get(&obj) {
            return f.clone();
        }
        let path = self.resolve(obj);
        let class = classify(&path);
        let info = Arc::new(FileInfo {
            path: Arc::from(path),
            kind: class.kind,
            table: Arc::from(class.table),
        });
        let mut m = self.files.write();
        if m.len() >= MAX_NAMES {
            m.clear();
        }
        m.insert(obj, info.clone());
        info
    }

    /// Count one request on `obj` (`bytes` moved, 0 for metadata requests).
    pub fn record(&self, op: &str, obj: u64, bytes: u64, latency: Duration) {
        if !cachalot_analytics::enabled() {
            return;
        }
        let f = self.file(obj);
        let key = [op, self.dataset.as_str(), &f.path];
        self.ops.record(&key, bytes, latency);
        if bytes > 0 {
            self.bytes.add(&key, 1, bytes);
        }
        if self.mysql.load(Ordering::Relaxed) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_mysql_detection() {
        let s = Stats::new("unit/test-paths", 1);
        s.name(5, 1, b"sbtest");
        s.name(6, 5, b"sbtest1.ibd");
        assert_eq!(&*s.file(6).path, "/sbtest/sbtest1.ibd");
        assert_eq!(&*s.file(1).path, "/");
        assert_eq!(&*s.file(99).path, "#99");
        assert!(
            s.mysql.load(Ordering::Relaxed),
            "an .ibd marks the dataset MySQL"
        );
        assert_eq!(&*s.file(6).table, "sbtest.sbtest1");
        // Rename drops the cached path.
        s.name(6, 1, b"moved.ibd");
        assert_eq!(&*s.file(6).path, "/moved.ibd");
        // An unnamed parent is cut.
        s.name(7, 42, b"x");
        assert_eq!(&*s.file(7).path, "/.../x");
        let plain = Stats::new("unit/test-plain", 1);
        plain.name(2, 1, b"notes.txt");
        assert!(!plain.mysql.load(Ordering::Relaxed));
    }
}
