//! Replay of the intent log into its object set after an import: the chain the
//! committed root names is read block by block, and every record of a txg later
//! than the committed one is applied again, a group at a time.
//!
//! Invariants:
//! - Replay is idempotent: it always starts from the committed tree and re-applies
//!   the same records in log order (each record's effect depends only on the
//!   state the records before it produced); the chain is freed only by the commit
//!   that follows replay.
//! - A group applies only once its last record is read, and then whole; a group
//!   whose block written by reference does not verify ends the log (see
//!   `objset::prewrite`).

use super::{Record, ZilHeader};
use crate::objset::{ObjError, ObjectSet, Result};
use cachalot_pool::{Dva, Pool, PoolError};

/// What replay found in an intent log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub blocks: usize,
    pub records_applied: usize,
    pub records_skipped: usize,
    /// Why the chain ended early, if it did not end at an unwritten block.
    pub problem: Option<String>,
}

impl ObjectSet {
    /// Re-apply the intent log after an import: every record of a txg later than
    /// `committed_txg` (the imported one), in order. The chain's blocks are claimed
    /// and handed to the log, which frees them in the next sync (the commit that
    /// makes the replayed changes part of the tree).
    pub fn replay_log(&self, committed_txg: u64) -> Result<ReplayReport> {
        let zh = self.inner.lock().zil_header;
        let mut report = ReplayReport::default();
        if zh.is_empty() {
            return Ok(report);
        }
        let pool = self.cache.pool.clone();
        let mut blocks = Vec::new();
        // Records of the group being read: applied when its last record is read;
        // dropped if the chain ends first (the operation never became durable).
        let mut group: Vec<Record> = Vec::new();
        let (mut dva, mut seq) = (zh.head, zh.seq);
        let next = 'chain: loop {
            if !pool.claim_log_block(&dva) {
                report.problem = Some(format!(
                    "intent log block at vdev {} offset {:#x} overlaps live data: log ends there",
                    dva.vdev, dva.offset
                ));
                break None;
            }
            let valid = |b: &[u8]| crate::zil::valid_block(b, zh.guid, seq);
            let data = match pool.read_log_block(&dva, &valid) {
                Ok(d) => d,
                Err(e) => {
                    // Unwritten (the usual end of a chain) or unreadable: either
                    // way the chain ends; keep the block as the next one to write.
                    let first = blocks.is_empty();
                    report.problem = chain_end_problem(&pool, &zh, &dva, &e, first, committed_txg);
                    break Some((dva, seq));
                }
            };
            let Some(decoded) = crate::zil::decode_block(&data, zh.guid, seq) else {
                break Some((dva, seq));
            };
            blocks.push(dva);
            report.blocks += 1;
            let after = decoded.next;
            for lr in decoded.records {
                // Records covered by the committed tree are skipped one by one: a
                // group's records share a txg, so a group is skipped whole (even
                // one whose first records were in a block already freed).
                if lr.txg <= committed_txg {
                    report.records_skipped += 1;
                    continue;
                }
                group.push(lr.rec);
                if lr.more {
                    continue;
                }
                if !self.replay_group(&mut group, &mut report)? {
                    // The chain ends at this group for good (a later replay must
                    // stop here too), so the log starts a new chain; the block
                    // this one names next is freed with the replayed ones.
                    if after.asize != 0 && pool.claim_log_block(&after) {
                        blocks.push(after);
                    }
                    break 'chain None;
                }
            }
            if decoded.next.asize == 0 {
                break None;
            }
            dva = decoded.next;
            seq += 1;
        };
        // The next block was allocated by a commit only if the chain was started in
        // a committed txg; claim it so it is not handed out twice.
        let next = next.filter(|(d, _)| pool.claim_log_block(d));
        report.records_skipped += group.len();
        self.zil.adopt_replayed(&blocks, next);
        Ok(report)
    }

    /// Apply a complete group, emptying it. The blocks its writes by reference
    /// name are all read before any record applies (see `prewrite`): `Ok(false)`
    /// when one does not verify, the group dropped whole.
    fn replay_group(&self, group: &mut Vec<Record>, report: &mut ReplayReport) -> Result<bool> {
        let mut fetched = Vec::new();
        for rec in group.iter() {
            if let Record::WriteRef { bp, .. } = rec {
                match self.fetch_write_ref(bp) {
                    Ok(Some(d)) => fetched.push(d),
                    r => {
                        report.problem = r.err();
                        report.records_skipped += group.len();
                        group.clear();
                        return Ok(false);
                    }
                }
            }
        }
        let mut fetched = fetched.into_iter();
        for rec in group.drain(..) {
            let r = match &rec {
                Record::WriteRef { obj, off, len, .. } => {
                    let d = fetched.next().unwrap_or_default();
                    let n = (*len as usize).min(d.len());
                    self.write(*obj, *off, &d[..n])
                }
                _ => self.apply_logged(&rec),
            };
            match r {
                Ok(()) => report.records_applied += 1,
                // The object was created in a txg that never committed
                // and its creation was not logged (a change made while
                // sync=disabled), so no fsync covering this record
                // returned: skip it.
                Err(ObjError::NoSuchObject(_)) => report.records_skipped += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Apply one intent-log record to the open state.
    fn apply_logged(&self, rec: &Record) -> Result<()> {
        match rec {
            Record::Write { obj, off, data } => self.write(*obj, *off, data),
            Record::Truncate { obj, size } => self.truncate(*obj, *size),
            Record::Create {
                obj,
                otype,
                blksz,
                gen,
            } => self.create_object_at(*obj, *otype, *blksz, *gen),
            Record::Delete { obj } => self.delete_object(*obj),
            Record::Bonus { obj, data } => self.set_bonus(*obj, data),
            Record::Punch { obj, off, len } => self.punch(*obj, *off, *len),
            // Replay reads the block first (`replay_log`); never reached.
            Record::WriteRef { .. } => Err(ObjError::Invalid(
                "write by reference outside replay".into(),
            )),
            // In memory only: never decoded from a log block.
            Record::WriteLazy { .. } => Err(ObjError::Invalid("unresolved lazy write".into())),
        }
    }
}

/// Why a chain that ended at `dva` with `e` lost records, if it did: a block
/// that is merely unwritten (the usual end of a chain) is no problem. `first`:
/// no block of the chain was read.
fn chain_end_problem(
    pool: &Pool,
    zh: &ZilHeader,
    dva: &Dva,
    e: &PoolError,
    first: bool,
    committed_txg: u64,
) -> Option<String> {
    if !matches!(e, PoolError::Checksum { .. }) {
        Some(format!(
            "intent log unreadable: {e}; records after txg {committed_txg} are lost"
        ))
    } else if pool.is_log_vdev(dva.vdev)
        && pool
            .read_log_block_raw(dva)
            .is_ok_and(|raw| !crate::zil::looks_unwritten(&raw))
    {
        // A dedicated log device only ever holds log blocks: other
        // bytes where the chain continues mean the device is damaged.
        Some(format!(
            "intent log device is corrupt at vdev {} offset {:#x}; records after txg {committed_txg} may be lost",
            dva.vdev, dva.offset
        ))
    } else if first && zh.head_written {
        Some(format!(
            "intent log is corrupt (first block at vdev {} offset {:#x}); records after txg {committed_txg} are lost",
            dva.vdev, dva.offset
        ))
    } else {
        None
    }
}
