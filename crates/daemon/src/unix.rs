//! The unix-socket transport: one JSON request per line in, one JSON response per
//! line out, each connection on its own thread.
//!
//! Invariants:
//! - The socket is created with mode 0600 (umask set around `bind`, then chmod), so
//!   only its owner (root) can connect.
//! - An existing path is replaced only if it is a socket nobody answers on (stale);
//!   a live daemon or a non-socket file makes binding fail.
//! - A request line longer than [`MAX_LINE`] gets an error and the connection closes;
//!   nothing a client sends can panic or stop the accept loop.

use crate::daemon::{is_stream_op, Daemon};
use crate::proto::{parse_request, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

/// Longest request line accepted (data_b64 writes make lines long).
pub const MAX_LINE: usize = 64 << 20;

/// Bind the daemon socket at `path` with mode 0600, removing a stale socket.
pub fn bind_socket(path: &Path) -> anyhow::Result<UnixListener> {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_socket() {
            anyhow::bail!("{}: exists and is not a socket", path.display());
        }
        if UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "{}: another cachalot daemon is already listening there",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot remove stale socket: {e}", path.display()))?;
    }
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.is_dir() {
            anyhow::bail!("{}: directory does not exist", dir.display());
        }
    }
    // SAFETY: umask only changes the process file mode mask; restored right after.
    let old = unsafe { libc::umask(0o177) };
    let res = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let l = res.map_err(|e| anyhow::anyhow!("{}: cannot bind: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(l)
}

/// Accept connections forever, one thread each.
pub fn serve_unix(listener: UnixListener, daemon: Arc<Daemon>) {
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                let d = daemon.clone();
                let spawned = std::thread::Builder::new()
                    .name("cachalot-conn".into())
                    .spawn(move || handle_conn(stream, &d));
                if let Err(e) = spawned {
                    eprintln!("cachalot: cannot start a connection thread: {e}");
                }
            }
            Err(e) => {
                eprintln!("cachalot: accept failed: {e}");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

/// Write one response line (the streaming ops use it too).
pub(crate) fn write_response(w: &mut dyn Write, r: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(r)
        .unwrap_or_else(|_| br#"{"ok":false,"error":"cannot encode the response"}"#.to_vec());
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

/// Serve one connection until EOF or an I/O error.
pub fn handle_conn(stream: UnixStream, daemon: &Daemon) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = match reader
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(n) => n,
            Err(_) => return,
        };
        if n == 0 {
            return;
        }
        if buf.len() > MAX_LINE {
            let _ = write_response(
                &mut writer,
                &Response::err(format!("request longer than {MAX_LINE} bytes")),
            );
            return;
        }
        let resp = match std::str::from_utf8(&buf) {
            Err(_) => Response::err("malformed request: not UTF-8"),
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => match parse_request(line.trim()) {
                Ok(req) if is_stream_op(&req.op) => {
                    // The connection carries a byte stream now; it ends with it.
                    daemon.handle_stream(&req, &mut reader, &mut writer);
                    return;
                }
                Ok(req) => daemon.handle(&req),
                Err(e) => Response::err(e),
            },
        };
        if write_response(&mut writer, &resp).is_err() {
            return;
        }
    }
}
