//! NFSv4.1 namespace operations over real RPC: the pseudo file system leading
//! to the shares a client may see, handles shared with NFSv3, LOOKUP/LOOKUPP,
//! GETATTR, VERIFY/NVERIFY, ACCESS, READDIR, READLINK, SECINFO_NO_NAME and
//! their errors.

mod common;

use cachalot_datasets::DatasetKind;
use cachalot_nfs::nfs4::attrs::*;
use cachalot_nfs::nfs4::client::{op_status, Ops, Reply, Session4};
use cachalot_nfs::nfs4::consts::*;
use cachalot_nfs::xdr::Reader;
use common::*;

const SHARE: &str = "rw=127.0.0.1,no_root_squash";

/// The attributes these tests ask for, in bit order.
const MASK: [u32; 8] = [
    FATTR4_TYPE,
    FATTR4_SIZE,
    FATTR4_FSID,
    FATTR4_FILEID,
    FATTR4_MODE,
    FATTR4_NUMLINKS,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
];

#[derive(Debug, PartialEq, Eq)]
struct Attrs {
    ftype: u32,
    size: u64,
    fsid: (u64, u64),
    fileid: u64,
    mode: u32,
    nlink: u32,
    owner: String,
    group: String,
}

fn getattr_args(ops: &mut Ops) {
    let w = ops.op(OP_GETATTR);
    write_bitmap(w, &bitmap_of(MASK));
}

fn read_attrs(r: &mut Reader<'_>) -> Attrs {
    let words = r.u32_array(8).unwrap();
    assert_eq!(words, bitmap_of(MASK), "exactly the attributes asked for");
    let vals = r.opaque(4096).unwrap().to_vec();
    let mut v = Reader::new(&vals);
    let a = Attrs {
        ftype: v.u32().unwrap(),
        size: v.u64().unwrap(),
        fsid: (v.u64().unwrap(), v.u64().unwrap()),
        fileid: v.u64().unwrap(),
        mode: v.u32().unwrap(),
        nlink: v.u32().unwrap(),
        owner: String::from_utf8(v.string(64).unwrap().to_vec()).unwrap(),
        group: String::from_utf8(v.string(64).unwrap().to_vec()).unwrap(),
    };
    assert_eq!(v.remaining(), 0);
    a
}

/// PUTROOTFH, LOOKUP each component, GETFH, GETATTR.
fn walk(s: &mut Session4, path: &[&str]) -> Result<(Vec<u8>, Attrs), u32> {
    let mut ops = Ops::new();
    ops.op(OP_PUTROOTFH);
    for p in path {
        ops.op(OP_LOOKUP).opaque(p.as_bytes());
    }
    ops.op(OP_GETFH);
    getattr_args(&mut ops);
    let rep = s.call(&ops).unwrap();
    if rep.status != NFS4_OK {
        return Err(rep.status);
    }
    let mut r = rep.reader();
    assert_eq!(op_status(&mut r, OP_PUTROOTFH).unwrap(), NFS4_OK);
    for _ in path {
        assert_eq!(op_status(&mut r, OP_LOOKUP).unwrap(), NFS4_OK);
    }
    assert_eq!(op_status(&mut r, OP_GETFH).unwrap(), NFS4_OK);
    let fh = r.opaque(128).unwrap().to_vec();
    assert_eq!(op_status(&mut r, OP_GETATTR).unwrap(), NFS4_OK);
    Ok((fh, read_attrs(&mut r)))
}

/// PUTFH fh, then `f` adds operations; the reply.
fn on(s: &mut Session4, fh: &[u8], f: impl FnOnce(&mut Ops)) -> Reply {
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(fh);
    f(&mut ops);
    s.call(&ops).unwrap()
}

