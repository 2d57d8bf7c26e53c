//! The filesystem over one dataset: inode attributes, file data, space, and the
//! locks that keep concurrent operations consistent. Namespace operations live in
//! `namespace.rs`, extended attributes in `xattr.rs`, the orphan list in
//! `orphan.rs`.
//!
//! Locking (always in this order, never the other way round):
//! 1. `ns`: a read-write lock over the whole namespace. Operations that change
//!    directories take it exclusively; lookups and readdir share it.
//! 2. attribute stripes: a mutex per inode (hashed onto 64 stripes) around every
//!    read-modify-write of an inode's bonus, so a chmod, a link count change and the
//!    mtime update of a write never lose each other's changes. Several stripes are
//!    taken in ascending stripe order.
//! 3. a transaction (`Dataset::begin`). While a transaction is held nothing waits
//!    for a lock, starts another transaction or calls a throttling `Dataset` write,
//!    because a commit waiting for the transaction would deadlock them.
//!
//! Invariants: object ids are inode numbers; every change of more than one object
//! happens inside one transaction; an inode with no links is deleted when nothing
//! has it open, else recorded in the orphan list until its last close (or the next
//! mount after a crash).

use crate::dir;
use crate::error::{Errno, Result};
use crate::inode::{FileKind, Inode, Timespec};
use crate::master;
use crate::objio::{ObjRead, ObjWrite};
use cachalot_datasets::{Dataset, Payload, ReadFrom, Store, StoreError};
use cachalot_objects::ObjectInfo;
use parking_lot::{Mutex, MutexGuard, RwLock};
use std::collections::HashMap;
use std::sync::Arc;

/// Largest file size (the object layer's limit).
pub const MAX_FILE_SIZE: u64 = 1 << 60;
/// Largest link count of a file.
pub const MAX_LINKS: u32 = u32::MAX - 1;
const STRIPES: usize = 64;
/// Space asked of the pool before a namespace change (directory buckets, inodes).
pub(crate) const NS_TX_BYTES: u64 = 256 << 10;

/// Attributes of an inode as a frontend reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: FileKind,
    /// Full st_mode (type and permission bits).
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    /// 512-byte blocks.
    pub blocks: u64,
    pub blksize: u32,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub crtime: Timespec,
    pub flags: u64,
    pub generation: u64,
}

/// A time to set: now, or a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSet {
    Now,
    At(Timespec),
}

/// Changes of a setattr; `None` leaves a field alone.
#[derive(Clone, Debug, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
}

/// Who asks (owner of what it creates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
}

impl Caller {
    pub const ROOT: Caller = Caller { uid: 0, gid: 0 };
}

/// Space of the filesystem, statfs style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub bsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u32,
}

/// fallocate modes (Linux values).
pub const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
pub const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
pub const FALLOC_FL_ZERO_RANGE: i32 = 0x10;

/// A POSIX filesystem on one dataset.
pub struct Fs {
    pub(crate) ds: Arc<Dataset>,
    store: Arc<Store>,
    pub(crate) root: u64,
    pub(crate) orphans: u64,
    pub(crate) ns: RwLock<()>,
    stripes: Vec<Mutex<()>>,
    pub(crate) open_counts: Mutex<HashMap<u64, u32>>,
}

/// Granularity of mtime/ctime updates by writes (the kernel's coarse clock ticks
/// every 1 to 4 ms).
const TIME_GRANULARITY_NS: i128 = 2_000_000;

/// True if `t` is at most one granularity before `now` (and not after it).
fn fresh(t: Timespec, now: Timespec) -> bool {
    let ns = |t: Timespec| t.sec as i128 * 1_000_000_000 + t.nsec as i128;
    let d = ns(now) - ns(t);
    (0..TIME_GRANULARITY_NS).contains(&d)
}

fn is_full(e: &StoreError) -> bool {
    matches!(e, StoreError::NoSpace(_) | StoreError::Quota(_))
}

