//! Read holds: a reader never sees a reused block.
//!
//! Readers walk a tree without the object set's lock: they copy the block
//! pointers they need, then read. Commits run meanwhile, and the blocks a commit
//! frees become allocatable after the next one; a slow reader spanning those
//! commits could then read, or worse repair, an address that now holds another
//! block. So a reader holds the last committed txg at its start, H: frees of txgs
//! after H (the only ones that can name blocks the reader may still point at)
//! stay deferred until every reader holding H or older has finished. And a
//! self-healing repair writes only where the space is still allocated: a block
//! freed since the reader started is deferred, not allocated, so a repair can
//! never land on space that no longer belongs to the pointer it repairs.
//!
//! Invariants: frees of txg T become allocatable only when T+1 has committed and
//! no read hold of a txg below T is alive; a hold costs one short lock at its
//! start and one at its end.

use crate::blkptr::Dva;
use crate::pool::Pool;
use std::sync::Arc;

/// Alive while a reader may use block pointers it copied (see the module).
pub struct ReadHold<'a> {
    pool: &'a Pool,
    txg: u64,
}

impl Drop for ReadHold<'_> {
    fn drop(&mut self) {
        self.pool.release_read(self.txg);
    }
}

/// A read hold that owns its pool and can be cloned, for work that outlives the
/// call that copied the pointers (read-ahead in the background). A clone holds
/// the same txg as the original, so it protects exactly the pointers copied
/// while the original was alive.
pub struct SharedReadHold {
    pool: Arc<Pool>,
    txg: u64,
}

impl Clone for SharedReadHold {
    fn clone(&self) -> Self {
        // The original is alive, so the txg's count is at least 1 here.
        *self.pool.readers.lock().entry(self.txg).or_insert(0) += 1;
        SharedReadHold {
            pool: self.pool.clone(),
            txg: self.txg,
        }
    }
}

impl Drop for SharedReadHold {
    fn drop(&mut self) {
        self.pool.release_read(self.txg);
    }
}

impl Pool {
    /// Hold the last committed txg for the life of a read.
    pub fn hold_reads(&self) -> ReadHold<'_> {
        let txg = self.last_ub.lock().txg;
        *self.readers.lock().entry(txg).or_insert(0) += 1;
        ReadHold { pool: self, txg }
    }

    /// Like [`Pool::hold_reads`], but owned and clonable (see [`SharedReadHold`]).
    pub fn hold_reads_shared(self: &Arc<Self>) -> SharedReadHold {
        let txg = self.last_ub.lock().txg;
        *self.readers.lock().entry(txg).or_insert(0) += 1;
        SharedReadHold {
            pool: self.clone(),
            txg,
        }
    }

    fn release_read(&self, txg: u64) {
        let mut r = self.readers.lock();
        if let Some(n) = r.get_mut(&txg) {
            *n -= 1;
            if *n == 0 {
                r.remove(&txg);
            }
        }
    }

    /// Frees of txgs up to this one may be reused as far as readers go: the
    /// start of the oldest reader, or every txg when none reads.
    pub(crate) fn reusable_through(&self) -> u64 {
        self.readers
            .lock()
            .keys()
            .next()
            .copied()
            .unwrap_or(u64::MAX)
    }

    /// True if the space of copy `d` is allocated: a repair may write there.
    pub(crate) fn still_allocated(&self, d: &Dva) -> bool {
        self.space
            .lock()
            .vdevs
            .get(d.vdev as usize)
            .is_some_and(|v| v.allocated.contains(d.offset, d.asize as u64))
    }
}

#[cfg(test)]
mod tests {
    use crate::device::{BlockDevice, SimDevice};
    use crate::pool::{Pool, WriteOpts};
    use crate::PoolError;
    use std::sync::Arc;

    const OPTS: WriteOpts = WriteOpts::RAW_DATA;

    /// A reader copies a pointer, the block is freed, two commits pass and the
    /// pool fills up. With the hold the block is still there; without it (the
    /// old behaviour, `hold = false`) its space is reused and the read fails.
    fn slow_reader(hold: bool) -> crate::Result<Vec<u8>> {
        let dev: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 40 << 20));
        let pool = Pool::create_on_devices("t", vec![dev], false, 12).unwrap();
        let a = pool.write_block(1, &[7u8; 65536], OPTS).unwrap();
        pool.commit(1, a).unwrap();
        let h = hold.then(|| pool.hold_reads());
        // The reader has copied `a`. Meanwhile `a` is freed in txg 2...
        let b = pool.write_block(2, &[8u8; 4096], OPTS).unwrap();
        pool.free_block(&a);
        pool.commit(2, b).unwrap();
        pool.commit(3, b).unwrap();
        // ... and later writes fill the pool (no commit: the last ones would
        // find no room for the space map).
        loop {
            match pool.write_block(4, &[4u8; 65536], OPTS) {
                Ok(_) => {}
                Err(PoolError::NoSpace) => break,
                Err(e) => panic!("{e}"),
            }
        }
        let r = pool.read_block(&a);
        drop(h);
        r
    }

    #[test]
    fn a_held_read_never_sees_a_reused_block() {
        assert_eq!(slow_reader(true).unwrap(), vec![7u8; 65536]);
        assert!(slow_reader(false).is_err(), "the hazard the hold prevents");
    }

    #[test]
    fn frees_become_reusable_when_the_reader_ends() {
        let dev: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 40 << 20));
        let pool = Pool::create_on_devices("t", vec![dev], false, 12).unwrap();
        let a = pool.write_block(1, &[1u8; 8192], OPTS).unwrap();
        pool.commit(1, a).unwrap();
        let h = pool.hold_reads();
        pool.free_block(&a);
        pool.commit(2, a).unwrap();
        pool.commit(3, a).unwrap();
        assert_eq!(pool.deferred_bytes(), 8192, "held by the reader");
        drop(h);
        pool.commit(4, a).unwrap();
        assert_eq!(pool.deferred_bytes(), 0);
        pool.verify().unwrap();
    }

    /// A clone of a shared hold keeps the original's txg after the original
    /// is gone (a background read-ahead outliving the read that started it).
    #[test]
    fn a_shared_hold_clone_outlives_the_original() {
        let dev: Arc<dyn BlockDevice> = Arc::new(SimDevice::new("d0", 40 << 20));
        let pool = Arc::new(Pool::create_on_devices("t", vec![dev], false, 12).unwrap());
        let a = pool.write_block(1, &[1u8; 8192], OPTS).unwrap();
        pool.commit(1, a).unwrap();
        let h = pool.hold_reads_shared();
        let c = h.clone();
        drop(h);
        pool.free_block(&a);
        pool.commit(2, a).unwrap();
        pool.commit(3, a).unwrap();
        assert_eq!(pool.deferred_bytes(), 8192, "held by the clone");
        drop(c);
        pool.commit(4, a).unwrap();
        assert_eq!(pool.deferred_bytes(), 0);
    }
}
