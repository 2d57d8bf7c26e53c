//! Fuzzing entry: a whole client session (handshake and requests) from bytes,
//! served against an in-memory device. Must never panic nor hang.

use crate::device::{Device, MemDevice};
use crate::handshake::{negotiate, Exports};
use crate::proto::*;
use crate::transmission::{no_observer, serve};
use std::io::{self, Read, Write};
use std::sync::Arc;

struct MemExports {
    rw: Arc<MemDevice>,
    ro: Arc<MemDevice>,
}

impl Exports for MemExports {
    fn list(&self) -> Vec<String> {
        vec!["mem".into(), "mem@snap".into()]
    }
    fn open(&self, name: &str) -> Result<Arc<dyn Device>, String> {
        match name {
            "mem" => Ok(self.rw.clone()),
            "mem@snap" => Ok(self.ro.clone()),
            _ => Err(format!("no export '{name}'")),
        }
    }
}

/// Client bytes in, server bytes to a sink.
struct Duplex<'a> {
    input: &'a [u8],
}

impl Read for Duplex<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}
impl Write for Duplex<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Run one session from `data` (the fuzz target's body).
pub fn fuzz_session(data: &[u8]) {
    let exports = MemExports {
        rw: Arc::new(MemDevice::new(1 << 20, false)),
        ro: Arc::new(MemDevice::new(64 << 10, true)),
    };
    let mut s = Duplex { input: data };
    if let Ok(Some(neg)) = negotiate(&mut s, &exports) {
        let _ = serve(
            &mut io::BufReader::new(s),
            io::sink(),
            &neg,
            0,
            no_observer(),
        );
    }
}

fn option(out: &mut Vec<u8>, opt: u32, data: &[u8]) {
    out.extend_from_slice(&IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&opt.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

fn request(out: &mut Vec<u8>, flags: u16, kind: u16, off: u64, len: u32) {
    out.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&7u64.to_be_bytes());
    out.extend_from_slice(&off.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

/// A valid session (seed corpus and mutation base): structured replies,
/// base:allocation, GO, then one of each command.
pub fn sample_session() -> Vec<u8> {
    let mut b = (CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES)
        .to_be_bytes()
        .to_vec();
    option(&mut b, OPT_LIST, &[]);
    option(&mut b, OPT_STRUCTURED_REPLY, &[]);
    let mut meta = 3u32.to_be_bytes().to_vec();
    meta.extend_from_slice(b"mem");
    meta.extend_from_slice(&1u32.to_be_bytes());
    meta.extend_from_slice(&(BASE_ALLOCATION.len() as u32).to_be_bytes());
    meta.extend_from_slice(BASE_ALLOCATION.as_bytes());
    option(&mut b, OPT_SET_META_CONTEXT, &meta);
    let mut go = 3u32.to_be_bytes().to_vec();
    go.extend_from_slice(b"mem");
    go.extend_from_slice(&1u16.to_be_bytes());
    go.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    option(&mut b, OPT_INFO, &go);
    option(&mut b, OPT_GO, &go);
    request(&mut b, CMD_FLAG_FUA, CMD_WRITE, 4096, 8);
    b.extend_from_slice(b"12345678");
    request(&mut b, 0, CMD_READ, 4000, 200);
    request(&mut b, 0, CMD_BLOCK_STATUS, 0, 1 << 20);
    request(&mut b, CMD_FLAG_FAST_ZERO, CMD_WRITE_ZEROES, 0, 8192);
    request(&mut b, 0, CMD_TRIM, 4096, 4096);
    request(&mut b, 0, CMD_FLUSH, 0, 0);
    request(&mut b, 0, CMD_READ, (1 << 20) - 1, 2);
    request(&mut b, 0, CMD_DISC, 0, 0);
    b
}
