//! The intent log (ZIL): makes synchronous writes durable without waiting for a
//! transaction group.
//!
//! Big picture. Every logged change becomes an *itx* in memory, tagged with the
//! txg its change belongs to. The records are physical, at the object level: a
//! write, a truncate, a punch, an object created (with its id, type, block size
//! and generation) or deleted, a bonus set. A namespace operation of the POSIX
//! layer (create, rename, unlink, setattr, an xattr change: one `Tx` of the
//! dataset layer) is logged as a *group*: its records in order, every one but
//! the last flagged `more`, pushed to the queue at once so no other itx falls
//! between them. Replay applies a group only once its last record is read, so a
//! group cut by the end of the chain is dropped whole: namespace changes stay
//! atomic, and an fsync after any of them costs one log write, not a txg. `commit` makes all itxs up to
//! a point durable: one caller becomes the *leader*, takes every pending itx, packs
//! them into log blocks, writes them and flushes once; callers that arrive while it
//! writes wait and are served by the next leader's batch (group commit). When txg T
//! commits, itxs of txg <= T are covered by the tree and dropped, and log blocks
//! holding only such itxs are freed by the sync of T.
//!
//! The encoding of blocks, records and the header is in `format`; replay after
//! an import, in `replay`.
//!
//! Invariants:
//! - A log block is written only after the header naming its chain is committed
//!   (`header_persisted`); before that, `commit` asks the caller to commit a txg.
//! - An itx's txg is taken while the object set's txg is held, so "txg <= T" means
//!   exactly "the change is in the tree of T"; replay applies only itxs of later txgs.
//! - The itxs of a group are contiguous in the queue and in the chain, share one
//!   txg, and are applied all or none.
//! - A write *by reference* (`WriteRef`, ZFS's WR_INDIRECT) names a data block
//!   written before its record, by the leader, at its final place: the block is
//!   on disk and flushed with the log blocks, so the record is durable only with
//!   it. The object set owns the block (`ObjectSet::prewrite`): its txg's sync
//!   links it into the tree (no second write) or frees it; a free is deferred past
//!   that txg's commit, and after the commit the record is covered, so a record
//!   replay reads always names a block still intact.
//! - A write to be logged by reference whose txg closed before the leader got to
//!   it (`Resolved::InTxg`) is never copied into log blocks: the sync of that txg
//!   writes its blocks anyway, and a copy took that space a second time, beside
//!   a txg that needed it (on a nearly full pool the txg ran out of space and
//!   suspended the pool). The leader logs the batch only up to the group of
//!   that write and puts the rest back; it is made durable by the txg's commit,
//!   which the caller asks for (`NeedTxgCommit`). The log stays a prefix of the
//!   itxs: nothing of a later txg is logged while one of that txg's is neither
//!   logged nor committed, so replay never applies changes over a gap.

mod format;
mod replay;
pub use format::{
    decode_block, decode_records, encode_records, looks_unwritten, valid_block, DecodedBlock,
    LoggedRecord, Record, ZilHeader, BLOCK_HEADER,
};
use format::{encode_block, MAX_BLOCK, MIN_BLOCK, RECORD_HEADER};
pub use replay::ReplayReport;

use cachalot_pool::{Dva, Pool, PoolError};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// With `logbias=latency` and no separate log device, writes of at least this
/// many bytes are logged by reference (their full blocks written in place)
/// instead of copied into log blocks: 32 KiB, as ZFS's `zfs_immediate_write_sz`.
pub const BY_REFERENCE_MIN: usize = 32 * 1024;

impl Record {
    /// A write of at least `min` bytes (`usize::MAX`: none is).
    fn by_ref(&self, min: usize) -> bool {
        match self {
            Record::Write { data, .. } => data.len() >= min,
            Record::WriteLazy { len, .. } => *len >= min as u64,
            _ => false,
        }
    }

