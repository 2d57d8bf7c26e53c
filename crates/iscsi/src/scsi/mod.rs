//! SCSI for a direct-access block device (SPC-4, SBC-3): CDB decoding ([`cdb`]),
//! command execution against a [`crate::lun::Lun`] ([`exec`], [`spc`]), persistent
//! reservations ([`pr`]) and sense data (here).
//!
//! Invariants:
//! - Every command is answered with a status; errors carry sense data in fixed format
//!   (response code 0x70) with the sense key, ASC and ASCQ the standards give.
//! - Logical blocks are 512 bytes; the volume's block size is the physical block
//!   (READ CAPACITY(16) exponent, unmap granularity).

pub mod cdb;
pub mod exec;
pub mod pr;
pub mod spc;

pub const STATUS_GOOD: u8 = 0x00;
pub const STATUS_CHECK_CONDITION: u8 = 0x02;
pub const STATUS_CONDITION_MET: u8 = 0x04;
pub const STATUS_RESERVATION_CONFLICT: u8 = 0x18;

pub const KEY_NOT_READY: u8 = 0x02;
pub const KEY_MEDIUM_ERROR: u8 = 0x03;
pub const KEY_ILLEGAL_REQUEST: u8 = 0x05;
pub const KEY_UNIT_ATTENTION: u8 = 0x06;
pub const KEY_DATA_PROTECT: u8 = 0x07;
pub const KEY_ABORTED_COMMAND: u8 = 0x0b;
pub const KEY_MISCOMPARE: u8 = 0x0e;

/// Logical block size presented to initiators.
pub const LBS: u64 = 512;
/// Largest transfer in one command (Block Limits VPD), in logical blocks: 32 MiB
/// (libiscsi's WriteSame16.Unmap writes 65536 blocks in one WRITE(16) regardless of
/// the advertised limit).
pub const MAX_XFER_BLOCKS: u32 = 65536;
/// Largest WRITE SAME and UNMAP in one command, in logical blocks (1 GiB).
pub const MAX_WS_BLOCKS: u64 = 1 << 21;
pub const MAX_UNMAP_DESCRIPTORS: usize = 256;
/// Largest UNMAP LBA count (512 MiB; the suite wants at most 2^20).
pub const MAX_UNMAP_BLOCKS: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sense {
    pub key: u8,
    pub asc: u8,
    pub ascq: u8,
    /// INFORMATION field (e.g. the offset of a miscompare).
    pub info: Option<u32>,
}

impl Sense {
    pub const fn new(key: u8, asc: u8, ascq: u8) -> Sense {
        Sense {
            key,
            asc,
            ascq,
            info: None,
        }
    }
    pub const INVALID_OPCODE: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x20, 0x00);
    pub const INVALID_FIELD_CDB: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x24, 0x00);
    pub const INVALID_FIELD_PARAM: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x26, 0x00);
    pub const PARAM_LIST_LENGTH: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x1a, 0x00);
    pub const LBA_OUT_OF_RANGE: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x21, 0x00);
    pub const LUN_NOT_SUPPORTED: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x25, 0x00);
    pub const INVALID_FIELD_IU: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x0e, 0x03);
    pub const WRITE_PROTECTED: Sense = Sense::new(KEY_DATA_PROTECT, 0x27, 0x00);
    pub const SPACE_ALLOC_FAILED: Sense = Sense::new(KEY_DATA_PROTECT, 0x27, 0x07);
    pub const READ_ERROR: Sense = Sense::new(KEY_MEDIUM_ERROR, 0x11, 0x00);
    pub const WRITE_ERROR: Sense = Sense::new(KEY_MEDIUM_ERROR, 0x0c, 0x00);
    pub const MISCOMPARE_VERIFY: Sense = Sense::new(KEY_MISCOMPARE, 0x1d, 0x00);
    pub const POWER_ON_RESET: Sense = Sense::new(KEY_UNIT_ATTENTION, 0x29, 0x00);
    pub const RESERVATIONS_PREEMPTED: Sense = Sense::new(KEY_UNIT_ATTENTION, 0x2a, 0x03);
    pub const RESERVATIONS_RELEASED: Sense = Sense::new(KEY_UNIT_ATTENTION, 0x2a, 0x04);
    pub const REGISTRATIONS_PREEMPTED: Sense = Sense::new(KEY_UNIT_ATTENTION, 0x2a, 0x05);
    pub const CAPACITY_CHANGED: Sense = Sense::new(KEY_UNIT_ATTENTION, 0x2a, 0x09);
    pub const INSUFFICIENT_REG_RESOURCES: Sense = Sense::new(KEY_ILLEGAL_REQUEST, 0x55, 0x04);

    /// Fixed-format sense data (SPC-4 4.5.3), 18 bytes.
    pub fn fixed(&self) -> Vec<u8> {
        let mut s = vec![0u8; 18];
        s[0] = 0x70;
        s[2] = self.key & 0x0f;
        if let Some(i) = self.info {
            s[0] |= 0x80; // VALID
            s[3..7].copy_from_slice(&i.to_be_bytes());
        }
        s[7] = 10;
        s[12] = self.asc;
        s[13] = self.ascq;
        s
    }
}

/// The result of one SCSI command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: u8,
    pub sense: Option<Sense>,
    pub data_in: Vec<u8>,
}

impl Outcome {
    pub fn good() -> Outcome {
        Outcome {
            status: STATUS_GOOD,
            sense: None,
            data_in: Vec::new(),
        }
    }
    pub fn data(data_in: Vec<u8>) -> Outcome {
        Outcome {
            status: STATUS_GOOD,
            sense: None,
            data_in,
        }
    }
    pub fn check(sense: Sense) -> Outcome {
        Outcome {
            status: STATUS_CHECK_CONDITION,
            sense: Some(sense),
            data_in: Vec::new(),
        }
    }
    pub fn conflict() -> Outcome {
        Outcome {
            status: STATUS_RESERVATION_CONFLICT,
            sense: None,
            data_in: Vec::new(),
        }
    }
}

impl From<Sense> for Outcome {
    fn from(s: Sense) -> Outcome {
        Outcome::check(s)
    }
}

/// Copy `data` into an allocation-length-bounded reply.
pub fn truncated(mut data: Vec<u8>, alloc: usize) -> Vec<u8> {
    data.truncate(alloc);
    data
}
