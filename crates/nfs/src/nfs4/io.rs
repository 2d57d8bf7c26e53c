//! NFSv4.1 operations that open, read, write and change files: OPEN, CLOSE,
//! OPEN_DOWNGRADE, READ, WRITE, COMMIT, SETATTR, CREATE, REMOVE, RENAME,
//! LINK, TEST_STATEID, FREE_STATEID, and the byte-range locks LOCK, LOCKT,
//! LOCKU.
//!
//! Invariants:
//! - Data and namespace changes go through the NFSv3 code's cores
//!   (`procs::read_in`/`write_in`/`commit_in`, `ns::*_in`, `check_setattr`),
//!   so permissions, the intent log (UNSTABLE writes, COMMIT, FILE_SYNC) and
//!   metadata durability behave the same in both versions.
//! - READ, WRITE and a size-changing SETATTR present a stateid that
//!   `locks::Table::check_io` accepts; the "current stateid" (seqid 1, other 0)
//!   is the one the previous operation of the COMPOUND produced.
//! - Outside the grace period reclaims are NO_GRACE; inside it, new opens and
//!   locks are GRACE (section 8.4.2), so a rebooted server's clients get their
//!   locks back before anyone else can take them.

use super::attrs::{self, bitmap_of, write_bitmap};
use super::consts::*;
use super::files::{check_name, OpResult};
use super::locks::{range_end, FileKey, Kind, OPEN4_SHARE_ACCESS_READ, OPEN4_SHARE_ACCESS_WRITE};
use super::ops::{Claim, CreateHow, CreateType, Fattr4, Locker, OpenArgs, Stateid};
use super::pseudo::Fh;
use super::Compound;
use crate::nfs3::args::{CreateHow as CreateHow3, MknodWhat, Sattr};
use crate::nfs3::ns::{self, DirCtx};
use crate::nfs3::procs::{self, check_setattr, to_setattr};
use crate::nfs3::{may_io, Node, Target, MAY_READ, MAY_WRITE};
use crate::xdr::Writer;
use cachalot_datasets::Payload;
use cachalot_posix::FileKind;

const OPEN4_RESULT_LOCKTYPE_POSIX: u32 = 4;
const FILE_SYNC4: u32 = 2;

pub fn file_key(n: &Node) -> FileKey {
    (n.export.pool_guid, n.export.ds_id, n.handle.obj)
}

pub(crate) fn write_stateid(w: &mut Writer, s: &Stateid) {
    w.u32(s.seqid).fixed(&s.other);
}

/// change_info4 of a directory change.
fn cinfo(w: &mut Writer, before: u64, after: u64) {
    w.bool(false).u64(before).u64(after);
}

impl Compound<'_, '_> {
    fn clientid(&self) -> Result<u64, u32> {
        self.session
            .as_ref()
            .map(|s| s.clientid)
            .ok_or(NFS4ERR_OP_NOT_IN_SESSION)
    }

    /// The stateid meant: the current one for the special (1, 0).
    fn sid(&self, s: &Stateid) -> Result<Stateid, u32> {
        if s.seqid == 1 && s.other == [0; 12] {
            return self.cur_sid.ok_or(NFS4ERR_BAD_STATEID);
        }
        Ok(*s)
    }

    /// The current node as a directory the caller may change.
    fn dir(&self) -> Result<DirCtx, u32> {
        let n = self.real()?;
        DirCtx::open(self.ctx, &n.handle.encode()).map_err(|e| e.0)
    }

    fn dir_change(d: &DirCtx) -> u64 {
        d.fs.getattr(d.pre.ino).map_or(0, |a| attrs::change(&a))
    }

