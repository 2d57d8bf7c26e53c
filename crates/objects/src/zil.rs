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
//! On disk, log blocks form a chain. Each block is allocated before it is written
//! and names the pre-allocated location of the next one; its header carries the
//! chain's guid and a sequence number, and a BLAKE3 checksum over the block, so a
//! stale or torn block ends the chain. The object set root records the *header*:
//! the first block of the live chain (or the block the next write will use).
//!
//! Invariants:
//! - A log block is written only after the header naming its chain is committed
//!   (`header_persisted`); before that, `commit` asks the caller to commit a txg.
//! - Sequence numbers of one chain increase by one per block; replay stops at the
//!   first block that is unreadable, fails its checksum, or has the wrong guid/seq.
//! - An itx's txg is taken while the object set's txg is held, so "txg <= T" means
//!   exactly "the change is in the tree of T"; replay applies only itxs of later txgs.
//! - Replay is idempotent: it always starts from the committed tree and re-applies
//!   the same records in log order (each record's effect depends only on the
//!   state the records before it produced); the chain is freed only by the commit
//!   that follows replay.
//! - The itxs of a group are contiguous in the queue and in the chain, share one
//!   txg, and are applied all or none.
//! - Every length decoded from a block is bounded before use: a write's by
//!   `MAX_BLOCK`, a bonus's by `BONUS_SIZE`, a created object's block size by the
//!   object layer's limits; anything else ends the chain.
//! - A write *by reference* (`WriteRef`, ZFS's WR_INDIRECT) names a data block
//!   written before its record, by the leader, at its final place: the block is
//!   on disk and flushed with the log blocks, so the record is durable only with
//!   it. The object set owns the block (`ObjectSet::prewrite`): its txg's sync
//!   links it into the tree (no second write) or frees it; a free is deferred past
//!   that txg's commit, and after the commit the record is covered, so a record
//!   replay reads always names a block still intact.

mod replay;
pub use replay::ReplayReport;

use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::{BlkPtr, Dva, Pool, PoolError};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

const MAGIC: u64 = 0x0031_435a_4843_4143; // "CACHZ1" read as little-endian bytes
pub const BLOCK_HEADER: usize = 96;
const RECORD_HEADER: usize = 40;
const MIN_BLOCK: u64 = 8 * 1024;
const MAX_BLOCK: u64 = 128 * 1024;
const REC_WRITE: u8 = 1;
const REC_TRUNCATE: u8 = 2;
const REC_CREATE: u8 = 3;
const REC_DELETE: u8 = 4;
const REC_BONUS: u8 = 5;
const REC_PUNCH: u8 = 6;
const REC_WRITE_REF: u8 = 7;
/// With `logbias=latency` and no separate log device, writes of at least this
/// many bytes are logged by reference (their full blocks written in place)
/// instead of copied into log blocks: 32 KiB, as ZFS's `zfs_immediate_write_sz`.
pub const BY_REFERENCE_MIN: usize = 32 * 1024;
/// Record flag: more records of the same atomic group follow.
const FLAG_MORE: u8 = 1;

/// What the object set root records about the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZilHeader {
    /// First block of the chain (asize 0: no log).
    pub head: Dva,
    pub seq: u64,
    pub guid: u64,
    /// The head block was written before this header was committed, so if it does
    /// not read back valid the log is damaged (not merely unused).
    pub head_written: bool,
}

impl ZilHeader {
    pub const SIZE: usize = 40;
    pub fn is_empty(&self) -> bool {
        self.head.asize == 0
    }
    pub fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.head.vdev.to_le_bytes());
        out[4..8].copy_from_slice(&self.head.asize.to_le_bytes());
        out[8..16].copy_from_slice(&self.head.offset.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.guid.to_le_bytes());
        out[32..40].copy_from_slice(&(self.head_written as u64).to_le_bytes());
    }
    pub fn decode(b: &[u8]) -> Self {
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        ZilHeader {
            head: Dva {
                vdev: u32at(0),
                asize: u32at(4),
                offset: u64at(8),
            },
            seq: u64at(16),
            guid: u64at(24),
            head_written: u64at(32) & 1 == 1,
        }
    }
}

