//! Time-series storage of statistics: what happened in each second (last hour) and
//! each minute (last week), kept in memory and on disk.
//!
//! A [`Sampler`] differences successive registry snapshots into [`Slot`]s (one per
//! second: for every key that moved, its count, bytes, latency sum and the non-zero
//! latency and size histogram buckets). The [`Store`] keeps the newest
//! `seconds` second slots and `minutes` minute slots (each the sum of its 60
//! seconds), and appends every slot as one JSON line to hourly (seconds) and daily
//! (minutes) segment files under its directory.
//!
//! Invariants:
//! - Slot times are unix seconds; a second slot covers `[t, t+1)`, a minute slot
//!   `[t, t+60)` with `t % 60 == 0`. Slots in each ring are strictly increasing.
//! - Memory is bounded: at most `seconds + minutes` slots, each holding only keys
//!   that moved (and at most the registry's per-stat key cap of them).
//! - Disk is bounded: second segments older than the second retention and minute
//!   segments older than the minute retention are deleted when a new segment starts
//!   and at open; a segment covers one hour (seconds) or one day (minutes).
//! - Reopening a store reloads every retained slot (retention survives restarts);
//!   a torn last line (crash mid-append) is skipped.
//! - Keys are interned per statistic (`u32` ids) so a slot stores no strings.

use crate::{Registry, Row, LATENCY_BUCKETS, SIZE_BUCKETS};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Histogram entries are tagged: `0..LATENCY_BUCKETS` latency, `SIZE_TAG + i` size.
pub const SIZE_TAG: u8 = 64;

/// How much history to keep.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// Second slots kept (default 3600: one hour).
    pub seconds: usize,
    /// Minute slots kept (default 10080: one week).
    pub minutes: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            seconds: 3600,
            minutes: 7 * 24 * 60,
        }
    }
}

/// What one key did during one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    /// Interned key id (see [`Store::key`]).
    pub key: u32,
    /// Events.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
    /// Sum of latencies, ns.
    pub latency_sum_ns: u64,
    /// Non-zero histogram buckets `(tag, events)`, tags ascending.
    pub hist: Box<[(u8, u32)]>,
}

/// Everything that moved during one slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    /// Unix seconds at the slot's start.
    pub t: u64,
    /// `(stat id, deltas)`.
    pub stats: Vec<(u16, Vec<Delta>)>,
}

/// Keys of one statistic.
#[derive(Debug, Default)]
pub struct StatKeys {
    /// Name.
    pub name: String,
    /// Dimensions.
    pub dims: Vec<String>,
    /// Key values by id.
    pub keys: Vec<Box<[Box<str>]>>,
    index: HashMap<Box<[Box<str>]>, u32>,
}

/// The retained history.
pub struct Store {
    dir: Option<PathBuf>,
    retention: Retention,
    stats: Vec<StatKeys>,
    stat_index: HashMap<String, u16>,
    /// Second slots, oldest first.
    pub seconds: VecDeque<Slot>,
    /// Minute slots, oldest first.
    pub minutes: VecDeque<Slot>,
    /// The minute being summed from second slots.
    pending_minute: Option<Slot>,
    sec_file: Option<(u64, BufWriter<File>)>,
    min_file: Option<(u64, BufWriter<File>)>,
}

// ---- on-disk form: self-contained JSON lines ----

#[derive(Serialize, Deserialize)]
struct DiskSlot {
    t: u64,
    s: BTreeMap<String, DiskStat>,
}

#[derive(Serialize, Deserialize)]
struct DiskStat {
    d: Vec<String>,
    r: Vec<DiskRow>,
}

#[derive(Serialize, Deserialize)]
struct DiskRow(Vec<String>, u64, u64, u64, Vec<(u8, u32)>);

fn hist_add(into: &mut Vec<(u8, u32)>, from: &[(u8, u32)]) {
    for &(tag, n) in from {
        match into.binary_search_by_key(&tag, |e| e.0) {
            Ok(i) => into[i].1 = into[i].1.saturating_add(n),
            Err(i) => into.insert(i, (tag, n)),
        }
    }
}

