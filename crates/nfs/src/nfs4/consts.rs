//! NFSv4.1 protocol numbers (RFC 8881 section 15 and 16, and the XDR of RFC 8881
//! section 23): status codes, operation numbers, flags.

pub const NFS4_OK: u32 = 0;
pub const NFS4ERR_PERM: u32 = 1;
pub const NFS4ERR_NOENT: u32 = 2;
pub const NFS4ERR_IO: u32 = 5;
pub const NFS4ERR_NXIO: u32 = 6;
pub const NFS4ERR_ACCESS: u32 = 13;
pub const NFS4ERR_EXIST: u32 = 17;
pub const NFS4ERR_XDEV: u32 = 18;
pub const NFS4ERR_NOTDIR: u32 = 20;
pub const NFS4ERR_ISDIR: u32 = 21;
pub const NFS4ERR_INVAL: u32 = 22;
pub const NFS4ERR_FBIG: u32 = 27;
pub const NFS4ERR_NOSPC: u32 = 28;
pub const NFS4ERR_ROFS: u32 = 30;
pub const NFS4ERR_MLINK: u32 = 31;
pub const NFS4ERR_NAMETOOLONG: u32 = 63;
pub const NFS4ERR_NOTEMPTY: u32 = 66;
pub const NFS4ERR_DQUOT: u32 = 69;
pub const NFS4ERR_STALE: u32 = 70;
pub const NFS4ERR_BADHANDLE: u32 = 10001;
pub const NFS4ERR_BAD_COOKIE: u32 = 10003;
pub const NFS4ERR_NOTSUPP: u32 = 10004;
pub const NFS4ERR_TOOSMALL: u32 = 10005;
pub const NFS4ERR_SERVERFAULT: u32 = 10006;
pub const NFS4ERR_BADTYPE: u32 = 10007;
pub const NFS4ERR_DELAY: u32 = 10008;
pub const NFS4ERR_SAME: u32 = 10009;
pub const NFS4ERR_DENIED: u32 = 10010;
pub const NFS4ERR_EXPIRED: u32 = 10011;
pub const NFS4ERR_LOCKED: u32 = 10012;
pub const NFS4ERR_GRACE: u32 = 10013;
pub const NFS4ERR_SHARE_DENIED: u32 = 10015;
pub const NFS4ERR_WRONGSEC: u32 = 10016;
pub const NFS4ERR_CLID_INUSE: u32 = 10017;
pub const NFS4ERR_NOFILEHANDLE: u32 = 10020;
pub const NFS4ERR_MINOR_VERS_MISMATCH: u32 = 10021;
pub const NFS4ERR_STALE_CLIENTID: u32 = 10022;
pub const NFS4ERR_STALE_STATEID: u32 = 10023;
pub const NFS4ERR_OLD_STATEID: u32 = 10024;
pub const NFS4ERR_BAD_STATEID: u32 = 10025;
pub const NFS4ERR_BAD_SEQID: u32 = 10026;
pub const NFS4ERR_NOT_SAME: u32 = 10027;
pub const NFS4ERR_SYMLINK: u32 = 10029;
pub const NFS4ERR_RESTOREFH: u32 = 10030;
pub const NFS4ERR_ATTRNOTSUPP: u32 = 10032;
pub const NFS4ERR_NO_GRACE: u32 = 10033;
pub const NFS4ERR_BADXDR: u32 = 10036;
pub const NFS4ERR_LOCKS_HELD: u32 = 10037;
pub const NFS4ERR_OPENMODE: u32 = 10038;
pub const NFS4ERR_BADOWNER: u32 = 10039;
pub const NFS4ERR_BADCHAR: u32 = 10040;
pub const NFS4ERR_BADNAME: u32 = 10041;
pub const NFS4ERR_OP_ILLEGAL: u32 = 10044;
pub const NFS4ERR_BADSESSION: u32 = 10052;
pub const NFS4ERR_BADSLOT: u32 = 10053;
pub const NFS4ERR_COMPLETE_ALREADY: u32 = 10054;
pub const NFS4ERR_LAYOUTUNAVAILABLE: u32 = 10059;
pub const NFS4ERR_UNKNOWN_LAYOUTTYPE: u32 = 10062;
pub const NFS4ERR_SEQ_MISORDERED: u32 = 10063;
pub const NFS4ERR_SEQUENCE_POS: u32 = 10064;
pub const NFS4ERR_REQ_TOO_BIG: u32 = 10065;
pub const NFS4ERR_REP_TOO_BIG: u32 = 10066;
pub const NFS4ERR_REP_TOO_BIG_TO_CACHE: u32 = 10067;
pub const NFS4ERR_RETRY_UNCACHED_REP: u32 = 10068;
pub const NFS4ERR_TOO_MANY_OPS: u32 = 10070;
pub const NFS4ERR_OP_NOT_IN_SESSION: u32 = 10071;
pub const NFS4ERR_CLIENTID_BUSY: u32 = 10074;
pub const NFS4ERR_SEQ_FALSE_RETRY: u32 = 10076;
pub const NFS4ERR_ENCR_ALG_UNSUPP: u32 = 10079;
pub const NFS4ERR_NOT_ONLY_OP: u32 = 10081;
pub const NFS4ERR_WRONG_TYPE: u32 = 10083;
pub const NFS4ERR_DIRDELEG_UNAVAIL: u32 = 10084;

