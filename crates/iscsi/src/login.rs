//! The login phase (RFC 7143 sections 6 and 11.12/11.13): security negotiation with
//! CHAP (RFC 1994, MD5, one-way or mutual), operational negotiation, and the move to
//! the full feature phase.
//!
//! Invariants:
//! - A normal session reaches full feature phase only for a target that is shared now,
//!   and, when that target has CHAP configured, only after the initiator proved the
//!   secret; every other path ends in a Login Response with a non-zero status class
//!   and the connection closes.
//! - Our CHAP challenge is 16 random bytes; a mutual challenge equal to ours is refused
//!   (reflection). Secrets never appear in errors or logs.
//! - Text accumulated over continued PDUs is bounded by `text::MAX_TEXT`.

use crate::md5::md5;
use crate::pdu::{Pdu, OP_LOGIN_REQ, OP_LOGIN_RESP};
use crate::target::{Chap, Export, Target};
use crate::text::{encode_text, parse_text, Params, MAX_TEXT, OUR_MAX_RECV_DATA};
use std::io::Read;

/// Stages (CSG/NSG values).
const SECURITY: u8 = 0;
const OPERATIONAL: u8 = 1;
const FULL_FEATURE: u8 = 3;

/// Login failure: status class/detail sent to the initiator, and why (for the log).
#[derive(Debug)]
pub struct LoginFail {
    pub status: u16,
    pub why: String,
}

fn fail(status: u16, why: impl Into<String>) -> LoginFail {
    LoginFail {
        status,
        why: why.into(),
    }
}

pub const ST_AUTH_FAILED: u16 = 0x0201;
pub const ST_NOT_FOUND: u16 = 0x0203;
pub const ST_UNSUPPORTED_VERSION: u16 = 0x0205;
pub const ST_TOO_MANY_CONNECTIONS: u16 = 0x0206;
pub const ST_MISSING_PARAM: u16 = 0x0207;
pub const ST_NO_SESSION: u16 = 0x020a;
pub const ST_INVALID_REQUEST: u16 = 0x020b;
pub const ST_SESSION_TYPE: u16 = 0x0209;
pub const ST_INITIATOR_ERROR: u16 = 0x0200;

#[derive(Debug, PartialEq, Eq)]
enum Auth {
    Start,
    WaitChapA,
    WaitChapR { id: u8, challenge: Vec<u8> },
    Done,
}

/// Everything the login phase learned, for the full feature phase.
pub struct Negotiated {
    pub params: Params,
    pub discovery: bool,
    pub initiator: String,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub export: Option<Export>,
    pub cmd_sn: u32,
    pub stat_sn: u32,
}

/// State of one connection's login.
pub struct Login {
    pub params: Params,
    auth: Auth,
    stage: u8,
    initiator: Option<String>,
    discovery: bool,
    export: Option<Export>,
    isid: [u8; 6],
    tsih: u16,
    first: bool,
    pending_text: Vec<u8>,
    declared_mrdsl: bool,
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(&mut b).is_ok() {
            return b;
        }
    }
    // Fallback: time-seeded (never expected on Linux).
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    md5(&[&t.to_le_bytes()])
        .iter()
        .cycle()
        .take(n)
        .copied()
        .collect()
}

fn hex(b: &[u8]) -> String {
    let mut s = String::from("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if h.len() % 2 != 0 || h.len() > 2048 {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
        .collect()
}

/// CHAP response = MD5(id || secret || challenge).
pub fn chap_response(id: u8, secret: &[u8], challenge: &[u8]) -> [u8; 16] {
    md5(&[&[id], secret, challenge])
}

fn lookup<'p>(pairs: &'p [(String, String)], k: &str) -> Option<&'p str> {
    pairs
        .iter()
        .find(|(key, _)| key == k)
        .map(|(_, v)| v.as_str())
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 223 && s.bytes().all(|b| b.is_ascii_graphic() && b != b',')
}

