//! NFSv4 attributes (RFC 8881 section 5): which the server supports, and the
//! encoding of a fattr4 for GETATTR and READDIR from a node's POSIX attributes.
//!
//! Invariants:
//! - A reply carries exactly the requested attributes that are in
//!   `SUPPORTED` (minus the write-only *_set ones), in bit order, and its
//!   bitmap says so; unknown bits are ignored, never an error (section 5.3).
//! - Owners and groups are sent as numeric strings ("1000"), which a Linux
//!   client maps back with or without idmapping; [`parse_owner`] accepts numeric
//!   strings and `name@domain` looked up in the host's passwd and group files.

use super::consts::*;
use super::pseudo::Fh;
use crate::nfs3::ftype;
use crate::xdr::Writer;
use cachalot_posix::{Attr, Fs, Timespec};
use std::sync::Arc;

pub const FATTR4_SUPPORTED_ATTRS: u32 = 0;
pub const FATTR4_TYPE: u32 = 1;
pub const FATTR4_FH_EXPIRE_TYPE: u32 = 2;
pub const FATTR4_CHANGE: u32 = 3;
pub const FATTR4_SIZE: u32 = 4;
pub const FATTR4_LINK_SUPPORT: u32 = 5;
pub const FATTR4_SYMLINK_SUPPORT: u32 = 6;
pub const FATTR4_NAMED_ATTR: u32 = 7;
pub const FATTR4_FSID: u32 = 8;
pub const FATTR4_UNIQUE_HANDLES: u32 = 9;
pub const FATTR4_LEASE_TIME: u32 = 10;
pub const FATTR4_RDATTR_ERROR: u32 = 11;
pub const FATTR4_ACLSUPPORT: u32 = 13;
pub const FATTR4_CANSETTIME: u32 = 15;
pub const FATTR4_CASE_INSENSITIVE: u32 = 16;
pub const FATTR4_CASE_PRESERVING: u32 = 17;
pub const FATTR4_CHOWN_RESTRICTED: u32 = 18;
pub const FATTR4_FILEHANDLE: u32 = 19;
pub const FATTR4_FILEID: u32 = 20;
pub const FATTR4_FILES_AVAIL: u32 = 21;
pub const FATTR4_FILES_FREE: u32 = 22;
pub const FATTR4_FILES_TOTAL: u32 = 23;
pub const FATTR4_HOMOGENEOUS: u32 = 26;
pub const FATTR4_MAXFILESIZE: u32 = 27;
pub const FATTR4_MAXLINK: u32 = 28;
pub const FATTR4_MAXNAME: u32 = 29;
pub const FATTR4_MAXREAD: u32 = 30;
pub const FATTR4_MAXWRITE: u32 = 31;
pub const FATTR4_MODE: u32 = 33;
pub const FATTR4_NO_TRUNC: u32 = 34;
pub const FATTR4_NUMLINKS: u32 = 35;
pub const FATTR4_OWNER: u32 = 36;
pub const FATTR4_OWNER_GROUP: u32 = 37;
pub const FATTR4_RAWDEV: u32 = 41;
pub const FATTR4_SPACE_AVAIL: u32 = 42;
pub const FATTR4_SPACE_FREE: u32 = 43;
pub const FATTR4_SPACE_TOTAL: u32 = 44;
pub const FATTR4_SPACE_USED: u32 = 45;
pub const FATTR4_TIME_ACCESS: u32 = 47;
pub const FATTR4_TIME_ACCESS_SET: u32 = 48;
pub const FATTR4_TIME_CREATE: u32 = 50;
pub const FATTR4_TIME_DELTA: u32 = 51;
pub const FATTR4_TIME_METADATA: u32 = 52;
pub const FATTR4_TIME_MODIFY: u32 = 53;
pub const FATTR4_TIME_MODIFY_SET: u32 = 54;
pub const FATTR4_MOUNTED_ON_FILEID: u32 = 55;
pub const FATTR4_SUPPATTR_EXCLCREAT: u32 = 75;

