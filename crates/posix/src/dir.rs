//! Hashed directories: the entries of a directory inside its object's data, found
//! with O(1) block reads per lookup at any size (extendible hashing).
//!
//! Layout (version 1; see docs/on-disk-format.md "POSIX layer"):
//! - offset 0: header (64 bytes): magic "CPDR", version u16, global depth u8,
//!   pad u8, bucket count u32, reserved u32, entry count u64.
//! - offset 4096: the table: `2^depth` little-endian u32 bucket numbers, indexed by
//!   the top `depth` bits of an entry's 47-bit hash.
//! - offset 4 GiB + n * 16 KiB: bucket n (16 KiB): header (32 bytes): magic "CPBK",
//!   local depth u8, pad u8, entry count u16, bytes used u32, next overflow bucket
//!   u32 (0 = none), 16 reserved; then packed entries: key u64, object u64, d_type
//!   u8, name length u8, name bytes.
//!
//! An entry's key is `h47 << 16 | cd`: h47 is the top 47 bits of the name's 64-bit
//! hash (at least 1), cd a collision differentiator unique among entries with the
//! same h47. Keys are the readdir cookies: readdir returns entries in key order, so
//! a cookie stays valid however the directory changes (entries added or removed
//! after the cursor may or may not be returned, none is returned twice). Cookies
//! 0..=2 are free for ".", "..", and the start; every key is at least 65536.
//!
//! Invariants:
//! - A bucket of local depth d holds exactly the entries whose h47 starts with its
//!   d-bit prefix, and the `2^(depth-d)` table slots of that prefix name it.
//! - All entries with one h47 are in one bucket chain, so cd can be chosen there.
//! - Overflow chains exist only under buckets of depth `MAX_DEPTH`.
//! - Buckets are never freed (an emptied directory keeps its buckets); the table
//!   only doubles. Every read validates magic and bounds: a malformed directory is
//!   EIO, never a panic.

use crate::error::{Errno, Result};
use crate::inode::{u32_at, u64_at};
use crate::objio::{ObjRead, ObjWrite};

pub const DIR_MAGIC: [u8; 4] = *b"CPDR";
pub const BUCKET_MAGIC: [u8; 4] = *b"CPBK";
pub const DIR_VERSION: u16 = 1;
pub const TABLE_OFF: u64 = 4096;
pub const BUCKET_BASE: u64 = 1 << 32;
pub const BUCKET_SIZE: usize = 16384;
/// Largest global depth: a table of 2^20 slots (4 MiB) indexes 16 GiB of buckets.
pub const MAX_DEPTH: u8 = 20;
pub const MAX_NAME: usize = 255;
const HDR_SIZE: usize = 64;
const BUCKET_HDR: usize = 32;
const ENTRY_HDR: usize = 18;
/// First key an entry can have (cookies below are ".", ".." and the start).
pub const FIRST_KEY: u64 = 1 << 16;

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: u64,
    pub obj: u64,
    pub dtype: u8,
    pub name: Vec<u8>,
}

