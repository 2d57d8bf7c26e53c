//! The NFS server inside the daemon: started by `serve` (default 127.0.0.1:2049,
//! portmapper on 127.0.0.1:111 when that port is free), fed with the daemon's
//! pools and its one `Fs` per dataset.
//!
//! Invariants:
//! - The server sees a pool only while the daemon has it online, and a dataset's
//!   filesystem only through the daemon's registry (`filesystems.rs`).
//! - Before a dataset, a snapshot's parent or a pool goes away the daemon calls
//!   [`Daemon::release_fs`], so the server drops its cached filesystem and every
//!   later request on it is STALE.
//! - A default address that cannot be bound is logged and the daemon serves on
//!   without NFS; an address the user gave must bind or `serve` fails.

use super::{log, Daemon};
use cachalot_datasets::Store;
use cachalot_nfs::{FsProvider, NfsServer, ServerConfig};
use cachalot_posix::Fs;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};

/// Where NFS listens (`serve --nfs`, `--portmap`).
#[derive(Clone, Debug, Default)]
pub struct NfsOpts {
    /// None: the default (127.0.0.1:2049, failures logged); "off": disabled.
    pub addr: Option<String>,
    /// None: 127.0.0.1:111 if free; "off": none.
    pub portmap: Option<String>,
    /// The NFSv4.1 lease in seconds (None: 90).
    pub lease_secs: Option<u64>,
}

pub const DEFAULT_NFS: &str = "127.0.0.1:2049";
pub const DEFAULT_PORTMAP: &str = "127.0.0.1:111";

struct DaemonFs(Weak<Daemon>);

impl FsProvider for DaemonFs {
    fn stores(&self) -> Vec<Arc<Store>> {
        match self.0.upgrade() {
            Some(d) if !d.is_shutting_down() => d.open_stores(),
            _ => vec![],
        }
    }
    fn filesystem(&self, store: &Arc<Store>, name: &str) -> Result<Arc<Fs>, String> {
        let d = self.0.upgrade().ok_or("the daemon is shutting down")?;
        d.filesystems.get(store, name)
    }
}

fn parse(addr: &str) -> anyhow::Result<SocketAddr> {
    addr.parse()
        .map_err(|_| anyhow::anyhow!("'{addr}' is not an address (expected IP:PORT)"))
}

impl Daemon {
    /// Start the NFS server as `opts` say (see the module invariants).
    pub fn start_nfs(self: &Arc<Self>, opts: &NfsOpts) -> anyhow::Result<()> {
        let explicit = opts.addr.is_some();
        let addr = opts.addr.as_deref().unwrap_or(DEFAULT_NFS).trim();
        if addr == "off" || addr == "none" {
            log("nfs: disabled (--nfs off)");
            return Ok(());
        }
        let mut cfg = ServerConfig::new(parse(addr)?);
        cfg.portmap = match opts.portmap.as_deref().map(str::trim) {
            Some("off") | Some("none") => None,
            Some(p) => Some(parse(p)?),
            None => Some(parse(DEFAULT_PORTMAP)?),
        };
        if let Some(secs) = opts.lease_secs {
            cfg.lease = std::time::Duration::from_secs(secs);
        }
        // The NFSv4.1 record of clients that may reclaim after a restart.
        cfg.state_dir = Some(self.home.clone());
        let provider: Arc<dyn FsProvider> = Arc::new(DaemonFs(Arc::downgrade(self)));
        let server = match NfsServer::start(provider, cfg) {
            Ok(s) => s,
            Err(e) if !explicit => {
                log(format!("nfs: not serving: cannot listen on {addr}: {e}"));
                return Ok(());
            }
            Err(e) => anyhow::bail!("nfs: cannot listen on {addr}: {e}"),
        };
        log(format!(
            "nfs: NFSv3 and MOUNT v3 listening on {}",
            server.nfs_addr()
        ));
        log(format!(
            "nfs: NFSv4.1 on the same port (lease {} s)",
            opts.lease_secs.unwrap_or(90)
        ));
        match (server.portmap_addr(), server.portmap_error()) {
            (Some(a), _) => log(format!("nfs: portmapper listening on {a}")),
            (None, Some(e)) if opts.portmap.is_some() => {
                anyhow::bail!("nfs: {e}")
            }
            (None, Some(e)) => log(format!(
                "nfs: no portmapper ({e}); clients need explicit ports: \
                 mount -o port={p},mountport={p}",
                p = server.nfs_addr().port()
            )),
            (None, None) => log("nfs: no portmapper (--portmap off)"),
        }
        let _ = std::fs::write(
            self.home.join("nfs.addr"),
            format!("{}\n", server.nfs_addr()),
        );
        *self.nfs.lock() = Some(server);
        Ok(())
    }

    /// Stop serving NFS (shutdown).
    pub(super) fn stop_nfs(&self) {
        // Take the server out first: stopping joins its workers, which must not
        // wait for this lock.
        let server = self.nfs.lock().take();
        if let Some(s) = server {
            s.stop();
            let _ = std::fs::remove_file(self.home.join("nfs.addr"));
        }
    }

    /// The NFS address, if serving.
    pub fn nfs_addr(&self) -> Option<SocketAddr> {
        self.nfs.lock().as_ref().map(|s| s.nfs_addr())
    }

    /// Drop every cached filesystem of `name` and below (a dataset or a pool)
    /// before it is destroyed, exported, rolled back or replaced.
    ///
    /// A dataset mounted over FUSE keeps its entry: its `Fs` is in use, and a
    /// second one must never be opened beside it.
    pub(super) fn release_fs(&self, name: &str) {
        if let Some(s) = self.nfs.lock().as_ref() {
            s.exports().forget(name);
        }
        let mounted: Vec<String> = self.mounts.lock().keys().cloned().collect();
        self.filesystems.forget(name, &mounted);
    }
}
