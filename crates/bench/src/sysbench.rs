//! sysbench OLTP: the command lines for `prepare` and `run`, and the parser of
//! sysbench 1.0's text report (QPS, TPS, latency min/avg/p95/max).
//!
//! Invariants:
//! - Command building and parsing are pure functions; running happens in the
//!   study through `exec`.
//! - A parsed result always has positive TPS and QPS and ordered latencies
//!   (min <= avg <= max); anything else is a parse error, never a zero figure.

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

/// Database name, user and password the benchmark uses on every server.
pub const DB: &str = "sbtest";
pub const USER: &str = "sbtest";
pub const PASSWORD: &str = "sbtest";

/// What sysbench runs and against which server.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Lua test name, e.g. "oltp_read_write".
    pub test: String,
    pub tables: u32,
    pub table_size: u64,
    /// "uniform" by default: the default skew would fit in the buffer pool.
    pub rand_type: String,
}

impl Workload {
    fn common(&self, socket: &std::path::Path) -> Vec<String> {
        vec![
            self.test.clone(),
            "--db-driver=mysql".into(),
            format!("--mysql-socket={}", socket.display()),
            format!("--mysql-user={USER}"),
            format!("--mysql-password={PASSWORD}"),
            format!("--mysql-db={DB}"),
            format!("--tables={}", self.tables),
            format!("--table-size={}", self.table_size),
            format!("--rand-type={}", self.rand_type),
        ]
    }

    /// Arguments of `sysbench ... prepare` (tables created in parallel).
    pub fn prepare_args(&self, socket: &std::path::Path, threads: u32) -> Vec<String> {
        let mut a = self.common(socket);
        a.push(format!("--threads={}", threads.clamp(1, self.tables)));
        a.push("prepare".into());
        a
    }

    /// Arguments of a measured `sysbench ... run`.
    pub fn run_args(&self, socket: &std::path::Path, threads: u32, secs: u32) -> Vec<String> {
        let mut a = self.common(socket);
        a.push(format!("--threads={threads}"));
        a.push(format!("--time={secs}"));
        a.push("--events=0".into());
        a.push("--percentile=95".into());
        a.push("--report-interval=0".into());
        a.push("run".into());
        a
    }

    /// Approximate bytes on disk of the prepared tables (about 250 B a row with
    /// its secondary index, as measured: 8 x 200,000 rows ~ 420 MB).
    pub fn data_bytes(&self) -> u64 {
        self.tables as u64 * self.table_size * 262
    }
}

/// One measured run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SysbenchResult {
    pub tps: f64,
    pub qps: f64,
    pub lat_min_ms: f64,
    pub lat_avg_ms: f64,
    pub lat_p95_ms: f64,
    pub lat_max_ms: f64,
    pub transactions: u64,
    pub queries: u64,
    pub reads: u64,
    pub writes: u64,
    pub other: u64,
    pub ignored_errors: u64,
    pub reconnects: u64,
    pub total_time_s: f64,
}

/// The number after `key:` on the first line starting with `key:` (trimmed).
fn value_after(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .map(|r| r.trim().to_string())
    })
}

fn num(text: &str, key: &str) -> Result<f64> {
    let v = value_after(text, key).ok_or_else(|| anyhow!("no '{key}' line"))?;
    let first = v.split_whitespace().next().unwrap_or("");
    first
        .trim_end_matches('s')
        .parse()
        .map_err(|_| anyhow!("'{key}' is not a number: {v}"))
}

/// The per-second rate in "N (R per sec.)".
fn rate(text: &str, key: &str) -> Result<f64> {
    let v = value_after(text, key).ok_or_else(|| anyhow!("no '{key}' line"))?;
    let inner = v
        .split_once('(')
        .and_then(|(_, r)| r.split_whitespace().next())
        .ok_or_else(|| anyhow!("no rate in '{key}: {v}'"))?;
    inner
        .parse()
        .map_err(|_| anyhow!("'{key}' rate is not a number: {v}"))
}