impl Delta {
    fn absorb(&mut self, o: &Delta) {
        self.count = self.count.wrapping_add(o.count);
        self.bytes = self.bytes.wrapping_add(o.bytes);
        self.latency_sum_ns = self.latency_sum_ns.wrapping_add(o.latency_sum_ns);
        let mut h = self.hist.to_vec();
        hist_add(&mut h, &o.hist);
        self.hist = h.into_boxed_slice();
    }

    /// Approximate heap + inline bytes this delta uses.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Delta>() + self.hist.len() * std::mem::size_of::<(u8, u32)>()
    }
}

impl Slot {
    /// Approximate memory used by this slot.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Slot>()
            + self
                .stats
                .iter()
                .map(|(_, d)| {
                    std::mem::size_of::<(u16, Vec<Delta>)>()
                        + d.iter().map(Delta::mem_bytes).sum::<usize>()
                })
                .sum::<usize>()
    }

    fn absorb(&mut self, o: &Slot) {
        for (sid, deltas) in &o.stats {
            let pos = match self.stats.iter().position(|(s, _)| s == sid) {
                Some(p) => p,
                None => {
                    self.stats.push((*sid, Vec::new()));
                    self.stats.len() - 1
                }
            };
            let mine = &mut self.stats[pos].1;
            for d in deltas {
                match mine.binary_search_by_key(&d.key, |e| e.key) {
                    Ok(i) => mine[i].absorb(d),
                    Err(i) => mine.insert(i, d.clone()),
                }
            }
        }
    }
}

fn segment_name(kind: &str, start: u64) -> String {
    format!("{kind}-{start:012}.jsonl")
}

fn parse_segment(name: &str) -> Option<(&str, u64)> {
    let stem = name.strip_suffix(".jsonl")?;
    let (kind, start) = stem.split_once('-')?;
    Some((kind, start.parse().ok()?))
}

impl Store {
    /// An in-memory store (nothing persisted).
    pub fn in_memory(retention: Retention) -> Store {
        Store {
            dir: None,
            retention,
            stats: Vec::new(),
            stat_index: HashMap::new(),
            seconds: VecDeque::new(),
            minutes: VecDeque::new(),
            pending_minute: None,
            sec_file: None,
            min_file: None,
        }
    }

