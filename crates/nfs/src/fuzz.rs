//! The entry point of the decoder fuzz target (`fuzz/fuzz_targets/nfs_rpc.rs`)
//! and of the bounded random test in `tests/fuzz.rs`: everything the server
//! decodes from the wire before it touches a filesystem. The NFSv4.1 COMPOUND
//! decoder has its own target (`fuzz/fuzz_targets/nfs4_compound.rs`,
//! [`decode_compound4`]) and is also run here on every call's arguments.

use crate::handle::Handle;
use crate::nfs3::args;
use crate::rpc;
use crate::xdr::Reader;

/// Decode `data` as a stream of RPC records, each as a call, and its arguments
/// as every NFSv3, MOUNT and portmap procedure would. Must never panic.
pub fn decode_everything(data: &[u8]) {
    let mut input = data;
    while let Ok(Some(rec)) = rpc::read_record(&mut input, rpc::MAX_RECORD) {
        decode_message(&rec);
    }
    decode_message(data);
}

fn decode_message(msg: &[u8]) {
    if let Ok(call) = rpc::decode_call(msg) {
        decode_args(call.proc_, call.args);
        decode_compound4(call.args);
    }
    decode_compound4(msg);
    for p in 0..24 {
        decode_args(p, msg);
    }
}

fn decode_args(proc_: u32, b: &[u8]) {
    if let Some(Ok(args::Args::Getattr(fh))) = args::decode(proc_, b) {
        let _ = Handle::decode(fh);
    }
    let _ = Handle::decode(b);
    let mut r = Reader::new(b);
    let _ = r.string(crate::nfs3::args::MAX_PATH_WIRE);
    let _ = crate::client::decode_reply(0, b);
}

/// Decode `data` as COMPOUND4args, every operation's arguments, and as a
/// COMPOUND4res the way the test client reads it. Must never panic.
pub fn decode_compound4(data: &[u8]) {
    if let Ok(ops) = crate::nfs4::ops::decode_compound(data) {
        assert!(ops.len() <= 1024, "bounded by the decoder");
    }
    let mut r = Reader::new(data);
    for _ in 0..64 {
        if !matches!(
            crate::nfs4::ops::decode(&mut r),
            crate::nfs4::ops::Decoded::Op(..)
        ) {
            break;
        }
    }
    let _ = crate::nfs4::client::Reply::decode(data);
    // What the connection's reader decodes of a record's head to read a
    // WRITE's data apart: where it says the data is lies within `data`.
    if let Some(w) = crate::nfs4::ops::first_write(data, 1 << 20) {
        assert!(w.data_at <= data.len() && w.len <= 1 << 20);
    }
}
