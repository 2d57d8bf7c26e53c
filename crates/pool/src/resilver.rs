//! The resilver's own path: rebuild, for a batch of blocks sorted by DVA, only
//! the raidz columns that live on resilvering devices.
//!
//! A scrub reads every column of a stripe, parity included, reconstructs,
//! recomputes parity and compares it all. A resilver needs less: the columns on
//! readable children are read, the missing ones rebuilt from them (one parity
//! pass, by XOR in place of field arithmetic when it suffices), the data
//! verified against the block's checksum, and only the columns of resilvering
//! devices written. Workers take consecutive batches (`resilver_blocks`); reads
//! of one child for a batch are merged into a few large ones (blocks sorted by
//! DVA lie next to each other, so their columns do too), and the surviving
//! columns are used where they were read, never copied; writes of exactly
//! adjacent columns on a resilvering device are merged likewise, so it is
//! written in long sequential runs.
//!
//! Invariants: only bytes that passed the block's checksum are written, and
//! only at the exact columns of the block (a merged read may cover gaps; a
//! merged write never does, since a gap may be space a later txg allocates).
//! A block the fast path cannot vouch for (a read error, a checksum mismatch
//! needing the combinatorial search, a mirror copy to rebuild, a pointer that
//! does not fit) goes through `scrub_block`, which counts and heals as a scrub
//! does. A copy on a vdev without resilvering devices is not read at all.

use crate::blkptr::{checksum_parts, BlkPtr};
use crate::blockio::extent_len;
use crate::parity::{rebuild_one_by_xor, reconstruct};
use crate::pool::Pool;
use crate::raidz::Column;
use crate::vdev::{Leaf, ScrubOutcome, TopVdev};
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Columns of one child closer than this are read as one (the gap is dropped).
const MERGE_GAP: u64 = 128 << 10;
/// Largest merged read.
const MAX_RUN: u64 = 16 << 20;

/// Batches a worker may run ahead of the oldest one not yet delivered, per
/// worker: bounds the work a stop leaves behind (and the memory in flight).
const AHEAD_PER_WORKER: usize = 2;

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

/// Buffers one worker reuses from batch to batch, so merged reads and writes
/// neither allocate nor zero megabytes each time (that was a tenth of the
/// resilver's CPU).
#[derive(Default)]
struct Scratch {
    reads: Vec<Vec<u8>>,
    write: Vec<u8>,
}

impl Scratch {
    /// A buffer of `len` bytes to read into (its old contents are overwritten).
    fn take(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.reads.pop().unwrap_or_default();
        if b.len() < len {
            b.resize(len, 0);
        } else {
            b.truncate(len);
        }
        b
    }
}

/// Where the workers of `resilver_blocks` are.
struct Gate {
    /// The next batch to take.
    next: usize,
    /// Batches delivered in order.
    delivered: usize,
    stop: bool,
}

