//! raidz1/raidz2 vdevs on real files: blocks written as stripes read back through
//! lost and corrupted devices, bad columns are rewritten (self-healing), scrub
//! checks parity, import runs DEGRADED with missing devices up to the parity
//! count and refuses beyond it, and space is reported raw and after parity.

use cachalot_pool::label::{DATA_START, LABEL_SIZE};
use cachalot_pool::{parse_vdev_spec, BlkPtr, CreateOpts, Pool, WriteOpts};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const DEV_SIZE: u64 = 64 << 20;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn create(dir: &Path, kind: &str, n: usize) -> (Pool, Vec<PathBuf>) {
    let paths: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("d{i}"))).collect();
    let mut words = vec![kind.to_string()];
    words.extend(paths.iter().map(|p| p.display().to_string()));
    let specs = parse_vdev_spec(&words).unwrap();
    let opts = CreateOpts {
        create_size: Some(DEV_SIZE),
        ..Default::default()
    };
    let pool = Pool::create("rz", &specs, &opts).unwrap();
    (pool, paths)
}

const DATA: WriteOpts = WriteOpts::RAW_DATA;

/// Blocks of many sizes (one sector to 128K, odd sizes too), committed.
fn write_blocks(pool: &Pool, seed: u64) -> Vec<(BlkPtr, Vec<u8>)> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    let sizes = [512, 4096, 5000, 8192, 12288, 16384, 40000, 65536, 131072];
    for txg in 1..=3 {
        for (i, &sz) in sizes.iter().enumerate() {
            let data = rng.bytes(sz + i);
            let bp = pool.write_block(txg, &data, DATA).unwrap();
            out.push((bp, data));
        }
        pool.commit(txg, out[0].0).unwrap();
    }
    out
}

/// Overwrite the whole data area of a device with noise (labels kept).
fn noise(path: &Path, seed: u64) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let mut rng = Rng(seed);
    let end = DEV_SIZE - 2 * LABEL_SIZE;
    f.seek(SeekFrom::Start(DATA_START)).unwrap();
    let mut pos = DATA_START;
    while pos < end {
        let n = (1 << 20).min(end - pos) as usize;
        f.write_all(&rng.bytes(n)).unwrap();
        pos += n as u64;
    }
}

fn counters(pool: &Pool) -> (u64, u64, u64) {
    let st = pool.device_status();
    let top = &st[0];
    (top.read, top.cksum, top.repaired)
}

/// For raidz1 and raidz2 of every width from parity+2 to 6 and every choice of
/// `nparity` devices filled with noise: every block reads back, the damaged
/// columns are rewritten, and a scrub afterwards finds nothing.
#[test]
fn reads_survive_corrupted_devices_and_heal_them() {
    for (kind, p) in [("raidz1", 1), ("raidz2", 2)] {
        for n in p + 2..=6 {
            let mut bad_sets: Vec<Vec<usize>> = (0..n).map(|a| vec![a]).collect();
            if p == 2 {
                bad_sets = (0..n)
                    .flat_map(|a| (a + 1..n).map(move |b| vec![a, b]))
                    .collect();
            }
            // Enough sets to cover first, middle and last children, not all (time).
            for bad in bad_sets.iter().step_by(2) {
                let dir = tempfile::tempdir().unwrap();
                let (pool, paths) = create(dir.path(), kind, n);
                let blocks = write_blocks(&pool, n as u64 * 31 + p as u64);
                for &b in bad {
                    noise(&paths[b], b as u64 + 99);
                }
                for (bp, data) in &blocks {
                    assert_eq!(
                        &pool.read_block(bp).unwrap(),
                        data,
                        "{kind} x{n} bad {bad:?}"
                    );
                }
                let (_, cksum, repaired) = counters(&pool);
                assert!(cksum > 0 && repaired > 0, "{kind} x{n}: {cksum} {repaired}");
                // Reads healed the data columns; scrub also checks and heals parity.
                let mut first = (0, false);
                for (bp, _) in &blocks {
                    let o = pool.scrub_block(bp);
                    first.0 += o.bad_copies;
                    first.1 |= o.unrecoverable;
                }
                assert!(!first.1);
                for (bp, data) in &blocks {
                    let o = pool.scrub_block(bp);
                    assert_eq!((o.bad_copies, o.unrecoverable), (0, false), "{kind} x{n}");
                    assert_eq!(&pool.read_block(bp).unwrap(), data);
                }
                pool.verify().unwrap();
            }
        }
    }
}

