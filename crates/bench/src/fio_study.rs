//! `cachalot bench fio`: the fio jobs of [`crate::fio`] on every target, jobs
//! interleaved across targets; writes results.json, report.md and plots.
//!
//! Invariants:
//! - Bad input (programs, font, targets, space, output directory) is refused
//!   before any file, loop device or mount is created.
//! - Test files live in a fresh directory per target, removed at the end, also on
//!   error or Ctrl-C, before baselines are torn down; outputs are written with
//!   what was measured.

use crate::exec::{self, Mode};
use crate::fio::{self, FioResult, Job};
use crate::lab::{Lab, LabOptions, Outcome};
use crate::machine::{self, Machine};
use crate::outputs;
use crate::plot;
use crate::preflight;
use crate::progress::Progress;
use crate::report;
use crate::results::{self, FioPoint, FioResults, FioSettings, Header};
use crate::schedule::{self, FioStep};
use crate::signals;
use crate::spec::format_size;
use crate::tools;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Everything `bench fio` was asked to do.
#[derive(Debug, Clone)]
pub struct FioOptions {
    pub lab: LabOptions,
    pub size: u64,
    pub runtime: u32,
    pub ramp: u32,
    pub passes: u32,
    pub command: Vec<String>,
}

struct Study {
    lab: Lab,
    jobs: Vec<Job>,
    size: u64,
    runtime: u32,
    ramp: u32,
    passes: u32,
    dirs: Vec<Option<tempfile::TempDir>>,
    runs: Vec<FioPoint>,
    page_cache_dropped: bool,
}

impl Study {
    fn file(&self, t: usize) -> PathBuf {
        self.dirs[t]
            .as_ref()
            .expect("laid out")
            .path()
            .join("fio.dat")
    }

    fn label(&self, step: &FioStep) -> String {
        let t = |i: usize| self.lab.targets[i].name.clone();
        match *step {
            FioStep::Baseline { target } => {
                format!("{}: create loop-device file system", t(target))
            }
            FioStep::Layout { target } => format!(
                "{}: write the {} test file",
                t(target),
                format_size(self.size)
            ),
            FioStep::Job { job, target, pass } => {
                let p = if self.passes > 1 {
                    format!(", pass {}/{}", pass + 1, self.passes)
                } else {
                    String::new()
                };
                format!("{}: {}{p}", t(target), self.jobs[job].title)
            }
        }
    }

    fn estimate(&self, step: &FioStep) -> f64 {
        match *step {
            FioStep::Baseline { target } => {
                4.0 + self.lab.baseline_size(target).unwrap_or(0) as f64 / (4u64 << 30) as f64
            }
            FioStep::Layout { .. } => 2.0 + self.size as f64 / (200u64 << 20) as f64,
            FioStep::Job { .. } => (self.runtime + self.ramp) as f64 + 1.5,
        }
    }

