//! Talking to Cachalot about a target's dataset (`--dataset NAME=POOL/FS`): check
//! it exists, set its compression, read its compressratio. Done through the
//! `cachalot` CLI (this same binary), so the bench needs no daemon client code and
//! uses the daemon only when a dataset is named.
//!
//! Invariants: each call is one CLI command with a timeout; failures carry the
//! command and its one-line error.

use crate::exec::{self, Mode};
use anyhow::Result;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Run a `cachalot` subcommand (this same binary) and return its stdout.
pub fn cachalot(args: &[&str]) -> Result<String> {
    // If the binary was replaced while we run (an upgrade, a rebuild), the kernel
    // still lets us execute the running image through /proc/self/exe.
    let exe = std::env::current_exe()
        .ok()
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    let mut c = Command::new(exe);
    c.args(args);
    let what = format!("cachalot {}", args.join(" "));
    Ok(exec::run_ok(&mut c, &what, Duration::from_secs(120), Mode::Interruptible)?.stdout)
}

/// Error unless the dataset exists.
pub fn check(ds: &str) -> Result<()> {
    cachalot(&["get", "-H", "-p", "-o", "value", "compression", ds]).map(|_| ())
}

/// Set the dataset's compression (applies to data written from now on).
pub fn set_compression(ds: &str, compression: &str) -> Result<()> {
    cachalot(&["set", &format!("compression={compression}"), ds]).map(|_| ())
}

/// The dataset's compressratio as Cachalot reports it ("1.52").
pub fn compressratio(ds: &str) -> Result<String> {
    Ok(
        cachalot(&["get", "-H", "-p", "-o", "value", "compressratio", ds])?
            .trim()
            .to_string(),
    )
}