/// READDIR of `fh`: (name, attrs) of every entry, in as many calls as needed.
fn readdir(s: &mut Session4, fh: &[u8], maxcount: u32) -> Vec<(String, Attrs)> {
    let mut out = vec![];
    let mut cookie = 0;
    loop {
        let rep = on(s, fh, |o| {
            let w = o.op(OP_READDIR);
            w.u64(cookie).fixed(&[0; 8]).u32(maxcount).u32(maxcount);
            write_bitmap(w, &bitmap_of(MASK));
        });
        assert_eq!(rep.status, NFS4_OK);
        let mut r = rep.reader();
        op_status(&mut r, OP_PUTFH).unwrap();
        assert_eq!(op_status(&mut r, OP_READDIR).unwrap(), NFS4_OK);
        r.fixed(8).unwrap();
        while r.bool().unwrap() {
            cookie = r.u64().unwrap();
            assert!(cookie > 2, "cookies 0, 1 and 2 are reserved");
            let name = String::from_utf8(r.string(255).unwrap().to_vec()).unwrap();
            out.push((name, read_attrs(&mut r)));
        }
        if r.bool().unwrap() {
            return out;
        }
    }
}

#[test]
fn pseudo_fs_leads_to_visible_shares_only() {
    let env = env(SHARE);
    for (name, share) in [
        ("tank/hidden", "off"),
        ("tank/other", "rw=10.9.9.9"),
        ("tank/a", "off"),
        ("tank/a/b", "ro=127.0.0.1"),
    ] {
        env.store
            .create_dataset(
                name,
                DatasetKind::Filesystem,
                None,
                &[("sharenfs".to_string(), share.to_string())],
                false,
            )
            .unwrap();
    }
    let mut s = Session4::establish(env.client(), b"pseudo", 4).unwrap();
    let (root, ra) = walk(&mut s, &[]).unwrap();
    assert_eq!(ra.ftype, 2);
    assert_eq!(ra.mode, 0o555);
    let names: Vec<String> = readdir(&mut s, &root, 4096)
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(names, ["tank"]);
    let (tank, ta) = walk(&mut s, &["tank"]).unwrap();
    assert_eq!(ta.fsid, ra.fsid, "pseudo directories are one file system");
    let names: Vec<String> = readdir(&mut s, &tank, 4096)
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(names, ["a", "fs"], "hidden and other are not shared to us");
    assert_eq!(
        walk(&mut s, &["tank", "hidden"]).unwrap_err(),
        NFS4ERR_NOENT
    );
    assert_eq!(walk(&mut s, &["tank", "other"]).unwrap_err(), NFS4ERR_NOENT);
    assert_eq!(walk(&mut s, &["nope"]).unwrap_err(), NFS4ERR_NOENT);
    // The share's root handle is the one MOUNT gives NFSv3 clients.
    let (fh, fa) = walk(&mut s, &["tank", "fs"]).unwrap();
    let (_, v3root) = env.mounted();
    assert_eq!(fh, v3root);
    assert_eq!(fa.ftype, 2);
    assert_ne!(fa.fsid, ta.fsid, "a share is its own file system");
    let (_, ba) = walk(&mut s, &["tank", "a", "b"]).unwrap();
    assert_ne!(ba.fsid, fa.fsid);
    // LOOKUPP climbs out of the share into the pseudo tree, and stops at /.
    let rep = on(&mut s, &fh, |o| {
        o.op(OP_LOOKUPP);
        o.op(OP_GETFH);
        o.op(OP_LOOKUPP);
        o.op(OP_LOOKUPP);
    });
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    op_status(&mut r, OP_LOOKUPP).unwrap();
    op_status(&mut r, OP_GETFH).unwrap();
    assert_eq!(r.opaque(128).unwrap(), &tank[..]);
    assert_eq!(rep.status, NFS4ERR_NOENT, "no parent of the root");
    assert_eq!(rep.n, 6, "SEQUENCE and the five");
    // A pseudo handle goes stale when its share stops being visible.
    let (ab, _) = walk(&mut s, &["tank", "a"]).unwrap();
    env.store.set_prop("tank/a/b", "sharenfs", "off").unwrap();
    assert_eq!(on(&mut s, &ab, |_| {}).status, NFS4ERR_STALE);
}