    /// Offered to the resolver: lazy, or to be logged by reference. A smaller
    /// write too whenever writes may be logged by reference at all (`min` is not
    /// `usize::MAX`): a block written behind already (`ObjectSet::write_behind`)
    /// is then named instead of copied into the log (no block is written for it).
    fn resolvable(&self, min: usize) -> bool {
        match self {
            Record::WriteLazy { .. } => true,
            Record::Write { .. } => min != usize::MAX,
            _ => false,
        }
    }
}

/// What a write record becomes in the log (`Zil::commit`'s resolver).
#[derive(Debug)]
pub enum Resolved {
    /// Log these records instead, covering the same bytes in order (none: the
    /// object is gone, and its deletion is logged or committed after it).
    Log(Vec<Record>),
    /// Log the record as it is.
    AsIs,
    /// Do not log it: to be logged by reference, but its txg is no longer open,
    /// so that txg's commit makes it durable (see the module's invariants).
    InTxg,
}

/// See `Zil::commit`: (a write record, its txg, log by reference) -> what to log.
pub type Prewrite<'a> = dyn Fn(&Record, u64, bool) -> Resolved + 'a;

/// A batch after `by_reference`: the itxs to log, and those left for a txg
/// commit (from the group of the first `Resolved::InTxg` write on, unresolved).
struct Resolution {
    log: Vec<Itx>,
    rest: Vec<Itx>,
}

/// Replace the writes of at least `min` bytes that `prewrite` takes by its
/// records; they inherit the write's txg and number, and form one group with it
/// (every record but the last flagged `more`, the last keeps the write's flag),
/// so replay applies the write whole or not at all. At the first write left to
/// its txg's commit (`Resolved::InTxg`), the batch is cut before its group.
fn by_reference(mut batch: Vec<Itx>, prewrite: &Prewrite<'_>, min: usize) -> Resolution {
    let mut log = Vec::with_capacity(batch.len());
    // Where the current group starts, in `batch` and in `log`.
    let mut group = (0, 0);
    for (i, itx) in batch.iter().enumerate() {
        if i == 0 || !batch[i - 1].more {
            group = (i, log.len());
        }
        let repl = if itx.rec.resolvable(min) {
            prewrite(&itx.rec, itx.txg, itx.rec.by_ref(min))
        } else {
            Resolved::AsIs
        };
        match repl {
            Resolved::InTxg => {
                log.truncate(group.1);
                let rest = batch.split_off(group.0);
                return Resolution { log, rest };
            }
            // The object is gone (a later deletion is logged after it).
            Resolved::Log(recs) if recs.is_empty() && !itx.more => {}
            Resolved::Log(recs) if !recs.is_empty() => {
                let n = recs.len();
                for (k, rec) in recs.into_iter().enumerate() {
                    log.push(Itx {
                        seq: itx.seq,
                        txg: itx.txg,
                        more: k + 1 < n || itx.more,
                        rec,
                    });
                }
            }
            _ => log.push(itx.clone()),
        }
    }
    Resolution {
        log,
        rest: Vec::new(),
    }
}

/// `batch` with every write too large for one log block split into chunks that
/// fit. The chunks form a group (with whatever group the write belongs to):
/// replay applies the write whole or not at all.
fn fit_in_blocks(batch: &[Itx]) -> Vec<Itx> {
    let max_data = (MAX_BLOCK as usize) - BLOCK_HEADER - RECORD_HEADER;
    let mut itxs: Vec<Itx> = Vec::new();
    for i in batch {
        match &i.rec {
            Record::Write { obj, off, data } if data.len() > max_data => {
                let chunks = data.len().div_ceil(max_data);
                for (k, chunk) in data.chunks(max_data).enumerate() {
                    itxs.push(Itx {
                        seq: i.seq,
                        txg: i.txg,
                        more: k + 1 < chunks || i.more,
                        rec: Record::Write {
                            obj: *obj,
                            off: off + (k * max_data) as u64,
                            data: chunk.into(),
                        },
                    });
                }
            }
            r => itxs.push(Itx {
                seq: i.seq,
                txg: i.txg,
                more: i.more,
                rec: r.clone(),
            }),
        }
    }
    itxs
}

