//! Helpers for the POSIX layer tests: a store on simulated devices, a checker of
//! the filesystem's structural invariants (fsck) and a tree walk for models.
#![allow(dead_code)]

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{BlockDevice, SimDevice};
use cachalot_posix::dir;
use cachalot_posix::inode::Inode;
use cachalot_posix::master::MASTER_OBJ;
use cachalot_posix::{Caller, FileKind, Fs};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

pub const ROOT: Caller = Caller::ROOT;

pub fn manual_opts() -> StoreOpts {
    StoreOpts {
        arc_max: 64 << 20,
        txg_timeout: Duration::from_secs(3600),
        dirty_max: 1 << 30,
    }
}

pub fn as_dyn(devs: &[SimDevice]) -> Vec<Arc<dyn BlockDevice>> {
    devs.iter()
        .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
        .collect()
}

/// A pool on one simulated device with a filesystem dataset `tank/fs`.
pub fn new_store(dev_size: u64, props: &[(&str, &str)]) -> (Arc<Store>, Vec<SimDevice>) {
    let devs = vec![SimDevice::new("d0", dev_size)];
    let store = Store::create_on_devices("tank", as_dyn(&devs), false, manual_opts()).unwrap();
    let props: Vec<(String, String)> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    store
        .create_dataset("tank/fs", DatasetKind::Filesystem, None, &props, false)
        .unwrap();
    (store, devs)
}

pub fn mount(store: &Arc<Store>) -> Fs {
    Fs::mount(store.clone(), store.dataset("tank/fs").unwrap()).unwrap()
}

pub fn new_fs() -> (Fs, Arc<Store>) {
    let (store, _devs) = new_store(256 << 20, &[("recordsize", "16K")]);
    (mount(&store), store)
}

/// Resolve a path like "a/b/c" from the root.
pub fn resolve(fs: &Fs, path: &str) -> cachalot_posix::Result<u64> {
    let mut cur = fs.root();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        cur = fs.lookup(cur, c.as_bytes())?.ino;
    }
    Ok(cur)
}

pub fn mkfile(fs: &Fs, parent: u64, name: &str, data: &[u8]) -> u64 {
    let a = fs
        .mknod(parent, name.as_bytes(), libc::S_IFREG | 0o644, 0, ROOT)
        .unwrap();
    if !data.is_empty() {
        fs.write(a.ino, 0, data, false).unwrap();
    }
    a.ino
}

pub fn all_entries(fs: &Fs, dir: u64) -> Vec<cachalot_posix::DirEntry> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(dir, cookie, 97).unwrap();
        if batch.is_empty() {
            return out;
        }
        cookie = batch.last().unwrap().cookie;
        out.extend(batch);
    }
}

/// Path -> description (kind, size, content digest) of every name in the tree.
pub fn walk(fs: &Fs) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(fs.root(), String::new())];
    while let Some((dir, path)) = stack.pop() {
        for e in all_entries(fs, dir) {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
            let a = fs.getattr(e.ino).unwrap();
            let desc = match a.kind {
                FileKind::Directory => {
                    stack.push((e.ino, p.clone()));
                    format!("dir {:o}", a.mode & 0o7777)
                }
                FileKind::Symlink => {
                    format!(
                        "link {}",
                        String::from_utf8_lossy(&fs.readlink(e.ino).unwrap())
                    )
                }
                k => {
                    let data = fs.read(e.ino, 0, a.size as usize).unwrap();
                    let sum: u64 = data
                        .iter()
                        .enumerate()
                        .map(|(i, b)| (i as u64 + 1) * *b as u64)
                        .sum();
                    format!("{k:?} {} {sum} nlink {}", a.size, a.nlink)
                }
            };
            out.insert(p, desc);
        }
    }
    out
}

/// Check every structural invariant: entries point at live inodes of the kind
/// they say, link counts equal references, directories know their parent and
/// count their entries, and no object is unreachable.
pub fn fsck(fs: &Fs) {
    let ds = fs.dataset();
    let inode = |obj: u64| Inode::decode(&ds.object_info(obj).unwrap().bonus).unwrap();
    let mut refs: BTreeMap<u64, u32> = BTreeMap::new();
    let mut reached: BTreeSet<u64> = BTreeSet::new();
    let mut stack = vec![fs.root()];
    reached.insert(fs.root());
    while let Some(d) = stack.pop() {
        let di = inode(d);
        assert!(di.is_dir(), "object {d} is not a directory");
        let entries = all_entries(fs, d);
        let n = entries.len() as u64 - 2;
        assert_eq!(dir::count(&**ds, d).unwrap(), n, "entry count of dir {d}");
        let mut names = BTreeSet::new();
        let mut subdirs = 0;
        for e in entries.into_iter().skip(2) {
            assert!(names.insert(e.name.clone()), "duplicate name in dir {d}");
            let i = inode(e.ino);
            assert_eq!(i.kind(), Some(e.kind), "entry kind of {}", e.ino);
            if i.is_dir() {
                subdirs += 1;
                assert_eq!(i.parent, d, "parent of dir {}", e.ino);
                assert!(reached.insert(e.ino), "directory {} has two names", e.ino);
                stack.push(e.ino);
            } else {
                *refs.entry(e.ino).or_default() += 1;
                reached.insert(e.ino);
            }
            assert!(i.nlink > 0, "linked inode {} has nlink 0", e.ino);
        }
        assert_eq!(di.nlink, 2 + subdirs, "nlink of dir {d}");
    }
    for (obj, n) in &refs {
        assert_eq!(inode(*obj).nlink, *n, "nlink of {obj}");
    }
    // Every object is the master, the orphan list, an inode reached, an xattr object
    // of one, or an orphan.
    let mut known: BTreeSet<u64> = reached.clone();
    known.insert(MASTER_OBJ);
    known.insert(fs.orphan_dir());
    for e in dir::readdir(&**ds, fs.orphan_dir(), 0, usize::MAX).unwrap() {
        assert_eq!(inode(e.obj).nlink, 0, "orphan {} has links", e.obj);
        known.insert(e.obj);
    }
    for obj in known.clone() {
        if obj != MASTER_OBJ && obj != fs.orphan_dir() {
            let x = inode(obj).xattr_obj;
            if x != 0 {
                known.insert(x);
            }
        }
    }
    let all: BTreeSet<u64> = ds.list_objects().unwrap().into_iter().collect();
    let leaked: Vec<u64> = all.difference(&known).copied().collect();
    assert!(leaked.is_empty(), "unreachable objects: {leaked:?}");
    let missing: Vec<u64> = known.difference(&all).copied().collect();
    assert!(missing.is_empty(), "missing objects: {missing:?}");
}
