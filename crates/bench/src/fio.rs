//! fio jobs of the storage study and the parser of fio's JSON output.
//!
//! The jobs are the figures storage vendors publish for databases: 16K random read
//! and write at iodepth 16 (InnoDB pages), 4K write + fdatasync at depth 1 (the redo
//! log's commit path, with fdatasync latency p50/p99), and 1 MiB sequential read
//! and write (streaming, backups).
//!
//! Invariants:
//! - Building arguments and parsing are pure functions.
//! - A parsed result has a positive rate; a job that did no I/O is an error.

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// What a job's headline figure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// I/O operations per second.
    Iops,
    /// Writes (each followed by fdatasync) per second, plus fdatasync latency.
    SyncOps,
    /// MiB per second.
    Bandwidth,
}

/// One fio job of the study.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub id: &'static str,
    pub title: &'static str,
    /// Column and axis label, e.g. "16K randread qd16".
    pub short: &'static str,
    pub rw: &'static str,
    pub bs: &'static str,
    pub iodepth: u32,
    pub engine: &'static str,
    pub direct: bool,
    pub fdatasync: bool,
    pub metric: Metric,
}

impl Job {
    fn is_read(&self) -> bool {
        self.rw.contains("read")
    }
}

/// The jobs of `cachalot bench fio`, in run order.
pub fn jobs() -> Vec<Job> {
    let j = |id, title, short, rw, bs, iodepth, engine, direct, fdatasync, metric| Job {
        id,
        title,
        short,
        rw,
        bs,
        iodepth,
        engine,
        direct,
        fdatasync,
        metric,
    };
    vec![
        j(
            "randread16k",
            "16K random read, iodepth 16",
            "16K randread qd16",
            "randread",
            "16k",
            16,
            "libaio",
            true,
            false,
            Metric::Iops,
        ),
        j(
            "randwrite16k",
            "16K random write, iodepth 16",
            "16K randwrite qd16",
            "randwrite",
            "16k",
            16,
            "libaio",
            true,
            false,
            Metric::Iops,
        ),
        j(
            "fdatasync4k",
            "4K write + fdatasync",
            "4K write+fdatasync",
            "write",
            "4k",
            1,
            "sync",
            false,
            true,
            Metric::SyncOps,
        ),
        j(
            "seqread1m",
            "1M sequential read, iodepth 4",
            "1M seq read",
            "read",
            "1m",
            4,
            "libaio",
            true,
            false,
            Metric::Bandwidth,
        ),
        j(
            "seqwrite1m",
            "1M sequential write, iodepth 4",
            "1M seq write",
            "write",
            "1m",
            4,
            "libaio",
            true,
            false,
            Metric::Bandwidth,
        ),
    ]
}

/// Arguments that write the test file once (unmeasured) before the jobs.
pub fn layout_args(file: &Path, size: u64) -> Vec<String> {
    vec![
        "--name=layout".into(),
        format!("--filename={}", file.display()),
        format!("--size={size}"),
        "--rw=write".into(),
        "--bs=1m".into(),
        "--ioengine=libaio".into(),
        "--iodepth=4".into(),
        "--direct=1".into(),
        "--end_fsync=1".into(),
        "--output-format=json".into(),
    ]
}

/// Arguments of one measured job.
pub fn job_args(job: &Job, file: &Path, size: u64, runtime: u32, ramp: u32) -> Vec<String> {
    let mut a = vec![
        format!("--name={}", job.id),
        format!("--filename={}", file.display()),
        format!("--size={size}"),
        format!("--rw={}", job.rw),
        format!("--bs={}", job.bs),
        format!("--ioengine={}", job.engine),
        format!("--iodepth={}", job.iodepth),
        format!("--direct={}", u8::from(job.direct)),
        "--invalidate=1".into(),
        "--time_based".into(),
        format!("--runtime={runtime}"),
        format!("--ramp_time={ramp}"),
        "--randrepeat=0".into(),
        "--output-format=json".into(),
    ];
    if job.fdatasync {
        a.push("--fdatasync=1".into());
    }
    if job.rw.contains("write") {
        // A sequential write job over a laid-out file overwrites in place.
        a.push("--overwrite=1".into());
    }
    a
}

/// The figures of one job run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FioResult {
    pub iops: f64,
    pub bw_mib_s: f64,
    /// Completion latency of the job's I/O, microseconds.
    pub lat_mean_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    /// fdatasync latency (jobs with fdatasync only), microseconds.
    pub sync_p50_us: Option<f64>,
    pub sync_p99_us: Option<f64>,
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_f64()
}