#[derive(Clone)]
struct Itx {
    /// Its number (`Zil::log_group`).
    seq: u64,
    txg: u64,
    more: bool,
    rec: Record,
}

#[derive(Clone, Copy, Debug)]
struct LogBlock {
    dva: Dva,
    /// Highest txg of the itxs in it (0 for blocks adopted at replay).
    max_txg: u64,
}

struct State {
    guid: u64,
    /// Written blocks of the live chain, oldest first.
    chain: VecDeque<LogBlock>,
    /// Blocks of chains abandoned after a write error: freed once a commit covers
    /// their itxs (`max_txg`), never part of a header again.
    retired: Vec<LogBlock>,
    /// Block being written by the current leader.
    in_flight: Vec<(Dva, u64)>,
    /// Where the next block goes, and its sequence number.
    next: Option<(Dva, u64)>,
    /// The last committed object set root names this chain.
    header_persisted: bool,
    pending: VecDeque<Itx>,
    /// Sequence number the next itx gets.
    next_itx: u64,
    /// Every itx with a smaller number is durable (in the log or in a commit).
    durable_itx: u64,
    /// Highest txg of any itx logged so far.
    max_txg_logged: u64,
    committed_txg: u64,
    leader: bool,
    last_batch: u64,
    use_slog: bool,
    error: Option<String>,
}

impl State {
    /// Every itx up to `(seq, txg)` is durable: in the log, or its txg committed.
    fn covers(&self, (seq, txg): (u64, u64)) -> bool {
        self.durable_itx > seq || self.committed_txg >= txg
    }
}

/// One object set's intent log.
pub struct Zil {
    pool: Arc<Pool>,
    state: Mutex<State>,
    cv: Condvar,
    commits: cachalot_analytics::Stat,
    name: Mutex<String>,
}

/// Outcome of `Zil::commit`.
#[derive(Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Everything asked for is durable.
    Durable,
    /// Commit a txg (which also makes the asked-for changes durable), then call
    /// again: the chain's header is not on disk yet, or a write to be logged by
    /// reference belongs to a txg that is syncing (see `Resolved::InTxg`).
    NeedTxgCommit,
}

impl Zil {
    /// The log of an object set whose root recorded `header`.
    pub fn new(pool: Arc<Pool>, header: ZilHeader) -> Self {
        let (guid, next, persisted) = if header.is_empty() {
            (pool.env().guid(), None, false)
        } else {
            (header.guid, Some((header.head, header.seq)), true)
        };
        Zil {
            pool,
            state: Mutex::new(State {
                guid,
                chain: VecDeque::new(),
                retired: Vec::new(),
                in_flight: Vec::new(),
                next,
                header_persisted: persisted,
                pending: VecDeque::new(),
                next_itx: 1,
                durable_itx: 1,
                max_txg_logged: 0,
                committed_txg: 0,
                leader: false,
                last_batch: MIN_BLOCK,
                use_slog: true,
                error: None,
            }),
            cv: Condvar::new(),
            commits: cachalot_analytics::global().stat("zil.commits", &["dataset"]),
            name: Mutex::new(String::new()),
        }
    }

    /// Name used in analytics (the dataset).
    pub fn set_name(&self, name: &str) {
        *self.name.lock() = name.to_string();
    }

    /// Prefer the separate log devices (logbias=latency) or not (throughput).
    pub fn set_use_slog(&self, v: bool) {
        self.state.lock().use_slog = v;
    }

    /// Log a change made in `txg`; returns its itx number.
    pub fn log(&self, txg: u64, rec: Record) -> u64 {
        self.log_group(txg, vec![rec])
    }

    /// Log the changes of one atomic operation made in `txg`, in order: replay
    /// applies all of them or none. Returns the itx number of the last.
    pub fn log_group(&self, txg: u64, recs: Vec<Record>) -> u64 {
        let mut s = self.state.lock();
        let n = recs.len();
        for (i, rec) in recs.into_iter().enumerate() {
            let seq = s.next_itx;
            s.next_itx += 1;
            s.pending.push_back(Itx {
                seq,
                txg,
                more: i + 1 < n,
                rec,
            });
        }
        s.max_txg_logged = s.max_txg_logged.max(txg);
        s.next_itx - 1
    }

