//! Extended attributes, kept in a per-inode xattr object named by the inode
//! (bonus offset 112; 0 = none).
//!
//! Layout of the xattr object (version 1): magic "CPXA", version u16, count u16,
//! then `count` entries: name length u8, value length u32, name, value. The object
//! is rewritten whole on every change (attributes are small; at most 1 MiB each
//! inode, values at most 64 KiB as on Linux).
//!
//! Invariants: names are 1..=255 bytes without NUL; an inode whose last attribute
//! is removed keeps an empty xattr object (deleted with the inode).

use crate::error::{Errno, Result};
use crate::fs::{load, save, Fs};
use crate::inode::{u32_at, Timespec};
use crate::objio::{ObjRead, ObjWrite};

pub const XATTR_MAGIC: [u8; 4] = *b"CPXA";
pub const XATTR_VERSION: u16 = 1;
pub const MAX_XATTR_VALUE: usize = 65536;
pub const MAX_XATTR_TOTAL: usize = 1 << 20;
pub const XATTR_CREATE: i32 = 1;
pub const XATTR_REPLACE: i32 = 2;

type Attrs = Vec<(Vec<u8>, Vec<u8>)>;

fn decode(b: &[u8]) -> Result<Attrs> {
    if b.is_empty() {
        return Ok(vec![]);
    }
    if b.len() < 8 || b[0..4] != XATTR_MAGIC || u16::from_le_bytes([b[4], b[5]]) != XATTR_VERSION {
        return Err(Errno::EIO);
    }
    let n = u16::from_le_bytes([b[6], b[7]]) as usize;
    let mut p = 8;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        if p + 5 > b.len() {
            return Err(Errno::EIO);
        }
        let nl = b[p] as usize;
        let vl = u32_at(b, p + 1) as usize;
        let end = p + 5 + nl + vl;
        if end > b.len() {
            return Err(Errno::EIO);
        }
        out.push((b[p + 5..p + 5 + nl].to_vec(), b[p + 5 + nl..end].to_vec()));
        p = end;
    }
    Ok(out)
}

fn encode(attrs: &Attrs) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&XATTR_MAGIC);
    b.extend_from_slice(&XATTR_VERSION.to_le_bytes());
    b.extend_from_slice(&(attrs.len() as u16).to_le_bytes());
    for (n, v) in attrs {
        b.push(n.len() as u8);
        b.extend_from_slice(&(v.len() as u32).to_le_bytes());
        b.extend_from_slice(n);
        b.extend_from_slice(v);
    }
    b
}

fn read_attrs<R: ObjRead + ?Sized>(r: &R, xobj: u64) -> Result<Attrs> {
    if xobj == 0 {
        return Ok(vec![]);
    }
    let info = r.info(xobj)?;
    decode(&r.read(xobj, 0, info.size as usize)?)
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > 255 || name.contains(&0) {
        return Err(Errno::ERANGE);
    }
    Ok(())
}

impl Fs {
    pub fn getxattr(&self, obj: u64, name: &[u8]) -> Result<Vec<u8>> {
        check_name(name)?;
        let (ino, _) = load(&*self.ds, obj)?;
        read_attrs(&*self.ds, ino.xattr_obj)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .ok_or(Errno::ENODATA)
    }

    /// Names, each followed by a NUL (listxattr format).
    pub fn listxattr(&self, obj: u64) -> Result<Vec<u8>> {
        let (ino, _) = load(&*self.ds, obj)?;
        let mut out = Vec::new();
        for (n, _) in read_attrs(&*self.ds, ino.xattr_obj)? {
            out.extend_from_slice(&n);
            out.push(0);
        }
        Ok(out)
    }

    pub fn setxattr(&self, obj: u64, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        check_name(name)?;
        if value.len() > MAX_XATTR_VALUE {
            return Err(Errno::E2BIG);
        }
        self.change_xattrs(obj, |attrs| {
            let pos = attrs.iter().position(|(n, _)| n == name);
            match (pos, flags & (XATTR_CREATE | XATTR_REPLACE)) {
                (Some(_), XATTR_CREATE) => Err(Errno::EEXIST),
                (None, XATTR_REPLACE) => Err(Errno::ENODATA),
                (Some(i), _) => {
                    attrs[i].1 = value.to_vec();
                    Ok(())
                }
                (None, _) => {
                    attrs.push((name.to_vec(), value.to_vec()));
                    Ok(())
                }
            }
        })
    }

    pub fn removexattr(&self, obj: u64, name: &[u8]) -> Result<()> {
        check_name(name)?;
        self.change_xattrs(obj, |attrs| {
            let i = attrs
                .iter()
                .position(|(n, _)| n == name)
                .ok_or(Errno::ENODATA)?;
            attrs.remove(i);
            Ok(())
        })
    }

    fn change_xattrs(&self, obj: u64, f: impl FnOnce(&mut Attrs) -> Result<()>) -> Result<()> {
        let _g = self.lock_inodes(&[obj]);
        let tx = self.begin(MAX_XATTR_VALUE as u64 * 2)?;
        let (mut ino, _) = load(&tx, obj)?;
        let mut attrs = read_attrs(&tx, ino.xattr_obj)?;
        f(&mut attrs)?;
        let bytes = encode(&attrs);
        if bytes.len() > MAX_XATTR_TOTAL || attrs.len() > u16::MAX as usize {
            return Err(Errno::ENOSPC);
        }
        if ino.xattr_obj == 0 {
            ino.xattr_obj = ObjWrite::create_object(&tx)?;
        }
        ObjWrite::write(&tx, ino.xattr_obj, 0, &bytes)?;
        ObjWrite::truncate(&tx, ino.xattr_obj, bytes.len() as u64)?;
        ino.ctime = Timespec::now();
        save(&tx, obj, &ino)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let a: Attrs = vec![
            (b"user.a".to_vec(), b"1".to_vec()),
            (b"user.empty".to_vec(), vec![]),
        ];
        assert_eq!(decode(&encode(&a)).unwrap(), a);
        assert_eq!(decode(&[]).unwrap(), Attrs::new());
        let mut bad = encode(&a);
        bad.truncate(bad.len() - 2);
        assert_eq!(decode(&bad), Err(Errno::EIO));
    }
}
