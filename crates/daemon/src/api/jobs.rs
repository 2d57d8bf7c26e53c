//! Long operations behind the REST API: the request starts the work and answers at
//! once (202) with a job; `GET /api/v1/jobs/ID` shows its state and progress.
//!
//! Invariants:
//! - A job is created only after its operation has started: a request that is
//!   refused (bad name, busy pool) gets an error, never a job that fails later
//!   for the same reason.
//! - Each job has one thread (watching the work, or doing it, see [`spawn`]); it
//!   ends when the work ends or the daemon shuts down, so no thread outlives the
//!   daemon's pools.
//! - At most [`MAX_FINISHED`] finished jobs are kept (oldest dropped first);
//!   running jobs are never dropped.

use crate::api::requests::{Op, PoolStatus};
use crate::daemon::Daemon;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;

/// Finished jobs kept for polling.
pub const MAX_FINISHED: usize = 256;

/// One job as the API shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Job {
    pub id: u64,
    /// What runs, e.g. `scrub`.
    pub kind: String,
    /// What it runs on, e.g. the pool name.
    pub target: String,
    /// `running`, `done` or `failed`.
    pub state: String,
    /// Fraction done, 0 to 1, when known.
    pub progress: Option<f64>,
    /// The operation's own status (for a scrub: examined, errors, repaired...).
    #[schema(value_type = Object)]
    pub detail: Value,
    pub error: Option<String>,
    /// Unix seconds.
    pub started: u64,
    pub ended: Option<u64>,
}

/// The jobs of one daemon.
#[derive(Default)]
pub struct Jobs {
    jobs: Mutex<BTreeMap<u64, Job>>,
    next: Mutex<u64>,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Jobs {
    fn add(&self, kind: &str, target: &str) -> Job {
        let id = {
            let mut n = self.next.lock();
            *n += 1;
            *n
        };
        let job = Job {
            id,
            kind: kind.into(),
            target: target.into(),
            state: "running".into(),
            progress: Some(0.0),
            detail: Value::Null,
            error: None,
            started: now_secs(),
            ended: None,
        };
        self.jobs.lock().insert(id, job.clone());
        job
    }

    fn update(&self, id: u64, f: impl FnOnce(&mut Job)) {
        let mut jobs = self.jobs.lock();
        if let Some(j) = jobs.get_mut(&id) {
            f(j);
        }
        let finished: Vec<u64> = jobs
            .values()
            .filter(|j| j.state != "running")
            .map(|j| j.id)
            .collect();
        for id in finished
            .iter()
            .take(finished.len().saturating_sub(MAX_FINISHED))
        {
            jobs.remove(id);
        }
    }

    pub fn get(&self, id: u64) -> Option<Job> {
        self.jobs.lock().get(&id).cloned()
    }

    pub fn list(&self) -> Vec<Job> {
        self.jobs.lock().values().cloned().collect()
    }
}

/// What a job's work tells about its progress.
pub struct JobProgress<'a> {
    jobs: &'a Jobs,
    id: u64,
}

impl JobProgress<'_> {
    /// The fraction done (when known) and the work's own status so far.
    pub fn set(&self, progress: Option<f64>, detail: Value) {
        self.jobs.update(self.id, |j| {
            j.progress = progress.map(|p| p.clamp(0.0, 1.0));
            j.detail = detail;
        });
    }
}

/// Do `work` as a job of `kind` on `target`, on a thread of its own. Its result
/// becomes the finished job's `detail`, its error (or a panic, as an internal
/// error) the job's `error`. The caller has checked the request (see the module's
/// invariant); the work ends early when the daemon shuts down because every
/// request it makes is then refused.
pub fn spawn<F>(d: Arc<Daemon>, kind: &str, target: &str, work: F) -> Result<Job, String>
where
    F: FnOnce(&Arc<Daemon>, &JobProgress) -> Result<Value, String> + Send + 'static,
{
    let job = d.api.jobs.add(kind, target);
    let (id, kind) = (job.id, kind.to_string());
    std::thread::Builder::new()
        .name("cachalot-job".into())
        .spawn(move || {
            let progress = JobProgress {
                jobs: &d.api.jobs,
                id,
            };
            let done =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&d, &progress)))
                    .unwrap_or_else(|p| {
                        Err(format!(
                            "internal error in the {kind} job: {}",
                            crate::daemon::panic_message(&p)
                        ))
                    });
            d.api.jobs.update(id, |j| {
                match done {
                    Ok(v) => {
                        j.state = "done".into();
                        j.progress = Some(1.0);
                        j.detail = v;
                    }
                    Err(e) => {
                        j.state = "failed".into();
                        j.error = Some(crate::proto::one_line(&e));
                    }
                }
                j.ended = Some(now_secs());
            });
        })
        .map_err(|e| format!("cannot start a job thread: {e}"))?;
    Ok(job)
}

/// Watch the scrub of `pool` (already started) as a job.
pub fn watch_scrub(d: Arc<Daemon>, pool: &str) -> Result<Job, String> {
    watch_scan(d, pool, "scrub")
}

/// Watch the scan of `pool` (already started: a scrub, or the resilver a
/// replace starts) as a job of `kind`. Both report through the pool status's
/// `scrub` object, whose `kind` says which scan runs.
pub fn watch_scan(d: Arc<Daemon>, pool: &str, kind: &str) -> Result<Job, String> {
    let job = d.api.jobs.add(kind, pool);
    let (id, pool) = (job.id, pool.to_string());
    let dd = d.clone();
    std::thread::Builder::new()
        .name("cachalot-job".into())
        .spawn(move || scrub_watcher(&dd, id, &pool))
        .map_err(|e| format!("cannot start a job thread: {e}"))?;
    Ok(job)
}

fn scrub_watcher(d: &Daemon, id: u64, pool: &str) {
    let status = PoolStatus {
        name: Some(pool.to_string()),
    }
    .request();
    loop {
        if d.is_shutting_down() {
            d.api.jobs.update(id, |j| {
                j.state = "failed".into();
                j.error = Some("the daemon is shutting down".into());
                j.ended = Some(now_secs());
            });
            return;
        }
        match d.handle(&status).into_result() {
            Err(e) => {
                d.api.jobs.update(id, |j| {
                    j.state = "failed".into();
                    j.error = Some(e);
                    j.ended = Some(now_secs());
                });
                return;
            }
            Ok(v) => {
                let scrub = v[0]["scrub"].clone();
                let examined = scrub["examined"].as_f64().unwrap_or(0.0);
                let total = scrub["total"].as_f64().unwrap_or(0.0);
                let running = scrub["state"] == "scanning";
                d.api.jobs.update(id, |j| {
                    j.progress = Some(if running {
                        if total > 0.0 {
                            (examined / total).min(1.0)
                        } else {
                            0.0
                        }
                    } else {
                        1.0
                    });
                    j.detail = scrub.clone();
                    if !running {
                        j.state = "done".into();
                        j.ended = Some(now_secs());
                    }
                });
                if !running {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_jobs_are_bounded() {
        let j = Jobs::default();
        let first = j.add("scrub", "t").id;
        for _ in 0..MAX_FINISHED + 10 {
            let id = j.add("scrub", "t").id;
            j.update(id, |x| x.state = "done".into());
        }
        assert!(j.get(first).is_some(), "a running job is never dropped");
        assert_eq!(j.list().len(), MAX_FINISHED + 1);
    }
}
