//! The cost of NFSv4.1's COMPOUND (SEQUENCE + PUTFH + op) against NFSv3's single
//! procedure on the same server, one connection, loopback: GETATTR, 4 KiB READ
//! and 4 KiB and 1 MiB UNSTABLE WRITEs. Prints ops/s (median of 5 alternating 1 s rounds,
//! so a noisy machine hits both versions alike) and the v4/v3 ratio. A measurement,
//! not a check: run it by hand,
//!   cargo test --profile ci -p cachalot-nfs --test nfs4_bench -- --ignored --nocapture

mod common;

use cachalot_nfs::nfs4::attrs::{bitmap_of, write_bitmap, FATTR4_CHANGE, FATTR4_SIZE};
use cachalot_nfs::nfs4::client::{op_status, Ops, Session4};
use cachalot_nfs::nfs4::consts::*;
use common::*;
use std::time::{Duration, Instant};

const ROUND: Duration = Duration::from_secs(1);
const ROUNDS: usize = 5;

/// Medians of `ROUNDS` alternating rounds of `a` and `b`.
fn pair(mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let (mut ra, mut rb) = (vec![], vec![]);
    for _ in 0..ROUNDS {
        ra.push(rate(&mut a));
        rb.push(rate(&mut b));
    }
    ra.sort_by(f64::total_cmp);
    rb.sort_by(f64::total_cmp);
    (ra[ROUNDS / 2], rb[ROUNDS / 2])
}

fn rate(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < ROUND {
        f();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
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
    let (a, b) = pair(
        || {
            c3.borrow_mut().getattr(&fh).unwrap();
        },
        || v4(&|o| write_bitmap(o.op(OP_GETATTR), &bitmap_of([FATTR4_CHANGE, FATTR4_SIZE]))),
    );
    rows.push(("getattr", a, b));
    let (a, b) = pair(
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
    rows.push(("read 4K", a, b));
    let (a, b) = pair(
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
    rows.push(("write 4K unstable", a, b));
    let big = vec![9u8; 1 << 20];
    let (a, b) = pair(
        || {
            c3.borrow_mut().write(&fh, 0, &big, 0).unwrap();
        },
        || {
            v4(&|o| {
                o.op(OP_WRITE).fixed(&sid).u64(0).u32(0).opaque(&big);
            })
        },
    );
    rows.push(("write 1M unstable", a, b));
    println!(
        "{:<18} {:>10} {:>10} {:>6}",
        "row", "v3 ops/s", "v4.1 ops/s", "v4/v3"
    );
    for (name, a, b) in rows {
        println!("{name:<18} {a:>10.0} {b:>10.0} {:>6.2}", b / a);
    }
}