/// A logged change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Write {
        obj: u64,
        off: u64,
        data: Arc<[u8]>,
    },
    Truncate {
        obj: u64,
        size: u64,
    },
    /// Object `obj` comes into existence, empty (replacing whatever had the id).
    Create {
        obj: u64,
        otype: u8,
        blksz: u32,
        gen: u64,
    },
    Delete {
        obj: u64,
    },
    /// The object's bonus becomes `data`, zero-padded to its full size.
    Bonus {
        obj: u64,
        data: Arc<[u8]>,
    },
    Punch {
        obj: u64,
        off: u64,
        len: u64,
    },
    /// `len` bytes were written at `off`; the log takes them from the object
    /// when it writes the record (copied, or by reference). In memory only: the
    /// leader always resolves it (`Zil::commit`), it is never encoded. Saves
    /// copying every large write into its itx, as ZFS's WR_NEED_COPY does: the
    /// bytes logged may include later writes of the range, which replay applies
    /// anyway or which were simply not fsynced yet.
    WriteLazy {
        obj: u64,
        off: u64,
        len: u64,
    },
    /// The first `len` bytes of the data block `bp` (already on disk) were
    /// written at `off`: a write logged by reference.
    WriteRef {
        obj: u64,
        off: u64,
        len: u64,
        bp: BlkPtr,
    },
}

impl Record {
    fn encoded_len(&self) -> usize {
        RECORD_HEADER
            + match self {
                Record::Write { data, .. } | Record::Bonus { data, .. } => {
                    data.len().next_multiple_of(8)
                }
                Record::WriteRef { .. } => BLKPTR_SIZE,
                _ => 0,
            }
    }
}

impl Record {
    /// A write of at least `min` bytes (`usize::MAX`: none is).
    fn by_ref(&self, min: usize) -> bool {
        match self {
            Record::Write { data, .. } => data.len() >= min,
            Record::WriteLazy { len, .. } => *len >= min as u64,
            _ => false,
        }
    }

    /// Offered to the resolver: lazy, or to be logged by reference.
    fn resolvable(&self, min: usize) -> bool {
        matches!(self, Record::WriteLazy { .. }) || self.by_ref(min)
    }
}

/// See `Zil::commit`: (a write record, its txg, log by reference) -> records to
/// log instead.
pub type Prewrite<'a> = dyn Fn(&Record, u64, bool) -> Option<Vec<Record>> + 'a;

/// Replace the writes of at least `min` bytes that `prewrite` takes by its
/// records; they inherit the write's txg, and form one group with it (every
/// record but the last flagged `more`, the last keeps the write's flag), so
/// replay applies the write whole or not at all.
fn by_reference(batch: Vec<Itx>, prewrite: &Prewrite<'_>, min: usize) -> Vec<Itx> {
    let mut out = Vec::with_capacity(batch.len());
    for itx in batch {
        let repl = if itx.rec.resolvable(min) {
            prewrite(&itx.rec, itx.txg, itx.rec.by_ref(min))
        } else {
            None
        };
        match repl {
            // The object is gone (a later deletion is logged after it).
            Some(recs) if recs.is_empty() && !itx.more => {}
            Some(recs) if !recs.is_empty() => {
                let n = recs.len();
                for (k, rec) in recs.into_iter().enumerate() {
                    out.push(Itx {
                        txg: itx.txg,
                        more: k + 1 < n || itx.more,
                        rec,
                    });
                }
            }
            _ => out.push(itx),
        }
    }
    out
}

/// One record of a decoded log block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRecord {
    pub txg: u64,
    /// More records of the same group follow (apply none until the last).
    pub more: bool,
    pub rec: Record,
}

