//! Deterministic data patterns and small encoders for the `obj.*` debug ops.
//!
//! The pattern: byte at absolute object offset `o` of a pattern with seed `S` is
//!
//! ```text
//! (splitmix64(S ^ (o / 8)) >> (8 * (o % 8))) as u8
//! ```
//!
//! where `splitmix64(x)` is the standard SplitMix64 output function (all arithmetic
//! wrapping mod 2^64):
//!
//! ```text
//! z = x + 0x9E3779B97F4A7C15
//! z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//! z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//! z ^ (z >> 31)
//! ```
//!
//! i.e. each aligned 8-byte word of the object is the little-endian encoding of
//! `splitmix64(S ^ word_index)`. It depends only on the absolute offset, so a test can
//! write any range and later verify any sub-range by recomputing it.
//!
//! Invariants: every function here is total (no panics on any input).

/// The SplitMix64 output function.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pattern byte at absolute offset `off`.
pub fn pattern_byte(seed: u64, off: u64) -> u8 {
    (splitmix64(seed ^ (off / 8)) >> (8 * (off % 8))) as u8
}

/// Fill `buf` with the pattern bytes of offsets `off .. off + buf.len()`.
pub fn fill_pattern(seed: u64, off: u64, buf: &mut [u8]) {
    let mut i = 0usize;
    while i < buf.len() {
        let o = off.wrapping_add(i as u64);
        let word = splitmix64(seed ^ (o / 8)).to_le_bytes();
        let start = (o % 8) as usize;
        let n = (8 - start).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&word[start..start + n]);
        i += n;
    }
}

/// Offset (relative to `buf`) of the first byte that differs from the pattern.
pub fn first_mismatch(seed: u64, off: u64, buf: &[u8]) -> Option<usize> {
    let mut expect = vec![0u8; buf.len().min(1 << 16)];
    let mut done = 0usize;
    for chunk in buf.chunks(expect.len().max(1)) {
        let e = &mut expect[..chunk.len()];
        fill_pattern(seed, off.wrapping_add(done as u64), e);
        if let Some(p) = chunk.iter().zip(e.iter()).position(|(a, b)| a != b) {
            return Some(done + p);
        }
        done += chunk.len();
    }
    None
}

/// Lowercase hex.
pub fn to_hex(data: &[u8]) -> String {
    const H: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        s.push(H[(b >> 4) as usize] as char);
        s.push(H[(b & 15) as usize] as char);
    }
    s
}

/// Decode hex (either case).
pub fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    let b = s.trim().as_bytes();
    if b.len() & 1 != 0 {
        return Err("invalid hex: odd length".into());
    }
    let nib = |c: u8| -> Result<u8, String> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!("invalid hex digit '{}'", c as char)),
        }
    };
    b.chunks(2)
        .map(|p| Ok((nib(p[0])? << 4) | nib(p[1])?))
        .collect()
}

/// Decode standard base64 (with or without `=` padding; whitespace ignored).
pub fn from_base64(s: &str) -> Result<Vec<u8>, String> {
    let val = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return Err(format!("invalid base64 character '{}'", c as char)),
        } as u32)
    };
    let clean: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let trimmed: &[u8] = {
        let mut end = clean.len();
        while end > 0 && clean[end - 1] == b'=' {
            end -= 1;
        }
        if clean.len() - end > 2 {
            return Err("invalid base64 padding".into());
        }
        &clean[..end]
    };
    if trimmed.len() % 4 == 1 {
        return Err("invalid base64 length".into());
    }
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    for chunk in trimmed.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Ok(out)
}

/// Encode standard base64 with padding.
pub fn to_base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let mut b = [0u8; 3];
        b[..chunk.len()].copy_from_slice(chunk);
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference() {
        // Reference values of SplitMix64 seeded with 0 (first outputs of the generator
        // whose state starts at 0: splitmix64(0), splitmix64(0x9E37..)).
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn fill_matches_bytewise_definition() {
        for seed in [0u64, 7, u64::MAX] {
            for off in [0u64, 1, 7, 8, 13, u64::MAX - 20] {
                let mut buf = vec![0u8; 29];
                fill_pattern(seed, off, &mut buf);
                for (i, b) in buf.iter().enumerate() {
                    assert_eq!(*b, pattern_byte(seed, off.wrapping_add(i as u64)));
                }
                assert_eq!(first_mismatch(seed, off, &buf), None);
                buf[17] ^= 1;
                assert_eq!(first_mismatch(seed, off, &buf), Some(17));
            }
        }
        assert_eq!(first_mismatch(1, 0, &[]), None);
    }

    #[test]
    fn hex_and_base64() {
        assert_eq!(to_hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(from_hex("00AB10").unwrap(), vec![0, 0xab, 0x10]);
        assert!(from_hex("abc").is_err());
        assert!(from_hex("zz").is_err());
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            let e = to_base64(data);
            assert_eq!(from_base64(&e).unwrap(), data);
        }
        assert_eq!(to_base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(to_base64(b"fo"), "Zm8=");
        assert_eq!(from_base64("Zm8").unwrap(), b"fo");
        assert!(from_base64("Z").is_err());
        assert!(from_base64("Zm9v!").is_err());
        assert!(from_base64("Zm8====").is_err());
    }
}
