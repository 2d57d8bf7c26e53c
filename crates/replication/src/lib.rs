//! Replication between two Cachalot appliances: the peer protocol and the
//! parts of relationships that do not touch a pool.
//!
//! - [`frame`]: the wire format (greeting, length-bounded frames; fuzzed).
//! - [`tls`]: TLS 1.3 with a self-signed key per appliance, peers pinned by
//!   certificate fingerprint.
//! - [`link`]: one conversation: requests, replies, send streams as frames.
//! - [`pair`]: the one-time token exchange that pins two appliances' keys.
//! - [`relationship`]: what a relationship stores; target and name parsing.
//! - [`retention`]: the retention grid and which snapshots it drops.
//!
//! The daemon side (listener, cycles, scheduler) is in
//! `cachalot-daemon` (`daemon/replication*.rs`); see docs/architecture.md,
//! "Replication".

pub mod frame;
pub mod link;
pub mod pair;
pub mod relationship;
pub mod retention;
pub mod tls;
