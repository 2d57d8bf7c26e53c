//! Routes of long operations beyond scrub, and the job event stream:
//! - `POST /api/v1/pools/{pool}/replace` swaps a device and answers 202 with a
//!   `resilver` job (the scan the replace starts);
//! - `GET /api/v1/jobs/{id}/events` streams a job as server-sent events until it
//!   ends.
//!
//! Invariants:
//! - A job is made only after its operation started (as in [`super::jobs`]): a
//!   refused replace answers with the error, and no job.
//! - The event stream sends the job's JSON each time it changes (`progress`), then
//!   once with the final state (`done` or `failed`) and ends; it also ends when
//!   the job is dropped or the daemon shuts down, so it never outlives its job.

use super::error::{ApiError, ErrorBody};
use super::jobs::{self, Job};
use super::requests::{Op, Size};
use super::routes::{run, Auth, Body};
use crate::daemon::Daemon;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;

/// How often the event stream looks at its job.
const EVENT_POLL: Duration = Duration::from_millis(200);

/// Replace device `old` of pool `name` with `new` and resilver (the CLI's
/// `pool replace`). Without `new`, a new disk took `old`'s place.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolReplace {
    pub name: String,
    pub old: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
    /// Size of `new` when it is a file to create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

impl Op for PoolReplace {
    const OP: &'static str = "pool.replace";
}

/// The body of a replace (the pool is in the path).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceBody {
    /// The device to replace (its path or name as `pool status` shows it).
    pub old: String,
    /// The new device's absolute path; left out: a new disk is at `old`'s path.
    #[serde(default)]
    pub new: Option<String>,
    #[serde(default)]
    pub size: Option<Size>,
    #[serde(default)]
    pub force: bool,
}

/// Replace a device and resilver; answers at once with a `resilver` job to poll
/// at `/api/v1/jobs/{id}` or stream at `/api/v1/jobs/{id}/events`.
#[utoipa::path(post, path = "/api/v1/pools/{pool}/replace", tag = "pools", request_body = ReplaceBody,
    params(("pool" = String, Path, description = "pool name")), security(("token" = [])),
    responses((status = 202, description = "Replaced; the resilver runs", body = Job),
              (status = "4XX", description = "Refused (no such pool or device, device in use); nothing changed", body = ErrorBody)))]
async fn replace_device(
    State(d): D,
    _a: Auth,
    Path(pool): Path<String>,
    Body(b): Body<ReplaceBody>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    let _replaced = run(
        d.clone(),
        PoolReplace {
            name: pool.clone(),
            old: b.old,
            new: b.new,
            size: b.size,
            force: b.force,
        },
    )
    .await?;
    let job = jobs::watch_scan(d, &pool, "resilver").map_err(|e| ApiError::new("internal", e))?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// A job's progress as server-sent events: `progress` with the job's JSON each
/// time it changes, then `done` or `failed` with its final JSON, then the end.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/events", tag = "jobs",
    params(("id" = u64, Path, description = "job id")),
    responses((status = 200, description = "text/event-stream of the job's JSON", content_type = "text/event-stream", body = String),
              (status = 404, description = "No such job", body = ErrorBody)))]
async fn job_events(
    State(d): D,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let n: u64 = id
        .parse()
        .map_err(|_| ApiError::invalid(format!("job id '{id}' is not a number")))?;
    if d.api.jobs.get(n).is_none() {
        return Err(ApiError::new(
            "not_found",
            format!("job {n} does not exist"),
        ));
    }
    let stream = futures_util::stream::unfold(
        (d, n, String::new(), false),
        |(d, n, last, ended)| async move {
            if ended {
                return None;
            }
            loop {
                let Some(job) = d.api.jobs.get(n) else {
                    let ev = Event::default()
                        .event("gone")
                        .data(format!("job {n} was dropped"));
                    return Some((Ok(ev), (d, n, last, true)));
                };
                let body = serde_json::to_string(&job).unwrap_or_default();
                let finished = job.state != "running";
                if body != last {
                    let kind = if finished {
                        job.state.as_str()
                    } else {
                        "progress"
                    };
                    let ev = Event::default().event(kind).data(body.clone());
                    return Some((Ok(ev), (d, n, body, finished)));
                }
                if d.is_shutting_down() {
                    return None;
                }
                tokio::time::sleep(EVENT_POLL).await;
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(replace_device))
        .routes(routes!(job_events))
}
