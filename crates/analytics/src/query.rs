//! Queries over the retained history ([`crate::series::Store`]): a breakdown
//! ("writes by file where dataset=tank/db over the last minute"), a time series of
//! the top values (the UI's live chart) and latency/size heat maps.
//!
//! Invariants:
//! - Every query is validated first ([`prepare`]): an unknown statistic, dimension
//!   or filter, or an empty, inverted or longer-than-retained range is an error
//!   message naming the problem; nothing is computed for a bad query.
//! - A range `[from, to)` is answered from second slots when it starts within the
//!   second retention, else from minute slots (the range is then widened to whole
//!   minutes). Rates divide by the range length in seconds, so seconds without
//!   events count as zero.
//! - Breakdown rows are sorted largest first (by bytes for byte statistics, else by
//!   events); latency and size rows are in bucket order.

use crate::catalog;
use crate::series::{Delta, Slot, Store, SIZE_TAG};
use crate::{bucket_bounds, LATENCY_BUCKETS, SIZE_BUCKETS};
use serde::Serialize;
use std::collections::HashMap;

/// One query as asked.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// Statistic name.
    pub stat: String,
    /// Breakdown dimension, or `latency` / `size`; none: one total row.
    pub by: Option<String>,
    /// `(dimension, value)` filters, all of which must match.
    pub filters: Vec<(String, String)>,
    /// Range start, unix seconds (inclusive).
    pub from: u64,
    /// Range end, unix seconds (exclusive).
    pub to: u64,
    /// Keep only the largest N rows (series: N values plus the rest).
    pub top: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum By {
    Total,
    Dim(usize),
    Latency,
    Size,
}

/// A validated query.
#[derive(Debug)]
pub struct Prepared {
    stat: String,
    dims: Vec<String>,
    unit: &'static str,
    by: By,
    by_name: String,
    filters: Vec<(usize, String)>,
    from: u64,
    to: u64,
    minute: bool,
    top: Option<usize>,
}

/// One breakdown row.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct BreakdownRow {
    /// Value of the breakdown dimension (bucket label for latency/size).
    pub value: String,
    /// Bucket bounds `[lo, hi)` (ns or bytes) for latency/size rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<(u64, u64)>,
    /// Events in the range.
    pub count: u64,
    /// Bytes in the range.
    pub bytes: u64,
    /// Events per second.
    pub rate: f64,
    /// Bytes per second.
    pub bytes_rate: f64,
    /// Mean latency in ns (0 if not timed).
    pub avg_latency_ns: u64,
}

/// Answer of [`breakdown`].
#[derive(Clone, Debug, Serialize)]
pub struct Breakdown {
    /// Statistic.
    pub stat: String,
    /// `ops` or `bytes`: what `rate` of the rows means for this statistic.
    pub unit: &'static str,
    /// Breakdown dimension (`""`: none).
    pub by: String,
    /// Range actually used.
    pub from: u64,
    /// Range end (exclusive).
    pub to: u64,
    /// `second` or `minute`.
    pub resolution: &'static str,
    /// All matching events.
    pub total: BreakdownRow,
    /// Rows, largest first.
    pub rows: Vec<BreakdownRow>,
}

/// Answer of [`series`]: per-slot rates of the top values.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    /// Statistic.
    pub stat: String,
    /// `ops` or `bytes`.
    pub unit: &'static str,
    /// Breakdown dimension (`""`: total only).
    pub by: String,
    /// `second` or `minute`.
    pub resolution: &'static str,
    /// Slot start times.
    pub times: Vec<u64>,
    /// One line per value: per-slot rate (per second).
    pub lines: Vec<SeriesLine>,
}

/// One line of a [`Series`].
#[derive(Clone, Debug, Serialize)]
pub struct SeriesLine {
    /// Breakdown value (`(rest)` for the values beyond the top N, `total` without --by).
    pub value: String,
    /// Rate per second in each slot.
    pub points: Vec<f64>,
}

/// Answer of [`heatmap`].
#[derive(Clone, Debug, Serialize)]
pub struct Heatmap {
    /// Statistic.
    pub stat: String,
    /// `latency` (ns) or `size` (bytes).
    pub by: String,
    /// `second` or `minute`.
    pub resolution: &'static str,
    /// Slot start times.
    pub times: Vec<u64>,
    /// Bucket bounds `[lo, hi)`, from the lowest to the highest non-empty bucket.
    pub buckets: Vec<(u64, u64)>,
    /// `counts[time][bucket]`: events.
    pub counts: Vec<Vec<u64>>,
}

