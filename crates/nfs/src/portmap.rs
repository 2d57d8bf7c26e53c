//! A small portmapper / rpcbind (RFC 1833): version 2 (NULL, SET, UNSET,
//! GETPORT, DUMP) and versions 3 and 4 (NULL, SET, UNSET, GETADDR, DUMP,
//! GETTIME), answering for the programs this server itself serves. SET and
//! UNSET are refused (false): nothing else registers with us.

use crate::rpc::{RpcError, PROG_MOUNT, PROG_NFS, PROG_PORTMAP};
use crate::xdr::{Reader, Writer};
use std::net::IpAddr;

const IPPROTO_TCP: u32 = 6;

/// The programs served and their ports.
#[derive(Clone, Debug)]
pub struct PortMap {
    pub nfs_port: u16,
    pub portmap_port: Option<u16>,
}

impl PortMap {
    /// (program, version, port) of every mapping.
    fn mappings(&self) -> Vec<(u32, u32, u16)> {
        let mut v = vec![(PROG_NFS, 3, self.nfs_port), (PROG_MOUNT, 3, self.nfs_port)];
        if let Some(p) = self.portmap_port {
            for vers in 2..=4 {
                v.push((PROG_PORTMAP, vers, p));
            }
        }
        v
    }

    fn port_of(&self, prog: u32, vers: u32) -> Option<u16> {
        self.mappings()
            .into_iter()
            .find(|(p, v, _)| *p == prog && *v == vers)
            .map(|m| m.2)
    }
}

/// A universal address `h1.h2.h3.h4.p1.p2`.
fn uaddr(ip: IpAddr, port: u16) -> String {
    format!("{ip}.{}.{}", port >> 8, port & 0xff)
}

fn netid(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "tcp"
    } else {
        "tcp6"
    }
}

/// Run procedure `proc_` of portmapper version `vers`; `local` is the address
/// the client reached us on.
pub fn dispatch(
    map: &PortMap,
    local: IpAddr,
    vers: u32,
    proc_: u32,
    args: &[u8],
) -> Result<Writer, RpcError> {
    let mut r = Reader::new(args);
    let mut w = Writer::new();
    match (vers, proc_) {
        (_, 0) => {}
        (_, 1) | (_, 2) => {
            w.bool(false);
        }
        (2, 3) => {
            let (prog, pvers, prot, _port) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
            let port = if prot == IPPROTO_TCP {
                map.port_of(prog, pvers).unwrap_or(0)
            } else {
                0
            };
            w.u32(port as u32);
        }
        (2, 4) => {
            for (prog, v, port) in map.mappings() {
                w.bool(true)
                    .u32(prog)
                    .u32(v)
                    .u32(IPPROTO_TCP)
                    .u32(port as u32);
            }
            w.bool(false);
        }
        (3 | 4, 3) => {
            let prog = r.u32()?;
            let pvers = r.u32()?;
            let id = r.string(64)?;
            r.string(256)?;
            r.string(256)?;
            let tcp = id == b"tcp" || id == b"tcp6" || id.is_empty();
            let addr = match map.port_of(prog, pvers) {
                Some(port) if tcp => uaddr(local, port),
                _ => String::new(),
            };
            w.opaque(addr.as_bytes());
        }
        (3 | 4, 4) => {
            for (prog, v, port) in map.mappings() {
                w.bool(true)
                    .u32(prog)
                    .u32(v)
                    .opaque(netid(local).as_bytes())
                    .opaque(uaddr(local, port).as_bytes())
                    .opaque(b"cachalot");
            }
            w.bool(false);
        }
        (3 | 4, 6) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            w.u32(now as u32);
        }
        _ => return Err(RpcError::ProcUnavail),
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getport_and_getaddr() {
        let map = PortMap {
            nfs_port: 2049,
            portmap_port: Some(111),
        };
        let mut a = Writer::new();
        a.u32(PROG_MOUNT).u32(3).u32(IPPROTO_TCP).u32(0);
        let w = dispatch(&map, "127.0.0.1".parse().unwrap(), 2, 3, &a.buf).unwrap();
        assert_eq!(w.buf, 2049u32.to_be_bytes());
        let mut a = Writer::new();
        a.u32(PROG_NFS)
            .u32(3)
            .opaque(b"tcp")
            .opaque(b"")
            .opaque(b"");
        let w = dispatch(&map, "127.0.0.1".parse().unwrap(), 4, 3, &a.buf).unwrap();
        assert_eq!(Reader::new(&w.buf).string(64).unwrap(), b"127.0.0.1.8.1");
        assert_eq!(
            dispatch(&map, "127.0.0.1".parse().unwrap(), 2, 9, &[]).unwrap_err(),
            RpcError::ProcUnavail
        );
    }
}
