//! Snapshot diff on a real store: created, modified, removed and renamed paths
//! between two snapshots and against the live filesystem, and a walk that
//! reads only what changed.

mod common;
use cachalot_posix::diff::{diff, Change};
use cachalot_posix::{FileKind, Fs, RenameMode};
use common::*;
use std::sync::Arc;

fn snap(store: &Arc<cachalot_datasets::Store>, name: &str) {
    store.snapshot(&[format!("tank/fs@{name}")]).unwrap();
}

fn lines(store: &Arc<cachalot_datasets::Store>, from: &str, to: &str) -> (Vec<String>, u64) {
    let (a, b) = store.diff_states(from, to).unwrap();
    let d = diff(&a, &b).unwrap();
    let text = d.changes.iter().map(line).collect();
    (text, d.blocks_read)
}

fn line(c: &Change) -> String {
    let t = if c.file_kind == FileKind::Directory {
        "/"
    } else {
        "F"
    };
    match &c.new_path {
        Some(n) => format!("{} {t} {} -> {n}", c.kind.code(), c.path),
        None => format!("{} {t} {}", c.kind.code(), c.path),
    }
}

fn mkdir(fs: &Fs, parent: u64, name: &str) -> u64 {
    fs.mkdir(parent, name.as_bytes(), 0o755, ROOT).unwrap().ino
}

#[test]
fn diff_names_created_modified_removed_and_renamed_paths() {
    let (fs, store) = new_fs();
    let root = fs.root();
    let d = mkdir(&fs, root, "d");
    let sub = mkdir(&fs, d, "sub");
    mkfile(&fs, sub, "inner", b"x");
    let f1 = mkfile(&fs, root, "f1", b"one");
    mkfile(&fs, root, "f2", b"two");
    mkfile(&fs, root, "f3", b"three");
    let touched = mkfile(&fs, root, "only atime", b"t");
    // A hard link whose first name goes: its parent hint goes stale.
    let linked = mkfile(&fs, d, "first", b"l");
    fs.link(linked, root, b"second").unwrap();
    snap(&store, "a");

    fs.write(f1, 0, b"ONE", false).unwrap();
    mkfile(&fs, d, "new", b"n");
    fs.unlink(root, b"f2").unwrap();
    fs.rename(root, b"f3", d, b"f3r", RenameMode::Replace)
        .unwrap();
    fs.rename(d, b"sub", root, b"sub2", RenameMode::Replace)
        .unwrap();
    // A read moves atime only (relatime): no change.
    fs.read(touched, 0, 1).unwrap();
    fs.unlink(d, b"first").unwrap();
    fs.write(linked, 0, b"L", false).unwrap();
    snap(&store, "b");

    let (got, _) = lines(&store, "tank/fs@a", "tank/fs@b");
    // The hard link: in @a its hint (d) names it d/first; in @b d has no
    // name for it and the walk finds /second.
    let want = [
        "M / /",
        "M / /d",
        "R F /d/first -> /second",
        "+ F /d/new",
        "R / /d/sub -> /sub2",
        "M F /f1",
        "- F /f2",
        "R F /f3 -> /d/f3r",
    ];
    assert_eq!(got, want);

    // Against the live filesystem: only what changed since @b.
    fs.write(f1, 3, b"+", false).unwrap();
    let (got, _) = lines(&store, "tank/fs@b", "tank/fs");
    assert_eq!(got, ["M F /f1"]);
    drop(fs);
}

#[test]
fn diff_reads_only_the_changed_part_of_a_large_tree() {
    let (fs, store) = new_fs();
    let root = fs.root();
    let mut files = Vec::new();
    for i in 0..2000 {
        files.push(mkfile(&fs, root, &format!("file{i:04}"), b"x"));
    }
    snap(&store, "a");
    fs.write(files[1234], 0, b"y", false).unwrap();
    snap(&store, "b");
    let (got, read) = lines(&store, "tank/fs@a", "tank/fs@b");
    assert_eq!(got, ["M F /file1234"]);
    // 2000 inodes fill 63 dnode blocks; one changed: the two roots, one
    // indirect path and one dnode block on each side.
    assert!(read <= 8, "{read} blocks read for one changed file");
}

#[test]
fn diff_refuses_states_out_of_order_or_of_another_filesystem() {
    let (fs, store) = new_fs();
    mkfile(&fs, fs.root(), "f", b"x");
    snap(&store, "a");
    snap(&store, "b");
    for (from, to) in [
        ("tank/fs@b", "tank/fs@a"),
        ("tank/fs@a", "tank"),
        ("tank/fs@a", "tank/fs@nope"),
        ("tank/fs", "tank/fs@a"),
    ] {
        assert!(store.diff_states(from, to).is_err(), "{from} {to}");
    }
}

#[test]
fn diff_of_a_filesystem_never_mounted_is_empty_then_lists_its_first_files() {
    let (store, _devs) = new_store(64 << 20, &[]);
    snap(&store, "empty");
    snap(&store, "empty2");
    assert_eq!(
        lines(&store, "tank/fs@empty", "tank/fs@empty2").0,
        Vec::<String>::new()
    );
    let fs = mount(&store);
    mkfile(&fs, fs.root(), "first", b"1");
    snap(&store, "b");
    let (got, _) = lines(&store, "tank/fs@empty", "tank/fs@b");
    assert_eq!(got, ["+ / /", "+ F /first"]);
}

/// A file 300 directories deep (beyond the depth followed through parent
/// pointers) is named whole, through the namespace walk, without deep recursion.
#[test]
fn diff_names_a_file_deeper_than_the_pointer_walk_goes() {
    let (fs, store) = new_fs();
    let mut dir = fs.root();
    let mut want = String::new();
    for i in 0..300 {
        dir = mkdir(&fs, dir, &format!("d{i}"));
        want.push_str(&format!("/d{i}"));
    }
    let f = mkfile(&fs, dir, "deep", b"a");
    snap(&store, "a");
    fs.write(f, 0, b"b", false).unwrap();
    snap(&store, "b");
    let (text, _) = lines(&store, "tank/fs@a", "tank/fs@b");
    assert!(
        text.contains(&format!("M F {want}/deep")),
        "the deep file's path: {text:?}"
    );
}
