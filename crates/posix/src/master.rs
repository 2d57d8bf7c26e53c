//! The master object: the entry point of a filesystem dataset. It is object 1 and
//! its bonus names the format version, the root directory and the orphan list.
//!
//! Layout (version 1): bonus bytes 0..4 magic "CPMS", 4..8 version u32 = 1,
//! 8..16 root directory object id, 16..24 orphan list object id.
//!
//! Invariants: a dataset with no objects becomes a filesystem on first open (master,
//! root, orphan list created in one transaction); a dataset whose object 1 is not a
//! master, or that has objects but no master, is refused (it holds something else).

use crate::dir;
use crate::error::{Errno, Result};
use crate::inode::{u32_at, u64_at, Inode, Timespec};
use crate::objio::ObjWrite;
use cachalot_datasets::Dataset;
use cachalot_objects::dnode::BONUS_SIZE;

pub const MASTER_OBJ: u64 = 1;
pub const MASTER_MAGIC: [u8; 4] = *b"CPMS";
pub const MASTER_VERSION: u32 = 1;

/// What the master object records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Master {
    pub root: u64,
    pub orphans: u64,
}

impl Master {
    pub fn encode(&self) -> [u8; BONUS_SIZE] {
        let mut b = [0u8; BONUS_SIZE];
        b[0..4].copy_from_slice(&MASTER_MAGIC);
        b[4..8].copy_from_slice(&MASTER_VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.root.to_le_bytes());
        b[16..24].copy_from_slice(&self.orphans.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; BONUS_SIZE]) -> Result<Master> {
        if b[0..4] != MASTER_MAGIC {
            return Err(Errno::EINVAL);
        }
        let v = u32_at(b, 4);
        if v != MASTER_VERSION {
            eprintln!("cachalot-posix: filesystem format version {v} is not supported");
            return Err(Errno::EINVAL);
        }
        Ok(Master {
            root: u64_at(b, 8),
            orphans: u64_at(b, 16),
        })
    }
}

/// Find the master of `ds` (ENOENT if it holds no filesystem yet).
pub fn open(ds: &Dataset) -> Result<Master> {
    let info = ds.object_info(MASTER_OBJ)?;
    Master::decode(&info.bonus)
}

/// Find the master of `ds`, creating an empty filesystem if the dataset is empty.
pub fn open_or_create(ds: &Dataset) -> Result<Master> {
    match ds.object_info(MASTER_OBJ) {
        Ok(info) => return Master::decode(&info.bonus),
        Err(e) if e.errno() == libc::ENOENT => {}
        Err(e) => return Err(e.into()),
    }
    if !ds.list_objects()?.is_empty() {
        eprintln!(
            "cachalot-posix: dataset '{}' holds objects but no filesystem",
            ds.name()
        );
        return Err(Errno::EINVAL);
    }
    // Freed ids become reusable only after a commit: make sure id 1 is free.
    ds.fsync()?;
    let tx = ds.begin(1 << 20)?;
    let master = tx.create_object()?;
    if master != MASTER_OBJ {
        let _ = tx.delete_object(master);
        eprintln!("cachalot-posix: object 1 of '{}' is not free", ds.name());
        return Err(Errno::EIO);
    }
    let root = ObjWrite::create_object(&tx)?;
    dir::init(&tx, root)?;
    let now = Timespec::now();
    let mut ino = Inode::new(libc::S_IFDIR | 0o755, 0, 0, now);
    ino.nlink = 2;
    ino.parent = root;
    ObjWrite::set_bonus(&tx, root, &ino.encode())?;
    let orphans = ObjWrite::create_object(&tx)?;
    dir::init(&tx, orphans)?;
    let m = Master { root, orphans };
    ObjWrite::set_bonus(&tx, master, &m.encode())?;
    drop(tx);
    Ok(m)
}
