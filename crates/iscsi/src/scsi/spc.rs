//! Primary commands (SPC-4) and the descriptive pages of a block device: INQUIRY and
//! its VPD pages, MODE SENSE/SELECT, READ CAPACITY, REPORT LUNS, REQUEST SENSE,
//! REPORT SUPPORTED OPERATION CODES.
//!
//! Invariants: every reply is built whole and then cut to the allocation length (the
//! length fields inside always describe the untruncated data, as SPC requires); the
//! Caching page's WCE bit is read from the device on every request, never cached, and
//! is not changeable by MODE SELECT (it follows the volume's `sync` property).

use super::{
    truncated, Outcome, Sense, LBS, MAX_UNMAP_BLOCKS, MAX_UNMAP_DESCRIPTORS, MAX_WS_BLOCKS,
    MAX_XFER_BLOCKS,
};
use crate::lun::Lun;

const VENDOR: &[u8; 8] = b"CACHALOT";
const PRODUCT: &[u8; 16] = b"VOLUME          ";
const REVISION: &[u8; 4] = b"0001";
/// Most logical blocks COMPARE AND WRITE accepts.
pub const MAX_CAW_BLOCKS: u8 = 255;

fn put16(v: &mut [u8], i: usize, x: u16) {
    v[i..i + 2].copy_from_slice(&x.to_be_bytes());
}
fn put32(v: &mut [u8], i: usize, x: u32) {
    v[i..i + 4].copy_from_slice(&x.to_be_bytes());
}
fn put64(v: &mut [u8], i: usize, x: u64) {
    v[i..i + 8].copy_from_slice(&x.to_be_bytes());
}

/// Logical blocks per volume block, as a power-of-two exponent: the unmap and
/// transfer granularity of the Block Limits page.
pub fn granularity_exp(lun: &Lun) -> u8 {
    let bs = (lun.dev.block_size() as u64).max(LBS);
    (bs / LBS).trailing_zeros() as u8
}

pub fn inquiry(lun: &Lun, evpd: bool, page: u8, alloc: u32) -> Outcome {
    let data = if !evpd {
        standard_inquiry()
    } else {
        match vpd(lun, page) {
            Some(d) => d,
            None => return Sense::INVALID_FIELD_CDB.into(),
        }
    };
    Outcome::data(truncated(data, alloc as usize))
}

fn standard_inquiry() -> Vec<u8> {
    let mut d = vec![0u8; 74];
    d[0] = 0x00; // connected direct-access block device
    d[2] = 0x06; // SPC-4
    d[3] = 0x12; // HISUP, response data format 2
    d[4] = (d.len() - 5) as u8;
    d[7] = 0x02; // CMDQUE
    d[8..16].copy_from_slice(VENDOR);
    d[16..32].copy_from_slice(PRODUCT);
    d[32..36].copy_from_slice(REVISION);
    // Version descriptors: SAM-5, iSCSI, SPC-4, SBC-3.
    for (i, v) in [0x00a0u16, 0x0960, 0x0460, 0x04c0].iter().enumerate() {
        put16(&mut d, 58 + 2 * i, *v);
    }
    d
}

fn page(code: u8, body: &[u8]) -> Vec<u8> {
    let mut d = vec![0, code, 0, 0];
    put16(&mut d, 2, body.len() as u16);
    d.extend_from_slice(body);
    d
}

fn vpd(lun: &Lun, code: u8) -> Option<Vec<u8>> {
    Some(match code {
        0x00 => page(0x00, &[0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]),
        0x80 => page(0x80, lun.serial().as_bytes()),
        0x83 => page(0x83, &device_identification(lun)),
        0xb0 => page(0xb0, &block_limits(lun)),
        0xb1 => {
            let mut b = vec![0u8; 0x3c];
            put16(&mut b, 0, 1); // non-rotating medium
            page(0xb1, &b)
        }
        0xb2 => {
            // LBPU, LBPWS, LBPWS10, LBPRZ; provisioning type 2 (thin): unmapped blocks
            // are freed in the pool and read back as zeros.
            page(0xb2, &[0x00, 0x80 | 0x40 | 0x20 | 0x04, 0x02, 0x00])
        }
        _ => return None,
    })
}

