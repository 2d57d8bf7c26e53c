//! Execution of decoded commands against a LUN: the block commands of SBC-3 here,
//! the descriptive ones in [`super::spc`], reservations in [`super::pr`].
//!
//! Invariants:
//! - [`precheck`] runs before any data is transferred: reservation conflicts, LBA OUT OF
//!   RANGE (for every command that names an LBA), write protection and transfer limits.
//!   A command that passes it never touches blocks outside the LU.
//! - FUA and SYNCHRONIZE CACHE reach the device as `write(.., fua)` and `flush`
//!   (the intent log); GOOD is returned only after they did.
//! - COMPARE AND WRITE holds the LU's `atomic` lock exclusive across read, compare and
//!   write; every other write holds it shared.

use super::cdb::{Cdb, Rw};
use super::spc::{self, MAX_CAW_BLOCKS};
use super::{
    pr, Outcome, Sense, LBS, MAX_UNMAP_BLOCKS, MAX_UNMAP_DESCRIPTORS, MAX_WS_BLOCKS,
    MAX_XFER_BLOCKS,
};
use crate::dev::DevError;
use crate::lun::{Lun, Nexus};

/// Bytes of Data-Out the command itself asks for (the SCSI transfer length, SPDTL).
pub fn data_out_len(cdb: &Cdb) -> u64 {
    let blocks = |rw: &Rw| rw.blocks as u64 * LBS;
    match cdb {
        Cdb::Write(rw) | Cdb::WriteVerify { rw, .. } => blocks(rw),
        Cdb::Verify { rw, bytchk: 1 } => blocks(rw),
        Cdb::Verify { bytchk: 3, .. } => LBS,
        Cdb::WriteSame { ndob: false, .. } => LBS,
        Cdb::CompareAndWrite { rw } => 2 * blocks(rw),
        Cdb::Unmap { len } | Cdb::ModeSelect { len, .. } | Cdb::PrOut { len, .. } => *len as u64,
        _ => 0,
    }
}

/// Commands whose Data-Out length must match the CDB exactly (no residual handling).
pub fn strict_out(cdb: &Cdb) -> bool {
    matches!(cdb, Cdb::WriteSame { .. } | Cdb::CompareAndWrite { .. })
}

pub fn is_write(cdb: &Cdb) -> bool {
    matches!(
        cdb,
        Cdb::Write(_)
            | Cdb::WriteVerify { .. }
            | Cdb::WriteSame { .. }
            | Cdb::CompareAndWrite { .. }
            | Cdb::Unmap { .. }
    )
}

/// Short name of the operation for analytics.
pub fn op_name(cdb: &Cdb) -> &'static str {
    match cdb {
        Cdb::Read(_) => "read",
        Cdb::Write(_) => "write",
        Cdb::Verify { .. } => "verify",
        Cdb::WriteVerify { .. } => "write_verify",
        Cdb::WriteSame { unmap: true, .. } => "write_same_unmap",
        Cdb::WriteSame { .. } => "write_same",
        Cdb::Unmap { .. } => "unmap",
        Cdb::SyncCache { .. } => "sync_cache",
        Cdb::CompareAndWrite { .. } => "compare_and_write",
        Cdb::GetLbaStatus { .. } => "get_lba_status",
        Cdb::PrIn { .. } | Cdb::PrOut { .. } | Cdb::Reserve | Cdb::Release => "reservation",
        _ => "other",
    }
}

/// Byte offset and length a command addresses (for analytics), if any.
pub fn extent(cdb: &Cdb) -> Option<(u64, u64)> {
    match cdb {
        Cdb::Read(rw)
        | Cdb::Write(rw)
        | Cdb::Verify { rw, .. }
        | Cdb::WriteVerify { rw, .. }
        | Cdb::WriteSame { rw, .. }
        | Cdb::CompareAndWrite { rw } => Some((rw.lba.saturating_mul(LBS), rw.blocks as u64 * LBS)),
        _ => None,
    }
}

