//! The REST routes under `/api/v1/`. Each handler builds one typed request of
//! [`super::requests`] (the same struct the CLI sends) and runs it through
//! [`Daemon::handle`]; the OpenAPI document comes from the `#[utoipa::path]`
//! attribute of each handler, and a route is registered only through that
//! attribute (`routes!`), so no route exists without its description.
//!
//! Invariants:
//! - Every handler that changes something takes [`Auth`] before its body, so a
//!   request without a valid token is refused (401 without one, 403 with an unknown
//!   or revoked one) before anything is parsed or run.
//! - Bodies and query strings decode strictly into typed structs: wrong types,
//!   unknown fields and missing names are 400 `invalid_request`, and nothing runs.
//!   A change without a body takes [`NoBody`]: any body but `{}` is refused too;
//!   a route that documents no query parameter refuses any query string
//!   ([`super::query`], a layer over these routes and `/api/v1/call`).
//! - Names with `/` travel percent-encoded in the path (`tank%2Fdb`).
//! - Ops run on tokio's blocking pool, never on the async workers.

use super::error::{ApiError, ErrorBody};
use super::jobs::{self, Job};
use super::requests::*;
use crate::daemon::Daemon;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use super::extract::{bearer, check_token, Auth, Body, NoBody, Q};

type D = State<Arc<Daemon>>;
type ApiResult<T = Json<Value>> = Result<T, ApiError>;

/// Run one typed request on the blocking pool.
pub async fn run<R: Op>(d: Arc<Daemon>, r: R) -> ApiResult {
    let req = r.request();
    let resp = tokio::task::spawn_blocking(move || d.handle(&req))
        .await
        .map_err(|e| ApiError::new("internal", format!("internal error: {e}")))?;
    if resp.ok {
        Ok(Json(resp.into_result().unwrap_or_default()))
    } else {
        Err(ApiError::from_response(resp))
    }
}

// ---- pools ----

/// List the pools.
#[utoipa::path(get, path = "/api/v1/pools", tag = "pools",
    responses((status = 200, description = "One row per pool: name, size, alloc, free, frag, cap, health", body = Value)))]
async fn list_pools(State(d): D) -> ApiResult {
    run(d, PoolList::default()).await
}

/// Create a pool.
#[utoipa::path(post, path = "/api/v1/pools", tag = "pools", request_body = PoolCreate,
    security(("token" = [])),
    responses((status = 200, description = "Created: {\"name\": POOL}", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn create_pool(State(d): D, _a: Auth, Body(r): Body<PoolCreate>) -> ApiResult {
    run(d, r).await
}

/// A pool's status: health, device tree with error counters, scrub.
#[utoipa::path(get, path = "/api/v1/pools/{pool}", tag = "pools",
    params(("pool" = String, Path, description = "pool name")),
    responses((status = 200, description = "The pool's status", body = Value),
              (status = 404, description = "No such pool", body = ErrorBody)))]
async fn pool_status(State(d): D, Path(pool): Path<String>) -> ApiResult {
    let v = run(d, PoolStatus { name: Some(pool) }).await?;
    Ok(Json(v.0.get(0).cloned().unwrap_or(Value::Null)))
}

