//! NBD wire constants and the decoders of untrusted bytes (options and requests),
//! as in nbd's doc/proto.md (fixed newstyle, structured replies).
//!
//! Invariants:
//! - Every decoder checks lengths before slicing and returns `Err` for malformed
//!   input; none allocates more than the bytes it was given.

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1;
pub const FLAG_NO_ZEROES: u16 = 2;
pub const CLIENT_FIXED_NEWSTYLE: u32 = 1;
pub const CLIENT_NO_ZEROES: u32 = 2;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = 0x8000_0001;
pub const REP_ERR_POLICY: u32 = 0x8000_0002;
pub const REP_ERR_INVALID: u32 = 0x8000_0003;
pub const REP_ERR_UNKNOWN: u32 = 0x8000_0006;
pub const REP_ERR_TOO_BIG: u32 = 0x8000_0009;

// Info types.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Transmission flags.
pub const TF_HAS_FLAGS: u16 = 1;
pub const TF_READ_ONLY: u16 = 1 << 1;
pub const TF_SEND_FLUSH: u16 = 1 << 2;
pub const TF_SEND_FUA: u16 = 1 << 3;
pub const TF_SEND_TRIM: u16 = 1 << 5;
pub const TF_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TF_SEND_DF: u16 = 1 << 7;
pub const TF_CAN_MULTI_CONN: u16 = 1 << 8;
pub const TF_SEND_FAST_ZERO: u16 = 1 << 11;

// Commands and their flags.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;
pub const CMD_FLAG_FUA: u16 = 1;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// Structured reply chunk types and flags.
pub const REPLY_FLAG_DONE: u16 = 1;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = 0x8001;

// Block status flags.
pub const STATE_HOLE: u32 = 1;
pub const STATE_ZERO: u32 = 2;

// Errors (errno values of the protocol).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;

/// Largest read or write payload (the advertised maximum block size).
pub const MAX_PAYLOAD: u32 = 32 << 20;
/// Largest option payload read into memory (names are at most 4096 bytes).
pub const MAX_OPTION_LEN: u32 = 64 << 10;
/// The one metadata context served.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// Its context id.
pub const BASE_ALLOCATION_ID: u32 = 1;

/// A transmission request header (28 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub length: u32,
}

pub const REQUEST_LEN: usize = 28;

/// Decode a request header; `Err` for a wrong magic (the stream cannot be
/// resynchronised: the connection must close).
pub fn decode_request(b: &[u8; REQUEST_LEN]) -> Result<Request, String> {
    let magic = u32::from_be_bytes(b[0..4].try_into().unwrap());
    if magic != REQUEST_MAGIC {
        return Err(format!("bad request magic {magic:#x}"));
    }
    Ok(Request {
        flags: u16::from_be_bytes(b[4..6].try_into().unwrap()),
        kind: u16::from_be_bytes(b[6..8].try_into().unwrap()),
        cookie: u64::from_be_bytes(b[8..16].try_into().unwrap()),
        offset: u64::from_be_bytes(b[16..24].try_into().unwrap()),
        length: u32::from_be_bytes(b[24..28].try_into().unwrap()),
    })
}

/// A bounds-checked reader over an option's payload.
pub struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Cursor { b, pos: 0 }
    }
    pub fn u16(&mut self) -> Option<u16> {
        let s = self.bytes(2)?;
        Some(u16::from_be_bytes(s.try_into().unwrap()))
    }
    pub fn u32(&mut self) -> Option<u32> {
        let s = self.bytes(4)?;
        Some(u32::from_be_bytes(s.try_into().unwrap()))
    }
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// A u32-length-prefixed UTF-8 string.
    pub fn string(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.bytes(n)?).ok()
    }
    pub fn at_end(&self) -> bool {
        self.pos == self.b.len()
    }
}

/// OPT_INFO / OPT_GO payload: export name and the info types asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct InfoRequest<'a> {
    pub name: &'a str,
    pub infos: Vec<u16>,
}

pub fn decode_info_request(b: &[u8]) -> Option<InfoRequest<'_>> {
    let mut c = Cursor::new(b);
    let name = c.string()?;
    let n = c.u16()? as usize;
    // Bounded by the payload: each info type is two bytes.
    if b.len() - c.pos != n * 2 {
        return None;
    }
    let infos = (0..n).map(|_| c.u16()).collect::<Option<Vec<u16>>>()?;
    c.at_end().then_some(InfoRequest { name, infos })
}

/// OPT_LIST_META_CONTEXT / OPT_SET_META_CONTEXT payload.
#[derive(Debug, PartialEq, Eq)]
pub struct MetaRequest<'a> {
    pub name: &'a str,
    pub queries: Vec<&'a str>,
}

pub fn decode_meta_request(b: &[u8]) -> Option<MetaRequest<'_>> {
    let mut c = Cursor::new(b);
    let name = c.string()?;
    let n = c.u32()? as usize;
    // Each query takes at least its 4-byte length: bound before allocating.
    if n > (b.len() - c.pos) / 4 {
        return None;
    }
    let mut queries = Vec::with_capacity(n);
    for _ in 0..n {
        queries.push(c.string()?);
    }
    c.at_end().then_some(MetaRequest { name, queries })
}

/// Whether a meta context query selects `base:allocation`.
pub fn query_selects_base_allocation(q: &str, listing: bool) -> bool {
    q == BASE_ALLOCATION || (listing && q == "base:")
}
