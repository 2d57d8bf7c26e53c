//! One small store on a simulated device, with a file system, shared by the
//! targets that need the whole engine (xattrs, send streams). Built on first use;
//! a target that breaks it (an error, not a panic) gets a fresh one next time.

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_pool::{BlockDevice, SimDevice};
use cachalot_posix::{Caller, Fs};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub(crate) struct Env {
    pub store: Arc<Store>,
    pub fs: Fs,
    /// A file with one extended attribute, and its xattr object.
    pub file: u64,
    pub xattr_obj: u64,
}

static ENV: OnceLock<Mutex<Option<Env>>> = OnceLock::new();

/// Run `f` on the shared environment (serialized: targets are single-threaded).
pub(crate) fn with_env<R>(f: impl FnOnce(&mut Env) -> R) -> R {
    let mut g = ENV.get_or_init(|| Mutex::new(None)).lock();
    let env = g.get_or_insert_with(|| Env::new().expect("fuzz environment builds"));
    f(env)
}

impl Env {
    fn new() -> Result<Env, String> {
        let dev = SimDevice::new("fuzz0", 64 << 20);
        let opts = StoreOpts {
            arc_max: 16 << 20,
            txg_timeout: Duration::from_secs(3600),
            dirty_max: 1 << 30,
        };
        let devs: Vec<Arc<dyn BlockDevice>> = vec![Arc::new(dev)];
        let store = Store::create_on_devices("fz", devs, false, opts).map_err(|e| e.to_string())?;
        store
            .create_dataset("fz/fs", DatasetKind::Filesystem, None, &[], false)
            .map_err(|e| e.to_string())?;
        let ds = store.dataset("fz/fs").map_err(|e| e.to_string())?;
        let fs = Fs::mount(store.clone(), ds.clone()).map_err(|e| format!("{e:?}"))?;
        let file = fs
            .mknod(fs.root(), b"f", 0o100644, 0, Caller::ROOT)
            .map_err(|e| format!("{e:?}"))?
            .ino;
        fs.setxattr(file, b"user.a", b"value", 0)
            .map_err(|e| format!("{e:?}"))?;
        let bonus = ds.object_info(file).map_err(|e| e.to_string())?.bonus;
        let xattr_obj = u64::from_le_bytes(bonus[112..120].try_into().unwrap());
        Ok(Env {
            store,
            fs,
            file,
            xattr_obj,
        })
    }

    /// Replace the xattr object's bytes with `data`, then list and read.
    pub fn xattrs(&mut self, data: &[u8]) {
        let Ok(ds) = self.store.dataset("fz/fs") else {
            return;
        };
        if ds.truncate(self.xattr_obj, 0).is_err() || ds.write(self.xattr_obj, 0, data).is_err() {
            return;
        }
        let listed = self.fs.listxattr(self.file);
        if std::env::var("CACHALOT_FUZZ_DEBUG").is_ok() {
            eprintln!("xattrs: {:?}", listed.as_ref().map(|l| l.len()));
        }
        if let Ok(list) = listed {
            for name in list.split(|b| *b == 0).filter(|n| !n.is_empty()) {
                let _ = self.fs.getxattr(self.file, name);
            }
        }
        let _ = self.fs.getxattr(self.file, b"user.a");
    }
}
