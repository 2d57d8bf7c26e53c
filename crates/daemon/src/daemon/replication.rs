//! Replication between appliances, daemon side: the appliance's key, its
//! paired peers, the relationships it is the source of, and the `repl.*` ops.
//! The listener is in `replication_serve.rs`, the cycles and the scheduler in
//! `replication_cycle.rs`; the wire protocol in `cachalot-replication`.
//!
//! State, all in `HOME/replication/` (the daemon home, not a pool: a
//! relationship joins two appliances and names a peer's key, which belongs to
//! the appliance, and it must survive the export of a pool):
//! - `cert.der`, `key.der` (0600): this appliance's key, made at first use.
//! - `peers.json`: the pinned peers, `{fingerprint, address, paired}`.
//! - `relationships.json`: every relationship with its last status.
//! - `pulled_by.json`: the pulls this appliance serves as the source (a peer's
//!   `--pull` relationship), with their last status: `list` shows them, as the
//!   hold they keep on a snapshot here (`replication_pull.rs`).
//! - `broken_here.json`: relationships this appliance is the target of and
//!   has broken off itself (`mysql failover`), each with the MySQL set the
//!   failover started (its clones and server): their cycles are refused here
//!   until the source resyncs them, and `reverse` makes that set the source.
//!
//! Invariants:
//! - Files are replaced atomically (`state::write_atomic`) under the mutex of
//!   what they hold, so a crash leaves the old or the new list.
//! - A connection is trusted only if its certificate's fingerprint is pinned
//!   (on the source: pinned for the address dialled); the only request an
//!   unpinned peer may make is `pair`, with a live one-time token.
//! - One cycle of a relationship runs at a time (its `cycle` mutex); the
//!   scheduler only try-locks it, `replication run` waits for it.

use super::replication_pull::PulledBy;
use super::replication_tree::local_datasets;
use super::{Daemon, OpResult};
use crate::proto::{validate_dataset_name, Args};
use crate::state::write_atomic;
use cachalot_replication::relationship::{
    self, MemberStatus, MysqlSet, Relationship, DEFAULT_KEEP,
};
use cachalot_replication::tls::Identity;
use cachalot_replication::{pair, retention};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Default socket timeout of a peer link; `CACHALOT_REPL_TIMEOUT` (seconds)
/// overrides it (tests cut links and want the cut noticed quickly).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A pinned peer.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(super) struct Peer {
    pub fingerprint: String,
    /// The address this appliance dialled when pairing (None: the peer dialled us).
    pub address: Option<String>,
    pub paired: u64,
}

/// The replication state of one daemon.
pub struct Replication {
    dir: PathBuf,
    identity: Mutex<Option<Identity>>,
    peers: Mutex<Vec<Peer>>,
    rels: Mutex<BTreeMap<String, Relationship>>,
    /// One mutex per relationship: held while a cycle runs.
    cycles: Mutex<BTreeMap<String, Arc<Mutex<()>>>>,
    /// Live pairing tokens and when they expire (memory only: a restart ends them).
    tokens: Mutex<Vec<(String, u64)>>,
    pub(super) timeout: Duration,
    /// The daemon's own API socket: a MySQL set's cycle takes its `mysql
    /// snapshot` through the API, as the CLI does (set when serving).
    api_socket: Mutex<Option<PathBuf>>,
    /// Relationships broken off on this side, as their target.
    broken_here: Mutex<Vec<BrokenHere>>,
    /// The pulls served as their source, by name (`replication_pull.rs`).
    pub(super) pulled_by: Mutex<BTreeMap<String, PulledBy>>,
    /// Fault injection (`debug.repl_corrupt`): the next stream sent gets its
    /// byte at this offset inverted.
    pub(super) corrupt_next: Mutex<Option<u64>>,
}

/// A relationship broken off on its target by `mysql failover`, and the set
/// the failover started there (once it runs): the clones of the replicated
/// datasets and their server. That set is what a `reverse` replicates back.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(super) struct BrokenHere {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<MysqlSet>,
}

