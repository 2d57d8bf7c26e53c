//! File attribution shared by the protocol front ends (FUSE, NFS): which path,
//! InnoDB kind and table an object of one dataset is, from the names the front
//! end saw it under.
//!
//! A [`FileNames`] remembers, per object, the last (parent, name) it was seen
//! under (lookup, create, mkdir, rename, readdirplus...) and caches the resolved
//! [`FileInfo`] per object, so counting a request costs one map lookup and no
//! allocation once its file is known.
//!
//! Invariants:
//! - The path is the object's path within the dataset (`/db/t1.ibd`); the root
//!   is `/`; an object never named is `#<obj>`; a walk that reaches an unnamed
//!   parent other than the root is cut with `/...`, one deeper than
//!   [`MAX_DEPTH`] likewise.
//! - A cached path is dropped when its object is named again (rename);
//!   descendants of a renamed directory keep their old path until the cache
//!   restarts (bounded by [`MAX_NAMES`]), which mislabels, never miscounts.
//! - A dataset is a MySQL dataset once a file only MySQL creates was named in it
//!   ([`crate::classify::is_mysql_marker`]), and stays one.

use crate::classify::{classify, is_mysql_marker};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Most objects whose name or resolved path is remembered (then the maps restart).
pub const MAX_NAMES: usize = 100_000;
/// Deepest path resolved (deeper paths are cut at the top with `...`).
pub const MAX_DEPTH: usize = 64;

/// What the analytics know about one file.
#[derive(Debug)]
pub struct FileInfo {
    /// Path within the dataset.
    pub path: Arc<str>,
    /// InnoDB kind ([`crate::classify::KINDS`]).
    pub kind: &'static str,
    /// `schema.table`, or `-`.
    pub table: Arc<str>,
}

/// The names and resolved files of one dataset's objects.
pub struct FileNames {
    root: u64,
    /// object -> (parent object, name).
    names: RwLock<HashMap<u64, (u64, Arc<str>)>>,
    files: RwLock<HashMap<u64, Arc<FileInfo>>>,
    mysql: AtomicBool,
}

impl FileNames {
    /// Names for a dataset whose root directory is object `root`.
    pub fn new(root: u64) -> FileNames {
        FileNames {
            root,
            names: RwLock::new(HashMap::new()),
            files: RwLock::new(HashMap::new()),
            mysql: AtomicBool::new(false),
        }
    }

    /// True once a MySQL-only file was named in this dataset.
    pub fn is_mysql(&self) -> bool {
        self.mysql.load(Ordering::Relaxed)
    }

    /// Remember that `obj` is called `name` in directory `parent`.
    pub fn name(&self, obj: u64, parent: u64, name: &[u8]) {
        if name == b"." || name == b".." || obj == self.root {
            return;
        }
        {
            let known = self.names.read();
            if known
                .get(&obj)
                .is_some_and(|(p, n)| *p == parent && n.as_bytes() == name)
            {
                return;
            }
        }
        let name: Arc<str> = Arc::from(String::from_utf8_lossy(name).as_ref());
        // The marker test reads only the last two components (classify): the
        // name and its parent's. Building just those, rather than resolving and
        // caching the whole path, keeps a listing of many new names (every
        // readdirplus entry is named here) to one small allocation per entry.
        let short = (!self.is_mysql()).then(|| self.parent_and_name(parent, &name));
        {
            let mut m = self.names.write();
            if m.len() >= MAX_NAMES {
                m.clear();
            }
            m.insert(obj, (parent, name));
        }
        if self.files.read().contains_key(&obj) {
            self.files.write().remove(&obj);
        }
        if short.is_some_and(|p| is_mysql_marker(&p)) {
            self.mysql.store(true, Ordering::Relaxed);
        }
    }

    /// `/PARENT/NAME` as the tail of the path `resolve` would give `name` in
    /// directory `parent` (`/NAME` in the root, `/.../NAME` under an unnamed
    /// directory).
    fn parent_and_name(&self, parent: u64, name: &str) -> String {
        if parent == self.root {
            return format!("/{name}");
        }
        match self.names.read().get(&parent) {
            Some((_, p)) => format!("/{p}/{name}"),
            None => format!("/.../{name}"),
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

    /// The file `obj` is (cached until it is named again).
    pub fn file(&self, obj: u64) -> Arc<FileInfo> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_renames_and_mysql_detection() {
        let s = FileNames::new(1);
        s.name(5, 1, b"sbtest");
        s.name(6, 5, b"sbtest1.ibd");
        assert_eq!(&*s.file(6).path, "/sbtest/sbtest1.ibd");
        assert_eq!(&*s.file(1).path, "/");
        assert_eq!(&*s.file(99).path, "#99");
        assert!(s.is_mysql(), "an .ibd marks the dataset MySQL");
        assert_eq!(&*s.file(6).table, "sbtest.sbtest1");
        assert_eq!(s.file(6).kind, "table");
        // A rename drops the cached path.
        s.name(6, 1, b"moved.ibd");
        assert_eq!(&*s.file(6).path, "/moved.ibd");
        // An unnamed parent is cut.
        s.name(7, 42, b"x");
        assert_eq!(&*s.file(7).path, "/.../x");
        // "." and ".." never rename anything, nor does naming the root.
        s.name(5, 1, b".");
        s.name(1, 5, b"loop");
        assert_eq!(&*s.file(5).path, "/sbtest");
        assert_eq!(&*s.file(1).path, "/");
        let plain = FileNames::new(1);
        plain.name(2, 1, b"notes.txt");
        assert!(!plain.is_mysql());
        // A marker by its directory's name alone (the redo directory of 10.x).
        let redo = FileNames::new(1);
        redo.name(2, 1, b"#innodb_redo");
        assert!(!redo.is_mysql());
        redo.name(3, 2, b"x");
        assert!(redo.is_mysql(), "a file in #innodb_redo marks the dataset");
    }

    #[test]
    fn a_cycle_is_cut_at_max_depth() {
        let s = FileNames::new(1);
        s.name(2, 3, b"a");
        s.name(3, 2, b"b");
        let p = s.file(3).path.clone();
        assert!(p.starts_with("/..."), "{p}");
        assert_eq!(p.matches('/').count(), MAX_DEPTH + 1);
    }
}