    pub fn open(&mut self, a: &OpenArgs<'_>, w: &mut Writer) -> OpResult {
        let clientid = self.clientid()?;
        let access = a.share_access & 3;
        if access == 0 || a.share_deny > 3 {
            return Err(NFS4ERR_INVAL);
        }
        let reclaim = matches!(a.claim, Claim::Previous(_));
        self.st.grace_check(clientid, reclaim)?;
        let (node, before, after, attrset, created) = match &a.claim {
            Claim::Null(name) => self.open_named(name, a)?,
            Claim::Fh | Claim::Previous(_) => (self.real()?, 0, 0, vec![], false),
            _ => return Err(NFS4ERR_NOTSUPP),
        };
        let Target::Obj(_, at) = &node.target else {
            return Err(NFS4ERR_ISDIR);
        };
        match at.kind {
            FileKind::Regular => {}
            FileKind::Directory => return Err(NFS4ERR_ISDIR),
            FileKind::Symlink => return Err(NFS4ERR_SYMLINK),
            _ => return Err(NFS4ERR_WRONG_TYPE),
        }
        if access & OPEN4_SHARE_ACCESS_WRITE != 0 {
            node.writable()?;
        }
        if !created {
            if access & OPEN4_SHARE_ACCESS_READ != 0 && !may_io(at, &node.user, MAY_READ) {
                return Err(NFS4ERR_ACCESS);
            }
            if access & OPEN4_SHARE_ACCESS_WRITE != 0 && !may_io(at, &node.user, MAY_WRITE) {
                return Err(NFS4ERR_ACCESS);
            }
        }
        let boot = self.st.boot;
        let sid = self.st.with_table(|t| {
            t.open(
                boot,
                clientid,
                a.owner,
                file_key(&node),
                access,
                a.share_deny,
            )
        })?;
        if reclaim {
            self.st.note_lock(self.ctx.client_name, "reclaim");
        }
        write_stateid(w, &sid);
        cinfo(w, before, after);
        w.u32(OPEN4_RESULT_LOCKTYPE_POSIX);
        write_bitmap(w, &attrset);
        w.u32(0); // OPEN_DELEGATE_NONE
        self.cur = Some(Fh::Real(node.handle));
        self.cur_sid = Some(sid);
        Ok(())
    }

    /// OPEN by name in the current directory, creating if asked: the file,
    /// the directory's change before and after, the attributes set, and
    /// whether this call created it.
    fn open_named(
        &self,
        name: &[u8],
        a: &OpenArgs<'_>,
    ) -> Result<(Node, u64, u64, Vec<u32>, bool), u32> {
        let name = check_name(name)?.as_bytes();
        let Some(how) = &a.create else {
            let dir = self.real()?;
            let before = dir.attr().map_or(0, |x| attrs::change(&x));
            let f = crate::nfs3::dirs::find(self.ctx, &dir, name)?;
            if let Target::Obj(_, da) = &dir.target {
                self.ctx.named(f.attr.ino, da.ino, name);
            }
            let n = self.ctx.resolve(&f.handle.encode())?;
            return Ok((n, before, before, vec![], false));
        };
        let d = self.dir()?;
        let before = attrs::change(&d.pre);
        let existed = d.fs.lookup(d.pre.ino, name).is_ok();
        let (how3, rest, mask) = match how {
            CreateHow::Unchecked(f) => (
                CreateHow3::Unchecked(decode_sattr(f)?),
                None,
                f.mask.clone(),
            ),
            CreateHow::Guarded(f) => (CreateHow3::Guarded(decode_sattr(f)?), None, f.mask.clone()),
            CreateHow::Exclusive(v) => (CreateHow3::Exclusive(*v), None, vec![]),
            CreateHow::Exclusive41(v, f) => (
                CreateHow3::Exclusive(*v),
                Some(decode_sattr(f)?),
                f.mask.clone(),
            ),
        };
        let mut attr = ns::create_in(&d, name, how3)?;
        if let (Some(s), false) = (rest, existed) {
            // Exclusive create keeps the verifier in the times: set the rest.
            let s = Sattr {
                atime: None,
                mtime: None,
                ..s
            };
            if s != Sattr::default() {
                attr =
                    d.fs.setattr(attr.ino, &to_setattr(&s))
                        .map_err(crate::nfs3::status)?;
            }
        }
        d.durable()?;
        self.ctx.named(attr.ino, d.pre.ino, name);
        let after = Self::dir_change(&d);
        let n = self.ctx.resolve(&d.node.child(&attr).encode())?;
        let set = if existed {
            vec![]
        } else {
            let bits = attrs::SETTABLE
                .iter()
                .copied()
                .filter(|b| attrs::has(&mask, *b));
            bitmap_of(bits)
        };
        Ok((n, before, after, set, !existed))
    }