pub(crate) fn load<R: ObjRead + ?Sized>(r: &R, obj: u64) -> Result<(Inode, ObjectInfo)> {
    if obj == master::MASTER_OBJ {
        return Err(Errno::ENOENT);
    }
    let info = r.info(obj)?;
    Ok((Inode::decode(&info.bonus)?, info))
}

pub(crate) fn save<W: ObjWrite + ?Sized>(w: &W, obj: u64, ino: &Inode) -> Result<()> {
    w.set_bonus(obj, &ino.encode())
}

impl Fs {
    /// Open the filesystem of `ds` (creating it in an empty dataset) and reclaim
    /// the space of files left unlinked-but-open by a crash.
    pub fn mount(store: Arc<Store>, ds: Arc<Dataset>) -> Result<Fs> {
        let m = master::open_or_create(&ds)?;
        let fs = Fs::with_master(store, ds, m)?;
        fs.reclaim_orphans()?;
        Ok(fs)
    }

    fn with_master(store: Arc<Store>, ds: Arc<Dataset>, m: master::Master) -> Result<Fs> {
        let fs = Fs {
            ds,
            store,
            root: m.root,
            orphans: m.orphans,
            ns: RwLock::new(()),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            open_counts: Mutex::new(HashMap::new()),
        };
        load(&*fs.ds, fs.root)?;
        Ok(fs)
    }

    /// Open the filesystem in a snapshot (a read-only dataset handle) for
    /// browsing: nothing is created or reclaimed, and every change fails with
    /// EROFS (the dataset handle refuses it) while reads leave atime alone.
    pub fn mount_snapshot(store: Arc<Store>, ds: Arc<Dataset>) -> Result<Fs> {
        if !ds.is_readonly() {
            return Err(Errno::EINVAL);
        }
        let m = master::open(&ds)?;
        Fs::with_master(store, ds, m)
    }

    /// True for a snapshot's filesystem.
    pub fn is_readonly(&self) -> bool {
        self.ds.is_readonly()
    }

