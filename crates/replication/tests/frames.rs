//! The replication frame decoder: round trips in any split, refusal of other
//! protocols, oversized and malformed frames, and a bounded-time fuzz run of
//! random and mutated valid inputs (the same function as the cargo-fuzz target).

use cachalot_replication::frame::*;
use std::time::{Duration, Instant};

fn greeting_and_frames() -> Vec<u8> {
    let mut b = encode_greeting(&Hello::new("appliance-a"));
    b.extend(encode(
        FrameType::Request,
        br#"{"op":"receive","fs":"tank/r"}"#,
    ));
    b.extend(encode(FrameType::Data, &vec![7u8; 70_000]));
    b.extend(encode(FrameType::End, &[]));
    b
}

#[test]
fn round_trip_in_every_split() {
    let b = greeting_and_frames();
    for split in [1usize, 3, 8, 9, 100, 4096, b.len()] {
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for chunk in b.chunks(split) {
            d.push(chunk).unwrap();
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
        }
        let types: Vec<FrameType> = got.iter().map(|f| f.ty).collect();
        assert_eq!(
            types,
            [
                FrameType::Hello,
                FrameType::Request,
                FrameType::Data,
                FrameType::End
            ],
            "split {split}"
        );
        assert_eq!(Hello::parse(&got[0].payload).unwrap().peer, "appliance-a");
        assert_eq!(got[2].payload.len(), 70_000);
    }
    let mut r = &b[..];
    assert_eq!(read_greeting(&mut r).unwrap().peer, "appliance-a");
    assert_eq!(read_frame(&mut r).unwrap().ty, FrameType::Request);
}

#[test]
fn other_protocols_and_bad_frames_are_refused() {
    for other in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"SSH-2.0-OpenSSH_9.2\r\n",
        b"\x16\x03\x01\x02\x00",
    ] {
        let mut d = Decoder::new();
        d.push(other).unwrap();
        assert_eq!(d.next_frame(), Err(FrameError::BadMagic));
        assert_eq!(read_greeting(&mut &other[..]), Err(FrameError::BadMagic));
    }
    let bad = |frame: &[u8]| {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(frame);
        let mut d = Decoder::new();
        d.push(&b).unwrap();
        d.next_frame().unwrap_err()
    };
    assert_eq!(bad(&[9, 0, 0, 0, 0, 0, 0, 0]), FrameError::UnknownType(9));
    assert_eq!(bad(&[4, 1, 0, 0, 0, 0, 0, 0]), FrameError::Reserved);
    assert_eq!(
        bad(&[4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]),
        FrameError::TooLong(u32::MAX)
    );
    assert!(matches!(
        bad(&[2, 0, 0, 0, 0, 0, 2, 0]),
        FrameError::JsonTooLong(..)
    ));
    assert!(matches!(
        bad(&[5, 0, 0, 0, 1, 0, 0, 0]),
        FrameError::BadJson(..)
    ));
    // Another version or protocol name in HELLO.
    let mut h = Hello::new("x");
    h.version = 2;
    let g = encode_greeting(&h);
    assert!(matches!(
        read_greeting(&mut &g[..]),
        Err(FrameError::BadJson(..))
    ));
    let g = encode_greeting(&Hello::new("x"));
    assert_eq!(
        read_greeting(&mut &g[..g.len() - 1]),
        Err(FrameError::Truncated)
    );
    // The decoder does not buffer without bound.
    let mut d = Decoder::new();
    let big = vec![0u8; 1 << 20];
    let mut refused = false;
    for _ in 0..4 {
        if d.push(&big).is_err() {
            refused = true;
        }
    }
    assert!(refused, "unbounded buffering");
}

#[test]
fn fuzz_decode_survives_random_and_mutated_input() {
    let valid = greeting_and_frames();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let start = Instant::now();
    let mut runs = 0;
    while start.elapsed() < Duration::from_secs(3) {
        let mut data = if rnd() % 2 == 0 {
            valid.clone()
        } else {
            (0..rnd() % 300).map(|_| rnd() as u8).collect()
        };
        for _ in 0..1 + rnd() % 8 {
            if data.is_empty() {
                break;
            }
            let i = (rnd() as usize) % data.len();
            match rnd() % 3 {
                0 => data[i] = rnd() as u8,
                1 => data.truncate(i),
                _ => data.insert(i, rnd() as u8),
            }
        }
        fuzz_decode(&data);
        runs += 1;
    }
    assert!(runs > 100, "only {runs} runs");
}