/// More damaged devices than parity: the read fails with an error, never
/// returns wrong bytes.
#[test]
fn too_much_damage_is_an_error_not_bad_data() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, paths) = create(dir.path(), "raidz1", 4);
    let blocks = write_blocks(&pool, 5);
    noise(&paths[0], 1);
    noise(&paths[2], 2);
    let mut failed = 0;
    for (bp, data) in &blocks {
        match pool.read_block(bp) {
            Ok(d) => assert_eq!(&d, data),
            Err(_) => failed += 1,
        }
    }
    // Small blocks may live on undamaged columns only; most cannot be read.
    assert!(failed > blocks.len() / 2, "{failed} of {}", blocks.len());
}

/// Scrub finds parity that does not match the data (data intact) and rewrites it.
#[test]
fn scrub_checks_parity() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, paths) = create(dir.path(), "raidz2", 5);
    let blocks = write_blocks(&pool, 8);
    // Reads never need parity when the data verifies.
    noise(&paths[3], 3);
    let bad: u64 = blocks
        .iter()
        .map(|(bp, _)| pool.scrub_block(bp).bad_copies)
        .sum();
    assert!(bad > 0);
    let again: u64 = blocks
        .iter()
        .map(|(bp, _)| pool.scrub_block(bp).bad_copies)
        .sum();
    assert_eq!(again, 0);
}

fn reopen(paths: &[PathBuf]) -> cachalot_pool::Result<Pool> {
    Pool::import(paths, Some("rz"))
}

/// Import with up to `nparity` devices missing: DEGRADED, every block reads.
/// One more missing: refused, naming the missing devices.
#[test]
fn import_degraded_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, paths) = create(dir.path(), "raidz2", 5);
    let blocks = write_blocks(&pool, 13);
    pool.flush_all().unwrap();
    drop(pool);
    std::fs::remove_file(&paths[1]).unwrap();
    std::fs::remove_file(&paths[4]).unwrap();
    let left: Vec<PathBuf> = [0, 2, 3].iter().map(|&i| paths[i].clone()).collect();
    let pool = reopen(&left).unwrap();
    assert_eq!(pool.health(), "DEGRADED");
    let st = pool.device_status();
    assert_eq!(st[0].name, "raidz2-0");
    let unavail: Vec<&str> = st[0]
        .children
        .iter()
        .filter(|c| c.state == "UNAVAIL")
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(unavail.len(), 2, "{st:?}");
    for (bp, data) in &blocks {
        assert_eq!(&pool.read_block(bp).unwrap(), data);
    }
    // Writes still go on (to the three devices left) and read back.
    let more = pool.write_block(4, &[7u8; 20000], DATA).unwrap();
    pool.commit(4, blocks[0].0).unwrap();
    assert_eq!(pool.read_block(&more).unwrap(), vec![7u8; 20000]);
    drop(pool);
    std::fs::remove_file(&paths[0]).unwrap();
    let err = reopen(&left[1..])
        .err()
        .expect("import must fail")
        .to_string();
    assert!(
        err.contains("missing 3 of its 5 devices") && err.contains("d1"),
        "{err}"
    );
}

