//! `cachalot bench mysql`: sysbench OLTP on a private MariaDB per target, thread
//! sweeps and preset variants, targets interleaved; writes results.json,
//! report.md and the plots into the output directory.
//!
//! Invariants:
//! - Every check that can fail on bad input (programs, font, targets, ports,
//!   sockets, space, datasets, output directory) runs before any server, loop
//!   device or mount exists.
//! - Whatever happens (error, Ctrl-C), servers are stopped, then baselines torn
//!   down, and the outputs are written with what was measured (marked incomplete).
//! - A server's settings are read back after each start and recorded; a flush
//!   method or buffer pool size the server did not apply is an error, not a
//!   silent mislabel.

use crate::dataset;
use crate::exec::{self, Mode};
use crate::lab::{Lab, LabOptions, Outcome};
use crate::machine::{self, Machine};
use crate::mariadb::{Server, ServerSettings};
use crate::outputs;
use crate::plot;
use crate::preflight;
use crate::presets::{self, Preset, Variant};
use crate::progress::Progress;
use crate::report;
use crate::results::{self, Header, MysqlPoint, MysqlResults, MysqlSettings, ServerRecord};
use crate::schedule::{self, MysqlStep};
use crate::signals;
use crate::sysbench::{self, Workload};
use crate::tools;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Everything `bench mysql` was asked to do.
#[derive(Debug, Clone)]
pub struct MysqlOptions {
    pub lab: LabOptions,
    pub preset: Option<Preset>,
    pub threads: Option<Vec<u32>>,
    pub time: u32,
    pub warmup: u32,
    pub tables: Option<u32>,
    pub table_size: Option<u64>,
    pub test: String,
    pub rand_type: String,
    pub server: ServerSettings,
    pub port: Option<u16>,
    pub socket_dir: Option<PathBuf>,
    pub passes: u32,
    pub command: Vec<String>,
}

/// The server settings of a variant.
pub fn variant_settings(base: &ServerSettings, v: &Variant, max_threads: u32) -> ServerSettings {
    let mut s = base.clone();
    if let Some(m) = &v.flush_method {
        s.innodb_flush_method = m.clone();
    }
    if let Some(b) = v.buffer_pool {
        s.innodb_buffer_pool_size = b;
    }
    s.max_connections = s.max_connections.max(max_threads + 20);
    s
}

/// Expected duration of a step, seconds (for the progress bar).
fn estimate(step: &MysqlStep, o: &Study) -> f64 {
    match *step {
        MysqlStep::Baseline { target } => {
            4.0 + o.lab.baseline_size(target).unwrap_or(0) as f64 / (4u64 << 30) as f64
        }
        MysqlStep::Prepare { .. } => {
            15.0 + (o.workload.tables as u64 * o.workload.table_size) as f64 / 100_000.0
        }
        MysqlStep::Restart { .. } => 10.0,
        MysqlStep::DropCaches => 1.0,
        MysqlStep::WarmUp { .. } => {
            if o.warmup > 0 {
                o.warmup as f64 + 1.0
            } else {
                0.0
            }
        }
        MysqlStep::Point { .. } => o.time as f64 + 1.0,
    }
}

/// State of a running study.
struct Study {
    lab: Lab,
    workload: Workload,
    variants: Vec<Variant>,
    threads: Vec<u32>,
    settings: ServerSettings,
    time: u32,
    warmup: u32,
    passes: u32,
    ports: Vec<u16>,
    sockets: Vec<PathBuf>,
    servers: Vec<Option<Server>>,
    runs: Vec<MysqlPoint>,
    records: Vec<ServerRecord>,
    page_cache_dropped: bool,
}

impl Study {
    fn label(&self, step: &MysqlStep) -> String {
        let t = |i: usize| self.lab.targets[i].name.clone();
        let v = |i: usize| {
            if self.variants.len() > 1 {
                format!(" [{}]", self.variants[i].name)
            } else {
                String::new()
            }
        };
        match *step {
            MysqlStep::Baseline { target } => {
                format!("{}: create loop-device file system", t(target))
            }
            MysqlStep::Prepare { variant, target } => format!(
                "{}{}: initialise MariaDB, prepare {} x {} rows",
                t(target),
                v(variant),
                self.workload.tables,
                self.workload.table_size
            ),
            MysqlStep::Restart { variant, target } => {
                format!("{}{}: restart MariaDB", t(target), v(variant))
            }
            MysqlStep::DropCaches => "drop the page cache".into(),
            MysqlStep::WarmUp { variant, target } => {
                format!("{}{}: warm-up {} s", t(target), v(variant), self.warmup)
            }
            MysqlStep::Point {
                variant,
                target,
                threads,
                pass,
            } => {
                let p = if self.passes > 1 {
                    format!(", pass {}/{}", pass + 1, self.passes)
                } else {
                    String::new()
                };
                format!(
                    "{}{}: {} threads, {} s{p}",
                    t(target),
                    v(variant),
                    threads,
                    self.time
                )
            }
        }
    }

