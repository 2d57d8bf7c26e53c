//! Persistence of the allocator's state: each commit appends its allocation and
//! free records to the space map log chain, or condenses the whole allocated set
//! into a new base chain; import replays base then log into the allocator.
//!
//! Invariants: one writer (`write_chain`) produces every space map block; the
//! records of a chain include the allocations of the chain's own blocks, so base
//! plus log always describe exactly the allocated ranges of the committed txg.

use crate::allocator::SpaceState;
use crate::blkptr::{checksum, BlkPtr, BlockType, ChecksumType, Dva, MAX_DVAS};
use crate::compress::Compression;
use crate::error::{PoolError, Result};
use crate::label::Uberblock;
use crate::pool::Pool;
use crate::rangeset::RangeSet;
use crate::spacemap::{self, Record};

impl Pool {
    /// Rebuild the in-memory space state from the space map of `ub`.
    pub(crate) fn load_space(&self, ub: &Uberblock) -> Result<SpaceState> {
        let tops = self.vdevs.read();
        let mut allocated: Vec<RangeSet> = tops.iter().map(|_| RangeSet::new()).collect();
        let mut log_blocks = 0;
        let mut log_records = 0;
        let mut apply_chain =
            |head: &BlkPtr, allocated: &mut Vec<RangeSet>, count: bool| -> Result<()> {
                let mut chain = Vec::new();
                let mut bp = *head;
                while !bp.is_hole() {
                    let data = self.read_block(&bp)?;
                    let (prev, recs) =
                        spacemap::decode_block(&data).ok_or_else(|| PoolError::Corrupt {
                            vdev: bp.dvas[0].vdev,
                            offset: bp.dvas[0].offset,
                            what: "malformed space map block".into(),
                        })?;
                    chain.push(recs);
                    bp = prev;
                    if chain.len() > 1_000_000 {
                        return Err(PoolError::Import("space map chain loops".into()));
                    }
                }
                for recs in chain.into_iter().rev() {
                    if count {
                        log_blocks += 1;
                        log_records += recs.len() as u64;
                    }
                    for r in recs {
                        let set = allocated.get_mut(r.vdev as usize).ok_or_else(|| {
                            PoolError::Import(format!("space map names unknown vdev {}", r.vdev))
                        })?;
                        let ok = if r.alloc {
                            set.insert(r.offset, r.len)
                        } else {
                            set.remove(r.offset, r.len)
                        };
                        if !ok {
                            return Err(PoolError::Import(format!(
                                "space map is inconsistent at vdev {} offset {:#x}",
                                r.vdev, r.offset
                            )));
                        }
                    }
                }
                Ok(())
            };
        apply_chain(&ub.sm_base, &mut allocated, false)?;
        apply_chain(&ub.sm_head, &mut allocated, true)?;
        let mut state = SpaceState::new(tops.iter().map(|t| t.asize));
        for (vi, (v, a)) in state.vdevs.iter_mut().zip(allocated).enumerate() {
            for (off, len) in a.iter() {
                if !v.free.remove(off, len) {
                    return Err(PoolError::Import(format!(
                        "space map allocates {len} bytes at {off:#x}, outside vdev {vi}"
                    )));
                }
            }
            v.allocated = a;
        }
        state.sm_head = ub.sm_head;
        state.sm_base = ub.sm_base;
        state.log_blocks = log_blocks;
        state.log_records = log_records;
        Ok(state)
    }

    /// The one writer of space map blocks: writes the records `collect` returns as
    /// a chain linked to `prev` and returns its head. Reserving the chain's blocks
    /// allocates space, which adds records, so `collect` is called again after each
    /// reservation until every record fits in the blocks reserved.
    fn write_chain(
        &self,
        txg: u64,
        prev: BlkPtr,
        block_type: BlockType,
        collect: &mut dyn FnMut(&mut SpaceState) -> Vec<Record>,
    ) -> Result<BlkPtr> {
        let sector = self.sector_size();
        let mut blocks: Vec<(usize, [Dva; MAX_DVAS])> = Vec::new();
        let records = loop {
            let records = collect(&mut self.space.lock());
            let room: usize = blocks.iter().map(|(sz, _)| records_in(*sz)).sum();
            if !blocks.is_empty() && records.len() <= room {
                break records;
            }
            for sz in chain_sizes(records.len().saturating_sub(room), sector) {
                blocks.push((sz, self.allocate(sz as u64, 2)?));
            }
        };
        let mut head = prev;
        let mut rest: &[Record] = &records;
        let tops = self.vdevs.read();
        for (sz, dvas) in blocks {
            let (recs, more) = rest.split_at(rest.len().min(records_in(sz)));
            rest = more;
            let data = spacemap::encode_block(txg, &head, recs, sz);
            for d in dvas.iter().filter(|d| !d.is_empty()) {
                tops[d.vdev as usize].write(&data, d.offset)?;
            }
            head = BlkPtr {
                dvas,
                lsize: sz as u32,
                psize: sz as u32,
                compression: Compression::Off,
                checksum_type: ChecksumType::Blake3,
                block_type,
                level: 0,
                birth_txg: txg,
                fill: 1,
                checksum: checksum(&data),
            };
        }
        // A record left out would make the next import's free space wrong.
        assert!(rest.is_empty(), "space map records left out of their chain");
        Ok(head)
    }

