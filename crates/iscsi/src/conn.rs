//! One connection: login, then the full feature phase (RFC 7143): SCSI commands with
//! immediate, unsolicited and R2T-solicited data, Data-In, NOP, task management,
//! text (SendTargets) and logout.
//!
//! Invariants:
//! - Commands outside the CmdSN window [ExpCmdSN, MaxCmdSN] are silently ignored
//!   (RFC 7143 4.2.2.1); every other command gets exactly one response (or is aborted).
//! - A write buffers at most what its CDB asks for, bounded by the transfer limits
//!   checked in `precheck` before any R2T; Data-Out beyond the task's EDTL, with a wrong
//!   DataSN, offset or TTT is a protocol error: at ErrorRecoveryLevel 0 the connection
//!   is dropped (the command was not acknowledged, so nothing acknowledged is lost).
//! - Every PDU we send carries the current StatSN/ExpCmdSN/MaxCmdSN; StatSN advances
//!   once per status-bearing PDU.

use crate::login::{reject_response, Login, Negotiated};
use crate::lun::{Lun, Nexus};
use crate::pdu::*;
use crate::scsi::cdb::{self, Cdb};
use crate::scsi::exec;
use crate::scsi::{Outcome, Sense};
use crate::stats::Stats;
use crate::target::{SessionInfo, Target};
use crate::text::{encode_text, parse_text, OUR_MAX_RECV_DATA};
use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Commands the initiator may have outstanding (MaxCmdSN - ExpCmdSN + 1).
pub const CMD_WINDOW: u32 = 64;
/// Largest Data-Out a command may ask for (bytes).
const MAX_DATA_OUT: u64 = 32 << 20;
/// Most Data-Out bytes buffered for all waiting commands of one connection; beyond
/// it a new write gets TASK SET FULL (the initiator retries).
const MAX_BUFFERED: u64 = 64 << 20;
const STATUS_TASK_SET_FULL: u8 = 0x28;
const LOGIN_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// Silence after which an idle session is pinged with a NOP-In.
const IDLE_PING: Duration = Duration::from_secs(60);
/// Target transfer tag of our pings (any value but 0xffffffff asks for an answer).
const PING_TTT: u32 = 0x7fff_0001;

fn log(msg: impl std::fmt::Display) {
    eprintln!("cachalot iscsi: {msg}");
}

/// Serve one TCP connection to its end.
pub fn run(target: &Arc<Target>, stream: TcpStream) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_read_timeout(Some(LOGIN_TIMEOUT));
    let Ok(rd) = stream.try_clone() else { return };
    let mut reader = BufReader::with_capacity(256 * 1024, rd);
    let Some((neg, id)) = login(target, &mut reader, &stream, &peer) else {
        return;
    };
    // Idle sessions are pinged (NOP-In) after this; a second silent period, or a PDU
    // that stops arriving half-way, ends the connection (it holds a thread).
    let _ = stream.set_read_timeout(Some(IDLE_PING));
    // Whatever happens below (even a bug that panics), the session leaves the table
    // and its socket closes, so the initiator sees the connection end.
    struct Leave<'t>(&'t Target, u64);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.remove_session(self.1);
        }
    }
    let _leave = Leave(target, id);
    let nexus = Nexus::new(&neg.initiator, neg.isid);
    let lun = neg.export.as_ref().map(|e| target.lun(e));
    let volume = neg
        .export
        .as_ref()
        .map(|e| e.volume.clone())
        .unwrap_or_default();
    let mut conn = Conn::new(target, stream, neg, nexus.clone(), lun.clone(), volume);
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| conn.serve(&mut reader)));
    match served {
        Ok(Ok(())) => {}
        Ok(Err(e)) => log(format!("{peer}: connection dropped: {e}")),
        Err(_) => log(format!(
            "{peer}: connection dropped after an internal error (bug)"
        )),
    }
    if let Some(l) = lun {
        l.nexus_lost(&nexus);
    }
}

