//! Routes of long operations beyond scrub, and the job event stream:
//! - `POST /api/v1/pools/{pool}/replace` swaps a device and answers 202 with a
//!   `resilver` job (the scan the replace starts);
//! - `POST /api/v1/snapshots/{name}/send` sends a snapshot (full or incremental)
//!   into a new file on the daemon's machine as a `send` job with progress in
//!   bytes; the file holds exactly what `cachalot send` writes, so `cachalot
//!   receive` (here or on another machine) takes it;
//! - `GET /api/v1/jobs/{id}/events` streams a job as server-sent events until it
//!   ends.
//!
//! Invariants:
//! - A job is made only after its operation started (as in [`super::jobs`]): a
//!   refused replace answers with the error, and no job.
//! - The event stream sends the job's JSON each time it changes (`progress`),
//!   every kept change even when several happened between two looks (see
//!   [`super::jobs::CHANGES_KEPT`]), then once with the final state (`done` or
//!   `failed`) and ends; it also ends when the job is dropped or the daemon
//!   shuts down, so it never outlives its job, and it always reaches the job's
//!   current state whatever `Last-Event-ID` a client sends.
//! - A send never overwrites: the file must not exist (it is created new, mode
//!   0600, in an existing directory); a send that fails removes its file, so a
//!   file left by a `done` job is always a whole stream.

use super::error::{ApiError, ErrorBody};
use super::jobs::{self, Job};
use super::requests::{PoolReplace, Size};
use super::routes::{run, Auth, Body};
use crate::daemon::Daemon;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures_util::Stream;
use serde::Deserialize;
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type D = State<Arc<Daemon>>;

/// How often the event stream looks at its job.
const EVENT_POLL: Duration = Duration::from_millis(200);

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

/// Where to send a snapshot.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendBody {
    /// A new file (absolute path, in an existing directory; never overwritten).
    pub file: String,
    /// Incremental from this older snapshot of the same filesystem (`@A`, `A` or `FS@A`).
    #[serde(default)]
    pub from: Option<String>,
}

/// A writer that fails once the daemon shuts down, so a send job ends with it.
struct UntilShutdown<'a, W> {
    inner: W,
    d: &'a Daemon,
}

impl<W: Write> Write for UntilShutdown<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.d.is_shutting_down() {
            return Err(std::io::Error::other("the daemon is shutting down"));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Send a snapshot into a new file as a job (the CLI's `cachalot send SNAP >
/// FILE`, run by the daemon); `progress` is bytes written over the estimate,
/// `detail` has `bytes`, `estimated_bytes` and `file`.
#[utoipa::path(post, path = "/api/v1/snapshots/{name}/send", tag = "snapshots", request_body = SendBody,
    params(("name" = String, Path, description = "FS@SNAP ('/' as %2F)")), security(("token" = [])),
    responses((status = 202, description = "Checked and started", body = Job),
              (status = "4XX", description = "Refused (no such snapshot, file exists, relative path); nothing changed", body = ErrorBody)))]
