//! Concurrent namespace and data operations from several threads (with commits
//! racing them) leave a consistent filesystem: fsck passes and every file that the
//! threads own reads back what they last wrote.

mod common;
use cachalot_posix::{Errno, RenameMode};
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn racing_threads_keep_the_filesystem_consistent() {
    let (store, _devs) = new_store(512 << 20, &[("recordsize", "16K")]);
    let fs = Arc::new(mount(&store));
    let shared = fs.mkdir(fs.root(), b"shared", 0o755, ROOT).unwrap().ino;
    let other = fs.mkdir(fs.root(), b"other", 0o755, ROOT).unwrap().ino;
    let stop = Arc::new(AtomicBool::new(false));
    let syncer = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                store.sync().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            let fs = fs.clone();
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                let mut rnd = move |n: u64| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % n
                };
                // A private file whose content this thread alone decides.
                let own = format!("own-{t}");
                let f = mkfile(&fs, shared, &own, b"");
                let mut content = Vec::new();
                for i in 0..1500u64 {
                    let a = format!("n{}", rnd(20));
                    let b = format!("n{}", rnd(20));
                    let (d1, d2) = if rnd(2) == 0 {
                        (shared, other)
                    } else {
                        (other, shared)
                    };
                    let r = match rnd(8) {
                        0 => fs
                            .mknod(d1, a.as_bytes(), libc::S_IFREG | 0o644, 0, ROOT)
                            .map(drop),
                        1 => fs.mkdir(d1, a.as_bytes(), 0o755, ROOT).map(drop),
                        2 => fs.rename(d1, a.as_bytes(), d2, b.as_bytes(), RenameMode::Replace),
                        3 => fs.unlink(d1, a.as_bytes()),
                        4 => fs.rmdir(d1, a.as_bytes()),
                        5 => fs
                            .lookup(d1, a.as_bytes())
                            .and_then(|at| fs.link(at.ino, d2, b.as_bytes()))
                            .map(drop),
                        _ => {
                            let data = format!("{t}:{i};").into_bytes();
                            let off = content.len() as u64;
                            fs.write(f, off, &data, false).map(|_| content.extend(data))
                        }
                    };
                    match r {
                        Ok(())
                        | Err(Errno::ENOENT)
                        | Err(Errno::EEXIST)
                        | Err(Errno::ENOTEMPTY)
                        | Err(Errno::ENOTDIR)
                        | Err(Errno::EISDIR)
                        | Err(Errno::EPERM)
                        | Err(Errno::EINVAL) => {}
                        Err(e) => panic!("thread {t} op {i}: {e}"),
                    }
                }
                (f, content)
            })
        })
        .collect();
    let owned: Vec<(u64, Vec<u8>)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    syncer.join().unwrap();
    fsck(&fs);
    for (f, content) in owned {
        assert_eq!(fs.read(f, 0, content.len() + 10).unwrap(), content);
    }
    store.sync().unwrap();
    fsck(&fs);
}