    /// Blocks of a space map chain (to free them when condensing).
    pub(crate) fn chain_blocks(&self, head: &BlkPtr) -> Result<Vec<BlkPtr>> {
        let mut out = Vec::new();
        let mut bp = *head;
        while !bp.is_hole() {
            let data = self.read_block(&bp)?;
            let (prev, _) = spacemap::decode_block(&data).ok_or(PoolError::Corrupt {
                vdev: bp.dvas[0].vdev,
                offset: bp.dvas[0].offset,
                what: "malformed space map block".into(),
            })?;
            out.push(bp);
            bp = prev;
        }
        Ok(out)
    }

    /// Persist the space map for `txg`: append a log segment, or condense.
    /// Returns the new log head and base, and the frees the segment recorded (a
    /// condense leaves the frees pending in `txg_records`).
    pub(crate) fn sync_spacemap(&self, txg: u64) -> Result<(BlkPtr, BlkPtr, Vec<Record>)> {
        let (head, base, log_blocks, log_records, live) = {
            let s = self.space.lock();
            let live: usize = s.vdevs.iter().map(|v| v.allocated.len()).sum();
            (s.sm_head, s.sm_base, s.log_blocks, s.log_records, live)
        };
        let condense = log_blocks >= 64 || log_records > 2 * live as u64 + 4096;
        if !condense {
            // The segment: every record of this txg, then those of its own blocks
            // (and of intent-log blocks allocated meanwhile in open context).
            let mut segment = Vec::new();
            let new_head = self.write_chain(txg, head, BlockType::SpaceMapLog, &mut |s| {
                segment.append(&mut s.txg_records);
                segment.clone()
            })?;
            self.space.lock().log_blocks += 1;
            let frees = segment.into_iter().filter(|r| !r.alloc).collect();
            return Ok((new_head, base, frees));
        }
        // Condense: free the old chains, then write every allocated range as a new base.
        for bp in self
            .chain_blocks(&head)?
            .into_iter()
            .chain(self.chain_blocks(&base)?)
        {
            self.free_block(&bp);
        }
        let new_base = self.write_chain(txg, BlkPtr::HOLE, BlockType::SpaceMapBase, &mut |s| {
            // The dump covers the allocations; frees stay for the defer queue.
            s.txg_records.retain(|r| !r.alloc);
            s.vdevs
                .iter()
                .enumerate()
                .flat_map(|(vi, v)| {
                    v.allocated.iter().map(move |(o, l)| Record {
                        alloc: true,
                        vdev: vi as u32,
                        offset: o,
                        len: l,
                    })
                })
                .collect()
        })?;
        let mut s = self.space.lock();
        s.log_blocks = 0;
        s.log_records = 0;
        Ok((BlkPtr::HOLE, new_base, Vec::new()))
    }

    /// Blocks of the committed space map (base and log chains), for scrub.
    pub fn spacemap_blocks(&self) -> Result<Vec<BlkPtr>> {
        let ub = self.uberblock();
        let mut v = self.chain_blocks(&ub.sm_head)?;
        v.extend(self.chain_blocks(&ub.sm_base)?);
        Ok(v)
    }
}

/// Records a space map block of `size` bytes holds.
fn records_in(size: usize) -> usize {
    (size - spacemap::HEADER_SIZE) / spacemap::RECORD_SIZE
}

/// Sizes of the blocks that hold `n` records plus the allocation records of the
/// blocks themselves (up to two each: two copies): full blocks, then one sized to
/// what is left.
fn chain_sizes(n: usize, sector: usize) -> Vec<usize> {
    let mut nblocks = 1usize;
    while n + 2 * nblocks > nblocks * spacemap::PER_BLOCK {
        nblocks += 1;
    }
    let mut sizes = vec![spacemap::MAX_BLOCK; nblocks];
    sizes[nblocks - 1] = spacemap::block_size(
        n + 2 * nblocks - (nblocks - 1) * spacemap::PER_BLOCK,
        sector,
    );
    sizes
}

impl Pool {
    /// Check that the committed space map (base, then log) read back from disk
    /// describes exactly the allocator's allocated ranges, less the allocations
    /// recorded since (intent-log blocks allocated in open context) and plus the
    /// frees recorded since. Reads every space map block: debug builds and tests.
    pub fn verify_spacemap(&self) -> std::result::Result<(), String> {
        let (mut expect, ub) = {
            let s = self.space.lock();
            let mut sets: Vec<RangeSet> = s.vdevs.iter().map(|v| v.allocated.clone()).collect();
            for r in &s.txg_records {
                let Some(set) = sets.get_mut(r.vdev as usize) else {
                    return Err(format!("a pending record names vdev {}", r.vdev));
                };
                let ok = if r.alloc {
                    set.remove(r.offset, r.len)
                } else {
                    set.insert(r.offset, r.len)
                };
                if !ok {
                    return Err(format!(
                        "vdev {}: pending record {r:?} disagrees with the allocator",
                        r.vdev
                    ));
                }
            }
            (sets, *self.last_ub.lock())
        };
        let disk = self.load_space(&ub).map_err(|e| e.to_string())?;
        for (vi, (want, got)) in expect.iter_mut().zip(&disk.vdevs).enumerate() {
            if *want != got.allocated {
                let only_mem = want.iter().find(|(o, l)| !got.allocated.contains(*o, *l));
                let only_disk = got.allocated.iter().find(|(o, l)| !want.contains(*o, *l));
                return Err(format!(
                    "vdev {vi}: the space map of txg {} differs from the allocator \
                     (allocated {} vs {} bytes; first only in memory {only_mem:x?}, \
                     first only on disk {only_disk:x?})",
                    ub.txg,
                    want.total(),
                    got.allocated.total()
                ));
            }
        }
        Ok(())
    }
}
