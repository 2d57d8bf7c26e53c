//! cachalot-iscsi: an iSCSI target (RFC 7143) serving volumes as SCSI disks.
//!
//! Map of the crate, one job per module:
//! - `crc32c`, `md5`: the digest and the CHAP hash.
//! - `pdu`: the PDU codec (bounded reads, digests, padding).
//! - `text`: text keys and operational parameter negotiation.
//! - `login`: the login phase, CHAP included.
//! - `conn`: one connection's full feature phase (commands, data, R2T, TMF, logout).
//! - `target`: the portal, shared volumes ([`target::Catalog`]), sessions, LU state.
//! - `lun`: one logical unit's shared state (reservations, the atomic-write lock).
//! - `scsi`: CDB decoding and SBC/SPC command execution, sense data, reservations.
//! - `dev`: the block device trait a LUN serves (implemented for zvols by the daemon).
//! - `stats`: `scsi.ops` analytics.

pub mod conn;
pub mod crc32c;
pub mod dev;
pub mod login;
pub mod lun;
pub mod md5;
pub mod pdu;
pub mod scsi;
pub mod stats;
pub mod target;
pub mod text;

pub use dev::{BlockDev, DevError, MemDev, Run};
pub use target::{target_name, Catalog, Chap, Export, SessionInfo, Target};
