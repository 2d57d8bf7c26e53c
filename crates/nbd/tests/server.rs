//! The server over TCP against real volumes in a file pool, with a small client
//! written from the protocol document (the e2e tests use libnbd and qemu).

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_nbd::proto::*;
use cachalot_nbd::{Device, Exports, NbdServer};
use cachalot_pool::{CreateOpts, VdevKind, VdevSpec};
use cachalot_zvol::Zvol;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

struct TestExports {
    vols: Mutex<BTreeMap<String, Arc<Zvol>>>,
}

impl Exports for TestExports {
    fn list(&self) -> Vec<String> {
        self.vols.lock().keys().cloned().collect()
    }
    fn open(&self, name: &str) -> Result<Arc<dyn Device>, String> {
        self.vols
            .lock()
            .get(name)
            .map(|v| v.clone() as Arc<dyn Device>)
            .ok_or_else(|| format!("no export '{name}'"))
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    exports: Arc<TestExports>,
    server: Arc<NbdServer>,
    addr: SocketAddr,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let spec = VdevSpec {
        kind: VdevKind::Disk,
        paths: vec![dir.path().join("d0")],
        log: false,
    };
    let copts = CreateOpts {
        create_size: Some(256 << 20),
        ..CreateOpts::default()
    };
    let opts = StoreOpts {
        arc_max: 16 << 20,
        txg_timeout: Duration::from_secs(3600),
        dirty_max: 1 << 30,
    };
    let store = Store::create("tank", &[spec], &copts, &[], opts).unwrap();
    let props = [("sparse".to_string(), "on".to_string())];
    store
        .create_dataset(
            "tank/vol",
            DatasetKind::Volume,
            Some(16 << 20),
            &props,
            false,
        )
        .unwrap();
    let vol = Arc::new(Zvol::open(store.clone(), store.dataset("tank/vol").unwrap()).unwrap());
    vol.write(0, &[0x5a; 65536], false).unwrap();
    store.snapshot(&["tank/vol@s".to_string()]).unwrap();
    let snap =
        Arc::new(Zvol::open(store.clone(), store.snapshot_dataset("tank/vol@s").unwrap()).unwrap());
    let exports = Arc::new(TestExports {
        vols: Mutex::new(BTreeMap::from([
            ("tank/vol".to_string(), vol),
            ("tank/vol@s".to_string(), snap),
        ])),
    });
    let server = NbdServer::new(exports.clone());
    let addr = server.listen_tcp("127.0.0.1:0").unwrap();
    Fixture {
        _dir: dir,
        store,
        exports,
        server,
        addr,
    }
}

struct Client {
    s: TcpStream,
}

struct OptReply {
    kind: u32,
    data: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut hello = [0u8; 18];
        s.read_exact(&mut hello).unwrap();
        assert_eq!(&hello[0..8], &NBDMAGIC.to_be_bytes());
        assert_eq!(&hello[8..16], &IHAVEOPT.to_be_bytes());
        assert_eq!(
            u16::from_be_bytes([hello[16], hello[17]]),
            FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES
        );
        s.write_all(&(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES).to_be_bytes())
            .unwrap();
        Client { s }
    }
    fn option(&mut self, opt: u32, data: &[u8]) {
        let mut b = IHAVEOPT.to_be_bytes().to_vec();
        b.extend_from_slice(&opt.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        self.s.write_all(&b).unwrap();
    }
    fn opt_reply(&mut self, opt: u32) -> OptReply {
        let mut h = [0u8; 20];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(&h[0..8], &OPT_REPLY_MAGIC.to_be_bytes());
        assert_eq!(u32::from_be_bytes(h[8..12].try_into().unwrap()), opt);
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut data = vec![0; len as usize];
        self.s.read_exact(&mut data).unwrap();
        OptReply { kind, data }
    }
    /// Replies to `opt` up to and including the final one.
    fn replies(&mut self, opt: u32) -> Vec<OptReply> {
        let mut out = Vec::new();
        loop {
            let r = self.opt_reply(opt);
            let last = r.kind == REP_ACK || r.kind & 0x8000_0000 != 0;
            out.push(r);
            if last {
                return out;
            }
        }
    }
    fn go(&mut self, name: &str, structured: bool) -> (u64, u16) {
        if structured {
            self.option(OPT_STRUCTURED_REPLY, &[]);
            assert_eq!(self.replies(OPT_STRUCTURED_REPLY)[0].kind, REP_ACK);
            let mut m = name_payload(name);
            m.extend_from_slice(&1u32.to_be_bytes());
            m.extend_from_slice(&(BASE_ALLOCATION.len() as u32).to_be_bytes());
            m.extend_from_slice(BASE_ALLOCATION.as_bytes());
            self.option(OPT_SET_META_CONTEXT, &m);
            let r = self.replies(OPT_SET_META_CONTEXT);
            assert_eq!(r[0].kind, REP_META_CONTEXT);
            assert_eq!(&r[0].data[4..], BASE_ALLOCATION.as_bytes());
        }
        let mut g = name_payload(name);
        g.extend_from_slice(&0u16.to_be_bytes());
        self.option(OPT_GO, &g);
        let r = self.replies(OPT_GO);
        assert_eq!(r.last().unwrap().kind, REP_ACK, "GO {name}");
        let e = r
            .iter()
            .find(|r| r.data[0..2] == INFO_EXPORT.to_be_bytes())
            .unwrap();
        (
            u64::from_be_bytes(e.data[2..10].try_into().unwrap()),
            u16::from_be_bytes(e.data[10..12].try_into().unwrap()),
        )
    }
    fn request(&mut self, flags: u16, kind: u16, cookie: u64, off: u64, len: u32, data: &[u8]) {
        let mut b = REQUEST_MAGIC.to_be_bytes().to_vec();
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&kind.to_be_bytes());
        b.extend_from_slice(&cookie.to_be_bytes());
        b.extend_from_slice(&off.to_be_bytes());
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(data);
        self.s.write_all(&b).unwrap();
    }
    /// A simple reply: (error, cookie).
    fn simple(&mut self) -> (u32, u64) {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(&h[0..4], &SIMPLE_REPLY_MAGIC.to_be_bytes());
        (
            u32::from_be_bytes(h[4..8].try_into().unwrap()),
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
        )
    }
    /// A structured chunk: (flags, type, cookie, payload).
    fn chunk(&mut self) -> (u16, u16, u64, Vec<u8>) {
        let mut h = [0u8; 20];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(&h[0..4], &STRUCTURED_REPLY_MAGIC.to_be_bytes());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut p = vec![0; len as usize];
        self.s.read_exact(&mut p).unwrap();
        (
            u16::from_be_bytes(h[4..6].try_into().unwrap()),
            u16::from_be_bytes(h[6..8].try_into().unwrap()),
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
            p,
        )
    }
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0) | Err(_))
    }
}

