//! The block device against real pools: files in a temp dir, and simulated devices
//! for a power cut. Every check compares with a model of what was written.

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{BlockDevice, CreateOpts, SimDevice, VdevKind, VdevSpec};
use cachalot_zvol::{Extent, ExtentKind, Zvol, ZvolError};
use std::sync::Arc;
use std::time::Duration;

const BS: u64 = 16384;

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
    /// Bytes that are never zero, so a written block never reads as a hole.
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| (self.next() as u8) | 1).collect()
    }
}

fn opts() -> StoreOpts {
    StoreOpts {
        arc_max: 16 << 20,
        txg_timeout: Duration::from_secs(3600),
        dirty_max: 1 << 30,
    }
}

fn file_pool(dir: &tempfile::TempDir, size: u64) -> Arc<Store> {
    let spec = VdevSpec {
        kind: VdevKind::Disk,
        paths: vec![dir.path().join("d0")],
        log: false,
    };
    let copts = CreateOpts {
        create_size: Some(size),
        ..CreateOpts::default()
    };
    Store::create("tank", &[spec], &copts, &[], opts()).unwrap()
}

fn volume(store: &Arc<Store>, name: &str, size: u64, sparse: bool) -> Zvol {
    let mut props = vec![("volblocksize".to_string(), "16K".to_string())];
    if sparse {
        props.push(("sparse".into(), "on".into()));
    }
    store
        .create_dataset(name, DatasetKind::Volume, Some(size), &props, false)
        .unwrap();
    Zvol::open(store.clone(), store.dataset(name).unwrap()).unwrap()
}

fn prop(store: &Store, name: &str, p: &str) -> u64 {
    store.get_props(name, Some(&[p.to_string()])).unwrap()[0]
        .raw
        .parse()
        .unwrap()
}

#[test]
fn read_write_flush_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_pool(&dir, 256 << 20);
    let vol = volume(&store, "tank/vol", 64 << 20, true);
    assert_eq!(vol.size(), 64 << 20);
    assert_eq!(vol.block_size(), BS as u32, "records are volblocksize");
    assert_eq!(vol.name(), "tank/vol");
    assert!(!vol.is_readonly());
    assert!(vol.write_cache());
    let mut model = vec![0u8; 64 << 20];
    let mut rng = Rng(7);
    for i in 0..200 {
        let len = 1 + rng.below(3 * BS) as usize;
        let off = rng.below(model.len() as u64 - len as u64);
        let data = rng.bytes(len);
        vol.write(off, &data, i % 7 == 0).unwrap();
        model[off as usize..off as usize + len].copy_from_slice(&data);
        if i % 50 == 0 {
            vol.flush().unwrap();
        }
        if i % 64 == 0 {
            store.sync().unwrap();
        }
    }
    vol.flush().unwrap();
    for _ in 0..100 {
        let len = 1 + rng.below(4 * BS) as usize;
        let off = rng.below(model.len() as u64 - len as u64);
        assert_eq!(
            vol.read(off, len).unwrap(),
            &model[off as usize..off as usize + len]
        );
    }
    // The whole device, after a commit and a re-import from the files.
    store.export().unwrap();
    drop(vol);
    drop(store);
    let store = Store::import(&[dir.path().join("d0")], Some("tank"), opts()).unwrap();
    let vol = Zvol::open(store.clone(), store.dataset("tank/vol").unwrap()).unwrap();
    assert!(
        vol.read(0, 64 << 20).unwrap() == model,
        "contents after re-import"
    );
}