/// An entry of `broken_here.json`: the tenth session wrote bare names.
#[derive(Deserialize)]
#[serde(untagged)]
enum BrokenHereEntry {
    Name(String),
    Entry(BrokenHere),
}

impl From<BrokenHereEntry> for BrokenHere {
    fn from(e: BrokenHereEntry) -> BrokenHere {
        match e {
            BrokenHereEntry::Name(name) => BrokenHere { name, live: None },
            BrokenHereEntry::Entry(b) => b,
        }
    }
}

pub(super) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn read_json<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> anyhow::Result<T> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| anyhow::anyhow!("{}: corrupt file: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

impl Replication {
    /// Load the state kept in `home/replication` (nothing is created yet).
    pub fn open(home: &Path) -> anyhow::Result<Replication> {
        let dir = home.join("replication");
        let peers: Vec<Peer> = read_json(&dir.join("peers.json"))?;
        let list: Vec<Relationship> = read_json(&dir.join("relationships.json"))?;
        let broken_here: Vec<BrokenHereEntry> = read_json(&dir.join("broken_here.json"))?;
        let pulled_by: Vec<PulledBy> = read_json(&dir.join("pulled_by.json"))?;
        let timeout = std::env::var("CACHALOT_REPL_TIMEOUT")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|&s| s > 0)
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_TIMEOUT);
        Ok(Replication {
            dir,
            identity: Mutex::new(None),
            peers: Mutex::new(peers),
            rels: Mutex::new(list.into_iter().map(|r| (r.name.clone(), r)).collect()),
            cycles: Mutex::new(BTreeMap::new()),
            tokens: Mutex::new(Vec::new()),
            timeout,
            api_socket: Mutex::new(None),
            broken_here: Mutex::new(broken_here.into_iter().map(Into::into).collect()),
            pulled_by: Mutex::new(
                pulled_by
                    .into_iter()
                    .map(|p| (p.rel.name.clone(), p))
                    .collect(),
            ),
            corrupt_next: Mutex::new(None),
        })
    }

    /// Record the daemon's API socket (see `api_socket`).
    fn set_api_socket(&self, path: &Path) {
        *self.api_socket.lock() = Some(path.to_path_buf());
    }

    pub(super) fn api_socket(&self) -> Result<PathBuf, String> {
        self.api_socket
            .lock()
            .clone()
            .ok_or_else(|| "the daemon serves no API socket: cannot take a MySQL snapshot".into())
    }

    fn ensure_dir(&self) -> Result<(), String> {
        use std::os::unix::fs::DirBuilderExt;
        if self.dir.is_dir() {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| format!("{}: {e}", self.dir.display()))
    }

    /// This appliance's key: loaded, or made and stored at first use.
    pub fn identity(&self) -> Result<Identity, String> {
        let mut slot = self.identity.lock();
        if let Some(id) = &*slot {
            return Ok(id.clone());
        }
        self.ensure_dir()?;
        let (cp, kp) = (self.dir.join("cert.der"), self.dir.join("key.der"));
        let id = match (std::fs::read(&cp), std::fs::read(&kp)) {
            (Ok(cert_der), Ok(key_der)) => Identity { cert_der, key_der },
            (Err(_), Err(_)) => {
                let id = Identity::generate()?;
                // The key first: a cert without its key would be a dead end.
                write_atomic(&kp, &id.key_der, 0o600)
                    .and_then(|()| write_atomic(&cp, &id.cert_der, 0o644))
                    .map_err(|e| format!("{}: cannot store the replication key: {e}", self.dir.display()))?;
                super::log(format!(
                    "replication: made this appliance's key {}",
                    id.fingerprint()
                ));
                id
            }
            _ => {
                return Err(format!(
                    "{}: cert.der or key.der is missing: restore both, or remove both to make a new key (and pair again)",
                    self.dir.display()
                ))
            }
        };
        *slot = Some(id.clone());
        Ok(id)
    }

    /// Replace `file` in the state directory with `value` as JSON, atomically
    /// (`what` names it in the error).
    pub(super) fn store_json<T: Serialize + ?Sized>(
        &self,
        file: &str,
        value: &T,
        what: &str,
    ) -> Result<(), String> {
        self.ensure_dir()?;
        let data = serde_json::to_vec_pretty(value).map_err(|e| e.to_string())?;
        write_atomic(&self.dir.join(file), &data, 0o600)
            .map_err(|e| format!("cannot store {what}: {e}"))
    }

    fn save_peers(&self, peers: &[Peer]) -> Result<(), String> {
        self.store_json("peers.json", peers, "the peer list")
    }

    /// Pin `fp` (for `address`, if we dialled it), replacing an older pin of
    /// the same address or key. A key pinned already stays as it is when the
    /// peer pairs with our listener (no address): the address we dial it at
    /// is kept (a peer that pulls from us and is pushed to by us pairs both
    /// ways).
    pub(super) fn pin(&self, fp: &str, address: Option<&str>) -> Result<(), String> {
        let mut peers = self.peers.lock();
        if address.is_none() && peers.iter().any(|p| p.fingerprint == fp) {
            return Ok(());
        }
        let mut next: Vec<Peer> = peers
            .iter()
            .filter(|p| {
                p.fingerprint != fp && (address.is_none() || p.address.as_deref() != address)
            })
            .cloned()
            .collect();
        next.push(Peer {
            fingerprint: fp.to_string(),
            address: address.map(str::to_string),
            paired: now(),
        });
        self.save_peers(&next)?;
        *peers = next;
        Ok(())
    }

    pub(super) fn is_pinned(&self, fp: &str) -> bool {
        self.peers.lock().iter().any(|p| p.fingerprint == fp)
    }

    /// The key pinned for a peer address we dial.
    pub(super) fn pinned_for(&self, address: &str) -> Option<String> {
        self.peers
            .lock()
            .iter()
            .rev()
            .find(|p| p.address.as_deref() == Some(address))
            .map(|p| p.fingerprint.clone())
    }

    /// Take a live pairing token for which `check` holds (used once).
    pub(super) fn take_token(&self, mut check: impl FnMut(&str) -> bool) -> bool {
        let mut tokens = self.tokens.lock();
        let t = now();
        tokens.retain(|(_, exp)| *exp > t);
        match tokens.iter().position(|(tok, _)| check(tok)) {
            Some(i) => {
                tokens.remove(i);
                true
            }
            None => false,
        }
    }

    /// Mark relationship `name` as broken off on this side (with the set a
    /// failover started, once known), or with `None` unmark it, durably;
    /// returns whether that changed anything.
    pub(super) fn set_broken_here(
        &self,
        name: &str,
        mark: Option<BrokenHere>,
    ) -> Result<bool, String> {
        let mut list = self.broken_here.lock();
        let old = list.iter().find(|b| b.name == name);
        if old == mark.as_ref() {
            return Ok(false);
        }
        let mut next: Vec<BrokenHere> = list.iter().filter(|b| b.name != name).cloned().collect();
        next.extend(mark);
        self.store_json(
            "broken_here.json",
            &next,
            "the relationships broken off here",
        )?;
        *list = next;
        Ok(true)
    }

    /// The mark of relationship `name` if it was broken off here.
    pub(super) fn broken_here(&self, name: &str) -> Option<BrokenHere> {
        self.broken_here
            .lock()
            .iter()
            .find(|b| b.name == name)
            .cloned()
    }

    /// Refuse a request of relationship `name` if it was broken off here.
    pub(super) fn check_not_broken_here(&self, name: &str) -> Result<(), String> {
        if self.broken_here(name).is_some() {
            return Err(format!(
                "broken off on the target by mysql failover there; `cachalot replication resync {name}` on the source rolls the target back and resumes it"
            ));
        }
        Ok(())
    }

    fn save_rels(&self, rels: &BTreeMap<String, Relationship>) -> Result<(), String> {
        let list: Vec<&Relationship> = rels.values().collect();
        self.store_json("relationships.json", &list, "the relationships")
    }

    pub(super) fn get(&self, name: &str) -> Result<Relationship, String> {
        self.rels
            .lock()
            .get(name)
            .cloned()
            .ok_or_else(|| no_such_relationship(name))
    }

    /// Add relationship `rel` (refused if its name is taken), durably.
    pub(super) fn insert(&self, rel: Relationship) -> Result<(), String> {
        let mut rels = self.rels.lock();
        if rels.contains_key(&rel.name) {
            return Err(format!(
                "replication relationship '{}' already exists",
                rel.name
            ));
        }
        let mut next = rels.clone();
        next.insert(rel.name.clone(), rel);
        self.save_rels(&next)?;
        *rels = next;
        Ok(())
    }

    /// Forget relationship `name` durably (its holds are left alone).
    pub(super) fn remove(&self, name: &str) -> Result<(), String> {
        let mut rels = self.rels.lock();
        let mut next = rels.clone();
        next.remove(name);
        self.save_rels(&next)?;
        *rels = next;
        self.cycles.lock().remove(name);
        Ok(())
    }

    pub(super) fn names(&self) -> Vec<String> {
        self.rels.lock().keys().cloned().collect()
    }

    /// Change relationship `name` with `f` and store the result durably.
    pub(super) fn update<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Relationship) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut rels = self.rels.lock();
        let mut next = rels.clone();
        let r = next
            .get_mut(name)
            .ok_or_else(|| no_such_relationship(name))?;
        let out = f(r)?;
        self.save_rels(&next)?;
        *rels = next;
        Ok(out)
    }

    pub(super) fn cycle_lock(&self, name: &str) -> Arc<Mutex<()>> {
        self.cycles
            .lock()
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    pub(super) fn is_running(&self, name: &str) -> bool {
        self.cycles.lock().get(name).is_some_and(|m| m.is_locked())
    }
}

