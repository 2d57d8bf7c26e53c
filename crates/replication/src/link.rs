//! One conversation between two appliances over a [`TlsStream`]: greetings,
//! then requests (JSON) each answered by a REPLY or an ERROR frame, and send
//! streams carried as DATA frames closed by END.
//!
//! Invariants:
//! - Nothing but the greeting is written before the peer's key has been
//!   checked by the caller (see `tls`); a peer whose greeting is not ours gets
//!   nothing more.
//! - A stream ends with END only when the producer finished it; a producer
//!   that fails sends ERROR with its reason instead, and a reader sees a cut
//!   connection, an ERROR or a foreign frame as an I/O error, never as the end
//!   of the stream. So a receive never takes a partial stream for a whole one.
//! - Frames are bounded by `frame::MAX_PAYLOAD` (see `frame`).

use crate::frame::{self, FrameError, FrameType, Hello};
use crate::tls::TlsStream;
use serde_json::{json, Value};
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// DATA frames written by [`DataWriter`].
const DATA_CHUNK: usize = 256 << 10;
/// Unused bandwidth allowance a limited stream may spend at once, as time at
/// the limit: a stream that fell behind (a stalled peer) catches up at most
/// this much above its rate.
const MAX_BURST: Duration = Duration::from_secs(1);

/// A conversation with a peer.
pub struct Link {
    io: TlsStream,
}

impl Link {
    pub fn new(io: TlsStream) -> Link {
        Link { io }
    }

    pub fn tls(&self) -> &TlsStream {
        &self.io
    }

