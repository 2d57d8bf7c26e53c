//! The resilver's own path: rebuild, for a batch of blocks sorted by DVA, only
//! the raidz columns that live on resilvering devices.
//!
//! A scrub reads every column of a stripe, parity included, reconstructs,
//! recomputes parity and compares it all. A resilver needs less: the columns on
//! readable children are read, the missing ones rebuilt from them (one parity
//! pass), the data verified against the block's checksum, and only the columns
//! of resilvering devices written. A batch is cut into contiguous shares, one
//! per worker; reads of one child for a share are merged into a few large ones
//! (blocks sorted by DVA lie next to each other, so their columns do too);
//! writes of exactly adjacent
//! columns on a resilvering device are merged likewise, so it is written in
//! long sequential runs.
//!
//! Invariants: only bytes that passed the block's checksum are written, and
//! only at the exact columns of the block (a merged read may cover gaps; a
//! merged write never does, since a gap may be space a later txg allocates).
//! A block the fast path cannot vouch for (a read error, a checksum mismatch
//! needing the combinatorial search, a mirror copy to rebuild, a pointer that
//! does not fit) goes through `scrub_block`, which counts and heals as a scrub
//! does. A copy on a vdev without resilvering devices is not read at all.

use crate::blkptr::{checksum, BlkPtr};
use crate::blockio::extent_len;
use crate::parity::reconstruct;
use crate::pool::Pool;
use crate::raidz::Column;
use crate::vdev::{Leaf, ScrubOutcome, TopVdev};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Columns of one child closer than this are read as one (the gap is dropped).
const MERGE_GAP: u64 = 128 << 10;
/// Largest merged read.
const MAX_RUN: u64 = 16 << 20;

/// A device the resilver writes to.
fn is_target(l: &Leaf) -> bool {
    l.dev.is_some() && l.resilvering.load(Relaxed) && !l.is_faulted()
}

/// One raidz copy of a block with columns to rebuild.
struct Job {
    block: usize,
    top: usize,
    cols: Vec<Column>,
    /// Columns on children that cannot be read: rebuilt from the others.
    lost: Vec<usize>,
}

/// One merged read: `buf` holds the child's bytes from `offset` (None: it failed).
struct Run {
    offset: u64,
    len: u64,
    buf: Option<Vec<u8>>,
}

/// (top, child) of a leaf.
type LeafKey = (usize, usize);

/// A rebuilt column to write: (offset, bytes, block index).
type ColumnWrite = (u64, Vec<u8>, usize);

impl Pool {
    /// Rebuild the blocks of `batch` (sorted by first DVA) on the resilvering
    /// devices, `workers` threads at most; the outcome of each block, in order.
    ///
    /// Each worker takes a contiguous share of the batch and reads, rebuilds
    /// and writes it in turn: while one computes parity, another's reads or
    /// writes keep the devices busy (one pass over the whole batch left the
    /// devices idle during its CPU work and the CPU idle during its I/O).
    pub fn resilver_batch(&self, batch: &[BlkPtr], workers: usize) -> Vec<ScrubOutcome> {
        let per = batch.len().div_ceil(workers.max(1)).max(1);
        let shares: Vec<&[BlkPtr]> = batch.chunks(per).collect();
        par_map(&shares, workers, |share| self.resilver_share(share))
            .into_iter()
            .flatten()
            .collect()
    }

    /// `resilver_batch` of one share, in this thread.
    fn resilver_share(&self, batch: &[BlkPtr]) -> Vec<ScrubOutcome> {
        let tops = self.vdevs.read().clone();
        let mut slow = vec![false; batch.len()];
        let mut jobs = plan(&tops, batch, &mut slow);
        jobs.retain(|j| !slow[j.block]);
        let runs = read_runs(&tops, &jobs);
        let rebuilt = jobs
            .iter()
            .map(|j| rebuild(&tops, &runs, j, &batch[j.block]));
        let mut writes: BTreeMap<LeafKey, Vec<ColumnWrite>> = BTreeMap::new();
        for (j, r) in jobs.iter().zip(rebuilt) {
            match r {
                Some(cols) => {
                    for (child, off, bytes) in cols {
                        writes
                            .entry((j.top, child))
                            .or_default()
                            .push((off, bytes, j.block));
                    }
                }
                None => slow[j.block] = true,
            }
        }
        let mut out = vec![ScrubOutcome::default(); batch.len()];
        for ((t, c), mut cols) in writes {
            cols.sort_by_key(|w| w.0);
            write_merged(&tops[t].leaves[c], &cols, &mut out, &mut slow);
        }
        for (i, bp) in batch.iter().enumerate() {
            if slow[i] {
                out[i] = self.scrub_block(bp);
            }
        }
        out
    }
}

/// The raidz copies of `batch` to rebuild; blocks the fast path cannot take
/// are marked in `slow`.
fn plan(tops: &[Arc<TopVdev>], batch: &[BlkPtr], slow: &mut [bool]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (i, bp) in batch.iter().enumerate() {
        for d in bp.dva_iter() {
            let Some(top) = tops.get(d.vdev as usize) else {
                slow[i] = true;
                break;
            };
            if !top.leaves.iter().any(is_target) {
                continue;
            }
            let len = extent_len(top, d, bp.psize as usize);
            let (true, Some(len)) = (top.is_raidz(), len) else {
                slow[i] = true;
                break;
            };
            let cols = top.geometry().map(d.offset, len as u64);
            if !cols.iter().any(|c| is_target(&top.leaves[c.child])) {
                continue;
            }
            let lost: Vec<usize> = (0..cols.len())
                .filter(|&k| !top.leaves[cols[k].child].readable())
                .collect();
            if lost.len() > top.geometry().nparity {
                slow[i] = true;
                break;
            }
            jobs.push(Job {
                block: i,
                top: d.vdev as usize,
                cols,
                lost,
            });
        }
    }
    jobs
}

