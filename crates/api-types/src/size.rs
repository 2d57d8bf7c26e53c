//! Human sizes: the one parser and printer, in `cachalot-size` (below every layer,
//! so the engine, the bench lab and the wire types agree); re-exported here at the
//! path the CLI and daemon already use.

pub use cachalot_size::{format_size, parse_size};