/// Parse a duration like `60s`, `5m`, `2h`, `7d` or `90` (seconds).
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 's')) => (&s[..i], 1),
        Some((i, 'm')) => (&s[..i], 60),
        Some((i, 'h')) => (&s[..i], 3600),
        Some((i, 'd')) => (&s[..i], 86_400),
        Some((i, 'w')) => (&s[..i], 7 * 86_400),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("invalid duration '{s}' (use e.g. 60s, 5m, 2h, 7d)"))
}

/// Parse a time: unix seconds, or `YYYY-MM-DDTHH:MM[:SS][Z]` / `YYYY-MM-DD HH:MM[:SS]` (UTC).
pub fn parse_time(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    let bad = || format!("invalid time '{s}' (use unix seconds or YYYY-MM-DDTHH:MM:SS, UTC)");
    let t = s.trim_end_matches('Z');
    let (date, time) = t
        .split_once('T')
        .or_else(|| t.split_once(' '))
        .ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let h: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if d.len() != 3 || !(2..=3).contains(&h.len()) {
        return Err(bad());
    }
    let (y, mo, da) = (d[0], d[1], d[2]);
    let (hh, mi, ss) = (h[0], h[1], h.get(2).copied().unwrap_or(0));
    if !(1970..=9999).contains(&y)
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&da)
        || !(0..24).contains(&hh)
        || !(0..60).contains(&mi)
        || !(0..61).contains(&ss)
    {
        return Err(bad());
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mi * 60 + ss).map_err(|_| bad())
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm; the
/// inverse of the one in `parse_time`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Seconds since the epoch as "YYYY-MM-DDTHH:MM:SSZ" (UTC).
pub fn iso_utc(secs: u64) -> String {
    let (y, m, d) = civil_from_days((secs / 86400) as i64);
    let s = secs % 86400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Seconds since the epoch as "YYYYMMDD-HHMMSS" (UTC), for names of files and
/// snapshots.
pub fn compact_utc(secs: u64) -> String {
    iso_utc(secs)
        .replace(['-', ':'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string()
}

/// Human form of a latency in ns: `850ns`, `12us`, `3ms`, `2s`.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        n if n < 1_000 => format!("{n}ns"),
        n if n < 1_000_000 => format!("{}us", n / 1_000),
        n if n < 1_000_000_000 => format!("{}ms", n / 1_000_000),
        n => format!("{}s", n / 1_000_000_000),
    }
}

/// Human form of a size in bytes: `512`, `4K`, `1M`.
pub fn fmt_bytes(b: u64) -> String {
    match b {
        n if n < 1 << 10 => format!("{n}"),
        n if n < 1 << 20 => format!("{}K", n >> 10),
        n if n < 1 << 30 => format!("{}M", n >> 20),
        n => format!("{}G", n >> 30),
    }
}

fn size_bounds(i: usize) -> (u64, u64) {
    (1u64 << i, 1u64 << (i + 1))
}

/// Dimensions a query may name for `stat`: its key dimensions, plus `latency` and
/// `size` for timed statistics.
pub fn query_dims(store: &Store, stat: &str) -> Option<(Vec<String>, bool, &'static str)> {
    if let Some(i) = catalog::info(stat) {
        return Some((
            i.dims.iter().map(|d| d.to_string()).collect(),
            i.timed,
            i.unit,
        ));
    }
    let sid = store.stat_id(stat)?;
    let unit = if stat.ends_with(".bytes") {
        "bytes"
    } else {
        "ops"
    };
    Some((store.stat_keys(sid).dims.clone(), true, unit))
}

/// Validate `q` against `store` at time `now`.
pub fn prepare(store: &Store, q: &Query, now: u64) -> Result<Prepared, String> {
    let (dims, timed, unit) = query_dims(store, &q.stat).ok_or_else(|| {
        format!(
            "unknown statistic '{}' (see 'cachalot analytics list')",
            q.stat
        )
    })?;
    let all_dims = || {
        let mut v = dims.clone();
        if timed {
            v.push("latency".into());
            v.push("size".into());
        }
        v.join(", ")
    };
    let by = match q.by.as_deref() {
        None | Some("") => By::Total,
        Some("latency") if timed => By::Latency,
        Some("size") if timed => By::Size,
        Some(d) => By::Dim(dims.iter().position(|x| x == d).ok_or_else(|| {
            format!(
                "{} has no dimension '{d}' (dimensions: {})",
                q.stat,
                all_dims()
            )
        })?),
    };
    let mut filters = Vec::new();
    for (d, v) in &q.filters {
        let i = dims.iter().position(|x| x == d).ok_or_else(|| {
            format!(
                "{} has no dimension '{d}' to filter on (dimensions: {})",
                q.stat,
                dims.join(", ")
            )
        })?;
        filters.push((i, v.clone()));
    }
    if q.from > now + 60 {
        return Err(format!("time range starts in the future ({})", q.from));
    }
    if q.from >= q.to {
        return Err(format!(
            "empty time range: from {} is not before to {}",
            q.from, q.to
        ));
    }
    let ret = store.retention();
    let max = ret.minutes as u64 * 60;
    if q.to - q.from > max.max(ret.seconds as u64) {
        return Err(format!(
            "time range of {}s is longer than the {}s of history kept",
            q.to - q.from,
            max.max(ret.seconds as u64)
        ));
    }
    let minute = q.from < now.saturating_sub(ret.seconds as u64);
    let (from, to) = if minute {
        (q.from - q.from % 60, q.to.div_ceil(60) * 60)
    } else {
        (q.from, q.to)
    };
    if q.top == Some(0) {
        return Err("--top must be at least 1".into());
    }
    Ok(Prepared {
        stat: q.stat.clone(),
        dims,
        unit,
        by,
        by_name: q.by.clone().unwrap_or_default(),
        filters,
        from,
        to,
        minute,
        top: q.top,
    })
}

impl Prepared {
    fn resolution(&self) -> &'static str {
        if self.minute {
            "minute"
        } else {
            "second"
        }
    }

    fn step(&self) -> u64 {
        if self.minute {
            60
        } else {
            1
        }
    }

    /// Slots within the range, oldest first.
    fn slots<'a>(&self, store: &'a Store) -> Vec<&'a Slot> {
        let in_range = |s: &&Slot| s.t >= self.from && s.t < self.to;
        if self.minute {
            store
                .minutes
                .iter()
                .chain(store.pending_minute())
                .filter(in_range)
                .collect()
        } else {
            store.seconds.iter().filter(in_range).collect()
        }
    }

    /// For each matching delta of each slot: call `f(slot_index, group, delta)` where
    /// group is the breakdown value (for dimension breakdowns) or "".
    fn scan<'a>(&self, store: &'a Store, mut f: impl FnMut(usize, &'a str, &Delta)) {
        let Some(sid) = store.stat_id(&self.stat) else {
            return;
        };
        let keys = &store.stat_keys(sid).keys;
        // Cache per key id: None = filtered out, Some(group).
        let mut cache: HashMap<u32, Option<&'a str>> = HashMap::new();
        for (i, slot) in self.slots(store).into_iter().enumerate() {
            let Some((_, deltas)) = slot.stats.iter().find(|(s, _)| *s == sid) else {
                continue;
            };
            for d in deltas {
                let g = *cache.entry(d.key).or_insert_with(|| {
                    let k = keys.get(d.key as usize)?;
                    let comp = |i: usize| k.get(i).map_or("", |s| &**s);
                    if !self.filters.iter().all(|(fi, v)| comp(*fi) == v) {
                        return None;
                    }
                    Some(match self.by {
                        By::Dim(i) => comp(i),
                        _ => "",
                    })
                });
                if let Some(g) = g {
                    f(i, g, d);
                }
            }
        }
    }

    fn seconds(&self) -> f64 {
        (self.to - self.from) as f64
    }

    fn primary(&self, count: u64, bytes: u64) -> u64 {
        if self.unit == "bytes" {
            bytes
        } else {
            count
        }
    }

    fn finish_row(&self, mut r: BreakdownRow, lat_sum: u64) -> BreakdownRow {
        let secs = self.seconds();
        r.rate = r.count as f64 / secs;
        r.bytes_rate = r.bytes as f64 / secs;
        r.avg_latency_ns = lat_sum.checked_div(r.count).unwrap_or(0);
        r
    }
}

