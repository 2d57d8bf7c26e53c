//! HTTPS for the API listener. TLS is on whenever `serve --http` names an address
//! other hosts can reach (the CLI decides, see `cachalot serve`), or when the user
//! gives a certificate. Without one, a self-signed certificate is generated at the
//! first start into `HOME/tls/` and kept: clients pin `HOME/tls/cert.pem`.
//!
//! Invariants:
//! - The private key file is created 0600 and never logged; the certificate is
//!   0644 (it is public).
//! - A handshake happens off the accept loop, bounded by [`HANDSHAKE_TIMEOUT`], so
//!   a slow or silent client never blocks others; a failed handshake (a plain HTTP
//!   request, say) drops that connection only.
//! - The crypto provider is passed explicitly (ring), so nothing depends on a
//!   process-wide default.

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Longest a client may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate and key to serve.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsOpts {
    /// PEM certificate chain; None: `HOME/tls/cert.pem`, generated if missing.
    pub cert: Option<PathBuf>,
    /// PEM private key; given with `cert`.
    pub key: Option<PathBuf>,
}

fn write_new(path: &Path, data: &[u8], mode: u32) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    f.write_all(data)?;
    f.sync_all()?;
    Ok(())
}

/// `HOME/tls/cert.pem` and `key.pem`, generated (self-signed, for localhost, the
/// loopback addresses and this host's name) if they do not exist yet.
pub fn default_cert(home: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = home.join("tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let h = h.trim();
        if !h.is_empty() && h != "localhost" {
            names.push(h.to_string());
        }
    }
    let ck = rcgen::generate_simple_self_signed(names)
        .map_err(|e| anyhow::anyhow!("cannot generate a TLS certificate: {e}"))?;
    let _ = std::fs::remove_file(&cert);
    let _ = std::fs::remove_file(&key);
    write_new(&key, ck.signing_key.serialize_pem().as_bytes(), 0o600)?;
    write_new(&cert, ck.cert.pem().as_bytes(), 0o644)?;
    eprintln!(
        "cachalot: generated a self-signed TLS certificate: {}",
        cert.display()
    );
    Ok((cert, key))
}

/// The server configuration for `opts` (files read and checked now, so a bad
/// certificate fails the start).
pub fn server_config(home: &Path, opts: &TlsOpts) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let (cert, key) = match (&opts.cert, &opts.key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        (None, None) => default_cert(home)?,
        _ => anyhow::bail!("give both --tls-cert and --tls-key, or neither"),
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .map_err(|e| anyhow::anyhow!("{}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{}: {e}", cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{}: no certificate in the file", cert.display());
    }
    let key_der = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| anyhow::anyhow!("{}: no usable private key: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| anyhow::anyhow!("{}: {e}", cert.display()))?;
    Ok(Arc::new(cfg))
}

/// A listener whose connections are TLS streams, for `axum::serve`.
pub struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        SocketAddr,
    )>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accept on `tcp` and run each handshake in its own task.
    pub fn new(tcp: TcpListener, cfg: Arc<rustls::ServerConfig>) -> io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
        tokio::spawn(async move {
            loop {
                let (sock, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(_) => {
                        // Out of descriptors, say: wait rather than spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    if let Ok(Ok(tls)) =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(sock)).await
                    {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener { rx, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task never ends while the runtime runs.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}
