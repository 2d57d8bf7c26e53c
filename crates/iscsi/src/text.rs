//! iSCSI text keys (RFC 7143 sections 6 and 13): `key=value` pairs separated by NUL,
//! and the negotiation of the session's operational parameters.
//!
//! Invariants:
//! - Parsing is bounded: at most [`MAX_KEYS`] pairs, keys of at most 63 bytes and values
//!   of at most 8192 bytes; anything else is a format error, never a panic.
//! - `Params` always holds values inside the RFC's ranges; a proposal outside them is
//!   answered `Reject` and the previous value kept.

pub const MAX_KEYS: usize = 256;
/// Largest text accumulated over continued (C bit) PDUs.
pub const MAX_TEXT: usize = 64 * 1024;

/// Our own limits, offered to every initiator.
pub const OUR_MAX_RECV_DATA: u32 = 256 * 1024;
pub const OUR_MAX_BURST: u32 = 1024 * 1024;
pub const OUR_FIRST_BURST: u32 = 256 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub struct TextError(pub String);

/// Split `k=v\0k=v\0` into pairs.
pub fn parse_text(data: &[u8]) -> Result<Vec<(String, String)>, TextError> {
    let mut out = Vec::new();
    for item in data.split(|&b| b == 0) {
        if item.is_empty() {
            continue;
        }
        if out.len() >= MAX_KEYS {
            return Err(TextError("too many keys".into()));
        }
        let s = std::str::from_utf8(item).map_err(|_| TextError("not UTF-8".into()))?;
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| TextError(format!("no '=' in {:?}", truncate(s))))?;
        if k.is_empty() || k.len() > 63 || v.len() > 8192 {
            return Err(TextError(format!(
                "bad key or value length in {:?}",
                truncate(s)
            )));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(64) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

pub fn encode_text(pairs: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        out.extend_from_slice(k.as_bytes());
        out.push(b'=');
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// Negotiated operational parameters of a session/connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub header_digest: bool,
    pub data_digest: bool,
    /// The initiator's MaxRecvDataSegmentLength: the most we may send in one PDU.
    pub max_send_data: u32,
    pub max_burst: u32,
    pub first_burst: u32,
    pub immediate_data: bool,
    pub initial_r2t: bool,
    pub max_outstanding_r2t: u32,
    pub data_pdu_in_order: bool,
    pub data_sequence_in_order: bool,
    pub error_recovery_level: u32,
    pub max_connections: u32,
    pub default_time2wait: u32,
    pub default_time2retain: u32,
}

impl Default for Params {
    /// RFC 7143 defaults (section 13).
    fn default() -> Self {
        Params {
            header_digest: false,
            data_digest: false,
            max_send_data: 8192,
            max_burst: 262144,
            first_burst: 65536,
            immediate_data: true,
            initial_r2t: true,
            max_outstanding_r2t: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
            error_recovery_level: 0,
            max_connections: 1,
            default_time2wait: 2,
            default_time2retain: 20,
        }
    }
}

fn num(v: &str, lo: u32, hi: u32) -> Option<u32> {
    let n: u64 = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else {
        v.parse().ok()?
    };
    (n >= lo as u64 && n <= hi as u64).then_some(n as u32)
}

fn yes_no(v: &str) -> Option<bool> {
    match v {
        "Yes" => Some(true),
        "No" => Some(false),
        _ => None,
    }
}

fn yn(b: bool) -> String {
    if b { "Yes" } else { "No" }.to_string()
}

fn digest(v: &str) -> Option<bool> {
    // Our preference follows the initiator's order; both are supported.
    v.split(',').find_map(|c| match c {
        "CRC32C" => Some(true),
        "None" => Some(false),
        _ => None,
    })
}

impl Params {
    /// Answer one operational key. `None` means the key is not operational (the caller
    /// handles it); `Some(answer)` is the value to send back, if any.
    pub fn negotiate(&mut self, key: &str, v: &str) -> Option<Option<String>> {
        let reject = || Some(Some("Reject".to_string()));
        let ans = match key {
            "HeaderDigest" | "DataDigest" => match digest(v) {
                Some(on) => {
                    if key == "HeaderDigest" {
                        self.header_digest = on;
                    } else {
                        self.data_digest = on;
                    }
                    Some(if on { "CRC32C" } else { "None" }.to_string())
                }
                None => return reject(),
            },
            "MaxRecvDataSegmentLength" => match num(v, 512, (1 << 24) - 1) {
                // Declarative: the initiator's receive limit; we answer with ours
                // separately (the caller always declares it).
                Some(n) => {
                    self.max_send_data = n;
                    None
                }
                None => return reject(),
            },
            "MaxBurstLength" => match num(v, 512, (1 << 24) - 1) {
                Some(n) => {
                    self.max_burst = n.min(OUR_MAX_BURST);
                    self.first_burst = self.first_burst.min(self.max_burst);
                    Some(self.max_burst.to_string())
                }
                None => return reject(),
            },
            "FirstBurstLength" => match num(v, 512, (1 << 24) - 1) {
                Some(n) => {
                    self.first_burst = n.min(OUR_FIRST_BURST).min(self.max_burst);
                    Some(self.first_burst.to_string())
                }
                None => return reject(),
            },
            "ImmediateData" => match yes_no(v) {
                Some(b) => {
                    self.immediate_data = b; // AND with our Yes
                    Some(yn(b))
                }
                None => return reject(),
            },
            "InitialR2T" => match yes_no(v) {
                Some(b) => {
                    self.initial_r2t = b; // OR with our No
                    Some(yn(b))
                }
                None => return reject(),
            },
            "MaxOutstandingR2T" => match num(v, 1, 65535) {
                Some(_) => {
                    self.max_outstanding_r2t = 1;
                    Some("1".into())
                }
                None => return reject(),
            },
            "DataPDUInOrder" | "DataSequenceInOrder" => match yes_no(v) {
                // OR with our Yes: we always require order.
                Some(_) => Some("Yes".into()),
                None => return reject(),
            },
            "ErrorRecoveryLevel" => match num(v, 0, 2) {
                Some(_) => Some("0".into()),
                None => return reject(),
            },
            "MaxConnections" => match num(v, 1, 65535) {
                Some(_) => Some("1".into()),
                None => return reject(),
            },
            "DefaultTime2Wait" => match num(v, 0, 3600) {
                Some(n) => {
                    self.default_time2wait = n.max(2);
                    Some(self.default_time2wait.to_string())
                }
                None => return reject(),
            },
            "DefaultTime2Retain" => match num(v, 0, 3600) {
                Some(_) => {
                    // ERL 0: nothing survives a connection; say so.
                    self.default_time2retain = 0;
                    Some("0".into())
                }
                None => return reject(),
            },
            "IFMarker" | "OFMarker" => Some("No".into()),
            "IFMarkInt" | "OFMarkInt" => Some("Irrelevant".into()),
            _ => return None,
        };
        Some(ans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_encode() {
        let t = b"InitiatorName=iqn.x\0SessionType=Normal\0\0";
        let p = parse_text(t).unwrap();
        assert_eq!(p[0], ("InitiatorName".into(), "iqn.x".into()));
        assert_eq!(parse_text(&encode_text(&p)).unwrap(), p);
        assert!(parse_text(b"novalue\0").is_err());
        assert!(parse_text(&[0xff, b'=', b'1']).is_err());
        let many: Vec<u8> = (0..300)
            .flat_map(|i| format!("k{i}=v\0").into_bytes())
            .collect();
        assert!(parse_text(&many).is_err());
    }

    #[test]
    fn negotiation_rules() {
        let mut p = Params::default();
        assert_eq!(
            p.negotiate("HeaderDigest", "CRC32C,None"),
            Some(Some("CRC32C".into()))
        );
        assert!(p.header_digest);
        assert_eq!(p.negotiate("DataDigest", "None"), Some(Some("None".into())));
        assert_eq!(
            p.negotiate("MaxBurstLength", "16776192"),
            Some(Some("1048576".into()))
        );
        assert_eq!(
            p.negotiate("FirstBurstLength", "9999999"),
            Some(Some("262144".into()))
        );
        assert_eq!(p.negotiate("MaxRecvDataSegmentLength", "65536"), Some(None));
        assert_eq!(p.max_send_data, 65536);
        assert_eq!(
            p.negotiate("MaxRecvDataSegmentLength", "1"),
            Some(Some("Reject".into()))
        );
        assert_eq!(
            p.negotiate("ErrorRecoveryLevel", "2"),
            Some(Some("0".into()))
        );
        assert_eq!(p.negotiate("InitialR2T", "No"), Some(Some("No".into())));
        assert_eq!(p.negotiate("X-com.example", "1"), None);
    }
}
