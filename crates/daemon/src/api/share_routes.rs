//! Block shares and replication as resources:
//! - `PUT|DELETE /api/v1/shares/iscsi/{name}` and `.../nbd/{name}` set a volume's
//!   `shareiscsi` / `sharenbd` to on or off (what `share list`, at
//!   `GET /api/v1/shares`, then shows with its clients);
//! - `GET /api/v1/replication` (and `/{name}`) lists relationships with their lag,
//!   `POST /api/v1/replication` creates one (the CLI's `replication create`
//!   request), `DELETE /api/v1/replication/{name}` destroys one, and
//!   `POST /api/v1/replication/{name}/run|pause|resume|break|resync|reverse`
//!   act on one (`run` sends to the peer now; the last three are the CLI's
//!   failover, resync and failback requests);
//! - `GET /api/v1/peers` lists the paired appliances, `POST /api/v1/peers/token`
//!   makes a one-time pairing token here (the CLI's `replication pair`) and
//!   `POST /api/v1/peers` pairs with another appliance using the token it made
//!   (`replication pair ADDR TOKEN`).
//!
//! Invariants: each route builds one typed request and runs it through
//! `Daemon::handle` (as the CLI's `set`, `replication run` ... do), so the engine
//! and the replication service alone decide what is valid; every change takes
//! [`Auth`] first.

use super::error::ErrorBody;
use super::requests::{
    DsSet, ReplBreak, ReplCreate, ReplDestroy, ReplList, ReplPair, ReplPairToken, ReplPause,
    ReplPeers, ReplResume, ReplResync, ReplReverse, ReplRun,
};
use super::routes::{run, Auth, Body, NoBody};
use crate::daemon::Daemon;
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;
type ApiResult = Result<Json<Value>, super::error::ApiError>;

async fn set_share(d: Arc<Daemon>, name: String, prop: &str, on: bool) -> ApiResult {
    let value = if on { "on" } else { "off" };
    run(
        d,
        DsSet {
            name,
            prop: prop.into(),
            value: value.into(),
        },
    )
    .await
}