/// The pseudo tree comes from a cached share list; every change of what is
/// shared (sharenfs on and off, set or inherited, a dataset created or destroyed)
/// must show at the next COMPOUND, with the list read before each change.
#[test]
fn pseudo_fs_follows_share_changes_at_once() {
    let env = env(SHARE);
    let mut s = Session4::establish(env.client(), b"pseudo-cache", 4).unwrap();
    let names = |s: &mut Session4| -> Vec<String> {
        let (tank, _) = walk(s, &["tank"]).unwrap();
        readdir(s, &tank, 4096).into_iter().map(|e| e.0).collect()
    };
    // `None`: sharenfs inherited.
    let make = |name: &str, share: Option<&str>| {
        let props: Vec<_> = share
            .map(|v| ("sharenfs".to_string(), v.to_string()))
            .into_iter()
            .collect();
        env.store
            .create_dataset(name, DatasetKind::Filesystem, None, &props, false)
            .unwrap()
    };
    assert_eq!(names(&mut s), ["fs"]);
    make("tank/db", Some(SHARE));
    assert_eq!(names(&mut s), ["db", "fs"], "a new share shows");
    let (db, _) = walk(&mut s, &["tank", "db"]).unwrap();
    env.store.set_prop("tank/db", "sharenfs", "off").unwrap();
    assert_eq!(names(&mut s), ["fs"], "sharenfs=off hides it");
    assert_eq!(walk(&mut s, &["tank", "db"]).unwrap_err(), NFS4ERR_NOENT);
    assert_eq!(on(&mut s, &db, |_| {}).status, NFS4ERR_ACCESS);
    env.store.set_prop("tank/db", "sharenfs", SHARE).unwrap();
    assert_eq!(names(&mut s), ["db", "fs"], "and sharenfs back shows it");
    // Inherited: a child of an unshared parent is shared by its own value,
    // unshared again by inheriting, and follows its parent's value.
    make("tank/p", Some("off"));
    make("tank/p/q", None);
    assert_eq!(names(&mut s), ["db", "fs"]);
    env.store.set_prop("tank/p/q", "sharenfs", SHARE).unwrap();
    assert_eq!(names(&mut s), ["db", "fs", "p"]);
    let (q, _) = walk(&mut s, &["tank", "p", "q"]).unwrap();
    env.store.inherit_prop("tank/p/q", "sharenfs").unwrap();
    assert_eq!(names(&mut s), ["db", "fs"]);
    assert_eq!(
        walk(&mut s, &["tank", "p", "q"]).unwrap_err(),
        NFS4ERR_NOENT
    );
    assert_eq!(on(&mut s, &q, |_| {}).status, NFS4ERR_ACCESS);
    env.store.set_prop("tank/p", "sharenfs", SHARE).unwrap();
    assert_eq!(names(&mut s), ["db", "fs", "p"]);
    assert_eq!(
        on(&mut s, &q, |_| {}).status,
        NFS4_OK,
        "q inherits the share"
    );
    env.store.set_prop("tank/p", "sharenfs", "off").unwrap();
    assert_eq!(names(&mut s), ["db", "fs"]);
    env.store.destroy_dataset("tank/db", false).unwrap();
    assert_eq!(names(&mut s), ["fs"], "a destroyed share is gone");
}

