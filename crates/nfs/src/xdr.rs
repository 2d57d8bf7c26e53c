//! XDR (RFC 4506) encoding and decoding of the few shapes ONC RPC, MOUNT and
//! NFSv3 use: 32/64-bit integers, booleans, fixed and variable opaque data and
//! strings, all padded to 4 bytes.
//!
//! Invariants:
//! - The reader never allocates from a length it has not checked against both
//!   the protocol's bound and the bytes actually left in the message, so a
//!   hostile length costs nothing; every failure is `XdrError`, never a panic.
//! - Variable data is returned as a borrowed slice of the message.

/// A malformed message (the RPC layer answers GARBAGE_ARGS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdrError;

pub type XResult<T> = Result<T, XdrError>;

/// The XDR padding after `n` bytes of opaque data.
pub(crate) fn pad(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// Reads XDR items from a message (a clone reads on from the same place).
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> XResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(XdrError);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u32(&mut self) -> XResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> XResult<u64> {
        Ok(((self.u32()? as u64) << 32) | self.u32()? as u64)
    }

    pub fn bool(&mut self) -> XResult<bool> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(XdrError),
        }
    }

    /// Fixed-length opaque data of `n` bytes (plus padding).
    pub fn fixed(&mut self, n: usize) -> XResult<&'a [u8]> {
        let s = self.take(n)?;
        self.take(pad(n))?;
        Ok(s)
    }

    /// Variable-length opaque data of at most `max` bytes.
    pub fn opaque(&mut self, max: usize) -> XResult<&'a [u8]> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(XdrError);
        }
        self.fixed(n)
    }

    /// A string of at most `max` bytes (kept as bytes: file names need not be UTF-8).
    pub fn string(&mut self, max: usize) -> XResult<&'a [u8]> {
        self.opaque(max)
    }

    /// An array of u32 of at most `max` elements.
    pub fn u32_array(&mut self, max: usize) -> XResult<Vec<u32>> {
        let n = self.u32()? as usize;
        if n > max || n * 4 > self.remaining() {
            return Err(XdrError);
        }
        (0..n).map(|_| self.u32()).collect()
    }
}

/// Builds an XDR message.
#[derive(Debug, Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer { buf: Vec::new() }
    }
    pub fn with_capacity(n: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(n),
        }
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u32(v as u32)
    }
    pub fn fixed(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(&[0u8; 3][..pad(b.len())]);
        self
    }
    pub fn opaque(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.fixed(b)
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bounds() {
        let mut w = Writer::new();
        w.u32(7)
            .u64(1 << 40)
            .bool(true)
            .opaque(b"abcde")
            .fixed(b"xy");
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.u64().unwrap(), 1 << 40);
        assert!(r.bool().unwrap());
        assert_eq!(r.opaque(8).unwrap(), b"abcde");
        assert_eq!(r.fixed(2).unwrap(), b"xy");
        assert_eq!(r.remaining(), 0);
        // A length beyond the bound or beyond the message fails without allocating.
        let mut w = Writer::new();
        w.u32(u32::MAX);
        assert_eq!(Reader::new(&w.buf).opaque(usize::MAX), Err(XdrError));
        assert_eq!(Reader::new(&w.buf).u32_array(usize::MAX), Err(XdrError));
        let mut w = Writer::new();
        w.opaque(b"abcde");
        assert_eq!(Reader::new(&w.buf).opaque(4), Err(XdrError));
        assert_eq!(Reader::new(&[0, 0, 0, 2]).bool(), Err(XdrError));
    }
}