/// Read every readable column of `jobs`, merged per child.
fn read_runs(tops: &[Arc<TopVdev>], jobs: &[Job]) -> BTreeMap<LeafKey, Vec<Run>> {
    let mut ranges: BTreeMap<LeafKey, Vec<(u64, u64)>> = BTreeMap::new();
    for j in jobs {
        for (k, c) in j.cols.iter().enumerate() {
            if !j.lost.contains(&k) {
                let r = ranges.entry((j.top, c.child)).or_default();
                r.push((c.offset, c.offset + c.size as u64));
            }
        }
    }
    let keys: Vec<LeafKey> = ranges.keys().copied().collect();
    let read = |key: &LeafKey| -> Vec<Run> {
        let mut rs = ranges[key].clone();
        rs.sort_unstable();
        let mut runs: Vec<Run> = Vec::new();
        for (start, end) in rs {
            match runs.last_mut() {
                Some(r) if start <= r.offset + r.len + MERGE_GAP && end - r.offset <= MAX_RUN => {
                    r.len = r.len.max(end - r.offset);
                }
                _ => runs.push(Run {
                    offset: start,
                    len: end - start,
                    buf: None,
                }),
            }
        }
        let leaf = &tops[key.0].leaves[key.1];
        for r in &mut runs {
            let mut b = vec![0u8; r.len as usize];
            // A failed read is not counted here: its blocks go through
            // `scrub_block`, which reads, counts and heals them one by one.
            r.buf = leaf.read_raw(&mut b, r.offset).ok().map(|_| b);
        }
        runs
    };
    let runs: Vec<Vec<Run>> = keys.iter().map(read).collect();
    keys.into_iter().zip(runs).collect()
}

/// The columns of job `j` on resilvering devices, rebuilt and verified:
/// (child, offset, bytes). None if the fast path cannot vouch for them.
fn rebuild(
    tops: &[Arc<TopVdev>],
    runs: &BTreeMap<LeafKey, Vec<Run>>,
    j: &Job,
    bp: &BlkPtr,
) -> Option<Vec<(usize, u64, Vec<u8>)>> {
    let top = &tops[j.top];
    let nparity = top.geometry().nparity;
    let mut bytes: Vec<Vec<u8>> = Vec::with_capacity(j.cols.len());
    for (k, c) in j.cols.iter().enumerate() {
        if j.lost.contains(&k) {
            bytes.push(vec![0u8; c.size]);
            continue;
        }
        let rs = &runs[&(j.top, c.child)];
        let i = rs
            .partition_point(|r| r.offset <= c.offset)
            .checked_sub(1)?;
        let from = (c.offset - rs[i].offset) as usize;
        let buf = rs[i].buf.as_ref()?;
        bytes.push(buf.get(from..from + c.size)?.to_vec());
    }
    if !j.lost.is_empty() {
        reconstruct(&mut bytes, nparity, &j.lost).ok()?;
    }
    let data = bytes[nparity..].concat();
    let psize = bp.psize as usize;
    if data.len() < psize || checksum(&data[..psize]) != bp.checksum {
        return None;
    }
    let out = j
        .cols
        .iter()
        .zip(bytes)
        .filter(|(c, _)| is_target(&top.leaves[c.child]))
        .map(|(c, b)| (c.child, c.offset, b))
        .collect();
    Some(out)
}

/// Write `cols` (sorted by offset) to `leaf`, exactly adjacent ones as one
/// write; count each written column, and send the blocks of a failed write
/// to the slow path.
fn write_merged(leaf: &Leaf, cols: &[ColumnWrite], out: &mut [ScrubOutcome], slow: &mut [bool]) {
    let mut i = 0;
    while i < cols.len() {
        let mut end = cols[i].0 + cols[i].1.len() as u64;
        let mut n = 1;
        while let Some(next) = cols.get(i + n) {
            if next.0 != end || end - cols[i].0 >= MAX_RUN {
                break;
            }
            end += next.1.len() as u64;
            n += 1;
        }
        let group = &cols[i..i + n];
        let ok = if n == 1 {
            leaf.write_raw(&group[0].1, group[0].0).is_ok()
        } else {
            let buf = group
                .iter()
                .map(|w| w.1.as_slice())
                .collect::<Vec<_>>()
                .concat();
            leaf.write_raw(&buf, group[0].0).is_ok()
        };
        for w in group {
            if ok {
                out[w.2].resilvered += 1;
            } else {
                slow[w.2] = true;
            }
        }
        i += n;
    }
}

/// `f` over `items`, on up to `workers` threads (inline with one), in order.
fn par_map<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = workers.clamp(1, items.len().max(1));
    if workers == 1 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(workers);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| s.spawn(|| chunk.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("resilver worker panicked"))
            .collect()
    })
}
