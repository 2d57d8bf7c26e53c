//! iSCSI PDU codec (RFC 7143 section 11): 48-byte basic header segment (BHS), additional
//! header segments (AHS), optional header digest, data segment padded to 4 bytes,
//! optional data digest (both CRC32C).
//!
//! Invariants:
//! - Every length read from the wire is checked against [`Limits`] before anything is
//!   allocated: a data segment longer than our MaxRecvDataSegmentLength is an error,
//!   never a buffer. AHS is at most 255 words by construction (one byte).
//! - A digest mismatch is an error (the connection is dropped at ErrorRecoveryLevel 0);
//!   nothing read under a bad digest is acted upon.
//! - `write_pdu` computes lengths and digests from the content; callers never set them.

use crate::crc32c;
use std::io::{self, Read, Write};

pub const BHS_LEN: usize = 48;

// Initiator opcodes.
pub const OP_NOP_OUT: u8 = 0x00;
pub const OP_SCSI_CMD: u8 = 0x01;
pub const OP_TMF_REQ: u8 = 0x02;
pub const OP_LOGIN_REQ: u8 = 0x03;
pub const OP_TEXT_REQ: u8 = 0x04;
pub const OP_DATA_OUT: u8 = 0x05;
pub const OP_LOGOUT_REQ: u8 = 0x06;
pub const OP_SNACK: u8 = 0x10;
// Target opcodes.
pub const OP_NOP_IN: u8 = 0x20;
pub const OP_SCSI_RESP: u8 = 0x21;
pub const OP_TMF_RESP: u8 = 0x22;
pub const OP_LOGIN_RESP: u8 = 0x23;
pub const OP_TEXT_RESP: u8 = 0x24;
pub const OP_DATA_IN: u8 = 0x25;
pub const OP_LOGOUT_RESP: u8 = 0x26;
pub const OP_R2T: u8 = 0x31;
pub const OP_REJECT: u8 = 0x3f;

/// Reserved tag value: "no task" (RFC 7143 11.18, 11.19).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// What the reader accepts and checks.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest data segment accepted (our declared MaxRecvDataSegmentLength).
    pub max_data: usize,
    pub header_digest: bool,
    pub data_digest: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PduError {
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    #[error("data segment of {len} bytes exceeds the limit of {max}")]
    TooLong { len: usize, max: usize },
    #[error("header digest mismatch")]
    HeaderDigest,
    #[error("data digest mismatch")]
    DataDigest,
    /// The read timeout passed before the first byte of a PDU (the connection is
    /// idle, not broken: the caller may ping).
    #[error("idle")]
    Idle,
}

/// One PDU: its header (lengths inside it are recomputed on write) and segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdu {
    pub bhs: [u8; BHS_LEN],
    pub ahs: Vec<u8>,
    pub data: Vec<u8>,
}