#[test]
fn discard_makes_holes_and_frees_space() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_pool(&dir, 256 << 20);
    let vol = volume(&store, "tank/vol", 32 << 20, true);
    let mut rng = Rng(9);
    vol.write(0, &rng.bytes(16 << 20), false).unwrap();
    vol.flush().unwrap();
    store.sync().unwrap();
    let full = prop(&store, "tank/vol", "referenced");
    assert!(full >= 16 << 20, "16 MiB of noise is referenced: {full}");
    // Unaligned: the partial blocks at both ends are zeroed, the rest freed.
    let (off, len) = (BS / 2, (12 << 20) + 100);
    vol.discard(off, len, false).unwrap();
    assert_eq!(
        vol.read(off, len as usize).unwrap(),
        vec![0u8; len as usize]
    );
    assert_ne!(
        vol.read(0, (BS / 2) as usize).unwrap(),
        vec![0u8; (BS / 2) as usize]
    );
    let ext = vol.extents(0, 32 << 20).unwrap();
    // Before any commit the holes are already reported.
    let first_whole = BS;
    let end_whole = (off + len) / BS * BS;
    assert!(
        ext.iter().any(|e| e.kind == ExtentKind::Hole
            && e.off <= first_whole
            && e.off + e.len >= end_whole),
        "uncommitted punch seen: {ext:?}"
    );
    vol.flush().unwrap();
    store.sync().unwrap();
    store.sync().unwrap();
    let after = prop(&store, "tank/vol", "referenced");
    assert!(
        after + (11 << 20) < full,
        "punched blocks are freed: {full} -> {after}"
    );
    assert!(prop(&store, "tank/vol", "used") < full);
    // write_zeroes on data: reads zeros, whole blocks become holes.
    vol.write_zeroes(14 << 20, 2 << 20, true).unwrap();
    assert_eq!(vol.read(14 << 20, 2 << 20).unwrap(), vec![0u8; 2 << 20]);
    let ext = vol.extents(14 << 20, 2 << 20).unwrap();
    assert_eq!(
        ext,
        vec![Extent {
            off: 14 << 20,
            len: 2 << 20,
            kind: ExtentKind::Hole
        }]
    );
}

/// What a block must be reported as: None when either answer is right (a written
/// block that partial zeroing made all zero becomes a hole only at a commit).
fn expected_kind(model: &[u8], written: &[bool], b: usize) -> Option<ExtentKind> {
    let blk = &model[b * BS as usize..(b + 1) * BS as usize];
    if blk.iter().any(|x| *x != 0) {
        Some(ExtentKind::Data)
    } else if !written[b] {
        Some(ExtentKind::Hole)
    } else {
        None
    }
}

#[test]
fn extents_follow_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_pool(&dir, 256 << 20);
    let blocks = 512u64;
    let vol = volume(&store, "tank/vol", blocks * BS, true);
    let mut model = vec![0u8; (blocks * BS) as usize];
    let mut written = vec![false; blocks as usize];
    let mut rng = Rng(11);
    for step in 0..400 {
        let off = rng.below(blocks * BS - 1);
        let len = 1 + rng.below((blocks * BS - off).min(20 * BS));
        let (a, z) = (off as usize, (off + len) as usize);
        match rng.below(3) {
            0 | 1 => {
                let data = rng.bytes(len as usize);
                vol.write(off, &data, false).unwrap();
                model[a..z].copy_from_slice(&data);
                written[a / BS as usize..=(z - 1) / BS as usize].fill(true);
            }
            _ => {
                vol.discard(off, len, false).unwrap();
                model[a..z].fill(0);
                let whole = a.div_ceil(BS as usize)..z / BS as usize;
                if !whole.is_empty() {
                    written[whole].fill(false);
                }
            }
        }
        if step % 37 == 0 {
            store.sync().unwrap();
        }
        // A random window, unaligned.
        let qoff = rng.below(blocks * BS - 1);
        let qlen = 1 + rng.below(blocks * BS - qoff);
        let ext = vol.extents(qoff, qlen).unwrap();
        let mut pos = qoff;
        for (i, e) in ext.iter().enumerate() {
            assert_eq!(e.off, pos, "extents are contiguous");
            assert!(e.len > 0);
            if i > 0 {
                assert_ne!(ext[i - 1].kind, e.kind, "adjacent runs merged");
            }
            for b in e.off / BS..(e.off + e.len).div_ceil(BS) {
                if let Some(k) = expected_kind(&model, &written, b as usize) {
                    assert_eq!(k, e.kind, "step {step} block {b} in {e:?}");
                }
            }
            if e.kind == ExtentKind::Hole {
                let got = vol.read(e.off, e.len as usize).unwrap();
                assert!(got.iter().all(|x| *x == 0), "a hole reads zeros");
            }
            pos += e.len;
        }
        assert_eq!(pos, qoff + qlen, "extents cover the query");
    }
    vol.flush().unwrap();
    assert!(vol.read(0, model.len()).unwrap() == model);
}

