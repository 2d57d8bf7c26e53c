//! Snapshot diff (as `zfs diff`): what changed between two read-only states of
//! one filesystem (an earlier snapshot and a later one, or the head as of its
//! last commit), as paths.
//!
//! The objects that changed come from `cachalot_objects::changed_objects`, which
//! reads only the meta-dnode blocks rewritten since the earlier state. Each of
//! them is named on each side: a directory through its parent pointer, a file
//! through its parent hint (the directory it was created or last renamed in),
//! each checked against that directory's entries; an object whose hint does not
//! hold (another name of a hard link, a file made before hints were kept) is
//! found by one walk of that side's namespace, made at most once.
//!
//! Invariants: nothing is written; an object id reused by a new object (another
//! generation) is a removal and a creation; a change of atime alone is no
//! change; objects without a name (internal ones, files unlinked but held open
//! when the snapshot was taken) are left out.

use crate::dir;
use crate::error::{Errno, Result};
use crate::inode::{FileKind, Inode};
use crate::master;
use cachalot_datasets::Dataset;
use cachalot_objects::{ObjError, ObjectInfo};
use std::collections::HashMap;

/// Deepest directory nesting a path is followed through parent pointers and
/// hints (two stack frames a level); deeper, the path comes from the walk of
/// the namespace, which is iterative and visits each object once (a loop of
/// parent pointers in a damaged tree ends there too). So the recursion stays
/// shallow however deep a tree a user made (review: at 4,096 levels it could
/// overflow a request thread's stack).
const MAX_DEPTH: usize = 256;

/// How a path changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Modified,
    Added,
    Removed,
    Renamed,
}

impl ChangeKind {
    /// The letter `zfs diff` prints: M, +, -, R.
    pub fn code(self) -> char {
        match self {
            ChangeKind::Modified => 'M',
            ChangeKind::Added => '+',
            ChangeKind::Removed => '-',
            ChangeKind::Renamed => 'R',
        }
    }
}

/// One changed path. Paths start at the filesystem's root ("/" is the root);
/// bytes outside printable ASCII, spaces and backslashes are written `\ooo`
/// (octal), as `zfs diff` does, so a path is always one token on a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub path: String,
    /// The new path of a rename.
    pub new_path: Option<String>,
    pub file_kind: FileKind,
}

/// The changes between two states, in path order, and the blocks read to find
/// which objects changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub changes: Vec<Change>,
    pub blocks_read: u64,
}

/// The changes from `from` to `to`: read-only handles on two states of one
/// filesystem, `to` the later.
pub fn diff(from: &Dataset, to: &Dataset) -> Result<Diff> {
    let (a_os, b_os) = (from.objset(), to.objset());
    let changed = cachalot_objects::changed_objects(a_os.cache(), &a_os.root_bp(), &b_os.root_bp())
        .map_err(|e| {
            eprintln!("cachalot-posix: diff: {e}");
            Errno::EIO
        })?;
    let (mut a, mut b) = (Side::new(from)?, Side::new(to)?);
    let mut changes = Vec::new();
    for id in changed.ids {
        let (oa, ob) = (a.object(id)?, b.object(id)?);
        let same_object = matches!((&oa, &ob), (Some(x), Some(y)) if x.1.gen == y.1.gen);
        if !same_object {
            changes.extend(a.named(id, oa, ChangeKind::Removed)?);
            changes.extend(b.named(id, ob, ChangeKind::Added)?);
            continue;
        }
        let (Some(oa), Some(ob)) = (oa, ob) else {
            continue;
        };
        let (pa, pb) = (a.path(id, &oa.0)?, b.path(id, &ob.0)?);
        let file_kind = ob.0.kind().unwrap_or(FileKind::Regular);
        let change = match (pa, pb) {
            (Some(pa), Some(pb)) if pa != pb => Change {
                kind: ChangeKind::Renamed,
                path: pa,
                new_path: Some(pb),
                file_kind,
            },
            (Some(p), Some(_)) if changed_beyond_atime(from, to, id, &oa, &ob)? => Change {
                kind: ChangeKind::Modified,
                path: p,
                new_path: None,
                file_kind,
            },
            (Some(_), Some(_)) | (None, None) => continue,
            (Some(p), None) => change(ChangeKind::Removed, p, &oa.0),
            (None, Some(p)) => change(ChangeKind::Added, p, &ob.0),
        };
        changes.push(change);
    }
    changes.sort_by(|x, y| (&x.path, &x.new_path).cmp(&(&y.path, &y.new_path)));
    Ok(Diff {
        changes,
        blocks_read: changed.blocks_read,
    })
}

fn change(kind: ChangeKind, path: String, ino: &Inode) -> Change {
    Change {
        kind,
        path,
        new_path: None,
        file_kind: ino.kind().unwrap_or(FileKind::Regular),
    }
}

/// True when the object changed in more than its atime: data, size, block
/// size or any other attribute.
fn changed_beyond_atime(
    from: &Dataset,
    to: &Dataset,
    id: u64,
    a: &(Inode, ObjectInfo),
    b: &(Inode, ObjectInfo),
) -> Result<bool> {
    let root = |ds: &Dataset| ds.objset().object_root(id).map_err(|_| Errno::EIO);
    let mut b_ino = b.0.clone();
    b_ino.atime = a.0.atime;
    Ok(a.0 != b_ino || (a.1.size, a.1.blksz) != (b.1.size, b.1.blksz) || root(from)? != root(to)?)
}

