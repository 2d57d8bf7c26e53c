//! fsync after namespace changes goes through the intent log: an fsync after a
//! create, mkdir, symlink, link, unlink, rmdir, rename, setattr or xattr change
//! writes log blocks and commits no transaction group, and the change survives a
//! power cut right after the fsync (replayed at import, all or nothing). Replay is
//! idempotent: a power cut during the import's replay and commit, then another
//! import, gives the same tree. A random workload with an fsync after every
//! operation, cut at random device writes, imports to exactly the state after the
//! last acknowledged operation (or the one in flight).

mod common;
use cachalot_datasets::Store;
use cachalot_pool::{BlockDevice, Power, SimDevice};
use cachalot_posix::{Fs, RenameMode, SetAttr, TimeSet, Timespec};
use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const DEV_SIZE: u64 = 64 << 20;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Everything an fsync must keep of each name: kind, mode, owner, size, links,
/// mtime, ctime, content digest, symlink target, xattrs (atime is left out: the
/// walk's own reads change it).
fn snapshot(fs: &Fs) -> BTreeMap<String, String> {
    let mut out = walk(fs);
    for (path, desc) in out.iter_mut() {
        let ino = resolve(fs, path).unwrap();
        let a = fs.getattr(ino).unwrap();
        let xattrs = fs.listxattr(ino).unwrap();
        let mut xs = Vec::new();
        for name in xattrs.split(|b| *b == 0).filter(|n| !n.is_empty()) {
            let v = fs.getxattr(ino, name).unwrap();
            xs.push(format!("{}={}", String::from_utf8_lossy(name), v.len()));
        }
        *desc = format!(
            "{desc} mode {:o} {}:{} size {} nlink {} m {:?} c {:?} x [{}]",
            a.mode,
            a.uid,
            a.gid,
            a.size,
            a.nlink,
            a.mtime,
            a.ctime,
            xs.join(",")
        );
    }
    out
}

fn new_store_on(dev: &SimDevice) -> Arc<Store> {
    let store = Store::create_on_devices(
        "tank",
        as_dyn(std::slice::from_ref(dev)),
        false,
        manual_opts(),
    )
    .unwrap();
    store
        .create_dataset(
            "tank/fs",
            cachalot_datasets::DatasetKind::Filesystem,
            None,
            &[("recordsize".into(), "16K".into())],
            false,
        )
        .unwrap();
    store
}

fn import(image: Vec<u8>) -> Arc<Store> {
    let dev = SimDevice::from_image("img", image);
    Store::import_devices(vec![Arc::new(dev) as Arc<dyn BlockDevice>], manual_opts()).unwrap()
}