#[test]
fn out_of_range_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_pool(&dir, 128 << 20);
    let vol = volume(&store, "tank/vol", 4 << 20, true);
    let size = vol.size();
    let oor = |r: Result<(), ZvolError>| matches!(r, Err(ZvolError::OutOfRange { .. }));
    assert!(oor(vol.write(size - 1, &[1, 2], false)));
    assert!(oor(vol.write(size, &[1], true)));
    assert!(oor(vol.write(u64::MAX, &[1], false)));
    assert!(oor(vol.read(size - 10, 11).map(|_| ())));
    assert!(oor(vol.read(u64::MAX - 1, 2).map(|_| ())));
    assert!(oor(vol.discard(0, size + 1, false)));
    assert!(oor(vol.write_zeroes(u64::MAX, u64::MAX, false)));
    assert!(oor(vol.extents(size, 1).map(|_| ())));
    assert!(oor(vol.extents(1, u64::MAX).map(|_| ())));
    let e = vol.write(size, &[1], false).unwrap_err().to_string();
    assert!(e.contains("past the end"), "{e}");
    // Nothing grew, nothing was written.
    assert_eq!(vol.size(), size);
    assert_eq!(store.dataset("tank/vol").unwrap().objset().dirty_bytes(), 0);
    // The last byte and empty requests at the end are fine.
    vol.write(size - 1, &[5], false).unwrap();
    assert_eq!(vol.read(size - 1, 1).unwrap(), vec![5]);
    assert_eq!(vol.read(size, 0).unwrap(), Vec::<u8>::new());
    assert_eq!(vol.extents(size, 0).unwrap(), vec![]);
}

#[test]
fn snapshot_is_read_only_and_keeps_its_contents() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_pool(&dir, 128 << 20);
    let vol = volume(&store, "tank/vol", 4 << 20, false);
    vol.write(0, &[1u8; 65536], false).unwrap();
    store.snapshot(&["tank/vol@s1".to_string()]).unwrap();
    vol.write(0, &[2u8; 65536], false).unwrap();
    let snap = Zvol::open(
        store.clone(),
        store.snapshot_dataset("tank/vol@s1").unwrap(),
    )
    .unwrap();
    assert!(snap.is_readonly());
    assert_eq!(snap.size(), 4 << 20);
    assert_eq!(snap.read(0, 65536).unwrap(), vec![1u8; 65536]);
    assert!(matches!(
        snap.write(0, &[3], false),
        Err(ZvolError::ReadOnly(_))
    ));
    assert!(matches!(
        snap.discard(0, BS, false),
        Err(ZvolError::ReadOnly(_))
    ));
    assert!(matches!(
        snap.write_zeroes(0, BS, false),
        Err(ZvolError::ReadOnly(_))
    ));
    snap.flush().unwrap();
    assert_eq!(
        snap.extents(0, 4 << 20).unwrap()[0],
        Extent {
            off: 0,
            len: 65536,
            kind: ExtentKind::Data
        }
    );
    assert_eq!(vol.read(0, 65536).unwrap(), vec![2u8; 65536]);
    // Rollback while the device is open: it shows the snapshot's contents.
    store.rollback("tank/vol@s1", false).unwrap();
    assert_eq!(vol.read(0, 65536).unwrap(), vec![1u8; 65536]);
    vol.write(0, &[4u8; 16], true).unwrap();
    assert_eq!(vol.read(0, 16).unwrap(), vec![4u8; 16]);
}

