//! What the machine is: CPU, memory, kernel, OS, load, and tool versions, recorded
//! in results.json and the report so figures can be compared across machines.
//! Also the two machine-wide actions a study takes: dropping the page cache, and
//! the current time as text.
//!
//! Invariants: reading machine facts never fails (unknown facts read "unknown").

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_bytes: u64,
    /// 1-minute load average when the study started (other work skews figures).
    pub loadavg_start: f64,
    /// Tool name -> first line of its `--version`.
    pub versions: BTreeMap<String, String>,
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The value of `key` in a "key : value" style text (cpuinfo, meminfo).
fn field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

/// The 1-minute load average.
pub fn loadavg() -> f64 {
    read("/proc/loadavg")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0)
}

impl Machine {
    pub fn read(tools: &crate::tools::Tools, progs: &[&str]) -> Machine {
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|s| s.trim_matches('"').to_string())
            .unwrap_or_else(|| "unknown".into());
        // SAFETY: uname fills a zeroed struct.
        let (hostname, kernel) = unsafe {
            let mut u: libc::utsname = std::mem::zeroed();
            if libc::uname(&mut u) == 0 {
                let s = |a: &[libc::c_char]| {
                    std::ffi::CStr::from_ptr(a.as_ptr())
                        .to_string_lossy()
                        .into_owned()
                };
                (
                    s(&u.nodename),
                    format!("{} {}", s(&u.sysname), s(&u.release)),
                )
            } else {
                ("unknown".into(), "unknown".into())
            }
        };
        let mem_kb: u64 = field(&read("/proc/meminfo"), "MemTotal")
            .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
            .unwrap_or(0);
        let mut versions = BTreeMap::new();
        versions.insert(
            "cachalot".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        );
        for p in progs {
            versions.insert(p.to_string(), tools.version(p));
        }
        Machine {
            hostname,
            os,
            kernel,
            cpu_model: field(&read("/proc/cpuinfo"), "model name")
                .unwrap_or_else(|| "unknown".into()),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_bytes: mem_kb * 1024,
            loadavg_start: loadavg(),
            versions,
        }
    }
}

/// Flush dirty data and drop the page cache (root only). Returns whether the
/// cache was dropped.
pub fn drop_caches() -> bool {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

/// True when running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The effective user's login name (for MariaDB's unix_socket authentication).
pub fn user_name() -> String {
    // SAFETY: getpwuid returns a pointer into static storage or null; we copy the
    // name out before any other call could overwrite it.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            return "root".into();
        }
        std::ffi::CStr::from_ptr((*pw).pw_name)
            .to_string_lossy()
            .into_owned()
    }
}

/// Seconds since the epoch.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// UTC time as "YYYY-MM-DDTHH:MM:SSZ".
pub fn iso_utc(secs: u64) -> String {
    let (y, m, d) = civil_from_days((secs / 86400) as i64);
    let s = secs % 86400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// UTC time as "YYYYMMDD-HHMMSS" (for default directory names).
pub fn compact_utc(secs: u64) -> String {
    iso_utc(secs)
        .replace(['-', ':'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string()
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(compact_utc(1_700_000_000), "20231114-221320");
    }

    #[test]
    fn fields() {
        let t = "model name\t: Some CPU @ 2GHz\nMemTotal:  1000 kB\n";
        assert_eq!(field(t, "model name").unwrap(), "Some CPU @ 2GHz");
        assert_eq!(field(t, "MemTotal").unwrap(), "1000 kB");
        assert!(field(t, "x").is_none());
    }

    #[test]
    fn machine_facts_are_plausible() {
        let m = Machine::read(&crate::tools::Tools::default(), &[]);
        assert!(m.cpus >= 1);
        assert!(m.memory_bytes > 0);
        assert_eq!(m.versions["cachalot"], env!("CARGO_PKG_VERSION"));
    }
}
