//! HTTP side of analytics: the JSON API under `/api/analytics/` (described by
//! `ui/openapi.json`), Prometheus text at `/metrics`, and the web UI at `/` (files
//! under `crates/daemon/ui/`, compiled into the binary).
//!
//! Invariants:
//! - Every API route maps its query string onto the same `analytics.*` op the CLI
//!   uses, so both answer alike; a bad query is HTTP 400 with `{"error": "..."}`.
//! - `/metrics` reads the live registry (counters since the daemon started) and drops
//!   the `file` dimension, whose cardinality would overwhelm a Prometheus server;
//!   levels (replication lag, pool health, a running resilver's progress) are
//!   gauges read at scrape time, beside it.
//! - The UI needs nothing from outside the binary (no CDN, no build step).

use crate::daemon::pool_gauges::PoolGauge;
use crate::daemon::replication_stats::LagGauge;
use crate::daemon::Daemon;
use crate::proto::Request;
use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use cachalot_analytics::catalog::CATALOG;
use cachalot_analytics::{bucket_bounds, LATENCY_BUCKETS};
use cachalot_datasets::scrub::ScrubStatus;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

const INDEX_HTML: &str = include_str!("../../ui/index.html");
const APP_JS: &str = include_str!("../../ui/app.js");
const APP_CSS: &str = include_str!("../../ui/app.css");
const MANAGE_JS: &str = include_str!("../../ui/manage.js");
/// The OpenAPI description of every `/api/analytics/` route.
pub const OPENAPI_JSON: &str = include_str!("../../ui/openapi.json");

/// Routes of the API, UI and metrics.
pub fn routes() -> Router<Arc<Daemon>> {
    Router::new()
        .route("/", get(index))
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript", APP_JS) }),
        )
        .route("/ui/app.css", get(|| async { asset("text/css", APP_CSS) }))
        .route(
            "/ui/manage.js",
            get(|| async { asset("text/javascript", MANAGE_JS) }),
        )
        .route(
            "/api/analytics/openapi.json",
            get(|| async { asset("application/json", OPENAPI_JSON) }),
        )
        .route("/api/analytics/stats", get(stats))
        .route("/api/analytics/usage", get(usage))
        .route("/api/analytics/overview", get(overview))
        .route("/api/analytics/show", get(show))
        .route("/api/analytics/series", get(series))
        .route("/api/analytics/heatmap", get(heatmap))
        .route("/metrics", get(metrics))
}

/// The UI page, with the pools and datasets tables rendered in (first paint, and
/// readable without JavaScript).
async fn index(State(d): State<Arc<Daemon>>) -> Html<String> {
    let ov = tokio::task::spawn_blocking(move || d.overview())
        .await
        .unwrap_or_else(|_| json!({"pools": [], "datasets": []}));
    Html(INDEX_HTML.replace("<!--OVERVIEW-->", &crate::http::render_tables(&ov)))
}

fn asset(ctype: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, ctype)], body).into_response()
}

/// Query string to op arguments: `filter` repeats; `top` is a number.
pub fn query_args(raw: Option<&str>) -> Result<Value, String> {
    let mut m = Map::new();
    let mut filters = Vec::new();
    for (k, v) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        match &*k {
            "filter" => filters.push(Value::String(v.into_owned())),
            "top" => {
                let n: u64 = v
                    .parse()
                    .map_err(|_| format!("top: '{v}' is not a number"))?;
                m.insert("top".into(), json!(n));
            }
            "stat" | "by" | "last" | "from" | "to" => {
                if m.insert(k.to_string(), Value::String(v.into_owned()))
                    .is_some()
                {
                    return Err(format!("parameter '{k}' given twice"));
                }
            }
            other => return Err(format!("unknown parameter '{other}'")),
        }
    }
    if !filters.is_empty() {
        m.insert("filters".into(), Value::Array(filters));
    }
    Ok(Value::Object(m))
}

async fn run_op(d: Arc<Daemon>, op: &'static str, args: Value) -> (StatusCode, Json<Value>) {
    let r = tokio::task::spawn_blocking(move || d.handle(&Request::new(op, args))).await;
    match r.map(|r| r.into_result()) {
        Ok(Ok(v)) => (StatusCode::OK, Json(v)),
        Ok(Err(e)) => (StatusCode::BAD_REQUEST, Json(json!({ "error": e }))),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": e.to_string() })),
        ),
    }
}

async fn query_op(
    d: Arc<Daemon>,
    op: &'static str,
    raw: Option<String>,
) -> (StatusCode, Json<Value>) {
    match query_args(raw.as_deref()) {
        Ok(args) => run_op(d, op, args).await,
        Err(e) => (StatusCode::BAD_REQUEST, Json(json!({ "error": e }))),
    }
}

