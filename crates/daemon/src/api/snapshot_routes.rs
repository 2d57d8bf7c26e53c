//! Snapshot routes beyond create/list/destroy/rollback/clone (`routes.rs`):
//! `GET /api/v1/snapshots/{name}/diff` (the CLI's `cachalot diff`, [`SnapDiff`])
//! and the holds: `GET /api/v1/snapshots/{name}/holds`, `PUT|DELETE
//! /api/v1/snapshots/{name}/holds/{tag}` (`cachalot holds|hold|release`).
//!
//! Invariants: each route builds one typed request and runs it through
//! `Daemon::handle`, so names are checked by the daemon alone; reads take no
//! token, changes take [`Auth`] first.

use super::error::{ApiError, ErrorBody};
use super::requests::{SnapDiff, SnapHold, SnapHolds, SnapRelease};
use super::routes::{run, Auth, Body, NoBody, Q};
use crate::daemon::Daemon;
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;
type ApiResult = Result<Json<Value>, ApiError>;

/// What to compare a snapshot with.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DiffQuery {
    /// A later snapshot of the same filesystem (FS@SNAP2), or the filesystem
    /// itself (its state now; the default).
    pub to: Option<String>,
}

/// What changed since a snapshot, as `zfs diff`: one row per changed path,
/// `change` M (modified), + (created), - (removed) or R (renamed, with
/// `new_path`), `type` as zfs diff -F (F file, / directory, @ symlink...),
/// paths from the filesystem's root.
#[utoipa::path(get, path = "/api/v1/snapshots/{name}/diff", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)"), DiffQuery),
    responses((status = 200, description = "{from, to, changes: [{change, type, path, new_path?}]}", body = Value),
              (status = "4XX", description = "No such snapshot, not later, another filesystem's, a volume", body = ErrorBody)))]
async fn diff_snapshot(State(d): D, Path(name): Path<String>, Q(q): Q<DiffQuery>) -> ApiResult {
    run(d, SnapDiff { name, to: q.to }).await
}

/// The holds (tags) of a snapshot.
#[utoipa::path(get, path = "/api/v1/snapshots/{name}/holds", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)")),
    responses((status = 200, description = "{name, holds: [TAG]}", body = Value),
              (status = 404, description = "No such snapshot", body = ErrorBody)))]
async fn list_holds(State(d): D, Path(name): Path<String>) -> ApiResult {
    run(d, SnapHolds { name }).await
}

/// Put hold `tag` on a snapshot: it cannot be destroyed while held.
#[utoipa::path(put, path = "/api/v1/snapshots/{name}/holds/{tag}", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)"),
           ("tag" = String, Path, description = "the hold's name")),
    security(("token" = [])),
    responses((status = 200, description = "Held: {name, tag}", body = Value),
              (status = "4XX", description = "Refused (no such snapshot, held by that tag already); nothing changed", body = ErrorBody)))]
async fn hold_snapshot(
    State(d): D,
    _a: Auth,
    Path((name, tag)): Path<(String, String)>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, SnapHold { name, tag }).await
}

/// Release hold `tag` of a snapshot.
#[utoipa::path(delete, path = "/api/v1/snapshots/{name}/holds/{tag}", tag = "snapshots",
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)"),
           ("tag" = String, Path, description = "the hold's name")),
    security(("token" = [])),
    responses((status = 200, description = "Released: {name, tag}", body = Value),
              (status = "4XX", description = "Refused (no such snapshot or hold); nothing changed", body = ErrorBody)))]
async fn release_snapshot(
    State(d): D,
    _a: Auth,
    Path((name, tag)): Path<(String, String)>,
    _b: Body<NoBody>,
) -> ApiResult {
    run(d, SnapRelease { name, tag }).await
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(diff_snapshot))
        .routes(routes!(list_holds))
        .routes(routes!(hold_snapshot, release_snapshot))
}
