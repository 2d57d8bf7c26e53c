//! The cost of NFSv4.1's COMPOUND (SEQUENCE + PUTFH + op) against NFSv3's single
//! procedure on the same server, one connection, loopback: GETATTR, 4 KiB READ
//! and 4 KiB and 1 MiB UNSTABLE WRITEs, 16 KiB ones with a COMMIT every 1 MiB. Prints ops/s (median of 5 alternating 1 s rounds,
//! so a noisy machine hits both versions alike), the v4/v3 ratio, and the server's
//! CPU per operation (the `nfs-*` threads' run time from /proc, which the test
//! client's share of the machine does not blur). A measurement, not a check: run it
//! by hand (`NFS4_BENCH_ROWS=read` runs only the rows whose name has `read`),
//! On a loaded machine the least CPU per op over many short rounds is the steadier
//! figure (`NFS4_BENCH_ROUNDS=100 NFS4_BENCH_ROUND_MS=100`: the `min` columns);
//!   cargo test --profile ci -p cachalot-nfs --test nfs4_bench -- --ignored --nocapture

mod common;

use cachalot_nfs::nfs4::client::{op_status, Ops, Session4};
use cachalot_nfs::nfs4::consts::*;
use common::*;
use std::time::{Duration, Instant};

/// A round's length and the number of rounds (`NFS4_BENCH_ROUND_MS`,
/// `NFS4_BENCH_ROUNDS`; 1 s and 5 by default).
fn rounds() -> (Duration, usize) {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (
        Duration::from_millis(var("NFS4_BENCH_ROUND_MS", 1000)),
        var("NFS4_BENCH_ROUNDS", 5).max(1) as usize,
    )
}

/// Ops/s and server CPU per op (us) of one side, medians over the rounds.
#[derive(Clone, Copy)]
struct Side {
    rate: f64,
    cpu_us: f64,
    /// The least CPU per op of a round (`cpu_us` is the median's).
    min_cpu_us: f64,
}

/// Medians of the alternating rounds of `a` and `b`.
fn pair(mut a: impl FnMut(), mut b: impl FnMut()) -> (Side, Side) {
    let (mut ra, mut rb) = (vec![], vec![]);
    for _ in 0..rounds().1 {
        ra.push(rate(&mut a));
        rb.push(rate(&mut b));
    }
    (median(&ra), median(&rb))
}

/// Measure row `name` unless NFS4_BENCH_ROWS names others.
fn row(rows: &mut Vec<(&str, Side, Side)>, name: &'static str, a: impl FnMut(), b: impl FnMut()) {
    if std::env::var("NFS4_BENCH_ROWS").is_ok_and(|f| !name.contains(f.as_str())) {
        return;
    }
    let (a, b) = pair(a, b);
    rows.push((name, a, b));
}

fn median(rounds: &[Side]) -> Side {
    let mid = |f: fn(&Side) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Side {
        rate: mid(|s| s.rate),
        cpu_us: mid(|s| s.cpu_us),
        min_cpu_us: rounds.iter().map(|s| s.cpu_us).fold(f64::MAX, f64::min),
    }
}

/// Nanoseconds the server's threads (named `nfs-*`) have run, from each
/// thread's /proc schedstat (exact, unlike the tick-counted utime).
fn server_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("nfs-"))
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn rate(mut f: impl FnMut()) -> Side {
    let (start, cpu) = (Instant::now(), server_cpu_ns());
    let mut n = 0u64;
    let round = rounds().0;
    while start.elapsed() < round {
        f();
        n += 1;
    }
    // Threads that ended during the round (none here: one connection) would
    // take their time with them; saturating keeps that from wrapping.
    let cpu = server_cpu_ns().saturating_sub(cpu);
    Side {
        rate: n as f64 / start.elapsed().as_secs_f64(),
        cpu_us: cpu as f64 / 1e3 / n as f64,
        min_cpu_us: 0.0,
    }
}

