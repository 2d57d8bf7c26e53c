//! Open and lock state (RFC 8881 sections 8, 9 and 18.10 to 18.18): stateids
//! for opens (share access and deny) and byte-range locks, and the checks of a
//! stateid presented with READ, WRITE, SETATTR, CLOSE and LOCKU.
//!
//! Invariants:
//! - A stateid's `other` is the boot time (4 bytes) and a counter (8 bytes):
//!   one from an earlier server instance is STALE_STATEID, an unknown one
//!   BAD_STATEID, never another owner's state. Its `seqid` grows by one with
//!   every change; an older seqid is OLD_STATEID, a newer one BAD_STATEID, and
//!   0 means "the current one" (section 8.2.2).
//! - Share reservations: no two opens of one file by different owners where
//!   one's access meets the other's deny (SHARE_DENIED). One open stateid per
//!   (client, open owner, file); opening again upgrades it.
//! - Byte ranges: the ranges held by one lock stateid never overlap each other;
//!   ranges of different owners overlap only if both are read locks. A lock
//!   stateid belongs to an open stateid of the same client and file, and goes
//!   with it (CLOSE with locks held is LOCKS_HELD).
//! - Everything a client holds is dropped with it ([`Table::drop_client`]),
//!   which is how an expired lease releases a dead client's locks.

use super::consts::*;
use super::ops::Stateid;
use std::collections::HashMap;

pub const OPEN4_SHARE_ACCESS_READ: u32 = 1;
pub const OPEN4_SHARE_ACCESS_WRITE: u32 = 2;
/// Most stateids held at once (all clients).
pub const MAX_STATEIDS: usize = 1 << 20;
/// Most ranges one lock stateid holds.
pub const MAX_RANGES: usize = 4096;

/// A file, as state keys it: pool guid, dataset id, object.
pub type FileKey = (u64, u64, u64);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    /// Inclusive.
    pub end: u64,
    pub write: bool,
}

#[derive(Clone, Debug)]
pub enum Kind {
    Open { access: u32, deny: u32 },
    Lock { open: [u8; 12], ranges: Vec<Range> },
}

#[derive(Clone, Debug)]
pub struct Rec {
    pub clientid: u64,
    pub owner: Vec<u8>,
    pub file: FileKey,
    pub seqid: u32,
    pub kind: Kind,
}

/// A conflicting lock (lock4denied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    pub offset: u64,
    pub length: u64,
    pub write: bool,
    pub clientid: u64,
    pub owner: Vec<u8>,
}

#[derive(Default)]
pub struct Table {
    pub map: HashMap<[u8; 12], Rec>,
    next: u64,
}

/// The end (inclusive) of a range at `offset` of `length` (u64::MAX: to the
/// end of file); INVAL for a zero length or one past 2^64.
pub fn range_end(offset: u64, length: u64) -> Result<u64, u32> {
    if length == 0 {
        return Err(NFS4ERR_INVAL);
    }
    if length == u64::MAX {
        return Ok(u64::MAX);
    }
    offset.checked_add(length - 1).ok_or(NFS4ERR_INVAL)
}

fn overlaps(a: &Range, start: u64, end: u64) -> bool {
    a.start <= end && start <= a.end
}

/// `ranges` without [start, end] (ranges are split where needed).
fn cut(ranges: &[Range], start: u64, end: u64) -> Vec<Range> {
    let mut out = vec![];
    for r in ranges {
        if !overlaps(r, start, end) {
            out.push(r.clone());
            continue;
        }
        if r.start < start {
            out.push(Range {
                end: start - 1,
                ..r.clone()
            });
        }
        if r.end > end {
            out.push(Range {
                start: end + 1,
                ..r.clone()
            });
        }
    }
    out
}

impl Table {
    pub fn new_other(&mut self, boot: u32) -> [u8; 12] {
        self.next += 1;
        let mut o = [0u8; 12];
        o[..4].copy_from_slice(&boot.to_be_bytes());
        o[4..].copy_from_slice(&self.next.to_be_bytes());
        o
    }

    /// Add `rec` under a new stateid (DELAY when the table is full).
    fn insert(&mut self, boot: u32, rec: Rec) -> Result<[u8; 12], u32> {
        if self.map.len() >= MAX_STATEIDS {
            return Err(NFS4ERR_DELAY);
        }
        let k = self.new_other(boot);
        self.map.insert(k, rec);
        Ok(k)
    }

