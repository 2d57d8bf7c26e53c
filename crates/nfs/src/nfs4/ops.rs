//! Decoding of COMPOUND arguments (RFC 8881 section 16.2 and the argument types
//! of section 18): one [`Op`] at a time, so a COMPOUND costs memory for the
//! operation being run, not for all of them.
//!
//! Invariants:
//! - Every variable-length item is bounded before it is read (handles by
//!   `NFS4_FHSIZE`, names and owners by `NFS4_OPAQUE_LIMIT`, bitmaps by
//!   `MAX_BITMAP` words, data by the record size, arrays by `MAX_ARRAY`), and
//!   by the bytes left in the message; a violation is `Decoded::BadXdr`, never a
//!   panic or an allocation.
//! - An operation number outside 3..=58 is `Decoded::Illegal` (answered with
//!   OP_ILLEGAL and NFS4ERR_OP_ILLEGAL); arguments of every defined operation are
//!   decoded, including those the server then refuses (NOTSUPP), so the decoder
//!   is whole and the fuzz target covers it.

use super::consts::*;
use crate::xdr::{Reader, XResult, XdrError};

/// Largest file handle (NFS4_FHSIZE).
pub const NFS4_FHSIZE: usize = 128;
/// Largest opaque owner, client id, tag (NFS4_OPAQUE_LIMIT).
pub const NFS4_OPAQUE_LIMIT: usize = 1024;
/// Largest component name or link text accepted on the wire; names longer
/// than NAME_MAX are refused later with NAMETOOLONG.
pub const MAX_NAME_WIRE: usize = 4096;
/// Words of an attribute bitmap.
pub const MAX_BITMAP: usize = 8;
/// Bytes of an attribute list (fattr4.attr_vals).
pub const MAX_ATTRLIST: usize = 64 << 10;
/// Elements of the few arrays in arguments (TEST_STATEID, security parameters).
pub const MAX_ARRAY: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Stateid {
    pub seqid: u32,
    pub other: [u8; 12],
}

/// fattr4: which attributes and their packed values.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Fattr4<'a> {
    pub mask: Vec<u32>,
    pub vals: &'a [u8],
}

/// What CREATE makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateType<'a> {
    Link(&'a [u8]),
    Block(u32, u32),
    Char(u32, u32),
    Socket,
    Fifo,
    Dir,
    /// A regular file or anything else (BADTYPE).
    Other(u32),
}