    pub fn close(&mut self, sid: &Stateid, w: &mut Writer) -> OpResult {
        let clientid = self.clientid()?;
        let sid = self.sid(sid)?;
        let boot = self.st.boot;
        let out = self.st.with_table(|t| t.close(&sid, boot, clientid))?;
        write_stateid(w, &out);
        self.cur_sid = Some(out);
        Ok(())
    }

    pub fn open_downgrade(
        &mut self,
        sid: &Stateid,
        access: u32,
        deny: u32,
        w: &mut Writer,
    ) -> OpResult {
        let clientid = self.clientid()?;
        let sid = self.sid(sid)?;
        let boot = self.st.boot;
        let out = self
            .st
            .with_table(|t| t.downgrade(&sid, boot, clientid, access & 3, deny))?;
        write_stateid(w, &out);
        self.cur_sid = Some(out);
        Ok(())
    }

    /// The current node as a regular file the stateid allows I/O on.
    fn io_node(&self, sid: &Stateid, write: bool) -> Result<Node, u32> {
        let n = self
            .real()
            .map_err(|e| if e == NFS4ERR_ROFS { NFS4ERR_ISDIR } else { e })?;
        match &n.target {
            Target::Obj(_, a) if a.kind == FileKind::Regular => {}
            Target::Obj(_, a) if a.kind == FileKind::Symlink => return Err(NFS4ERR_SYMLINK),
            Target::Obj(_, a) if a.kind != FileKind::Directory => return Err(NFS4ERR_INVAL),
            _ => return Err(NFS4ERR_ISDIR),
        }
        let sid = self.sid(sid)?;
        let boot = self.st.boot;
        self.st
            .with_table(|t| t.check_io(&sid, boot, file_key(&n), write))?;
        Ok(n)
    }

    pub fn read(&self, sid: &Stateid, off: u64, count: u32, w: &mut Writer) -> OpResult {
        let n = self.io_node(sid, false)?;
        let data = procs::read_in(&n, off, count)?;
        // The size read_in clamped to (the attributes the handle resolved to
        // in this COMPOUND), as NFSv3 READ does: a second getattr cost a
        // quarter of a small READ.
        let size = n.attr().map_or(0, |a| a.size);
        self.ctx.note.borrow_mut().bytes = data.len() as u64;
        w.bool(off.saturating_add(data.len() as u64) >= size)
            .opaque(&data);
        Ok(())
    }

    pub fn write(
        &self,
        sid: &Stateid,
        off: u64,
        stable: u32,
        data: Payload<'_>,
        w: &mut Writer,
    ) -> OpResult {
        let n = self.io_node(sid, true)?;
        let len = procs::write_in(&n, off, stable, data)?;
        self.ctx.note.borrow_mut().bytes = len as u64;
        let committed = if stable == procs::UNSTABLE {
            0
        } else {
            FILE_SYNC4
        };
        w.u32(len as u32).u32(committed).fixed(&self.ctx.write_verf);
        Ok(())
    }

    pub fn commit(&self, w: &mut Writer) -> OpResult {
        let n = self.real()?;
        if let Target::Obj(_, a) = &n.target {
            if a.kind == FileKind::Directory {
                return Err(NFS4ERR_ISDIR);
            }
        }
        procs::commit_in(&n)?;
        w.fixed(&self.ctx.write_verf);
        Ok(())
    }

