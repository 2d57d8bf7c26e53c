//! Snapshot figures: create and destroy time on datasets of two sizes (should not
//! depend on size), the space a fresh clone costs, and send/receive throughput
//! against a sequential read of the pool's own backing file (the raw rate).
//!
//!   cargo run --release -p cachalot-datasets --example snapshot_bench -- [DIR] [SMALL_MIB] [BIG_MIB]

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{CreateOpts, VdevKind, VdevSpec};
use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| "/var/tmp/cachalot-snapbench".into()),
    );
    let small: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let big: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10240);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let img = dir.join("pool.img");
    let specs = [VdevSpec {
        kind: VdevKind::Disk,
        paths: vec![img.clone()],
        log: false,
    }];
    let copts = CreateOpts {
        ashift: 12,
        create_size: Some((big * 3 + 4096) << 20),
        force: false,
    };
    let opts = StoreOpts {
        arc_max: 1 << 30,
        txg_timeout: Duration::from_secs(5),
        dirty_max: 512 << 20,
    };
    let store = Store::create(
        "sb",
        &specs,
        &copts,
        &[("compression".into(), "off".into())],
        opts,
    )
    .unwrap();
    let mut x = 0x1234_5678_9abc_def0u64;
    let noise: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    println!("| dataset | snapshot create ms | snapshot destroy ms | fresh clone costs | send MiB/s | receive MiB/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, mib) in [("small", small), ("big", big)] {
        let fs = format!("sb/{name}");
        store
            .create_dataset(
                &fs,
                DatasetKind::Filesystem,
                None,
                &[("recordsize".into(), "128K".into())],
                false,
            )
            .unwrap();
        let ds = store.dataset(&fs).unwrap();
        let obj = ds.create_object().unwrap();
        for i in 0..mib {
            ds.write(obj, i << 20, &noise).unwrap();
        }
        store.sync().unwrap();
        // Median of five (a commit may also condense the space map).
        let mut times = Vec::new();
        for k in 0..5 {
            let t0 = Instant::now();
            store.snapshot(&[format!("{fs}@t{k}")]).unwrap();
            times.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        for k in 0..5 {
            store.destroy_snapshot(&format!("{fs}@t{k}")).unwrap();
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        store.snapshot(&[format!("{fs}@a")]).unwrap();
        let create_ms = times[2];
        let before = store.pool().space().allocated;
        store
            .clone_snapshot(&format!("{fs}@a"), &format!("{fs}-clone"), &[])
            .unwrap();
        store.sync().unwrap();
        let clone_cost = store.pool().space().allocated - before;
        // Send to /dev/null-like sink, then receive from memory-limited chunks of a file.
        let stream_path = dir.join(format!("{name}.stream"));
        let t0 = Instant::now();
        let mut f = std::io::BufWriter::new(std::fs::File::create(&stream_path).unwrap());
        store
            .send(&format!("{fs}@a"), None, &mut f, &mut |_| {})
            .unwrap();
        drop(f);
        let send_rate = mib as f64 / t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let mut r = std::io::BufReader::new(std::fs::File::open(&stream_path).unwrap());
        store
            .receive(&format!("sb/{name}-recv"), &mut r, false, &mut |_| {})
            .unwrap();
        let recv_rate = mib as f64 / t0.elapsed().as_secs_f64();
        let _ = std::fs::remove_file(&stream_path);
        store
            .destroy_dataset(&format!("{fs}-clone"), false)
            .unwrap();
        store.sync().unwrap();
        let t0 = Instant::now();
        store.destroy_snapshot(&format!("{fs}@a")).unwrap();
        let destroy_ms = t0.elapsed().as_secs_f64() * 1000.0;
        println!("| {name} ({mib} MiB) | {create_ms:.1} | {destroy_ms:.1} | {} KiB | {send_rate:.0} | {recv_rate:.0} |", clone_cost >> 10);
    }
    store.export().unwrap();
    // Raw sequential rate of the same backing file, page cache dropped.
    let _ = std::process::Command::new("sync").status();
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
    let mut f = std::fs::File::open(&img).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let t0 = Instant::now();
    let mut n = 0u64;
    while n < (big << 20) {
        let k = f.read(&mut buf).unwrap();
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    println!(
        "\nraw sequential read of the backing file: {:.0} MiB/s",
        (n >> 20) as f64 / t0.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