struct Itx {
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
    /// The chain's header is not on disk yet: commit a txg (which also makes the
    /// asked-for changes durable), then call again.
    NeedTxgCommit,
}

/// Encode a log block: header, records, checksum. `size` is the allocation.
fn encode_block(guid: u64, seq: u64, next: &Dva, recs: &[&Itx], sector: usize) -> Vec<u8> {
    let used: usize = BLOCK_HEADER + recs.iter().map(|i| i.rec.encoded_len()).sum::<usize>();
    let mut b = vec![0u8; used.next_multiple_of(sector)];
    b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&guid.to_le_bytes());
    b[16..24].copy_from_slice(&seq.to_le_bytes());
    b[24..28].copy_from_slice(&(used as u32).to_le_bytes());
    b[28..32].copy_from_slice(&(recs.len() as u32).to_le_bytes());
    b[32..36].copy_from_slice(&next.vdev.to_le_bytes());
    b[36..40].copy_from_slice(&next.asize.to_le_bytes());
    b[40..48].copy_from_slice(&next.offset.to_le_bytes());
    let mut o = BLOCK_HEADER;
    for itx in recs {
        encode_record(&mut b[o..], itx.txg, itx.more, &itx.rec);
        o += itx.rec.encoded_len();
    }
    let sum = checksum_of(&b[..used]);
    b[64..96].copy_from_slice(&sum);
    b
}

/// Encode one record at the start of `b` (which holds at least its encoded length).
fn encode_record(b: &mut [u8], txg: u64, more: bool, rec: &Record) {
    let (mut otype, mut blksz) = (0u8, 0u32);
    let (ty, obj, off, len, data): (u8, u64, u64, u64, &[u8]) = match rec {
        Record::Write { obj, off, data } => (REC_WRITE, *obj, *off, data.len() as u64, data),
        Record::Truncate { obj, size } => (REC_TRUNCATE, *obj, 0, *size, &[]),
        Record::Create {
            obj,
            otype: t,
            blksz: bs,
            gen,
        } => {
            (otype, blksz) = (*t, *bs);
            (REC_CREATE, *obj, *gen, 0, &[])
        }
        Record::Delete { obj } => (REC_DELETE, *obj, 0, 0, &[]),
        Record::Bonus { obj, data } => (REC_BONUS, *obj, 0, data.len() as u64, data),
        Record::Punch { obj, off, len } => (REC_PUNCH, *obj, *off, *len, &[]),
        Record::WriteRef { obj, off, len, bp } => {
            bp.encode(&mut b[RECORD_HEADER..RECORD_HEADER + BLKPTR_SIZE]);
            (REC_WRITE_REF, *obj, *off, *len, &[])
        }
        // Resolved before any block is packed (`by_reference`); an empty write,
        // should one ever get here, replays as nothing rather than as wrong bytes.
        Record::WriteLazy { obj, off, .. } => (REC_WRITE, *obj, *off, 0, &[]),
    };
    b[0] = ty;
    b[1] = if more { FLAG_MORE } else { 0 };
    b[2] = otype;
    b[3] = 0;
    b[4..8].copy_from_slice(&blksz.to_le_bytes());
    b[8..16].copy_from_slice(&txg.to_le_bytes());
    b[16..24].copy_from_slice(&obj.to_le_bytes());
    b[24..32].copy_from_slice(&off.to_le_bytes());
    b[32..40].copy_from_slice(&len.to_le_bytes());
    b[RECORD_HEADER..RECORD_HEADER + data.len()].copy_from_slice(data);
}

/// The records of a block as they would be encoded (for the fuzz target's
/// re-encoding check): `decode_records(&encode_records(r)) == r`.
pub fn encode_records(recs: &[LoggedRecord]) -> Vec<u8> {
    let len: usize = recs.iter().map(|r| r.rec.encoded_len()).sum();
    let mut b = vec![0u8; len];
    let mut o = 0;
    for r in recs {
        encode_record(&mut b[o..], r.txg, r.more, &r.rec);
        o += r.rec.encoded_len();
    }
    b
}

