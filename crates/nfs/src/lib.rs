//! An NFSv3 server (RFC 1813) with MOUNT v3 (RFC 1813 appendix I) and a small
//! portmapper (RFC 1833, versions 2 to 4), over the POSIX layer of
//! `cachalot-posix`, serving datasets shared with the `sharenfs` property.
//!
//! Map of the crate:
//! - `xdr`: bounded XDR reader and writer.
//! - `rpc`: ONC RPC record marking, call headers, credentials, replies.
//! - `handle`: file handles (pool, dataset, snapshot, object, generation).
//! - `exports`: share options and the resolution of paths and handles to `Fs`.
//! - `nfs3`: the NFSv3 procedures; `mount`: MOUNT v3; `portmap`: rpcbind.
//! - `nfs4`: NFSv4.1 COMPOUND, sessions and state (same port).
//! - `server`: TCP listeners, connections, dispatch, duplicate request cache.
//! - `stats`: `nfs.ops` and `nfs.bytes` analytics.
//! - `client`: a small synchronous client (tests, benchmarks).
//! - `fuzz`: the entry point of the decoder fuzz target.
//! - `load`: the `cachalot bench nfs` load generator.

pub mod client;
pub mod exports;
pub mod fuzz;
pub mod handle;
pub mod load;
pub mod mount;
pub mod nfs3;
pub mod nfs4;
pub mod portmap;
pub mod queue;
pub mod rpc;
pub mod server;
pub mod stats;
pub mod xdr;

pub use exports::{Exports, FsProvider};
pub use server::{NfsServer, ServerConfig};
