//! The statistics Cachalot knows, with their breakdown dimensions.
//!
//! Invariants:
//! - Every layer that feeds a statistic asks the registry for it with exactly the
//!   dimensions listed here ([`register_all`] creates them first, so a query for a
//!   statistic that has seen no event yet still knows its dimensions).
//! - `latency` and `size` are not key dimensions: they are the histograms kept per
//!   key (see [`crate::Stat::record`]); queries accept them as `--by` for stats whose
//!   [`StatInfo::timed`] is true.

use crate::Registry;

/// One known statistic.
#[derive(Clone, Copy, Debug)]
pub struct StatInfo {
    /// Name, `LAYER.WHAT`.
    pub name: &'static str,
    /// Breakdown dimensions, in key order.
    pub dims: &'static [&'static str],
    /// What is counted: `"ops"` (events per second) or `"bytes"` (bytes per second).
    pub unit: &'static str,
    /// Events carry a latency (and size) histogram: `--by latency|size` works.
    pub timed: bool,
    /// One line for `analytics list`.
    pub about: &'static str,
}

/// Every statistic fed by some layer, sorted by name.
pub const CATALOG: &[StatInfo] = &[
    StatInfo {
        name: "arc.accesses",
        dims: &["result", "kind", "demand", "level"],
        unit: "ops",
        timed: false,
        about: "ARC lookups: hit, miss or iohit (waited for a prefetch); data or metadata; demand, prefetch or prefetched (a demand read served by read-ahead); served by arc, l2arc or pool",
    },
    StatInfo {
        name: "disk.bytes",
        dims: &["device", "op"],
        unit: "bytes",
        timed: false,
        about: "bytes read and written on each pool device",
    },
    StatInfo {
        name: "disk.ops",
        dims: &["device", "op"],
        unit: "ops",
        timed: true,
        about: "reads and writes on each pool device",
    },
    StatInfo {
        name: "fuse.bytes",
        dims: &["op", "dataset", "file"],
        unit: "bytes",
        timed: false,
        about: "bytes read and written through FUSE mounts",
    },
    StatInfo {
        name: "fuse.ops",
        dims: &["op", "dataset", "file"],
        unit: "ops",
        timed: true,
        about: "FUSE requests (file = path within the dataset)",
    },
    StatInfo {
        name: "innodb.ops",
        dims: &["kind", "table", "op", "dataset", "file"],
        unit: "ops",
        timed: true,
        about: "reads, writes and syncs of MySQL files by kind (redo, undo, ...) and table",
    },
    StatInfo {
        name: "nbd.bytes",
        dims: &["client", "volume", "op"],
        unit: "bytes",
        timed: false,
        about: "bytes read and written by NBD clients",
    },
    StatInfo {
        name: "nbd.ops",
        dims: &["client", "volume", "op", "offset"],
        unit: "ops",
        timed: true,
        about: "NBD requests (offset = start of the volume region, for heat maps; - for flush)",
    },
    StatInfo {
        name: "nfs.bytes",
        dims: &["client", "share", "op", "file"],
        unit: "bytes",
        timed: false,
        about: "bytes read and written over NFS",
    },
    StatInfo {
        name: "nfs.locks",
        dims: &["client", "event"],
        unit: "events",
        timed: false,
        about: "NFSv4.1 lock events: grant, conflict, reclaim, expired (a lease ran out)",
    },
    StatInfo {
        name: "nfs.ops",
        dims: &["client", "share", "op", "file"],
        unit: "ops",
        timed: true,
        about: "NFS requests (share = dataset, file = path within it, or #object)",
    },
    StatInfo {
        name: "objects.ops",
        dims: &["dataset", "op"],
        unit: "ops",
        timed: false,
        about: "object-layer operations per dataset",
    },
    StatInfo {
        name: "replication.bytes",
        dims: &["relationship", "side"],
        unit: "bytes",
        timed: false,
        about: "replication stream bytes, sent (source) or received (target)",
    },
    StatInfo {
        name: "replication.cycles",
        dims: &["relationship", "result"],
        unit: "ops",
        timed: true,
        about: "replication cycles, ok or failed (latency = the cycle's duration)",
    },
    StatInfo {
        name: "replication.lag",
        dims: &["relationship"],
        unit: "ops",
        timed: true,
        about: "recovery point age, sampled every 10 s (latency = the lag: --by latency for its distribution)",
    },
    StatInfo {
        name: "scsi.ops",
        dims: &["initiator", "volume", "op", "region"],
        unit: "ops",
        timed: true,
        about: "SCSI commands on iSCSI LUNs (region = which 1/32 of the LUN, a heat map)",
    },
    StatInfo {
        name: "txg.commits",
        dims: &["pool"],
        unit: "ops",
        timed: true,
        about: "transaction group commits per pool",
    },
    StatInfo {
        name: "zil.commits",
        dims: &["dataset"],
        unit: "ops",
        timed: true,
        about: "intent log commits (synchronous writes made durable) per dataset",
    },
];

/// The catalog entry of `name`.
pub fn info(name: &str) -> Option<&'static StatInfo> {
    CATALOG.iter().find(|s| s.name == name)
}

/// Create every catalog statistic in `reg` (idempotent).
pub fn register_all(reg: &Registry) {
    for s in CATALOG {
        reg.stat(s.name, s.dims);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_and_registered() {
        let names: Vec<_> = CATALOG.iter().map(|s| s.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        let reg = Registry::new();
        register_all(&reg);
        assert_eq!(reg.names().len(), CATALOG.len());
        assert_eq!(info("fuse.ops").unwrap().dims, ["op", "dataset", "file"]);
        assert!(info("nope").is_none());
    }
}
