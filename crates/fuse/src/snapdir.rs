//! Snapshot browsing: `MOUNT/.cachalot/snapshot/NAME/` shows snapshot NAME of the
//! mounted filesystem, read-only, as ZFS does with `.zfs/snapshot`.
//!
//! Inode numbers (FUSE's, 64 bits) carry a 16-bit slot above a 48-bit object id:
//! - slot 0 is the live filesystem (root = FUSE inode 1, see `convert`);
//! - slots 1..=0xFFFE are snapshots, numbered as they are first looked up;
//! - slot 0xFFFF holds the two virtual directories `.cachalot` and `.cachalot/snapshot`.
//!
//! Invariants:
//! - A slot is bound to one snapshot *guid* for the life of the mount; a snapshot
//!   destroyed (and perhaps re-created under its name) is noticed on the next
//!   request through its slot, which then fails with ESTALE, so a stale inode
//!   never reads blocks that the destroy freed. A new lookup gets a new slot.
//! - `.cachalot` is hidden (not in readdir of the root, like ZFS's default
//!   `snapdir=hidden`) so tools that scan a directory, such as MariaDB looking for
//!   databases in its datadir, never see it; it is reached by name.
//! - Everything under it is read-only: changes fail with EROFS.

use cachalot_posix::{Errno as PErrno, Fs};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;

/// Name of the control directory in the root of the filesystem.
pub const CTL_NAME: &[u8] = b".cachalot";
/// Name of the snapshot directory in the control directory.
pub const SNAPDIR_NAME: &[u8] = b"snapshot";

const SLOT_SHIFT: u32 = 48;
const OBJ_MASK: u64 = (1 << SLOT_SHIFT) - 1;
const VIRTUAL_SLOT: u16 = 0xFFFF;
/// FUSE inode of `.cachalot`.
pub const CTL_INO: u64 = (VIRTUAL_SLOT as u64) << SLOT_SHIFT | 1;
/// FUSE inode of `.cachalot/snapshot`.
pub const SNAPDIR_INO: u64 = (VIRTUAL_SLOT as u64) << SLOT_SHIFT | 2;

/// What a FUSE inode number names.
pub enum Node {
    /// An object of the live filesystem (slot 0) or of a snapshot's.
    Object { fs: Arc<Fs>, slot: u16, obj: u64 },
    /// `.cachalot`
    Ctl,
    /// `.cachalot/snapshot`
    SnapDir,
}

struct Bound {
    /// Full name FS@SNAP when bound (the dataset may be renamed later; the guid
    /// is what identifies the snapshot).
    snap: String,
    guid: u64,
    fs: Arc<Fs>,
}

#[derive(Default)]
struct Slots {
    by_slot: HashMap<u16, Bound>,
    by_snap: HashMap<String, u16>,
    next: u16,
}

/// The snapshot slots of one mount.
pub struct SnapDir {
    live: Arc<Fs>,
    slots: RwLock<Slots>,
}

/// The FUSE inode of object `obj` in slot `slot` (`root`: the root object of the
/// live filesystem, which FUSE calls 1).
pub fn encode(slot: u16, obj: u64, live_root: u64) -> Result<u64, PErrno> {
    if obj > OBJ_MASK {
        // Object ids stay far below 2^48 (that many 512-byte dnodes is 128 PiB).
        return Err(PErrno::EIO);
    }
    if slot == 0 {
        return Ok(if obj == live_root { 1 } else { obj });
    }
    Ok((slot as u64) << SLOT_SHIFT | obj)
}

impl SnapDir {
    pub fn new(live: Arc<Fs>) -> SnapDir {
        SnapDir {
            live,
            slots: RwLock::new(Slots {
                next: 1,
                ..Slots::default()
            }),
        }
    }

    /// The live filesystem.
    pub fn live(&self) -> &Arc<Fs> {
        &self.live
    }

    fn full_name(&self, snap: &[u8]) -> Result<String, PErrno> {
        let snap = std::str::from_utf8(snap).map_err(|_| PErrno::ENOENT)?;
        if snap.is_empty() || snap.contains('@') || snap.contains('/') {
            return Err(PErrno::ENOENT);
        }
        Ok(format!("{}@{snap}", self.live.dataset().name()))
    }

