//! The decoder fuzz entry point fed random and mutated valid input for a
//! bounded time (the cargo-fuzz target `nfs_rpc` runs the same function), then
//! the same mutated messages sent to a live server, which must keep answering.

mod common;

use cachalot_nfs::fuzz::{decode_compound4, decode_everything};
use cachalot_nfs::nfs4::client::Ops;
use cachalot_nfs::rpc::{self, Cred, PROG_MOUNT, PROG_NFS};
use cachalot_nfs::xdr::Writer;
use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn seeds(root: &[u8]) -> Vec<Vec<u8>> {
    let cred = Cred::Sys {
        uid: 1,
        gid: 1,
        gids: vec![1, 2],
    };
    let mut out = vec![];
    for proc_ in 0..22 {
        let mut a = Writer::new();
        a.opaque(root)
            .opaque(b"name")
            .u64(0)
            .u32(4096)
            .u32(0)
            .opaque(b"data");
        out.push(rpc::encode_call(proc_, PROG_NFS, 3, proc_, &cred, &a.buf));
    }
    let mut a = Writer::new();
    a.opaque(b"/tank/fs");
    out.push(rpc::encode_call(99, PROG_MOUNT, 3, 1, &Cred::None, &a.buf));
    // NFSv4.1 COMPOUNDs: SEQUENCE, then each operation with plausible arguments.
    for op in 3..=58u32 {
        let mut ops = Ops::new();
        ops.op(53).fixed(&[7; 16]).u32(1).u32(0).u32(0).u32(1);
        ops.op(op)
            .u32(1)
            .opaque(root)
            .opaque(b"name")
            .u64(0)
            .u32(4096)
            .u32(0)
            .opaque(b"data");
        out.push(rpc::encode_call(op, PROG_NFS, 4, 1, &cred, &ops.encode(1)));
    }
    out
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut m = seed.to_vec();
    for _ in 0..(rng.next() % 4 + 1) {
        match rng.next() % 4 {
            0 if !m.is_empty() => {
                let i = rng.next() as usize % m.len();
                m[i] = rng.next() as u8;
            }
            1 if !m.is_empty() => {
                let i = rng.next() as usize % m.len();
                m.truncate(i);
            }
            2 if m.len() >= 4 => {
                let i = (rng.next() as usize % (m.len() / 4)) * 4;
                m[i..i + 4].copy_from_slice(&(rng.next() as u32).to_be_bytes());
            }
            _ => m.extend((0..rng.next() % 16).map(|_| rng.next() as u8)),
        }
    }
    m
}

#[test]
fn decoders_survive_random_and_mutated_input() {
    let env = env("rw=127.0.0.1");
    let (_, root) = env.mounted();
    let seeds = seeds(&root);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let until = Instant::now() + Duration::from_secs(3);
    let mut n = 0;
    while Instant::now() < until {
        let len = rng.next() as usize % 512;
        let random: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        decode_everything(&random);
        decode_compound4(&random);
        let s = &seeds[rng.next() as usize % seeds.len()];
        let m = mutate(&mut rng, s);
        decode_everything(&m);
        if let Ok(call) = rpc::decode_call(&m) {
            decode_compound4(call.args);
        }
        n += 1;
    }
    assert!(n > 1000, "ran {n} rounds");
    // The live server: mutated calls on a few connections, then it still answers.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let mut s = TcpStream::connect(env.addr()).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        for _ in 0..50 {
            let i = rng.next() as usize % seeds.len();
            let m = mutate(&mut rng, &seeds[i]);
            let mut rec = vec![];
            rpc::write_record(&mut rec, &m).unwrap();
            if s.write_all(&rec).is_err() {
                break;
            }
        }
    }
    let (mut c, root) = env.mounted();
    c.getattr(&root).unwrap();
}