/// How OPEN creates (createhow4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateHow<'a> {
    Unchecked(Fattr4<'a>),
    Guarded(Fattr4<'a>),
    Exclusive([u8; 8]),
    Exclusive41([u8; 8], Fattr4<'a>),
}

/// open_claim4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim<'a> {
    Null(&'a [u8]),
    Previous(u32),
    DelegateCur(Stateid, &'a [u8]),
    DelegatePrev(&'a [u8]),
    Fh,
    DelegCurFh(Stateid),
    DelegPrevFh,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenArgs<'a> {
    pub seqid: u32,
    pub share_access: u32,
    pub share_deny: u32,
    pub clientid: u64,
    pub owner: &'a [u8],
    /// `None`: OPEN4_NOCREATE.
    pub create: Option<CreateHow<'a>>,
    pub claim: Claim<'a>,
}

/// locker4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Locker<'a> {
    New {
        open_seqid: u32,
        open_stateid: Stateid,
        lock_seqid: u32,
        clientid: u64,
        owner: &'a [u8],
    },
    Existing {
        lock_stateid: Stateid,
        lock_seqid: u32,
    },
}

/// channel_attrs4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ChannelAttrs {
    pub headerpadsize: u32,
    pub maxrequestsize: u32,
    pub maxresponsesize: u32,
    pub maxresponsesize_cached: u32,
    pub maxoperations: u32,
    pub maxrequests: u32,
    pub rdma_ird: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeIdArgs<'a> {
    pub verifier: [u8; 8],
    pub owner: &'a [u8],
    pub flags: u32,
    pub state_protect: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateSessionArgs {
    pub clientid: u64,
    pub sequence: u32,
    pub flags: u32,
    pub fore: ChannelAttrs,
    pub back: ChannelAttrs,
    pub cb_program: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceArgs {
    pub sessionid: [u8; 16],
    pub sequenceid: u32,
    pub slotid: u32,
    pub highest_slotid: u32,
    pub cachethis: bool,
}

/// One decoded operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    Access(u32),
    Close {
        seqid: u32,
        stateid: Stateid,
    },
    Commit {
        offset: u64,
        count: u32,
    },
    Create {
        kind: CreateType<'a>,
        name: &'a [u8],
        attrs: Fattr4<'a>,
    },
    Getattr(Vec<u32>),
    Getfh,
    Link(&'a [u8]),
    Lock {
        locktype: u32,
        reclaim: bool,
        offset: u64,
        length: u64,
        locker: Locker<'a>,
    },
    Lockt {
        locktype: u32,
        offset: u64,
        length: u64,
        clientid: u64,
        owner: &'a [u8],
    },
    Locku {
        locktype: u32,
        seqid: u32,
        stateid: Stateid,
        offset: u64,
        length: u64,
    },
    Lookup(&'a [u8]),
    Lookupp,
    Nverify(Fattr4<'a>),
    Open(OpenArgs<'a>),
    OpenDowngrade {
        stateid: Stateid,
        seqid: u32,
        share_access: u32,
        share_deny: u32,
    },
    Putfh(&'a [u8]),
    Putpubfh,
    Putrootfh,
    Read {
        stateid: Stateid,
        offset: u64,
        count: u32,
    },
    Readdir {
        cookie: u64,
        verf: [u8; 8],
        dircount: u32,
        maxcount: u32,
        mask: Vec<u32>,
    },
    Readlink,
    Remove(&'a [u8]),
    Rename {
        old: &'a [u8],
        new: &'a [u8],
    },
    Restorefh,
    Savefh,
    Secinfo(&'a [u8]),
    Setattr {
        stateid: Stateid,
        attrs: Fattr4<'a>,
    },
    Verify(Fattr4<'a>),
    Write {
        stateid: Stateid,
        offset: u64,
        stable: u32,
        data: &'a [u8],
    },
    BindConnToSession {
        sessionid: [u8; 16],
        dir: u32,
        rdma: bool,
    },
    ExchangeId(ExchangeIdArgs<'a>),
    CreateSession(CreateSessionArgs),
    DestroySession([u8; 16]),
    FreeStateid(Stateid),
    SecinfoNoName(u32),
    Sequence(SequenceArgs),
    TestStateid(Vec<Stateid>),
    DestroyClientid(u64),
    ReclaimComplete(bool),
    /// A defined operation the server does not implement (its arguments were
    /// decoded and dropped): v4.0-only operations, delegations, pNFS, SSV.
    Unsupported(u32),
}

/// The outcome of decoding one operation.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    Op(u32, Op<'a>),
    /// An operation number that does not exist.
    Illegal,
    /// The arguments of operation `.0` do not decode.
    BadXdr(u32),
}

pub(crate) fn stateid(r: &mut Reader<'_>) -> XResult<Stateid> {
    let seqid = r.u32()?;
    let mut other = [0u8; 12];
    other.copy_from_slice(r.fixed(12)?);
    Ok(Stateid { seqid, other })
}

fn verifier(r: &mut Reader<'_>) -> XResult<[u8; 8]> {
    let mut v = [0u8; 8];
    v.copy_from_slice(r.fixed(8)?);
    Ok(v)
}

fn sessionid(r: &mut Reader<'_>) -> XResult<[u8; 16]> {
    let mut v = [0u8; 16];
    v.copy_from_slice(r.fixed(16)?);
    Ok(v)
}

pub fn bitmap(r: &mut Reader<'_>) -> XResult<Vec<u32>> {
    r.u32_array(MAX_BITMAP)
}

fn fattr<'a>(r: &mut Reader<'a>) -> XResult<Fattr4<'a>> {
    Ok(Fattr4 {
        mask: bitmap(r)?,
        vals: r.opaque(MAX_ATTRLIST)?,
    })
}

fn name<'a>(r: &mut Reader<'a>) -> XResult<&'a [u8]> {
    r.string(MAX_NAME_WIRE)
}

fn nfstime(r: &mut Reader<'_>) -> XResult<(u64, u32)> {
    Ok((r.u64()?, r.u32()?))
}

/// callback_sec_parms4<>: only its shape is checked.
fn sec_parms(r: &mut Reader<'_>) -> XResult<()> {
    let n = r.u32()? as usize;
    if n > 16 {
        return Err(XdrError);
    }
    for _ in 0..n {
        match r.u32()? {
            0 => {}
            1 => {
                r.u32()?;
                r.string(255)?;
                r.u32()?;
                r.u32()?;
                r.u32_array(crate::rpc::MAX_GIDS)?;
            }
            6 => {
                r.u32()?;
                r.opaque(NFS4_OPAQUE_LIMIT)?;
                r.opaque(NFS4_OPAQUE_LIMIT)?;
            }
            _ => return Err(XdrError),
        }
    }
    Ok(())
}

fn channel_attrs(r: &mut Reader<'_>) -> XResult<ChannelAttrs> {
    let mut c = ChannelAttrs {
        headerpadsize: r.u32()?,
        maxrequestsize: r.u32()?,
        maxresponsesize: r.u32()?,
        maxresponsesize_cached: r.u32()?,
        maxoperations: r.u32()?,
        maxrequests: r.u32()?,
        rdma_ird: None,
    };
    match r.u32()? {
        0 => {}
        1 => c.rdma_ird = Some(r.u32()?),
        _ => return Err(XdrError),
    }
    Ok(c)
}

fn exchange_id<'a>(r: &mut Reader<'a>) -> XResult<ExchangeIdArgs<'a>> {
    let verifier = verifier(r)?;
    let owner = r.opaque(NFS4_OPAQUE_LIMIT)?;
    let flags = r.u32()?;
    let state_protect = r.u32()?;
    match state_protect {
        SP4_NONE => {}
        SP4_MACH_CRED => {
            bitmap(r)?;
            bitmap(r)?;
        }
        SP4_SSV => {
            bitmap(r)?;
            bitmap(r)?;
            for _ in 0..2 {
                let n = r.u32()? as usize;
                if n > 16 {
                    return Err(XdrError);
                }
                for _ in 0..n {
                    r.opaque(NFS4_OPAQUE_LIMIT)?;
                }
            }
            r.u32()?;
            r.u32()?;
        }
        _ => return Err(XdrError),
    }
    // eia_client_impl_id<1>
    match r.u32()? {
        0 => {}
        1 => {
            r.string(NFS4_OPAQUE_LIMIT)?;
            r.string(NFS4_OPAQUE_LIMIT)?;
            nfstime(r)?;
        }
        _ => return Err(XdrError),
    }
    Ok(ExchangeIdArgs {
        verifier,
        owner,
        flags,
        state_protect,
    })
}

fn open<'a>(r: &mut Reader<'a>) -> XResult<OpenArgs<'a>> {
    let seqid = r.u32()?;
    let share_access = r.u32()?;
    let share_deny = r.u32()?;
    let clientid = r.u64()?;
    let owner = r.opaque(NFS4_OPAQUE_LIMIT)?;
    let create = match r.u32()? {
        0 => None,
        1 => Some(match r.u32()? {
            0 => CreateHow::Unchecked(fattr(r)?),
            1 => CreateHow::Guarded(fattr(r)?),
            2 => CreateHow::Exclusive(verifier(r)?),
            3 => CreateHow::Exclusive41(verifier(r)?, fattr(r)?),
            _ => return Err(XdrError),
        }),
        _ => return Err(XdrError),
    };
    let claim = match r.u32()? {
        0 => Claim::Null(name(r)?),
        1 => Claim::Previous(r.u32()?),
        2 => Claim::DelegateCur(stateid(r)?, name(r)?),
        3 => Claim::DelegatePrev(name(r)?),
        4 => Claim::Fh,
        5 => Claim::DelegCurFh(stateid(r)?),
        6 => Claim::DelegPrevFh,
        _ => return Err(XdrError),
    };
    Ok(OpenArgs {
        seqid,
        share_access,
        share_deny,
        clientid,
        owner,
        create,
        claim,
    })
}

fn lock<'a>(r: &mut Reader<'a>) -> XResult<Op<'a>> {
    let locktype = r.u32()?;
    let reclaim = r.bool()?;
    let offset = r.u64()?;
    let length = r.u64()?;
    let locker = if r.bool()? {
        Locker::New {
            open_seqid: r.u32()?,
            open_stateid: stateid(r)?,
            lock_seqid: r.u32()?,
            clientid: r.u64()?,
            owner: r.opaque(NFS4_OPAQUE_LIMIT)?,
        }
    } else {
        Locker::Existing {
            lock_stateid: stateid(r)?,
            lock_seqid: r.u32()?,
        }
    };
    Ok(Op::Lock {
        locktype,
        reclaim,
        offset,
        length,
        locker,
    })
}

fn create<'a>(r: &mut Reader<'a>) -> XResult<Op<'a>> {
    let kind = match r.u32()? {
        5 => CreateType::Link(name(r)?),
        3 => CreateType::Block(r.u32()?, r.u32()?),
        4 => CreateType::Char(r.u32()?, r.u32()?),
        6 => CreateType::Socket,
        7 => CreateType::Fifo,
        2 => CreateType::Dir,
        t => CreateType::Other(t),
    };
    Ok(Op::Create {
        kind,
        name: name(r)?,
        attrs: fattr(r)?,
    })
}

