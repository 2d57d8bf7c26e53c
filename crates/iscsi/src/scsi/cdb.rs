//! CDB decoding: bytes from the wire into a typed [`Cdb`], or the sense data that
//! rejects them (INVALID COMMAND OPERATION CODE, INVALID FIELD IN CDB).
//!
//! Invariants: decoding never panics on any input (fuzzed); a field this device does
//! not support (protection information, unknown service actions, reserved BYTCHK
//! values, a short CDB) is rejected here, so the executor only sees valid commands.
//! Range checks against the capacity happen in the executor.

use super::Sense;

/// How a read/write-class command was flagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rw {
    pub lba: u64,
    pub blocks: u32,
    pub fua: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cdb {
    TestUnitReady,
    RequestSense {
        alloc: u32,
    },
    Inquiry {
        evpd: bool,
        page: u8,
        alloc: u32,
    },
    ModeSense {
        ten: bool,
        dbd: bool,
        pc: u8,
        page: u8,
        subpage: u8,
        alloc: u32,
    },
    ModeSelect {
        ten: bool,
        pf: bool,
        sp: bool,
        len: u32,
    },
    StartStop,
    PreventAllow {
        prevent: u8,
    },
    ReadCapacity10,
    ReadCapacity16 {
        alloc: u32,
    },
    GetLbaStatus {
        lba: u64,
        alloc: u32,
    },
    Read(Rw),
    Write(Rw),
    /// bytchk: 0 = medium check only, 1 = compare, 3 = one block against each.
    Verify {
        rw: Rw,
        bytchk: u8,
    },
    WriteVerify {
        rw: Rw,
        bytchk: u8,
    },
    WriteSame {
        rw: Rw,
        unmap: bool,
        ndob: bool,
    },
    Unmap {
        len: u32,
    },
    SyncCache {
        lba: u64,
        blocks: u32,
    },
    PreFetch {
        lba: u64,
        blocks: u32,
    },
    CompareAndWrite {
        rw: Rw,
    },
    ReportLuns {
        alloc: u32,
    },
    ReportOpcodes {
        options: u8,
        opcode: u8,
        sa: u16,
        rctd: bool,
        alloc: u32,
    },
    PrIn {
        sa: u8,
        alloc: u32,
    },
    PrOut {
        sa: u8,
        scope: u8,
        kind: u8,
        len: u32,
    },
    Reserve,
    Release,
}

/// CDB length of an opcode's group (SPC-4 4.2.5.1); 0 for vendor groups.
pub fn cdb_len(opcode: u8) -> usize {
    match opcode >> 5 {
        0 => 6,
        1 | 2 => 10,
        4 => 16,
        5 => 12,
        _ => 0,
    }
}

fn be16(c: &[u8], i: usize) -> u32 {
    u16::from_be_bytes([c[i], c[i + 1]]) as u32
}
fn be32(c: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]])
}
fn be64(c: &[u8], i: usize) -> u64 {
    u64::from_be_bytes(c[i..i + 8].try_into().expect("8 bytes"))
}

const BAD: Sense = Sense::INVALID_FIELD_CDB;

/// Protection fields (RDPROTECT/WRPROTECT/VRPROTECT) must be zero: no PI here.
fn no_protect(c: &[u8]) -> Result<(), Sense> {
    if c[1] & 0xe0 != 0 {
        return Err(BAD);
    }
    Ok(())
}

fn rw10(c: &[u8]) -> Rw {
    Rw {
        lba: be32(c, 2) as u64,
        blocks: be16(c, 7),
        fua: c[1] & 0x08 != 0,
    }
}
fn rw12(c: &[u8]) -> Rw {
    Rw {
        lba: be32(c, 2) as u64,
        blocks: be32(c, 6),
        fua: c[1] & 0x08 != 0,
    }
}
fn rw16(c: &[u8]) -> Rw {
    Rw {
        lba: be64(c, 2),
        blocks: be32(c, 10),
        fua: c[1] & 0x08 != 0,
    }
}

