//! Listing at scale: time `Store::list` over N filesystems and
//! `Store::list_snapshots` over N x S snapshots (issue 20: 1,000 datasets took
//! 21-54 s through the daemon; the cost was the engine's list path).
//!
//!   cargo run --profile ci -p cachalot-datasets --example list_bench -- [DIR] [N] [S]

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{CreateOpts, VdevKind, VdevSpec};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| "/var/tmp/cachalot-listbench".into()),
    );
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let snaps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let specs = [VdevSpec {
        kind: VdevKind::Disk,
        paths: vec![dir.join("pool.img")],
        log: false,
    }];
    let copts = CreateOpts {
        ashift: 12,
        create_size: Some(2 << 30),
        force: false,
    };
    let opts = StoreOpts {
        arc_max: 256 << 20,
        txg_timeout: Duration::from_secs(5),
        dirty_max: 256 << 20,
    };
    let store = Store::create("lb", &specs, &copts, &[], opts).unwrap();
    let t = Instant::now();
    for i in 0..n - 1 {
        store
            .create_dataset(
                &format!("lb/d{i:04}"),
                DatasetKind::Filesystem,
                None,
                &[],
                false,
            )
            .unwrap();
    }
    store.sync().unwrap();
    println!(
        "created {} datasets in {:.1}s",
        n - 1,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    for s in 0..snaps {
        let names: Vec<String> = std::iter::once("lb".to_string())
            .chain((0..n - 1).map(|i| format!("lb/d{i:04}")))
            .map(|d| format!("{d}@s{s}"))
            .collect();
        store.snapshot(&names).unwrap();
    }
    println!(
        "took {} snapshots in {:.1}s",
        n * snaps,
        t.elapsed().as_secs_f64()
    );
    for round in 0..3 {
        let t = Instant::now();
        let rows = store.list(None, true).unwrap();
        let a = t.elapsed();
        let t = Instant::now();
        let srows = store.list_snapshots(None).unwrap();
        let b = t.elapsed();
        println!(
            "round {round}: list {} datasets {:.1} ms; list_snapshots {} snapshots {:.1} ms",
            rows.len(),
            a.as_secs_f64() * 1e3,
            srows.len(),
            b.as_secs_f64() * 1e3
        );
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