/// Every attribute the server supports (readable, or settable for *_set).
pub const SUPPORTED: &[u32] = &[
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23, 26, 27, 28, 29,
    30, 31, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 47, 48, 50, 51, 52, 53, 54, 55, 75,
];
/// Attributes a client may set (SETATTR, and OPEN/CREATE's createattrs).
pub const SETTABLE: &[u32] = &[4, 33, 36, 37, 48, 54];
/// Largest READ or WRITE.
pub const MAX_IO: u64 = crate::nfs3::args::MAX_IO as u64;

/// A bitmap4 of `bits`.
pub fn bitmap_of(bits: impl IntoIterator<Item = u32>) -> Vec<u32> {
    let mut m = vec![];
    for b in bits {
        let w = (b / 32) as usize;
        if m.len() <= w {
            m.resize(w + 1, 0);
        }
        m[w] |= 1 << (b % 32);
    }
    m
}

pub fn has(mask: &[u32], bit: u32) -> bool {
    mask.get((bit / 32) as usize)
        .is_some_and(|w| w & (1 << (bit % 32)) != 0)
}

pub fn write_bitmap(w: &mut Writer, m: &[u32]) {
    w.u32(m.len() as u32);
    for x in m {
        w.u32(*x);
    }
}

/// What GETATTR describes.
pub struct Subject<'a> {
    pub fh: &'a Fh,
    pub attr: Attr,
    pub fsid: (u64, u64),
    /// The filesystem (for space and file counts); none for pseudo directories.
    pub fs: Option<Arc<Fs>>,
    /// The fileid of the directory this node is mounted on (share roots).
    pub mounted_on: u64,
    pub lease_secs: u32,
}

fn time(w: &mut Writer, t: Timespec) {
    w.u64(t.sec as u64).u32(t.nsec);
}

