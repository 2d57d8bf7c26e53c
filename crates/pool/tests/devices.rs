//! Device management on real files: the resilver position in the labels, in-place
//! replace, attach/detach, offline/online and hot spares, with their refusals
//! (each leaves the pool as it was).

use cachalot_pool::{parse_vdev_spec, split_spares, BlkPtr, CreateOpts, Pool, ScanPos, WriteOpts};
use std::path::{Path, PathBuf};

const DEV_SIZE: u64 = 64 << 20;

fn opts() -> CreateOpts {
    CreateOpts {
        create_size: Some(DEV_SIZE),
        ..Default::default()
    }
}

fn create(dir: &Path, words: &str) -> Pool {
    let w: Vec<String> = words
        .split(' ')
        .map(|s| match s {
            "mirror" | "raidz1" | "raidz2" => s.to_string(),
            _ => dir.join(s).display().to_string(),
        })
        .collect();
    Pool::create("p", &parse_vdev_spec(&w).unwrap(), &opts()).unwrap()
}

fn reopen(dir: &Path) -> Pool {
    Pool::import(&[dir.to_path_buf()], Some("p")).unwrap()
}

/// Blocks of a few sizes, committed in txgs 1..=2.
fn write_blocks(pool: &Pool) -> Vec<(BlkPtr, Vec<u8>)> {
    let wo = WriteOpts::RAW_DATA;
    let mut out = Vec::new();
    for txg in 1..=2u64 {
        for (i, sz) in [4096usize, 20000, 131072].into_iter().enumerate() {
            let data: Vec<u8> = (0..sz)
                .map(|j| (j as u64 * 31 + txg + i as u64) as u8)
                .collect();
            out.push((pool.write_block(txg, &data, wo).unwrap(), data));
        }
        pool.commit(txg, out[0].0).unwrap();
    }
    out
}

fn scan(pool: &Pool, blocks: &[(BlkPtr, Vec<u8>)]) {
    for (bp, _) in blocks {
        assert!(!pool.scrub_block(bp).unrecoverable);
    }
    for bp in pool.spacemap_blocks().unwrap() {
        assert!(!pool.scrub_block(&bp).unrecoverable);
    }
}

fn state(pool: &Pool, file: &str) -> String {
    let all = pool.device_status();
    let rows = all
        .iter()
        .flat_map(|d| std::iter::once(d).chain(d.children.iter()));
    rows.filter(|d| d.name.ends_with(&format!("/{file}")))
        .map(|d| d.state.clone())
        .next()
        .unwrap_or_default()
}

fn name(dir: &Path, f: &str) -> String {
    dir.join(f).display().to_string()
}

#[test]
fn resilver_position_survives_reopen_and_is_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let pool = create(dir.path(), "raidz1 a b c");
    write_blocks(&pool);
    let new = dir.path().join("n");
    pool.replace_device(&name(dir.path(), "b"), &new, &opts(), 3)
        .unwrap();
    assert_eq!(pool.resilver_resume_pos(), None);
    let pos = ScanPos {
        vdev: 0,
        offset: 1 << 20,
    };
    pool.save_resilver_pos(pos).unwrap();
    drop(pool);
    std::fs::remove_file(dir.path().join("b")).unwrap();
    let pool = reopen(dir.path());
    assert_eq!(pool.resilver_resume_pos(), Some(pos));
    pool.finish_resilver().unwrap();
    assert_eq!(pool.resilver_resume_pos(), None);
    drop(pool);
    assert_eq!(reopen(dir.path()).config().resilver_from, None);
}

#[test]
fn in_place_replace_needs_a_new_disk() {
    let dir = tempfile::tempdir().unwrap();
    let pool = create(dir.path(), "mirror a b");
    let blocks = write_blocks(&pool);
    let b = dir.path().join("b");
    let e = pool
        .replace_device(&name(dir.path(), "b"), &b, &opts(), 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("still the same device"), "{e}");
    assert_eq!(state(&pool, "b"), "ONLINE");
    // A new (empty) file at the same path is taken.
    std::fs::remove_file(&b).unwrap();
    pool.replace_device(&name(dir.path(), "b"), &b, &opts(), 3)
        .unwrap();
    assert_eq!(state(&pool, "b"), "RESILVERING");
    scan(&pool, &blocks);
    pool.finish_resilver().unwrap();
    assert_eq!(state(&pool, "b"), "ONLINE");
}

