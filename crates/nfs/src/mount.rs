//! The MOUNT protocol, version 3 (RFC 1813 appendix I): MNT, DUMP, UMNT,
//! UMNTALL, EXPORT.
//!
//! Invariants:
//! - MNT hands out the root handle of a dataset only if its `sharenfs`
//!   property (read now) lets this client in; otherwise MNT3ERR_ACCES (not
//!   shared, or the client is outside the lists) or MNT3ERR_NOENT (no such
//!   filesystem). The mount list DUMP shows is informational (NFS is
//!   stateless) and bounded.
//! - A path below a filesystem (`/tank/fs/sub/dir`) mounts that directory of the
//!   nearest filesystem dataset above it, under that dataset's share options.

use crate::exports::{Export, Exports, LookupError};
use crate::handle::Handle;
use crate::nfs3::args::MAX_PATH_WIRE;
use crate::nfs3::Ctx;
use crate::rpc::RpcError;
use crate::xdr::{Reader, Writer};
use cachalot_datasets::share::Access;
use cachalot_posix::FileKind;
use parking_lot::Mutex;
use std::net::IpAddr;

pub const MNT3_OK: u32 = 0;
pub const MNT3ERR_NOENT: u32 = 2;
pub const MNT3ERR_IO: u32 = 5;
pub const MNT3ERR_ACCES: u32 = 13;
pub const MNT3ERR_NOTDIR: u32 = 20;
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

/// The export holding `path` and the components below its dataset.
fn find_export(exports: &Exports, path: &str) -> Result<(Export, Vec<String>), u32> {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    for k in (1..=comps.len()).rev() {
        match exports.by_path(&comps[..k].join("/")) {
            Ok(e) => return Ok((e, comps[k..].iter().map(|c| c.to_string()).collect())),
            Err(LookupError::Gone) => continue,
            Err(LookupError::NotShared) => return Err(MNT3ERR_ACCES),
            Err(LookupError::Io) => return Err(MNT3ERR_IO),
        }
    }
    Err(MNT3ERR_NOENT)
}

/// The handle of directory `below` (components) in `export`.
fn walk(export: &Export, below: &[String]) -> Result<Handle, u32> {
    let root = Ctx::root_handle(export).map_err(|_| MNT3ERR_IO)?;
    let mut obj = root.obj;
    let mut gen = root.gen;
    for c in below {
        if c == "." || c == ".." {
            return Err(MNT3ERR_NOENT);
        }
        let a = export.fs.lookup(obj, c.as_bytes()).map_err(|e| match e.0 {
            libc::ENOENT | libc::ENAMETOOLONG => MNT3ERR_NOENT,
            libc::ENOTDIR => MNT3ERR_NOTDIR,
            _ => MNT3ERR_IO,
        })?;
        if a.kind != FileKind::Directory {
            return Err(MNT3ERR_NOTDIR);
        }
        (obj, gen) = (a.ino, a.generation);
    }
    Ok(Handle { obj, gen, ..root })
}

fn mnt(exports: &Exports, mounts: &MountList, client: IpAddr, path: &str, w: &mut Writer) {
    let (export, below) = match find_export(exports, path) {
        Ok(x) => x,
        Err(st) => {
            w.u32(st);
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
    match walk(&export, &below) {
        Ok(h) => {
            mounts.add(client, path);
            w.u32(MNT3_OK)
                .opaque(&h.encode())
                .u32(2)
                .u32(AUTH_SYS)
                .u32(AUTH_NONE);
        }
        Err(st) => {
            w.u32(st);
        }
    }
}
