//! What an NFS reply promises survives a crash: the pool file is copied right
//! after the reply (the state a power cut at that instant would leave) and the
//! copy is imported beside the live pool.

mod common;

use cachalot_datasets::Store;
use cachalot_posix::Fs;
use common::*;

/// Import a copy of the pool device as it is now and return its `tank/fs`.
fn crash_image(env: &Env) -> (tempfile::TempDir, std::sync::Arc<Store>, Fs) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("d0");
    std::fs::copy(&env.dev, &copy).unwrap();
    let store = Store::import(&[copy], Some("tank"), opts()).unwrap();
    let fs = Fs::mount(store.clone(), store.dataset("tank/fs").unwrap()).unwrap();
    (dir, store, fs)
}

fn read_file(fs: &Fs, name: &str) -> Option<Vec<u8>> {
    let a = fs.lookup(fs.root(), name.as_bytes()).ok()?;
    fs.read(a.ino, 0, a.size as usize).ok()
}

#[test]
fn acknowledged_changes_survive_a_crash() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    // Let the pool settle so the image holds only what the replies promised.
    env.store.sync().unwrap();
    let (f, _) = c.create_file(&root, "created", 0o644).unwrap();
    let (g, _) = c.create_file(&root, "stable", 0o644).unwrap();
    c.write(&g, 0, b"file-sync data", 2).unwrap();
    c.write(&f, 0, b"unstable then committed", 0).unwrap();
    c.commit(&f).unwrap();
    c.mkdir(&root, "dir", 0o755).unwrap();
    c.rename(&root, "stable", &root, "renamed").unwrap();
    let (image_dir, store, fs) = crash_image(&env);
    assert_eq!(
        read_file(&fs, "created").unwrap(),
        b"unstable then committed"
    );
    assert_eq!(read_file(&fs, "renamed").unwrap(), b"file-sync data");
    assert!(fs.lookup(fs.root(), b"dir").is_ok());
    assert!(fs.lookup(fs.root(), b"stable").is_err());
    drop(fs);
    store.export().unwrap();
    drop(image_dir);
}

/// Namespace changes commit the dataset's intent log before the reply, not a
/// transaction group (each of 40 creates, renames, links and removes used to
/// commit one), and what they promised is in the crash image.
#[test]
fn metadata_changes_commit_the_log_not_a_txg() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c, root) = env.mounted();
    // The first log write of a dataset commits a txg to record the log's header.
    c.mkdir(&root, "warm", 0o755).unwrap();
    let t0 = env.store.synced_txg();
    for i in 0..10 {
        let (f, _) = c.create_file(&root, &format!("f{i}"), 0o644).unwrap();
        c.rename(&root, &format!("f{i}"), &root, &format!("g{i}"))
            .unwrap();
        c.link(&f, &root, &format!("h{i}")).unwrap();
        c.remove(&root, &format!("g{i}")).unwrap();
    }
    let commits = env.store.synced_txg() - t0;
    // A background commit (every 5 s) may fall in the loop; 40 may not.
    assert!(
        commits <= 2,
        "40 namespace changes committed {commits} transaction groups"
    );
    let (image_dir, store, fs) = crash_image(&env);
    for i in 0..10 {
        assert!(fs.lookup(fs.root(), format!("h{i}").as_bytes()).is_ok());
        assert!(fs.lookup(fs.root(), format!("g{i}").as_bytes()).is_err());
        assert!(fs.lookup(fs.root(), format!("f{i}").as_bytes()).is_err());
    }
    drop(fs);
    store.export().unwrap();
    drop(image_dir);
}