/// The stable 64-bit hash of a name (FNV-1a, then a SplitMix64 finalizer). Part of
/// the on-disk format: never change it.
pub fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
thread_local! {
    /// Tests: a degenerate hash (4 values, one prefix) to force collisions and
    /// overflow chains, which real names practically never reach.
    static WEAK_HASH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn h47(name: &[u8]) -> u64 {
    #[cfg(test)]
    if WEAK_HASH.with(|w| w.get()) {
        return 1 + (name.first().copied().unwrap_or(0) as u64 & 3);
    }
    (name_hash(name) >> 17).max(1)
}

fn slot_of(h47: u64, depth: u8) -> u64 {
    if depth == 0 {
        0
    } else {
        h47 >> (47 - depth as u32)
    }
}

fn corrupt(dir: u64, what: &str) -> Errno {
    eprintln!("cachalot-posix: directory {dir}: {what}");
    Errno::EIO
}

#[derive(Clone, Copy, Debug)]
struct Header {
    depth: u8,
    nbuckets: u32,
    entries: u64,
}

impl Header {
    fn encode(&self) -> [u8; HDR_SIZE] {
        let mut b = [0u8; HDR_SIZE];
        b[0..4].copy_from_slice(&DIR_MAGIC);
        b[4..6].copy_from_slice(&DIR_VERSION.to_le_bytes());
        b[6] = self.depth;
        b[8..12].copy_from_slice(&self.nbuckets.to_le_bytes());
        b[16..24].copy_from_slice(&self.entries.to_le_bytes());
        b
    }
}

fn read_header<R: ObjRead + ?Sized>(r: &R, dir: u64) -> Result<Header> {
    let b = r.read(dir, 0, HDR_SIZE)?;
    if b.len() < HDR_SIZE || b[0..4] != DIR_MAGIC {
        return Err(Errno::ENOTDIR);
    }
    if u16::from_le_bytes([b[4], b[5]]) != DIR_VERSION {
        return Err(corrupt(dir, "unknown directory version"));
    }
    let h = Header {
        depth: b[6],
        nbuckets: u32_at(&b, 8),
        entries: u64_at(&b, 16),
    };
    if h.depth > MAX_DEPTH || h.nbuckets == 0 {
        return Err(corrupt(dir, "malformed header"));
    }
    Ok(h)
}

fn write_header<W: ObjWrite + ?Sized>(w: &W, dir: u64, h: &Header) -> Result<()> {
    w.write(dir, 0, &h.encode())
}

fn table_get<R: ObjRead + ?Sized>(r: &R, dir: u64, h: &Header, slot: u64) -> Result<u32> {
    let b = r.read(dir, TABLE_OFF + slot * 4, 4)?;
    if b.len() != 4 {
        return Err(corrupt(dir, "table shorter than its depth"));
    }
    let n = u32_at(&b, 0);
    if n >= h.nbuckets {
        return Err(corrupt(dir, "table names a bucket that does not exist"));
    }
    Ok(n)
}

fn bucket_off(n: u32) -> u64 {
    BUCKET_BASE + n as u64 * BUCKET_SIZE as u64
}

/// A decoded bucket.
#[derive(Clone, Debug)]
struct Bucket {
    no: u32,
    local_depth: u8,
    next: u32,
    entries: Vec<Entry>,
}

impl Bucket {
    fn used(&self) -> usize {
        self.entries.iter().map(|e| ENTRY_HDR + e.name.len()).sum()
    }
    fn fits(&self, name_len: usize) -> bool {
        BUCKET_HDR + self.used() + ENTRY_HDR + name_len <= BUCKET_SIZE
    }
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BUCKET_HDR];
        b[0..4].copy_from_slice(&BUCKET_MAGIC);
        b[4] = self.local_depth;
        b[6..8].copy_from_slice(&(self.entries.len() as u16).to_le_bytes());
        b[8..12].copy_from_slice(&(self.used() as u32).to_le_bytes());
        b[12..16].copy_from_slice(&self.next.to_le_bytes());
        for e in &self.entries {
            b.extend_from_slice(&e.key.to_le_bytes());
            b.extend_from_slice(&e.obj.to_le_bytes());
            b.push(e.dtype);
            b.push(e.name.len() as u8);
            b.extend_from_slice(&e.name);
        }
        b.resize(BUCKET_SIZE, 0);
        b
    }
}

/// Walk the packed entries of a raw bucket; `f` returns true to stop.
fn scan_raw(dir: u64, raw: &[u8], mut f: impl FnMut(u64, u64, u8, &[u8]) -> bool) -> Result<()> {
    let count = u16::from_le_bytes([raw[6], raw[7]]) as usize;
    let used = u32_at(raw, 8) as usize;
    if BUCKET_HDR + used > raw.len() {
        return Err(corrupt(dir, "bucket overflows"));
    }
    let mut p = BUCKET_HDR;
    for _ in 0..count {
        if p + ENTRY_HDR > BUCKET_HDR + used {
            return Err(corrupt(dir, "bucket entry out of bounds"));
        }
        let key = u64_at(raw, p);
        let obj = u64_at(raw, p + 8);
        let dtype = raw[p + 16];
        let nl = raw[p + 17] as usize;
        let end = p + ENTRY_HDR + nl;
        if end > BUCKET_HDR + used || nl == 0 {
            return Err(corrupt(dir, "bucket entry out of bounds"));
        }
        if f(key, obj, dtype, &raw[p + ENTRY_HDR..end]) {
            return Ok(());
        }
        p = end;
    }
    Ok(())
}

