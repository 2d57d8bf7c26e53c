//! The TCP server: listeners for NFS (with MOUNT and portmap on the same port)
//! and for the portmapper, one reader and one writer thread per connection, a
//! shared pool of worker threads, and the duplicate request cache.
//!
//! Invariants:
//! - One connection never stalls another: a connection's reader blocks only on
//!   its own socket and on its own in-flight limit (`MAX_IN_FLIGHT` requests
//!   read but not yet answered); workers never write to sockets (each
//!   connection's writer does, with a timeout), so a client that stops reading
//!   holds at most its own slots. A request that arrives alone (nothing of its
//!   connection in flight, nothing read behind it) is answered by the reader
//!   itself, which blocks only its own connection.
//! - Memory is bounded: at most `max_connections` connections, each with at
//!   most `MAX_IN_FLIGHT` records in flight plus its reader's buffer and
//!   `SPARE_RECORDS` spare ones, each of at most `rpc::MAX_RECORD` bytes.
//! - A panic in a procedure becomes SYSTEM_ERR for that call.
//! - Non-idempotent NFS calls (SETATTR, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE,
//!   RMDIR, RENAME, LINK) go through the duplicate request cache keyed by client
//!   address, xid, procedure and a hash of the arguments: a retransmission after
//!   a reconnect gets the first reply, one that arrives while the first is still
//!   running is dropped (the client retransmits again).
//! - The write verifier is the instant the server started; it changes only
//!   when the server (the daemon) restarts.

use crate::exports::{Exports, FsProvider};
use crate::handle::Handle;
use crate::mount::{self, MountList};
use crate::nfs3::{self, args, Ctx, Note};
use crate::nfs4;
use crate::portmap::{self, PortMap};
use crate::queue::Queue;
use crate::rpc::{self, BadCall, Call, RpcError, PROG_MOUNT, PROG_NFS, PROG_PORTMAP};
use crate::stats::Stats;
use crate::xdr::{pad, Reader};
use cachalot_datasets::Payload;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::io;
use std::io::{BufRead, Read};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Requests of one connection read but not yet answered.
pub const MAX_IN_FLIGHT: usize = 16;
/// Entries of the duplicate request cache.
const DRC_ENTRIES: usize = 4096;
/// How long a reply is kept for retransmissions (a client retries within
/// seconds; an older entry with the same key is a new request that reused an xid).
const DRC_TTL: Duration = Duration::from_secs(120);
/// A reply not written within this time closes the connection.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where to listen.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// NFS, MOUNT and portmap on one port.
    pub nfs: SocketAddr,
    /// The portmapper's own port (111), if wanted.
    pub portmap: Option<SocketAddr>,
    pub workers: usize,
    pub max_connections: usize,
    /// The NFSv4.1 lease time.
    pub lease: Duration,
    /// Where the NFSv4.1 stable record of clients lives (none: no grace
    /// period after a restart).
    pub state_dir: Option<std::path::PathBuf>,
    /// Bytes all NFSv4.1 sessions' reply caches may take together.
    pub reply_cache: usize,
}

impl ServerConfig {
    pub fn new(nfs: SocketAddr) -> ServerConfig {
        ServerConfig {
            nfs,
            portmap: None,
            workers: 16,
            max_connections: 256,
            lease: nfs4::state::DEFAULT_LEASE,
            state_dir: None,
            reply_cache: nfs4::state::REPLY_CACHE_BUDGET,
        }
    }
}

type DrcKey = (IpAddr, u32, u32, u64);
/// When the call arrived, and its reply once there is one.
type DrcEntry = (Instant, Option<Arc<Vec<u8>>>);

#[derive(Default)]
struct Drc {
    map: HashMap<DrcKey, DrcEntry>,
    order: VecDeque<DrcKey>,
}

enum DrcState {
    New,
    InProgress,
    Done(Arc<Vec<u8>>),
}

