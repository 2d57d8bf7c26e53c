//! Local FUSE mounts as resources: `POST /api/v1/datasets/{name}/mount` and
//! `.../unmount` (the CLI's `cachalot mount` / `unmount` requests, [`FsMount`] and
//! [`FsUnmount`]), and `GET /api/v1/mounts` (what `cachalot mount` lists).
//!
//! Invariants: each route builds one typed request and runs it through
//! `Daemon::handle`, so the daemon alone decides what may be mounted where (an
//! absolute, existing, empty directory; a filesystem, not a volume; one mount per
//! dataset) and a refusal mounts nothing; every change takes [`Auth`] first.

use super::error::ApiError;
use super::error::ErrorBody;
use super::requests::{FsMount, FsMounts, FsUnmount};
use super::routes::{run, Auth, Body};
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
type ApiResult = Result<Json<Value>, ApiError>;

fn filesystem_name(name: &str) -> Result<(), ApiError> {
    if name.contains('@') {
        return Err(ApiError::invalid(format!(
            "'{name}' is a snapshot: only filesystems are mounted (clone it and mount the clone)"
        )));
    }
    Ok(())
}

/// Where to mount.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MountBody {
    /// An absolute path to an existing, empty directory (default: the
    /// dataset's `mountpoint` property).
    #[serde(default)]
    pub mountpoint: Option<String>,
}

/// How to unmount.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnmountBody {
    /// Unmount even when files are open inside (they lose access).
    #[serde(default)]
    pub force: bool,
}

/// Mount a filesystem over FUSE on this appliance.
#[utoipa::path(post, path = "/api/v1/datasets/{name}/mount", tag = "datasets",
    params(("name" = String, Path, description = "filesystem ('/' as %2F)")),
    request_body = MountBody, security(("token" = [])),
    responses((status = 200, description = "Mounted: {\"name\", \"path\"}", body = Value),
              (status = "4XX", description = "Refused (no such dataset, a volume, already mounted, \
               mount point relative, missing, not a directory or not empty); nothing mounted", body = ErrorBody)))]
async fn mount_dataset(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<MountBody>,
) -> ApiResult {
    filesystem_name(&name)?;
    run(
        d,
        FsMount {
            name,
            path: b.mountpoint,
        },
    )
    .await
}

/// Unmount a filesystem.
#[utoipa::path(post, path = "/api/v1/datasets/{name}/unmount", tag = "datasets",
    params(("name" = String, Path, description = "filesystem ('/' as %2F)")),
    request_body = UnmountBody, security(("token" = [])),
    responses((status = 200, description = "Unmounted", body = Value),
              (status = "4XX", description = "Refused (not mounted, busy); it stays as it was", body = ErrorBody)))]
async fn unmount_dataset(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<UnmountBody>,
) -> ApiResult {
    filesystem_name(&name)?;
    run(
        d,
        FsUnmount {
            name,
            force: b.force,
        },
    )
    .await
}

/// The filesystems mounted on this appliance.
#[utoipa::path(get, path = "/api/v1/mounts", tag = "datasets",
    responses((status = 200, description = "One row per mount: name, path", body = Value)))]
async fn list_mounts(State(d): D) -> ApiResult {
    run(d, FsMounts {}).await
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(mount_dataset))
        .routes(routes!(unmount_dataset))
        .routes(routes!(list_mounts))
}
