//! Replication between two Cachalot appliances: the peer protocol.
//!
//! So far this crate holds the protocol's wire format ([`frame`]): a greeting
//! and length-bounded frames, decoded without trusting a byte of the peer.
//! The listener, TLS with a pinned peer key, pairing and relationships build on
//! it (see docs/architecture.md, "Replication").

pub mod frame;