fn name_payload(name: &str) -> Vec<u8> {
    let mut b = (name.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    b
}

fn error_of(chunk: &(u16, u16, u64, Vec<u8>)) -> u32 {
    assert_eq!(chunk.1, REPLY_TYPE_ERROR);
    u32::from_be_bytes(chunk.3[0..4].try_into().unwrap())
}

#[test]
fn options_list_info_unknown_and_abort() {
    let f = fixture();
    let mut c = Client::connect(f.addr);
    c.option(OPT_LIST, &[]);
    let r = c.replies(OPT_LIST);
    let names: Vec<String> = r
        .iter()
        .filter(|r| r.kind == REP_SERVER)
        .map(|r| String::from_utf8(r.data[4..].to_vec()).unwrap())
        .collect();
    assert_eq!(names, ["tank/vol", "tank/vol@s"]);
    c.option(42, b"whatever");
    assert_eq!(c.replies(42)[0].kind, REP_ERR_UNSUP);
    c.option(OPT_STARTTLS, &[]);
    assert_eq!(c.replies(OPT_STARTTLS)[0].kind, REP_ERR_UNSUP);
    let mut g = name_payload("tank/nope");
    g.extend_from_slice(&0u16.to_be_bytes());
    c.option(OPT_INFO, &g);
    assert_eq!(c.replies(OPT_INFO)[0].kind, REP_ERR_UNKNOWN);
    c.option(OPT_INFO, &[0, 0, 0, 9, 1]);
    assert_eq!(c.replies(OPT_INFO)[0].kind, REP_ERR_INVALID);
    // Meta contexts need structured replies first.
    c.option(OPT_LIST_META_CONTEXT, &[]);
    assert_eq!(c.replies(OPT_LIST_META_CONTEXT)[0].kind, REP_ERR_INVALID);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    c.replies(OPT_STRUCTURED_REPLY);
    let mut m = name_payload("tank/vol");
    m.extend_from_slice(&0u32.to_be_bytes());
    c.option(OPT_LIST_META_CONTEXT, &m);
    let r = c.replies(OPT_LIST_META_CONTEXT);
    assert_eq!(r[0].kind, REP_META_CONTEXT);
    assert_eq!(&r[0].data[4..], BASE_ALLOCATION.as_bytes());
    // An oversized option is skipped and refused; the session goes on.
    c.option(OPT_INFO, &vec![0u8; (MAX_OPTION_LEN + 1) as usize]);
    assert_eq!(c.replies(OPT_INFO)[0].kind, REP_ERR_TOO_BIG);
    let mut g = name_payload("tank/vol");
    g.extend_from_slice(&1u16.to_be_bytes());
    g.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    c.option(OPT_INFO, &g);
    let r = c.replies(OPT_INFO);
    let bs = r
        .iter()
        .find(|r| r.data[0..2] == INFO_BLOCK_SIZE.to_be_bytes())
        .unwrap();
    assert_eq!(u32::from_be_bytes(bs.data[2..6].try_into().unwrap()), 1);
    assert_eq!(
        u32::from_be_bytes(bs.data[6..10].try_into().unwrap()),
        16384
    );
    assert_eq!(
        u32::from_be_bytes(bs.data[10..14].try_into().unwrap()),
        MAX_PAYLOAD
    );
    c.option(OPT_ABORT, &[]);
    assert_eq!(c.replies(OPT_ABORT)[0].kind, REP_ACK);
    assert!(c.closed());
}

#[test]
fn commands_flags_and_errors_on_a_volume() {
    let f = fixture();
    let mut c = Client::connect(f.addr);
    let (size, flags) = c.go("tank/vol", true);
    assert_eq!(size, 16 << 20);
    for fl in [
        TF_HAS_FLAGS,
        TF_SEND_FLUSH,
        TF_SEND_FUA,
        TF_SEND_TRIM,
        TF_SEND_WRITE_ZEROES,
        TF_SEND_FAST_ZERO,
        TF_CAN_MULTI_CONN,
    ] {
        assert_ne!(flags & fl, 0, "flag {fl:#x}");
    }
    assert_eq!(flags & TF_READ_ONLY, 0);
    c.request(CMD_FLAG_FUA, CMD_WRITE, 1, 1 << 20, 4096, &[7; 4096]);
    assert_eq!(c.simple(), (0, 1));
    c.request(0, CMD_READ, 2, (1 << 20) - 8, 16, &[]);
    let ch = c.chunk();
    assert_eq!(
        (ch.0, ch.1, ch.2),
        (REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, 2)
    );
    assert_eq!(
        u64::from_be_bytes(ch.3[0..8].try_into().unwrap()),
        (1 << 20) - 8
    );
    assert_eq!(
        &ch.3[8..],
        &[0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7]
    );
    c.request(0, CMD_FLUSH, 3, 0, 0, &[]);
    assert_eq!(c.simple(), (0, 3));
    // Block status: data at 0..64K and 1M..1M+16K (whole blocks), holes elsewhere.
    c.request(0, CMD_BLOCK_STATUS, 4, 0, 2 << 20, &[]);
    let ch = c.chunk();
    assert_eq!(ch.1, REPLY_TYPE_BLOCK_STATUS);
    assert_eq!(
        u32::from_be_bytes(ch.3[0..4].try_into().unwrap()),
        BASE_ALLOCATION_ID
    );
    let desc: Vec<(u32, u32)> = ch.3[4..]
        .chunks(8)
        .map(|d| {
            (
                u32::from_be_bytes(d[0..4].try_into().unwrap()),
                u32::from_be_bytes(d[4..8].try_into().unwrap()),
            )
        })
        .collect();
    let hole = STATE_HOLE | STATE_ZERO;
    assert_eq!(
        desc,
        vec![
            (65536, 0),
            ((1 << 20) - 65536, hole),
            (16384, 0),
            ((1 << 20) - 16384, hole)
        ]
    );
    // TRIM and WRITE_ZEROES (FAST_ZERO) leave holes that read as zeros.
    c.request(0, CMD_TRIM, 5, 0, 32768, &[]);
    assert_eq!(c.simple(), (0, 5));
    c.request(
        CMD_FLAG_FAST_ZERO | CMD_FLAG_FUA,
        CMD_WRITE_ZEROES,
        6,
        1 << 20,
        16384,
        &[],
    );
    assert_eq!(c.simple(), (0, 6));
    c.request(CMD_FLAG_REQ_ONE, CMD_BLOCK_STATUS, 7, 0, 2 << 20, &[]);
    let ch = c.chunk();
    assert_eq!(ch.3.len(), 12, "REQ_ONE: one descriptor");
    assert_eq!(&ch.3[4..], &[0, 0, 0x80, 0, 0, 0, 0, 3]);
    c.request(0, CMD_READ, 8, 1 << 20, 16384, &[]);
    assert_eq!(&c.chunk().3[8..], &[0u8; 16384][..]);
    // Errors: past the end (EINVAL for reads, ENOSPC for writes), too long,
    // zero length, misplaced flags, unknown command. The connection survives.
    c.request(0, CMD_READ, 9, size - 4, 8, &[]);
    assert_eq!(error_of(&c.chunk()), EINVAL);
    c.request(0, CMD_WRITE, 10, size - 4, 8, &[1; 8]);
    assert_eq!(c.simple(), (ENOSPC, 10));
    c.request(0, CMD_WRITE_ZEROES, 11, u64::MAX - 10, 100, &[]);
    assert_eq!(c.simple(), (ENOSPC, 11));
    c.request(0, CMD_TRIM, 12, size, 1, &[]);
    assert_eq!(c.simple(), (EINVAL, 12));
    c.request(0, CMD_READ, 13, 0, MAX_PAYLOAD + 1, &[]);
    assert_eq!(error_of(&c.chunk()), EOVERFLOW);
    c.request(0, CMD_WRITE, 14, 0, 0, &[]);
    assert_eq!(c.simple(), (EINVAL, 14));
    c.request(CMD_FLAG_FAST_ZERO, CMD_TRIM, 15, 0, 4096, &[]);
    assert_eq!(c.simple(), (EINVAL, 15));
    c.request(0, 77, 16, 0, 4096, &[]);
    assert_eq!(c.simple(), (EINVAL, 16));
    c.request(0, CMD_BLOCK_STATUS, 17, size - 1, 2, &[]);
    assert_eq!(error_of(&c.chunk()), EINVAL);
    // An oversized write: payload skipped without being held, then refused.
    c.request(
        0,
        CMD_WRITE,
        18,
        0,
        MAX_PAYLOAD + 4096,
        &vec![1u8; (MAX_PAYLOAD + 4096) as usize],
    );
    assert_eq!(c.simple(), (EOVERFLOW, 18));
    c.request(0, CMD_READ, 19, 1 << 20, 8, &[]);
    assert_eq!(&c.chunk().3[8..], &[0u8; 8]);
    c.request(0, CMD_DISC, 20, 0, 0, &[]);
    assert!(c.closed());
    // The flushed write is in the pool.
    f.store.sync().unwrap();
    let vol = Zvol::open(f.store.clone(), f.store.dataset("tank/vol").unwrap()).unwrap();
    assert_eq!(vol.read(1 << 20, 8).unwrap(), vec![0u8; 8]);
    assert_eq!(vol.read((1 << 20) + 16384, 8).unwrap(), vec![0u8; 8]);
}

#[test]
fn simple_replies_without_structured_and_block_status_refused() {
    let f = fixture();
    let mut c = Client::connect(f.addr);
    let (_, flags) = c.go("tank/vol", false);
    assert_eq!(flags & TF_SEND_DF, 0);
    c.request(0, CMD_READ, 1, 0, 8, &[]);
    assert_eq!(c.simple(), (0, 1));
    let mut d = [0u8; 8];
    c.s.read_exact(&mut d).unwrap();
    assert_eq!(d, [0x5a; 8]);
    c.request(0, CMD_BLOCK_STATUS, 2, 0, 4096, &[]);
    assert_eq!(c.simple(), (EINVAL, 2));
}

#[test]
fn snapshot_export_is_read_only() {
    let f = fixture();
    let mut c = Client::connect(f.addr);
    let (size, flags) = c.go("tank/vol@s", true);
    assert_eq!(size, 16 << 20);
    assert_ne!(flags & TF_READ_ONLY, 0);
    assert_eq!(flags & TF_SEND_TRIM, 0);
    c.request(0, CMD_WRITE, 1, 0, 4, &[1; 4]);
    assert_eq!(c.simple(), (EPERM, 1));
    c.request(0, CMD_TRIM, 2, 0, 4096, &[]);
    assert_eq!(c.simple(), (EPERM, 2));
    c.request(0, CMD_READ, 3, 0, 4, &[]);
    assert_eq!(&c.chunk().3[8..], &[0x5a; 4]);
}

#[test]
fn a_stalled_or_malicious_client_does_not_stall_others() {
    let f = fixture();
    // One client says nothing after connecting, another sends a huge option
    // length and stops, a third sends garbage.
    let silent = TcpStream::connect(f.addr).unwrap();
    let mut half = Client::connect(f.addr);
    let mut b = IHAVEOPT.to_be_bytes().to_vec();
    b.extend_from_slice(&OPT_GO.to_be_bytes());
    b.extend_from_slice(&u32::MAX.to_be_bytes());
    half.s.write_all(&b).unwrap();
    let mut bad = Client::connect(f.addr);
    bad.s.write_all(&[0xde; 64]).unwrap();
    assert!(bad.closed(), "bad magic closes");
    // A client in transmission that stops mid-payload.
    let mut stuck = Client::connect(f.addr);
    stuck.go("tank/vol", false);
    stuck.request(0, CMD_WRITE, 1, 0, 1 << 20, &[1; 1000]);
    let mut ok = Client::connect(f.addr);
    ok.go("tank/vol", true);
    ok.request(0, CMD_READ, 1, 0, 4, &[]);
    assert_eq!(&ok.chunk().3[8..], &[0x5a; 4]);
    assert!(f.server.connections().len() >= 4);
    drop(silent);
}

#[test]
fn revoked_export_is_disconnected_at_once() {
    let f = fixture();
    let mut c = Client::connect(f.addr);
    c.go("tank/vol", false);
    let mut other = Client::connect(f.addr);
    other.go("tank/vol@s", false);
    assert_eq!(
        f.server
            .connections()
            .iter()
            .filter(|c| c.export == "tank/vol")
            .count(),
        1
    );
    f.exports.vols.lock().remove("tank/vol");
    assert_eq!(f.server.revalidate(), 1);
    assert!(c.closed());
    other.request(0, CMD_READ, 1, 0, 4, &[]);
    assert_eq!(other.simple(), (0, 1));
    let mut d = [0u8; 4];
    other.s.read_exact(&mut d).unwrap();
    assert_eq!(d, [0x5a; 4]);
    f.server.shutdown();
    assert!(other.closed());
}
