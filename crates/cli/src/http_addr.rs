//! The check `cachalot serve` makes on its `--http` address before the daemon starts.
//!
//! Invariant: the HTTP listener is never bound to an address other hosts can reach
//! while it has no TLS, because every change through it carries the API token, which
//! would then cross the network in clear text. Loopback addresses (127.0.0.0/8, ::1,
//! ::ffff:127.x, and names that resolve only to them) are allowed; so is "none".
//! When TLS lands, a non-loopback address becomes allowed with it.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// True if `ip` can only be reached from this host.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Refuse a `--http` address that is not loopback. An address that does not resolve
/// is left to the bind, which reports it.
pub fn check_http_addr(addr: &str) -> Result<(), String> {
    let addr = addr.trim();
    if addr.is_empty() || addr == "none" || addr == "off" {
        return Ok(());
    }
    let Ok(resolved) = addr.to_socket_addrs() else {
        return Ok(());
    };
    let exposed: Vec<SocketAddr> = resolved.filter(|a| !is_loopback(a.ip())).collect();
    match exposed.first() {
        None => Ok(()),
        Some(a) => Err(format!(
            "--http {addr}: refusing to serve HTTP on {}, which other hosts can reach, \
             without TLS (the API token would cross the network in clear text; TLS is not \
             available yet): keep it on 127.0.0.1 and use an SSH tunnel \
             (ssh -L 7470:127.0.0.1:7470 HOST) or a TLS reverse proxy",
            a.ip()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_off_are_allowed() {
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
        ] {
            check_http_addr(a).unwrap_or_else(|e| panic!("{a}: {e}"));
        }
    }

    #[test]
    fn reachable_addresses_are_refused() {
        for a in [
            "0.0.0.0:7470",
            "[::]:7470",
            "10.1.2.3:7470",
            "192.168.0.1:0",
            "[2001:db8::1]:7470",
            "[::ffff:10.0.0.1]:7470",
        ] {
            let e = check_http_addr(a).expect_err(a);
            assert!(e.contains("without TLS") && !e.contains('\n'), "{a}: {e}");
        }
    }

    #[test]
    fn unresolvable_addresses_are_left_to_the_bind() {
        assert!(check_http_addr("not an address").is_ok());
    }
}
