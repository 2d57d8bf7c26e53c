//! The pool layer: leaf devices, vdevs, labels and uberblocks, block pointers with
//! checksums, per-block compression, space allocation with persistent space maps, and
//! the atomic commit of a transaction group.
//!
//! Invariants of the layer (details in each module):
//! - Nothing live is overwritten: blocks are written to free space, freed space is
//!   reused only after the commit that freed it is durable.
//! - A commit is: space map segment, flush, uberblock in every label, flush.
//! - Every block read is verified against the checksum in its parent before it is
//!   returned; bad copies are counted per device and repaired from good ones.

mod allocator;
pub mod blkptr;
mod blockio;
pub mod cache_vdev;
mod commit;
pub mod compress;
pub mod device;
mod devices;
pub mod env;
pub mod error;
pub mod executor;
pub mod fault;
mod faulted;
mod import;
pub mod label;
pub mod parity;
pub mod plant;
pub mod pool;
pub mod raidz;
pub mod rangeset;
mod readhold;
mod replace;
mod resilver;
pub mod spacemap;
mod spacemap_sync;
mod spare_remove;
mod spares;
pub mod vdev;
mod vdev_spec;

pub use blkptr::{BlkPtr, BlockType, Dva};
pub use cache_vdev::{CacheInfo, CacheVdev};
pub use commit::{read_label, verify_after_commit};
pub use compress::Compression;
pub use device::{BlockDevice, FileDevice, Power, SimDevice};
pub use env::{Env, TxgTrigger};
pub use error::{PoolError, Result};
pub use label::{PoolConfig, ScanPos, Uberblock, VdevKind};
pub use pool::{
    new_guid, parse_vdev_spec, CreateOpts, DeviceStatus, Importable, Pool, Rewind, SpaceInfo,
    VdevSpec, WriteOpts,
};
pub use readhold::{ReadHold, SharedReadHold};
pub use replace::Replacement;
pub use spares::{split_section, split_spares};
