//! Everything a study measured and how, as written to results.json: the machine,
//! versions, settings, targets, every individual run, and the summary (median
//! over passes) that report.md and the plots show.
//!
//! Invariants:
//! - Raw runs are kept as measured; the summary is derived only from them
//!   (median per figure over passes), so results.json can always be re-checked.
//! - `complete` is false (and `error` says why) when a study stopped early; what
//!   was measured until then is still recorded.

use crate::baseline::BaselineInfo;
use crate::fio::{FioResult, Job};
use crate::machine::Machine;
use crate::mariadb::ServerSettings;
use crate::presets::Variant;
use crate::sysbench::{SysbenchResult, Workload};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One target of a study.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    pub name: String,
    pub path: PathBuf,
    /// File system type under the path when the study ran.
    pub fs_type: String,
    /// Set for `--baseline` targets.
    pub baseline: Option<BaselineInfo>,
    /// The Cachalot dataset behind the path (`--dataset`).
    pub dataset: Option<String>,
}

/// Shared header of both studies.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    /// Version of this file's layout.
    pub format: u32,
    pub tool: &'static str,
    pub study: &'static str,
    pub complete: bool,
    pub error: Option<String>,
    pub started: String,
    pub finished: String,
    pub command: Vec<String>,
    pub machine: Machine,
    pub targets: Vec<TargetInfo>,
    /// Whether the page cache was dropped before warm-ups / jobs (root only).
    pub page_cache_dropped: bool,
    /// 1-minute load average when the study ended.
    pub loadavg_end: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MysqlSettings {
    pub preset: Option<String>,
    pub varies: String,
    pub threads: Vec<u32>,
    pub time_s: u32,
    pub warmup_s: u32,
    pub passes: u32,
    pub workload: Workload,
    pub server: ServerSettings,
    pub client: String,
}

/// Facts about one server of one variant (what it reported, data size).
#[derive(Debug, Clone, Serialize)]
pub struct ServerRecord {
    pub target: String,
    pub variant: String,
    /// Server variables as the server reported them after start.
    pub effective: BTreeMap<String, String>,
    pub data_bytes: u64,
    pub prepare_s: Option<f64>,
    /// Dataset compressratio after prepare (Cachalot targets).
    pub compressratio: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MysqlPoint {
    pub target: String,
    pub variant: String,
    pub threads: u32,
    /// None in the summary (median over passes).
    pub pass: Option<u32>,
    /// 1-minute load average right after the run (other work on the machine
    /// skews figures; this shows how much there was).
    pub loadavg: f64,
    #[serde(flatten)]
    pub result: SysbenchResult,
}

#[derive(Debug, Clone, Serialize)]
pub struct MysqlResults {
    #[serde(flatten)]
    pub header: Header,
    pub settings: MysqlSettings,
    pub variants: Vec<Variant>,
    pub servers: Vec<ServerRecord>,
    pub runs: Vec<MysqlPoint>,
    pub summary: Vec<MysqlPoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FioSettings {
    pub size_bytes: u64,
    pub runtime_s: u32,
    pub ramp_s: u32,
    pub passes: u32,
    pub jobs: Vec<Job>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FioPoint {
    pub target: String,
    pub job: String,
    pub pass: Option<u32>,
    /// 1-minute load average right after the run.
    pub loadavg: f64,
    #[serde(flatten)]
    pub result: FioResult,
}

#[derive(Debug, Clone, Serialize)]
pub struct FioResults {
    #[serde(flatten)]
    pub header: Header,
    pub settings: FioSettings,
    pub runs: Vec<FioPoint>,
    pub summary: Vec<FioPoint>,
}

/// Median of the values (mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn med<T>(xs: &[&T], f: impl Fn(&T) -> f64) -> f64 {
    median(xs.iter().map(|x| f(x)).collect())
}

/// Group items by key, keeping the order in which keys first appear.
fn groups<T, K: PartialEq + Clone>(items: &[T], key: impl Fn(&T) -> K) -> Vec<(K, Vec<&T>)> {
    let mut out: Vec<(K, Vec<&T>)> = Vec::new();
    for it in items {
        let k = key(it);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(it),
            None => out.push((k, vec![it])),
        }
    }
    out
}

/// Median of every sysbench figure per (target, variant, threads).
pub fn summarize_mysql(runs: &[MysqlPoint]) -> Vec<MysqlPoint> {
    groups(runs, |p| (p.target.clone(), p.variant.clone(), p.threads))
        .into_iter()
        .map(|((target, variant, threads), ps)| {
            let rs: Vec<&SysbenchResult> = ps.iter().map(|p| &p.result).collect();
            let m = |f: fn(&SysbenchResult) -> f64| med(&rs, f);
            MysqlPoint {
                target,
                variant,
                threads,
                pass: None,
                loadavg: median(ps.iter().map(|p| p.loadavg).collect()),
                result: SysbenchResult {
                    tps: m(|r| r.tps),
                    qps: m(|r| r.qps),
                    lat_min_ms: m(|r| r.lat_min_ms),
                    lat_avg_ms: m(|r| r.lat_avg_ms),
                    lat_p95_ms: m(|r| r.lat_p95_ms),
                    lat_max_ms: m(|r| r.lat_max_ms),
                    transactions: m(|r| r.transactions as f64) as u64,
                    queries: m(|r| r.queries as f64) as u64,
                    reads: m(|r| r.reads as f64) as u64,
                    writes: m(|r| r.writes as f64) as u64,
                    other: m(|r| r.other as f64) as u64,
                    ignored_errors: m(|r| r.ignored_errors as f64) as u64,
                    reconnects: m(|r| r.reconnects as f64) as u64,
                    total_time_s: m(|r| r.total_time_s),
                },
            }
        })
        .collect()
}

/// Median of every fio figure per (target, job).
pub fn summarize_fio(runs: &[FioPoint]) -> Vec<FioPoint> {
    groups(runs, |p| (p.target.clone(), p.job.clone()))
        .into_iter()
        .map(|((target, job), ps)| {
            let rs: Vec<&FioResult> = ps.iter().map(|p| &p.result).collect();
            let m = |f: fn(&FioResult) -> f64| med(&rs, f);
            let opt = |f: fn(&FioResult) -> Option<f64>| {
                let v: Vec<f64> = rs.iter().filter_map(|r| f(r)).collect();
                (!v.is_empty()).then(|| median(v))
            };
            FioPoint {
                target,
                job,
                pass: None,
                loadavg: median(ps.iter().map(|p| p.loadavg).collect()),
                result: FioResult {
                    iops: m(|r| r.iops),
                    bw_mib_s: m(|r| r.bw_mib_s),
                    lat_mean_us: m(|r| r.lat_mean_us),
                    lat_p50_us: m(|r| r.lat_p50_us),
                    lat_p99_us: m(|r| r.lat_p99_us),
                    sync_p50_us: opt(|r| r.sync_p50_us),
                    sync_p99_us: opt(|r| r.sync_p99_us),
                },
            }
        })
        .collect()
}

/// Write `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("serializing results")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(tps: f64) -> SysbenchResult {
        SysbenchResult {
            tps,
            qps: tps * 20.0,
            lat_min_ms: 1.0,
            lat_avg_ms: 2.0,
            lat_p95_ms: 3.0,
            lat_max_ms: tps,
            transactions: 10,
            queries: 200,
            reads: 140,
            writes: 40,
            other: 20,
            ignored_errors: 0,
            reconnects: 0,
            total_time_s: 30.0,
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }

