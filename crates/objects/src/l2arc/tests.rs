//! The ring: write and read back, wrap, rebuild after a restart (also after a
//! wrap), corruption read around with the error counted, rewound imports.

use super::*;
use cachalot_pool::{BlockDevice, FileDevice};
use std::os::unix::fs::FileExt;

const POOL: u64 = 77;

/// A cache device of `ring_mib` MiB of ring on a file in `dir`.
fn device(dir: &tempfile::TempDir, ring_mib: u64) -> Arc<CacheVdev> {
    let path = dir.path().join("c0");
    let dev: Arc<dyn BlockDevice> = match FileDevice::open(&path) {
        Ok(d) => Arc::new(d),
        Err(_) => {
            Arc::new(FileDevice::create_sparse(&path, (ring_mib << 20) + 4 * (256 << 10)).unwrap())
        }
    };
    Arc::new(CacheVdev::new(5, path, Some(dev)))
}

fn key(i: u64) -> BlockKey {
    BlockKey {
        vdev: 0,
        offset: i * 4096,
        birth: 10 + i,
    }
}

/// 16 KiB of bytes that depend on `i`.
fn block(i: u64) -> Value {
    (0..16384u64)
        .map(|j| (i.wrapping_mul(31) ^ j) as u8)
        .collect::<Vec<u8>>()
        .into()
}

fn blocks(r: std::ops::Range<u64>) -> Vec<(BlockKey, Value)> {
    r.map(|i| (key(i), block(i))).collect()
}

fn open(dev: &Arc<CacheVdev>) -> Arc<L2Arc> {
    L2Arc::open(
        dev.clone(),
        POOL,
        u64::MAX,
        &Arc::new(FeedQueue::new(1 << 20)),
    )
}

/// Every key of `r` the index holds reads back exactly; returns how many.
fn check_held(l2: &L2Arc, r: std::ops::Range<u64>) -> usize {
    let mut held = 0;
    for i in r {
        if l2.contains(&key(i)) {
            assert_eq!(l2.get(&key(i)).as_deref(), Some(&block(i)[..]), "block {i}");
            held += 1;
        }
    }
    held
}

#[test]
fn blocks_written_read_back_and_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4);
    let l2 = open(&dev);
    l2.write(blocks(0..40), 256 << 10);
    assert_eq!(check_held(&l2, 0..40), 40);
    assert!(l2.get(&key(1000)).is_none());
    let c = &dev.counters;
    assert_eq!(c.hits.load(Relaxed), 40);
    assert_eq!(c.misses.load(Relaxed), 1);
    assert_eq!(c.used.load(Relaxed), 40 * 16384);
    // A freed block leaves the index and its bytes leave `used`.
    l2.remove(&key(3));
    assert!(l2.get(&key(3)).is_none());
    assert_eq!(c.used.load(Relaxed), 39 * 16384);
}

#[test]
fn the_ring_wraps_and_drops_what_it_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 1);
    let l2 = open(&dev);
    // 3 MiB through a 1 MiB ring.
    for chunk in 0..12 {
        l2.write(blocks(chunk * 16..(chunk + 1) * 16), 128 << 10);
    }
    let held = check_held(&l2, 0..192);
    assert!(held > 20 && held < 64, "held {held}");
    // The newest blocks survive, the oldest were overwritten.
    assert!(l2.contains(&key(191)));
    assert!(!l2.contains(&key(0)));
    assert_eq!(dev.counters.cksum.load(Relaxed), 0);
    assert!(dev.counters.used.load(Relaxed) <= 1 << 20);
}

#[test]
fn the_index_is_rebuilt_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4);
    let l2 = open(&dev);
    l2.write(blocks(0..100), 256 << 10);
    drop(l2);
    // A new process: a new device handle, the index from the log blocks.
    let dev = device(&dir, 4);
    let l2 = open(&dev);
    assert_eq!(l2.len(), 100);
    assert_eq!(check_held(&l2, 0..100), 100);
    // It goes on writing after the batches it found, not over them.
    l2.write(blocks(100..150), 256 << 10);
    assert_eq!(check_held(&l2, 0..150), 150);
    drop(l2);
    let l2 = open(&device(&dir, 4));
    assert_eq!(l2.len(), 150);
}

