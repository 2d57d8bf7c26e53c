//! POSIX semantics of the layer on a real store: files, directories, link counts,
//! rename rules, orphans, xattrs, sparse files, fallocate, persistence.

mod common;
use cachalot_posix::fs::{FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE};
use cachalot_posix::{Caller, Errno, FileKind, RenameMode, SetAttr, TimeSet, Timespec};
use common::*;

#[test]
fn files_read_write_truncate_sparse() {
    let (fs, _store) = new_fs();
    let f = mkfile(&fs, fs.root(), "data", b"hello world");
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"hello world");
    assert_eq!(fs.read(f, 6, 3).unwrap(), b"wor");
    assert_eq!(fs.read(f, 100, 3).unwrap(), b"");
    // Truncate down then up: the tail reads as zeros.
    fs.setattr(
        f,
        &SetAttr {
            size: Some(5),
            ..Default::default()
        },
    )
    .unwrap();
    fs.setattr(
        f,
        &SetAttr {
            size: Some(8),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"hello\0\0\0");
    // Sparse write far away, beyond 4 GiB.
    let off = 5u64 << 30;
    fs.write(f, off, b"far", false).unwrap();
    let a = fs.getattr(f).unwrap();
    assert_eq!(a.size, off + 3);
    assert_eq!(fs.read(f, off - 4, 7).unwrap(), b"\0\0\0\0far");
    assert_eq!(fs.read(f, 1 << 30, 16).unwrap(), vec![0u8; 16]);
    // Too large.
    assert_eq!(fs.write(f, 1 << 60, b"x", false), Err(Errno::EFBIG));
    // Truncate a directory.
    assert_eq!(
        fs.setattr(
            fs.root(),
            &SetAttr {
                size: Some(0),
                ..Default::default()
            }
        ),
        Err(Errno::EISDIR)
    );
}

