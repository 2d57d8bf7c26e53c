//! Send and receive: a versioned stream of a snapshot (full) or of the changes
//! between two snapshots (incremental), with a checksum on every record.
//!
//! Format (version 1). A sequence of records, each
//! `type u8 · 3 zero bytes · length u32 · payload · BLAKE3-256(header and payload)`:
//! - 1 BEGIN: JSON {magic, version, snapshot, guid, txg, from_guid, kind,
//!   recordsize, volblocksize}
//! - 2 OBJECT: `object u64 · type u8 · blksz u32 · size u64 · bonus (320)`: the
//!   object exists with these attributes (created, or reset if its block size
//!   changed)
//! - 3 FREEOBJECT: `object u64`: the object does not exist in the snapshot
//! - 4 WRITE: `object u64 · offset u64 · data`
//! - 5 FREE: `object u64 · offset u64 · length u64`: the range reads as zeros
//! - 6 END: `records u64 · BLAKE3 of every previous record's checksum (32)`
//!
//! An incremental stream carries only objects whose dnode changed and, in them,
//! only blocks whose pointer changed (born after the older snapshot).
//!
//! Invariants of receive: nothing is applied outside a hidden dataset `FS%recv`
//! until END has been verified; any error (truncated, corrupt, out of order,
//! wrong base) destroys it, so a failed receive leaves nothing behind. The swap
//! into place is one catalog change (`put_received_in_place`): a crash leaves
//! the old `FS` or the new one, never a step between. Object ids
//! are kept: the layers above use them as identities.

use crate::catalog::DatasetKind;
use crate::dataset::Dataset;
use crate::error::{Result, StoreError};
use crate::resume::{ResumePos, ResumeToken, CHECKPOINT_BYTES};
use crate::store::Store;
use cachalot_objects::dnode::BONUS_SIZE;
use cachalot_objects::ObjectSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::Arc;

const MAGIC: &str = "CACHALOT-STREAM";
const VERSION: u32 = 1;
/// A resumed stream: version 1 plus `resume` in BEGIN (older receivers refuse it
/// rather than take a partial stream for a whole one).
const VERSION_RESUMED: u32 = 2;
const REC_BEGIN: u8 = 1;
const REC_OBJECT: u8 = 2;
const REC_FREEOBJECT: u8 = 3;
const REC_WRITE: u8 = 4;
const REC_FREE: u8 = 5;
const REC_END: u8 = 6;
/// Largest payload accepted (a 1 MiB record plus headers).
const MAX_PAYLOAD: u32 = (1 << 20) + 4096;

#[derive(Serialize, Deserialize, Debug, Clone)]
struct Begin {
    magic: String,
    version: u32,
    snapshot: String,
    guid: u64,
    txg: u64,
    from_guid: u64,
    kind: DatasetKind,
    recordsize: u32,
    volblocksize: Option<u32>,
    /// A resumed stream (version 2): where it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resume: Option<ResumePos>,
}

/// What a send or receive moved.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StreamStats {
    pub records: u64,
    pub bytes: u64,
    pub objects: u64,
}

struct Writer<'a> {
    out: &'a mut dyn Write,
    running: blake3::Hasher,
    stats: StreamStats,
    progress: &'a mut dyn FnMut(u64),
}

impl Writer<'_> {
    fn record(&mut self, ty: u8, payload: &[u8]) -> Result<()> {
        let mut header = [0u8; 8];
        header[0] = ty;
        header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let mut h = blake3::Hasher::new();
        h.update(&header);
        h.update(payload);
        let sum = *h.finalize().as_bytes();
        let io = |e: std::io::Error| StoreError::Invalid(format!("send: write failed: {e}"));
        self.out.write_all(&header).map_err(io)?;
        self.out.write_all(payload).map_err(io)?;
        self.out.write_all(&sum).map_err(io)?;
        self.running.update(&sum);
        self.stats.records += 1;
        self.stats.bytes += 40 + payload.len() as u64;
        (self.progress)(self.stats.bytes);
        Ok(())
    }
}

struct Reader<'a> {
    input: &'a mut dyn Read,
    running: blake3::Hasher,
    stats: StreamStats,
    progress: &'a mut dyn FnMut(u64),
}

