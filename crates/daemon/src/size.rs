//! Human sizes live in `cachalot-api-types` (requests carry them); re-exported.

pub use cachalot_api_types::size::*;
