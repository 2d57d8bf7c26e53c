//! `cachalot mount FS [PATH]` and `cachalot unmount [-f] FS` (zfs style). Without
//! arguments, `mount` lists what is mounted.
//!
//! Invariant: the path sent to the daemon is absolute (the daemon's working
//! directory is not the caller's).

use crate::commands::{absolute, CmdResult, Ctx};
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Filesystem dataset (none: list mounted filesystems)
    pub name: Option<String>,
    /// Mount point (default: the dataset's mountpoint property)
    pub path: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct UnmountArgs {
    /// Unmount even if busy (open files lose access)
    #[arg(short = 'f')]
    pub force: bool,
    pub name: String,
}

pub fn mount(ctx: &mut Ctx, a: MountArgs) -> CmdResult {
    let Some(name) = a.name else {
        let list = ctx.call("fs.mounts", json!({}))?;
        for m in list.as_array().into_iter().flatten() {
            println!(
                "{}\t{}",
                m["name"].as_str().unwrap_or("-"),
                m["path"].as_str().unwrap_or("-")
            );
        }
        return Ok(());
    };
    let mut args = json!({ "name": name });
    if let Some(p) = a.path {
        args["path"] = json!(absolute(&p)?.to_string_lossy());
    }
    ctx.call("fs.mount", args).map(drop)
}

pub fn unmount(ctx: &mut Ctx, a: UnmountArgs) -> CmdResult {
    ctx.call("fs.unmount", json!({ "name": a.name, "force": a.force }))
        .map(drop)
}