/// The arguments of the operations we refuse: decoded for their shape only.
fn skip_unsupported(op: u32, r: &mut Reader<'_>) -> XResult<()> {
    match op {
        OP_DELEGPURGE | OP_RENEW => {
            r.u64()?;
        }
        OP_DELEGRETURN => {
            stateid(r)?;
        }
        OP_OPENATTR => {
            r.bool()?;
        }
        OP_OPEN_CONFIRM => {
            stateid(r)?;
            r.u32()?;
        }
        OP_SETCLIENTID => {
            verifier(r)?;
            r.opaque(NFS4_OPAQUE_LIMIT)?;
            r.u32()?;
            r.string(NFS4_OPAQUE_LIMIT)?;
            r.string(NFS4_OPAQUE_LIMIT)?;
            r.u32()?;
        }
        OP_SETCLIENTID_CONFIRM => {
            r.u64()?;
            verifier(r)?;
        }
        OP_RELEASE_LOCKOWNER => {
            r.u64()?;
            r.opaque(NFS4_OPAQUE_LIMIT)?;
        }
        OP_BACKCHANNEL_CTL => {
            r.u32()?;
            sec_parms(r)?;
        }
        OP_GET_DIR_DELEGATION => {
            r.bool()?;
            bitmap(r)?;
            nfstime(r)?;
            nfstime(r)?;
            bitmap(r)?;
            bitmap(r)?;
        }
        OP_GETDEVICEINFO => {
            r.fixed(16)?;
            r.u32()?;
            r.u32()?;
            bitmap(r)?;
        }
        OP_GETDEVICELIST => {
            r.u32()?;
            r.u32()?;
            r.u64()?;
            verifier(r)?;
        }
        OP_LAYOUTCOMMIT => {
            r.u64()?;
            r.u64()?;
            r.bool()?;
            stateid(r)?;
            if r.bool()? {
                r.u64()?;
            }
            if r.bool()? {
                nfstime(r)?;
            }
            r.u32()?;
            r.opaque(MAX_ATTRLIST)?;
        }
        OP_LAYOUTGET => {
            r.bool()?;
            r.u32()?;
            r.u32()?;
            r.u64()?;
            r.u64()?;
            r.u64()?;
            stateid(r)?;
            r.u32()?;
        }
        OP_LAYOUTRETURN => {
            r.bool()?;
            r.u32()?;
            r.u32()?;
            if r.u32()? == 1 {
                r.u64()?;
                r.u64()?;
                stateid(r)?;
                r.opaque(MAX_ATTRLIST)?;
            }
        }
        OP_SET_SSV => {
            r.opaque(NFS4_OPAQUE_LIMIT)?;
            r.opaque(NFS4_OPAQUE_LIMIT)?;
        }
        OP_WANT_DELEGATION => {
            r.u32()?;
            match r.u32()? {
                4 | 6 => {}
                1 => {
                    r.u32()?;
                }
                _ => return Err(XdrError),
            }
        }
        _ => {}
    }
    Ok(())
}