/// Decode a CDB (the 16 bytes of the SCSI Command PDU, or longer with an AHS).
pub fn parse(c: &[u8]) -> Result<Cdb, Sense> {
    let Some(&op) = c.first() else {
        return Err(Sense::INVALID_OPCODE);
    };
    let n = cdb_len(op);
    if n == 0 || c.len() < n {
        return Err(Sense::INVALID_OPCODE);
    }
    let c = &c[..n];
    Ok(match op {
        0x00 => Cdb::TestUnitReady,
        0x03 => Cdb::RequestSense { alloc: c[4] as u32 },
        0x12 => {
            let evpd = c[1] & 1 != 0;
            if c[1] & 0xfe != 0 || (!evpd && c[2] != 0) {
                return Err(BAD);
            }
            Cdb::Inquiry {
                evpd,
                page: c[2],
                alloc: be16(c, 3),
            }
        }
        0x1a | 0x5a => {
            let ten = op == 0x5a;
            Cdb::ModeSense {
                ten,
                dbd: c[1] & 0x08 != 0,
                pc: c[2] >> 6,
                page: c[2] & 0x3f,
                subpage: c[3],
                alloc: if ten { be16(c, 7) } else { c[4] as u32 },
            }
        }
        0x15 | 0x55 => {
            let ten = op == 0x55;
            Cdb::ModeSelect {
                ten,
                pf: c[1] & 0x10 != 0,
                sp: c[1] & 0x01 != 0,
                len: if ten { be16(c, 7) } else { c[4] as u32 },
            }
        }
        0x1b => Cdb::StartStop,
        0x1e => Cdb::PreventAllow { prevent: c[4] & 3 },
        0x25 => Cdb::ReadCapacity10,
        0x9e => match c[1] & 0x1f {
            0x10 => Cdb::ReadCapacity16 { alloc: be32(c, 10) },
            0x12 => Cdb::GetLbaStatus {
                lba: be64(c, 2),
                alloc: be32(c, 10),
            },
            _ => return Err(BAD),
        },
        0x08 | 0x0a => {
            let lba = (((c[1] & 0x1f) as u64) << 16) | be16(c, 2) as u64;
            let blocks = if c[4] == 0 { 256 } else { c[4] as u32 };
            let rw = Rw {
                lba,
                blocks,
                fua: false,
            };
            if op == 0x08 {
                Cdb::Read(rw)
            } else {
                Cdb::Write(rw)
            }
        }
        0x28 | 0xa8 | 0x88 | 0x2a | 0xaa | 0x8a => {
            no_protect(c)?;
            let rw = match op {
                0x28 | 0x2a => rw10(c),
                0xa8 | 0xaa => rw12(c),
                _ => rw16(c),
            };
            if matches!(op, 0x28 | 0xa8 | 0x88) {
                Cdb::Read(rw)
            } else {
                Cdb::Write(rw)
            }
        }
        0x2f | 0xaf | 0x8f => {
            no_protect(c)?;
            let bytchk = (c[1] >> 1) & 3;
            if bytchk == 2 {
                return Err(BAD);
            }
            let mut rw = match op {
                0x2f => rw10(c),
                0xaf => rw12(c),
                _ => rw16(c),
            };
            rw.fua = false;
            Cdb::Verify { rw, bytchk }
        }
        0x2e | 0xae | 0x8e => {
            no_protect(c)?;
            let bytchk = (c[1] >> 1) & 3;
            if bytchk > 1 {
                return Err(BAD);
            }
            let rw = match op {
                0x2e => rw10(c),
                0xae => rw12(c),
                _ => rw16(c),
            };
            Cdb::WriteVerify { rw, bytchk }
        }
        0x41 | 0x93 => {
            no_protect(c)?;
            let anchor = c[1] & 0x10 != 0;
            let unmap = c[1] & 0x08 != 0;
            let ndob = op == 0x93 && c[1] & 0x01 != 0;
            if anchor || (op == 0x41 && c[1] & 0x06 != 0) {
                return Err(BAD);
            }
            let rw = if op == 0x41 {
                Rw {
                    fua: false,
                    ..rw10(c)
                }
            } else {
                Rw {
                    fua: false,
                    ..rw16(c)
                }
            };
            Cdb::WriteSame { rw, unmap, ndob }
        }
        0x42 => {
            if c[1] & 0x01 != 0 {
                return Err(BAD); // ANCHOR
            }
            Cdb::Unmap { len: be16(c, 7) }
        }
        0x35 => Cdb::SyncCache {
            lba: be32(c, 2) as u64,
            blocks: be16(c, 7),
        },
        0x91 => Cdb::SyncCache {
            lba: be64(c, 2),
            blocks: be32(c, 10),
        },
        0x34 => Cdb::PreFetch {
            lba: be32(c, 2) as u64,
            blocks: be16(c, 7),
        },
        0x90 => Cdb::PreFetch {
            lba: be64(c, 2),
            blocks: be32(c, 10),
        },
        0x89 => {
            no_protect(c)?;
            Cdb::CompareAndWrite {
                rw: Rw {
                    lba: be64(c, 2),
                    blocks: c[13] as u32,
                    fua: c[1] & 0x08 != 0,
                },
            }
        }
        0xa0 => Cdb::ReportLuns { alloc: be32(c, 6) },
        0xa3 if c[1] & 0x1f == 0x0c => Cdb::ReportOpcodes {
            rctd: c[2] & 0x80 != 0,
            options: c[2] & 0x07,
            opcode: c[3],
            sa: be16(c, 4) as u16,
            alloc: be32(c, 6),
        },
        0x5e => Cdb::PrIn {
            sa: c[1] & 0x1f,
            alloc: be16(c, 7),
        },
        0x5f => Cdb::PrOut {
            sa: c[1] & 0x1f,
            scope: c[2] >> 4,
            kind: c[2] & 0x0f,
            len: be32(c, 5),
        },
        0x16 | 0x56 => {
            if op == 0x56 && c[1] & 0x02 != 0 {
                return Err(BAD); // third-party reservations are not supported
            }
            Cdb::Reserve
        }
        0x17 | 0x57 => Cdb::Release,
        _ => return Err(Sense::INVALID_OPCODE),
    })
}

