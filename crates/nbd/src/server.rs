//! Listeners and the connection table: a thread per connection, a bounded number
//! of connections, and the means to drop the connections of an export at once
//! (share switched off, volume destroyed).
//!
//! Invariants:
//! - Every live connection is in the table with its client and, once chosen, its
//!   export; `disconnect` shuts its socket down, which ends its threads.
//! - During the handshake reads time out (`HANDSHAKE_TIMEOUT`): an idle client
//!   cannot hold a slot forever. In transmission an idle client is legitimate;
//!   writes time out (`WRITE_TIMEOUT`) so a client that stops reading frees its
//!   workers.
//! - After `Exports::open` succeeds the connection is re-checked against the
//!   table's revocations, so a share switched off during a handshake does not
//!   survive it.

use crate::handshake::{negotiate, Exports};
use crate::transmission::serve;
use cachalot_analytics::Stat;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// Most connections at once (each has a reader and `WORKERS` workers).
const MAX_CONNECTIONS: usize = 128;
/// Requests of one connection executed at once.
const WORKERS: usize = 4;

/// A TCP or unix stream.
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }
    fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(b),
            Stream::Unix(s) => s.read(b),
        }
    }
}
impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(b),
            Stream::Unix(s) => s.write(b),
        }
    }
    fn write_vectored(&mut self, b: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(b),
            Stream::Unix(s) => s.write_vectored(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// One row of `share list`'s CLIENTS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    pub client: String,
    /// Empty while the client is still choosing.
    pub export: String,
    pub since: Instant,
}

struct Conn {
    info: ConnectionInfo,
    stream: Stream,
}

/// The NBD server: listeners share one connection table and export map.
pub struct NbdServer {
    exports: Arc<dyn Exports>,
    ops: Stat,
    bytes: Stat,
    conns: Mutex<BTreeMap<u64, Conn>>,
    next_id: AtomicU64,
    stopping: Arc<AtomicBool>,
    unix_paths: Mutex<Vec<PathBuf>>,
}

impl NbdServer {
    pub fn new(exports: Arc<dyn Exports>) -> Arc<NbdServer> {
        let reg = cachalot_analytics::global();
        let stat = |name: &str| {
            let info = cachalot_analytics::catalog::info(name);
            reg.stat(name, info.map_or(&[][..], |i| i.dims))
        };
        Arc::new(NbdServer {
            exports,
            ops: stat("nbd.ops"),
            bytes: stat("nbd.bytes"),
            conns: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            stopping: Arc::new(AtomicBool::new(false)),
            unix_paths: Mutex::new(Vec::new()),
        })
    }

    /// Listen on a TCP address (port 0: any free port); returns the bound address.
    pub fn listen_tcp(self: &Arc<Self>, addr: &str) -> io::Result<SocketAddr> {
        let l = TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("nbd: cannot listen on {addr}: {e}")))?;
        let bound = l.local_addr()?;
        l.set_nonblocking(true)?;
        let me = self.clone();
        std::thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || {
                me.accept_loop(|| {
                    l.accept().map(|(s, peer)| {
                        let _ = s.set_nodelay(true);
                        (Stream::Tcp(s), peer.to_string())
                    })
                })
            })?;
        Ok(bound)
    }

    /// Listen on a unix socket at `path` (replacing a stale socket file).
    pub fn listen_unix(self: &Arc<Self>, path: &Path) -> io::Result<()> {
        let _ = std::fs::remove_file(path);
        let l = UnixListener::bind(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("nbd: cannot listen on {}: {e}", path.display()),
            )
        })?;
        l.set_nonblocking(true)?;
        self.unix_paths.lock().push(path.to_path_buf());
        let me = self.clone();
        std::thread::Builder::new()
            .name("nbd-accept-unix".into())
            .spawn(move || {
                me.accept_loop(|| l.accept().map(|(s, _)| (Stream::Unix(s), "unix".into())))
            })?;
        Ok(())
    }

    fn accept_loop(self: &Arc<Self>, mut accept: impl FnMut() -> io::Result<(Stream, String)>) {
        while !self.stopping.load(Ordering::Acquire) {
            match accept() {
                Ok((s, peer)) => self.start(s, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn start(self: &Arc<Self>, s: Stream, client: String) {
        // Accepted sockets inherit non-blocking mode on some systems: be explicit.
        let blocking = match &s {
            Stream::Tcp(t) => t.set_nonblocking(false),
            Stream::Unix(u) => u.set_nonblocking(false),
        };
        if blocking.is_err() || self.conns.lock().len() >= MAX_CONNECTIONS {
            s.shutdown();
            return;
        }
        let Ok(handle) = s.try_clone() else {
            return;
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let info = ConnectionInfo {
            client,
            export: String::new(),
            since: Instant::now(),
        };
        self.conns.lock().insert(
            id,
            Conn {
                info,
                stream: handle,
            },
        );
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("nbd-conn".into())
            .spawn(move || {
                let _ = me.connection(id, s);
                if let Some(c) = me.conns.lock().remove(&id) {
                    c.stream.shutdown();
                }
            });
        if spawned.is_err() {
            if let Some(c) = self.conns.lock().remove(&id) {
                c.stream.shutdown();
            }
        }
    }

    fn connection(&self, id: u64, mut s: Stream) -> io::Result<()> {
        s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        s.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let Some(neg) = negotiate(&mut s, self.exports.as_ref())? else {
            return Ok(());
        };
        {
            let mut conns = self.conns.lock();
            let Some(c) = conns.get_mut(&id) else {
                return Ok(()); // disconnected during the handshake
            };
            c.info.export = neg.name.clone();
        }
        // Re-check after recording the export: a revocation in between is seen.
        if self.exports.open(&neg.name).is_err() {
            return Ok(());
        }
        s.set_read_timeout(None)?;
        let w = s.try_clone()?;
        let client = self.conns.lock().get(&id).map(|c| c.info.client.clone());
        let observer = self.observer(client.unwrap_or_default(), neg.name.clone(), neg.dev.size());
        // Buffered: a request header costs no system call of its own.
        let mut r = io::BufReader::with_capacity(64 << 10, s);
        serve(&mut r, w, &neg, WORKERS, observer)
    }

    /// Live connections (client, export).
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.conns.lock().values().map(|c| c.info.clone()).collect()
    }

    /// Close every connection whose export `revoked` says is gone (share
    /// switched off, volume or snapshot destroyed, pool exported).
    pub fn disconnect_where(&self, revoked: impl Fn(&str) -> bool) -> usize {
        let conns = self.conns.lock();
        let mut n = 0;
        for c in conns.values() {
            if !c.info.export.is_empty() && revoked(&c.info.export) {
                c.stream.shutdown();
                n += 1;
            }
        }
        n
    }

    /// Close the connections to exports that `Exports::open` no longer serves.
    pub fn revalidate(&self) -> usize {
        let exports = self.exports.clone();
        self.disconnect_where(|name| exports.open(name).is_err())
    }

    /// Stop accepting and close every connection.
    pub fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        for c in self.conns.lock().values() {
            c.stream.shutdown();
        }
        for p in self.unix_paths.lock().drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl NbdServer {
    /// Analytics of one connection: `nbd.ops` (client, volume, op, offset region;
    /// latency and size histograms) and `nbd.bytes` (client, volume, op). The
    /// client is its address without the port (one key per host, not per
    /// connection); the offset region is one of about 64 equal parts of the
    /// volume, named by its start, for the heat map of where the volume is hot.
    fn observer(&self, client: String, volume: String, size: u64) -> crate::transmission::Observe {
        let (ops, bytes) = (self.ops.clone(), self.bytes.clone());
        let host = client
            .rsplit_once(':')
            .map_or(client.as_str(), |(h, _)| h)
            .to_string();
        let region = (size / 64).next_power_of_two().max(1 << 20);
        // Labels made once per connection, not per request (at most 65 regions).
        let labels: Vec<String> = (0..=size / region)
            .map(|i| region_label(i * region))
            .collect();
        Arc::new(move |op, offset, len, latency, _error| {
            // A flush covers no range (its offset field is 0 by the protocol): it
            // has no region, as SYNCHRONIZE CACHE in scsi.ops; counted in region 0
            // it made the start of every flushed volume look hot.
            let label = if op == "flush" {
                "-"
            } else {
                &labels[((offset / region) as usize).min(labels.len() - 1)]
            };
            ops.record(&[&host, &volume, op, label], len, latency);
            if len > 0 && matches!(op, "read" | "write") {
                bytes.add(&[&host, &volume, op], 1, len);
            }
        })
    }
}

/// `0`, `64M`, `3G`: the start of an offset region.
fn region_label(start: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (n, u) in UNITS {
        if start >= n && start.is_multiple_of(n) {
            return format!("{}{u}", start / n);
        }
    }
    start.to_string()
}