#[test]
fn attributes_and_times() {
    let (fs, _store) = new_fs();
    let who = Caller {
        uid: 1000,
        gid: 100,
    };
    let a = fs
        .mknod(fs.root(), b"f", libc::S_IFREG | 0o640, 0, who)
        .unwrap();
    assert_eq!(
        (a.uid, a.gid, a.mode & 0o7777, a.nlink),
        (1000, 100, 0o640, 1)
    );
    assert_eq!(a.kind, FileKind::Regular);
    std::thread::sleep(std::time::Duration::from_millis(5));
    fs.write(a.ino, 0, b"x", false).unwrap();
    let b = fs.getattr(a.ino).unwrap();
    assert!(b.mtime > a.mtime && b.ctime > a.ctime);
    let c = fs
        .setattr(
            a.ino,
            &SetAttr {
                mode: Some(0o4755),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(c.mode, libc::S_IFREG | 0o4755);
    assert!(c.ctime >= b.ctime);
    assert_eq!(c.mtime, b.mtime);
    // chown drops set-user-id.
    let d = fs
        .setattr(
            a.ino,
            &SetAttr {
                uid: Some(7),
                gid: Some(8),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((d.uid, d.gid, d.mode & 0o7777), (7, 8, 0o755));
    let t = Timespec {
        sec: 1_000_000,
        nsec: 42,
    };
    let e = fs
        .setattr(
            a.ino,
            &SetAttr {
                atime: Some(TimeSet::At(t)),
                mtime: Some(TimeSet::At(t)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((e.atime, e.mtime), (t, t));
    // A write by a non-root user drops set-user-id.
    fs.setattr(
        a.ino,
        &SetAttr {
            mode: Some(0o4755),
            ..Default::default()
        },
    )
    .unwrap();
    fs.write(a.ino, 0, b"y", true).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().mode & 0o7777, 0o755);
    // setgid directories hand their group and the bit down.
    let d = fs
        .mkdir(fs.root(), b"g", 0o2775, Caller { uid: 5, gid: 55 })
        .unwrap();
    let sub = fs.mkdir(d.ino, b"sub", 0o755, who).unwrap();
    assert_eq!(sub.gid, 55);
    assert_ne!(sub.mode & libc::S_ISGID, 0);
    let f = fs
        .mknod(d.ino, b"f", libc::S_IFREG | 0o644, 0, who)
        .unwrap();
    assert_eq!(f.gid, 55);
}

#[test]
fn directories_and_link_counts() {
    let (fs, _store) = new_fs();
    let r = fs.root();
    assert_eq!(fs.getattr(r).unwrap().nlink, 2);
    let a = fs.mkdir(r, b"a", 0o755, ROOT).unwrap();
    let b = fs.mkdir(a.ino, b"b", 0o755, ROOT).unwrap();
    assert_eq!(fs.getattr(r).unwrap().nlink, 3);
    assert_eq!(fs.getattr(a.ino).unwrap().nlink, 3);
    assert_eq!(b.nlink, 2);
    assert_eq!(fs.lookup(b.ino, b"..").unwrap().ino, a.ino);
    assert_eq!(fs.mkdir(r, b"a", 0o755, ROOT), Err(Errno::EEXIST));
    assert_eq!(fs.rmdir(r, b"a"), Err(Errno::ENOTEMPTY));
    let f = mkfile(&fs, a.ino, "f", b"1");
    assert_eq!(fs.rmdir(a.ino, b"f"), Err(Errno::ENOTDIR));
    assert_eq!(fs.unlink(a.ino, b"b"), Err(Errno::EISDIR));
    assert_eq!(fs.lookup(f, b"x"), Err(Errno::ENOTDIR));
    // Hard links.
    fs.link(f, r, b"f2").unwrap();
    fs.link(f, b.ino, b"f3").unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 3);
    assert_eq!(fs.link(a.ino, r, b"dirlink"), Err(Errno::EPERM));
    assert_eq!(fs.link(f, r, b"f2"), Err(Errno::EEXIST));
    fs.unlink(a.ino, b"f").unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 2);
    assert_eq!(fs.read(f, 0, 10).unwrap(), b"1");
    fs.unlink(r, b"f2").unwrap();
    fs.unlink(b.ino, b"f3").unwrap();
    assert_eq!(fs.getattr(f), Err(Errno::ENOENT));
    fs.rmdir(a.ino, b"b").unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().nlink, 2);
    fs.rmdir(r, b"a").unwrap();
    assert_eq!(fs.getattr(r).unwrap().nlink, 2);
    // Symlinks and device nodes.
    let s = fs.symlink(r, b"s", b"/some/where", ROOT).unwrap();
    assert_eq!(s.kind, FileKind::Symlink);
    assert_eq!(fs.readlink(s.ino).unwrap(), b"/some/where");
    assert_eq!(s.size, 11);
    let n = fs
        .mknod(r, b"null", libc::S_IFCHR | 0o666, 0x0103, ROOT)
        .unwrap();
    assert_eq!((n.kind, n.rdev), (FileKind::CharDevice, 0x0103));
    let p = fs
        .mknod(r, b"fifo", libc::S_IFIFO | 0o600, 0, ROOT)
        .unwrap();
    assert_eq!(p.kind, FileKind::Fifo);
    // Bad names.
    assert_eq!(
        fs.mkdir(r, &[b'x'; 256], 0o755, ROOT),
        Err(Errno::ENAMETOOLONG)
    );
    assert_eq!(fs.mkdir(r, b"a/b", 0o755, ROOT), Err(Errno::EINVAL));
    assert_eq!(fs.lookup(r, &[b'x'; 300]), Err(Errno::ENAMETOOLONG));
    fsck(&fs);
}

#[test]
fn rename_rules() {
    let (fs, _store) = new_fs();
    let r = fs.root();
    let d1 = fs.mkdir(r, b"d1", 0o755, ROOT).unwrap().ino;
    let d2 = fs.mkdir(r, b"d2", 0o755, ROOT).unwrap().ino;
    let sub = fs.mkdir(d1, b"sub", 0o755, ROOT).unwrap().ino;
    let f = mkfile(&fs, d1, "f", b"file f");
    let g = mkfile(&fs, d2, "g", b"file g");
    // Within a directory.
    fs.rename(d1, b"f", d1, b"f1", RenameMode::Replace).unwrap();
    assert_eq!(fs.lookup(d1, b"f"), Err(Errno::ENOENT));
    assert_eq!(fs.lookup(d1, b"f1").unwrap().ino, f);
    // Across directories, replacing a file: g's inode goes away.
    fs.rename(d1, b"f1", d2, b"g", RenameMode::Replace).unwrap();
    assert_eq!(fs.lookup(d2, b"g").unwrap().ino, f);
    assert_eq!(fs.getattr(g), Err(Errno::ENOENT));
    // NOREPLACE and EXCHANGE.
    let h = mkfile(&fs, d2, "h", b"file h");
    assert_eq!(
        fs.rename(d2, b"g", d2, b"h", RenameMode::NoReplace),
        Err(Errno::EEXIST)
    );
    fs.rename(d2, b"g", d2, b"h", RenameMode::Exchange).unwrap();
    assert_eq!(fs.lookup(d2, b"g").unwrap().ino, h);
    assert_eq!(fs.lookup(d2, b"h").unwrap().ino, f);
    assert_eq!(
        fs.rename(d2, b"g", d2, b"nope", RenameMode::Exchange),
        Err(Errno::ENOENT)
    );
    // Directories: across parents moves "..", link counts follow.
    fs.rename(d1, b"sub", d2, b"sub", RenameMode::Replace)
        .unwrap();
    assert_eq!(fs.lookup(sub, b"..").unwrap().ino, d2);
    assert_eq!(fs.getattr(d1).unwrap().nlink, 2);
    assert_eq!(fs.getattr(d2).unwrap().nlink, 3);
    // Not into its own subtree; not itself.
    let deep = fs.mkdir(sub, b"deep", 0o755, ROOT).unwrap().ino;
    assert_eq!(
        fs.rename(d2, b"sub", deep, b"x", RenameMode::Replace),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        fs.rename(d2, b"sub", sub, b"x", RenameMode::Replace),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        fs.rename(r, b"d2", deep, b"x", RenameMode::Replace),
        Err(Errno::EINVAL)
    );
    // Directory over an empty directory: allowed; over a non-empty one: ENOTEMPTY.
    let e = fs.mkdir(d1, b"empty", 0o755, ROOT).unwrap().ino;
    fs.rename(d2, b"sub", d1, b"empty", RenameMode::Replace)
        .unwrap();
    assert_eq!(fs.getattr(e), Err(Errno::ENOENT));
    assert_eq!(fs.lookup(d1, b"empty").unwrap().ino, sub);
    assert_eq!(fs.getattr(d1).unwrap().nlink, 3);
    assert_eq!(fs.getattr(d2).unwrap().nlink, 2);
    fs.mkdir(d2, b"full", 0o755, ROOT).unwrap();
    mkfile(&fs, resolve(&fs, "d2/full").unwrap(), "x", b"");
    assert_eq!(
        fs.rename(d1, b"empty", d2, b"full", RenameMode::Replace),
        Err(Errno::ENOTEMPTY)
    );
    // Type mismatches.
    assert_eq!(
        fs.rename(d1, b"empty", d2, b"g", RenameMode::Replace),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        fs.rename(d2, b"g", d2, b"full", RenameMode::Replace),
        Err(Errno::EISDIR)
    );
    // Hard links of one file: rename does nothing, both names stay.
    fs.link(h, d1, b"h2").unwrap();
    fs.rename(d1, b"h2", d2, b"g", RenameMode::Replace).unwrap();
    assert_eq!(fs.lookup(d1, b"h2").unwrap().ino, h);
    assert_eq!(fs.getattr(h).unwrap().nlink, 2);
    // Exchange a directory and a file across parents.
    fs.rename(d1, b"empty", d2, b"g", RenameMode::Exchange)
        .unwrap();
    assert_eq!(fs.lookup(d2, b"g").unwrap().ino, sub);
    assert_eq!(fs.lookup(sub, b"..").unwrap().ino, d2);
    assert_eq!(fs.lookup(d1, b"empty").unwrap().ino, h);
    assert_eq!(
        fs.rename(d1, b"missing", d2, b"z", RenameMode::Replace),
        Err(Errno::ENOENT)
    );
    fsck(&fs);
}

#[test]
fn unlinked_open_files_live_until_closed_and_orphans_are_reclaimed() {
    let (store, devs) = new_store(256 << 20, &[]);
    {
        let fs = mount(&store);
        let f = mkfile(&fs, fs.root(), "tmp", b"still here");
        fs.open(f).unwrap();
        fs.open(f).unwrap();
        fs.unlink(fs.root(), b"tmp").unwrap();
        assert_eq!(fs.lookup(fs.root(), b"tmp"), Err(Errno::ENOENT));
        assert_eq!(fs.read(f, 0, 100).unwrap(), b"still here");
        assert_eq!(fs.getattr(f).unwrap().nlink, 0);
        assert_eq!(fs.orphan_count().unwrap(), 1);
        fs.release(f).unwrap();
        assert!(fs.getattr(f).is_ok());
        fs.release(f).unwrap();
        assert_eq!(fs.getattr(f), Err(Errno::ENOENT));
        assert_eq!(fs.orphan_count().unwrap(), 0);
        // Crash with an open unlinked file: the next mount reclaims it.
        let g = mkfile(&fs, fs.root(), "g", &vec![7u8; 100_000]);
        fs.open(g).unwrap();
        fs.unlink(fs.root(), b"g").unwrap();
        store.sync().unwrap();
        fsck(&fs);
    }
    let image = devs[0].crash_image(|| true);
    drop(store);
    let dev = cachalot_pool::SimDevice::from_image("img", image);
    let store = cachalot_datasets::Store::import_devices(as_dyn(&[dev]), manual_opts()).unwrap();
    let fs = mount(&store);
    assert_eq!(fs.orphan_count().unwrap(), 0);
    fsck(&fs);
}

#[test]
fn xattrs() {
    let (fs, _store) = new_fs();
    let f = mkfile(&fs, fs.root(), "f", b"");
    assert_eq!(fs.getxattr(f, b"user.a"), Err(Errno::ENODATA));
    fs.setxattr(f, b"user.a", b"1", 0).unwrap();
    fs.setxattr(f, b"user.b", &vec![9u8; 65536], 0).unwrap();
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"1");
    assert_eq!(fs.listxattr(f).unwrap(), b"user.a\0user.b\0");
    assert_eq!(fs.setxattr(f, b"user.a", b"2", 1), Err(Errno::EEXIST));
    assert_eq!(fs.setxattr(f, b"user.c", b"2", 2), Err(Errno::ENODATA));
    fs.setxattr(f, b"user.a", b"22", 2).unwrap();
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"22");
    assert_eq!(
        fs.setxattr(f, b"user.big", &vec![0u8; 65537], 0),
        Err(Errno::E2BIG)
    );
    fs.removexattr(f, b"user.a").unwrap();
    assert_eq!(fs.removexattr(f, b"user.a"), Err(Errno::ENODATA));
    assert_eq!(fs.listxattr(f).unwrap(), b"user.b\0");
    fs.setxattr(fs.root(), b"user.dir", b"x", 0).unwrap();
    fsck(&fs);
    fs.unlink(fs.root(), b"f").unwrap();
    fsck(&fs);
}

#[test]
fn files_extended_without_writes_get_full_records() {
    let (fs, _store) = new_fs();
    let f = mkfile(&fs, fs.root(), "f", b"");
    fs.fallocate(f, 0, 64 << 20, 0).unwrap();
    let ds = fs.dataset();
    assert_eq!(ds.object_info(f).unwrap().blksz, 16384);
    assert_eq!(fs.read(f, 0, 10).unwrap(), vec![0u8; 10]);
    let g = mkfile(&fs, fs.root(), "g", b"abc");
    fs.setattr(
        g,
        &SetAttr {
            size: Some(1 << 20),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(ds.object_info(g).unwrap().blksz, 16384);
    assert_eq!(fs.read(g, 0, 5).unwrap(), b"abc\0\0");
    assert_eq!(fs.getattr(g).unwrap().size, 1 << 20);
}

#[test]
fn fallocate_modes() {
    let (fs, _store) = new_fs();
    let f = mkfile(&fs, fs.root(), "f", &vec![1u8; 100_000]);
    fs.fallocate(f, 0, 200_000, 0).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 200_000);
    fs.fallocate(f, 0, 300_000, FALLOC_FL_KEEP_SIZE).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 200_000);
    fs.fallocate(
        f,
        10_000,
        50_000,
        FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
    )
    .unwrap();
    let d = fs.read(f, 0, 200_000).unwrap();
    assert!(d[..10_000].iter().all(|b| *b == 1));
    assert!(d[10_000..60_000].iter().all(|b| *b == 0));
    assert!(d[60_000..100_000].iter().all(|b| *b == 1));
    assert_eq!(fs.getattr(f).unwrap().size, 200_000);
    assert_eq!(
        fs.fallocate(f, 0, 10, FALLOC_FL_PUNCH_HOLE),
        Err(Errno::EOPNOTSUPP)
    );
    assert_eq!(fs.fallocate(f, 0, 1 << 62, 0), Err(Errno::EFBIG));
    assert_eq!(fs.fallocate(f, 0, 10 << 30, 0), Err(Errno::ENOSPC));
}

#[test]
fn statfs_follows_quota() {
    let (store, _devs) = new_store(256 << 20, &[("quota", "64M")]);
    let fs = mount(&store);
    let s = fs.statfs().unwrap();
    assert!(s.blocks * s.bsize as u64 <= 64 << 20, "{s:?}");
    assert!(s.bavail > 0);
    let f = mkfile(&fs, fs.root(), "f", &vec![3u8; 8 << 20]);
    store.sync().unwrap();
    let t = fs.statfs().unwrap();
    assert!(t.bavail < s.bavail, "{s:?} {t:?}");
    // Writing past the quota fails with EDQUOT and the file stays readable.
    // Incompressible data (compression would make a constant pattern free).
    let mut x = 0x1234_5678_9abc_def0u64;
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut err = None;
    for i in 0..100u64 {
        if let Err(e) = fs.write(f, (8 << 20) + i * (1 << 20), &chunk, false) {
            err = Some(e);
            break;
        }
    }
    assert_eq!(err, Some(Errno(libc::EDQUOT)));
    assert_eq!(fs.read(f, 0, 4).unwrap(), vec![3u8; 4]);
}

#[test]
fn survives_export_and_import() {
    let (store, devs) = new_store(256 << 20, &[]);
    let before = {
        let fs = mount(&store);
        let d = fs.mkdir(fs.root(), b"dir", 0o700, ROOT).unwrap().ino;
        mkfile(&fs, d, "a", b"aaa");
        fs.symlink(d, b"l", b"a", ROOT).unwrap();
        let b = mkfile(&fs, fs.root(), "b", &vec![4u8; 300_000]);
        fs.link(b, d, b"b2").unwrap();
        walk(&fs)
    };
    store.export().unwrap();
    drop(store);
    let store = cachalot_datasets::Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
    let fs = mount(&store);
    assert_eq!(walk(&fs), before);
    fsck(&fs);
}

#[test]
fn refuses_a_dataset_of_other_objects() {
    let (store, _devs) = new_store(256 << 20, &[]);
    let ds = store.dataset("tank/fs").unwrap();
    let o = ds.create_object().unwrap();
    ds.write(o, 0, b"not a filesystem").unwrap();
    assert!(cachalot_posix::Fs::mount(store.clone(), ds).is_err());
}
