//! Wire frames of the replication protocol, version 1.
//!
//! A connection starts with each side's greeting: the 8 bytes `CACHREP1`, then a
//! HELLO frame (JSON [`Hello`]). After that, frames: `type u8 · 3 zero bytes ·
//! length u32 LE · payload`. Types: 1 HELLO, 2 REQUEST and 3 REPLY (JSON),
//! 4 DATA (send-stream bytes), 5 END (of the DATA of one transfer, empty),
//! 6 ERROR (JSON `{"error": "one line"}`).
//!
//! Invariants: a length is checked against [`MAX_PAYLOAD`] before anything is
//! allocated for it, and the decoder never buffers more than one frame plus one
//! read; anything else (another protocol's bytes, an unknown type, non-zero
//! reserved bytes, a JSON frame that is not the expected object) is a
//! [`FrameError`] naming what is wrong, never a panic or a wait for more bytes
//! than a frame can hold.

use serde::{Deserialize, Serialize};
use std::io::Read;

/// The greeting's first bytes: a peer speaking anything else is refused at once.
pub const MAGIC: &[u8; 8] = b"CACHREP1";
/// The protocol's name and version in HELLO.
pub const PROTOCOL: &str = "cachalot-replication";
pub const VERSION: u32 = 1;
/// Largest payload: a 1 MiB block of stream plus headers.
pub const MAX_PAYLOAD: usize = (1 << 20) + 4096;
/// Largest JSON payload (HELLO, REQUEST, REPLY, ERROR).
pub const MAX_JSON: usize = 64 << 10;
const HEADER: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    Hello = 1,
    Request = 2,
    Reply = 3,
    Data = 4,
    End = 5,
    Error = 6,
}

impl FrameType {
    fn from_u8(b: u8) -> Option<FrameType> {
        Some(match b {
            1 => FrameType::Hello,
            2 => FrameType::Request,
            3 => FrameType::Reply,
            4 => FrameType::Data,
            5 => FrameType::End,
            6 => FrameType::Error,
            _ => return None,
        })
    }

    fn is_json(self) -> bool {
        !matches!(self, FrameType::Data | FrameType::End)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub ty: FrameType,
    pub payload: Vec<u8>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("the peer does not speak the cachalot replication protocol (bad greeting)")]
    BadMagic,
    #[error("the peer sent an unknown frame type {0}")]
    UnknownType(u8),
    #[error("the peer sent a frame with non-zero reserved bytes")]
    Reserved,
    #[error("the peer sent a frame of {0} bytes (at most {MAX_PAYLOAD})")]
    TooLong(u32),
    #[error("the peer sent a {0:?} frame of {1} bytes (at most {MAX_JSON})")]
    JsonTooLong(FrameType, usize),
    #[error("the peer sent a bad {0:?} frame: {1}")]
    BadJson(FrameType, String),
    #[error("the connection ended inside a frame")]
    Truncated,
    #[error("connection error: {0}")]
    Io(String),
}

/// The greeting's JSON: who is speaking and which protocol.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: String,
    pub version: u32,
    /// The speaker's appliance id (its key fingerprint once paired).
    pub peer: String,
}

impl Hello {
    pub fn new(peer: &str) -> Hello {
        Hello {
            protocol: PROTOCOL.into(),
            version: VERSION,
            peer: peer.into(),
        }
    }

    /// Parse and check a HELLO payload: the protocol and version must be ours.
    pub fn parse(payload: &[u8]) -> Result<Hello, FrameError> {
        let h: Hello = json(FrameType::Hello, payload)?;
        if h.protocol != PROTOCOL || h.version != VERSION || h.peer.len() > 256 {
            return Err(FrameError::BadJson(
                FrameType::Hello,
                format!(
                    "protocol '{:.40}' version {} (this appliance speaks '{PROTOCOL}' version {VERSION})",
                    h.protocol, h.version
                ),
            ));
        }
        Ok(h)
    }
}

/// A JSON payload of frame type `ty` as `T`, bounded.
pub fn json<T: for<'de> Deserialize<'de>>(ty: FrameType, payload: &[u8]) -> Result<T, FrameError> {
    if payload.len() > MAX_JSON {
        return Err(FrameError::JsonTooLong(ty, payload.len()));
    }
    serde_json::from_slice(payload).map_err(|e| FrameError::BadJson(ty, e.to_string()))
}

/// The bytes of one frame.
pub fn encode(ty: FrameType, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() <= MAX_PAYLOAD, "frame payload too large");
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.push(ty as u8);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The greeting: magic and HELLO.
pub fn encode_greeting(hello: &Hello) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(encode(
        FrameType::Hello,
        &serde_json::to_vec(hello).expect("hello serializes"),
    ));
    out
}

