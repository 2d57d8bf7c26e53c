//! The transmission phase: requests are read by one thread, executed by a few
//! workers of the connection, and answered in any order (cookies match them).
//!
//! Invariants:
//! - A request is validated before its payload is allocated: magic (a bad one
//!   closes the connection: the stream cannot be resynchronised), length at most
//!   `MAX_PAYLOAD` (a longer write payload is read and thrown away in pieces),
//!   the range inside the export, flags allowed for the command.
//! - Every request other than DISC gets exactly one reply; errors use the
//!   protocol's errno (ENOSPC for writes past the end, EINVAL for other ranges
//!   past the end, EPERM for changes to a read-only export).
//! - Memory per connection is bounded: payloads and read buffers in flight are
//!   charged to a budget (`INFLIGHT_BYTES`) before they are allocated.
//! - A reply is written whole under the connection's writer lock, so replies of
//!   concurrent workers never interleave.
//! - A read whose blocks are all in memory is served by the reading thread
//!   itself (no hand-off to a worker, no wake-up); its reply waits in
//!   `Replies::pending` and goes out with the others in one write, at the
//!   latest when the reader has no whole request buffered (before it could
//!   block on the socket) or a worker sends its own reply.
//! - A read reply is sent from the cache's blocks as they are (`Payload`
//!   pieces): no copy into a reply buffer.
//! - FLUSH and FUA go through the device's intent-log commit; a FLUSH covers
//!   every write answered before it arrived (the device commits all it logged).

