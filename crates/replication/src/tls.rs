//! TLS for the peer link: TLS 1.3 only (rustls with the ring provider), each
//! appliance with a self-signed key made once (rcgen), and the peer's
//! certificate pinned by fingerprint instead of trusted through a CA.
//!
//! Invariants:
//! - Both sides present a certificate (mutual TLS), and the handshake's
//!   signatures are verified against it, so a peer holds the private key of the
//!   certificate it shows. Which fingerprints are trusted is decided by the
//!   caller right after the handshake ([`TlsStream::peer_fingerprint`]), before
//!   a byte of the protocol is read or written: an unpaired key may only pair.
//! - Every socket has read and write timeouts: a cut link ends a transfer with
//!   an error instead of hanging it (the resumable receive keeps what arrived).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

pub use rustls::ServerConfig;

/// This appliance's replication key: a self-signed certificate and its key.
#[derive(Clone)]
pub struct Identity {
    pub cert_der: Vec<u8>,
    /// PKCS#8.
    pub key_der: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({})", fingerprint(&self.cert_der))
    }
}

impl Identity {
    /// A new key pair and self-signed certificate (ECDSA P-256).
    pub fn generate() -> Result<Identity, String> {
        let ck = rcgen::generate_simple_self_signed(vec!["cachalot-replication".to_string()])
            .map_err(|e| format!("cannot make a replication key: {e}"))?;
        Ok(Identity {
            cert_der: ck.cert.der().to_vec(),
            key_der: ck.signing_key.serialize_der(),
        })
    }

    pub fn fingerprint(&self) -> String {
        fingerprint(&self.cert_der)
    }
}

/// The fingerprint of a certificate: BLAKE3 of its DER, in hex.
pub fn fingerprint(cert_der: &[u8]) -> String {
    blake3::hash(cert_der).to_hex().to_string()
}

/// Accepts any certificate whose holder proves its key in the handshake; the
/// pin is checked by the caller on the fingerprint (see the module invariants).
#[derive(Debug)]
struct ProvenKey {
    provider: Arc<CryptoProvider>,
}

impl ProvenKey {
    fn tls12(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(m, c, d, &self.provider.signature_verification_algorithms)
    }