/// Destroy a pool (its labels are erased).
#[utoipa::path(delete, path = "/api/v1/pools/{pool}", tag = "pools",
    params(("pool" = String, Path, description = "pool name")), security(("token" = [])),
    responses((status = 200, description = "Destroyed", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn destroy_pool(
    State(d): D,
    _a: Auth,
    Path(pool): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, PoolDestroy { name: pool }).await
}

/// Export a pool (it can be imported again).
#[utoipa::path(post, path = "/api/v1/pools/{pool}/export", tag = "pools",
    params(("pool" = String, Path, description = "pool name")), security(("token" = [])),
    responses((status = 200, description = "Exported", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn export_pool(
    State(d): D,
    _a: Auth,
    Path(pool): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, PoolExport { name: pool }).await
}

/// Where to look for a pool to import.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    /// Directories or device files to search (absolute paths); default: where the
    /// daemon last saw the pool.
    #[serde(default)]
    pub dirs: Vec<String>,
    /// `-F`: rewind to an older txg when the newest committed one's tree does
    /// not read (its later changes are lost; the pool's notices say so).
    #[serde(default)]
    pub rewind: bool,
}

/// Import a pool by name (or numeric id).
#[utoipa::path(post, path = "/api/v1/pools/{pool}/import", tag = "pools",
    params(("pool" = String, Path, description = "pool name or id")), request_body = ImportBody,
    security(("token" = [])),
    responses((status = 200, description = "Imported", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn import_pool(
    State(d): D,
    _a: Auth,
    Path(pool): Path<String>,
    Body(b): Body<ImportBody>,
) -> ApiResult {
    run(
        d,
        PoolImport {
            dirs: b.dirs,
            name: Some(pool),
            rewind: b.rewind,
        },
    )
    .await
}

/// Start a scrub; answers at once with a job to poll at `/api/v1/jobs/{id}`.
#[utoipa::path(post, path = "/api/v1/pools/{pool}/scrub", tag = "pools",
    params(("pool" = String, Path, description = "pool name")), security(("token" = [])),
    responses((status = 202, description = "Started", body = Job),
              (status = "4XX", description = "Refused (no such pool, already scrubbing)", body = ErrorBody)))]
async fn scrub_pool(
    State(d): D,
    _a: Auth,
    Path(pool): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult<(StatusCode, Json<Job>)> {
    let _started = run(
        d.clone(),
        PoolScrub {
            name: pool.clone(),
            wait: false,
        },
    )
    .await?;
    let job = jobs::watch_scrub(d, &pool).map_err(|e| ApiError::new("internal", e))?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

// ---- datasets ----

/// Filters of a dataset list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this dataset (and, with `recursive`, its descendants).
    pub name: Option<String>,
    pub recursive: Option<bool>,
    /// filesystem, volume, snapshot or all (comma-separated).
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<String>,
    /// Extra property columns, comma-separated.
    pub props: Option<String>,
}

fn split_list(s: Option<String>) -> Vec<String> {
    s.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect()
    })
    .unwrap_or_default()
}

/// List datasets (filesystems and volumes by default).
#[utoipa::path(get, path = "/api/v1/datasets", tag = "datasets", params(ListQuery),
    responses((status = 200, description = "One row per dataset: name, type, used, available, referenced, mountpoint, props", body = Value),
              (status = "4XX", description = "Bad filter", body = ErrorBody)))]
async fn list_datasets(State(d): D, Q(q): Q<ListQuery>) -> ApiResult {
    let recursive = q.recursive.unwrap_or(q.name.is_none());
    run(
        d,
        DsList {
            name: q.name,
            recursive,
            depth: None,
            kind: q.kind,
            props: split_list(q.props),
        },
    )
    .await
}

/// Create a filesystem (or a volume with `volume_size`), with properties.
#[utoipa::path(post, path = "/api/v1/datasets", tag = "datasets", request_body = DsCreate,
    security(("token" = [])),
    responses((status = 200, description = "Created", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn create_dataset(State(d): D, _a: Auth, Body(r): Body<DsCreate>) -> ApiResult {
    run(d, r).await
}

/// Which properties to show.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PropsQuery {
    /// Property names, comma-separated (default: all), e.g. `recordsize,written@s1`.
    pub props: Option<String>,
}

/// The properties of a dataset (all, or those asked for), with their source.
#[utoipa::path(get, path = "/api/v1/datasets/{name}", tag = "datasets",
    params(("name" = String, Path, description = "dataset name ('/' as %2F)"), PropsQuery),
    responses((status = 200, description = "Rows: name, property, value, raw, source", body = Value),
              (status = 404, description = "No such dataset", body = ErrorBody)))]
async fn get_dataset(State(d): D, Path(name): Path<String>, Q(q): Q<PropsQuery>) -> ApiResult {
    not_snapshot(&name)?;
    run(
        d,
        DsGet {
            name,
            props: split_list(q.props),
        },
    )
    .await
}

fn not_snapshot(name: &str) -> Result<(), ApiError> {
    if name.contains('@') {
        return Err(ApiError::invalid(format!(
            "'{name}' is a snapshot: use /api/v1/snapshots/{{name}}"
        )));
    }
    Ok(())
}

fn snapshot_only(name: &str) -> Result<(), ApiError> {
    if !name.contains('@') {
        return Err(ApiError::invalid(format!(
            "'{name}' is not a snapshot name (FS@SNAP)"
        )));
    }
    Ok(())
}

/// Options of a destroy.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DestroyQuery {
    /// Destroy children and snapshots too (snapshots: newer ones are not touched).
    pub recursive: Option<bool>,
    /// Datasets: unmount first; snapshots: release holds first.
    pub force: Option<bool>,
}

/// Destroy a dataset.
#[utoipa::path(delete, path = "/api/v1/datasets/{name}", tag = "datasets",
    params(("name" = String, Path, description = "dataset name ('/' as %2F)"), DestroyQuery),
    security(("token" = [])),
    responses((status = 200, description = "Destroyed", body = Value),
              (status = "4XX", description = "Refused (busy, has children); nothing changed", body = ErrorBody)))]
