//! RAID-Z vdevs: variable-width copy-on-write stripes with P (raidz1) or P and Q
//! (raidz2) parity, as in ZFS.
//!
//! The vdev's address space is a run of sectors laid row by row across the
//! children: sector `k` lives on child `k % n` at row `k / n`. A block allocated
//! at sector `b` takes the consecutive sectors `b..b+tot`: the first `nparity`
//! columns (starting at child `b % n`) hold parity, the others the data, column by
//! column. Each block is its own stripe, written to free space and never updated
//! in place, so there is no write hole: a torn write only ever damages a block no
//! committed pointer names yet.
//!
//! Invariants:
//! - `alloc_size(len)` covers data, parity and the skip sectors that round a
//!   block up to a multiple of `nparity + 1` sectors (so no free fragment is too
//!   small for the smallest block); the map of a block never leaves its allocation.
//! - A read returns only bytes that pass the verifier. Columns that could not be
//!   read or that reconstruction proved wrong are rewritten with the good bytes
//!   (self-healing) and counted (READ or CKSUM).
//! - A write succeeds if at most `nparity` columns failed.

use crate::error::{PoolError, Result};
use crate::label::VdevKind;
use crate::parity::{compute_parity, reconstruct};
use crate::vdev::{Leaf, ScrubOutcome, TopVdev};
use std::sync::atomic::Ordering::Relaxed;

/// Most children in one raidz vdev: Q's coefficients g^i must stay distinct.
pub const MAX_RAIDZ_CHILDREN: usize = 64;

/// Parity columns of a vdev kind (0 for disks and mirrors).
pub fn nparity(kind: VdevKind) -> usize {
    match kind {
        VdevKind::Raidz1 => 1,
        VdevKind::Raidz2 => 2,
        _ => 0,
    }
}

/// One column of a block's stripe on one child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub child: usize,
    /// Offset in the child's allocatable space.
    pub offset: u64,
    pub size: usize,
}

/// Shape of a raidz vdev.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    pub children: usize,
    pub nparity: usize,
    pub ashift: u8,
}

impl Geometry {
    fn sector(&self) -> u64 {
        1 << self.ashift
    }

    /// (sectors per column, columns with one more sector, columns in use) of a
    /// block of `s` data sectors.
    fn shape(&self, s: u64) -> (u64, u64, u64) {
        let ndata = (self.children - self.nparity) as u64;
        let q = s / ndata;
        let r = s - q * ndata;
        let bc = if r == 0 { 0 } else { r + self.nparity as u64 };
        let acols = if q == 0 { bc } else { self.children as u64 };
        (q, bc, acols)
    }

    /// Bytes to allocate for a block of `len` data bytes (rounded to sectors).
    pub fn alloc_size(&self, len: u64) -> u64 {
        let s = len.div_ceil(self.sector());
        let (q, bc, _) = self.shape(s);
        let rows = q + u64::from(bc > 0);
        let tot = s + self.nparity as u64 * rows;
        tot.next_multiple_of(self.nparity as u64 + 1) * self.sector()
    }

    /// The most data bytes a block of `asize` allocated bytes can hold.
    pub fn data_capacity(&self, asize: u64) -> u64 {
        let a = asize / self.sector();
        let ndata = (self.children - self.nparity) as u64;
        let mut s = a * ndata / self.children as u64 + 1;
        while s > 0 && self.alloc_size(s * self.sector()) > asize {
            s -= 1;
        }
        s * self.sector()
    }

    /// The columns of the block at vdev `offset` with `len` data bytes: parity
    /// columns first, then data columns in data order.
    pub fn map(&self, offset: u64, len: u64) -> Vec<Column> {
        let sector = self.sector();
        let b = offset / sector;
        let s = len.div_ceil(sector);
        let n = self.children as u64;
        let (q, bc, acols) = self.shape(s);
        let first = b % n;
        let row = b / n;
        (0..acols)
            .map(|c| {
                let mut child = first + c;
                let mut off = row * sector;
                if child >= n {
                    child -= n;
                    off += sector;
                }
                let sectors = if c < bc { q + 1 } else { q };
                Column {
                    child: child as usize,
                    offset: off,
                    size: (sectors * sector) as usize,
                }
            })
            .collect()
    }
}

/// Per-column result of reading a stripe.
struct Stripe {
    cols: Vec<Column>,
    /// Bytes read (zeros where unreadable).
    bytes: Vec<Vec<u8>>,
    /// Columns that could not be read (missing device or I/O error).
    unreadable: Vec<usize>,
}

impl TopVdev {
    pub(crate) fn geometry(&self) -> Geometry {
        Geometry {
            children: self.leaves.len(),
            nparity: nparity(self.kind),
            ashift: self.ashift,
        }
    }

    pub(crate) fn is_raidz(&self) -> bool {
        nparity(self.kind) > 0
    }

    /// Bytes allocated for a block of `len` bytes on this vdev.
    pub fn alloc_size(&self, len: u64) -> u64 {
        let sector = 1u64 << self.ashift;
        if self.is_raidz() {
            self.geometry().alloc_size(len)
        } else {
            len.next_multiple_of(sector)
        }
    }

