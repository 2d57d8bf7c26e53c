//! NFSv4.1 client and session state (RFC 8881 sections 2.4, 2.10 and 18.35 to
//! 18.37, 18.46): client records made by EXCHANGE_ID and confirmed by
//! CREATE_SESSION, sessions with a fore-channel slot table, and each slot's
//! reply cache, which gives a COMPOUND exactly-once semantics.
//!
//! Invariants:
//! - A client id is unique for the life of the server instance: its high 32
//!   bits are the boot time in seconds, so a client id from before a restart is
//!   STALE_CLIENTID, never another client's.
//! - At most one confirmed and one unconfirmed record per client owner; a
//!   CREATE_SESSION that confirms a record drops the owner's older confirmed
//!   record with its sessions (the client rebooted).
//! - Each slot is in one of: idle with the sequence id and reply of its last
//!   request, or busy with a request running. A SEQUENCE with the next
//!   sequence id starts a new request; one with the same id is a retry, answered
//!   from the cache (or RETRY_UNCACHED_REP if the reply was not cached, DELAY if
//!   the first is still running, SEQ_FALSE_RETRY if its arguments differ); any
//!   other id is SEQ_MISORDERED. A busy slot is freed by the [`SlotGuard`] of
//!   its request even if the request panics.
//! - Memory is bounded: at most `MAX_CLIENTS` client records, `MAX_SESSIONS`
//!   sessions (`MAX_SESSIONS_PER_CLIENT` each), `MAX_SLOTS` slots per
//!   session, each caching at most the session's ca_maxresponsesize_cached
//!   (the client's figure clamped to `MIN_CACHED..=MAX_CACHED`); and every
//!   session reserves slots x that size from one reply cache budget
//!   ([`super::budget`], `REPLY_CACHE_BUDGET` by default), getting fewer
//!   slots when it runs low, so all cached replies together stay within it.
//!   A COMPOUND whose reply would not fit its slot is cut short with
//!   REP_TOO_BIG_TO_CACHE (see `super::limits`); an uncached reply that does
//!   not fit is answered RETRY_UNCACHED_REP on a retry.
//! - Leases: every SEQUENCE renews its client's lease; a client not heard from
//!   for a lease period loses its sessions, opens and locks ([`State::expire`],
//!   run at the start of COMPOUNDs), so a dead client's locks are released.
//! - Grace (section 8.4.2): the owners of confirmed clients are kept in a small
//!   stable record (one hex line each, replaced atomically); a server that
//!   starts with a non-empty record is in grace for one lease period, or until
//!   every recorded client sent RECLAIM_COMPLETE: only those clients may
//!   reclaim then, and nobody may open or lock anew.

use super::budget::{Budget, Reservation};
use super::consts::*;
use super::locks::Table;
use super::ops::{ChannelAttrs, CreateSessionArgs, ExchangeIdArgs, SequenceArgs};
use crate::rpc::{Cred, MAX_RECORD};
use crate::xdr::Writer;
use cachalot_analytics::Stat;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const MAX_CLIENTS: usize = 4096;
pub const MAX_SESSIONS: usize = 1024;
/// Sessions one client may hold at once (Linux opens one per server); more
/// is CREATE_SESSION NOSPC until it destroys one.
pub const MAX_SESSIONS_PER_CLIENT: usize = 8;
/// Slots per session (the fore channel's ca_maxrequests).
pub const MAX_SLOTS: u32 = 32;
/// Operations per COMPOUND (ca_maxoperations).
pub const MAX_OPS: u32 = 64;
/// The most a slot may cache (ca_maxresponsesize_cached): replies the Linux
/// client asks to cache (OPEN, LOCK, CLOSE, SETATTR, CREATE, REMOVE, RENAME...)
/// are well under 2 KiB; READ, READDIR and WRITE are not cached.
pub const MAX_CACHED: u32 = 8 << 10;
/// The least a slot caches: the Linux client asks for 0 bytes yet sets
/// sa_cachethis on OPEN and LOCK, which must then fit (the server may change
/// the fore channel's figure, RFC 8881 section 18.36.3).
pub const MIN_CACHED: u32 = 4 << 10;
/// The default budget of all sessions' reply caches together: 32 MiB, 128
/// sessions of 32 slots of 8 KiB (more sessions get fewer slots).
pub const REPLY_CACHE_BUDGET: usize = 32 << 20;
/// Default lease time.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(90);

