//! The iSCSI target inside the daemon: which volumes are shared (`shareiscsi=on`,
//! inherited; their snapshots read-only as `VOLUME-TARGET:SNAP`, see
//! `cachalot_iscsi::target_name`), with which CHAP secrets (user properties `iscsi:chap_user`,
//! `iscsi:chap_secret`, optional `iscsi:chap_mutual_user`, `iscsi:chap_mutual_secret`),
//! and where each LU keeps its persistent reservations (`HOME/iscsi/POOLGUID-ID.pr`,
//! see [`pr_file`]).
//!
//! Invariants:
//! - Sharing is decided at each login (and SendTargets) from the properties in force,
//!   so `set shareiscsi=off` refuses the next login; a volume with a CHAP user but no
//!   secret (or the reverse) is not exported at all rather than exported open.
//! - The block device is the daemon's shared `Zvol` of the volume (`Daemon::volume`,
//!   see `volumes.rs`), the same handle NBD serves: a write through one protocol is
//!   read through the other, and a destroy, rollback or pool export that drops the
//!   registry entry reaches both. One `ZvolDev` wrapper per `Zvol`, so the LU state
//!   in `cachalot_iscsi::Target` (which keys on the device object) is shared by
//!   every session of the volume and renewed when the registry opens a new `Zvol`.

use super::Daemon;
use cachalot_datasets::{DatasetKind, Store};
use cachalot_iscsi::{target_name, BlockDev, Catalog, Chap, DevError, Export, Run, Target};
use cachalot_zvol::{ExtentKind, Zvol, ZvolError};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Weak};

/// The running target and its portal address.
pub struct IscsiService {
    pub target: Arc<Target>,
    pub addr: SocketAddr,
}

impl IscsiService {
    pub fn stop(&self) {
        self.target.stop(Some(self.addr));
    }
}

/// A zvol as the iSCSI layer's block device.
struct ZvolDev(Arc<Zvol>);

fn dev_err(e: ZvolError) -> DevError {
    match e {
        ZvolError::OutOfRange { off, len, size } => DevError::OutOfRange { off, len, size },
        ZvolError::ReadOnly(s) => DevError::ReadOnly(s),
        ZvolError::NoSpace(s) => DevError::NoSpace(s),
        ZvolError::Io(s) => DevError::Io(s),
    }
}