/// Each namespace operation, then an fsync that must not commit a txg.
#[test]
fn fsync_after_namespace_changes_writes_the_log_and_survives_power_loss() {
    let dev = SimDevice::new("d0", DEV_SIZE);
    let store = new_store_on(&dev);
    let fs = mount(&store);
    let root = fs.root();
    let a = fs.mkdir(root, b"a", 0o755, ROOT).unwrap().ino;
    let f1 = mkfile(&fs, root, "f1", b"first file");
    mkfile(&fs, root, "f2", b"second file");
    fs.mkdir(root, b"empty", 0o755, ROOT).unwrap();
    let x1 = mkfile(&fs, a, "x1", b"x one");
    mkfile(&fs, a, "x2", b"x two");
    store.sync().unwrap();
    // The first log write of a dataset commits a txg to record the log's header.
    fs.write(f1, 0, b"FIRST", false).unwrap();
    fs.fsync().unwrap();
    let txg = store.synced_txg();

    type Op = Box<dyn Fn(&Fs)>;
    let mut ops: Vec<(&str, Op)> = Vec::new();
    ops.push((
        "create and write",
        Box::new(|fs: &Fs| {
            let n = mkfile(fs, fs.root(), "new", &vec![7u8; 40_000]);
            fs.setxattr(n, b"user.k", b"v", 0).unwrap();
        }),
    ));
    ops.push((
        "mkdir",
        Box::new(|fs: &Fs| {
            fs.mkdir(fs.root(), b"nd", 0o750, ROOT).unwrap();
        }),
    ));
    ops.push((
        "symlink",
        Box::new(|fs: &Fs| {
            fs.symlink(fs.root(), b"sl", b"a/x1", ROOT).unwrap();
        }),
    ));
    ops.push((
        "link",
        Box::new(move |fs: &Fs| {
            fs.link(x1, fs.root(), b"x1-link").unwrap();
        }),
    ));
    ops.push((
        "rename",
        Box::new(move |fs: &Fs| {
            fs.rename(fs.root(), b"f1", a, b"f1-moved", RenameMode::Replace)
                .unwrap();
        }),
    ));
    ops.push((
        "rename replacing",
        Box::new(move |fs: &Fs| {
            fs.rename(a, b"x2", fs.root(), b"f2", RenameMode::Replace)
                .unwrap();
        }),
    ));
    ops.push((
        "exchange",
        Box::new(move |fs: &Fs| {
            fs.rename(fs.root(), b"nd", a, b"x1", RenameMode::Exchange)
                .unwrap();
        }),
    ));
    ops.push((
        "unlink",
        Box::new(|fs: &Fs| {
            fs.unlink(fs.root(), b"x1-link").unwrap();
        }),
    ));
    ops.push((
        "rmdir",
        Box::new(|fs: &Fs| {
            fs.rmdir(fs.root(), b"empty").unwrap();
        }),
    ));
    ops.push((
        "setattr",
        Box::new(move |fs: &Fs| {
            let t = Timespec {
                sec: 1_000_000_000,
                nsec: 5,
            };
            fs.setattr(
                f1,
                &SetAttr {
                    mode: Some(0o4711),
                    uid: Some(1000),
                    gid: Some(100),
                    size: Some(3),
                    atime: Some(TimeSet::At(t)),
                    mtime: Some(TimeSet::At(t)),
                },
            )
            .unwrap();
        }),
    ));
    ops.push((
        "removexattr",
        Box::new(|fs: &Fs| {
            let n = resolve(fs, "new").unwrap();
            fs.removexattr(n, b"user.k").unwrap();
        }),
    ));
    for (what, op) in &ops {
        op(&fs);
        fs.fsync().unwrap();
        assert_eq!(
            store.synced_txg(),
            txg,
            "fsync after {what} committed a transaction group"
        );
    }
    let want = snapshot(&fs);
    assert!(want.contains_key("/a/f1-moved") && !want.contains_key("/f1"));
    dev.cut_power_at_write(dev.writes_issued());
    drop(fs);
    drop(store);

    for keep in [false, true] {
        let store = import(dev.crash_image(|| keep));
        assert_eq!(store.synced_txg(), txg + 1, "import commits the replay");
        let notices = store.status().notices.join("\n");
        assert!(
            notices.contains("replayed"),
            "no replay notice: {notices:?}"
        );
        let fs = mount(&store);
        fsck(&fs);
        assert_eq!(snapshot(&fs), want, "keep={keep}: tree after replay");
        assert_eq!(fs.orphan_count().unwrap(), 0);
        // The filesystem keeps working after the replay.
        mkfile(&fs, fs.root(), "after", b"still works");
        fs.fsync().unwrap();
        store.export().unwrap();
    }

    // Idempotent: cut the power at any point of the import (replay, then its
    // commit) and import again: the same tree.
    let image = dev.crash_image(|| false);
    let probe = Power::new();
    let d = SimDevice::on_power("probe", image.clone(), probe.clone());
    let s =
        Store::import_devices(vec![Arc::new(d) as Arc<dyn BlockDevice>], manual_opts()).unwrap();
    let import_writes = probe.writes_issued();
    drop(s);
    assert!(import_writes > 0, "the import wrote nothing");
    // Every write of the import is a cut point; about a dozen of them, spread
    // over replay and commit, keep the test short.
    for n in (0..import_writes).step_by((import_writes as usize / 12).max(1)) {
        let power = Power::new();
        power.cut_at_write(n);
        let d = SimDevice::on_power("cut", image.clone(), power.clone());
        let first = Store::import_devices(
            vec![Arc::new(d.clone()) as Arc<dyn BlockDevice>],
            manual_opts(),
        );
        drop(first);
        let store = import(d.crash_image(|| n % 2 == 0));
        let fs = mount(&store);
        fsck(&fs);
        assert_eq!(
            snapshot(&fs),
            want,
            "power cut at write {n} of the import, imported again"
        );
    }
}

/// sync=always: a namespace change is durable when it returns, without fsync.
#[test]
fn sync_always_makes_namespace_changes_durable_without_fsync() {
    let dev = SimDevice::new("d0", DEV_SIZE);
    let store = new_store_on(&dev);
    store.set_prop("tank/fs", "sync", "always").unwrap();
    let fs = mount(&store);
    let f = mkfile(&fs, fs.root(), "f", b"data");
    store.sync().unwrap();
    fs.mkdir(fs.root(), b"d", 0o700, ROOT).unwrap();
    let d = resolve(&fs, "d").unwrap();
    fs.rename(fs.root(), b"f", d, b"g", RenameMode::Replace)
        .unwrap();
    fs.symlink(fs.root(), b"s", b"d/g", ROOT).unwrap();
    let want = snapshot(&fs);
    dev.cut_power_at_write(dev.writes_issued());
    drop(fs);
    drop(store);
    let store = import(dev.crash_image(|| false));
    let fs = mount(&store);
    fsck(&fs);
    assert_eq!(snapshot(&fs), want);
    assert_eq!(resolve(&fs, "d/g").unwrap(), f);
}

