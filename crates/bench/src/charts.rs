//! Which plots a study gets, built from its summary: thread-scaling lines per
//! target (and variant), bars per preset variant, bars per fio job.
//!
//! Invariants:
//! - Pure functions of the results; every study yields at least one chart.
//! - File names are `[a-z0-9_-]` so they are safe in any directory and in
//!   Markdown links.

use crate::fio::Metric;
use crate::plot::{BarSeries, Chart, Series};
use crate::results::{FioResults, MysqlPoint, MysqlResults};
use crate::sysbench::SysbenchResult;

/// (file key, y label, title, figure) of a thread-scaling chart.
type ThreadMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&SysbenchResult) -> f64,
);

/// A chart with its title and file name (without extension).
pub struct Named {
    pub title: String,
    pub base: String,
    pub chart: Chart,
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

fn find<'a>(
    s: &'a [MysqlPoint],
    target: &str,
    variant: &str,
    threads: u32,
) -> Option<&'a SysbenchResult> {
    s.iter()
        .find(|p| p.target == target && p.variant == variant && p.threads == threads)
        .map(|p| &p.result)
}

/// Charts of a MySQL study.
pub fn mysql(r: &MysqlResults) -> Vec<Named> {
    let mut out = Vec::new();
    let threads = &r.settings.threads;
    let variants: Vec<&str> = r.variants.iter().map(|v| v.name.as_str()).collect();
    let targets: Vec<&str> = r.header.targets.iter().map(|t| t.name.as_str()).collect();
    let multi = variants.len() > 1;
    if threads.len() >= 2 {
        let metrics: [ThreadMetric; 3] = [
            ("tps", "TPS (transactions/s)", "TPS by threads", |x| x.tps),
            ("qps", "QPS (queries/s)", "QPS by threads", |x| x.qps),
            ("p95", "p95 latency (ms)", "p95 latency by threads", |x| {
                x.lat_p95_ms
            }),
        ];
        for (key, y_label, title, f) in metrics {
            let mut series = Vec::new();
            for t in &targets {
                for v in &variants {
                    let points: Vec<(f64, f64)> = threads
                        .iter()
                        .filter_map(|&th| find(&r.summary, t, v, th).map(|x| (th as f64, f(x))))
                        .collect();
                    if points.is_empty() {
                        continue;
                    }
                    let name = if multi {
                        format!("{t} {v}")
                    } else {
                        t.to_string()
                    };
                    series.push(Series { name, points });
                }
            }
            out.push(Named {
                title: format!("{title}: sysbench {}", r.settings.workload.test),
                base: format!("{key}_by_threads"),
                chart: Chart::Lines {
                    title: format!("{title} ({})", r.settings.workload.test),
                    x_label: "threads (log scale)".into(),
                    y_label: y_label.into(),
                    x_ticks: threads.iter().map(|&t| t as f64).collect(),
                    series,
                },
            });
        }
    }
    if multi || threads.len() == 1 {
        for &th in threads {
            let (categories, series): (Vec<String>, Vec<BarSeries>) = if multi {
                (
                    variants.iter().map(|v| v.to_string()).collect(),
                    targets
                        .iter()
                        .map(|t| BarSeries {
                            name: t.to_string(),
                            values: variants
                                .iter()
                                .map(|v| find(&r.summary, t, v, th).map(|x| x.tps))
                                .collect(),
                        })
                        .collect(),
                )
            } else {
                (
                    vec![format!("{th} threads")],
                    targets
                        .iter()
                        .map(|t| BarSeries {
                            name: t.to_string(),
                            values: vec![find(&r.summary, t, variants[0], th).map(|x| x.tps)],
                        })
                        .collect(),
                )
            };
            let by = if multi {
                format!(" by {}", r.settings.varies)
            } else {
                String::new()
            };
            out.push(Named {
                title: format!("TPS at {th} threads{by}"),
                base: if multi {
                    format!("tps_by_{}_{th}thr", slug(&r.settings.varies))
                } else {
                    format!("tps_{th}thr")
                },
                chart: Chart::Bars {
                    title: format!("TPS at {th} threads{by} ({})", r.settings.workload.test),
                    y_label: "TPS (transactions/s)".into(),
                    categories,
                    series,
                },
            });
        }
    }
    out
}

