//! The iSCSI target: the portal's accept loop, the registry of shared volumes (asked of
//! a [`Catalog`] at every login, so `shareiscsi` changes apply to the next login), the
//! LUN state per target and the table of live sessions.
//!
//! Invariants:
//! - One thread per connection; a slow or hostile initiator holds only its own thread
//!   (reads and writes have timeouts) and at most [`MAX_CONNECTIONS`] are served.
//! - A `Lun` is shared by every session of its target while its device is the same
//!   object; a new device (volume re-opened) gets a new `Lun` with reservations
//!   reloaded from their file.
//! - A new login with the same initiator name, ISID and target reinstates the session
//!   (RFC 7143 6.3.5): the old connection is shut down first.

use crate::dev::BlockDev;
use crate::lun::Lun;
use crate::stats::Stats;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub const MAX_CONNECTIONS: usize = 256;
pub const IQN_PREFIX: &str = "iqn.2026-11.org.cachalot:";

/// The target name of a volume: `iqn.2026-11.org.cachalot:POOL.VOL` (slashes as
/// dots); of a volume snapshot `POOL/VOL@SNAP`, the volume's name, a colon and the
/// snapshot's name: `iqn.2026-11.org.cachalot:POOL.VOL:SNAP` (`@` is not a
/// character of iSCSI names, RFC 3722; a colon is, and is the usual separator).
pub fn target_name(volume: &str) -> String {
    format!("{IQN_PREFIX}{}", volume.replace('/', ".").replace('@', ":"))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chap {
    pub user: String,
    pub secret: String,
    /// (user, secret) the target answers with when the initiator asks (mutual CHAP).
    pub mutual: Option<(String, String)>,
}

#[derive(Clone)]
pub struct Export {
    pub target: String,
    pub volume: String,
    pub dev: Arc<dyn BlockDev>,
    pub chap: Option<Chap>,
    /// Where persistent reservations of this LU are kept.
    pub pr_path: Option<PathBuf>,
}

/// What the daemon shares now.
pub trait Catalog: Send + Sync {
    /// Target names shared now (for SendTargets), without opening devices.
    fn targets(&self) -> Vec<String>;
    /// The export of one target, if shared now.
    fn export(&self, target: &str) -> Option<Export>;
}

/// One live session (one connection: MaxConnections=1, see `login.rs`).
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub target: String,
    pub initiator: String,
    pub isid: [u8; 6],
    /// Target session identifying handle given at login (0 for none yet).
    pub tsih: u16,
    pub peer: String,
    pub discovery: bool,
}

struct Live {
    info: SessionInfo,
    stream: TcpStream,
}

pub struct Target {
    catalog: Arc<dyn Catalog>,
    luns: Mutex<HashMap<String, Arc<Lun>>>,
    sessions: Mutex<HashMap<u64, Live>>,
    next_tsih: AtomicU16,
    next_id: AtomicU64,
    connections: AtomicUsize,
    stop: AtomicBool,
    pub stats: Stats,
}

impl Target {
    pub fn new(catalog: Arc<dyn Catalog>) -> Arc<Target> {
        Arc::new(Target {
            catalog,
            luns: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            next_tsih: AtomicU16::new(1),
            next_id: AtomicU64::new(1),
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            stats: Stats::new(),
        })
    }

    pub fn catalog(&self) -> &dyn Catalog {
        &*self.catalog
    }

    pub fn new_tsih(&self) -> u16 {
        loop {
            let t = self.next_tsih.fetch_add(1, Ordering::Relaxed);
            if t != 0 {
                return t;
            }
        }
    }

    /// The shared LU state of an export.
    pub fn lun(&self, exp: &Export) -> Arc<Lun> {
        let mut m = self.luns.lock();
        if let Some(l) = m.get(&exp.target) {
            if std::ptr::addr_eq(Arc::as_ptr(&l.dev), Arc::as_ptr(&exp.dev)) {
                return l.clone();
            }
        }
        let l = Arc::new(Lun::new(exp.dev.clone(), &exp.target, exp.pr_path.clone()));
        m.insert(exp.target.clone(), l.clone());
        l
    }

    /// LUs of every target seen so far (target resets).
    pub fn all_luns(&self) -> Vec<Arc<Lun>> {
        self.luns.lock().values().cloned().collect()
    }

    /// Register a session; an older one of the same I_T nexus and target is closed.
    pub fn add_session(&self, info: SessionInfo, stream: &TcpStream) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut s = self.sessions.lock();
        if !info.discovery {
            for old in s.values() {
                let o = &old.info;
                if !o.discovery
                    && o.target == info.target
                    && o.initiator == info.initiator
                    && o.isid == info.isid
                {
                    let _ = old.stream.shutdown(Shutdown::Both);
                }
            }
        }
        if let Ok(st) = stream.try_clone() {
            s.insert(id, Live { info, stream: st });
        }
        id
    }

    /// Whether a live session has this ISID and TSIH (a login naming it wants to
    /// add a connection to it).
    pub fn has_session(&self, isid: &[u8; 6], tsih: u16) -> bool {
        self.sessions
            .lock()
            .values()
            .any(|l| l.info.tsih == tsih && &l.info.isid == isid)
    }

    pub fn remove_session(&self, id: u64) {
        self.sessions.lock().remove(&id);
    }

    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.sessions
            .lock()
            .values()
            .map(|l| l.info.clone())
            .collect()
    }

    /// Close every session of a target (it stopped being shared).
    pub fn close_target(&self, target: &str) {
        for l in self.sessions.lock().values() {
            if l.info.target == target {
                let _ = l.stream.shutdown(Shutdown::Both);
            }
        }
    }

    /// Accept connections until [`Target::stop`]. Each runs on its own thread.
    pub fn serve(self: &Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        for conn in listener.incoming() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(_) => continue,
            };
            if self.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                self.connections.fetch_sub(1, Ordering::SeqCst);
                drop(stream);
                continue;
            }
            let t = self.clone();
            let spawned = std::thread::Builder::new()
                .name("iscsi-conn".into())
                .spawn(move || {
                    crate::conn::run(&t, stream);
                    t.connections.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                self.connections.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// Stop accepting and close every session. `addr` is the portal (to wake accept).
    pub fn stop(&self, addr: Option<SocketAddr>) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = addr {
            let _ = TcpStream::connect_timeout(&a, std::time::Duration::from_secs(1));
        }
        for l in self.sessions.lock().values() {
            let _ = l.stream.shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::target_name;

    #[test]
    fn target_names_of_volumes_and_snapshots() {
        assert_eq!(
            target_name("tank/db/lun"),
            "iqn.2026-11.org.cachalot:tank.db.lun"
        );
        assert_eq!(
            target_name("tank/db/lun@nightly"),
            "iqn.2026-11.org.cachalot:tank.db.lun:nightly"
        );
    }
}
