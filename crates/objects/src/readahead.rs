//! Sequential read-ahead, in the manner of ZFS's zfetch: each object keeps a few
//! streams, each the position a sequential reader is expected at next. A demand
//! read that continues a stream advances it and asks for the records ahead of it
//! to be prefetched, at a distance that doubles while the stream stays
//! sequential, up to a cap (`MAX_DISTANCE` bytes). A read that continues no
//! stream starts one (replacing the least recently used), without prefetching:
//! random reads never prefetch, and they push old streams out.
//!
//! Matching is loose on purpose: NFS and NBD clients keep several reads of one
//! stream in flight, and they arrive slightly out of order. A read anywhere from
//! one `distance` behind the stream's position to the end of what it prefetched
//! belongs to it; only a read ending past the position advances it.
//!
//! Invariants: a stream's prefetched end is never below its position; the blocks
//! returned were never returned before for the same stream; state is bounded
//! (`MAX_STREAMS` per object, `MAX_OBJECTS` objects per object set).

use std::collections::HashMap;
use std::ops::Range;

/// Streams kept per object (sequential readers of one file at once).
pub const MAX_STREAMS: usize = 4;
/// Objects with stream state kept per object set; past it the state is reset.
pub const MAX_OBJECTS: usize = 1024;
/// How far ahead of a sequential reader to read, at most.
pub const MAX_DISTANCE: u64 = 8 << 20;

#[derive(Clone, Debug)]
struct Stream {
    /// The next block a sequential reader should ask for.
    next: u64,
    /// Blocks below this were already handed out for prefetch.
    prefetched_to: u64,
    /// Blocks to keep prefetched ahead of `next` (0 until the stream is confirmed).
    distance: u64,
    last_used: u64,
}

/// The streams of one object.
#[derive(Default, Debug)]
pub struct Streams {
    streams: Vec<Stream>,
    clock: u64,
}

impl Streams {
    /// A demand read of blocks `first..end` of an object of `nblocks` blocks,
    /// with at most `max_ahead` blocks read ahead. Returns the blocks to prefetch
    /// now (empty for a read that starts or does not advance a stream).
    pub fn access(&mut self, first: u64, end: u64, nblocks: u64, max_ahead: u64) -> Range<u64> {
        self.clock += 1;
        let clock = self.clock;
        let len = end.saturating_sub(first).max(1);
        let hit = self.streams.iter_mut().find(|s| {
            let behind = s.distance.max(1);
            first + behind >= s.next && first <= s.prefetched_to.max(s.next)
        });
        let Some(s) = hit else {
            let fresh = Stream {
                next: end,
                prefetched_to: end,
                distance: 0,
                last_used: clock,
            };
            if self.streams.len() < MAX_STREAMS {
                self.streams.push(fresh);
            } else if let Some(lru) = self.streams.iter_mut().min_by_key(|s| s.last_used) {
                *lru = fresh;
            }
            return 0..0;
        };
        s.last_used = clock;
        if end <= s.next {
            return 0..0;
        }
        s.next = end;
        // Start at twice the read, then double: a reader that keeps going gets
        // the full distance after a few reads, one that stops wasted little.
        s.distance = if s.distance == 0 {
            len * 2
        } else {
            s.distance * 2
        }
        .min(max_ahead.max(1));
        let from = s.prefetched_to.max(s.next);
        let to = (s.next + s.distance).min(nblocks);
        if to <= from {
            return 0..0;
        }
        s.prefetched_to = to;
        from..to
    }
}

/// The streams of every object of an object set.
#[derive(Default)]
pub struct ReadAhead {
    objects: HashMap<u64, Streams>,
}

impl ReadAhead {
    /// See [`Streams::access`]; for object `id` with `blksz`-byte blocks.
    pub fn access(
        &mut self,
        id: u64,
        blksz: u64,
        first: u64,
        end: u64,
        nblocks: u64,
    ) -> Range<u64> {
        if !self.objects.contains_key(&id) && self.objects.len() >= MAX_OBJECTS {
            // Crude but bounded: streams are cheap to find again.
            self.objects.clear();
        }
        let max_ahead = MAX_DISTANCE / blksz.max(1);
        self.objects
            .entry(id)
            .or_default()
            .access(first, end, nblocks, max_ahead)
    }

    /// Forget an object's streams (it was deleted: its id may be reused).
    pub fn forget(&mut self, id: u64) {
        self.objects.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: u64 = 1 << 20;

    #[test]
    fn a_sequential_reader_gets_a_growing_window_up_to_the_cap() {
        let mut s = Streams::default();
        assert_eq!(
            s.access(0, 1, N, 64),
            0..0,
            "a first read only starts a stream"
        );
        assert_eq!(s.access(1, 2, N, 64), 2..4);
        assert_eq!(s.access(2, 3, N, 64), 4..7);
        assert_eq!(s.access(3, 4, N, 64), 7..12);
        let mut to = 12;
        for b in 4..200 {
            let r = s.access(b, b + 1, N, 64);
            assert!(
                r.is_empty() || r.start == to,
                "contiguous prefetch at {b}: {r:?}"
            );
            to = to.max(r.end);
            assert!(to <= b + 1 + 64, "never past the cap");
        }
        assert_eq!(to, 200 + 64, "the window reached the cap");
    }

    #[test]
    fn random_reads_never_prefetch() {
        let mut s = Streams::default();
        let mut x = 12345u64;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let b = (x >> 33) % N;
            assert_eq!(s.access(b, b + 1, N, 64), 0..0, "read of {b}");
        }
    }

    #[test]
    fn rereads_within_a_block_and_late_reads_do_not_advance() {
        let mut s = Streams::default();
        s.access(0, 1, N, 64);
        assert_eq!(s.access(0, 1, N, 64), 0..0, "small reads within block 0");
        assert_eq!(s.access(1, 2, N, 64), 2..4);
        // Out of order: 3 arrives before 2.
        assert_eq!(s.access(3, 4, N, 64), 4..8);
        assert_eq!(s.access(2, 3, N, 64), 0..0);
        assert_eq!(s.access(4, 5, N, 64), 8..13);
    }

    #[test]
    fn several_streams_and_the_end_of_the_object() {
        let mut s = Streams::default();
        s.access(0, 1, 10, 64);
        s.access(1000, 1001, N, 64);
        assert_eq!(s.access(1, 2, 10, 64), 2..4);
        assert_eq!(s.access(1001, 1002, N, 64), 1002..1004);
        assert_eq!(s.access(2, 8, 10, 64), 8..10, "clamped to the object");
        assert_eq!(s.access(8, 10, 10, 64), 0..0, "nothing left");
    }

    #[test]
    fn state_is_bounded() {
        let mut ra = ReadAhead::default();
        for id in 0..(MAX_OBJECTS as u64 * 3) {
            ra.access(id, 4096, 0, 1, N);
        }
        assert!(ra.objects.len() <= MAX_OBJECTS);
        let mut s = Streams::default();
        for b in 0..100 {
            s.access(b * 1000, b * 1000 + 1, N, 64);
        }
        assert!(s.streams.len() <= MAX_STREAMS);
    }
}
