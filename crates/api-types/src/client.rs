//! Client side of the unix-socket protocol, used by the CLI.
//!
//! Invariants: every failure (cannot connect, daemon closed the connection, garbage
//! reply, error reply) comes back as a one-line message; nothing here panics.

use crate::wire::{one_line, Request, Response};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Default daemon home: `$CACHALOT_HOME`, else /var/lib/cachalot.
pub fn default_home() -> PathBuf {
    match std::env::var_os("CACHALOT_HOME") {
        Some(h) if !h.is_empty() => PathBuf::from(h),
        _ => PathBuf::from("/var/lib/cachalot"),
    }
}

/// Socket to use when none is given: `$CACHALOT_SOCKET`, else `<home>/cachalot.sock`.
pub fn default_socket() -> PathBuf {
    match std::env::var_os("CACHALOT_SOCKET") {
        Some(s) if !s.is_empty() => PathBuf::from(s),
        _ => default_home().join("cachalot.sock"),
    }
}

/// A connection to the daemon.
pub struct Client {
    path: PathBuf,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    pub fn connect(path: &Path) -> Result<Client, String> {
        let s = UnixStream::connect(path).map_err(|e| {
            format!(
                "cannot connect to the cachalot daemon at {}: {} (is 'cachalot serve' running?)",
                path.display(),
                io_msg(&e)
            )
        })?;
        let r = s
            .try_clone()
            .map_err(|e| format!("{}: {}", path.display(), io_msg(&e)))?;
        Ok(Client {
            path: path.to_path_buf(),
            writer: s,
            reader: BufReader::new(r),
        })
    }

    /// Send one typed request (see [`crate::requests`]): the one definition of
    /// each request, shared with the REST routes.
    pub fn send<R: crate::requests::Op>(&mut self, r: &R) -> Result<Value, String> {
        self.call(R::OP, r.args())
    }

    /// Send one request; the result, or the daemon's (or a transport) error message.
    pub fn call(&mut self, op: &str, args: Value) -> Result<Value, String> {
        self.send_request(op, args)?;
        self.read_response()
    }

    fn send_request(&mut self, op: &str, args: Value) -> Result<(), String> {
        let req = Request::new(op, args);
        let mut line = serde_json::to_vec(&req).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let lost = |e: std::io::Error| {
            format!(
                "lost the connection to the daemon at {}: {}",
                self.path.display(),
                io_msg(&e)
            )
        };
        self.writer.write_all(&line).map_err(lost)?;
        self.writer.flush().map_err(lost)
    }

    /// The connection's buffered read side. After a streaming op's "go" answer
    /// (`stream.send`, `stream.receive`, see the daemon's `frames`) the frames are read
    /// from here or written to [`writer`](Self::writer), and the outcome is then
    /// taken with [`read_response`](Self::read_response).
    pub fn reader(&mut self) -> &mut BufReader<UnixStream> {
        &mut self.reader
    }

    /// The connection's write side (for a streaming op's frames).
    pub fn writer(&mut self) -> &mut UnixStream {
        &mut self.writer
    }

    /// Read one response line: the result, or the error message.
    pub fn read_response(&mut self) -> Result<Value, String> {
        let mut resp = String::new();
        let n = self.reader.read_line(&mut resp).map_err(|e| {
            format!(
                "lost the connection to the daemon at {}: {}",
                self.path.display(),
                io_msg(&e)
            )
        })?;
        if n == 0 {
            return Err(format!(
                "the daemon at {} closed the connection without answering",
                self.path.display()
            ));
        }
        let r: Response = serde_json::from_str(&resp)
            .map_err(|e| format!("malformed reply from the daemon: {e}"))?;
        r.into_result().map_err(|e| one_line(&e))
    }
}

fn io_msg(e: &std::io::Error) -> String {
    // "No such file or directory (os error 2)" -> without the errno suffix.
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
