//! A pool filled by concurrent writers whose data reaches the intent log (NFS
//! UNSTABLE writes followed by COMMIT, i.e. write + fsync) must answer NoSpace
//! and stay healthy: no commit may run out of space (that suspends the pool),
//! every write either succeeds or gets NoSpace, what was acknowledged and
//! committed reads back, no allocated byte is left unreachable, and the pool
//! exports and imports.

mod common;
use cachalot_datasets::Store;
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The load: `writers` threads of `chunk`-byte appends, each with an fsync (an
/// NFS COMMIT) after every `per_commit` of them; with `committer`, one more
/// thread fsyncs in a loop (another client's COMMITs), so log commits are
/// running whenever a txg closes.
#[derive(Clone, Copy, Debug)]
struct Load {
    chunk: usize,
    per_commit: u64,
    writers: u64,
    committer: bool,
}

fn chunk(load: Load, writer: u64, i: u64) -> Vec<u8> {
    Rng((writer << 32) ^ i).bytes(load.chunk)
}

/// An fsync on a full pool succeeds or answers ENOSPC, and never suspends it.
fn fsync_ok_or_nospace(store: &Store, r: cachalot_datasets::Result<()>, what: &str) -> bool {
    match r {
        Ok(()) => true,
        Err(e) if e.errno() == 28 && store.pool().suspended().is_none() => false,
        Err(e) => panic!(
            "{what}: {e:?} (want success or ENOSPC, pool not suspended); suspended: {:?}",
            store.pool().suspended()
        ),
    }
}

/// Fsync the dataset in a loop until `stop`.
fn committer(store: &Store, stop: &AtomicBool) {
    let ds = store.dataset("tank/f").unwrap();
    while !stop.load(Ordering::Relaxed) {
        fsync_ok_or_nospace(store, ds.fsync(), "committer");
    }
}

/// Append chunks to its own object until NoSpace. Returns the object and how
/// many chunks an fsync made durable.
fn writer(store: &Store, load: Load, w: u64) -> (u64, u64) {
    let ds = store.dataset("tank/f").unwrap();
    let obj = ds.create_object().unwrap();
    let mut durable = 0;
    for i in 0.. {
        let commit = (i + 1) % load.per_commit == 0;
        let r = ds
            .write(obj, i * load.chunk as u64, &chunk(load, w, i))
            .and_then(|_| if commit { ds.fsync() } else { Ok(()) });
        // ENOSPC: the space check (`NoSpace`) or an intent-log block or
        // early data block the log commit could not allocate.
        if !fsync_ok_or_nospace(store, r, &format!("{load:?} writer {w} chunk {i}")) {
            break;
        }
        if commit {
            durable = i + 1;
        }
        assert!(i < 1 << 20, "{load:?} writer {w}: the pool never filled");
    }
    (obj, durable)
}

fn fill(load: Load) {
    let devs = sim_devices(1, 256 << 20);
    let mut opts = manual_opts();
    // Commits interleave with the log commits, and a quarter of the pool may
    // be dirty (the daemon: 256 MiB of a few GiB), far more than the slop.
    opts.txg_timeout = Duration::from_millis(500);
    opts.dirty_max = 64 << 20;
    let store = Store::create_on_devices("tank", as_dyn(&devs), false, opts.clone()).unwrap();
    create_uncompressed_fs(&store, "tank/f");
    let stop = AtomicBool::new(false);
    let done: Vec<(u64, u64)> = std::thread::scope(|sc| {
        if load.committer {
            sc.spawn(|| committer(&store, &stop));
        }
        let hs: Vec<_> = (0..load.writers)
            .map(|w| {
                let store = Arc::clone(&store);
                sc.spawn(move || writer(&store, load, w))
            })
            .collect();
        let done = hs.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        done
    });
    assert!(
        store.pool().suspended().is_none(),
        "{load:?}: pool suspended: {:?}",
        store.pool().suspended()
    );
    store.sync().unwrap();
    let check = |store: &Store, ctx: &str| {
        let ds = store.dataset("tank/f").unwrap();
        for (w, (obj, n)) in done.iter().enumerate() {
            for i in 0..*n {
                let got = ds.read(*obj, i * load.chunk as u64, load.chunk).unwrap();
                let want = chunk(load, w as u64, i);
                assert!(got == want, "{load:?} {ctx}: writer {w} chunk {i}");
            }
        }
    };
    check(&store, "after the fill");
    // Every allocated byte is reachable or a deferred free: nothing leaked.
    store.verify_blocks().unwrap();
    store.export().unwrap();
    drop(store);
    let store = Store::import_devices(as_dyn(&devs), opts).unwrap();
    check(&store, "after import");
    assert!(store.pool().suspended().is_none());
    // What was allocated but in no tree when the pool was exported is lost
    // for good: nothing leaked on disk either.
    store.verify_blocks().unwrap();
}

/// NFS streaming: 1 MiB UNSTABLE writes (whole records, logged by reference
/// when the txg is still open), a COMMIT every 16 MiB from each of 8 writers
/// and COMMITs in a loop from a ninth client. A log commit that found a write's
/// txg closed copied its bytes into log blocks while that txg wrote them too,
/// and the next txg ran out of space: the pool suspended in 6 runs of 8 before
/// such writes were left to their txg's commit (`Resolved::InTxg`).
#[test]
fn full_pool_streaming_writes_with_commits() {
    fill(Load {
        chunk: 1 << 20,
        per_commit: 16,
        writers: 8,
        committer: true,
    });
}

/// NFS random writes: 16 KiB UNSTABLE writes (copied into log blocks), a
/// COMMIT every 1 MiB.
#[test]
fn full_pool_small_writes_with_commits() {
    fill(Load {
        chunk: 16 << 10,
        per_commit: 64,
        writers: 4,
        committer: false,
    });
}
/// 16 KiB UNSTABLE writes (copied into log blocks), a COMMIT every 16 MiB:
/// the log then wants as much space as the txg it precedes (failed 4 runs in 6
/// before `commit_log` fell back to a txg commit on a nearly full pool).
#[test]
fn full_pool_bulk_commits_of_small_writes() {
    fill(Load {
        chunk: 16 << 10,
        per_commit: 1024,
        writers: 4,
        committer: false,
    });
}

/// A big delete shows in `avail` once it is committed, without waiting for the
/// commits that release deferred frees (an idle pool makes none: `avail` stayed
/// near zero after deleting most of a full pool), and a write can use it.
#[test]
fn a_committed_delete_is_available_at_once() {
    let devs = sim_devices(1, 64 << 20);
    let store = Store::create_on_devices("tank", as_dyn(&devs), false, manual_opts()).unwrap();
    create_uncompressed_fs(&store, "tank/fs");
    let ds = store.dataset("tank/fs").unwrap();
    let avail = || store.list(Some("tank/fs"), false).unwrap()[0].available;
    let empty = avail();
    let obj = ds.create_object().unwrap();
    let data = Rng(5).bytes(32 << 20);
    ds.write(obj, 0, &data).unwrap();
    store.sync().unwrap();
    let full = avail();
    assert!(
        full + (30 << 20) < empty,
        "32 MiB written: {full} of {empty}"
    );
    ds.delete_object(obj).unwrap();
    store.sync().unwrap();
    let after = avail();
    assert!(
        after + (1 << 20) >= empty,
        "after the delete's commit avail is {after}, it was {empty} before the write"
    );
    let again = ds.create_object().unwrap();
    ds.write(again, 0, &data).unwrap();
    store.sync().unwrap();
    assert_eq!(ds.read(again, 0, data.len()).unwrap(), data);
}