#[test]
fn files_through_v4_lookup_getattr_readdir() {
    let env = env(SHARE);
    let (mut c3, root3) = env.mounted();
    let (dir, _) = c3.mkdir(&root3, "dir", 0o750).unwrap();
    let (file, _) = c3.create_file(&dir, "file", 0o640).unwrap();
    c3.write(&file, 0, b"hello v4", 2).unwrap();
    c3.setattr(
        &file,
        &cachalot_nfs::nfs3::args::Sattr {
            uid: Some(1000),
            gid: Some(100),
            ..Default::default()
        },
    )
    .unwrap();
    c3.symlink(&dir, "link", "file").unwrap();
    for i in 0..300 {
        c3.create_file(&root3, &format!("f{i:03}"), 0o644).unwrap();
    }
    let mut s = Session4::establish(env.client(), b"files", 4).unwrap();
    let (fh, a) = walk(&mut s, &["tank", "fs", "dir", "file"]).unwrap();
    assert_eq!(fh, file, "the same handle as NFSv3");
    assert_eq!(a.ftype, 1);
    assert_eq!(a.size, 8);
    assert_eq!(a.mode, 0o640);
    assert_eq!(a.nlink, 1);
    assert_eq!((a.owner.as_str(), a.group.as_str()), ("1000", "100"));
    // READDIR: every entry once, no "." or "..", across small pages.
    let (rootfh, _) = walk(&mut s, &["tank", "fs"]).unwrap();
    let ents = readdir(&mut s, &rootfh, 2048);
    assert_eq!(ents.len(), 301);
    assert!(ents.iter().all(|(n, _)| n != "." && n != ".."));
    let d = ents.iter().find(|(n, _)| n == "dir").unwrap();
    assert_eq!((d.1.ftype, d.1.mode), (2, 0o750));
    // A maxcount too small for one entry.
    let rep = on(&mut s, &rootfh, |o| {
        let w = o.op(OP_READDIR);
        w.u64(0).fixed(&[0; 8]).u32(40).u32(40);
        write_bitmap(w, &bitmap_of(MASK));
    });
    assert_eq!(rep.status, NFS4ERR_TOOSMALL);
    // READLINK, and LOOKUP through a symlink or a file.
    let (link, la) = walk(&mut s, &["tank", "fs", "dir", "link"]).unwrap();
    assert_eq!(la.ftype, 5);
    let rep = on(&mut s, &link, |o| {
        o.op(OP_READLINK);
    });
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    assert_eq!(op_status(&mut r, OP_READLINK).unwrap(), NFS4_OK);
    assert_eq!(r.string(64).unwrap(), b"file");
    let st = |s: &mut Session4, fh: &[u8], name: &[u8]| {
        on(s, fh, |o| {
            o.op(OP_LOOKUP).opaque(name);
        })
        .status
    };
    assert_eq!(st(&mut s, &link, b"x"), NFS4ERR_SYMLINK);
    assert_eq!(st(&mut s, &file, b"x"), NFS4ERR_NOTDIR);
    assert_eq!(st(&mut s, &rootfh, b""), NFS4ERR_INVAL);
    assert_eq!(st(&mut s, &rootfh, b".."), NFS4ERR_BADNAME);
    assert_eq!(st(&mut s, &rootfh, b"a/b"), NFS4ERR_BADNAME);
    assert_eq!(st(&mut s, &rootfh, &[b'x'; 256]), NFS4ERR_NAMETOOLONG);
    assert_eq!(st(&mut s, &rootfh, b"\xff\xfe"), NFS4ERR_INVAL);
    assert_eq!(st(&mut s, &rootfh, b"missing"), NFS4ERR_NOENT);
    // ACCESS as root and as another user.
    let access = |s: &mut Session4, fh: &[u8]| {
        let rep = on(s, fh, |o| {
            o.op(OP_ACCESS).u32(0x3f);
        });
        let mut r = rep.reader();
        op_status(&mut r, OP_PUTFH).unwrap();
        assert_eq!(op_status(&mut r, OP_ACCESS).unwrap(), NFS4_OK);
        (r.u32().unwrap(), r.u32().unwrap())
    };
    assert_eq!(
        access(&mut s, &file),
        (0x3f, 0x1d),
        "root: all but lookup and execute"
    );
    s.c.as_user(2000, 2000);
    assert_eq!(access(&mut s, &file).1, 0x10, "others: only delete");
    s.c.as_user(1000, 100);
    assert_eq!(
        access(&mut s, &file).1 & 0x0d,
        0x0d,
        "the owner reads and writes"
    );
}