    #[test]
    fn summary_is_the_median_over_passes() {
        let p = |target: &str, threads, pass, tps| MysqlPoint {
            target: target.into(),
            variant: "default".into(),
            threads,
            pass: Some(pass),
            loadavg: 1.0,
            result: sb(tps),
        };
        let runs = vec![
            p("a", 1, 0, 100.0),
            p("b", 1, 0, 50.0),
            p("a", 1, 1, 300.0),
            p("a", 1, 2, 200.0),
            p("a", 4, 0, 7.0),
        ];
        let s = summarize_mysql(&runs);
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].target.as_str(), s[0].threads, s[0].result.tps),
            ("a", 1, 200.0)
        );
        assert_eq!(s[0].pass, None);
        assert_eq!((s[1].target.as_str(), s[1].result.tps), ("b", 50.0));
        assert_eq!(s[2].result.tps, 7.0);
    }

    #[test]
    fn fio_summary_keeps_sync_latency_only_where_measured() {
        let r = |iops, sync: Option<f64>| FioResult {
            iops,
            bw_mib_s: 1.0,
            lat_mean_us: 1.0,
            lat_p50_us: 1.0,
            lat_p99_us: 1.0,
            sync_p50_us: sync,
            sync_p99_us: sync,
        };
        let runs = vec![
            FioPoint {
                target: "a".into(),
                job: "j".into(),
                pass: Some(0),
                loadavg: 1.0,
                result: r(10.0, Some(5.0)),
            },
            FioPoint {
                target: "a".into(),
                job: "j".into(),
                pass: Some(1),
                loadavg: 1.0,
                result: r(30.0, Some(7.0)),
            },
            FioPoint {
                target: "a".into(),
                job: "k".into(),
                pass: Some(0),
                loadavg: 1.0,
                result: r(1.0, None),
            },
        ];
        let s = summarize_fio(&runs);
        assert_eq!(s[0].result.iops, 20.0);
        assert_eq!(s[0].result.sync_p50_us, Some(6.0));
        assert_eq!(s[1].result.sync_p50_us, None);
    }
}