    /// A socket error in words: a timeout says the link stopped moving.
    fn io_error(&self, e: io::Error) -> io::Error {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the connection to {} stopped moving (timed out; link down?)",
                    self.io.peer_addr()
                ),
            ),
            _ => io::Error::new(
                e.kind(),
                format!("connection to {} lost: {e}", self.io.peer_addr()),
            ),
        }
    }

    fn write_frame(&mut self, ty: FrameType, payload: &[u8]) -> Result<(), String> {
        self.io
            .write_all(&frame::encode(ty, payload))
            .and_then(|()| self.io.flush())
            .map_err(|e| self.io_error(e).to_string())
    }

    /// Say who we are and read who the peer is: our greeting, then theirs.
    pub fn greet(&mut self, our_fp: &str) -> Result<Hello, String> {
        let g = frame::encode_greeting(&Hello::new(our_fp));
        self.io
            .write_all(&g)
            .and_then(|()| self.io.flush())
            .map_err(|e| self.io_error(e).to_string())?;
        frame::read_greeting(&mut self.io).map_err(|e| self.frame_err(e))
    }

    fn frame_err(&self, e: FrameError) -> String {
        match e {
            FrameError::Truncated => format!("{} closed the connection", self.io.peer_addr()),
            FrameError::Io(m)
                if m.contains("temporarily unavailable") || m.contains("timed out") =>
            {
                format!(
                    "{} stopped answering (timed out; link down?)",
                    self.io.peer_addr()
                )
            }
            e => format!("{}: {e}", self.io.peer_addr()),
        }
    }

    /// Send a request and wait for its answer: the REPLY's JSON, or the
    /// peer's ERROR line.
    pub fn request(&mut self, req: &Value) -> Result<Value, String> {
        let body = serde_json::to_vec(req).map_err(|e| e.to_string())?;
        self.write_frame(FrameType::Request, &body)?;
        self.read_reply()
    }

    /// Read a REPLY (its JSON) or an ERROR (its line, as the error).
    pub fn read_reply(&mut self) -> Result<Value, String> {
        let f = frame::read_frame(&mut self.io).map_err(|e| self.frame_err(e))?;
        match f.ty {
            FrameType::Reply => frame::json(f.ty, &f.payload).map_err(|e| self.frame_err(e)),
            FrameType::Error => {
                let v: Value = frame::json(f.ty, &f.payload).map_err(|e| self.frame_err(e))?;
                Err(v["error"]
                    .as_str()
                    .unwrap_or("the peer refused without a reason")
                    .to_string())
            }
            ty => Err(format!(
                "{}: expected a reply, got a {ty:?} frame",
                self.io.peer_addr()
            )),
        }
    }

    /// After a failed write: the peer's ERROR line, if it sent one before it
    /// closed the connection (its reason for refusing what we were sending),
    /// or its TLS alert that what we sent arrived corrupted.
    pub fn read_refusal(&mut self) -> Option<String> {
        let f = match frame::read_frame(&mut self.io) {
            Ok(f) => f,
            Err(FrameError::Io(m)) if m.contains(crate::tls::CORRUPTED_IN_TRANSIT) => {
                return Some(format!("{}: {m}", self.io.peer_addr()))
            }
            Err(_) => return None,
        };
        if f.ty != FrameType::Error {
            return None;
        }
        let v: Value = frame::json(f.ty, &f.payload).ok()?;
        v["error"].as_str().map(str::to_string)
    }

    /// Server side: the next request, or `None` when the peer closed cleanly.
    pub fn read_request(&mut self) -> Result<Option<Value>, String> {
        let f = match frame::read_frame(&mut self.io) {
            Ok(f) => f,
            Err(FrameError::Truncated) => return Ok(None),
            Err(e) => return Err(self.frame_err(e)),
        };
        if f.ty != FrameType::Request {
            return Err(format!(
                "{}: expected a request, got a {:?} frame",
                self.io.peer_addr(),
                f.ty
            ));
        }
        frame::json(f.ty, &f.payload)
            .map(Some)
            .map_err(|e| self.frame_err(e))
    }

    pub fn reply(&mut self, v: &Value) -> Result<(), String> {
        let body = serde_json::to_vec(v).map_err(|e| e.to_string())?;
        self.write_frame(FrameType::Reply, &body)
    }

    /// An ERROR frame with one line (cut to fit a frame).
    pub fn error(&mut self, msg: &str) -> Result<(), String> {
        let mut m = msg.replace('\n', " ");
        m.truncate(frame::MAX_JSON / 2);
        let body = serde_json::to_vec(&json!({ "error": m })).map_err(|e| e.to_string())?;
        self.write_frame(FrameType::Error, &body)
    }

    /// A writer of one stream as DATA frames, at most `bwlimit` bytes per second.
    pub fn data_writer(&mut self, bwlimit: Option<u64>) -> DataWriter<'_> {
        let bwlimit = bwlimit.filter(|&r| r > 0);
        // Under a limit, frames of about 1/8 s keep the pauses short (a peer
        // waiting on a slow limit must not take a pause for a dead link).
        let chunk = bwlimit.map_or(DATA_CHUNK, |r| {
            (r / 8).clamp(4096, DATA_CHUNK as u64) as usize
        });
        DataWriter {
            link: self,
            buf: Vec::with_capacity(chunk),
            chunk,
            pacer: bwlimit.map(|rate| Pacer::new(rate, Instant::now())),
            sent: 0,
        }
    }

    /// A reader of one stream of DATA frames; EOF at END.
    pub fn data_reader(&mut self) -> DataReader<'_> {
        DataReader {
            link: self,
            frame: Vec::new(),
            at: 0,
            ended: false,
            total: 0,
            failure: None,
        }
    }
}

/// See [`Link::data_writer`]; [`DataWriter::finish`] writes END,
/// [`DataWriter::abort`] an ERROR.
pub struct DataWriter<'a> {
    link: &'a mut Link,
    buf: Vec<u8>,
    chunk: usize,
    pacer: Option<Pacer>,
    sent: u64,
}

/// The pace of a stream under a bandwidth limit: after `sent` bytes, the
/// pause that brings the average rate since the start back to the limit.
/// A stream that fell behind (a stalled peer, e.g. on a checkpoint commit)
/// keeps at most `MAX_BURST` of unused allowance, so it does not then catch
/// up at full speed for as long as it stalled.
struct Pacer {
    rate: u64,
    start: Instant,
}

impl Pacer {
    fn new(rate: u64, now: Instant) -> Pacer {
        Pacer { rate, start: now }
    }

    fn pause_after(&mut self, sent: u64, now: Instant) -> Duration {
        let due = Duration::from_secs_f64(sent as f64 / self.rate as f64);
        let spent = now.saturating_duration_since(self.start);
        if due > spent {
            return due - spent;
        }
        if spent - due > MAX_BURST {
            self.start += spent - due - MAX_BURST;
        }
        Duration::ZERO
    }
}

