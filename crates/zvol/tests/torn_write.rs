//! Is a 16 KiB page write to a volume with volblocksize 16K atomic across a
//! power cut? InnoDB keeps its doublewrite buffer because a page write can tear
//! on a disk; on a copy-on-write volume an aligned block write replaces the block
//! whole (a new block, then one pointer) and the intent log replays a logged
//! write whole or not at all. This test holds the volume to that.
//!
//! Two writers overwrite whole aligned 16 KiB pages of a filled volume (each
//! writer its own pages), every 512-byte sector stamped with the page and its
//! version, flushing every few writes (and some writes FUA). The power is cut
//! at many points of the run; unflushed device writes are dropped or kept at
//! random and the one in flight is torn (`SimDevice`). After import every page
//! must be one version whole (the fill or one written version, never sectors of
//! two) and no older than what a completed flush or FUA write covered.
//!
//! What it does not prove: the file system on top of the volume (xfs, ext4)
//! may place a 16 KiB InnoDB page in blocks that are not one aligned 16 KiB
//! range of the volume, so doublewrite stays on for the SAN path (see
//! docs/architecture.md, "Torn writes").

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{BlockDevice, Power, SimDevice};
use cachalot_zvol::Zvol;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

const PAGE: usize = 16384;
const SECTOR: usize = 512;
const PAGES: u64 = 64;
const WRITERS: u64 = 2;
const PER_WRITER: u64 = 24;

fn opts() -> StoreOpts {
    StoreOpts {
        arc_max: 16 << 20,
        // Commits interleave with the writes, as in a running daemon.
        txg_timeout: Duration::from_millis(20),
        dirty_max: 1 << 30,
    }
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Version `v` of page `p`: each sector starts with (page, version, sector),
/// then bytes that depend on all three.
fn page_bytes(p: u64, v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(PAGE);
    for s in 0..(PAGE / SECTOR) as u64 {
        out.extend_from_slice(&p.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
        out.extend_from_slice(&s.to_le_bytes());
        let mut x = mix(p << 40 ^ v << 20 ^ s);
        while out.len() % SECTOR != 0 {
            x = mix(x);
            out.push(x as u8);
        }
    }
    out
}

/// The version a page read back holds, if it is one version whole.
fn version_of(p: u64, got: &[u8]) -> Option<u64> {
    let v = u64::from_le_bytes(got[8..16].try_into().unwrap());
    (got == page_bytes(p, v).as_slice()).then_some(v)
}

/// What the writers did before the power went: per page, the last version
/// written (returned) and the last version a completed flush or FUA covered.
struct Outcome {
    dev: SimDevice,
    written: Vec<u64>,
    durable: Vec<u64>,
    /// Device writes the writers' run issued (after the fill).
    run_writes: u64,
}

fn run(cut: Option<u64>) -> Outcome {
    let power = Power::new();
    let dev = SimDevice::on_power("d0", vec![0; 96 << 20], power.clone());
    let store = Store::create_on_devices(
        "tank",
        vec![Arc::new(dev.clone()) as Arc<dyn BlockDevice>],
        false,
        opts(),
    )
    .unwrap();
    let props = [("volblocksize".to_string(), "16K".to_string())];
    store
        .create_dataset(
            "tank/vol",
            DatasetKind::Volume,
            Some(4 << 20),
            &props,
            false,
        )
        .unwrap();
    let vol = Zvol::open(store.clone(), store.dataset("tank/vol").unwrap()).unwrap();
    for p in 0..PAGES {
        vol.write(p * PAGE as u64, &page_bytes(p, 0), false)
            .unwrap();
    }
    vol.flush().unwrap();
    store.sync().unwrap();
    let base = power.writes_issued();
    if let Some(c) = cut {
        power.cut_at_write(base + c);
    }
    let state = Mutex::new((vec![0u64; PAGES as usize], vec![0u64; PAGES as usize]));
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (vol, state, power) = (&vol, &state, &power);
            s.spawn(move || {
                // Pages this writer wrote since its last flush.
                let mut unflushed = vec![];
                for i in 0..PER_WRITER {
                    let p = (mix(w << 32 ^ i) % (PAGES / WRITERS)) * WRITERS + w;
                    let v = state.lock().0[p as usize] + 1;
                    let fua = i % 5 == 4;
                    if vol.write(p * PAGE as u64, &page_bytes(p, v), fua).is_err() || power.is_cut()
                    {
                        return;
                    }
                    let mut st = state.lock();
                    st.0[p as usize] = v;
                    if fua {
                        st.1[p as usize] = v;
                    } else {
                        unflushed.push((p, v));
                    }
                    drop(st);
                    if i % 4 == 3 {
                        if vol.flush().is_err() || power.is_cut() {
                            return;
                        }
                        let mut st = state.lock();
                        for (p, v) in unflushed.drain(..) {
                            let d = &mut st.1[p as usize];
                            *d = (*d).max(v);
                        }
                    }
                }
            });
        }
    });
    let run_writes = power.writes_issued() - base;
    power.cut_now();
    drop(vol);
    drop(store);
    let (written, durable) = state.into_inner();
    Outcome {
        dev,
        written,
        durable,
        run_writes,
    }
}

fn check(cut: u64, rng: &mut u64) {
    let o = run(Some(cut));
    let image = o.dev.crash_image(|| {
        *rng = mix(*rng + 1);
        (*rng).is_multiple_of(2)
    });
    let dev = SimDevice::from_image("d0", image);
    let store = Store::import_devices(vec![Arc::new(dev) as Arc<dyn BlockDevice>], opts())
        .unwrap_or_else(|e| panic!("cut {cut}: import: {e}"));
    let vol = Zvol::open(store.clone(), store.dataset("tank/vol").unwrap()).unwrap();
    for p in 0..PAGES {
        let got = vol.read(p * PAGE as u64, PAGE).unwrap();
        let v = version_of(p, &got).unwrap_or_else(|| {
            let versions: Vec<u64> = got
                .chunks(SECTOR)
                .map(|s| u64::from_le_bytes(s[8..16].try_into().unwrap()))
                .collect();
            panic!("cut {cut}: page {p} is torn: sector versions {versions:?}")
        });
        let (w, d) = (o.written[p as usize], o.durable[p as usize]);
        assert!(
            v >= d && v <= w + 1,
            "cut {cut}: page {p} holds version {v}; durable {d}, last returned {w}"
        );
    }
}

#[test]
fn aligned_16k_writes_never_tear_across_40_power_cuts() {
    let total = {
        let o = run(None);
        assert_eq!(o.written, o.durable, "without a cut every write is flushed");
        o.run_writes
    };
    let mut rng = 7u64;
    for k in 0..40 {
        // Spread over the run's device writes, plus a little jitter.
        let cut = total * k / 40 + mix(k) % 3;
        check(cut, &mut rng);
    }
}
