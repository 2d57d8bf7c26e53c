//! Intent log crash tests: concurrent fsync and O_DSYNC writers, cut by simulated
//! power loss (one power supply for data and log devices) at random points. After
//! import every write whose fsync returned is present byte for byte, and no write is
//! visible half-applied. Also: a log device lost or corrupted between the crash and
//! the import gives a clear message and the pool imports with what the main vdevs
//! committed.

mod common;
use cachalot_datasets::{Payload, Store};
use cachalot_pool::{BlockDevice, Power, SimDevice};
use common::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const REC_SMALL: usize = 16384;
/// Seeds with this bit write 128 KiB records: full blocks of at least
/// `BY_REFERENCE_MIN`, so without a log device they are logged by reference.
const LARGE: u64 = 1 << 40;

fn rec_len(seed: u64) -> usize {
    if seed & LARGE != 0 {
        128 * 1024
    } else {
        REC_SMALL
    }
}
const WRITERS: u64 = 4;
const PER_WRITER: u64 = 12;

fn record(seed: u64, writer: u64, i: u64) -> Vec<u8> {
    let mut r = Rng(seed ^ (writer << 32) ^ i);
    r.bytes(rec_len(seed))
}

struct Outcome {
    data: Vec<SimDevice>,
    slog: Option<SimDevice>,
    objs: Vec<u64>,
    acked: Vec<u64>,
    /// Device writes of the writers (not the setup before them): the range cut
    /// points are drawn from.
    writes: u64,
    /// The cut landed while the writers ran (not a clean power-off after them).
    cut_reached: bool,
}

/// Writers each append records to their own object, fsync (or write_sync, or
/// write_behind with or without FUA) after every one, and note what returned
/// while the power was still on.
fn workload(seed: u64, slog: bool, cut: Option<u64>) -> Outcome {
    workload_with(seed, slog, cut, Duration::from_millis(15))
}

/// `txg_timeout`: how often commits interleave with the log writes.
fn workload_with(seed: u64, slog: bool, cut: Option<u64>, txg_timeout: Duration) -> Outcome {
    let power = Power::new();
    let data = vec![SimDevice::on_power("d0", vec![0; 64 << 20], power.clone())];
    let log = slog.then(|| SimDevice::on_power("slog", vec![0; 32 << 20], power.clone()));
    let mut opts = manual_opts();
    opts.txg_timeout = txg_timeout;
    let store = Store::create_on_devices_with_log(
        "tank",
        as_dyn(&data),
        false,
        log.iter()
            .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
            .collect(),
        opts,
    )
    .unwrap();
    let ds = store.dataset("tank").unwrap();
    let objs: Vec<u64> = (0..WRITERS).map(|_| ds.create_object().unwrap()).collect();
    store.sync().unwrap();
    let base = power.writes_issued();
    if let Some(c) = cut {
        power.cut_at_write(base + c);
    }
    let acked: Vec<AtomicU64> = (0..WRITERS).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (ds, objs, acked, power) = (&ds, &objs, &acked, &power);
            s.spawn(move || {
                for i in 0..PER_WRITER {
                    let rec = record(seed, w, i);
                    let off = i * rec_len(seed) as u64;
                    let r = if w == WRITERS - 1 {
                        // A volume's writes: full blocks written behind, made
                        // durable by FUA (every other one) or the fsync after;
                        // read into owned block-sized pieces as the NBD server
                        // does, so whole records are taken without a copy.
                        let fua = i % 2 == 0;
                        let owned = Payload::read_from(&mut &rec[..], off, rec.len(), 128 << 10);
                        ds.write_behind(objs[w as usize], off, owned.unwrap(), fua)
                            .and_then(|_| if fua { Ok(()) } else { ds.fsync() })
                    } else if (i + w) % 3 == 0 {
                        ds.write_sync(objs[w as usize], off, &rec)
                    } else {
                        ds.write(objs[w as usize], off, &rec)
                            .and_then(|_| ds.fsync())
                    };
                    if r.is_err() || power.is_cut() {
                        return;
                    }
                    acked[w as usize].store(i + 1, Ordering::SeqCst);
                }
            });
        }
    });
    let (writes, cut_reached) = (power.writes_issued() - base, power.is_cut());
    power.cut_now();
    drop(ds);
    drop(store);
    Outcome {
        data,
        slog: log,
        objs,
        acked: acked.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
        writes,
        cut_reached,
    }
}

