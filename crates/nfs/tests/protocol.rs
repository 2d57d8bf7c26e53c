//! NFSv3 and MOUNT procedures over real RPC against a real pool: every
//! procedure, its results and its error codes.

mod common;

use cachalot_nfs::client::Error;
use cachalot_nfs::nfs3::args::Sattr;
use cachalot_nfs::nfs3::*;
use cachalot_nfs::rpc::{PROG_MOUNT, PROG_NFS, PROG_PORTMAP};
use cachalot_nfs::xdr::{Reader, Writer};
use cachalot_posix::{TimeSet, Timespec};
use common::*;

fn st<T: std::fmt::Debug>(r: Result<T, Error>) -> u32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.status().unwrap_or_else(|| panic!("not a status: {e:?}")),
    }
}

const SHARE: &str = "rw=127.0.0.1,no_root_squash";

#[test]
fn null_mount_export_dump_umnt() {
    let env = env(SHARE);
    let mut c = env.client();
    for (prog, vers) in [(PROG_NFS, 3), (PROG_MOUNT, 3), (PROG_PORTMAP, 2)] {
        assert!(c.call(prog, vers, 0, &[]).unwrap().is_empty());
    }
    assert!(c.mount("/tank/fs").is_ok());
    assert!(c.mount("tank/fs/").is_ok(), "slashes are forgiven");
    assert_eq!(
        st(c.mount("/tank/nope")),
        13,
        "a missing path below the unshared root dataset is that dataset's ACCES"
    );
    assert_eq!(
        st(c.mount("/tank")),
        13,
        "the unshared root dataset is refused"
    );
    assert_eq!(st(c.mount("/other/fs")), 2);
    // A directory below the filesystem mounts that directory.
    let root = c.mount("/tank/fs").unwrap();
    let (sub, _) = c.mkdir(&root, "sub", 0o755).unwrap();
    let (deep, _) = c.mkdir(&sub, "deep", 0o755).unwrap();
    c.create_file(&sub, "file", 0o644).unwrap();
    assert_eq!(c.mount("/tank/fs/sub").unwrap(), sub);
    assert_eq!(c.mount("/tank/fs/sub/deep/").unwrap(), deep);
    assert_eq!(st(c.mount("/tank/fs/sub/nope")), 2);
    assert_eq!(st(c.mount("/tank/fs/sub/file")), 20, "MNT3ERR_NOTDIR");
    assert_eq!(st(c.mount("/tank/fs/sub/../sub")), 2);
    assert_eq!(st(c.mount("/tank/nope/sub")), 13, "under the unshared root");
    // EXPORT lists the share with its clients.
    let body = c.call(PROG_MOUNT, 3, 5, &[]).unwrap();
    let mut r = Reader::new(&body);
    assert!(r.bool().unwrap());
    assert_eq!(r.string(1024).unwrap(), b"/tank/fs");
    assert!(r.bool().unwrap());
    assert_eq!(r.string(1024).unwrap(), b"127.0.0.1");
    // DUMP shows the mount; UMNT removes it.
    let body = c.call(PROG_MOUNT, 3, 2, &[]).unwrap();
    let mut r = Reader::new(&body);
    assert!(r.bool().unwrap());
    assert_eq!(r.string(64).unwrap(), b"127.0.0.1");
    let mut a = Writer::new();
    a.opaque(b"/tank/fs");
    c.call(PROG_MOUNT, 3, 3, &a.buf).unwrap();
    c.call(PROG_MOUNT, 3, 3, &Writer::new().opaque(b"tank/fs/").buf)
        .unwrap();
    let body = c.call(PROG_MOUNT, 3, 2, &[]).unwrap();
    assert!(!String::from_utf8_lossy(&body).contains("/tank/fs\0"));
    c.call(PROG_MOUNT, 3, 4, &[]).unwrap();
    let body = c.call(PROG_MOUNT, 3, 2, &[]).unwrap();
    assert_eq!(body, 0u32.to_be_bytes(), "empty mount list after UMNTALL");
}