impl Reader<'_> {
    /// Next record, verified, with the running hash of the records before it;
    /// errors name what is wrong with the stream.
    fn record(&mut self) -> Result<(u8, Vec<u8>, [u8; 32])> {
        let bad = |what: &str| StoreError::Invalid(format!("receive: {what}"));
        let mut header = [0u8; 8];
        self.input
            .read_exact(&mut header)
            .map_err(|_| bad("stream is truncated (no END record)"))?;
        let len = u32::from_le_bytes(header[4..8].try_into().unwrap());
        if self.stats.records == 0 && header[0] != REC_BEGIN {
            return Err(bad(
                "this is not a cachalot send stream (it does not start with a BEGIN record)",
            ));
        }
        if len > MAX_PAYLOAD || header[1..4] != [0, 0, 0] {
            return Err(bad("stream is corrupt (bad record header)"));
        }
        let mut payload = vec![0u8; len as usize];
        let mut sum = [0u8; 32];
        self.input
            .read_exact(&mut payload)
            .and_then(|_| self.input.read_exact(&mut sum))
            .map_err(|_| bad("stream is truncated"))?;
        let mut h = blake3::Hasher::new();
        h.update(&header);
        h.update(&payload);
        if h.finalize().as_bytes() != &sum {
            return Err(bad(&format!(
                "record {} fails its checksum: the stream is corrupt",
                self.stats.records + 1
            )));
        }
        let before = *self.running.finalize().as_bytes();
        self.running.update(&sum);
        self.stats.records += 1;
        self.stats.bytes += 40 + len as u64;
        (self.progress)(self.stats.bytes);
        Ok((header[0], payload, before))
    }
}

/// Consecutive blocks to free in one object, sent as one FREE record.
struct FreeRuns {
    id: u64,
    bs: u64,
    size: u64,
    run: Option<(u64, u64)>,
}

impl FreeRuns {
    fn new(id: u64, bs: u64, size: u64) -> Self {
        FreeRuns {
            id,
            bs,
            size,
            run: None,
        }
    }

    fn add(&mut self, w: &mut Writer, first: u64, count: u64) -> Result<()> {
        match &mut self.run {
            Some((f, c)) if *f + *c == first => *c += count,
            _ => {
                self.flush(w)?;
                self.run = Some((first, count));
            }
        }
        Ok(())
    }

    fn flush(&mut self, w: &mut Writer) -> Result<()> {
        let Some((first, count)) = self.run.take() else {
            return Ok(());
        };
        let off = first * self.bs;
        let len = count.saturating_mul(self.bs).min(self.size - off);
        let mut p = Vec::with_capacity(24);
        p.extend_from_slice(&self.id.to_le_bytes());
        p.extend_from_slice(&off.to_le_bytes());
        p.extend_from_slice(&len.to_le_bytes());
        w.record(REC_FREE, &p)
    }
}

/// The blocks of object `id` (`bs` bytes each, `size` long) from block `first`
/// on: every data block the base does not hold as is, and frees of the base's
/// data where the snapshot has holes (without a base, holes are implicit).
fn send_blocks(
    w: &mut Writer,
    s_os: &ObjectSet,
    base: Option<&ObjectSet>,
    id: u64,
    bs: u64,
    size: u64,
    first: u64,
) -> Result<()> {
    let nblocks = size.div_ceil(bs);
    let mut frees = FreeRuns::new(id, bs, size);
    let mut b = first;
    while b < nblocks {
        let (bp, run) = s_os.block_pointer_run(id, b)?;
        if bp.is_hole() {
            // A hole subtree at a time; only the base's data in it is freed.
            let n = run.min(nblocks - b);
            if let Some(fo) = base {
                let mut fb = b;
                while fb < b + n {
                    let (fbp, frun) = fo.block_pointer_run(id, fb)?;
                    let m = frun.min(b + n - fb);
                    if !fbp.is_hole() {
                        frees.add(w, fb, m)?;
                    }
                    fb += m;
                }
            }
            b += n;
            continue;
        }
        if let Some(fo) = base {
            if fo.block_pointer(id, b)? == bp {
                b += 1;
                continue;
            }
        }
        frees.flush(w)?;
        let off = b * bs;
        let data = s_os.read(id, off, bs as usize)?;
        let mut p = Vec::with_capacity(16 + data.len());
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&off.to_le_bytes());
        p.extend_from_slice(&data);
        w.record(REC_WRITE, &p)?;
        b += 1;
    }
    frees.flush(w)?;
    Ok(())
}