async fn send_snapshot(
    State(d): D,
    _a: Auth,
    Path(name): Path<String>,
    Body(b): Body<SendBody>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    let file = PathBuf::from(&b.file);
    if !file.is_absolute() {
        return Err(ApiError::invalid(format!(
            "file must be an absolute path, not '{}'",
            b.file
        )));
    }
    let dd = d.clone();
    let snapshot = name.clone();
    let (prepared, out) = tokio::task::spawn_blocking(move || {
        let p = crate::daemon::guarded("send", || dd.prepare_send(snapshot, b.from))
            .map_err(ApiError::from_daemon)?;
        let out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .map_err(|e| {
                let code = match e.kind() {
                    std::io::ErrorKind::AlreadyExists => "already_exists",
                    std::io::ErrorKind::NotFound => "not_found",
                    _ => "failed",
                };
                ApiError::new(code, format!("{}: {}", file.display(), e))
            })?;
        Ok::<_, ApiError>((p, (out, file)))
    })
    .await
    .map_err(|e| ApiError::new("internal", format!("internal error: {e}")))??;
    let (out, file) = out;
    let job = jobs::spawn(d, "send", &name, move |d, progress| {
        let estimate = prepared.estimate;
        let detail =
            |bytes: u64| json!({ "bytes": bytes, "estimated_bytes": estimate, "file": file });
        let mut w = UntilShutdown {
            inner: std::io::BufWriter::new(&out),
            d,
        };
        let sent = prepared
            .store
            .send(
                &prepared.snapshot,
                prepared.from.as_deref(),
                &mut w,
                &mut |n| progress.set(Some(n as f64 / estimate.max(1) as f64), detail(n)),
            )
            .map_err(|e| e.to_string())
            .and_then(|stats| {
                w.flush().map_err(|e| e.to_string())?;
                out.sync_all().map_err(|e| e.to_string())?;
                Ok(stats.bytes)
            });
        match sent {
            Ok(bytes) => {
                eprintln!(
                    "cachalot: sent '{}' to {}: {bytes} bytes",
                    prepared.snapshot,
                    file.display()
                );
                Ok(detail(bytes))
            }
            Err(e) => {
                let _ = std::fs::remove_file(&file);
                Err(format!(
                    "send of '{}' to {}: {e}",
                    prepared.snapshot,
                    file.display()
                ))
            }
        }
    })
    .map_err(|e| ApiError::new("internal", e))?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// A job's progress as server-sent events: `progress` with the job's JSON each
/// time it changes, then `done` or `failed` with its final JSON, then the end.
/// Each event's id is the job's change number; a stream of a finished job is its
/// final state only; `Last-Event-ID` resumes after that change.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/events", tag = "jobs",
    params(("id" = u64, Path, description = "job id"),
           ("Last-Event-ID" = Option<u64>, Header, description = "go on after this change (an earlier event's id)")),
    responses((status = 200, description = "text/event-stream of the job's JSON", content_type = "text/event-stream", body = String),
              (status = 404, description = "No such job", body = ErrorBody)))]
async fn job_events(
    State(d): D,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let n: u64 = id
        .parse()
        .map_err(|_| ApiError::invalid(format!("job id '{id}' is not a number")))?;
    // A browser's EventSource that reconnects says which event it saw last (each
    // event's id is the job's change number): go on after it.
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let Some(start) = d.api.jobs.stream_start(n, after) else {
        return Err(ApiError::new(
            "not_found",
            format!("job {n} does not exist"),
        ));
    };
    // State: the job, the number of the last change sent, the changes fetched
    // but not yet sent, and whether the final state was sent.
    let stream = futures_util::stream::unfold(
        (d, n, start, VecDeque::<(u64, Job)>::new(), false),
        |(d, n, mut sent, mut pending, ended)| async move {
            if ended {
                return None;
            }
            loop {
                if let Some((seq, job)) = pending.pop_front() {
                    sent = seq;
                    let finished = job.state != "running";
                    let kind = if finished {
                        job.state.as_str()
                    } else {
                        "progress"
                    };
                    let body = serde_json::to_string(&job).unwrap_or_default();
                    let ev = Event::default().event(kind).id(seq.to_string()).data(body);
                    return Some((Ok(ev), (d, n, sent, pending, finished)));
                }
                let Some(changes) = d.api.jobs.changes_after(n, sent) else {
                    let ev = Event::default()
                        .event("gone")
                        .data(format!("job {n} was dropped"));
                    return Some((Ok(ev), (d, n, sent, pending, true)));
                };
                if changes.is_empty() {
                    if d.is_shutting_down() {
                        return None;
                    }
                    tokio::time::sleep(EVENT_POLL).await;
                }
                pending.extend(changes);
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Add these routes (with their description) to the API's router.
pub fn add(r: OpenApiRouter<Arc<Daemon>>) -> OpenApiRouter<Arc<Daemon>> {
    r.routes(routes!(replace_device))
        .routes(routes!(send_snapshot))
        .routes(routes!(job_events))
}
