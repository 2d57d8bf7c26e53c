//! NFSv4.1 WRITEs whose data the connection's reader reads apart from the
//! COMPOUND (`server::read_request`, `nfs4::ops::first_write`): the data lands
//! at its offsets whatever its length and alignment, the operations after the
//! WRITE (a second WRITE among them) run on their own arguments, a retry
//! replays the cached reply, and hostile lengths get the decoder's BADXDR or
//! a closed connection, never a hang or a write.

mod common;

use cachalot_nfs::nfs4::client::{op_status, Ops, Reply, Session4, Stateid};
use cachalot_nfs::nfs4::consts::*;
use cachalot_nfs::rpc::{self, Cred, PROG_NFS};
use cachalot_nfs::xdr::Writer;
use common::*;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

const SHARE: &str = "rw=127.0.0.1,no_root_squash";
const REC: u64 = 128 << 10;

/// A session with `name` opened (created) in tank/fs: (session, stateid, handle).
fn opened(env: &Env, name: &str) -> (Session4, Stateid, Vec<u8>) {
    let mut s = Session4::establish(env.client(), name.as_bytes(), 8).unwrap();
    s.reclaim_complete().unwrap();
    let root = s.lookup_path("/tank/fs").unwrap();
    let (sid, fh) = s.open_create(&root, b"o", name, 0o644).unwrap();
    (s, sid, fh)
}

fn pattern(len: usize, k: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + k * 7 + 1) as u8).collect()
}

/// WRITE arguments (UNSTABLE4) appended to `ops`.
fn write_op(ops: &mut Ops, sid: &Stateid, off: u64, data: &[u8]) {
    ops.op(OP_WRITE)
        .u32(sid.seqid)
        .fixed(&sid.other)
        .u64(off)
        .u32(0)
        .opaque(data);
}

/// The file's first `len` bytes, read back in 1 MiB READs.
fn read_back(s: &mut Session4, sid: Stateid, fh: &[u8], len: usize) -> Vec<u8> {
    let mut got = vec![];
    while got.len() < len {
        let (d, _) = s.read(fh, sid, got.len() as u64, 1 << 20).unwrap();
        assert!(!d.is_empty(), "short file at {}", got.len());
        got.extend_from_slice(&d);
    }
    got
}

fn apply(model: &mut Vec<u8>, off: u64, data: &[u8]) {
    let end = off as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[off as usize..end].copy_from_slice(data);
}

#[test]
fn writes_read_apart_land_at_their_offsets() {
    let env = env(SHARE);
    let (mut s, sid, fh) = opened(&env, "pieces");
    let mut model = vec![];
    // Unaligned, aligned, one-record, record-spanning, overlapping, small,
    // and lengths that are not a whole number of XDR words (padding).
    let writes: [(u64, usize); 8] = [
        (100_000, 300_001),
        (3 * REC, 1 << 20),
        (REC, REC as usize),
        (REC - 5, 4096 + 10),
        (7, 5001),
        (2 * REC + 1, 3),
        (9 * REC - 1000, 70_003),
        (11 * REC, 8192 + 2),
    ];
    for (k, (off, len)) in writes.iter().enumerate() {
        let data = pattern(*len, k);
        assert_eq!(s.write(&fh, sid, *off, &data, 0).unwrap() as usize, *len);
        apply(&mut model, *off, &data);
    }
    // Two WRITEs and a GETFH in one COMPOUND: the first's data is read apart,
    // the second and GETFH are decoded after it from the record.
    let (a, b) = (pattern(200_003, 11), pattern(5, 12));
    let mut ops = Ops::new();
    ops.op(OP_PUTFH).opaque(&fh);
    write_op(&mut ops, &sid, 12 * REC + 3, &a);
    write_op(&mut ops, &sid, 50, &b);
    ops.op(OP_GETFH);
    let rep = s.call(&ops).unwrap();
    assert_eq!(rep.status, NFS4_OK);
    let mut r = rep.reader();
    assert_eq!(op_status(&mut r, OP_PUTFH).unwrap(), NFS4_OK);
    for want in [a.len(), b.len()] {
        assert_eq!(op_status(&mut r, OP_WRITE).unwrap(), NFS4_OK);
        assert_eq!(r.u32().unwrap() as usize, want);
        r.fixed(12).unwrap(); // committed, verifier
    }
    assert_eq!(op_status(&mut r, OP_GETFH).unwrap(), NFS4_OK);
    assert_eq!(r.opaque(128).unwrap(), &fh[..]);
    apply(&mut model, 12 * REC + 3, &a);
    apply(&mut model, 50, &b);
    s.commit(&fh).unwrap();
    let got = read_back(&mut s, sid, &fh, model.len());
    assert!(got == model, "the file differs from what was written");
}

/// SEQUENCE on `slot` with its next sequence id, caching the reply.
fn on_slot(s: &Session4, slot: u32) -> Ops {
    let mut ops = Ops::new();
    s.sequence_op(&mut ops, slot, s.seq[slot as usize], true);
    ops
}