/// The records after BEGIN: FREEOBJECT for each object of the base `f_ds`
/// that the snapshot lacks, then each object of the snapshot that changed
/// since the base (all of them in a full stream), from `resume` on.
fn send_objects(
    w: &mut Writer,
    s_os: &ObjectSet,
    f_ds: Option<&Dataset>,
    resume: Option<ResumePos>,
) -> Result<()> {
    let s_objs: BTreeSet<u64> = s_os.list_objects()?.into_iter().collect();
    if let Some(f) = f_ds {
        for id in f.objset().list_objects()? {
            if !s_objs.contains(&id) {
                w.record(REC_FREEOBJECT, &id.to_le_bytes())?;
            }
        }
    }
    // A resumed stream skips the objects the target has whole, and the
    // blocks below the resume offset of the one it was in.
    let (skip_below, resume_at) = resume.map_or((0, None), |p| (p.object, Some(p)));
    for &id in s_objs.range(skip_below..) {
        let si = s_os.info(id)?;
        let fi = f_ds.and_then(|f| f.objset().info(id).ok());
        // The receiver's object holds the base's blocks whenever the base
        // has an object of this id and block size (`recv_object` keeps
        // them, lineage or not: an object deleted and recreated under the
        // same id included); with another block size it starts empty.
        let base_blocks = fi.as_ref().is_some_and(|fi| fi.blksz == si.blksz);
        if let (Some(fi), Some(f)) = (&fi, f_ds) {
            if *fi == si && f.objset().object_root(id)? == s_os.object_root(id)? {
                continue;
            }
        }
        let mut obj = Vec::with_capacity(29 + BONUS_SIZE);
        obj.extend_from_slice(&id.to_le_bytes());
        obj.push(si.otype);
        obj.extend_from_slice(&si.blksz.to_le_bytes());
        obj.extend_from_slice(&si.size.to_le_bytes());
        obj.extend_from_slice(&si.bonus);
        w.record(REC_OBJECT, &obj)?;
        w.stats.objects += 1;
        let bs = si.blksz as u64;
        // Against those blocks: holes free what the base has there, and a
        // block pointer equal to the base's is the same data (same address
        // and birth). Without them holes are implicit.
        let base = match (f_ds, base_blocks) {
            (Some(f), true) => Some(f.objset()),
            _ => None,
        };
        let first = match resume_at {
            Some(p) if p.object == id => p.offset.div_ceil(bs),
            _ => 0,
        };
        send_blocks(w, s_os, base, id, bs, si.size, first)?;
    }
    Ok(())
}

fn u64at(b: &[u8], o: usize) -> Result<u64> {
    b.get(o..o + 8)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
        .ok_or_else(|| {
            StoreError::Invalid("receive: record too short: the stream is corrupt".into())
        })
}

/// Options of [`Store::receive_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ReceiveOpts {
    /// Replace or roll back the target (`-F`).
    pub force: bool,
    /// Keep a partial state with a resume token if the stream is cut (`-s`).
    pub resumable: bool,
}

/// What a receive did.
#[derive(Debug, Clone, Serialize)]
pub struct ReceiveOutcome {
    /// The snapshot created (FS@SNAP).
    pub snapshot: String,
    /// A stale partial state this receive replaced, in one line.
    pub discarded: Option<String>,
}

/// Position of a receive, and when it last committed it.
struct RecvCursor {
    token: ResumeToken,
    resumable: bool,
    last_checkpoint: u64,
}

/// `e` with its message rewritten by `f`, keeping its kind where it has one.
fn map_message(e: StoreError, f: impl FnOnce(String) -> String) -> StoreError {
    match e {
        StoreError::Invalid(m) => StoreError::Invalid(f(m)),
        StoreError::Busy(m) => StoreError::Busy(f(m)),
        e => StoreError::Invalid(f(e.to_string())),
    }
}

