//! The typed requests: one struct per daemon operation, the single definition used by
//! the CLI (over the unix socket), by the REST routes (the daemon's `api::routes`) and, through
//! the REST routes, by the web UI. Each struct serialises to exactly the `args` object
//! of its op (`{"op": OP, "args": ...}` on the wire, see [`crate::wire`]).
//!
//! Invariants:
//! - Every field name is an argument its op accepts (checked against
//!   the daemon's `OPS` table by a test), so a typed request is never refused for its
//!   shape by the daemon's own validation.
//! - Decoding is strict: unknown fields and wrong types are errors naming the field
//!   (`deny_unknown_fields`), so a typo in an API call changes nothing.
//! - Optional fields are left out when unset, so the daemon applies its defaults.

use crate::wire::Request;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// One daemon operation with typed arguments.
pub trait Op: Serialize + DeserializeOwned {
    /// The op name on the wire, e.g. `ds.create`.
    const OP: &'static str;

    /// The op's `args` object.
    fn args(&self) -> Value {
        // Serialising these plain structs cannot fail (string keys, no custom
        // serialisers); a null would be refused by the daemon with a clear message.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The whole request.
    fn request(&self) -> Request {
        Request::new(Self::OP, self.args())
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A size: a number of bytes, or a string with a unit such as `"256M"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

impl From<u64> for Size {
    fn from(n: u64) -> Size {
        Size::Bytes(n)
    }
}

/// Properties: `{"recordsize": "16K"}`, or `["recordsize=16K"]` (the CLI's form,
/// which keeps the order given).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Props {
    Map(BTreeMap<String, String>),
    List(Vec<String>),
}

impl Props {
    /// None for an empty list (the field is then left out).
    pub fn from_list(l: Vec<String>) -> Option<Props> {
        (!l.is_empty()).then_some(Props::List(l))
    }
}

macro_rules! op {
    ($(#[$m:meta])* $name:ident = $op:literal { $($body:tt)* }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name { $($body)* }
        impl Op for $name {
            const OP: &'static str = $op;
        }
    };
}

op! {
    /// Create a pool on device files (created sparse at `size` when missing).
    PoolCreate = "pool.create" {
        pub name: String,
        /// Absolute device paths and vdev words: `["mirror", "/d/a.img", "/d/b.img"]`.
        pub vdevs: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub size: Option<Size>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ashift: Option<u64>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
        /// Properties of the root dataset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub props: Option<Props>,
    }
}

op! {
    /// Import a pool found in `dirs` (without `name`: list the importable pools).
    PoolImport = "pool.import" {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub dirs: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        /// `-F`: when the newest committed txg's tree does not read, go back to
        /// an older txg (its later changes are lost; `pool status` says so).
        #[serde(default, skip_serializing_if = "is_false")]
        pub rewind: bool,
    }
}

op! {
    /// Export a pool (it can be imported again).
    PoolExport = "pool.export" { pub name: String }
}

op! {
    /// Destroy a pool (its labels are erased).
    PoolDestroy = "pool.destroy" { pub name: String }
}

op! {
    /// List pools (one, or all).
    PoolList = "pool.list" {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
    }
}

op! {
    /// Pool status: health, device tree with error counters, scrub.
    PoolStatus = "pool.status" {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
    }
}

op! {
    /// Start a scrub (with `wait`, return when it ends).
    PoolScrub = "pool.scrub" {
        pub name: String,
        #[serde(default, skip_serializing_if = "is_false")]
        pub wait: bool,
    }
}

op! {
    /// Replace device `old` of pool `name` with `new` and resilver (the CLI's
    /// `pool replace`). Without `new`, a new disk took `old`'s place.
    PoolReplace = "pool.replace" {
        pub name: String,
        pub old: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub new: Option<String>,
        /// Size of `new` when it is a file to create.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub size: Option<Size>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// Add vdevs to a pool: device paths and vdev words as at create
    /// (`["mirror", "/d/c.img", "/d/d.img"]`, `["cache", "/d/ssd.img"]`).
    PoolAdd = "pool.add" {
        pub name: String,
        pub vdevs: Vec<String>,
        /// Size of device files to create.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub size: Option<Size>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// Mirror `device` of pool `name` onto `new` and resilver (a single device
    /// becomes a mirror, a mirror gets wider).
    PoolAttach = "pool.attach" {
        pub name: String,
        pub device: String,
        pub new: String,
        /// Size of `new` when it is a file to create.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub size: Option<Size>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// Detach a device from its mirror.
    PoolDetach = "pool.detach" { pub name: String, pub device: String }
}

op! {
    /// Stop all I/O to a device (kept across restarts) until it is brought online.
    PoolOffline = "pool.offline" { pub name: String, pub device: String }
}

op! {
    /// Bring an offline device back (what it missed is resilvered).
    PoolOnline = "pool.online" { pub name: String, pub device: String }
}

op! {
    /// Remove a cache, log or spare device (or a top-level vdev where the pool can).
    PoolRemove = "pool.remove" { pub name: String, pub device: String }
}

op! {
    /// Bring a SUSPENDED pool back: re-import it from its last committed state.
    PoolClear = "pool.clear" { pub name: String }
}

op! {
    /// Create a filesystem, or a volume when `volume_size` is given.
    DsCreate = "ds.create" {
        pub name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub volume_size: Option<Size>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub sparse: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub blocksize: Option<Size>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub props: Option<Props>,
        /// Create missing parents too.
        #[serde(default, skip_serializing_if = "is_false")]
        pub parents: bool,
    }
}

op! {
    /// Destroy a dataset (`recursive`: with its children and snapshots) or a snapshot.
    DsDestroy = "ds.destroy" {
        pub name: String,
        #[serde(default, skip_serializing_if = "is_false")]
        pub recursive: bool,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// List datasets (and snapshots with `type`: `snapshot` or `all`).
    DsList = "ds.list" {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub recursive: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub depth: Option<u64>,
        /// Comma-separated kinds: filesystem, volume, snapshot, all.
        #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
        pub kind: Option<String>,
        /// Extra columns (property names).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub props: Vec<String>,
    }
}

op! {
    /// Properties of a dataset or snapshot (all when `props` is empty).
    DsGet = "ds.get" {
        pub name: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub props: Vec<String>,
    }
}

op! {
    /// Set one property.
    DsSet = "ds.set" {
        pub name: String,
        pub prop: String,
        pub value: String,
    }
}

op! {
    /// Reset a property to its inherited value.
    DsInherit = "ds.inherit" {
        pub name: String,
        pub prop: String,
    }
}

op! {
    /// Take one atomic snapshot of several filesystems (`FS@SNAP`), of one pool.
    SnapCreate = "snap.create" {
        pub names: Vec<String>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub recursive: bool,
    }
}

op! {
    /// Destroy a snapshot (`force`: release its holds first).
    SnapDestroy = "snap.destroy" {
        pub name: String,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// Roll a filesystem back to a snapshot (`recursive`: destroy newer snapshots).
    SnapRollback = "snap.rollback" {
        pub name: String,
        #[serde(default, skip_serializing_if = "is_false")]
        pub recursive: bool,
    }
}

op! {
    /// Create a writable clone of a snapshot.
    SnapClone = "snap.clone" {
        pub name: String,
        pub target: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub props: Option<Props>,
    }
}

op! {
    /// Make a clone independent of its origin snapshot.
    SnapPromote = "snap.promote" { pub name: String }
}

op! {
    /// Put a hold named `tag` on a snapshot: it cannot be destroyed until
    /// every hold is released.
    SnapHold = "snap.hold" {
        pub name: String,
        pub tag: String,
    }
}

op! {
    /// Release a snapshot's hold `tag`.
    SnapRelease = "snap.release" {
        pub name: String,
        pub tag: String,
    }
}

op! {
    /// The holds of a snapshot.
    SnapHolds = "snap.holds" { pub name: String }
}

op! {
    /// What changed between snapshot `name` (FS@SNAP) and `to` (a later
    /// snapshot of FS, or FS itself; default FS), as `zfs diff`.
    SnapDiff = "snap.diff" {
        pub name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub to: Option<String>,
    }
}

op! {
    /// Every share (NFS, iSCSI, NBD) with its clients.
    ShareList = "share.list" {}
}

op! {
    /// The statistics the daemon keeps.
    AnalyticsList = "analytics.list" {}
}

op! {
    /// A statistic's rate over a range, broken down by a dimension.
    AnalyticsShow = "analytics.show" {
        pub stat: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub by: Option<String>,
        /// `DIM=VALUE` filters.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub filters: Vec<String>,
        /// A duration such as `60s` or `1h` (or give `from`/`to`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub from: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub to: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub top: Option<u64>,
    }
}

op! {
    /// The analytics' own cost: statistics enabled, series kept, memory.
    AnalyticsUsage = "analytics.usage" {}
}

/// A statistic's per-second series over a range, one per breakdown value (the
/// query of [`AnalyticsShow`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
pub struct AnalyticsSeries(pub AnalyticsShow);

impl Op for AnalyticsSeries {
    const OP: &'static str = "analytics.series";
}

/// A statistic's heat map (`by` latency or size) over a range (the query of
/// [`AnalyticsShow`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
pub struct AnalyticsHeatmap(pub AnalyticsShow);

impl Op for AnalyticsHeatmap {
    const OP: &'static str = "analytics.heatmap";
}

op! {
    /// Create a named API token; the secret is returned once.
    TokenCreate = "token.create" { pub name: String }
}

op! {
    /// The API tokens (names and creation times, never the secrets).
    TokenList = "token.list" {}
}

op! {
    /// Revoke a named API token.
    TokenRevoke = "token.revoke" { pub name: String }
}

op! {
    /// Make a one-time pairing token on this appliance (valid one hour), to give
    /// to the appliance that pairs with this one (`repl.pair` there).
    ReplPairToken = "repl.pair_token" {}
}

op! {
    /// Pair with the appliance whose replication listener is `address`
    /// (`HOST:PORT`), with a pairing token it made: each side pins the other's key.
    ReplPair = "repl.pair" {
        pub address: String,
        pub token: String,
    }
}

op! {
    /// The paired appliances: key fingerprint, address (when this side dialled),
    /// when paired.
    ReplPeers = "repl.peers" {}
}

op! {
    /// Create a replication relationship: send `source` to a paired appliance's
    /// `target` (`HOST:PORT/FS`) every `schedule`. A MySQL set names its
    /// datasets comma-separated, datadir first, with its server's `mysql_socket`.
    ReplCreate = "repl.create" {
        pub name: String,
        pub source: String,
        pub target: String,
        /// Time between cycles: `30s`, `5m`, `1h` (default 5m).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub schedule: Option<String>,
        /// Retention grid on both sides (default `1h:every 5m, 1d:every 1h, 30d:every 1d`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub keep: Option<String>,
        /// Bandwidth limit in bytes per second (`50M`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub bwlimit: Option<Size>,
        /// No cycle until it is resumed or run.
        #[serde(default, skip_serializing_if = "is_false")]
        pub paused: bool,
        /// Created on the target: `source` is `HOST:PORT/FS` (the source
        /// appliance's listener), `target` a filesystem here, and this
        /// appliance starts each cycle.
        #[serde(default, skip_serializing_if = "is_false")]
        pub pull: bool,
        /// Replicate the whole tree under `source` (each cycle snapshots
        /// every member at once); members go to the same place under `target`.
        #[serde(default, skip_serializing_if = "is_false")]
        pub recursive: bool,
        /// The source is a MySQL set: each cycle snapshots it through this server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mysql_socket: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mysql_user: Option<String>,
    }
}

op! {
    /// The replication relationships (one, or all): those kept here (`role`
    /// "push" or "pull") and the pulls this appliance serves as the source
    /// (`role` "pulled-by PEER", with the snapshot they hold here in `held`);
    /// state, lag, last success, bytes, errors.
    ReplList = "repl.list" {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
    }
}

op! {
    /// Destroy a replication relationship (its holds on the source's snapshots
    /// go; the target's copy stays).
    ReplDestroy = "repl.destroy" { pub name: String }
}

op! {
    /// Run one replication cycle now (answers when it has ended).
    ReplRun = "repl.run" { pub name: String }
}

op! {
    /// Stop scheduled cycles of a relationship.
    ReplPause = "repl.pause" { pub name: String }
}

op! {
    /// Schedule a paused relationship's cycles again.
    ReplResume = "repl.resume" { pub name: String }
}

op! {
    /// Break a relationship off: its target stops being updated and can be
    /// used on its own (`resync` rolls it back and resumes).
    ReplBreak = "repl.break" { pub name: String }
}

op! {
    /// Roll a broken-off (or diverged) target back to the newest common
    /// snapshot and resume; without `force`, refused while that destroys
    /// anything (the refusal lists it).
    ReplResync = "repl.resync" {
        pub name: String,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// Swap a relationship's direction (failback): the target becomes the
    /// source, reachable at `address` (default: the address paired with);
    /// without `force`, refused while the old source would lose anything.
    ReplReverse = "repl.reverse" {
        pub name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub address: Option<String>,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// Mount a filesystem over FUSE at `path` (default: its `mountpoint`
    /// property), an absolute, existing, empty directory.
    FsMount = "fs.mount" {
        pub name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub path: Option<String>,
    }
}

op! {
    /// Unmount a filesystem (`force`: even when files are open inside).
    FsUnmount = "fs.unmount" {
        pub name: String,
        #[serde(default, skip_serializing_if = "is_false")]
        pub force: bool,
    }
}

op! {
    /// The mounted filesystems: `[{"name", "path"}]`.
    FsMounts = "fs.mounts" {}
}
