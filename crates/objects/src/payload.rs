//! The bytes of one write: borrowed (copied into the records), or owned pieces
//! that a record can take as they are.
//!
//! Why: a volume's 1 MiB write used to be zero-filled, read from the socket,
//! then copied into new records. Read into record-sized pieces instead
//! (`Payload::read_from`), each whole aligned piece becomes the record itself
//! (`ObjectSet::write_payload`): one copy, by the kernel, from the socket to the
//! record.
//!
//! Invariants: the pieces are contiguous and in order (piece k starts where
//! piece k-1 ends); `starts[k]` is the offset of piece k in the payload, so a
//! lookup is a binary search. A piece is never changed once built: a record
//! that takes one shares it (`Arc`), as it shares any record.

use std::io::{self, Read};
use std::sync::Arc;

/// The bytes of one write. See the module comment.
pub struct Payload<'a> {
    kind: Kind<'a>,
}

enum Kind<'a> {
    Borrowed(&'a [u8]),
    Owned {
        pieces: Vec<Arc<[u8]>>,
        starts: Vec<usize>,
        len: usize,
    },
}

impl Default for Payload<'_> {
    /// No bytes.
    fn default() -> Self {
        Payload::from(&[][..])
    }
}

impl<'a> From<&'a [u8]> for Payload<'a> {
    fn from(data: &'a [u8]) -> Self {
        Payload {
            kind: Kind::Borrowed(data),
        }
    }
}

impl<'a> From<&'a Vec<u8>> for Payload<'a> {
    fn from(data: &'a Vec<u8>) -> Self {
        Payload::from(&data[..])
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Payload<'a> {
    fn from(data: &'a [u8; N]) -> Self {
        Payload::from(&data[..])
    }
}

impl From<Vec<Arc<[u8]>>> for Payload<'static> {
    fn from(pieces: Vec<Arc<[u8]>>) -> Self {
        let mut starts = Vec::with_capacity(pieces.len());
        let mut len = 0;
        for p in &pieces {
            starts.push(len);
            len += p.len();
        }
        Payload {
            kind: Kind::Owned {
                pieces,
                starts,
                len,
            },
        }
    }
}

/// A new zero-filled shared buffer of `n` bytes, allocated once (the
/// iterator's length is known, so `collect` writes in place).
pub fn zeroed(n: usize) -> Arc<[u8]> {
    std::iter::repeat_n(0, n).collect()
}

impl Payload<'static> {
    /// Read `len` bytes of a write at offset `off` from `r`, in pieces that end
    /// on multiples of `piece` (the volume's block size), so that every whole
    /// block becomes a record without a copy.
    pub fn read_from<R: Read>(r: &mut R, off: u64, len: usize, piece: u64) -> io::Result<Self> {
        let piece = piece.max(1);
        // A range past the largest offset (a request refused after its
        // payload is read) is read in pieces aligned as if it started at 0.
        let off = if off.checked_add(len as u64).is_some() {
            off
        } else {
            0
        };
        let mut pieces = Vec::with_capacity(len / piece as usize + 2);
        let (mut pos, end) = (off, off + len as u64);
        while pos < end {
            // To the next multiple of `piece`, computed without forming that
            // multiple: in the last block below u64::MAX it does not exist.
            let n = (piece - pos % piece).min(end - pos);
            let mut buf = zeroed(n as usize);
            r.read_exact(Arc::get_mut(&mut buf).expect("a new buffer is unique"))?;
            pieces.push(buf);
            pos += n;
        }
        Ok(pieces.into())
    }
}

