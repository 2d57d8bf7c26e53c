//! What `cachalot serve` decides from its `--http` address before the daemon starts.
//!
//! Invariant: the HTTP listener never serves plain HTTP on an address other hosts can
//! reach, because every change through it carries an API token, which would then
//! cross the network in clear text: such an address gets HTTPS (the daemon's
//! self-signed certificate in HOME/tls/, or --tls-cert/--tls-key). Loopback
//! addresses (127.0.0.0/8, ::1, ::ffff:127.x, and names that resolve only to them)
//! and "none" stay plain HTTP unless a certificate is given.

use std::net::{IpAddr, ToSocketAddrs};

/// True if `ip` can only be reached from this host.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// True if `addr` resolves to any address other hosts can reach (then HTTPS is
/// required). An address that does not resolve is left to the bind, which
/// reports it.
pub fn reachable_from_other_hosts(addr: &str) -> bool {
    let addr = addr.trim();
    if addr.is_empty() || addr == "none" || addr == "off" {
        return false;
    }
    let Ok(resolved) = addr.to_socket_addrs() else {
        return false;
    };
    resolved.into_iter().any(|a| !is_loopback(a.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_off_stay_plain() {
        for a in [
            "127.0.0.1:7470",
            "127.0.0.1:0",
            "127.8.9.10:80",
            "[::1]:7470",
            "[::ffff:127.0.0.1]:7470",
            "localhost:7470",
            "none",
            "off",
            "",
            "not an address",
        ] {
            assert!(!reachable_from_other_hosts(a), "{a}");
        }
    }

    #[test]
    fn reachable_addresses_need_tls() {
        for a in [
            "0.0.0.0:7470",
            "[::]:7470",
            "10.1.2.3:7470",
            "192.168.0.1:0",
            "[2001:db8::1]:7470",
            "[::ffff:10.0.0.1]:7470",
        ] {
            assert!(reachable_from_other_hosts(a), "{a}");
        }
    }
}
