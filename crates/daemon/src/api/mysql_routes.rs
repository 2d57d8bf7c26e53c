//! The MySQL/MariaDB routes under `/api/v1/mysql`: snapshot sets (take, list),
//! clone (to a running replica) as a job, restore, advise. Each decodes the typed
//! request `cachalot mysql ...` builds (`cachalot_api_types::mysql`) and runs it
//! with the cachalot-mysql crate, the code the CLI runs; here that code reaches
//! the daemon by calling [`Daemon::handle`] directly instead of over the socket,
//! so every pool change it makes is an ordinary request, validated as the CLI's.
//!
//! Invariants:
//! - Every `POST` needs the token, `advise` too: each makes the daemon connect to
//!   a MySQL server. The list reads only snapshot properties and is open, as
//!   every other read on the (loopback) listener.
//! - A request the conversion refuses (relative path, bad names) is 400 and runs
//!   nothing; a clone is checked (set complete, targets free, `replica_of` the
//!   set's server) before its job exists, so a refused clone gets an error and no job.
//! - The MySQL password is the daemon's `$MYSQL_PWD` (or none: socket
//!   authentication as the daemon's user); no request carries one.

use super::error::{ApiError, ErrorBody};
use super::jobs::{self, Job};
use super::routes::{Auth, Body, Q};
use crate::daemon::Daemon;
use crate::proto::Request;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use cachalot_api_types::mysql::{MysqlAdvise, MysqlClone, MysqlList, MysqlRestore, MysqlSnapshot};
use cachalot_mysql::api as my;
use cachalot_mysql::daemon::Daemon as Link;
use serde_json::{json, Value};
use std::sync::Arc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;
type ApiResult<T = Json<Value>> = Result<T, ApiError>;

/// The daemon as the mysql crate's client: each request a call of `handle`.
pub fn local_link(d: &Arc<Daemon>) -> Link {
    let d = d.clone();
    Link::local(Arc::new(move |op: &str, args: Value| {
        d.handle(&Request::new(op, args)).into_result()
    }))
}

/// Run `f` with a local link on the blocking pool; its error with a code from
/// its message.
async fn blocking<T: Send + 'static>(
    d: Arc<Daemon>,
    f: impl FnOnce(&mut Link) -> Result<T, String> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || f(&mut local_link(&d)))
        .await
        .map_err(|e| ApiError::new("internal", format!("internal error: {e}")))?
        .map_err(ApiError::from_daemon)
}

/// The snapshot sets taken by a MySQL snapshot (`cachalot mysql list`).
#[utoipa::path(get, path = "/api/v1/mysql/snapshots", tag = "mysql",
    params(("pool" = Option<String>, Query, description = "only the sets of this pool")),
    responses((status = 200, description = "One row per set: name (its datadir member's snapshot), members, created, gtid, binlog position", body = Value),
              (status = "4XX", description = "Refused", body = ErrorBody)))]
async fn list_sets(State(d): D, Q(q): Q<MysqlList>) -> ApiResult {
    blocking(d, move |l| my::list(l, &q).map(Value::Array))
        .await
        .map(Json)
}

/// Take a consistent snapshot set of a server's datasets (`cachalot mysql
/// snapshot`): writes are blocked only for the atomic snapshot.
#[utoipa::path(post, path = "/api/v1/mysql/snapshots", tag = "mysql", request_body = MysqlSnapshot,
    security(("token" = [])),
    responses((status = 200, description = "Taken: the snapshots, the recorded position, how long writes were blocked", body = Value),
              (status = "4XX", description = "Refused (no such server or dataset, name in use); nothing changed", body = ErrorBody)))]
async fn take_set(State(d): D, _a: Auth, Body(r): Body<MysqlSnapshot>) -> ApiResult {
    my::snapshot_request(&r).map_err(ApiError::invalid)?;
    blocking(d, move |l| my::snapshot_json(l, &r))
        .await
        .map(Json)
}

/// Clone a snapshot set and (with `start` or `replica_of`) start a server on it
/// (`cachalot mysql clone`); answers at once with a `mysql-clone` job whose
/// `detail.step` names the step running, and whose final `detail` is the report.
#[utoipa::path(post, path = "/api/v1/mysql/clones", tag = "mysql", request_body = MysqlClone,
    security(("token" = [])),
    responses((status = 202, description = "Checked and started", body = Job),
              (status = "4XX", description = "Refused (no such set, target exists, wrong source server); nothing changed", body = ErrorBody)))]
async fn clone_set(
    State(d): D,
    _a: Auth,
    Body(r): Body<MysqlClone>,
) -> ApiResult<(StatusCode, Json<Job>)> {
    my::clone_request(&r).map_err(ApiError::invalid)?;
    let checked = r.clone();
    blocking(d.clone(), move |l| my::clone_check(l, &checked)).await?;
    let target = r.target.clone();
    let job = jobs::spawn(d, "mysql-clone", &target, move |d, progress| {
        my::clone_json(&mut local_link(d), &r, &mut |step, fraction| {
            progress.set(Some(fraction), json!({ "step": step }))
        })
    })
    .map_err(|e| ApiError::new("internal", e))?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// Roll every dataset of a snapshot set back (`cachalot mysql restore`); refused
/// while anything uses them.
#[utoipa::path(post, path = "/api/v1/mysql/restore", tag = "mysql", request_body = MysqlRestore,
    security(("token" = [])),
    responses((status = 200, description = "Rolled back: the snapshots and the mounts restored", body = Value),
              (status = "4XX", description = "Refused (in use, newer snapshots without recursive); nothing changed", body = ErrorBody)))]
async fn restore_set(State(d): D, _a: Auth, Body(r): Body<MysqlRestore>) -> ApiResult {
    blocking(d, move |l| my::restore_json(l, &r))
        .await
        .map(Json)
}

/// my.cnf and dataset advice for a running server (`cachalot mysql advise`);
/// without `arc_size`, the daemon's own ARC limit.
#[utoipa::path(post, path = "/api/v1/mysql/advise", tag = "mysql", request_body = MysqlAdvise,
    security(("token" = [])),
    responses((status = 200, description = "The server's version, its datadir's dataset and the advice (kind: mycnf, dataset, measure, ok)", body = Value),
              (status = "4XX", description = "Refused", body = ErrorBody)))]
async fn advise(State(d): D, _a: Auth, Body(mut r): Body<MysqlAdvise>) -> ApiResult {
    r.arc_size = r.arc_size.or(Some(d.arc_max()));
    blocking(d, move |l| my::advise_json(l, &r)).await.map(Json)
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(list_sets, take_set))
        .routes(routes!(clone_set))
        .routes(routes!(restore_set))
        .routes(routes!(advise))
}