async fn destroy_dataset(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Q(q): Q<DestroyQuery>,
    _b: Body<NoBody>,
) -> ApiResult {
    not_snapshot(&name)?;
    run(
        d,
        DsDestroy {
            name,
            recursive: q.recursive.unwrap_or(false),
            force: q.force.unwrap_or(false),
        },
    )
    .await
}

/// A property value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValueBody {
    pub value: String,
}

/// Set one property.
#[utoipa::path(put, path = "/api/v1/datasets/{name}/properties/{prop}", tag = "datasets",
    params(("name" = String, Path, description = "dataset or snapshot ('/' as %2F)"),
           ("prop" = String, Path, description = "property name")),
    request_body = ValueBody, security(("token" = [])),
    responses((status = 200, description = "Set", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn set_property(
    State(d): D,
    _a: Auth,
    Path((name, prop)): Path<(String, String)>,
    Body(b): Body<ValueBody>,
) -> ApiResult {
    run(
        d,
        DsSet {
            name,
            prop,
            value: b.value,
        },
    )
    .await
}

/// Reset a property to its inherited value.
#[utoipa::path(delete, path = "/api/v1/datasets/{name}/properties/{prop}", tag = "datasets",
    params(("name" = String, Path, description = "dataset ('/' as %2F)"),
           ("prop" = String, Path, description = "property name")),
    security(("token" = [])),
    responses((status = 200, description = "Inherited", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn inherit_property(
    State(d): D,
    _a: Auth,
    Path((name, prop)): Path<(String, String)>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, DsInherit { name, prop }).await
}

/// Make a clone independent of its origin snapshot.
#[utoipa::path(post, path = "/api/v1/datasets/{name}/promote", tag = "snapshots",
    params(("name" = String, Path, description = "the clone ('/' as %2F)")),
    security(("token" = [])),
    responses((status = 200, description = "Promoted", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn promote_dataset(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, SnapPromote { name }).await
}

// ---- snapshots ----

/// Which snapshots to list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SnapListQuery {
    /// Only this dataset's snapshots (with `recursive`, its descendants' too).
    pub dataset: Option<String>,
    pub recursive: Option<bool>,
    /// Extra property columns, comma-separated (e.g. `creation,written`).
    pub props: Option<String>,
}

/// List snapshots, each dataset's oldest first.
#[utoipa::path(get, path = "/api/v1/snapshots", tag = "snapshots", params(SnapListQuery),
    responses((status = 200, description = "One row per snapshot", body = Value),
              (status = "4XX", description = "Bad filter", body = ErrorBody)))]
async fn list_snapshots(State(d): D, Q(q): Q<SnapListQuery>) -> ApiResult {
    let recursive = q.recursive.unwrap_or(false);
    let props = split_list(q.props);
    let props = if props.is_empty() {
        vec![]
    } else {
        let mut p = vec!["name".to_string()];
        p.extend(props);
        p
    };
    run(
        d,
        DsList {
            name: q.dataset,
            recursive,
            depth: None,
            kind: Some("snapshot".into()),
            props,
        },
    )
    .await
}

/// Take one atomic snapshot of one or more filesystems.
#[utoipa::path(post, path = "/api/v1/snapshots", tag = "snapshots", request_body = SnapCreate,
    security(("token" = [])),
    responses((status = 200, description = "Taken: {snapshots, txg}", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn create_snapshot(State(d): D, _a: Auth, Body(r): Body<SnapCreate>) -> ApiResult {
    run(d, r).await
}

/// The properties of a snapshot (all, or those asked for).
#[utoipa::path(get, path = "/api/v1/snapshots/{name}", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)"), PropsQuery),
    responses((status = 200, description = "Rows: name, property, value, raw, source", body = Value),
              (status = 404, description = "No such snapshot", body = ErrorBody)))]
async fn get_snapshot(State(d): D, Path(name): Path<String>, Q(q): Q<PropsQuery>) -> ApiResult {
    snapshot_only(&name)?;
    run(
        d,
        DsGet {
            name,
            props: split_list(q.props),
        },
    )
    .await
}

/// Destroy a snapshot.
#[utoipa::path(delete, path = "/api/v1/snapshots/{name}", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)"), DestroyQuery),
    security(("token" = [])),
    responses((status = 200, description = "Destroyed", body = Value),
              (status = "4XX", description = "Refused (held, has clones); nothing changed", body = ErrorBody)))]