fn read_raw_bucket<R: ObjRead + ?Sized>(r: &R, dir: u64, h: &Header, n: u32) -> Result<Vec<u8>> {
    if n >= h.nbuckets {
        return Err(corrupt(dir, "bucket number out of range"));
    }
    let mut raw = r.read(dir, bucket_off(n), BUCKET_SIZE)?;
    raw.resize(BUCKET_SIZE, 0);
    if raw[0..4] != BUCKET_MAGIC {
        return Err(corrupt(dir, "bad bucket magic"));
    }
    Ok(raw)
}

fn read_bucket<R: ObjRead + ?Sized>(r: &R, dir: u64, h: &Header, n: u32) -> Result<Bucket> {
    let raw = read_raw_bucket(r, dir, h, n)?;
    let mut entries = Vec::new();
    scan_raw(dir, &raw, |key, obj, dtype, name| {
        entries.push(Entry {
            key,
            obj,
            dtype,
            name: name.to_vec(),
        });
        false
    })?;
    Ok(Bucket {
        no: n,
        local_depth: raw[4],
        next: u32_at(&raw, 12),
        entries,
    })
}

fn write_bucket<W: ObjWrite + ?Sized>(w: &W, dir: u64, b: &Bucket) -> Result<()> {
    w.write(dir, bucket_off(b.no), &b.encode())
}

/// The bucket chain starting at primary bucket `first`.
fn read_chain<R: ObjRead + ?Sized>(r: &R, dir: u64, h: &Header, first: u32) -> Result<Vec<Bucket>> {
    let mut chain = vec![read_bucket(r, dir, h, first)?];
    loop {
        let next = chain[chain.len() - 1].next;
        if next == 0 {
            return Ok(chain);
        }
        if chain.len() as u32 > h.nbuckets {
            return Err(corrupt(dir, "overflow chain loops"));
        }
        chain.push(read_bucket(r, dir, h, next)?);
    }
}

/// Make `dir` an empty directory.
pub fn init<W: ObjWrite + ?Sized>(w: &W, dir: u64) -> Result<()> {
    let h = Header {
        depth: 0,
        nbuckets: 1,
        entries: 0,
    };
    write_header(w, dir, &h)?;
    w.write(dir, TABLE_OFF, &0u32.to_le_bytes())?;
    write_bucket(
        w,
        dir,
        &Bucket {
            no: 0,
            local_depth: 0,
            next: 0,
            entries: vec![],
        },
    )
}

/// Number of entries ("." and ".." not counted).
pub fn count<R: ObjRead + ?Sized>(r: &R, dir: u64) -> Result<u64> {
    Ok(read_header(r, dir)?.entries)
}

/// Check a name: not empty, no '/' or NUL, at most 255 bytes, not "." or "..".
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > MAX_NAME {
        return Err(Errno::ENAMETOOLONG);
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Find `name`: one header read, one table slot, one bucket (plus overflow
/// buckets at the maximum depth).
pub fn lookup<R: ObjRead + ?Sized>(r: &R, dir: u64, name: &[u8]) -> Result<Option<Entry>> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Ok(None);
    }
    let h = read_header(r, dir)?;
    let hv = h47(name);
    let mut n = table_get(r, dir, &h, slot_of(hv, h.depth))?;
    let mut hops = 0u32;
    loop {
        let raw = read_raw_bucket(r, dir, &h, n)?;
        let mut found = None;
        scan_raw(dir, &raw, |key, obj, dtype, nm| {
            if key >> 16 == hv && nm == name {
                found = Some(Entry {
                    key,
                    obj,
                    dtype,
                    name: nm.to_vec(),
                });
                true
            } else {
                false
            }
        })?;
        if found.is_some() {
            return Ok(found);
        }
        n = u32_at(&raw, 12);
        hops += 1;
        if n == 0 {
            return Ok(None);
        }
        if hops > h.nbuckets {
            return Err(corrupt(dir, "overflow chain loops"));
        }
    }
}