/// The `repl.*` ops and their arguments.
pub const REPL_OPS: &[(&str, &[&str])] = &[
    ("repl.pair_token", &[]),
    ("repl.pair", &["address", "token"]),
    ("repl.peers", &[]),
    (
        "repl.create",
        &[
            "name",
            "source",
            "target",
            "schedule",
            "keep",
            "bwlimit",
            "paused",
            "pull",
            "recursive",
            "mysql_socket",
            "mysql_user",
        ],
    ),
    ("repl.list", &["name"]),
    ("repl.run", &["name"]),
    ("repl.pause", &["name"]),
    ("repl.resume", &["name"]),
    ("repl.destroy", &["name"]),
    ("repl.break", &["name"]),
    ("repl.resync", &["name", "force"]),
    ("repl.reverse", &["name", "address", "force"]),
    (
        "repl.break_here",
        &["name", "members", "mysql_socket", "mysql_user"],
    ),
];

impl Daemon {
    /// The daemon's API socket, for a MySQL set's cycles (see `Replication`).
    pub fn set_replication_api_socket(&self, path: &Path) {
        self.replication.set_api_socket(path);
    }

    pub(super) fn repl_op(&self, op: &str, a: &Args) -> OpResult {
        let r = &self.replication;
        if let (
            "repl.run" | "repl.pause" | "repl.resume" | "repl.break" | "repl.resync"
            | "repl.reverse",
            Ok(name),
        ) = (op, a.str("name"))
        {
            self.refuse_pulled_op(&name)?;
        }
        match op {
            "repl.pair_token" => {
                let id = r.identity()?;
                let token = pair::new_token()?;
                let expires = now() + pair::TOKEN_LIFETIME;
                r.tokens.lock().push((token.clone(), expires));
                Ok(json!({ "token": token, "fingerprint": id.fingerprint(), "expires": expires }))
            }
            "repl.pair" => self.repl_pair(&a.str("address")?, &a.str("token")?),
            "repl.peers" => Ok(json!(*r.peers.lock())),
            "repl.create" => self.repl_create(a),
            "repl.list" => self.repl_list(a.opt_str("name")?),
            "repl.run" => self.repl_run(&a.str("name")?),
            "repl.pause" | "repl.resume" => {
                let pause = op == "repl.pause";
                r.update(&a.str("name")?, |rel| {
                    rel.paused = pause;
                    Ok(())
                })?;
                Ok(Value::Null)
            }
            "repl.destroy" => self.repl_destroy(&a.str("name")?),
            "repl.break_here" => self.repl_break_here(a),
            "repl.break" => self.repl_break(&a.str("name")?),
            "repl.resync" => self.repl_resync(&a.str("name")?, a.bool("force")?),
            "repl.reverse" => {
                let address = a.opt_str("address")?;
                self.repl_reverse(&a.str("name")?, address.as_deref(), a.bool("force")?)
            }
            _ => Err(format!("unknown operation '{op}'")),
        }
    }