    /// Data bytes a log block of `asize` allocated bytes holds on this vdev.
    pub fn log_capacity(&self, asize: u64) -> u64 {
        if self.is_raidz() {
            self.geometry().data_capacity(asize)
        } else {
            asize
        }
    }

    /// Write one stripe: parity computed from `buf` (padded to whole sectors).
    pub(crate) fn raidz_write(&self, buf: &[u8], offset: u64) -> Result<()> {
        let g = self.geometry();
        let sector = 1usize << self.ashift;
        let mut data = buf.to_vec();
        data.resize(buf.len().next_multiple_of(sector), 0);
        let cols = g.map(offset, data.len() as u64);
        let mut pos = 0;
        let mut chunks: Vec<&[u8]> = Vec::new();
        for c in &cols[g.nparity..] {
            chunks.push(&data[pos..pos + c.size]);
            pos += c.size;
        }
        let parity = compute_parity(&chunks, g.nparity, cols[0].size);
        let mut failed = 0;
        let mut last_err = None;
        let all = parity.iter().map(|p| p.as_slice()).chain(chunks);
        for (c, bytes) in cols.iter().zip(all) {
            let leaf = &self.leaves[c.child];
            if let Err(e) = leaf.write_raw(bytes, c.offset) {
                if leaf.dev.is_some() && !leaf.is_faulted() {
                    leaf.io_error(true);
                }
                failed += 1;
                last_err = Some(e);
            }
        }
        if failed > g.nparity {
            return Err(last_err.unwrap_or(PoolError::NoSpace));
        }
        Ok(())
    }

    fn read_columns(&self, st: &mut Stripe, which: std::ops::Range<usize>) {
        for i in which {
            let c = st.cols[i];
            let leaf: &Leaf = &self.leaves[c.child];
            let mut b = vec![0u8; c.size];
            match leaf.read_raw(&mut b, c.offset) {
                Ok(()) => st.bytes[i] = b,
                Err(_) => {
                    if leaf.readable() {
                        leaf.io_error(false);
                    }
                    st.unreadable.push(i);
                }
            }
        }
    }

    fn assemble(st: &Stripe, nparity: usize) -> Vec<u8> {
        st.bytes[nparity..].concat()
    }

    /// Read a block of `len` data bytes, reconstructing from parity when columns
    /// are unreadable or the data fails `verify` (trying every combination of up
    /// to `nparity` bad columns, as ZFS does). Returns the data and the stripe
    /// as it should be on disk; bad columns are rewritten. With `check_parity`
    /// (scrub) the parity columns are read and checked even when data verifies.
    fn raidz_read(
        &self,
        offset: u64,
        len: usize,
        verify: &dyn Fn(&[u8]) -> bool,
        check_parity: bool,
    ) -> std::result::Result<(Vec<u8>, ScrubOutcome), usize> {
        let g = self.geometry();
        let cols = g.map(offset, len as u64);
        let mut st = Stripe {
            bytes: cols.iter().map(|c| vec![0u8; c.size]).collect(),
            cols,
            unreadable: vec![],
        };
        let ncols = st.cols.len();
        self.read_columns(&mut st, g.nparity..ncols);
        if st.unreadable.is_empty() {
            let data = Self::assemble(&st, g.nparity);
            if verify(&data) && !check_parity {
                return Ok((data, ScrubOutcome::default()));
            }
            if crate::plant::active(crate::plant::Bug::RaidzNoReconstruct) && !check_parity {
                return Err(0);
            }
        }
        self.read_columns(&mut st, 0..g.nparity);
        let unreadable = st.unreadable.clone();
        if unreadable.len() > g.nparity {
            return Err(unreadable.len());
        }
        // Candidate sets of bad columns: the unreadable ones plus 0, 1, ...
        // more, until the data verifies.
        for extra in 0..=(g.nparity - unreadable.len()) {
            for more in combinations(st.cols.len(), extra, &unreadable) {
                let lost: Vec<usize> = unreadable.iter().chain(&more).copied().collect();
                let mut fixed = st.bytes.clone();
                if !lost.is_empty() && reconstruct(&mut fixed, g.nparity, &lost).is_err() {
                    continue;
                }
                let data = fixed[g.nparity..].concat();
                if !verify(&data) {
                    continue;
                }
                // The data is good; with it, parity is known too.
                let chunks: Vec<&[u8]> = fixed[g.nparity..].iter().map(|c| c.as_slice()).collect();
                let parity = compute_parity(&chunks, g.nparity, st.cols[0].size);
                fixed[..g.nparity].clone_from_slice(&parity);
                let outcome = self.heal(&st, &fixed);
                return Ok((data, outcome));
            }
        }
        Err(0)
    }

