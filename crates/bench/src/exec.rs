//! Running external programs (sysbench, fio, mariadbd, losetup, mkfs, ...).
//!
//! Invariants:
//! - Every child runs in its own process group with stdin from /dev/null, so Ctrl-C
//!   on the terminal reaches only us; we stop children ourselves.
//! - Waits poll the child and, in [`Mode::Interruptible`], the interrupt flag: on a
//!   signal the child's whole group is terminated (SIGTERM, then SIGKILL) and the
//!   wait returns [`crate::signals::Interrupted`]. [`Mode::Cleanup`] ignores the
//!   flag (teardown must finish even after Ctrl-C) but still honours the timeout.
//! - A child is never left running when a wait returns an error.
//! - Failure messages are one line: what was run, the exit status and the most
//!   telling line of its output.

use crate::signals;
use anyhow::{anyhow, bail, Context, Result};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Whether a wait gives up when a signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Interruptible,
    Cleanup,
}

const POLL: Duration = Duration::from_millis(50);

/// Captured result of a finished command.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The most telling line for an error message: the last line mentioning an
    /// error in stderr, else stderr's last line, else stdout's.
    pub fn summary(&self) -> String {
        summary_line(&self.stderr)
            .or_else(|| summary_line(&self.stdout))
            .unwrap_or_else(|| "no output".into())
    }
}

/// Pick the line most likely to explain a failure.
pub fn summary_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let wanted = [
        "FATAL", "ERROR", "error", "Error", "failed", "cannot", "Can't",
    ];
    lines
        .iter()
        .rev()
        .find(|l| wanted.iter().any(|w| l.contains(w)))
        .or_else(|| lines.last())
        .map(|l| l.to_string())
}

/// Describe an exit status: "exit 3" or "killed by signal 9".
pub fn status_text(s: &ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".into(),
    }
}

/// Spawn `cmd` in its own process group with stdin from /dev/null.
pub fn spawn(cmd: &mut Command) -> Result<Child> {
    cmd.process_group(0).stdin(Stdio::null());
    cmd.spawn()
        .with_context(|| format!("cannot run {}", program_name(cmd)))
}

fn program_name(cmd: &Command) -> String {
    cmd.get_program().to_string_lossy().into_owned()
}

/// Send `sig` to the process group led by `child` (it was spawned as a leader).
pub fn signal_group(child: &Child, sig: libc::c_int) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain kill(2) on a process group we created.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// Stop a child and its group: SIGTERM, up to `grace` to exit, then SIGKILL.
/// Always reaps the child.
pub fn terminate(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    signal_group(child, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            signal_group(child, libc::SIGKILL); // stragglers in the group
            return;
        }
        std::thread::sleep(POLL);
    }
    kill(child);
}

/// SIGKILL a child's group and reap it.
pub fn kill(child: &mut Child) {
    signal_group(child, libc::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}

/// Wait for `child` to exit within `timeout`. On a signal (interruptible mode)
/// or a timeout the child's group is terminated and an error returned.
pub fn wait(child: &mut Child, what: &str, timeout: Duration, mode: Mode) -> Result<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = child
            .try_wait()
            .with_context(|| format!("waiting for {what}"))?
        {
            return Ok(st);
        }
        if mode == Mode::Interruptible {
            if let Err(e) = signals::check() {
                terminate(child, Duration::from_secs(3));
                return Err(e);
            }
        }
        if Instant::now() >= deadline {
            terminate(child, Duration::from_secs(3));
            bail!("{what}: timed out after {} s", timeout.as_secs());
        }
        std::thread::sleep(POLL);
    }
}

/// Run `cmd` to completion, capturing stdout and stderr.
pub fn run(cmd: &mut Command, what: &str, timeout: Duration, mode: Mode) -> Result<Output> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn(cmd).with_context(|| what.to_string())?;
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let status = wait(&mut child, what, timeout, mode);
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(Output {
        status: status?,
        stdout,
        stderr,
    })
}

/// Like [`run`], but a non-zero exit is an error naming `what` and the output's
/// most telling line.
pub fn run_ok(cmd: &mut Command, what: &str, timeout: Duration, mode: Mode) -> Result<Output> {
    let out = run(cmd, what, timeout, mode)?;
    if !out.status.success() {
        return Err(anyhow!(
            "{what} failed ({}): {}",
            status_text(&out.status),
            out.summary()
        ));
    }
    Ok(out)
}

fn reader<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn captures_output_and_status() {
        let o = run(
            &mut sh("echo out; echo err >&2; exit 3"),
            "t",
            Duration::from_secs(10),
            Mode::Cleanup,
        )
        .unwrap();
        assert_eq!(o.stdout, "out\n");
        assert_eq!(o.stderr, "err\n");
        assert_eq!(o.status.code(), Some(3));
    }

    #[test]
    fn run_ok_reports_the_telling_line() {
        let e = run_ok(
            &mut sh("echo 'FATAL: no table' ; echo trailing; exit 1"),
            "sysbench prepare",
            Duration::from_secs(10),
            Mode::Cleanup,
        )
        .unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "sysbench prepare failed (exit 1): FATAL: no table"
        );
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let t0 = Instant::now();
        let e = run(
            &mut sh("sleep 30 & sleep 30; wait"),
            "sleeper",
            Duration::from_millis(300),
            Mode::Cleanup,
        )
        .unwrap_err();
        assert!(format!("{e}").contains("timed out"), "{e}");
        // The pipes closed, so the grandchild (same group) was killed too.
        assert!(t0.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn missing_program_is_a_clear_error() {
        let e = run(
            &mut Command::new("/nonexistent/prog"),
            "prog",
            Duration::from_secs(1),
            Mode::Cleanup,
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot run /nonexistent/prog"),
            "{e:#}"
        );
    }

    #[test]
    fn summary_prefers_error_lines() {
        assert_eq!(summary_line("a\nERROR x\nb\n").unwrap(), "ERROR x");
        assert_eq!(summary_line("a\nb\n").unwrap(), "b");
        assert!(summary_line("  \n").is_none());
    }
}