/// Fuzz entry: the first 16 bytes are a CDB, the rest Data-Out. Decodes the CDB and,
/// if valid, runs it against a 1 MiB in-memory LU as the connection would (Data-Out
/// cut to what the command asks for). Must never panic or loop.
pub fn fuzz_parse(bytes: &[u8]) {
    use crate::lun::{Lun, Nexus};
    use crate::scsi::exec;
    let (cdb, rest) = bytes.split_at(bytes.len().min(16));
    let Ok(cmd) = parse(cdb) else { return };
    thread_local! {
        static LUN: Lun = Lun::new(
            std::sync::Arc::new(crate::dev::MemDev::new("fuzz", 1 << 20, 4096, false)),
            "iqn.2026-11.org.cachalot:fuzz",
            None,
        );
    }
    let want = exec::data_out_len(&cmd).min(rest.len() as u64) as usize;
    if exec::strict_out(&cmd) && want as u64 != exec::data_out_len(&cmd) {
        return;
    }
    let n = Nexus::new("iqn.fuzz", [0; 6]);
    LUN.with(|lun| {
        if exec::precheck(lun, &n, &cmd).is_ok() {
            let _ = exec::execute(lun, &n, &cmd, &rest[..want]);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_rw_and_rejects_protect() {
        let mut c = [0u8; 16];
        c[0] = 0x88;
        c[2..10].copy_from_slice(&7u64.to_be_bytes());
        c[10..14].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            parse(&c),
            Ok(Cdb::Read(Rw {
                lba: 7,
                blocks: u32::MAX,
                fua: false
            }))
        );
        c[1] = 0x20;
        assert_eq!(parse(&c), Err(Sense::INVALID_FIELD_CDB));
        let mut r6 = [0u8; 6];
        r6[0] = 0x08;
        assert!(matches!(parse(&r6), Ok(Cdb::Read(Rw { blocks: 256, .. }))));
        assert_eq!(parse(&[0xc0; 16]), Err(Sense::INVALID_OPCODE));
        assert_eq!(parse(&[0x28, 0, 0]), Err(Sense::INVALID_OPCODE));
        assert_eq!(parse(&[]), Err(Sense::INVALID_OPCODE));
    }
}