impl Drc {
    fn begin(&mut self, key: DrcKey) -> DrcState {
        match self.map.get(&key) {
            Some((t, _)) if t.elapsed() > DRC_TTL => {
                self.map.insert(key, (Instant::now(), None));
                return DrcState::New;
            }
            Some((_, Some(r))) => return DrcState::Done(r.clone()),
            Some((_, None)) => return DrcState::InProgress,
            None => {}
        }
        if self.order.len() >= DRC_ENTRIES {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
        self.map.insert(key, (Instant::now(), None));
        self.order.push_back(key);
        DrcState::New
    }
    fn finish(&mut self, key: DrcKey, reply: &[u8]) {
        if let Some(slot) = self.map.get_mut(&key) {
            slot.1 = Some(Arc::new(reply.to_vec()));
        }
    }
}

fn non_idempotent(proc_: u32) -> bool {
    matches!(proc_, 2 | 8..=15)
}

struct Shared {
    exports: Exports,
    mounts: MountList,
    write_verf: [u8; 8],
    drc: Mutex<Drc>,
    stats: Stats,
    v4: nfs4::state::State,
    portmap: PortMap,
    stop: AtomicBool,
    connections: AtomicUsize,
    max_connections: usize,
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
}

/// One connection's state shared by its reader, the workers and its writer.
struct Conn {
    peer: SocketAddr,
    /// The peer's address as analytics name the client.
    peer_name: String,
    local: SocketAddr,
    replies: Queue<Option<Reply>>,
    in_flight: Mutex<usize>,
    freed: Condvar,
    /// Record buffers the workers are done with, for the reader to fill again
    /// (at most `SPARE_RECORDS`): a pipelined stream of 1 MiB WRITEs reuses a
    /// few buffers instead of allocating and faulting in a fresh one per record.
    spare: Mutex<Vec<Vec<u8>>>,
}

/// Record buffers a connection keeps for reuse beyond the one its reader holds.
const SPARE_RECORDS: usize = 4;

impl Conn {
    fn release(&self) {
        let mut n = self.in_flight.lock();
        *n = n.saturating_sub(1);
        self.freed.notify_one();
    }
    /// A buffer for the reader's next record: a spare one, else a new one.
    fn take_spare(&self) -> Vec<u8> {
        self.spare.lock().pop().unwrap_or_default()
    }
    fn recycle(&self, record: Vec<u8>) {
        let mut spare = self.spare.lock();
        if spare.len() < SPARE_RECORDS {
            spare.push(record);
        }
    }
}

struct Job {
    conn: Arc<Conn>,
    record: Vec<u8>,
    /// A WRITE's data read apart from `record` (see [`read_request`]).
    data: Option<Payload<'static>>,
}

/// Records shorter than this are read whole (a WRITE of a few bytes gains
/// nothing from having its data apart).
const SPLIT_MIN: usize = 4096;
/// What of a long record is read before deciding whether it is a WRITE: the
/// call header and WRITE's arguments take about 200 bytes.
const SPLIT_HEAD: usize = 512;
const PROC3_WRITE: u32 = 7;
const PROC4_COMPOUND: u32 = 1;

/// Read the next request into `record` (`Ok(None)`: the peer closed). A
/// single-fragment WRITE (NFSv3, or the first WRITE of an NFSv4.1 COMPOUND)
/// of a shared dataset's file has its data read apart, in pieces that end
/// where the file's records do (the dataset's record size from the write's
/// offset), so each whole record's piece becomes the file's block without
/// another copy (`Fs::write` of a [`Payload`]; the data was copied once from
/// the connection's buffer into the record before). `record` then holds the
/// call without the data: NFSv3's up to the data's length word and the XDR
/// padding after the data; a COMPOUND's with that WRITE's data an empty
/// opaque (length word 0, no padding) and the operations after it, so the
/// COMPOUND decoder reads it as ever and the first WRITE takes the payload
/// (`nfs4::compound`). Anything else is read whole, as before.
fn read_request<R: Read>(
    sh: &Shared,
    r: &mut io::BufReader<R>,
    record: &mut Vec<u8>,
) -> io::Result<Option<Option<Payload<'static>>>> {
    record.clear();
    let Some(mark) = rpc::read_mark(r)? else {
        return Ok(None);
    };
    let (len, last) = mark;
    if !last || !(SPLIT_MIN..=rpc::MAX_RECORD).contains(&len) {
        rpc::read_record_from(r, record, mark, rpc::MAX_RECORD)?;
        return Ok(Some(None));
    }
    rpc::read_exact_into(r, record, SPLIT_HEAD)?;
    // Only data that goes past the head and ends, with its XDR padding,
    // within the record (else the decoder's error as ever).
    let split = write_data_at(sh, record)
        .filter(|w| w.at + w.len > SPLIT_HEAD && w.at + w.len + pad(w.len) <= len);
    let Some(w) = split else {
        rpc::read_exact_into(r, record, len - SPLIT_HEAD)?;
        return Ok(Some(None));
    };
    // The data's first bytes came with the head.
    let early = record.split_off(w.at);
    let rest = Unbuffered {
        r: &mut *r,
        left: w.len - early.len(),
    };
    let data = Payload::read_from(&mut (&early[..]).chain(rest), w.off, w.len, w.piece)?;
    rpc::read_exact_into(r, record, len - w.at - w.len)?;
    if w.v4 {
        // The data becomes an empty opaque: length 0, its padding dropped.
        record[w.at - 4..w.at].copy_from_slice(&0u32.to_be_bytes());
        record.drain(w.at..w.at + pad(w.len));
    }
    Ok(Some(Some(data)))
}

