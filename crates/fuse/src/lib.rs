//! The FUSE frontend: serves a filesystem dataset (through the POSIX layer) at a
//! path of the local host with fuser, several event-loop threads on cloned
//! /dev/fuse descriptors.
//!
//! Invariants: this crate holds no filesystem logic (that is `cachalot-posix`);
//! it translates requests, sets the open flags and cache lifetimes, counts and
//! times every request in `fuse.ops`/`fuse.bytes`, and never panics on a request.

mod blockdev;
pub mod convert;
pub mod mount;
pub mod ops;
pub mod snapdir;
pub mod stats;
mod syncgroup;
mod xattrs;

pub use mount::{clear_stale, is_mount_point, mount, Mount};
pub use ops::FuseFs;