impl Login {
    pub fn new() -> Login {
        Login {
            params: Params::default(),
            auth: Auth::Start,
            stage: SECURITY,
            initiator: None,
            discovery: false,
            export: None,
            isid: [0; 6],
            tsih: 0,
            first: true,
            pending_text: Vec::new(),
            declared_mrdsl: false,
        }
    }

    fn chap(&self) -> Option<&Chap> {
        self.export.as_ref().and_then(|e| e.chap.as_ref())
    }

    /// Handle one Login Request; returns the response and, once the initiator and we
    /// agreed to enter full feature phase, `true`.
    pub fn step(
        &mut self,
        target: &Target,
        req: &Pdu,
        stat_sn: u32,
    ) -> Result<(Pdu, bool), LoginFail> {
        if req.opcode() != OP_LOGIN_REQ {
            return Err(fail(ST_INVALID_REQUEST, "non-login PDU during login"));
        }
        let flags = req.flags();
        let (transit, cont) = (flags & 0x80 != 0, flags & 0x40 != 0);
        let (csg, nsg) = ((flags >> 2) & 3, flags & 3);
        if transit && cont {
            return Err(fail(ST_INVALID_REQUEST, "T and C both set"));
        }
        if req.bhs[3] != 0 {
            return Err(fail(ST_UNSUPPORTED_VERSION, "version-min above 0"));
        }
        if csg == 2 || (transit && (nsg == 2 || nsg <= csg)) {
            return Err(fail(ST_INVALID_REQUEST, "bad stage transition"));
        }
        if self.first {
            self.isid.copy_from_slice(&req.bhs[8..14]);
            self.tsih = req.u16_at(14);
            if self.tsih != 0 {
                // Adding a connection to an existing session (MC/S). We negotiate
                // MaxConnections=1 and refuse it: at ErrorRecoveryLevel 0 a second
                // connection buys no recovery (a dropped connection ends the session
                // anyway), and commands spread over connections would need one
                // CmdSN window and task table shared between threads, for a gain
                // the Linux initiator does not use (open-iscsi runs one connection
                // per session; it scales with several sessions, which we serve).
                // RFC 7143 11.13.5: "too many connections" for a live session,
                // "session does not exist" for any other TSIH.
                return Err(if target.has_session(&self.isid, self.tsih) {
                    fail(ST_TOO_MANY_CONNECTIONS, "only one connection per session")
                } else {
                    fail(ST_NO_SESSION, "no such session")
                });
            }
        }
        if csg < self.stage {
            return Err(fail(ST_INVALID_REQUEST, "stage went backwards"));
        }
        self.stage = csg;
        if self.pending_text.len() + req.data.len() > MAX_TEXT {
            return Err(fail(ST_INITIATOR_ERROR, "login text too long"));
        }
        self.pending_text.extend_from_slice(&req.data);
        let mut answers: Vec<(String, String)> = Vec::new();
        let mut may_transit = transit;
        if !cont {
            let text = std::mem::take(&mut self.pending_text);
            let pairs = parse_text(&text).map_err(|e| fail(ST_INITIATOR_ERROR, e.0))?;
            self.keys(target, &pairs, csg, &mut answers)?;
            self.first = false;
        }
        if transit && csg == SECURITY && self.auth != Auth::Done {
            if self.chap().is_some() || self.auth != Auth::Start {
                if !matches!(self.auth, Auth::WaitChapA | Auth::WaitChapR { .. }) {
                    return Err(fail(ST_AUTH_FAILED, "authentication required"));
                }
                may_transit = false; // CHAP exchange still under way
            } else {
                self.auth = Auth::Done;
            }
        }
        if transit && csg == OPERATIONAL && self.auth != Auth::Done {
            if self.chap().is_some() {
                return Err(fail(ST_AUTH_FAILED, "authentication required"));
            }
            self.auth = Auth::Done;
        }
        // Our MaxRecvDataSegmentLength is declared once, on leaving the operational
        // stage (or the security stage straight into full feature phase, when there
        // is no operational stage): open-iscsi fails a login whose security stage
        // answer carries it ("can't accept MaxRecvDataSegmentLength in security
        // stage"), and never logs in.
        if may_transit && (csg == OPERATIONAL || nsg == FULL_FEATURE) && !self.declared_mrdsl {
            answers.push((
                "MaxRecvDataSegmentLength".into(),
                OUR_MAX_RECV_DATA.to_string(),
            ));
            self.declared_mrdsl = true;
        }
        let mut rsp = Pdu::new(OP_LOGIN_RESP);
        rsp.bhs[1] = (csg << 2) | if may_transit { 0x80 | nsg } else { 0 };
        rsp.bhs[8..14].copy_from_slice(&self.isid);
        rsp.set_itt(req.itt());
        rsp.set_u32(24, stat_sn);
        let cmd_sn = req.u32_at(24);
        rsp.set_u32(28, cmd_sn);
        rsp.set_u32(32, cmd_sn.wrapping_add(crate::conn::CMD_WINDOW - 1));
        rsp.data = encode_text(&answers);
        let done = may_transit && nsg == FULL_FEATURE;
        if done {
            self.tsih = target.new_tsih();
            rsp.set_u16(14, self.tsih);
        }
        if may_transit {
            self.stage = nsg;
        }
        Ok((rsp, done))
    }