/// Log in; the session is registered (its id returned) before the final login
/// response goes out, so an initiator that heard "logged in" finds its session
/// in the table (a second login naming its TSIH is then "too many connections",
/// never "no such session").
fn login(
    target: &Target,
    reader: &mut BufReader<TcpStream>,
    out: &TcpStream,
    peer: &str,
) -> Option<(Negotiated, u64)> {
    let mut lg = Login::new();
    let mut stat_sn: u32 = 1;
    let lim = Limits {
        max_data: 8192 * 4,
        header_digest: false,
        data_digest: false,
    };
    let mut w = out;
    loop {
        let req = match read_pdu(reader, &lim) {
            Ok(Some(p)) => p,
            _ => return None,
        };
        match lg.step(target, &req, stat_sn) {
            Ok((rsp, done)) if done => {
                let neg = lg.finish(req.u32_at(24), stat_sn.wrapping_add(1));
                let info = SessionInfo {
                    target: neg
                        .export
                        .as_ref()
                        .map(|e| e.target.clone())
                        .unwrap_or_default(),
                    initiator: neg.initiator.clone(),
                    isid: neg.isid,
                    tsih: neg.tsih,
                    peer: peer.to_string(),
                    discovery: neg.discovery,
                };
                let id = target.add_session(info, out);
                if write_pdu(&mut w, &rsp, false, false).is_err() {
                    target.remove_session(id);
                    return None;
                }
                return Some((neg, id));
            }
            Ok((rsp, _)) => {
                write_pdu(&mut w, &rsp, false, false).ok()?;
                stat_sn = stat_sn.wrapping_add(1);
            }
            Err(f) => {
                log(format!(
                    "{peer}: login refused ({:#06x}): {}",
                    f.status, f.why
                ));
                let _ = write_pdu(
                    &mut w,
                    &reject_response(&req, f.status, stat_sn),
                    false,
                    false,
                );
                return None;
            }
        }
    }
}

/// A command waiting for its Data-Out.
struct WriteTask {
    cdb: Cdb,
    edtl: u32,
    /// Bytes the command will use (min(EDTL, SCSI transfer length)).
    want: u32,
    /// Residual to report: (overflow?, count).
    residual: Option<(bool, u32)>,
    buf: Vec<u8>,
    /// Bytes received so far (all PDUs, in order).
    received: u32,
    /// Unsolicited Data-Out still to come (F bit not yet seen).
    unsolicited: bool,
    /// Outstanding R2T: (TTT, end offset).
    r2t: Option<(u32, u32)>,
    r2t_sn: u32,
    data_sn: u32,
    lun_raw: u64,
    started: Instant,
    /// Drop all data and answer nothing more (already answered).
    discard: bool,
}

pub struct Conn<'a> {
    target: &'a Arc<Target>,
    stream: TcpStream,
    p: crate::text::Params,
    discovery: bool,
    stat_sn: u32,
    exp_cmd_sn: u32,
    nexus: Nexus,
    lun: Option<Arc<Lun>>,
    initiator: String,
    volume: String,
    tasks: HashMap<u32, WriteTask>,
    next_ttt: u32,
    text_pending: Vec<u8>,
}

type R = Result<(), String>;

fn in_window(sn: u32, lo: u32, hi: u32) -> bool {
    sn.wrapping_sub(lo) <= hi.wrapping_sub(lo)
}

