//! The fixed newstyle handshake and option haggling, up to the start of the
//! transmission phase.
//!
//! Invariants:
//! - Every option gets exactly one final reply (ACK, an error, or the export
//!   data of OPT_EXPORT_NAME), except OPT_ABORT and a malformed stream, which
//!   close the connection.
//! - An option payload is read into memory only up to `MAX_OPTION_LEN`; a longer
//!   one is read and thrown away in small pieces and answered `ERR_TOO_BIG`.
//! - Unknown options get `ERR_UNSUP`; a client without the fixed-newstyle flag
//!   is refused (oldstyle clients are not served).
//! - The number of options per connection is bounded (`MAX_OPTIONS`).

use crate::device::Device;
use crate::proto::*;
use std::io::{self, Read, Write};
use std::sync::Arc;

/// Most options one client may send before transmission.
const MAX_OPTIONS: usize = 4096;

/// The exports a server offers: the daemon maps names to volumes here.
pub trait Exports: Send + Sync {
    /// Names listed by OPT_LIST.
    fn list(&self) -> Vec<String>;
    /// The device of an exported name; `Err` with a reason when not exported.
    fn open(&self, name: &str) -> Result<Arc<dyn Device>, String>;
}

/// What the client chose.
pub struct Negotiated {
    pub name: String,
    pub dev: Arc<dyn Device>,
    pub structured: bool,
    /// `base:allocation` selected for this export (BLOCK_STATUS allowed).
    pub base_allocation: bool,
    pub flags: u16,
}

/// Transmission flags for a device.
pub fn transmission_flags(dev: &dyn Device, structured: bool) -> u16 {
    let mut f = TF_HAS_FLAGS | TF_SEND_FUA | TF_CAN_MULTI_CONN;
    if dev.write_cache() {
        f |= TF_SEND_FLUSH;
    }
    if dev.is_readonly() {
        f |= TF_READ_ONLY;
    } else {
        f |= TF_SEND_TRIM | TF_SEND_WRITE_ZEROES | TF_SEND_FAST_ZERO;
    }
    if structured {
        // Reads are always answered in one chunk, so "don't fragment" holds.
        f |= TF_SEND_DF;
    }
    f
}

fn read_u32<R: Read>(r: &mut R) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn opt_reply<W: Write>(w: &mut W, opt: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&opt.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    w.write_all(&b)
}

fn opt_error<W: Write>(w: &mut W, opt: u32, kind: u32, msg: &str) -> io::Result<()> {
    opt_reply(w, opt, kind, msg.as_bytes())
}

/// Run the handshake. `Ok(None)`: the client left (ABORT or end of stream
/// between options) without choosing an export.
pub fn negotiate<S: Read + Write>(
    s: &mut S,
    exports: &dyn Exports,
) -> io::Result<Option<Negotiated>> {
    let mut hello = Vec::with_capacity(18);
    hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    s.write_all(&hello)?;
    s.flush()?;
    let client = read_u32(s)?;
    if client & CLIENT_FIXED_NEWSTYLE == 0
        || client & !(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES) != 0
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unsupported client flags {client:#x}"),
        ));
    }
    let no_zeroes = client & CLIENT_NO_ZEROES != 0;
    let mut st = OptState::default();
    for _ in 0..MAX_OPTIONS {
        let mut h = [0u8; 16];
        match s.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let magic = u64::from_be_bytes(h[0..8].try_into().unwrap());
        let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let len = u32::from_be_bytes(h[12..16].try_into().unwrap());
        if magic != IHAVEOPT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad option magic",
            ));
        }
        if len > MAX_OPTION_LEN {
            io::copy(&mut Read::by_ref(s).take(len as u64), &mut io::sink())?;
            if opt == OPT_EXPORT_NAME {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "export name too long",
                ));
            }
            opt_error(s, opt, REP_ERR_TOO_BIG, "option payload too large")?;
            s.flush()?;
            continue;
        }
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        let done = handle_option(s, exports, &mut st, opt, &data, no_zeroes)?;
        s.flush()?;
        match done {
            Step::Continue => {}
            Step::Abort => return Ok(None),
            Step::Transmit(n) => return Ok(Some(n)),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "too many options",
    ))
}

#[derive(Default)]
struct OptState {
    structured: bool,
    /// Export name for which base:allocation was selected.
    meta_for: Option<String>,
}

enum Step {
    Continue,
    Abort,
    Transmit(Negotiated),
}