impl Payload<'_> {
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Borrowed(d) => d.len(),
            Kind::Owned { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The owned piece that is exactly bytes `[from, from + len)`, if any.
    pub fn whole(&self, from: usize, len: usize) -> Option<&Arc<[u8]>> {
        let Kind::Owned { pieces, starts, .. } = &self.kind else {
            return None;
        };
        let k = starts.binary_search(&from).ok()?;
        Some(&pieces[k]).filter(|p| p.len() == len)
    }

    /// Copy bytes `[from, from + dst.len())` into `dst`.
    pub fn copy_to(&self, from: usize, dst: &mut [u8]) {
        if dst.is_empty() {
            return;
        }
        match &self.kind {
            Kind::Borrowed(d) => dst.copy_from_slice(&d[from..from + dst.len()]),
            Kind::Owned { pieces, starts, .. } => {
                let mut k = starts.partition_point(|s| *s <= from) - 1;
                let (mut pos, mut done) = (from, 0);
                while done < dst.len() {
                    let p = &pieces[k][pos - starts[k]..];
                    let n = p.len().min(dst.len() - done);
                    dst[done..done + n].copy_from_slice(&p[..n]);
                    (pos, done, k) = (pos + n, done + n, k + 1);
                }
            }
        }
    }

    /// Bytes `[from, from + len)` as one shared buffer: an owned piece that is
    /// exactly that range is shared, anything else is copied.
    pub fn shared(&self, from: usize, len: usize) -> Arc<[u8]> {
        if let Some(p) = self.whole(from, len) {
            return p.clone();
        }
        let mut out = zeroed(len);
        self.copy_to(
            from,
            Arc::get_mut(&mut out).expect("a new buffer is unique"),
        );
        out
    }

    /// The bytes in order, as slices: a reply is sent from them as they are.
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> {
        let (one, many): (Option<&[u8]>, &[Arc<[u8]>]) = match &self.kind {
            Kind::Borrowed(d) => (Some(*d), &[]),
            Kind::Owned { pieces, .. } => (None, pieces),
        };
        one.into_iter().chain(many.iter().map(|p| &p[..]))
    }

    /// All the bytes as one vector (tests, small devices).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        self.copy_to(0, &mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_end_on_block_multiples_and_copy_back_whole() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let p = Payload::read_from(&mut &data[..], 1000, data.len(), 4096).unwrap();
        assert_eq!(p.len(), data.len());
        assert_eq!(p.to_vec(), data);
        // Pieces: [1000, 4096), [4096, 8192), [8192, 11000).
        assert!(p.whole(0, 3096).is_some());
        assert!(p.whole(3096, 4096).is_some());
        assert!(p.whole(3096, 4000).is_none());
        assert!(p.whole(100, 4096).is_none());
        let mut mid = vec![0; 5000];
        p.copy_to(3000, &mut mid);
        assert_eq!(mid, data[3000..8000]);
        assert_eq!(&p.shared(3096, 4096)[..], &data[3096..7192]);
        assert!(Arc::ptr_eq(
            &p.shared(3096, 4096),
            p.whole(3096, 4096).unwrap()
        ));
        assert_eq!(&p.shared(10, 9000)[..], &data[10..9010]);
        let b = Payload::from(&data[..]);
        assert!(b.whole(0, data.len()).is_none());
        assert_eq!(&b.shared(5, 10)[..], &data[5..15]);
    }

    #[test]
    fn a_write_in_the_last_block_below_u64_max_reads_only_its_bytes() {
        // A request refused for its offset still has its payload read: no
        // overflow (a panic with overflow checks, a wrap that read the next
        // requests as payload without them), and not a byte more than `len`.
        let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        for off in [u64::MAX - 4095, u64::MAX - 200, u64::MAX - 99] {
            let mut r = &data[..];
            let p = Payload::read_from(&mut r, off, 100, 4096).unwrap();
            assert_eq!(p.to_vec(), data[..100], "offset {off}");
            assert_eq!(r.len(), 200, "offset {off}: the rest is not consumed");
        }
    }

    #[test]
    fn a_short_stream_is_an_error() {
        let data = [1u8; 100];
        assert!(Payload::read_from(&mut &data[..], 0, 200, 64).is_err());
    }
}
