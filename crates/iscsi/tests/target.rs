//! The target over real TCP with a small initiator written here: login (with and
//! without CHAP, digests), discovery, reads and writes with immediate data and R2T,
//! out-of-range and oversized commands, COMPARE AND WRITE, reservations.

use cachalot_iscsi::login::chap_response;
use cachalot_iscsi::pdu::*;
use cachalot_iscsi::text::{encode_text, parse_text};
use cachalot_iscsi::{target_name, Catalog, Chap, Export, MemDev, Target};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

struct One(Export);
impl Catalog for One {
    fn targets(&self) -> Vec<String> {
        vec![self.0.target.clone()]
    }
    fn export(&self, t: &str) -> Option<Export> {
        (t == self.0.target).then(|| self.0.clone())
    }
}

fn start(chap: Option<Chap>, pr_path: Option<PathBuf>) -> (SocketAddr, String) {
    start_on("127.0.0.1:0", chap, pr_path)
}

fn start_on(bind: &str, chap: Option<Chap>, pr_path: Option<PathBuf>) -> (SocketAddr, String) {
    let name = target_name("tank/vol");
    let exp = Export {
        target: name.clone(),
        volume: "tank/vol".into(),
        dev: Arc::new(MemDev::new("tank/vol", 64 << 20, 16384, false)),
        chap,
        pr_path,
    };
    let t = Target::new(Arc::new(One(exp)));
    let l = TcpListener::bind(bind).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || t.serve(l));
    (addr, name)
}

/// (user, secret, mutual (target user, target secret)).
type ChapCreds<'a> = (&'a str, &'a str, Option<(&'a str, &'a str)>);

struct Ini {
    s: TcpStream,
    itt: u32,
    cmd_sn: u32,
    digests: bool,
    isid: u8,
    /// TSIH sent at login (0: a new session); the target's once logged in.
    tsih: u16,
}

#[derive(Debug)]
struct Reply {
    status: u8,
    sense: Vec<u8>,
    data: Vec<u8>,
    residual: (u8, u32),
}

fn lim(d: bool) -> Limits {
    Limits {
        max_data: 1 << 20,
        header_digest: d,
        data_digest: d,
    }
}

fn kv(pairs: &[(&str, &str)]) -> Vec<u8> {
    encode_text(
        &pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>(),
    )
}

impl Ini {
    fn connect(addr: SocketAddr, isid: u8) -> Ini {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        Ini {
            s,
            itt: 1,
            cmd_sn: 1,
            digests: false,
            isid,
            tsih: 0,
        }
    }

    fn send(&mut self, p: &Pdu, in_login: bool) {
        let d = self.digests && !in_login;
        self.s.write_all(&encode_pdu(p, d, d)).unwrap();
    }

    fn recv(&mut self, in_login: bool) -> Pdu {
        read_pdu(&mut self.s, &lim(self.digests && !in_login))
            .unwrap()
            .expect("a PDU")
    }

    /// One login request; returns (status, transit, answered keys).
    fn login_step(
        &mut self,
        csg: u8,
        nsg: u8,
        transit: bool,
        keys: &[(&str, &str)],
    ) -> (u16, bool, Vec<(String, String)>) {
        let mut p = Pdu::new(OP_LOGIN_REQ);
        p.bhs[0] |= 0x40;
        p.bhs[1] = (csg << 2) | if transit { 0x80 | nsg } else { 0 };
        p.bhs[8..14].copy_from_slice(&[0x80, 0, 0, 0, self.isid, 1]);
        p.set_u16(14, self.tsih);
        p.set_itt(self.itt);
        p.set_u32(24, self.cmd_sn);
        p.data = kv(keys);
        self.send(&p, true);
        let r = self.recv(true);
        assert_eq!(r.opcode(), OP_LOGIN_RESP);
        self.itt += 1;
        if r.u16_at(14) != 0 {
            self.tsih = r.u16_at(14);
        }
        (
            r.u16_at(36),
            r.flags() & 0x80 != 0,
            parse_text(&r.data).unwrap(),
        )
    }

