//! Dataset properties: names, validation, defaults, inheritance and formatting.
//!
//! Invariants: a value is stored only after it parsed and validated, in its
//! canonical form, so what `get` reports is exactly what the engine applies.
//! Inheritable properties resolve from the nearest ancestor that sets them, else
//! the default. `quota` and `reservation` are never inherited (as in ZFS).

use crate::error::{Result, StoreError};
use cachalot_pool::Compression;

/// Settable native properties.
pub const SETTABLE: &[&str] = &[
    "recordsize",
    "compression",
    "checksum",
    "sync",
    "logbias",
    "primarycache",
    "secondarycache",
    "quota",
    "reservation",
    "mountpoint",
    "volsize",
    "sharenfs",
    "sharenbd",
    "shareiscsi",
];

/// Read-only (statistics) properties.
pub const READONLY: &[&str] = &[
    "receive_resume_token",
    "type",
    "creation",
    "used",
    "available",
    "referenced",
    "logicalused",
    "compressratio",
    "written",
    "origin",
    "volblocksize",
];

pub fn is_inheritable(p: &str) -> bool {
    matches!(
        p,
        "recordsize"
            | "compression"
            | "checksum"
            | "sync"
            | "logbias"
            | "primarycache"
            | "secondarycache"
            | "mountpoint"
            | "sharenfs"
            | "sharenbd"
            | "shareiscsi"
    ) || is_user_prop(p)
}

/// User properties contain a colon, like `com.example:owner`.
pub fn is_user_prop(p: &str) -> bool {
    p.contains(':')
        && p.len() <= 256
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        && !p.starts_with(':')
}

pub fn default_value(p: &str) -> Option<&'static str> {
    Some(match p {
        "recordsize" => "131072",
        // lz4 by default: it costs little CPU and never expands data (see compress.rs).
        "compression" => "lz4",
        "checksum" => "blake3",
        "sync" => "standard",
        "logbias" => "latency",
        "primarycache" => "all",
        "secondarycache" => "all",
        "quota" => "none",
        "reservation" => "none",
        "sharenfs" => "off",
        "sharenbd" => "off",
        "shareiscsi" => "off",
        _ => return None,
    })
}

/// Sizes are parsed and printed by the workspace's one size module.
pub use cachalot_size::format_size;

/// A property's size value ("16K", "1.5G", "4MiB"); None when it is not a size.
pub fn parse_size(s: &str) -> Option<u64> {
    cachalot_size::parse_size(s).ok()
}

/// The properties whose value is one of a few words, stored as given.
fn one_of(prop: &str) -> Option<&'static [&'static str]> {
    Some(match prop {
        "sync" => &["standard", "always", "disabled"],
        "logbias" => &["latency", "throughput"],
        // secondarycache: what of the dataset the L2ARC is fed (from the ARC's
        // evictions, so primarycache limits it too).
        "primarycache" | "secondarycache" => &["all", "metadata", "none"],
        // Inherited like sharenfs: set on a filesystem, they apply to the
        // volumes below it (the NBD and iSCSI servers serve volumes only).
        "sharenbd" | "shareiscsi" => &["on", "off"],
        _ => return None,
    })
}

