//! Test harness: a real pool on a file in a temp dir, a filesystem dataset
//! shared over NFS, the server on a free loopback port, and clients.
#![allow(dead_code)]

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_nfs::client::Client;
use cachalot_nfs::{FsProvider, NfsServer, ServerConfig};
use cachalot_pool::{parse_vdev_spec, CreateOpts};
use cachalot_posix::Fs;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Pools and one shared `Fs` per dataset, as the daemon's registry keeps them.
#[derive(Default)]
pub struct Provider {
    pub stores: Mutex<Vec<Arc<Store>>>,
    fss: Mutex<HashMap<String, Arc<Fs>>>,
}

impl FsProvider for Provider {
    fn stores(&self) -> Vec<Arc<Store>> {
        self.stores.lock().clone()
    }
    fn filesystem(&self, store: &Arc<Store>, name: &str) -> Result<Arc<Fs>, String> {
        let ds = store.dataset(name).map_err(|e| e.to_string())?;
        let mut m = self.fss.lock();
        if let Some(fs) = m.get(name) {
            if Arc::ptr_eq(fs.dataset(), &ds) {
                return Ok(fs.clone());
            }
        }
        let fs = Arc::new(Fs::mount(store.clone(), ds).map_err(|e| e.to_string())?);
        m.insert(name.to_string(), fs.clone());
        Ok(fs)
    }
}

impl Provider {
    pub fn clear(&self) {
        self.fss.lock().clear();
    }
}

pub fn opts() -> StoreOpts {
    StoreOpts {
        arc_max: 64 << 20,
        txg_timeout: Duration::from_secs(5),
        dirty_max: 64 << 20,
    }
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub dev: PathBuf,
    pub store: Arc<Store>,
    pub provider: Arc<Provider>,
    pub server: Option<NfsServer>,
}

/// A pool `name` with `name/fs` shared with `sharenfs`.
pub fn env_named(pool: &str, sharenfs: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("d0");
    let specs = parse_vdev_spec(&[dev.display().to_string()]).unwrap();
    let copts = CreateOpts {
        create_size: Some(512 << 20),
        ..Default::default()
    };
    let store = Store::create(pool, &specs, &copts, &[], opts()).unwrap();
    store
        .create_dataset(
            &format!("{pool}/fs"),
            DatasetKind::Filesystem,
            None,
            &[("sharenfs".to_string(), sharenfs.to_string())],
            false,
        )
        .unwrap();
    let provider = Arc::new(Provider::default());
    provider.stores.lock().push(store.clone());
    let server = start(&provider);
    Env {
        dir,
        dev,
        store,
        provider,
        server: Some(server),
    }
}

pub fn env(sharenfs: &str) -> Env {
    env_named("tank", sharenfs)
}

pub fn start(provider: &Arc<Provider>) -> NfsServer {
    let cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    NfsServer::start(provider.clone() as Arc<dyn FsProvider>, cfg).unwrap()
}

impl Env {
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.as_ref().unwrap().nfs_addr()
    }
    pub fn client(&self) -> Client {
        Client::connect(self.addr()).unwrap()
    }
    /// A root client with the root handle of `tank/fs`.
    pub fn mounted(&self) -> (Client, Vec<u8>) {
        let mut c = self.client();
        let pool = self.store.name();
        let fh = c.mount(&format!("/{pool}/fs")).unwrap();
        (c, fh)
    }
}