    /// Open (creating) the store in `dir`, reloading retained history as of `now`.
    pub fn open(dir: &Path, retention: Retention, now: u64) -> std::io::Result<Store> {
        fs::create_dir_all(dir)?;
        let mut st = Store::in_memory(retention);
        let mut segs: Vec<(String, u64, PathBuf)> = Vec::new();
        for e in fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some((kind, start)) = parse_segment(&name) {
                segs.push((kind.to_string(), start, e.path()));
            }
        }
        segs.sort_by_key(|s| s.1);
        let sec_from = now.saturating_sub(retention.seconds as u64);
        let min_from = now.saturating_sub(retention.minutes as u64 * 60);
        for (kind, start, path) in segs {
            let (span, from) = match kind.as_str() {
                "sec" => (3600, sec_from),
                "min" => (86_400, min_from),
                _ => continue,
            };
            if start + span <= from {
                let _ = fs::remove_file(&path);
                continue;
            }
            let minute = kind == "min";
            for line in BufReader::new(File::open(&path)?).lines() {
                let Ok(line) = line else { break };
                // A torn or garbled line (crash mid-append) is skipped.
                let Ok(ds) = serde_json::from_str::<DiskSlot>(&line) else {
                    continue;
                };
                if ds.t < from || ds.t > now {
                    continue;
                }
                let slot = st.intern_disk(ds);
                let ring = if minute {
                    &mut st.minutes
                } else {
                    &mut st.seconds
                };
                if ring.back().is_none_or(|b| b.t < slot.t) {
                    ring.push_back(slot);
                }
            }
        }
        // Seconds after the last stored minute rebuild the minute in progress.
        let last_min = st.minutes.back().map(|m| m.t + 60).unwrap_or(0);
        let pending: Vec<Slot> = st
            .seconds
            .iter()
            .filter(|s| s.t >= last_min)
            .cloned()
            .collect();
        for s in &pending {
            st.fold_minute(s, false);
        }
        st.trim();
        st.dir = Some(dir.to_path_buf());
        Ok(st)
    }

    /// Retention in force.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// Interned statistics.
    pub fn stats(&self) -> &[StatKeys] {
        &self.stats
    }

    /// Id of statistic `name`, if any slot or sample has seen it.
    pub fn stat_id(&self, name: &str) -> Option<u16> {
        self.stat_index.get(name).copied()
    }

    /// Keys of statistic `id`.
    pub fn stat_keys(&self, id: u16) -> &StatKeys {
        &self.stats[usize::from(id)]
    }

    fn intern_stat(&mut self, name: &str, dims: &[String]) -> u16 {
        if let Some(&id) = self.stat_index.get(name) {
            return id;
        }
        let id = u16::try_from(self.stats.len()).unwrap_or(u16::MAX);
        self.stats.push(StatKeys {
            name: name.to_string(),
            dims: dims.to_vec(),
            ..StatKeys::default()
        });
        self.stat_index.insert(name.to_string(), id);
        id
    }

    /// Intern `keys` of statistic `sid`; returns its id.
    pub fn key(&mut self, sid: u16, keys: &[String]) -> u32 {
        let sk = &mut self.stats[usize::from(sid)];
        let boxed: Box<[Box<str>]> = keys.iter().map(|k| Box::from(k.as_str())).collect();
        if let Some(&id) = sk.index.get(&boxed) {
            return id;
        }
        let id = sk.keys.len() as u32;
        sk.keys.push(boxed.clone());
        sk.index.insert(boxed, id);
        id
    }

    fn intern_disk(&mut self, ds: DiskSlot) -> Slot {
        let mut slot = Slot {
            t: ds.t,
            stats: Vec::new(),
        };
        for (name, stat) in ds.s {
            let sid = self.intern_stat(&name, &stat.d);
            let mut deltas: Vec<Delta> = stat
                .r
                .into_iter()
                .map(|DiskRow(k, count, bytes, lat, hist)| Delta {
                    key: self.key(sid, &k),
                    count,
                    bytes,
                    latency_sum_ns: lat,
                    hist: hist.into_boxed_slice(),
                })
                .collect();
            deltas.sort_by_key(|d| d.key);
            slot.stats.push((sid, deltas));
        }
        slot
    }

    fn to_disk(&self, slot: &Slot) -> DiskSlot {
        let mut s = BTreeMap::new();
        for (sid, deltas) in &slot.stats {
            let sk = &self.stats[usize::from(*sid)];
            let r = deltas
                .iter()
                .map(|d| {
                    DiskRow(
                        sk.keys[d.key as usize]
                            .iter()
                            .map(|k| k.to_string())
                            .collect(),
                        d.count,
                        d.bytes,
                        d.latency_sum_ns,
                        d.hist.to_vec(),
                    )
                })
                .collect();
            s.insert(
                sk.name.clone(),
                DiskStat {
                    d: sk.dims.clone(),
                    r,
                },
            );
        }
        DiskSlot { t: slot.t, s }
    }

    /// Add one second slot (times must increase; an older or equal `t` is ignored).
    /// Completed minutes are folded into the minute ring; both are persisted.
    pub fn push_second(&mut self, slot: Slot) {
        if self.seconds.back().is_some_and(|b| b.t >= slot.t) {
            return;
        }
        self.persist(false, &slot);
        self.fold_minute(&slot, true);
        self.seconds.push_back(slot);
        self.trim();
    }

    fn fold_minute(&mut self, s: &Slot, persist: bool) {
        let mt = s.t - s.t % 60;
        if let Some(p) = &self.pending_minute {
            if p.t != mt {
                let done = self.pending_minute.take().unwrap_or_default();
                if persist {
                    self.persist(true, &done);
                }
                if self.minutes.back().is_none_or(|b| b.t < done.t) {
                    self.minutes.push_back(done);
                }
            }
        }
        let p = self.pending_minute.get_or_insert_with(|| Slot {
            t: mt,
            stats: Vec::new(),
        });
        p.absorb(s);
    }

    /// The minute in progress (not yet in [`Store::minutes`]).
    pub fn pending_minute(&self) -> Option<&Slot> {
        self.pending_minute.as_ref()
    }

    fn trim(&mut self) {
        while self.seconds.len() > self.retention.seconds {
            self.seconds.pop_front();
        }
        while self.minutes.len() > self.retention.minutes {
            self.minutes.pop_front();
        }
    }

    /// Append `slot` to its segment (starting a new one, and pruning old ones, at a
    /// segment boundary). Errors are reported once per segment and otherwise
    /// ignored: analytics never stops the daemon.
    fn persist(&mut self, minute: bool, slot: &Slot) {
        let Some(dir) = self.dir.clone() else { return };
        let span = if minute { 86_400 } else { 3600 };
        let start = slot.t - slot.t % span;
        let line = match serde_json::to_string(&self.to_disk(slot)) {
            Ok(l) => l,
            Err(_) => return,
        };
        let file = if minute {
            &mut self.min_file
        } else {
            &mut self.sec_file
        };
        if file.as_ref().is_none_or(|(s, _)| *s != start) {
            if let Some((_, mut w)) = file.take() {
                let _ = w.flush();
            }
            let kind = if minute { "min" } else { "sec" };
            let path = dir.join(segment_name(kind, start));
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => *file = Some((start, BufWriter::new(f))),
                Err(e) => {
                    eprintln!("cachalot: analytics: {}: {e}", path.display());
                    return;
                }
            }
            let keep = if minute {
                self.retention.minutes as u64 * 60
            } else {
                self.retention.seconds as u64
            };
            prune(&dir, kind, span, slot.t.saturating_sub(keep));
        }
        let file = if minute {
            &mut self.min_file
        } else {
            &mut self.sec_file
        };
        if let Some((_, w)) = file.as_mut() {
            let _ = writeln!(w, "{line}");
            let _ = w.flush();
        }
    }

    /// Write the minute in progress too (daemon shutdown) and flush.
    pub fn flush(&mut self) {
        for (_, w) in [self.sec_file.as_mut(), self.min_file.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = w.flush();
        }
    }

    /// Approximate memory held by retained slots.
    pub fn mem_bytes(&self) -> usize {
        self.seconds
            .iter()
            .chain(self.minutes.iter())
            .chain(self.pending_minute.iter())
            .map(Slot::mem_bytes)
            .sum()
    }

    /// Approximate memory held by the second slots and by the minute slots.
    pub fn mem_bytes_split(&self) -> (usize, usize) {
        let secs = self.seconds.iter().map(Slot::mem_bytes).sum();
        (secs, self.mem_bytes() - secs)
    }

    /// Bytes on disk under the store's directory.
    pub fn disk_bytes(&self) -> u64 {
        let Some(dir) = &self.dir else { return 0 };
        fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }
}