fn args<'a>(op: u32, r: &mut Reader<'a>) -> XResult<Op<'a>> {
    Ok(match op {
        OP_ACCESS => Op::Access(r.u32()?),
        OP_CLOSE => Op::Close {
            seqid: r.u32()?,
            stateid: stateid(r)?,
        },
        OP_COMMIT => Op::Commit {
            offset: r.u64()?,
            count: r.u32()?,
        },
        OP_CREATE => create(r)?,
        OP_GETATTR => Op::Getattr(bitmap(r)?),
        OP_GETFH => Op::Getfh,
        OP_LINK => Op::Link(name(r)?),
        OP_LOCK => lock(r)?,
        OP_LOCKT => Op::Lockt {
            locktype: r.u32()?,
            offset: r.u64()?,
            length: r.u64()?,
            clientid: r.u64()?,
            owner: r.opaque(NFS4_OPAQUE_LIMIT)?,
        },
        OP_LOCKU => Op::Locku {
            locktype: r.u32()?,
            seqid: r.u32()?,
            stateid: stateid(r)?,
            offset: r.u64()?,
            length: r.u64()?,
        },
        OP_LOOKUP => Op::Lookup(name(r)?),
        OP_LOOKUPP => Op::Lookupp,
        OP_NVERIFY => Op::Nverify(fattr(r)?),
        OP_OPEN => Op::Open(open(r)?),
        OP_OPEN_DOWNGRADE => Op::OpenDowngrade {
            stateid: stateid(r)?,
            seqid: r.u32()?,
            share_access: r.u32()?,
            share_deny: r.u32()?,
        },
        OP_PUTFH => Op::Putfh(r.opaque(NFS4_FHSIZE)?),
        OP_PUTPUBFH => Op::Putpubfh,
        OP_PUTROOTFH => Op::Putrootfh,
        OP_READ => Op::Read {
            stateid: stateid(r)?,
            offset: r.u64()?,
            count: r.u32()?,
        },
        OP_READDIR => Op::Readdir {
            cookie: r.u64()?,
            verf: verifier(r)?,
            dircount: r.u32()?,
            maxcount: r.u32()?,
            mask: bitmap(r)?,
        },
        OP_READLINK => Op::Readlink,
        OP_REMOVE => Op::Remove(name(r)?),
        OP_RENAME => Op::Rename {
            old: name(r)?,
            new: name(r)?,
        },
        OP_RESTOREFH => Op::Restorefh,
        OP_SAVEFH => Op::Savefh,
        OP_SECINFO => Op::Secinfo(name(r)?),
        OP_SETATTR => Op::Setattr {
            stateid: stateid(r)?,
            attrs: fattr(r)?,
        },
        OP_VERIFY => Op::Verify(fattr(r)?),
        OP_WRITE => Op::Write {
            stateid: stateid(r)?,
            offset: r.u64()?,
            stable: r.u32()?,
            data: r.opaque(crate::rpc::MAX_RECORD)?,
        },
        OP_BIND_CONN_TO_SESSION => Op::BindConnToSession {
            sessionid: sessionid(r)?,
            dir: r.u32()?,
            rdma: r.bool()?,
        },
        OP_EXCHANGE_ID => Op::ExchangeId(exchange_id(r)?),
        OP_CREATE_SESSION => {
            let (clientid, sequence, flags) = (r.u64()?, r.u32()?, r.u32()?);
            let fore = channel_attrs(r)?;
            let back = channel_attrs(r)?;
            let cb_program = r.u32()?;
            sec_parms(r)?;
            Op::CreateSession(CreateSessionArgs {
                clientid,
                sequence,
                flags,
                fore,
                back,
                cb_program,
            })
        }
        OP_DESTROY_SESSION => Op::DestroySession(sessionid(r)?),
        OP_FREE_STATEID => Op::FreeStateid(stateid(r)?),
        OP_SECINFO_NO_NAME => Op::SecinfoNoName(r.u32()?),
        OP_SEQUENCE => Op::Sequence(SequenceArgs {
            sessionid: sessionid(r)?,
            sequenceid: r.u32()?,
            slotid: r.u32()?,
            highest_slotid: r.u32()?,
            cachethis: r.bool()?,
        }),
        OP_TEST_STATEID => {
            let n = r.u32()? as usize;
            if n > MAX_ARRAY || n * 16 > r.remaining() {
                return Err(XdrError);
            }
            Op::TestStateid((0..n).map(|_| stateid(r)).collect::<XResult<_>>()?)
        }
        OP_DESTROY_CLIENTID => Op::DestroyClientid(r.u64()?),
        OP_RECLAIM_COMPLETE => Op::ReclaimComplete(r.bool()?),
        _ => {
            skip_unsupported(op, r)?;
            Op::Unsupported(op)
        }
    })
}