    /// What FUSE inode `ino` names.
    pub fn resolve(&self, ino: u64) -> Result<Node, PErrno> {
        let slot = (ino >> SLOT_SHIFT) as u16;
        let obj = ino & OBJ_MASK;
        match slot {
            0 if ino == 1 => Ok(Node::Object {
                fs: self.live.clone(),
                slot: 0,
                obj: self.live.root(),
            }),
            0 => Ok(Node::Object {
                fs: self.live.clone(),
                slot: 0,
                obj,
            }),
            VIRTUAL_SLOT if ino == CTL_INO => Ok(Node::Ctl),
            VIRTUAL_SLOT if ino == SNAPDIR_INO => Ok(Node::SnapDir),
            VIRTUAL_SLOT => Err(PErrno::ENOENT),
            s => {
                let (snap, guid, fs) = {
                    let slots = self.slots.read();
                    let b = slots.by_slot.get(&s).ok_or(PErrno::ESTALE)?;
                    (b.snap.clone(), b.guid, b.fs.clone())
                };
                if self.live.store().snapshot_guid(&snap).ok() != Some(guid) {
                    self.unbind(s);
                    return Err(PErrno::ESTALE);
                }
                Ok(Node::Object { fs, slot: s, obj })
            }
        }
    }

    fn unbind(&self, slot: u16) {
        let mut slots = self.slots.write();
        if let Some(b) = slots.by_slot.remove(&slot) {
            slots.by_snap.remove(&b.snap);
        }
    }

    /// Look snapshot `name` up in `.cachalot/snapshot`: its slot and filesystem.
    pub fn lookup(&self, name: &[u8]) -> Result<(u16, Arc<Fs>), PErrno> {
        let full = self.full_name(name)?;
        let store = self.live.store();
        let guid = store.snapshot_guid(&full).map_err(|_| PErrno::ENOENT)?;
        {
            let slots = self.slots.read();
            if let Some(&s) = slots.by_snap.get(&full) {
                if let Some(b) = slots.by_slot.get(&s).filter(|b| b.guid == guid) {
                    return Ok((s, b.fs.clone()));
                }
            }
        }
        let ds = store.snapshot_dataset(&full)?;
        let fs = Arc::new(Fs::mount_snapshot(store.clone(), ds)?);
        let mut slots = self.slots.write();
        if let Some(old) = slots.by_snap.remove(&full) {
            slots.by_slot.remove(&old);
        }
        let slot = free_slot(&slots).ok_or(PErrno::EMFILE)?;
        slots.next = if slot == VIRTUAL_SLOT - 1 {
            1
        } else {
            slot + 1
        };
        slots.by_snap.insert(full.clone(), slot);
        slots.by_slot.insert(
            slot,
            Bound {
                snap: full,
                guid,
                fs: fs.clone(),
            },
        );
        Ok((slot, fs))
    }

    /// The snapshot names of the live filesystem, oldest first.
    pub fn names(&self) -> Result<Vec<String>, PErrno> {
        Ok(self
            .live
            .store()
            .snapshot_names(&self.live.dataset().name())?)
    }
}

/// A slot not in use, searching from `next` (slots of destroyed snapshots are
/// reused once every other number has been handed out).
fn free_slot(slots: &Slots) -> Option<u16> {
    let span = VIRTUAL_SLOT as u32 - 1;
    (0..span)
        .map(|i| ((slots.next as u32 - 1 + i) % span + 1) as u16)
        .find(|s| !slots.by_slot.contains_key(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_keep_slots_apart() {
        let root = 2;
        assert_eq!(encode(0, root, root).unwrap(), 1);
        assert_eq!(encode(0, 77, root).unwrap(), 77);
        let a = encode(1, root, root).unwrap();
        let b = encode(2, root, root).unwrap();
        assert_ne!(a, b);
        assert_ne!(a, 1);
        assert_eq!(a >> SLOT_SHIFT, 1);
        assert_eq!(a & OBJ_MASK, root);
        assert!(encode(3, 1 << 48, root).is_err());
        assert_ne!(CTL_INO, SNAPDIR_INO);
        assert_eq!(CTL_INO >> SLOT_SHIFT, VIRTUAL_SLOT as u64);
    }

    #[test]
    fn free_slots_wrap_and_skip_used() {
        let mut s = Slots {
            next: VIRTUAL_SLOT - 1,
            ..Slots::default()
        };
        assert_eq!(free_slot(&s), Some(VIRTUAL_SLOT - 1));
        s.next = 1;
        assert_eq!(free_slot(&s), Some(1));
    }
}