/// Delete `kind` segments that end before `before`.
fn prune(dir: &Path, kind: &str, span: u64, before: u64) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some((k, start)) = parse_segment(&name) {
            if k == kind && start + span <= before {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// Turns successive registry snapshots into second slots.
#[derive(Default)]
pub struct Sampler {
    prev: HashMap<String, HashMap<Vec<String>, Row>>,
}

fn sub_hist(out: &mut Vec<(u8, u32)>, tag0: u8, now: &[u64], before: &[u64], n: usize) {
    for (i, v) in now.iter().enumerate().take(n) {
        let d = v.wrapping_sub(before.get(i).copied().unwrap_or(0));
        if d > 0 {
            out.push((tag0 + i as u8, u32::try_from(d).unwrap_or(u32::MAX)));
        }
    }
}

impl Sampler {
    /// A sampler whose first [`Sampler::sample`] only sets the baseline.
    pub fn new() -> Sampler {
        Sampler::default()
    }

    /// Snapshot `reg` and return what moved since the previous call, as the slot
    /// for second `t` (interning keys in `store`). The first call returns an empty
    /// slot: it only records the baseline.
    pub fn sample(&mut self, reg: &Registry, store: &mut Store, t: u64) -> Slot {
        let first = self.prev.is_empty();
        let mut slot = Slot {
            t,
            stats: Vec::new(),
        };
        for snap in reg.snapshot() {
            let prev = self.prev.entry(snap.name.clone()).or_default();
            let mut deltas = Vec::new();
            let mut sid = None;
            for row in snap.rows {
                let before = prev.get(&row.keys);
                let (c0, b0, l0) =
                    before.map_or((0, 0, 0), |b| (b.count, b.bytes, b.latency_sum_ns));
                let count = row.count.wrapping_sub(c0);
                let bytes = row.bytes.wrapping_sub(b0);
                if !first && (count > 0 || bytes > 0) {
                    let sid = *sid.get_or_insert_with(|| store.intern_stat(&snap.name, &snap.dims));
                    let mut hist = Vec::new();
                    let empty: &[u64] = &[];
                    sub_hist(
                        &mut hist,
                        0,
                        &row.latency_buckets,
                        before.map_or(empty, |b| &b.latency_buckets),
                        LATENCY_BUCKETS,
                    );
                    sub_hist(
                        &mut hist,
                        SIZE_TAG,
                        &row.size_buckets,
                        before.map_or(empty, |b| &b.size_buckets),
                        SIZE_BUCKETS,
                    );
                    deltas.push(Delta {
                        key: store.key(sid, &row.keys),
                        count,
                        bytes,
                        latency_sum_ns: row.latency_sum_ns.wrapping_sub(l0),
                        hist: hist.into_boxed_slice(),
                    });
                }
                if before.is_none_or(|b| b.count != row.count || b.bytes != row.bytes) {
                    prev.insert(row.keys.clone(), row);
                }
            }
            if let Some(sid) = sid {
                deltas.sort_by_key(|d| d.key);
                slot.stats.push((sid, deltas));
            }
        }
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "cachalot-series-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn deltas_per_second_and_minute_rollup() {
        let reg = Registry::new();
        let s = reg.stat("fuse.ops", &["op", "file"]);
        let mut store = Store::in_memory(Retention {
            seconds: 100,
            minutes: 10,
        });
        let mut sm = Sampler::new();
        assert!(sm.sample(&reg, &mut store, 999).stats.is_empty());
        for t in 1000..1130u64 {
            s.record(&["write", "/a"], 4096, Duration::from_micros(100));
            if t % 2 == 0 {
                s.add(&["read", "/b"], 3, 0);
            }
            let slot = sm.sample(&reg, &mut store, t);
            store.push_second(slot);
        }
        assert_eq!(store.seconds.len(), 100);
        assert_eq!(store.seconds.front().unwrap().t, 1030);
        // Minutes 960 (1000..1019) and 1020 are complete; 1080 is pending.
        let mins: Vec<u64> = store.minutes.iter().map(|m| m.t).collect();
        assert_eq!(mins, [960, 1020]);
        assert_eq!(store.pending_minute().unwrap().t, 1080);
        let sid = store.stat_id("fuse.ops").unwrap();
        let a = store.key(sid, &["write".into(), "/a".into()]);
        let b = store.key(sid, &["read".into(), "/b".into()]);
        let m = &store.minutes[1];
        let (_, deltas) = m.stats.iter().find(|(id, _)| *id == sid).unwrap();
        let d = deltas.iter().find(|d| d.key == a).unwrap();
        assert_eq!((d.count, d.bytes), (60, 60 * 4096));
        // 100us is latency bucket 16; 4096 bytes is size bucket 12.
        assert_eq!(&*d.hist, &[(16, 60), (SIZE_TAG + 12, 60)]);
        let d = deltas.iter().find(|d| d.key == b).unwrap();
        assert_eq!((d.count, d.bytes), (90, 0));
        assert!(d.hist.is_empty());
        assert!(store.mem_bytes() > 0);
    }

    fn rss_bytes() -> usize {
        let statm = fs::read_to_string("/proc/self/statm").unwrap_or_default();
        let pages: usize = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        pages * 4096
    }

    /// Memory of one hour of second slots with `KEYS` active keys per second
    /// (4 histogram entries each, like a timed FUSE op): the store's own estimate
    /// against the process's resident-set growth. Run with
    /// `cargo test -p cachalot-analytics --release -- --ignored --nocapture memory_per_hour`.
    #[test]
    #[ignore]
    fn memory_per_hour() {
        const KEYS: u32 = 100;
        let mut store = Store::in_memory(Retention {
            seconds: 3600,
            minutes: 60,
        });
        let sid = store.intern_stat("fuse.ops", &["op".into(), "file".into()]);
        for k in 0..KEYS {
            store.key(sid, &["write".into(), format!("/file{k}")]);
        }
        let rss0 = rss_bytes();
        for t in 0..3600u64 {
            let deltas = (0..KEYS)
                .map(|k| Delta {
                    key: k,
                    count: 10,
                    bytes: 163_840,
                    latency_sum_ns: 2_000_000,
                    hist: vec![(14, 3), (15, 5), (16, 2), (SIZE_TAG + 14, 10)].into_boxed_slice(),
                })
                .collect();
            store.push_second(Slot {
                t: 1_000_000 + t,
                stats: vec![(sid, deltas)],
            });
        }
        let rss1 = rss_bytes();
        let est = store.mem_bytes();
        println!(
            "one hour, {KEYS} active keys/s: estimate {:.1} MiB ({:.0} B per key-second), RSS growth {:.1} MiB",
            est as f64 / 1048576.0,
            est as f64 / (3600.0 * f64::from(KEYS)),
            (rss1.saturating_sub(rss0)) as f64 / 1048576.0
        );
        assert!(est > 0);
    }

    #[test]
    fn reopen_keeps_history_and_prunes_old_segments() {
        let dir = tmpdir("reopen");
        let reg = Registry::new();
        let s = reg.stat("disk.ops", &["device"]);
        let ret = Retention {
            seconds: 3600,
            minutes: 60 * 24 * 2,
        };
        let t0 = 1_700_000_000 - 1_700_000_000 % 3600;
        {
            let mut store = Store::open(&dir, ret, t0).unwrap();
            let mut sm = Sampler::new();
            sm.sample(&reg, &mut store, t0 - 1);
            for t in t0..t0 + 150 {
                s.add(&["sda"], 2, 512);
                let slot = sm.sample(&reg, &mut store, t);
                store.push_second(slot);
            }
            store.flush();
        }
        // Garbage and a torn line are skipped.
        let seg = dir.join(segment_name("sec", t0));
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(b"{\"t\":12\n{\"t\": garbage").unwrap();
        drop(f);
        let store = Store::open(&dir, ret, t0 + 200).unwrap();
        assert_eq!(store.seconds.len(), 150);
        assert_eq!(store.seconds.back().unwrap().t, t0 + 149);
        assert_eq!(store.minutes.len(), 2);
        assert_eq!(store.pending_minute().unwrap().t, t0 + 120);
        let sid = store.stat_id("disk.ops").unwrap();
        let total: u64 = store
            .seconds
            .iter()
            .flat_map(|s| s.stats.iter().filter(|(i, _)| *i == sid))
            .flat_map(|(_, d)| d.iter().map(|d| d.count))
            .sum();
        assert_eq!(total, 300);
        drop(store);
        // Three days later everything has expired and segments are deleted.
        let store = Store::open(&dir, ret, t0 + 3 * 86_400).unwrap();
        assert!(store.seconds.is_empty() && store.minutes.is_empty());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        let _ = fs::remove_dir_all(&dir);
    }
}