/// Decode the next operation of a COMPOUND.
pub fn decode<'a>(r: &mut Reader<'a>) -> Decoded<'a> {
    let Ok(op) = r.u32() else {
        return Decoded::BadXdr(OP_ILLEGAL);
    };
    if !(OP_ACCESS..=OP_RECLAIM_COMPLETE).contains(&op) {
        return Decoded::Illegal;
    }
    match args(op, r) {
        Ok(o) => Decoded::Op(op, o),
        Err(XdrError) => Decoded::BadXdr(op),
    }
}

/// The header of COMPOUND4args: tag, minor version, number of operations; the
/// reader is left at the first operation.
pub fn header<'a>(r: &mut Reader<'a>) -> XResult<(&'a [u8], u32, u32)> {
    Ok((r.string(NFS4_OPAQUE_LIMIT)?, r.u32()?, r.u32()?))
}

/// Where a COMPOUND's first WRITE has its data, found in the first bytes of
/// COMPOUND4args (see [`first_write`]).
#[derive(Debug, PartialEq, Eq)]
pub struct WriteAt<'a> {
    /// Offset of the data in the bytes given (just after its length word).
    pub data_at: usize,
    /// The data's length (at most `max`).
    pub len: usize,
    /// The WRITE's file offset.
    pub offset: u64,
    /// The handle of the last PUTFH before the WRITE.
    pub fh: &'a [u8],
}