/// Parse fio's `--output-format=json` output (leading warning lines allowed).
pub fn parse(out: &str, job: &Job) -> Result<FioResult> {
    let start = out
        .find('{')
        .ok_or_else(|| anyhow!("fio printed no JSON"))?;
    let v: Value = serde_json::from_str(&out[start..]).context("fio JSON")?;
    let j = v
        .get("jobs")
        .and_then(|j| j.get(0))
        .ok_or_else(|| anyhow!("fio JSON has no job"))?;
    if let Some(e) = j.get("error").and_then(Value::as_i64) {
        if e != 0 {
            bail!("fio job {} failed with error {e}", job.id);
        }
    }
    let dir = if job.is_read() { "read" } else { "write" };
    let d = j
        .get(dir)
        .ok_or_else(|| anyhow!("fio JSON has no {dir} section"))?;
    let iops = f(d, &["iops"]).unwrap_or(0.0);
    let bw_kib = f(d, &["bw"]).unwrap_or(0.0);
    if iops <= 0.0 || bw_kib <= 0.0 {
        bail!("fio job {} did no I/O", job.id);
    }
    let us = |x: Option<f64>| x.map(|n| n / 1000.0).unwrap_or(0.0);
    let (sync_p50_us, sync_p99_us) = if job.fdatasync {
        (
            Some(us(f(j, &["sync", "lat_ns", "percentile", "50.000000"]))),
            Some(us(f(j, &["sync", "lat_ns", "percentile", "99.000000"]))),
        )
    } else {
        (None, None)
    };
    Ok(FioResult {
        iops,
        bw_mib_s: bw_kib / 1024.0,
        lat_mean_us: us(f(d, &["clat_ns", "mean"])),
        lat_p50_us: us(f(d, &["clat_ns", "percentile", "50.000000"])),
        lat_p99_us: us(f(d, &["clat_ns", "percentile", "99.000000"])),
        sync_p50_us,
        sync_p99_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &str, iops: f64, with_sync: bool) -> String {
        let sync = if with_sync {
            r#","sync":{"total_ios":0,"lat_ns":{"min":1,"max":2,"mean":3,"N":9,"percentile":{"50.000000":197632,"99.000000":313344}}}"#
        } else {
            ""
        };
        let other = if dir == "read" { "write" } else { "read" };
        format!(
            r#"fio: some warning
{{"fio version":"fio-3.33","jobs":[{{"jobname":"x","error":0,
"{dir}":{{"iops":{iops},"bw":19866,"clat_ns":{{"mean":150000.0,"percentile":{{"50.000000":140000,"99.000000":900000}}}}}},
"{other}":{{"iops":0,"bw":0}}{sync}}}]}}"#
        )
    }

    #[test]
    fn parses_iops_bandwidth_and_latency() {
        let jobs = jobs();
        let r = parse(&sample("read", 4966.5, false), &jobs[0]).unwrap();
        assert_eq!(r.iops, 4966.5);
        assert!((r.bw_mib_s - 19866.0 / 1024.0).abs() < 1e-9);
        assert_eq!(
            (r.lat_mean_us, r.lat_p50_us, r.lat_p99_us),
            (150.0, 140.0, 900.0)
        );
        assert_eq!(r.sync_p50_us, None);
        let s = parse(&sample("write", 100.0, true), &jobs[2]).unwrap();
        assert_eq!(s.sync_p50_us, Some(197.632));
        assert_eq!(s.sync_p99_us, Some(313.344));
    }

    #[test]
    fn no_io_or_no_json_is_an_error() {
        let jobs = jobs();
        assert!(parse(&sample("read", 0.0, false), &jobs[0]).is_err());
        assert!(parse("fio: engine libaio not loadable", &jobs[0]).is_err());
        let failed = sample("read", 5.0, false).replace("\"error\":0", "\"error\":5");
        assert!(parse(&failed, &jobs[0])
            .unwrap_err()
            .to_string()
            .contains("error 5"));
    }

    #[test]
    fn job_arguments() {
        let jobs = jobs();
        assert_eq!(jobs.len(), 5);
        let a = job_args(&jobs[2], Path::new("/t/f"), 1 << 30, 30, 2);
        for want in [
            "--rw=write",
            "--bs=4k",
            "--fdatasync=1",
            "--direct=0",
            "--iodepth=1",
            "--runtime=30",
            "--filename=/t/f",
        ] {
            assert!(a.contains(&want.to_string()), "{want}: {a:?}");
        }
        let r = job_args(&jobs[0], Path::new("/t/f"), 1 << 30, 30, 2);
        assert!(r.contains(&"--iodepth=16".to_string()) && r.contains(&"--direct=1".to_string()));
        assert!(!r.contains(&"--fdatasync=1".to_string()));
    }
}