    fn keys(
        &mut self,
        target: &Target,
        pairs: &[(String, String)],
        csg: u8,
        answers: &mut Vec<(String, String)>,
    ) -> Result<(), LoginFail> {
        if self.first {
            self.first_request(target, pairs, answers)?;
        }
        if csg == SECURITY {
            self.security(pairs, answers)?;
        }
        for (k, v) in pairs {
            if matches!(
                k.as_str(),
                "InitiatorName" | "SessionType" | "TargetName" | "InitiatorAlias" | "AuthMethod"
            ) || k.starts_with("CHAP_")
            {
                continue;
            }
            match self.params.negotiate(k, v) {
                Some(Some(a)) => answers.push((k.clone(), a)),
                Some(None) => {}
                None => answers.push((k.clone(), "NotUnderstood".into())),
            }
        }
        Ok(())
    }

    fn first_request(
        &mut self,
        target: &Target,
        pairs: &[(String, String)],
        answers: &mut Vec<(String, String)>,
    ) -> Result<(), LoginFail> {
        let get = |k: &str| lookup(pairs, k);
        let Some(name) = get("InitiatorName") else {
            return Err(fail(ST_MISSING_PARAM, "no InitiatorName"));
        };
        if !valid_name(name) {
            return Err(fail(ST_INITIATOR_ERROR, "invalid InitiatorName"));
        }
        self.initiator = Some(name.to_string());
        match get("SessionType").unwrap_or("Normal") {
            "Discovery" => self.discovery = true,
            "Normal" => {
                let Some(tn) = get("TargetName") else {
                    return Err(fail(ST_MISSING_PARAM, "no TargetName"));
                };
                let exp = target
                    .catalog()
                    .export(tn)
                    .ok_or_else(|| fail(ST_NOT_FOUND, format!("target {tn} is not shared")))?;
                self.export = Some(exp);
                answers.push(("TargetPortalGroupTag".into(), "1".into()));
            }
            _ => return Err(fail(ST_SESSION_TYPE, "unknown SessionType")),
        }
        Ok(())
    }