    /// `repl.break_here {name[, members, mysql_socket, mysql_user]}`, on the
    /// target (`mysql failover`): refuse the source's cycles from now on; with
    /// the set the failover started, also remember it for `reverse`.
    fn repl_break_here(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        relationship::check_name(&name)?;
        let members = a.str_list("members")?;
        for m in &members {
            validate_dataset_name(m)?;
        }
        let live = match a.opt_str("mysql_socket")? {
            Some(socket) if !members.is_empty() => Some(MysqlSet {
                members,
                socket,
                user: a.opt_str("mysql_user")?.unwrap_or_else(|| "root".into()),
            }),
            Some(_) => return Err("repl.break_here: 'mysql_socket' without 'members'".into()),
            None => None,
        };
        let started = live.as_ref().map(|l| l.members.join(","));
        // Pulled, the relationship is kept here, and this side starts its
        // cycles: broken off as by `replication break`, none is started
        // until `replication resync` here.
        if self.replication.get(&name).is_ok_and(|rel| rel.pull) {
            self.replication.update(&name, |x| {
                x.broken = true;
                Ok(())
            })?;
        }
        if self.replication.set_broken_here(
            &name,
            Some(BrokenHere {
                name: name.clone(),
                live,
            }),
        )? {
            match started {
                Some(m) => super::log(format!(
                    "replication {name}: broken off here (target side); failover set {m}"
                )),
                None => super::log(format!("replication {name}: broken off here (target side)")),
            }
        }
        Ok(Value::Null)
    }