    /// Find the record of `sid` (see the module invariants for the errors).
    pub fn get(&self, sid: &Stateid, boot: u32) -> Result<&Rec, u32> {
        if sid.other[..4] != boot.to_be_bytes() {
            return Err(NFS4ERR_STALE_STATEID);
        }
        let r = self.map.get(&sid.other).ok_or(NFS4ERR_BAD_STATEID)?;
        if sid.seqid == 0 || sid.seqid == r.seqid {
            Ok(r)
        } else if sid.seqid > r.seqid {
            Err(NFS4ERR_BAD_STATEID)
        } else {
            Err(NFS4ERR_OLD_STATEID)
        }
    }

    pub fn stateid(&self, other: &[u8; 12]) -> Stateid {
        Stateid {
            seqid: self.map.get(other).map_or(0, |r| r.seqid),
            other: *other,
        }
    }

    /// Open `file` for (clientid, owner) with `access` and `deny`, or upgrade
    /// its open: the open stateid.
    pub fn open(
        &mut self,
        boot: u32,
        clientid: u64,
        owner: &[u8],
        file: FileKey,
        access: u32,
        deny: u32,
    ) -> Result<Stateid, u32> {
        let mut mine = None;
        for (k, r) in &self.map {
            if r.file != file {
                continue;
            }
            if let Kind::Open { access: a, deny: d } = r.kind {
                if r.clientid == clientid && r.owner == owner {
                    mine = Some(*k);
                } else if access & d != 0 || deny & a != 0 {
                    return Err(NFS4ERR_SHARE_DENIED);
                }
            }
        }
        let other = match mine {
            Some(k) => {
                let r = self.map.get_mut(&k).ok_or(NFS4ERR_SERVERFAULT)?;
                if let Kind::Open { access: a, deny: d } = &mut r.kind {
                    *a |= access;
                    *d |= deny;
                }
                r.seqid += 1;
                k
            }
            None => self.insert(
                boot,
                Rec {
                    clientid,
                    owner: owner.to_vec(),
                    file,
                    seqid: 1,
                    kind: Kind::Open { access, deny },
                },
            )?,
        };
        Ok(self.stateid(&other))
    }

    /// The open record behind `sid` (checked), which must belong to `clientid`.
    fn open_rec(&self, sid: &Stateid, boot: u32, clientid: u64) -> Result<&Rec, u32> {
        let r = self.get(sid, boot)?;
        if r.clientid != clientid || !matches!(r.kind, Kind::Open { .. }) {
            return Err(NFS4ERR_BAD_STATEID);
        }
        Ok(r)
    }

    /// CLOSE: drop the open (LOCKS_HELD while it has locks).
    pub fn close(&mut self, sid: &Stateid, boot: u32, clientid: u64) -> Result<Stateid, u32> {
        let seqid = self.open_rec(sid, boot, clientid)?.seqid;
        let locked = self.map.values().any(|r| {
            matches!(&r.kind, Kind::Lock { open, ranges } if *open == sid.other && !ranges.is_empty())
        });
        if locked {
            return Err(NFS4ERR_LOCKS_HELD);
        }
        self.map.retain(|k, r| {
            *k != sid.other && !matches!(&r.kind, Kind::Lock { open, .. } if *open == sid.other)
        });
        Ok(Stateid {
            seqid: seqid.wrapping_add(1),
            other: sid.other,
        })
    }

    /// OPEN_DOWNGRADE to a subset of the open's access and deny.
    pub fn downgrade(
        &mut self,
        sid: &Stateid,
        boot: u32,
        clientid: u64,
        access: u32,
        deny: u32,
    ) -> Result<Stateid, u32> {
        self.open_rec(sid, boot, clientid)?;
        let r = self.map.get_mut(&sid.other).ok_or(NFS4ERR_BAD_STATEID)?;
        if let Kind::Open { access: a, deny: d } = &mut r.kind {
            if access & !*a != 0 || deny & !*d != 0 || access == 0 {
                return Err(NFS4ERR_INVAL);
            }
            (*a, *d) = (access, deny);
        }
        r.seqid += 1;
        Ok(self.stateid(&sid.other))
    }