    fn security(
        &mut self,
        pairs: &[(String, String)],
        answers: &mut Vec<(String, String)>,
    ) -> Result<(), LoginFail> {
        let get = |k: &str| lookup(pairs, k);
        let chap = self.chap().cloned();
        if let Some(methods) = get("AuthMethod") {
            if self.auth != Auth::Start {
                return Err(fail(ST_INVALID_REQUEST, "AuthMethod renegotiated"));
            }
            let offers: Vec<&str> = methods.split(',').collect();
            if chap.is_some() {
                if !offers.contains(&"CHAP") {
                    return Err(fail(ST_AUTH_FAILED, "CHAP required"));
                }
                answers.push(("AuthMethod".into(), "CHAP".into()));
                self.auth = Auth::WaitChapA;
            } else if offers.contains(&"None") {
                answers.push(("AuthMethod".into(), "None".into()));
                self.auth = Auth::Done;
            } else {
                return Err(fail(ST_AUTH_FAILED, "no common AuthMethod"));
            }
            return Ok(());
        }
        match &self.auth {
            Auth::WaitChapA => {
                let algs = get("CHAP_A").ok_or_else(|| fail(ST_AUTH_FAILED, "no CHAP_A"))?;
                if !algs.split(',').any(|a| a == "5") {
                    return Err(fail(ST_AUTH_FAILED, "CHAP_A without MD5"));
                }
                let id = random_bytes(1)[0];
                let challenge = random_bytes(16);
                answers.push(("CHAP_A".into(), "5".into()));
                answers.push(("CHAP_I".into(), id.to_string()));
                answers.push(("CHAP_C".into(), hex(&challenge)));
                self.auth = Auth::WaitChapR { id, challenge };
            }
            Auth::WaitChapR { id, challenge } => {
                let chap = chap.ok_or_else(|| fail(ST_AUTH_FAILED, "no CHAP configured"))?;
                let user = get("CHAP_N").ok_or_else(|| fail(ST_AUTH_FAILED, "no CHAP_N"))?;
                let resp = get("CHAP_R").and_then(unhex);
                let want = chap_response(*id, chap.secret.as_bytes(), challenge);
                if user != chap.user || resp.as_deref() != Some(&want[..]) {
                    return Err(fail(
                        ST_AUTH_FAILED,
                        format!("CHAP failed for user {user:?}"),
                    ));
                }
                if let (Some(mi), Some(mc)) = (get("CHAP_I"), get("CHAP_C")) {
                    let (muser, msecret) = chap.mutual.clone().ok_or_else(|| {
                        fail(ST_AUTH_FAILED, "mutual CHAP asked, none configured")
                    })?;
                    let mid: u8 = mi.parse().map_err(|_| fail(ST_AUTH_FAILED, "bad CHAP_I"))?;
                    let mch = unhex(mc).ok_or_else(|| fail(ST_AUTH_FAILED, "bad CHAP_C"))?;
                    if mch.is_empty() || mch == *challenge {
                        return Err(fail(ST_AUTH_FAILED, "mutual challenge refused"));
                    }
                    answers.push(("CHAP_N".into(), muser));
                    answers.push((
                        "CHAP_R".into(),
                        hex(&chap_response(mid, msecret.as_bytes(), &mch)),
                    ));
                }
                self.auth = Auth::Done;
            }
            _ => {}
        }
        Ok(())
    }

    pub fn finish(self, cmd_sn: u32, stat_sn: u32) -> Negotiated {
        Negotiated {
            params: self.params,
            discovery: self.discovery,
            initiator: self.initiator.unwrap_or_default(),
            isid: self.isid,
            tsih: self.tsih,
            export: self.export,
            cmd_sn,
            stat_sn,
        }
    }
}

impl Default for Login {
    fn default() -> Self {
        Login::new()
    }
}

/// A Login Response refusing the login.
pub fn reject_response(req: &Pdu, status: u16, stat_sn: u32) -> Pdu {
    let mut rsp = Pdu::new(OP_LOGIN_RESP);
    rsp.bhs[1] = req.flags() & 0x0c; // CSG kept, T cleared
    rsp.bhs[8..14].copy_from_slice(&req.bhs[8..14]);
    rsp.set_itt(req.itt());
    rsp.set_u32(24, stat_sn);
    rsp.set_u32(28, req.u32_at(24));
    rsp.set_u32(32, req.u32_at(24));
    rsp.bhs[36] = (status >> 8) as u8;
    rsp.bhs[37] = status as u8;
    rsp
}
