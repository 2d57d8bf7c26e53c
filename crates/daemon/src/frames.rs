//! Raw byte streams on the unix socket (send and receive): after a JSON request and
//! a JSON "go" reply, the stream travels as frames `length u32 LE · bytes`, and a
//! frame of length 0 ends it; one JSON response line follows with the outcome.
//!
//! Why frames rather than "raw bytes until EOF": the side that produces the bytes
//! can fail half-way (a send that meets a bad block), and the other side must tell
//! "the stream ended" from "the producer gave up" without closing the connection,
//! so that the final JSON line with the reason can still be read.
//!
//! Invariants:
//! - A frame is at most [`MAX_FRAME`] bytes; a longer length is refused as corrupt,
//!   so a hostile peer cannot make the reader allocate or wait for gigabytes.
//! - [`FrameReader`] returns EOF (`Ok(0)`) only after the end frame; a connection
//!   that closes before it is an `UnexpectedEof` error, never a short stream.

use std::io::{self, Read, Write};

/// Largest frame accepted or produced.
pub const MAX_FRAME: usize = 1 << 20;
/// Frames the writer produces (smaller than the maximum to keep latency low).
const WRITE_FRAME: usize = 256 << 10;

/// Writes bytes as frames; [`FrameWriter::finish`] writes the end frame.
pub struct FrameWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> FrameWriter<W> {
    pub fn new(inner: W) -> Self {
        FrameWriter {
            inner,
            buf: Vec::with_capacity(WRITE_FRAME),
        }
    }

    fn emit(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.inner
            .write_all(&(self.buf.len() as u32).to_le_bytes())?;
        self.inner.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// The inner writer, without writing what is buffered or the end frame.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Write what is buffered and the end frame; returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.emit()?;
        self.inner.write_all(&0u32.to_le_bytes())?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for FrameWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(WRITE_FRAME - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == WRITE_FRAME {
            self.emit()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit()?;
        self.inner.flush()
    }
}

/// Reads the bytes of a framed stream; EOF at the end frame.
pub struct FrameReader<R: Read> {
    inner: R,
    left_in_frame: usize,
    ended: bool,
    total: u64,
}

impl<R: Read> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        FrameReader {
            inner,
            left_in_frame: 0,
            ended: false,
            total: 0,
        }
    }

    /// Bytes of payload read so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// True once the end frame has been read.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Read and discard the rest of the stream up to its end frame.
    pub fn drain(&mut self) -> io::Result<u64> {
        io::copy(self, &mut io::sink())
    }

    /// The inner reader (positioned after the end frame once [`ended`](Self::ended)).
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for FrameReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.ended || out.is_empty() {
            return Ok(0);
        }
        if self.left_in_frame == 0 {
            let mut len = [0u8; 4];
            self.inner.read_exact(&mut len).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the stream was cut off before its end ({e})"),
                )
            })?;
            let len = u32::from_le_bytes(len) as usize;
            if len == 0 {
                self.ended = true;
                return Ok(0);
            }
            if len > MAX_FRAME {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad frame of {len} bytes on the connection (at most {MAX_FRAME})"),
                ));
            }
            self.left_in_frame = len;
        }
        let want = out.len().min(self.left_in_frame);
        let n = self.inner.read(&mut out[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the stream was cut off in the middle of a frame",
            ));
        }
        self.left_in_frame -= n;
        self.total += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(data: &[u8]) -> Vec<u8> {
        let mut w = FrameWriter::new(Vec::new());
        // Odd-sized writes cross frame boundaries.
        for c in data.chunks(77_777) {
            w.write_all(c).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trip_and_trailing_bytes_stay() {
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut wire = framed(&data);
        wire.extend_from_slice(b"{\"ok\":true}\n");
        let mut r = FrameReader::new(&wire[..]);
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert_eq!(got, data);
        assert!(r.ended());
        assert_eq!(r.total(), data.len() as u64);
        let mut rest = String::new();
        r.into_inner().read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "{\"ok\":true}\n");
    }

    #[test]
    fn empty_stream_is_one_end_frame() {
        let wire = framed(&[]);
        assert_eq!(wire, vec![0, 0, 0, 0]);
        let mut r = FrameReader::new(&wire[..]);
        assert_eq!(r.drain().unwrap(), 0);
        assert!(r.ended());
    }

    #[test]
    fn cut_off_and_oversized_frames_are_errors() {
        let wire = framed(&[5u8; 1000]);
        for cut in [0, 2, 4, 500, wire.len() - 1] {
            let mut r = FrameReader::new(&wire[..cut]);
            let e = r.drain().unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "cut at {cut}");
        }
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        let e = FrameReader::new(&huge[..]).drain().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
