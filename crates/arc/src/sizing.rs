//! The default ARC size, as the daemon applies it when none is configured.
//!
//! Invariant: never below 64 MiB, whatever /proc/meminfo says (or if it is missing).

use std::fs;

/// Default ARC size: 1/8 of RAM (from /proc/meminfo), at least 64 MiB.
pub fn default_arc_max() -> u64 {
    let total = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| parse_memtotal(&s))
        .unwrap_or(0);
    (total / 8).max(64 << 20)
}

fn parse_memtotal(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memtotal_parsed_and_default_bounded() {
        assert_eq!(
            parse_memtotal("MemFree: 1 kB\nMemTotal:  2048 kB\n"),
            Some(2 << 20)
        );
        assert_eq!(parse_memtotal("nothing"), None);
        assert!(default_arc_max() >= 64 << 20);
    }
}