    /// The point `commit` must reach to cover everything logged so far.
    pub fn tail(&self) -> (u64, u64) {
        let s = self.state.lock();
        (s.next_itx - 1, s.max_txg_logged)
    }

    /// Whether every itx up to `upto` (from `tail`) is durable already: in the
    /// log, or covered by a committed txg.
    pub fn is_durable(&self, upto: (u64, u64)) -> bool {
        self.state.lock().covers(upto)
    }

    /// Make every itx up to `upto` (from `tail`) durable. `resolve` (the object
    /// set's, `ObjectSet::zil_commit`) gets every `WriteLazy`, and every write
    /// eligible for logging by reference (any size with `logbias=throughput`,
    /// `BY_REFERENCE_MIN` bytes with `logbias=latency` and no separate log
    /// device) with that flag, and with the flag false every smaller write
    /// whenever some are eligible (the resolver names a block already written
    /// behind rather than copy it): it returns `Resolved::Log` with the records
    /// to log instead (covering the same bytes, in order; none if the object is
    /// gone), `Resolved::AsIs` to log the record as it is, or `Resolved::InTxg`
    /// for a write left to its closed txg's commit (the batch is cut there).
    pub fn commit(
        &self,
        upto: (u64, u64),
        resolve: &Prewrite<'_>,
    ) -> Result<CommitOutcome, PoolError> {
        let (seq, _) = upto;
        let t0 = Instant::now();
        let mut s = self.state.lock();
        loop {
            if s.covers(upto) {
                return Ok(CommitOutcome::Durable);
            }
            if let Some(e) = &s.error {
                return Err(PoolError::Suspended(e.clone()));
            }
            if !s.header_persisted {
                if s.next.is_none() {
                    let dva = self.pool.alloc_log_block(s.last_batch, s.use_slog)?;
                    s.next = Some((dva, 1));
                }
                return Ok(CommitOutcome::NeedTxgCommit);
            }
            if s.leader {
                self.cv.wait(&mut s);
                continue;
            }
            s.leader = true;
            let batch: Vec<Itx> = s.pending.drain(..).collect();
            let target = s.next_itx;
            let min = if !s.use_slog {
                1
            } else if !self.pool.has_log_vdevs() {
                BY_REFERENCE_MIN
            } else {
                usize::MAX
            };
            // The block writes happen without the lock, as the log writes do.
            let Resolution { log: batch, rest } = if batch.iter().any(|i| i.rec.resolvable(min)) {
                parking_lot::MutexGuard::unlocked(&mut s, || by_reference(batch, resolve, min))
            } else {
                Resolution {
                    log: batch,
                    rest: Vec::new(),
                }
            };
            let r = self.write_batch(&mut s, &batch);
            s.leader = false;
            // Left for a txg commit, in order, before anything logged since;
            // minus what a commit covered meanwhile (`txg_committed` dropped
            // those from the queue while the leader held them).
            let committed = s.committed_txg;
            let rest: Vec<Itx> = rest.into_iter().filter(|i| i.txg > committed).collect();
            let left = rest.first().map(|i| i.seq);
            for itx in rest.into_iter().rev() {
                s.pending.push_front(itx);
            }
            let target = left.unwrap_or(target);
            match r {
                Ok(()) => s.durable_itx = s.durable_itx.max(target),
                Err(_) => {
                    // A block of this batch may be missing on disk, which would cut
                    // the chain before anything written after it: abandon the chain,
                    // start a new one, and let a txg commit cover the batch.
                    for itx in batch.into_iter().rev() {
                        s.pending.push_front(itx);
                    }
                    Self::retire_chain(&mut s, self.pool.env().guid());
                }
            }
            self.cv.notify_all();
            if s.durable_itx > seq {
                self.commits
                    .record(&[self.name.lock().as_str()], 0, t0.elapsed());
            } else if left.is_some() && r.is_ok() {
                return Ok(CommitOutcome::NeedTxgCommit);
            }
        }
    }