async fn destroy_snapshot(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Q(q): Q<DestroyQuery>,
    _b: Body<NoBody>,
) -> ApiResult {
    snapshot_only(&name)?;
    if q.recursive.is_some() {
        return Err(ApiError::invalid(
            "recursive does not apply to a snapshot; destroy each one",
        ));
    }
    run(
        d,
        SnapDestroy {
            name,
            force: q.force.unwrap_or(false),
        },
    )
    .await
}

/// Options of a rollback.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackBody {
    /// Destroy the snapshots newer than this one (refused without it when any exist).
    #[serde(default)]
    pub recursive: bool,
}

/// Roll a filesystem back to a snapshot.
#[utoipa::path(post, path = "/api/v1/snapshots/{name}/rollback", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)")),
    request_body = RollbackBody, security(("token" = [])),
    responses((status = 200, description = "Rolled back", body = Value),
              (status = "4XX", description = "Refused (newer snapshots, busy); nothing changed", body = ErrorBody)))]
async fn rollback_snapshot(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<RollbackBody>,
) -> ApiResult {
    snapshot_only(&name)?;
    run(
        d,
        SnapRollback {
            name,
            recursive: b.recursive,
        },
    )
    .await
}

/// Where to clone a snapshot to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloneBody {
    /// The new filesystem, in the same pool.
    pub target: String,
    #[serde(default)]
    pub props: Option<Props>,
}

/// Create a writable clone of a snapshot.
#[utoipa::path(post, path = "/api/v1/snapshots/{name}/clone", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)")),
    request_body = CloneBody, security(("token" = [])),
    responses((status = 200, description = "Cloned: {\"name\": TARGET}", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn clone_snapshot(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<CloneBody>,
) -> ApiResult {
    snapshot_only(&name)?;
    run(
        d,
        SnapClone {
            name,
            target: b.target,
            props: b.props,
        },
    )
    .await
}

// ---- shares ----

/// Every share (NFS, iSCSI, NBD) with its clients and state.
#[utoipa::path(get, path = "/api/v1/shares", tag = "shares",
    responses((status = 200, description = "One row per share", body = Value)))]
async fn list_shares(State(d): D) -> ApiResult {
    run(d, ShareList {}).await
}

/// NFS share options.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NfsShareBody {
    /// The `sharenfs` value: `on`, or options with an allow-list such as
    /// `rw=192.168.1.0/24,ro=10.0.0.0/8` (default `on`).
    #[serde(default = "on")]
    pub options: String,
}

fn on() -> String {
    "on".into()
}

/// Share a filesystem over NFS (sets its `sharenfs` property).
#[utoipa::path(put, path = "/api/v1/shares/nfs/{name}", tag = "shares",
    params(("name" = String, Path, description = "filesystem ('/' as %2F)")),
    request_body = NfsShareBody, security(("token" = [])),
    responses((status = 200, description = "Shared", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn share_nfs(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<NfsShareBody>,
) -> ApiResult {
    if b.options == "off" {
        return Err(ApiError::invalid(
            "to stop sharing use DELETE /api/v1/shares/nfs/{name}",
        ));
    }
    run(
        d,
        DsSet {
            name,
            prop: "sharenfs".into(),
            value: b.options,
        },
    )
    .await
}

/// Stop sharing a filesystem over NFS (`sharenfs=off`).
#[utoipa::path(delete, path = "/api/v1/shares/nfs/{name}", tag = "shares",
    params(("name" = String, Path, description = "filesystem ('/' as %2F)")),
    security(("token" = [])),
    responses((status = 200, description = "Unshared", body = Value),
              (status = "4XX", description = "Refused; nothing changed", body = ErrorBody)))]
async fn unshare_nfs(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(
        d,
        DsSet {
            name,
            prop: "sharenfs".into(),
            value: "off".into(),
        },
    )
    .await
}

// ---- analytics ----

/// The statistics the daemon keeps, with their dimensions.
#[utoipa::path(get, path = "/api/v1/analytics/stats", tag = "analytics",
    responses((status = 200, description = "One row per statistic", body = Value)))]
async fn analytics_stats(State(d): D) -> ApiResult {
    run(d, AnalyticsList {}).await
}

/// A breakdown query.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ShowQuery {
    /// Statistic name, e.g. `nfs.ops`.
    pub stat: String,
    /// Dimension to break down by.
    pub by: Option<String>,
    /// `DIM=VALUE` filters, comma-separated.
    pub filter: Option<String>,
    /// Range such as `60s`, `1h` (default 60s), or `from`/`to`.
    pub last: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub top: Option<u64>,
}

