//! The MOUNT protocol, version 3 (RFC 1813 appendix I): MNT, DUMP, UMNT,
//! UMNTALL, EXPORT.
//!
//! Invariants:
//! - MNT hands out the root handle of a dataset only if its `sharenfs`
//!   property (read now) lets this client in; otherwise MNT3ERR_ACCES (not
//!   shared, or the client is outside the lists) or MNT3ERR_NOENT (no such
//!   filesystem). The mount list DUMP shows is informational (NFS is
//!   stateless) and bounded.

use crate::exports::{Exports, LookupError};
use crate::nfs3::args::MAX_PATH_WIRE;
use crate::nfs3::Ctx;
use crate::rpc::RpcError;
use crate::xdr::{Reader, Writer};
use cachalot_datasets::share::Access;
use parking_lot::Mutex;
use std::net::IpAddr;

pub const MNT3_OK: u32 = 0;
pub const MNT3ERR_NOENT: u32 = 2;
pub const MNT3ERR_IO: u32 = 5;
pub const MNT3ERR_ACCES: u32 = 13;
const MAX_MOUNTS: usize = 4096;
const AUTH_SYS: u32 = 1;
const AUTH_NONE: u32 = 0;

/// Who mounted what (for DUMP and `share list`).
#[derive(Default)]
pub struct MountList {
    list: Mutex<Vec<(IpAddr, String)>>,
}

impl MountList {
    pub fn snapshot(&self) -> Vec<(IpAddr, String)> {
        self.list.lock().clone()
    }
    fn add(&self, ip: IpAddr, path: &str) {
        let mut l = self.list.lock();
        if l.iter().any(|(i, p)| *i == ip && p == path) {
            return;
        }
        if l.len() >= MAX_MOUNTS {
            l.remove(0);
        }
        l.push((ip, path.to_string()));
    }
}

/// Run MOUNT procedure `proc_` of version 3.
pub fn dispatch(
    exports: &Exports,
    mounts: &MountList,
    client: IpAddr,
    proc_: u32,
    args: &[u8],
) -> Result<Writer, RpcError> {
    let mut r = Reader::new(args);
    let mut w = Writer::new();
    match proc_ {
        0 => {}
        1 => {
            let path = r.string(MAX_PATH_WIRE)?;
            let path = String::from_utf8_lossy(path).into_owned();
            mnt(exports, mounts, client, &path, &mut w);
        }
        2 => {
            for (ip, path) in mounts.snapshot() {
                w.bool(true)
                    .opaque(ip.to_string().as_bytes())
                    .opaque(path.as_bytes());
            }
            w.bool(false);
        }
        3 => {
            let path = r.string(MAX_PATH_WIRE)?;
            let path = String::from_utf8_lossy(path).into_owned();
            mounts
                .list
                .lock()
                .retain(|(i, p)| !(*i == client && *p == path));
        }
        4 => mounts.list.lock().retain(|(i, _)| *i != client),
        5 => {
            for (name, share) in exports.list() {
                let Some(share) = share else { continue };
                w.bool(true).opaque(format!("/{name}").as_bytes());
                for group in share.clients().split(' ') {
                    let g = group.split_once('=').map_or(group, |(_, l)| l);
                    w.bool(true).opaque(g.as_bytes());
                }
                w.bool(false);
            }
            w.bool(false);
        }
        _ => return Err(RpcError::ProcUnavail),
    }
    Ok(w)
}

fn mnt(exports: &Exports, mounts: &MountList, client: IpAddr, path: &str, w: &mut Writer) {
    let export = match exports.by_path(path) {
        Ok(e) => e,
        Err(LookupError::Gone) => {
            w.u32(MNT3ERR_NOENT);
            return;
        }
        Err(LookupError::NotShared) => {
            w.u32(MNT3ERR_ACCES);
            return;
        }
        Err(LookupError::Io) => {
            w.u32(MNT3ERR_IO);
            return;
        }
    };
    let allowed = export
        .share
        .as_ref()
        .is_some_and(|s| s.access(client) != Access::Denied);
    if !allowed {
        w.u32(MNT3ERR_ACCES);
        return;
    }
    match Ctx::root_handle(&export) {
        Ok(h) => {
            mounts.add(client, path);
            w.u32(MNT3_OK)
                .opaque(&h.encode())
                .u32(2)
                .u32(AUTH_SYS)
                .u32(AUTH_NONE);
        }
        Err(_) => {
            w.u32(MNT3ERR_IO);
        }
    }
}