#[test]
fn handle_errors_and_secinfo() {
    let env = env(SHARE);
    let mut s = Session4::establish(env.client(), b"handles", 4).unwrap();
    for op in [OP_GETFH, OP_LOOKUPP, OP_SAVEFH, OP_READLINK] {
        let mut ops = Ops::new();
        ops.op(op);
        assert_eq!(
            s.call(&ops).unwrap().status,
            NFS4ERR_NOFILEHANDLE,
            "op {op}"
        );
    }
    let mut ops = Ops::new();
    ops.op(OP_RESTOREFH);
    assert_eq!(s.call(&ops).unwrap().status, NFS4ERR_RESTOREFH);
    for bad in [&b""[..], b"garbage", &[0u8; 128]] {
        let mut ops = Ops::new();
        ops.op(OP_PUTFH).opaque(bad);
        assert_eq!(s.call(&ops).unwrap().status, NFS4ERR_BADHANDLE);
    }
    // SAVEFH / RESTOREFH, and SECINFO_NO_NAME consuming the handle.
    let (fsfh, _) = walk(&mut s, &["tank", "fs"]).unwrap();
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(&fsfh);
    ops.op(OP_SAVEFH);
    ops.op(OP_PUTROOTFH);
    ops.op(OP_RESTOREFH);
    ops.op(OP_GETFH);
    ops.op(OP_SECINFO_NO_NAME).u32(0);
    ops.op(OP_GETFH);
    let rep = s.call(&ops).unwrap();
    let mut r = rep.reader();
    for op in [OP_PUTFH, OP_SAVEFH, OP_PUTROOTFH, OP_RESTOREFH, OP_GETFH] {
        assert_eq!(op_status(&mut r, op).unwrap(), NFS4_OK);
    }
    assert_eq!(r.opaque(128).unwrap(), &fsfh[..]);
    assert_eq!(op_status(&mut r, OP_SECINFO_NO_NAME).unwrap(), NFS4_OK);
    assert_eq!((r.u32().unwrap(), r.u32().unwrap()), (1, 1), "AUTH_SYS");
    assert_eq!(op_status(&mut r, OP_GETFH).unwrap(), NFS4ERR_NOFILEHANDLE);
    // A handle whose dataset is gone is stale.
    env.store
        .create_dataset(
            "tank/gone",
            DatasetKind::Filesystem,
            None,
            &[("sharenfs".to_string(), SHARE.to_string())],
            false,
        )
        .unwrap();
    let (gone, _) = walk(&mut s, &["tank", "gone"]).unwrap();
    env.server.as_ref().unwrap().exports().forget("tank/gone");
    env.store.destroy_dataset("tank/gone", false).unwrap();
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(&gone);
    assert_eq!(s.call(&ops).unwrap().status, NFS4ERR_STALE);
}

/// PUTFH `fh`, VERIFY (or NVERIFY) of `mask` with packed values `vals`, then
/// GETFH: the COMPOUND's status and how many operations ran.
fn verify(s: &mut Session4, fh: &[u8], op: u32, mask: &[u32], vals: &[u8]) -> (u32, u32) {
    let rep = on(s, fh, |o| {
        let w = o.op(op);
        write_bitmap(w, mask);
        w.opaque(vals);
        o.op(OP_GETFH);
    });
    (rep.status, rep.n)
}

/// fattr4 values of (size, mode, owner, time_modify).
fn vals(size: u64, mode: u32, owner: &str, mtime: (u64, u32)) -> Vec<u8> {
    let mut w = cachalot_nfs::xdr::Writer::new();
    w.u64(size).u32(mode).opaque(owner.as_bytes());
    w.u64(mtime.0).u32(mtime.1);
    w.buf
}

