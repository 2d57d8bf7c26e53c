//! The object layer: object sets of numbered objects, each a copy-on-write tree of
//! records, written out atomically per transaction group; block reads through the
//! adaptive replacement cache.

pub mod cache;
pub mod dnode;
pub mod l2arc;
pub mod objset;
pub mod payload;
pub mod readahead;
pub mod zil;

pub use cache::{BlockCache, BlockKey, CachePolicy};
pub use objset::{
    changed_objects, traverse, Accounting, ChangedObjects, ObjError, ObjectInfo, ObjectSet,
    ObjsetProps, ReadFrom, ReplayReport, Result,
};
pub use payload::Payload;
