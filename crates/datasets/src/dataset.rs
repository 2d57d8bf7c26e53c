//! A dataset handle: the internal data path (objects of one dataset) with space
//! checks and write throttling in front of the object layer.
//!
//! Invariants: a write is accepted only if the pool and every quota above the
//! dataset can hold it (plus what is already dirty); truncates and deletes are always
//! accepted because they free space. A destroyed dataset refuses every operation.

use crate::catalog::DatasetKind;
use crate::error::{Result, StoreError};
use crate::store::Store;
use cachalot_objects::{ObjectInfo, ObjectSet};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Object type of plain objects created through the data path.
pub const OTYPE_PLAIN: u8 = 2;
/// Object type of a volume's data object.
pub const OTYPE_VOLUME: u8 = 3;

pub struct Dataset {
    pub(crate) id: u64,
    name: RwLock<String>,
    kind: DatasetKind,
    pub(crate) objset: ObjectSet,
    store: Weak<Store>,
    destroyed: AtomicBool,
    users: AtomicU64,
    ops: cachalot_analytics::Stat,
}

impl Dataset {
    pub(crate) fn new(
        id: u64,
        name: String,
        kind: DatasetKind,
        objset: ObjectSet,
        store: Weak<Store>,
    ) -> Self {
        Dataset {
            id,
            name: RwLock::new(name),
            kind,
            objset,
            store,
            destroyed: AtomicBool::new(false),
            users: AtomicU64::new(0),
            ops: cachalot_analytics::global().stat("objects.ops", &["dataset", "op"]),
        }
    }

    pub fn name(&self) -> String {
        self.name.read().clone()
    }
    pub fn kind(&self) -> DatasetKind {
        self.kind
    }
    pub fn objset(&self) -> &ObjectSet {
        &self.objset
    }

    /// Frontends (mounts, exports) hold the dataset busy so it cannot be destroyed.
    pub fn hold(&self) {
        self.users.fetch_add(1, Ordering::AcqRel);
    }
    pub fn release(&self) {
        self.users.fetch_sub(1, Ordering::AcqRel);
    }
    pub(crate) fn busy(&self) -> bool {
        self.users.load(Ordering::Acquire) > 0
    }
    pub(crate) fn mark_destroyed(&self) {
        self.destroyed.store(true, Ordering::Release);
    }

    fn store(&self) -> Result<Arc<Store>> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(StoreError::NotFound(self.name()));
        }
        let s = self
            .store
            .upgrade()
            .ok_or_else(|| StoreError::Exported(self.name()))?;
        s.check_live()?;
        Ok(s)
    }

    pub fn create_object(&self) -> Result<u64> {
        let s = self.store()?;
        s.check_space(self.id, 512)?;
        Ok(self.objset.create_object(OTYPE_PLAIN)?)
    }

    pub fn write(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
        let s = self.store()?;
        if let Err(e) = s.check_space(self.id, data.len() as u64) {
            // The estimate counts dirty data pessimistically: commit it and look again
            // before telling the writer the space is gone.
            if !matches!(e, StoreError::NoSpace(_) | StoreError::Quota(_))
                || s.dirty.load(Ordering::Relaxed) == 0
            {
                return Err(e);
            }
            s.sync()?;
            s.check_space(self.id, data.len() as u64)?;
        }
        s.throttle()?;
        let t0 = std::time::Instant::now();
        self.objset.write(obj, off, data)?;
        s.dirty.fetch_add(data.len() as u64, Ordering::Relaxed);
        self.ops
            .record(&[&self.name(), "write"], data.len() as u64, t0.elapsed());
        Ok(())
    }

    pub fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        self.store()?;
        let t0 = std::time::Instant::now();
        let data = self.objset.read(obj, off, len)?;
        self.ops
            .record(&[&self.name(), "read"], data.len() as u64, t0.elapsed());
        Ok(data)
    }

    pub fn truncate(&self, obj: u64, size: u64) -> Result<()> {
        let s = self.store()?;
        let cur = self.objset.info(obj)?.size;
        if size > cur {
            // Growing costs nothing until written (sparse), but refuse absurd sizes.
            if size > 1 << 60 {
                return Err(StoreError::Invalid(
                    "size beyond the maximum object size".into(),
                ));
            }
        }
        self.objset.truncate(obj, size)?;
        s.dirty.fetch_add(4096, Ordering::Relaxed);
        Ok(())
    }

    pub fn delete_object(&self, obj: u64) -> Result<()> {
        self.store()?;
        Ok(self.objset.delete_object(obj)?)
    }

    pub fn object_size(&self, obj: u64) -> Result<u64> {
        self.store()?;
        Ok(self.objset.info(obj)?.size)
    }

    pub fn object_info(&self, obj: u64) -> Result<ObjectInfo> {
        self.store()?;
        Ok(self.objset.info(obj)?)
    }

    /// Replace an object's bonus bytes (up to 320: attributes of the layer above).
    pub fn set_bonus(&self, obj: u64, bonus: &[u8]) -> Result<()> {
        self.store()?;
        Ok(self.objset.set_bonus(obj, bonus)?)
    }

    /// Start a transaction for a multi-object change (a rename touches two
    /// directories and an inode): space is checked and the writer throttled first,
    /// then every change made through the `Tx` lands in the same txg.
    pub fn begin(&self, bytes: u64) -> Result<Tx<'_>> {
        let s = self.store()?;
        if bytes > 0 {
            if let Err(e) = s.check_space(self.id, bytes) {
                if !matches!(e, StoreError::NoSpace(_) | StoreError::Quota(_))
                    || s.dirty.load(Ordering::Relaxed) == 0
                {
                    return Err(e);
                }
                s.sync()?;
                s.check_space(self.id, bytes)?;
            }
        }
        s.throttle()?;
        Ok(Tx {
            ds: self,
            store: s,
            _txg: self.objset.hold_txg(),
        })
    }

    pub fn list_objects(&self) -> Result<Vec<u64>> {
        self.store()?;
        Ok(self.objset.list_objects()?)
    }

    /// Make everything written so far durable. Without an intent log this commits
    /// a transaction group.
    pub fn fsync(&self) -> Result<()> {
        let s = self.store()?;
        s.sync()?;
        Ok(())
    }
}

/// A group of changes to one dataset that commit together (see `Dataset::begin`).
pub struct Tx<'a> {
    ds: &'a Dataset,
    store: Arc<Store>,
    _txg: parking_lot::RwLockReadGuard<'a, ()>,
}

impl Tx<'_> {
    pub fn create_object(&self) -> Result<u64> {
        Ok(self.ds.objset.create_object(OTYPE_PLAIN)?)
    }
    pub fn delete_object(&self, obj: u64) -> Result<()> {
        Ok(self.ds.objset.delete_object(obj)?)
    }
    pub fn write(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
        self.ds.objset.write(obj, off, data)?;
        self.store
            .dirty
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    pub fn truncate(&self, obj: u64, size: u64) -> Result<()> {
        if size > 1 << 60 {
            return Err(StoreError::Invalid(
                "size beyond the maximum object size".into(),
            ));
        }
        self.ds.objset.truncate(obj, size)?;
        self.store.dirty.fetch_add(4096, Ordering::Relaxed);
        Ok(())
    }
    pub fn set_bonus(&self, obj: u64, bonus: &[u8]) -> Result<()> {
        Ok(self.ds.objset.set_bonus(obj, bonus)?)
    }
    pub fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        Ok(self.ds.objset.read(obj, off, len)?)
    }
    pub fn info(&self, obj: u64) -> Result<ObjectInfo> {
        Ok(self.ds.objset.info(obj)?)
    }
}