/// Who a client is, as far as AUTH_SYS tells: compared to refuse a client id
/// to a different principal (CLID_INUSE, RFC 8881 section 18.35.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    None,
    Sys(u32),
}

impl From<&Cred> for Principal {
    fn from(c: &Cred) -> Self {
        match c {
            Cred::None => Principal::None,
            Cred::Sys { uid, .. } => Principal::Sys(*uid),
        }
    }
}

struct ClientRec {
    owner: Vec<u8>,
    verifier: [u8; 8],
    principal: Principal,
    confirmed: bool,
    /// The last CREATE_SESSION's csa_sequence and its reply (the one-slot
    /// cache of CREATE_SESSION, RFC 8881 section 18.36.4).
    cs_seq: u32,
    cs_reply: Option<(Vec<u8>, [u8; 16])>,
    /// When the client was last heard from; its sessions share it, so
    /// SEQUENCE renews the lease without the state lock.
    renewed: Arc<Renewed>,
    reclaim_complete: bool,
    /// The address it last called from (analytics).
    addr: String,
}

/// When a client was last heard from: nanoseconds since the state's epoch
/// ([`State::nanos`]), only ever moved forward, so a COMPOUND that read the
/// clock before another's renewal cannot move it back.
struct Renewed(AtomicU64);