#[test]
fn a_wrapped_ring_is_rebuilt_with_both_laps() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 1);
    let l2 = open(&dev);
    for chunk in 0..10 {
        l2.write(blocks(chunk * 16..(chunk + 1) * 16), 128 << 10);
    }
    let before: Vec<u64> = (0..160).filter(|&i| l2.contains(&key(i))).collect();
    drop(l2);
    let l2 = open(&device(&dir, 1));
    let after: Vec<u64> = (0..160).filter(|&i| l2.contains(&key(i))).collect();
    // The previous lap's batches beyond the head are found too.
    assert_eq!(before, after);
    assert!(
        after.first().copied() < Some(140),
        "only this lap: {after:?}"
    );
    assert_eq!(check_held(&l2, 0..160), after.len());
}

#[test]
fn corruption_is_read_around_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4);
    let l2 = open(&dev);
    l2.write(blocks(0..20), 256 << 10);
    let off = l2.state.lock().index[&key(7)].off;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("c0"))
        .unwrap();
    f.write_all_at(&[0xEE; 100], off + 50).unwrap();
    assert!(l2.get(&key(7)).is_none(), "bad bytes returned");
    assert_eq!(dev.counters.cksum.load(Relaxed), 1);
    // The entry is gone: the next lookup is a plain miss, not another error.
    assert!(!l2.contains(&key(7)));
    assert!(l2.get(&key(7)).is_none());
    assert_eq!(dev.counters.cksum.load(Relaxed), 1);
    assert_eq!(check_held(&l2, 0..20), 19);
    // After a restart the log block still names it: the read catches it again.
    drop(l2);
    let dev = device(&dir, 4);
    let l2 = open(&dev);
    assert!(l2.get(&key(7)).is_none());
    assert_eq!(dev.counters.cksum.load(Relaxed), 1);
    assert_eq!(check_held(&l2, 0..20), 19);
}

#[test]
fn a_corrupt_log_block_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4);
    let l2 = open(&dev);
    l2.write(blocks(0..20), 64 << 10);
    let (start, _) = dev.ring();
    drop(l2);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("c0"))
        .unwrap();
    // The first batch's header: its checksum fails, nothing after it is reached.
    f.write_all_at(&[0x55; 8], start + 40).unwrap();
    let l2 = open(&device(&dir, 4));
    assert_eq!(l2.len(), 0);
}

#[test]
fn blocks_born_after_the_imported_txg_are_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4);
    let l2 = open(&dev);
    l2.write(blocks(0..20), 256 << 10);
    drop(l2);
    // key(i) is born at 10 + i: a pool rewound to txg 19 keeps 0..=9.
    let l2 = L2Arc::open(
        device(&dir, 4),
        POOL,
        19,
        &Arc::new(FeedQueue::new(1 << 20)),
    );
    assert_eq!(l2.len(), 10);
    // Another pool's log blocks are not this pool's.
    let other = L2Arc::open(
        device(&dir, 4),
        POOL + 1,
        u64::MAX,
        &Arc::new(FeedQueue::new(1 << 20)),
    );
    assert_eq!(other.len(), 0);
}

#[test]
fn the_feed_queue_is_bounded_and_idle_without_a_device() {
    let q = FeedQueue::new(64 << 10);
    q.push(&key(1), &block(1));
    assert!(q.take().is_empty(), "queued with no cache device");
    q.active.store(true, Relaxed);
    for i in 0..100 {
        q.push(&key(i), &block(i));
    }
    // 4 batches of 64 KiB: 16 blocks of 16 KiB, the rest dropped.
    assert_eq!(q.take().len(), 16);
}