    fn server(&mut self, t: usize) -> Result<&mut Server> {
        if self.servers[t].is_none() {
            let tg = &self.lab.targets[t];
            let s = Server::new(
                &tg.name,
                &tg.path,
                self.lab.run_dir(),
                &self.lab.logs,
                self.sockets[t].clone(),
                self.ports[t],
                &self.lab.tools,
            )?;
            self.servers[t] = Some(s);
        }
        Ok(self.servers[t].as_mut().expect("just created"))
    }

    fn log(&self, target: usize, what: &str, text: &str) {
        let p = self
            .lab
            .logs
            .join(format!("sysbench-{}.log", self.lab.targets[target].name));
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
        {
            let _ = writeln!(
                f,
                "==== {} {what}\n{text}",
                machine::iso_utc(machine::now_secs())
            );
        }
    }

    fn sysbench(
        &self,
        target: usize,
        args: Vec<String>,
        timeout: Duration,
        what: &str,
    ) -> Result<String> {
        let mut c = self.lab.tools.cmd("sysbench");
        c.args(&args);
        let ctx = format!(
            "sysbench {what} on target '{}'",
            self.lab.targets[target].name
        );
        let out = exec::run(&mut c, &ctx, timeout, Mode::Interruptible)?;
        let text = format!("sysbench {}\n{}{}", args.join(" "), out.stdout, out.stderr);
        self.log(target, what, &text);
        if !out.status.success() {
            bail!(
                "{ctx} failed ({}): {}",
                exec::status_text(&out.status),
                out.summary()
            );
        }
        Ok(out.stdout)
    }

    fn record_server(
        &mut self,
        variant: usize,
        target: usize,
        prepare_s: Option<f64>,
    ) -> Result<()> {
        let want = variant_settings(&self.settings, &self.variants[variant], self.max_threads());
        let server = self.servers[target].as_ref().expect("server running");
        let effective = server.variables(&[
            "version",
            "innodb_flush_method",
            "innodb_buffer_pool_size",
            "innodb_log_file_size",
            "innodb_flush_log_at_trx_commit",
        ])?;
        let applied = effective
            .get("innodb_flush_method")
            .map(|m| m.eq_ignore_ascii_case(&want.innodb_flush_method));
        if applied == Some(false) {
            bail!(
                "target '{}': MariaDB runs with innodb_flush_method={} instead of {}",
                self.lab.targets[target].name,
                effective["innodb_flush_method"],
                want.innodb_flush_method
            );
        }
        let bp: Option<f64> = effective
            .get("innodb_buffer_pool_size")
            .and_then(|b| b.parse().ok());
        let want_bp = want.innodb_buffer_pool_size as f64;
        if let Some(bp) = bp.filter(|&b| b < want_bp * 0.9 || b > want_bp * 1.5) {
            bail!(
                "target '{}': MariaDB runs with innodb_buffer_pool_size={bp} instead of {}",
                self.lab.targets[target].name,
                want.innodb_buffer_pool_size
            );
        }
        let data_bytes = server.data_bytes();
        let compressratio = match &self.lab.targets[target].dataset {
            Some(ds) => Some(dataset::compressratio(ds)?),
            None => None,
        };
        self.records.push(ServerRecord {
            target: self.lab.targets[target].name.clone(),
            variant: self.variants[variant].name.clone(),
            effective,
            data_bytes,
            prepare_s,
            compressratio,
        });
        Ok(())
    }

    fn max_threads(&self) -> u32 {
        self.threads.iter().copied().max().unwrap_or(1)
    }

