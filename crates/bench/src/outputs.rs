//! Writing a study's outputs into `--out`: results.json, the plots (SVG and PNG)
//! and report.md, and turning the run's and the writing's results into the
//! study's result.
//!
//! Invariants:
//! - results.json is written first (it holds every figure even if a plot fails),
//!   report.md last (it links only the plots that were written).
//! - A study that failed still writes its outputs; its error then names the
//!   directory holding the partial results.

use crate::charts::{self, Named};
use crate::lab::Outcome;
use crate::plot;
use crate::report;
use crate::results::{self, FioResults, MysqlResults};
use anyhow::{anyhow, Context, Result};
use std::path::{Path, PathBuf};

/// Render the charts; returns (title, base) of those written and the last error.
fn render_all(out: &Path, charts: Vec<Named>) -> (Vec<(String, String)>, Option<anyhow::Error>) {
    let mut plots = Vec::new();
    let mut err = None;
    for c in charts {
        match plot::render(out, &c.base, &c.chart) {
            Ok(()) => plots.push((c.title, c.base)),
            Err(e) => err = Some(e),
        }
    }
    (plots, err)
}

fn write_report(out: &Path, md: String, plot_err: Option<anyhow::Error>) -> Result<()> {
    let p = out.join("report.md");
    std::fs::write(&p, md).with_context(|| format!("cannot write {}", p.display()))?;
    match plot_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Outputs of a MySQL study.
pub fn write_mysql(out: &Path, r: &MysqlResults) -> Result<()> {
    results::write_json(&out.join("results.json"), r)?;
    let (plots, err) = render_all(out, charts::mysql(r));
    write_report(out, report::mysql_report(r, &plots), err)
}

/// Outputs of a fio study.
pub fn write_fio(out: &Path, r: &FioResults) -> Result<()> {
    results::write_json(&out.join("results.json"), r)?;
    let (plots, err) = render_all(out, charts::fio(r));
    write_report(out, report::fio_report(r, &plots), err)
}

/// The study's result from how the run and the writing went.
pub fn finish(
    run: Result<()>,
    written: Result<()>,
    out: PathBuf,
    main_table: impl FnOnce() -> String,
) -> Result<Outcome> {
    match (run, written) {
        (Ok(()), Ok(())) => Ok(Outcome {
            main_table: main_table(),
            out,
        }),
        (Ok(()), Err(e)) => Err(e),
        (Err(e), _) => Err(anyhow!("{e:#} (partial results in {})", out.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_points_at_its_partial_results() {
        let e = finish(Err(anyhow!("boom")), Ok(()), "/o".into(), String::new)
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "boom (partial results in /o)");
        let o = finish(Ok(()), Ok(()), "/o".into(), || "table".into()).unwrap();
        assert_eq!(o.main_table, "table");
        assert!(finish(Ok(()), Err(anyhow!("plot")), "/o".into(), String::new).is_err());
    }

    #[test]
    fn outputs_of_a_study_are_written() {
        if plot::find_font().is_err() {
            eprintln!("skipped: no font installed");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let r = crate::testdata::mysql(None, &["a", "b"], &[1, 4]);
        write_mysql(d.path(), &r).unwrap();
        let f = crate::testdata::fio(&["a"]);
        let d2 = tempfile::tempdir().unwrap();
        write_fio(d2.path(), &f).unwrap();
        for (dir, files) in [
            (
                d.path(),
                &[
                    "results.json",
                    "report.md",
                    "tps_by_threads.svg",
                    "tps_by_threads.png",
                    "p95_by_threads.png",
                ][..],
            ),
            (
                d2.path(),
                &[
                    "results.json",
                    "report.md",
                    "fio_iops.svg",
                    "fio_bandwidth.png",
                    "fio_fdatasync_latency.svg",
                ][..],
            ),
        ] {
            for f in files {
                assert!(dir.join(f).metadata().unwrap().len() > 0, "{f}");
            }
        }
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("results.json")).unwrap())
                .unwrap();
        assert_eq!(v["format"], 1);
        assert_eq!(v["summary"].as_array().unwrap().len(), 4);
        let md = std::fs::read_to_string(d.path().join("report.md")).unwrap();
        assert!(md.contains("(tps_by_threads.svg)"));
    }
}