#[test]
fn create_write_read_commit() {
    let env = env(SHARE);
    let (mut c, root) = env.mounted();
    let (fh, a) = c.create_file(&root, "f", 0o640).unwrap();
    assert_eq!((a.ftype, a.mode, a.size, a.uid), (1, 0o640, 0, 0));
    assert_eq!(
        st(c.create_file(&root, "f", 0o640)),
        NFS3ERR_EXIST,
        "guarded"
    );
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    let (n, committed, verf) = c.write(&fh, 0, &data, 0).unwrap();
    assert_eq!((n as usize, committed), (data.len(), 0), "UNSTABLE");
    assert_eq!(c.commit(&fh).unwrap(), verf, "the verifier is stable");
    let (n, committed, v2) = c.write(&fh, data.len() as u64, b"tail", 2).unwrap();
    assert_eq!((n, committed, v2), (4, 2, verf), "FILE_SYNC");
    let (n, committed, _) = c.write(&fh, 0, b"x", 1).unwrap();
    assert_eq!((n, committed), (1, 2), "DATA_SYNC is answered as FILE_SYNC");
    let (got, eof) = c.read(&fh, 1, 100).unwrap();
    assert_eq!(got, data[1..101]);
    assert!(!eof);
    let (got, eof) = c.read(&fh, 299_990, 1 << 20).unwrap();
    assert_eq!(got.len(), 14);
    assert_eq!(&got[10..], b"tail");
    assert!(eof);
    let (got, eof) = c.read(&fh, 10 << 20, 10).unwrap();
    assert!(got.is_empty() && eof, "reading past the end");
    assert_eq!(c.getattr(&fh).unwrap().size, 300_004);
    // A 4 GiB READ count is cut to rtmax.
    let mut a = Writer::new();
    a.opaque(&fh).u64(0).u32(u32::MAX);
    let (s, _) = c.nfs(6, &a.buf).unwrap();
    assert_eq!(s, NFS3_OK);
    // O_TRUNC: UNCHECKED create of an existing file with size 0.
    let s0 = Sattr {
        size: Some(0),
        ..Default::default()
    };
    let (fh2, a) = c.create(&root, "f", 0, &s0, [0; 8]).unwrap();
    assert_eq!((fh2.clone(), a.size), (fh.clone(), 0));
    // Read and write on a directory, write with a short payload.
    assert_eq!(st(c.read(&root, 0, 10)), NFS3ERR_ISDIR);
    assert_eq!(st(c.write(&root, 0, b"x", 0)), NFS3ERR_ISDIR);
    let mut a = Writer::new();
    a.opaque(&fh).u64(0).u32(10).u32(0).opaque(b"abc");
    assert_eq!(c.nfs(7, &a.buf).unwrap().0, NFS3ERR_INVAL);
}

#[test]
fn exclusive_create_stores_the_verifier() {
    let env = env(SHARE);
    let (mut c, root) = env.mounted();
    let v = *b"verif123";
    let (fh, a) = c.create(&root, "x", 2, &Sattr::default(), v).unwrap();
    let (fh2, a2) = c.create(&root, "x", 2, &Sattr::default(), v).unwrap();
    assert_eq!((fh, a.fileid), (fh2, a2.fileid), "a retry succeeds");
    assert_eq!(
        st(c.create(&root, "x", 2, &Sattr::default(), *b"otherver")),
        NFS3ERR_EXIST
    );
}

