//! Share options of the `sharenfs` property, in exports(5) style, parsed in one
//! place for both the property validation (here) and the NFS server.
//!
//! Grammar: `off` | `on` | OPTION[,OPTION]... with OPTION one of
//! `rw[=LIST]`, `ro[=LIST]`, `root_squash`, `no_root_squash`, `all_squash`,
//! `anonuid=N`, `anongid=N`, `sync`, `async`; LIST is `CLIENT[:CLIENT]...`, CLIENT an IPv4 address,
//! an IPv4 CIDR (`10.0.0.0/8`) or `*` (everyone). `on` is `rw` for everyone with
//! root squashed, as zfs's `sharenfs=on`.
//!
//! Invariants:
//! - A client gets read-write if it matches the rw list, else read-only if it
//!   matches the ro list, else nothing (refused). Options without any rw or ro
//!   give read-write to everyone (exports' default host list is the whole world
//!   in zfs's sharenfs shorthand).
//! - Root is squashed unless `no_root_squash` says otherwise; `all_squash` maps
//!   every caller to anonuid/anongid (default 65534, "nobody").
//! - `canonical()` of a parsed value parses back to the same value, so what
//!   `get sharenfs` shows is exactly what the server applies.
//! - IPv6 clients match only `*` (`:` separates list entries, as in zfs).
//! - `sync` (the default) makes the server commit every namespace and
//!   attribute change before it replies, as NFSv3 requires; `async` skips that
//!   (faster creates, but a crash can lose changes a client saw succeed), as in
//!   exports(5). Data writes follow the client's stable flag and COMMIT either way.

use std::net::{IpAddr, Ipv4Addr};

/// Default anonymous uid/gid ("nobody").
pub const ANON_ID: u32 = 65534;

/// One allowed client: an IPv4 network (prefix length 0 = everyone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl Cidr {
    pub const ANY: Cidr = Cidr {
        addr: Ipv4Addr::UNSPECIFIED,
        prefix: 0,
    };

    fn parse(s: &str) -> Result<Cidr, String> {
        if s == "*" {
            return Ok(Cidr::ANY);
        }
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| format!("'{s}' is not an IPv4 address or CIDR"))?;
        let prefix = match p {
            None => 32,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= 32 => n,
                _ => return Err(format!("'{s}': prefix length must be 0 to 32")),
            },
        };
        let mask = Self::mask(prefix);
        Ok(Cidr {
            addr: Ipv4Addr::from(u32::from(addr) & mask),
            prefix,
        })
    }

    fn mask(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix as u32)
        }
    }

    /// True if `ip` lies in this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        if self.prefix == 0 {
            return true;
        }
        let v4 = match ip {
            IpAddr::V4(v) => v,
            IpAddr::V6(v) => match v.to_ipv4_mapped() {
                Some(v) => v,
                None => return false,
            },
        };
        u32::from(v4) & Self::mask(self.prefix) == u32::from(self.addr)
    }

    fn canonical(&self) -> String {
        match self.prefix {
            0 => "*".into(),
            32 => self.addr.to_string(),
            p => format!("{}/{p}", self.addr),
        }
    }
}

/// How caller identities are mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Squash {
    /// Identities are trusted as sent.
    None,
    /// uid 0 becomes anonuid (and gid 0 anongid).
    Root,
    /// Every caller becomes anonuid/anongid.
    All,
}

/// What a client may do with a share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
    Denied,
}

/// A parsed `sharenfs` value that is not `off`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareNfs {
    pub rw: Vec<Cidr>,
    pub ro: Vec<Cidr>,
    pub squash: Squash,
    pub anonuid: u32,
    pub anongid: u32,
    /// Commit metadata changes before replying (see the module comment).
    pub sync: bool,
}

impl Default for ShareNfs {
    /// `sharenfs=on`.
    fn default() -> Self {
        ShareNfs {
            rw: vec![Cidr::ANY],
            ro: vec![],
            squash: Squash::Root,
            anonuid: ANON_ID,
            anongid: ANON_ID,
            sync: true,
        }
    }
}

fn parse_list(v: Option<&str>) -> Result<Vec<Cidr>, String> {
    match v {
        None => Ok(vec![Cidr::ANY]),
        Some("") => Err("an empty client list".into()),
        Some(l) => l.split(':').map(Cidr::parse).collect(),
    }
}

fn parse_id(opt: &str, v: Option<&str>) -> Result<u32, String> {
    v.and_then(|v| v.parse::<u32>().ok())
        .ok_or_else(|| format!("{opt} needs a numeric id ({opt}=N)"))
}

/// Parse a `sharenfs` value: `None` for `off`.
pub fn parse_sharenfs(value: &str) -> Result<Option<ShareNfs>, String> {
    let value = value.trim();
    match value {
        "off" | "" => return Ok(None),
        "on" => return Ok(Some(ShareNfs::default())),
        _ => {}
    }
    let mut s = ShareNfs {
        rw: vec![],
        ..ShareNfs::default()
    };
    let mut any_list = false;
    for opt in value.split(',') {
        let (k, v) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        match k {
            "rw" => {
                s.rw.extend(parse_list(v)?);
                any_list = true;
            }
            "ro" => {
                s.ro.extend(parse_list(v)?);
                any_list = true;
            }
            "root_squash" if v.is_none() => s.squash = Squash::Root,
            "no_root_squash" if v.is_none() => s.squash = Squash::None,
            "all_squash" if v.is_none() => s.squash = Squash::All,
            "sync" if v.is_none() => s.sync = true,
            "async" if v.is_none() => s.sync = false,
            "anonuid" => s.anonuid = parse_id(k, v)?,
            "anongid" => s.anongid = parse_id(k, v)?,
            _ => {
                return Err(format!(
                    "unknown share option '{opt}' (expected on, off, rw[=CIDR:...], ro[=CIDR:...], \
                     root_squash, no_root_squash, all_squash, anonuid=N, anongid=N, sync, async)"
                ))
            }
        }
    }
    if !any_list {
        s.rw.push(Cidr::ANY);
    }
    Ok(Some(s))
}