    /// Full login; `chap` = (user, secret, mutual (user, secret)).
    fn login(
        &mut self,
        target: Option<&str>,
        chap: Option<ChapCreds>,
        digests: bool,
    ) -> Result<(), u16> {
        let ini = format!("iqn.2026-11.org.test:ini{}", self.isid);
        let mut keys = vec![("InitiatorName", ini.as_str())];
        match target {
            Some(t) => keys.extend([("SessionType", "Normal"), ("TargetName", t)]),
            None => keys.push(("SessionType", "Discovery")),
        }
        keys.push((
            "AuthMethod",
            if chap.is_some() { "CHAP,None" } else { "None" },
        ));
        let (st, transit, ans) = self.login_step(0, 1, true, &keys);
        if st != 0 {
            return Err(st);
        }
        // No operational key in a security stage answer: open-iscsi refuses the
        // login for a MaxRecvDataSegmentLength there.
        let no_operational = |ans: &[(String, String)]| {
            assert!(
                !ans.iter().any(|(k, _)| k == "MaxRecvDataSegmentLength"),
                "MaxRecvDataSegmentLength in the security stage: {ans:?}"
            )
        };
        no_operational(&ans);
        if let Some((user, secret, mutual)) = chap {
            assert!(!transit, "no transit before CHAP");
            assert!(ans.iter().any(|(k, v)| k == "AuthMethod" && v == "CHAP"));
            let (st, _, ans) = self.login_step(0, 1, true, &[("CHAP_A", "5")]);
            if st != 0 {
                return Err(st);
            }
            let get = |k: &str| {
                ans.iter()
                    .find(|(a, _)| a == k)
                    .map(|(_, v)| v.clone())
                    .unwrap()
            };
            let id: u8 = get("CHAP_I").parse().unwrap();
            let ch = unhex(&get("CHAP_C"));
            let r = hex(&chap_response(id, secret.as_bytes(), &ch));
            let mut keys = vec![("CHAP_N", user), ("CHAP_R", r.as_str())];
            let my_ch = [7u8; 16];
            let my_ch_hex = hex(&my_ch);
            if mutual.is_some() {
                keys.extend([("CHAP_I", "9"), ("CHAP_C", my_ch_hex.as_str())]);
            }
            let (st, transit, ans) = self.login_step(0, 1, true, &keys);
            if st != 0 {
                return Err(st);
            }
            assert!(transit);
            no_operational(&ans);
            if let Some((muser, msecret)) = mutual {
                let get = |k: &str| {
                    ans.iter()
                        .find(|(a, _)| a == k)
                        .map(|(_, v)| v.clone())
                        .unwrap()
                };
                assert_eq!(get("CHAP_N"), muser);
                assert_eq!(
                    unhex(&get("CHAP_R")),
                    chap_response(9, msecret.as_bytes(), &my_ch).to_vec(),
                    "target proved its secret"
                );
            }
        }
        let dg = if digests { "CRC32C" } else { "None" };
        let (st, transit, ans) = self.login_step(
            1,
            3,
            true,
            &[
                ("HeaderDigest", dg),
                ("DataDigest", dg),
                ("MaxRecvDataSegmentLength", "65536"),
                ("InitialR2T", "No"),
                ("ImmediateData", "Yes"),
                ("FirstBurstLength", "65536"),
                ("MaxBurstLength", "262144"),
            ],
        );
        if st != 0 {
            return Err(st);
        }
        assert!(transit);
        assert!(
            ans.iter().any(|(k, _)| k == "MaxRecvDataSegmentLength"),
            "our MaxRecvDataSegmentLength declared in the operational stage: {ans:?}"
        );
        self.digests = digests;
        Ok(())
    }