fn bucket_row(by: By, tag: usize) -> BreakdownRow {
    let (bounds, label) = if by == By::Latency {
        let b = bucket_bounds(tag);
        (b, format!("{}-{}", fmt_ns(b.0), fmt_ns(b.1)))
    } else {
        let b = size_bounds(tag);
        (b, format!("{}-{}", fmt_bytes(b.0), fmt_bytes(b.1)))
    };
    BreakdownRow {
        value: label,
        bounds: Some(bounds),
        ..BreakdownRow::default()
    }
}

/// Histogram index of a tagged entry for a latency or size breakdown.
fn hist_index(by: By, tag: u8) -> Option<usize> {
    match by {
        By::Latency if (tag as usize) < LATENCY_BUCKETS => Some(tag as usize),
        By::Size if tag >= SIZE_TAG && ((tag - SIZE_TAG) as usize) < SIZE_BUCKETS => {
            Some((tag - SIZE_TAG) as usize)
        }
        _ => None,
    }
}

/// Rate per breakdown value over the range.
pub fn breakdown(store: &Store, p: &Prepared) -> Breakdown {
    let mut total = BreakdownRow {
        value: "total".into(),
        ..BreakdownRow::default()
    };
    let mut total_lat = 0u64;
    let mut groups: HashMap<&str, (BreakdownRow, u64)> = HashMap::new();
    let mut hist = vec![0u64; LATENCY_BUCKETS.max(SIZE_BUCKETS)];
    p.scan(store, |_, g, d| {
        total.count += d.count;
        total.bytes += d.bytes;
        total_lat += d.latency_sum_ns;
        match p.by {
            By::Dim(_) => {
                let e = groups.entry(g).or_insert_with(|| {
                    (
                        BreakdownRow {
                            value: g.to_string(),
                            ..BreakdownRow::default()
                        },
                        0,
                    )
                });
                e.0.count += d.count;
                e.0.bytes += d.bytes;
                e.1 += d.latency_sum_ns;
            }
            By::Latency | By::Size => {
                for &(tag, n) in d.hist.iter() {
                    if let Some(i) = hist_index(p.by, tag) {
                        hist[i] += u64::from(n);
                    }
                }
            }
            By::Total => {}
        }
    });
    let mut rows: Vec<BreakdownRow> = match p.by {
        By::Dim(_) => {
            let mut v: Vec<BreakdownRow> = groups
                .into_values()
                .map(|(r, lat)| p.finish_row(r, lat))
                .collect();
            v.sort_by(|a, b| {
                p.primary(b.count, b.bytes)
                    .cmp(&p.primary(a.count, a.bytes))
                    .then_with(|| a.value.cmp(&b.value))
            });
            v
        }
        By::Latency | By::Size => hist
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| {
                let mut r = bucket_row(p.by, i);
                r.count = *n;
                p.finish_row(r, 0)
            })
            .collect(),
        By::Total => Vec::new(),
    };
    if let Some(n) = p.top {
        rows.truncate(n);
    }
    let total = p.finish_row(total, total_lat);
    if p.by == By::Total {
        rows.push(total.clone());
    }
    Breakdown {
        stat: p.stat.clone(),
        unit: p.unit,
        by: p.by_name.clone(),
        from: p.from,
        to: p.to,
        resolution: p.resolution(),
        total,
        rows,
    }
}

