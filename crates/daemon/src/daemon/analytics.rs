//! Analytics in the daemon: a sampler thread differences the global registry every
//! second into the time-series store (`home/analytics/`), and the `analytics.*` ops
//! answer queries on it (the CLI over the unix socket, the UI and scripts over HTTP).
//!
//! Invariants:
//! - The sampler runs once per wall-clock second, just after the second boundary,
//!   and stores what happened during the second that just ended as slot `now - 1`;
//!   a query's range `--last N` is therefore `[now - N, now)`.
//! - With analytics off (`cachalot serve --analytics off`) nothing is recorded (the
//!   registry is switched off, see `cachalot_analytics::set_enabled`), no sampler
//!   runs, and queries answer "analytics are off".
//! - The store lock is held for one sample or one query, never across I/O other
//!   than the store's own small appends.

use super::{Daemon, OpResult};
use crate::proto::Args;
use cachalot_analytics::catalog::{self, CATALOG};
use cachalot_analytics::query::{self, parse_duration, parse_time, Query};
use cachalot_analytics::series::{Retention, Sampler, Store};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Analytics settings of `cachalot serve`.
#[derive(Clone, Copy, Debug)]
pub struct AnalyticsOpts {
    /// Record and sample (default on).
    pub enabled: bool,
    /// History kept.
    pub retention: Retention,
}

impl Default for AnalyticsOpts {
    fn default() -> Self {
        AnalyticsOpts {
            enabled: true,
            retention: Retention::default(),
        }
    }
}

/// The running analytics service.
pub struct Analytics {
    store: Mutex<Store>,
    stop: AtomicBool,
}

/// Current unix second.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Analytics {
    /// Open the store under `home/analytics` and start sampling.
    pub fn start(home: &Path, retention: Retention) -> anyhow::Result<Arc<Analytics>> {
        let reg = cachalot_analytics::global();
        catalog::register_all(reg);
        let dir = home.join("analytics");
        let store = Store::open(&dir, retention, now_secs())
            .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        let a = Arc::new(Analytics {
            store: Mutex::new(store),
            stop: AtomicBool::new(false),
        });
        let me = a.clone();
        std::thread::Builder::new()
            .name("cachalot-analytics".into())
            .spawn(move || me.sample_loop())?;
        Ok(a)
    }

    fn sample_loop(&self) {
        let reg = cachalot_analytics::global();
        let mut sampler = Sampler::new();
        let mut last = now_secs();
        sampler.sample(reg, &mut self.store.lock(), last);
        while !self.stop.load(Ordering::Relaxed) {
            // Sleep to just past the next second boundary.
            let since = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let to_next = Duration::from_nanos(1_000_000_000 - u64::from(since.subsec_nanos()));
            std::thread::sleep(to_next + Duration::from_millis(2));
            let now = now_secs();
            if now <= last {
                continue;
            }
            let mut store = self.store.lock();
            let slot = sampler.sample(reg, &mut store, now - 1);
            store.push_second(slot);
            last = now;
        }
        self.store.lock().flush();
    }

    /// Stop sampling (daemon shutdown) and flush.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.store.lock().flush();
    }

    /// Memory and disk used by retained history.
    pub fn usage(&self) -> Value {
        let s = self.store.lock();
        let (sec_mem, min_mem) = s.mem_bytes_split();
        json!({
            "seconds_memory_bytes": sec_mem,
            "minutes_memory_bytes": min_mem,
            "seconds_kept": s.seconds.len(),
            "minutes_kept": s.minutes.len(),
            "memory_bytes": s.mem_bytes(),
            "disk_bytes": s.disk_bytes(),
            "retention_seconds": s.retention().seconds,
            "retention_minutes": s.retention().minutes,
        })
    }
}

/// Build a [`Query`] from op arguments: stat, by, filters ["DIM=VAL"], last | from+to, top.
fn query_from_args(a: &Args, now: u64) -> Result<Query, String> {
    let stat = a.str("stat")?;
    let mut filters = Vec::new();
    for f in a.str_list("filters")? {
        let (d, v) = f
            .split_once('=')
            .ok_or_else(|| format!("filter '{f}' is not DIM=VALUE"))?;
        filters.push((d.to_string(), v.to_string()));
    }
    let last = a.opt_str("last")?;
    let from = a.opt_str("from")?;
    let to = a.opt_str("to")?;
    let (from, to) = match (last, from, to) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err("give either --last or --from/--to, not both".into())
        }
        (Some(l), None, None) => {
            let n = parse_duration(&l)?;
            if n == 0 {
                return Err(format!("--last {l}: the range must be at least 1s"));
            }
            (now.saturating_sub(n), now)
        }
        (None, Some(f), t) => {
            let to = match t {
                Some(t) => parse_time(&t)?,
                None => now,
            };
            (parse_time(&f)?, to)
        }
        (None, None, Some(_)) => return Err("--to needs --from".into()),
        (None, None, None) => (now.saturating_sub(60), now),
    };
    let top = match a.opt_u64("top")? {
        Some(n) => Some(usize::try_from(n).map_err(|_| "--top is too large".to_string())?),
        None => None,
    };
    Ok(Query {
        stat,
        by: a.opt_str("by")?.filter(|b| !b.is_empty()),
        filters,
        from,
        to,
        top,
    })
}

impl Daemon {
    fn analytics_service(&self) -> Result<&Arc<Analytics>, String> {
        self.analytics
            .get()
            .ok_or_else(|| "analytics are off (the daemon runs with --analytics off)".to_string())
    }

    pub(super) fn analytics_op(&self, op: &str, a: &Args) -> OpResult {
        if op == "analytics.list" {
            let on = self.analytics.get().is_some();
            let reg = cachalot_analytics::global();
            let mut out: Vec<Value> = CATALOG
                .iter()
                .map(|s| {
                    let mut dims: Vec<&str> = s.dims.to_vec();
                    if s.timed {
                        dims.extend(["latency", "size"]);
                    }
                    json!({"name": s.name, "dims": dims, "unit": s.unit,
                           "enabled": on, "about": s.about})
                })
                .collect();
            // Statistics fed by some layer but not (yet) in the catalog.
            for (name, dims) in reg.names() {
                if catalog::info(&name).is_none() && !name.starts_with("test.") {
                    out.push(json!({"name": name, "dims": dims, "unit": "ops",
                                    "enabled": on, "about": ""}));
                }
            }
            return Ok(Value::Array(out));
        }
        let svc = self.analytics_service()?;
        if op == "analytics.usage" {
            return Ok(svc.usage());
        }
        let now = now_secs();
        let q = query_from_args(a, now)?;
        let store = svc.store.lock();
        let p = query::prepare(&store, &q, now)?;
        let v = match op {
            "analytics.show" => serde_json::to_value(query::breakdown(&store, &p)),
            "analytics.series" => serde_json::to_value(query::series(&store, &p)),
            "analytics.heatmap" => serde_json::to_value(query::heatmap(&store, &p)?),
            other => return Err(format!("unknown operation '{other}'")),
        };
        v.map_err(|e| format!("{op}: {e}"))
    }

    /// Start analytics (called once by `serve`); with `enabled` false, switch
    /// recording off instead.
    pub fn start_analytics(&self, opts: AnalyticsOpts) -> anyhow::Result<()> {
        cachalot_analytics::set_enabled(opts.enabled);
        if opts.enabled {
            let a = Analytics::start(&self.home, opts.retention)?;
            let _ = self.analytics.set(a);
        }
        Ok(())
    }

    /// The analytics service, if on.
    pub fn analytics(&self) -> Option<&Arc<Analytics>> {
        self.analytics.get()
    }
}