    fn run_step(&mut self, step: &MysqlStep) -> Result<()> {
        signals::check()?;
        match *step {
            MysqlStep::Baseline { target } => self.lab.create_baseline(target),
            MysqlStep::Prepare { variant, target } => {
                let settings =
                    variant_settings(&self.settings, &self.variants[variant], self.max_threads());
                let v = self.variants[variant].clone();
                let ds = self.lab.targets[target].dataset.clone();
                let server = self.server(target)?;
                server.kill(); // a previous variant's data is discarded
                if let (Some(c), Some(ds)) = (&v.compression, &ds) {
                    dataset::set_compression(ds, c)?;
                }
                let server = self.server(target)?;
                server.initialize(&settings)?;
                server.start(&settings)?;
                server.sql(&format!(
                    "CREATE DATABASE IF NOT EXISTS {db}; \
                     CREATE USER IF NOT EXISTS '{u}'@'localhost' IDENTIFIED BY '{p}'; \
                     GRANT ALL ON {db}.* TO '{u}'@'localhost';",
                    db = sysbench::DB,
                    u = sysbench::USER,
                    p = sysbench::PASSWORD
                ))?;
                let socket = server.paths.socket.clone();
                let t0 = Instant::now();
                let cpus = std::thread::available_parallelism()
                    .map(|n| n.get() as u32)
                    .unwrap_or(2);
                self.sysbench(
                    target,
                    self.workload.prepare_args(&socket, cpus),
                    Duration::from_secs(24 * 3600),
                    "prepare",
                )?;
                let prepare_s = t0.elapsed().as_secs_f64();
                // Restart so every variant starts with a cold buffer pool.
                let server = self.server(target)?;
                server.stop()?;
                server.start(&settings)?;
                self.record_server(variant, target, Some(prepare_s))
            }
            MysqlStep::Restart { variant, target } => {
                let settings =
                    variant_settings(&self.settings, &self.variants[variant], self.max_threads());
                let server = self.server(target)?;
                server.stop()?;
                server.start(&settings)?;
                self.record_server(variant, target, None)
            }
            MysqlStep::DropCaches => {
                self.page_cache_dropped = machine::drop_caches();
                Ok(())
            }
            MysqlStep::WarmUp { target, .. } => {
                if self.warmup == 0 {
                    return Ok(());
                }
                let socket = self.servers[target]
                    .as_ref()
                    .expect("server")
                    .paths
                    .socket
                    .clone();
                let threads = self.max_threads().min(16);
                let args = self.workload.run_args(&socket, threads, self.warmup);
                let out = self.sysbench(
                    target,
                    args,
                    Duration::from_secs(self.warmup as u64 + 600),
                    "warm-up",
                )?;
                sysbench::parse(&out).with_context(|| {
                    format!("warm-up on target '{}'", self.lab.targets[target].name)
                })?;
                Ok(())
            }
            MysqlStep::Point {
                variant,
                target,
                threads,
                pass,
            } => {
                let name = self.lab.targets[target].name.clone();
                let server = self.servers[target].as_mut().expect("server");
                if !server.is_running() {
                    bail!(
                        "mariadbd for target '{name}' is no longer running (see {})",
                        server.paths.error_log.display()
                    );
                }
                let socket = server.paths.socket.clone();
                let args = self.workload.run_args(&socket, threads, self.time);
                let out = self.sysbench(
                    target,
                    args,
                    Duration::from_secs(self.time as u64 + 600),
                    &format!("run {threads} threads"),
                )?;
                let result = sysbench::parse(&out)
                    .with_context(|| format!("target '{name}', {threads} threads"))?;
                self.runs.push(MysqlPoint {
                    target: name,
                    variant: self.variants[variant].name.clone(),
                    threads,
                    pass: Some(pass),
                    loadavg: machine::loadavg(),
                    result,
                });
                Ok(())
            }
        }
    }

    /// Stop servers, then tear down the lab; returns problems met.
    fn teardown(&mut self) -> Vec<String> {
        for s in self.servers.iter_mut() {
            if let Some(mut s) = s.take() {
                s.kill();
            }
        }
        self.lab.teardown()
    }
}