    fn repl_create(&self, a: &Args) -> OpResult {
        let name = a.str("name")?;
        relationship::check_name(&name)?;
        let pull = a.bool("pull")?;
        // A pull relationship is kept on the target: the remote end is the
        // source, and the target filesystem is here.
        let (source_arg, target_arg) = (a.str("source")?, a.str("target")?);
        let (sources, target_addr, target_fs) = if pull {
            let (addr, fs) = relationship::parse_target(&source_arg)
                .map_err(|e| format!("--pull: the source is on the other appliance: {e}"))?;
            (split_sources(&fs), addr, target_arg)
        } else {
            let (addr, fs) = relationship::parse_target(&target_arg)?;
            (split_sources(&source_arg), addr, fs)
        };
        for s in &sources {
            validate_dataset_name(s)?;
        }
        validate_dataset_name(&target_fs)?;
        // Pulled, the set and its server's socket are on the source
        // appliance, whose cycles take the `mysql snapshot`.
        let mysql = match a.opt_str("mysql_socket")? {
            Some(socket) if socket.starts_with('/') => Some(MysqlSet {
                members: sources.clone(),
                socket,
                user: a.opt_str("mysql_user")?.unwrap_or_else(|| "root".into()),
            }),
            Some(socket) => {
                return Err(format!(
                    "MySQL socket '{socket}' must be an absolute path (the daemon resolves it)"
                ))
            }
            None if sources.len() > 1 => {
                return Err(format!(
                    "source '{}' lists several datasets: that is a MySQL set, which must be given with its server's socket (--mysql-socket; mysql_socket in the API)",
                    sources.join(",")
                ))
            }
            None => None,
        };
        if let Some(m) = &mysql {
            relationship::member_targets(&m.members, &target_fs)?;
        }
        let recursive = a.bool("recursive")?;
        if recursive && mysql.is_some() {
            return Err(
                "-r replicates the tree under one filesystem: it cannot be combined with a MySQL set"
                    .into(),
            );
        }
        let source = sources[0].clone();
        let schedule = match a.opt_str("schedule")? {
            None => 300,
            Some(s) => retention::duration(&s)
                .filter(|&d| d >= relationship::MIN_SCHEDULE)
                .ok_or_else(|| format!("invalid schedule '{s}' (use e.g. 30s, 5m, 1h)"))?,
        };
        let keep = a
            .opt_str("keep")?
            .unwrap_or_else(|| DEFAULT_KEEP.to_string());
        retention::parse_keep(&keep)?;
        let bwlimit = a.opt_size("bwlimit")?.filter(|&b| b > 0);
        // The sources must exist now; the target is checked at the first
        // cycle. A pulled source is checked at the first cycle; the target's
        // pool must be here.
        if pull {
            self.ds_store(&target_fs)?;
        } else {
            for s in &sources {
                self.ds_store(s)?.dataset(s).map_err(super::se)?;
            }
        }
        let rel = Relationship {
            name: name.clone(),
            source,
            target_addr,
            target_fs,
            schedule,
            keep,
            bwlimit,
            paused: a.bool("paused")?,
            broken: false,
            status: Default::default(),
            mysql,
            pull,
            recursive,
        };
        if !pull {
            self.refuse_pulled_name(&name)?;
        }
        let r = &self.replication;
        let mut rels = r.rels.lock();
        if rels.contains_key(&name) {
            return Err(format!("replication relationship '{name}' already exists"));
        }
        let mut next = rels.clone();
        next.insert(name.clone(), rel);
        r.save_rels(&next)?;
        *rels = next;
        super::log(format!("replication: created relationship '{name}'"));
        Ok(Value::Null)
    }

