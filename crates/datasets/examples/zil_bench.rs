//! Sync-write benchmark: 4K write + fsync per operation through the internal data
//! path (intent log with group commit), for 1, 4 and 16 concurrent writers, on the
//! main pool and with a separate log device, against fio (psync, fdatasync=1) on the
//! same file system in the same run.
//!
//!   cargo run --release -p cachalot-datasets --example zil_bench -- [DIR] [SECONDS]

use cachalot_datasets::{Store, StoreOpts};
use cachalot_pool::{CreateOpts, VdevKind, VdevSpec};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn pct(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p) as usize]
}

/// (IOPS, p50 us, p99 us) of write+fsync with `writers` threads.
fn ours(dir: &Path, slog: bool, writers: usize, secs: u64) -> (f64, u64, u64) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut specs = vec![VdevSpec {
        kind: VdevKind::Disk,
        paths: vec![dir.join("data.img")],
        log: false,
    }];
    if slog {
        specs.push(VdevSpec {
            kind: VdevKind::Disk,
            paths: vec![dir.join("slog.img")],
            log: true,
        });
    }
    let copts = CreateOpts {
        ashift: 12,
        create_size: Some(2 << 30),
        force: false,
    };
    let opts = StoreOpts {
        arc_max: 512 << 20,
        txg_timeout: Duration::from_secs(5),
        dirty_max: 256 << 20,
    };
    let store = Store::create(
        "zb",
        &specs,
        &copts,
        &[("recordsize".into(), "16K".into())],
        opts,
    )
    .unwrap();
    let ds = store.dataset("zb").unwrap();
    let objs: Vec<u64> = (0..writers).map(|_| ds.create_object().unwrap()).collect();
    ds.fsync().unwrap();
    // Warm the log (first log write commits its header).
    ds.write(objs[0], 0, &[0u8; 4096]).unwrap();
    ds.fsync().unwrap();
    let stop = AtomicBool::new(false);
    let buf = vec![0x5au8; 4096];
    let lats: Vec<Vec<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = objs
            .iter()
            .map(|&o| {
                let (ds, stop, buf) = (&ds, &stop, &buf);
                s.spawn(move || {
                    let mut lat = Vec::new();
                    let mut off = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let t0 = Instant::now();
                        ds.write(o, off, buf).unwrap();
                        ds.fsync().unwrap();
                        lat.push(t0.elapsed().as_micros() as u64);
                        off = (off + 4096) % (64 << 20);
                    }
                    lat
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = lats.into_iter().flatten().collect();
    let iops = all.len() as f64 / secs as f64;
    let (p50, p99) = (pct(&mut all, 0.50), pct(&mut all, 0.99));
    store.export().unwrap();
    let _ = std::fs::remove_dir_all(dir);
    (iops, p50, p99)
}

fn fio(dir: &Path, writers: usize, secs: u64) -> (f64, u64, u64) {
    std::fs::create_dir_all(dir).unwrap();
    let out = Command::new("fio")
        .args([
            "--name=fsync",
            &format!("--directory={}", dir.display()),
            "--rw=write",
            "--bs=4k",
            "--size=64M",
            "--ioengine=psync",
            "--fdatasync=1",
            &format!("--numjobs={writers}"),
            "--time_based",
            &format!("--runtime={secs}"),
            "--group_reporting",
            "--output-format=json",
        ])
        .output()
        .expect("fio runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("fio json");
    let j = &v["jobs"][0];
    let iops = j["write"]["iops"].as_f64().unwrap_or(0.0);
    let p = |k: &str| j["sync"]["lat_ns"]["percentile"][k].as_u64().unwrap_or(0) / 1000;
    // fio reports the fdatasync latency; add the write's mean for write+fdatasync.
    let w = j["write"]["clat_ns"]["mean"].as_f64().unwrap_or(0.0) as u64 / 1000;
    let _ = std::fs::remove_dir_all(dir);
    (iops, p("50.000000") + w, p("99.000000") + w)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| "/var/tmp/cachalot-zilbench".into()),
    );
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    println!("| writers | target | IOPS | p50 us | p99 us | IOPS vs fio | p50 vs fio |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    let mut one = [0f64; 2];
    for writers in [1usize, 4, 16] {
        let raw = fio(&dir.join("fio"), writers, secs);
        println!(
            "| {writers} | fio write+fdatasync | {:.0} | {} | {} | 1.00x | 1.00x |",
            raw.0, raw.1, raw.2
        );
        for (k, slog) in [false, true].into_iter().enumerate() {
            let r = ours(&dir.join("pool"), slog, writers, secs);
            if writers == 1 {
                one[k] = r.0;
            }
            println!(
                "| {writers} | cachalot{} | {:.0} | {} | {} | {:.2}x | {:.2}x |",
                if slog { " + log device" } else { "" },
                r.0,
                r.1,
                r.2,
                r.0 / raw.0.max(1.0),
                r.1 as f64 / raw.1.max(1) as f64
            );
            if writers == 16 {
                println!(
                    "|  | scaling 16 vs 1 writer{} | {:.1}x |  |  |  |  |",
                    if slog { " (log device)" } else { "" },
                    r.0 / one[k].max(1.0)
                );
            }
        }
    }
}