fn in_range(lun: &Lun, lba: u64, blocks: u64) -> Result<(), Sense> {
    let cap = lun.blocks();
    match lba.checked_add(blocks) {
        Some(end) if end <= cap && lba < cap.max(1) => Ok(()),
        _ => Err(Sense::LBA_OUT_OF_RANGE),
    }
}

fn dev_sense(e: DevError, write: bool) -> Sense {
    match e {
        DevError::OutOfRange { .. } => Sense::LBA_OUT_OF_RANGE,
        DevError::ReadOnly(_) => Sense::WRITE_PROTECTED,
        DevError::NoSpace(_) => Sense::SPACE_ALLOC_FAILED,
        DevError::Io(_) if write => Sense::WRITE_ERROR,
        DevError::Io(_) => Sense::READ_ERROR,
    }
}

/// Everything that can refuse a command before its data moves.
pub fn precheck(lun: &Lun, n: &Nexus, cdb: &Cdb) -> Result<(), Outcome> {
    if lun.pr.lock().conflicts(n, cdb) {
        return Err(Outcome::conflict());
    }
    let range = |lba: u64, blocks: u64| in_range(lun, lba, blocks).map_err(Outcome::check);
    match cdb {
        Cdb::Read(rw) | Cdb::Write(rw) | Cdb::Verify { rw, .. } | Cdb::WriteVerify { rw, .. } => {
            range(rw.lba, rw.blocks as u64)?;
            if rw.blocks > MAX_XFER_BLOCKS {
                return Err(Sense::INVALID_FIELD_CDB.into());
            }
        }
        Cdb::WriteSame { rw, .. } => {
            if rw.blocks == 0 || rw.blocks as u64 > MAX_WS_BLOCKS {
                return Err(Sense::INVALID_FIELD_CDB.into()); // WSNZ, max write same
            }
            range(rw.lba, rw.blocks as u64)?;
        }
        Cdb::CompareAndWrite { rw } => {
            if rw.blocks > MAX_CAW_BLOCKS as u32 {
                return Err(Sense::INVALID_FIELD_CDB.into());
            }
            range(rw.lba, rw.blocks as u64)?;
        }
        Cdb::SyncCache { lba, blocks } | Cdb::PreFetch { lba, blocks } => {
            range(*lba, *blocks as u64)?;
        }
        Cdb::GetLbaStatus { lba, .. } => range(*lba, 1)?,
        _ => {}
    }
    if is_write(cdb) && lun.dev.is_readonly() {
        return Err(Sense::WRITE_PROTECTED.into());
    }
    Ok(())
}

/// Run a command that passed [`precheck`], with its Data-Out bytes.
pub fn execute(lun: &Lun, n: &Nexus, cdb: &Cdb, out: &[u8]) -> Outcome {
    match run(lun, n, cdb, out) {
        Ok(o) => o,
        Err(s) => Outcome::check(s),
    }
}