/// One namespace or data operation (a single `Fs` call; it may fail).
fn random_op(rng: &mut Rng, fs: &Fs) {
    let dirs = ["", "a", "a/b", "c"];
    let dir = resolve(fs, dirs[rng.below(4) as usize]).unwrap_or(fs.root());
    let other = resolve(fs, dirs[rng.below(4) as usize]).unwrap_or(fs.root());
    let n1 = format!("n{}", rng.below(10));
    let n2 = format!("n{}", rng.below(10));
    let target = fs.lookup(dir, n1.as_bytes()).ok().map(|a| a.ino);
    match rng.below(12) {
        0 | 1 => {
            let _ = fs.mknod(dir, n1.as_bytes(), libc::S_IFREG | 0o644, 0, ROOT);
        }
        2 => {
            let _ = fs.mkdir(dir, n1.as_bytes(), 0o755, ROOT);
        }
        3 => {
            let _ = fs.symlink(dir, n1.as_bytes(), n2.as_bytes(), ROOT);
        }
        4 | 5 => {
            let mode = [
                RenameMode::Replace,
                RenameMode::NoReplace,
                RenameMode::Exchange,
            ][rng.below(3) as usize];
            let _ = fs.rename(dir, n1.as_bytes(), other, n2.as_bytes(), mode);
        }
        6 => {
            if let Some(t) = target {
                let _ = fs.link(t, other, n2.as_bytes());
            }
        }
        7 => {
            let _ = fs.unlink(dir, n1.as_bytes());
        }
        8 => {
            let _ = fs.rmdir(dir, n1.as_bytes());
        }
        9 => {
            if let Some(t) = target {
                let set = SetAttr {
                    mode: Some(rng.below(0o777) as u32),
                    size: (rng.below(2) == 0).then(|| rng.below(50_000)),
                    ..Default::default()
                };
                let _ = fs.setattr(t, &set);
            }
        }
        10 => {
            if let Some(t) = target {
                let v = vec![rng.below(256) as u8; rng.below(300) as usize];
                let _ = fs.setxattr(t, format!("user.{}", rng.below(3)).as_bytes(), &v, 0);
            }
        }
        _ => {
            if let Some(t) = target {
                let len = rng.below(40_000) as usize;
                let seed = rng.next();
                let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ seed) as u8).collect();
                let _ = fs.write(t, rng.below(60_000), &data, false);
            }
        }
    }
}

/// The state after each operation of a run, how many operations were
/// acknowledged (fsync returned with the power on), and the device writes of the
/// setup before the first operation.
type Run = (Vec<BTreeMap<String, String>>, usize, u64);

fn workload(seed: u64, dev: &SimDevice, ops: usize, cut: Option<u64>) -> Run {
    let mut rng = Rng(seed);
    let store = new_store_on(dev);
    let fs = mount(&store);
    for d in ["a", "c"] {
        fs.mkdir(fs.root(), d.as_bytes(), 0o755, ROOT).unwrap();
    }
    fs.mkdir(resolve(&fs, "a").unwrap(), b"b", 0o755, ROOT)
        .unwrap();
    store.sync().unwrap();
    fs.fsync().unwrap();
    let mut states = vec![snapshot(&fs)];
    let mut acked = 0;
    let setup = dev.writes_issued();
    if let Some(c) = cut {
        dev.cut_power_at_write(dev.writes_issued() + c);
    }
    for i in 0..ops {
        random_op(&mut rng, &fs);
        states.push(snapshot(&fs));
        // Now and then a txg commit: log blocks get freed under the workload.
        let r = if i % 9 == 8 {
            store.sync().map(|_| ()).map_err(|e| e.to_string())
        } else {
            fs.fsync().map_err(|e| format!("{e:?}"))
        };
        if dev.is_cut() || r.is_err() {
            assert!(dev.is_cut(), "seed {seed}: failed without a cut: {r:?}");
            break;
        }
        acked = i + 1;
    }
    if !dev.is_cut() {
        dev.cut_power_at_write(dev.writes_issued());
    }
    (states, acked, setup)
}

#[test]
fn random_namespace_workload_with_fsync_cut_at_random_writes() {
    for seed in [3u64, 4] {
        let probe = SimDevice::new("probe", DEV_SIZE);
        let (_, acked, setup) = workload(seed, &probe, 60, None);
        assert_eq!(acked, 60);
        let base = probe.writes_issued() - setup;
        let mut rng = Rng(seed * 31);
        for _ in 0..12 {
            let cut = rng.below(base);
            let dev = SimDevice::new("d0", DEV_SIZE);
            let (states, acked, _) = workload(seed, &dev, 60, Some(cut));
            let mut r2 = Rng(seed ^ cut);
            let store = import(dev.crash_image(|| r2.below(2) == 0));
            let fs = mount(&store);
            let ctx = format!("seed {seed} cut {cut} acked {acked}");
            fsck(&fs);
            let got = snapshot(&fs);
            let ok = got == states[acked] || states.get(acked + 1) == Some(&got);
            if !ok {
                let want = &states[acked];
                let diff: Vec<_> = got
                    .iter()
                    .filter(|(k, v)| want.get(*k) != Some(v))
                    .chain(want.iter().filter(|(k, _)| !got.contains_key(*k)))
                    .take(6)
                    .collect();
                panic!("{ctx}: the tree is not the state after the last acknowledged operation: {diff:?}");
            }
        }
    }
}