#[test]
fn namespace_procedures() {
    let env = env(SHARE);
    let (mut c, root) = env.mounted();
    let (d, da) = c.mkdir(&root, "d", 0o750).unwrap();
    assert_eq!((da.ftype, da.mode, da.nlink), (2, 0o750, 2));
    assert_eq!(st(c.mkdir(&root, "d", 0o755)), NFS3ERR_EXIST);
    let (f, _) = c.create_file(&d, "f", 0o644).unwrap();
    assert_eq!(st(c.rmdir(&root, "d")), NFS3ERR_NOTEMPTY);
    assert_eq!(st(c.rmdir(&d, "f")), NFS3ERR_NOTDIR);
    assert_eq!(st(c.remove(&root, "d")), NFS3ERR_ISDIR);
    assert_eq!(st(c.remove(&root, "missing")), NFS3ERR_NOENT);
    assert_eq!(st(c.lookup(&f, "x")), NFS3ERR_NOTDIR);
    assert_eq!(c.lookup(&d, "..").unwrap().0, root);
    assert_eq!(c.lookup(&d, ".").unwrap().0, d);
    let long = "n".repeat(256);
    assert_eq!(st(c.create_file(&root, &long, 0o644)), NFS3ERR_NAMETOOLONG);
    // Symlinks.
    let (l, la) = c.symlink(&root, "l", "d/f").unwrap();
    assert_eq!((la.ftype, la.size), (5, 3));
    assert_eq!(c.readlink(&l).unwrap(), b"d/f");
    assert_eq!(st(c.readlink(&f)), NFS3ERR_INVAL);
    // Hard links.
    let a = c.link(&f, &root, "hard").unwrap().unwrap();
    assert_eq!(a.nlink, 2);
    assert_eq!(st(c.link(&f, &root, "hard")), NFS3ERR_EXIST);
    assert_eq!(st(c.link(&d, &root, "dirlink")), NFS3ERR_PERM);
    c.remove(&root, "hard").unwrap();
    assert_eq!(c.getattr(&f).unwrap().nlink, 1);
    // Rename within and across directories, over a file, into its own subtree.
    c.rename(&d, "f", &root, "g").unwrap();
    assert_eq!(c.lookup(&root, "g").unwrap().0, f);
    assert_eq!(st(c.lookup(&d, "f")), NFS3ERR_NOENT);
    c.create_file(&root, "h", 0o644).unwrap();
    c.rename(&root, "g", &root, "h").unwrap();
    assert_eq!(c.lookup(&root, "h").unwrap().0, f, "replaced");
    let (sub, _) = c.mkdir(&d, "sub", 0o755).unwrap();
    assert_eq!(st(c.rename(&root, "d", &sub, "x")), NFS3ERR_INVAL);
    c.mkdir(&root, "e", 0o755).unwrap();
    assert_eq!(st(c.rename(&root, "e", &root, "d")), NFS3ERR_NOTEMPTY);
    assert_eq!(st(c.rename(&root, "h", &root, "d")), NFS3ERR_ISDIR);
    assert_eq!(st(c.rename(&root, "nope", &root, "x")), NFS3ERR_NOENT);
    // Special files.
    let (_, a) = c.mknod(&root, "fifo", 7, 0o600, (0, 0)).unwrap();
    assert_eq!((a.ftype, a.mode), (7, 0o600));
    let (_, a) = c.mknod(&root, "sock", 6, 0o600, (0, 0)).unwrap();
    assert_eq!(a.ftype, 6);
    let (_, a) = c.mknod(&root, "chr", 4, 0o600, (1, 3)).unwrap();
    assert_eq!((a.ftype, a.rdev), (4, (1, 3)));
    let (_, a) = c.mknod(&root, "blk", 3, 0o600, (8, 1)).unwrap();
    assert_eq!((a.ftype, a.rdev), (3, (8, 1)));
    assert_eq!(st(c.mknod(&root, "reg", 1, 0o600, (0, 0))), NFS3ERR_BADTYPE);
    c.as_user(1000, 1000);
    let (pub_dir, _) = {
        c.as_user(0, 0);
        let r = c.mkdir(&root, "pub", 0o777).unwrap();
        c.as_user(1000, 1000);
        r
    };
    assert_eq!(st(c.mknod(&pub_dir, "chr", 4, 0o600, (1, 3))), NFS3ERR_PERM);
    c.mknod(&pub_dir, "fifo", 7, 0o600, (0, 0)).unwrap();
    c.as_user(0, 0);
    c.rmdir(&d, "sub").unwrap();
    c.remove(&root, "h").unwrap();
    assert_eq!(st(c.getattr(&f)), NFS3ERR_STALE, "a removed file's handle");
    // The reserved name of the snapshot directory.
    assert_eq!(st(c.mkdir(&root, ".cachalot", 0o755)), NFS3ERR_EXIST);
    assert_eq!(st(c.remove(&root, ".cachalot")), NFS3ERR_ACCES);
}