pub const OP_ACCESS: u32 = 3;
pub const OP_CLOSE: u32 = 4;
pub const OP_COMMIT: u32 = 5;
pub const OP_CREATE: u32 = 6;
pub const OP_DELEGPURGE: u32 = 7;
pub const OP_DELEGRETURN: u32 = 8;
pub const OP_GETATTR: u32 = 9;
pub const OP_GETFH: u32 = 10;
pub const OP_LINK: u32 = 11;
pub const OP_LOCK: u32 = 12;
pub const OP_LOCKT: u32 = 13;
pub const OP_LOCKU: u32 = 14;
pub const OP_LOOKUP: u32 = 15;
pub const OP_LOOKUPP: u32 = 16;
pub const OP_NVERIFY: u32 = 17;
pub const OP_OPEN: u32 = 18;
pub const OP_OPENATTR: u32 = 19;
pub const OP_OPEN_CONFIRM: u32 = 20;
pub const OP_OPEN_DOWNGRADE: u32 = 21;
pub const OP_PUTFH: u32 = 22;
pub const OP_PUTPUBFH: u32 = 23;
pub const OP_PUTROOTFH: u32 = 24;
pub const OP_READ: u32 = 25;
pub const OP_READDIR: u32 = 26;
pub const OP_READLINK: u32 = 27;
pub const OP_REMOVE: u32 = 28;
pub const OP_RENAME: u32 = 29;
pub const OP_RENEW: u32 = 30;
pub const OP_RESTOREFH: u32 = 31;
pub const OP_SAVEFH: u32 = 32;
pub const OP_SECINFO: u32 = 33;
pub const OP_SETATTR: u32 = 34;
pub const OP_SETCLIENTID: u32 = 35;
pub const OP_SETCLIENTID_CONFIRM: u32 = 36;
pub const OP_VERIFY: u32 = 37;
pub const OP_WRITE: u32 = 38;
pub const OP_RELEASE_LOCKOWNER: u32 = 39;
pub const OP_BACKCHANNEL_CTL: u32 = 40;
pub const OP_BIND_CONN_TO_SESSION: u32 = 41;
pub const OP_EXCHANGE_ID: u32 = 42;
pub const OP_CREATE_SESSION: u32 = 43;
pub const OP_DESTROY_SESSION: u32 = 44;
pub const OP_FREE_STATEID: u32 = 45;
pub const OP_GET_DIR_DELEGATION: u32 = 46;
pub const OP_GETDEVICEINFO: u32 = 47;
pub const OP_GETDEVICELIST: u32 = 48;
pub const OP_LAYOUTCOMMIT: u32 = 49;
pub const OP_LAYOUTGET: u32 = 50;
pub const OP_LAYOUTRETURN: u32 = 51;
pub const OP_SECINFO_NO_NAME: u32 = 52;
pub const OP_SEQUENCE: u32 = 53;
pub const OP_SET_SSV: u32 = 54;
pub const OP_TEST_STATEID: u32 = 55;
pub const OP_WANT_DELEGATION: u32 = 56;
pub const OP_DESTROY_CLIENTID: u32 = 57;
pub const OP_RECLAIM_COMPLETE: u32 = 58;
pub const OP_ILLEGAL: u32 = 10044;