impl DataWriter<'_> {
    fn emit(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let f = frame::encode(FrameType::Data, &self.buf);
        self.link
            .io
            .write_all(&f)
            .map_err(|e| self.link.io_error(e))?;
        self.sent += self.buf.len() as u64;
        self.buf.clear();
        if let Some(pacer) = &mut self.pacer {
            let pause = pacer.pause_after(self.sent, Instant::now());
            if !pause.is_zero() {
                self.link.io.flush()?;
                std::thread::sleep(pause);
            }
        }
        Ok(())
    }

    /// Stream bytes written so far.
    pub fn sent(&self) -> u64 {
        self.sent + self.buf.len() as u64
    }

    /// End the stream (END frame); returns the bytes sent.
    pub fn finish(mut self) -> io::Result<u64> {
        self.emit()?;
        self.link
            .io
            .write_all(&frame::encode(FrameType::End, &[]))?;
        self.link.io.flush()?;
        Ok(self.sent)
    }

    /// Give up the stream with a reason (the receiver discards it, or keeps
    /// it for a resume if it receives resumably).
    pub fn abort(self, msg: &str) -> Result<(), String> {
        self.link.error(msg)
    }
}

impl Write for DataWriter<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(self.chunk - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == self.chunk {
            self.emit()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.emit()?;
        self.link.io.flush()
    }
}

/// See [`Link::data_reader`].
pub struct DataReader<'a> {
    link: &'a mut Link,
    frame: Vec<u8>,
    at: usize,
    ended: bool,
    total: u64,
    /// Why the stream stopped early (a cut or damaged link, the sender's
    /// ERROR): a receiver's own error only says the stream is short.
    failure: Option<String>,
}

impl DataReader<'_> {
    /// True once END has been read.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Why the stream stopped before END, if it did (see `failure`).
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Stream bytes read so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Read and drop the rest of the stream up to END.
    pub fn drain(&mut self) -> io::Result<u64> {
        io::copy(self, &mut io::sink())
    }
}

impl Read for DataReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let r = self.read_frames(out);
        if let Err(e) = &r {
            self.failure.get_or_insert_with(|| e.to_string());
        }
        r
    }
}

impl DataReader<'_> {
    fn read_frames(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.frame.len() {
            if self.ended || out.is_empty() {
                return Ok(0);
            }
            let f = frame::read_frame(&mut self.link.io).map_err(|e| match e {
                FrameError::Truncated => io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection was cut in the middle of the stream",
                ),
                e => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
            })?;
            match f.ty {
                FrameType::Data => {
                    self.frame = f.payload;
                    self.at = 0;
                }
                FrameType::End => {
                    self.ended = true;
                    return Ok(0);
                }
                FrameType::Error => {
                    let v: Value = serde_json::from_slice(&f.payload).unwrap_or(Value::Null);
                    return Err(io::Error::other(format!(
                        "the sender gave up the stream: {}",
                        v["error"].as_str().unwrap_or("no reason given")
                    )));
                }
                ty => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("a {ty:?} frame in the middle of a stream"),
                    ))
                }
            }
        }
        let n = out.len().min(self.frame.len() - self.at);
        out[..n].copy_from_slice(&self.frame[self.at..self.at + n]);
        self.at += n;
        self.total += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_stream_keeps_at_most_a_second_of_allowance() {
        let t0 = Instant::now();
        let mib = 1 << 20;
        let mut p = Pacer::new(mib, t0);
        // On pace: 1 MiB sent at once waits a second.
        assert_eq!(p.pause_after(mib, t0), Duration::from_secs(1));
        // The peer stalls 10 s after 1 MiB: 9 s of allowance unused, one kept.
        let t = t0 + Duration::from_secs(10);
        assert_eq!(p.pause_after(mib, t), Duration::ZERO);
        // 2 more MiB right away: one was allowed, the other waits its second
        // (an average since the start would have let 9 MiB through at once).
        assert_eq!(p.pause_after(2 * mib, t), Duration::ZERO);
        assert_eq!(p.pause_after(3 * mib, t), Duration::from_secs(1));
    }
}