/// Per-slot rates of the top values (default 8) plus `(rest)`.
pub fn series(store: &Store, p: &Prepared) -> Series {
    let step = p.step();
    let n = ((p.to - p.from) / step) as usize;
    let times: Vec<u64> = (0..n as u64).map(|i| p.from + i * step).collect();
    let mut per: HashMap<&str, Vec<u64>> = HashMap::new();
    let mut slot_times: Vec<u64> = Vec::new();
    let slots = p.slots(store);
    slot_times.extend(slots.iter().map(|s| s.t));
    p.scan(store, |i, g, d| {
        let idx = ((slot_times[i] - p.from) / step) as usize;
        if idx < n {
            let g = if matches!(p.by, By::Dim(_)) {
                g
            } else {
                "total"
            };
            per.entry(g).or_insert_with(|| vec![0; n])[idx] += p.primary(d.count, d.bytes);
        }
    });
    let mut ranked: Vec<(&str, Vec<u64>)> = per.into_iter().collect();
    ranked.sort_by(|a, b| {
        b.1.iter()
            .sum::<u64>()
            .cmp(&a.1.iter().sum::<u64>())
            .then_with(|| a.0.cmp(b.0))
    });
    let top = p.top.unwrap_or(8);
    let mut lines = Vec::new();
    let mut rest: Option<Vec<u64>> = None;
    for (i, (v, pts)) in ranked.into_iter().enumerate() {
        if i < top {
            lines.push((v.to_string(), pts));
        } else {
            let r = rest.get_or_insert_with(|| vec![0; n]);
            for (a, b) in r.iter_mut().zip(pts) {
                *a += b;
            }
        }
    }
    if let Some(r) = rest {
        lines.push(("(rest)".to_string(), r));
    }
    Series {
        stat: p.stat.clone(),
        unit: p.unit,
        by: p.by_name.clone(),
        resolution: p.resolution(),
        times,
        lines: lines
            .into_iter()
            .map(|(value, pts)| SeriesLine {
                value,
                points: pts.into_iter().map(|c| c as f64 / step as f64).collect(),
            })
            .collect(),
    }
}

