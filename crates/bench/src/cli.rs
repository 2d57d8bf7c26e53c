//! The `cachalot bench` command line (clap), turned into study options, and the
//! entry point the `cachalot` binary dispatches to.
//!
//! Invariants:
//! - The forms of CLI.md ("Benchmarks") parse: `bench mysql --target NAME=PATH...
//!   [--threads 1,4,8,16,32,64] [--time S] [--tables N --table-size N] [--out DIR]`
//!   and `bench fio --target NAME=PATH... [--out DIR]`; options are only added.
//! - On success the main table and the output paths go to stdout. Errors are
//!   returned (the binary prints them as one line); after Ctrl-C the process exits
//!   130 once everything is cleaned up.

use crate::fio_study::{self, FioOptions};
use crate::lab::{LabOptions, Outcome};
use crate::machine;
use crate::mariadb::ServerSettings;
use crate::mysql_study::{self, MysqlOptions};
use crate::presets::Preset;
use crate::signals;
use crate::spec::{self, BaselineSpec, TargetSpec};
use anyhow::Result;
use clap::{Args, Subcommand};
use std::path::PathBuf;

fn target_arg(s: &str) -> Result<TargetSpec, String> {
    spec::parse_target(s).map_err(|e| e.to_string())
}
fn baseline_arg(s: &str) -> Result<BaselineSpec, String> {
    spec::parse_baseline(s).map_err(|e| e.to_string())
}
fn size_arg(s: &str) -> Result<u64, String> {
    spec::parse_size(s).map_err(|e| e.to_string())
}
/// A thread list ("1,4,16"); a newtype so clap takes it as one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadList(pub Vec<u32>);

fn threads_arg(s: &str) -> Result<ThreadList, String> {
    spec::parse_threads(s)
        .map(ThreadList)
        .map_err(|e| e.to_string())
}
fn mysqld_arg(s: &str) -> Result<(String, String), String> {
    spec::parse_key_value("--mysqld", s).map_err(|e| e.to_string())
}
fn dataset_arg(s: &str) -> Result<(String, String), String> {
    let (t, d) = s
        .split_once('=')
        .filter(|(t, d)| !t.is_empty() && !d.is_empty())
        .ok_or_else(|| format!("--dataset '{s}': expected NAME=POOL/FS"))?;
    Ok((t.to_string(), d.to_string()))
}

/// `cachalot bench ...`
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub cmd: BenchCmd,
}

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// sysbench OLTP on a private MariaDB per target: thread sweeps and presets
    Mysql(Box<MysqlArgs>),
    /// fio: 16K random read/write, 4K write+fdatasync latency, 1M sequential I/O
    Fio(FioArgs),
    /// NFSv3/NFSv4.1 load generator: streaming and IOPS rows against NFS servers side by side
    Nfs(NfsArgs),
}

/// `cachalot bench nfs --target NAME=HOST:PORT[:MOUNTPORT]/EXPORT[@PID][?version=4.1]...`
#[derive(Args, Debug)]
pub struct NfsArgs {
    /// An NFS server and export, as NAME=HOST:PORT[:MOUNTPORT]/EXPORT[@PID][?version=4.1]
    /// (PID: the server process, for CPU per operation; version=4.1: NFSv4.1, EXPORT then a
    /// path in its pseudo file system); the first is the baseline
    #[arg(long = "target", required = true, num_args = 1.., value_parser = cachalot_nfs::load::parse_target)]
    pub targets: Vec<cachalot_nfs::load::Target>,
    /// Connections, each with one request in flight
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Seconds per timed row
    #[arg(long, default_value_t = 5)]
    pub time: u64,
    /// Bytes each connection writes and reads back in the streaming rows
    #[arg(long, default_value = "256M", value_parser = size_arg)]
    pub stream: u64,
    /// Bytes of each connection's file used by the random rows
    #[arg(long, default_value = "64M", value_parser = size_arg)]
    pub file: u64,
    /// Shell command that empties a server's caches before the streaming read
    /// from disk, run once per target with BENCH_TARGET=NAME (e.g. export and
    /// import the pool for cachalot, `echo 3 >/proc/sys/vm/drop_caches` for
    /// both); without it that row is left out
    #[arg(long)]
    pub drop_caches: Option<String>,
}

