//! The cache device (L2ARC) of layouts that have one: the ARC is small, so
//! evicted blocks go to it (fed at each step, `BlockCache::feed_l2_now`) and
//! reads come back through it; corruption written straight onto it must be
//! read around (a block failing its checksum comes from the pool), never
//! returned.

use crate::{Sim, R};
use cachalot_pool::label::DATA_START;
use cachalot_pool::{BlockDevice, SimDevice};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

impl Sim {
    /// `devs` and the cache device, for an import.
    pub(crate) fn with_cache(&self, devs: &[SimDevice]) -> Vec<Arc<dyn BlockDevice>> {
        devs.iter()
            .chain(self.cache_dev.as_ref())
            .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
            .collect()
    }

    /// Overwrite bytes of the cache device's ring.
    pub(crate) fn corrupt_cache(&mut self) -> R<()> {
        let Some(c) = &self.cache_dev else {
            return Ok(());
        };
        let span = c.size() - 2 * DATA_START - (64 << 10);
        let off = DATA_START + self.rng.below(span) / 512 * 512;
        let len = 512 * (1 + self.rng.below(128)) as usize;
        let noise: Vec<u8> = (0..len).map(|_| self.rng.next_u64() as u8).collect();
        c.corrupt(off, &noise);
        self.stats.cache_corruptions += 1;
        Ok(())
    }

    /// Overwrite the whole ring: no block may come from the cache device
    /// (every entry fails its checksum and is dropped), so reads reach the
    /// pool's devices.
    pub(crate) fn spoil_cache(&mut self) {
        if let Some(c) = &self.cache_dev {
            let ring = vec![0xa5; (c.size() - 2 * DATA_START) as usize];
            c.corrupt(DATA_START, &ring);
            self.stats.cache_corruptions += 1;
        }
    }

    /// Count what the store's cache devices did before it is replaced (an
    /// import starts the counters again).
    pub(crate) fn retire_store(&mut self) {
        for c in self.store.pool().cache_devices() {
            self.stats.l2_hits += c.counters.hits.load(Relaxed);
            self.stats.l2_cksum_errors += c.counters.cksum.load(Relaxed);
        }
    }
}