    /// May the holder of `sid` read (or write) `file`? Special stateids
    /// (anonymous, all-ones) are checked against the share reservations.
    pub fn check_io(
        &self,
        sid: &Stateid,
        boot: u32,
        file: FileKey,
        write: bool,
    ) -> Result<(), u32> {
        let anon = sid.other == [0; 12] && sid.seqid == 0;
        let bypass = sid.other == [0xff; 12] && sid.seqid == u32::MAX;
        if anon || bypass {
            if bypass && !write {
                return Ok(());
            }
            let want = if write {
                OPEN4_SHARE_ACCESS_WRITE
            } else {
                OPEN4_SHARE_ACCESS_READ
            };
            let denied = self.map.values().any(|r| {
                r.file == file && matches!(r.kind, Kind::Open { deny, .. } if deny & want != 0)
            });
            return if denied { Err(NFS4ERR_LOCKED) } else { Ok(()) };
        }
        let r = self.get(sid, boot)?;
        if r.file != file {
            return Err(NFS4ERR_BAD_STATEID);
        }
        let access = match &r.kind {
            Kind::Open { access, .. } => *access,
            Kind::Lock { open, .. } => match self.map.get(open).map(|o| &o.kind) {
                Some(Kind::Open { access, .. }) => *access,
                _ => return Err(NFS4ERR_BAD_STATEID),
            },
        };
        if write && access & OPEN4_SHARE_ACCESS_WRITE == 0 {
            return Err(NFS4ERR_OPENMODE);
        }
        // A mandatory check against other owners' byte-range locks is not
        // made: locks are advisory, as on Linux.
        Ok(())
    }

    /// The first lock of another owner conflicting with [start, end].
    pub fn conflict(
        &self,
        file: FileKey,
        clientid: u64,
        owner: &[u8],
        start: u64,
        end: u64,
        write: bool,
    ) -> Option<Denied> {
        for r in self.map.values() {
            let Kind::Lock { ranges, .. } = &r.kind else {
                continue;
            };
            if r.file != file || (r.clientid == clientid && r.owner == owner) {
                continue;
            }
            for g in ranges {
                if overlaps(g, start, end) && (write || g.write) {
                    return Some(Denied {
                        offset: g.start,
                        length: if g.end == u64::MAX {
                            u64::MAX
                        } else {
                            g.end - g.start + 1
                        },
                        write: g.write,
                        clientid: r.clientid,
                        owner: r.owner.clone(),
                    });
                }
            }
        }
        None
    }

    /// The lock stateid of (clientid, lock owner) under open `open` on its
    /// file, made if new.
    pub fn lock_stateid(
        &mut self,
        boot: u32,
        open: &Stateid,
        clientid: u64,
        owner: &[u8],
    ) -> Result<[u8; 12], u32> {
        let file = self.open_rec(open, boot, clientid)?.file;
        let found = self.map.iter().find(|(_, r)| {
            r.clientid == clientid
                && r.owner == owner
                && r.file == file
                && matches!(r.kind, Kind::Lock { .. })
        });
        if let Some((k, _)) = found {
            return Ok(*k);
        }
        self.insert(
            boot,
            Rec {
                clientid,
                owner: owner.to_vec(),
                file,
                seqid: 0,
                kind: Kind::Lock {
                    open: open.other,
                    ranges: vec![],
                },
            },
        )
    }

    /// Set (`Some(write)`) or clear (`None`) [start, end] in lock stateid
    /// `other`; its new stateid.
    pub fn set_range(
        &mut self,
        other: &[u8; 12],
        start: u64,
        end: u64,
        lock: Option<bool>,
    ) -> Result<Stateid, u32> {
        let r = self.map.get_mut(other).ok_or(NFS4ERR_BAD_STATEID)?;
        let Kind::Lock { ranges, .. } = &mut r.kind else {
            return Err(NFS4ERR_BAD_STATEID);
        };
        let mut next = cut(ranges, start, end);
        if let Some(write) = lock {
            next.push(Range { start, end, write });
        }
        if next.len() > MAX_RANGES {
            return Err(NFS4ERR_DELAY);
        }
        *ranges = next;
        r.seqid += 1;
        Ok(self.stateid(other))
    }