#[test]
fn attributes_and_file_system_info() {
    let env = env(SHARE);
    let (mut c, root) = env.mounted();
    let (f, a0) = c.create_file(&root, "f", 0o644).unwrap();
    c.write(&f, 0, &[1u8; 10000], 2).unwrap();
    // chmod, chown, truncate, utimes.
    let set = Sattr {
        mode: Some(0o4711),
        uid: Some(1000),
        gid: Some(50),
        size: Some(100),
        atime: Some(TimeSet::At(Timespec { sec: 1000, nsec: 5 })),
        mtime: Some(TimeSet::At(Timespec { sec: 2000, nsec: 6 })),
    };
    let a = c.setattr(&f, &set).unwrap().unwrap();
    assert_eq!(
        (a.mode, a.uid, a.gid, a.size, a.atime, a.mtime),
        (0o711, 1000, 50, 100, (1000, 5), (2000, 6))
    );
    // (a chown drops set-user-id, as on Linux)
    assert!(a.ctime >= a0.ctime);
    // Extend by truncate: a sparse tail reads as zeros.
    c.setattr(
        &f,
        &Sattr {
            size: Some(1 << 20),
            ..Default::default()
        },
    )
    .unwrap();
    let (data, _) = c.read(&f, 100, 1000).unwrap();
    assert!(data.iter().all(|b| *b == 0));
    // A guard that does not match the ctime.
    let mut a = Writer::new();
    a.opaque(&f);
    cachalot_nfs::client::sattr(
        &mut a,
        &Sattr {
            mode: Some(0o600),
            ..Default::default()
        },
    );
    a.bool(true).u32(1).u32(0);
    assert_eq!(c.nfs(2, &a.buf).unwrap().0, NFS3ERR_NOT_SYNC);
    // Truncating a directory.
    let s = Sattr {
        size: Some(0),
        ..Default::default()
    };
    assert_eq!(st(c.setattr(&root, &s)), NFS3ERR_ISDIR);
    // FSSTAT follows the pool and the quota.
    let s = c.fsstat(&root).unwrap();
    assert!(s[0] > 100 << 20 && s[1] <= s[0] && s[2] <= s[1], "{s:?}");
    env.store.set_prop("tank/fs", "quota", "64M").unwrap();
    let s = c.fsstat(&root).unwrap();
    assert!(s[0] <= 64 << 20 && s[0] > 60 << 20, "quota shows: {s:?}");
    let (v, maxfile, props) = c.fsinfo(&root).unwrap();
    assert_eq!((v[0], v[3]), (1 << 20, 1 << 20), "rtmax and wtmax");
    assert!(maxfile >= 1 << 40);
    assert_eq!(props & 0x1b, 0x1b);
    assert_eq!(c.pathconf(&root).unwrap().1, 255);
}

#[test]
fn access_follows_mode_and_caller() {
    let env = env(SHARE);
    let (mut c, root) = env.mounted();
    let (f, _) = c.create_file(&root, "f", 0o640).unwrap();
    c.setattr(
        &f,
        &Sattr {
            uid: Some(1000),
            gid: Some(100),
            ..Default::default()
        },
    )
    .unwrap();
    let all = 0x3f;
    assert_eq!(
        c.access(&f, all).unwrap() & (ACCESS_READ | ACCESS_MODIFY),
        ACCESS_READ | ACCESS_MODIFY
    );
    c.as_user(1000, 1000);
    let bits = c.access(&f, all).unwrap();
    assert_eq!(
        bits & (ACCESS_READ | ACCESS_MODIFY | ACCESS_EXECUTE),
        ACCESS_READ | ACCESS_MODIFY
    );
    c.as_user(2000, 100);
    let bits = c.access(&f, all).unwrap();
    assert_eq!(
        bits & (ACCESS_READ | ACCESS_MODIFY),
        ACCESS_READ,
        "group may read"
    );
    c.as_user(2000, 2000);
    assert_eq!(
        c.access(&f, all).unwrap() & ACCESS_READ,
        0,
        "others may not"
    );
    assert_eq!(st(c.read(&f, 0, 10)), NFS3ERR_ACCES);
    assert_eq!(st(c.write(&f, 0, b"x", 0)), NFS3ERR_ACCES);
    let bits = c.access(&root, all).unwrap();
    assert_eq!(bits & (ACCESS_LOOKUP | ACCESS_MODIFY), ACCESS_LOOKUP);
    assert_eq!(st(c.create_file(&root, "mine", 0o644)), NFS3ERR_ACCES);
    // A write by another user drops set-user-id.
    c.as_user(0, 0);
    let (s, _) = c.create_file(&root, "suid", 0o4777).unwrap();
    assert_eq!(c.getattr(&s).unwrap().mode, 0o4777);
    c.as_user(1000, 1000);
    c.write(&s, 0, b"x", 2).unwrap();
    assert_eq!(c.getattr(&s).unwrap().mode, 0o777);
    c.as_user(2000, 2000);
    assert_eq!(
        st(c.setattr(
            &f,
            &Sattr {
                mode: Some(0o777),
                ..Default::default()
            }
        )),
        NFS3ERR_PERM
    );
}