/// A statistic's rate over a range, broken down by a dimension.
#[utoipa::path(get, path = "/api/v1/analytics/show", tag = "analytics", params(ShowQuery),
    responses((status = 200, description = "Totals and the breakdown", body = Value),
              (status = "4XX", description = "Bad query", body = ErrorBody)))]
async fn analytics_show(State(d): D, Q(q): Q<ShowQuery>) -> ApiResult {
    run(d, AnalyticsShow::from(q)).await
}

impl From<ShowQuery> for AnalyticsShow {
    fn from(q: ShowQuery) -> AnalyticsShow {
        AnalyticsShow {
            stat: q.stat,
            by: q.by,
            filters: split_list(q.filter),
            last: q.last,
            from: q.from,
            to: q.to,
            top: q.top,
        }
    }
}

// ---- jobs ----

/// Every job still kept (running ones and the latest finished).
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    responses((status = 200, description = "The jobs", body = Vec<Job>)))]
async fn list_jobs(State(d): D) -> Json<Vec<Job>> {
    Json(d.api.jobs.list())
}

/// One job: state, progress, the operation's status.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = u64, Path, description = "job id")),
    responses((status = 200, description = "The job", body = Job),
              (status = 404, description = "No such job", body = ErrorBody)))]
async fn get_job(State(d): D, Path(id): Path<String>) -> ApiResult<Json<Job>> {
    let n: u64 = id
        .parse()
        .map_err(|_| ApiError::invalid(format!("job id '{id}' is not a number")))?;
    d.api
        .jobs
        .get(n)
        .map(Json)
        .ok_or_else(|| ApiError::new("not_found", format!("job {n} does not exist")))
}

// ---- meta ----

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI description of every /api/v1 route", body = Value)))]
async fn openapi_json() -> impl IntoResponse {
    Json(openapi().clone())
}

/// The generic RPC endpoint the CLI's requests also travel on:
/// `{"op": "ds.create", "args": {...}}` → `{"ok": true, "result": ...}` or
/// `{"ok": false, "error": "...", "code": "not_found"}` (`code`: the stable error
/// codes of the resource routes). Read-only ops need no token.
#[utoipa::path(post, path = "/api/v1/call", tag = "meta", request_body = Value,
    security((), ("token" = [])),
    responses((status = 200, description = "The op ran (see ok; a failed op carries its code)", body = Value),
              (status = 400, description = "Malformed request or a query string", body = Value),
              (status = 401, description = "A change without a token", body = Value),
              (status = 403, description = "A change with an unknown or revoked token, or a token op", body = Value)))]
#[allow(dead_code)]
fn call_doc() {}

struct Security;

impl Modify for Security {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let c = api
            .components
            .get_or_insert_with(utoipa::openapi::Components::new);
        c.add_security_scheme(
            "token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Cachalot API", version = "1",
         description = "Resource API of the Cachalot daemon. Errors are {\"error\": {\"code\", \"message\"}}; \
                        changes need 'Authorization: Bearer TOKEN' (401 without, 403 with an unknown or revoked token)."),
    paths(call_doc),
    components(schemas(ErrorBody, ApiError)),
    modifiers(&Security)
)]
struct ApiDoc;

/// The routes with their description.
fn build() -> OpenApiRouter<Arc<Daemon>> {
    let r = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(list_pools, create_pool))
        .routes(routes!(pool_status, destroy_pool))
        .routes(routes!(export_pool))
        .routes(routes!(import_pool))
        .routes(routes!(scrub_pool))
        .routes(routes!(list_datasets, create_dataset))
        .routes(routes!(get_dataset, destroy_dataset))
        .routes(routes!(set_property, inherit_property))
        .routes(routes!(promote_dataset))
        .routes(routes!(list_snapshots, create_snapshot))
        .routes(routes!(get_snapshot, destroy_snapshot))
        .routes(routes!(rollback_snapshot))
        .routes(routes!(clone_snapshot))
        .routes(routes!(list_shares))
        .routes(routes!(share_nfs, unshare_nfs))
        .routes(routes!(analytics_stats))
        .routes(routes!(analytics_show))
        .routes(routes!(list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(openapi_json));
    let r = super::snapshot_routes::add(super::device_routes::add(r));
    let r = super::analytics_routes::add(r);
    super::setup_routes::add(super::mount_routes::add(super::mysql_routes::add(
        super::share_routes::add(super::job_routes::add(r)),
    )))
}

/// The `/api/v1` resource routes (merged into the HTTP router).
pub fn router() -> axum::Router<Arc<Daemon>> {
    build().split_for_parts().0
}

/// The OpenAPI document of every `/api/v1` route.
pub fn openapi() -> &'static utoipa::openapi::OpenApi {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| build().split_for_parts().1)
}