/// If `head`, the first bytes of a COMPOUND4args (minor version 1), holds
/// every operation before the first WRITE, a PUTFH among them, and the
/// WRITE's arguments up to its data's length word, and that length is at most
/// `max`: where its data starts. The connection's reader uses it to read the
/// data apart from the record (`server::read_request`); the operations before
/// are decoded by [`decode`] as the COMPOUND will decode them. The handle only
/// picks the size of the pieces the data is read in (SAVEFH/RESTOREFH between
/// may make the WRITE's file another), so it need not be the WRITE's.
pub fn first_write(head: &[u8], max: usize) -> Option<WriteAt<'_>> {
    let mut r = Reader::new(head);
    let (_, minor, nops) = header(&mut r).ok()?;
    if minor != 1 {
        return None;
    }
    let mut fh = None;
    // Each operation takes at least its number's 4 bytes: at most
    // head.len() / 4 rounds whatever `nops` says.
    for _ in 0..nops {
        let mut probe = r.clone();
        if probe.u32().ok()? == OP_WRITE {
            let (_, offset, _) = (
                stateid(&mut probe).ok()?,
                probe.u64().ok()?,
                probe.u32().ok()?,
            );
            let len = probe.u32().ok()? as usize;
            return (len <= max).then_some(WriteAt {
                data_at: head.len() - probe.remaining(),
                len,
                offset,
                fh: fh?,
            });
        }
        match decode(&mut r) {
            Decoded::Op(_, Op::Putfh(h)) => fh = Some(h),
            Decoded::Op(..) => {}
            Decoded::Illegal | Decoded::BadXdr(_) => return None,
        }
    }
    None
}

/// Decode a whole COMPOUND (the fuzz target; the server decodes lazily).
pub fn decode_compound(b: &[u8]) -> XResult<Vec<Decoded<'_>>> {
    let mut r = Reader::new(b);
    let (_, _, n) = header(&mut r)?;
    let mut out = vec![];
    for _ in 0..n.min(1024) {
        let d = decode(&mut r);
        let stop = !matches!(d, Decoded::Op(..));
        out.push(d);
        if stop {
            break;
        }
    }
    Ok(out)
}