impl Renewed {
    fn at(t: u64) -> Arc<Renewed> {
        Arc::new(Renewed(AtomicU64::new(t)))
    }
    fn renew(&self, t: u64) {
        self.0.fetch_max(t, Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The reply remembered by a slot.
#[derive(Clone)]
enum Cached {
    None,
    /// The request ran but its reply was not cached (sa_cachethis false or too big).
    Uncached(u64),
    Reply(u64, Arc<Vec<u8>>),
}

struct Slot {
    seq: u32,
    busy: bool,
    cached: Cached,
}

pub struct Session {
    pub id: [u8; 16],
    pub clientid: u64,
    pub fore: ChannelAttrs,
    slots: Vec<Mutex<Slot>>,
    /// Its client's lease (the client record's).
    renewed: Arc<Renewed>,
    /// The reply cache memory of `slots`, given back when the session goes.
    cache: Reservation,
}

#[derive(Default)]
struct Inner {
    clients: HashMap<u64, ClientRec>,
    sessions: HashMap<[u8; 16], Arc<Session>>,
    table: Table,
}

impl Inner {
    /// Forget client `id`: its sessions and all it holds; the number of
    /// lock stateids with locks that went with it.
    fn drop_client(&mut self, id: u64) -> usize {
        self.clients.remove(&id);
        self.sessions.retain(|_, s| s.clientid != id);
        self.table.drop_client(id)
    }
}

/// The grace period after a restart.
#[derive(Default)]
struct Grace {
    until: Option<Instant>,
    /// Owners that may still reclaim (recorded, no RECLAIM_COMPLETE yet).
    pending: HashSet<Vec<u8>>,
}

/// All NFSv4.1 state of a server.
pub struct State {
    inner: Mutex<Inner>,
    pub boot: u32,
    next: AtomicU64,
    pub lease: Duration,
    /// eir_server_owner.so_major_id and eir_server_scope.
    pub owner: Vec<u8>,
    grace: Mutex<Grace>,
    /// The stable record of clients that may reclaim after a restart.
    record: Option<PathBuf>,
    /// The instant lease times count from ([`State::nanos`]).
    epoch: Instant,
    /// When [`State::expire`] last looked for expired clients (nanoseconds
    /// since `epoch`): an atomic, as every COMPOUND reads it.
    last_expire: AtomicU64,
    locks_stat: Stat,
    /// The reply cache budget the sessions reserve from.
    pub budget: Arc<Budget>,
}

/// What SEQUENCE decided.
pub enum SeqOutcome {
    /// A new request: run the rest of the COMPOUND; the guard stores its reply.
    New(SlotGuard, SequenceRes),
    /// A retry answered from the cache: the whole COMPOUND4res.
    Replay(Arc<Vec<u8>>),
    Err(u32),
}

/// sr_* of a SEQUENCE reply.
#[derive(Clone, Copy, Debug)]
pub struct SequenceRes {
    pub highest_slotid: u32,
    pub target_highest_slotid: u32,
    pub status_flags: u32,
}

/// A slot busy with a request; dropping it without [`SlotGuard::finish`]
/// (a panic) leaves the slot idle with nothing cached.
pub struct SlotGuard {
    pub session: Arc<Session>,
    slot: u32,
    cachethis: bool,
    args_hash: u64,
    done: bool,
}

impl SlotGuard {
    /// Store the COMPOUND4res of the request and free the slot.
    pub fn finish(mut self, reply: &[u8]) {
        let mut s = self.session.slots[self.slot as usize].lock();
        let fits = reply.len() <= self.session.fore.maxresponsesize_cached as usize;
        s.cached = if self.cachethis && fits {
            Cached::Reply(self.args_hash, Arc::new(reply.to_vec()))
        } else {
            Cached::Uncached(self.args_hash)
        };
        s.busy = false;
        self.done = true;
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if !self.done {
            let mut s = self.session.slots[self.slot as usize].lock();
            s.cached = Cached::Uncached(self.args_hash);
            s.busy = false;
        }
    }
}

fn negotiate(c: &ChannelAttrs, max_ops: u32, max_slots: u32) -> ChannelAttrs {
    ChannelAttrs {
        headerpadsize: 0,
        maxrequestsize: c.maxrequestsize.min(MAX_RECORD as u32),
        maxresponsesize: c.maxresponsesize.min(MAX_RECORD as u32),
        // The client's figure within our bounds: Linux asks for 0 bytes, which
        // would leave no retry with its reply (the cached replies are small).
        maxresponsesize_cached: c
            .maxresponsesize_cached
            .clamp(MIN_CACHED, MAX_CACHED)
            .min(c.maxresponsesize.min(MAX_RECORD as u32)),
        maxoperations: c.maxoperations.clamp(1, max_ops),
        maxrequests: c.maxrequests.clamp(1, max_slots),
        rdma_ird: None,
    }
}

pub fn encode_channel(w: &mut Writer, c: &ChannelAttrs) {
    w.u32(c.headerpadsize)
        .u32(c.maxrequestsize)
        .u32(c.maxresponsesize)
        .u32(c.maxresponsesize_cached)
        .u32(c.maxoperations)
        .u32(c.maxrequests)
        .u32(0);
}

impl Default for State {
    fn default() -> Self {
        Self::new(DEFAULT_LEASE, None)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 2 * 1024 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl State {
    /// State with lease time `lease`; `record` is the file of the stable
    /// record of clients (none: no grace period after a restart).
    pub fn new(lease: Duration, record: Option<PathBuf>) -> State {
        Self::with_reply_cache(lease, record, REPLY_CACHE_BUDGET)
    }

    /// [`State::new`] with a reply cache budget of `budget` bytes.
    pub fn with_reply_cache(lease: Duration, record: Option<PathBuf>, budget: usize) -> State {
        let boot = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() as u32);
        let host = std::fs::read_to_string("/etc/machine-id").unwrap_or_default();
        let mut grace = Grace::default();
        if let Some(text) = record
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
        {
            grace.pending = text.lines().filter_map(unhex).take(MAX_CLIENTS).collect();
            if !grace.pending.is_empty() {
                grace.until = Some(Instant::now() + lease);
            }
        }
        let reg = cachalot_analytics::global();
        let dims = cachalot_analytics::catalog::info("nfs.locks").map_or(&[][..], |i| i.dims);
        State {
            inner: Mutex::new(Inner::default()),
            boot,
            next: AtomicU64::new(1),
            lease,
            owner: format!("cachalot:{}", host.trim()).into_bytes(),
            grace: Mutex::new(grace),
            record,
            epoch: Instant::now(),
            last_expire: AtomicU64::new(0),
            locks_stat: reg.stat("nfs.locks", dims),
            budget: Budget::new(budget),
        }
    }

    /// `t` in nanoseconds since the state's epoch (0 before it).
    fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// How long ago (from now) a client was last heard from.
    fn silent_for(&self, r: &Renewed) -> Duration {
        Duration::from_nanos(self.nanos(Instant::now()).saturating_sub(r.get()))
    }

    /// Run `f` on the open and lock table.
    pub fn with_table<R>(&self, f: impl FnOnce(&mut Table) -> R) -> R {
        f(&mut self.inner.lock().table)
    }

    /// Count a lock event (grant, conflict, reclaim, expired) for `client`.
    pub fn note_lock(&self, client: &str, event: &str) {
        if cachalot_analytics::enabled() {
            self.locks_stat.add(&[client, event], 1, 0);
        }
    }

    /// Is the server in its grace period?
    pub fn in_grace(&self) -> bool {
        let mut g = self.grace.lock();
        match g.until {
            Some(t) if Instant::now() < t && !g.pending.is_empty() => true,
            Some(_) => {
                g.until = None;
                g.pending.clear();
                false
            }
            None => false,
        }
    }

    /// May `clientid` open or lock now (`reclaim`: reclaiming old state)?
    pub fn grace_check(&self, clientid: u64, reclaim: bool) -> Result<(), u32> {
        let grace = self.in_grace();
        if !reclaim {
            return if grace { Err(NFS4ERR_GRACE) } else { Ok(()) };
        }
        if !grace {
            return Err(NFS4ERR_NO_GRACE);
        }
        let g = self.inner.lock();
        let c = g.clients.get(&clientid).ok_or(NFS4ERR_STALE_CLIENTID)?;
        if c.reclaim_complete || !self.grace.lock().pending.contains(&c.owner) {
            return Err(NFS4ERR_NO_GRACE);
        }
        Ok(())
    }

    /// Rewrite the stable record: the owners of confirmed clients, plus those
    /// still allowed to reclaim. Written to a new file, synced and renamed,
    /// so a crash leaves the old record or the new one.
    fn save_record(&self, g: &Inner) {
        let Some(path) = &self.record else {
            return;
        };
        let mut owners: Vec<&Vec<u8>> = g
            .clients
            .values()
            .filter(|c| c.confirmed)
            .map(|c| &c.owner)
            .collect();
        let grace = self.grace.lock();
        owners.extend(grace.pending.iter());
        owners.sort();
        owners.dedup();
        let text: String = owners.iter().map(|o| hex(o) + "\n").collect();
        let tmp = path.with_extension("tmp");
        let ok = std::fs::File::create(&tmp).and_then(|mut f| {
            use std::io::Write;
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
        if ok.is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }

    /// Drop the clients whose lease ran out (at most once a second): their
    /// sessions, opens and locks go with them.
    pub fn expire(&self, now: Instant) {
        let now = self.nanos(now);
        let last = self.last_expire.load(Ordering::Relaxed);
        let every = Duration::from_secs(1).min(self.lease / 4).as_nanos() as u64;
        // One COMPOUND a period looks; the others go on at once.
        if now.saturating_sub(last) < every
            || self
                .last_expire
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let mut g = self.inner.lock();
        let dead: Vec<(u64, String)> = g
            .clients
            .iter()
            .filter(|(_, c)| self.silent_for(&c.renewed) > self.lease)
            .map(|(id, c)| (*id, c.addr.clone()))
            .collect();
        if dead.is_empty() {
            return;
        }
        for (id, addr) in &dead {
            g.drop_client(*id);
            self.note_lock(addr, "expired");
        }
        self.save_record(&g);
    }

    /// When the server started (seconds since the epoch).
    pub fn boot_secs(&self) -> i64 {
        self.boot as i64
    }

    fn new_clientid(&self) -> u64 {
        ((self.boot as u64) << 32) | (self.next.fetch_add(1, Ordering::SeqCst) & 0xffff_ffff)
    }

    /// EXCHANGE_ID (RFC 8881 section 18.35.4): (clientid, sequenceid, flags).
    pub fn exchange_id(
        &self,
        a: &ExchangeIdArgs<'_>,
        who: Principal,
        addr: &str,
    ) -> Result<(u64, u32, u32), u32> {
        if a.flags & !EXCHGID4_ARG_FLAGS != 0 {
            return Err(NFS4ERR_INVAL);
        }
        match a.state_protect {
            SP4_NONE => {}
            // Machine credentials and SSV need RPCSEC_GSS, which we do not offer.
            SP4_MACH_CRED => return Err(NFS4ERR_INVAL),
            _ => return Err(NFS4ERR_ENCR_ALG_UNSUPP),
        }
        let flags = EXCHGID4_FLAG_USE_NON_PNFS;
        let mut g = self.inner.lock();
        let confirmed = g
            .clients
            .iter()
            .find(|(_, c)| c.confirmed && c.owner == a.owner)
            .map(|(id, _)| *id);
        if a.flags & EXCHGID4_FLAG_UPD_CONFIRMED_REC_A != 0 {
            let id = confirmed.ok_or(NFS4ERR_NOENT)?;
            let c = g.clients.get_mut(&id).ok_or(NFS4ERR_NOENT)?;
            if c.verifier != a.verifier {
                return Err(NFS4ERR_NOT_SAME);
            }
            if c.principal != who {
                return Err(NFS4ERR_PERM);
            }
            c.renewed.renew(self.nanos(Instant::now()));
            return Ok((
                id,
                c.cs_seq.wrapping_add(1),
                flags | EXCHGID4_FLAG_CONFIRMED_R,
            ));
        }
        if let Some(id) = confirmed {
            let lease = self.lease;
            let busy = g.table.holds_state(id) || g.sessions.values().any(|s| s.clientid == id);
            let c = &g.clients[&id];
            if c.principal != who {
                if busy && self.silent_for(&c.renewed) < lease {
                    return Err(NFS4ERR_CLID_INUSE);
                }
            } else if c.verifier == a.verifier {
                // The same incarnation asking again: its confirmed record.
                return Ok((
                    id,
                    c.cs_seq.wrapping_add(1),
                    flags | EXCHGID4_FLAG_CONFIRMED_R,
                ));
            }
        }
        // A new client, or a new incarnation of one: a new unconfirmed record
        // replaces any unconfirmed one of the same owner.
        g.clients.retain(|_, c| c.confirmed || c.owner != a.owner);
        if g.clients.len() >= MAX_CLIENTS {
            return Err(NFS4ERR_DELAY);
        }
        let id = self.new_clientid();
        g.clients.insert(
            id,
            ClientRec {
                owner: a.owner.to_vec(),
                verifier: a.verifier,
                principal: who,
                confirmed: false,
                cs_seq: 0,
                cs_reply: None,
                renewed: Renewed::at(self.nanos(Instant::now())),
                reclaim_complete: false,
                addr: addr.to_string(),
            },
        );
        Ok((id, 1, flags))
    }

    /// CREATE_SESSION (RFC 8881 section 18.36.4): the encoded result after the
    /// status (a retry of the last CREATE_SESSION gets the same bytes).
    pub fn create_session(&self, a: &CreateSessionArgs, who: Principal) -> Result<Vec<u8>, u32> {
        let mut g = self.inner.lock();
        let c = g
            .clients
            .get_mut(&a.clientid)
            .ok_or(NFS4ERR_STALE_CLIENTID)?;
        if c.principal != who {
            return Err(NFS4ERR_CLID_INUSE);
        }
        if a.sequence == c.cs_seq {
            if let Some((reply, _)) = &c.cs_reply {
                return Ok(reply.clone());
            }
            return Err(NFS4ERR_SEQ_MISORDERED);
        }
        if a.sequence != c.cs_seq.wrapping_add(1) {
            return Err(NFS4ERR_SEQ_MISORDERED);
        }
        if a.fore.maxrequests == 0 || a.fore.maxoperations < 2 {
            return Err(NFS4ERR_INVAL);
        }
        // Limits first, before the record changes: a refused CREATE_SESSION
        // must leave no cached reply naming a session that does not exist.
        if g.sessions.len() >= MAX_SESSIONS {
            return Err(NFS4ERR_DELAY);
        }
        let held = g.sessions.values().filter(|s| s.clientid == a.clientid);
        if held.count() >= MAX_SESSIONS_PER_CLIENT {
            return Err(NFS4ERR_NOSPC);
        }
        let mut fore = negotiate(&a.fore, MAX_OPS, MAX_SLOTS);
        let back = negotiate(&a.back, 2, 1);
        // Fewer slots when the budget runs low; none left is DELAY (expiring
        // clients give theirs back).
        let (cache, nslots) = self
            .budget
            .reserve(fore.maxresponsesize_cached as usize, fore.maxrequests)
            .ok_or(NFS4ERR_DELAY)?;
        fore.maxrequests = nslots;
        let c = g
            .clients
            .get_mut(&a.clientid)
            .ok_or(NFS4ERR_STALE_CLIENTID)?;
        let was_confirmed = c.confirmed;
        let owner = c.owner.clone();
        // The second half is random, not a counter: SEQUENCE and DESTROY_SESSION
        // trust the session id alone, so a client on an allowed address must not be
        // able to guess another client's (RFC 8881 section 2.10.8.3 lets any
        // connection use a session; only knowing its id grants that).
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&a.clientid.to_be_bytes());
        id[8..].copy_from_slice(&cachalot_pool::pool::new_guid().to_be_bytes());
        let mut w = Writer::new();
        w.fixed(&id).u32(a.sequence).u32(0);
        encode_channel(&mut w, &fore);
        encode_channel(&mut w, &back);
        c.cs_seq = a.sequence;
        c.cs_reply = Some((w.buf.clone(), id));
        c.confirmed = true;
        c.renewed.renew(self.nanos(Instant::now()));
        let renewed = c.renewed.clone();
        if !was_confirmed {
            // The owner's previous incarnation, if any, loses its state.
            let old: Vec<u64> = g
                .clients
                .iter()
                .filter(|(i, r)| **i != a.clientid && r.confirmed && r.owner == owner)
                .map(|(i, _)| *i)
                .collect();
            for o in old {
                g.drop_client(o);
            }
            self.save_record(&g);
        }
        let slots = (0..fore.maxrequests)
            .map(|_| {
                Mutex::new(Slot {
                    seq: 0,
                    busy: false,
                    cached: Cached::None,
                })
            })
            .collect();
        g.sessions.insert(
            id,
            Arc::new(Session {
                id,
                clientid: a.clientid,
                fore,
                slots,
                renewed,
                cache,
            }),
        );
        Ok(w.buf)
    }

    /// SEQUENCE (RFC 8881 section 18.46.4) for a COMPOUND of `nops` operations
    /// whose arguments hash to `args_hash`, received at `now` (the lease is
    /// renewed from then; the COMPOUND's clock read, not one more). The state
    /// lock is held only to find the session (a session exists only while its
    /// client does, see [`Inner::drop_client`]) and renew the lease through the
    /// session's shared timestamp.
    pub fn sequence(
        &self,
        a: &SequenceArgs,
        nops: u32,
        args_hash: u64,
        now: Instant,
    ) -> SeqOutcome {
        // Renewed while the lock is held: `expire` judges and drops a client
        // under the same lock, so a lease is never renewed after its client
        // was judged expired (renewed after the lookup, an expiry in between
        // left this COMPOUND's OPEN or LOCK under a client already gone).
        let Some(session) = ({
            let g = self.inner.lock();
            let session = g.sessions.get(&a.sessionid).cloned();
            if let Some(s) = &session {
                s.renewed.renew(self.nanos(now));
            }
            session
        }) else {
            return SeqOutcome::Err(NFS4ERR_BADSESSION);
        };
        let nslots = session.slots.len() as u32;
        if a.slotid >= nslots {
            return SeqOutcome::Err(NFS4ERR_BADSLOT);
        }
        let res = SequenceRes {
            // The highest slot the server accepts (not the client's figure:
            // a lower one would shrink the client's table).
            highest_slotid: nslots - 1,
            target_highest_slotid: nslots - 1,
            status_flags: 0,
        };
        let mut slot = session.slots[a.slotid as usize].lock();
        if a.sequenceid == slot.seq && slot.seq != 0 {
            if slot.busy {
                return SeqOutcome::Err(NFS4ERR_DELAY);
            }
            return match &slot.cached {
                Cached::Reply(h, r) if *h == args_hash => SeqOutcome::Replay(r.clone()),
                Cached::Uncached(h) if *h == args_hash => {
                    SeqOutcome::Err(NFS4ERR_RETRY_UNCACHED_REP)
                }
                Cached::None => SeqOutcome::Err(NFS4ERR_RETRY_UNCACHED_REP),
                // Same slot and sequence id, other arguments: not a retry.
                _ => SeqOutcome::Err(NFS4ERR_SEQ_FALSE_RETRY),
            };
        }
        if a.sequenceid != slot.seq.wrapping_add(1) {
            return SeqOutcome::Err(NFS4ERR_SEQ_MISORDERED);
        }
        if nops > session.fore.maxoperations {
            return SeqOutcome::Err(NFS4ERR_TOO_MANY_OPS);
        }
        slot.seq = a.sequenceid;
        slot.busy = true;
        slot.cached = Cached::None;
        drop(slot);
        SeqOutcome::New(
            SlotGuard {
                session,
                slot: a.slotid,
                cachethis: a.cachethis,
                args_hash,
                done: false,
            },
            res,
        )
    }

    /// DESTROY_SESSION.
    pub fn destroy_session(&self, id: &[u8; 16]) -> Result<(), u32> {
        let mut g = self.inner.lock();
        g.sessions.remove(id).map(|_| ()).ok_or(NFS4ERR_BADSESSION)
    }

    /// DESTROY_CLIENTID: refused while the client has sessions.
    pub fn destroy_clientid(&self, id: u64) -> Result<(), u32> {
        let mut g = self.inner.lock();
        if !g.clients.contains_key(&id) {
            return Err(NFS4ERR_STALE_CLIENTID);
        }
        if g.sessions.values().any(|s| s.clientid == id) || g.table.holds_state(id) {
            return Err(NFS4ERR_CLIENTID_BUSY);
        }
        g.drop_client(id);
        self.save_record(&g);
        Ok(())
    }

    /// Does session `id` exist?
    pub fn session(&self, id: &[u8; 16]) -> Option<Arc<Session>> {
        self.inner.lock().sessions.get(id).cloned()
    }

    /// RECLAIM_COMPLETE for the whole client.
    pub fn reclaim_complete(&self, clientid: u64) -> Result<(), u32> {
        let mut g = self.inner.lock();
        let c = g.clients.get_mut(&clientid).ok_or(NFS4ERR_STALE_CLIENTID)?;
        if c.reclaim_complete {
            return Err(NFS4ERR_COMPLETE_ALREADY);
        }
        c.reclaim_complete = true;
        let owner = c.owner.clone();
        self.grace.lock().pending.remove(&owner);
        Ok(())
    }

    /// Check the invariants (tests).
    pub fn check(&self) {
        let g = self.inner.lock();
        assert!(g.clients.len() <= MAX_CLIENTS && g.sessions.len() <= MAX_SESSIONS);
        let mut reserved = 0;
        for s in g.sessions.values() {
            assert!(g.clients.get(&s.clientid).is_some_and(|c| c.confirmed));
            assert!(s.slots.len() as u32 <= MAX_SLOTS);
            assert!(s.fore.maxresponsesize_cached <= MAX_CACHED);
            let n = g.sessions.values().filter(|o| o.clientid == s.clientid);
            assert!(n.count() <= MAX_SESSIONS_PER_CLIENT);
            assert_eq!(
                s.cache.bytes(),
                s.slots.len() * s.fore.maxresponsesize_cached as usize
            );
            reserved += s.cache.bytes();
        }
        assert!(reserved <= self.budget.total - self.budget.left());
        let mut owners = HashMap::new();
        for c in g.clients.values() {
            *owners.entry((&c.owner, c.confirmed)).or_insert(0) += 1;
        }
        assert!(
            owners.values().all(|n| *n == 1),
            "one record per owner and kind"
        );
        for r in g.table.map.values() {
            assert!(g.clients.contains_key(&r.clientid), "state has a client");
        }
        g.table.check();
    }
}
