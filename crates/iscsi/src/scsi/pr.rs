//! Reservations: SPC-2 RESERVE/RELEASE (6 and 10) and SPC-4 PERSISTENT RESERVE IN/OUT.
//!
//! Invariants:
//! - At most one persistent reservation and one SPC-2 reservation exist per LU, and
//!   never both (each refuses while the other is held).
//! - A registration is (I_T nexus, key != 0); the generation grows on every change of
//!   registrations (SPC-4 6.16.2), never on reservation-only changes.
//! - State is saved by the caller (`Lun::save_pr`) before GOOD is returned, and kept
//!   across restarts regardless of APTPL: a fence a cluster placed must not vanish
//!   because the storage restarted.
//! - `conflicts` decides access for every command from the reservation type table of
//!   SPC-4 5.13.1 (registrants count as holders for *_RO and *_AR types).

use super::cdb::Cdb;
use super::{Outcome, Sense, KEY_ILLEGAL_REQUEST};
use crate::lun::{Lun, Nexus};
use std::path::Path;

pub const WR_EX: u8 = 1;
pub const EX_AC: u8 = 3;
pub const WR_EX_RO: u8 = 5;
pub const EX_AC_RO: u8 = 6;
pub const WR_EX_AR: u8 = 7;
pub const EX_AC_AR: u8 = 8;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrState {
    pub generation: u32,
    pub regs: Vec<(Nexus, u64)>,
    /// (holder, type) of the persistent reservation.
    pub res: Option<(Nexus, u8)>,
    /// Holder of an SPC-2 RESERVE (not persistent).
    pub legacy: Option<Nexus>,
}

fn all_registrants(kind: u8) -> bool {
    matches!(kind, WR_EX_AR | EX_AC_AR)
}