fn run(lun: &Lun, n: &Nexus, cdb: &Cdb, out: &[u8]) -> Result<Outcome, Sense> {
    let dev = &lun.dev;
    Ok(match cdb {
        Cdb::TestUnitReady | Cdb::StartStop | Cdb::PreventAllow { .. } => Outcome::good(),
        Cdb::PreFetch { .. } => Outcome::good(),
        Cdb::RequestSense { alloc } => spc::request_sense(*alloc, false),
        Cdb::Inquiry { evpd, page, alloc } => spc::inquiry(lun, *evpd, *page, *alloc),
        Cdb::ModeSense {
            ten,
            dbd,
            pc,
            page,
            subpage,
            alloc,
        } => spc::mode_sense(lun, *ten, *dbd, *pc, *page, *subpage, *alloc),
        Cdb::ModeSelect { ten, pf, sp, .. } => spc::mode_select(lun, *ten, *pf, *sp, out),
        Cdb::ReadCapacity10 => spc::read_capacity10(lun),
        Cdb::ReadCapacity16 { alloc } => spc::read_capacity16(lun, *alloc),
        Cdb::ReportLuns { alloc } => spc::report_luns(*alloc),
        Cdb::ReportOpcodes {
            options,
            opcode,
            sa,
            rctd,
            alloc,
        } => spc::report_opcodes(*options, *opcode, *sa, *rctd, *alloc),
        Cdb::Read(rw) => {
            let d = dev
                .read(rw.lba * LBS, rw.blocks as usize * LBS as usize)
                .map_err(|e| dev_sense(e, false))?;
            Outcome::data(d)
        }
        Cdb::Write(rw) | Cdb::WriteVerify { rw, .. } => {
            let fua = rw.fua || matches!(cdb, Cdb::WriteVerify { .. });
            let _g = lun.atomic.read();
            // `out` is shorter than the CDB asks when the EDTL was (overflow residual).
            dev.write(rw.lba * LBS, out, fua)
                .map_err(|e| dev_sense(e, true))?;
            Outcome::good()
        }
        Cdb::Verify { rw, bytchk } => verify(lun, rw, *bytchk, out)?,
        Cdb::WriteSame { rw, unmap, ndob } => write_same(lun, rw, *unmap, *ndob, out)?,
        Cdb::Unmap { .. } => unmap(lun, out)?,
        Cdb::SyncCache { .. } => {
            dev.flush().map_err(|e| dev_sense(e, true))?;
            Outcome::good()
        }
        Cdb::CompareAndWrite { rw } => compare_and_write(lun, rw, out)?,
        Cdb::GetLbaStatus { lba, alloc } => get_lba_status(lun, *lba, *alloc)?,
        Cdb::Reserve => pr::reserve(lun, n),
        Cdb::Release => pr::release(lun, n),
        Cdb::PrIn { sa, alloc } => pr::pr_in(lun, *sa, *alloc),
        Cdb::PrOut {
            sa, scope, kind, ..
        } => pr::pr_out(lun, n, *sa, *scope, *kind, out),
    })
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

fn miscompare(at: usize) -> Sense {
    Sense {
        info: Some(at as u32),
        ..Sense::MISCOMPARE_VERIFY
    }
}

fn verify(lun: &Lun, rw: &Rw, bytchk: u8, out: &[u8]) -> Result<Outcome, Sense> {
    let len = rw.blocks as usize * LBS as usize;
    let data = lun
        .dev
        .read(rw.lba * LBS, len)
        .map_err(|e| dev_sense(e, false))?;
    let diff = match bytchk {
        1 => first_difference(&data, out),
        3 => data
            .chunks(LBS as usize)
            .enumerate()
            .find_map(|(i, blk)| first_difference(blk, out).map(|d| i * LBS as usize + d)),
        _ => None,
    };
    match diff {
        Some(at) => Err(miscompare(at)),
        None => Ok(Outcome::good()),
    }
}

fn write_same(lun: &Lun, rw: &Rw, unmap: bool, ndob: bool, out: &[u8]) -> Result<Outcome, Sense> {
    let off = rw.lba * LBS;
    let len = rw.blocks as u64 * LBS;
    if !ndob && out.len() != LBS as usize {
        return Err(Sense::INVALID_FIELD_CDB); // one block of pattern, exactly
    }
    let zero = ndob || out.iter().all(|&b| b == 0);
    let dev = &lun.dev;
    let _g = lun.atomic.read();
    let r = if zero && unmap {
        dev.discard(off, len, false)
    } else if zero {
        dev.write_zeroes(off, len, false)
    } else {
        // Write the pattern in chunks of up to 1 MiB.
        let per = (1 << 20) / LBS as usize;
        let chunk: Vec<u8> = out
            .iter()
            .copied()
            .cycle()
            .take(per * LBS as usize)
            .collect();
        let mut pos = 0u64;
        let mut r = Ok(());
        while pos < len && r.is_ok() {
            let n = (len - pos).min(chunk.len() as u64) as usize;
            r = dev.write(off + pos, &chunk[..n], false);
            pos += n as u64;
        }
        r
    };
    r.map_err(|e| dev_sense(e, true))?;
    Ok(Outcome::good())
}

fn unmap(lun: &Lun, p: &[u8]) -> Result<Outcome, Sense> {
    if p.is_empty() {
        return Ok(Outcome::good());
    }
    if p.len() < 8 {
        return Err(Sense::PARAM_LIST_LENGTH);
    }
    let bd_len = u16::from_be_bytes([p[2], p[3]]) as usize;
    let descs = &p[8..];
    let bd_len = bd_len.min(descs.len()) / 16 * 16;
    if bd_len / 16 > MAX_UNMAP_DESCRIPTORS {
        return Err(Sense::INVALID_FIELD_PARAM);
    }
    let mut ranges = Vec::new();
    for d in descs[..bd_len].chunks_exact(16) {
        let lba = u64::from_be_bytes(d[0..8].try_into().expect("8"));
        let n = u32::from_be_bytes(d[8..12].try_into().expect("4")) as u64;
        // 0 blocks is a no-op, allowed up to the end of the LU.
        if lba.checked_add(n).is_none_or(|e| e > lun.blocks()) {
            return Err(Sense::LBA_OUT_OF_RANGE);
        }
        if n > MAX_UNMAP_BLOCKS {
            return Err(Sense::INVALID_FIELD_PARAM);
        }
        if n > 0 {
            ranges.push((lba * LBS, n * LBS));
        }
    }
    let _g = lun.atomic.read();
    for (off, len) in ranges {
        lun.dev
            .discard(off, len, false)
            .map_err(|e| dev_sense(e, true))?;
    }
    Ok(Outcome::good())
}

fn compare_and_write(lun: &Lun, rw: &Rw, out: &[u8]) -> Result<Outcome, Sense> {
    if rw.blocks == 0 {
        return Ok(Outcome::good());
    }
    let len = rw.blocks as usize * LBS as usize;
    if out.len() != 2 * len {
        return Err(Sense::INVALID_FIELD_CDB); // the connection enforces this too
    }
    let (verify, write) = out.split_at(len);
    let _g = lun.atomic.write();
    let cur = lun
        .dev
        .read(rw.lba * LBS, len)
        .map_err(|e| dev_sense(e, false))?;
    if let Some(at) = first_difference(&cur, verify) {
        return Err(miscompare(at));
    }
    lun.dev
        .write(rw.lba * LBS, write, rw.fua)
        .map_err(|e| dev_sense(e, true))?;
    Ok(Outcome::good())
}

fn get_lba_status(lun: &Lun, lba: u64, alloc: u32) -> Result<Outcome, Sense> {
    // Describe up to 64 MiB or as many descriptors as fit the allocation length.
    let max_desc = (alloc.saturating_sub(8) / 16).clamp(1, 1024) as usize;
    let span = (lun.blocks() - lba).min((64 << 20) / LBS);
    let runs = lun
        .dev
        .extents(lba * LBS, span * LBS)
        .map_err(|e| dev_sense(e, false))?;
    let mut d = vec![0u8; 8];
    for r in runs.iter().take(max_desc) {
        let first = r.off / LBS;
        let end = (r.off + r.len).div_ceil(LBS);
        let mut e = vec![0u8; 16];
        e[0..8].copy_from_slice(&first.to_be_bytes());
        e[8..12].copy_from_slice(&((end - first).min(u32::MAX as u64) as u32).to_be_bytes());
        e[12] = if r.mapped { 0 } else { 1 };
        d.extend(e);
    }
    let n = (d.len() - 4) as u32;
    d[0..4].copy_from_slice(&n.to_be_bytes());
    Ok(Outcome::data(super::truncated(d, alloc as usize)))
}