async fn stats(State(d): State<Arc<Daemon>>) -> (StatusCode, Json<Value>) {
    run_op(d, "analytics.list", json!({})).await
}

async fn usage(State(d): State<Arc<Daemon>>) -> (StatusCode, Json<Value>) {
    run_op(d, "analytics.usage", json!({})).await
}

async fn overview(State(d): State<Arc<Daemon>>) -> (StatusCode, Json<Value>) {
    match tokio::task::spawn_blocking(move || d.overview()).await {
        Ok(v) => (StatusCode::OK, Json(v)),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": e.to_string() })),
        ),
    }
}

async fn show(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> (StatusCode, Json<Value>) {
    query_op(d, "analytics.show", q).await
}

async fn series(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> (StatusCode, Json<Value>) {
    query_op(d, "analytics.series", q).await
}

async fn heatmap(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> (StatusCode, Json<Value>) {
    query_op(d, "analytics.heatmap", q).await
}

async fn metrics(State(d): State<Arc<Daemon>>) -> Response {
    let usage = d.analytics().map(|a| a.usage());
    let lags = d.replication_lag_gauges();
    let body = tokio::task::spawn_blocking(move || {
        let pools = d.pool_gauges();
        render_metrics(usage.as_ref(), &lags) + &render_pool_gauges(&pools)
    })
    .await
    .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// Escape a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(names: &[&str], values: &[&str], extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", label(v)))
        .collect();
    if let Some((n, v)) = extra {
        parts.push(format!("{n}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// Per label set (without `file`): count, bytes, latency sum, latency buckets.
type Agg = BTreeMap<Vec<String>, (u64, u64, u64, Vec<u64>)>;

/// Prometheus text exposition of the live registry, and of the replication
/// relationships' lag (a gauge: the registry keeps events, not levels).
pub fn render_metrics(usage: Option<&Value>, lags: &[LagGauge]) -> String {
    let reg = cachalot_analytics::global();
    let mut out = String::new();
    for info in CATALOG {
        let Some(stat) = reg.get(info.name) else {
            continue;
        };
        let snap = stat.snapshot();
        let keep: Vec<usize> = (0..snap.dims.len())
            .filter(|i| snap.dims[*i] != "file")
            .collect();
        let names: Vec<&str> = keep.iter().map(|i| snap.dims[*i].as_str()).collect();
        let mut agg: Agg = BTreeMap::new();
        for r in &snap.rows {
            let k: Vec<String> = keep.iter().map(|i| r.keys[*i].clone()).collect();
            let e = agg.entry(k).or_insert((0, 0, 0, Vec::new()));
            e.0 += r.count;
            e.1 += r.bytes;
            e.2 += r.latency_sum_ns;
            if !r.latency_buckets.is_empty() {
                e.3.resize(LATENCY_BUCKETS, 0);
                for (a, b) in e.3.iter_mut().zip(&r.latency_buckets) {
                    *a += b;
                }
            }
        }
        let base = format!("cachalot_{}", info.name.replace('.', "_"));
        if info.unit == "bytes" {
            let _ = writeln!(out, "# HELP {base}_total {}", info.about);
            let _ = writeln!(out, "# TYPE {base}_total counter");
            for (k, v) in &agg {
                let vals: Vec<&str> = k.iter().map(String::as_str).collect();
                let _ = writeln!(out, "{base}_total{} {}", labels(&names, &vals, None), v.1);
            }
            continue;
        }
        let _ = writeln!(out, "# HELP {base}_total {}", info.about);
        let _ = writeln!(out, "# TYPE {base}_total counter");
        for (k, v) in &agg {
            let vals: Vec<&str> = k.iter().map(String::as_str).collect();
            let _ = writeln!(out, "{base}_total{} {}", labels(&names, &vals, None), v.0);
        }
        if !info.timed {
            continue;
        }
        let h = format!("{base}_latency_seconds");
        let _ = writeln!(out, "# HELP {h} latency of {}", info.name);
        let _ = writeln!(out, "# TYPE {h} histogram");
        for (k, v) in &agg {
            let vals: Vec<&str> = k.iter().map(String::as_str).collect();
            let mut cum = 0u64;
            // Buckets from 1us (2^10 ns) to ~17s (2^34 ns); smaller ones fold in.
            for (i, n) in v.3.iter().enumerate() {
                cum += n;
                if (10..35).contains(&i) {
                    let le = format!("{:e}", bucket_bounds(i).1 as f64 / 1e9);
                    let _ = writeln!(
                        out,
                        "{h}_bucket{} {cum}",
                        labels(&names, &vals, Some(("le", &le)))
                    );
                }
            }
            let _ = writeln!(
                out,
                "{h}_bucket{} {}",
                labels(&names, &vals, Some(("le", "+Inf"))),
                v.0
            );
            let _ = writeln!(
                out,
                "{h}_sum{} {}",
                labels(&names, &vals, None),
                v.2 as f64 / 1e9
            );
            let _ = writeln!(out, "{h}_count{} {}", labels(&names, &vals, None), v.0);
        }
    }
    if !lags.is_empty() {
        for (name, help) in [
            (
                "cachalot_replication_lag_seconds",
                "age of each relationship's recovery point",
            ),
            (
                "cachalot_replication_lagging",
                "1 when the lag is past twice the schedule",
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for g in lags {
                let l = labels(&["relationship"], &[&g.relationship], None);
                match (name.ends_with("seconds"), g.lag) {
                    (true, Some(lag)) => {
                        let _ = writeln!(out, "{name}{l} {lag}");
                    }
                    (true, None) => {}
                    (false, _) => {
                        let _ = writeln!(out, "{name}{l} {}", u8::from(g.lagging));
                    }
                }
            }
        }
    }
    if let Some(u) = usage {
        for (k, name) in [
            ("memory_bytes", "cachalot_analytics_memory_bytes"),
            ("disk_bytes", "cachalot_analytics_disk_bytes"),
        ] {
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {}", u[k].as_u64().unwrap_or(0));
        }
    }
    out
}

/// Health states a pool gauge is written for (1 for the pool's, 0 for the
/// others), so a query for DEGRADED finds a series whether or not it is.
const POOL_STATES: &[&str] = &["ONLINE", "DEGRADED", "SUSPENDED", "UNAVAIL"];

/// A scan gauge: name, help, and its value in a scan's status.
type ScanGauge = (&'static str, &'static str, fn(&ScrubStatus) -> u64);

/// Pools' health and their running scan (resilver or scrub): progress, rate
/// and time left, as `pool status` shows them.
pub fn render_pool_gauges(pools: &[PoolGauge]) -> String {
    let mut out = String::new();
    if pools.is_empty() {
        return out;
    }
    let name = "cachalot_pool_health";
    let _ = writeln!(out, "# HELP {name} 1 for the pool's health state");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for p in pools {
        let mut states: Vec<&str> = POOL_STATES.to_vec();
        if !states.contains(&p.health.as_str()) {
            states.push(&p.health);
        }
        for st in states {
            let l = labels(&["pool", "state"], &[&p.pool, st], None);
            let _ = writeln!(out, "{name}{l} {}", u8::from(st == p.health));
        }
    }
    let running: Vec<_> = pools
        .iter()
        .filter_map(|p| Some((p, p.scan.as_ref()?)))
        .collect();
    let gauges: [ScanGauge; 5] = [
        (
            "cachalot_pool_scan_in_progress",
            "1 while a resilver or scrub runs",
            |s| u64::from(s.state == "scanning"),
        ),
        (
            "cachalot_pool_scan_examined_bytes",
            "bytes the running scan has examined",
            |s| s.examined,
        ),
        (
            "cachalot_pool_scan_total_bytes",
            "bytes the running scan has to examine",
            |s| s.total,
        ),
        (
            "cachalot_pool_scan_rate_bytes_per_second",
            "examined bytes per second of the running scan",
            |s| s.rate,
        ),
        (
            "cachalot_pool_scan_eta_seconds",
            "seconds left at that rate (0: not known yet)",
            |s| s.eta_secs,
        ),
    ];
    for (i, (name, help, f)) in gauges.iter().enumerate() {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (p, s) in &running {
            // Progress figures only while it runs: a finished scan's would
            // read as a stalled one.
            if i > 0 && s.state != "scanning" {
                continue;
            }
            let l = labels(&["pool", "kind"], &[&p.pool, &s.kind], None);
            let _ = writeln!(out, "{name}{l} {}", f(s));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings() {
        let v = query_args(Some(
            "stat=fuse.ops&by=file&filter=dataset%3Dtank%2Fdb&filter=op=write&top=5&last=60s",
        ))
        .unwrap();
        assert_eq!(
            v,
            json!({"stat": "fuse.ops", "by": "file", "filters": ["dataset=tank/db", "op=write"],
                   "top": 5, "last": "60s"})
        );
        assert!(query_args(Some("stat=a&stat=b"))
            .unwrap_err()
            .contains("twice"));
        assert!(query_args(Some("colour=red"))
            .unwrap_err()
            .contains("unknown parameter"));
        assert!(query_args(Some("top=x")).is_err());
        assert_eq!(query_args(None).unwrap(), json!({}));
    }

    #[test]
    fn openapi_documents_every_route() {
        let doc: Value = serde_json::from_str(OPENAPI_JSON).expect("openapi.json parses");
        assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
        let paths = doc["paths"].as_object().unwrap();
        for p in [
            "/api/analytics/stats",
            "/api/analytics/usage",
            "/api/analytics/overview",
            "/api/analytics/show",
            "/api/analytics/series",
            "/api/analytics/heatmap",
            "/metrics",
        ] {
            assert!(paths.contains_key(p), "{p} is not documented");
        }
        // Every documented query parameter is one query_args accepts.
        for (_, item) in paths {
            for p in item["get"]["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap();
                let q = format!("{name}=1");
                let r = query_args(Some(&q));
                assert!(r.is_ok() || !r.unwrap_err().contains("unknown"), "{name}");
            }
        }
    }

    #[test]
    fn metrics_text() {
        let reg = cachalot_analytics::global();
        cachalot_analytics::catalog::register_all(reg);
        reg.stat("disk.ops", &["device", "op"]).record(
            &["d\"0", "read"],
            4096,
            std::time::Duration::from_micros(50),
        );
        let m = render_metrics(None, &[]);
        assert!(m.contains("# TYPE cachalot_disk_ops_total counter"), "{m}");
        assert!(
            m.contains("cachalot_disk_ops_total{device=\"d\\\"0\",op=\"read\"}"),
            "{m}"
        );
        assert!(m.contains(
            "cachalot_disk_ops_latency_seconds_bucket{device=\"d\\\"0\",op=\"read\",le=\"+Inf\"}"
        ));
        assert!(!m.contains("file="));
    }

    #[test]
    fn pool_gauges() {
        // (`cancel` is private: built from the default and filled in.)
        let mut resilver = ScrubStatus::default();
        resilver.state = "scanning".into();
        resilver.kind = "resilver".into();
        (resilver.examined, resilver.total) = (300, 1000);
        (resilver.rate, resilver.eta_secs) = (30, 23);
        let mut done = ScrubStatus::default();
        done.state = "finished".into();
        done.examined = 1000;
        let g = |pool: &str, health: &str, scan| PoolGauge {
            pool: pool.into(),
            health: health.into(),
            scan,
        };
        let m = render_pool_gauges(&[
            g("tank", "DEGRADED", Some(resilver)),
            g("quiet", "ONLINE", Some(done)),
            g("gone", "UNAVAIL", None),
        ]);
        for line in [
            "cachalot_pool_health{pool=\"tank\",state=\"DEGRADED\"} 1\n",
            "cachalot_pool_health{pool=\"tank\",state=\"ONLINE\"} 0\n",
            "cachalot_pool_health{pool=\"gone\",state=\"UNAVAIL\"} 1\n",
            "cachalot_pool_scan_in_progress{pool=\"tank\",kind=\"resilver\"} 1\n",
            "cachalot_pool_scan_in_progress{pool=\"quiet\",kind=\"scrub\"} 0\n",
            "cachalot_pool_scan_examined_bytes{pool=\"tank\",kind=\"resilver\"} 300\n",
            "cachalot_pool_scan_total_bytes{pool=\"tank\",kind=\"resilver\"} 1000\n",
            "cachalot_pool_scan_rate_bytes_per_second{pool=\"tank\",kind=\"resilver\"} 30\n",
            "cachalot_pool_scan_eta_seconds{pool=\"tank\",kind=\"resilver\"} 23\n",
        ] {
            assert!(m.contains(line), "no {line} in {m}");
        }
        // A finished scan has no progress figures.
        assert!(!m.contains("examined_bytes{pool=\"quiet\""), "{m}");
        assert_eq!(render_pool_gauges(&[]), "");
    }

    #[test]
    fn replication_lag_gauges() {
        let g = |name: &str, lag, lagging| LagGauge {
            relationship: name.into(),
            lag,
            lagging,
        };
        let m = render_metrics(
            None,
            &[
                g("r1", Some(30), false),
                g("r2", Some(900), true),
                g("new", None, false),
            ],
        );
        assert!(
            m.contains("# TYPE cachalot_replication_lag_seconds gauge"),
            "{m}"
        );
        assert!(
            m.contains("cachalot_replication_lag_seconds{relationship=\"r2\"} 900\n"),
            "{m}"
        );
        assert!(
            !m.contains("cachalot_replication_lag_seconds{relationship=\"new\"}"),
            "{m}"
        );
        assert!(
            m.contains("cachalot_replication_lagging{relationship=\"r2\"} 1\n"),
            "{m}"
        );
        assert!(
            m.contains("cachalot_replication_lagging{relationship=\"r1\"} 0\n"),
            "{m}"
        );
    }
}
