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

/// Compress `data`; returns `None` when the result would not save at least 1/8 of
/// the allocated size (`sector`-rounded), in which case the caller stores it raw.
pub fn compress(alg: Compression, data: &[u8], sector: usize) -> Option<Vec<u8>> {
    let out = match alg {
        Compression::Off => return None,
        Compression::Lz4 => lz4_flex::block::compress(data),
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