    /// Pack `batch` into blocks, write them, flush. Called by the leader with the
    /// state lock held across the allocation bookkeeping, released for the I/O.
    fn write_batch(
        &self,
        s: &mut parking_lot::MutexGuard<'_, State>,
        batch: &[Itx],
    ) -> Result<(), PoolError> {
        if batch.is_empty() {
            return Ok(());
        }
        let sector = self.pool.sector_size();
        let itxs = fit_in_blocks(batch);
        let total: u64 =
            itxs.iter().map(|i| i.rec.encoded_len() as u64).sum::<u64>() + BLOCK_HEADER as u64;
        s.last_batch = total.clamp(MIN_BLOCK, MAX_BLOCK);
        // Plan blocks: fill the pre-allocated one, then chain new ones.
        let mut planned: Vec<(Dva, u64, Dva, Vec<usize>, u64)> = Vec::new();
        let mut i = 0;
        while i < itxs.len() {
            let (dva, seq) = match s.next.take() {
                Some(n) => n,
                None => (self.pool.alloc_log_block(s.last_batch, s.use_slog)?, 1),
            };
            let cap = self.pool.log_block_capacity(&dva) as usize - BLOCK_HEADER;
            let mut used = 0;
            let mut members = Vec::new();
            let mut max_txg = 0;
            while i < itxs.len() && used + itxs[i].rec.encoded_len() <= cap {
                used += itxs[i].rec.encoded_len();
                max_txg = max_txg.max(itxs[i].txg);
                members.push(i);
                i += 1;
            }
            if members.is_empty() {
                // The pre-allocated block is too small for this record: give it
                // back to the chain as an empty link, and use a bigger block.
                let big = self.pool.alloc_log_block(MAX_BLOCK, s.use_slog)?;
                planned.push((dva, seq, big, vec![], 0));
                s.next = Some((big, seq + 1));
                continue;
            }
            let size = if i < itxs.len() {
                s.last_batch.max(MIN_BLOCK)
            } else {
                s.last_batch
            };
            let next = self.pool.alloc_log_block(size, s.use_slog)?;
            s.next = Some((next, seq + 1));
            planned.push((dva, seq, next, members, max_txg));
        }
        s.in_flight = planned.iter().map(|p| (p.0, p.1)).collect();
        let guid = s.guid;
        let pool = self.pool.clone();
        // The I/O happens without the lock: other writers keep logging meanwhile.
        let result = parking_lot::MutexGuard::unlocked(s, || -> Result<(), PoolError> {
            let mut vdevs: Vec<u32> = Vec::new();
            for (dva, seq, next, members, _) in &planned {
                let recs: Vec<&Itx> = members.iter().map(|m| &itxs[*m]).collect();
                let block = encode_block(guid, *seq, next, &recs, sector);
                pool.write_log_block(dva, &block)?;
                if !vdevs.contains(&dva.vdev) {
                    vdevs.push(dva.vdev);
                }
            }
            // A block named by reference may sit on another vdev than the log
            // blocks: it is flushed with them, or its record could outlive it.
            for i in &itxs {
                if let Record::WriteRef { bp, .. } = &i.rec {
                    for d in bp.dva_iter() {
                        if !vdevs.contains(&d.vdev) {
                            vdevs.push(d.vdev);
                        }
                    }
                }
            }
            if cachalot_pool::plant::active(cachalot_pool::plant::Bug::NoLogFlush) {
                return Ok(());
            }
            pool.flush_vdevs(&vdevs)
        });
        s.in_flight.clear();
        for (dva, _, _, _, max_txg) in &planned {
            s.chain.push_back(LogBlock {
                dva: *dva,
                max_txg: *max_txg,
            });
        }
        result
    }