/// Add an entry; EEXIST if the name is there. Returns the entry's key (cookie).
pub fn insert<W: ObjWrite + ?Sized>(
    w: &W,
    dir: u64,
    name: &[u8],
    obj: u64,
    dtype: u8,
) -> Result<u64> {
    check_name(name)?;
    let hv = h47(name);
    loop {
        let mut h = read_header(w, dir)?;
        let slot = slot_of(hv, h.depth);
        let first = table_get(w, dir, &h, slot)?;
        let mut chain = read_chain(w, dir, &h, first)?;
        let mut used_cd = Vec::new();
        for e in chain.iter().flat_map(|b| b.entries.iter()) {
            if e.key >> 16 == hv {
                if e.name == name {
                    return Err(Errno::EEXIST);
                }
                used_cd.push(e.key & 0xffff);
            }
        }
        let cd = (0..=0xffffu64)
            .find(|c| !used_cd.contains(c))
            .ok_or(Errno::ENOSPC)?;
        let key = hv << 16 | cd;
        let entry = Entry {
            key,
            obj,
            dtype,
            name: name.to_vec(),
        };
        if let Some(b) = chain.iter_mut().find(|b| b.fits(name.len())) {
            b.entries.push(entry);
            write_bucket(w, dir, b)?;
            h.entries += 1;
            write_header(w, dir, &h)?;
            return Ok(key);
        }
        let ld = chain[0].local_depth;
        if ld < MAX_DEPTH && chain.len() == 1 {
            if ld == h.depth {
                double_table(w, dir, &mut h)?;
            }
            split(w, dir, &mut h, chain.remove(0), hv)?;
            continue;
        }
        // At the maximum depth: chain an overflow bucket.
        let nb = Bucket {
            no: h.nbuckets,
            local_depth: ld,
            next: 0,
            entries: vec![entry],
        };
        h.nbuckets += 1;
        let last = chain.len() - 1;
        chain[last].next = nb.no;
        write_bucket(w, dir, &nb)?;
        write_bucket(w, dir, &chain[last])?;
        h.entries += 1;
        write_header(w, dir, &h)?;
        return Ok(key);
    }
}

fn double_table<W: ObjWrite + ?Sized>(w: &W, dir: u64, h: &mut Header) -> Result<()> {
    let n = 1usize << h.depth;
    let old = w.read(dir, TABLE_OFF, n * 4)?;
    if old.len() != n * 4 {
        return Err(corrupt(dir, "table shorter than its depth"));
    }
    let mut new = Vec::with_capacity(n * 8);
    for c in old.chunks(4) {
        new.extend_from_slice(c);
        new.extend_from_slice(c);
    }
    w.write(dir, TABLE_OFF, &new)?;
    h.depth += 1;
    write_header(w, dir, h)
}

/// Split bucket `b` (local depth < global depth) into itself and a new bucket by
/// the next hash bit; `hv` is any h47 under the bucket.
fn split<W: ObjWrite + ?Sized>(
    w: &W,
    dir: u64,
    h: &mut Header,
    mut b: Bucket,
    hv: u64,
) -> Result<()> {
    let ld = b.local_depth;
    let d = h.depth;
    debug_assert!(ld < d);
    let bit_shift = 47 - (ld as u32 + 1);
    let mut hi = Bucket {
        no: h.nbuckets,
        local_depth: ld + 1,
        next: 0,
        entries: vec![],
    };
    h.nbuckets += 1;
    let (stay, go): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut b.entries)
        .into_iter()
        .partition(|e| ((e.key >> 16) >> bit_shift) & 1 == 0);
    b.entries = stay;
    hi.entries = go;
    b.local_depth = ld + 1;
    write_bucket(w, dir, &b)?;
    write_bucket(w, dir, &hi)?;
    let span = 1u64 << (d - ld);
    let start = (slot_of(hv, d) >> (d - ld)) << (d - ld);
    let upper: Vec<u8> = (0..span / 2).flat_map(|_| hi.no.to_le_bytes()).collect();
    w.write(dir, TABLE_OFF + (start + span / 2) * 4, &upper)?;
    write_header(w, dir, h)
}