/// Reads `left` bytes of a connection: what its `BufReader` holds first,
/// then straight from the socket into the caller's buffer. `BufReader`
/// bypasses its buffer only for reads larger than the buffer (256 KiB), so
/// reading a WRITE's 128 KiB pieces through it copied every byte twice
/// (socket to buffer, buffer to piece: 6% of a 1 MiB WRITE stream's server
/// samples).
struct Unbuffered<'a, R> {
    r: &'a mut io::BufReader<R>,
    left: usize,
}

impl<R: Read> Read for Unbuffered<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let want = out.len().min(self.left);
        let held = self.r.buffer();
        let n = if held.is_empty() {
            self.r.get_mut().read(&mut out[..want])?
        } else {
            let n = held.len().min(want);
            out[..n].copy_from_slice(&held[..n]);
            self.r.consume(n);
            n
        };
        self.left -= n;
        Ok(n)
    }
}

/// Where a WRITE call's data is (see [`write_data_at`]).
struct DataAt {
    /// Where the data starts in the record.
    at: usize,
    len: usize,
    /// The write's file offset.
    off: u64,
    /// The dataset's record size.
    piece: u64,
    /// An NFSv4.1 COMPOUND's WRITE (else NFSv3's).
    v4: bool,
}

/// If `head` begins an NFSv3 WRITE call, or an NFSv4.1 COMPOUND whose first
/// WRITE follows a PUTFH within `head`, to a file of a dataset this server
/// knows: where its data is.
fn write_data_at(sh: &Shared, head: &[u8]) -> Option<DataAt> {
    let call = rpc::decode_call(head).ok()?;
    let args_at = head.len() - call.args.len();
    let (fh, at, len, off, v4) = match (call.prog, call.vers, call.proc_) {
        (PROG_NFS, 3, PROC3_WRITE) => {
            let mut r = Reader::new(call.args);
            let (fh, off, _, _) = args::write_head(&mut r).ok()?;
            let len = r.u32().ok()? as usize;
            (fh, head.len() - r.remaining(), len, off, false)
        }
        (PROG_NFS, 4, PROC4_COMPOUND) => {
            let w = nfs4::ops::first_write(call.args, args::MAX_IO as usize)?;
            (w.fh, args_at + w.data_at, w.len, w.offset, true)
        }
        _ => return None,
    };
    if len > args::MAX_IO as usize {
        return None;
    }
    let h = Handle::decode(fh)?;
    let piece = sh
        .exports
        .by_id(h.pool_guid, h.ds_id)
        .ok()?
        .fs
        .record_size();
    Some(DataAt {
        at,
        len,
        off,
        piece,
        v4,
    })
}

/// A running NFS server.
pub struct NfsServer {
    shared: Arc<Shared>,
    nfs_addr: SocketAddr,
    portmap_addr: Option<SocketAddr>,
    portmap_error: Option<String>,
    threads: Vec<JoinHandle<()>>,
    jobs: Arc<Queue<Job>>,
}

fn verifier() -> [u8; 8] {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    ns.to_be_bytes()
}