    pub fn setattr(&self, sid: &Stateid, f: &Fattr4<'_>, w: &mut Writer) -> OpResult {
        let n = self.real()?;
        let s = decode_sattr(f)?;
        n.writable()?;
        let (fs, a) = n.obj()?;
        if s.size.is_some() {
            if a.kind != FileKind::Regular {
                return Err(if a.kind == FileKind::Directory {
                    NFS4ERR_ISDIR
                } else {
                    NFS4ERR_INVAL
                });
            }
            let sid = self.sid(sid)?;
            let boot = self.st.boot;
            self.st
                .with_table(|t| t.check_io(&sid, boot, file_key(&n), true))?;
        }
        check_setattr(a, &n.user, &s)?;
        fs.setattr(a.ino, &to_setattr(&s))
            .map_err(crate::nfs3::status)?;
        n.commit_metadata(fs).map_err(crate::nfs3::status)?;
        let bits = attrs::SETTABLE
            .iter()
            .copied()
            .filter(|b| attrs::has(&f.mask, *b));
        write_bitmap(w, &bitmap_of(bits));
        Ok(())
    }

    pub fn create(
        &mut self,
        kind: &CreateType<'_>,
        name: &[u8],
        f: &Fattr4<'_>,
        w: &mut Writer,
    ) -> OpResult {
        let d = self.dir()?;
        let name = check_name(name)?.as_bytes();
        let s = decode_sattr(f)?;
        let before = attrs::change(&d.pre);
        let a = match kind {
            CreateType::Dir => ns::mkdir_in(&d, name, &s)?,
            CreateType::Link(target) => ns::symlink_in(&d, name, &s, target)?,
            CreateType::Block(ma, mi) => {
                ns::mknod_in(&d, name, MknodWhat::Block(s.clone(), *ma, *mi))?
            }
            CreateType::Char(ma, mi) => {
                ns::mknod_in(&d, name, MknodWhat::Char(s.clone(), *ma, *mi))?
            }
            CreateType::Socket => ns::mknod_in(&d, name, MknodWhat::Socket(s.clone()))?,
            CreateType::Fifo => ns::mknod_in(&d, name, MknodWhat::Fifo(s.clone()))?,
            CreateType::Other(_) => return Err(NFS4ERR_BADTYPE),
        };
        d.durable()?;
        self.ctx.named(a.ino, d.pre.ino, name);
        cinfo(w, before, Self::dir_change(&d));
        let bits = attrs::SETTABLE
            .iter()
            .copied()
            .filter(|b| attrs::has(&f.mask, *b));
        write_bitmap(w, &bitmap_of(bits));
        self.cur = Some(Fh::Real(d.node.child(&a)));
        Ok(())
    }

    pub fn remove(&self, name: &[u8], w: &mut Writer) -> OpResult {
        let d = self.dir()?;
        let name = check_name(name)?.as_bytes();
        let victim = d.fs.lookup(d.pre.ino, name).map_err(crate::nfs3::status)?;
        ns::remove_in(&d, name, victim.kind == FileKind::Directory)?;
        cinfo(w, attrs::change(&d.pre), Self::dir_change(&d));
        Ok(())
    }

    pub fn rename(&self, old: &[u8], new: &[u8], w: &mut Writer) -> OpResult {
        let saved = self.saved.clone().ok_or(NFS4ERR_NOFILEHANDLE)?;
        let to = self.dir()?;
        let from = match saved.resolve(self.ctx)? {
            super::pseudo::Resolved::Real(n) => {
                DirCtx::open(self.ctx, &n.handle.encode()).map_err(|e| e.0)?
            }
            super::pseudo::Resolved::Pseudo(_) => return Err(NFS4ERR_XDEV),
        };
        let old = check_name(old)?.as_bytes();
        let new = check_name(new)?.as_bytes();
        ns::rename_in(&from, old, &to, new)?;
        cinfo(w, attrs::change(&from.pre), Self::dir_change(&from));
        cinfo(w, attrs::change(&to.pre), Self::dir_change(&to));
        Ok(())
    }

    pub fn link(&self, name: &[u8], w: &mut Writer) -> OpResult {
        let saved = self.saved.clone().ok_or(NFS4ERR_NOFILEHANDLE)?;
        let file = match saved.resolve(self.ctx)? {
            super::pseudo::Resolved::Real(n) => *n,
            super::pseudo::Resolved::Pseudo(_) => return Err(NFS4ERR_ISDIR),
        };
        if let Target::Obj(_, a) = &file.target {
            if a.kind == FileKind::Directory {
                return Err(NFS4ERR_ISDIR);
            }
        }
        let d = self.dir()?;
        let name = check_name(name)?.as_bytes();
        ns::link_in(&file, &d, name)?;
        cinfo(w, attrs::change(&d.pre), Self::dir_change(&d));
        Ok(())
    }

