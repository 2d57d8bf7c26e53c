//! report.md: the summary tables in the layout of published storage studies
//! (threads, QPS, TPS, latency min/avg/p95/max; fio IOPS, bandwidth, fdatasync
//! latency), the set-up (machine, versions, settings, targets) and the plots.
//!
//! Invariants:
//! - Rendering is a pure function of the results (and the plot file names); it
//!   shows only summary figures (medians over passes) and never invents one: a
//!   figure that was not measured is shown as "-".
//! - The first table of a report is its main table ([`mysql_main_table`],
//!   [`fio_main_table`]), also printed by the CLI at the end of a run.

use crate::fio::Metric;
use crate::results::{FioPoint, FioResults, Header, MysqlPoint, MysqlResults};
use crate::spec::format_size;
use std::fmt::Write;

/// A rate: thousands separators from 100 up, one decimal below.
pub fn fmt_rate(v: f64) -> String {
    if v >= 100.0 {
        let s = format!("{:.0}", v);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else {
        format!("{v:.1}")
    }
}

/// A latency: two decimals below 100, one above.
pub fn fmt_lat(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn table(out: &mut String, head: &[String], right_from: usize, rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let seps: Vec<&str> = (0..head.len())
        .map(|i| if i >= right_from { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "|{}|", seps.join("|"));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

fn find<'a>(
    s: &'a [MysqlPoint],
    target: &str,
    variant: &str,
    threads: u32,
) -> Option<&'a MysqlPoint> {
    s.iter()
        .find(|p| p.target == target && p.variant == variant && p.threads == threads)
}

fn cell(p: Option<&MysqlPoint>, f: fn(&MysqlPoint) -> String) -> String {
    p.map(f).unwrap_or_else(|| "-".into())
}

/// The main table of a MySQL study: TPS per target (and variant) and threads.
pub fn mysql_main_table(r: &MysqlResults) -> String {
    let mut out = String::new();
    let s = &r.summary;
    let threads = &r.settings.threads;
    let variants: Vec<&str> = r.variants.iter().map(|v| v.name.as_str()).collect();
    let passes = if r.settings.passes > 1 {
        format!(", median of {} passes", r.settings.passes)
    } else {
        String::new()
    };
    if variants.len() > 1 && threads.len() == 1 {
        let t = threads[0];
        let _ = writeln!(
            out,
            "TPS (transactions/s) at {t} threads by {}{passes}:\n",
            r.settings.varies
        );
        let mut head = vec!["target".to_string()];
        head.extend(variants.iter().map(|v| v.to_string()));
        let rows: Vec<Vec<String>> = r
            .header
            .targets
            .iter()
            .map(|tg| {
                let mut row = vec![tg.name.clone()];
                row.extend(
                    variants
                        .iter()
                        .map(|v| cell(find(s, &tg.name, v, t), |p| fmt_rate(p.result.tps))),
                );
                row
            })
            .collect();
        table(&mut out, &head, 1, &rows);
    } else {
        let _ = writeln!(out, "TPS (transactions/s) by threads{passes}:\n");
        let multi = variants.len() > 1;
        let mut head = vec!["target".to_string()];
        if multi {
            head.push(r.settings.varies.clone());
        }
        head.extend(threads.iter().map(|t| format!("{t} thr")));
        let mut rows = Vec::new();
        for tg in &r.header.targets {
            for v in &variants {
                let mut row = vec![tg.name.clone()];
                if multi {
                    row.push(v.to_string());
                }
                row.extend(
                    threads
                        .iter()
                        .map(|&t| cell(find(s, &tg.name, v, t), |p| fmt_rate(p.result.tps))),
                );
                rows.push(row);
            }
        }
        table(&mut out, &head, if multi { 2 } else { 1 }, &rows);
    }
    out
}

fn header_section(out: &mut String, h: &Header) {
    let m = &h.machine;
    let _ = writeln!(out, "## Set-up\n");
    let _ = writeln!(
        out,
        "- Machine: {} ({}), {} CPUs ({}), {} RAM, {}; load average {:.2} at start, {:.2} at the end",
        m.hostname,
        m.os,
        m.cpus,
        m.cpu_model,
        format_size(m.memory_bytes),
        m.kernel,
        m.loadavg_start,
        h.loadavg_end
    );
    let versions: Vec<String> = m
        .versions
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let _ = writeln!(out, "- Versions: {}", versions.join("; "));
    let _ = writeln!(out, "- Started {}, finished {}", h.started, h.finished);
    let _ = writeln!(
        out,
        "- Page cache dropped before warm-ups and jobs: {}",
        if h.page_cache_dropped {
            "yes"
        } else {
            "no (not root)"
        }
    );
    let _ = writeln!(out, "- Command: `{}`\n", h.command.join(" "));
    let rows: Vec<Vec<String>> = h
        .targets
        .iter()
        .map(|t| {
            let backing = match &t.baseline {
                Some(b) => format!(
                    "{} on {} (sparse {} image on {}, loop direct-io {}), `{}`",
                    b.fs.as_str(),
                    b.device,
                    format_size(b.size_bytes),
                    b.image_fs,
                    if b.loop_direct_io { "on" } else { "off" },
                    b.mkfs
                ),
                None => match &t.dataset {
                    Some(d) => format!("Cachalot dataset {d}"),
                    None => "existing directory".into(),
                },
            };
            vec![
                t.name.clone(),
                format!("`{}`", t.path.display()),
                t.fs_type.clone(),
                backing,
            ]
        })
        .collect();
    table(
        out,
        &[
            "target".into(),
            "path".into(),
            "fs".into(),
            "backing".into(),
        ],
        9,
        &rows,
    );
}

fn status_line(out: &mut String, h: &Header) {
    if !h.complete {
        let _ = writeln!(
            out,
            "**Incomplete run**: {}. The tables hold what was measured before it stopped.\n",
            h.error.as_deref().unwrap_or("stopped early")
        );
    }
}

fn plots_section(out: &mut String, plots: &[(String, String)]) {
    if plots.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Plots\n");
    for (title, base) in plots {
        let _ = writeln!(out, "![{title}]({base}.svg) ([PNG]({base}.png))\n");
    }
}

/// report.md of a MySQL study. `plots`: (title, file name without extension).
pub fn mysql_report(r: &MysqlResults, plots: &[(String, String)]) -> String {
    let mut out = String::new();
    let st = &r.settings;
    let w = &st.workload;
    let _ = writeln!(out, "# MySQL benchmark: sysbench {} on MariaDB\n", w.test);
    if let Some(p) = &st.preset {
        let _ = writeln!(out, "Preset `{p}` (varies {}).\n", st.varies);
    }
    status_line(&mut out, &r.header);
    let _ = writeln!(out, "## Main table\n");
    out.push_str(&mysql_main_table(r));

    let _ = writeln!(out, "## Results per target\n");
    let _ = writeln!(
        out,
        "Latency in milliseconds per transaction; QPS = queries/s, TPS = transactions/s; \
         load = the machine's 1-minute load average after the point (it counts the \
         benchmark's own threads too: compare it between targets at the same thread count; \
         a much higher figure means other work on the machine skewed that point).\n"
    );
    for tg in &r.header.targets {
        for v in &r.variants {
            let title = if r.variants.len() > 1 {
                format!("{} — {} {}", tg.name, st.varies, v.name)
            } else {
                tg.name.clone()
            };
            let _ = writeln!(out, "### {title}\n");
            let rows: Vec<Vec<String>> = st
                .threads
                .iter()
                .filter_map(|&t| find(&r.summary, &tg.name, &v.name, t))
                .map(|p| {
                    let x = &p.result;
                    vec![
                        p.threads.to_string(),
                        fmt_rate(x.qps),
                        fmt_rate(x.tps),
                        fmt_lat(x.lat_min_ms),
                        fmt_lat(x.lat_avg_ms),
                        fmt_lat(x.lat_p95_ms),
                        fmt_lat(x.lat_max_ms),
                        format!("{:.1}", p.loadavg),
                    ]
                })
                .collect();
            if rows.is_empty() {
                let _ = writeln!(out, "(not measured)\n");
                continue;
            }
            let head: Vec<String> = [
                "threads", "QPS", "TPS", "lat min", "lat avg", "lat p95", "lat max", "load",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            table(&mut out, &head, 0, &rows);
        }
    }

    if !r.servers.is_empty() {
        let _ = writeln!(out, "## Servers as they reported themselves\n");
        let rows: Vec<Vec<String>> = r
            .servers
            .iter()
            .map(|s| {
                let eff: Vec<String> = s
                    .effective
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                vec![
                    s.target.clone(),
                    s.variant.clone(),
                    eff.join(", "),
                    format_size(s.data_bytes),
                    s.prepare_s
                        .map(|p| format!("{p:.1} s"))
                        .unwrap_or_else(|| "-".into()),
                    s.compressratio.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        let head: Vec<String> = [
            "target",
            "variant",
            "server variables",
            "datadir",
            "prepare",
            "compressratio",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        table(&mut out, &head, 9, &rows);
    }

    plots_section(&mut out, plots);
    header_section(&mut out, &r.header);
    let srv = &st.server;
    let _ = writeln!(out, "## Method\n");
    let _ = writeln!(
        out,
        "- A private MariaDB server per target (datadir on the target, client over a unix socket, \
         TCP on 127.0.0.1 only): innodb_buffer_pool_size={}, innodb_log_file_size={}, \
         innodb_flush_method={}, innodb_flush_log_at_trx_commit={}{}.",
        format_size(srv.innodb_buffer_pool_size),
        format_size(srv.innodb_log_file_size),
        srv.innodb_flush_method,
        srv.innodb_flush_log_at_trx_commit,
        srv.extra
            .iter()
            .map(|(k, v)| format!(", {k}={v}"))
            .collect::<String>()
    );
    let _ = writeln!(
        out,
        "- sysbench {}: {} tables x {} rows (about {} on disk), --rand-type={}; restart after \
         prepare (cold buffer pool), {} s warm-up per server start, then {} s per point.",
        w.test,
        w.tables,
        w.table_size,
        format_size(w.data_bytes()),
        w.rand_type,
        st.warmup_s,
        st.time_s
    );
    let _ = writeln!(
        out,
        "- Targets are interleaved: each thread count runs on every target before the next, \
         alternating the order; all servers stay up (idle) while another is measured."
    );
    let _ = writeln!(
        out,
        "- Figures are medians of {} pass(es). Runs on a shared or busy machine are noisy \
         (load average at start {:.2}): compare ratios measured in one run, not absolute figures \
         across runs.",
        st.passes, r.header.machine.loadavg_start
    );
    out
}

fn fio_cell(s: &[FioPoint], target: &str, job: &str, f: fn(&FioPoint) -> String) -> String {
    s.iter()
        .find(|p| p.target == target && p.job == job)
        .map(f)
        .unwrap_or_else(|| "-".into())
}

/// The main table of a fio study (the layout of docs/baselines.md).
pub fn fio_main_table(r: &FioResults) -> String {
    let mut out = String::new();
    let mut head = vec!["target".to_string()];
    for j in &r.settings.jobs {
        match j.metric {
            Metric::Iops => head.push(format!("{} IOPS", j.short)),
            Metric::SyncOps => {
                head.push(format!("{} ops/s", j.short));
                head.push("fdatasync p50 / p99 us".into());
            }
            Metric::Bandwidth => head.push(format!("{} MiB/s", j.short)),
        }
    }
    let rows: Vec<Vec<String>> = r
        .header
        .targets
        .iter()
        .map(|t| {
            let mut row = vec![t.name.clone()];
            for j in &r.settings.jobs {
                let s = &r.summary;
                match j.metric {
                    Metric::Iops => {
                        row.push(fio_cell(s, &t.name, j.id, |p| fmt_rate(p.result.iops)))
                    }
                    Metric::SyncOps => {
                        row.push(fio_cell(s, &t.name, j.id, |p| fmt_rate(p.result.iops)));
                        row.push(fio_cell(s, &t.name, j.id, |p| {
                            format!(
                                "{} / {}",
                                p.result
                                    .sync_p50_us
                                    .map(|v| format!("{v:.0}"))
                                    .unwrap_or("-".into()),
                                p.result
                                    .sync_p99_us
                                    .map(|v| format!("{v:.0}"))
                                    .unwrap_or("-".into())
                            )
                        }));
                    }
                    Metric::Bandwidth => {
                        row.push(fio_cell(s, &t.name, j.id, |p| fmt_rate(p.result.bw_mib_s)))
                    }
                }
            }
            row
        })
        .collect();
    table(&mut out, &head, 1, &rows);
    out
}

/// report.md of a fio study.
pub fn fio_report(r: &FioResults, plots: &[(String, String)]) -> String {
    let mut out = String::new();
    let st = &r.settings;
    let _ = writeln!(out, "# Storage benchmark: fio\n");
    status_line(&mut out, &r.header);
    let _ = writeln!(out, "## Main table\n");
    if st.passes > 1 {
        let _ = writeln!(out, "Median of {} passes.\n", st.passes);
    }
    out.push_str(&fio_main_table(r));
    let _ = writeln!(out, "## Completion latency per job (microseconds)\n");
    let mut head = vec!["job".to_string()];
    head.extend(
        r.header
            .targets
            .iter()
            .map(|t| format!("{} mean / p50 / p99", t.name)),
    );
    let rows: Vec<Vec<String>> = st
        .jobs
        .iter()
        .map(|j| {
            let mut row = vec![j.title.to_string()];
            for t in &r.header.targets {
                row.push(fio_cell(&r.summary, &t.name, j.id, |p| {
                    format!(
                        "{:.0} / {:.0} / {:.0}",
                        p.result.lat_mean_us, p.result.lat_p50_us, p.result.lat_p99_us
                    )
                }));
            }
            row
        })
        .collect();
    table(&mut out, &head, 1, &rows);
    plots_section(&mut out, plots);
    header_section(&mut out, &r.header);
    let _ = writeln!(out, "## Method\n");
    let _ = writeln!(
        out,
        "- One {} test file per target, written once before the jobs; each job runs {} s after a {} s ramp.",
        format_size(st.size_bytes),
        st.runtime_s,
        st.ramp_s
    );
    for j in &st.jobs {
        let _ = writeln!(
            out,
            "- {}: rw={} bs={} iodepth={} ioengine={} direct={}{}",
            j.title,
            j.rw,
            j.bs,
            j.iodepth,
            j.engine,
            u8::from(j.direct),
            if j.fdatasync { " fdatasync=1" } else { "" }
        );
    }
    let _ = writeln!(
        out,
        "- Jobs are interleaved across targets (alternating order). Figures are medians of {} pass(es); \
         load average at start {:.2}: compare ratios from one run.",
        st.passes, r.header.machine.loadavg_start
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(fmt_rate(1243.4), "1,243");
        assert_eq!(fmt_rate(1234567.0), "1,234,567");
        assert_eq!(fmt_rate(999.6), "1,000");
        assert_eq!(fmt_rate(100.0), "100");
        assert_eq!(fmt_rate(12.34), "12.3");
        assert_eq!(fmt_lat(3.456), "3.46");
        assert_eq!(fmt_lat(127.84), "127.8");
    }

    #[test]
    fn tables_are_markdown() {
        let mut s = String::new();
        table(
            &mut s,
            &["a".into(), "b".into()],
            1,
            &[vec!["x".into(), "1".into()]],
        );
        assert_eq!(s, "| a | b |\n|---|---:|\n| x | 1 |\n\n");
    }
}

#[cfg(test)]
mod study_tests {
    use super::*;
    use crate::presets::Preset;
    use crate::testdata;

    #[test]
    fn thread_sweep_report_has_the_published_layout() {
        let r = testdata::mysql(None, &["ext4", "xfs"], &[1, 4, 16]);
        let md = mysql_report(&r, &[("TPS by threads".into(), "tps_by_threads".into())]);
        let main = mysql_main_table(&r);
        assert!(
            md.contains(&main),
            "the main table comes first in the report"
        );
        assert!(
            main.contains("| target | 1 thr | 4 thr | 16 thr |"),
            "{main}"
        );
        assert!(main.contains("| ext4 | 101 | 104 | 116 |"), "{main}");
        assert!(main.contains("| xfs | 201 | 204 | 216 |"), "{main}");
        assert!(
            md.contains("| threads | QPS | TPS | lat min | lat avg | lat p95 | lat max | load |")
        );
        assert!(
            md.contains("| 16 | 2,320 | 116 | 0.50 | 8.62 | 17.24 | 50.00 | 0.6 |"),
            "{md}"
        );
        assert!(md.contains("![TPS by threads](tps_by_threads.svg) ([PNG](tps_by_threads.png))"));
        assert!(!md.contains("Incomplete"));
    }

    #[test]
    fn preset_report_compares_variants() {
        let r = testdata::mysql(Some(Preset::FlushMethod), &["ext4", "xfs"], &[16]);
        let main = mysql_main_table(&r);
        assert!(
            main.contains("TPS (transactions/s) at 16 threads by innodb_flush_method"),
            "{main}"
        );
        assert!(
            main.contains("| target | fsync | O_DSYNC | O_DIRECT |"),
            "{main}"
        );
        assert!(main.contains("| ext4 | 116 | 126 | 136 |"), "{main}");
        let md = mysql_report(&r, &[]);
        assert!(md.contains("### xfs — innodb_flush_method O_DSYNC"));
    }

    #[test]
    fn incomplete_runs_say_so_and_show_gaps() {
        let mut r = testdata::mysql(None, &["a", "b"], &[1, 4]);
        r.summary.retain(|p| !(p.target == "b" && p.threads == 4));
        r.header.complete = false;
        r.header.error = Some("interrupted by SIGINT".into());
        let md = mysql_report(&r, &[]);
        assert!(md.contains("**Incomplete run**: interrupted by SIGINT"));
        assert!(md.contains("| b | 201 | - |"), "{md}");
    }

    #[test]
    fn fio_report_has_the_baselines_layout() {
        let r = testdata::fio(&["ext4", "xfs"]);
        let main = fio_main_table(&r);
        assert!(
            main.starts_with("| target | 16K randread qd16 IOPS | 16K randwrite qd16 IOPS | 4K write+fdatasync ops/s | fdatasync p50 / p99 us | 1M seq read MiB/s | 1M seq write MiB/s |"),
            "{main}"
        );
        assert!(
            main.contains("| xfs | 2,000 | 2,001 | 2,002 | 51 / 110 | 103 | 104 |"),
            "{main}"
        );
        let md = fio_report(&r, &[]);
        assert!(md.contains(&main));
        assert!(md.contains("rw=write bs=4k iodepth=1 ioengine=sync direct=0 fdatasync=1"));
    }
}