fn image(d: &SimDevice, rng: &mut Rng, name: &str) -> SimDevice {
    SimDevice::from_image(name, d.crash_image(|| rng.chance(50)))
}

/// Every acknowledged record is there; every other record slot is all new data or
/// all zeros (never a mix).
fn verify(store: &Store, o: &Outcome, seed: u64, ctx: &str) {
    #[allow(non_snake_case)]
    let REC = rec_len(seed);
    let ds = store.dataset("tank").unwrap();
    for w in 0..WRITERS {
        let obj = o.objs[w as usize];
        let got = ds.read(obj, 0, (PER_WRITER as usize) * REC).unwrap();
        for i in 0..PER_WRITER {
            let want = record(seed, w, i);
            let at = (i as usize) * REC;
            let slot = if at < got.len() {
                &got[at..(at + REC).min(got.len())]
            } else {
                &[][..]
            };
            if i < o.acked[w as usize] {
                assert!(
                    slot == want.as_slice(),
                    "{ctx}: writer {w} record {i} was acknowledged but is not intact"
                );
            } else {
                let zeros = slot.iter().all(|b| *b == 0);
                assert!(
                    zeros || slot == &want[..slot.len()],
                    "{ctx}: writer {w} record {i} is half-applied"
                );
            }
        }
    }
}

/// Cut at device write `cut` of the writers: whether the cut landed while they
/// ran, and their writes in this run.
fn cut_and_check(seed: u64, slog: bool, cut: u64) -> (bool, u64) {
    let o = workload(seed, slog, Some(cut));
    let mut rng = Rng(seed ^ cut);
    let mut devs: Vec<Arc<dyn BlockDevice>> = o
        .data
        .iter()
        .map(|d| Arc::new(image(d, &mut rng, "i0")) as Arc<dyn BlockDevice>)
        .collect();
    if let Some(l) = &o.slog {
        devs.push(Arc::new(image(l, &mut rng, "ilog")));
    }
    let ctx = format!("seed {seed} slog {slog} cut {cut} acked {:?}", o.acked);
    let store =
        Store::import_devices(devs, manual_opts()).unwrap_or_else(|e| panic!("{ctx}: import: {e}"));
    verify(&store, &o, seed, &ctx);
    // A power cut is not corruption: replay ending at a never-written log block
    // must not count checksum errors against the device.
    let cksum: u64 = store.status().devices.iter().map(|d| d.cksum).sum();
    assert_eq!(cksum, 0, "{ctx}: checksum errors counted by import");
    store.scrub_start().unwrap();
    let s = store.scrub_wait();
    assert_eq!((s.errors, s.unrecoverable), (0, 0), "{ctx}: scrub {s:?}");
    // Replay is idempotent: export, import again, same content.
    store.export().unwrap();
    (o.cut_reached, o.writes)
}

/// `cuts` power cuts at writes drawn (by `rng`) over the writers' writes in a run
/// without a cut (`total`, from `calibrate`), seeds `seed0..`. Threads make each
/// run's write count differ (more on a loaded machine), so a cut may fall past
/// the end of a shorter run: a clean power-off, not a crash. Such a cut is drawn
/// again below that run's own count, up to twice; every cut must land.
fn cut_points(total: u64, cuts: u64, mut rng: Rng, seed0: u64, slog: bool) {
    for k in 0..cuts {
        let mut cut = rng.below(total);
        for again in 0.. {
            let (reached, writes) = cut_and_check(seed0 + k, slog, cut);
            if reached {
                break;
            }
            assert!(
                again < 2,
                "seed {}: cut {cut} fell after the writers' last write ({writes} writes) three times",
                seed0 + k
            );
            cut = rng.below(writes);
        }
    }
}

/// The writers' device writes in the shortest of three runs without a cut
/// (seeds `seed..seed + 3`): the commits that interleave with the log writes
/// vary from run to run, and a range from a long run would leave cuts past
/// the end of shorter ones.
fn calibrate(seed: u64, slog: bool) -> u64 {
    (seed..seed + 3)
        .map(|s| {
            let o = workload(s, slog, None);
            assert!(
                o.acked.iter().all(|a| *a == PER_WRITER),
                "without a cut every write is acknowledged"
            );
            o.writes
        })
        .min()
        .unwrap()
}

