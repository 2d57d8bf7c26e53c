//! Pool health and the running scan (resilver or scrub) for /metrics: levels
//! read at scrape time, not events, so they are gauges outside the analytics
//! registry (as the replication lag is).
//!
//! Invariant: the figures are those `pool status` shows (the same
//! `Store::status`), so a scraper and an operator never see different rates.

use super::Daemon;
use cachalot_datasets::scrub::ScrubStatus;

/// One pool's gauges.
pub struct PoolGauge {
    pub pool: String,
    /// ONLINE, DEGRADED, SUSPENDED...; UNAVAIL when it could not be imported.
    pub health: String,
    /// The running or last scan; `None` for a pool that is not imported.
    pub scan: Option<ScrubStatus>,
}

impl Daemon {
    /// Every pool of this daemon, imported or not.
    pub fn pool_gauges(&self) -> Vec<PoolGauge> {
        // Statuses are read outside the lock, as `pool status` does.
        let slots: Vec<_> = {
            let pools = self.pools.read();
            pools
                .iter()
                .map(|(n, slot)| (n.clone(), slot.store.clone()))
                .collect()
        };
        slots
            .into_iter()
            .map(|(pool, store)| match store {
                Some(s) => {
                    let st = s.status();
                    PoolGauge {
                        pool,
                        health: st.health,
                        scan: Some(st.scrub),
                    }
                }
                None => PoolGauge {
                    pool,
                    health: "UNAVAIL".into(),
                    scan: None,
                },
            })
            .collect()
    }
}
