//! A pool's devices as resources (the CLI's `pool add|attach|detach|online|
//! offline|remove|clear` requests):
//! - `POST /api/v1/pools/{pool}/devices` adds vdevs (`["mirror", "/d/a", "/d/b"]`,
//!   or `cache`/`log`/`spare` devices);
//! - `POST /api/v1/pools/{pool}/devices/{device}/attach` mirrors a device onto a
//!   new one and answers 202 with the `resilver` job, as replace does;
//! - `POST .../devices/{device}/detach|online|offline` and
//!   `DELETE .../devices/{device}` act on one device;
//! - `POST /api/v1/pools/{pool}/clear` brings a suspended pool back.
//!
//! `{device}` is a device's path as `pool status` shows it (percent-encoded:
//! `%2Fdisks%2Fa.img`) or its guid.
//!
//! Invariants: each route builds one typed request and runs it through
//! `Daemon::handle`, so the pool alone decides what may change (a last replica
//! is never detached or taken offline) and a refusal changes nothing; a job is
//! made only once its attach went through; every change takes [`Auth`] first.

use super::error::{ApiError, ErrorBody};
use super::jobs::{self, Job};
use super::requests::{
    PoolAdd, PoolAttach, PoolClear, PoolDetach, PoolOffline, PoolOnline, PoolRemove, Size,
};
use super::routes::{run, Auth, Body, NoBody};
use crate::daemon::Daemon;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;
type ApiResult = Result<Json<Value>, ApiError>;

/// The vdevs to add (the pool is in the path).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddBody {
    /// Absolute device paths and vdev words, as at pool create:
    /// `["mirror", "/d/c.img", "/d/d.img"]`, `["cache", "/d/ssd.img"]`.
    pub vdevs: Vec<String>,
    /// Size of device files to create.
    #[serde(default)]
    pub size: Option<Size>,
    #[serde(default)]
    pub force: bool,
}

/// The device to mirror onto (the pool and the device are in the path).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachBody {
    /// The new device's absolute path.
    pub new: String,
    /// Size of `new` when it is a file to create.
    #[serde(default)]
    pub size: Option<Size>,
    #[serde(default)]
    pub force: bool,
}

/// Add vdevs to a pool.
#[utoipa::path(post, path = "/api/v1/pools/{pool}/devices", tag = "pools", request_body = AddBody,
    params(("pool" = String, Path, description = "pool name")), security(("token" = [])),
    responses((status = 200, description = "Added", body = Value),
              (status = "4XX", description = "Refused (no such pool, device in use, bad vdev words); nothing changed", body = ErrorBody)))]
async fn add_devices(
    State(d): D,
    _a: Auth,
    Path(pool): Path<String>,
    Body(b): Body<AddBody>,
) -> ApiResult {
    run(
        d,
        PoolAdd {
            name: pool,
            vdevs: b.vdevs,
            size: b.size,
            force: b.force,
        },
    )
    .await
}

/// Mirror a device onto a new one and resilver; answers at once with a
/// `resilver` job to poll at `/api/v1/jobs/{id}` or stream at `.../events`.
#[utoipa::path(post, path = "/api/v1/pools/{pool}/devices/{device}/attach", tag = "pools", request_body = AttachBody,
    params(("pool" = String, Path, description = "pool name"),
           ("device" = String, Path, description = "the device's path ('/' as %2F) or guid")),
    security(("token" = [])),
    responses((status = 202, description = "Attached; the resilver runs", body = Job),
              (status = "4XX", description = "Refused (no such pool or device, device in use); nothing changed", body = ErrorBody)))]
async fn attach_device(
    State(d): D,
    _a: Auth,
    Path((pool, device)): Path<(String, String)>,
    Body(b): Body<AttachBody>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    let req = PoolAttach {
        name: pool.clone(),
        device,
        new: b.new,
        size: b.size,
        force: b.force,
    };
    let _attached = run(d.clone(), req).await?;
    let job = jobs::watch_scan(d, &pool, "resilver").map_err(|e| ApiError::new("internal", e))?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// Detach a device from its mirror.
#[utoipa::path(post, path = "/api/v1/pools/{pool}/devices/{device}/detach", tag = "pools",
    params(("pool" = String, Path, description = "pool name"),
           ("device" = String, Path, description = "the device's path ('/' as %2F) or guid")),
    security(("token" = [])),
    responses((status = 200, description = "Detached", body = Value),
              (status = "4XX", description = "Refused (no such pool or device, not in a mirror, its last healthy copy); nothing changed", body = ErrorBody)))]
async fn detach_device(
    State(d): D,
    _a: Auth,
    Path((pool, device)): Path<(String, String)>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, PoolDetach { name: pool, device }).await
}

/// Stop all I/O to a device (kept across restarts) until it is brought online.
#[utoipa::path(post, path = "/api/v1/pools/{pool}/devices/{device}/offline", tag = "pools",
    params(("pool" = String, Path, description = "pool name"),
           ("device" = String, Path, description = "the device's path ('/' as %2F) or guid")),
    security(("token" = [])),
    responses((status = 200, description = "Offline", body = Value),
              (status = "4XX", description = "Refused (no such pool or device, no other copy of its data); nothing changed", body = ErrorBody)))]
async fn offline_device(
    State(d): D,
    _a: Auth,
    Path((pool, device)): Path<(String, String)>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, PoolOffline { name: pool, device }).await
}

/// Bring an offline device back (what it missed is resilvered).
#[utoipa::path(post, path = "/api/v1/pools/{pool}/devices/{device}/online", tag = "pools",
    params(("pool" = String, Path, description = "pool name"),
           ("device" = String, Path, description = "the device's path ('/' as %2F) or guid")),
    security(("token" = [])),
    responses((status = 200, description = "Online", body = Value),
              (status = "4XX", description = "Refused (no such pool or device); nothing changed", body = ErrorBody)))]
async fn online_device(
    State(d): D,
    _a: Auth,
    Path((pool, device)): Path<(String, String)>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, PoolOnline { name: pool, device }).await
}

/// Remove a cache, log or spare device (or a top-level vdev where the pool can).
#[utoipa::path(delete, path = "/api/v1/pools/{pool}/devices/{device}", tag = "pools",
    params(("pool" = String, Path, description = "pool name"),
           ("device" = String, Path, description = "the device's path ('/' as %2F) or guid")),
    security(("token" = [])),
    responses((status = 200, description = "Removed", body = Value),
              (status = "4XX", description = "Refused (no such pool or device, cannot be removed); nothing changed", body = ErrorBody)))]
async fn remove_device(
    State(d): D,
    _a: Auth,
    Path((pool, device)): Path<(String, String)>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, PoolRemove { name: pool, device }).await
}

/// Bring a SUSPENDED pool back: re-import it from its last committed state (a
/// pool that is not suspended is left as it is).
#[utoipa::path(post, path = "/api/v1/pools/{pool}/clear", tag = "pools",
    params(("pool" = String, Path, description = "pool name")), security(("token" = [])),
    responses((status = 200, description = "{\"name\", \"health\", \"reimported\"}", body = Value),
              (status = "4XX", description = "Refused (no such pool, devices still failing); nothing changed", body = ErrorBody)))]
async fn clear_pool(
    State(d): D,
    _a: Auth,
    Path(pool): Path<String>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, PoolClear { name: pool }).await
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(add_devices))
        .routes(routes!(attach_device))
        .routes(routes!(detach_device))
        .routes(routes!(offline_device))
        .routes(routes!(online_device))
        .routes(routes!(remove_device))
        .routes(routes!(clear_pool))
}
