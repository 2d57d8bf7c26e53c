//! The dataset layer: a tree of named datasets with inherited properties and exact
//! space accounting, the transaction group engine that commits them atomically, the
//! internal data path (objects of a dataset) and scrub.

pub mod catalog;
pub mod dataset;
pub mod error;
pub mod holds;
pub mod props;
pub mod resume;
pub mod scrub;
pub mod share;
pub mod snapshot;
pub mod store;
pub mod stream;
mod volume;

pub use cachalot_objects::{Payload, ReadFrom};
pub use catalog::DatasetKind;
pub use dataset::{Dataset, SyncPolicy, Tx};
pub use error::{ErrorKind, Result, StoreError};
pub use scrub::ScrubStatus;
pub use store::{
    DatasetInfo, PoolStatusInfo, PropRow, ReceiveStepHook, SnapshotInfo, SpaceInfoSer, Store,
    StoreOpts,
};
pub use stream::{ReceiveOpts, ReceiveOutcome, StreamStats};