    /// `repl.list [name]`: the relationships kept here (pushed, or pulled by
    /// this appliance), then the pulls this appliance serves as the source.
    fn repl_list(&self, name: Option<String>) -> OpResult {
        let r = &self.replication;
        let t = now();
        let own: Vec<Relationship> = r
            .rels
            .lock()
            .values()
            .filter(|rel| name.as_ref().is_none_or(|n| *n == rel.name))
            .cloned()
            .collect();
        let served = self.pulled_by_rows(name.as_deref(), t);
        if let (Some(n), true, true) = (&name, own.is_empty(), served.is_empty()) {
            return Err(no_such_relationship(n));
        }
        let mut rows: Vec<Value> = own
            .iter()
            .map(|rel| {
                let role = if rel.pull { "pull" } else { "push" };
                list_row(rel, role, r.is_running(&rel.name), t)
            })
            .collect();
        rows.extend(served);
        Ok(json!(rows))
    }

    fn repl_destroy(&self, name: &str) -> OpResult {
        let r = &self.replication;
        let lock = r.cycle_lock(name);
        let _cycle = lock.lock();
        let rel = match r.get(name) {
            Ok(rel) => rel,
            Err(e) => return self.forget_pulled_by(name).unwrap_or(Err(e)),
        };
        // The holds of the relationship go with it (on this side; the target's
        // go when the target side is destroyed or resynced).
        for local in &local_datasets(&rel, !rel.pull) {
            if let Ok(store) = self.ds_store(local) {
                if store.dataset(local).is_ok() {
                    self.release_holds(&store, local, &hold_tag(name), None)?;
                }
            }
        }
        let mut rels = r.rels.lock();
        let mut next = rels.clone();
        next.remove(name);
        r.save_rels(&next)?;
        *rels = next;
        r.cycles.lock().remove(name);
        super::log(format!("replication: destroyed relationship '{name}'"));
        Ok(Value::Null)
    }
}

/// The datasets of `--source`: one, or the members of a MySQL set
/// (`DATAFS,LOGFS`).
fn split_sources(arg: &str) -> Vec<String> {
    arg.split(',').map(|s| s.trim().to_string()).collect()
}

