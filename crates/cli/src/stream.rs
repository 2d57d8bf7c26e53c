//! `cachalot send [-i @SNAP] FS@SNAP > FILE`, `cachalot send -t TOKEN > FILE`,
//! `cachalot receive [-F] [-s] FS < FILE` and `cachalot receive -A FS`:
//! the snapshot stream travels between stdout/stdin and the daemon over the unix
//! socket as frames (see `cachalot_daemon::frames`).
//!
//! Why the terminal checks: a binary stream on a terminal is never what the user
//! meant (zfs refuses it too), and a receive waiting on a terminal looks hung.
//! Progress goes to stderr only when stderr is a terminal, so scripts and pipes
//! see nothing but the stream and the one-line error on failure.

use crate::commands::{CmdResult, Ctx};
use cachalot_daemon::format_size;
use cachalot_daemon::frames::{FrameReader, FrameWriter};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use std::io::{IsTerminal, Read, Write};
use std::time::{Duration, Instant};

/// Bytes moved per read or write.
const BUF: usize = 1 << 20;

#[derive(Args, Debug)]
pub struct SendArgs {
    /// Send only the changes since this older snapshot (@SNAP or FS@SNAP)
    #[arg(short = 'i', value_name = "@SNAP", conflicts_with = "token")]
    pub incremental: Option<String>,
    /// Send the rest of an interrupted stream, from the target's resume token
    /// (`cachalot get -H -o value receive_resume_token FS` there)
    #[arg(short = 't', value_name = "TOKEN", conflicts_with = "snapshot")]
    pub token: Option<String>,
    /// The snapshot to send (FS@SNAP)
    #[arg(required_unless_present = "token")]
    pub snapshot: Option<String>,
}

#[derive(Args, Debug)]
pub struct ReceiveArgs {
    /// Replace an existing filesystem (full stream) or discard its changes since
    /// the stream's base snapshot (incremental stream)
    #[arg(short = 'F')]
    pub force: bool,
    /// Resumable: if the stream is cut, keep what arrived and a resume token
    /// (the `receive_resume_token` property) for `send -t`
    #[arg(short = 's', conflicts_with = "abort")]
    pub resumable: bool,
    /// Abort: discard the partially received state of FS
    #[arg(short = 'A')]
    pub abort: bool,
    /// The filesystem to create or update
    pub name: String,
}

/// A progress bar on stderr if it is a terminal, else nothing.
struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
}

impl Progress {
    fn new(verb: &str, total: Option<u64>) -> Progress {
        let start = Instant::now();
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None, start };
        }
        let bar = match total {
            Some(t) if t > 0 => {
                let b = ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr());
                b.set_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:30}] {bytes} of about {total_bytes}, {bytes_per_sec}, {elapsed}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                b
            }
            _ => {
                let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                b.set_style(
                    ProgressStyle::with_template(
                        "{msg} {spinner} {bytes}, {bytes_per_sec}, {elapsed}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                b
            }
        };
        bar.set_message(verb.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bar: Some(bar),
            start,
        }
    }

    fn set(&self, bytes: u64) {
        if let Some(b) = &self.bar {
            // The estimate is only an estimate: never show more than 100%.
            if b.length().is_some_and(|l| bytes > l) {
                b.set_length(bytes);
            }
            b.set_position(bytes);
        }
    }

    /// Clear the bar; on a terminal, print one summary line.
    fn done(self, what: &str, bytes: u64) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
            let secs = self.start.elapsed().as_secs_f64().max(1e-6);
            eprintln!(
                "{what}: {} in {:.1}s ({}/s)",
                format_size(bytes),
                secs,
                format_size((bytes as f64 / secs) as u64)
            );
        }
    }

    fn abandon(self) {
        if let Some(b) = self.bar {
            b.abandon();
        }
    }
}

pub fn send(ctx: &mut Ctx, a: SendArgs) -> CmdResult {
    let stdout = std::io::stdout();
    if stdout.is_terminal() {
        return Err(
            "send: refusing to write a stream to a terminal: redirect it (cachalot send FS@SNAP > FILE)"
                .into(),
        );
    }
    let client = ctx.client()?;
    let go = client.call(
        "stream.send",
        json!({ "snapshot": a.snapshot, "from": a.incremental, "token": a.token }),
    )?;
    let what = a
        .snapshot
        .clone()
        .unwrap_or_else(|| "the rest of the stream".into());
    let progress = Progress::new("send", go["estimated_bytes"].as_u64());
    let mut out = stdout.lock();
    let mut frames = FrameReader::new(client.reader());
    let mut buf = vec![0u8; BUF];
    let copied: Result<(), String> = loop {
        match frames.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                if let Err(e) = out.write_all(&buf[..n]) {
                    break Err(format!("send: cannot write the stream to stdout: {e}"));
                }
                progress.set(frames.total());
            }
            Err(e) => break Err(format!("send: lost the stream from the daemon: {e}")),
        }
    };
    let total = frames.total();
    let outcome = copied
        .and_then(|()| {
            out.flush()
                .map_err(|e| format!("send: cannot write the stream to stdout: {e}"))
        })
        .and_then(|()| client.read_response().map_err(|e| format!("send: {e}")));
    match outcome {
        Ok(_) => {
            progress.done(&format!("sent {what}"), total);
            Ok(())
        }
        Err(e) => {
            progress.abandon();
            Err(e)
        }
    }
}

pub fn receive(ctx: &mut Ctx, a: ReceiveArgs) -> CmdResult {
    if a.abort {
        let r = ctx
            .client()?
            .call("stream.receive", json!({ "name": a.name, "abort": true }))?;
        if let Some(m) = r["message"].as_str() {
            eprintln!("{m}");
        }
        return Ok(());
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(
            "receive: refusing to read a stream from a terminal: redirect it (cachalot receive FS < FILE)"
                .into(),
        );
    }
    // A regular file on stdin tells the total for the progress bar.
    let total = std::fs::metadata("/proc/self/fd/0")
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let client = ctx.client()?;
    client.call(
        "stream.receive",
        json!({ "name": a.name, "force": a.force, "resumable": a.resumable }),
    )?;
    let progress = Progress::new("receive", total);
    let mut input = stdin.lock();
    let mut buf = vec![0u8; BUF];
    let mut sent = 0u64;
    let mut frames = FrameWriter::new(client.writer());
    // A write error means the daemon stopped reading: it refused the stream and
    // its reason is waiting in the response, which is read below either way.
    let copied: Result<(), String> = loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break frames.finish().map(drop).map_err(|e| e.to_string()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Cut the connection so the daemon discards what it has; its
                // answer does not matter then.
                let _ = frames.into_inner().shutdown(std::net::Shutdown::Write);
                let _ = client.read_response();
                progress.abandon();
                return Err(format!("receive: cannot read the stream from stdin: {e}"));
            }
        };
        if let Err(e) = frames.write_all(&buf[..n]) {
            break Err(e.to_string());
        }
        sent += n as u64;
        progress.set(sent);
    };
    match (client.read_response(), copied) {
        (Ok(r), Ok(())) => {
            // A stale partial state replaced by this stream: one line, always.
            if let Some(d) = r["discarded"].as_str() {
                eprintln!("receive: {d}");
            }
            let snap = r["snapshot"].as_str().unwrap_or("the snapshot").to_string();
            progress.done(&format!("received {snap}"), sent);
            Ok(())
        }
        (Ok(_), Err(e)) => {
            progress.abandon();
            Err(format!("receive: {e}"))
        }
        (Err(e), _) => {
            progress.abandon();
            Err(e)
        }
    }
}
