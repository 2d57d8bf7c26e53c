//! Fixtures for unit tests: results of made-up studies (no processes run).
//!
//! Invariants: test-only; figures are deterministic functions of the inputs.

use crate::fio::{self, FioResult};
use crate::machine::Machine;
use crate::mariadb::ServerSettings;
use crate::presets::{self, Preset};
use crate::results::*;
use crate::sysbench::{SysbenchResult, Workload};
use std::collections::BTreeMap;

fn header(study: &'static str, targets: &[&str]) -> Header {
    Header {
        format: 1,
        tool: "cachalot bench",
        study,
        complete: true,
        error: None,
        started: "2026-11-22T00:00:00Z".into(),
        finished: "2026-11-22T00:10:00Z".into(),
        command: vec!["cachalot".into(), "bench".into(), study.into()],
        machine: Machine {
            hostname: "h".into(),
            os: "Debian".into(),
            kernel: "Linux 6".into(),
            cpu_model: "cpu".into(),
            cpus: 2,
            memory_bytes: 24 << 30,
            loadavg_start: 0.5,
            versions: BTreeMap::new(),
        },
        targets: targets
            .iter()
            .map(|t| TargetInfo {
                name: t.to_string(),
                path: format!("/mnt/{t}").into(),
                fs_type: "ext4".into(),
                baseline: None,
                dataset: None,
            })
            .collect(),
        page_cache_dropped: true,
        loadavg_end: 0.7,
    }
}

pub fn sb(tps: f64) -> SysbenchResult {
    SysbenchResult {
        tps,
        qps: tps * 20.0,
        lat_min_ms: 0.5,
        lat_avg_ms: 1000.0 / tps,
        lat_p95_ms: 2000.0 / tps,
        lat_max_ms: 50.0,
        transactions: (tps * 30.0) as u64,
        queries: (tps * 600.0) as u64,
        reads: 1,
        writes: 1,
        other: 1,
        ignored_errors: 0,
        reconnects: 0,
        total_time_s: 30.0,
    }
}

/// A MySQL study; TPS = 100 * (target index + 1) + threads + 10 * variant index.
pub fn mysql(preset: Option<Preset>, targets: &[&str], threads: &[u32]) -> MysqlResults {
    let variants = presets::plan(preset).variants;
    let mut runs = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        for (vi, v) in variants.iter().enumerate() {
            for &th in threads {
                runs.push(MysqlPoint {
                    target: t.to_string(),
                    variant: v.name.clone(),
                    threads: th,
                    pass: Some(0),
                    loadavg: 0.6,
                    result: sb(100.0 * (ti as f64 + 1.0) + th as f64 + 10.0 * vi as f64),
                });
            }
        }
    }
    MysqlResults {
        header: header("mysql", targets),
        settings: MysqlSettings {
            preset: preset.map(|p| p.as_str().into()),
            varies: preset.map(|p| p.varies()).unwrap_or("threads").into(),
            threads: threads.to_vec(),
            time_s: 30,
            warmup_s: 20,
            passes: 1,
            workload: Workload {
                test: "oltp_read_write".into(),
                tables: 8,
                table_size: 200_000,
                rand_type: "uniform".into(),
            },
            server: ServerSettings::default(),
            client: "unix socket".into(),
        },
        variants,
        servers: Vec::new(),
        summary: summarize_mysql(&runs),
        runs,
    }
}

/// A fio study; IOPS = 1000 * (target index + 1) + job index.
pub fn fio(targets: &[&str]) -> FioResults {
    let jobs = fio::jobs();
    let mut runs = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        for (ji, j) in jobs.iter().enumerate() {
            runs.push(FioPoint {
                target: t.to_string(),
                job: j.id.into(),
                pass: Some(0),
                loadavg: 0.6,
                result: FioResult {
                    iops: 1000.0 * (ti as f64 + 1.0) + ji as f64,
                    bw_mib_s: 100.0 + ji as f64,
                    lat_mean_us: 10.0,
                    lat_p50_us: 9.0,
                    lat_p99_us: 99.0,
                    sync_p50_us: j.fdatasync.then_some(51.0),
                    sync_p99_us: j.fdatasync.then_some(110.0),
                },
            });
        }
    }
    FioResults {
        header: header("fio", targets),
        settings: FioSettings {
            size_bytes: 2 << 30,
            runtime_s: 30,
            ramp_s: 2,
            passes: 1,
            jobs,
        },
        summary: summarize_fio(&runs),
        runs,
    }
}