/// Charts of a fio study.
pub fn fio(r: &FioResults) -> Vec<Named> {
    let targets: Vec<&str> = r.header.targets.iter().map(|t| t.name.as_str()).collect();
    let value = |t: &str, job: &str, f: fn(&crate::fio::FioResult) -> Option<f64>| {
        r.summary
            .iter()
            .find(|p| p.target == t && p.job == job)
            .and_then(|p| f(&p.result))
    };
    let jobs = &r.settings.jobs;
    let ops: Vec<_> = jobs
        .iter()
        .filter(|j| j.metric != Metric::Bandwidth)
        .collect();
    let bw: Vec<_> = jobs
        .iter()
        .filter(|j| j.metric == Metric::Bandwidth)
        .collect();
    let sync: Vec<_> = jobs
        .iter()
        .filter(|j| j.metric == Metric::SyncOps)
        .collect();
    let mut out = Vec::new();
    let bars =
        |title: &str, base: &str, y: &str, cats: Vec<String>, series: Vec<BarSeries>| Named {
            title: title.into(),
            base: base.into(),
            chart: Chart::Bars {
                title: title.into(),
                y_label: y.into(),
                categories: cats,
                series,
            },
        };
    if !ops.is_empty() {
        out.push(bars(
            "fio: operations per second",
            "fio_iops",
            "operations/s",
            ops.iter().map(|j| j.short.to_string()).collect(),
            targets
                .iter()
                .map(|t| BarSeries {
                    name: t.to_string(),
                    values: ops
                        .iter()
                        .map(|j| value(t, j.id, |x| Some(x.iops)))
                        .collect(),
                })
                .collect(),
        ));
    }
    if !bw.is_empty() {
        out.push(bars(
            "fio: sequential bandwidth",
            "fio_bandwidth",
            "MiB/s",
            bw.iter().map(|j| j.short.to_string()).collect(),
            targets
                .iter()
                .map(|t| BarSeries {
                    name: t.to_string(),
                    values: bw
                        .iter()
                        .map(|j| value(t, j.id, |x| Some(x.bw_mib_s)))
                        .collect(),
                })
                .collect(),
        ));
    }
    if let Some(j) = sync.first() {
        out.push(bars(
            "fio: fdatasync latency",
            "fio_fdatasync_latency",
            "microseconds",
            vec!["p50".into(), "p99".into()],
            targets
                .iter()
                .map(|t| BarSeries {
                    name: t.to_string(),
                    values: vec![
                        value(t, j.id, |x| x.sync_p50_us),
                        value(t, j.id, |x| x.sync_p99_us),
                    ],
                })
                .collect(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_file_safe() {
        assert_eq!(slug("innodb_flush_method"), "innodb-flush-method");
        assert_eq!(slug("A b/c"), "a-b-c");
    }
}

#[cfg(test)]
mod study_tests {
    use super::*;
    use crate::presets::Preset;
    use crate::testdata;

    fn bases(v: &[Named]) -> Vec<String> {
        v.iter().map(|n| n.base.clone()).collect()
    }

    #[test]
    fn thread_sweeps_get_lines_per_target() {
        let c = mysql(&testdata::mysql(None, &["a", "b"], &[1, 4, 16]));
        assert_eq!(
            bases(&c),
            ["tps_by_threads", "qps_by_threads", "p95_by_threads"]
        );
        let Chart::Lines {
            series, x_ticks, ..
        } = &c[0].chart
        else {
            panic!()
        };
        assert_eq!(x_ticks, &[1.0, 4.0, 16.0]);
        assert_eq!(series.len(), 2);
        assert_eq!(series[1].name, "b");
        assert_eq!(
            series[1].points,
            vec![(1.0, 201.0), (4.0, 204.0), (16.0, 216.0)]
        );
    }

    #[test]
    fn presets_get_bars_per_variant() {
        let c = mysql(&testdata::mysql(
            Some(Preset::FlushMethod),
            &["a", "b"],
            &[16],
        ));
        assert_eq!(bases(&c), ["tps_by_innodb-flush-method_16thr"]);
        let Chart::Bars {
            categories, series, ..
        } = &c[0].chart
        else {
            panic!()
        };
        assert_eq!(categories, &["fsync", "O_DSYNC", "O_DIRECT"]);
        assert_eq!(
            series[0].values,
            vec![Some(116.0), Some(126.0), Some(136.0)]
        );
        // A sweep with variants gets both.
        let c = mysql(&testdata::mysql(Some(Preset::Compression), &["a"], &[1, 4]));
        assert_eq!(c.len(), 3 + 2);
        // A single point still gets a chart.
        assert_eq!(
            bases(&mysql(&testdata::mysql(None, &["a"], &[16]))),
            ["tps_16thr"]
        );
    }

    #[test]
    fn fio_gets_iops_bandwidth_and_sync_latency() {
        let c = fio(&testdata::fio(&["a", "b"]));
        assert_eq!(
            bases(&c),
            ["fio_iops", "fio_bandwidth", "fio_fdatasync_latency"]
        );
        let Chart::Bars {
            categories, series, ..
        } = &c[2].chart
        else {
            panic!()
        };
        assert_eq!(categories, &["p50", "p99"]);
        assert_eq!(series[1].values, vec![Some(51.0), Some(110.0)]);
    }
}
