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
//! - Every change of a job gets the next number of that job's change sequence,
//!   and its last [`CHANGES_KEPT`] states are kept with their numbers, so an
//!   event stream that looks less often than the job changes still sends each
//!   step (a MySQL clone's "starting the server" lasts a few milliseconds); an
//!   update that changes nothing makes no change.

use crate::api::requests::{Op, PoolStatus};
use crate::daemon::Daemon;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;

/// Finished jobs kept for polling.
pub const MAX_FINISHED: usize = 256;

/// States of one job kept for its event streams. A stream looks every 200 ms and
/// a scan changes its job every 100 ms, so 16 leaves a stream far behind room to
/// catch up; one that falls further behind skips to the oldest kept state.
pub const CHANGES_KEPT: usize = 16;

/// One job as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
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

/// A job with its last states, numbered by its change sequence (the newest last;
/// its state is the job as it is now).
struct Tracked {
    recent: VecDeque<(u64, Job)>,
}

impl Tracked {
    fn now(&self) -> &Job {
        &self.recent.back().expect("a tracked job has a state").1
    }
}

/// The jobs of one daemon.
#[derive(Default)]
pub struct Jobs {
    jobs: Mutex<BTreeMap<u64, Tracked>>,
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
        let recent = VecDeque::from([(1, job.clone())]);
        self.jobs.lock().insert(id, Tracked { recent });
        job
    }

    fn update(&self, id: u64, f: impl FnOnce(&mut Job)) {
        let mut jobs = self.jobs.lock();
        if let Some(t) = jobs.get_mut(&id) {
            let (seq, old) = t.recent.back().expect("a tracked job has a state");
            let mut job = old.clone();
            f(&mut job);
            if job != *old {
                let seq = seq + 1;
                if t.recent.len() == CHANGES_KEPT {
                    t.recent.pop_front();
                }
                t.recent.push_back((seq, job));
            }
        }
        let finished: Vec<u64> = jobs
            .values()
            .map(Tracked::now)
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
        self.jobs.lock().get(&id).map(|t| t.now().clone())
    }

    pub fn list(&self) -> Vec<Job> {
        self.jobs.lock().values().map(|t| t.now().clone()).collect()
    }

    /// Where a new event stream of job `id` starts (the `seq` to give
    /// [`Jobs::changes_after`]): after change `after` when the client names one
    /// (`Last-Event-ID`), else a running job's stream sends every kept state and
    /// a finished job's only its final state. Never past the job's current
    /// state, which is always sent: a number from the future (a hostile or
    /// confused client) would otherwise wait for a change that never comes.
    /// None when there is no such job.
    pub fn stream_start(&self, id: u64, after: Option<u64>) -> Option<u64> {
        let jobs = self.jobs.lock();
        let (seq, job) = jobs.get(&id)?.recent.back()?;
        let default = if job.state == "running" { 0 } else { seq - 1 };
        Some(after.map_or(default, |a| a.min(seq - 1)))
    }

    /// The kept states of job `id` numbered after `seq`, oldest first (empty when
    /// it has not changed since), or None when there is no such job (any more).
    /// Numbers start at 1, so `seq` 0 gives every kept state.
    pub fn changes_after(&self, id: u64, seq: u64) -> Option<Vec<(u64, Job)>> {
        let jobs = self.jobs.lock();
        let t = jobs.get(&id)?;
        Some(t.recent.iter().filter(|(s, _)| *s > seq).cloned().collect())
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

    fn step(j: &Jobs, id: u64, name: &str) {
        j.update(id, |x| x.detail = serde_json::json!({ "step": name }));
    }

    fn steps(changes: &[(u64, Job)]) -> Vec<String> {
        changes
            .iter()
            .map(|(_, x)| x.detail["step"].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn every_change_is_kept_for_a_stream_that_looks_late() {
        let j = Jobs::default();
        let id = j.add("mysql-clone", "t").id;
        for name in ["check", "clone", "start", "start", "replicate"] {
            step(&j, id, name);
        }
        let all = j.changes_after(id, 0).unwrap();
        // The job as added, then each step once: the repeated "start" changed nothing.
        assert_eq!(steps(&all), ["", "check", "clone", "start", "replicate"]);
        let numbers: Vec<u64> = all.iter().map(|(s, _)| *s).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5]);
        assert_eq!(
            steps(&j.changes_after(id, 3).unwrap()),
            ["start", "replicate"]
        );
        assert!(j.changes_after(id, 5).unwrap().is_empty());
        assert_eq!(j.get(id).unwrap().detail["step"], "replicate");
        assert!(j.changes_after(id + 1, 0).is_none());
        assert_eq!(
            j.stream_start(id, None),
            Some(0),
            "a running job's stream sends all"
        );
        j.update(id, |x| x.state = "done".into());
        let start = j.stream_start(id, None).unwrap();
        let last = j.changes_after(id, start).unwrap();
        assert_eq!(
            last.len(),
            1,
            "a finished job's stream sends its final state"
        );
        assert_eq!(last[0].1.state, "done");
        assert!(j.stream_start(id + 1, None).is_none());
        // A client's last event id resumes after it, but never past the end.
        assert_eq!(j.stream_start(id, Some(2)), Some(2));
        assert_eq!(j.stream_start(id, Some(999)), Some(start));
    }

    #[test]
    fn a_stream_far_behind_gets_the_newest_states_kept() {
        let j = Jobs::default();
        let id = j.add("scrub", "t").id;
        for i in 0..CHANGES_KEPT * 2 {
            step(&j, id, &i.to_string());
        }
        let kept = j.changes_after(id, 0).unwrap();
        assert_eq!(kept.len(), CHANGES_KEPT);
        assert_eq!(kept.last().unwrap().0, 1 + 2 * CHANGES_KEPT as u64);
        assert_eq!(
            steps(&kept).last().unwrap(),
            &(CHANGES_KEPT * 2 - 1).to_string()
        );
    }
}