use crate::device::Device;
use crate::handshake::Negotiated;
use crate::proto::*;
use cachalot_zvol::{ExtentKind, Payload, ReadFrom, ZvolError};
use parking_lot::{Condvar, Mutex};
use std::io::{self, BufReader, IoSlice, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Payload and read bytes one connection may have in flight.
const INFLIGHT_BYTES: u64 = 64 << 20;
/// Largest range one BLOCK_STATUS walks (the reply may cover less than asked,
/// as the protocol allows; clients ask again from where it ended).
const MAX_STATUS_RANGE: u64 = 1 << 30;
/// Most descriptors in one BLOCK_STATUS reply.
const MAX_DESCRIPTORS: usize = 8192;
/// Bytes of replies the reader keeps back to send together, at most.
const PENDING_BYTES: usize = 1 << 20;
/// Slices in one `writev` (Linux's IOV_MAX).
const MAX_IOV: usize = 1024;

/// Sees each completed request: (op, offset, length, latency, failed).
pub type Observe = Arc<dyn Fn(&'static str, u64, u64, Duration, bool) + Send + Sync>;

/// No observation (tests, fuzzing).
pub fn no_observer() -> Observe {
    Arc::new(|_, _, _, _, _| {})
}

/// Bytes in flight on one connection.
struct Budget {
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    fn acquire(&self, n: u64) {
        let mut u = self.used.lock();
        // A request alone may always run (n <= MAX_PAYLOAD < INFLIGHT_BYTES).
        while *u > 0 && *u + n > INFLIGHT_BYTES {
            self.freed.wait(&mut u);
        }
        *u += n;
    }
    fn release(&self, n: u64) {
        *self.used.lock() -= n;
        self.freed.notify_all();
    }
}

/// The answer to one request.
pub enum Outcome {
    Done,
    Data(Payload<'static>),
    Status(Vec<(u32, u32)>),
    Error(u32, String),
}

pub fn op_name(kind: u16) -> &'static str {
    match kind {
        CMD_READ => "read",
        CMD_WRITE => "write",
        CMD_FLUSH => "flush",
        CMD_TRIM => "trim",
        CMD_WRITE_ZEROES => "write_zeroes",
        CMD_BLOCK_STATUS => "block_status",
        CMD_DISC => "disconnect",
        _ => "unknown",
    }
}

/// The check of a request that needs no payload: `Some(error)` to refuse it.
pub fn validate(req: &Request, neg: &Negotiated, size: u64) -> Option<(u32, String)> {
    let einval = |m: &str| Some((EINVAL, m.to_string()));
    let known = matches!(
        req.kind,
        CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_WRITE_ZEROES | CMD_BLOCK_STATUS
    );
    if !known {
        return einval("unknown command");
    }
    if req.flags & CMD_FLAG_FAST_ZERO != 0 && req.kind != CMD_WRITE_ZEROES {
        return einval("FAST_ZERO applies to WRITE_ZEROES only");
    }
    if req.flags & CMD_FLAG_REQ_ONE != 0 && req.kind != CMD_BLOCK_STATUS {
        return einval("REQ_ONE applies to BLOCK_STATUS only");
    }
    if req.kind == CMD_FLUSH {
        return None;
    }
    if req.length == 0 {
        return einval("zero-length request");
    }
    if matches!(req.kind, CMD_READ | CMD_WRITE) && req.length > MAX_PAYLOAD {
        return Some((
            EOVERFLOW,
            format!("request longer than {MAX_PAYLOAD} bytes"),
        ));
    }
    let writes = matches!(req.kind, CMD_WRITE | CMD_WRITE_ZEROES | CMD_TRIM);
    if writes && neg.dev.is_readonly() {
        return Some((EPERM, format!("'{}' is read-only", neg.name)));
    }
    if req.kind == CMD_BLOCK_STATUS && !neg.base_allocation {
        return einval("BLOCK_STATUS needs structured replies and base:allocation");
    }
    if req
        .offset
        .checked_add(req.length as u64)
        .is_none_or(|e| e > size)
    {
        let errno = if matches!(req.kind, CMD_WRITE | CMD_WRITE_ZEROES) {
            ENOSPC
        } else {
            EINVAL
        };
        return Some((
            errno,
            format!("range past the end of the export ({size} bytes)"),
        ));
    }
    None
}

fn zvol_errno(kind: u16, e: &ZvolError) -> u32 {
    match e {
        ZvolError::OutOfRange { .. } if matches!(kind, CMD_WRITE | CMD_WRITE_ZEROES) => ENOSPC,
        ZvolError::OutOfRange { .. } => EINVAL,
        ZvolError::ReadOnly(_) => EPERM,
        ZvolError::NoSpace(_) => ENOSPC,
        ZvolError::Io(_) => EIO,
    }
}

/// A validated READ served from memory only: None when a block would have
/// to come from a device (a worker then runs it with `execute`).
fn execute_from_memory(dev: &dyn Device, req: &Request) -> Option<Outcome> {
    match dev.read(req.offset, req.length as usize, ReadFrom::Memory) {
        Ok(Some(p)) => Some(Outcome::Data(p)),
        Ok(None) => None,
        Err(e) => Some(Outcome::Error(zvol_errno(req.kind, &e), e.to_string())),
    }
}

/// Run one validated request against the device.
pub fn execute(dev: &dyn Device, req: &Request, payload: Payload<'_>) -> Outcome {
    let fua = req.flags & CMD_FLAG_FUA != 0;
    let (off, len) = (req.offset, req.length as u64);
    let r = match req.kind {
        CMD_READ => {
            let read = dev.read(off, len as usize, ReadFrom::Anywhere);
            // `Anywhere` always reads: None would be a device's bug.
            let read = read.map(|p| Outcome::Data(p.unwrap_or_default()));
            return result(req.kind, read);
        }
        CMD_WRITE => dev.write(off, payload, fua),
        CMD_FLUSH => dev.flush(),
        CMD_TRIM => dev.discard(off, len, fua),
        // NO_HOLE asks for provisioned blocks; on copy-on-write storage every
        // write allocates anew, so only a thick volume's reservation promises
        // later writes space. Zeroing punches either way; FAST_ZERO is always
        // honoured because punching is fast.
        CMD_WRITE_ZEROES => dev.write_zeroes(off, len, fua),
        CMD_BLOCK_STATUS => {
            let one = req.flags & CMD_FLAG_REQ_ONE != 0;
            return result(
                req.kind,
                block_status(dev, off, len, one).map(Outcome::Status),
            );
        }
        _ => return Outcome::Error(EINVAL, "unknown command".into()),
    };
    result(req.kind, r.map(|_| Outcome::Done))
}

fn result(kind: u16, r: Result<Outcome, ZvolError>) -> Outcome {
    r.unwrap_or_else(|e| Outcome::Error(zvol_errno(kind, &e), e.to_string()))
}

fn block_status(
    dev: &dyn Device,
    off: u64,
    len: u64,
    one: bool,
) -> Result<Vec<(u32, u32)>, ZvolError> {
    let len = len.min(MAX_STATUS_RANGE);
    let mut out = Vec::new();
    for e in dev.extents(off, len)? {
        let flags = match e.kind {
            ExtentKind::Data => 0,
            ExtentKind::Hole => STATE_HOLE | STATE_ZERO,
        };
        // Descriptor lengths are 32 bits: split long runs on 4 KiB boundaries.
        let mut rest = e.len;
        while rest > 0 {
            let n = rest.min(0xFFFF_F000);
            out.push((n as u32, flags));
            rest -= n;
            if one || out.len() >= MAX_DESCRIPTORS {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// A serialized reply: its header and, for a read, the data (sent as is, with
/// no copy into the header's buffer).
pub struct Reply {
    pub head: Vec<u8>,
    pub data: Payload<'static>,
}

/// Serialize the reply to `req`.
pub fn encode_reply(req: &Request, structured: bool, out: Outcome) -> Reply {
    let chunked = structured && matches!(req.kind, CMD_READ | CMD_BLOCK_STATUS);
    if !chunked {
        let (err, data) = match out {
            Outcome::Done | Outcome::Status(_) => (0, Payload::default()),
            Outcome::Data(d) => (0, d),
            Outcome::Error(e, _) => (e, Payload::default()),
        };
        let mut b = Vec::with_capacity(16);
        b.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        b.extend_from_slice(&err.to_be_bytes());
        b.extend_from_slice(&req.cookie.to_be_bytes());
        return Reply { head: b, data };
    }
    let chunk = |kind: u16, payload_len: usize| {
        let mut b = Vec::with_capacity(20 + payload_len);
        b.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        b.extend_from_slice(&REPLY_FLAG_DONE.to_be_bytes());
        b.extend_from_slice(&kind.to_be_bytes());
        b.extend_from_slice(&req.cookie.to_be_bytes());
        b.extend_from_slice(&(payload_len as u32).to_be_bytes());
        b
    };
    let head = match out {
        Outcome::Data(d) => {
            let mut b = chunk(REPLY_TYPE_OFFSET_DATA, 8 + d.len());
            b.extend_from_slice(&req.offset.to_be_bytes());
            return Reply { head: b, data: d };
        }
        Outcome::Status(list) => {
            let mut b = chunk(REPLY_TYPE_BLOCK_STATUS, 4 + 8 * list.len());
            b.extend_from_slice(&BASE_ALLOCATION_ID.to_be_bytes());
            for (len, flags) in list {
                b.extend_from_slice(&len.to_be_bytes());
                b.extend_from_slice(&flags.to_be_bytes());
            }
            b
        }
        Outcome::Done => chunk(REPLY_TYPE_NONE, 0),
        Outcome::Error(e, msg) => {
            let msg = &msg.as_bytes()[..msg.len().min(4096)];
            let mut b = chunk(REPLY_TYPE_ERROR, 6 + msg.len());
            b.extend_from_slice(&e.to_be_bytes());
            b.extend_from_slice(&(msg.len() as u16).to_be_bytes());
            b.extend_from_slice(msg);
            b
        }
    };
    Reply {
        head,
        data: Payload::default(),
    }
}

/// The connection's writing side: its stream and the replies the reader
/// served itself and keeps back (see the module invariants).
struct Replies<W> {
    w: W,
    pending: Vec<Reply>,
    pending_bytes: usize,
}

impl<W: Write> Replies<W> {
    fn push(&mut self, r: Reply) {
        self.pending_bytes += r.head.len() + r.data.len();
        self.pending.push(r);
    }

    /// Send every pending reply, in as few system calls as the stream allows.
    fn send(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let Replies { w, pending, .. } = self;
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(pending.len() * 2);
        for r in pending.iter() {
            slices.push(IoSlice::new(&r.head));
            slices.extend(r.data.slices().map(IoSlice::new));
        }
        let res = write_all_vectored(w, &mut slices).and_then(|_| w.flush());
        drop(slices);
        self.pending.clear();
        self.pending_bytes = 0;
        res
    }
}

/// `write_all` over many slices, at most `MAX_IOV` per system call.
fn write_all_vectored<W: Write>(w: &mut W, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(&bufs[..bufs.len().min(MAX_IOV)]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

struct Job {
    req: Request,
    payload: Payload<'static>,
    charged: u64,
    start: Instant,
    refused: Option<(u32, String)>,
}

/// Serve requests until DISC, end of stream or an unrecoverable error. With
/// `workers == 0` every request runs on the reading thread (fuzzing, tests).
pub fn serve<R: Read, W: Write + Send + 'static>(
    r: &mut BufReader<R>,
    w: W,
    neg: &Negotiated,
    workers: usize,
    observer: Observe,
) -> io::Result<()> {
    let replies = Arc::new(Mutex::new(Replies {
        w,
        pending: Vec::new(),
        pending_bytes: 0,
    }));
    let budget = Arc::new(Budget {
        used: Mutex::new(0),
        freed: Condvar::new(),
    });
    // Reply to a request (sent now with any kept back if `send`, else kept
    // back), free its budget, observe it.
    let answer = {
        let replies = replies.clone();
        let budget = budget.clone();
        let structured = neg.structured;
        move |job: &Job, out: Outcome, send: bool| -> io::Result<()> {
            let error = matches!(out, Outcome::Error(..));
            let reply = encode_reply(&job.req, structured, out);
            let res = {
                let mut rp = replies.lock();
                rp.push(reply);
                if send || rp.pending_bytes >= PENDING_BYTES {
                    rp.send()
                } else {
                    Ok(())
                }
            };
            budget.release(job.charged);
            let len = if job.req.kind == CMD_FLUSH {
                0
            } else {
                job.req.length as u64
            };
            observer(
                op_name(job.req.kind),
                job.req.offset,
                len,
                job.start.elapsed(),
                error,
            );
            res
        }
    };
    let run = {
        let answer = answer.clone();
        let dev = neg.dev.clone();
        move |mut job: Job| -> io::Result<()> {
            let out = match job.refused.take() {
                Some((e, m)) => Outcome::Error(e, m),
                None => execute(dev.as_ref(), &job.req, std::mem::take(&mut job.payload)),
            };
            answer(&job, out, true)
        }
    };
    let send_pending = || replies.lock().send();
    if workers == 0 {
        return read_loop(r, neg, &budget, &send_pending, &mut |job| run(job));
    }
    let (tx, rx) = crossbeam_channel::bounded::<Job>(workers * 2);
    let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dev = neg.dev.clone();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let rx = rx.clone();
            let run = run.clone();
            let failed = failed.clone();
            scope.spawn(move || {
                for job in rx {
                    if run(job).is_err() {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
        drop(rx);
        let res = read_loop(r, neg, &budget, &send_pending, &mut |job| {
            if failed.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "reply failed"));
            }
            if job.req.kind == CMD_READ && job.refused.is_none() {
                if let Some(out) = execute_from_memory(dev.as_ref(), &job.req) {
                    return answer(&job, out, false);
                }
            }
            tx.send(job)
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "workers gone"))
        });
        drop(tx);
        // Replies kept back go out even when the client closed its side.
        res.and(send_pending())
    })
}

/// Read requests and hand each to `dispatch`; returns at DISC or end of stream.
/// `send_pending` is called before a read that could block on the stream.
fn read_loop<R: Read>(
    r: &mut BufReader<R>,
    neg: &Negotiated,
    budget: &Budget,
    send_pending: &dyn Fn() -> io::Result<()>,
    dispatch: &mut dyn FnMut(Job) -> io::Result<()>,
) -> io::Result<()> {
    loop {
        if r.buffer().len() < REQUEST_LEN {
            send_pending()?;
        }
        let mut h = [0u8; REQUEST_LEN];
        match r.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let start = Instant::now();
        let req = decode_request(&h).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if req.kind == CMD_DISC {
            return Ok(());
        }
        let refused = validate(&req, neg, neg.dev.size());
        let has_payload = req.kind == CMD_WRITE;
        if has_payload && req.length > MAX_PAYLOAD {
            // Too long to hold: skip it without allocating, then refuse.
            io::copy(&mut r.by_ref().take(req.length as u64), &mut io::sink())?;
            dispatch(Job {
                req,
                payload: Payload::default(),
                charged: 0,
                start,
                refused,
            })?;
            continue;
        }
        let charged = if refused.is_none() && req.kind == CMD_READ || has_payload {
            req.length as u64
        } else {
            0
        };
        budget.acquire(charged);
        let mut payload = Payload::default();
        if has_payload && r.buffer().len() < req.length as usize {
            if let Err(e) = send_pending() {
                budget.release(charged);
                return Err(e);
            }
        }
        if has_payload {
            // Read straight into block-sized buffers that become the volume's
            // records as they are (no zero-filled staging buffer, no copy).
            let bs = neg.dev.block_size() as u64;
            match Payload::read_from(r, req.offset, req.length as usize, bs) {
                Ok(p) => payload = p,
                Err(e) => {
                    budget.release(charged);
                    return Err(e);
                }
            }
        }
        dispatch(Job {
            req,
            payload,
            charged,
            start,
            refused,
        })?;
    }
}