/// One row of `list`: relationship `rel` as this side sees it; `role` is
/// "push", "pull" or "pulled-by PEER" (a pull served here). `held` is the
/// snapshot the relationship holds on this side.
pub(super) fn list_row(rel: &Relationship, role: &str, running: bool, t: u64) -> Value {
    let s = &rel.status;
    let served = role.starts_with("pulled-by");
    // This side's filesystem, where the relationship's hold is.
    let here = if rel.pull {
        &rel.target_fs
    } else {
        &rel.source
    };
    json!({
        "name": rel.name,
        "role": role,
        "source": if rel.pull { format!("{}/{}", rel.target_addr, rel.source) } else { rel.source.clone() },
        "members": match &rel.mysql {
            Some(m) => json!(m.members),
            None if rel.recursive => json!(s.members.iter().filter(|m| !m.gone).map(|m| &m.source).collect::<Vec<_>>()),
            None => Value::Null,
        },
        "recursive": rel.recursive,
        "member_status": member_rows(&s.members, t),
        "target": if rel.pull { rel.target_fs.clone() } else { rel.target() },
        "pull": rel.pull,
        "state": rel.state(running),
        "lag": rel.lag(t),
        // A served pull's schedule is the puller's (0: it did not say).
        "lagging": !(served && rel.schedule == 0) && rel.lagging(t),
        "last_success": s.last_success,
        "last_snapshot": s.last_snapshot,
        "held": s.last_snapshot.as_ref().map(|n| format!("{here}@{n}")),
        "bytes": s.last_bytes,
        "total_bytes": s.total_bytes,
        "rate": s.last_rate,
        "cycles": s.cycles,
        "schedule": rel.schedule,
        "keep": rel.keep,
        "bwlimit": rel.bwlimit,
        "last_error": s.last_error,
        "last_message": s.last_message,
    })
}

/// The members of a recursive relationship as `list` shows them: each with
/// its own recovery point and lag, and whether it is gone from the source.
fn member_rows(members: &[MemberStatus], now: u64) -> Value {
    members
        .iter()
        .map(|m| {
            json!({
                "source": m.source,
                "target": m.target,
                "last_snapshot": m.last_snapshot,
                "lag": m.last_snapshot_time.map(|t| now.saturating_sub(t)),
                "state": if m.gone { "gone" } else if m.last_snapshot.is_none() { "new" } else { "ok" },
            })
        })
        .collect()
}

/// A destroy refused by a replication hold (`repl:NAME`): say what the hold
/// is for. It is not released for the user: as zfs, a destroy never breaks a
/// relationship's chain by itself (its next increment needs that snapshot; a
/// member of a recursive relationship destroyed on purpose is released by
/// hand, and the relationship then keeps its copy on the target as gone).
pub(super) fn explain_repl_hold(msg: String) -> String {
    const HELD: &str = "held by repl:";
    let Some(i) = msg.find(HELD) else {
        return msg;
    };
    let name: String = msg[i + HELD.len()..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c))
        .collect();
    format!(
        "{msg} (repl:{name} is replication relationship '{name}''s newest snapshot in common with its target, held so its next increment works; released, the target keeps its copy)"
    )
}

/// The hold tag of a relationship's newest common snapshot.
pub(super) fn hold_tag(name: &str) -> String {
    format!("repl:{name}")
}

/// "replication relationship 'NAME' does not exist", of kind not-found.
fn no_such_relationship(name: &str) -> String {
    crate::error_kind::tag(
        cachalot_datasets::ErrorKind::NotFound,
        format!("replication relationship '{name}' does not exist"),
    )
}

#[cfg(test)]
mod tests {
    use super::Replication;

    #[test]
    fn a_peer_pairing_back_keeps_the_address_we_dial_it_at() {
        let dir = std::env::temp_dir().join(format!("cachalot-repl-pin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let r = Replication::open(&dir).unwrap();
        let addr = "10.0.0.2:7480";
        r.pin("k1", Some(addr)).unwrap();
        // The peer pairs with our listener too (to pull from us).
        r.pin("k1", None).unwrap();
        assert_eq!(r.pinned_for(addr).as_deref(), Some("k1"));
        // A new key at that address replaces the old one, durably.
        r.pin("k2", Some(addr)).unwrap();
        assert!(!r.is_pinned("k1"));
        let again = Replication::open(&dir).unwrap();
        assert_eq!(again.pinned_for(addr).as_deref(), Some("k2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