/// One state of the filesystem, with the directories read so far.
struct Side<'a> {
    ds: &'a Dataset,
    root: u64,
    entries: HashMap<u64, Vec<dir::Entry>>,
    dir_paths: HashMap<u64, Option<String>>,
    /// Every object's path, from one walk of the namespace (made on demand).
    walked: Option<HashMap<u64, String>>,
}

impl<'a> Side<'a> {
    fn new(ds: &'a Dataset) -> Result<Side<'a>> {
        // A filesystem never mounted holds no POSIX layer yet: no objects to
        // name (root 0 is no object).
        let root = match master::open(ds) {
            Ok(m) => m.root,
            Err(Errno::ENOENT) => 0,
            Err(e) => return Err(e),
        };
        Ok(Side {
            ds,
            root,
            entries: HashMap::new(),
            dir_paths: HashMap::new(),
            walked: None,
        })
    }

    /// The inode `id` of this state, None when the slot is free, is not an
    /// inode, or has no links.
    fn object(&self, id: u64) -> Result<Option<(Inode, ObjectInfo)>> {
        let info = match self.ds.objset().info(id) {
            Ok(i) => i,
            Err(ObjError::NoSuchObject(_)) => return Ok(None),
            Err(_) => return Err(Errno::EIO),
        };
        match Inode::decode(&info.bonus) {
            Ok(ino) if ino.nlink > 0 => Ok(Some((ino, info))),
            Ok(_) | Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A change of `kind` for object `id` of this side, when it has a name.
    fn named(
        &mut self,
        id: u64,
        obj: Option<(Inode, ObjectInfo)>,
        kind: ChangeKind,
    ) -> Result<Option<Change>> {
        let Some((ino, _)) = obj else {
            return Ok(None);
        };
        Ok(self.path(id, &ino)?.map(|p| change(kind, p, &ino)))
    }

    fn entries(&mut self, dir: u64) -> Result<&[dir::Entry]> {
        if !self.entries.contains_key(&dir) {
            let all = read_all(self.ds, dir)?;
            self.entries.insert(dir, all);
        }
        Ok(&self.entries[&dir])
    }

    /// The path of object `id` (inode `ino`), None when it has no name.
    fn path(&mut self, id: u64, ino: &Inode) -> Result<Option<String>> {
        self.path_at(id, ino, 0)
    }

    fn path_at(&mut self, id: u64, ino: &Inode, depth: usize) -> Result<Option<String>> {
        if id == self.root {
            return Ok(Some("/".into()));
        }
        if depth > MAX_DEPTH {
            return Ok(self.walk()?.get(&id).cloned());
        }
        let parent = ino.parent;
        let name = if parent != 0 && parent != id {
            self.entries(parent)
                .ok()
                .and_then(|es| es.iter().find(|e| e.obj == id).map(|e| escape(&e.name)))
        } else {
            None
        };
        let Some(name) = name else {
            return Ok(self.walk()?.get(&id).cloned());
        };
        let Some(dir) = self.dir_path(parent, depth + 1)? else {
            return Ok(self.walk()?.get(&id).cloned());
        };
        Ok(Some(join(&dir, &name)))
    }

    fn dir_path(&mut self, dir: u64, depth: usize) -> Result<Option<String>> {
        if let Some(p) = self.dir_paths.get(&dir) {
            return Ok(p.clone());
        }
        let p = match self.object(dir)? {
            Some((ino, _)) if ino.is_dir() => self.path_at(dir, &ino, depth)?,
            _ => None,
        };
        self.dir_paths.insert(dir, p.clone());
        Ok(p)
    }

    /// Every named object's path (the first name met of a hard link).
    fn walk(&mut self) -> Result<&HashMap<u64, String>> {
        if self.walked.is_none() {
            let mut paths = HashMap::new();
            let mut todo = vec![(self.root, "/".to_string())];
            while let Some((d, p)) = todo.pop() {
                for e in read_all(self.ds, d)? {
                    if paths.contains_key(&e.obj) || e.obj == self.root {
                        continue;
                    }
                    let path = join(&p, &escape(&e.name));
                    if FileKind::from_dtype(e.dtype) == Some(FileKind::Directory) {
                        todo.push((e.obj, path.clone()));
                    }
                    paths.insert(e.obj, path);
                }
            }
            self.walked = Some(paths);
        }
        Ok(self.walked.get_or_insert_with(HashMap::new))
    }
}

fn read_all(ds: &Dataset, d: u64) -> Result<Vec<dir::Entry>> {
    let mut all = Vec::new();
    loop {
        let after = all.last().map_or(0, |e: &dir::Entry| e.key);
        let batch = dir::readdir(ds, d, after, 1024)?;
        if batch.is_empty() {
            return Ok(all);
        }
        all.extend(batch);
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// A name as `zfs diff` prints it: printable ASCII as is, other bytes, spaces
/// and backslashes as `\ooo`.
pub fn escape(name: &[u8]) -> String {
    let mut s = String::with_capacity(name.len());
    for &c in name {
        if c.is_ascii_graphic() && c != b'\\' {
            s.push(c as char);
        } else {
            s.push_str(&format!("\\{c:03o}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_keeps_one_token_per_name() {
        assert_eq!(escape(b"ib_logfile0"), "ib_logfile0");
        assert_eq!(escape(b"a b\\c\n\xff"), "a\\040b\\134c\\012\\377");
    }
}