    /// The store the dataset lives in.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The object id of the root directory.
    pub fn root(&self) -> u64 {
        self.root
    }
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.ds
    }

    /// Start a transaction. A pool that looks full may only be waiting for a
    /// commit to release what was freed (frees become allocatable one txg later),
    /// so on ENOSPC/EDQUOT commit once and try again. Never called with a
    /// transaction held.
    pub(crate) fn begin(&self, bytes: u64) -> Result<cachalot_datasets::Tx<'_>> {
        match self.ds.begin(bytes) {
            Err(e) if is_full(&e) => {
                self.store.sync()?;
                Ok(self.ds.begin(bytes)?)
            }
            r => Ok(r?),
        }
    }

    /// Write data outside a transaction, with the same retry as `begin`.
    fn write_data(&self, obj: u64, off: u64, data: &Payload<'_>) -> Result<()> {
        match self.ds.write_payload(obj, off, data) {
            Err(e) if is_full(&e) => {
                self.store.sync()?;
                Ok(self.ds.write_payload(obj, off, data)?)
            }
            r => Ok(r?),
        }
    }

    /// Lock the attribute stripes of `objs` (ascending stripe order, each once).
    pub(crate) fn lock_inodes(&self, objs: &[u64]) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = objs.iter().map(|o| (*o as usize) % STRIPES).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.stripes[i].lock()).collect()
    }

    pub(crate) fn attr_of(&self, obj: u64, ino: &Inode, info: &ObjectInfo) -> Result<Attr> {
        let kind = ino.kind().ok_or(Errno::EIO)?;
        let size = if kind == FileKind::Directory {
            dir::count(&*self.ds, obj)? + 2
        } else {
            info.size
        };
        Ok(Attr {
            ino: obj,
            kind,
            mode: ino.mode,
            nlink: ino.nlink,
            uid: ino.uid,
            gid: ino.gid,
            rdev: ino.rdev,
            size,
            blocks: self
                .ds
                .objset()
                .allocated_bytes(obj)
                .map_err(StoreError::from)?
                .div_ceil(512),
            blksize: info.blksz.max(4096),
            atime: ino.atime,
            mtime: ino.mtime,
            ctime: ino.ctime,
            crtime: ino.crtime,
            flags: ino.flags,
            generation: info.gen,
        })
    }

    pub fn getattr(&self, obj: u64) -> Result<Attr> {
        let (ino, info) = load(&*self.ds, obj)?;
        self.attr_of(obj, &ino, &info)
    }

    /// Change attributes (chmod, chown, truncate, utimes). Permission checks are
    /// the frontend's (the kernel's, with default_permissions).
    pub fn setattr(&self, obj: u64, set: &SetAttr) -> Result<Attr> {
        self.setattr_killing_suid(obj, set, false)
    }

    /// `setattr`; with `kill_suid` (a truncate by a caller without CAP_FSETID)
    /// a size change also drops set-user-id, and set-group-id when the group may
    /// execute, unless the mode is set too (the kernel leaves this to the server
    /// under FUSE_HANDLE_KILLPRIV_V2).
    pub fn setattr_killing_suid(&self, obj: u64, set: &SetAttr, kill_suid: bool) -> Result<Attr> {
        if set.size.is_some() || set.uid.is_some() || set.gid.is_some() {
            self.drop_capability(obj)?;
        }
        let _g = self.lock_inodes(&[obj]);
        let bytes = if set.size.is_some() { 64 << 10 } else { 0 };
        let tx = self.begin(bytes)?;
        let (mut ino, _) = load(&tx, obj)?;
        let now = Timespec::now();
        if let Some(size) = set.size {
            if ino.is_dir() {
                return Err(Errno::EISDIR);
            }
            if ino.kind() != Some(FileKind::Regular) {
                return Err(Errno::EINVAL);
            }
            if size > MAX_FILE_SIZE {
                return Err(Errno::EFBIG);
            }
            let info = tx.info(obj)?;
            if size > info.size {
                self.grow_record_before_extend(&tx, obj, &info, size)?;
            }
            ObjWrite::truncate(&tx, obj, size)?;
            ino.mtime = now;
        }
        if let Some(mode) = set.mode {
            ino.mode = (ino.mode & libc::S_IFMT) | (mode & 0o7777);
        }
        let owner_changes =
            set.uid.is_some_and(|u| u != ino.uid) || set.gid.is_some_and(|g| g != ino.gid);
        if let Some(uid) = set.uid {
            ino.uid = uid;
        }
        if let Some(gid) = set.gid {
            ino.gid = gid;
        }
        let truncate_kills = kill_suid && set.size.is_some() && set.mode.is_none();
        if (owner_changes || truncate_kills) && !ino.is_dir() {
            // As Linux does: a chown (or a truncate by a caller without
            // CAP_FSETID) drops set-user-id, and set-group-id when the group may
            // execute.
            ino.mode &= !libc::S_ISUID;
            if ino.mode & libc::S_IXGRP != 0 {
                ino.mode &= !libc::S_ISGID;
            }
        }
        let pick = |t: TimeSet| match t {
            TimeSet::Now => now,
            TimeSet::At(t) => t,
        };
        if let Some(t) = set.atime {
            ino.atime = pick(t);
        }
        if let Some(t) = set.mtime {
            ino.mtime = pick(t);
        }
        ino.ctime = now;
        save(&tx, obj, &ino)?;
        let info = tx.info(obj)?;
        drop(tx);
        self.attr_of(obj, &ino, &info)
    }

    /// An object's record size is fixed once it is larger than one record, so
    /// before a single-record file is extended without a write (truncate up,
    /// fallocate) its record is grown to the dataset's record size, as a write
    /// would have done: a zero byte at the end of that first record. Without this
    /// a file created by ftruncate/fallocate would keep 512-byte records.
    fn grow_record_before_extend<W: ObjWrite + ?Sized>(
        &self,
        w: &W,
        obj: u64,
        info: &ObjectInfo,
        new_size: u64,
    ) -> Result<()> {
        let recordsize = self.ds.objset().props().recordsize as u64;
        if info.size > info.blksz as u64 || info.blksz as u64 >= recordsize {
            return Ok(());
        }
        let target = new_size.min(recordsize);
        if target > info.size {
            w.write(obj, target - 1, &[0])?;
        }
        Ok(())
    }

    /// Count an open of `obj` (an unlinked file stays until its last close).
    pub fn open(&self, obj: u64) -> Result<Attr> {
        let _ns = self.ns.read();
        let a = self.getattr(obj)?;
        *self.open_counts.lock().entry(obj).or_insert(0) += 1;
        Ok(a)
    }

    /// The last close of an unlinked file deletes it.
    pub fn release(&self, obj: u64) -> Result<()> {
        let _ns = self.ns.write();
        {
            let mut oc = self.open_counts.lock();
            match oc.get_mut(&obj) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    return Ok(());
                }
                Some(_) => {
                    oc.remove(&obj);
                }
                None => return Ok(()),
            }
        }
        let _g = self.lock_inodes(&[obj]);
        let (ino, _) = match load(&*self.ds, obj) {
            Ok(x) => x,
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(e),
        };
        if ino.nlink == 0 {
            let tx = self.begin(0)?;
            self.destroy_inode(&tx, obj, &ino)?;
            crate::orphan::remove(&tx, self.orphans, obj)?;
        }
        Ok(())
    }

    pub(crate) fn is_open(&self, obj: u64) -> bool {
        self.open_counts.lock().contains_key(&obj)
    }

    /// Delete an inode's objects (its data and its xattr object).
    pub(crate) fn destroy_inode<W: ObjWrite + ?Sized>(
        &self,
        w: &W,
        obj: u64,
        ino: &Inode,
    ) -> Result<()> {
        if ino.xattr_obj != 0 {
            match w.delete_object(ino.xattr_obj) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => return Err(e),
            }
        }
        w.delete_object(obj)
    }

    /// Read file data (short at the end of the file). Updates atime as relatime
    /// does: when it is older than mtime or ctime, or a day old.
    pub fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        let data = self.ds.read(obj, off, len)?;
        let _ = self.touch_atime(obj);
        Ok(data)
    }

    /// `read` with the records it covers shared, not copied: a reply can be
    /// sent from them (a 16K read of a 16K record is the record itself).
    pub fn read_payload(&self, obj: u64, off: u64, len: usize) -> Result<Payload<'static>> {
        let data = self
            .ds
            .read_payload(obj, off, len, ReadFrom::Anywhere)?
            .unwrap_or_default(); // only a `Memory` read gives None
        let _ = self.touch_atime(obj);
        Ok(data)
    }

    fn touch_atime(&self, obj: u64) -> Result<()> {
        if self.is_readonly() {
            return Ok(());
        }
        let (ino, _) = load(&*self.ds, obj)?;
        let now = Timespec::now();
        if ino.atime > ino.mtime && ino.atime > ino.ctime && now.sec - ino.atime.sec < 86400 {
            return Ok(());
        }
        let _g = self.lock_inodes(&[obj]);
        let (mut ino, _) = load(&*self.ds, obj)?;
        ino.atime = now;
        self.ds.set_bonus(obj, &ino.encode())?;
        Ok(())
    }

    /// Write file data; `kill_suid` drops set-user/group-id bits (a write by
    /// someone other than root, as the kernel asks). Owned pieces of `data`
    /// that are exactly a record of the file (read in [`Fs::record_size`]
    /// pieces at the file offset) become the records without a copy.
    pub fn write<'a>(
        &self,
        obj: u64,
        off: u64,
        data: impl Into<Payload<'a>>,
        kill_suid: bool,
    ) -> Result<usize> {
        Ok(self.write_dropping_privs(obj, off, data, kill_suid)?.0)
    }

    /// The dataset's record size: the block size of files of more than one
    /// block, and so the piece size in which a frontend reads a write's data.
    pub fn record_size(&self) -> u64 {
        self.ds.objset().props().recordsize as u64
    }

    /// `write`, also saying whether it dropped set-user/group-id bits (a frontend
    /// that caches attributes must then forget the old mode).
    pub fn write_dropping_privs<'a>(
        &self,
        obj: u64,
        off: u64,
        data: impl Into<Payload<'a>>,
        kill_suid: bool,
    ) -> Result<(usize, bool)> {
        let data = data.into();
        let end = off.checked_add(data.len() as u64).ok_or(Errno::EFBIG)?;
        if end > MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        self.write_data(obj, off, &data)?;
        let dropped = self.touch_modified(obj, kill_suid)?;
        Ok((data.len(), dropped))
    }

    /// Set mtime and ctime to now. Like the kernel's coarse clock for file times,
    /// an update within `TIME_GRANULARITY_NS` of the stored times is skipped, so a
    /// stream of writes does not rewrite the inode each time.
    /// True if it dropped set-user/group-id bits.
    fn touch_modified(&self, obj: u64, kill_suid: bool) -> Result<bool> {
        let now = Timespec::now();
        let (ino, _) = load(&*self.ds, obj)?;
        if ino.xattr_obj != 0 {
            self.drop_capability(obj)?;
        }
        let privileged = |m: u32| {
            m & libc::S_ISUID != 0
                || m & (libc::S_ISGID | libc::S_IXGRP) == libc::S_ISGID | libc::S_IXGRP
        };
        let kill_suid = kill_suid && privileged(ino.mode);
        if !kill_suid && fresh(ino.mtime, now) && fresh(ino.ctime, now) {
            return Ok(false);
        }
        let _g = self.lock_inodes(&[obj]);
        let (mut ino, _) = load(&*self.ds, obj)?;
        ino.mtime = now;
        ino.ctime = now;
        if kill_suid {
            ino.mode &= !libc::S_ISUID;
            if ino.mode & libc::S_IXGRP != 0 {
                ino.mode &= !libc::S_ISGID;
            }
        }
        self.ds.set_bonus(obj, &ino.encode())?;
        Ok(kill_suid)
    }

    /// Remove the file capabilities (security.capability) of `obj`, as the
    /// kernel does on any write, truncate or chown (cap_inode_killpriv, whoever
    /// the caller): under FUSE_HANDLE_KILLPRIV_V2 it is the server's job. Costs
    /// nothing for a file without extended attributes.
    fn drop_capability(&self, obj: u64) -> Result<()> {
        let (ino, _) = load(&*self.ds, obj)?;
        if ino.xattr_obj == 0 {
            return Ok(());
        }
        match self.removexattr(obj, b"security.capability") {
            Ok(()) | Err(Errno::ENODATA) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// fallocate: mode 0 extends the size (copy-on-write cannot reserve blocks, so
    /// it checks that the space is available now), KEEP_SIZE alone does nothing,
    /// PUNCH_HOLE|KEEP_SIZE and ZERO_RANGE write zeros (stored as holes when
    /// compression is on).
    pub fn fallocate(&self, obj: u64, off: u64, len: u64, mode: i32) -> Result<()> {
        let end = off.checked_add(len).ok_or(Errno::EFBIG)?;
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        if end > MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        let (ino, info) = load(&*self.ds, obj)?;
        if ino.kind() != Some(FileKind::Regular) {
            return Err(Errno::ENODEV);
        }
        let keep = mode & FALLOC_FL_KEEP_SIZE != 0;
        match mode & !FALLOC_FL_KEEP_SIZE {
            0 => {
                if end > info.size {
                    if self.statfs()?.bavail * 4096 < end - info.size {
                        return Err(Errno::ENOSPC);
                    }
                    if !keep {
                        self.setattr(
                            obj,
                            &SetAttr {
                                size: Some(end),
                                ..Default::default()
                            },
                        )?;
                    }
                }
                Ok(())
            }
            FALLOC_FL_PUNCH_HOLE if keep => {
                // Whole records become holes (their blocks are freed, so st_blocks
                // and SEEK_HOLE see it); partial records are zeroed in place.
                let stop = end.min(info.size);
                if stop > off {
                    self.ds.punch(obj, off, stop - off)?;
                }
                self.touch_modified(obj, false).map(|_| ())
            }
            FALLOC_FL_ZERO_RANGE => {
                let stop = if keep { end.min(info.size) } else { end };
                self.write_zeros(obj, off, stop)
            }
            _ => Err(Errno::EOPNOTSUPP),
        }
    }

    fn write_zeros(&self, obj: u64, mut off: u64, end: u64) -> Result<()> {
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK as usize];
        while off < end {
            let n = (end - off).min(CHUNK - off % CHUNK);
            self.write_data(obj, off, &Payload::from(&zeros[..n as usize]))?;
            off += n;
        }
        self.touch_modified(obj, false).map(|_| ())
    }

    /// Space of the dataset: what it uses and what it may still use (quota and
    /// reservations of others included).
    pub fn statfs(&self) -> Result<StatFs> {
        let name = self.ds.name();
        let info = self
            .store
            .list(Some(&name), false)?
            .into_iter()
            .next()
            .ok_or(Errno::EIO)?;
        let bsize = 4096u64;
        let total = info.used + info.available;
        Ok(StatFs {
            bsize: bsize as u32,
            blocks: total / bsize,
            bfree: info.available / bsize,
            bavail: info.available / bsize,
            files: (total / 512).max(1 << 20),
            ffree: (info.available / 512).max(1),
            namelen: dir::MAX_NAME as u32,
        })
    }

    /// lseek(SEEK_DATA / SEEK_HOLE) from the block tree (and the records not yet
    /// synced): the start of the first data, or hole, at or after `off`. Data is
    /// reported per record (a hole smaller than a record reads as data, as POSIX
    /// allows); the end of the file is a hole. ENXIO at or past the end, and for
    /// SEEK_DATA when only holes follow.
    pub fn seek_data_hole(&self, obj: u64, off: u64, whence: i32) -> Result<u64> {
        let (_, info) = load(&*self.ds, obj)?;
        if off >= info.size {
            return Err(Errno::ENXIO);
        }
        let want_data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return Err(Errno::EINVAL),
        };
        let bs = info.blksz.max(1) as u64;
        let runs = self
            .ds
            .objset()
            .allocation_runs(obj, off / bs, (info.size - 1) / bs)
            .map_err(StoreError::from)?;
        for (first, n, data) in runs {
            let end = first.saturating_add(n).saturating_mul(bs);
            if data == want_data && end > off {
                return Ok((first * bs).max(off).min(info.size));
            }
        }
        if want_data {
            Err(Errno::ENXIO)
        } else {
            Ok(info.size)
        }
    }

    /// Make every change so far durable: one intent-log commit (shared with
    /// concurrent callers), whatever changed. Namespace changes and setattr run
    /// in a `Tx`, which the dataset logs as one atomic group, so an fsync after a
    /// rename or of a directory never waits for a transaction group.
    pub fn fsync(&self) -> Result<()> {
        if self.is_readonly() {
            return Ok(());
        }
        Ok(self.ds.fsync()?)
    }

    pub fn readlink(&self, obj: u64) -> Result<Vec<u8>> {
        let (ino, info) = load(&*self.ds, obj)?;
        if ino.kind() != Some(FileKind::Symlink) {
            return Err(Errno::EINVAL);
        }
        Ok(self.ds.read(obj, 0, info.size as usize)?)
    }
}