/// The analytics name of an operation, `v4.NAME`: a static string, from
/// which a COMPOUND's `nfs.ops` name is made (`nfs4::OpsName`).
pub fn stat_name(op: u32) -> &'static str {
    const NAMES: [&str; 59] = [
        "",
        "",
        "",
        "v4.access",
        "v4.close",
        "v4.commit",
        "v4.create",
        "v4.delegpurge",
        "v4.delegreturn",
        "v4.getattr",
        "v4.getfh",
        "v4.link",
        "v4.lock",
        "v4.lockt",
        "v4.locku",
        "v4.lookup",
        "v4.lookupp",
        "v4.nverify",
        "v4.open",
        "v4.openattr",
        "v4.open_confirm",
        "v4.open_downgrade",
        "v4.putfh",
        "v4.putpubfh",
        "v4.putrootfh",
        "v4.read",
        "v4.readdir",
        "v4.readlink",
        "v4.remove",
        "v4.rename",
        "v4.renew",
        "v4.restorefh",
        "v4.savefh",
        "v4.secinfo",
        "v4.setattr",
        "v4.setclientid",
        "v4.setclientid_confirm",
        "v4.verify",
        "v4.write",
        "v4.release_lockowner",
        "v4.backchannel_ctl",
        "v4.bind_conn_to_session",
        "v4.exchange_id",
        "v4.create_session",
        "v4.destroy_session",
        "v4.free_stateid",
        "v4.get_dir_delegation",
        "v4.getdeviceinfo",
        "v4.getdevicelist",
        "v4.layoutcommit",
        "v4.layoutget",
        "v4.layoutreturn",
        "v4.secinfo_no_name",
        "v4.sequence",
        "v4.set_ssv",
        "v4.test_stateid",
        "v4.want_delegation",
        "v4.destroy_clientid",
        "v4.reclaim_complete",
    ];
    NAMES
        .get(op as usize)
        .copied()
        .filter(|n| !n.is_empty())
        .unwrap_or("v4.illegal")
}

// EXCHANGE_ID flags (RFC 8881 section 18.35).
pub const EXCHGID4_FLAG_SUPP_MOVED_REFER: u32 = 0x0000_0001;
pub const EXCHGID4_FLAG_SUPP_MOVED_MIGR: u32 = 0x0000_0002;
pub const EXCHGID4_FLAG_BIND_PRINC_STATEID: u32 = 0x0000_0100;
pub const EXCHGID4_FLAG_USE_NON_PNFS: u32 = 0x0001_0000;
pub const EXCHGID4_FLAG_USE_PNFS_MDS: u32 = 0x0002_0000;
pub const EXCHGID4_FLAG_USE_PNFS_DS: u32 = 0x0004_0000;
pub const EXCHGID4_FLAG_UPD_CONFIRMED_REC_A: u32 = 0x4000_0000;
pub const EXCHGID4_FLAG_CONFIRMED_R: u32 = 0x8000_0000;
/// Every flag a client may send.
pub const EXCHGID4_ARG_FLAGS: u32 = EXCHGID4_FLAG_SUPP_MOVED_REFER
    | EXCHGID4_FLAG_SUPP_MOVED_MIGR
    | EXCHGID4_FLAG_BIND_PRINC_STATEID
    | EXCHGID4_FLAG_USE_NON_PNFS
    | EXCHGID4_FLAG_USE_PNFS_MDS
    | EXCHGID4_FLAG_USE_PNFS_DS
    | EXCHGID4_FLAG_UPD_CONFIRMED_REC_A;

pub const SP4_NONE: u32 = 0;
pub const SP4_MACH_CRED: u32 = 1;
pub const SP4_SSV: u32 = 2;

// BIND_CONN_TO_SESSION directions.
pub const CDFC4_FORE: u32 = 1;
pub const CDFC4_BACK: u32 = 2;
pub const CDFC4_FORE_OR_BOTH: u32 = 3;
pub const CDFC4_BACK_OR_BOTH: u32 = 7;
pub const CDFS4_FORE: u32 = 1;
