//! What the server serves: a block device. `Zvol` is the real one; `MemDevice`
//! (a vector in memory) drives the fuzz target, where a pool would be too slow.
//!
//! Invariants: a device checks every range itself (`OutOfRange`) as well; the
//! server checks first so that nothing is allocated for a bad request.

use cachalot_zvol::{Extent, ExtentKind, Payload, ReadFrom, Result, Zvol, ZvolError};
use parking_lot::Mutex;
use std::sync::Arc;

pub trait Device: Send + Sync {
    fn name(&self) -> String;
    fn size(&self) -> u64;
    fn block_size(&self) -> u32;
    fn is_readonly(&self) -> bool;
    fn write_cache(&self) -> bool;
    /// The bytes, whole blocks shared from the cache (a reply is sent from
    /// them). None when `from` is `Memory` and a block is not in memory.
    fn read(&self, off: u64, len: usize, from: ReadFrom) -> Result<Option<Payload<'static>>>;
    /// Owned block-sized pieces (`Payload::read_from` with `block_size`) are
    /// stored without a copy by a `Zvol`.
    fn write(&self, off: u64, data: Payload<'_>, fua: bool) -> Result<()>;
    fn flush(&self) -> Result<()>;
    fn discard(&self, off: u64, len: u64, fua: bool) -> Result<()>;
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<()>;
    fn extents(&self, off: u64, len: u64) -> Result<Vec<Extent>>;
}

impl Device for Zvol {
    fn name(&self) -> String {
        Zvol::name(self)
    }
    fn size(&self) -> u64 {
        Zvol::size(self)
    }
    fn block_size(&self) -> u32 {
        Zvol::block_size(self)
    }
    fn is_readonly(&self) -> bool {
        Zvol::is_readonly(self)
    }
    fn write_cache(&self) -> bool {
        Zvol::write_cache(self)
    }
    fn read(&self, off: u64, len: usize, from: ReadFrom) -> Result<Option<Payload<'static>>> {
        Zvol::read_payload(self, off, len, from)
    }
    fn write(&self, off: u64, data: Payload<'_>, fua: bool) -> Result<()> {
        Zvol::write(self, off, data, fua)
    }
    fn flush(&self) -> Result<()> {
        Zvol::flush(self)
    }
    fn discard(&self, off: u64, len: u64, fua: bool) -> Result<()> {
        Zvol::discard(self, off, len, fua)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<()> {
        Zvol::write_zeroes(self, off, len, fua)
    }
    fn extents(&self, off: u64, len: u64) -> Result<Vec<Extent>> {
        Zvol::extents(self, off, len)
    }
}

/// A small in-memory device with 4 KiB blocks (fuzzing and decoder tests).
pub struct MemDevice {
    data: Mutex<Vec<u8>>,
    /// Per block: holds data (true) or is a hole.
    alloc: Mutex<Vec<bool>>,
    readonly: bool,
}

const MEM_BS: u64 = 4096;

impl MemDevice {
    pub fn new(size: u64, readonly: bool) -> MemDevice {
        let size = size.next_multiple_of(MEM_BS);
        MemDevice {
            data: Mutex::new(vec![0; size as usize]),
            alloc: Mutex::new(vec![false; (size / MEM_BS) as usize]),
            readonly,
        }
    }
    fn check(&self, off: u64, len: u64) -> Result<(usize, usize)> {
        let size = self.data.lock().len() as u64;
        match off.checked_add(len) {
            Some(end) if end <= size => Ok((off as usize, end as usize)),
            _ => Err(ZvolError::OutOfRange { off, len, size }),
        }
    }
    fn check_rw(&self) -> Result<()> {
        if self.readonly {
            return Err(ZvolError::ReadOnly("read-only".into()));
        }
        Ok(())
    }
}

impl Device for MemDevice {
    fn name(&self) -> String {
        "mem".into()
    }
    fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }
    fn block_size(&self) -> u32 {
        MEM_BS as u32
    }
    fn is_readonly(&self) -> bool {
        self.readonly
    }
    fn write_cache(&self) -> bool {
        true
    }
    fn read(&self, off: u64, len: usize, _from: ReadFrom) -> Result<Option<Payload<'static>>> {
        let (a, z) = self.check(off, len as u64)?;
        let bytes: Arc<[u8]> = self.data.lock()[a..z].into();
        Ok(Some(vec![bytes].into()))
    }
    fn write(&self, off: u64, data: Payload<'_>, _fua: bool) -> Result<()> {
        let (a, z) = self.check(off, data.len() as u64)?;
        self.check_rw()?;
        data.copy_to(0, &mut self.data.lock()[a..z]);
        if z > a {
            let mut al = self.alloc.lock();
            for b in a / MEM_BS as usize..=(z - 1) / MEM_BS as usize {
                al[b] = true;
            }
        }
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn discard(&self, off: u64, len: u64, _fua: bool) -> Result<()> {
        let (a, z) = self.check(off, len)?;
        self.check_rw()?;
        self.data.lock()[a..z].fill(0);
        let mut al = self.alloc.lock();
        for b in a.div_ceil(MEM_BS as usize)..z / MEM_BS as usize {
            al[b] = false;
        }
        Ok(())
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<()> {
        self.discard(off, len, fua)
    }
    fn extents(&self, off: u64, len: u64) -> Result<Vec<Extent>> {
        let (a, z) = self.check(off, len)?;
        let al = self.alloc.lock();
        let mut out: Vec<Extent> = Vec::new();
        let mut pos = a as u64;
        while pos < z as u64 {
            let b = pos / MEM_BS;
            let end = ((b + 1) * MEM_BS).min(z as u64);
            let kind = if al[b as usize] {
                ExtentKind::Data
            } else {
                ExtentKind::Hole
            };
            match out.last_mut() {
                Some(l) if l.kind == kind => l.len += end - pos,
                _ => out.push(Extent {
                    off: pos,
                    len: end - pos,
                    kind,
                }),
            }
            pos = end;
        }
        Ok(out)
    }
}