    fn retire_chain(s: &mut State, new_guid: u64) {
        let cover = s.max_txg_logged;
        let old: Vec<LogBlock> = s.chain.drain(..).collect();
        s.retired.extend(old.into_iter().map(|b| LogBlock {
            dva: b.dva,
            max_txg: cover,
        }));
        if let Some((d, _)) = s.next.take() {
            s.retired.push(LogBlock {
                dva: d,
                max_txg: cover,
            });
        }
        s.guid = new_guid;
        s.header_persisted = false;
    }

    /// Called by the object set's sync of `txg`: free the blocks whose itxs the
    /// tree of `txg` covers and return the header to record in the root block.
    pub fn sync_header(&self, txg: u64, free: &mut dyn FnMut(&Dva)) -> ZilHeader {
        let mut s = self.state.lock();
        let (gone, kept): (Vec<LogBlock>, Vec<LogBlock>) =
            s.retired.drain(..).partition(|b| b.max_txg <= txg);
        s.retired = kept;
        for b in gone {
            free(&b.dva);
        }
        // Keep every block after the first live one: sequence numbers must stay
        // contiguous from the header on.
        while s.chain.front().is_some_and(|b| b.max_txg <= txg) {
            let b = s.chain.pop_front().unwrap();
            free(&b.dva);
        }
        let head = match (s.chain.front(), s.in_flight.first(), s.next) {
            (Some(b), _, _) => {
                // The sequence number of the first chain block: count back from the
                // in-flight or next block.
                let later = s
                    .in_flight
                    .first()
                    .map(|f| f.1)
                    .or(s.next.map(|n| n.1))
                    .unwrap_or(1);
                Some((b.dva, later - s.chain.len() as u64, true))
            }
            (None, Some(f), _) => Some((f.0, f.1, false)),
            (None, None, Some(n)) => Some((n.0, n.1, false)),
            (None, None, None) => None,
        };
        match head {
            Some((dva, seq, written)) => ZilHeader {
                head: dva,
                seq,
                guid: s.guid,
                head_written: written,
            },
            None => ZilHeader::default(),
        }
    }

    /// Called after txg `txg` committed with `header`: itxs of `txg` or older are
    /// covered by the tree and dropped; waiters covered by it are released.
    pub fn txg_committed(&self, txg: u64, header: &ZilHeader) {
        let mut s = self.state.lock();
        s.committed_txg = s.committed_txg.max(txg);
        s.pending.retain(|i| i.txg > txg);
        if !header.is_empty() && header.guid == s.guid {
            s.header_persisted = true;
        }
        s.error = None;
        self.cv.notify_all();
    }

    /// Blocks the log holds on disk (for accounting checks and destroy).
    pub fn blocks(&self) -> Vec<Dva> {
        let s = self.state.lock();
        s.chain
            .iter()
            .chain(s.retired.iter())
            .map(|b| b.dva)
            .chain(s.in_flight.iter().map(|f| f.0))
            .chain(s.next.map(|n| n.0))
            .collect()
    }

    /// Free every block of the log (the dataset is being destroyed).
    pub fn free_all(&self, free: &mut dyn FnMut(&Dva)) {
        let mut s = self.state.lock();
        let st = &mut *s;
        let all: Vec<LogBlock> = st.chain.drain(..).chain(st.retired.drain(..)).collect();
        for b in all {
            free(&b.dva);
        }
        if let Some((d, _)) = s.next.take() {
            free(&d);
        }
        s.pending.clear();
        s.header_persisted = false;
    }

    /// After replay: the blocks read become part of the chain (freed by the next
    /// sync, which covers their records), and the next block follows them.
    pub fn adopt_replayed(&self, blocks: &[Dva], next: Option<(Dva, u64)>) {
        let mut s = self.state.lock();
        for d in blocks {
            s.chain.push_back(LogBlock {
                dva: *d,
                max_txg: 0,
            });
        }
        s.next = next;
        s.header_persisted = next.is_some();
    }

    pub fn guid(&self) -> u64 {
        self.state.lock().guid
    }
}
