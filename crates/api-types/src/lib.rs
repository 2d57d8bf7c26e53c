//! Cachalot's API vocabulary, below the daemon: the wire envelope ([`wire`]), one
//! typed struct per daemon operation ([`requests`]) and per MySQL operation
//! ([`mysql`]), the unix-socket [`client`] and human [`size`]s. The daemon, the CLI
//! and the mysql crate all use these, so each request has one definition and the
//! mysql crate needs no engine code.
//!
//! Invariant: nothing here depends on the engine crates (pool, datasets, daemon).

pub mod client;
pub mod mysql;
pub mod requests;
pub mod size;
pub mod wire;

pub use wire::{Request, Response};
