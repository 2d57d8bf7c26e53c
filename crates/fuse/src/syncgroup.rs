//! Group commit of fsync requests that does not hold FUSE threads.
//!
//! An fsync waits for an intent-log commit. The mount has `mount::THREADS`
//! event-loop threads: when every waiting fsync held one, 16 writers each doing
//! write + fdatasync had at most 8 requests in service, and their writes queued
//! behind the fsyncs. Here the first fsync commits on its own thread (the
//! leader); an fsync arriving meanwhile is queued with its reply and its thread
//! goes back to serving requests at once; when the commit ends, the leader
//! commits once more for everything queued and answers all of it.
//!
//! Invariants:
//! - A queued waiter is answered with the result of a commit that started after
//!   it was queued, so the commit covers every write its caller completed before
//!   asking (the commit makes everything logged so far durable).
//! - Every waiter is answered exactly once; at most one commit runs at a time.
//!   `commit` must not panic (the caller passes it through `catch_unwind`): a
//!   panic would leave the group marked running and later waiters unanswered.

use parking_lot::Mutex;

pub struct SyncGroup<W> {
    state: Mutex<State<W>>,
}

struct State<W> {
    /// A leader is committing.
    running: bool,
    /// Waiters that arrived while it was: the next commit is theirs.
    waiting: Vec<W>,
}

impl<W> Default for SyncGroup<W> {
    fn default() -> Self {
        SyncGroup {
            state: Mutex::new(State {
                running: false,
                waiting: Vec::new(),
            }),
        }
    }
}

impl<W> SyncGroup<W> {
    /// Make `waiter` durable: either commit now on this thread (and for every
    /// waiter queued meanwhile), or queue it for the running leader and return.
    /// `answer` gets each waiter with the result of the commit that covered it.
    pub fn sync<T: Clone>(&self, waiter: W, commit: impl Fn() -> T, answer: impl Fn(W, T)) {
        {
            let mut st = self.state.lock();
            if st.running {
                st.waiting.push(waiter);
                return;
            }
            st.running = true;
        }
        let mut batch = vec![waiter];
        loop {
            let r = commit();
            for w in batch.drain(..) {
                answer(w, r.clone());
            }
            let mut st = self.state.lock();
            if st.waiting.is_empty() {
                st.running = false;
                return;
            }
            std::mem::swap(&mut batch, &mut st.waiting);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Threads each asking 200 times: every request is answered once, by a
    /// commit that started after it was asked, and commits are shared.
    #[test]
    fn every_waiter_gets_a_later_commit() {
        let group = Arc::new(SyncGroup::<(u64, u64)>::default());
        let started = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (group, started, answered) = (group.clone(), started.clone(), answered.clone());
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let asked_after = started.load(Ordering::SeqCst);
                        group.sync(
                            (i, asked_after),
                            || {
                                let n = started.fetch_add(1, Ordering::SeqCst) + 1;
                                std::thread::sleep(std::time::Duration::from_micros(200));
                                n
                            },
                            |(_, asked_after), commit_no| {
                                assert!(commit_no > asked_after, "answered by an earlier commit");
                                answered.fetch_add(1, Ordering::SeqCst);
                            },
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // A queued waiter is answered by its leader, which returns only once the
        // queue is empty: all are answered when the last thread is done.
        assert_eq!(answered.load(Ordering::SeqCst), 1600);
        let commits = started.load(Ordering::SeqCst);
        assert!(commits < 1600, "no commit was shared ({commits} commits)");
    }
}
