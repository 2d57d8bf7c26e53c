//! Fuzzing entry for the API's decoders of network bytes: a request body decoded
//! as every typed request and every REST body, then (if it decodes) re-encoded and
//! decoded again to the same value; and the error classifier on the bytes as text.
//! Must never panic. Bodies are bounded before this (axum's 2 MiB body limit).

use super::error::classify;
use super::requests::*;
use super::routes::{CloneBody, ImportBody, NfsShareBody, RollbackBody, ValueBody};
use serde::de::DeserializeOwned;

fn roundtrip<T: Op + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(r) = serde_json::from_slice::<T>(data) {
        let again: T = serde_json::from_value(r.args()).expect("a decoded request re-decodes");
        assert_eq!(again, r);
    }
}

fn decodes<T: DeserializeOwned>(data: &[u8]) {
    let _ = serde_json::from_slice::<T>(data);
}

/// One fuzz input.
pub fn fuzz_request_body(data: &[u8]) {
    roundtrip::<PoolCreate>(data);
    roundtrip::<PoolImport>(data);
    roundtrip::<DsCreate>(data);
    roundtrip::<DsDestroy>(data);
    roundtrip::<DsList>(data);
    roundtrip::<DsGet>(data);
    roundtrip::<DsSet>(data);
    roundtrip::<SnapCreate>(data);
    roundtrip::<SnapClone>(data);
    roundtrip::<SnapRollback>(data);
    roundtrip::<AnalyticsShow>(data);
    roundtrip::<TokenCreate>(data);
    decodes::<ImportBody>(data);
    decodes::<ValueBody>(data);
    decodes::<RollbackBody>(data);
    decodes::<CloneBody>(data);
    decodes::<NfsShareBody>(data);
    let code = classify(&String::from_utf8_lossy(data));
    assert!(super::error::CODES.iter().any(|(c, _)| *c == code));
}

/// Seed inputs (also the corpus of `fuzz/corpus/api_request`).
pub const SEEDS: &[&str] = &[
    r#"{"name":"tank","vdevs":["mirror","/d/a.img","/d/b.img"],"size":"256M","ashift":12,"force":true,"props":{"compression":"lz4"}}"#,
    r#"{"name":"tank/db","volume_size":1048576,"sparse":true,"blocksize":"16K","props":["recordsize=16K"],"parents":true}"#,
    r#"{"names":["tank/a@s1","tank/b@s1"],"recursive":true}"#,
    r#"{"name":"tank/a@s1","target":"tank/c","props":{"a":"b"}}"#,
    r#"{"stat":"nfs.ops","by":"client","filters":["share=tank/a"],"last":"60s","top":5}"#,
    r#"{"dirs":["/d"],"name":"tank"}"#,
    r#"{"value":"1G"}"#,
    r#"{"options":"rw=10.0.0.0/8"}"#,
];

#[cfg(test)]
mod tests {
    use super::*;

    const JSON_BYTES: &[u8] = b"{}[]\",:0-e\\u";

    /// The stable-toolchain run: seeds, then a second of random mutations of them.
    #[test]
    fn fuzz_request_bodies_for_a_second() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for s in SEEDS {
            fuzz_request_body(s.as_bytes());
        }
        let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut n = 0u64;
        while std::time::Instant::now() < end {
            let mut b = SEEDS[(next() % SEEDS.len() as u64) as usize]
                .as_bytes()
                .to_vec();
            for _ in 0..=(next() % 4) {
                let i = (next() % b.len() as u64) as usize;
                match next() % 3 {
                    0 => b[i] = next() as u8,
                    1 => {
                        b.remove(i);
                    }
                    _ => b.insert(i, JSON_BYTES[(next() % JSON_BYTES.len() as u64) as usize]),
                }
                if b.is_empty() {
                    break;
                }
            }
            fuzz_request_body(&b);
            n += 1;
        }
        assert!(n > 100, "only {n} inputs in a second");
    }
}