    /// Rewrite every column whose bytes on disk differ from `good`.
    fn heal(&self, st: &Stripe, good: &[Vec<u8>]) -> ScrubOutcome {
        let mut out = ScrubOutcome::default();
        for (i, c) in st.cols.iter().enumerate() {
            let unreadable = st.unreadable.contains(&i);
            if !unreadable && st.bytes[i] == good[i] {
                continue;
            }
            let leaf = &self.leaves[c.child];
            if leaf.dev.is_some() && !leaf.readable() {
                // A replacement being resilvered: this is its column rebuilt.
                if leaf.write_raw(&good[i], c.offset).is_ok() {
                    out.resilvered += 1;
                }
                continue;
            }
            out.bad_copies += 1;
            if !unreadable {
                leaf.errors.cksum.fetch_add(1, Relaxed);
            }
            if leaf.write_raw(&good[i], c.offset).is_ok() {
                leaf.errors.repaired.fetch_add(1, Relaxed);
                out.repaired += 1;
            }
        }
        out
    }

    pub(crate) fn raidz_read_verified(
        &self,
        offset: u64,
        len: usize,
        verify: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Vec<u8>> {
        self.raidz_read(offset, len, verify, false)
            .map(|(d, _)| d)
            .map_err(|lost| match lost {
                0 => PoolError::Checksum {
                    vdev: self.id,
                    offset,
                },
                n => PoolError::Corrupt {
                    vdev: self.id,
                    offset,
                    what: format!(
                        "{n} columns unreadable, raidz{} survives {}",
                        nparity(self.kind),
                        nparity(self.kind)
                    ),
                },
            })
    }

    /// Scrub one block: data against its checksum, parity against the data.
    pub(crate) fn raidz_scrub(
        &self,
        offset: u64,
        len: usize,
        verify: &dyn Fn(&[u8]) -> bool,
    ) -> ScrubOutcome {
        match self.raidz_read(offset, len, verify, true) {
            Ok((_, o)) => o,
            Err(_) => ScrubOutcome {
                bad_copies: 1,
                unrecoverable: true,
                ..Default::default()
            },
        }
    }

    /// Present children and the most that may be missing.
    pub(crate) fn raidz_health(&self) -> &'static str {
        let missing = self.leaves.iter().filter(|l| !l.readable()).count();
        if missing == 0 {
            "ONLINE"
        } else if missing <= nparity(self.kind) {
            "DEGRADED"
        } else {
            "UNAVAIL"
        }
    }
}

/// Every `k`-subset of `0..n` that avoids `skip`, in lexicographic order.
fn combinations(n: usize, k: usize, skip: &[usize]) -> Vec<Vec<usize>> {
    let pool: Vec<usize> = (0..n).filter(|i| !skip.contains(i)).collect();
    let mut out = Vec::new();
    let mut idx: Vec<usize> = (0..k).collect();
    if k > pool.len() {
        return out;
    }
    loop {
        out.push(idx.iter().map(|&i| pool[i]).collect());
        // Advance the rightmost index that can still move.
        let m = pool.len();
        let Some(i) = (0..k).rev().find(|&i| idx[i] < m - k + i) else {
            return out;
        };
        idx[i] += 1;
        for j in i + 1..k {
            idx[j] = idx[j - 1] + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_are_all_subsets() {
        assert_eq!(combinations(4, 0, &[]), vec![Vec::<usize>::new()]);
        assert_eq!(
            combinations(3, 2, &[]),
            vec![vec![0, 1], vec![0, 2], vec![1, 2]]
        );
        assert_eq!(combinations(4, 1, &[1, 2]), vec![vec![0], vec![3]]);
        assert_eq!(combinations(2, 3, &[]), Vec::<Vec<usize>>::new());
    }

    /// Every block shape fits its allocation, its columns tile exactly the
    /// sectors `b..b+tot` of the row-major layout, and each column is on its own child.
    #[test]
    fn map_tiles_the_allocation() {
        for children in 2..=9 {
            for nparity in 1..=2 {
                if children <= nparity {
                    continue;
                }
                let g = Geometry {
                    children,
                    nparity,
                    ashift: 9,
                };
                for start in 0..children as u64 * 2 {
                    for sectors in 1..=40u64 {
                        let off = start * 512;
                        let cols = g.map(off, sectors * 512);
                        let mut seen = std::collections::BTreeSet::new();
                        for c in &cols {
                            for k in 0..c.size as u64 / 512 {
                                let row = c.offset / 512 + k;
                                assert!(seen.insert(row * children as u64 + c.child as u64));
                            }
                        }
                        let data: usize = cols[nparity..].iter().map(|c| c.size).sum();
                        assert_eq!(data as u64, sectors * 512);
                        let lo = *seen.first().unwrap();
                        let hi = *seen.last().unwrap();
                        assert_eq!(lo, start);
                        assert_eq!(hi - lo + 1, seen.len() as u64, "contiguous");
                        assert!((hi + 1) * 512 <= off + g.alloc_size(sectors * 512));
                        let kids: std::collections::HashSet<_> =
                            cols.iter().map(|c| c.child).collect();
                        assert_eq!(kids.len(), cols.len());
                        assert!(g.data_capacity(g.alloc_size(sectors * 512)) >= sectors * 512);
                    }
                }
            }
        }
    }
}