/// "a, b or c".
fn or_list(words: &[&str]) -> String {
    match words.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A mountpoint's stored form: an absolute path without a trailing slash (the
/// root stays "/"), none or legacy; None for anything else.
fn canonical_mountpoint(value: &str) -> Option<String> {
    if value == "none" || value == "legacy" {
        return Some(value.into());
    }
    if !value.starts_with('/') {
        return None;
    }
    let v = value.trim_end_matches('/');
    Some(if v.is_empty() { "/".into() } else { v.into() })
}

/// Validate a value for a settable property and return its canonical stored form.
pub fn validate(prop: &str, value: &str, is_volume: bool) -> Result<String> {
    let bad = |why: &str| {
        StoreError::Invalid(format!(
            "invalid value '{value}' for property '{prop}': {why}"
        ))
    };
    if let Some(words) = one_of(prop) {
        if words.contains(&value) {
            return Ok(value.into());
        }
        return Err(bad(&format!("expected {}", or_list(words))));
    }
    match prop {
        "recordsize" => {
            if is_volume {
                return Err(StoreError::Invalid(
                    "property 'recordsize' does not apply to volumes (use volblocksize at creation)".into(),
                ));
            }
            let n = parse_size(value).ok_or_else(|| bad("not a size"))?;
            if !n.is_power_of_two() || !(512..=1 << 20).contains(&n) {
                return Err(bad("must be a power of two from 512 to 1M"));
            }
            Ok(n.to_string())
        }
        "compression" => Compression::parse(value)
            .map(|c| c.to_string())
            .map_err(StoreError::Invalid),
        "checksum" => match value {
            "on" | "blake3" => Ok("blake3".into()),
            "off" => Err(bad(
                "checksums cannot be turned off: every block is verified",
            )),
            _ => Err(bad("expected on or blake3")),
        },
        "quota" | "reservation" => {
            if value == "none" || value == "0" {
                return Ok("none".into());
            }
            let n = parse_size(value).ok_or_else(|| bad("not a size or none"))?;
            Ok(n.to_string())
        }
        "mountpoint" => {
            if is_volume {
                return Err(StoreError::Invalid(
                    "property 'mountpoint' does not apply to volumes".into(),
                ));
            }
            canonical_mountpoint(value)
                .ok_or_else(|| bad("must be an absolute path, none or legacy"))
        }
        "sharenfs" => {
            if is_volume {
                return Err(StoreError::Invalid(
                    "property 'sharenfs' does not apply to volumes".into(),
                ));
            }
            crate::share::canonical_sharenfs(value).map_err(|why| bad(&why))
        }
        "volsize" => {
            if !is_volume {
                return Err(StoreError::Invalid(
                    "property 'volsize' applies only to volumes".into(),
                ));
            }
            let n = parse_size(value)
                .filter(|n| *n > 0)
                .ok_or_else(|| bad("not a size"))?;
            Ok(n.to_string())
        }
        p if is_user_prop(p) => {
            if value.len() > 8192 {
                return Err(bad("user property values are limited to 8192 bytes"));
            }
            Ok(value.to_string())
        }
        p if READONLY.contains(&p) => {
            Err(StoreError::Invalid(format!("property '{p}' is read-only")))
        }
        p => Err(StoreError::Invalid(format!("invalid property '{p}'"))),
    }
}

/// Human form of a stored value.
pub fn humanize(prop: &str, raw: &str) -> String {
    let prop = if prop.starts_with("written@") {
        "written"
    } else {
        prop
    };
    match prop {
        // zfs prints block sizes without a unit below 1K ("512"), space with one.
        "recordsize" | "volblocksize" => match raw.parse::<u64>() {
            Ok(n) if n < 1024 => n.to_string(),
            Ok(n) => format_size(n),
            Err(_) => raw.to_string(),
        },
        // Space figures carry a unit even when small ("0B"), as zfs prints them.
        "quota" | "reservation" | "volsize" | "used" | "available" | "referenced"
        | "logicalused" | "written" => match raw.parse::<u64>() {
            Ok(n) => format_size(n),
            Err(_) => raw.to_string(),
        },
        "compressratio" => format!("{raw}x"),
        _ => raw.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16K"), Some(16384));
        assert_eq!(parse_size("1.5G"), Some(1610612736));
        assert_eq!(parse_size("4MiB"), Some(4 << 20));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(format_size(16384), "16K");
        assert_eq!(format_size(1610612736), "1.50G");
        assert_eq!(format_size(100), "100B");
        assert_eq!(humanize("recordsize", "512"), "512");
        assert_eq!(humanize("used", "0"), "0B");
    }

    #[test]
    fn validation() {
        assert_eq!(validate("recordsize", "16K", false).unwrap(), "16384");
        assert!(validate("recordsize", "3000", false).is_err());
        assert!(validate("recordsize", "2M", false).is_err());
        assert!(validate("compression", "gzip", false).is_err());
        assert_eq!(validate("compression", "zstd", false).unwrap(), "zstd-3");
        assert!(validate("checksum", "off", false).is_err());
        assert!(validate("used", "1", false).is_err());
        assert!(validate("bogus", "1", false).is_err());
        assert_eq!(validate("quota", "1G", false).unwrap(), "1073741824");
        assert_eq!(validate("com.example:x", "hello", false).unwrap(), "hello");
        assert!(validate("mountpoint", "relative", false).is_err());
        assert_eq!(validate("sharenfs", "on", false).unwrap(), "on");
        assert!(validate("sharenfs", "rw=1.2.3", false).is_err());
        assert!(validate("sharenfs", "on", true).is_err());
        assert_eq!(validate("sharenbd", "on", true).unwrap(), "on");
        assert!(validate("sharenbd", "yes", true).is_err());
        assert!(is_inheritable("sharenbd"));
        assert_eq!(validate("shareiscsi", "on", true).unwrap(), "on");
        assert!(validate("shareiscsi", "yes", true).is_err());
        // The word lists' refusals, as the CLI prints them.
        let why = |p: &str, v: &str| validate(p, v, false).unwrap_err().to_string();
        assert!(why("sync", "x").ends_with("expected standard, always or disabled"));
        assert!(why("logbias", "x").ends_with("expected latency or throughput"));
        assert!(why("sharenbd", "x").ends_with("expected on or off"));
        assert_eq!(
            validate("logbias", "throughput", false).unwrap(),
            "throughput"
        );
        assert_eq!(validate("mountpoint", "/a/b//", false).unwrap(), "/a/b");
        assert_eq!(validate("mountpoint", "//", false).unwrap(), "/");
        assert_eq!(validate("mountpoint", "legacy", false).unwrap(), "legacy");
    }
}