#[test]
fn a_retried_write_read_apart_replays_its_reply() {
    let env = env(SHARE);
    let (mut s, sid, fh) = opened(&env, "retry");
    let data = pattern(64 << 10, 1);
    let mut ops = on_slot(&s, 1);
    ops.op(OP_PUTFH).opaque(&fh);
    write_op(&mut ops, &sid, 0, &data);
    let first = Session4::raw(&mut s.c, &ops, 1).unwrap();
    assert_eq!(first.status, NFS4_OK);
    let again = Session4::raw(&mut s.c, &ops, 1).unwrap();
    assert_eq!(again.raw, first.raw, "the cached reply, not a false retry");
    // The same slot and sequence id with another offset is a false retry.
    let mut other = on_slot(&s, 1);
    other.op(OP_PUTFH).opaque(&fh);
    write_op(&mut other, &sid, 4096, &data);
    let rep = Session4::raw(&mut s.c, &other, 1).unwrap();
    assert_eq!(rep.status, NFS4ERR_SEQ_FALSE_RETRY);
    // So is one at the same offset with other data, or with more of it: the
    // data read apart is part of what tells a retry from a false one (its
    // first and last 512 bytes and its length, as for the record).
    let mut changed = data.clone();
    changed[0] ^= 0xff;
    let longer = pattern(96 << 10, 1);
    for d in [&changed, &longer] {
        let mut other = on_slot(&s, 1);
        other.op(OP_PUTFH).opaque(&fh);
        write_op(&mut other, &sid, 0, d);
        let rep = Session4::raw(&mut s.c, &other, 1).unwrap();
        assert_eq!(rep.status, NFS4ERR_SEQ_FALSE_RETRY, "{} bytes", d.len());
    }
    s.seq[1] += 1;
    assert_eq!(read_back(&mut s, sid, &fh, data.len()), data);
}

/// A call of a COMPOUND (SEQUENCE on slot 1, PUTFH, WRITE at 0 whose data
/// length word says `claimed`, then `data` as it is: no padding added).
fn raw_write(s: &Session4, fh: &[u8], sid: &Stateid, claimed: u32, data: &[u8]) -> Vec<u8> {
    let mut ops = on_slot(s, 1);
    ops.op(OP_PUTFH).opaque(fh);
    ops.op(OP_WRITE)
        .u32(sid.seqid)
        .fixed(&sid.other)
        .u64(0)
        .u32(0)
        .u32(claimed);
    ops.w.buf.extend_from_slice(data);
    let root = Cred::Sys {
        uid: 0,
        gid: 0,
        gids: vec![],
    };
    rpc::encode_call(77, PROG_NFS, 4, 1, &root, &ops.encode(1))
}

/// `msg` behind a record mark saying `len` bytes (more than `msg` holds for
/// a record cut short).
fn marked(msg: &[u8], len: usize) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(rpc::LAST_FRAGMENT | len as u32);
    w.buf.extend_from_slice(msg);
    w.buf
}

/// Send `rec` on a new connection: the COMPOUND's reply, or `None` when the
/// server closed the connection (within the read timeout: never a hang).
fn send(env: &Env, rec: &[u8], close_write: bool) -> Option<Reply> {
    let mut c = TcpStream::connect(env.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(rec).unwrap();
    if close_write {
        c.shutdown(Shutdown::Write).unwrap();
    }
    match rpc::read_record(&mut c, 4 << 20) {
        Ok(Some(reply)) => {
            let body = cachalot_nfs::client::decode_reply(77, &reply).unwrap();
            Some(Reply::decode_owned(body).unwrap())
        }
        Ok(None) => None,
        Err(e) => {
            assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "the server hung");
            None
        }
    }
}

/// The status of the last result of `rep`, after SEQUENCE and PUTFH.
fn write_status(rep: &Reply) -> u32 {
    let mut r = rep.reader();
    assert_eq!(op_status(&mut r, OP_SEQUENCE).unwrap(), NFS4_OK);
    r.fixed(36).unwrap();
    assert_eq!(op_status(&mut r, OP_PUTFH).unwrap(), NFS4_OK);
    op_status(&mut r, OP_WRITE).unwrap()
}

#[test]
fn hostile_write_lengths_get_badxdr_or_a_closed_connection() {
    let env = env(SHARE);
    let (mut s, sid, fh) = opened(&env, "hostile");
    s.write(&fh, sid, 0, &[9u8; 100], 2).unwrap();
    // A data length past the record's end: the decoder's BADXDR.
    let msg = raw_write(&s, &fh, &sid, 1 << 20, &[1u8; 16 << 10]);
    let rep = send(&env, &marked(&msg, msg.len()), false).expect("an answer");
    assert_eq!(
        (rep.status, write_status(&rep)),
        (NFS4ERR_BADXDR, NFS4ERR_BADXDR)
    );
    s.seq[1] += 1;
    // Data that ends the record without its XDR padding: BADXDR too.
    let msg = raw_write(&s, &fh, &sid, 8193, &[2u8; 8193]);
    let rep = send(&env, &marked(&msg, msg.len()), false).expect("an answer");
    assert_eq!(write_status(&rep), NFS4ERR_BADXDR);
    s.seq[1] += 1;
    // A record cut short in the data, and one cut short in the operations
    // after it: the connection closes, nothing is written.
    let data = pattern(64 << 10, 3);
    let mut msg = raw_write(&s, &fh, &sid, data.len() as u32, &data);
    msg.extend_from_slice(&OP_GETFH.to_be_bytes());
    for cut in [msg.len() - 30_000, msg.len() - 2] {
        assert!(send(&env, &marked(&msg[..cut], msg.len()), true).is_none());
    }
    // None of that wrote or broke anything: the session goes on.
    assert_eq!(read_back(&mut s, sid, &fh, 100), vec![9u8; 100]);
    let (got, eof) = s.read(&fh, sid, 0, 4096).unwrap();
    assert_eq!((got.len(), eof), (100, true));
}