impl BlockDev for ZvolDev {
    fn name(&self) -> String {
        self.0.name()
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn block_size(&self) -> u32 {
        self.0.block_size()
    }
    fn is_readonly(&self) -> bool {
        self.0.is_readonly()
    }
    fn write_cache(&self) -> bool {
        self.0.write_cache()
    }
    fn read(&self, off: u64, len: usize) -> Result<Vec<u8>, DevError> {
        self.0.read(off, len).map_err(dev_err)
    }
    fn write(&self, off: u64, data: &[u8], fua: bool) -> Result<(), DevError> {
        self.0.write(off, data, fua).map_err(dev_err)
    }
    fn flush(&self) -> Result<(), DevError> {
        self.0.flush().map_err(dev_err)
    }
    fn discard(&self, off: u64, len: u64, fua: bool) -> Result<(), DevError> {
        self.0.discard(off, len, fua).map_err(dev_err)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<(), DevError> {
        self.0.write_zeroes(off, len, fua).map_err(dev_err)
    }
    fn extents(&self, off: u64, len: u64) -> Result<Vec<Run>, DevError> {
        let ext = self.0.extents(off, len).map_err(dev_err)?;
        Ok(ext
            .into_iter()
            .map(|e| Run {
                off: e.off,
                len: e.len,
                mapped: e.kind == ExtentKind::Data,
            })
            .collect())
    }
}

/// The daemon's shared volumes, as the target sees them.
struct DaemonCatalog {
    daemon: Weak<Daemon>,
    /// The block device made for each registry `Zvol`, by volume name: reused while
    /// the registry hands out the same `Zvol`.
    devs: Mutex<HashMap<String, OpenDev>>,
}

/// A registry `Zvol` and the block device wrapping it.
type OpenDev = (Arc<Zvol>, Arc<dyn BlockDev>);

const CHAP_PROPS: [&str; 4] = [
    "iscsi:chap_user",
    "iscsi:chap_secret",
    "iscsi:chap_mutual_user",
    "iscsi:chap_mutual_secret",
];

pub(super) fn prop_values(store: &Store, name: &str, props: &[&str]) -> Vec<Option<String>> {
    let which: Vec<String> = props.iter().map(|p| p.to_string()).collect();
    let rows = store.get_props(name, Some(&which)).unwrap_or_default();
    props
        .iter()
        .map(|p| {
            rows.iter()
                .find(|r| r.property == *p)
                .filter(|r| r.source != "-" && !r.value.is_empty())
                .map(|r| r.value.clone())
        })
        .collect()
}

/// CHAP settings of a volume: Ok(None) when none, Err when half-configured.
pub(super) fn chap_of(store: &Store, name: &str) -> Result<Option<Chap>, String> {
    let v = prop_values(store, name, &CHAP_PROPS);
    let pair = |a: &Option<String>, b: &Option<String>, what: &str| match (a, b) {
        (Some(u), Some(s)) => Ok(Some((u.clone(), s.clone()))),
        (None, None) => Ok(None),
        _ => Err(format!("{name}: {what} user and secret must both be set")),
    };
    let one_way = pair(&v[0], &v[1], "CHAP")?;
    let mutual = pair(&v[2], &v[3], "mutual CHAP")?;
    match (one_way, mutual) {
        (Some((user, secret)), mutual) => Ok(Some(Chap {
            user,
            secret,
            mutual,
        })),
        (None, None) => Ok(None),
        (None, Some(_)) => Err(format!("{name}: mutual CHAP needs one-way CHAP")),
    }
}

impl DaemonCatalog {
    /// Volumes shared now: (volume name, its store).
    fn shared(&self) -> Vec<(String, Arc<Store>)> {
        let Some(d) = self.daemon.upgrade() else {
            return Vec::new();
        };
        if d.is_shutting_down() {
            return Vec::new();
        }
        let stores: Vec<Arc<Store>> = d.open_stores();
        let mut out = Vec::new();
        for s in stores {
            for info in s.list(None, true).unwrap_or_default() {
                if info.kind != DatasetKind::Volume {
                    continue;
                }
                if prop_values(&s, &info.name, &["shareiscsi"])[0].as_deref() == Some("on") {
                    out.push((info.name, s.clone()));
                }
            }
        }
        out
    }

    /// The block device of `name`: the daemon's shared `Zvol` of the volume.
    fn device(&self, name: &str) -> Option<Arc<dyn BlockDev>> {
        let zvol = match self.daemon.upgrade()?.volume(name) {
            Ok(z) => z,
            Err(e) => {
                eprintln!("cachalot iscsi: cannot open {name}: {e}");
                return None;
            }
        };
        let mut m = self.devs.lock();
        if let Some((z, dev)) = m.get(name) {
            if Arc::ptr_eq(z, &zvol) {
                return Some(dev.clone());
            }
        }
        let dev: Arc<dyn BlockDev> = Arc::new(ZvolDev(zvol.clone()));
        m.insert(name.to_string(), (zvol, dev.clone()));
        Some(dev)
    }
}

/// The file name of the persistent reservations of volume (or volume snapshot) `name`:
/// keyed by the volume's identity, the pool's guid and the dataset's id in that pool
/// (never reused, kept across rename, export and import), not by its name or target
/// name. A fence a cluster placed on a volume belongs to that volume: a volume
/// destroyed and created again under the same name (or received over it) is another
/// disk and must start with no registrations, and a renamed volume (receive moves
/// `VOL%recv` into place) keeps its own. A snapshot adds its guid for the same reason.
fn pr_file(store: &Store, name: &str) -> cachalot_datasets::Result<String> {
    let pool = store.pool().guid();
    Ok(match name.split_once('@') {
        Some((vol, _)) => {
            let id = store.dataset(vol)?.id();
            format!("{pool:016x}-{id}@{:016x}.pr", store.snapshot_guid(name)?)
        }
        None => format!("{pool:016x}-{}.pr", store.dataset(name)?.id()),
    })
}

impl Catalog for DaemonCatalog {
    fn targets(&self) -> Vec<String> {
        self.shared().iter().map(|(n, _)| target_name(n)).collect()
    }

    fn export(&self, target: &str) -> Option<Export> {
        let shared = self.shared();
        // A volume first; else a snapshot of a shared volume (`VOLTARGET:SNAP`),
        // served read-only with the volume's CHAP settings. Snapshots are not
        // listed by SendTargets=All: `iscsiadm -m discovery ... --login` would log
        // in to every one of them.
        let (name, store) = match shared.iter().find(|(n, _)| target_name(n) == target) {
            Some(v) => v.clone(),
            None => shared.into_iter().find_map(|(vol, store)| {
                let snap = target.strip_prefix(&target_name(&vol))?.strip_prefix(':')?;
                let full = format!("{vol}@{snap}");
                store.snapshot_dataset(&full).ok()?;
                Some((full, store))
            })?,
        };
        let volume = name.split_once('@').map_or(name.as_str(), |(v, _)| v);
        let chap = match chap_of(&store, volume) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("cachalot iscsi: not exporting {e}");
                return None;
            }
        };
        let home = self.daemon.upgrade()?.home.clone();
        let pr_path = match pr_file(&store, &name) {
            Ok(f) => home.join("iscsi").join(f),
            Err(e) => {
                eprintln!("cachalot iscsi: not exporting {name}: {e}");
                return None;
            }
        };
        Some(Export {
            target: target.to_string(),
            volume: name.clone(),
            dev: self.device(&name)?,
            chap,
            pr_path: Some(pr_path),
        })
    }
}

impl Daemon {
    /// Close the iSCSI sessions of volumes that leave the registry (destroyed,
    /// rolled back past, pool exported): the initiator logs in again and finds the
    /// volume as it is now, or gone.
    pub(super) fn iscsi_close(&self, volumes: &[String]) {
        let Some(svc) = self.iscsi.get() else { return };
        for v in volumes {
            svc.target.close_target(&target_name(v));
        }
    }

    /// Start the iSCSI portal on `addr` (port 0 picks one). Called once by `serve`.
    pub fn start_iscsi(self: &Arc<Self>, addr: &str) -> anyhow::Result<SocketAddr> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| anyhow::anyhow!("iscsi: cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr()?;
        let catalog = DaemonCatalog {
            daemon: Arc::downgrade(self),
            devs: Mutex::new(HashMap::new()),
        };
        let target = Target::new(Arc::new(catalog));
        let svc = Arc::new(IscsiService {
            target: target.clone(),
            addr: local,
        });
        if self.iscsi.set(svc).is_err() {
            anyhow::bail!("iscsi: already started");
        }
        std::thread::Builder::new()
            .name("iscsi-accept".into())
            .spawn(move || {
                let _ = target.serve(listener);
            })?;
        Ok(local)
    }
}