/// Check a frame header; returns the type and the payload length.
fn parse_header(h: &[u8]) -> Result<(FrameType, usize), FrameError> {
    let ty = FrameType::from_u8(h[0]).ok_or(FrameError::UnknownType(h[0]))?;
    if h[1..4] != [0, 0, 0] {
        return Err(FrameError::Reserved);
    }
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    if len as usize > MAX_PAYLOAD {
        return Err(FrameError::TooLong(len));
    }
    if ty.is_json() && len as usize > MAX_JSON {
        return Err(FrameError::JsonTooLong(ty, len as usize));
    }
    if ty == FrameType::End && len != 0 {
        return Err(FrameError::BadJson(ty, "END carries no payload".into()));
    }
    Ok((ty, len as usize))
}

/// Incremental decoder for bytes as they arrive (non-blocking callers).
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    greeted: bool,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Add received bytes. Refused once more than one whole frame is waiting:
    /// the caller must take frames with [`Decoder::next_frame`] as they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        if self.buf.len() + bytes.len() > MAGIC.len() + 2 * (HEADER + MAX_PAYLOAD) {
            return Err(FrameError::TooLong(
                (self.buf.len() + bytes.len()).min(u32::MAX as usize) as u32,
            ));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The next whole frame, if one has arrived; errors are final.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if !self.greeted {
            let n = self.buf.len().min(MAGIC.len());
            if self.buf[..n] != MAGIC[..n] {
                return Err(FrameError::BadMagic);
            }
            if n < MAGIC.len() {
                return Ok(None);
            }
            self.buf.drain(..MAGIC.len());
            self.greeted = true;
        }
        if self.buf.len() < HEADER {
            return Ok(None);
        }
        let (ty, len) = parse_header(&self.buf[..HEADER])?;
        if self.buf.len() < HEADER + len {
            return Ok(None);
        }
        let payload = self.buf[HEADER..HEADER + len].to_vec();
        self.buf.drain(..HEADER + len);
        Ok(Some(Frame { ty, payload }))
    }
}

/// Read the peer's greeting from a blocking reader: magic, then its HELLO.
pub fn read_greeting(r: &mut dyn Read) -> Result<Hello, FrameError> {
    // Byte by byte: a short foreign greeting is refused as foreign, not
    // waited on or called truncated.
    for want in MAGIC {
        let mut b = [0u8; 1];
        read_full(r, &mut b)?;
        if b[0] != *want {
            return Err(FrameError::BadMagic);
        }
    }
    let f = read_frame(r)?;
    if f.ty != FrameType::Hello {
        return Err(FrameError::BadJson(f.ty, "expected HELLO first".into()));
    }
    Hello::parse(&f.payload)
}

/// Read one frame from a blocking reader (after the greeting).
pub fn read_frame(r: &mut dyn Read) -> Result<Frame, FrameError> {
    let mut h = [0u8; HEADER];
    read_full(r, &mut h)?;
    let (ty, len) = parse_header(&h)?;
    let mut payload = vec![0u8; len];
    read_full(r, &mut payload)?;
    Ok(Frame { ty, payload })
}

fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> Result<(), FrameError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e.to_string()),
    })
}

/// Fuzz entry: decode `data` as a peer's bytes, whole and in uneven pieces,
/// through both decoders; must never panic, and both must agree.
pub fn fuzz_decode(data: &[u8]) {
    let mut whole = Decoder::new();
    let mut frames_a = Vec::new();
    if whole.push(data).is_ok() {
        while let Ok(Some(f)) = whole.next_frame() {
            if f.ty == FrameType::Hello {
                let _ = Hello::parse(&f.payload);
            }
            frames_a.push(f);
        }
    }
    let mut pieces = Decoder::new();
    let mut frames_b = Vec::new();
    let mut step = 1 + data.first().copied().unwrap_or(0) as usize % 7;
    let mut at = 0;
    'outer: while at < data.len() {
        let end = (at + step).min(data.len());
        if pieces.push(&data[at..end]).is_err() {
            break;
        }
        at = end;
        step = step * 3 % 11 + 1;
        loop {
            match pieces.next_frame() {
                Ok(Some(f)) => frames_b.push(f),
                Ok(None) => break,
                Err(_) => break 'outer,
            }
        }
    }
    if data.len() <= MAX_PAYLOAD {
        assert_eq!(frames_a, frames_b, "decoders disagree");
    }
    let mut r = data;
    if read_greeting(&mut r).is_ok() {
        while read_frame(&mut r).is_ok() {}
    }
}