impl PrState {
    pub fn load(path: &Path) -> PrState {
        let mut st = PrState::default();
        let Ok(text) = std::fs::read_to_string(path) else {
            return st;
        };
        for line in text.lines() {
            let mut f = line.splitn(3, ' ');
            match (f.next(), f.next(), f.next()) {
                (Some("generation"), Some(g), None) => st.generation = g.parse().unwrap_or(0),
                (Some("reg"), Some(k), Some(n)) => {
                    if let Ok(k) = u64::from_str_radix(k, 16) {
                        st.regs.push((Nexus(n.to_string()), k));
                    }
                }
                (Some("res"), Some(t), Some(n)) => {
                    if let Ok(t) = t.parse() {
                        st.res = Some((Nexus(n.to_string()), t));
                    }
                }
                _ => {}
            }
        }
        st
    }

    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut s = format!("generation {}\n", self.generation);
        for (n, k) in &self.regs {
            s.push_str(&format!("reg {k:x} {}\n", n.0));
        }
        if let Some((n, t)) = &self.res {
            s.push_str(&format!("res {t} {}\n", n.0));
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(s.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    }

    fn key_of(&self, n: &Nexus) -> Option<u64> {
        self.regs.iter().find(|(r, _)| r == n).map(|(_, k)| *k)
    }

    fn is_holder(&self, n: &Nexus) -> bool {
        match &self.res {
            Some((h, kind)) => {
                if all_registrants(*kind) {
                    self.key_of(n).is_some()
                } else {
                    h == n
                }
            }
            None => false,
        }
    }

    /// Would this command from `n` be refused with RESERVATION CONFLICT?
    pub fn conflicts(&self, n: &Nexus, cmd: &Cdb) -> bool {
        let always_allowed = matches!(
            cmd,
            Cdb::Inquiry { .. }
                | Cdb::ReportLuns { .. }
                | Cdb::ReportOpcodes { .. }
                | Cdb::RequestSense { .. }
                | Cdb::PrIn { .. }
                | Cdb::Release
        );
        if always_allowed {
            return false;
        }
        if let Some(h) = &self.legacy {
            // SPC-2: everything but the commands above conflicts for others.
            return h != n && !matches!(cmd, Cdb::PrOut { .. });
        }
        let Some((_, kind)) = &self.res else {
            return false;
        };
        if matches!(
            cmd,
            Cdb::PrOut { .. }
                | Cdb::ReadCapacity10
                | Cdb::ReadCapacity16 { .. }
                | Cdb::TestUnitReady
        ) {
            return false;
        }
        let registered = self.key_of(n).is_some();
        let allowed = self.is_holder(n)
            || (registered && matches!(*kind, WR_EX_RO | EX_AC_RO | WR_EX_AR | EX_AC_AR));
        if allowed {
            return false;
        }
        let reads = matches!(
            cmd,
            Cdb::Read(_)
                | Cdb::Verify { .. }
                | Cdb::GetLbaStatus { .. }
                | Cdb::ModeSense { .. }
                | Cdb::PreFetch { .. }
        );
        let exclusive_access = matches!(*kind, EX_AC | EX_AC_RO | EX_AC_AR);
        !reads || exclusive_access
    }
}

pub fn reserve(lun: &Lun, n: &Nexus) -> Outcome {
    let mut st = lun.pr.lock();
    if st.res.is_some() || st.legacy.as_ref().is_some_and(|h| h != n) {
        return Outcome::conflict();
    }
    st.legacy = Some(n.clone());
    Outcome::good()
}

pub fn release(lun: &Lun, n: &Nexus) -> Outcome {
    let mut st = lun.pr.lock();
    if st.legacy.as_ref() == Some(n) {
        st.legacy = None;
    }
    Outcome::good()
}

fn put32(v: &mut [u8], i: usize, x: u32) {
    v[i..i + 4].copy_from_slice(&x.to_be_bytes());
}

pub fn pr_in(lun: &Lun, sa: u8, alloc: u32) -> Outcome {
    let st = lun.pr.lock();
    let mut d = vec![0u8; 8];
    put32(&mut d, 0, st.generation);
    match sa {
        0 => {
            for (_, k) in &st.regs {
                d.extend_from_slice(&k.to_be_bytes());
            }
        }
        1 => {
            if let Some((h, kind)) = &st.res {
                let key = if all_registrants(*kind) {
                    0
                } else {
                    st.key_of(h).unwrap_or(0)
                };
                let mut r = vec![0u8; 16];
                r[0..8].copy_from_slice(&key.to_be_bytes());
                r[13] = *kind & 0x0f; // scope 0 (LU)
                d.extend(r);
            }
        }
        2 => {
            // REPORT CAPABILITIES: CRH, PTPL_C; TMV with the supported types.
            let d = vec![
                0x00,
                0x08,
                0x11,
                0x81,
                0x80 | 0x40 | 0x20 | 0x08 | 0x02,
                0x01,
                0,
                0,
            ];
            return Outcome::data(super::truncated(d, alloc as usize));
        }
        3 => {
            for (r, k) in &st.regs {
                let mut e = vec![0u8; 24];
                e[0..8].copy_from_slice(&k.to_be_bytes());
                if st.is_holder(r) {
                    e[12] = 0x01; // R_HOLDER
                    e[13] = st.res.as_ref().map_or(0, |(_, t)| *t & 0x0f);
                }
                e[12] |= 0x02; // ALL_TG_PT: one target port
                let mut tid = r.0.clone().into_bytes();
                tid.push(0);
                while tid.len() % 4 != 0 {
                    tid.push(0);
                }
                // iSCSI TransportID, format 01b (name + ",i,0x" + ISID).
                let mut t = vec![0x45, 0, 0, 0];
                t[2..4].copy_from_slice(&(tid.len() as u16).to_be_bytes());
                t.extend(tid);
                put32(&mut e, 20, t.len() as u32);
                e.extend(t);
                d.extend(e);
            }
        }
        _ => return Sense::INVALID_FIELD_CDB.into(),
    }
    let n = (d.len() - 8) as u32;
    put32(&mut d, 4, n);
    Outcome::data(super::truncated(d, alloc as usize))
}

/// PERSISTENT RESERVE OUT with its 24-byte parameter list.
pub fn pr_out(lun: &Lun, n: &Nexus, sa: u8, scope: u8, kind: u8, param: &[u8]) -> Outcome {
    if param.len() != 24 {
        return Sense::PARAM_LIST_LENGTH.into();
    }
    let key = u64::from_be_bytes(param[0..8].try_into().expect("8"));
    let sa_key = u64::from_be_bytes(param[8..16].try_into().expect("8"));
    let flags = param[20];
    if flags & 0x0c != 0 {
        return Sense::INVALID_FIELD_PARAM.into(); // SPEC_I_PT, ALL_TG_PT unsupported
    }
    let typed = matches!(sa, 1 | 2 | 4 | 5);
    if typed
        && (scope != 0
            || !matches!(
                kind,
                WR_EX | EX_AC | WR_EX_RO | EX_AC_RO | WR_EX_AR | EX_AC_AR
            ))
    {
        return Sense::INVALID_FIELD_CDB.into();
    }
    let mut st = lun.pr.lock();
    if st.legacy.as_ref().is_some_and(|h| h != n) {
        return Outcome::conflict();
    }
    let before = st.clone();
    let out = apply(&mut st, n, sa, kind, key, sa_key);
    if out.status == super::STATUS_GOOD && *st != before {
        if let Err(e) = lun.save_pr(&st) {
            *st = before;
            let _ = e;
            return Sense::INSUFFICIENT_REG_RESOURCES.into();
        }
    }
    out
}

fn apply(st: &mut PrState, n: &Nexus, sa: u8, kind: u8, key: u64, sa_key: u64) -> Outcome {
    let mine = st.key_of(n);
    match sa {
        0 | 6 => {
            // REGISTER / REGISTER AND IGNORE EXISTING KEY
            if sa == 0 && mine.unwrap_or(0) != key {
                return Outcome::conflict();
            }
            match (mine, sa_key) {
                (None, 0) => {}
                (None, k) => {
                    st.regs.push((n.clone(), k));
                    st.generation = st.generation.wrapping_add(1);
                }
                (Some(_), 0) => {
                    let was_holder = st.is_holder(n);
                    st.regs.retain(|(r, _)| r != n);
                    let kind = st.res.as_ref().map(|(_, t)| *t);
                    if was_holder && (!kind.is_some_and(all_registrants) || st.regs.is_empty()) {
                        st.res = None;
                    }
                    st.generation = st.generation.wrapping_add(1);
                }
                (Some(_), k) => {
                    for r in st.regs.iter_mut().filter(|(r, _)| r == n) {
                        r.1 = k;
                    }
                    st.generation = st.generation.wrapping_add(1);
                }
            }
            Outcome::good()
        }
        1 => {
            if mine != Some(key) {
                return Outcome::conflict();
            }
            match &st.res {
                None => {
                    st.res = Some((n.clone(), kind));
                    Outcome::good()
                }
                Some((_, t)) if st.is_holder(n) && *t == kind => Outcome::good(),
                Some(_) => Outcome::conflict(),
            }
        }
        2 => {
            if mine != Some(key) {
                return Outcome::conflict();
            }
            match &st.res {
                Some((_, t)) if st.is_holder(n) => {
                    if *t != kind {
                        return Sense::new(KEY_ILLEGAL_REQUEST, 0x26, 0x04).into();
                    }
                    st.res = None;
                    Outcome::good()
                }
                _ => Outcome::good(),
            }
        }
        3 => {
            if mine != Some(key) {
                return Outcome::conflict();
            }
            st.regs.clear();
            st.res = None;
            st.generation = st.generation.wrapping_add(1);
            Outcome::good()
        }
        4 | 5 => preempt(st, n, kind, key, sa_key),
        _ => Sense::INVALID_FIELD_CDB.into(),
    }
}

fn preempt(st: &mut PrState, n: &Nexus, kind: u8, key: u64, sa_key: u64) -> Outcome {
    if st.key_of(n) != Some(key) {
        return Outcome::conflict();
    }
    let res = st.res.clone();
    match res {
        Some((_, t)) if all_registrants(t) && sa_key == 0 => {
            st.regs.retain(|(r, _)| r == n);
            st.res = Some((n.clone(), kind));
        }
        Some((h, _)) if st.key_of(&h) == Some(sa_key) => {
            st.regs.retain(|(r, k)| r == n || *k != sa_key);
            st.res = Some((n.clone(), kind));
        }
        _ => {
            if sa_key == 0 {
                return Sense::INVALID_FIELD_PARAM.into();
            }
            let before = st.regs.len();
            st.regs.retain(|(r, k)| r == n || *k != sa_key);
            if st.regs.len() == before {
                return Outcome::conflict();
            }
            if st.res.as_ref().is_some_and(|(h, _)| st.key_of(h).is_none()) {
                st.res = None;
            }
        }
    }
    st.generation = st.generation.wrapping_add(1);
    Outcome::good()
}
