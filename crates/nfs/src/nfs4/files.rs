//! NFSv4.1 operations on the current file handle that read the namespace:
//! PUTROOTFH, PUTPUBFH, PUTFH, GETFH, SAVEFH, RESTOREFH, LOOKUP, LOOKUPP,
//! ACCESS, GETATTR, VERIFY, NVERIFY, READDIR, READLINK, SECINFO,
//! SECINFO_NO_NAME.
//!
//! Invariants:
//! - Real nodes are resolved, checked and searched by the NFSv3 code
//!   (`nfs3::Ctx::resolve`, `dirs::find`, `dirs::entries`,
//!   `procs::access_bits`), so both versions apply the same share, squash and
//!   permission rules; the NFSv3 status numbers those return are the same
//!   numbers in NFSv4 (NOENT 2 ... BADHANDLE 10001, BAD_COOKIE 10003).
//! - An operation that needs a current file handle and has none fails with
//!   NOFILEHANDLE; SECINFO and SECINFO_NO_NAME consume it (section 2.6.3.1.1.8).
//! - READDIR never returns "." or "..", nor the reserved cookies 1 and 2, and
//!   its reply stays within maxcount (TOOSMALL when no entry fits).

use super::attrs::{self, Subject};
use super::consts::*;
use super::ops::Fattr4;
use super::pseudo::{self, Fh, Resolved};
use super::Compound;
use crate::nfs3::dirs;
use crate::nfs3::procs::access_bits;
use crate::nfs3::{Node, Target};
use crate::xdr::Writer;
use cachalot_posix::{Attr, FileKind, Timespec};

pub type OpResult = Result<(), u32>;

/// A directory entry's handle and node, or why it has none.
type Entry = Result<(Fh, Resolved), u32>;

/// Check a component name (section 14.2): UTF-8, not empty, no "/", at most
/// NAME_MAX bytes, not "." or "..".
pub fn check_name(name: &[u8]) -> Result<&str, u32> {
    let s = std::str::from_utf8(name).map_err(|_| NFS4ERR_INVAL)?;
    if s.is_empty() {
        return Err(NFS4ERR_INVAL);
    }
    if s.len() > cachalot_posix::dir::MAX_NAME {
        return Err(NFS4ERR_NAMETOOLONG);
    }
    if s == "." || s == ".." || s.contains('/') || s.contains('\0') {
        return Err(NFS4ERR_BADNAME);
    }
    Ok(s)
}

fn pseudo_attr(p: &str, boot: i64) -> Attr {
    dirs::read_only_dir(pseudo::path_id(p), Timespec { sec: boot, nsec: 0 })
}

/// Is `n` the live root of its share?
fn is_share_root(n: &Node) -> bool {
    n.handle.snap_guid == 0 && matches!(&n.target, Target::Obj(fs, a) if a.ino == fs.root())
}

impl Compound<'_, '_> {
    pub fn cur(&self) -> Result<&Fh, u32> {
        self.cur.as_ref().ok_or(NFS4ERR_NOFILEHANDLE)
    }

    pub fn resolved(&self) -> Result<Resolved, u32> {
        if let Some(r) = self.putfh_resolved.borrow_mut().take() {
            return Ok(r);
        }
        self.cur()?.resolve(self.ctx)
    }

    /// The current node, which must be real (not a pseudo directory).
    pub fn real(&self) -> Result<Node, u32> {
        match self.resolved()? {
            Resolved::Real(n) => Ok(*n),
            Resolved::Pseudo(_) => Err(NFS4ERR_ROFS),
        }
    }

    pub fn putfh(&mut self, b: &[u8]) -> OpResult {
        let (fh, r) = Fh::decode_resolve(self.ctx, b)?;
        self.cur = Some(fh);
        *self.putfh_resolved.borrow_mut() = Some(r);
        Ok(())
    }

    pub fn getfh(&self, w: &mut Writer) -> OpResult {
        w.opaque(&self.cur()?.encode());
        Ok(())
    }

    pub fn restorefh(&mut self) -> OpResult {
        let s = self.saved.clone().ok_or(NFS4ERR_RESTOREFH)?;
        self.cur = Some(s);
        Ok(())
    }

    pub fn savefh(&mut self) -> OpResult {
        self.saved = Some(self.cur()?.clone());
        Ok(())
    }

