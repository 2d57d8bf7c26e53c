//! Directories with 100,000 entries: every name found, readdir complete and in a
//! stable order, cookies that survive inserts and removes, lookups that stay cheap.

mod common;
use cachalot_posix::{Errno, RenameMode};
use common::*;
use std::collections::BTreeSet;
use std::time::Instant;

const N: usize = 100_000;

fn name(i: usize) -> String {
    format!("file-{i:07}.ibd")
}

#[test]
fn hundred_thousand_entries() {
    let (fs, store) = new_fs();
    let d = fs.mkdir(fs.root(), b"big", 0o755, ROOT).unwrap().ino;
    let t0 = Instant::now();
    for i in 0..N {
        fs.mknod(d, name(i).as_bytes(), libc::S_IFREG | 0o644, 0, ROOT)
            .unwrap();
        if i % 20_000 == 19_999 {
            store.sync().unwrap();
        }
    }
    let create = t0.elapsed();
    store.sync().unwrap();
    assert_eq!(fs.getattr(d).unwrap().size, N as u64 + 2);

    // Lookups: every name, and misses.
    let t0 = Instant::now();
    for i in (0..N).step_by(7) {
        assert!(fs.lookup(d, name(i).as_bytes()).is_ok(), "{}", name(i));
    }
    let lookups = t0.elapsed() / (N as u32 / 7);
    assert_eq!(fs.lookup(d, b"nope"), Err(Errno::ENOENT));
    eprintln!("100k: create {create:?}, lookup {lookups:?} each");
    assert!(lookups.as_micros() < 2000, "lookup too slow: {lookups:?}");

    // readdir returns each name once, in cookie order.
    let all = all_entries(&fs, d);
    assert_eq!(all.len(), N + 2);
    let names: BTreeSet<Vec<u8>> = all.iter().skip(2).map(|e| e.name.clone()).collect();
    assert_eq!(names.len(), N);
    assert!(all.windows(2).all(|w| w[0].cookie < w[1].cookie));

    // Read half, then remove and add entries, then continue from the cookie:
    // nothing returned twice, every untouched entry seen exactly once.
    let half: Vec<_> = all.iter().take(N / 2).cloned().collect();
    let cookie = half.last().unwrap().cookie;
    let mut removed = BTreeSet::new();
    for i in (0..N).step_by(10) {
        fs.unlink(d, name(i).as_bytes()).unwrap();
        removed.insert(name(i).into_bytes());
    }
    for i in N..N + 5000 {
        fs.mknod(d, name(i).as_bytes(), libc::S_IFREG | 0o644, 0, ROOT)
            .unwrap();
    }
    let mut rest = Vec::new();
    let mut c = cookie;
    loop {
        let b = fs.readdir(d, c, 500).unwrap();
        if b.is_empty() {
            break;
        }
        c = b.last().unwrap().cookie;
        rest.extend(b);
    }
    let mut seen: BTreeSet<Vec<u8>> = BTreeSet::new();
    for e in half.iter().chain(rest.iter()) {
        assert!(
            seen.insert(e.name.clone()) || e.name == b"." || e.name == b"..",
            "{} returned twice",
            String::from_utf8_lossy(&e.name)
        );
    }
    for i in 0..N {
        let n = name(i).into_bytes();
        if !removed.contains(&n) {
            assert!(seen.contains(&n), "{} was skipped", name(i));
        }
    }
    // Renames within the big directory keep it consistent.
    for i in (1..N).step_by(1000) {
        fs.rename(
            d,
            name(i).as_bytes(),
            d,
            format!("renamed-{i}").as_bytes(),
            RenameMode::Replace,
        )
        .unwrap();
    }
    store.sync().unwrap();
    fsck(&fs);
}
