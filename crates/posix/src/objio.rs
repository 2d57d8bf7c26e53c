//! The two ways the POSIX layer touches objects: reads (through the dataset, or
//! inside a transaction) and changes (only inside a transaction, `Tx`), so code
//! that reads directories works in both and code that changes them cannot run
//! outside a transaction by mistake.
//!
//! Invariant: `ObjWrite` is implemented only for `Tx`: every multi-object change
//! of this layer lands in one transaction group.

use crate::error::Result;
use cachalot_datasets::{Dataset, Tx};
use cachalot_objects::ObjectInfo;

pub trait ObjRead {
    fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>>;
    fn info(&self, obj: u64) -> Result<ObjectInfo>;
}

pub trait ObjWrite: ObjRead {
    fn write(&self, obj: u64, off: u64, data: &[u8]) -> Result<()>;
    fn truncate(&self, obj: u64, size: u64) -> Result<()>;
    fn set_bonus(&self, obj: u64, bonus: &[u8]) -> Result<()>;
    fn create_object(&self) -> Result<u64>;
    fn delete_object(&self, obj: u64) -> Result<()>;
}

impl ObjRead for Dataset {
    fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        Ok(Dataset::read(self, obj, off, len)?)
    }
    fn info(&self, obj: u64) -> Result<ObjectInfo> {
        Ok(self.object_info(obj)?)
    }
}

impl ObjRead for Tx<'_> {
    fn read(&self, obj: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        Ok(Tx::read(self, obj, off, len)?)
    }
    fn info(&self, obj: u64) -> Result<ObjectInfo> {
        Ok(Tx::info(self, obj)?)
    }
}

impl ObjWrite for Tx<'_> {
    fn write(&self, obj: u64, off: u64, data: &[u8]) -> Result<()> {
        Ok(Tx::write(self, obj, off, data)?)
    }
    fn truncate(&self, obj: u64, size: u64) -> Result<()> {
        Ok(Tx::truncate(self, obj, size)?)
    }
    fn set_bonus(&self, obj: u64, bonus: &[u8]) -> Result<()> {
        Ok(Tx::set_bonus(self, obj, bonus)?)
    }
    fn create_object(&self) -> Result<u64> {
        Ok(Tx::create_object(self)?)
    }
    fn delete_object(&self, obj: u64) -> Result<()> {
        Ok(Tx::delete_object(self, obj)?)
    }
}