    /// Drop everything `clientid` holds: the number of lock stateids dropped.
    pub fn drop_client(&mut self, clientid: u64) -> usize {
        let locks = self
            .map
            .values()
            .filter(|r| {
                r.clientid == clientid
                    && matches!(&r.kind, Kind::Lock { ranges, .. } if !ranges.is_empty())
            })
            .count();
        self.map.retain(|_, r| r.clientid != clientid);
        locks
    }

    pub fn holds_state(&self, clientid: u64) -> bool {
        self.map.values().any(|r| r.clientid == clientid)
    }

    /// Check the invariants (tests).
    pub fn check(&self) {
        type Open<'a> = (u64, &'a [u8], u32, u32);
        let mut opens: HashMap<FileKey, Vec<Open>> = HashMap::new();
        for r in self.map.values() {
            match &r.kind {
                Kind::Open { access, deny } => {
                    opens
                        .entry(r.file)
                        .or_default()
                        .push((r.clientid, &r.owner, *access, *deny));
                }
                Kind::Lock { open, ranges } => {
                    let o = self.map.get(open).expect("a lock's open exists");
                    assert_eq!((o.clientid, o.file), (r.clientid, r.file));
                    for (i, a) in ranges.iter().enumerate() {
                        assert!(a.start <= a.end);
                        for b in &ranges[i + 1..] {
                            assert!(!overlaps(a, b.start, b.end), "own ranges overlap");
                        }
                    }
                }
            }
        }
        for v in opens.values() {
            for (i, a) in v.iter().enumerate() {
                for b in &v[i + 1..] {
                    assert!((a.0, a.1) != (b.0, b.1), "one open per owner and file");
                    assert!(a.2 & b.3 == 0 && a.3 & b.2 == 0, "share reservations hold");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_split_and_conflict() {
        let r = |s, e| Range {
            start: s,
            end: e,
            write: true,
        };
        assert_eq!(cut(&[r(0, 99)], 10, 19), vec![r(0, 9), r(20, 99)]);
        assert_eq!(cut(&[r(0, 99)], 0, u64::MAX), vec![]);
        assert_eq!(range_end(5, 0), Err(NFS4ERR_INVAL));
        assert_eq!(range_end(u64::MAX, 2), Err(NFS4ERR_INVAL));
        assert_eq!(range_end(7, u64::MAX), Ok(u64::MAX));
        let mut t = Table::default();
        let f = (1, 2, 3);
        let o1 = t.open(9, 1, b"a", f, 3, 0).unwrap();
        let o2 = t.open(9, 2, b"b", f, 1, 0).unwrap();
        assert_eq!(t.open(9, 3, b"c", f, 1, 2), Err(NFS4ERR_SHARE_DENIED));
        let l1 = t.lock_stateid(9, &o1, 1, b"la").unwrap();
        t.set_range(&l1, 0, 99, Some(true)).unwrap();
        assert!(t.conflict(f, 2, b"lb", 50, 60, false).is_some());
        assert!(t.conflict(f, 1, b"la", 50, 60, true).is_none(), "own lock");
        assert!(t.conflict(f, 2, b"lb", 100, 200, true).is_none());
        t.set_range(&l1, 40, 69, None).unwrap();
        assert!(t.conflict(f, 2, b"lb", 50, 60, true).is_none());
        assert_eq!(t.close(&o1, 9, 1), Err(NFS4ERR_LOCKS_HELD));
        t.check();
        assert_eq!(t.drop_client(1), 1);
        assert!(t.conflict(f, 2, b"lb", 0, 10, true).is_none());
        t.close(&o2, 9, 2).unwrap();
        assert!(t.map.is_empty());
        // Stateid seqids.
        let o = t.open(9, 1, b"a", f, 1, 0).unwrap();
        let up = t.open(9, 1, b"a", f, 2, 0).unwrap();
        assert_eq!(up.seqid, o.seqid + 1);
        assert_eq!(t.get(&o, 9).unwrap_err(), NFS4ERR_OLD_STATEID);
        assert!(t.get(&Stateid { seqid: 0, ..o }, 9).is_ok());
        assert_eq!(
            t.get(&Stateid { seqid: 9, ..o }, 9).unwrap_err(),
            NFS4ERR_BAD_STATEID
        );
        assert_eq!(t.get(&o, 8).unwrap_err(), NFS4ERR_STALE_STATEID);
        t.check();
    }
}