/// Latency or size heat map (the query's `by` must be `latency` or `size`).
pub fn heatmap(store: &Store, p: &Prepared) -> Result<Heatmap, String> {
    if !matches!(p.by, By::Latency | By::Size) {
        return Err(format!(
            "heatmap: --by must be latency or size (dimensions of {}: {})",
            p.stat,
            p.dims.join(", ")
        ));
    }
    let step = p.step();
    let n = ((p.to - p.from) / step) as usize;
    let times: Vec<u64> = (0..n as u64).map(|i| p.from + i * step).collect();
    let nb = if p.by == By::Latency {
        LATENCY_BUCKETS
    } else {
        SIZE_BUCKETS
    };
    let mut grid = vec![vec![0u64; nb]; n];
    let slot_times: Vec<u64> = p.slots(store).iter().map(|s| s.t).collect();
    p.scan(store, |i, _, d| {
        let idx = ((slot_times[i] - p.from) / step) as usize;
        for &(tag, c) in d.hist.iter() {
            if let (Some(b), true) = (hist_index(p.by, tag), idx < n) {
                grid[idx][b] += u64::from(c);
            }
        }
    });
    let used: Vec<usize> = (0..nb)
        .filter(|b| grid.iter().any(|row| row[*b] > 0))
        .collect();
    let (lo, hi) = match (used.first(), used.last()) {
        (Some(&l), Some(&h)) => (l, h + 1),
        _ => (0, 0),
    };
    let buckets = (lo..hi)
        .map(|i| bucket_row(p.by, i).bounds.unwrap_or((0, 0)))
        .collect();
    Ok(Heatmap {
        stat: p.stat.clone(),
        by: p.by_name.clone(),
        resolution: p.resolution(),
        times,
        buckets,
        counts: grid.into_iter().map(|row| row[lo..hi].to_vec()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::{Retention, Sampler};
    use crate::Registry;
    use std::time::Duration;

    /// 120 seconds of a known workload, starting at t = 6000.
    fn store() -> Store {
        let reg = Registry::new();
        let ops = reg.stat("fuse.ops", &["op", "dataset", "file"]);
        let mut store = Store::in_memory(Retention {
            seconds: 100,
            minutes: 100,
        });
        let mut sm = Sampler::new();
        sm.sample(&reg, &mut store, 5999);
        for t in 6000..6120u64 {
            for _ in 0..10 {
                ops.record(
                    &["write", "tank/db", "/busy"],
                    16384,
                    Duration::from_micros(200),
                );
            }
            ops.record(
                &["read", "tank/db", "/quiet"],
                4096,
                Duration::from_millis(3),
            );
            ops.record(&["read", "tank/other", "/x"], 512, Duration::from_micros(5));
            let s = sm.sample(&reg, &mut store, t);
            store.push_second(s);
        }
        store
    }

    fn q(by: Option<&str>, filters: &[(&str, &str)], from: u64, to: u64) -> Query {
        Query {
            stat: "fuse.ops".into(),
            by: by.map(str::to_string),
            filters: filters
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            from,
            to,
            top: None,
        }
    }

    #[test]
    fn breakdown_by_file_with_filter() {
        let st = store();
        let now = 6120;
        let p = prepare(
            &st,
            &q(Some("file"), &[("dataset", "tank/db")], 6060, 6120),
            now,
        )
        .unwrap();
        let b = breakdown(&st, &p);
        assert_eq!(b.resolution, "second");
        assert_eq!(b.rows.len(), 2);
        assert_eq!(b.rows[0].value, "/busy");
        assert_eq!(b.rows[0].rate, 10.0);
        assert_eq!(b.rows[0].bytes_rate, 163_840.0);
        assert_eq!(b.rows[1].value, "/quiet");
        assert_eq!(b.rows[1].rate, 1.0);
        assert_eq!(b.rows[1].avg_latency_ns, 3_000_000);
        assert_eq!(b.total.count, 660);
        // Total only.
        let p = prepare(&st, &q(None, &[], 6100, 6110), now).unwrap();
        let b = breakdown(&st, &p);
        assert_eq!(b.rows.len(), 1);
        assert_eq!(b.rows[0].rate, 12.0);
    }

    #[test]
    fn latency_and_size_breakdowns_and_heatmap() {
        let st = store();
        let p = prepare(
            &st,
            &q(Some("latency"), &[("op", "write")], 6100, 6110),
            6120,
        )
        .unwrap();
        let b = breakdown(&st, &p);
        // 200us = 200000ns lies in [2^17, 2^18).
        assert_eq!(b.rows.len(), 1);
        assert_eq!(b.rows[0].bounds, Some((1 << 17, 1 << 18)));
        assert_eq!(b.rows[0].count, 100);
        let p = prepare(&st, &q(Some("size"), &[], 6100, 6110), 6120).unwrap();
        let b = breakdown(&st, &p);
        let sizes: Vec<_> = b
            .rows
            .iter()
            .map(|r| (r.bounds.unwrap().0, r.count))
            .collect();
        assert_eq!(sizes, [(512, 10), (4096, 10), (16384, 100)]);
        let h = heatmap(&st, &p).unwrap();
        assert_eq!(h.times.len(), 10);
        assert_eq!(h.buckets.first(), Some(&(512, 1024)));
        assert_eq!(h.buckets.last(), Some(&(16384, 32768)));
        assert_eq!(h.counts[0].iter().sum::<u64>(), 12);
        let p = prepare(&st, &q(Some("op"), &[], 6100, 6110), 6120).unwrap();
        assert!(heatmap(&st, &p).unwrap_err().contains("latency or size"));
    }

    #[test]
    fn series_top_and_rest() {
        let st = store();
        let mut query = q(Some("file"), &[], 6110, 6120);
        query.top = Some(1);
        let p = prepare(&st, &query, 6120).unwrap();
        let s = series(&st, &p);
        assert_eq!(s.times.len(), 10);
        assert_eq!(s.lines.len(), 2);
        assert_eq!(s.lines[0].value, "/busy");
        assert!(s.lines[0].points.iter().all(|p| *p == 10.0));
        assert_eq!(s.lines[1].value, "(rest)");
        assert!(s.lines[1].points.iter().all(|p| *p == 2.0));
    }

    #[test]
    fn minute_resolution_for_old_ranges() {
        let st = store();
        // The second ring holds 6020..6119; 6000 is only in minutes.
        let p = prepare(&st, &q(Some("op"), &[], 6000, 6120), 6120).unwrap();
        let b = breakdown(&st, &p);
        assert_eq!(b.resolution, "minute");
        assert_eq!((b.from, b.to), (6000, 6120));
        assert_eq!(b.rows[0].value, "write");
        assert_eq!(b.rows[0].count, 1200);
        assert_eq!(b.rows[0].rate, 10.0);
    }

    #[test]
    fn bad_queries_are_clear_errors() {
        let st = store();
        let err = |query: Query| prepare(&st, &query, 6120).unwrap_err();
        let mut bad = q(None, &[], 6000, 6100);
        bad.stat = "nope.ops".into();
        assert!(err(bad).contains("unknown statistic 'nope.ops'"));
        assert!(err(q(Some("color"), &[], 6000, 6100)).contains("no dimension 'color'"));
        assert!(err(q(None, &[("color", "x")], 6000, 6100)).contains("no dimension 'color'"));
        assert!(err(q(None, &[], 6100, 6100)).contains("empty time range"));
        assert!(err(q(None, &[], 0, 6100)).contains("longer than"));
        assert!(err(q(None, &[], 9000, 9100)).contains("future"));
        let mut top0 = q(None, &[], 6000, 6100);
        top0.top = Some(0);
        assert!(err(top0).contains("--top"));
        let mut untimed = q(Some("latency"), &[], 6000, 6100);
        untimed.stat = "arc.accesses".into();
        assert!(err(untimed).contains("no dimension 'latency'"));
    }

    #[test]
    fn durations_and_times() {
        assert_eq!(parse_duration("60s"), Ok(60));
        assert_eq!(parse_duration("5m"), Ok(300));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        assert_eq!(parse_duration("90"), Ok(90));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
        assert_eq!(parse_time("1700000000"), Ok(1_700_000_000));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Ok(1_700_000_000));
        assert_eq!(parse_time("1970-01-01 00:01"), Ok(60));
        assert!(parse_time("2023-13-01T00:00").is_err());
        assert!(parse_time("yesterday").is_err());
        assert_eq!(fmt_ns(1500), "1us");
        assert_eq!(fmt_bytes(16384), "16K");
    }
}