/// `receive: X` becomes `receive WHAT: X`: every refusal names the snapshot
/// and the target.
fn context(e: StoreError, what: &str) -> StoreError {
    map_message(e, |m| {
        let rest = m.strip_prefix("receive: ").unwrap_or(&m);
        format!("receive {what}: {rest}")
    })
}

/// The BEGIN record, checked: magic, version, and `resume` only in version 2.
fn read_begin(r: &mut Reader) -> Result<Begin> {
    let (ty, payload, _) = r.record()?;
    if ty != REC_BEGIN {
        return Err(StoreError::Invalid(
            "receive: stream does not start with BEGIN".into(),
        ));
    }
    let begin: Begin = serde_json::from_slice(&payload)
        .map_err(|e| StoreError::Invalid(format!("receive: bad BEGIN record: {e}")))?;
    let version_ok = match begin.version {
        VERSION => begin.resume.is_none(),
        VERSION_RESUMED => begin.resume.is_some(),
        _ => false,
    };
    if begin.magic != MAGIC || !version_ok {
        return Err(StoreError::Invalid(format!(
            "receive: not a cachalot stream of version {VERSION} or {VERSION_RESUMED} (got '{}' version {})",
            begin.magic, begin.version
        )));
    }
    Ok(begin)
}

impl Store {
    /// Write snapshot `snap` (FS@SNAP) to `out`: everything, or with `from`
    /// (@OLDER or FS@OLDER) only what changed since that older snapshot.
    pub fn send(
        &self,
        snap: &str,
        from: Option<&str>,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<StreamStats> {
        self.send_stream(snap, from, None, out, progress)
    }

    /// `send -t TOKEN`: the rest of an interrupted stream, from the position the
    /// target saved. A token whose snapshots are gone cannot be honoured: the
    /// error says how to start over.
    pub fn send_resume(
        &self,
        token: &str,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<StreamStats> {
        let t = ResumeToken::decode(token)?;
        let (fs, _) = t.snapshot.split_once('@').expect("decode checked");
        let gone = |what: &str| {
            StoreError::Invalid(format!(
                "the resume token's {what} no longer exists on the source: the token cannot be honoured; abort the partial receive on the target (receive -A FS) and send '{}' again",
                t.snapshot
            ))
        };
        let snaps = self
            .snapshot_records(fs)
            .map_err(|_| gone(&format!("filesystem '{fs}'")))?;
        let by_guid = |g: u64| snaps.iter().find(|s| s.guid == g);
        let to = by_guid(t.guid).ok_or_else(|| gone(&format!("snapshot '{}'", t.snapshot)))?;
        let from = match t.from_guid {
            0 => None,
            g => Some(format!(
                "{fs}@{}",
                by_guid(g)
                    .ok_or_else(|| gone("incremental base snapshot"))?
                    .name
            )),
        };
        let snap = format!("{fs}@{}", to.name);
        self.send_stream(&snap, from.as_deref(), Some(t.pos), out, progress)
    }

    /// The base of an incremental send of `snap` (a snapshot of `fs` taken in
    /// `txg`): `from` (`@SNAP` or `FS@SNAP`), which must be an older snapshot of
    /// `fs`. Returns its dataset and guid.
    fn incremental_source(
        &self,
        fs: &str,
        snap: &str,
        f: &str,
        txg: u64,
    ) -> Result<(Arc<Dataset>, u64)> {
        let full = if f.starts_with('@') {
            format!("{fs}{f}")
        } else {
            f.to_string()
        };
        if !full.starts_with(&format!("{fs}@")) {
            return Err(StoreError::Invalid(format!(
                "incremental source '{f}' is not a snapshot of '{fs}'"
            )));
        }
        let fi = self.snapshot_record(&full)?;
        if fi.txg >= txg {
            return Err(StoreError::Invalid(format!(
                "'{full}' is not older than '{snap}'"
            )));
        }
        Ok((self.snapshot_dataset(&full)?, fi.guid))
    }

    fn send_stream(
        &self,
        snap: &str,
        from: Option<&str>,
        resume: Option<ResumePos>,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<StreamStats> {
        let (fs, _) = snap.split_once('@').ok_or_else(|| {
            StoreError::Invalid(format!("'{snap}' is not a snapshot name (FS@SNAP)"))
        })?;
        let to_info = self.snapshot_record(snap)?;
        let s_ds = self.snapshot_dataset(snap)?;
        let (f_ds, from_guid) = match from {
            Some(f) => {
                let (ds, guid) = self.incremental_source(fs, snap, f, to_info.txg)?;
                (Some(ds), guid)
            }
            None => (None, 0),
        };
        let props = s_ds.objset().props();
        let mut w = Writer {
            out,
            running: blake3::Hasher::new(),
            stats: StreamStats::default(),
            progress,
        };
        let begin = Begin {
            magic: MAGIC.into(),
            version: if resume.is_some() {
                VERSION_RESUMED
            } else {
                VERSION
            },
            snapshot: snap.into(),
            guid: to_info.guid,
            txg: to_info.txg,
            from_guid,
            kind: s_ds.kind(),
            recordsize: props.recordsize,
            volblocksize: to_info.volblocksize,
            resume,
        };
        w.record(
            REC_BEGIN,
            &serde_json::to_vec(&begin).expect("begin serializes"),
        )?;
        send_objects(&mut w, s_ds.objset(), f_ds.as_deref(), resume)?;
        let mut end = Vec::with_capacity(40);
        end.extend_from_slice(&(w.stats.records + 1).to_le_bytes());
        end.extend_from_slice(w.running.finalize().as_bytes());
        w.record(REC_END, &end)?;
        w.out
            .flush()
            .map_err(|e| StoreError::Invalid(format!("send: write failed: {e}")))?;
        Ok(w.stats)
    }

    /// Receive a stream into `fs` (full: `fs` must not exist unless `force`;
    /// incremental: `fs`'s newest snapshot must be the stream's base, and `fs`
    /// unchanged since unless `force`). Returns the snapshot created.
    pub fn receive(
        &self,
        fs: &str,
        input: &mut dyn Read,
        force: bool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<String> {
        let opts = ReceiveOpts {
            force,
            resumable: false,
        };
        Ok(self.receive_with(fs, input, &opts, progress)?.snapshot)
    }

    /// Receive with options: `resumable` (`receive -s`) keeps what arrived of a
    /// cut-off stream and a resume token for `send -t`. A resumed stream
    /// continues the partial state; a whole stream replaces a stale one (its
    /// token can no longer be honoured by it), which the outcome reports.
    /// Errors after BEGIN name the stream's snapshot and the target.
    pub fn receive_with(
        &self,
        fs: &str,
        input: &mut dyn Read,
        opts: &ReceiveOpts,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ReceiveOutcome> {
        self.check_live()?;
        if fs.contains('@') || fs.contains('%') {
            return Err(StoreError::Invalid(format!(
                "receive: '{fs}' must be a dataset name (FS)"
            )));
        }
        let _claim = self.claim_receive(fs)?;
        let mut r = Reader {
            input,
            running: blake3::Hasher::new(),
            stats: StreamStats::default(),
            progress,
        };
        let begin = read_begin(&mut r).map_err(|e| context(e, &format!("into '{fs}'")))?;
        let what = format!("of '{}' into '{fs}'", begin.snapshot);
        self.receive_body(fs, &begin, &mut r, opts)
            .map_err(|e| context(e, &what))
    }

    fn receive_body(
        &self,
        fs: &str,
        begin: &Begin,
        r: &mut Reader,
        opts: &ReceiveOpts,
    ) -> Result<ReceiveOutcome> {
        let snap_name = begin
            .snapshot
            .split_once('@')
            .map(|(_, s)| s.to_string())
            .ok_or_else(|| StoreError::Invalid("receive: BEGIN names no snapshot".into()))?;
        let tmp = format!("{fs}%recv");
        let exists = self.dataset(fs).is_ok();
        if begin.from_guid == 0 && exists && !opts.force {
            return Err(StoreError::Invalid(format!(
                "receive: '{fs}' already exists: use -F to replace it with a full stream"
            )));
        }
        if begin.from_guid == 0 && exists {
            // Replacing it would destroy held snapshots: refuse before any work.
            self.check_no_holds(fs)?;
        }
        let mut discarded = None;
        let mut cursor = RecvCursor {
            token: ResumeToken {
                snapshot: begin.snapshot.clone(),
                guid: begin.guid,
                from_guid: begin.from_guid,
                pos: begin.resume.unwrap_or_default(),
                bytes: 0,
            },
            resumable: opts.resumable || begin.resume.is_some(),
            last_checkpoint: 0,
        };
        if let Some(pos) = begin.resume {
            cursor.token.bytes =
                self.check_resume_state(fs, &begin.snapshot, begin.guid, begin.from_guid, pos)?;
            if begin.from_guid != 0 {
                self.incremental_base(fs, begin.from_guid, opts.force)?;
            }
        } else {
            let base = match begin.from_guid {
                0 => None,
                g => Some(self.incremental_base(fs, g, opts.force)?),
            };
            if self.dataset(&tmp).is_ok() {
                discarded = Some(self.discard_partial(fs)?);
            }
            match base {
                None => self.create_receive_target(&tmp, begin)?,
                Some(base) => self.clone_unchecked(&format!("{fs}@{base}"), &tmp, &[])?,
            }
        }
        let base_bytes = cursor.token.bytes;
        if let Err(e) = self.apply_stream(&tmp, r, &mut cursor) {
            return Err(self.keep_or_discard(fs, &mut cursor, base_bytes + r.stats.bytes, e));
        }
        // Verified: make it the real dataset (a volume's size is its object's).
        self.checkpoint_receive(&tmp, None)?;
        let _ = self.sync_volsize(&tmp)?;
        self.snapshot_with_guid(&[format!("{tmp}@{snap_name}")], Some(begin.guid))?;
        self.receive_step("snapshot");
        self.put_received_in_place(&tmp, fs, begin.from_guid != 0, exists)?;
        self.sync()?;
        Ok(ReceiveOutcome {
            snapshot: format!("{fs}@{snap_name}"),
            discarded,
        })
    }

    fn create_receive_target(&self, tmp: &str, begin: &Begin) -> Result<()> {
        let mut props = vec![("recordsize".to_string(), begin.recordsize.to_string())];
        if let Some(b) = begin.volblocksize {
            props = vec![
                ("volblocksize".into(), b.to_string()),
                ("sparse".into(), "on".into()),
            ];
        }
        let volsize = begin.volblocksize.map(|b| b as u64);
        self.create_dataset_unchecked(tmp, begin.kind, volsize, &props, false)
    }

    /// After a failed receive: keep the partial state and its token (resumable),
    /// else destroy it so nothing is left behind. Returns the error to report.
    fn keep_or_discard(
        &self,
        fs: &str,
        cursor: &mut RecvCursor,
        bytes: u64,
        e: StoreError,
    ) -> StoreError {
        let tmp = format!("{fs}%recv");
        if cursor.resumable {
            cursor.token.bytes = bytes;
            if self.checkpoint_receive(&tmp, Some(&cursor.token)).is_ok() {
                return map_message(e, |m| {
                    format!(
                        "{m} (partial state kept: resume with `cachalot send -t $(cachalot get -H -o value receive_resume_token {fs})`, or discard it with `cachalot receive -A {fs}`)"
                    )
                });
            }
        }
        let _ = self.destroy_dataset(&tmp, true);
        let _ = self.sync();
        e
    }

    /// Check an incremental receive's base; with `force`, roll `fs` back to it.
    fn incremental_base(&self, fs: &str, from_guid: u64, force: bool) -> Result<String> {
        let snaps = self.snapshot_records(fs)?;
        let Some(base) = snaps.iter().find(|s| s.guid == from_guid) else {
            return Err(StoreError::Invalid(format!(
                "receive: '{fs}' does not have the stream's base snapshot: send a full stream or an older increment first"
            )));
        };
        let newest = snaps.last().expect("found one");
        let h = self.dataset(fs)?;
        if h.busy() {
            return Err(StoreError::Busy(format!(
                "receive: '{fs}' is busy (mounted or in use)"
            )));
        }
        let written: u64 = self
            .get_props(fs, Some(&["written".to_string()]))?
            .first()
            .and_then(|r| r.raw.parse().ok())
            .unwrap_or(0);
        let diverged = newest.guid != from_guid || written > 0;
        if diverged {
            if !force {
                return Err(StoreError::Busy(format!(
                    "receive: '{fs}' has changed since snapshot '{}' (diverged data): use -F to roll it back",
                    base.name
                )));
            }
            // Refused now if the rollback would be, but not done: the swap of
            // the received copy (a clone of the base) into `fs`'s place at the
            // end discards the diverged head and the newer snapshots. A stream
            // that fails before then leaves `fs` as it was.
            self.check_rollback(&format!("{fs}@{}", base.name), true)?;
        }
        Ok(base.name.clone())
    }

    fn apply_stream(&self, tmp: &str, r: &mut Reader, cursor: &mut RecvCursor) -> Result<()> {
        let ds = self.dataset(tmp)?;
        let os = ds.objset();
        let bad = |what: String| StoreError::Invalid(format!("receive: {what}"));
        let mut current: Option<(u64, u64)> = None; // object and its size
        let base_bytes = cursor.token.bytes;
        loop {
            if cursor.resumable && r.stats.bytes - cursor.last_checkpoint >= CHECKPOINT_BYTES {
                cursor.token.bytes = base_bytes + r.stats.bytes;
                self.checkpoint_receive(tmp, Some(&cursor.token))?;
                cursor.last_checkpoint = r.stats.bytes;
            }
            let (ty, p, before) = r.record()?;
            match ty {
                REC_FREEOBJECT => {
                    let id = u64at(&p, 0)?;
                    if os.info(id).is_ok() {
                        os.delete_object(id)?;
                    }
                }
                REC_OBJECT => {
                    let id = u64at(&p, 0)?;
                    if p.len() != 21 + BONUS_SIZE {
                        return Err(bad(
                            "OBJECT record has the wrong length: the stream is corrupt".into(),
                        ));
                    }
                    let blksz = u32::from_le_bytes(p[9..13].try_into().unwrap());
                    let size = u64at(&p, 13)?;
                    if size > 1 << 60 {
                        return Err(bad(format!("object {id} has an impossible size")));
                    }
                    os.recv_object(id, p[8], blksz, size, &p[21..21 + BONUS_SIZE])?;
                    current = Some((id, size));
                    // The first OBJECT of a resumed stream keeps its offset.
                    if cursor.token.pos.object != id {
                        cursor.token.pos = ResumePos {
                            object: id,
                            offset: 0,
                        };
                    }
                    r.stats.objects += 1;
                }
                REC_WRITE | REC_FREE => {
                    let id = u64at(&p, 0)?;
                    let off = u64at(&p, 8)?;
                    let Some((cur, size)) = current.filter(|(c, _)| *c == id) else {
                        return Err(bad(format!(
                            "data for object {id} before its OBJECT record: records out of order"
                        )));
                    };
                    let len = if ty == REC_WRITE {
                        (p.len() - 16) as u64
                    } else {
                        u64at(&p, 16)?
                    };
                    if off.checked_add(len).is_none_or(|e| e > size) {
                        return Err(bad(format!(
                            "data beyond the end of object {cur}: the stream is corrupt"
                        )));
                    }
                    if ty == REC_WRITE {
                        ds.write_unlogged(id, off, &p[16..])?;
                    } else {
                        ds.punch_unlogged(id, off, len)?;
                    }
                    cursor.token.pos = ResumePos {
                        object: id,
                        offset: off + len,
                    };
                }
                REC_END => {
                    let count = u64at(&p, 0)?;
                    if count != r.stats.records || p.len() != 40 || p[8..40] != before {
                        return Err(bad(
                            "END record does not match the stream: records missing or reordered"
                                .into(),
                        ));
                    }
                    return Ok(());
                }
                REC_BEGIN => return Err(bad("a second BEGIN record: records out of order".into())),
                t => {
                    return Err(bad(format!(
                        "unknown record type {t}: the stream is corrupt"
                    )))
                }
            }
        }
    }
}
