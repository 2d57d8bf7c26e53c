//! `send` and `receive` over the unix socket: the two ops whose payload is a byte
//! stream rather than JSON (framing in [`crate::frames`]).
//!
//! Conversation, after the request line:
//! - `stream.send {snapshot, from?}`: the daemon answers one JSON line (the "go",
//!   with `estimated_bytes` for progress, or the error), then the stream as frames,
//!   then one JSON line with the outcome (a send that fails half-way ends its
//!   frames early and says why there).
//! - `stream.send {token}` (`send -t`): the same, for the rest of an interrupted
//!   stream from a target's resume token.
//! - `stream.receive {name, abort: true}` (`receive -A`): one JSON line, no frames.
//! - `stream.receive {name, force, resumable?}`: the daemon checks the target and answers one
//!   JSON line (go or error) before the client sends a byte, then reads frames and
//!   answers one JSON line with the outcome. On an error it answers at once and
//!   closes the connection without reading the rest (a hostile or huge stream is
//!   never drained).
//!
//! Invariants: a panic inside the engine is caught and reported like any error; a
//! client that goes away mid-stream makes the send fail or the receive see a cut-off
//! stream, which the engine discards whole (nothing of it is left behind).

use super::snapshots::split_snapshot_name;
use super::{guarded, log, se, Daemon};
use crate::frames::{FrameReader, FrameWriter};
use crate::proto::{pool_of, validate_dataset_name, Args, Request, Response};
use crate::unix::write_response;
use serde_json::{json, Value};
use std::io::{BufRead, Write};

/// The streaming ops and the arguments each accepts (unix socket only).
pub const STREAM_OPS: &[(&str, &[&str])] = &[
    ("stream.send", &["snapshot", "from", "token"]),
    ("stream.receive", &["name", "force", "resumable", "abort"]),
];

/// True if `op` is answered by [`Daemon::handle_stream`] rather than `handle`.
pub fn is_stream_op(op: &str) -> bool {
    STREAM_OPS.iter().any(|(n, _)| *n == op)
}

/// A send checked and ready to run (see [`Daemon::prepare_send`]).
pub(crate) struct PreparedSend {
    pub store: std::sync::Arc<cachalot_datasets::Store>,
    pub snapshot: String,
    /// The incremental base as `FS@SNAP`.
    pub from: Option<String>,
    /// About how many stream bytes it produces (for progress only).
    pub estimate: u64,
}

impl Daemon {
    /// Check a send of `snapshot` (incremental from `from`: `@A`, `A` or `FS@A`)
    /// before a byte is sent: both snapshots exist, in one filesystem, in order.
    /// Shared by `stream.send` and the REST API's send job.
    pub(crate) fn prepare_send(
        &self,
        snapshot: String,
        from: Option<String>,
    ) -> Result<PreparedSend, String> {
        let (fs, _) = split_snapshot_name(&snapshot)?;
        let from = match from {
            None => None,
            Some(f) => Some(normalize_from(fs, &f)?),
        };
        let store = self.store(pool_of(fs))?;
        let estimate = estimate_send_bytes(&store, fs, &snapshot, from.as_deref())?;
        Ok(PreparedSend {
            store,
            snapshot,
            from,
            estimate,
        })
    }

    /// Serve one streaming request on a connection; the connection is closed by
    /// the caller afterwards. I/O errors towards a departed client end it quietly.
    pub fn handle_stream(&self, req: &Request, input: &mut dyn BufRead, out: &mut dyn Write) {
        let allowed = STREAM_OPS
            .iter()
            .find(|(n, _)| *n == req.op)
            .map(|(_, a)| *a)
            .unwrap_or(&[]);
        let args = match Args::new(&req.op, &req.args, allowed) {
            Ok(a) => a,
            Err(e) => {
                let _ = write_response(out, &Response::err(e));
                return;
            }
        };
        if self.is_shutting_down() {
            let _ = write_response(out, &Response::err("the daemon is shutting down"));
            return;
        }
        let _ = match req.op.as_str() {
            "stream.send" => self.stream_send(&args, out),
            _ => self.stream_receive(&args, input, out),
        };
    }

    fn stream_send(&self, a: &Args, out: &mut dyn Write) -> std::io::Result<()> {
        match a.opt_str("token") {
            Ok(Some(token)) => return self.stream_send_resume(&token, out),
            Ok(None) => {}
            Err(e) => return write_response(out, &Response::err(e)),
        }
        let prepared = guarded("send", || {
            self.prepare_send(a.str("snapshot")?, a.opt_str("from")?)
        });
        let PreparedSend {
            store,
            snapshot: snap,
            from,
            estimate,
        } = match prepared {
            Ok(p) => p,
            Err(e) => return write_response(out, &Response::err(e)),
        };
        write_response(out, &Response::ok(json!({ "estimated_bytes": estimate })))?;
        let mut frames = FrameWriter::new(&mut *out);
        let sent = guarded("send", || {
            store
                .send(&snap, from.as_deref(), &mut frames, &mut |_| {})
                .map_err(se)
        });
        frames.finish()?;
        match sent {
            Ok(stats) => {
                log(format!(
                    "sent '{snap}'{}: {} bytes",
                    from.map(|f| format!(" from '{f}'")).unwrap_or_default(),
                    stats.bytes
                ));
                write_response(out, &Response::ok(json!(stats)))
            }
            Err(e) => write_response(out, &Response::err(e)),
        }
    }