    fn fio(&self, target: usize, args: Vec<String>, what: &str) -> Result<String> {
        let mut c = self.lab.tools.cmd("fio");
        c.args(&args);
        let name = &self.lab.targets[target].name;
        let ctx = format!("fio {what} on target '{name}'");
        let timeout = Duration::from_secs((self.runtime + self.ramp) as u64 + 1800);
        let out = exec::run(&mut c, &ctx, timeout, Mode::Interruptible)?;
        let log = self.lab.logs.join(format!("fio-{name}.log"));
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(
                f,
                "==== {} fio {}\n{}{}",
                machine::iso_utc(machine::now_secs()),
                args.join(" "),
                out.stdout,
                out.stderr
            );
        }
        if !out.status.success() {
            bail!(
                "{ctx} failed ({}): {}",
                exec::status_text(&out.status),
                out.summary()
            );
        }
        Ok(out.stdout)
    }

    fn run_step(&mut self, step: &FioStep) -> Result<()> {
        signals::check()?;
        match *step {
            FioStep::Baseline { target } => self.lab.create_baseline(target),
            FioStep::Layout { target } => {
                let tg = &self.lab.targets[target];
                let dir = tempfile::Builder::new()
                    .prefix("cachalot-bench-fio.")
                    .tempdir_in(&tg.path)
                    .with_context(|| {
                        format!(
                            "target '{}': cannot create a directory in {}",
                            tg.name,
                            tg.path.display()
                        )
                    })?;
                self.dirs[target] = Some(dir);
                let args = fio::layout_args(&self.file(target), self.size);
                self.fio(target, args, "layout").map(|_| ())
            }
            FioStep::Job { job, target, pass } => {
                self.page_cache_dropped = machine::drop_caches();
                let j = self.jobs[job].clone();
                let args =
                    fio::job_args(&j, &self.file(target), self.size, self.runtime, self.ramp);
                let out = self.fio(target, args, j.id)?;
                let name = self.lab.targets[target].name.clone();
                let result: FioResult = fio::parse(&out, &j)
                    .with_context(|| format!("fio {} on target '{name}'", j.id))?;
                self.runs.push(FioPoint {
                    target: name,
                    job: j.id.to_string(),
                    pass: Some(pass),
                    loadavg: machine::loadavg(),
                    result,
                });
                Ok(())
            }
        }
    }

    fn teardown(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for d in self.dirs.iter_mut() {
            if let Some(d) = d.take() {
                let p = d.path().to_path_buf();
                if let Err(e) = d.close() {
                    problems.push(format!("cannot remove {}: {e}", p.display()));
                }
            }
        }
        problems.extend(self.lab.teardown());
        problems
    }
}

/// Run the study.
pub fn run(o: FioOptions) -> Result<Outcome> {
    signals::install();
    let started = machine::iso_utc(machine::now_secs());
    if o.runtime == 0 || o.passes == 0 {
        bail!("--runtime and --passes must be positive");
    }
    if o.size < (16 << 20) {
        bail!("--size must be at least 16M");
    }
    let progs = preflight::programs(&["fio"], &o.lab.baselines);
    let tools = tools::require(&progs)?;
    plot::init_font()?;
    let need = o.size + o.size / 10 + (64 << 20);
    preflight::check_space(
        &o.lab,
        need,
        &format!("a {} test file", format_size(o.size)),
    )?;
    let lab = Lab::open(&o.lab, tools)?;
    let machine = Machine::read(&lab.tools, &["fio"]);
    let n = lab.targets.len();
    let mut study = Study {
        jobs: fio::jobs(),
        size: o.size,
        runtime: o.runtime,
        ramp: o.ramp,
        passes: o.passes,
        dirs: (0..n).map(|_| None).collect(),
        runs: Vec::new(),
        page_cache_dropped: false,
        lab,
    };
    let steps = schedule::fio(
        &study.lab.baseline_targets(),
        n,
        study.jobs.len(),
        study.passes,
    );
    let mut progress = Progress::new(steps.iter().map(|s| study.estimate(s)).collect());
    let outcome = (|| -> Result<()> {
        for (i, step) in steps.iter().enumerate() {
            progress.step(i, &study.label(step));
            study.run_step(step)?;
        }
        Ok(())
    })();
    progress.finish();
    let targets = study.lab.target_infos();
    for p in study.teardown() {
        eprintln!("cachalot: warning: {p}");
    }
    let results = FioResults {
        header: Header {
            format: 1,
            tool: "cachalot bench",
            study: "fio",
            complete: outcome.is_ok(),
            error: outcome.as_ref().err().map(|e| format!("{e:#}")),
            started,
            finished: machine::iso_utc(machine::now_secs()),
            command: o.command.clone(),
            machine,
            targets,
            page_cache_dropped: study.page_cache_dropped,
            loadavg_end: machine::loadavg(),
        },
        settings: FioSettings {
            size_bytes: study.size,
            runtime_s: study.runtime,
            ramp_s: study.ramp,
            passes: study.passes,
            jobs: study.jobs.clone(),
        },
        summary: results::summarize_fio(&study.runs),
        runs: study.runs.clone(),
    };
    let out = study.lab.out.clone();
    let written = outputs::write_fio(&out, &results);
    outputs::finish(outcome, written, out, || report::fio_main_table(&results))
}
