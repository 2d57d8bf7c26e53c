//! The unix-socket client lives in `cachalot-api-types`; re-exported for the CLI.

pub use cachalot_api_types::client::*;
