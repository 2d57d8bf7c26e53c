//! Benchmark of the internal data path against fio on the same backing file system,
//! in the same run (ratios, not absolute figures, are what to compare).
//!
//!   cargo run --release -p cachalot-datasets --example engine_bench -- [DIR] [SIZE_MIB]
//!
//! Single-threaded on both sides (one writer calling the engine; fio psync with one
//! job). "Cold" means a fresh import (empty ARC) after dropping the host page cache.

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{CreateOpts, VdevKind, VdevSpec};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn drop_caches() {
    let _ = Command::new("sync").status();
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
}

fn opts() -> StoreOpts {
    StoreOpts {
        arc_max: 2 << 30,
        txg_timeout: Duration::from_secs(5),
        dirty_max: 512 << 20,
    }
}

fn fio(dir: &Path, name: &str, rw: &str, bs: &str, size_mib: u64, extra: &[&str]) -> f64 {
    let file = dir.join("fio.dat");
    let mut args = vec![
        format!("--name={name}"),
        format!("--filename={}", file.display()),
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        format!("--size={size_mib}M"),
        "--ioengine=psync".into(),
        "--numjobs=1".into(),
        "--output-format=json".into(),
        "--randrepeat=0".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = Command::new("fio").args(&args).output().expect("fio runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("fio json");
    let job = &v["jobs"][0];
    let side = if rw.contains("read") { "read" } else { "write" };
    job[side]["iops"].as_f64().unwrap_or(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| "/var/tmp/cachalot-bench".into()),
    );
    let size_mib: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let img = dir.join("pool.img");
    let specs = vec![VdevSpec {
        kind: VdevKind::Disk,
        paths: vec![img.clone()],
        log: false,
    }];
    let copts = CreateOpts {
        ashift: 12,
        create_size: Some((size_mib * 8) << 20),
        force: false,
    };
    let store = Store::create("bench", &specs, &copts, &[], opts()).unwrap();
    let props = |rs: &str, comp: &str| {
        vec![
            ("recordsize".to_string(), rs.to_string()),
            ("compression".to_string(), comp.to_string()),
        ]
    };
    store
        .create_dataset(
            "bench/seq",
            DatasetKind::Filesystem,
            None,
            &props("1M", "off"),
            false,
        )
        .unwrap();
    store
        .create_dataset(
            "bench/rand",
            DatasetKind::Filesystem,
            None,
            &props("16K", "off"),
            false,
        )
        .unwrap();
    let bytes = size_mib << 20;
    let mut rng = Rng(1);
    let noise: Vec<u8> = (0..1 << 20).map(|_| rng.next() as u8).collect();
    let mut rows: Vec<(String, f64, f64, &str)> = Vec::new();

    // 1 MiB sequential write (+ final commit), like fio with end_fsync.
    let ds = store.dataset("bench/seq").unwrap();
    let seq = ds.create_object().unwrap();
    let t0 = Instant::now();
    for i in 0..size_mib {
        ds.write(seq, i << 20, &noise).unwrap();
    }
    store.sync().unwrap();
    let ours = size_mib as f64 / t0.elapsed().as_secs_f64();
    let theirs = fio(&dir, "seqw", "write", "1M", size_mib, &["--end_fsync=1"]);
    rows.push(("1M sequential write (MiB/s)".into(), ours, theirs, ""));

    // 16K random writes over a file of the same size (+ final commit).
    let ds = store.dataset("bench/rand").unwrap();
    let r = ds.create_object().unwrap();
    for i in 0..size_mib {
        ds.write(r, i << 20, &noise).unwrap();
    }
    store.sync().unwrap();
    let n = (bytes / 16384) / 2;
    let t0 = Instant::now();
    for _ in 0..n {
        let off = (rng.next() % (bytes / 16384)) * 16384;
        ds.write(r, off, &noise[..16384]).unwrap();
    }
    store.sync().unwrap();
    let ours = n as f64 / t0.elapsed().as_secs_f64();
    let theirs = fio(
        &dir,
        "randw",
        "randwrite",
        "16k",
        size_mib,
        &["--end_fsync=1", &format!("--io_size={}M", size_mib / 2)],
    );
    rows.push(("16K random write (IOPS)".into(), ours, theirs, ""));

    // Cold reads: export, drop the page cache, import (empty ARC).
    store.export().unwrap();
    drop(store);
    drop_caches();
    let store = Store::import(std::slice::from_ref(&img), Some("bench"), opts()).unwrap();
    let ds = store.dataset("bench/seq").unwrap();
    let t0 = Instant::now();
    for i in 0..size_mib {
        ds.read(seq, i << 20, 1 << 20).unwrap();
    }
    let ours = size_mib as f64 / t0.elapsed().as_secs_f64();
    drop_caches();
    let theirs = fio(&dir, "seqr", "read", "1M", size_mib, &[]);
    rows.push(("1M sequential read, cold (MiB/s)".into(), ours, theirs, ""));

    let ds = store.dataset("bench/rand").unwrap();
    let reads = (bytes / 16384 / 4).min(20000);
    let offs: Vec<u64> = (0..reads)
        .map(|_| (rng.next() % (bytes / 16384)) * 16384)
        .collect();
    drop_caches();
    let t0 = Instant::now();
    for o in &offs {
        ds.read(r, *o, 16384).unwrap();
    }
    let ours = reads as f64 / t0.elapsed().as_secs_f64();
    drop_caches();
    let theirs = fio(
        &dir,
        "randr",
        "randread",
        "16k",
        size_mib,
        &[
            &format!("--io_size={}M", reads * 16 / 1024),
            "--randrepeat=1",
        ],
    );
    rows.push(("16K random read, cold (IOPS)".into(), ours, theirs, ""));
    // Warm: the same offsets again, now in the ARC; fio's file is in the page cache.
    let t0 = Instant::now();
    for o in &offs {
        ds.read(r, *o, 16384).unwrap();
    }
    let ours = reads as f64 / t0.elapsed().as_secs_f64();
    let theirs = fio(
        &dir,
        "randr",
        "randread",
        "16k",
        size_mib,
        &[
            &format!("--io_size={}M", reads * 16 / 1024),
            "--randrepeat=1",
        ],
    );
    rows.push((
        "16K random read, warm (IOPS)".into(),
        ours,
        theirs,
        "ARC vs page cache",
    ));
    let arc = store.cache().arc.stats();
    println!(
        "ARC after warm reads: {} bytes, hits {} misses {}",
        arc.t1_bytes + arc.t2_bytes,
        arc.hits_total(),
        arc.misses_total()
    );

    // Compression on compressible (SQL-dump-like) data.
    let text: Vec<u8> = (0..1 << 20)
        .map(|i| b"INSERT INTO orders VALUES (1042, 'customer-7', 'shipped', 19.99);\n"[i % 66])
        .collect();
    let comp_mib = size_mib.min(512);
    let mut comp_rows = Vec::new();
    for comp in ["off", "lz4", "zstd-3"] {
        let name = format!("bench/c-{comp}");
        store
            .create_dataset(
                &name,
                DatasetKind::Filesystem,
                None,
                &props("128K", comp),
                false,
            )
            .unwrap();
        let ds = store.dataset(&name).unwrap();
        let o = ds.create_object().unwrap();
        let t0 = Instant::now();
        for i in 0..comp_mib {
            ds.write(o, i << 20, &text).unwrap();
        }
        store.sync().unwrap();
        let mbs = comp_mib as f64 / t0.elapsed().as_secs_f64();
        let ratio = store
            .get_props(&name, Some(&["compressratio".into()]))
            .unwrap()[0]
            .raw
            .clone();
        comp_rows.push((comp, mbs, ratio));
    }
    store.export().unwrap();

    println!(
        "\nInternal data path vs fio (psync, 1 job) on {} — file size {size_mib} MiB\n",
        dir.display()
    );
    println!("| test | cachalot | fio | ratio |");
    println!("|---|---:|---:|---:|");
    for (name, ours, theirs, note) in &rows {
        println!(
            "| {name} {note} | {ours:.0} | {theirs:.0} | {:.2}x |",
            ours / theirs.max(1e-9)
        );
    }
    println!("\n| compression | write MiB/s | ratio vs off | compressratio |");
    println!("|---|---:|---:|---:|");
    let off = comp_rows[0].1;
    for (c, mbs, ratio) in &comp_rows {
        println!("| {c} | {mbs:.0} | {:.2}x | {ratio}x |", mbs / off);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
