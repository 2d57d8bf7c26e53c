//! The write path: writes, punches and truncates change the records of the open
//! layer (whole records; a partial record is read, modified and put back) and the
//! object's size; the tree changes only at `sync`.
//!
//! Invariants:
//! - Every change is made under `inner` and marks the object dirty; `dirty_bytes`
//!   follows every record put or dropped.
//! - A record is changed in place only when nothing else holds it
//!   (`Arc::get_mut`): readers, the syncing layer, a log commit and early writes
//!   keep the bytes they saw.

use super::{resized, ObjError, ObjState, ObjectSet, Result};
use crate::cache::CachePolicy;
use crate::dnode::*;
use crate::payload::{zeroed, Payload};
use std::collections::BTreeSet;
use std::sync::Arc;

impl ObjectSet {
    /// Make `[off, off + len)` of object `id` read as zeros, whole records becoming
    /// holes. The work is bounded by the records that hold data in the range, not
    /// by its length (a received stream may name 2^60 bytes), because the synced
    /// tree is walked a hole subtree at a time.
    pub fn punch(&self, id: u64, off: u64, len: u64) -> Result<()> {
        let policy = self.props().cache;
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        self.load(inner, id)?;
        let st = inner.objects.get_mut(&id).unwrap();
        let end = off.saturating_add(len).min(st.size);
        if off >= end {
            return Ok(());
        }
        let bs = st.blksz as u64;
        let (first, last) = (off / bs, (end - 1) / bs);
        let mut targets: BTreeSet<u64> = BTreeSet::new();
        for layer in [Some(&st.open), st.syncing.as_deref()]
            .into_iter()
            .flatten()
        {
            targets.extend(layer.records.range(first..=last).map(|(k, _)| *k));
        }
        let mut b = first;
        while b <= last {
            let (bp, run) = self.lookup_run(&st.phys, b)?;
            if !bp.is_hole() {
                targets.insert(b);
            }
            b = b.saturating_add(run.max(1));
        }
        // Tree reads above happen under the lock: punch is rare (receive), and
        // each read is of an indirect block the walk needs anyway.
        for blkid in targets {
            let (a, z) = (blkid * bs, (blkid + 1) * bs);
            let rec: Arc<[u8]> = if off <= a && end >= z {
                Arc::from(Vec::new())
            } else {
                let Some(r) = self.get_record(st, blkid, policy)? else {
                    continue;
                };
                let range = (off.max(a) - a) as usize..(end.min(z) - a) as usize;
                if r[range.clone()].iter().all(|b| *b == 0) {
                    // Already zeros (a punched record reads so): leave a hole a hole.
                    continue;
                }
                let mut v = r.to_vec();
                v[range].fill(0);
                v.into()
            };
            Self::put_record(&mut inner.dirty_bytes, st, blkid, rec);
        }
        Ok(())
    }

    /// The current record `blkid` of an object (None = hole), sized to its blksz.
    fn get_record(
        &self,
        st: &ObjState,
        blkid: u64,
        policy: CachePolicy,
    ) -> Result<Option<Arc<[u8]>>> {
        if let Some(hit) = st.in_memory(blkid) {
            return Ok(hit.map(|r| resized(r, st.blksz)));
        }
        Ok(self
            .read_tree_record(&st.phys, blkid, policy)?
            .map(|r| resized(&r, st.blksz)))
    }

    fn put_record(inner_dirty: &mut u64, st: &mut ObjState, blkid: u64, rec: Arc<[u8]>) {
        let len = rec.len() as u64;
        if let Some(old) = st.put_open(blkid, rec) {
            *inner_dirty -= old as u64;
        }
        *inner_dirty += len;
        st.dirty = true;
    }

    /// Write `data` at `offset`, growing the object as needed.
    pub fn write(&self, id: u64, offset: u64, data: &[u8]) -> Result<()> {
        self.write_payload(id, offset, &data.into())
    }

    /// Write `data` at `offset`, growing the object as needed. An owned piece
    /// of `data` that is exactly one whole aligned record becomes that record
    /// without a copy (see `Payload`); other bytes are copied, and a partial
    /// record is read, modified and written.
    pub fn write_payload(&self, id: u64, offset: u64, data: &Payload<'_>) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= 1 << 60)
            .ok_or_else(|| ObjError::Invalid("write beyond the maximum object size".into()))?;
        let props = self.props();
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        self.load(inner, id)?;
        let st = inner.objects.get_mut(&id).unwrap();
        // Grow the block size while the object has a single block.
        if end > st.blksz as u64 && st.blksz < props.recordsize && st.size <= st.blksz as u64 {
            let new = (end.next_power_of_two().max(MIN_BLOCK as u64) as u32).min(props.recordsize);
            if new > st.blksz {
                let rec0 = self.get_record(st, 0, props.cache)?;
                st.blksz = new;
                if let Some(r) = rec0 {
                    Self::put_record(&mut inner.dirty_bytes, st, 0, resized(&r, new));
                }
            }
        }
        let bs = st.blksz as u64;
        let mut pos = offset;
        while pos < end {
            let blkid = pos / bs;
            let rstart = blkid * bs;
            let a = (pos - rstart) as usize;
            let b = ((end - rstart).min(bs)) as usize;
            let from = (pos - offset) as usize;
            pos = rstart + b as u64;
            if a == 0 && b == bs as usize {
                let rec = data.shared(from, b);
                Self::put_record(&mut inner.dirty_bytes, st, blkid, rec);
                continue;
            }
            // A partial write into an open record nothing else holds (no reader,
            // syncing layer, log commit or early write has a clone, which
            // `Arc::get_mut` guarantees) changes it in place: nobody can tell
            // from putting a new record, and a 16 KiB write into a 128 KiB
            // record then copies 16 KiB instead of the record twice.
            let own = st.open.records.get_mut(&blkid).and_then(Arc::get_mut);
            if let Some(r) = own.filter(|r| r.len() == bs as usize) {
                data.copy_to(from, &mut r[a..b]);
                st.dirty = true;
                continue;
            }
            let mut rec: Arc<[u8]> = match self.get_record(st, blkid, props.cache)? {
                Some(r) => Arc::from(&r[..]),
                None => zeroed(bs as usize),
            };
            data.copy_to(
                from,
                &mut Arc::get_mut(&mut rec).expect("a new record is unique")[a..b],
            );
            Self::put_record(&mut inner.dirty_bytes, st, blkid, rec);
        }
        st.size = st.size.max(end);
        Ok(())
    }

    /// Set the object's length; bytes past it are gone, growing reads zeros.
    pub fn truncate(&self, id: u64, size: u64) -> Result<()> {
        let policy = self.props().cache;
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        self.load(inner, id)?;
        let st = inner.objects.get_mut(&id).unwrap();
        if size >= st.size {
            st.size = size;
            st.dirty = true;
            return Ok(());
        }
        let bs = st.blksz as u64;
        let first_gone = size.div_ceil(bs);
        // Zero the tail of the partial last record.
        if !size.is_multiple_of(bs) {
            let blkid = size / bs;
            if let Some(r) = self.get_record(st, blkid, policy)? {
                let mut v = r.to_vec();
                v[(size % bs) as usize..].fill(0);
                Self::put_record(&mut inner.dirty_bytes, st, blkid, v.into());
            }
        }
        inner.dirty_bytes -= st.truncate_records(first_gone);
        st.size = size;
        st.dirty = true;
        Ok(())
    }
}