fn device_identification(lun: &Lun) -> Vec<u8> {
    let mut d = Vec::new();
    // NAA locally assigned (type 3), binary, associated with the logical unit.
    d.extend_from_slice(&[0x01, 0x03, 0x00, 0x08]);
    d.extend_from_slice(&lun.naa().to_be_bytes());
    // T10 vendor identification, ASCII.
    let t10 = format!(
        "{}{}",
        std::str::from_utf8(VENDOR).unwrap_or(""),
        lun.serial()
    );
    d.extend_from_slice(&[0x02, 0x01, 0x00, t10.len() as u8]);
    d.extend_from_slice(t10.as_bytes());
    // SCSI name string of the target device (iSCSI, UTF-8, NUL-padded to 4).
    let mut name = lun.target.clone().into_bytes();
    name.push(0);
    while !name.len().is_multiple_of(4) {
        name.push(0);
    }
    if name.len() <= 252 {
        d.extend_from_slice(&[0x53, 0xa8, 0x00, name.len() as u8]);
        d.extend_from_slice(&name);
    }
    d
}

fn block_limits(lun: &Lun) -> Vec<u8> {
    let gran = 1u32 << granularity_exp(lun);
    let mut b = vec![0u8; 0x3c];
    b[0] = 0x01; // WSNZ: WRITE SAME with 0 blocks is refused
    b[1] = MAX_CAW_BLOCKS;
    put16(&mut b, 2, gran as u16);
    put32(&mut b, 4, MAX_XFER_BLOCKS);
    put32(&mut b, 8, 2048.max(gran)); // optimal transfer: 1 MiB
    put32(&mut b, 12, MAX_XFER_BLOCKS); // max prefetch
    put32(&mut b, 16, MAX_UNMAP_BLOCKS as u32); // max unmap LBA count
    put32(&mut b, 20, MAX_UNMAP_DESCRIPTORS as u32);
    put32(&mut b, 24, gran); // optimal unmap granularity
    put32(&mut b, 28, 0x8000_0000); // UGAVALID, alignment 0
    put64(&mut b, 32, MAX_WS_BLOCKS); // max write same length
    b
}

pub fn read_capacity10(lun: &Lun) -> Outcome {
    let blocks = lun.blocks();
    let mut d = vec![0u8; 8];
    put32(&mut d, 0, blocks.saturating_sub(1).min(0xffff_ffff) as u32);
    put32(&mut d, 4, LBS as u32);
    Outcome::data(d)
}

pub fn read_capacity16(lun: &Lun, alloc: u32) -> Outcome {
    let mut d = vec![0u8; 32];
    put64(&mut d, 0, lun.blocks().saturating_sub(1));
    put32(&mut d, 8, LBS as u32);
    // Physical block = logical block (exponent 0): a 512-byte write is atomic here
    // (read-modify-write of the volume block happens inside one txg). The volume block
    // is announced as the optimal transfer/unmap granularity (Block Limits VPD), which
    // Linux uses as minimum_io_size. (An exponent > 0 also trips libiscsi's
    // GetLBAStatus.UnmapSingle, which assumes descriptors start on a physical block.)
    d[13] = 0;
    d[14] = 0x80 | 0x40; // LBPME, LBPRZ
    Outcome::data(truncated(d, alloc as usize))
}

pub fn report_luns(alloc: u32) -> Outcome {
    if alloc < 16 {
        return Sense::INVALID_FIELD_CDB.into();
    }
    let mut d = vec![0u8; 16];
    put32(&mut d, 0, 8);
    Outcome::data(truncated(d, alloc as usize))
}

pub fn request_sense(alloc: u32, desc: bool) -> Outcome {
    // Sense is always delivered with the failing command (autosense): nothing pending.
    let d = if desc {
        vec![0x72, 0, 0, 0, 0, 0, 0, 0]
    } else {
        Sense::new(0, 0, 0).fixed()
    };
    Outcome::data(truncated(d, alloc as usize))
}

fn caching_page(lun: &Lun, pc: u8) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = 0x08;
    p[1] = 0x12;
    if pc != 1 && lun.dev.write_cache() {
        p[2] = 0x04; // WCE: the truth, from the volume's sync property
    }
    p
}

fn control_page(pc: u8) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p[0] = 0x0a;
    p[1] = 0x0a;
    if pc != 1 {
        p[3] = 0x10; // unrestricted reordering, QERR 0
        put16(&mut p, 8, 0xffff); // busy timeout: unlimited
    }
    p
}

fn error_recovery_page(pc: u8) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p[0] = 0x01;
    p[1] = 0x0a;
    if pc != 1 {
        p[2] = 0xc0; // AWRE, ARRE
    }
    p
}

fn mode_pages(lun: &Lun, pc: u8, code: u8, subpage: u8) -> Option<Vec<u8>> {
    let all = code == 0x3f;
    if subpage != 0 && !(all && subpage == 0xff) {
        return None;
    }
    let mut d = Vec::new();
    if all || code == 0x01 {
        d.extend(error_recovery_page(pc));
    }
    if all || code == 0x08 {
        d.extend(caching_page(lun, pc));
    }
    if all || code == 0x0a {
        d.extend(control_page(pc));
    }
    (!d.is_empty()).then_some(d)
}