#[test]
#[ignore]
fn v4_compound_cost_against_v3() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let (mut c3, root) = env.mounted();
    let (fh, _) = c3.create_file(&root, "bench", 0o644).unwrap();
    c3.write(&fh, 0, &vec![7u8; 1 << 20], 2).unwrap();
    let mut s = Session4::establish(env.client(), b"bench", 4).unwrap();
    // An open for v4 I/O.
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(&fh);
    let w = ops.op(OP_OPEN);
    w.u32(0).u32(3).u32(0).u64(s.clientid).opaque(b"b").u32(0);
    w.u32(4); // CLAIM_FH
    let rep = s.call(&ops).unwrap();
    let mut r = rep.reader();
    op_status(&mut r, OP_PUTFH).unwrap();
    assert_eq!(op_status(&mut r, OP_OPEN).unwrap(), NFS4_OK);
    let sid = r.fixed(16).unwrap().to_vec();
    let data = vec![5u8; 4096];
    let off = std::cell::Cell::new(0u64);
    let next = || {
        off.set((off.get() + 4096) % (1 << 20));
        off.get()
    };
    let mut rows = vec![];
    let s = std::cell::RefCell::new(s);
    let v4 = |f: &dyn Fn(&mut Ops)| {
        let mut o = Ops::new();
        o.op(OP_PUTFH).opaque(&fh);
        f(&mut o);
        assert_eq!(s.borrow_mut().call(&o).unwrap().status, NFS4_OK);
    };
    let c3 = std::cell::RefCell::new(c3);
    row(
        &mut rows,
        "getattr",
        || {
            c3.borrow_mut().getattr(&fh).unwrap();
        },
        // The attributes the Linux client asks for (about what fattr3 holds).
        || {
            s.borrow_mut().getattr(&fh).unwrap();
        },
    );
    row(
        &mut rows,
        "read 4K",
        || {
            c3.borrow_mut().read(&fh, next(), 4096).unwrap();
        },
        || {
            let at = next();
            v4(&|o| {
                o.op(OP_READ).fixed(&sid).u64(at).u32(4096);
            })
        },
    );
    row(
        &mut rows,
        "write 4K unstable",
        || {
            c3.borrow_mut().write(&fh, next(), &data, 0).unwrap();
        },
        || {
            let at = next();
            v4(&|o| {
                o.op(OP_WRITE).fixed(&sid).u64(at).u32(0).opaque(&data);
            })
        },
    );
    row(
        &mut rows,
        "read 1 byte",
        || {
            c3.borrow_mut().read(&fh, next(), 1).unwrap();
        },
        || {
            let at = next();
            v4(&|o| {
                o.op(OP_READ).fixed(&sid).u64(at).u32(1);
            })
        },
    );
    // The `bench nfs` row: 16 KiB UNSTABLE writes at scattered offsets, a
    // COMMIT after every 1 MiB (64 writes).
    let page = vec![3u8; 16384];
    let n16 = std::cell::Cell::new(0u64);
    let next16 = || {
        let i = n16.get() + 1;
        n16.set(i);
        ((i * 37) % 64 * 16384, i.is_multiple_of(64))
    };
    row(
        &mut rows,
        "write 16K + commit",
        || {
            let (at, commit) = next16();
            let mut c = c3.borrow_mut();
            c.write(&fh, at, &page, 0).unwrap();
            if commit {
                c.commit(&fh).unwrap();
            }
        },
        || {
            let (at, commit) = next16();
            v4(&|o| {
                o.op(OP_WRITE).fixed(&sid).u64(at).u32(0).opaque(&page);
            });
            if commit {
                v4(&|o| {
                    o.op(OP_COMMIT).u64(0).u32(0);
                });
            }
        },
    );
    let big = vec![9u8; 1 << 20];
    row(
        &mut rows,
        "write 1M unstable",
        || {
            c3.borrow_mut().write(&fh, 0, &big, 0).unwrap();
        },
        || {
            v4(&|o| {
                o.op(OP_WRITE).fixed(&sid).u64(0).u32(0).opaque(&big);
            })
        },
    );
    println!(
        "{:<18} {:>10} {:>10} {:>6} {:>9} {:>9} {:>7} {:>7}",
        "row", "v3 ops/s", "v4.1 ops/s", "v4/v3", "v3 us/op", "v4 us/op", "v3 min", "v4 min"
    );
    for (name, a, b) in rows {
        println!(
            "{name:<18} {:>10.0} {:>10.0} {:>6.2} {:>9.1} {:>9.1} {:>7.2} {:>7.2}",
            a.rate,
            b.rate,
            b.rate / a.rate,
            a.cpu_us,
            b.cpu_us,
            a.min_cpu_us,
            b.min_cpu_us
        );
    }
}