    /// A SCSI command with `out` sent as immediate data (up to 64 KiB), then as
    /// requested by R2Ts.
    fn cmd(&mut self, cdb: &[u8], edtl: u32, out: &[u8]) -> Reply {
        let itt = self.itt;
        self.itt += 1;
        let mut p = Pdu::new(OP_SCSI_CMD);
        let imm = out.len().min(32768);
        p.bhs[1] = 0x80 | if out.is_empty() { 0x40 } else { 0x20 };
        p.set_itt(itt);
        p.set_u32(20, edtl);
        p.set_u32(24, self.cmd_sn);
        self.cmd_sn += 1;
        p.bhs[32..32 + cdb.len()].copy_from_slice(cdb);
        p.data = out[..imm].to_vec();
        self.send(&p, false);
        let mut data = Vec::new();
        loop {
            let r = self.recv(false);
            match r.opcode() {
                OP_DATA_IN => {
                    assert_eq!(r.u32_at(40) as usize, data.len(), "Data-In in order");
                    data.extend_from_slice(&r.data);
                    if r.flags() & 1 != 0 {
                        return Reply {
                            status: r.bhs[3],
                            sense: vec![],
                            data,
                            residual: (r.flags() & 6, r.u32_at(44)),
                        };
                    }
                }
                OP_R2T => {
                    let (off, len, ttt) =
                        (r.u32_at(40) as usize, r.u32_at(44) as usize, r.u32_at(20));
                    for (i, chunk) in out[off..off + len].chunks(16384).enumerate() {
                        let sn = i as u32;
                        let mut d = Pdu::new(OP_DATA_OUT);
                        let last = off + (i + 1) * 16384 >= off + len;
                        d.bhs[1] = if last { 0x80 } else { 0 };
                        d.set_itt(itt);
                        d.set_u32(20, ttt);
                        d.set_u32(36, sn);
                        d.set_u32(40, (off + i * 16384) as u32);
                        d.data = chunk.to_vec();
                        self.send(&d, false);
                    }
                }
                OP_SCSI_RESP => {
                    let sense = if r.data.len() >= 2 {
                        r.data[2..].to_vec()
                    } else {
                        vec![]
                    };
                    return Reply {
                        status: r.bhs[3],
                        sense,
                        data,
                        residual: (r.flags() & 6, r.u32_at(44)),
                    };
                }
                op => panic!("unexpected opcode {op:#x}"),
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    format!(
        "0x{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    )
}
fn unhex(s: &str) -> Vec<u8> {
    let h = &s[2..];
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

fn rw16(op: u8, lba: u64, blocks: u32) -> Vec<u8> {
    let mut c = vec![op, 0];
    c.extend(lba.to_be_bytes());
    c.extend(blocks.to_be_bytes());
    c.extend([0, 0]);
    c
}

fn sense_key(r: &Reply) -> (u8, u8) {
    (r.sense[2] & 0xf, r.sense[12])
}

#[test]
fn read_write_with_r2t_and_digests() {
    let (addr, name) = start(None, None);
    for digests in [false, true] {
        let mut i = Ini::connect(addr, 1);
        i.login(Some(&name), None, digests).unwrap();
        assert_eq!(i.cmd(&[0; 6], 0, &[]).status, 0, "TEST UNIT READY");
        // 1 MiB write: 32 KiB immediate, the rest through R2Ts of MaxBurstLength.
        let data: Vec<u8> = (0..1 << 20).map(|x: u32| (x * 31 % 251) as u8).collect();
        let w = i.cmd(&rw16(0x8a, 100, 2048), 1 << 20, &data);
        assert_eq!(w.status, 0, "{w:?}");
        let r = i.cmd(&rw16(0x88, 100, 2048), 1 << 20, &[]);
        assert_eq!(r.status, 0);
        assert!(r.data == data, "read back what was written");
        // SYNCHRONIZE CACHE(10).
        assert_eq!(i.cmd(&[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0, &[]).status, 0);
    }
}

#[test]
fn out_of_range_and_oversized_commands_are_refused() {
    let (addr, name) = start(None, None);
    let mut i = Ini::connect(addr, 1);
    i.login(Some(&name), None, false).unwrap();
    let blocks = (64u64 << 20) / 512;
    let r = i.cmd(&rw16(0x88, blocks - 1, 2), 1024, &[]);
    assert_eq!(
        (r.status, sense_key(&r)),
        (2, (5, 0x21)),
        "LBA OUT OF RANGE"
    );
    let r = i.cmd(&rw16(0x88, 0, u32::MAX), 4096, &[]);
    assert_eq!(r.status, 2, "2^32-1 blocks refused");
    let r = i.cmd(&rw16(0x8a, 0, u32::MAX), 512, &[1; 512]);
    assert_eq!(r.status, 2, "2^32-1 block write refused");
    let r = i.cmd(&rw16(0x88, u64::MAX, 1), 512, &[]);
    assert_eq!(sense_key(&r), (5, 0x21));
    let r = i.cmd(&[0xc5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0, &[]);
    assert_eq!(sense_key(&r), (5, 0x20), "INVALID OPCODE");
    // Residual: READ(10) of one block with EDTL 10000 -> underflow of 9488.
    let r = i.cmd(&[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0], 10000, &[]);
    assert_eq!((r.status, r.data.len(), r.residual), (0, 512, (0x02, 9488)));
    // Still serving after all of that.
    assert_eq!(i.cmd(&[0; 6], 0, &[]).status, 0);
}

#[test]
fn chap_one_way_and_mutual() {
    let chap = Chap {
        user: "alice".into(),
        secret: "alice-secret-1".into(),
        mutual: Some(("target".into(), "target-secret-2".into())),
    };
    let (addr, name) = start(Some(chap), None);
    assert_eq!(
        Ini::connect(addr, 1).login(Some(&name), None, false),
        Err(0x0201),
        "no CHAP offered"
    );
    assert_eq!(
        Ini::connect(addr, 2).login(Some(&name), Some(("alice", "wrong", None)), false),
        Err(0x0201),
        "wrong secret"
    );
    assert_eq!(
        Ini::connect(addr, 3).login(Some(&name), Some(("bob", "alice-secret-1", None)), false),
        Err(0x0201),
        "wrong user"
    );
    let mut i = Ini::connect(addr, 4);
    i.login(
        Some(&name),
        Some((
            "alice",
            "alice-secret-1",
            Some(("target", "target-secret-2")),
        )),
        false,
    )
    .unwrap();
    assert_eq!(i.cmd(&[0; 6], 0, &[]).status, 0);
    let mut j = Ini::connect(addr, 5);
    j.login(Some(&name), Some(("alice", "alice-secret-1", None)), true)
        .unwrap();
    assert_eq!(j.cmd(&[0; 6], 0, &[]).status, 0);
}

/// SendTargets=All on a discovery session at `addr`: the (key, value) pairs.
fn send_targets(addr: SocketAddr) -> Vec<(String, String)> {
    let mut d = Ini::connect(addr, 1);
    d.login(None, None, false).unwrap();
    let mut p = Pdu::new(OP_TEXT_REQ);
    p.bhs[0] |= 0x40;
    p.bhs[1] = 0x80;
    p.set_itt(50);
    p.set_u32(20, RESERVED_TAG);
    p.data = kv(&[("SendTargets", "All")]);
    d.send(&p, false);
    parse_text(&d.recv(false).data).unwrap()
}

#[test]
fn send_targets_answers_with_the_address_connected_to() {
    // A portal on every address: each initiator is told the address it reached,
    // not one fixed address of the host.
    let (any, name) = start_on("0.0.0.0:0", None, None);
    for ip in ["127.0.0.1", "127.0.0.2"] {
        let addr: SocketAddr = format!("{ip}:{}", any.port()).parse().unwrap();
        let keys = send_targets(addr);
        assert_eq!(keys[0], ("TargetName".to_string(), name.clone()));
        assert_eq!(
            keys[1],
            ("TargetAddress".to_string(), format!("{addr},1")),
            "connected to {addr}"
        );
    }
}

#[test]
fn a_second_connection_per_session_is_refused_cleanly() {
    // MaxConnections=1: a login naming a live session's TSIH (MC/S) gets "too many
    // connections" (0x0206), one naming no session "session does not exist"
    // (0x020a); the live session goes on, and another session (ISID) is served.
    let (addr, name) = start(None, None);
    let mut a = Ini::connect(addr, 1);
    a.login(Some(&name), None, false).unwrap();
    let tsih = a.tsih;
    assert_ne!(tsih, 0);
    let mut again = Ini::connect(addr, 1);
    again.tsih = tsih;
    assert_eq!(again.login(Some(&name), None, false), Err(0x0206));
    let mut stray = Ini::connect(addr, 3);
    stray.tsih = tsih.wrapping_add(500).max(1);
    assert_eq!(stray.login(Some(&name), None, false), Err(0x020a));
    let mut b = Ini::connect(addr, 2);
    b.login(Some(&name), None, false).unwrap();
    assert_ne!(b.tsih, tsih);
    let block = vec![0xab; 512];
    assert_eq!(a.cmd(&rw16(0x8a, 7, 1), 512, &block).status, 0);
    let r = b.cmd(&rw16(0x88, 7, 1), 512, &[]);
    assert_eq!((r.status, r.data), (0, block));
}

#[test]
fn discovery_and_unknown_target() {
    let (addr, name) = start(None, None);
    let mut d = Ini::connect(addr, 1);
    d.login(None, None, false).unwrap();
    let mut p = Pdu::new(OP_TEXT_REQ);
    p.bhs[0] |= 0x40;
    p.bhs[1] = 0x80;
    p.set_itt(50);
    p.set_u32(20, RESERVED_TAG);
    p.data = kv(&[("SendTargets", "All")]);
    d.send(&p, false);
    let r = d.recv(false);
    let keys = parse_text(&r.data).unwrap();
    assert_eq!(keys[0], ("TargetName".to_string(), name.clone()));
    assert_eq!(keys[1].1, format!("{addr},1"));
    assert_eq!(
        Ini::connect(addr, 2).login(Some("iqn.2026-11.org.cachalot:nope"), None, false),
        Err(0x0203)
    );
}

#[test]
fn compare_and_write_and_reservations() {
    let dir = std::env::temp_dir().join(format!("iscsi-pr-{}", std::process::id()));
    let pr = dir.join("t.pr");
    let (addr, name) = start(None, Some(pr.clone()));
    let mut a = Ini::connect(addr, 1);
    a.login(Some(&name), None, false).unwrap();
    let mut b = Ini::connect(addr, 2);
    b.login(Some(&name), None, false).unwrap();
    assert_eq!(a.cmd(&rw16(0x8a, 8, 1), 512, &[b'a'; 512]).status, 0);
    let mut caw = rw16(0x89, 8, 0);
    caw[13] = 1;
    let mut buf = vec![b'x'; 512];
    buf.extend([b'b'; 512]);
    let r = a.cmd(&caw, 1024, &buf);
    assert_eq!((r.status, r.sense[2] & 0xf), (2, 0x0e), "MISCOMPARE");
    buf[..512].fill(b'a');
    assert_eq!(a.cmd(&caw, 1024, &buf).status, 0);
    assert_eq!(a.cmd(&rw16(0x88, 8, 1), 512, &[]).data, vec![b'b'; 512]);
    // PR: A registers key 0xAA and takes WRITE EXCLUSIVE; B may read, not write.
    let prout = |sa: u8, kind: u8| vec![0x5f, sa, kind, 0, 0, 0, 0, 0, 24, 0];
    let mut param = vec![0u8; 24];
    param[8..16].copy_from_slice(&0xAAu64.to_be_bytes());
    assert_eq!(a.cmd(&prout(0, 0), 24, &param).status, 0, "register");
    let mut p2 = vec![0u8; 24];
    p2[0..8].copy_from_slice(&0xAAu64.to_be_bytes());
    assert_eq!(a.cmd(&prout(1, 1), 24, &p2).status, 0, "reserve WE");
    assert_eq!(b.cmd(&rw16(0x88, 8, 1), 512, &[]).status, 0, "B reads");
    assert_eq!(
        b.cmd(&rw16(0x8a, 8, 1), 512, &[0; 512]).status,
        0x18,
        "B's write conflicts"
    );
    assert_eq!(
        a.cmd(&rw16(0x8a, 8, 1), 512, &[0; 512]).status,
        0,
        "A writes"
    );
    // The state is on disk: a fresh LU (as after a restart) sees the key.
    let saved = std::fs::read_to_string(&pr).unwrap();
    assert!(
        saved.contains("reg aa ") && saved.contains("res 1 "),
        "{saved}"
    );
    let st = cachalot_iscsi::scsi::pr::PrState::load(&pr);
    assert_eq!(st.regs.len(), 1);
    let keys = a.cmd(&[0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0], 64, &[]);
    assert_eq!(&keys.data[8..16], &0xAAu64.to_be_bytes());
    let _ = std::fs::remove_dir_all(dir);
}