#[test]
fn readdir_cookies_across_10000_entries() {
    // `async`: 10,000 creates each committing a transaction group would take
    // over a minute; this test is about cookies (durability is tested apart).
    let env = env("rw=127.0.0.1,no_root_squash,async");
    let (mut c, root) = env.mounted();
    let (d, _) = c.mkdir(&root, "big", 0o755).unwrap();
    for i in 0..10_000 {
        c.create_file(&d, &format!("file-{i:05}"), 0o644).unwrap();
    }
    let all = c.readdir_all(&d, 4096, false).unwrap();
    assert_eq!(all.len(), 10_002);
    let mut names: Vec<Vec<u8>> = all.iter().map(|e| e.name.clone()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 10_002, "no entry twice");
    // Resume from a cookie in the middle: exactly the rest.
    let mid = &all[5000];
    let (page, _) = c.readdir_page(&d, mid.cookie, 8192, false).unwrap();
    assert_eq!(page[0].name, all[5001].name);
    // READDIRPLUS: attributes and handles that work.
    let plus = c.readdir_all(&d, 32768, true).unwrap();
    assert_eq!(plus.len(), 10_002);
    let e = plus.iter().find(|e| e.name == b"file-04242").unwrap();
    let h = e.handle.clone().unwrap();
    assert_eq!(c.getattr(&h).unwrap().fileid, e.fileid);
    assert_eq!(e.attr.as_ref().unwrap().fileid, e.fileid);
    // Removing entries while listing does not repeat or lose the others.
    let (first, _) = c.readdir_page(&d, 0, 4096, false).unwrap();
    for e in &first[2..] {
        c.remove(&d, std::str::from_utf8(&e.name).unwrap()).unwrap();
    }
    let rest = c.readdir_all(&d, 4096, false).unwrap();
    assert_eq!(rest.len(), 10_002 - (first.len() - 2));
    // A count too small for one entry.
    assert_eq!(st(c.readdir_page(&d, 0, 10, false)), NFS3ERR_TOOSMALL);
    let (plain, _) = c.create_file(&root, "plain", 0o644).unwrap();
    assert_eq!(st(c.readdir_page(&plain, 0, 4096, false)), NFS3ERR_NOTDIR);
}

/// WRITEs of 4 KiB and more have their data read apart from the call, in
/// pieces that end on the file's record boundaries (whole records become
/// blocks without a copy): unaligned, aligned, record-spanning, one-record
/// and overlapping writes, and small ones read whole, read back exactly as a
/// model of the file says.
#[test]
fn large_writes_read_apart_land_at_their_offsets() {
    let env = env(SHARE);
    let (mut c, root) = env.mounted();
    let (fh, _) = c.create_file(&root, "pieces", 0o644).unwrap();
    let rec = 128u64 << 10;
    let mut model = vec![0u8; 0];
    let writes: [(u64, usize); 7] = [
        (100_000, 300_000),
        (3 * rec, 1 << 20),
        (rec, rec as usize),
        (rec - 5, 4096 + 10),
        (7, 5000),
        (2 * rec + 1, 3),
        (9 * rec - 1000, 70_000),
    ];
    for (k, (off, len)) in writes.iter().enumerate() {
        let data: Vec<u8> = (0..*len).map(|i| (i * 31 + k * 7 + 1) as u8).collect();
        let (n, _, _) = c.write(&fh, *off, &data, 0).unwrap();
        assert_eq!(n as usize, *len);
        let end = *off as usize + len;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[*off as usize..end].copy_from_slice(&data);
    }
    c.commit(&fh).unwrap();
    let mut got = vec![];
    while got.len() < model.len() {
        let (d, _) = c.read(&fh, got.len() as u64, 1 << 20).unwrap();
        assert!(!d.is_empty(), "short file at {}", got.len());
        got.extend_from_slice(&d);
    }
    assert!(got == model, "the file differs from what was written");
}