/// The canonical stored form of a `sharenfs` value.
pub fn canonical_sharenfs(value: &str) -> Result<String, String> {
    Ok(match parse_sharenfs(value)? {
        None => "off".into(),
        Some(s) if s == ShareNfs::default() && value.trim() == "on" => "on".into(),
        Some(s) => s.canonical(),
    })
}

fn list(l: &[Cidr]) -> String {
    l.iter().map(Cidr::canonical).collect::<Vec<_>>().join(":")
}

impl ShareNfs {
    /// What the client at `ip` may do.
    pub fn access(&self, ip: IpAddr) -> Access {
        if self.rw.iter().any(|c| c.contains(ip)) {
            Access::ReadWrite
        } else if self.ro.iter().any(|c| c.contains(ip)) {
            Access::ReadOnly
        } else {
            Access::Denied
        }
    }

    /// Map a caller's uid and gid as the share's squash options say.
    pub fn squash_ids(&self, uid: u32, gid: u32) -> (u32, u32) {
        match self.squash {
            Squash::All => (self.anonuid, self.anongid),
            Squash::Root if uid == 0 => (self.anonuid, self.anongid),
            Squash::Root => (uid, if gid == 0 { self.anongid } else { gid }),
            Squash::None => (uid, gid),
        }
    }

    /// Options in canonical order (`rw=..,ro=..,squash[,anonuid=N,anongid=N]`).
    pub fn canonical(&self) -> String {
        let mut parts = vec![];
        if !self.rw.is_empty() {
            parts.push(format!("rw={}", list(&self.rw)));
        }
        if !self.ro.is_empty() {
            parts.push(format!("ro={}", list(&self.ro)));
        }
        parts.push(
            match self.squash {
                Squash::None => "no_root_squash",
                Squash::Root => "root_squash",
                Squash::All => "all_squash",
            }
            .into(),
        );
        if self.anonuid != ANON_ID {
            parts.push(format!("anonuid={}", self.anonuid));
        }
        if self.anongid != ANON_ID {
            parts.push(format!("anongid={}", self.anongid));
        }
        if !self.sync {
            parts.push("async".into());
        }
        parts.join(",")
    }

    /// The client lists as `share list` shows them (`rw=*`, `rw=10.0.0.0/8 ro=*`).
    pub fn clients(&self) -> String {
        let mut parts = vec![];
        if !self.rw.is_empty() {
            parts.push(format!("rw={}", list(&self.rw)));
        }
        if !self.ro.is_empty() {
            parts.push(format!("ro={}", list(&self.ro)));
        }
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn on_off_and_options() {
        assert_eq!(parse_sharenfs("off").unwrap(), None);
        let on = parse_sharenfs("on").unwrap().unwrap();
        assert_eq!(on.access(ip("192.168.1.1")), Access::ReadWrite);
        assert_eq!(on.squash_ids(0, 0), (ANON_ID, ANON_ID));
        assert_eq!(on.squash_ids(1000, 100), (1000, 100));
        let s = parse_sharenfs("rw=127.0.0.0/8:10.1.2.3,ro=*,no_root_squash,anonuid=7")
            .unwrap()
            .unwrap();
        assert_eq!(s.access(ip("127.0.0.5")), Access::ReadWrite);
        assert_eq!(s.access(ip("10.1.2.3")), Access::ReadWrite);
        assert_eq!(s.access(ip("10.1.2.4")), Access::ReadOnly);
        assert_eq!(s.squash_ids(0, 0), (0, 0));
        let c = s.canonical();
        assert_eq!(c, "rw=127.0.0.0/8:10.1.2.3,ro=*,no_root_squash,anonuid=7");
        assert_eq!(parse_sharenfs(&c).unwrap().unwrap(), s);
        let only = parse_sharenfs("rw=10.0.0.0/8").unwrap().unwrap();
        assert_eq!(only.access(ip("127.0.0.1")), Access::Denied);
        assert_eq!(only.access(ip("::ffff:10.9.9.9")), Access::ReadWrite);
        let all = parse_sharenfs("all_squash,anonuid=5,anongid=6")
            .unwrap()
            .unwrap();
        assert_eq!(all.squash_ids(1000, 1000), (5, 6));
        assert_eq!(all.access(ip("::1")), Access::ReadWrite);
        assert_eq!(canonical_sharenfs("on").unwrap(), "on");
        assert_eq!(canonical_sharenfs("rw").unwrap(), "rw=*,root_squash");
        let a = parse_sharenfs("rw,async").unwrap().unwrap();
        assert!(!a.sync && on.sync);
        assert_eq!(a.canonical(), "rw=*,root_squash,async");
    }

    #[test]
    fn rejects_bad_values() {
        for bad in [
            "rw=300.1.1.1",
            "rw=10.0.0.0/33",
            "bogus",
            "anonuid=x",
            "rw=",
            "root_squash=1",
            "rw=::1",
        ] {
            assert!(parse_sharenfs(bad).is_err(), "{bad}");
        }
    }
}