impl<'a> Conn<'a> {
    fn new(
        target: &'a Arc<Target>,
        stream: TcpStream,
        neg: Negotiated,
        nexus: Nexus,
        lun: Option<Arc<Lun>>,
        volume: String,
    ) -> Conn<'a> {
        Conn {
            target,
            stream,
            p: neg.params,
            discovery: neg.discovery,
            stat_sn: neg.stat_sn,
            exp_cmd_sn: neg.cmd_sn,
            nexus,
            lun,
            initiator: neg.initiator,
            volume,
            tasks: HashMap::new(),
            next_ttt: 1,
            text_pending: Vec::new(),
        }
    }

    fn max_cmd_sn(&self) -> u32 {
        self.exp_cmd_sn.wrapping_add(CMD_WINDOW - 1)
    }

    fn send(&mut self, mut pdu: Pdu, status: bool) -> R {
        if status {
            pdu.set_u32(24, self.stat_sn);
            self.stat_sn = self.stat_sn.wrapping_add(1);
        } else if pdu.opcode() != OP_DATA_IN {
            pdu.set_u32(24, self.stat_sn);
        }
        pdu.set_u32(28, self.exp_cmd_sn);
        pdu.set_u32(32, self.max_cmd_sn());
        let b = encode_pdu(&pdu, self.p.header_digest, self.p.data_digest);
        self.stream.write_all(&b).map_err(|e| format!("send: {e}"))
    }

    fn serve(&mut self, reader: &mut BufReader<TcpStream>) -> R {
        let lim = Limits {
            max_data: OUR_MAX_RECV_DATA as usize,
            header_digest: self.p.header_digest,
            data_digest: self.p.data_digest,
        };
        let mut pinged = false;
        loop {
            let pdu = match read_pdu(reader, &lim) {
                Ok(Some(p)) => p,
                Ok(None) => return Ok(()),
                Err(PduError::Idle) if !pinged => {
                    pinged = true;
                    self.ping()?;
                    continue;
                }
                Err(PduError::Idle) => return Err("no answer to a NOP-In ping".into()),
                Err(e) => return Err(e.to_string()),
            };
            pinged = false;
            if !self.pdu(pdu)? {
                return Ok(());
            }
        }
    }

    /// Returns false when the connection should close (logout).
    fn pdu(&mut self, pdu: Pdu) -> Result<bool, String> {
        let op = pdu.opcode();
        if self.discovery && !matches!(op, OP_TEXT_REQ | OP_LOGOUT_REQ | OP_NOP_OUT) {
            return Err(format!("opcode {op:#x} in a discovery session"));
        }
        // CmdSN of non-immediate requests (Data-Out and SNACK carry none).
        if matches!(
            op,
            OP_SCSI_CMD | OP_TMF_REQ | OP_TEXT_REQ | OP_LOGOUT_REQ | OP_NOP_OUT
        ) && !pdu.immediate()
        {
            let sn = pdu.u32_at(24);
            if !in_window(sn, self.exp_cmd_sn, self.max_cmd_sn()) {
                return Ok(true); // outside the window: silently ignored
            }
            self.exp_cmd_sn = sn.wrapping_add(1);
        }
        match op {
            OP_NOP_OUT => self.nop(pdu)?,
            OP_SCSI_CMD => self.command(pdu)?,
            OP_DATA_OUT => self.data_out(pdu)?,
            OP_TMF_REQ => return self.tmf(pdu),
            OP_TEXT_REQ => self.text(pdu)?,
            OP_LOGOUT_REQ => {
                self.logout(pdu)?;
                return Ok(false);
            }
            _ => self.reject(&pdu, 0x04)?,
        }
        Ok(true)
    }

    fn reject(&mut self, pdu: &Pdu, reason: u8) -> R {
        let mut r = Pdu::new(OP_REJECT);
        r.bhs[1] = 0x80;
        r.bhs[2] = reason;
        r.set_itt(RESERVED_TAG);
        r.data = pdu.bhs.to_vec();
        self.send(r, true)
    }

    fn nop(&mut self, pdu: Pdu) -> R {
        if pdu.itt() == RESERVED_TAG {
            return Ok(()); // an answer to a ping of ours, or a CmdSN update
        }
        let mut r = Pdu::new(OP_NOP_IN);
        r.bhs[1] = 0x80;
        r.set_lun_raw(pdu.lun_raw());
        r.set_itt(pdu.itt());
        r.set_u32(20, RESERVED_TAG);
        let n = pdu.data.len().min(self.p.max_send_data as usize);
        r.data = pdu.data[..n].to_vec();
        self.send(r, true)
    }

    /// NOP-In asking the initiator to answer (RFC 7143 11.19): StatSN not advanced.
    fn ping(&mut self) -> R {
        let mut p = Pdu::new(OP_NOP_IN);
        p.bhs[1] = 0x80;
        p.set_itt(RESERVED_TAG);
        p.set_u32(20, PING_TTT);
        self.send(p, false)
    }

    fn logout(&mut self, pdu: Pdu) -> R {
        let reason = pdu.flags() & 0x7f;
        let mut r = Pdu::new(OP_LOGOUT_RESP);
        r.bhs[1] = 0x80;
        r.bhs[2] = if reason == 2 { 2 } else { 0 };
        r.set_itt(pdu.itt());
        r.set_u16(40, self.p.default_time2wait as u16);
        r.set_u16(42, 0);
        self.send(r, true)
    }

    fn text(&mut self, pdu: Pdu) -> R {
        let mut r = Pdu::new(OP_TEXT_RESP);
        r.set_itt(pdu.itt());
        r.set_lun_raw(pdu.lun_raw());
        if pdu.u32_at(20) == RESERVED_TAG || self.text_pending.is_empty() {
            let pairs = parse_text(&pdu.data).unwrap_or_default();
            let mut out = Vec::new();
            for (k, v) in &pairs {
                if k == "SendTargets" {
                    out.extend(self.send_targets(v));
                } else {
                    out.push((k.clone(), "NotUnderstood".into()));
                }
            }
            self.text_pending = encode_text(&out);
        }
        let n = self.text_pending.len().min(self.p.max_send_data as usize);
        r.data = self.text_pending.drain(..n).collect();
        if self.text_pending.is_empty() {
            r.bhs[1] = 0x80;
            r.set_u32(20, RESERVED_TAG);
        } else {
            r.bhs[1] = 0x40; // C: more follows
            r.set_u32(20, 1);
        }
        self.send(r, true)
    }

    fn send_targets(&self, v: &str) -> Vec<(String, String)> {
        let addr = self
            .stream
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let cat = self.target.catalog();
        let names: Vec<String> = match v {
            "All" if self.discovery => cat.targets(),
            "All" | "" => self.lun.iter().map(|l| l.target.clone()).collect(),
            name => cat.targets().into_iter().filter(|t| t == name).collect(),
        };
        let mut out = Vec::new();
        for n in names {
            out.push(("TargetName".into(), n));
            out.push(("TargetAddress".into(), format!("{addr},1")));
        }
        out
    }

    fn tmf(&mut self, pdu: Pdu) -> Result<bool, String> {
        let func = pdu.flags() & 0x7f;
        let lun_ok = lun_index(pdu.lun_raw()) == Some(0);
        let mut close = false;
        let response = match func {
            1 => {
                let rt = pdu.u32_at(20);
                if self.tasks.remove(&rt).is_some() {
                    0
                } else {
                    1 // already answered (commands run in order) or never seen
                }
            }
            2 | 4 => {
                self.tasks.clear();
                if lun_ok {
                    0
                } else {
                    2
                }
            }
            5 => {
                if lun_ok {
                    self.tasks.clear();
                    if let Some(l) = &self.lun {
                        l.reset();
                    }
                    0
                } else {
                    2
                }
            }
            6 | 7 => {
                self.tasks.clear();
                for l in self.target.all_luns() {
                    l.reset();
                }
                close = func == 7;
                0
            }
            8 => 3,
            _ => 5,
        };
        let mut r = Pdu::new(OP_TMF_RESP);
        r.bhs[1] = 0x80;
        r.bhs[2] = response;
        r.set_itt(pdu.itt());
        self.send(r, true)?;
        Ok(!close)
    }

    fn command(&mut self, pdu: Pdu) -> R {
        let itt = pdu.itt();
        let edtl = pdu.u32_at(20);
        let unsolicited = pdu.flags() & 0x80 == 0;
        let started = Instant::now();
        let mut cdb_bytes = pdu.bhs[32..48].to_vec();
        if pdu.ahs.len() >= 4 && pdu.ahs[2] == 1 {
            // Extended CDB AHS: type 1, then CDB bytes 16 and up.
            let l = (u16::from_be_bytes([pdu.ahs[0], pdu.ahs[1]]) as usize).min(pdu.ahs.len() - 3);
            cdb_bytes.extend_from_slice(&pdu.ahs[4..(3 + l).max(4)]);
        }
        let lun_raw = pdu.lun_raw();
        let Some(lun) = self.lun.clone() else {
            return Err("SCSI command in a session without a target".into());
        };
        let early = |o: Outcome| Some((o, None));
        let parsed = cdb::parse(&cdb_bytes);
        let mut answer: Option<(Outcome, Option<(bool, u32)>)> = None;
        let mut cmd = None;
        match (&parsed, lun_index(lun_raw)) {
            (Ok(Cdb::ReportLuns { .. }), _) => cmd = parsed.clone().ok(),
            (Ok(Cdb::Inquiry { .. }), Some(i)) if i != 0 => {
                let mut d = vec![0u8; 36];
                d[0] = 0x7f; // no LU here
                answer = early(Outcome::data(d));
            }
            (_, Some(0)) => match &parsed {
                Ok(c) => cmd = Some(c.clone()),
                Err(s) => answer = early(Outcome::check(*s)),
            },
            _ => answer = early(Outcome::check(Sense::LUN_NOT_SUPPORTED)),
        }
        if let Some(c) = &cmd {
            if let Err(o) = exec::precheck(&lun, &self.nexus, c) {
                answer = early(o);
            }
        }
        let spdtl = cmd.as_ref().map_or(0, exec::data_out_len);
        if answer.is_none() && cmd.as_ref().is_some_and(exec::strict_out) && edtl as u64 != spdtl {
            // WRITE SAME and COMPARE AND WRITE need exactly their data.
            answer = early(Sense::INVALID_FIELD_CDB.into());
        }
        if answer.is_none() && spdtl > 0 {
            let c = cmd.clone().expect("checked");
            let buffered: u64 = self.tasks.values().map(|t| t.want as u64).sum();
            if spdtl > MAX_DATA_OUT {
                answer = early(Sense::PARAM_LIST_LENGTH.into());
            } else if buffered + spdtl.min(edtl as u64) > MAX_BUFFERED {
                let mut full = Outcome::good();
                full.status = STATUS_TASK_SET_FULL;
                answer = early(full);
            } else {
                // EDTL < SCSI length: process normally but move only EDTL bytes, with
                // an overflow residual (FCP-4 9.4.2 a), as libiscsi's suite expects);
                // EDTL > SCSI length: move what the command needs, underflow residual.
                let want = (edtl as u64).min(spdtl) as u32;
                let residual = match (edtl as u64).cmp(&spdtl) {
                    std::cmp::Ordering::Greater => Some((false, edtl - spdtl as u32)),
                    std::cmp::Ordering::Less => Some((true, (spdtl - edtl as u64) as u32)),
                    _ => None,
                };
                let mut t = WriteTask {
                    cdb: c,
                    edtl,
                    want,
                    residual,
                    buf: Vec::new(),
                    received: 0,
                    unsolicited,
                    r2t: None,
                    r2t_sn: 0,
                    data_sn: 0,
                    lun_raw,
                    started,
                    discard: false,
                };
                self.accept_data(&mut t, &pdu.data)?;
                return self.progress(itt, t);
            }
        }
        let (outcome, residual) = match answer {
            Some(a) => a,
            None => {
                let c = cmd.as_ref().expect("no answer means a command");
                (exec::execute(&lun, &self.nexus, c, &[]), None)
            }
        };
        if unsolicited {
            // The initiator still sends unsolicited data for this task: drop it.
            self.tasks.insert(itt, discard_task(lun_raw, edtl));
        }
        self.record(cmd.as_ref(), &lun, started, outcome.status == 0);
        self.respond(itt, lun_raw, edtl, outcome, residual)
    }

    fn accept_data(&mut self, t: &mut WriteTask, data: &[u8]) -> R {
        let end = t.received as u64 + data.len() as u64;
        if end > t.edtl as u64 {
            return Err(format!(
                "{} bytes of data for a task expecting {}",
                end, t.edtl
            ));
        }
        if !t.discard && t.received < t.want {
            // Data arrives in order (DataPDUInOrder=Yes, checked): the buffer grows
            // with what was really received, never with what was announced.
            let n = data.len().min((t.want - t.received) as usize);
            t.buf.extend_from_slice(&data[..n]);
        }
        t.received = end as u32;
        Ok(())
    }

    fn data_out(&mut self, pdu: Pdu) -> R {
        let itt = pdu.itt();
        let Some(mut t) = self.tasks.remove(&itt) else {
            return Ok(()); // aborted or unknown task: data dropped
        };
        if t.discard {
            // Already answered: swallow the rest of its data sequence.
            if !pdu.final_bit() {
                self.tasks.insert(itt, t);
            }
            return Ok(());
        }
        let ttt = pdu.u32_at(20);
        let data_sn = pdu.u32_at(36);
        let offset = pdu.u32_at(40);
        let expect_ttt = t.r2t.map_or(RESERVED_TAG, |(x, _)| x);
        let r2t_end = t.r2t.map_or(t.edtl as u64, |(_, e)| e as u64);
        if data_sn != t.data_sn
            || offset != t.received
            || ttt != expect_ttt
            || offset as u64 + pdu.data.len() as u64 > r2t_end
        {
            // The command fails without writing anything (DATA PHASE ERROR); the
            // connection stays up and the rest of the sequence is dropped.
            log(format!(
                "{}: Data-Out out of sequence (DataSN {data_sn} want {}, offset {offset} want {}, TTT {ttt:#x})",
                self.initiator, t.data_sn, t.received
            ));
            if !pdu.final_bit() {
                self.tasks.insert(itt, discard_task(t.lun_raw, t.edtl));
            }
            let sense = Sense::new(crate::scsi::KEY_ABORTED_COMMAND, 0x4b, 0x00);
            return self.respond(itt, t.lun_raw, t.edtl, Outcome::check(sense), None);
        }
        self.accept_data(&mut t, &pdu.data)?;
        t.data_sn = t.data_sn.wrapping_add(1);
        if pdu.final_bit() {
            t.data_sn = 0;
            if t.r2t.is_some() {
                if t.r2t.is_some_and(|(_, end)| t.received != end) {
                    return Err("R2T sequence ended short".into());
                }
                t.r2t = None;
            } else {
                t.unsolicited = false;
            }
        }
        self.progress(itt, t)
    }

    /// Ask for more data, or run the command once all of it is here.
    fn progress(&mut self, itt: u32, mut t: WriteTask) -> R {
        if t.unsolicited || t.r2t.is_some() {
            self.tasks.insert(itt, t);
            return Ok(());
        }
        if t.received < t.want {
            let len = (t.want - t.received).min(self.p.max_burst);
            let ttt = self.next_ttt;
            self.next_ttt = self.next_ttt.wrapping_add(1).max(1);
            let mut r = Pdu::new(OP_R2T);
            r.bhs[1] = 0x80;
            r.set_lun_raw(t.lun_raw);
            r.set_itt(itt);
            r.set_u32(20, ttt);
            r.set_u32(36, t.r2t_sn);
            r.set_u32(40, t.received);
            r.set_u32(44, len);
            t.r2t_sn += 1;
            t.r2t = Some((ttt, t.received + len));
            self.tasks.insert(itt, t);
            return self.send(r, false);
        }
        let lun = self.lun.clone().expect("write tasks exist only with a LUN");
        let out = exec::execute(&lun, &self.nexus, &t.cdb, &t.buf[..t.want as usize]);
        self.record(Some(&t.cdb), &lun, t.started, out.status == 0);
        let (lun_raw, edtl, residual) = (t.lun_raw, t.edtl, t.residual);
        self.respond_with_residual(itt, lun_raw, edtl, out, residual, t.r2t_sn)
    }

    /// Count one command; its bytes only if it succeeded (a refused 2 TiB read moved
    /// nothing).
    fn record(&self, cmd: Option<&Cdb>, lun: &Lun, started: Instant, good: bool) {
        let Some(c) = cmd else { return };
        let ext = exec::extent(c);
        let region = Stats::region(ext.map(|e| e.0), lun.dev.size());
        let bytes = if good { ext.map_or(0, |e| e.1) } else { 0 };
        self.target.stats.record(
            &self.initiator,
            &self.volume,
            exec::op_name(c),
            &region,
            bytes,
            started.elapsed(),
        );
    }

    fn respond(
        &mut self,
        itt: u32,
        lun_raw: u64,
        edtl: u32,
        out: Outcome,
        residual: Option<(bool, u32)>,
    ) -> R {
        self.respond_with_residual(itt, lun_raw, edtl, out, residual, 0)
    }

    /// Send Data-In (if any) and the status.
    fn respond_with_residual(
        &mut self,
        itt: u32,
        lun_raw: u64,
        edtl: u32,
        out: Outcome,
        write_residual: Option<(bool, u32)>,
        r2ts: u32,
    ) -> R {
        let produced = out.data_in.len() as u64;
        let send_len = produced.min(edtl as u64) as usize;
        let residual = if let Some(r) = write_residual {
            Some(r)
        } else if produced > edtl as u64 {
            Some((true, (produced - edtl as u64).min(u32::MAX as u64) as u32))
        } else if produced < edtl as u64 && !out.data_in.is_empty() {
            Some((false, edtl - produced as u32))
        } else {
            None
        };
        let res_flags = match residual {
            Some((true, _)) => 0x04,
            Some((false, _)) => 0x02,
            None => 0,
        };
        let res_count = residual.map_or(0, |r| r.1);
        let mut data_sn = 0u32;
        let chunk = self.p.max_send_data as usize;
        let status_in_data = out.sense.is_none() && out.status == 0 && send_len > 0;
        let mut pos = 0usize;
        while pos < send_len {
            let n = (send_len - pos).min(chunk);
            let last = pos + n == send_len;
            let mut d = Pdu::new(OP_DATA_IN);
            let burst_end = (pos + n).is_multiple_of(self.p.max_burst as usize);
            d.bhs[1] = if last || burst_end { 0x80 } else { 0 };
            if last && status_in_data {
                d.bhs[1] |= 0x01 | res_flags;
                d.bhs[3] = out.status;
                d.set_u32(44, res_count);
            }
            d.set_lun_raw(lun_raw);
            d.set_itt(itt);
            d.set_u32(20, RESERVED_TAG);
            d.set_u32(36, data_sn);
            d.set_u32(40, pos as u32);
            d.data = out.data_in[pos..pos + n].to_vec();
            data_sn += 1;
            pos += n;
            self.send(d, last && status_in_data)?;
        }
        if status_in_data {
            return Ok(());
        }
        let mut r = Pdu::new(OP_SCSI_RESP);
        r.bhs[1] = 0x80 | res_flags;
        r.bhs[2] = 0;
        r.bhs[3] = out.status;
        r.set_itt(itt);
        r.set_u32(36, data_sn + r2ts);
        r.set_u32(44, res_count);
        if let Some(s) = out.sense {
            let f = s.fixed();
            let mut d = (f.len() as u16).to_be_bytes().to_vec();
            d.extend(f);
            r.data = d;
        }
        self.send(r, true)
    }
}

fn discard_task(lun_raw: u64, edtl: u32) -> WriteTask {
    WriteTask {
        cdb: Cdb::TestUnitReady,
        edtl,
        want: 0,
        residual: None,
        buf: Vec::new(),
        received: 0,
        unsolicited: true,
        r2t: None,
        r2t_sn: 0,
        data_sn: 0,
        lun_raw,
        started: Instant::now(),
        discard: true,
    }
}

/// LUN number from the 8-byte LUN field (SAM-2 peripheral or flat addressing).
pub fn lun_index(raw: u64) -> Option<u16> {
    let b = raw.to_be_bytes();
    if b[2..].iter().any(|&x| x != 0) {
        return None;
    }
    match b[0] >> 6 {
        0 if b[0] == 0 => Some(b[1] as u16),
        1 => Some((((b[0] & 0x3f) as u16) << 8) | b[1] as u16),
        _ => None,
    }
}