#[test]
fn attach_detach_offline_online() {
    let dir = tempfile::tempdir().unwrap();
    let pool = create(dir.path(), "a raidz1 c d e");
    let blocks = write_blocks(&pool);
    let a = name(dir.path(), "a");
    // Refusals, each changing nothing.
    let e = pool
        .attach_device(&name(dir.path(), "c"), &dir.path().join("x"), &opts(), 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot attach"), "{e}");
    assert!(!dir.path().join("x").exists());
    let small = CreateOpts {
        create_size: Some(40 << 20),
        ..Default::default()
    };
    let e = pool
        .attach_device(&a, &dir.path().join("s"), &small, 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("too small"), "{e}");
    assert!(!dir.path().join("s").exists());
    let e = pool.detach_device(&a, 3).unwrap_err().to_string();
    assert!(e.contains("only a mirror"), "{e}");
    assert!(pool.offline_device(&a, 3).is_err());
    pool.offline_device(&name(dir.path(), "c"), 3).unwrap();
    let e = pool
        .offline_device(&name(dir.path(), "d"), 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("survives at most 1"), "{e}");
    assert_eq!(state(&pool, "c"), "OFFLINE");
    assert_eq!(state(&pool, "d"), "ONLINE");
    assert_eq!(pool.health(), "DEGRADED");
    for (bp, data) in &blocks {
        assert_eq!(&pool.read_block(bp).unwrap(), data);
    }
    // Attach: a becomes a mirror with b.
    pool.attach_device(&a, &dir.path().join("b"), &opts(), 3)
        .unwrap();
    assert_eq!(state(&pool, "b"), "RESILVERING");
    assert!(pool.online_device(&name(dir.path(), "c"), 3).unwrap());
    assert_eq!(state(&pool, "c"), "RESILVERING");
    scan(&pool, &blocks);
    pool.finish_resilver().unwrap();
    assert_eq!(pool.health(), "ONLINE");
    pool.commit(3, blocks[0].0).unwrap();
    pool.flush_all().unwrap();
    drop(pool);
    // Offline is kept across an import.
    let pool = reopen(dir.path());
    assert_eq!(state(&pool, "b"), "ONLINE");
    pool.offline_device(&name(dir.path(), "b"), 4).unwrap();
    let e = pool.detach_device(&a, 4).unwrap_err().to_string();
    assert!(e.contains("last good device"), "{e}");
    drop(pool);
    let pool = reopen(dir.path());
    assert_eq!(state(&pool, "b"), "OFFLINE");
    // Detach a: b alone holds the data after its resilver.
    pool.online_device(&name(dir.path(), "b"), 5).unwrap();
    scan(&pool, &blocks);
    pool.finish_resilver().unwrap();
    pool.detach_device(&a, 5).unwrap();
    assert!(pool.device_status()[0].children.is_empty());
    pool.commit(5, blocks[0].0).unwrap();
    pool.flush_all().unwrap();
    drop(pool);
    std::fs::remove_file(dir.path().join("a")).unwrap();
    let pool = reopen(dir.path());
    assert_eq!(pool.health(), "ONLINE");
    for (bp, data) in &blocks {
        assert_eq!(&pool.read_block(bp).unwrap(), data);
    }
}

#[test]
fn a_spare_replaces_a_faulted_device() {
    use cachalot_pool::fault::Fault;
    let dir = tempfile::tempdir().unwrap();
    let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    let (rest, spares) = split_spares(&w("raidz1 a b c spare s"));
    assert_eq!(rest, w("raidz1 a b c"));
    let pool = create(dir.path(), "raidz1 a b c");
    let spares: Vec<PathBuf> = spares.iter().map(|s| dir.path().join(s)).collect();
    pool.add_spares(&spares, &opts(), 3).unwrap();
    assert_eq!(state(&pool, "s"), "AVAIL");
    assert!(pool.add_spares(&spares, &opts(), 3).is_err());
    let blocks = write_blocks(&pool);
    assert!(!pool.spare_needed());
    assert_eq!(pool.activate_spare(3).unwrap(), None);
    pool.inject_fault("b", Some(Fault::parse("all", "eio", 100).unwrap()))
        .unwrap();
    for _ in 0..10 {
        for (bp, _) in &blocks {
            let _ = pool.scrub_block(bp);
        }
    }
    assert_eq!(state(&pool, "b"), "FAULTED");
    assert!(pool.spare_needed());
    let msg = pool.activate_spare(3).unwrap().unwrap();
    assert!(msg.contains("hot spare"), "{msg}");
    assert_eq!(state(&pool, "s"), "RESILVERING");
    assert_eq!(state(&pool, "b"), "");
    assert!(pool.spare_paths().is_empty());
    scan(&pool, &blocks);
    pool.finish_resilver().unwrap();
    assert_eq!(pool.health(), "ONLINE");
}

/// `remove_spare`: an available spare leaves the configuration and its labels
/// are erased; a spare in use, or a member, is refused with nothing changed;
/// the remaining spare's label carries the current configuration.
#[test]
fn an_available_spare_is_removed_an_active_one_refused() {
    use cachalot_pool::read_label;
    let dir = tempfile::tempdir().unwrap();
    let pool = create(dir.path(), "raidz1 a b c");
    let s1 = dir.path().join("s1");
    let s2 = dir.path().join("s2");
    pool.add_spares(&[s1.clone(), s2.clone()], &opts(), 3)
        .unwrap();
    let err = pool.remove_spare(&name(dir.path(), "a"), 4).unwrap_err();
    assert!(err.to_string().contains("in its last data vdev"), "{err}");
    let err = pool.remove_spare(&name(dir.path(), "zz"), 4).unwrap_err();
    assert!(err.to_string().contains("no such spare"), "{err}");
    assert_eq!(pool.spare_paths().len(), 2);
    pool.remove_spare(&name(dir.path(), "s1"), 4).unwrap();
    assert_eq!(
        pool.spare_paths(),
        vec![std::fs::canonicalize(&s2).unwrap()]
    );
    assert_eq!(state(&pool, "s1"), "");
    // The removed spare is free; the other one's label lists only itself.
    let dev = |p: &Path| cachalot_pool::device::FileDevice::open(p).unwrap();
    assert!(read_label(&dev(&s1)).is_none());
    let h = read_label(&dev(&s2)).unwrap();
    assert_eq!(h.config.spares.len(), 1);
    assert_eq!(h.config.config_txg, 4);
    // Once it stands in for a device it is a member: refused.
    pool.replace_device(&name(dir.path(), "b"), &s2, &opts(), 5)
        .unwrap();
    let err = pool.remove_spare(&name(dir.path(), "s2"), 6).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
}

/// Cache devices: labelled, listed under "cache", found again at import; a
/// missing one is UNAVAIL with a notice and the pool imports ONLINE; a path in
/// use, or another pool's device, is refused with nothing written.
#[test]
fn cache_devices_are_found_at_import_and_may_go_missing() {
    let dir = tempfile::tempdir().unwrap();
    let pool = create(dir.path(), "a");
    let c0 = dir.path().join("c0");
    pool.add_cache(std::slice::from_ref(&c0), &opts(), 3)
        .unwrap();
    assert!(pool.add_cache(&[dir.path().join("a")], &opts(), 3).is_err());
    assert!(pool
        .add_cache(std::slice::from_ref(&c0), &opts(), 3)
        .is_err());
    let row = pool.device_status().into_iter().find(|d| d.cache.is_some());
    let row = row.expect("a cache row");
    assert_eq!(row.state, "ONLINE");
    assert!(row.cache.unwrap().size > (DEV_SIZE / 2));
    let blocks = write_blocks(&pool);
    drop(pool);

    let pool = reopen(dir.path());
    let cache = pool.cache_devices();
    assert_eq!(cache.len(), 1);
    assert!(cache[0].usable());
    assert!(pool
        .device_paths()
        .contains(&std::fs::canonicalize(&c0).unwrap()));
    // The ring lies between the labels: writing it leaves the labels alone.
    let (start, end) = cache[0].ring();
    cache[0].write_at(&vec![0xAB; 1 << 20], start).unwrap();
    cache[0]
        .write_at(&vec![0xAB; 1 << 20], end - (1 << 20))
        .unwrap();
    drop((cache, pool));

    let pool = reopen(dir.path());
    assert_eq!(state(&pool, "c0"), "ONLINE");
    drop(pool);
    std::fs::remove_file(&c0).unwrap();
    let pool = reopen(dir.path());
    assert_eq!(state(&pool, "c0"), "UNAVAIL");
    assert_eq!(pool.health(), "ONLINE");
    assert!(pool.notices().iter().any(|n| n.contains("cache device")));
    assert!(!pool.cache_devices()[0].usable());
    scan(&pool, &blocks);
}

/// A replacement right after another one's resilver ended, in the same open
/// txg, labels its device with a newer configuration than the one the end of
/// the resilver recorded (it once wrote the same config_txg: an import that
/// found only the new device's label rewritten took the older configuration
/// and left the new device out).
#[test]
fn config_txg_grows_across_resilver_end_and_replace() {
    use cachalot_pool::{read_label, BlockDevice, Replacement, SimDevice, VdevKind};
    use std::sync::Arc;
    let devs: Vec<Arc<dyn BlockDevice>> = (0..2)
        .map(|i| Arc::new(SimDevice::new(&format!("d{i}"), 64 << 20)) as Arc<dyn BlockDevice>)
        .collect();
    let pool =
        Pool::create_on_group_with_log("tank", devs.clone(), VdevKind::Mirror, vec![], 12).unwrap();
    let next = pool.uberblock().txg + 1;
    let first: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 64 << 20));
    pool.replace_with("sim:d0", Replacement::Device(first), &opts(), next)
        .unwrap();
    pool.finish_resilver().unwrap();
    let before = read_label(devs[1].as_ref()).unwrap().config.config_txg;
    let second = Arc::new(SimDevice::new("d0", 64 << 20));
    pool.replace_with("sim:d0", Replacement::Device(second.clone()), &opts(), next)
        .unwrap();
    let after = read_label(second.as_ref()).unwrap().config.config_txg;
    assert!(after > before, "config_txg {after} after {before}");
}
