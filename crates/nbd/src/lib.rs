//! An NBD server (fixed newstyle, structured replies, `base:allocation` block
//! status) for Cachalot volumes. Map of the crate:
//! - `proto`: wire constants and decoders of untrusted bytes;
//! - `handshake`: option haggling up to OPT_GO / OPT_EXPORT_NAME;
//! - `transmission`: requests, their validation, execution and replies;
//! - `server`: listeners (TCP, unix), the connection table, analytics;
//! - `device`: what is served (`Zvol`, or `MemDevice` for fuzzing);
//! - `fuzz`: the entry point of the fuzz target.
//!
//! Invariants: the server answers or closes, never panics and never lets one
//! client stall another (a thread per connection, bounded memory per connection,
//! read timeouts during the handshake).

pub mod device;
pub mod fuzz;
pub mod handshake;
pub mod proto;
pub mod server;
pub mod transmission;

pub use device::{Device, MemDevice};
pub use handshake::{Exports, Negotiated};
pub use server::{ConnectionInfo, NbdServer};
