//! The management API of the daemon as resources: typed requests shared with the
//! CLI ([`requests`]), REST routes under `/api/v1/` with their OpenAPI document
//! ([`routes`]), JSON errors with stable codes ([`error`]), jobs for long operations
//! ([`jobs`]) and named API tokens ([`tokens`]).
//!
//! Invariants:
//! - The REST routes add no behaviour of their own: each maps its path, query and
//!   body onto one typed request and runs it through `Daemon::handle`, exactly as
//!   the CLI's request over the unix socket runs; so both answer alike. The MySQL
//!   routes ([`mysql_routes`]) run the CLI's own client code (cachalot-mysql) on
//!   their typed request, its daemon requests going to `Daemon::handle` directly.
//! - Reading is open on the (loopback-only) HTTP listener; every change needs a
//!   valid token (see [`tokens`]). The one exception is the first token itself,
//!   made once from the root-only setup code ([`setup_routes`], not an op).

pub mod analytics_routes;
pub mod device_routes;
pub mod error;
pub mod extract;
pub mod fuzz;
pub mod job_routes;
pub mod jobs;
pub mod mount_routes;
pub mod mysql_routes;
pub mod query;
pub mod requests;
pub mod routes;
pub mod setup_routes;
pub mod share_routes;
pub mod snapshot_routes;
pub mod tls;
pub mod tokens;

#[cfg(test)]
mod tests;

/// The API's part of the daemon's state.
pub struct ApiState {
    pub tokens: tokens::Tokens,
    pub jobs: jobs::Jobs,
}

impl ApiState {
    /// Load the named tokens of `home`; `default_token` is `HOME/token`.
    pub fn open(home: &std::path::Path, default_token: String) -> anyhow::Result<ApiState> {
        Ok(ApiState {
            tokens: tokens::Tokens::open(home, default_token)?,
            jobs: jobs::Jobs::default(),
        })
    }
}