#[test]
fn fsync_writers_power_loss_120_cuts() {
    let total = calibrate(1, false);
    cut_points(total, 120, Rng(77), 100, false);
}

/// 128 KiB writes without a log device: logged by reference (the block written
/// in place, its pointer in the log). A cut after the log record but before the
/// txg keeps the acknowledged data (replay reads the block); a cut before the
/// log flush never acknowledged the write.
#[test]
fn large_writes_by_reference_power_loss_60_cuts() {
    let total = calibrate(LARGE | 3, false);
    cut_points(total, 60, Rng(79), LARGE | 900, false);
}

/// 128 KiB writes with a log device: not by reference, but not copied into
/// their itx either (`WriteLazy`): the log leader reads them from the object set.
#[test]
fn large_writes_on_log_device_power_loss_30_cuts() {
    let total = calibrate(LARGE | 4, true);
    cut_points(total, 30, Rng(80), LARGE | 1000, true);
}

#[test]
fn fsync_writers_with_log_device_power_loss_90_cuts() {
    let total = calibrate(2, true);
    cut_points(total, 90, Rng(78), 500, true);
}

#[test]
fn lost_or_corrupt_log_device_imports_with_a_message() {
    for corrupt in [false, true] {
        let seed = 9;
        // No background commits: at the crash the log device holds every record.
        let o = workload_with(seed, true, None, Duration::from_secs(3600));
        let mut rng = Rng(1);
        let mut devs: Vec<Arc<dyn BlockDevice>> = o
            .data
            .iter()
            .map(|d| Arc::new(image(d, &mut rng, "i0")) as Arc<dyn BlockDevice>)
            .collect();
        if corrupt {
            let l = image(o.slog.as_ref().unwrap(), &mut rng, "ilog");
            // Overwrite the log device's data area (after its labels) with garbage.
            l.corrupt(512 << 10, &Rng(2).bytes(8 << 20));
            devs.push(Arc::new(l));
        }
        let store = Store::import_devices(devs, manual_opts()).unwrap();
        let st = store.status();
        let text = st.notices.join("\n");
        assert!(
            text.contains("log"),
            "corrupt={corrupt}: no message about the log: {text:?}"
        );
        // Whatever the main vdevs committed is intact; nothing is half-applied.
        let mut none = Outcome {
            acked: vec![0; WRITERS as usize],
            ..o
        };
        none.acked = vec![0; WRITERS as usize];
        verify(&store, &none, seed, &format!("corrupt={corrupt}"));
        // The pool keeps working and logs to the main vdevs.
        let ds = store.dataset("tank").unwrap();
        ds.write(none.objs[0], 0, b"still works").unwrap();
        ds.fsync().unwrap();
        store.export().unwrap();
    }
}

/// sync=always makes plain writes durable; sync=disabled makes fsync return without
/// durability (reported as such by `get sync`); logbias=throughput keeps log blocks
/// off the separate log device.
#[test]
fn sync_and_logbias_policies_are_honoured() {
    for policy in ["always", "disabled", "standard"] {
        let power = Power::new();
        let data = vec![SimDevice::on_power("d0", vec![0; 64 << 20], power.clone())];
        let store = Store::create_on_devices("tank", as_dyn(&data), false, manual_opts()).unwrap();
        store.set_prop("tank", "sync", policy).unwrap();
        assert_eq!(
            store.get_props("tank", Some(&["sync".into()])).unwrap()[0].raw,
            policy
        );
        let ds = store.dataset("tank").unwrap();
        let obj = ds.create_object().unwrap();
        store.sync().unwrap();
        ds.write(obj, 0, &[1u8; 4096]).unwrap();
        ds.write(obj, 4096, &[2u8; 4096]).unwrap();
        if policy != "always" {
            ds.fsync().unwrap();
        }
        power.cut_now();
        drop(ds);
        drop(store);
        let img = SimDevice::from_image("i", data[0].crash_image(|| false));
        let store =
            Store::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>], manual_opts())
                .unwrap();
        let got = store.dataset("tank").unwrap().read(obj, 0, 8192).unwrap();
        match policy {
            "disabled" => assert!(
                got.is_empty(),
                "sync=disabled: nothing was committed, nothing may appear"
            ),
            _ => assert_eq!(
                got,
                [vec![1u8; 4096], vec![2u8; 4096]].concat(),
                "sync={policy}"
            ),
        }
    }
    // logbias: latency uses the log device, throughput does not.
    for (bias, expect_slog) in [("latency", true), ("throughput", false)] {
        let data = sim_devices(1, 64 << 20);
        let slog = SimDevice::new("slog", 32 << 20);
        let store = Store::create_on_devices_with_log(
            "tank",
            as_dyn(&data),
            false,
            vec![Arc::new(slog.clone()) as Arc<dyn BlockDevice>],
            manual_opts(),
        )
        .unwrap();
        store.set_prop("tank", "logbias", bias).unwrap();
        let ds = store.dataset("tank").unwrap();
        let obj = ds.create_object().unwrap();
        ds.fsync().unwrap();
        for i in 0..5 {
            ds.write_sync(obj, i * 4096, &[9u8; 4096]).unwrap();
        }
        // Vdev 0 is the data disk, vdev 1 the log device.
        let blocks = ds.objset().zil().blocks();
        assert!(!blocks.is_empty());
        let on_slog = blocks.iter().all(|d| d.vdev == 1);
        let on_data = blocks.iter().all(|d| d.vdev == 0);
        assert!(
            if expect_slog { on_slog } else { on_data },
            "logbias={bias}: log blocks on {blocks:?}"
        );
        store.export().unwrap();
    }
}