#[test]
fn online_grow_is_seen_and_sync_always_reports_no_write_cache() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_pool(&dir, 128 << 20);
    let vol = volume(&store, "tank/vol", 4 << 20, true);
    vol.write((4 << 20) - 4, &[9u8; 4], false).unwrap();
    store.set_prop("tank/vol", "volsize", "8M").unwrap();
    assert_eq!(vol.size(), 8 << 20);
    vol.write((8 << 20) - 4, &[8u8; 4], false).unwrap();
    assert_eq!(vol.read((4 << 20) - 4, 4).unwrap(), vec![9u8; 4]);
    store.set_prop("tank/vol", "sync", "always").unwrap();
    assert!(!vol.write_cache());
    store.set_prop("tank/vol", "sync", "standard").unwrap();
    assert!(vol.write_cache());
}

#[test]
fn flushed_and_fua_writes_survive_a_power_cut() {
    let power = cachalot_pool::Power::new();
    let dev = SimDevice::on_power("d0", vec![0; 96 << 20], power.clone());
    let store = Store::create_on_devices(
        "tank",
        vec![Arc::new(dev.clone()) as Arc<dyn BlockDevice>],
        false,
        opts(),
    )
    .unwrap();
    let vol = volume(&store, "tank/vol", 16 << 20, true);
    store.sync().unwrap();
    let mut rng = Rng(5);
    let a = rng.bytes(3 * BS as usize + 5);
    let b = rng.bytes(BS as usize);
    let c = rng.bytes(BS as usize);
    vol.write(100, &a, false).unwrap();
    vol.flush().unwrap();
    vol.write(8 << 20, &b, true).unwrap();
    vol.write(9 << 20, &c, false).unwrap();
    vol.discard(9 << 20, BS, false).unwrap();
    vol.flush().unwrap();
    // Unflushed: may or may not survive, must not matter.
    vol.write(12 << 20, &rng.bytes(BS as usize), false).unwrap();
    power.cut_now();
    let image = dev.crash_image(|| false);
    drop(vol);
    drop(store);
    let dev = SimDevice::from_image("d0", image);
    let store = Store::import_devices(vec![Arc::new(dev) as Arc<dyn BlockDevice>], opts()).unwrap();
    let vol = Zvol::open(store.clone(), store.dataset("tank/vol").unwrap()).unwrap();
    assert_eq!(vol.read(100, a.len()).unwrap(), a, "flushed write");
    assert_eq!(vol.read(8 << 20, b.len()).unwrap(), b, "fua write");
    assert_eq!(
        vol.read(9 << 20, BS as usize).unwrap(),
        vec![0u8; BS as usize],
        "flushed discard"
    );
}

#[test]
fn concurrent_writers_on_one_device() {
    let dir = tempfile::tempdir().unwrap();
    let store = file_pool(&dir, 256 << 20);
    let vol = Arc::new(volume(&store, "tank/vol", 32 << 20, true));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let vol = vol.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(t);
                for i in 0..64u64 {
                    let off = (t * 64 + i) * BS;
                    let data = rng.bytes(BS as usize);
                    vol.write(off, &data, i % 8 == 0).unwrap();
                    assert_eq!(vol.read(off, BS as usize).unwrap(), data);
                    if i % 16 == 0 {
                        vol.flush().unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let ext = vol.extents(0, 32 << 20).unwrap();
    assert_eq!(
        ext[0],
        Extent {
            off: 0,
            len: 256 * BS,
            kind: ExtentKind::Data
        }
    );
    assert_eq!(ext[1].kind, ExtentKind::Hole);
}
