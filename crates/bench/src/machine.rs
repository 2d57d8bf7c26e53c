//! What the machine is: CPU, memory, kernel, OS, load, and tool versions, recorded
//! in results.json and the report so figures can be compared across machines.
//! Also the two machine-wide actions a study takes: dropping the page cache, and
//! the current time as text.
//!
//! Invariants: reading machine facts never fails (unknown facts read "unknown").

pub use cachalot_analytics::query::{compact_utc, iso_utc};
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
