//! Human sizes, as zfs/zpool print and accept them.
//!
//! Invariants:
//! - `parse_size` accepts a decimal number (optionally with a fraction) followed by an
//!   optional binary unit K/M/G/T/P/E (1024-based), optionally followed by `B` or `iB`,
//!   case-insensitive ("256M", "1.5g", "16KiB", "512", "512B"). It never panics and
//!   rejects overflow, negative numbers, empty strings and junk.
//! - `format_size` follows zfs' `nicenum`: plain bytes below 1 KiB ("512B"), exact
//!   multiples without decimals ("16K", "1G"), otherwise at most 3 significant digits
//!   in at most 5 characters ("1.50G", "120M", "12.3K").

const UNITS: [char; 7] = ['B', 'K', 'M', 'G', 'T', 'P', 'E'];

/// Parse a size such as "256M", "1.5G", "16KiB" or "4096" into bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("invalid size '{s}'");
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(num_end);
    if num.is_empty() || num.matches('.').count() > 1 || num == "." {
        return Err(bad());
    }
    let unit = unit.trim().to_ascii_uppercase();
    let shift: u32 = match unit.as_str() {
        "" | "B" => 0,
        u => {
            let mut cs = u.chars();
            let first = cs.next().ok_or_else(bad)?;
            let rest: String = cs.collect();
            if !(rest.is_empty() || rest == "B" || rest == "IB") {
                return Err(bad());
            }
            let idx = UNITS[1..]
                .iter()
                .position(|&c| c == first)
                .ok_or_else(bad)?;
            10 * (idx as u32 + 1)
        }
    };
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    let int: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| bad())?
    };
    if frac_part.len() > 18 {
        return Err(bad());
    }
    let mult: u128 = 1u128 << shift;
    let mut total = int.checked_mul(mult).ok_or_else(bad)?;
    if !frac_part.is_empty() {
        let frac: u128 = frac_part.parse().map_err(|_| bad())?;
        let denom = 10u128.pow(frac_part.len() as u32);
        total = total.checked_add(frac * mult / denom).ok_or_else(bad)?;
    }
    u64::try_from(total).map_err(|_| format!("size '{s}' is too large"))
}

/// Format bytes like zfs: "0B", "512B", "16K", "1.50G", "120M".
pub fn format_size(n: u64) -> String {
    let mut index = 0usize;
    let mut v = n;
    while v >= 1024 && index < UNITS.len() - 1 {
        v /= 1024;
        index += 1;
    }
    let unit = UNITS[index];
    if index == 0 {
        return format!("{n}{unit}");
    }
    let div = 1u64 << (10 * index);
    if n & (div - 1) == 0 {
        return format!("{}{unit}", n / div);
    }
    let val = n as f64 / div as f64;
    for prec in (0..=2).rev() {
        let s = format!("{val:.prec$}{unit}");
        if s.len() <= 5 || prec == 0 {
            return s;
        }
    }
    unreachable!("the loop returns at prec 0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_plain_and_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("16K"), Ok(16384));
        assert_eq!(parse_size("16k"), Ok(16384));
        assert_eq!(parse_size("16KB"), Ok(16384));
        assert_eq!(parse_size("16KiB"), Ok(16384));
        assert_eq!(parse_size("16kib"), Ok(16384));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("1P"), Ok(1 << 50));
        assert_eq!(parse_size(" 8M "), Ok(8 << 20));
        assert_eq!(parse_size(".5K"), Ok(512));
    }

    #[test]
    fn parse_rejects_junk() {
        for s in [
            "",
            " ",
            "abc",
            "-1",
            "1.2.3",
            "1X",
            "1KK",
            "1KX",
            "K",
            ".",
            "1e3",
            "16 K B",
            "99999999999999999999",
            "16E",
            "1.00000000000000000001K",
        ] {
            assert!(parse_size(s).is_err(), "{s:?} should be rejected");
        }
    }

    #[test]
    fn format_like_zfs() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(512), "512B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1K");
        assert_eq!(format_size(16384), "16K");
        assert_eq!(format_size(1536), "1.50K");
        assert_eq!(format_size(3 << 29), "1.50G");
        assert_eq!(format_size(120 << 20), "120M");
        assert_eq!(format_size((120 << 20) + 12345), "120M");
        assert_eq!(format_size(12_900_000), "12.3M");
        assert_eq!(format_size(u64::MAX), "16.0E");
    }

    #[test]
    fn roundtrip_exact_multiples() {
        for n in [
            1u64 << 10,
            16 << 10,
            128 << 10,
            1 << 20,
            256 << 20,
            1 << 30,
            5 << 40,
        ] {
            assert_eq!(parse_size(&format_size(n)), Ok(n));
        }
    }
}