/// Targets and outputs, common to both studies.
#[derive(Args, Debug)]
pub struct CommonArgs {
    /// A directory to benchmark, as NAME=PATH (repeatable)
    #[arg(long = "target", value_name = "NAME=PATH", num_args = 1.., value_parser = target_arg)]
    pub targets: Vec<TargetSpec>,
    /// Create a loop-device file system as a target: [NAME=]ext4|xfs|btrfs[:SIZE]
    /// (default size 8G; needs root; removed afterwards)
    #[arg(long = "baseline", value_name = "FS[:SIZE]", num_args = 1.., value_parser = baseline_arg)]
    pub baselines: Vec<BaselineSpec>,
    /// Where baseline image files go (default /var/tmp; must not be tmpfs)
    #[arg(long, value_name = "DIR")]
    pub baseline_dir: Option<PathBuf>,
    /// Output directory for report.md, results.json and plots
    /// (default ./cachalot-bench-KIND-YYYYMMDD-HHMMSS)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Repeat everything N times; reported figures are medians
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub passes: u32,
}

impl CommonArgs {
    fn lab(&self, kind: &str, datasets: Vec<(String, String)>) -> LabOptions {
        LabOptions {
            targets: self.targets.clone(),
            baselines: self.baselines.clone(),
            baseline_dir: self.baseline_dir.clone(),
            out: self.out.clone().unwrap_or_else(|| {
                PathBuf::from(format!(
                    "cachalot-bench-{kind}-{}",
                    machine::compact_utc(machine::now_secs())
                ))
            }),
            datasets,
        }
    }
}

#[derive(Args, Debug)]
pub struct MysqlArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// A classic study: threads, flush-method, buffer-pool, compression
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Thread counts to sweep (default 1,4,8,16,32,64; presets may differ)
    #[arg(long, value_name = "LIST", value_parser = threads_arg)]
    pub threads: Option<ThreadList>,
    /// Seconds per measured point
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub time: u32,
    /// Unmeasured warm-up seconds after each server start
    #[arg(long, value_name = "S", default_value_t = 20)]
    pub warmup: u32,
    /// sysbench tables (default 8)
    #[arg(long, value_name = "N")]
    pub tables: Option<u32>,
    /// Rows per table (default 200000; buffer-pool preset 500000)
    #[arg(long, value_name = "N")]
    pub table_size: Option<u64>,
    /// sysbench test: oltp_read_write, oltp_read_only, oltp_write_only, ...
    #[arg(long, value_name = "TEST", default_value = "oltp_read_write")]
    pub workload: String,
    /// sysbench --rand-type (uniform keeps the working set larger than the buffer pool)
    #[arg(long, value_name = "TYPE", default_value = "uniform")]
    pub rand_type: String,
    /// innodb_buffer_pool_size
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = size_arg)]
    pub buffer_pool: u64,
    /// innodb_log_file_size
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = size_arg)]
    pub log_file_size: u64,
    /// innodb_flush_method
    #[arg(long, value_name = "METHOD", default_value = "O_DIRECT")]
    pub flush_method: String,
    /// innodb_flush_log_at_trx_commit
    #[arg(long, value_name = "0|1|2", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub trx_commit: u8,
    /// Extra server option KEY=VALUE for every server (repeatable)
    #[arg(long = "mysqld", value_name = "KEY=VALUE", value_parser = mysqld_arg)]
    pub mysqld: Vec<(String, String)>,
    /// TCP port of the first server (others follow); default: free ports
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Directory for the servers' sockets (default: a private temporary directory)
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    /// The Cachalot dataset behind a target, NAME=POOL/FS (the compression preset
    /// sets its compression; the report shows its compressratio)
    #[arg(long = "dataset", value_name = "NAME=POOL/FS", value_parser = dataset_arg)]
    pub datasets: Vec<(String, String)>,
}

#[derive(Args, Debug)]
pub struct FioArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Test file size per target
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = size_arg)]
    pub size: u64,
    /// Seconds per job
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub runtime: u32,
    /// Unmeasured seconds at the start of each job
    #[arg(long, value_name = "S", default_value_t = 2)]
    pub ramp: u32,
}

impl MysqlArgs {
    pub fn options(&self) -> MysqlOptions {
        MysqlOptions {
            lab: self.common.lab("mysql", self.datasets.clone()),
            preset: self.preset,
            threads: self.threads.clone().map(|t| t.0),
            time: self.time,
            warmup: self.warmup,
            tables: self.tables,
            table_size: self.table_size,
            test: self.workload.clone(),
            rand_type: self.rand_type.clone(),
            server: ServerSettings {
                innodb_buffer_pool_size: self.buffer_pool,
                innodb_log_file_size: self.log_file_size,
                innodb_flush_method: self.flush_method.clone(),
                innodb_flush_log_at_trx_commit: self.trx_commit,
                extra: self.mysqld.clone(),
                ..ServerSettings::default()
            },
            port: self.port,
            socket_dir: self.socket_dir.clone(),
            passes: self.common.passes,
            command: std::env::args().collect(),
        }
    }
}

