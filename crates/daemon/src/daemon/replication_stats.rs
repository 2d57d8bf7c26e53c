//! Replication in analytics and /metrics: stream bytes by relationship and
//! side, cycles with their duration, and the recovery point's age (lag)
//! sampled every [`LAG_SAMPLE`], so `analytics show replication.lag --by
//! latency` gives the lag's distribution (median and worst) over any window.
//!
//! Invariants: the statistics are asked for with the catalog's dimensions;
//! a relationship without a recovery point yet has no lag sample (no figure
//! is invented); recording never fails a cycle.

use super::replication::now;
use super::Daemon;
use cachalot_analytics::{catalog, global, Stat};
use std::time::Duration;

/// How often the scheduler samples each relationship's lag.
pub(super) const LAG_SAMPLE: Duration = Duration::from_secs(10);

fn stat(name: &str) -> Stat {
    let dims = catalog::info(name).map_or(&[][..], |i| i.dims);
    global().stat(name, dims)
}

/// A cycle of relationship `rel` ended (`bytes` sent if it succeeded).
pub(super) fn cycle_done(rel: &str, ok: bool, bytes: u64, took: Duration) {
    let result = if ok { "ok" } else { "failed" };
    stat("replication.cycles").record(&[rel, result], 0, took);
    if bytes > 0 {
        stat("replication.bytes").add(&[rel, "sent"], 1, bytes);
    }
}

/// The target received `bytes` of relationship `rel`'s stream.
pub(super) fn received(rel: &str, bytes: u64) {
    stat("replication.bytes").add(&[rel, "received"], 1, bytes);
}

/// One relationship's lag gauge for /metrics.
pub struct LagGauge {
    pub relationship: String,
    /// Seconds behind (none before the first cycle).
    pub lag: Option<u64>,
    /// Past twice the schedule.
    pub lagging: bool,
}

impl Daemon {
    /// A lag sample for every relationship that has a recovery point.
    pub(super) fn sample_replication_lag(&self) {
        let lag = stat("replication.lag");
        let t = now();
        for name in self.replication.names() {
            let Ok(rel) = self.replication.get(&name) else {
                continue;
            };
            if let Some(l) = rel.lag(t) {
                lag.record(&[&name], 0, Duration::from_secs(l));
            }
        }
    }

    /// Every relationship's lag now, for /metrics.
    pub fn replication_lag_gauges(&self) -> Vec<LagGauge> {
        let t = now();
        self.replication
            .names()
            .into_iter()
            .filter_map(|name| self.replication.get(&name).ok())
            .map(|rel| LagGauge {
                lag: rel.lag(t),
                lagging: rel.lagging(t),
                relationship: rel.name,
            })
            .collect()
    }
}
