//! The fuzz target's function on random and mutated valid sessions, for a
//! bounded time (the stable-toolchain half of `fuzz/fuzz_targets/nbd_session.rs`).

use cachalot_nbd::fuzz::{fuzz_session, sample_session};
use cachalot_nbd::proto::{decode_info_request, decode_meta_request};
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

#[test]
fn sessions_never_panic() {
    let base = sample_session();
    fuzz_session(&base);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut n = 0u64;
    while Instant::now() < deadline {
        let mut input = base.clone();
        match rng.next() % 4 {
            0 => {
                let len = (rng.next() % 256) as usize;
                input = (0..len).map(|_| rng.next() as u8).collect();
            }
            1 => {
                for _ in 0..1 + rng.next() % 8 {
                    let i = (rng.next() as usize) % input.len();
                    input[i] = rng.next() as u8;
                }
            }
            2 => {
                let cut = (rng.next() as usize) % input.len();
                input.truncate(cut);
            }
            _ => {
                // Big lengths and offsets where they hurt most.
                let i = (rng.next() as usize) % input.len().saturating_sub(4);
                input[i..i + 4].copy_from_slice(&[0xff, 0xff, 0xff, (rng.next() as u8) | 0xf0]);
            }
        }
        fuzz_session(&input);
        n += 1;
    }
    assert!(n > 100, "only {n} sessions ran");
}

#[test]
fn option_decoders_bound_counts_by_the_payload() {
    // A count of 2^32-1 queries in a 12-byte payload: refused, nothing allocated.
    let mut b = 0u32.to_be_bytes().to_vec();
    b.extend_from_slice(&u32::MAX.to_be_bytes());
    b.extend_from_slice(&[0; 4]);
    assert!(decode_meta_request(&b).is_none());
    let mut b = 3u32.to_be_bytes().to_vec();
    b.extend_from_slice(b"abc");
    b.extend_from_slice(&u16::MAX.to_be_bytes());
    assert!(decode_info_request(&b).is_none());
    let mut b = u32::MAX.to_be_bytes().to_vec();
    b.extend_from_slice(b"abc");
    assert!(decode_info_request(&b).is_none());
    let mut ok = 3u32.to_be_bytes().to_vec();
    ok.extend_from_slice(b"abc");
    ok.extend_from_slice(&1u16.to_be_bytes());
    ok.extend_from_slice(&3u16.to_be_bytes());
    let r = decode_info_request(&ok).unwrap();
    assert_eq!((r.name, r.infos), ("abc", vec![3]));
}
