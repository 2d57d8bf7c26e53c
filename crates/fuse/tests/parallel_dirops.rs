//! Directory operations from many threads in one directory of a real FUSE mount
//! (with FUSE_PARALLEL_DIROPS the kernel sends lookups and listings of one
//! directory concurrently, alongside creates and unlinks): afterwards the
//! directory lists exactly the names the threads' models say, through the mount
//! and through the POSIX layer, and the filesystem and the pool pass their
//! structural checks (fsck, `Store::verify`).
//!
//! Needs root and /dev/fuse (as the e2e tests do): a failed mount fails the test.

#[path = "../../posix/tests/common/mod.rs"]
mod common;

use common::{all_entries, fsck, mount, new_store};
use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const THREADS: u64 = 16;
const OPS_PER_THREAD: u64 = 400;

/// One thread's work on `dir`: create, unlink and look up its own names (whose
/// state it alone decides, so every answer is checked against its model), look
/// up other threads' names and list the directory (answers only checked for
/// sanity). Returns the names it leaves behind.
fn churn(dir: &std::path::Path, t: u64) -> BTreeSet<String> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut mine = BTreeSet::new();
    for _ in 0..OPS_PER_THREAD {
        let name = format!("t{t}-{}", rnd(40));
        let path = dir.join(&name);
        match rnd(10) {
            0..=3 => {
                let r = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path);
                match r {
                    Ok(_) => assert!(mine.insert(name.clone()), "created {name} twice"),
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                        assert!(mine.contains(&name), "{name} exists but was never created")
                    }
                    Err(e) => panic!("create {name}: {e}"),
                }
            }
            4..=6 => match std::fs::remove_file(&path) {
                Ok(()) => assert!(mine.remove(&name), "unlinked {name}, which was not there"),
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    assert!(!mine.contains(&name), "{name} was lost")
                }
                Err(e) => panic!("unlink {name}: {e}"),
            },
            7 | 8 => {
                let there = std::fs::symlink_metadata(&path).is_ok();
                assert_eq!(there, mine.contains(&name), "lookup of {name}");
                let other = dir.join(format!("t{}-{}", rnd(THREADS), rnd(40)));
                let _ = std::fs::symlink_metadata(other);
            }
            _ => {
                let mut seen = BTreeSet::new();
                for e in std::fs::read_dir(dir).expect("list") {
                    let n = e.expect("entry").file_name().into_string().unwrap();
                    assert!(seen.insert(n.clone()), "{n} listed twice");
                }
                for n in &mine {
                    assert!(seen.contains(n), "{n} missing from a listing");
                }
            }
        }
    }
    mine
}

#[test]
fn concurrent_creates_unlinks_and_lookups_in_one_directory_lose_nothing() {
    let (store, _devs) = new_store(512 << 20, &[("recordsize", "16K")]);
    let fs = Arc::new(mount(&store));
    let stop = Arc::new(AtomicBool::new(false));
    // Transaction groups commit while the threads run, as the daemon's do.
    let syncer = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                store.sync().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut m = cachalot_fuse::mount(fs.clone(), "tank/fs", tmp.path()).expect("FUSE mount");
    let dir = m.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let dir = dir.clone();
            std::thread::spawn(move || churn(&dir, t))
        })
        .collect();
    let mut model = BTreeSet::new();
    for w in workers {
        model.extend(w.join().expect("a worker failed"));
    }
    let listed: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed, model, "the mount's listing against the model");
    m.unmount(false).expect("unmount");
    stop.store(true, Ordering::Relaxed);
    syncer.join().unwrap();

    let shared = fs.lookup(fs.root(), b"shared").unwrap().ino;
    let stored: BTreeSet<String> = all_entries(&fs, shared)
        .into_iter()
        .skip(2)
        .map(|e| String::from_utf8(e.name).unwrap())
        .collect();
    assert_eq!(stored, model, "the POSIX layer's listing against the model");
    fsck(&fs);
    store.sync().unwrap();
    store.verify().expect("store verify");
    store.verify_blocks().expect("pool blocks verify");
}