#[test]
fn space_is_raw_and_after_parity() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = create(dir.path(), "raidz2", 6);
    let s = pool.space();
    assert!(
        s.size > 5 * (60 << 20),
        "raw size of six devices: {}",
        s.size
    );
    assert_eq!(s.usable_size, s.size / 6 * 4);
    let (usable, free) = pool.space_totals();
    assert_eq!(usable, s.usable_size);
    assert!(free <= usable);
}

#[test]
fn grammar_refuses_bad_raidz_groups() {
    let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    let e = parse_vdev_spec(&w("raidz2 a b")).unwrap_err().to_string();
    assert!(e.contains("raidz2 needs at least 3 devices"), "{e}");
    let e = parse_vdev_spec(&w("a log raidz1 b c"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("log device cannot be raidz1"), "{e}");
    let specs = parse_vdev_spec(&w("raidz1 a b c raidz2 d e f g")).unwrap();
    assert_eq!(specs.len(), 2);
}

/// The scan a resilver runs: every block (the dataset layer walks the trees).
fn scan(pool: &Pool, blocks: &[(BlkPtr, Vec<u8>)]) -> (u64, u64) {
    let mut bad = 0;
    let mut resilvered = 0;
    let sm = pool.spacemap_blocks().unwrap();
    for bp in blocks.iter().map(|b| &b.0).chain(sm.iter()) {
        let o = pool.scrub_block(bp);
        assert!(!o.unrecoverable);
        bad += o.bad_copies;
        resilvered += o.resilvered;
    }
    (bad, resilvered)
}

/// raidz2 with one device gone and one full of noise: both replaced, the
/// resilver rebuilds their columns, and then the new devices alone (with the
/// two old survivors overwritten by noise) hold every block.
#[test]
fn replace_two_devices_and_resilver() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, paths) = create(dir.path(), "raidz2", 5);
    let blocks = write_blocks(&pool, 21);
    pool.flush_all().unwrap();
    drop(pool);
    std::fs::remove_file(&paths[1]).unwrap();
    noise(&paths[4], 4);
    let left: Vec<PathBuf> = [0, 2, 3, 4].iter().map(|&i| paths[i].clone()).collect();
    let pool = reopen(&left).unwrap();
    assert_eq!(pool.health(), "DEGRADED");
    let opts = CreateOpts {
        create_size: Some(DEV_SIZE),
        ..Default::default()
    };
    // Refusals first: nothing changes.
    let small = dir.path().join("small");
    let e = pool
        .replace_device(
            &paths[1].display().to_string(),
            &small,
            &CreateOpts {
                create_size: Some(40 << 20),
                ..Default::default()
            },
            4,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("too small"), "{e}");
    assert!(
        !small.exists(),
        "a refused replacement leaves no file behind"
    );
    let e = pool
        .replace_device("nope", &dir.path().join("x"), &opts, 4)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such device"), "{e}");
    let new1 = dir.path().join("n1");
    let new4 = dir.path().join("n4");
    pool.replace_device(&paths[1].display().to_string(), &new1, &opts, 4)
        .unwrap();
    pool.replace_device(&paths[4].display().to_string(), &new4, &opts, 4)
        .unwrap();
    // A third would leave nothing to rebuild from.
    let e = pool
        .replace_device(
            &paths[0].display().to_string(),
            &dir.path().join("n0"),
            &opts,
            4,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("would lose data"), "{e}");
    assert!(pool.resilver_pending());
    let st = pool.device_status();
    assert_eq!(
        st[0]
            .children
            .iter()
            .filter(|c| c.state == "RESILVERING")
            .count(),
        2
    );
    // Reads work during the resilver (from the three old devices).
    for (bp, data) in &blocks {
        assert_eq!(&pool.read_block(bp).unwrap(), data);
    }
    let (_, resilvered) = scan(&pool, &blocks);
    assert!(resilvered > 0);
    pool.finish_resilver().unwrap();
    assert!(!pool.resilver_pending());
    assert_eq!(pool.health(), "ONLINE");
    pool.commit(4, blocks[0].0).unwrap();
    let (bad, _) = scan(&pool, &blocks);
    assert_eq!(bad, 0, "scrub after resilver is clean");
    pool.flush_all().unwrap();
    drop(pool);
    // The replacements must now carry real columns: lose two old devices.
    noise(&paths[0], 50);
    noise(&paths[2], 51);
    let all: Vec<PathBuf> = [0, 2, 3]
        .iter()
        .map(|&i| paths[i].clone())
        .chain([new1, new4])
        .collect();
    let pool = reopen(&all).unwrap();
    assert_eq!(pool.health(), "ONLINE");
    for (bp, data) in &blocks {
        assert_eq!(&pool.read_block(bp).unwrap(), data);
    }
}

