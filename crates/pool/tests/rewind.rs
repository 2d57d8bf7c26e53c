//! Import never drops a committed txg without being asked: when the newest
//! committed uberblock's tree does not read (damage beyond redundancy), a
//! normal import refuses and names the txg; `Rewind::Allow` (`pool import -F`)
//! goes back to the previous txg and says so in `pool status`. A commit cut
//! before its final flush (never acknowledged) may still be skipped silently.

use cachalot_pool::label::DATA_START;
use cachalot_pool::{BlkPtr, BlockDevice, Pool, Rewind, SimDevice, WriteOpts};
use std::sync::Arc;

const DEV_SIZE: u64 = 64 << 20;

/// A one-device pool with txgs 1 and 2 committed, each rooted at a block of its
/// own; `cut` is called right before the commit of txg 2 with the number of
/// writes that commit issues (learned from an identical run). Returns the root
/// of txg 2.
fn two_txgs(dev: &SimDevice, mut cut: impl FnMut(u64)) -> BlkPtr {
    let pool = Pool::create_on_devices("p", vec![Arc::new(dev.clone())], false, 12).unwrap();
    let wo = WriteOpts::RAW_DATA;
    let mut root = BlkPtr::HOLE;
    for txg in 1..=2u64 {
        let data: Vec<u8> = (0..16384u64).map(|j| (j * 7 + txg) as u8).collect();
        root = pool.write_block(txg, &data, wo).unwrap();
        if txg == 2 {
            let before = dev.writes_issued();
            cut(before);
        }
        pool.commit(txg, root).unwrap();
    }
    root
}

/// Overwrite every copy of `bp` on `dev` with noise.
fn damage(dev: &SimDevice, bp: &BlkPtr) {
    for d in bp.dva_iter() {
        dev.corrupt(DATA_START + d.offset, &vec![0xA5; d.asize as usize]);
    }
}

#[test]
fn an_unreadable_newest_tree_stops_the_import_and_a_rewind_is_reported() {
    let dev = SimDevice::new("d0", DEV_SIZE);
    let root = two_txgs(&dev, |_| {});
    damage(&dev, &root);
    let devs = || vec![Arc::new(dev.clone()) as Arc<dyn BlockDevice>];
    let e = match Pool::import_devices(devs()) {
        Ok(p) => panic!(
            "import silently rewound to txg {} (txg 2 was committed)",
            p.uberblock().txg
        ),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("txg 2") && e.contains("-F"), "{e}");
    assert!(e.contains("sim:d0: 0 read, 1 checksum"), "{e}");
    // Refused: nothing changed, the same import refuses again.
    assert!(Pool::import_devices(devs()).is_err());
    let pool = Pool::import_devices_with(devs(), Rewind::Allow).unwrap();
    assert_eq!(pool.uberblock().txg, 1);
    let notices = pool.notices().join("\n");
    assert!(
        notices.contains("rewound to txg 1") && notices.contains("txg 2"),
        "{notices}"
    );
}

#[test]
fn a_commit_cut_before_its_final_flush_is_skipped_silently() {
    // The commit of txg 2 issues `n` writes, its uberblock copies last (one per
    // label); the cut tears the second copy, so only the first may survive.
    let probe = SimDevice::new("d0", DEV_SIZE);
    let mut start = 0;
    two_txgs(&probe, |w| start = w);
    let n = probe.writes_issued() - start;
    let dev = SimDevice::new("d0", DEV_SIZE);
    let root = two_txgs(&dev, |w| dev.cut_power_at_write(w + n - 3));
    assert!(dev.is_cut());
    let img = SimDevice::from_image("d0", dev.crash_image(|| true));
    // Its tree was flushed before the uberblock was written: damage it too, so
    // the import has to choose.
    damage(&img, &root);
    let pool = Pool::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>]).unwrap();
    assert_eq!(pool.uberblock().txg, 1);
    assert!(pool.notices().is_empty(), "{:?}", pool.notices());
}