pub fn mode_sense(
    lun: &Lun,
    ten: bool,
    dbd: bool,
    pc: u8,
    code: u8,
    sub: u8,
    alloc: u32,
) -> Outcome {
    if pc == 3 {
        return Sense::new(super::KEY_ILLEGAL_REQUEST, 0x39, 0x00).into(); // saving unsupported
    }
    let Some(pages) = mode_pages(lun, pc, code, sub) else {
        return Sense::INVALID_FIELD_CDB.into();
    };
    let mut bd = Vec::new();
    if !dbd {
        bd = vec![0u8; 8];
        put32(&mut bd, 0, lun.blocks().min(0xff_ffff) as u32);
        put32(&mut bd, 4, LBS as u32);
        bd[0] = 0; // density code
    }
    let dsp = if lun.dev.is_readonly() { 0x80 } else { 0 } | 0x10; // WP, DPOFUA
    let mut d = if ten {
        let mut h = vec![0u8; 8];
        h[3] = dsp;
        put16(&mut h, 6, bd.len() as u16);
        h
    } else {
        vec![0, 0, dsp, bd.len() as u8]
    };
    d.extend(bd);
    d.extend(pages);
    if ten {
        let n = (d.len() - 2) as u16;
        put16(&mut d, 0, n);
    } else {
        d[0] = (d.len() - 1) as u8;
    }
    Outcome::data(truncated(d, alloc as usize))
}

/// MODE SELECT: pages are accepted only if they ask for what already is (nothing
/// here is changeable; WCE follows `sync`).
pub fn mode_select(lun: &Lun, ten: bool, pf: bool, sp: bool, data: &[u8]) -> Outcome {
    if !pf || sp {
        return Sense::INVALID_FIELD_CDB.into();
    }
    let hdr = if ten { 8 } else { 4 };
    if data.is_empty() {
        return Outcome::good();
    }
    if data.len() < hdr {
        return Sense::PARAM_LIST_LENGTH.into();
    }
    let bdl = if ten {
        u16::from_be_bytes([data[6], data[7]]) as usize
    } else {
        data[3] as usize
    };
    let mut pos = hdr + bdl;
    if pos > data.len() {
        return Sense::PARAM_LIST_LENGTH.into();
    }
    while pos + 2 <= data.len() {
        let code = data[pos] & 0x3f;
        if data[pos] & 0x40 != 0 {
            return Sense::INVALID_FIELD_PARAM.into(); // subpage format: none supported
        }
        let len = data[pos + 1] as usize + 2;
        if pos + len > data.len() {
            return Sense::PARAM_LIST_LENGTH.into();
        }
        let Some(cur) = mode_pages(lun, 0, code, 0).filter(|_| code != 0x3f) else {
            return Sense::INVALID_FIELD_PARAM.into();
        };
        let given = &data[pos..pos + len];
        if cur.len() != len || cur[2..] != given[2..] {
            return Sense::INVALID_FIELD_PARAM.into();
        }
        pos += len;
    }
    Outcome::good()
}