/// A `Tx` is logged as one group: an fsync whose group spans several log blocks,
/// cut by power loss at each of its device writes, imports with all of the `Tx`'s
/// changes or none of them (never a prefix). Also: the fsync commits no txg.
#[test]
fn tx_group_is_replayed_whole_or_not_at_all() {
    const PART: usize = 100_000;
    let part = |k: u64| Rng(40 + k).bytes(PART);
    // Returns the data device, the objects, and the power-supply write count
    // before the fsync of the group.
    let run = |cut: Option<u64>| {
        let power = Power::new();
        let data = vec![SimDevice::on_power("d0", vec![0; 64 << 20], power.clone())];
        let store = Store::create_on_devices("tank", as_dyn(&data), false, manual_opts()).unwrap();
        let ds = store.dataset("tank").unwrap();
        let objs: Vec<u64> = (0..3).map(|_| ds.create_object().unwrap()).collect();
        store.sync().unwrap();
        // The first log write of a dataset commits a txg (the log's header).
        ds.write(objs[0], 0, b"x").unwrap();
        ds.fsync().unwrap();
        let txg = store.synced_txg();
        {
            let tx = ds.begin(1 << 20).unwrap();
            for (k, o) in objs.iter().enumerate() {
                tx.write(*o, 0, &part(k as u64)).unwrap();
                tx.set_bonus(*o, &[k as u8 + 1; 64]).unwrap();
            }
        }
        let before = power.writes_issued();
        if let Some(c) = cut {
            power.cut_at_write(before + c);
        }
        let r = ds.fsync();
        if cut.is_none() {
            r.unwrap();
            assert_eq!(store.synced_txg(), txg, "the fsync committed a txg");
        }
        let after = power.writes_issued();
        power.cut_now();
        drop(ds);
        drop(store);
        (data, objs, after - before)
    };
    let (_, _, writes) = run(None);
    assert!(
        writes >= 4,
        "the group should span several log blocks ({writes} writes)"
    );
    let (mut all, mut none) = (0, 0);
    for c in 0..=writes {
        let (data, objs, _) = run(Some(c));
        let mut rng = Rng(c);
        let img = image(&data[0], &mut rng, "i0");
        let store =
            Store::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>], manual_opts())
                .unwrap();
        let ds = store.dataset("tank").unwrap();
        let present: Vec<bool> = objs
            .iter()
            .enumerate()
            .map(|(k, o)| {
                let got = ds.read(*o, 0, PART).unwrap();
                let bonus = ds.object_info(*o).unwrap().bonus;
                if got == part(k as u64) {
                    assert_eq!(bonus[..64], [k as u8 + 1; 64], "cut {c}: bonus of {o}");
                    true
                } else {
                    assert!(
                        got.len() <= 1,
                        "cut {c}: object {o} holds part of the write"
                    );
                    assert_eq!(bonus, [0; 320], "cut {c}: bonus of {o}");
                    false
                }
            })
            .collect();
        match present.iter().filter(|p| **p).count() {
            0 => none += 1,
            3 => all += 1,
            _ => panic!(
                "cut at write {c} of {writes}: a prefix of the group was replayed: {present:?}"
            ),
        }
        store.export().unwrap();
    }
    assert!(all > 0 && none > 0, "all {all}, none {none}");
}