    pub fn test_stateid(&self, sids: &[Stateid], w: &mut Writer) -> OpResult {
        let clientid = self.clientid()?;
        let boot = self.st.boot;
        w.u32(sids.len() as u32);
        self.st.with_table(|t| {
            for s in sids {
                let st = match t.get(s, boot) {
                    Ok(r) if r.clientid == clientid => NFS4_OK,
                    Ok(_) => NFS4ERR_BAD_STATEID,
                    Err(e) => e,
                };
                w.u32(st);
            }
        });
        Ok(())
    }

    pub fn free_stateid(&self, sid: &Stateid) -> OpResult {
        let clientid = self.clientid()?;
        let sid = self.sid(sid)?;
        let boot = self.st.boot;
        self.st.with_table(|t| {
            let r = t.get(&sid, boot)?;
            if r.clientid != clientid {
                return Err(NFS4ERR_BAD_STATEID);
            }
            match &r.kind {
                Kind::Lock { ranges, .. } if ranges.is_empty() => {
                    t.map.remove(&sid.other);
                    Ok(())
                }
                _ => Err(NFS4ERR_LOCKS_HELD),
            }
        })
    }
}

fn settime(r: &mut crate::xdr::Reader<'_>) -> Result<cachalot_posix::TimeSet, u32> {
    let bad = |_| NFS4ERR_BADXDR;
    match r.u32().map_err(bad)? {
        0 => Ok(cachalot_posix::TimeSet::Now),
        1 => {
            let sec = r.u64().map_err(bad)? as i64;
            let nsec = r.u32().map_err(bad)?;
            if nsec >= 1_000_000_000 {
                return Err(NFS4ERR_INVAL);
            }
            Ok(cachalot_posix::TimeSet::At(cachalot_posix::Timespec {
                sec,
                nsec,
            }))
        }
        _ => Err(NFS4ERR_BADXDR),
    }
}

/// The attributes a SETATTR, CREATE or OPEN asks to set. A supported but
/// read-only attribute is INVAL, an unsupported one ATTRNOTSUPP.
pub fn decode_sattr(f: &Fattr4<'_>) -> Result<Sattr, u32> {
    let mut r = crate::xdr::Reader::new(f.vals);
    let mut s = Sattr::default();
    let bad = |_| NFS4ERR_BADXDR;
    for bit in 0..(f.mask.len() as u32 * 32) {
        if !attrs::has(&f.mask, bit) {
            continue;
        }
        match bit {
            attrs::FATTR4_SIZE => s.size = Some(r.u64().map_err(bad)?),
            attrs::FATTR4_MODE => s.mode = Some(r.u32().map_err(bad)? & 0o7777),
            attrs::FATTR4_OWNER => {
                s.uid = Some(attrs::parse_owner(r.string(1024).map_err(bad)?, false)?)
            }
            attrs::FATTR4_OWNER_GROUP => {
                s.gid = Some(attrs::parse_owner(r.string(1024).map_err(bad)?, true)?)
            }
            attrs::FATTR4_TIME_ACCESS_SET => s.atime = Some(settime(&mut r)?),
            attrs::FATTR4_TIME_MODIFY_SET => s.mtime = Some(settime(&mut r)?),
            b if attrs::SUPPORTED.contains(&b) => return Err(NFS4ERR_INVAL),
            _ => return Err(NFS4ERR_ATTRNOTSUPP),
        }
    }
    if r.remaining() != 0 {
        return Err(NFS4ERR_BADXDR);
    }
    Ok(s)
}

/// lock4denied.
fn denied(w: &mut Writer, d: &super::locks::Denied) {
    w.u64(d.offset)
        .u64(d.length)
        .u32(if d.write { 2 } else { 1 })
        .u64(d.clientid)
        .opaque(&d.owner);
}