    /// `send -t TOKEN`: the token names the source's snapshot (and its pool).
    fn stream_send_resume(&self, token: &str, out: &mut dyn Write) -> std::io::Result<()> {
        let prepared = guarded("send", || {
            let t = cachalot_datasets::resume::ResumeToken::decode(token).map_err(se)?;
            let store = self.store(pool_of(&t.snapshot))?;
            Ok((store, t.snapshot))
        });
        let (store, snap) = match prepared {
            Ok(p) => p,
            Err(e) => return write_response(out, &Response::err(e)),
        };
        write_response(out, &Response::ok(json!({ "estimated_bytes": null })))?;
        let mut frames = FrameWriter::new(&mut *out);
        let sent = guarded("send", || {
            store
                .send_resume(token, &mut frames, &mut |_| {})
                .map_err(se)
        });
        frames.finish()?;
        match sent {
            Ok(stats) => {
                log(format!("sent the rest of '{snap}': {} bytes", stats.bytes));
                write_response(out, &Response::ok(json!(stats)))
            }
            Err(e) => write_response(out, &Response::err(e)),
        }
    }

    fn stream_receive(
        &self,
        a: &Args,
        input: &mut dyn BufRead,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let prepared = guarded("receive", || {
            let name = a.str("name")?;
            validate_dataset_name(&name)?;
            let force = a.bool("force")?;
            let resumable = a.bool("resumable")?;
            let abort = a.bool("abort")?;
            let store = self.store(pool_of(&name))?;
            if name == store.name() {
                return Err(format!(
                    "receive: '{name}' is the pool's root dataset: receive into a child (e.g. {name}/copy)"
                ));
            }
            Ok((store, name, force, resumable, abort))
        });
        let (store, name, force, resumable, abort) = match prepared {
            Ok(p) => p,
            Err(e) => return write_response(out, &Response::err(e)),
        };
        if abort {
            let done = guarded("receive", || store.abort_receive(&name).map_err(se));
            return match done {
                Ok(msg) => {
                    log(msg.clone());
                    write_response(out, &Response::ok(json!({ "message": msg })))
                }
                Err(e) => write_response(out, &Response::err(e)),
            };
        }
        write_response(out, &Response::ok(Value::Null))?;
        // A receive may destroy snapshots of a served volume (-F, or a full stream
        // replacing it): stop serving them first. The head follows by name.
        self.stop_serving(|n| {
            n.strip_prefix(name.as_str())
                .is_some_and(|r| r.starts_with('@'))
        });
        let mut frames = FrameReader::new(input);
        let received = guarded("receive", || {
            let opts = cachalot_datasets::ReceiveOpts { force, resumable };
            store
                .receive_with(&name, &mut frames, &opts, &mut |_| {})
                .map_err(se)
        });
        match received {
            Ok(outcome) => {
                let snapshot = outcome.snapshot;
                if let Some(d) = &outcome.discarded {
                    log(format!("receive into '{name}': {d}"));
                }
                // The stream's END record was verified; what may follow it up to
                // the end frame is not part of it.
                if let Err(e) = frames.drain() {
                    log(format!("receive into '{name}': after the stream: {e}"));
                }
                log(format!("received '{snapshot}': {} bytes", frames.total()));
                write_response(
                    out,
                    &Response::ok(json!({
                        "snapshot": snapshot,
                        "bytes": frames.total(),
                        "discarded": outcome.discarded,
                    })),
                )
            }
            Err(e) => write_response(out, &Response::err(e)),
        }
    }
}

/// `@A`, `A` or `FS@A` as the base of an incremental send of `fs`: always `FS@A`.
fn normalize_from(fs: &str, from: &str) -> Result<String, String> {
    let full = match from.split_once('@') {
        Some(("", snap)) => format!("{fs}@{snap}"),
        Some(_) => from.to_string(),
        None => format!("{fs}@{from}"),
    };
    let (from_fs, _) = split_snapshot_name(&full)?;
    if from_fs != fs {
        return Err(format!(
            "send -i: '{from}' is not a snapshot of '{fs}' (incremental sends stay within one filesystem)"
        ));
    }
    Ok(full)
}

/// About how many stream bytes a send will produce (for progress only): the
/// snapshot's referenced bytes, or for an incremental the bytes written by the
/// snapshots after the base up to and including the target.
fn estimate_send_bytes(
    store: &cachalot_datasets::Store,
    fs: &str,
    snap: &str,
    from: Option<&str>,
) -> Result<u64, String> {
    let snaps = store.list_snapshots(Some(fs)).map_err(se)?;
    let to = snaps
        .iter()
        .position(|s| s.name == snap)
        .ok_or_else(|| format!("snapshot '{snap}' does not exist"))?;
    match from {
        None => Ok(snaps[to].referenced),
        Some(f) => {
            let base = snaps
                .iter()
                .position(|s| s.name == f)
                .ok_or_else(|| format!("snapshot '{f}' does not exist"))?;
            if base >= to {
                return Err(format!("send -i: '{f}' is not older than '{snap}'"));
            }
            Ok(snaps[base + 1..=to].iter().map(|s| s.written).sum())
        }
    }
}
