//! The peer link over real loopback TCP: mutual TLS with the fingerprints each
//! side proved, greetings, requests, streams (with a bandwidth limit and a
//! sender that gives up), and peers that do not speak the protocol.

use cachalot_replication::link::Link;
use cachalot_replication::tls::{self, Identity, TlsStream};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

/// A server thread that accepts one connection and runs `f` on its link.
fn serve_one(
    id: Identity,
    f: impl FnOnce(TlsStream) + Send + 'static,
) -> (String, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = thread::spawn(move || {
        let (tcp, _) = l.accept().unwrap();
        let tls = TlsStream::accept(tcp, tls::server_config(&id).unwrap(), T).unwrap();
        f(tls);
    });
    (addr, h)
}

#[test]
fn mutual_tls_requests_and_streams() {
    let (a, b) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    assert_ne!(a.fingerprint(), b.fingerprint());
    let (afp, bfp) = (a.fingerprint(), b.fingerprint());
    let afp2 = afp.clone();
    let (addr, h) = serve_one(b.clone(), move |tls| {
        let mut link = Link::new(tls);
        assert_eq!(
            link.tls().peer_fingerprint(),
            afp2,
            "server sees the client's key"
        );
        let hello = link.greet(&bfp).unwrap();
        assert_eq!(hello.peer, afp2);
        let req = link.read_request().unwrap().unwrap();
        assert_eq!(req["op"], "echo");
        link.reply(&json!({ "echo": req["x"] })).unwrap();
        // A stream, read whole.
        let req = link.read_request().unwrap().unwrap();
        assert_eq!(req["op"], "receive");
        link.reply(&json!(null)).unwrap();
        let mut got = Vec::new();
        let mut r = link.data_reader();
        r.read_to_end(&mut got).unwrap();
        assert!(r.ended());
        assert_eq!(got.len(), 3 << 20);
        assert!(got.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
        link.reply(&json!({ "bytes": got.len() })).unwrap();
        // A stream the sender gives up: an error, never a short EOF.
        link.read_request().unwrap().unwrap();
        link.reply(&json!(null)).unwrap();
        let mut r = link.data_reader();
        let e = r.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("bad block"), "{e}");
        link.error("refused: the stream was given up").unwrap();
        assert!(link.read_request().unwrap().is_none(), "clean close");
    });
    let tls = TlsStream::connect(&addr, &a, T).unwrap();
    assert_eq!(
        tls.peer_fingerprint(),
        b.fingerprint(),
        "client sees the server's key"
    );
    let mut link = Link::new(tls);
    assert_eq!(link.greet(&afp).unwrap().peer, b.fingerprint());
    let r = link.request(&json!({ "op": "echo", "x": 42 })).unwrap();
    assert_eq!(r["echo"], 42);

    link.request(&json!({ "op": "receive" })).unwrap();
    let data: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
    let t0 = Instant::now();
    let mut w = link.data_writer(Some(8 << 20));
    for c in data.chunks(100_000) {
        w.write_all(c).unwrap();
    }
    assert_eq!(w.finish().unwrap(), data.len() as u64);
    let spent = t0.elapsed();
    assert!(
        spent >= Duration::from_millis(300),
        "3 MiB at 8 MiB/s took only {spent:?}"
    );
    assert_eq!(link.read_reply().unwrap()["bytes"], 3 << 20);

    link.request(&json!({ "op": "receive" })).unwrap();
    let mut w = link.data_writer(None);
    w.write_all(&[1; 1000]).unwrap();
    w.abort("send: bad block at offset 0").unwrap();
    let e = link.read_reply().unwrap_err();
    assert!(e.contains("given up"), "{e}");
    drop(link);
    h.join().unwrap();
}

#[test]
fn a_peer_that_is_not_tls_or_not_ours_is_refused_in_one_line() {
    let id = Identity::generate().unwrap();
    // A plain TCP server that answers like an HTTP server.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = s.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n");
        thread::sleep(Duration::from_millis(200));
    });
    let e = TlsStream::connect(&addr, &id, T).err().expect("refused");
    assert!(e.contains("not a cachalot replication peer"), "{e}");
    assert!(!e.contains('\n'));
    h.join().unwrap();

    // A TLS peer that greets in another protocol.
    let other = Identity::generate().unwrap();
    let (addr, h) = serve_one(other, |mut tls| {
        // Bytes that are not our greeting.
        let _ = tls.write_all(b"SSH-2.0-OpenSSH_9.6\r\n");
        let _ = tls.flush();
        thread::sleep(Duration::from_millis(200));
    });
    let mut link = Link::new(TlsStream::connect(&addr, &id, T).unwrap());
    let e = link.greet(&id.fingerprint()).unwrap_err();
    assert!(
        e.contains("does not speak the cachalot replication protocol"),
        "{e}"
    );
    h.join().unwrap();
}

#[test]
fn a_peer_that_stops_reading_fails_the_writer_within_its_timeout() {
    let (a, b) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = thread::spawn(move || {
        let (tcp, _) = l.accept().unwrap();
        let _tls = TlsStream::accept(tcp, tls::server_config(&b).unwrap(), T).unwrap();
        // Alive, but reading nothing: a link that stopped moving.
        thread::sleep(Duration::from_secs(6));
    });
    let mut link = Link::new(TlsStream::connect(&addr, &a, Duration::from_secs(1)).unwrap());
    let t0 = Instant::now();
    let mut w = link.data_writer(None);
    let chunk = vec![7u8; 1 << 20];
    let e = (0..512)
        .try_for_each(|_| w.write_all(&chunk))
        .expect_err("512 MiB into a peer that reads nothing");
    let spent = t0.elapsed();
    assert!(e.to_string().contains("stopped moving"), "{e}");
    assert!(spent < Duration::from_secs(4), "noticed after {spent:?}");
    // The link is known dead: what follows fails at once, not after another
    // timeout (1 s). The bound stays under that timeout but leaves a loaded
    // machine room to schedule the thread (500 ms left half of it).
    let t1 = Instant::now();
    assert!(link.error("giving up").is_err());
    assert!(link.read_refusal().is_none());
    assert!(
        t1.elapsed() < Duration::from_millis(900),
        "{:?}",
        t1.elapsed()
    );
    drop(link);
    h.join().unwrap();
}