fn lock_write(locktype: u32) -> Result<bool, u32> {
    match locktype {
        1 | 3 => Ok(false),
        2 | 4 => Ok(true),
        _ => Err(NFS4ERR_INVAL),
    }
}

impl Compound<'_, '_> {
    #[allow(clippy::too_many_arguments)]
    pub fn lock(
        &mut self,
        locktype: u32,
        reclaim: bool,
        offset: u64,
        length: u64,
        locker: &Locker<'_>,
        w: &mut Writer,
    ) -> OpResult {
        let clientid = self.clientid()?;
        let write = lock_write(locktype)?;
        let end = range_end(offset, length)?;
        let n = self.real()?;
        self.st.grace_check(clientid, reclaim)?;
        let boot = self.st.boot;
        let client = self.ctx.client_name;
        let res = self.st.with_table(|t| {
            let other = match locker {
                Locker::New {
                    open_stateid,
                    owner,
                    ..
                } => {
                    let open = self.sid(open_stateid)?;
                    t.lock_stateid(boot, &open, clientid, owner)?
                }
                Locker::Existing { lock_stateid, .. } => {
                    let sid = self.sid(lock_stateid)?;
                    let r = t.get(&sid, boot)?;
                    if r.clientid != clientid || !matches!(r.kind, Kind::Lock { .. }) {
                        return Err(NFS4ERR_BAD_STATEID);
                    }
                    sid.other
                }
            };
            let r = t.map.get(&other).ok_or(NFS4ERR_BAD_STATEID)?.clone();
            if r.file != file_key(&n) {
                return Err(NFS4ERR_BAD_STATEID);
            }
            if let Kind::Lock { open, .. } = &r.kind {
                if let Some(Kind::Open { access, .. }) = t.map.get(open).map(|o| &o.kind) {
                    if write && access & OPEN4_SHARE_ACCESS_WRITE == 0 {
                        return Err(NFS4ERR_OPENMODE);
                    }
                }
            }
            if let Some(d) = t.conflict(r.file, clientid, &r.owner, offset, end, write) {
                return Ok(Err(d));
            }
            t.set_range(&other, offset, end, Some(write)).map(Ok)
        })?;
        match res {
            Ok(sid) => {
                self.st
                    .note_lock(client, if reclaim { "reclaim" } else { "grant" });
                write_stateid(w, &sid);
                self.cur_sid = Some(sid);
                Ok(())
            }
            Err(d) => {
                self.st.note_lock(client, "conflict");
                denied(w, &d);
                Err(NFS4ERR_DENIED)
            }
        }
    }

    pub fn lockt(
        &self,
        locktype: u32,
        offset: u64,
        length: u64,
        owner: &[u8],
        w: &mut Writer,
    ) -> OpResult {
        let clientid = self.clientid()?;
        let write = lock_write(locktype)?;
        let end = range_end(offset, length)?;
        let n = self.real()?;
        if let Target::Obj(_, a) = &n.target {
            if a.kind == FileKind::Directory {
                return Err(NFS4ERR_ISDIR);
            }
        }
        self.st.grace_check(clientid, false)?;
        let found = self
            .st
            .with_table(|t| t.conflict(file_key(&n), clientid, owner, offset, end, write));
        match found {
            None => Ok(()),
            Some(d) => {
                denied(w, &d);
                Err(NFS4ERR_DENIED)
            }
        }
    }

    pub fn locku(
        &mut self,
        locktype: u32,
        sid: &Stateid,
        offset: u64,
        length: u64,
        w: &mut Writer,
    ) -> OpResult {
        let clientid = self.clientid()?;
        lock_write(locktype)?;
        let end = range_end(offset, length)?;
        let sid = self.sid(sid)?;
        let boot = self.st.boot;
        let out = self.st.with_table(|t| {
            let r = t.get(&sid, boot)?;
            if r.clientid != clientid || !matches!(r.kind, Kind::Lock { .. }) {
                return Err(NFS4ERR_BAD_STATEID);
            }
            t.set_range(&sid.other, offset, end, None)
        })?;
        write_stateid(w, &out);
        self.cur_sid = Some(out);
        Ok(())
    }
}
