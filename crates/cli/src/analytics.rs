//! `cachalot analytics list|show|heatmap`: queries on the daemon's statistics.
//!
//! Invariants:
//! - Output follows the zfs conventions of the other listings: `-H` no header and
//!   tab-separated, `-p` exact numbers.
//! - Argument errors (a filter without `=`, --last with --from) are refused here or
//!   by the daemon with one line; the query never half-prints.

use crate::commands::{CmdResult, Ctx};
use crate::table::Table;
use cachalot_daemon::format_size;
use clap::{Args, Subcommand};
use serde_json::{json, Value};

#[derive(Subcommand, Debug)]
pub enum AnalyticsCmd {
    /// Statistics, their dimensions, whether enabled
    List {
        /// Scripted: no header, tab-separated
        #[arg(short = 'H')]
        scripted: bool,
    },
    /// Per-second rate for a period, one row per breakdown value, largest first
    Show(ShowArgs),
    /// Latency or size heat map
    Heatmap(HeatmapArgs),
}

#[derive(Args, Debug)]
pub struct RangeArgs {
    /// Period ending now: 60s, 5m, 1h, 7d (default 60s)
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["from", "to"])]
    pub last: Option<String>,
    /// Period start: unix seconds or YYYY-MM-DDTHH:MM:SS (UTC)
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Period end (default now)
    #[arg(long, value_name = "TIME", requires = "from")]
    pub to: Option<String>,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Statistic, e.g. fuse.ops
    pub stat: String,
    /// Breakdown dimension (or latency, size)
    #[arg(long, value_name = "DIM")]
    pub by: Option<String>,
    /// Only events with DIM=VAL (repeatable)
    #[arg(long = "filter", value_name = "DIM=VAL")]
    pub filters: Vec<String>,
    #[command(flatten)]
    pub range: RangeArgs,
    /// Only the N largest rows
    #[arg(long, value_name = "N")]
    pub top: Option<u64>,
    /// Scripted: no header, tab-separated
    #[arg(short = 'H')]
    pub scripted: bool,
    /// Exact numbers
    #[arg(short = 'p')]
    pub parsable: bool,
}

#[derive(Args, Debug)]
pub struct HeatmapArgs {
    /// Statistic, e.g. fuse.ops
    pub stat: String,
    /// latency or size
    #[arg(long, value_name = "latency|size")]
    pub by: String,
    /// Only events with DIM=VAL (repeatable)
    #[arg(long = "filter", value_name = "DIM=VAL")]
    pub filters: Vec<String>,
    #[command(flatten)]
    pub range: RangeArgs,
    /// The whole heat map as JSON
    #[arg(long)]
    pub json: bool,
}

fn query(stat: &str, by: Option<&str>, filters: &[String], r: &RangeArgs) -> Result<Value, String> {
    for f in filters {
        if !f.contains('=') {
            return Err(format!("filter '{f}' is not DIM=VALUE"));
        }
    }
    let mut a = json!({ "stat": stat, "filters": filters });
    if let Some(b) = by {
        a["by"] = json!(b);
    }
    for (k, v) in [("last", &r.last), ("from", &r.from), ("to", &r.to)] {
        if let Some(v) = v {
            a[k] = json!(v);
        }
    }
    Ok(a)
}

fn num(v: &Value, parsable: bool, bytes: bool) -> String {
    let x = v.as_f64().unwrap_or(0.0);
    if parsable {
        if x.fract() == 0.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.3}")
        }
    } else if bytes {
        format_size(x.round() as u64)
    } else if x >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

fn latency(ns: &Value, parsable: bool) -> String {
    let n = ns.as_u64().unwrap_or(0);
    if parsable {
        n.to_string()
    } else if n == 0 {
        "-".into()
    } else {
        cachalot_analytics::query::fmt_ns(n)
    }
}