    fn tls13(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(m, c, d, &self.provider.signature_verification_algorithms)
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl ServerCertVerifier for ProvenKey {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls12(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls13(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes()
    }
}

impl ClientCertVerifier for ProvenKey {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls12(m, c, d)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.tls13(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn key(id: &Identity) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(id.key_der.clone()))
}

/// The server side's TLS configuration (client certificates required).
pub fn server_config(id: &Identity) -> Result<Arc<rustls::ServerConfig>, String> {
    let p = provider();
    let cfg = rustls::ServerConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_client_cert_verifier(Arc::new(ProvenKey { provider: p }))
        .with_single_cert(vec![CertificateDer::from(id.cert_der.clone())], key(id))
        .map_err(|e| format!("TLS setup: the replication key is unusable: {e}"))?;
    Ok(Arc::new(cfg))
}

/// The client side's TLS configuration (presents our certificate).
pub fn client_config(id: &Identity) -> Result<Arc<rustls::ClientConfig>, String> {
    let p = provider();
    let cfg = rustls::ClientConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS setup: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ProvenKey { provider: p }))
        .with_client_auth_cert(vec![CertificateDer::from(id.cert_der.clone())], key(id))
        .map_err(|e| format!("TLS setup: the replication key is unusable: {e}"))?;
    Ok(Arc::new(cfg))
}

/// A TLS connection over TCP, handshake done.
///
/// Why not rustls's `StreamOwned`: it swallows a failed socket write after
/// buffering the data, and it reads while it is blocked writing, so with
/// socket timeouts a dead link costs many timeouts before an error shows.
/// Here a write returns only once its bytes reached the socket, and every
/// socket timeout is an error at once.
pub struct TlsStream {
    conn: rustls::Connection,
    sock: TcpStream,
    /// A socket timeout happened: the link is dead, and every later call
    /// fails at once instead of waiting out another timeout.
    stalled: bool,
    peer_fp: String,
    peer_addr: String,
}

fn set_timeouts(tcp: &TcpStream, timeout: Duration) -> Result<(), String> {
    tcp.set_read_timeout(Some(timeout))
        .and_then(|()| tcp.set_write_timeout(Some(timeout)))
        .and_then(|()| tcp.set_nodelay(true))
        .map_err(|e| format!("socket setup: {e}"))
}

fn handshake<C, D>(conn: &mut C, tcp: &mut TcpStream) -> Result<(), String>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
{
    while conn.is_handshaking() {
        conn.complete_io(tcp).map_err(|e| {
            let s = e.to_string();
            if s.contains("timed out") || s.contains("temporarily unavailable") {
                "no answer to the TLS handshake (timed out)".to_string()
            } else {
                format!("the TLS handshake failed ({s}): not a cachalot replication peer")
            }
        })?;
    }
    Ok(())
}

fn peer_fp(certs: Option<&[CertificateDer<'static>]>) -> Result<String, String> {
    certs
        .and_then(|c| c.first())
        .map(|c| fingerprint(c.as_ref()))
        .ok_or_else(|| "the peer presented no certificate".to_string())
}

impl TlsStream {
    /// Connect to `addr` (HOST:PORT) and complete the handshake.
    pub fn connect(addr: &str, id: &Identity, timeout: Duration) -> Result<TlsStream, String> {
        let sa = addr
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve '{addr}': {e}"))?
            .next()
            .ok_or_else(|| format!("cannot resolve '{addr}'"))?;
        let mut tcp = TcpStream::connect_timeout(&sa, timeout)
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        set_timeouts(&tcp, timeout)?;
        let name = ServerName::try_from("cachalot-replication").expect("valid name");
        let mut conn = rustls::ClientConnection::new(client_config(id)?, name)
            .map_err(|e| format!("TLS setup: {e}"))?;
        handshake(&mut conn, &mut tcp).map_err(|e| format!("{addr}: {e}"))?;
        let peer_fp = peer_fp(conn.peer_certificates())?;
        Ok(TlsStream {
            conn: conn.into(),
            sock: tcp,
            stalled: false,
            peer_fp,
            peer_addr: addr.to_string(),
        })
    }

    /// Complete the server side of the handshake on an accepted connection.
    pub fn accept(
        mut tcp: TcpStream,
        config: Arc<rustls::ServerConfig>,
        timeout: Duration,
    ) -> Result<TlsStream, String> {
        let peer_addr = tcp
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        set_timeouts(&tcp, timeout)?;
        let mut conn =
            rustls::ServerConnection::new(config).map_err(|e| format!("TLS setup: {e}"))?;
        handshake(&mut conn, &mut tcp).map_err(|e| format!("{peer_addr}: {e}"))?;
        let peer_fp = peer_fp(conn.peer_certificates())?;
        Ok(TlsStream {
            conn: conn.into(),
            sock: tcp,
            stalled: false,
            peer_fp,
            peer_addr,
        })
    }

    /// The fingerprint of the certificate the peer proved it holds.
    pub fn peer_fingerprint(&self) -> &str {
        &self.peer_fp
    }

    pub fn peer_addr(&self) -> &str {
        &self.peer_addr
    }

    /// Change the socket timeouts (a long transfer may want a longer one).
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), String> {
        set_timeouts(&self.sock, timeout)
    }

    /// Fail at once on a link that already timed out.
    fn check(&self) -> std::io::Result<()> {
        if self.stalled {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the connection timed out earlier",
            ));
        }
        Ok(())
    }

    /// Remember a socket timeout (see `stalled`).
    fn note<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            use std::io::ErrorKind::{TimedOut, WouldBlock};
            self.stalled |= matches!(e.kind(), WouldBlock | TimedOut);
        }
        r
    }

    /// Write out everything rustls holds for the socket.
    fn push(&mut self) -> std::io::Result<()> {
        while self.conn.wants_write() {
            let r = self.conn.write_tls(&mut self.sock);
            if self.note(r)? == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

/// A TLS error after the handshake, in words. A record that fails its
/// integrity check here, or the peer's alert that one of ours failed there,
/// means the link corrupted data in transit: TLS refused it before any of it
/// was used, and the message says so (the protocol's own checks never see it).
fn tls_error(e: rustls::Error) -> std::io::Error {
    use rustls::{AlertDescription, Error};
    let msg = match &e {
        Error::DecryptError | Error::InvalidMessage(_) => format!(
            "the data from the peer was {CORRUPTED_IN_TRANSIT}: a TLS record failed its integrity check ({e}); none of it was used"
        ),
        Error::AlertReceived(AlertDescription::BadRecordMac | AlertDescription::DecodeError) => {
            format!(
                "the peer received our data {CORRUPTED_IN_TRANSIT}: a TLS record failed its integrity check there ({e}); none of it was used"
            )
        }
        _ => return std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    };
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

/// How [`tls_error`] names damage on the link.
pub const CORRUPTED_IN_TRANSIT: &str = "corrupted in transit";

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::ErrorKind;
        self.check()?;
        loop {
            match self.conn.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => return r,
            }
            // No plaintext yet: send what is pending, then wait for records.
            // A peer that closed its end may have said why first (an ERROR
            // frame, a TLS alert): a failed send does not stop the read,
            // unless the link is dead.
            let pushed = self.push();
            if self.stalled {
                pushed?;
            }
            let r = self.conn.read_tls(&mut self.sock);
            if self.note(r)? == 0 {
                // TCP closed: rustls reports whether it was a clean close.
                self.conn.process_new_packets().map_err(tls_error)?;
                return self.conn.reader().read(buf).map_err(|e| match e.kind() {
                    ErrorKind::WouldBlock => ErrorKind::UnexpectedEof.into(),
                    _ => e,
                });
            }
            if let Err(e) = self.conn.process_new_packets() {
                let _ = self.push(); // the alert, if any
                return Err(tls_error(e));
            }
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.check()?;
        let n = self.conn.writer().write(buf)?;
        self.push()?;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.check()?;
        self.conn.writer().flush()?;
        self.push()
    }
}