impl Pdu {
    pub fn new(opcode: u8) -> Pdu {
        let mut bhs = [0u8; BHS_LEN];
        bhs[0] = opcode & 0x3f;
        Pdu {
            bhs,
            ahs: Vec::new(),
            data: Vec::new(),
        }
    }
    pub fn opcode(&self) -> u8 {
        self.bhs[0] & 0x3f
    }
    /// The I bit: an immediate command (does not advance CmdSN).
    pub fn immediate(&self) -> bool {
        self.bhs[0] & 0x40 != 0
    }
    pub fn flags(&self) -> u8 {
        self.bhs[1]
    }
    /// The F (final) bit.
    pub fn final_bit(&self) -> bool {
        self.bhs[1] & 0x80 != 0
    }
    pub fn u16_at(&self, off: usize) -> u16 {
        u16::from_be_bytes([self.bhs[off], self.bhs[off + 1]])
    }
    pub fn u32_at(&self, off: usize) -> u32 {
        u32::from_be_bytes(self.bhs[off..off + 4].try_into().expect("4 bytes"))
    }
    pub fn set_u16(&mut self, off: usize, v: u16) {
        self.bhs[off..off + 2].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_u32(&mut self, off: usize, v: u32) {
        self.bhs[off..off + 4].copy_from_slice(&v.to_be_bytes());
    }
    pub fn lun_raw(&self) -> u64 {
        u64::from_be_bytes(self.bhs[8..16].try_into().expect("8 bytes"))
    }
    pub fn set_lun_raw(&mut self, v: u64) {
        self.bhs[8..16].copy_from_slice(&v.to_be_bytes());
    }
    pub fn itt(&self) -> u32 {
        self.u32_at(16)
    }
    pub fn set_itt(&mut self, v: u32) {
        self.set_u32(16, v)
    }
    /// Data segment length as stated in the header (meaningful after a read).
    pub fn stated_data_len(&self) -> usize {
        u32::from_be_bytes([0, self.bhs[5], self.bhs[6], self.bhs[7]]) as usize
    }
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

fn read_digest<R: Read>(r: &mut R) -> io::Result<u32> {
    let mut d = [0u8; 4];
    r.read_exact(&mut d)?;
    Ok(u32::from_le_bytes(d))
}

/// Read one PDU. Returns `Ok(None)` on a clean end of stream before its first byte.
pub fn read_pdu<R: Read>(r: &mut R, lim: &Limits) -> Result<Option<Pdu>, PduError> {
    let mut bhs = [0u8; BHS_LEN];
    // Distinguish a clean close (no byte) from a truncated PDU.
    let mut got = 0;
    while got < BHS_LEN {
        match r.read(&mut bhs[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if got == 0
                    && matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
            {
                return Err(PduError::Idle);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let ahs_len = bhs[4] as usize * 4;
    let data_len = u32::from_be_bytes([0, bhs[5], bhs[6], bhs[7]]) as usize;
    if data_len > lim.max_data {
        return Err(PduError::TooLong {
            len: data_len,
            max: lim.max_data,
        });
    }
    let mut ahs = vec![0u8; ahs_len];
    r.read_exact(&mut ahs)?;
    if lim.header_digest {
        let want = crc32c::update(crc32c::crc32c(&bhs), &ahs);
        if read_digest(r)? != want {
            return Err(PduError::HeaderDigest);
        }
    }
    let mut data = vec![0u8; data_len + pad4(data_len)];
    r.read_exact(&mut data)?;
    if lim.data_digest && data_len > 0 && read_digest(r)? != crc32c::crc32c(&data) {
        return Err(PduError::DataDigest);
    }
    data.truncate(data_len);
    Ok(Some(Pdu { bhs, ahs, data }))
}

/// Serialise a PDU (lengths and digests computed here) into one buffer.
pub fn encode_pdu(pdu: &Pdu, header_digest: bool, data_digest: bool) -> Vec<u8> {
    let mut bhs = pdu.bhs;
    debug_assert!(pdu.ahs.len().is_multiple_of(4) && pdu.ahs.len() <= 255 * 4);
    debug_assert!(pdu.data.len() < 1 << 24);
    bhs[4] = (pdu.ahs.len() / 4) as u8;
    let dl = (pdu.data.len() as u32).to_be_bytes();
    bhs[5..8].copy_from_slice(&dl[1..4]);
    let pad = pad4(pdu.data.len());
    let mut out = Vec::with_capacity(BHS_LEN + pdu.ahs.len() + pdu.data.len() + pad + 8);
    out.extend_from_slice(&bhs);
    out.extend_from_slice(&pdu.ahs);
    if header_digest {
        let c = crc32c::crc32c(&out);
        out.extend_from_slice(&c.to_le_bytes());
    }
    if !pdu.data.is_empty() {
        let start = out.len();
        out.extend_from_slice(&pdu.data);
        out.extend(std::iter::repeat_n(0u8, pad));
        if data_digest {
            let c = crc32c::crc32c(&out[start..]);
            out.extend_from_slice(&c.to_le_bytes());
        }
    }
    out
}

pub fn write_pdu<W: Write>(
    w: &mut W,
    pdu: &Pdu,
    header_digest: bool,
    data_digest: bool,
) -> io::Result<()> {
    w.write_all(&encode_pdu(pdu, header_digest, data_digest))
}

/// Fuzz entry: decode as many PDUs as the bytes hold under each digest setting and
/// re-encode them; must never panic and never allocate beyond the limits.
pub fn fuzz_decode(bytes: &[u8]) {
    for (hd, dd) in [(false, false), (true, true), (true, false)] {
        let lim = Limits {
            max_data: 65536,
            header_digest: hd,
            data_digest: dd,
        };
        let mut cur = io::Cursor::new(bytes);
        while let Ok(Some(p)) = read_pdu(&mut cur, &lim) {
            let enc = encode_pdu(&p, hd, dd);
            let back = read_pdu(&mut io::Cursor::new(&enc), &lim)
                .expect("re-encoded PDU decodes")
                .expect("one PDU");
            assert_eq!(back.data, p.data);
            assert_eq!(back.ahs, p.ahs);
            let _ = crate::text::parse_text(&p.data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(d: bool) -> Limits {
        Limits {
            max_data: 8192,
            header_digest: d,
            data_digest: d,
        }
    }

    #[test]
    fn round_trip_with_and_without_digests() {
        for d in [false, true] {
            let mut p = Pdu::new(OP_SCSI_CMD);
            p.set_itt(0x1234);
            p.ahs = vec![0, 4, 1, 0, 1, 2, 3, 4];
            p.data = b"hello".to_vec();
            let enc = encode_pdu(&p, d, d);
            assert_eq!(enc.len() % 4, 0, "padded");
            let mut back = read_pdu(&mut io::Cursor::new(&enc), &lim(d))
                .unwrap()
                .unwrap();
            assert_eq!(back.stated_data_len(), 5);
            back.bhs[4] = 0;
            back.bhs[5..8].copy_from_slice(&[0, 0, 0]);
            assert_eq!(back, p);
        }
    }

    #[test]
    fn bad_digests_and_lengths_are_errors() {
        let mut p = Pdu::new(OP_NOP_OUT);
        p.data = vec![7; 100];
        let mut enc = encode_pdu(&p, true, true);
        let n = enc.len();
        enc[n - 1] ^= 1;
        assert!(matches!(
            read_pdu(&mut io::Cursor::new(&enc), &lim(true)),
            Err(PduError::DataDigest)
        ));
        enc[3] ^= 1;
        assert!(matches!(
            read_pdu(&mut io::Cursor::new(&enc), &lim(true)),
            Err(PduError::HeaderDigest)
        ));
        // A stated length of 16 MiB - 1 is refused before allocating.
        let mut big = [0u8; 48];
        big[5..8].copy_from_slice(&[0xff, 0xff, 0xff]);
        assert!(matches!(
            read_pdu(&mut io::Cursor::new(&big[..]), &lim(false)),
            Err(PduError::TooLong { .. })
        ));
        // Clean end vs truncated header.
        assert!(read_pdu(&mut io::Cursor::new(&[][..]), &lim(false))
            .unwrap()
            .is_none());
        assert!(read_pdu(&mut io::Cursor::new(&big[..10]), &lim(false)).is_err());
    }
}