/// Run the study.
pub fn run(o: MysqlOptions) -> Result<Outcome> {
    signals::install();
    let started = machine::iso_utc(machine::now_secs());
    let mut pp = presets::plan(o.preset);
    if let Some(t) = &o.threads {
        pp.threads = t.clone();
    }
    if let Some(t) = o.tables {
        pp.tables = t;
    }
    if let Some(t) = o.table_size {
        pp.table_size = t;
    }
    if o.time == 0 || o.passes == 0 || pp.tables == 0 || pp.table_size == 0 {
        bail!("--time, --passes, --tables and --table-size must be positive");
    }
    if o.preset == Some(Preset::Compression) {
        let named: Vec<&str> = o.lab.datasets.iter().map(|(t, _)| t.as_str()).collect();
        let all: Vec<&str> = o
            .lab
            .targets
            .iter()
            .map(|t| t.name.as_str())
            .chain(o.lab.baselines.iter().map(|b| b.name.as_str()))
            .collect();
        if let Some(t) = all.iter().find(|t| !named.contains(t)) {
            bail!("--preset compression sets a Cachalot dataset's compression: give --dataset {t}=POOL/FS for target '{t}'");
        }
    }
    let workload = Workload {
        test: o.test.clone(),
        tables: pp.tables,
        table_size: pp.table_size,
        rand_type: o.rand_type.clone(),
    };

    // Checks that need no lab.
    let progs = preflight::programs(
        &["sysbench", "mariadbd", "mariadb-install-db", "mariadb"],
        &o.lab.baselines,
    );
    let tools = tools::require(&progs)?;
    plot::init_font()?;
    preflight::check_workload(&tools, &workload.test)?;
    let n_targets = o.lab.targets.len() + o.lab.baselines.len();
    let ports = preflight::pick_ports(n_targets, o.port)?;
    let need = workload.data_bytes() * 13 / 10 + o.server.innodb_log_file_size + (200 << 20);
    preflight::check_space(
        &o.lab,
        need,
        &format!("{} x {} rows", workload.tables, workload.table_size),
    )?;
    if let Some(d) = &o.socket_dir {
        if !d.is_dir() {
            bail!("--socket-dir {} is not a directory", d.display());
        }
    }
    let names: Vec<String> = o
        .lab
        .targets
        .iter()
        .map(|t| t.name.clone())
        .chain(o.lab.baselines.iter().map(|b| b.name.clone()))
        .collect();
    if let Some(d) = &o.socket_dir {
        preflight::socket_paths(&names, d)?;
    }
    for (t, ds) in &o.lab.datasets {
        dataset::check(ds).with_context(|| format!("--dataset {t}={ds}"))?;
    }

    let lab = Lab::open(&o.lab, tools)?;
    let sockets =
        preflight::socket_paths(&names, o.socket_dir.as_deref().unwrap_or(lab.run_dir()))?;
    let machine = Machine::read(&lab.tools, &["mariadbd", "sysbench"]);
    let mut study = Study {
        workload,
        variants: pp.variants,
        threads: pp.threads,
        settings: o.server.clone(),
        time: o.time,
        warmup: o.warmup,
        passes: o.passes,
        ports,
        sockets,
        servers: (0..n_targets).map(|_| None).collect(),
        runs: Vec::new(),
        records: Vec::new(),
        page_cache_dropped: false,
        lab,
    };
    let steps = schedule::mysql(
        &study.lab.baseline_targets(),
        n_targets,
        &study.variants,
        &study.threads,
        study.passes,
    );
    let mut progress = Progress::new(steps.iter().map(|s| estimate(s, &study)).collect());
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

    let mut settings_server = o.server.clone();
    settings_server.max_connections =
        variant_settings(&o.server, &Variant::base(), study.max_threads()).max_connections;
    let results = MysqlResults {
        header: Header {
            format: 1,
            tool: "cachalot bench",
            study: "mysql",
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
        settings: MysqlSettings {
            preset: o.preset.map(|p| p.as_str().to_string()),
            varies: o
                .preset
                .map(|p| p.varies())
                .unwrap_or("threads")
                .to_string(),
            threads: study.threads.clone(),
            time_s: study.time,
            warmup_s: study.warmup,
            passes: study.passes,
            workload: study.workload.clone(),
            server: settings_server,
            client: "unix socket".into(),
        },
        variants: study.variants.clone(),
        servers: study.records.clone(),
        summary: results::summarize_mysql(&study.runs),
        runs: study.runs.clone(),
    };
    let out = study.lab.out.clone();
    let written = outputs::write_mysql(&out, &results);
    outputs::finish(outcome, written, out, || report::mysql_main_table(&results))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_override_settings() {
        let base = ServerSettings::default();
        let v = &presets::plan(Some(Preset::FlushMethod)).variants[0];
        let s = variant_settings(&base, v, 64);
        assert_eq!(s.innodb_flush_method, "fsync");
        assert_eq!(s.innodb_buffer_pool_size, base.innodb_buffer_pool_size);
        assert!(s.max_connections >= 84);
        let b = &presets::plan(Some(Preset::BufferPool)).variants[0];
        assert_eq!(
            variant_settings(&base, b, 16).innodb_buffer_pool_size,
            100 << 20
        );
    }
}