/// Remove `name`; returns the removed entry, or None if it was not there.
pub fn remove<W: ObjWrite + ?Sized>(w: &W, dir: u64, name: &[u8]) -> Result<Option<Entry>> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Ok(None);
    }
    let mut h = read_header(w, dir)?;
    let hv = h47(name);
    let first = table_get(w, dir, &h, slot_of(hv, h.depth))?;
    for mut b in read_chain(w, dir, &h, first)? {
        if let Some(i) = b
            .entries
            .iter()
            .position(|e| e.key >> 16 == hv && e.name == name)
        {
            let e = b.entries.remove(i);
            write_bucket(w, dir, &b)?;
            h.entries = h.entries.saturating_sub(1);
            write_header(w, dir, &h)?;
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// Change the object an existing entry names (rename over an existing name keeps
/// its key). Returns false if the name is not there.
pub fn replace<W: ObjWrite + ?Sized>(
    w: &W,
    dir: u64,
    name: &[u8],
    obj: u64,
    dtype: u8,
) -> Result<bool> {
    let h = read_header(w, dir)?;
    let hv = h47(name);
    let first = table_get(w, dir, &h, slot_of(hv, h.depth))?;
    for mut b in read_chain(w, dir, &h, first)? {
        if let Some(e) = b
            .entries
            .iter_mut()
            .find(|e| e.key >> 16 == hv && e.name == name)
        {
            e.obj = obj;
            e.dtype = dtype;
            write_bucket(w, dir, &b)?;
            return Ok(true);
        }
    }
    Ok(false)
}

/// Up to `max` entries with a key greater than `after`, in key order.
pub fn readdir<R: ObjRead + ?Sized>(r: &R, dir: u64, after: u64, max: usize) -> Result<Vec<Entry>> {
    let h = read_header(r, dir)?;
    let d = h.depth;
    let mut out: Vec<Entry> = Vec::new();
    let mut slot = slot_of(after >> 16, d);
    let nslots = 1u64 << d;
    while slot < nslots && out.len() < max {
        let first = table_get(r, dir, &h, slot)?;
        let chain = read_chain(r, dir, &h, first)?;
        let ld = chain[0].local_depth.min(d);
        let mut got: Vec<Entry> = chain
            .into_iter()
            .flat_map(|b| b.entries)
            .filter(|e| e.key > after)
            .collect();
        got.sort_unstable_by_key(|e| e.key);
        got.truncate(max - out.len());
        out.extend(got);
        slot = ((slot >> (d - ld)) + 1) << (d - ld);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable() {
        // Part of the on-disk format: these values must never change.
        assert_eq!(name_hash(b""), name_hash(b""));
        assert_ne!(name_hash(b"a"), name_hash(b"b"));
        let k = h47(b"ibdata1");
        assert!((1..1 << 47).contains(&k));
        assert_eq!(slot_of(1 << 46, 1), 1);
        assert_eq!(slot_of(1 << 46, 0), 0);
    }

    use cachalot_objects::dnode::BONUS_SIZE;
    use cachalot_objects::ObjectInfo;
    use std::cell::RefCell;
    use std::collections::HashMap;

    const PAGE: u64 = 4096;

    /// One in-memory object: its size and its sparse 4 KiB pages.
    type MemObj = (u64, HashMap<u64, Vec<u8>>);

    /// Objects in memory (zeros where no page was written).
    #[derive(Default)]
    struct Mem(RefCell<HashMap<u64, MemObj>>);

    impl ObjRead for Mem {
        fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
            let m = self.0.borrow();
            let (size, pages) = m.get(&obj).ok_or(Errno::ENOENT)?;
            let end = (off + len as u64).min(*size).max(off);
            let mut out = Vec::with_capacity((end - off) as usize);
            let mut pos = off;
            while pos < end {
                let (p, o) = (pos / PAGE, (pos % PAGE) as usize);
                let n = ((PAGE as usize - o) as u64).min(end - pos) as usize;
                match pages.get(&p) {
                    Some(pg) => out.extend_from_slice(&pg[o..o + n]),
                    None => out.resize(out.len() + n, 0),
                }
                pos += n as u64;
            }
            Ok(out)
        }
        fn info(&self, obj: u64) -> Result<ObjectInfo> {
            let size = self.0.borrow().get(&obj).ok_or(Errno::ENOENT)?.0;
            Ok(ObjectInfo {
                id: obj,
                otype: 2,
                blksz: 16384,
                size,
                gen: 1,
                bonus: [0; BONUS_SIZE],
            })
        }
    }

    impl ObjWrite for Mem {
        fn write(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
            let mut m = self.0.borrow_mut();
            let (size, pages) = m.entry(obj).or_default();
            let mut done = 0usize;
            while done < data.len() {
                let pos = off + done as u64;
                let (p, o) = (pos / PAGE, (pos % PAGE) as usize);
                let n = (PAGE as usize - o).min(data.len() - done);
                let pg = pages.entry(p).or_insert_with(|| vec![0; PAGE as usize]);
                pg[o..o + n].copy_from_slice(&data[done..done + n]);
                done += n;
            }
            *size = (*size).max(off + data.len() as u64);
            Ok(())
        }
        fn truncate(&self, _obj: u64, _size: u64) -> Result<()> {
            Ok(())
        }
        fn set_bonus(&self, _obj: u64, _bonus: &[u8]) -> Result<()> {
            Ok(())
        }
        fn create_object(&self) -> Result<u64> {
            Ok(0)
        }
        fn delete_object(&self, _obj: u64) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn collisions_and_overflow_chains() {
        WEAK_HASH.with(|w| w.set(true));
        let m = Mem::default();
        init(&m, 7).unwrap();
        let names: Vec<Vec<u8>> = (0..1500)
            .map(|i| format!("{i}-entry").into_bytes())
            .collect();
        for (i, n) in names.iter().enumerate() {
            insert(&m, 7, n, 100 + i as u64, libc::DT_REG).unwrap();
        }
        assert_eq!(
            insert(&m, 7, &names[3], 1, libc::DT_REG),
            Err(Errno::EEXIST)
        );
        let h = read_header(&m, 7).unwrap();
        assert_eq!(h.depth, MAX_DEPTH, "the table doubled to its limit");
        assert!(h.nbuckets > 2, "overflow buckets were chained");
        for (i, n) in names.iter().enumerate() {
            assert_eq!(lookup(&m, 7, n).unwrap().unwrap().obj, 100 + i as u64);
        }
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let b = readdir(&m, 7, after, 100).unwrap();
            if b.is_empty() {
                break;
            }
            after = b.last().unwrap().key;
            all.extend(b);
        }
        assert_eq!(all.len(), names.len());
        assert!(
            all.windows(2).all(|w| w[0].key < w[1].key),
            "unique sorted keys"
        );
        for n in names.iter().step_by(2) {
            assert!(remove(&m, 7, n).unwrap().is_some());
        }
        assert_eq!(count(&m, 7).unwrap(), 750);
        for (i, n) in names.iter().enumerate() {
            assert_eq!(lookup(&m, 7, n).unwrap().is_some(), i % 2 == 1);
        }
        assert!(replace(&m, 7, &names[1], 5, libc::DT_DIR).unwrap());
        assert_eq!(lookup(&m, 7, &names[1]).unwrap().unwrap().obj, 5);
        WEAK_HASH.with(|w| w.set(false));
    }

    #[test]
    fn malformed_directories_are_eio() {
        let m = Mem::default();
        init(&m, 1).unwrap();
        insert(&m, 1, b"a", 9, libc::DT_REG).unwrap();
        // A table slot naming a bucket past the end.
        ObjWrite::write(&m, 1, TABLE_OFF, &99u32.to_le_bytes()).unwrap();
        assert_eq!(lookup(&m, 1, b"a"), Err(Errno::EIO));
        // A bucket whose byte count overflows it.
        ObjWrite::write(&m, 1, TABLE_OFF, &0u32.to_le_bytes()).unwrap();
        ObjWrite::write(&m, 1, BUCKET_BASE + 8, &u32::MAX.to_le_bytes()).unwrap();
        assert_eq!(lookup(&m, 1, b"a"), Err(Errno::EIO));
        // Not a directory at all.
        ObjWrite::write(&m, 2, 0, b"plain data").unwrap();
        assert_eq!(lookup(&m, 2, b"a"), Err(Errno::ENOTDIR));
    }

    #[test]
    fn names() {
        assert!(check_name(b"ok").is_ok());
        assert_eq!(check_name(b""), Err(Errno::EINVAL));
        assert_eq!(check_name(b"a/b"), Err(Errno::EINVAL));
        assert_eq!(check_name(b".."), Err(Errno::EINVAL));
        assert_eq!(check_name(&[b'x'; 256]), Err(Errno::ENAMETOOLONG));
        assert!(check_name(&[b'x'; 255]).is_ok());
    }
}
