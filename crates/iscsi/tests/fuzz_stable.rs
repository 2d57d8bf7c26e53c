//! Stable-toolchain stand-ins for the cargo-fuzz targets (fuzz/fuzz_targets/iscsi_*.rs):
//! the same entry points fed random and mutated valid inputs for a bounded time.

use cachalot_iscsi::pdu::{encode_pdu, Pdu, OP_LOGIN_REQ, OP_SCSI_CMD};
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(r: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + r.below(8) {
        match r.below(4) {
            0 if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] = r.next() as u8;
            }
            1 if !v.is_empty() => {
                let i = r.below(v.len());
                v.truncate(i);
            }
            2 => v.extend((0..r.below(64)).map(|_| r.next() as u8)),
            _ if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] ^= 1 << r.below(8);
            }
            _ => {}
        }
    }
    v
}

fn run(budget: Duration, seeds: &[Vec<u8>], f: impl Fn(&[u8])) -> u64 {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < budget {
        let input = if r.below(4) == 0 {
            (0..r.below(600)).map(|_| r.next() as u8).collect()
        } else {
            let s = r.below(seeds.len());
            mutate(&mut r, &seeds[s])
        };
        f(&input);
        n += 1;
    }
    n
}

#[test]
fn pdu_decoder_survives_random_and_mutated_input() {
    let mut login = Pdu::new(OP_LOGIN_REQ);
    login.data = b"InitiatorName=iqn.x\0SessionType=Normal\0".to_vec();
    let mut cmd = Pdu::new(OP_SCSI_CMD);
    cmd.ahs = vec![0, 5, 1, 0, 1, 2, 3, 4];
    cmd.data = vec![7; 100];
    let seeds = vec![
        encode_pdu(&login, false, false),
        encode_pdu(&cmd, true, true),
        [
            encode_pdu(&cmd, false, false),
            encode_pdu(&login, false, false),
        ]
        .concat(),
    ];
    let n = run(
        Duration::from_secs(2),
        &seeds,
        cachalot_iscsi::pdu::fuzz_decode,
    );
    assert!(n > 1000, "only {n} inputs");
}

#[test]
fn cdb_decoder_and_executor_survive_random_and_mutated_input() {
    let mut seeds = Vec::new();
    for op in [
        0x28u8, 0x2a, 0x88, 0x8a, 0x89, 0x41, 0x93, 0x42, 0x5f, 0x5e, 0x15, 0x1a, 0x9e, 0xa3, 0x12,
        0x2f,
    ] {
        let mut c = vec![0u8; 16];
        c[0] = op;
        c[8] = 1;
        c[13] = 1;
        let mut v = c.clone();
        v.extend(vec![0xa5; 1024]);
        seeds.push(v);
    }
    let n = run(
        Duration::from_secs(2),
        &seeds,
        cachalot_iscsi::scsi::cdb::fuzz_parse,
    );
    assert!(n > 1000, "only {n} inputs");
}
