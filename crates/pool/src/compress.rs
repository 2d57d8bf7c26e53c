//! Per-block compression. A block is stored compressed only when that saves at
//! least 1/8 of its size after rounding to the sector size; otherwise it is stored
//! as is, so incompressible data costs no CPU on reads.

use crate::error::{PoolError, Result};

/// Compression algorithm of one block (also the `compression` property value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    Off,
    Lz4,
    /// zstd with its level (1..=19).
    Zstd(u8),
}

impl Compression {
    /// On-disk byte: 0 off, 1 lz4, 0x80|level zstd.
    pub fn to_byte(self) -> u8 {
        match self {
            Compression::Off => 0,
            Compression::Lz4 => 1,
            Compression::Zstd(l) => 0x80 | l,
        }
    }
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(Compression::Off),
            1 => Some(Compression::Lz4),
            b if b & 0x80 != 0 && (1..=19).contains(&(b & 0x7f)) => {
                Some(Compression::Zstd(b & 0x7f))
            }
            _ => None,
        }
    }
    /// Parse a property value: off, lz4, zstd (= zstd-3), zstd-N (1..19), on (= lz4).
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "off" => Ok(Compression::Off),
            "on" | "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd(3)),
            _ => {
                if let Some(l) = s.strip_prefix("zstd-") {
                    if let Ok(l) = l.parse::<u8>() {
                        if (1..=19).contains(&l) {
                            return Ok(Compression::Zstd(l));
                        }
                    }
                }
                Err(format!(
                    "invalid compression '{s}': expected off, lz4, zstd or zstd-1..zstd-19"
                ))
            }
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compression::Off => write!(f, "off"),
            Compression::Lz4 => write!(f, "lz4"),
            Compression::Zstd(l) => write!(f, "zstd-{l}"),
        }
    }
}

/// Blocks at least this large are probed before lz4 compresses them whole
/// (see `compress`); a smaller block's probe would be too short to tell.
const PROBE_MIN: usize = 16 * 1024;

/// Compress `data`; returns `None` when the result would not save at least 1/8 of
/// the allocated size (`sector`-rounded), in which case the caller stores it raw.
///
/// lz4 early abort: a block of at least `PROBE_MIN` bytes whose first eighth
/// does not shrink at all under lz4 is stored raw without compressing the rest.
/// Data that does not compress (encrypted or already compressed rows, random
/// payloads) then costs an eighth of an lz4 pass instead of a whole one, which
/// was 5% of the daemon's CPU on 1 MiB volume writes; compressible data pays
/// that eighth on top. The probe asks for less than the 1/8 saving the whole
/// block needs (zfs's threshold), so a block it gives up on would almost always
/// have been stored raw anyway; the rare one that compresses only past its
/// first eighth is stored raw, which is valid (a block's `compression` field
/// says how it is stored) and changes nothing on disk.
pub fn compress(alg: Compression, data: &[u8], sector: usize) -> Option<Vec<u8>> {
    let out = match alg {
        Compression::Off => return None,
        Compression::Lz4 => {
            if data.len() >= PROBE_MIN {
                let probe = &data[..data.len() / 8];
                if lz4_flex::block::compress(probe).len() >= probe.len() {
                    return None;
                }
            }
            lz4_flex::block::compress(data)
        }
        Compression::Zstd(level) => zstd::bulk::compress(data, level as i32).ok()?,
    };
    let round = |n: usize| n.div_ceil(sector) * sector;
    if out.len() > data.len() - data.len() / 8 || round(out.len()) >= round(data.len()) {
        return None;
    }
    Some(out)
}

/// Decompress a block to exactly `lsize` bytes.
pub fn decompress(alg: Compression, data: &[u8], lsize: usize) -> Result<Vec<u8>> {
    let bad = |what: String| PoolError::Corrupt {
        vdev: 0,
        offset: 0,
        what,
    };
    let out = match alg {
        Compression::Off => return Ok(data.to_vec()),
        Compression::Lz4 => {
            lz4_flex::block::decompress(data, lsize).map_err(|e| bad(format!("lz4: {e}")))?
        }
        Compression::Zstd(_) => {
            zstd::bulk::decompress(data, lsize).map_err(|e| bad(format!("zstd: {e}")))?
        }
    };
    if out.len() != lsize {
        return Err(bad(format!(
            "decompressed to {} bytes, expected {lsize}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_useful_compression() {
        let zeros = vec![0u8; 16384];
        let c = compress(Compression::Lz4, &zeros, 4096).unwrap();
        assert_eq!(decompress(Compression::Lz4, &c, 16384).unwrap(), zeros);
        let z = compress(Compression::Zstd(3), &zeros, 4096).unwrap();
        assert_eq!(decompress(Compression::Zstd(3), &z, 16384).unwrap(), zeros);
        // Pseudo-random bytes do not compress: stored raw.
        let mut x = 0x12345678u64;
        let noise: Vec<u8> = (0..16384)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(compress(Compression::Lz4, &noise, 4096).is_none());
        assert!(compress(Compression::Off, &zeros, 4096).is_none());
    }

    /// Random bytes from a xorshift generator seeded with `seed`.
    fn noise(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn lz4_gives_up_early_on_a_block_whose_first_eighth_does_not_shrink() {
        const BS: usize = 128 * 1024;
        // Compressible rows (text with varying numbers): compressed.
        let rows: Vec<u8> = (0..)
            .flat_map(|i: u32| format!("row {i:08} name=customer-{} ok;", i % 97).into_bytes())
            .take(BS)
            .collect();
        let c = compress(Compression::Lz4, &rows, 4096).expect("text compresses");
        assert!(c.len() < BS / 2);
        assert_eq!(decompress(Compression::Lz4, &c, BS).unwrap(), rows);
        // Random: raw.
        assert!(compress(Compression::Lz4, &noise(7, BS), 4096).is_none());
        // The abort itself: a random first eighth before zeros is stored raw,
        // though the block as a whole would compress (and does with zstd, which
        // is not probed, and below the probe's minimum size).
        let mut head_random = noise(9, BS / 8);
        head_random.resize(BS, 0);
        assert!(lz4_flex::block::compress(&head_random).len() < BS / 2);
        assert!(compress(Compression::Lz4, &head_random, 4096).is_none());
        assert!(compress(Compression::Zstd(1), &head_random, 4096).is_some());
        let mut small = noise(9, 1024);
        small.resize(PROBE_MIN / 2, 0);
        assert!(compress(Compression::Lz4, &small, 512).is_some());
    }

    #[test]
    fn parse_values() {
        assert_eq!(Compression::parse("zstd-7"), Ok(Compression::Zstd(7)));
        assert!(Compression::parse("zstd-20").is_err());
        assert!(Compression::parse("gzip").is_err());
        for c in [Compression::Off, Compression::Lz4, Compression::Zstd(19)] {
            assert_eq!(Compression::from_byte(c.to_byte()), Some(c));
            assert_eq!(Compression::parse(&c.to_string()), Ok(c));
        }
    }
}