fn handle_option<W: Write>(
    w: &mut W,
    exports: &dyn Exports,
    st: &mut OptState,
    opt: u32,
    data: &[u8],
    no_zeroes: bool,
) -> io::Result<Step> {
    match opt {
        OPT_EXPORT_NAME => {
            let name = std::str::from_utf8(data).unwrap_or("");
            // This option has no error reply: an unknown name closes the connection.
            let dev = exports
                .open(name)
                .map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))?;
            let flags = transmission_flags(dev.as_ref(), st.structured);
            let mut b = Vec::with_capacity(134);
            b.extend_from_slice(&dev.size().to_be_bytes());
            b.extend_from_slice(&flags.to_be_bytes());
            if !no_zeroes {
                b.extend_from_slice(&[0u8; 124]);
            }
            w.write_all(&b)?;
            Ok(Step::Transmit(negotiated(name, dev, st, flags)))
        }
        OPT_ABORT => {
            let _ = opt_reply(w, opt, REP_ACK, &[]);
            Ok(Step::Abort)
        }
        OPT_LIST => {
            if !data.is_empty() {
                opt_error(w, opt, REP_ERR_INVALID, "OPT_LIST takes no data")?;
                return Ok(Step::Continue);
            }
            for name in exports.list() {
                let mut b = Vec::with_capacity(4 + name.len());
                b.extend_from_slice(&(name.len() as u32).to_be_bytes());
                b.extend_from_slice(name.as_bytes());
                opt_reply(w, opt, REP_SERVER, &b)?;
            }
            opt_reply(w, opt, REP_ACK, &[])?;
            Ok(Step::Continue)
        }
        OPT_STRUCTURED_REPLY => {
            if !data.is_empty() {
                opt_error(
                    w,
                    opt,
                    REP_ERR_INVALID,
                    "OPT_STRUCTURED_REPLY takes no data",
                )?;
                return Ok(Step::Continue);
            }
            st.structured = true;
            opt_reply(w, opt, REP_ACK, &[])?;
            Ok(Step::Continue)
        }
        OPT_INFO | OPT_GO => info_or_go(w, exports, st, opt, data),
        OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => meta_context(w, exports, st, opt, data),
        OPT_STARTTLS => {
            opt_error(w, opt, REP_ERR_UNSUP, "TLS is not offered")?;
            Ok(Step::Continue)
        }
        _ => {
            opt_error(w, opt, REP_ERR_UNSUP, "unsupported option")?;
            Ok(Step::Continue)
        }
    }
}

fn negotiated(name: &str, dev: Arc<dyn Device>, st: &OptState, flags: u16) -> Negotiated {
    Negotiated {
        name: name.to_string(),
        dev,
        structured: st.structured,
        base_allocation: st.structured && st.meta_for.as_deref() == Some(name),
        flags,
    }
}

fn info_or_go<W: Write>(
    w: &mut W,
    exports: &dyn Exports,
    st: &mut OptState,
    opt: u32,
    data: &[u8],
) -> io::Result<Step> {
    let Some(req) = decode_info_request(data) else {
        opt_error(w, opt, REP_ERR_INVALID, "malformed OPT_INFO/OPT_GO")?;
        return Ok(Step::Continue);
    };
    let dev = match exports.open(req.name) {
        Ok(d) => d,
        Err(e) => {
            opt_error(w, opt, REP_ERR_UNKNOWN, &e)?;
            return Ok(Step::Continue);
        }
    };
    let flags = transmission_flags(dev.as_ref(), st.structured);
    let mut export = INFO_EXPORT.to_be_bytes().to_vec();
    export.extend_from_slice(&dev.size().to_be_bytes());
    export.extend_from_slice(&flags.to_be_bytes());
    opt_reply(w, opt, REP_INFO, &export)?;
    // Block sizes: any byte range works (partial blocks are merged), the volume's
    // block size is what avoids read-modify-write, and 32 MiB is the most we take.
    let mut bs = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    bs.extend_from_slice(&1u32.to_be_bytes());
    bs.extend_from_slice(&dev.block_size().clamp(512, MAX_PAYLOAD).to_be_bytes());
    bs.extend_from_slice(&MAX_PAYLOAD.to_be_bytes());
    opt_reply(w, opt, REP_INFO, &bs)?;
    if req.infos.contains(&INFO_NAME) {
        let mut b = INFO_NAME.to_be_bytes().to_vec();
        b.extend_from_slice(req.name.as_bytes());
        opt_reply(w, opt, REP_INFO, &b)?;
    }
    if req.infos.contains(&INFO_DESCRIPTION) {
        let mut b = INFO_DESCRIPTION.to_be_bytes().to_vec();
        let kind = if dev.is_readonly() {
            "snapshot"
        } else {
            "volume"
        };
        b.extend_from_slice(format!("cachalot {kind} {}", req.name).as_bytes());
        opt_reply(w, opt, REP_INFO, &b)?;
    }
    opt_reply(w, opt, REP_ACK, &[])?;
    if opt == OPT_GO {
        return Ok(Step::Transmit(negotiated(req.name, dev, st, flags)));
    }
    Ok(Step::Continue)
}

fn meta_context<W: Write>(
    w: &mut W,
    exports: &dyn Exports,
    st: &mut OptState,
    opt: u32,
    data: &[u8],
) -> io::Result<Step> {
    let set = opt == OPT_SET_META_CONTEXT;
    if !st.structured {
        opt_error(
            w,
            opt,
            REP_ERR_INVALID,
            "negotiate structured replies first",
        )?;
        return Ok(Step::Continue);
    }
    let Some(req) = decode_meta_request(data) else {
        opt_error(w, opt, REP_ERR_INVALID, "malformed meta context request")?;
        return Ok(Step::Continue);
    };
    if let Err(e) = exports.open(req.name) {
        opt_error(w, opt, REP_ERR_UNKNOWN, &e)?;
        return Ok(Step::Continue);
    }
    let selected = if req.queries.is_empty() {
        // An empty list: LIST means "all", SET means "none".
        !set
    } else {
        req.queries
            .iter()
            .any(|q| query_selects_base_allocation(q, !set))
    };
    if set {
        st.meta_for = selected.then(|| req.name.to_string());
    }
    if selected {
        // A listing carries no usable id (0), as the protocol says.
        let id = if set { BASE_ALLOCATION_ID } else { 0 };
        let mut b = id.to_be_bytes().to_vec();
        b.extend_from_slice(BASE_ALLOCATION.as_bytes());
        opt_reply(w, opt, REP_META_CONTEXT, &b)?;
    }
    opt_reply(w, opt, REP_ACK, &[])?;
    Ok(Step::Continue)
}