impl Pool {
    /// Rebuild `bps` (sorted by first DVA) on the resilvering devices, in
    /// batches of `batch` blocks on `workers` threads (inline with one).
    /// `done(i, outcomes)` gets batch `i` in this thread, in order: when it is
    /// called, every block before that batch is rebuilt. It returns false to
    /// stop: no batch is started after that. Returns the batches delivered.
    ///
    /// The workers form a bounded pipeline: each takes the next batch as soon
    /// as it finished one, so one worker's reads and writes overlap another's
    /// parity and checksums, with no barrier between batches; a worker stays
    /// at most `AHEAD_PER_WORKER` batches per worker ahead of the delivered
    /// ones, so a slow `done` (pacing) holds them back.
    pub fn resilver_blocks(
        &self,
        bps: &[BlkPtr],
        batch: usize,
        workers: usize,
        mut done: impl FnMut(usize, Vec<ScrubOutcome>) -> bool,
    ) -> usize {
        let batches: Vec<&[BlkPtr]> = bps.chunks(batch.max(1)).collect();
        if workers <= 1 {
            let mut scratch = Scratch::default();
            for (i, b) in batches.iter().enumerate() {
                if !done(i, self.resilver_share(b, &mut scratch)) {
                    return i + 1;
                }
            }
            return batches.len();
        }
        let ahead = workers * AHEAD_PER_WORKER;
        let gate = Mutex::new(Gate {
            next: 0,
            delivered: 0,
            stop: false,
        });
        let moved = Condvar::new();
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Vec<ScrubOutcome>)>();
        std::thread::scope(|s| {
            for _ in 0..workers {
                let (tx, gate, moved, batches) = (tx.clone(), &gate, &moved, &batches);
                s.spawn(move || {
                    let mut scratch = Scratch::default();
                    loop {
                        let i = {
                            let mut g = gate.lock();
                            while !g.stop && g.next < batches.len() && g.next >= g.delivered + ahead
                            {
                                moved.wait(&mut g);
                            }
                            if g.stop || g.next >= batches.len() {
                                return;
                            }
                            g.next += 1;
                            g.next - 1
                        };
                        let out = self.resilver_share(batches[i], &mut scratch);
                        if tx.send((i, out)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(tx);
            // Batches finished out of order wait here for those before them.
            let mut finished: BTreeMap<usize, Vec<ScrubOutcome>> = BTreeMap::new();
            let mut delivered = 0;
            let mut stopped = false;
            // Ends when every worker has returned (their senders are gone).
            for (i, out) in rx {
                finished.insert(i, out);
                while !stopped {
                    let Some(out) = finished.remove(&delivered) else {
                        break;
                    };
                    stopped = !done(delivered, out);
                    delivered += 1;
                    let mut g = gate.lock();
                    g.delivered = delivered;
                    g.stop |= stopped;
                    moved.notify_all();
                }
            }
            delivered
        })
    }

    /// Rebuild one batch in this thread; the outcome of each block, in order.
    fn resilver_share(&self, batch: &[BlkPtr], scratch: &mut Scratch) -> Vec<ScrubOutcome> {
        let tops = self.vdevs.read().clone();
        let mut slow = vec![false; batch.len()];
        let mut jobs = plan(&tops, batch, &mut slow);
        jobs.retain(|j| !slow[j.block]);
        let runs = read_runs(&tops, &jobs, scratch);
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
        let bufs = runs.into_values().flatten().filter_map(|r| r.buf);
        scratch.reads.extend(bufs);
        let mut out = vec![ScrubOutcome::default(); batch.len()];
        for ((t, c), mut cols) in writes {
            cols.sort_by_key(|w| w.0);
            let leaf = &tops[t].leaves[c];
            write_merged(leaf, &cols, &mut scratch.write, &mut out, &mut slow);
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
fn read_runs(
    tops: &[Arc<TopVdev>],
    jobs: &[Job],
    scratch: &mut Scratch,
) -> BTreeMap<LeafKey, Vec<Run>> {
    let mut ranges: BTreeMap<LeafKey, Vec<(u64, u64)>> = BTreeMap::new();
    for j in jobs {
        for (k, c) in j.cols.iter().enumerate() {
            if !j.lost.contains(&k) {
                let r = ranges.entry((j.top, c.child)).or_default();
                r.push((c.offset, c.offset + c.size as u64));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (key, mut rs) in ranges {
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
            let mut b = scratch.take(r.len as usize);
            // A failed read is not counted here: its blocks go through
            // `scrub_block`, which reads, counts and heals them one by one.
            match leaf.read_raw(&mut b, r.offset) {
                Ok(()) => r.buf = Some(b),
                Err(_) => scratch.reads.push(b),
            }
        }
        out.insert(key, runs);
    }
    out
}

/// The columns of job `j` on resilvering devices, rebuilt and verified:
/// (child, offset, bytes). None if the fast path cannot vouch for them.
///
/// The surviving columns are borrowed from the merged reads, never copied:
/// the lost ones are rebuilt from them and the data checksummed piecewise.
fn rebuild(
    tops: &[Arc<TopVdev>],
    runs: &BTreeMap<LeafKey, Vec<Run>>,
    j: &Job,
    bp: &BlkPtr,
) -> Option<Vec<(usize, u64, Vec<u8>)>> {
    let top = &tops[j.top];
    let nparity = top.geometry().nparity;
    // Every column, a lost one as an empty slice.
    let mut cols: Vec<&[u8]> = Vec::with_capacity(j.cols.len());
    for (k, c) in j.cols.iter().enumerate() {
        if j.lost.contains(&k) {
            cols.push(&[]);
            continue;
        }
        let rs = &runs[&(j.top, c.child)];
        let i = rs
            .partition_point(|r| r.offset <= c.offset)
            .checked_sub(1)?;
        let from = (c.offset - rs[i].offset) as usize;
        let buf = rs[i].buf.as_ref()?;
        cols.push(buf.get(from..from + c.size)?);
    }
    let rebuilt = rebuild_lost(&cols, &j.cols, &j.lost, nparity)?;
    let column = |k: usize| match j.lost.iter().position(|&l| l == k) {
        Some(i) => rebuilt[i].as_slice(),
        None => cols[k],
    };
    let sum = checksum_parts((nparity..cols.len()).map(column), bp.psize as usize);
    if sum != Some(bp.checksum) {
        return None;
    }
    let out = j
        .lost
        .iter()
        .zip(rebuilt)
        .filter(|(&k, _)| is_target(&top.leaves[j.cols[k].child]))
        .map(|(&k, b)| (j.cols[k].child, j.cols[k].offset, b))
        .collect();
    Some(out)
}

/// The `lost` columns of a stripe (in that order) from the others in `cols`:
/// by XOR for one lost column but Q, else through `reconstruct` on copies.
fn rebuild_lost(
    cols: &[&[u8]],
    shape: &[Column],
    lost: &[usize],
    nparity: usize,
) -> Option<Vec<Vec<u8>>> {
    if let [x] = *lost {
        if let Some(c) = rebuild_one_by_xor(cols, nparity, x, shape[x].size) {
            return Some(vec![c]);
        }
    }
    let mut bytes: Vec<Vec<u8>> = cols
        .iter()
        .zip(shape)
        .zip(0..)
        .map(|((b, c), k)| {
            if lost.contains(&k) {
                vec![0u8; c.size]
            } else {
                b.to_vec()
            }
        })
        .collect();
    reconstruct(&mut bytes, nparity, lost).ok()?;
    Some(
        lost.iter()
            .map(|&k| std::mem::take(&mut bytes[k]))
            .collect(),
    )
}

/// Write `cols` (sorted by offset) to `leaf`, exactly adjacent ones as one
/// write (joined in `joined`); count each written column, and send the
/// blocks of a failed write to the slow path.
fn write_merged(
    leaf: &Leaf,
    cols: &[ColumnWrite],
    joined: &mut Vec<u8>,
    out: &mut [ScrubOutcome],
    slow: &mut [bool],
) {
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
            joined.clear();
            for w in group {
                joined.extend_from_slice(&w.1);
            }
            leaf.write_raw(joined, group[0].0).is_ok()
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