impl NfsServer {
    /// Bind the listeners and start serving. A portmapper port that cannot be
    /// bound is reported by [`NfsServer::portmap_error`], not an error.
    pub fn start(provider: Arc<dyn FsProvider>, cfg: ServerConfig) -> io::Result<NfsServer> {
        let nfs = TcpListener::bind(cfg.nfs)?;
        let nfs_addr = nfs.local_addr()?;
        let (pm, portmap_error) = match cfg.portmap {
            Some(a) => match TcpListener::bind(a) {
                Ok(l) => (Some(l), None),
                Err(e) => (None, Some(format!("portmapper on {a}: {e}"))),
            },
            None => (None, None),
        };
        let portmap_addr = match &pm {
            Some(l) => Some(l.local_addr()?),
            None => None,
        };
        let shared = Arc::new(Shared {
            exports: Exports::new(provider),
            mounts: MountList::default(),
            write_verf: verifier(),
            drc: Mutex::new(Drc::default()),
            stats: Stats::new(),
            v4: nfs4::state::State::with_reply_cache(
                cfg.lease,
                cfg.state_dir.as_ref().map(|d| d.join("nfs4-clients")),
                cfg.reply_cache,
            ),
            portmap: PortMap {
                nfs_port: nfs_addr.port(),
                portmap_port: portmap_addr.map(|a| a.port()),
            },
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            max_connections: cfg.max_connections.max(1),
            conns: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
        });
        let jobs = Arc::new(Queue::<Job>::new(cfg.max_connections.max(1) * 2));
        let mut threads = vec![];
        for i in 0..cfg.workers.max(1) {
            let (sh, rx) = (shared.clone(), jobs.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("nfs-worker-{i}"))
                    .spawn(move || worker(&sh, &rx))?,
            );
        }
        for l in std::iter::once(nfs).chain(pm) {
            let (sh, tx) = (shared.clone(), jobs.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("nfs-accept".into())
                    .spawn(move || accept_loop(sh, l, tx))?,
            );
        }
        Ok(NfsServer {
            shared,
            nfs_addr,
            portmap_addr,
            portmap_error,
            threads,
            jobs,
        })
    }

    pub fn nfs_addr(&self) -> SocketAddr {
        self.nfs_addr
    }
    pub fn portmap_addr(&self) -> Option<SocketAddr> {
        self.portmap_addr
    }
    pub fn portmap_error(&self) -> Option<&str> {
        self.portmap_error.as_deref()
    }
    pub fn exports(&self) -> &Exports {
        &self.shared.exports
    }
    /// Clients that mounted (address, path).
    pub fn mounts(&self) -> Vec<(IpAddr, String)> {
        self.shared.mounts.snapshot()
    }

    /// Stop serving: close listeners and connections, join every thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if self.shared.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        for a in [Some(self.nfs_addr), self.portmap_addr]
            .into_iter()
            .flatten()
        {
            let _ = TcpStream::connect_timeout(&a, Duration::from_secs(1));
        }
        for (_, s) in self.shared.conns.lock().drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.jobs.close();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for NfsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(sh: Arc<Shared>, l: TcpListener, jobs: Arc<Queue<Job>>) {
    for s in l.incoming() {
        if sh.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(s) = s else { continue };
        if sh.connections.load(Ordering::SeqCst) >= sh.max_connections {
            let _ = s.shutdown(Shutdown::Both);
            continue;
        }
        let (sh2, jobs) = (sh.clone(), jobs.clone());
        sh.connections.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("nfs-conn".into())
            .spawn(move || {
                serve_connection(&sh2, s, jobs);
                sh2.connections.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            sh.connections.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn serve_connection(sh: &Arc<Shared>, s: TcpStream, jobs: Arc<Queue<Job>>) {
    let (Ok(peer), Ok(local)) = (s.peer_addr(), s.local_addr()) else {
        return;
    };
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    let id = sh.next_conn.fetch_add(1, Ordering::SeqCst);
    let (Ok(mut rd), Ok(wr), Ok(reg), Ok(mut inline_wr)) =
        (s.try_clone(), s.try_clone(), s.try_clone(), s.try_clone())
    else {
        return;
    };
    sh.conns.lock().insert(id, reg);
    let conn = Arc::new(Conn {
        peer,
        peer_name: peer.ip().to_string(),
        local,
        // Never full: at most MAX_IN_FLIGHT replies plus the stop marker.
        replies: Queue::new(MAX_IN_FLIGHT + 2),
        in_flight: Mutex::new(0),
        freed: Condvar::new(),
        spare: Mutex::new(Vec::new()),
    });
    let wconn = conn.clone();
    let writer = std::thread::Builder::new()
        .name("nfs-writer".into())
        .spawn(move || write_loop(wr, &wconn));
    let mut reader = io::BufReader::with_capacity(256 << 10, &mut rd);
    // The buffer the next record is read into; kept across inline requests,
    // handed to the worker with a pipelined one (and replaced by a spare).
    let mut record = Vec::new();
    while !sh.stop.load(Ordering::SeqCst) {
        let Ok(Some(data)) = read_request(sh, &mut reader, &mut record) else {
            break;
        };
        // A request with nothing else of this connection in flight and nothing
        // more read behind it (a client that waits for each answer) is answered
        // here, saving the two thread hand-offs; anything pipelined goes to the
        // workers so its requests run in parallel. Safe to write here: with
        // nothing in flight the writer thread has no reply queued or being
        // written, and only this thread queues jobs. A client that stops reading
        // stalls only its own connection (the write has WRITE_TIMEOUT).
        if reader.buffer().is_empty() && *conn.in_flight.lock() == 0 {
            let reply = handle_record(sh, &conn, &record, data).unwrap_or_default();
            if !reply.is_empty() && reply.send(&mut inline_wr).is_err() {
                break;
            }
            continue;
        }
        {
            let mut n = conn.in_flight.lock();
            while *n >= MAX_IN_FLIGHT {
                conn.freed.wait_for(&mut n, Duration::from_millis(200));
                if sh.stop.load(Ordering::SeqCst) {
                    break;
                }
            }
            *n += 1;
        }
        let job = Job {
            conn: conn.clone(),
            record: std::mem::replace(&mut record, conn.take_spare()),
            data,
        };
        if !jobs.push(job) {
            break;
        }
    }
    let _ = s.shutdown(Shutdown::Read);
    // Let the writer finish what is in flight, then stop it.
    {
        let mut n = conn.in_flight.lock();
        let deadline = Instant::now() + WRITE_TIMEOUT;
        while *n > 0 && Instant::now() < deadline && !sh.stop.load(Ordering::SeqCst) {
            conn.freed.wait_for(&mut n, Duration::from_millis(100));
        }
    }
    conn.replies.push(None);
    if let Ok(w) = writer {
        let _ = w.join();
    }
    let _ = s.shutdown(Shutdown::Both);
    sh.conns.lock().remove(&id);
}

fn write_loop(mut s: TcpStream, conn: &Conn) {
    let mut broken = false;
    while let Some(Some(reply)) = conn.replies.pop() {
        if !broken && !reply.is_empty() && reply.send(&mut s).is_err() {
            broken = true;
            let _ = s.shutdown(Shutdown::Both);
        }
        conn.release();
    }
}

fn worker(sh: &Shared, jobs: &Queue<Job>) {
    while let Some(job) = jobs.pop() {
        let reply = handle_record(sh, &job.conn, &job.record, job.data);
        // An empty reply still frees the slot (no bytes are written).
        job.conn.replies.push(Some(reply.unwrap_or_default()));
        job.conn.recycle(job.record);
    }
}

/// The reply to one record (`None`: drop it); `data`: a WRITE's data read
/// apart from it.
fn handle_record(
    sh: &Shared,
    conn: &Conn,
    record: &[u8],
    data: Option<Payload<'static>>,
) -> Option<Reply> {
    let call = match rpc::decode_call(record) {
        Ok(c) => c,
        Err(BadCall::Drop) => return None,
        Err(BadCall::Reply(xid, e)) => return Some(Reply::whole(rpc::error_reply(xid, e))),
    };
    let xid = call.xid;
    let res = catch_unwind(AssertUnwindSafe(|| match call.prog {
        PROG_NFS if call.vers == 3 => nfs_call(sh, conn, &call, data),
        PROG_NFS if call.vers == 4 => nfs4_call(sh, conn, &call, data),
        PROG_NFS => Err(RpcError::ProgMismatch { low: 3, high: 4 }),
        PROG_MOUNT if call.vers == 3 => mount::dispatch(
            &sh.exports,
            &sh.mounts,
            conn.peer.ip(),
            call.proc_,
            call.args,
        )
        .map(|w| Some(ok_reply(xid, w.buf))),
        PROG_MOUNT => Err(RpcError::ProgMismatch { low: 3, high: 3 }),
        PROG_PORTMAP if (2..=4).contains(&call.vers) => portmap::dispatch(
            &sh.portmap,
            conn.local.ip(),
            call.vers,
            call.proc_,
            call.args,
        )
        .map(|w| Some(ok_reply(xid, w.buf))),
        PROG_PORTMAP => Err(RpcError::ProgMismatch { low: 2, high: 4 }),
        _ => Err(RpcError::ProgUnavail),
    }));
    match res {
        Ok(Ok(Some(reply))) => Some(reply),
        Ok(Ok(None)) => None,
        Ok(Err(e)) => Some(Reply::whole(rpc::error_reply(xid, e))),
        Err(_) => Some(Reply::whole(rpc::error_reply(xid, RpcError::SystemErr))),
    }
}

/// A reply ready to send: the RPC header and the procedure's result, kept
/// apart so a large result (a 1 MiB READ) goes to the socket from the buffer it
/// was encoded in instead of being copied behind the header.
#[derive(Default)]
struct Reply {
    head: Vec<u8>,
    body: Vec<u8>,
}

impl Reply {
    /// A reply already encoded in one piece (an RPC error, a cached reply).
    fn whole(bytes: Vec<u8>) -> Reply {
        Reply {
            head: bytes,
            body: Vec::new(),
        }
    }
    fn is_empty(&self) -> bool {
        self.head.is_empty() && self.body.is_empty()
    }
    /// The reply in one buffer (for the duplicate request cache).
    fn to_vec(&self) -> Vec<u8> {
        [&self.head[..], &self.body[..]].concat()
    }
    fn send(&self, w: &mut impl io::Write) -> io::Result<()> {
        rpc::write_record_parts(w, &[&self.head, &self.body])
    }
}

fn ok_reply(xid: u32, body: Vec<u8>) -> Reply {
    Reply {
        head: rpc::success(xid).buf,
        body,
    }
}

fn args_hash(b: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

/// A v3 call's arguments: decoded from the record, or a WRITE's head with
/// the data read apart.
enum Parsed<'a> {
    Args(args::Args<'a>),
    Write(&'a [u8], u64, u32, u32, Payload<'static>),
}

fn nfs_call(
    sh: &Shared,
    conn: &Conn,
    call: &Call<'_>,
    data: Option<Payload<'static>>,
) -> Result<Option<Reply>, RpcError> {
    let start = Instant::now();
    let parsed = match data {
        Some(data) => {
            let (fh, off, count, stable) = args::write_head(&mut Reader::new(call.args))?;
            Parsed::Write(fh, off, count, stable, data)
        }
        None => match args::decode(call.proc_, call.args) {
            None => return Err(RpcError::ProcUnavail),
            Some(Err(_)) => return Err(RpcError::GarbageArgs),
            Some(Ok(a)) => Parsed::Args(a),
        },
    };
    let client = conn.peer.ip();
    // Only non-idempotent procedures use the duplicate request cache, so only
    // they pay for hashing their arguments.
    let key =
        non_idempotent(call.proc_).then(|| (client, call.xid, call.proc_, args_hash(call.args)));
    if let Some(key) = key {
        match sh.drc.lock().begin(key) {
            DrcState::New => {}
            DrcState::InProgress => return Ok(None),
            DrcState::Done(r) => return Ok(Some(Reply::whole(r.to_vec()))),
        }
    }
    let ctx = Ctx {
        exports: &sh.exports,
        client,
        client_name: &conn.peer_name,
        cred: &call.cred,
        write_verf: sh.write_verf,
        note: std::cell::RefCell::new(Note::default()),
    };
    let body = match parsed {
        Parsed::Args(a) => nfs3::dispatch(&ctx, a),
        Parsed::Write(fh, off, count, stable, data) => {
            nfs3::procs::write(&ctx, fh, off, count, stable, data)
        }
    };
    let reply = ok_reply(call.xid, body.buf);
    if let Some(key) = key {
        sh.drc.lock().finish(key, &reply.to_vec());
    }
    let note = ctx.note.into_inner();
    let share = note.share.as_deref().map(|s| (s, note.root));
    if let (Some((share, root)), Some((obj, parent, name))) = (share, &note.named) {
        sh.stats.name(share, root, *obj, *parent, name);
    }
    sh.stats.record(
        &conn.peer_name,
        share,
        args::PROC_NAMES[call.proc_ as usize],
        note.obj,
        note.bytes,
        start.elapsed(),
    );
    Ok(Some(reply))
}

/// NFSv4 (NULL and COMPOUND, minor version 1). Sessions give exactly-once
/// semantics, so the duplicate request cache is not used.
/// `data`: the first WRITE's data, read apart from the record.
fn nfs4_call(
    sh: &Shared,
    conn: &Conn,
    call: &Call<'_>,
    data: Option<Payload<'static>>,
) -> Result<Option<Reply>, RpcError> {
    match call.proc_ {
        0 => Ok(Some(ok_reply(call.xid, Vec::new()))),
        1 => {
            let ctx = Ctx {
                exports: &sh.exports,
                client: conn.peer.ip(),
                client_name: &conn.peer_name,
                cred: &call.cred,
                write_verf: sh.write_verf,
                note: std::cell::RefCell::new(Note::default()),
            };
            let body = nfs4::compound(&ctx, &sh.v4, &sh.stats, call.args, data)?;
            Ok(Some(ok_reply(call.xid, body)))
        }
        _ => Err(RpcError::ProcUnavail),
    }
}