/// (opcode, service action, CDB usage data). Service action `None`: no SAs.
fn supported() -> Vec<(u8, Option<u16>, Vec<u8>)> {
    let ff = 0xffu8;
    let rw10 = |op: u8, b1: u8| vec![op, b1, ff, ff, ff, ff, 0x1f, ff, ff, 0];
    let rw12 = |op: u8, b1: u8| vec![op, b1, ff, ff, ff, ff, ff, ff, ff, ff, 0x1f, 0];
    let rw16 = |op: u8, b1: u8| {
        vec![
            op, b1, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, ff, 0x1f, 0,
        ]
    };
    let mut v: Vec<(u8, Option<u16>, Vec<u8>)> = vec![
        (0x00, None, vec![0x00, 0, 0, 0, 0, 0]),
        (0x03, None, vec![0x03, 0x01, 0, 0, ff, 0]),
        (0x08, None, vec![0x08, 0x1f, ff, ff, ff, 0]),
        (0x0a, None, vec![0x0a, 0x1f, ff, ff, ff, 0]),
        (0x12, None, vec![0x12, 0x01, ff, ff, ff, 0]),
        (0x15, None, vec![0x15, 0x11, 0, 0, ff, 0]),
        (0x16, None, vec![0x16, 0, 0, 0, 0, 0]),
        (0x17, None, vec![0x17, 0, 0, 0, 0, 0]),
        (0x1a, None, vec![0x1a, 0x08, ff, ff, ff, 0]),
        (0x1b, None, vec![0x1b, 0x01, 0, 0x0f, 0xf7, 0]),
        (0x1e, None, vec![0x1e, 0, 0, 0, 0x03, 0]),
        (0x25, None, vec![0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        (0x28, None, rw10(0x28, 0x18)),
        (0x2a, None, rw10(0x2a, 0x18)),
        (0x2e, None, rw10(0x2e, 0x12)),
        (0x2f, None, rw10(0x2f, 0x16)),
        (0x34, None, rw10(0x34, 0x02)),
        (0x35, None, rw10(0x35, 0x02)),
        (0x41, None, rw10(0x41, 0x08)),
        (0x42, None, vec![0x42, 0, 0, 0, 0, 0, 0x1f, ff, ff, 0]),
        (0x55, None, vec![0x55, 0x11, 0, 0, 0, 0, 0, ff, ff, 0]),
        (0x56, None, vec![0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        (0x57, None, vec![0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        (0x5a, None, vec![0x5a, 0x08, ff, ff, 0, 0, 0, ff, ff, 0]),
        (0x88, None, rw16(0x88, 0x18)),
        (0x89, None, {
            let mut u = rw16(0x89, 0x18);
            u[10..13].fill(0);
            u
        }),
        (0x8a, None, rw16(0x8a, 0x18)),
        (0x8e, None, rw16(0x8e, 0x12)),
        (0x8f, None, rw16(0x8f, 0x16)),
        (0x90, None, rw16(0x90, 0x02)),
        (0x91, None, rw16(0x91, 0x02)),
        (0x93, None, rw16(0x93, 0x09)),
        (0xa0, None, vec![0xa0, 0, ff, 0, 0, 0, ff, ff, ff, ff, 0, 0]),
        (0xa8, None, rw12(0xa8, 0x18)),
        (0xaa, None, rw12(0xaa, 0x18)),
        (0xae, None, rw12(0xae, 0x12)),
        (0xaf, None, rw12(0xaf, 0x16)),
    ];
    for sa in 0..4u16 {
        v.push((
            0x5e,
            Some(sa),
            vec![0x5e, sa as u8, 0, 0, 0, 0, 0, ff, ff, 0],
        ));
    }
    for sa in 0..7u16 {
        v.push((
            0x5f,
            Some(sa),
            vec![0x5f, sa as u8, ff, 0, 0, ff, ff, ff, ff, 0],
        ));
    }
    let mut rc16 = rw16(0x9e, 0x10);
    rc16[2..10].fill(0);
    v.push((0x9e, Some(0x10), rc16));
    v.push((0x9e, Some(0x12), rw16(0x9e, 0x12)));
    v.push((
        0xa3,
        Some(0x0c),
        vec![0xa3, 0x0c, 0x87, ff, ff, ff, ff, ff, ff, ff, 0, 0],
    ));
    v
}

fn timeouts() -> Vec<u8> {
    let mut t = vec![0u8; 12];
    put16(&mut t, 0, 0x0a);
    put32(&mut t, 4, 30); // nominal seconds
    put32(&mut t, 8, 60); // recommended
    t
}

pub fn report_opcodes(options: u8, opcode: u8, sa: u16, rctd: bool, alloc: u32) -> Outcome {
    let table = supported();
    let data = match options {
        0 => {
            let mut d = vec![0u8; 4];
            for (op, s, usage) in &table {
                let mut e = vec![0u8; 8];
                e[0] = *op;
                put16(&mut e, 2, s.unwrap_or(0));
                e[5] = if s.is_some() { 0x01 } else { 0 } | if rctd { 0x02 } else { 0 };
                put16(&mut e, 6, usage.len() as u16);
                d.extend(e);
                if rctd {
                    d.extend(timeouts());
                }
            }
            let n = (d.len() - 4) as u32;
            put32(&mut d, 0, n);
            d
        }
        1..=3 => {
            let has_sa = table.iter().any(|(op, s, _)| *op == opcode && s.is_some());
            if (options == 1 && has_sa) || (options == 2 && !has_sa) {
                return Sense::INVALID_FIELD_CDB.into();
            }
            let found = table
                .iter()
                .find(|(op, s, _)| *op == opcode && (!has_sa || *s == Some(sa)));
            let mut d = vec![0u8; 4];
            match found {
                Some((_, _, usage)) => {
                    d[1] = 0x03 | if rctd { 0x80 } else { 0 };
                    put16(&mut d, 2, usage.len() as u16);
                    d.extend_from_slice(usage);
                    if rctd {
                        d.extend(timeouts());
                    }
                }
                None => d[1] = 0x01,
            }
            d
        }
        _ => return Sense::INVALID_FIELD_CDB.into(),
    };
    Outcome::data(truncated(data, alloc as usize))
}
