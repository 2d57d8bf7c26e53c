//! iSCSI analytics: `scsi.ops` by initiator, volume, op and region (which 1/32 of the
//! LUN a command addressed: the offset heat map), with latency and size histograms.
//!
//! Invariant: one event per SCSI command that reached the executor; cardinality is
//! bounded by the registry's per-stat key cap.

use cachalot_analytics::Stat;
use std::time::Duration;

pub const REGIONS: u64 = 32;

pub struct Stats {
    ops: Stat,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

impl Stats {
    pub fn new() -> Stats {
        let name = "scsi.ops";
        let dims = cachalot_analytics::catalog::info(name).map_or(&[][..], |i| i.dims);
        Stats {
            ops: cachalot_analytics::global().stat(name, dims),
        }
    }

    /// Region label of a byte offset in a LUN of `size` bytes ("-" when none).
    pub fn region(off: Option<u64>, size: u64) -> String {
        match off {
            Some(o) if size > 0 => {
                let r = (o as u128 * REGIONS as u128 / size as u128).min(REGIONS as u128 - 1);
                format!("{r:02}")
            }
            _ => "-".to_string(),
        }
    }

    pub fn record(
        &self,
        initiator: &str,
        volume: &str,
        op: &str,
        region: &str,
        bytes: u64,
        lat: Duration,
    ) {
        self.ops
            .record(&[initiator, volume, op, region], bytes, lat);
    }
}