/// The pointers of the writes by reference in the dataset's live log blocks.
fn logged_refs(ds: &cachalot_datasets::Dataset) -> Vec<cachalot_pool::BlkPtr> {
    use cachalot_objects::zil::{decode_block, Record};
    let zil = ds.objset().zil();
    let pool = &ds.objset().cache().pool;
    let mut out = Vec::new();
    for d in zil.blocks() {
        let Ok(raw) = pool.read_log_block_raw(&d) else {
            continue;
        };
        for seq in 1..64 {
            if let Some(b) = decode_block(&raw, zil.guid(), seq) {
                for r in b.records {
                    if let Record::WriteRef { bp, .. } = r.rec {
                        out.push(bp);
                    }
                }
            }
        }
    }
    out
}

/// A pool on one device (manual txgs) with an object in `tank`, whose log has
/// had its first write (which waits for a txg), so later fsyncs only log.
/// An fsync after write-behind writes one block to `dev`: its log block
/// (the data blocks are named by reference, not written again).
fn fsync_writes_its_log_block_only(dev: &SimDevice, ds: &cachalot_datasets::Dataset) {
    let before = dev.writes_issued();
    ds.fsync().unwrap();
    assert_eq!(
        dev.writes_issued() - before,
        1,
        "the fsync after a write-behind writes its log block only"
    );
}