pub fn run(ctx: &mut Ctx, cmd: AnalyticsCmd) -> CmdResult {
    match cmd {
        AnalyticsCmd::List { scripted } => {
            let v = ctx.call("analytics.list", json!({}))?;
            let mut t = Table::new(
                ["NAME", "DIMENSIONS", "UNIT", "ENABLED", "DESCRIPTION"]
                    .map(String::from)
                    .to_vec(),
                vec![false; 5],
            );
            for s in v.as_array().into_iter().flatten() {
                let dims: Vec<&str> = s["dims"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                t.rows.push(vec![
                    s["name"].as_str().unwrap_or("-").to_string(),
                    dims.join(","),
                    s["unit"].as_str().unwrap_or("-").to_string(),
                    if s["enabled"].as_bool() == Some(true) {
                        "yes"
                    } else {
                        "no"
                    }
                    .into(),
                    s["about"].as_str().unwrap_or("").to_string(),
                ]);
            }
            print!("{}", t.render(scripted));
            Ok(())
        }
        AnalyticsCmd::Show(a) => {
            let mut args = query(&a.stat, a.by.as_deref(), &a.filters, &a.range)?;
            if let Some(n) = a.top {
                args["top"] = json!(n);
            }
            let v = ctx.call("analytics.show", args)?;
            let by = v["by"].as_str().unwrap_or("");
            let head = if by.is_empty() { "TOTAL" } else { by };
            let mut t = Table::new(
                [head, "RATE", "BYTES/S", "AVG-LATENCY", "COUNT"]
                    .map(|s| s.to_uppercase())
                    .to_vec(),
                vec![false, true, true, true, true],
            );
            for r in v["rows"].as_array().into_iter().flatten() {
                let value = r["value"].as_str().unwrap_or("");
                t.rows.push(vec![
                    if value.is_empty() { "-" } else { value }.to_string(),
                    num(&r["rate"], a.parsable, false),
                    num(&r["bytes_rate"], a.parsable, true),
                    latency(&r["avg_latency_ns"], a.parsable),
                    num(&r["count"], a.parsable, false),
                ]);
            }
            print!("{}", t.render(a.scripted));
            Ok(())
        }
        AnalyticsCmd::Heatmap(a) => {
            let args = query(&a.stat, Some(&a.by), &a.filters, &a.range)?;
            let v = ctx.call("analytics.heatmap", args)?;
            if a.json {
                println!("{v}");
                return Ok(());
            }
            print_heatmap(&v);
            Ok(())
        }
    }
}

/// One row per bucket (high to low): its range, events in the period, and one
/// character per time slot shading how many events fell in it.
fn print_heatmap(v: &Value) {
    const SHADES: &[char] = &[' ', '.', ':', '-', '=', '+', '*', '#', '@'];
    let size = v["by"].as_str() == Some("size");
    let buckets = v["buckets"].as_array().cloned().unwrap_or_default();
    let counts: Vec<Vec<u64>> = v["counts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            row.as_array()
                .into_iter()
                .flatten()
                .map(|c| c.as_u64().unwrap_or(0))
                .collect()
        })
        .collect();
    let max = counts.iter().flatten().copied().max().unwrap_or(0).max(1);
    let label = |x: u64| {
        if size {
            cachalot_analytics::query::fmt_bytes(x)
        } else {
            cachalot_analytics::query::fmt_ns(x)
        }
    };
    println!(
        "{:>17}  {:>8}  one column per {}",
        v["by"].as_str().unwrap_or("").to_uppercase(),
        "EVENTS",
        v["resolution"].as_str().unwrap_or("second")
    );
    for (b, bounds) in buckets.iter().enumerate().rev() {
        let lo = bounds[0].as_u64().unwrap_or(0);
        let hi = bounds[1].as_u64().unwrap_or(0);
        let total: u64 = counts.iter().map(|r| r.get(b).copied().unwrap_or(0)).sum();
        let line: String = counts
            .iter()
            .map(|r| {
                let c = r.get(b).copied().unwrap_or(0);
                if c == 0 {
                    ' '
                } else {
                    let i = 1 + ((c as f64).ln_1p() / (max as f64).ln_1p() * 7.0) as usize;
                    SHADES[i.min(SHADES.len() - 1)]
                }
            })
            .collect();
        println!(
            "{:>17}  {total:>8}  |{line}|",
            format!("{}-{}", label(lo), label(hi))
        );
    }
    if buckets.is_empty() {
        println!("(no timed events in this period)");
    }
}
