//! The NFSv4 pseudo file system (RFC 8881 section 7): a read-only tree of
//! directories from PUTROOTFH down to every share the client may see, so the
//! Linux client mounts `server:/tank/db` by walking `/`, `tank`, `db`.
//!
//! Invariants:
//! - The tree is derived, per request, from the shares (`sharenfs`) and the
//!   client's address: a pseudo directory exists exactly when it is a proper
//!   prefix of the name of a dataset shared to this client, so a client never
//!   learns the names of datasets it may not mount. The share list comes from
//!   a cache keyed by each pool's catalog generation, so a share change shows
//!   at the next request.
//! - A pseudo handle is `"CP"`, version 1, and a hash of the path; it resolves
//!   by finding the path in the tree, else STALE. A real handle (`"CF"`) is the
//!   NFSv3 handle, resolved by the same code with the same checks.
//! - LOOKUP from a pseudo directory into a shared dataset returns the dataset's
//!   root (a real handle); LOOKUPP from that root returns the pseudo parent.

use super::consts::*;
use crate::handle::Handle;
use crate::nfs3::{Ctx, Node};
use cachalot_datasets::share::Access;
use std::hash::{Hash, Hasher};

const PSEUDO_MAGIC: [u8; 2] = *b"CP";
const PSEUDO_LEN: usize = 12;

/// The current (or saved) file handle of a COMPOUND.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fh {
    /// A pseudo directory: "" is the root, else a dataset path prefix.
    Pseudo(String),
    Real(Handle),
}

/// A resolved file handle.
pub enum Resolved {
    Pseudo(String),
    Real(Box<Node>),
}

/// The fileid (and hash) of pseudo path `p`; never 0.
pub fn path_id(p: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    p.hash(&mut h);
    h.finish() | 1 << 63
}

impl Fh {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Fh::Real(h) => h.encode().to_vec(),
            Fh::Pseudo(p) => {
                let mut b = PSEUDO_MAGIC.to_vec();
                b.extend_from_slice(&[1, 0]);
                b.extend_from_slice(&path_id(p).to_be_bytes());
                debug_assert_eq!(b.len(), PSEUDO_LEN);
                b
            }
        }
    }

    /// Decode a handle from PUTFH and resolve it (as [`Fh::resolve`]), each
    /// once: a pseudo handle is found in the tree, a real one resolved from
    /// its decoded fields.
    pub fn decode_resolve(ctx: &Ctx<'_>, b: &[u8]) -> Result<(Fh, Resolved), u32> {
        if b.len() == PSEUDO_LEN && b[0..2] == PSEUDO_MAGIC && b[2] == 1 {
            let tree = visible(ctx);
            let want = &b[4..];
            return prefixes(&tree)
                .into_iter()
                .chain(std::iter::once(String::new()))
                .find(|p| path_id(p).to_be_bytes() == want)
                .map(|p| (Fh::Pseudo(p.clone()), Resolved::Pseudo(p)))
                .ok_or(NFS4ERR_STALE);
        }
        let h = Handle::decode(b).ok_or(NFS4ERR_BADHANDLE)?;
        let node = ctx.resolve_handle(h)?;
        Ok((Fh::Real(h), Resolved::Real(Box::new(node))))
    }

    /// Resolve with the caller's identity and the share's checks.
    pub fn resolve(&self, ctx: &Ctx<'_>) -> Result<Resolved, u32> {
        match self {
            Fh::Pseudo(p) => {
                if p.is_empty() || prefixes(&visible(ctx)).contains(p) {
                    Ok(Resolved::Pseudo(p.clone()))
                } else {
                    Err(NFS4ERR_STALE)
                }
            }
            Fh::Real(h) => Ok(Resolved::Real(Box::new(ctx.resolve_handle(*h)?))),
        }
    }
}

/// Names of the datasets shared to this client, from the export table's
/// cached share list ([`crate::exports::Exports::shared`]: read again only
/// after a catalog change), not from every dataset's properties per request.
pub fn visible(ctx: &Ctx<'_>) -> Vec<String> {
    ctx.exports
        .shared()
        .list
        .iter()
        .filter(|(_, s)| s.access(ctx.client) != Access::Denied)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Every pseudo directory of `shares`: the proper prefixes of their names
/// (not the root, which always exists).
fn prefixes(shares: &[String]) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for s in shares {
        let mut at = 0;
        while let Some(i) = s[at..].find('/') {
            let p = &s[..at + i];
            if !shares.iter().any(|x| x == p) && !out.iter().any(|x| x == p) {
                out.push(p.to_string());
            }
            at += i + 1;
        }
    }
    out
}

/// What `name` in pseudo directory `dir` is.
pub enum Child {
    Pseudo(String),
    /// The root of a shared dataset.
    Share(String),
}

pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// The parent of a pseudo path or share name ("" for a pool).
pub fn parent(p: &str) -> String {
    p.rsplit_once('/')
        .map_or(String::new(), |(a, _)| a.to_string())
}

/// The entries of pseudo directory `dir`, sorted.
pub fn children(ctx: &Ctx<'_>, dir: &str) -> Vec<(String, Child)> {
    let shares = visible(ctx);
    let dirs = prefixes(&shares);
    let mut out: Vec<(String, Child)> = vec![];
    for p in shares.iter().chain(dirs.iter()) {
        if parent(p) != dir {
            continue;
        }
        let name = p.rsplit('/').next().unwrap_or(p).to_string();
        if out.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let child = if shares.contains(p) {
            Child::Share(p.clone())
        } else {
            Child::Pseudo(p.clone())
        };
        out.push((name, child));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// LOOKUP `name` in pseudo directory `dir`.
pub fn lookup(ctx: &Ctx<'_>, dir: &str, name: &str) -> Result<Fh, u32> {
    let want = join(dir, name);
    let found = children(ctx, dir)
        .into_iter()
        .find(|(n, _)| n == name)
        .ok_or(NFS4ERR_NOENT)?;
    match found.1 {
        Child::Pseudo(p) => Ok(Fh::Pseudo(p)),
        Child::Share(s) => {
            debug_assert_eq!(s, want);
            share_root(ctx, &s)
        }
    }
}

/// The root handle of shared dataset `name`.
pub fn share_root(ctx: &Ctx<'_>, name: &str) -> Result<Fh, u32> {
    let e = ctx.exports.by_path(name).map_err(|_| NFS4ERR_NOENT)?;
    Ctx::root_handle(&e).map(Fh::Real).map_err(|_| NFS4ERR_IO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_of_shares() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut p = prefixes(&s(&["tank/a/b", "tank/c", "pool2"]));
        p.sort();
        assert_eq!(p, s(&["tank", "tank/a"]));
        assert_eq!(prefixes(&s(&["tank", "tank/x/y"])), s(&["tank/x"]));
        assert_eq!(parent("tank/a/b"), "tank/a");
        assert_eq!(parent("tank"), "");
        assert_ne!(path_id(""), path_id("tank"));
    }
}
