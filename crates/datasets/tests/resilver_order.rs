//! What a full resilver writes to the device it rebuilds (issue 17: "a
//! resilver that copies only allocated blocks, in an order that is sequential
//! on the new device"): about the device's share of the allocated bytes, not
//! its size; in few long writes (adjacent columns merged); and in ascending
//! offset order but for the overlap of the workers' batches.

mod common;
use cachalot_datasets::Store;
use cachalot_pool::label::{label_offsets, DATA_START};
use cachalot_pool::{BlockDevice, SimDevice, VdevKind};
use common::*;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

/// 16 MiB of 16K records: 1024 blocks, 16 resilver batches.
const DATA: usize = 16 << 20;
const DEV_SIZE: u64 = 256 << 20;

/// Writes to sim:d0 while `on`: (offset, length), in the order issued.
#[derive(Default)]
struct Log {
    on: AtomicBool,
    writes: Mutex<Vec<(u64, u64)>>,
}

struct Recorded {
    dev: SimDevice,
    log: Arc<Log>,
}

impl BlockDevice for Recorded {
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
        if self.dev.path() == Path::new("sim:d0") && self.log.on.load(SeqCst) {
            self.log.writes.lock().push((offset, buf.len() as u64));
        }
        self.dev.write_at(buf, offset)
    }
    fn flush(&self) -> cachalot_pool::Result<()> {
        self.dev.flush()
    }
}

#[test]
fn full_resilver_writes_only_allocated_columns_in_order() {
    let log = Arc::new(Log::default());
    let devs = sim_devices(3, DEV_SIZE);
    let recorded: Vec<Arc<dyn BlockDevice>> = devs
        .iter()
        .map(|d| {
            Arc::new(Recorded {
                dev: d.clone(),
                log: log.clone(),
            }) as Arc<dyn BlockDevice>
        })
        .collect();
    let store = Store::create_on_group("tank", recorded, VdevKind::Raidz1, manual_opts()).unwrap();
    create_uncompressed_fs_with(&store, "tank/d", &[("recordsize", "16K")]);
    let ds = store.dataset("tank/d").unwrap();
    let id = ds.create_object().unwrap();
    ds.write(id, 0, &Rng(5).bytes(DATA)).unwrap();
    store.sync().unwrap();
    // A device back from a fault is rebuilt in full, as a replacement is.
    let eio = cachalot_pool::fault::Fault::parse("all", "eio", 100).unwrap();
    store.pool().inject_fault("sim:d0", Some(eio)).unwrap();
    ds.write(id, DATA as u64, &Rng(6).bytes(1 << 20)).unwrap();
    store.sync().unwrap();
    store.pool().inject_fault("sim:d0", None).unwrap();
    let allocated = store.pool().space().allocated;
    log.on.store(true, SeqCst);
    store
        .change_devices(|p, next| p.online_device("sim:d0", next))
        .unwrap();
    let s = store.scrub_wait();
    log.on.store(false, SeqCst);
    assert_eq!((s.kind.as_str(), s.min_birth_txg), ("resilver", 0), "{s:?}");

    // The resilver's own writes: labels (and the txgs it may commit) aside,
    // everything between the front and back labels.
    let back = label_offsets(DEV_SIZE)[2];
    let writes: Vec<(u64, u64)> = log
        .writes
        .lock()
        .iter()
        .copied()
        .filter(|&(o, _)| o >= DATA_START && o < back)
        .collect();
    let bytes: u64 = writes.iter().map(|w| w.1).sum();
    // One of three columns of every allocated stripe: a third of the
    // allocation (parity included), give or take the stripes' rounding, and
    // never the device (256 MiB).
    let share = allocated / 3;
    assert!(
        bytes > share * 8 / 10 && bytes < share * 13 / 10,
        "wrote {bytes} B for a {share} B share of {allocated} B allocated"
    );
    // Sequential: the columns of consecutive blocks are merged into long
    // writes (a batch's in one, here 512K), which carry nearly every byte; a
    // resilver in any other order than the device's would write 8K at a time.
    // (The small writes are the txg commits the online and the end of the
    // resilver make.)
    let long: Vec<(u64, u64)> = writes.iter().copied().filter(|w| w.1 >= 64 << 10).collect();
    let long_bytes: u64 = long.iter().map(|w| w.1).sum();
    assert!(
        long_bytes * 10 >= bytes * 9,
        "only {long_bytes} of {bytes} B in writes of 64K or more: {writes:?}"
    );
    // In ascending order but where a worker finished its batch before an
    // earlier one's: the workers run at most 8 batches ahead (half of the 17
    // here), so no long write lands further back than that.
    let mut end = 0;
    for &(o, len) in &long {
        assert!(
            o + bytes / 2 >= end,
            "a write at {o} after one ending at {end}: {writes:?}"
        );
        end = end.max(o + len);
    }
}