/// The change attribute: the ctime in nanoseconds (every change moves it).
pub fn change(a: &Attr) -> u64 {
    (a.ctime.sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(a.ctime.nsec as u64)
}

/// The bitmap words of the attributes a reply carries: `SUPPORTED` minus
/// the write-only *_set ones.
const READABLE: [u32; 3] = readable_words();

const fn readable_words() -> [u32; 3] {
    let mut m = [0u32; 3];
    let mut i = 0;
    while i < SUPPORTED.len() {
        let b = SUPPORTED[i];
        if b != FATTR4_TIME_ACCESS_SET && b != FATTR4_TIME_MODIFY_SET {
            m[(b / 32) as usize] |= 1 << (b % 32);
        }
        i += 1;
    }
    m
}

/// Encode fattr4 for `mask` (and `rdattr_error` when asked), straight into
/// `w`: the bitmap is the asked-for bits the server reads (as [`values`]
/// writes them), and the values' length is filled in after them (no
/// second buffer per GETATTR or READDIR entry).
pub fn encode(w: &mut Writer, s: &Subject<'_>, mask: &[u32], rdattr_error: u32) {
    let mut words = [0u32; 3];
    for (i, r) in words.iter_mut().enumerate() {
        *r = mask.get(i).copied().unwrap_or(0) & READABLE[i];
    }
    let n = words.iter().rposition(|x| *x != 0).map_or(0, |i| i + 1);
    write_bitmap(w, &words[..n]);
    let at = w.len();
    w.u32(0);
    values(w, s, mask, rdattr_error);
    // Every value is a multiple of 4 bytes (opaques are padded), so the
    // attrlist4 needs no padding of its own.
    let len = (w.len() - at - 4) as u32;
    w.buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// Check the bitmap of VERIFY or NVERIFY (RFC 8881 sections 18.15.4 and
/// 18.31.4): rdattr_error and the write-only *_set attributes cannot be
/// compared (INVAL); an attribute the server does not support is ATTRNOTSUPP.
pub fn check_verifiable(mask: &[u32]) -> Result<(), u32> {
    let not_readable = [
        FATTR4_RDATTR_ERROR,
        FATTR4_TIME_ACCESS_SET,
        FATTR4_TIME_MODIFY_SET,
    ];
    if not_readable.iter().any(|b| has(mask, *b)) {
        return Err(NFS4ERR_INVAL);
    }
    let supported = bitmap_of(SUPPORTED.iter().copied());
    let unsupported = mask
        .iter()
        .enumerate()
        .any(|(i, w)| w & !supported.get(i).copied().unwrap_or(0) != 0);
    if unsupported {
        return Err(NFS4ERR_ATTRNOTSUPP);
    }
    Ok(())
}

/// Write the packed values (fattr4.attr_vals) of the attributes in `mask`
/// that the server reads (`READABLE`), in bit order.
pub fn values(v: &mut Writer, s: &Subject<'_>, mask: &[u32], rdattr_error: u32) {
    let a = &s.attr;
    let stat = if [21, 22, 23, 42, 43, 44].iter().any(|b| has(mask, *b)) {
        s.fs.as_ref().and_then(|fs| fs.statfs().ok())
    } else {
        None
    };
    for &bit in SUPPORTED {
        if !has(mask, bit) || !has(&READABLE, bit) {
            continue;
        }
        match bit {
            FATTR4_SUPPORTED_ATTRS => write_bitmap(v, &bitmap_of(SUPPORTED.iter().copied())),
            FATTR4_TYPE => {
                v.u32(ftype(a.kind));
            }
            FATTR4_FH_EXPIRE_TYPE => {
                v.u32(0); // FH4_PERSISTENT
            }
            FATTR4_CHANGE => {
                v.u64(change(a));
            }
            FATTR4_SIZE => {
                v.u64(a.size);
            }
            FATTR4_LINK_SUPPORT | FATTR4_SYMLINK_SUPPORT | FATTR4_UNIQUE_HANDLES => {
                v.bool(true);
            }
            FATTR4_NAMED_ATTR | FATTR4_CASE_INSENSITIVE => {
                v.bool(false);
            }
            FATTR4_FSID => {
                v.u64(s.fsid.0).u64(s.fsid.1);
            }
            FATTR4_LEASE_TIME => {
                v.u32(s.lease_secs);
            }
            FATTR4_RDATTR_ERROR => {
                v.u32(rdattr_error);
            }
            FATTR4_ACLSUPPORT => {
                v.u32(0);
            }
            FATTR4_CANSETTIME
            | FATTR4_CASE_PRESERVING
            | FATTR4_CHOWN_RESTRICTED
            | FATTR4_HOMOGENEOUS
            | FATTR4_NO_TRUNC => {
                v.bool(true);
            }
            FATTR4_FILEHANDLE => {
                v.opaque(&s.fh.encode());
            }
            FATTR4_FILEID => {
                v.u64(a.ino);
            }
            FATTR4_FILES_AVAIL | FATTR4_FILES_FREE => {
                v.u64(stat.as_ref().map_or(0, |s| s.ffree));
            }
            FATTR4_FILES_TOTAL => {
                v.u64(stat.as_ref().map_or(0, |s| s.files));
            }
            FATTR4_MAXFILESIZE => {
                v.u64(cachalot_posix::fs::MAX_FILE_SIZE);
            }
            FATTR4_MAXLINK => {
                v.u32(cachalot_posix::fs::MAX_LINKS);
            }
            FATTR4_MAXNAME => {
                v.u32(cachalot_posix::dir::MAX_NAME as u32);
            }
            FATTR4_MAXREAD | FATTR4_MAXWRITE => {
                v.u64(MAX_IO);
            }
            FATTR4_MODE => {
                v.u32(a.mode & 0o7777);
            }
            FATTR4_NUMLINKS => {
                v.u32(a.nlink);
            }
            FATTR4_OWNER => owner(v, a.uid),
            FATTR4_OWNER_GROUP => owner(v, a.gid),
            FATTR4_RAWDEV => {
                v.u32(libc::major(a.rdev as libc::dev_t))
                    .u32(libc::minor(a.rdev as libc::dev_t));
            }
            FATTR4_SPACE_AVAIL | FATTR4_SPACE_FREE | FATTR4_SPACE_TOTAL => {
                let x = stat.as_ref().map_or(0, |st| {
                    let b = st.bsize as u64;
                    match bit {
                        FATTR4_SPACE_AVAIL => st.bavail * b,
                        FATTR4_SPACE_FREE => st.bfree * b,
                        _ => st.blocks * b,
                    }
                });
                v.u64(x);
            }
            FATTR4_SPACE_USED => {
                v.u64(a.blocks * 512);
            }
            FATTR4_TIME_ACCESS => time(v, a.atime),
            FATTR4_TIME_CREATE => time(v, a.crtime),
            FATTR4_TIME_DELTA => {
                v.u64(0).u32(1);
            }
            FATTR4_TIME_METADATA => time(v, a.ctime),
            FATTR4_TIME_MODIFY => time(v, a.mtime),
            FATTR4_MOUNTED_ON_FILEID => {
                v.u64(s.mounted_on);
            }
            FATTR4_SUPPATTR_EXCLCREAT => {
                write_bitmap(v, &bitmap_of([FATTR4_SIZE, FATTR4_MODE, 36, 37]));
            }
            // Not in SUPPORTED, so never here (`every_readable_bit_is_encoded`).
            _ => {}
        }
    }
}

/// An owner or group as its decimal string (no allocation).
fn owner(v: &mut Writer, id: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut n = id;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    v.opaque(&digits[at..]);
}

/// An owner or group string: a number, or `name@domain` (or a bare name) in
/// the host's passwd (`group` false) or group file. BADOWNER otherwise.
pub fn parse_owner(s: &[u8], group: bool) -> Result<u32, u32> {
    let s = std::str::from_utf8(s).map_err(|_| NFS4ERR_BADOWNER)?;
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    let name = s.split('@').next().unwrap_or("");
    if name.is_empty() || name.contains(':') {
        return Err(NFS4ERR_BADOWNER);
    }
    let file = if group { "/etc/group" } else { "/etc/passwd" };
    let text = std::fs::read_to_string(file).map_err(|_| NFS4ERR_BADOWNER)?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let n = f.next()?;
            let id = f.nth(1)?.parse::<u32>().ok()?;
            (n == name).then_some(id)
        })
        .next()
        .ok_or(NFS4ERR_BADOWNER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `encode` announces every READABLE bit asked for, so each must write
    /// its value; owners are the decimal ids.
    #[test]
    fn every_readable_bit_is_encoded() {
        let fh = Fh::Pseudo(String::new());
        let s = Subject {
            fh: &fh,
            attr: crate::nfs3::dirs::read_only_dir(7, Timespec { sec: 1, nsec: 2 }),
            fsid: (1, 2),
            fs: None,
            mounted_on: 7,
            lease_secs: 90,
        };
        for &bit in SUPPORTED.iter().filter(|b| has(&READABLE, **b)) {
            let mut w = Writer::new();
            values(&mut w, &s, &bitmap_of([bit]), 0);
            assert!(!w.buf.is_empty(), "attribute {bit}");
            assert_eq!(w.len() % 4, 0, "attribute {bit}");
        }
        let mut w = Writer::new();
        encode(&mut w, &s, &bitmap_of([FATTR4_OWNER, 200]), 0);
        // bitmap4 {0, bit 36}, attrlist4 of 8 bytes: the string "0" (uid 0).
        let want: [&[u8]; 6] = [
            &[0, 0, 0, 2],
            &[0; 4],
            &[0, 0, 0, 16],
            &[0, 0, 0, 8],
            &[0, 0, 0, 1],
            b"0\0\0\0",
        ];
        assert_eq!(w.buf, want.concat());
        for (id, text) in [(0, "0"), (1000, "1000"), (u32::MAX, "4294967295")] {
            let mut w = Writer::new();
            owner(&mut w, id);
            let mut want = Writer::new();
            want.opaque(text.as_bytes());
            assert_eq!(w.buf, want.buf);
        }
    }

    #[test]
    fn bitmaps_and_owners() {
        let m = bitmap_of([0, 1, 33, 75]);
        assert_eq!(m, vec![3, 2, 1 << 11]);
        assert!(has(&m, 33) && has(&m, 75) && !has(&m, 2) && !has(&m, 200));
        assert_eq!(parse_owner(b"1000", false), Ok(1000));
        assert_eq!(parse_owner(b"root@localdomain", false), Ok(0));
        assert_eq!(parse_owner(b"root", true), Ok(0));
        assert_eq!(parse_owner(b"nosuchuser@x", false), Err(NFS4ERR_BADOWNER));
        assert_eq!(parse_owner(b"\xff", false), Err(NFS4ERR_BADOWNER));
        assert_eq!(parse_owner(b"", false), Err(NFS4ERR_BADOWNER));
    }
}
