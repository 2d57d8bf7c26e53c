//! Failing closed: a panic while serving a request suspends the pool it was
//! about (the engine does the same for a failed commit or invariant), and
//! `pool.clear` brings a suspended pool back by re-importing it: what was in
//! memory is not trusted after a failure, so the pool restarts from its last
//! committed txg plus its intent log, and its mounts are restored.
//! `debug.panic` (fault injection only) plants a panic for tests.
//!
//! Invariants: a suspended pool takes no writes until it is re-imported; the
//! daemon keeps answering the API meanwhile (`pool status` says SUSPENDED and
//! why); `pool.clear` of a pool that is not suspended changes nothing.

use super::{log, se, volumes, Daemon, OpResult};
use crate::proto::{pool_of, Args, Request};
use cachalot_datasets::Store;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

impl Daemon {
    /// After a panic in the handler of `req` (error `err`): suspend every pool
    /// the request named. No catch-and-continue: its state is suspect.
    pub(super) fn fail_closed(&self, req: &Request, err: &str) {
        let mut pools: Vec<String> = Vec::new();
        let mut add = |v: &Value| {
            if let Some(s) = v.as_str() {
                let p = pool_of(s.split('@').next().unwrap_or(s)).to_string();
                if !p.is_empty() && !pools.contains(&p) {
                    pools.push(p);
                }
            }
        };
        for key in ["name", "ds", "target", "names"] {
            match req.args.get(key) {
                Some(Value::Array(a)) => a.iter().for_each(&mut add),
                Some(v) => add(v),
                None => {}
            }
        }
        for p in pools {
            if let Ok(store) = self.store(&p) {
                store.pool().suspend(format!("{err} (op {})", req.op));
                log(format!("pool '{p}' suspended: {err} (op {})", req.op));
            }
        }
    }

    /// `pool clear NAME`: re-import a suspended pool (a pool that is not
    /// suspended is left as it is).
    pub(super) fn pool_clear(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        let _g = self.admin.lock();
        let (store, devices) = match self.pools.read().get(&name) {
            None => return Err(format!("pool '{name}' does not exist")),
            Some(slot) => (slot.store.clone(), slot.record.devices.clone()),
        };
        if let Some(s) = &store {
            if s.pool().suspended().is_none() {
                return Ok(
                    json!({ "name": name, "health": s.pool().health(), "reimported": false }),
                );
            }
        }
        // Mounts come back after the import: keep the list the unmounts clear.
        self.record_mounts(&name)?;
        let mounts = self
            .pools
            .read()
            .get(&name)
            .map(|s| s.record.mounts.clone())
            .unwrap_or_default();
        self.stop_serving(|n| volumes::is_under(n, &name));
        self.unmount_pool(Some(&name), true)?;
        self.release_fs(&name);
        if let Some(s) = store {
            s.abandon();
        }
        let r = Store::import(&devices, Some(&name), self.store_opts());
        let mut pools = self.pools.write();
        let slot = pools.get_mut(&name).expect("held under the admin lock");
        slot.record.mounts = mounts;
        match r {
            Ok(s) => {
                slot.store = Some(s);
                slot.error = None;
            }
            Err(e) => {
                slot.store = None;
                slot.error = Some(se(e));
                let msg = format!(
                    "pool '{name}': re-import failed: {}",
                    slot.error.as_deref().unwrap_or("")
                );
                log(msg.clone());
                return Err(msg);
            }
        }
        drop(pools);
        log(format!("pool '{name}': cleared (re-imported)"));
        self.restore_pool_mounts(&name);
        self.save_state_after("pool clear")?;
        Ok(json!({ "name": name, "health": "ONLINE", "reimported": true }))
    }

    /// `debug panic NAME commit|request` (fault injection only): make the next
    /// commit of the pool panic halfway, or panic in this request's handler.
    pub(super) fn debug_panic(&self, a: &Args) -> OpResult {
        if !self.fault_injection.load(Ordering::SeqCst) {
            return Err(
                "fault injection is off: start the daemon with `serve --allow-fault-injection` (tests only)"
                    .into(),
            );
        }
        let name = a.str("name")?;
        let store = self.store(&name)?;
        match a.str("at")?.as_str() {
            "commit" => {
                store.inject_commit_panic();
                log(format!(
                    "pool '{name}': the next commit will panic (injected)"
                ));
                Ok(json!({ "name": name }))
            }
            "request" => panic!("injected panic in a request on pool '{name}'"),
            w => Err(format!("'{w}': expected commit or request")),
        }
    }
}