fn one_device_logged_object() -> (
    Vec<SimDevice>,
    Arc<Store>,
    Arc<cachalot_datasets::Dataset>,
    u64,
) {
    let data = sim_devices(1, 64 << 20);
    let store = Store::create_on_devices("tank", as_dyn(&data), false, manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    let obj = ds.create_object().unwrap();
    ds.fsync().unwrap();
    (data, store, ds, obj)
}

/// A block written by reference at an fsync is linked by its txg's sync (not
/// written twice) when the txg still holds the bytes it was written from; a
/// rewrite of the same block in the same txg after the fsync wins, whole or
/// partial (which must not change the record the early write was made from in
/// place), also after an export and import.
#[test]
fn write_by_reference_is_linked_or_superseded() {
    const BS: usize = 128 * 1024;
    let (data, store, ds, obj) = one_device_logged_object();
    let (a, b) = (Rng(1).bytes(BS), Rng(2).bytes(BS));
    // Linked: the tree points at the logged block.
    ds.write(obj, 0, &a).unwrap();
    ds.fsync().unwrap();
    let refs = logged_refs(&ds);
    assert_eq!(
        refs.len(),
        1,
        "a 128K write is logged by reference: {refs:?}"
    );
    store.sync().unwrap();
    assert_eq!(ds.objset().block_pointer(obj, 0).unwrap(), refs[0]);
    // Superseded: rewritten after the fsync, in the same txg.
    ds.write(obj, BS as u64, &a).unwrap();
    ds.fsync().unwrap();
    ds.write(obj, BS as u64, &b).unwrap();
    let refs = logged_refs(&ds);
    assert_eq!(refs.len(), 1, "{refs:?}");
    store.sync().unwrap();
    assert_ne!(ds.objset().block_pointer(obj, 1).unwrap(), refs[0]);
    assert_eq!(
        ds.read(obj, 0, 2 * BS).unwrap(),
        [a.clone(), b.clone()].concat()
    );
    // Superseded by a partial rewrite: the log's early write holds the record,
    // so the rewrite must not change that record in place.
    ds.write(obj, 2 * BS as u64, &a).unwrap();
    ds.fsync().unwrap();
    ds.write(obj, 2 * BS as u64, &b[..16 << 10]).unwrap();
    let refs = logged_refs(&ds);
    assert_eq!(refs.len(), 1, "{refs:?}");
    store.sync().unwrap();
    assert_ne!(ds.objset().block_pointer(obj, 2).unwrap(), refs[0]);
    let third = [&b[..16 << 10], &a[16 << 10..]].concat();
    let all = [a.clone(), b.clone(), third].concat();
    assert!(ds.read(obj, 0, 3 * BS).unwrap() == all);
    drop(ds);
    store.export().unwrap();
    let store = Store::import_devices(as_dyn(&data), manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    assert!(ds.read(obj, 0, 3 * BS).unwrap() == all);
}

/// A write-behind's blocks are written by the writer: the fsync after it logs
/// them by reference without writing them again (its only device write is the
/// log block), and the txg's sync links those same blocks.
#[test]
fn write_behind_blocks_are_logged_and_linked_not_rewritten() {
    const BS: usize = 128 * 1024;
    let (data, store, ds, obj) = one_device_logged_object();
    let a = Rng(1).bytes(2 * BS);
    ds.write_behind(obj, 0, &a, false).unwrap();
    fsync_writes_its_log_block_only(&data[0], &ds);
    let refs = logged_refs(&ds);
    assert_eq!(refs.len(), 2, "both blocks logged by reference: {refs:?}");
    store.sync().unwrap();
    for (b, r) in refs.iter().enumerate() {
        assert_eq!(ds.objset().block_pointer(obj, b as u64).unwrap(), *r);
    }
    drop(ds);
    store.export().unwrap();
    let store = Store::import_devices(as_dyn(&data), manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    assert_eq!(ds.read(obj, 0, 2 * BS).unwrap(), a);
}

/// Intent-log blocks on a separate log device are counted by `verify_blocks`
/// like any other: reachable while the log holds them, deferred once a commit
/// frees them, and allocated on the log device (which the pool's capacity
/// leaves out; counting only the data vdevs' allocations failed here).
#[test]
fn log_device_blocks_are_accounted() {
    let data = sim_devices(1, 64 << 20);
    let log = vec![SimDevice::new("slog", 32 << 20)];
    let store = Store::create_on_devices_with_log(
        "tank",
        as_dyn(&data),
        false,
        as_dyn(&log),
        manual_opts(),
    )
    .unwrap();
    let ds = store.dataset("tank").unwrap();
    let obj = ds.create_object().unwrap();
    ds.fsync().unwrap();
    let before = log[0].writes_issued();
    for i in 0..4u64 {
        ds.write(obj, i * 8192, &Rng(i).bytes(8192)).unwrap();
        ds.fsync().unwrap();
    }
    assert!(
        log[0].writes_issued() > before,
        "the fsyncs wrote to the log device"
    );
    store.verify_blocks().unwrap();
    ds.write(obj, 0, &Rng(9).bytes(8192)).unwrap();
    ds.fsync().unwrap();
    store.verify_blocks().unwrap();
}

/// A volume's 16 KiB writes (below `BY_REFERENCE_MIN`, whole blocks of a 16K
/// recordsize, written behind) are logged by reference at the fsync, their
/// blocks being on the device already: the log holds block pointers, not a
/// second copy of the bytes, and after a power cut replay reads every block back.
#[test]
fn small_write_behind_blocks_are_logged_by_reference() {
    const BS: usize = 16 * 1024;
    let power = Power::new();
    let data = vec![SimDevice::on_power("d0", vec![0; 64 << 20], power.clone())];
    let store = Store::create_on_devices("tank", as_dyn(&data), false, manual_opts()).unwrap();
    store.set_prop("tank", "recordsize", "16K").unwrap();
    let ds = store.dataset("tank").unwrap();
    let obj = ds.create_object().unwrap();
    ds.fsync().unwrap();
    let blocks: Vec<Vec<u8>> = (0..8).map(|i| Rng(i + 1).bytes(BS)).collect();
    for (i, b) in blocks.iter().enumerate() {
        let off = (i * BS) as u64;
        let owned = Payload::read_from(&mut &b[..], off, BS, BS as u64).unwrap();
        ds.write_behind(obj, off, owned, false).unwrap();
    }
    fsync_writes_its_log_block_only(&data[0], &ds);
    let refs = logged_refs(&ds);
    assert_eq!(refs.len(), blocks.len(), "logged by reference: {refs:?}");
    power.cut_now();
    drop(ds);
    drop(store);
    let img = image(&data[0], &mut Rng(7), "d0");
    let store =
        Store::import_devices(vec![Arc::new(img) as Arc<dyn BlockDevice>], manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    assert!(ds.read(obj, 0, blocks.len() * BS).unwrap() == blocks.concat());
}