fn checksum_of(block: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(&block[0..64]);
    h.update(&block[96..]);
    *h.finalize().as_bytes()
}

/// A decoded block: its records, and the next block's location.
pub struct DecodedBlock {
    pub next: Dva,
    pub records: Vec<LoggedRecord>,
}

/// Check and decode a log block read from disk; `None` ends the chain.
pub fn decode_block(b: &[u8], guid: u64, seq: u64) -> Option<DecodedBlock> {
    if !valid_block(b, guid, seq) {
        return None;
    }
    let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let used = u32at(24) as usize;
    let n = u32at(28) as usize;
    let next = Dva {
        vdev: u32at(32),
        asize: u32at(36),
        offset: u64at(40),
    };
    let records = decode_records(&b[BLOCK_HEADER..used], n)?;
    Some(DecodedBlock { next, records })
}

/// Decode `n` records packed in `b`; `None` if they do not fit or one is
/// malformed.
pub fn decode_records(b: &[u8], n: usize) -> Option<Vec<LoggedRecord>> {
    // Each record takes at least its header: a count beyond that is corrupt (and
    // must not size an allocation; found by the intent_log_block fuzz target).
    if n > b.len() / RECORD_HEADER {
        return None;
    }
    let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let mut records = Vec::with_capacity(n);
    let mut o = 0;
    for _ in 0..n {
        if o + RECORD_HEADER > b.len() {
            return None;
        }
        let (ty, flags, txg, obj, off, len) = (
            b[o],
            b[o + 1],
            u64at(o + 8),
            u64at(o + 16),
            u64at(o + 24),
            u64at(o + 32),
        );
        if flags & !FLAG_MORE != 0 {
            return None;
        }
        // Bound a payload's length before using it (found by the intent_log_block
        // fuzz target: a huge length overflowed the end computation).
        let payload = |max: u64| -> Option<Arc<[u8]>> {
            if len > max {
                return None;
            }
            let end = o + RECORD_HEADER + len as usize;
            (end <= b.len()).then(|| b[o + RECORD_HEADER..end].into())
        };
        let rec = match ty {
            REC_WRITE => Record::Write {
                obj,
                off,
                data: payload(MAX_BLOCK)?,
            },
            REC_TRUNCATE => Record::Truncate { obj, size: len },
            REC_CREATE => {
                let (otype, blksz) = (b[o + 2], u32at(o + 4));
                if otype == 0
                    || !blksz.is_power_of_two()
                    || !(crate::dnode::MIN_BLOCK..=crate::dnode::MAX_BLOCK).contains(&blksz)
                {
                    return None;
                }
                Record::Create {
                    obj,
                    otype,
                    blksz,
                    gen: off,
                }
            }
            REC_DELETE => Record::Delete { obj },
            REC_BONUS => Record::Bonus {
                obj,
                data: payload(crate::dnode::BONUS_SIZE as u64)?,
            },
            REC_PUNCH => Record::Punch { obj, off, len },
            REC_WRITE_REF => {
                let end = o + RECORD_HEADER + BLKPTR_SIZE;
                let bp = BlkPtr::decode(b.get(o + RECORD_HEADER..end)?)?;
                // A level-0 data block no larger than an object's block, holding
                // at least the bytes written.
                if bp.is_hole()
                    || bp.level != 0
                    || bp.block_type != cachalot_pool::BlockType::Data
                    || bp.lsize > crate::dnode::MAX_BLOCK
                    || bp.psize > bp.lsize
                    || len == 0
                    || len > bp.lsize as u64
                {
                    return None;
                }
                Record::WriteRef { obj, off, len, bp }
            }
            _ => return None,
        };
        o += rec.encoded_len();
        records.push(LoggedRecord {
            txg,
            more: flags & FLAG_MORE != 0,
            rec,
        });
    }
    Some(records)
}