/// A restart during a resilver: the mark is in the labels, the replacement is
/// still not read from, and the resilver can run again.
#[test]
fn resilver_mark_survives_reimport() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, paths) = create(dir.path(), "raidz1", 3);
    let blocks = write_blocks(&pool, 2);
    let opts = CreateOpts {
        create_size: Some(DEV_SIZE),
        ..Default::default()
    };
    let new2 = dir.path().join("n2");
    pool.replace_device(&paths[2].display().to_string(), &new2, &opts, 4)
        .unwrap();
    pool.flush_all().unwrap();
    drop(pool);
    let devs = vec![paths[0].clone(), paths[1].clone(), new2.clone()];
    let pool = reopen(&devs).unwrap();
    assert!(pool.resilver_pending());
    assert_eq!(pool.health(), "DEGRADED");
    for (bp, data) in &blocks {
        assert_eq!(&pool.read_block(bp).unwrap(), data);
    }
    scan(&pool, &blocks);
    pool.finish_resilver().unwrap();
    pool.flush_all().unwrap();
    drop(pool);
    let pool = reopen(&devs).unwrap();
    assert!(!pool.resilver_pending());
    assert_eq!(pool.health(), "ONLINE");
}

/// Injected I/O errors on one raidz2 device: reads go on from parity, the
/// device is FAULTED after enough errors and gets no more I/O; injected
/// corruption is found by checksum and repaired.
#[test]
fn injected_faults_go_through_the_real_error_paths() {
    use cachalot_pool::fault::Fault;
    let dir = tempfile::tempdir().unwrap();
    let (pool, _paths) = create(dir.path(), "raidz2", 4);
    let blocks = write_blocks(&pool, 77);
    assert!(pool.inject_fault("nope", None).is_err());
    pool.inject_fault("d1", Some(Fault::parse("all", "eio", 100).unwrap()))
        .unwrap();
    for _ in 0..3 {
        for (bp, data) in &blocks {
            assert_eq!(&pool.read_block(bp).unwrap(), data);
        }
    }
    let st = pool.device_status();
    assert_eq!(st[0].children[1].state, "FAULTED", "{st:?}");
    assert_eq!(pool.health(), "DEGRADED");
    let errors = st[0].children[1].read;
    // Writes go on without it; no more I/O reaches it.
    let bp = pool.write_block(4, &[3u8; 30000], DATA).unwrap();
    pool.commit(4, bp).unwrap();
    assert_eq!(pool.read_block(&bp).unwrap(), vec![3u8; 30000]);
    assert_eq!(pool.device_status()[0].children[1].read, errors);
    // It stays FAULTED when injection stops; a second device returning garbage
    // half the time is still survived (raidz2).
    pool.clear_faults();
    assert_eq!(pool.device_status()[0].children[1].state, "FAULTED");
    pool.inject_fault("d2", Some(Fault::parse("read", "corrupt", 50).unwrap()))
        .unwrap();
    for (bp, data) in &blocks {
        assert_eq!(&pool.read_block(bp).unwrap(), data);
    }
    assert!(pool.device_status()[0].children[2].cksum > 0);
}