impl FioArgs {
    pub fn options(&self) -> FioOptions {
        FioOptions {
            lab: self.common.lab("fio", Vec::new()),
            size: self.size,
            runtime: self.runtime,
            ramp: self.ramp,
            passes: self.common.passes,
            command: std::env::args().collect(),
        }
    }
}

/// Run `cachalot bench ...`.
pub fn run(a: BenchArgs) -> Result<()> {
    if let BenchCmd::Nfs(n) = &a.cmd {
        let opts = cachalot_nfs::load::LoadOptions {
            threads: n.threads.clamp(1, 256),
            seconds: n.time.clamp(1, 3600),
            stream_bytes: n.stream.max(1 << 20),
            file_bytes: n.file.max(1 << 20),
            drop_caches: n.drop_caches.clone(),
        };
        let table = cachalot_nfs::load::run(&n.targets, &opts).map_err(anyhow::Error::msg)?;
        print!("{table}");
        return Ok(());
    }
    let r: Result<Outcome> = match &a.cmd {
        BenchCmd::Mysql(m) => mysql_study::run(m.options()),
        BenchCmd::Fio(f) => fio_study::run(f.options()),
        BenchCmd::Nfs(_) => return Ok(()),
    };
    match r {
        Ok(o) => {
            println!("{}", o.main_table.trim_end());
            println!();
            for f in ["report.md", "results.json"] {
                println!("{}", o.out.join(f).display());
            }
            Ok(())
        }
        Err(e) if signals::received().is_some() => {
            let msg = format!("{e:#}").replace('\n', "; ");
            eprintln!("cachalot: {msg}");
            std::process::exit(130);
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser, Debug)]
    struct T {
        #[command(subcommand)]
        cmd: BenchCmd,
    }

    fn parse(args: &[&str]) -> Result<T, clap::Error> {
        T::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
    }

    #[test]
    fn clap_definition_is_valid() {
        T::command().debug_assert();
    }

    #[test]
    fn contract_forms_parse() {
        let t = parse(&[
            "mysql",
            "--target",
            "a=/x",
            "b=/y",
            "--threads",
            "1,4,8,16,32,64",
            "--time",
            "30",
            "--tables",
            "8",
            "--table-size",
            "200000",
            "--out",
            "/o",
        ])
        .unwrap();
        let BenchCmd::Mysql(m) = t.cmd else { panic!() };
        assert_eq!(m.common.targets.len(), 2);
        assert_eq!(m.threads.clone().unwrap().0, vec![1, 4, 8, 16, 32, 64]);
        let o = m.options();
        assert_eq!(o.lab.out, PathBuf::from("/o"));
        assert_eq!(o.server.innodb_buffer_pool_size, 256 << 20);
        parse(&["fio", "--target", "a=/x", "--target", "b=/y", "--out", "/o"]).unwrap();
        parse(&[
            "mysql",
            "--baseline",
            "ext4",
            "xfs:4G",
            "--preset",
            "flush-method",
        ])
        .unwrap();
        parse(&[
            "mysql",
            "--target",
            "c=/m",
            "--dataset",
            "c=tank/db",
            "--preset",
            "compression",
        ])
        .unwrap();
        parse(&[
            "mysql",
            "--target",
            "a=/x",
            "--mysqld",
            "innodb_io_capacity=1000",
            "--port",
            "13306",
        ])
        .unwrap();
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for bad in [
            &["mysql", "--target", "nopath"][..],
            &["mysql", "--baseline", "zfs"],
            &["mysql", "--target", "a=/x", "--threads", "0"],
            &["mysql", "--target", "a=/x", "--preset", "nope"],
            &["mysql", "--target", "a=/x", "--trx-commit", "3"],
            &["fio", "--target", "a=/x", "--size", "big"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn default_out_dir_is_timestamped() {
        let t = parse(&["fio", "--target", "a=/x"]).unwrap();
        let BenchCmd::Fio(f) = t.cmd else { panic!() };
        let out = f.options().lab.out;
        assert!(
            out.to_string_lossy().starts_with("cachalot-bench-fio-2"),
            "{out:?}"
        );
    }
}