/// Parse sysbench 1.0's report of a `run`.
pub fn parse(out: &str) -> Result<SysbenchResult> {
    if let Some(l) = out.lines().find(|l| l.starts_with("FATAL")) {
        bail!("sysbench: {}", l.trim());
    }
    let r = SysbenchResult {
        tps: rate(out, "transactions")?,
        qps: rate(out, "queries")?,
        lat_min_ms: num(out, "min")?,
        lat_avg_ms: num(out, "avg")?,
        lat_p95_ms: num(out, "95th percentile")?,
        lat_max_ms: num(out, "max")?,
        transactions: num(out, "transactions")? as u64,
        queries: num(out, "queries")? as u64,
        reads: num(out, "read")? as u64,
        writes: num(out, "write")? as u64,
        other: num(out, "other")? as u64,
        ignored_errors: num(out, "ignored errors")? as u64,
        reconnects: num(out, "reconnects")? as u64,
        total_time_s: num(out, "total time")?,
    };
    if !(r.tps > 0.0 && r.qps > 0.0) {
        bail!("sysbench reported no transactions");
    }
    if !(r.lat_min_ms <= r.lat_avg_ms && r.lat_avg_ms <= r.lat_max_ms) {
        bail!("sysbench latencies out of order");
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 2
Initializing random number generator from current time


Initializing worker threads...

Threads started!

SQL statistics:
    queries performed:
        read:                            20230
        write:                           5780
        other:                           2890
        total:                           28900
    transactions:                        1445   (721.65 per sec.)
    queries:                             28900  (14433.06 per sec.)
    ignored errors:                      0      (0.00 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          2.0015s
    total number of events:              1445

Latency (ms):
         min:                                    0.83
         avg:                                    2.77
         max:                                    5.56
         95th percentile:                        3.75
         sum:                                 3996.73

Threads fairness:
    events (avg/stddev):           722.5000/1.50
    execution time (avg/stddev):   1.9984/0.00
";

    #[test]
    fn parses_a_report() {
        let r = parse(SAMPLE).unwrap();
        assert_eq!(r.tps, 721.65);
        assert_eq!(r.qps, 14433.06);
        assert_eq!(
            (r.lat_min_ms, r.lat_avg_ms, r.lat_p95_ms, r.lat_max_ms),
            (0.83, 2.77, 3.75, 5.56)
        );
        assert_eq!((r.transactions, r.queries), (1445, 28900));
        assert_eq!((r.reads, r.writes, r.other), (20230, 5780, 2890));
        assert_eq!((r.ignored_errors, r.reconnects), (0, 0));
        assert_eq!(r.total_time_s, 2.0015);
    }

    #[test]
    fn fatal_and_empty_reports_are_errors() {
        let e = parse("FATAL: unable to connect to MySQL server on socket '/x', aborting...\n")
            .unwrap_err();
        assert!(e.to_string().contains("unable to connect"), "{e}");
        assert!(parse("").is_err());
        let zero = SAMPLE.replace("(721.65 per sec.)", "(0.00 per sec.)");
        assert!(parse(&zero).is_err());
    }

    #[test]
    fn command_lines() {
        let w = Workload {
            test: "oltp_read_write".into(),
            tables: 8,
            table_size: 200_000,
            rand_type: "uniform".into(),
        };
        let s = std::path::Path::new("/run/x.sock");
        let p = w.prepare_args(s, 64);
        assert_eq!(p[0], "oltp_read_write");
        assert!(p.contains(&"--threads=8".to_string()));
        assert_eq!(p.last().unwrap(), "prepare");
        let r = w.run_args(s, 16, 30);
        for want in [
            "--mysql-socket=/run/x.sock",
            "--threads=16",
            "--time=30",
            "--rand-type=uniform",
            "--tables=8",
            "--table-size=200000",
        ] {
            assert!(r.contains(&want.to_string()), "{want}");
        }
        assert_eq!(r.last().unwrap(), "run");
        assert!((400_000_000..450_000_000).contains(&w.data_bytes()));
    }
}