#[test]
fn verify_and_nverify_compare_attributes() {
    let env = env(SHARE);
    let (mut c3, root3) = env.mounted();
    let (file, _) = c3.create_file(&root3, "v", 0o640).unwrap();
    c3.write(&file, 0, b"12345", 2).unwrap();
    let sattr = cachalot_nfs::nfs3::args::Sattr {
        uid: Some(1000),
        ..Default::default()
    };
    c3.setattr(&file, &sattr).unwrap();
    let mut s = Session4::establish(env.client(), b"verify", 4).unwrap();
    let mask = bitmap_of([FATTR4_SIZE, FATTR4_MODE, FATTR4_OWNER, FATTR4_TIME_MODIFY]);
    // The object's values as GETATTR sends them.
    let rep = on(&mut s, &file, |o| write_bitmap(o.op(OP_GETATTR), &mask));
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    assert_eq!(op_status(&mut r, OP_GETATTR).unwrap(), NFS4_OK);
    assert_eq!(r.u32_array(8).unwrap(), mask);
    let got = r.opaque(4096).unwrap().to_vec();
    let mut g = Reader::new(&got);
    g.u64().unwrap();
    g.u32().unwrap();
    g.string(64).unwrap();
    let mtime = (g.u64().unwrap(), g.u32().unwrap());
    let same = vals(5, 0o640, "1000", mtime);
    assert_eq!(got, same);
    // Equal: VERIFY goes on to GETFH, NVERIFY stops with SAME.
    let ok = (NFS4_OK, 4);
    assert_eq!(verify(&mut s, &file, OP_VERIFY, &mask, &same), ok);
    assert_eq!(
        verify(&mut s, &file, OP_NVERIFY, &mask, &same),
        (NFS4ERR_SAME, 3)
    );
    // Any one value different: VERIFY stops with NOT_SAME, NVERIFY goes on.
    for other in [
        vals(6, 0o640, "1000", mtime),
        vals(5, 0o644, "1000", mtime),
        vals(5, 0o640, "1001", mtime),
        vals(5, 0o640, "1000", (mtime.0, mtime.1 ^ 1)),
        same[..same.len() - 4].to_vec(),
        [&same[..], &[0; 4]].concat(),
        vec![],
    ] {
        assert_eq!(
            verify(&mut s, &file, OP_VERIFY, &mask, &other),
            (NFS4ERR_NOT_SAME, 3)
        );
        assert_eq!(verify(&mut s, &file, OP_NVERIFY, &mask, &other), ok);
    }
    // The comparison is with the object now: a write moves size and mtime.
    c3.write(&file, 5, b"6", 2).unwrap();
    assert_eq!(
        verify(&mut s, &file, OP_VERIFY, &mask, &same),
        (NFS4ERR_NOT_SAME, 3)
    );
    // A bitmap with a trailing zero word asks for the same attributes.
    let one = bitmap_of([FATTR4_SIZE]);
    let six = 6u64.to_be_bytes();
    let long = [one[0], 0, 0];
    assert_eq!(verify(&mut s, &file, OP_VERIFY, &long, &six), ok);
    // The pseudo root is a directory too.
    let rep = {
        let mut ops = Ops::new();
        ops.op(OP_PUTROOTFH);
        let w = ops.op(OP_VERIFY);
        write_bitmap(w, &bitmap_of([FATTR4_TYPE]));
        w.opaque(&2u32.to_be_bytes());
        s.call(&ops).unwrap()
    };
    assert_eq!(rep.status, NFS4_OK);
    // Attributes that cannot be compared, unsupported ones, no handle.
    for (bits, want) in [
        (bitmap_of([FATTR4_SIZE, FATTR4_RDATTR_ERROR]), NFS4ERR_INVAL),
        (bitmap_of([FATTR4_TIME_MODIFY_SET]), NFS4ERR_INVAL),
        (bitmap_of([FATTR4_TIME_ACCESS_SET]), NFS4ERR_INVAL),
        (bitmap_of([FATTR4_SIZE, 12]), NFS4ERR_ATTRNOTSUPP),
        (bitmap_of([255]), NFS4ERR_ATTRNOTSUPP),
    ] {
        for op in [OP_VERIFY, OP_NVERIFY] {
            assert_eq!(verify(&mut s, &file, op, &bits, &six).0, want, "{bits:?}");
        }
    }
    let mut ops = Ops::new();
    write_bitmap(ops.op(OP_VERIFY), &one);
    ops.w.opaque(&six);
    assert_eq!(s.call(&ops).unwrap().status, NFS4ERR_NOFILEHANDLE);
    // Bounded decoding: a bitmap of 9 words, values over 64 KiB.
    let rep = on(&mut s, &file, |o| {
        write_bitmap(o.op(OP_NVERIFY), &[0; 9]);
        o.w.opaque(&[]);
    });
    assert_eq!(rep.status, NFS4ERR_BADXDR);
    let rep = on(&mut s, &file, |o| {
        write_bitmap(o.op(OP_NVERIFY), &one);
        o.w.opaque(&vec![0; 65 << 10]);
    });
    assert_eq!(rep.status, NFS4ERR_BADXDR);
}