/// True if the bytes could be an unwritten log block on a dedicated log device:
/// zeros, or any (older) log block. Anything else there is damage.
pub fn looks_unwritten(b: &[u8]) -> bool {
    b.iter().all(|x| *x == 0)
        || (b.len() >= 8 && u64::from_le_bytes(b[0..8].try_into().unwrap()) == MAGIC)
}

/// Magic, guid, sequence and checksum all match.
pub fn valid_block(b: &[u8], guid: u64, seq: u64) -> bool {
    if b.len() < BLOCK_HEADER {
        return false;
    }
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let used = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    u64at(0) == MAGIC
        && u64at(8) == guid
        && u64at(16) == seq
        && (BLOCK_HEADER..=b.len()).contains(&used)
        && checksum_of(&b[..used]) == b[64..96]
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
            s.next_itx += 1;
            s.pending.push_back(Itx {
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

    /// Make every itx up to `upto` (from `tail`) durable. `resolve` (the object
    /// set's, `ObjectSet::zil_commit`) gets every `WriteLazy`, and every write
    /// eligible for logging by reference (any size with `logbias=throughput`,
    /// `BY_REFERENCE_MIN` bytes with `logbias=latency` and no separate log
    /// device) with that flag: it returns the records to log instead (covering
    /// the same bytes, in order; none if the object is gone), or `None` to log
    /// the record as it is.
    pub fn commit(
        &self,
        upto: (u64, u64),
        resolve: &Prewrite<'_>,
    ) -> Result<CommitOutcome, PoolError> {
        let (seq, txg) = upto;
        let t0 = Instant::now();
        let mut s = self.state.lock();
        loop {
            if s.durable_itx > seq || s.committed_txg >= txg {
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
            let batch = if batch.iter().any(|i| i.rec.resolvable(min)) {
                parking_lot::MutexGuard::unlocked(&mut s, || by_reference(batch, resolve, min))
            } else {
                batch
            };
            let r = self.write_batch(&mut s, &batch);
            s.leader = false;
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
        // Split large writes so every record fits in a block.
        let max_data = (MAX_BLOCK as usize) - BLOCK_HEADER - RECORD_HEADER;
        let mut itxs: Vec<Itx> = Vec::new();
        for i in batch {
            match &i.rec {
                Record::Write { obj, off, data } if data.len() > max_data => {
                    // The chunks form a group (with whatever group the write
                    // belongs to): replay applies the write whole or not at all.
                    let chunks = data.len().div_ceil(max_data);
                    for (k, chunk) in data.chunks(max_data).enumerate() {
                        itxs.push(Itx {
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
                    txg: i.txg,
                    more: i.more,
                    rec: r.clone(),
                }),
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn itx(txg: u64, more: bool, rec: Record) -> Itx {
        Itx { txg, more, rec }
    }

    #[test]
    fn block_roundtrip_and_validation() {
        let itxs = [
            itx(
                5,
                false,
                Record::Write {
                    obj: 3,
                    off: 100,
                    data: vec![7u8; 1000].into(),
                },
            ),
            itx(6, false, Record::Truncate { obj: 3, size: 50 }),
        ];
        let refs: Vec<&Itx> = itxs.iter().collect();
        let next = Dva {
            vdev: 0,
            asize: 8192,
            offset: 4096,
        };
        let b = encode_block(42, 9, &next, &refs, 4096);
        let d = decode_block(&b, 42, 9).unwrap();
        assert_eq!(d.next, next);
        assert_eq!(d.records.len(), 2);
        assert_eq!(d.records[0].rec, itxs[0].rec);
        assert_eq!(
            d.records[1],
            LoggedRecord {
                txg: 6,
                more: false,
                rec: Record::Truncate { obj: 3, size: 50 }
            }
        );
        assert!(
            decode_block(&b, 42, 10).is_none(),
            "wrong sequence ends the chain"
        );
        assert!(
            decode_block(&b, 41, 9).is_none(),
            "wrong guid ends the chain"
        );
        let mut torn = b.clone();
        torn[200] ^= 1;
        assert!(
            decode_block(&torn, 42, 9).is_none(),
            "a torn block ends the chain"
        );
    }

    #[test]
    fn namespace_records_roundtrip_with_group_flags() {
        let recs = vec![
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Create {
                    obj: 77,
                    otype: 2,
                    blksz: 512,
                    gen: 8,
                },
            },
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Bonus {
                    obj: 77,
                    data: vec![1u8; 120].into(),
                },
            },
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Write {
                    obj: 4,
                    off: 1 << 32,
                    data: vec![2u8; 33].into(),
                },
            },
            LoggedRecord {
                txg: 9,
                more: true,
                rec: Record::Delete { obj: 12 },
            },
            LoggedRecord {
                txg: 9,
                more: false,
                rec: Record::Punch {
                    obj: 4,
                    off: 4096,
                    len: 1 << 40,
                },
            },
        ];
        let b = encode_records(&recs);
        assert_eq!(decode_records(&b, recs.len()).unwrap(), recs);
        // Bounds: a bonus longer than a bonus, a created object with an invalid
        // block size, an unknown flag: the chain ends there.
        let mut bad = b.clone();
        bad[RECORD_HEADER + 32..RECORD_HEADER + 40].copy_from_slice(&321u64.to_le_bytes());
        assert!(decode_records(&bad, recs.len()).is_none());
        let mut bad = b.clone();
        bad[4..8].copy_from_slice(&3000u32.to_le_bytes());
        assert!(decode_records(&bad, recs.len()).is_none());
        let mut bad = b.clone();
        bad[2] = 0;
        assert!(decode_records(&bad, recs.len()).is_none());
        let mut bad = b;
        bad[1] = 0x80;
        assert!(decode_records(&bad, recs.len()).is_none());
    }

    #[test]
    fn write_by_reference_roundtrips_and_is_bounded() {
        let bp = BlkPtr {
            dvas: [
                Dva {
                    vdev: 0,
                    asize: 16384,
                    offset: 1 << 20,
                },
                Dva::default(),
                Dva::default(),
            ],
            lsize: 16384,
            psize: 8192,
            compression: cachalot_pool::Compression::Lz4,
            block_type: cachalot_pool::BlockType::Data,
            birth_txg: 7,
            fill: 1,
            checksum: [3; 32],
            ..BlkPtr::HOLE
        };
        let recs = vec![LoggedRecord {
            txg: 7,
            more: false,
            rec: Record::WriteRef {
                obj: 5,
                off: 32768,
                len: 16384,
                bp,
            },
        }];
        let b = encode_records(&recs);
        assert_eq!(b.len(), RECORD_HEADER + BLKPTR_SIZE);
        assert_eq!(decode_records(&b, 1).unwrap(), recs);
        // Bytes written beyond the block, none, a hole, a metadata block, a
        // cut-off pointer: the chain ends there.
        let mut bad = b.clone();
        bad[32..40].copy_from_slice(&16385u64.to_le_bytes());
        assert!(decode_records(&bad, 1).is_none());
        let mut bad = b.clone();
        bad[32..40].copy_from_slice(&0u64.to_le_bytes());
        assert!(decode_records(&bad, 1).is_none());
        let mut bad = b.clone();
        bad[RECORD_HEADER + 64..RECORD_HEADER + 72].fill(0);
        assert!(decode_records(&bad, 1).is_none());
        let mut bad = b.clone();
        bad[RECORD_HEADER + 58] = cachalot_pool::BlockType::Dnode as u8;
        assert!(decode_records(&bad, 1).is_none());
        assert!(decode_records(&b[..b.len() - 8], 1).is_none());
    }
}
