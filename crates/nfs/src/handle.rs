//! NFS file handles: opaque to clients, meaningful to us.
//!
//! Layout (44 bytes, big-endian): `"CF"`, version 1, node kind, pool guid,
//! dataset id, snapshot guid (0 for the live filesystem), object id, object
//! generation.
//!
//! Invariants:
//! - A handle names an object by things that survive a daemon restart and an
//!   export/import (pool guid, the catalog's never-reused dataset id, the object
//!   id and the txg it was created in), so it stays valid as long as the object
//!   lives, and a reused object id (a later generation) never matches an old
//!   handle: the server answers NFS3ERR_STALE instead of another file's data.
//! - Anything that is not exactly this layout is NFS3ERR_BADHANDLE.

/// Size of every handle we issue.
pub const HANDLE_LEN: usize = 44;
/// Largest handle a client may send (NFS3_FHSIZE).
pub const MAX_HANDLE: usize = 64;
const MAGIC: [u8; 2] = *b"CF";
const VERSION: u8 = 1;

/// What a handle points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// An object of the filesystem (live or a snapshot's).
    Object,
    /// The virtual `.cachalot` directory in the root.
    CtlDir,
    /// The virtual `.cachalot/snapshot` directory.
    SnapDir,
}

/// A decoded file handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle {
    pub kind: NodeKind,
    pub pool_guid: u64,
    pub ds_id: u64,
    /// 0: the live filesystem; else the guid of a snapshot.
    pub snap_guid: u64,
    pub obj: u64,
    pub gen: u64,
}

impl Handle {
    pub fn encode(&self) -> [u8; HANDLE_LEN] {
        let mut b = [0u8; HANDLE_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        b[3] = match self.kind {
            NodeKind::Object => 0,
            NodeKind::CtlDir => 1,
            NodeKind::SnapDir => 2,
        };
        for (i, v) in [
            self.pool_guid,
            self.ds_id,
            self.snap_guid,
            self.obj,
            self.gen,
        ]
        .iter()
        .enumerate()
        {
            b[4 + i * 8..12 + i * 8].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// Decode a handle; `None` for anything we did not issue (BADHANDLE).
    pub fn decode(b: &[u8]) -> Option<Handle> {
        if b.len() != HANDLE_LEN || b[0..2] != MAGIC || b[2] != VERSION {
            return None;
        }
        let kind = match b[3] {
            0 => NodeKind::Object,
            1 => NodeKind::CtlDir,
            2 => NodeKind::SnapDir,
            _ => return None,
        };
        let u = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[4 + i * 8..12 + i * 8]);
            u64::from_be_bytes(a)
        };
        Some(Handle {
            kind,
            pool_guid: u(0),
            ds_id: u(1),
            snap_guid: u(2),
            obj: u(3),
            gen: u(4),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let h = Handle {
            kind: NodeKind::Object,
            pool_guid: 0x1234,
            ds_id: 7,
            snap_guid: 0,
            obj: 99,
            gen: 12,
        };
        let b = h.encode();
        assert_eq!(Handle::decode(&b), Some(h));
        assert_eq!(Handle::decode(&b[..43]), None);
        let mut bad = b;
        bad[3] = 9;
        assert_eq!(Handle::decode(&bad), None);
        bad = b;
        bad[0] = b'X';
        assert_eq!(Handle::decode(&bad), None);
    }
}