    pub fn subject<'f>(&self, fh: &'f Fh, r: &Resolved) -> Subject<'f> {
        let lease_secs = self.st.lease.as_secs() as u32;
        match r {
            Resolved::Pseudo(p) => Subject {
                fh,
                attr: pseudo_attr(p, self.st.boot_secs()),
                fsid: (0, 0),
                fs: None,
                mounted_on: pseudo::path_id(p),
                lease_secs,
            },
            Resolved::Real(n) => {
                let attr = n.attr().unwrap_or_else(|| dirs::virtual_attr(n));
                let mounted_on = if is_share_root(n) {
                    pseudo::path_id(&n.export.name)
                } else {
                    attr.ino
                };
                Subject {
                    fh,
                    fs: match &n.target {
                        Target::Obj(fs, _) => Some(fs.clone()),
                        _ => Some(n.export.fs.clone()),
                    },
                    attr,
                    fsid: (n.fsid(), 0),
                    mounted_on,
                    lease_secs,
                }
            }
        }
    }

    pub fn getattr(&self, mask: &[u32], w: &mut Writer) -> OpResult {
        let fh = self.cur()?.clone();
        let r = self.resolved()?;
        attrs::encode(w, &self.subject(&fh, &r), mask, NFS4_OK);
        Ok(())
    }

    /// VERIFY (`nverify` false) and NVERIFY: the client's fattr4 against the
    /// object's attributes encoded as GETATTR encodes them. Both lists are in
    /// bit order and the bitmap is the client's, so equal attributes are equal
    /// bytes; a length that differs is a difference (RFC 8881 sections 18.15
    /// and 18.31). VERIFY fails NOT_SAME on a difference, NVERIFY SAME on none.
    pub fn verify(&self, want: &Fattr4<'_>, nverify: bool) -> OpResult {
        let fh = self.cur()?.clone();
        attrs::check_verifiable(&want.mask)?;
        let r = self.resolved()?;
        let mut have = Writer::new();
        attrs::values(&mut have, &self.subject(&fh, &r), &want.mask, NFS4_OK);
        match (have.buf == want.vals, nverify) {
            (true, false) | (false, true) => Ok(()),
            (false, false) => Err(NFS4ERR_NOT_SAME),
            (true, true) => Err(NFS4ERR_SAME),
        }
    }

    pub fn lookup(&mut self, name: &[u8]) -> OpResult {
        let name = check_name(name)?;
        let next = match self.resolved()? {
            Resolved::Pseudo(p) => pseudo::lookup(self.ctx, &p, name)?,
            Resolved::Real(n) => {
                if let Target::Obj(_, a) = &n.target {
                    match a.kind {
                        FileKind::Directory => {}
                        FileKind::Symlink => return Err(NFS4ERR_SYMLINK),
                        _ => return Err(NFS4ERR_NOTDIR),
                    }
                }
                let f = dirs::find(self.ctx, &n, name.as_bytes())?;
                if let Target::Obj(_, a) = &n.target {
                    self.ctx.named(f.attr.ino, a.ino, name.as_bytes());
                }
                Fh::Real(f.handle)
            }
        };
        self.cur = Some(next);
        Ok(())
    }

    pub fn lookupp(&mut self) -> OpResult {
        let next = match self.resolved()? {
            Resolved::Pseudo(p) if p.is_empty() => return Err(NFS4ERR_NOENT),
            Resolved::Pseudo(p) => Fh::Pseudo(pseudo::parent(&p)),
            Resolved::Real(n) if is_share_root(&n) => {
                let up = pseudo::parent(&n.export.name);
                if pseudo::visible(self.ctx).contains(&up) {
                    pseudo::share_root(self.ctx, &up)?
                } else {
                    Fh::Pseudo(up)
                }
            }
            Resolved::Real(n) => {
                if let Target::Obj(_, a) = &n.target {
                    if a.kind != FileKind::Directory {
                        return Err(NFS4ERR_NOTDIR);
                    }
                }
                Fh::Real(dirs::find(self.ctx, &n, b"..")?.handle)
            }
        };
        self.cur = Some(next);
        Ok(())
    }

    pub fn access(&self, mask: u32, w: &mut Writer) -> OpResult {
        let supported = mask & 0x3f;
        let granted = match self.resolved()? {
            Resolved::Pseudo(_) => 0x01 | 0x02,
            Resolved::Real(n) => {
                let a = n.attr().unwrap_or_else(|| dirs::virtual_attr(&n));
                access_bits(&a, &n.user, n.writable().is_err())
            }
        };
        w.u32(supported).u32(granted & supported);
        Ok(())
    }

    pub fn readlink(&self, w: &mut Writer) -> OpResult {
        let n = self
            .real()
            .map_err(|e| if e == NFS4ERR_ROFS { NFS4ERR_ISDIR } else { e })?;
        match &n.target {
            Target::Obj(fs, a) if a.kind == FileKind::Symlink => {
                let t = fs.readlink(a.ino).map_err(crate::nfs3::status)?;
                w.opaque(&t);
                Ok(())
            }
            Target::Obj(_, a) if a.kind == FileKind::Directory => Err(NFS4ERR_ISDIR),
            _ => Err(NFS4ERR_INVAL),
        }
    }

    /// SECINFO and SECINFO_NO_NAME: AUTH_SYS only.
    pub fn secinfo(&mut self, name: Option<&[u8]>, style: u32, w: &mut Writer) -> OpResult {
        self.cur()?;
        match name {
            Some(n) => {
                let keep = self.cur.clone();
                self.lookup(n)?;
                self.cur = keep;
            }
            None if style > 1 => return Err(NFS4ERR_INVAL),
            None if style == 1 => {
                self.lookupp()?;
            }
            None => {}
        }
        w.u32(1).u32(1);
        self.cur = None;
        Ok(())
    }

    pub fn readdir(&self, cookie: u64, maxcount: u32, mask: &[u32], w: &mut Writer) -> OpResult {
        if cookie == 1 || cookie == 2 {
            return Err(NFS4ERR_BAD_COOKIE);
        }
        let maxcount = (maxcount as usize).min(attrs::MAX_IO as usize);
        let want = (maxcount / 64 + 2).min(1024);
        // (cookie, name, handle and node) of each candidate entry.
        let mut ents: Vec<(u64, String, Entry)> = vec![];
        let eof_all;
        match self.resolved()? {
            Resolved::Pseudo(p) => {
                let kids = pseudo::children(self.ctx, &p);
                for (i, (name, child)) in kids.into_iter().enumerate() {
                    let c = i as u64 + 3;
                    if c <= cookie {
                        continue;
                    }
                    let fh = match child {
                        pseudo::Child::Pseudo(p) => Ok(Fh::Pseudo(p)),
                        pseudo::Child::Share(s) => pseudo::share_root(self.ctx, &s),
                    };
                    let r = fh.and_then(|fh| fh.resolve(self.ctx).map(|r| (fh, r)));
                    ents.push((c, name, r));
                }
                eof_all = true;
            }
            Resolved::Real(n) => {
                // "." and ".." are read and dropped: read on until an entry
                // remains or the directory ends.
                let (mut at, mut list, mut done) = (cookie, vec![], false);
                while list.is_empty() && !done {
                    let (got, d) = dirs::entries(self.ctx, &n, at, want + 2)?;
                    done = d;
                    match got.last() {
                        Some(e) => at = e.cookie,
                        None => done = true,
                    }
                    list = got;
                    list.retain(|e| e.name != b"." && e.name != b"..");
                }
                for e in list {
                    let r = dirs::find(self.ctx, &n, &e.name).and_then(|f| {
                        let fh = Fh::Real(f.handle);
                        fh.resolve(self.ctx).map(|r| (fh, r))
                    });
                    ents.push((e.cookie, String::from_utf8_lossy(&e.name).into_owned(), r));
                }
                eof_all = done;
            }
        }
        let mut body = Writer::new();
        let mut fitted = 0;
        // verifier, list end, eof, status and op number.
        let overhead = 8 + 4 + 4 + 8;
        for (c, name, r) in &ents {
            let mut e = Writer::new();
            e.bool(true).u64(*c).opaque(name.as_bytes());
            match r {
                Ok((fh, res)) => attrs::encode(&mut e, &self.subject(fh, res), mask, NFS4_OK),
                Err(st) if attrs::has(mask, attrs::FATTR4_RDATTR_ERROR) => {
                    attrs::write_bitmap(&mut e, &attrs::bitmap_of([attrs::FATTR4_RDATTR_ERROR]));
                    e.u32(4).u32(*st);
                }
                Err(st) => return Err(*st),
            }
            if overhead + body.len() + e.len() > maxcount {
                break;
            }
            body.buf.extend_from_slice(&e.buf);
            fitted += 1;
        }
        if fitted == 0 && !ents.is_empty() {
            return Err(NFS4ERR_TOOSMALL);
        }
        let eof = eof_all && fitted == ents.len();
        w.fixed(&[0u8; 8]);
        w.buf.extend_from_slice(&body.buf);
        w.bool(false).bool(eof);
        Ok(())
    }
}