/// Share a volume over iSCSI (`shareiscsi=on`): target
/// `iqn.2026-11.org.cachalot:POOL.VOL`, LUN 0.
#[utoipa::path(put, path = "/api/v1/shares/iscsi/{name}", tag = "shares",
    params(("name" = String, Path, description = "volume ('/' as %2F)")), security(("token" = [])),
    responses((status = 200, description = "Shared", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn share_iscsi(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    set_share(d, name, "shareiscsi", true).await
}

/// Stop sharing a volume over iSCSI (`shareiscsi=off`).
#[utoipa::path(delete, path = "/api/v1/shares/iscsi/{name}", tag = "shares",
    params(("name" = String, Path, description = "volume ('/' as %2F)")), security(("token" = [])),
    responses((status = 200, description = "Unshared", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn unshare_iscsi(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    set_share(d, name, "shareiscsi", false).await
}

/// Share a volume over NBD (`sharenbd=on`): the export is named after the volume.
#[utoipa::path(put, path = "/api/v1/shares/nbd/{name}", tag = "shares",
    params(("name" = String, Path, description = "volume ('/' as %2F)")), security(("token" = [])),
    responses((status = 200, description = "Shared", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn share_nbd(State(d): D, _a: Auth, Path(name): Path<String>, _b: Body<NoBody>) -> ApiResult {
    set_share(d, name, "sharenbd", true).await
}

/// Stop sharing a volume over NBD (`sharenbd=off`; its connections are closed).
#[utoipa::path(delete, path = "/api/v1/shares/nbd/{name}", tag = "shares",
    params(("name" = String, Path, description = "volume ('/' as %2F)")), security(("token" = [])),
    responses((status = 200, description = "Unshared", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn unshare_nbd(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    set_share(d, name, "sharenbd", false).await
}

/// Replication relationships: source, target, role (push, pull, or
/// "pulled-by PEER": a pull served here, with the snapshot it holds in
/// `held`), state, lag (seconds since the newest snapshot the target has),
/// last sync, bytes, errors.
#[utoipa::path(get, path = "/api/v1/replication", tag = "replication",
    responses((status = 200, description = "One row per relationship", body = Value)))]
async fn list_replication(State(d): D) -> ApiResult {
    run(d, ReplList::default()).await
}

/// Create a relationship to a paired appliance (checked in full first: a refused
/// one is not saved). Unless `paused`, its first cycle runs at once.
#[utoipa::path(post, path = "/api/v1/replication", tag = "replication", request_body = ReplCreate,
    security(("token" = [])),
    responses((status = 200, description = "Created", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn create_replication(State(d): D, _a: Auth, Body(r): Body<ReplCreate>) -> ApiResult {
    run(d, r).await
}

/// Destroy a relationship; the source's holds for it go, the target's copy stays.
#[utoipa::path(delete, path = "/api/v1/replication/{name}", tag = "replication",
    params(("name" = String, Path, description = "relationship name")), security(("token" = [])),
    responses((status = 200, description = "Destroyed", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn destroy_replication(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, ReplDestroy { name }).await
}

/// One replication relationship (a one-row list).
#[utoipa::path(get, path = "/api/v1/replication/{name}", tag = "replication",
    params(("name" = String, Path, description = "relationship name")),
    responses((status = 200, description = "One row", body = Value),
              (status = 404, description = "No such relationship", body = ErrorBody)))]
async fn get_replication(State(d): D, Path(name): Path<String>) -> ApiResult {
    run(d, ReplList { name: Some(name) }).await
}

/// Run one cycle now; answers when it ended (its outcome is in the list's
/// `last_error`/`last_success` too).
#[utoipa::path(post, path = "/api/v1/replication/{name}/run", tag = "replication",
    params(("name" = String, Path, description = "relationship name")), security(("token" = [])),
    responses((status = 200, description = "The cycle's report", body = Value),
              (status = "4XX", description = "Refused or failed", body = ErrorBody)))]
async fn run_replication(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, ReplRun { name }).await
}

/// Pause a relationship's scheduled cycles.
#[utoipa::path(post, path = "/api/v1/replication/{name}/pause", tag = "replication",
    params(("name" = String, Path, description = "relationship name")), security(("token" = [])),
    responses((status = 200, description = "Paused", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn pause_replication(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, ReplPause { name }).await
}

/// Resume a paused relationship.
#[utoipa::path(post, path = "/api/v1/replication/{name}/resume", tag = "replication",
    params(("name" = String, Path, description = "relationship name")), security(("token" = [])),
    responses((status = 200, description = "Resumed", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn resume_replication(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, ReplResume { name }).await
}

/// Break a relationship off: the target stops being updated and can be used
/// on its own (a failover); `resync` rolls it back and resumes.
#[utoipa::path(post, path = "/api/v1/replication/{name}/break", tag = "replication",
    params(("name" = String, Path, description = "relationship name")), security(("token" = [])),
    responses((status = 200, description = "Broken off: {target, last_snapshot}", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn break_replication(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, ReplBreak { name }).await
}

/// Options of a resync or a reverse.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResyncBody {
    /// Go ahead although the rollback destroys snapshots or changes (without
    /// it the refusal lists them and nothing changes).
    #[serde(default)]
    pub force: bool,
}

/// Roll a broken-off or diverged target back to the newest common snapshot
/// and resume the relationship.
#[utoipa::path(post, path = "/api/v1/replication/{name}/resync", tag = "replication",
    params(("name" = String, Path, description = "relationship name")),
    request_body = ResyncBody, security(("token" = [])),
    responses((status = 200, description = "Resynced: {common, destroyed}", body = Value),
              (status = "4XX", description = "Refused (would lose data without force); nothing changed", body = ErrorBody)))]
async fn resync_replication(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<ResyncBody>,
) -> ApiResult {
    run(
        d,
        ReplResync {
            name,
            force: b.force,
        },
    )
    .await
}

/// How to reverse a relationship.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReverseBody {
    /// `HOST:PORT` of the new target's listener (default: the paired address).
    #[serde(default)]
    pub address: Option<String>,
    /// Go ahead although the old source loses snapshots or changes.
    #[serde(default)]
    pub force: bool,
}

/// Reverse a relationship (failback): its target becomes the source.
#[utoipa::path(post, path = "/api/v1/replication/{name}/reverse", tag = "replication",
    params(("name" = String, Path, description = "relationship name")),
    request_body = ReverseBody, security(("token" = [])),
    responses((status = 200, description = "Reversed: {source, target, common, destroyed}", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn reverse_replication(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<ReverseBody>,
) -> ApiResult {
    let ReverseBody { address, force } = b;
    run(
        d,
        ReplReverse {
            name,
            address,
            force,
        },
    )
    .await
}

/// The paired appliances: key fingerprint, address, when paired.
#[utoipa::path(get, path = "/api/v1/peers", tag = "replication",
    responses((status = 200, description = "One row per paired appliance", body = Value)))]
async fn list_peers(State(d): D) -> ApiResult {
    run(d, ReplPeers {}).await
}

/// Pair with another appliance, using the pairing token it made (valid once):
/// this side dials its replication listener and both pin each other's key.
#[utoipa::path(post, path = "/api/v1/peers", tag = "replication", request_body = ReplPair,
    security(("token" = [])),
    responses((status = 200, description = "Paired: {\"fingerprint\": the peer's key}", body = Value),
              (status = "4XX", description = "Refused (unreachable, wrong, used or expired token); nothing pinned", body = ErrorBody)))]
async fn pair_peer(State(d): D, _a: Auth, Body(r): Body<ReplPair>) -> ApiResult {
    run(d, r).await
}

/// Make a one-time pairing token on this appliance (valid one hour), for the
/// other appliance's `POST /api/v1/peers`.
#[utoipa::path(post, path = "/api/v1/peers/token", tag = "replication", request_body = ReplPairToken,
    security(("token" = [])),
    responses((status = 200, description = "{\"token\", \"fingerprint\" (this appliance's key), \"expires\"}", body = Value),
              (status = "4XX", description = "Refused", body = ErrorBody)))]
async fn pair_token(State(d): D, _a: Auth, Body(r): Body<ReplPairToken>) -> ApiResult {
    run(d, r).await
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(share_iscsi, unshare_iscsi))
        .routes(routes!(share_nbd, unshare_nbd))
        .routes(routes!(list_replication, create_replication))
        .routes(routes!(get_replication, destroy_replication))
        .routes(routes!(run_replication))
        .routes(routes!(pause_replication))
        .routes(routes!(resume_replication))
        .routes(routes!(break_replication))
        .routes(routes!(resync_replication))
        .routes(routes!(reverse_replication))
        .routes(routes!(list_peers, pair_peer))
        .routes(routes!(pair_token))
}
