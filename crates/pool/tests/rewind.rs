//! Import never drops a committed txg without being asked: when the newest
//! committed uberblock's tree does not read (damage beyond redundancy), a
//! normal import refuses and names the txg; `Rewind::Allow` (`pool import -F`)
//! goes back to the previous txg and says so in `pool status`. A commit cut
//! before its final flush (never acknowledged) may still be skipped silently;
//! a rotted ring slot or a failed ring write does not pass for such a cut.

use cachalot_pool::label::{
    label_offsets, DATA_START, UBER_RING_OFFSET, UBER_SLOTS, UBER_SLOT_SIZE,
};
use cachalot_pool::{BlkPtr, BlockDevice, Pool, PoolError, Rewind, SimDevice, WriteOpts};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

const DEV_SIZE: u64 = 64 << 20;

/// A one-device pool with txgs 1 and 2 committed, each rooted at a block of its
/// own; `cut` is called right before the commit of txg 2 with the number of
/// writes that commit issues (learned from an identical run). Returns the root
/// of txg 2.
fn two_txgs(dev: &SimDevice, cut: impl FnMut(u64)) -> BlkPtr {
    two_txgs_on(vec![Arc::new(dev.clone())], || dev.writes_issued(), cut)
}

/// `two_txgs` on any devices (a mirror when more than one); `writes` counts
/// the writes issued so far.
fn two_txgs_on(
    devs: Vec<Arc<dyn BlockDevice>>,
    writes: impl Fn() -> u64,
    mut cut: impl FnMut(u64),
) -> BlkPtr {
    let mirror = devs.len() > 1;
    let pool = Pool::create_on_devices("p", devs, mirror, 12).unwrap();
    let wo = WriteOpts::RAW_DATA;
    let mut root = BlkPtr::HOLE;
    for txg in 1..=2u64 {
        let data: Vec<u8> = (0..16384u64).map(|j| (j * 7 + txg) as u8).collect();
        root = pool.write_block(txg, &data, wo).unwrap();
        if txg == 2 {
            cut(writes());
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

/// Where the uberblock of `txg` lies in label copy `copy` of a device.
fn slot_offset(dev_size: u64, copy: usize, txg: u64) -> u64 {
    label_offsets(dev_size)[copy] + UBER_RING_OFFSET + (txg % UBER_SLOTS) * UBER_SLOT_SIZE
}

/// A slot of a finished commit that rots afterwards fails its checksum: that
/// is damage, not a commit cut before its final flush, so a damaged newest tree
/// still stops the import (it was skipped silently before).
#[test]
fn a_rotted_ring_slot_does_not_pass_for_a_cut_commit() {
    let dev = SimDevice::new("d0", DEV_SIZE);
    let root = two_txgs(&dev, |_| {});
    damage(&dev, &root);
    dev.corrupt(slot_offset(DEV_SIZE, 3, 2) + 100, &[0x5A; 8]);
    match Pool::import_devices(vec![Arc::new(dev.clone()) as Arc<dyn BlockDevice>]) {
        Ok(p) => panic!(
            "import silently rewound to txg {} (txg 2 was committed; one slot rotted)",
            p.uberblock().txg
        ),
        Err(e) => assert!(e.to_string().contains("txg 2"), "{e}"),
    }
}

/// A device whose writes at `fail_at` fail (one ring slot of a flaky disk).
struct FailingSlot {
    dev: SimDevice,
    fail_at: AtomicU64,
}

impl BlockDevice for FailingSlot {
    fn path(&self) -> &Path {
        self.dev.path()
    }
    fn size(&self) -> u64 {
        self.dev.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> cachalot_pool::Result<()> {
        self.dev.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> cachalot_pool::Result<()> {
        if offset == self.fail_at.load(SeqCst) {
            return Err(PoolError::io(
                self.path(),
                std::io::Error::other("injected"),
            ));
        }
        self.dev.write_at(buf, offset)
    }
    fn flush(&self) -> cachalot_pool::Result<()> {
        self.dev.flush()
    }
}

/// The uberblock write of txg 2 fails on one ring of the last device while the
/// commit goes on (it reached the other rings): the commit is finished and
/// acknowledged, so its damaged tree stops the import, on a single disk (the
/// record is on the failing device itself) and on a mirror (on the other
/// side). It was skipped silently before.
#[test]
fn a_failed_ring_write_does_not_pass_for_a_cut_commit() {
    for n in [1usize, 2] {
        let sims: Vec<SimDevice> = (0..n)
            .map(|i| SimDevice::new(&format!("d{i}"), DEV_SIZE))
            .collect();
        let flaky = Arc::new(FailingSlot {
            dev: sims[n - 1].clone(),
            fail_at: AtomicU64::new(u64::MAX),
        });
        let mut devs: Vec<Arc<dyn BlockDevice>> = sims[..n - 1]
            .iter()
            .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
            .collect();
        devs.push(flaky.clone());
        let root = two_txgs_on(
            devs,
            || 0,
            |_| flaky.fail_at.store(slot_offset(DEV_SIZE, 2, 2), SeqCst),
        );
        for d in &sims {
            damage(d, &root);
        }
        let again = sims
            .iter()
            .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
            .collect();
        match Pool::import_devices(again) {
            Ok(p) => panic!(
                "{n} device(s): import silently rewound to txg {} (txg 2 was committed; one ring write failed)",
                p.uberblock().txg
            ),
            Err(e) => assert!(e.to_string().contains("txg 2"), "{n} device(s): {e}"),
        }
    }
}
